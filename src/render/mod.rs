//! Renderers turn a [`Report`](crate::report::Report) into text. They see nothing else: no
//! source, no facts, so a saved report renders the same as a fresh one.

pub mod json;
pub mod markdown;
pub mod npd;
pub mod prometheus;
pub mod table;
pub mod topo;
