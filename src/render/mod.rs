//! Renderers turn a [`Report`](crate::report::Report) into text. They see nothing else: no
//! source, no facts, so a saved report renders the same as a fresh one. The human formats
//! (table, Markdown, NPD line, topology table) take node text through [`sanitize`] first; JSON
//! and Prometheus keep their own escaping.

pub mod json;
pub mod junit;
pub mod markdown;
pub mod npd;
pub mod npd_conditions;
pub mod prometheus;
pub mod sanitize;
pub mod table;
pub mod topo;
