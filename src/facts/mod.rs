//! Typed facts about a node and the pure parsers that make them.
//!
//! Each submodule has parsers (`&str -> Result<T, ParseError>`, unit-tested on literal real-format
//! text) and one `gather` function that reads its files through a [`Source`](crate::source::Source)
//! and never judges: a missing or damaged file becomes a [`FactError`] naming the path, for the
//! check to turn into an `error` result.

pub mod boot;
pub mod cdi;
pub mod cuda;
pub mod fabric_manager;
pub mod iommu;
pub mod k8s;
pub mod kubelet;
pub mod modules;
pub mod nccl;
pub mod node;
pub mod numa;
pub mod nvidia;
pub mod nvml;
pub mod pci;
pub mod pcicfg;
pub mod perftest;
pub mod rdma;
pub mod sriov;
pub mod toolkit;
pub mod topology;
pub mod xid;

use thiserror::Error;

use crate::source::FsError;

/// A value that did not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    pub fn new(message: impl Into<String>) -> Self {
        ParseError(message.into())
    }
}

/// A fact that could not be read or parsed, with the root-relative path it came from.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct FactError {
    pub path: String,
    pub message: String,
}

impl FactError {
    /// An input the kernel provides on every node of the supported kernel range, absent here: a
    /// partial capture (hand-made, cut short, recorded by something else) or a kernel older
    /// than `since`. Never evidence that the hardware lacks what the file would describe
    /// (DESIGN.md "Missing is not absent"): checks say `not read: <path> missing — ...`.
    pub fn missing(path: &str, since: &str) -> Self {
        FactError {
            path: path.into(),
            message: format!("missing — partial capture or kernel older than {since}"),
        }
    }

    /// Was this input simply not there ([`FactError::missing`])?
    pub fn is_missing(&self) -> bool {
        self.message.starts_with("missing — ")
    }

    pub fn parse(path: &str, err: ParseError) -> Self {
        FactError {
            path: path.into(),
            message: format!("unexpected content: {}", err.0),
        }
    }
}

impl From<FsError> for FactError {
    fn from(err: FsError) -> Self {
        let path = err.path().to_string();
        let full = err.to_string();
        // FsError's text starts with "<path>: "; keep only the reason.
        let message = full
            .strip_prefix(&format!("{path}: "))
            .map(str::to_string)
            .unwrap_or(full);
        FactError { path, message }
    }
}

/// Trim the trailing newline sysfs and procfs put after every value (sysfs.md §1).
pub fn trimmed(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_ascii_whitespace())
}
