//! What the probes answer, as types: NVML's inventory and readings ([`nvml`]), the kubelet's
//! pod-resources lists ([`pod_resources`]), an NCCL run's log ([`nccl`], with the streaming
//! parser the live runner and replay share), the CUDA probe's events ([`cuda`]), perftest's
//! output ([`perftest`]), a `--sample` baseline ([`baseline`]), and the errors a fact family
//! reports ([`FactError`], [`ParseError`]). The `Source` trait (floor 2, beside this module)
//! returns these; `facts/` and `checks/` read them. Pure types and parsers: no I/O, no policy,
//! nothing from a floor above (docs/architecture.md).

pub mod baseline;
pub mod cuda;
pub mod fs_stat;
pub mod gpudirect;
pub mod history;
pub mod nccl;
pub mod nvml;
pub mod perftest;
pub mod pod_resources;

use thiserror::Error;

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
