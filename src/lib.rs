//! gpudoctor: walks the layers under a Kubernetes GPU workload, in the order data crosses them,
//! and reports the first that fails with evidence and a hint.
//!
//! Facts (`facts/`, read through a `source/`) → judgment (`checks/`, walked by `engine`) →
//! a `report::Report` → `render/`. See DESIGN.md in the shared docs and `docs/` in this repo.

pub mod answers;
pub mod checks;
pub mod cli;
pub mod diff;
pub mod engine;
pub mod explain;
pub mod facts;
pub mod fleet;
pub mod judge;
pub mod output;
pub mod pairs;
pub mod process;
pub mod profile;
pub mod record;
pub mod redact;
pub mod render;
pub mod report;
pub mod sample;
pub mod saved;
pub mod snapshot;
pub mod source;
pub mod text;
pub mod time;
