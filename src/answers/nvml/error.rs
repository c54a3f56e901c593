//! NVML's return codes as gpudoctor records them: every `nvmlReturn_t` of nvml.h by its
//! snake_case name (`gpu_is_lost`), plus the states only gpudoctor knows (`not_recorded`,
//! `unreadable`). A failed reading is `{"error": {"kind": ..., "message": ...}}` in
//! `nvml.json`; captures made before kinds were kept hold `{"error": "text"}`, read as kind
//! `unknown` with that text.

use serde::{Deserialize, Deserializer, Serialize};

/// `nvmlReturn_t` (nvml.h; the values are nvml-wrapper-sys 0.10's `nvmlReturn_enum_*`), plus
/// gpudoctor's own states. A name this build does not know reads as `unknown` (`serde(other)`),
/// so a capture from a newer gpudoctor still loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvmlErrorKind {
    /// `NVML_ERROR_UNINITIALIZED` (1).
    Uninitialized,
    /// `NVML_ERROR_INVALID_ARGUMENT` (2).
    InvalidArgument,
    /// `NVML_ERROR_NOT_SUPPORTED` (3): normally a `Reading::NotSupported`, never an error; kept
    /// for calls where "not supported" is itself the fault (a handle, init).
    NotSupported,
    /// `NVML_ERROR_NO_PERMISSION` (4): nvml.h counts devices in `nvmlDeviceGetCount_v2` that
    /// `nvmlDeviceGetHandleByIndex_v2` then refuses with it (device cgroups).
    NoPermission,
    /// `NVML_ERROR_ALREADY_INITIALIZED` (5, deprecated).
    AlreadyInitialized,
    /// `NVML_ERROR_NOT_FOUND` (6).
    NotFound,
    /// `NVML_ERROR_INSUFFICIENT_SIZE` (7).
    InsufficientSize,
    /// `NVML_ERROR_INSUFFICIENT_POWER` (8): aux power cables.
    InsufficientPower,
    /// `NVML_ERROR_DRIVER_NOT_LOADED` (9).
    DriverNotLoaded,
    /// `NVML_ERROR_TIMEOUT` (10), and gpudoctor's own probe budget running out.
    Timeout,
    /// `NVML_ERROR_IRQ_ISSUE` (11).
    IrqIssue,
    /// `NVML_ERROR_LIBRARY_NOT_FOUND` (12) or the shared object failed to load.
    LibraryNotFound,
    /// `NVML_ERROR_FUNCTION_NOT_FOUND` (13).
    FunctionNotFound,
    /// `NVML_ERROR_CORRUPTED_INFOROM` (14).
    CorruptedInforom,
    /// `NVML_ERROR_GPU_IS_LOST` (15): fallen off the bus (pairs with XID 79).
    GpuIsLost,
    /// `NVML_ERROR_RESET_REQUIRED` (16).
    ResetRequired,
    /// `NVML_ERROR_OPERATING_SYSTEM` (17): blocked by the OS or cgroups.
    OperatingSystem,
    /// `NVML_ERROR_LIB_RM_VERSION_MISMATCH` (18): user-space library ≠ kernel module.
    LibRmVersionMismatch,
    /// `NVML_ERROR_IN_USE` (19).
    InUse,
    /// `NVML_ERROR_MEMORY` (20).
    Memory,
    /// `NVML_ERROR_NO_DATA` (21).
    NoData,
    /// `NVML_ERROR_VGPU_ECC_NOT_SUPPORTED` (22).
    VgpuEccNotSupported,
    /// `NVML_ERROR_INSUFFICIENT_RESOURCES` (23).
    InsufficientResources,
    /// `NVML_ERROR_FREQ_NOT_SUPPORTED` (24).
    FreqNotSupported,
    /// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH` (25): a versioned struct the driver does not know.
    ArgumentVersionMismatch,
    /// `NVML_ERROR_DEPRECATED` (26).
    Deprecated,
    /// `NVML_ERROR_NOT_READY` (27).
    NotReady,
    /// `NVML_ERROR_GPU_NOT_FOUND` (28).
    GpuNotFound,
    /// `NVML_ERROR_INVALID_STATE` (29).
    InvalidState,
    /// `NVML_ERROR_RESET_TYPE_NOT_SUPPORTED` (30).
    ResetTypeNotSupported,
    /// The capture holds no NVML answer.
    NotRecorded,
    /// The recorded answer could not be read or parsed.
    Unreadable,
    /// `NVML_ERROR_UNKNOWN` (999), a code this build does not know, or an older capture's text.
    #[serde(other)]
    Unknown,
}

/// Every kind with its `nvmlReturn_t` value (gpudoctor-only kinds have none).
const CODES: &[(NvmlErrorKind, u32)] = &[
    (NvmlErrorKind::Uninitialized, 1),
    (NvmlErrorKind::InvalidArgument, 2),
    (NvmlErrorKind::NotSupported, 3),
    (NvmlErrorKind::NoPermission, 4),
    (NvmlErrorKind::AlreadyInitialized, 5),
    (NvmlErrorKind::NotFound, 6),
    (NvmlErrorKind::InsufficientSize, 7),
    (NvmlErrorKind::InsufficientPower, 8),
    (NvmlErrorKind::DriverNotLoaded, 9),
    (NvmlErrorKind::Timeout, 10),
    (NvmlErrorKind::IrqIssue, 11),
    (NvmlErrorKind::LibraryNotFound, 12),
    (NvmlErrorKind::FunctionNotFound, 13),
    (NvmlErrorKind::CorruptedInforom, 14),
    (NvmlErrorKind::GpuIsLost, 15),
    (NvmlErrorKind::ResetRequired, 16),
    (NvmlErrorKind::OperatingSystem, 17),
    (NvmlErrorKind::LibRmVersionMismatch, 18),
    (NvmlErrorKind::InUse, 19),
    (NvmlErrorKind::Memory, 20),
    (NvmlErrorKind::NoData, 21),
    (NvmlErrorKind::VgpuEccNotSupported, 22),
    (NvmlErrorKind::InsufficientResources, 23),
    (NvmlErrorKind::FreqNotSupported, 24),
    (NvmlErrorKind::ArgumentVersionMismatch, 25),
    (NvmlErrorKind::Deprecated, 26),
    (NvmlErrorKind::NotReady, 27),
    (NvmlErrorKind::GpuNotFound, 28),
    (NvmlErrorKind::InvalidState, 29),
    (NvmlErrorKind::ResetTypeNotSupported, 30),
    (NvmlErrorKind::Unknown, 999),
];

impl NvmlErrorKind {
    /// The kind of an `nvmlReturn_t`; `None` for `NVML_SUCCESS` and codes nvml.h does not list.
    pub fn from_code(code: u32) -> Option<NvmlErrorKind> {
        CODES.iter().find(|(_, c)| *c == code).map(|(k, _)| *k)
    }

    /// The `nvmlReturn_t` value; `None` for gpudoctor's own kinds.
    pub fn code(self) -> Option<u32> {
        CODES.iter().find(|(k, _)| *k == self).map(|(_, c)| *c)
    }

    /// The snake_case name used in `nvml.json` (`lib_rm_version_mismatch`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into())
    }

    /// The process may not use the GPU: `NO_PERMISSION`, or `OPERATING_SYSTEM` ("blocked by
    /// the operating system/cgroups", nvml-wrapper's text for code 17).
    pub fn is_permission(self) -> bool {
        matches!(
            self,
            NvmlErrorKind::NoPermission | NvmlErrorKind::OperatingSystem
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            NvmlErrorKind::LibraryNotFound => "nvml library not found",
            NvmlErrorKind::DriverNotLoaded => "nvidia driver not loaded",
            NvmlErrorKind::LibRmVersionMismatch => "nvml library and kernel module versions differ",
            NvmlErrorKind::NoPermission => "no permission to use the gpu",
            NvmlErrorKind::OperatingSystem => "blocked by the operating system (cgroups)",
            NvmlErrorKind::GpuIsLost => "gpu is lost",
            NvmlErrorKind::ResetRequired => "gpu reset required",
            NvmlErrorKind::InsufficientPower => "insufficient power",
            NvmlErrorKind::CorruptedInforom => "corrupted inforom",
            NvmlErrorKind::IrqIssue => "interrupt problem",
            NvmlErrorKind::Timeout => "nvml did not answer in time",
            NvmlErrorKind::NotRecorded => "no nvml answer recorded",
            NvmlErrorKind::Unreadable => "recorded nvml answer unreadable",
            NvmlErrorKind::NotSupported => "not supported",
            NvmlErrorKind::InUse => "gpu in use",
            NvmlErrorKind::Memory => "nvml out of memory",
            NvmlErrorKind::NotReady => "gpu not ready",
            NvmlErrorKind::GpuNotFound => "gpu not found",
            NvmlErrorKind::InvalidState => "gpu in an invalid state",
            NvmlErrorKind::FunctionNotFound => "nvml function not found (old driver)",
            NvmlErrorKind::ArgumentVersionMismatch => "nvml struct version not supported",
            NvmlErrorKind::Uninitialized
            | NvmlErrorKind::InvalidArgument
            | NvmlErrorKind::AlreadyInitialized
            | NvmlErrorKind::NotFound
            | NvmlErrorKind::InsufficientSize
            | NvmlErrorKind::NoData
            | NvmlErrorKind::VgpuEccNotSupported
            | NvmlErrorKind::InsufficientResources
            | NvmlErrorKind::FreqNotSupported
            | NvmlErrorKind::Deprecated
            | NvmlErrorKind::ResetTypeNotSupported
            | NvmlErrorKind::Unknown => "unknown nvml error",
        }
    }
}

/// Why an NVML call failed: the kind (what checks decide on) and the library's text (what an
/// operator reads).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmlError {
    pub kind: NvmlErrorKind,
    pub message: String,
}

impl NvmlError {
    pub fn new(kind: NvmlErrorKind, message: impl Into<String>) -> Self {
        NvmlError {
            kind,
            message: message.into(),
        }
    }
}

/// `gpu_is_lost: GPU is lost`; an older capture's bare text as it was.
impl std::fmt::Display for NvmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.kind, self.message.is_empty()) {
            (NvmlErrorKind::Unknown, false) => f.write_str(&self.message),
            (kind, true) => f.write_str(&kind.name()),
            (kind, false) => write!(f, "{}: {}", kind.name(), self.message),
        }
    }
}

/// `{"kind": .., "message": ..}`, or an older capture's bare text (kind `unknown`).
impl<'de> Deserialize<'de> for NvmlError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Full {
                kind: NvmlErrorKind,
                #[serde(default)]
                message: String,
            },
        }
        Ok(match Repr::deserialize(deserializer)? {
            Repr::Text(message) => NvmlError::new(NvmlErrorKind::Unknown, message),
            Repr::Full { kind, message } => NvmlError::new(kind, message),
        })
    }
}

/// The name of an `nvmlReturn_t` for a fabric `status`: `success`, a kind's name, or the
/// number itself when nvml.h (as this build knows it) does not list it.
pub fn return_name(code: u32) -> String {
    if code == 0 {
        return "success".into();
    }
    match NvmlErrorKind::from_code(code) {
        Some(kind) => kind.name(),
        None => code.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_by_name() {
        for (kind, code) in CODES {
            assert_eq!(NvmlErrorKind::from_code(*code), Some(*kind));
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(serde_json::from_str::<NvmlErrorKind>(&json).unwrap(), *kind);
        }
        assert_eq!(NvmlErrorKind::GpuIsLost.name(), "gpu_is_lost");
        assert_eq!(NvmlErrorKind::from_code(0), None);
        assert_eq!(return_name(0), "success");
        assert_eq!(return_name(15), "gpu_is_lost");
        // Codes past this build's header are shown by number, not folded into "unknown".
        assert_eq!(return_name(42), "42");
    }

    #[test]
    fn old_and_new_error_forms_read() {
        let old: NvmlError = serde_json::from_str(r#""Unknown Error""#).unwrap();
        assert_eq!(old.kind, NvmlErrorKind::Unknown);
        assert_eq!(old.message, "Unknown Error");
        let new: NvmlError =
            serde_json::from_str(r#"{"kind": "gpu_is_lost", "message": "GPU is lost"}"#).unwrap();
        assert_eq!(new.kind, NvmlErrorKind::GpuIsLost);
        // A kind a later gpudoctor added still loads.
        let later: NvmlError = serde_json::from_str(r#"{"kind": "gpu_on_fire"}"#).unwrap();
        assert_eq!(later.kind, NvmlErrorKind::Unknown);
    }
}
