//! The live NVML probe: loads `libnvidia-ml.so.1` (or `--nvml-lib`) through nvml-wrapper and
//! fills [`NvmlFacts`]. Every per-device call is kept as a [`Reading`], so one failing query or
//! one lost GPU never hides the rest (reference/gpu-health.md §1).
//!
//! NVML can hang on a wedged GPU (init waits on the driver), so [`probe`] runs in a thread and
//! gives up after the caller's budget; the thread is left behind and dies with the process.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use nvml_wrapper::bitmasks::InitFlags;
use nvml_wrapper::error::NvmlError as WrapperError;
use nvml_wrapper::{Device, Nvml};

use crate::facts::nvml::{
    NvmlDevice, NvmlError, NvmlErrorKind, NvmlFacts, Reading, normalize_bus_id,
};

/// Query NVML, giving up after `budget`.
pub fn probe(lib_path: Option<PathBuf>, budget: Duration) -> NvmlFacts {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("nvml-probe".into())
        .spawn(move || {
            let facts = collect(lib_path);
            let _ = tx.send(facts);
        });
    if let Err(err) = spawned {
        return NvmlFacts::failed(
            NvmlErrorKind::Unknown,
            format!("could not start the nvml probe: {err}"),
        );
    }
    match rx.recv_timeout(budget) {
        Ok(facts) => facts,
        Err(mpsc::RecvTimeoutError::Timeout) => NvmlFacts::failed(
            NvmlErrorKind::Timeout,
            format!("nvml did not answer within {} s", budget.as_secs_f32()),
        ),
        Err(mpsc::RecvTimeoutError::Disconnected) => NvmlFacts::failed(
            NvmlErrorKind::Unknown,
            "the nvml probe stopped without an answer",
        ),
    }
}

fn collect(lib_path: Option<PathBuf>) -> NvmlFacts {
    let mut builder = Nvml::builder();
    // NO_GPUS: a node whose GPUs all fell off the bus still initialises, so the count check can
    // name what is missing instead of one opaque init error.
    builder.flags(InitFlags::NO_GPUS);
    if let Some(path) = lib_path.as_deref() {
        builder.lib_path(OsStr::new(path));
    }
    let nvml = match builder.init() {
        Ok(nvml) => nvml,
        Err(err) => return NvmlFacts::failed(error_kind(&err), err.to_string()),
    };
    let device_count = match nvml.device_count() {
        Ok(n) => n,
        Err(err) => return NvmlFacts::failed(error_kind(&err), format!("device count: {err}")),
    };
    let devices = (0..device_count)
        .map(|index| match nvml.device_by_index(index) {
            Ok(device) => describe(index, &device),
            Err(err) => NvmlDevice {
                index,
                error: Some(to_error(&err)),
                ..NvmlDevice::default()
            },
        })
        .collect();
    NvmlFacts {
        init_error: None,
        driver_version: nvml.sys_driver_version().ok(),
        nvml_version: nvml.sys_nvml_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok(),
        device_count,
        devices,
    }
}

fn describe(index: u32, device: &Device<'_>) -> NvmlDevice {
    NvmlDevice {
        index,
        pci_bus_id: device
            .pci_info()
            .ok()
            .and_then(|p| normalize_bus_id(&p.bus_id)),
        uuid: device.uuid().ok(),
        name: device.name().ok(),
        serial: reading(device.serial()),
        minor_number: reading(device.minor_number()),
        persistence_mode: reading(device.is_in_persistent_mode()),
        error: None,
    }
}

fn reading<T>(result: Result<T, WrapperError>) -> Reading<T> {
    match result {
        Ok(v) => Reading::Value(v),
        Err(WrapperError::NotSupported) => Reading::NotSupported,
        Err(err) => Reading::Error(err.to_string()),
    }
}

fn to_error(err: &WrapperError) -> NvmlError {
    NvmlError {
        kind: error_kind(err),
        message: err.to_string(),
    }
}

/// Map nvml-wrapper's error to the kinds gpudoctor gives advice for.
pub fn error_kind(err: &WrapperError) -> NvmlErrorKind {
    match err {
        WrapperError::LibloadingError(_) | WrapperError::LibraryNotFound => {
            NvmlErrorKind::LibraryNotFound
        }
        WrapperError::FailedToLoadSymbol(_) | WrapperError::FunctionNotFound => {
            // An old library without the symbols the wrapper needs: effectively a version skew.
            NvmlErrorKind::LibRmVersionMismatch
        }
        WrapperError::DriverNotLoaded => NvmlErrorKind::DriverNotLoaded,
        WrapperError::LibRmVersionMismatch => NvmlErrorKind::LibRmVersionMismatch,
        WrapperError::NoPermission | WrapperError::OperatingSystem => NvmlErrorKind::NoPermission,
        WrapperError::GpuLost => NvmlErrorKind::GpuIsLost,
        WrapperError::ResetRequired => NvmlErrorKind::ResetRequired,
        WrapperError::InsufficientPower => NvmlErrorKind::InsufficientPower,
        WrapperError::CorruptedInfoROM => NvmlErrorKind::CorruptedInforom,
        WrapperError::Timeout => NvmlErrorKind::Timeout,
        _ => NvmlErrorKind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_library_not_found() {
        let facts = probe(
            Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")),
            Duration::from_secs(10),
        );
        let err = facts.init_error.expect("must fail");
        assert_eq!(err.kind, NvmlErrorKind::LibraryNotFound, "{}", err.message);
    }
}
