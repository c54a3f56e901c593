//! The live NVML probe: loads `libnvidia-ml.so.1` (`--nvml-lib`, or the host's found under
//! `--root`: `host_lib.rs`) through nvml-wrapper and fills [`NvmlFacts`]. Every per-device call
//! is kept as a [`Reading`] with its error kind, so one failing query or one lost GPU never
//! hides the rest (reference/gpu-health.md §1).
//!
//! Time: NVML can hang on a wedged GPU, and GPUs initialising without persistence mode take
//! seconds each, one after another. Init runs once per run in a thread of its own under the
//! budget (`session.rs`, which also bounds `nvmlShutdown`), then each GPU in a thread of its
//! own, all at once, under deadlines that scale with the GPU count while handles keep coming
//! (`workers.rs`): a GPU that has not answered by then is recorded as a `timeout` naming it
//! and where it stopped, the others keep their answers.

mod device;
mod raw;
mod session;
mod workers;

use std::time::Duration;

use nvml_wrapper::error::NvmlError as WrapperError;

use super::host_lib::HostLibrary;
use crate::answers::nvml::NvmlError;
use crate::answers::nvml::{NvmlErrorKind, NvmlFacts, Reading};

pub use session::{NvmlSession, SHUTDOWN_WAIT};
pub use workers::MAX_DEVICES;

/// Query NVML through the run's `session` (opened from `lib` under `budget` at the first
/// reading), then every GPU at once under deadlines that scale with the GPU count
/// (`workers.rs`).
pub fn probe(session: &NvmlSession, lib: Option<HostLibrary>, budget: Duration) -> NvmlFacts {
    let system = match session.system(lib, budget) {
        Ok(system) => system,
        Err(error) => {
            return NvmlFacts {
                init_error: Some(error),
                ..NvmlFacts::default()
            };
        }
    };
    let (devices, timing) = workers::probe_devices(&system, budget);
    NvmlFacts {
        init_error: None,
        driver_version: system.driver_version,
        nvml_version: system.nvml_version,
        cuda_driver_version: system.cuda_driver_version,
        device_count: system.device_count,
        devices,
        handles_ms: timing.handles_ms,
        init_ms: system.init_ms,
    }
}

/// Name each GPU process by `name_of` (the host's `/proc` under `--root`) instead of NVML.
/// `nvmlSystemGetProcessName` reads the process table of gpudoctor's own PID namespace: in a Pod
/// without `hostPID` a host pid is not there, or is some other process of the container. A pid
/// `name_of` does not know (the process ended) keeps no name rather than a wrong one.
pub fn name_processes(facts: &mut NvmlFacts, name_of: impl Fn(u32) -> Option<String>) {
    for device in &mut facts.devices {
        if let Reading::Value(list) = &mut device.compute_processes {
            for process in list {
                process.name = name_of(process.pid);
            }
        }
    }
}

/// A process's name as NVML gives it: the first argument of its command line, else `comm`
/// (a kernel thread has an empty command line). `read` reads a file under the root.
pub fn process_name(pid: u32, read: impl Fn(&str) -> Option<String>) -> Option<String> {
    let first = read(&format!("proc/{pid}/cmdline")).and_then(|cmdline| {
        let arg = cmdline.split('\0').next()?.trim().to_string();
        (!arg.is_empty()).then_some(arg)
    });
    first.or_else(|| {
        read(&format!("proc/{pid}/comm"))
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
    })
}

fn reading<T>(result: Result<T, WrapperError>) -> Reading<T> {
    match result {
        Ok(v) => Reading::Value(v),
        // A driver too old to export the function does not support the query either (a
        // pre-R525 driver has no fabric call): not supported, not an error.
        Err(
            WrapperError::NotSupported
            | WrapperError::FailedToLoadSymbol(_)
            | WrapperError::FunctionNotFound,
        ) => Reading::NotSupported,
        Err(err) => Reading::Error(to_error(&err)),
    }
}

fn to_error(err: &WrapperError) -> NvmlError {
    NvmlError::new(error_kind(err), err.to_string())
}

/// Map nvml-wrapper's error to the `nvmlReturn_t` it came from (nvml-wrapper 0.13
/// `error.rs`: `From<nvmlReturn_t> for NvmlError` and back), by kind.
pub fn error_kind(err: &WrapperError) -> NvmlErrorKind {
    match err {
        WrapperError::LibloadingError(_) | WrapperError::LibraryNotFound => {
            NvmlErrorKind::LibraryNotFound
        }
        // An old library without the symbols the wrapper needs for init: effectively a
        // version skew (readings map a missing symbol to "not supported" instead).
        WrapperError::FailedToLoadSymbol(_) => NvmlErrorKind::LibRmVersionMismatch,
        WrapperError::UnexpectedVariant(code) => {
            NvmlErrorKind::from_code(*code).unwrap_or(NvmlErrorKind::Unknown)
        }
        other => {
            // Everything else is one nvmlReturn_t: ask the wrapper for it.
            let code: u32 = clone_error(other).map(u32::from).unwrap_or(999);
            NvmlErrorKind::from_code(code).unwrap_or(NvmlErrorKind::Unknown)
        }
    }
}

/// The variants of nvml-wrapper's error that stand for one `nvmlReturn_t`, rebuilt so the
/// wrapper's own `From<NvmlError> for nvmlReturn_t` can name the code (the error is not
/// `Clone`).
#[allow(deprecated)]
fn clone_error(err: &WrapperError) -> Option<WrapperError> {
    use WrapperError::*;
    Some(match err {
        Uninitialized => Uninitialized,
        InvalidArg => InvalidArg,
        NotSupported => NotSupported,
        NoPermission => NoPermission,
        AlreadyInitialized => AlreadyInitialized,
        NotFound => NotFound,
        InsufficientSize(n) => InsufficientSize(*n),
        InsufficientPower => InsufficientPower,
        DriverNotLoaded => DriverNotLoaded,
        Timeout => Timeout,
        IrqIssue => IrqIssue,
        FunctionNotFound => FunctionNotFound,
        CorruptedInfoROM => CorruptedInfoROM,
        GpuLost => GpuLost,
        ResetRequired => ResetRequired,
        OperatingSystem => OperatingSystem,
        LibRmVersionMismatch => LibRmVersionMismatch,
        InUse => InUse,
        InsufficientMemory => InsufficientMemory,
        NoData => NoData,
        VgpuEccNotSupported => VgpuEccNotSupported,
        Unknown => Unknown,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_library_not_found() {
        let facts = probe(
            &NvmlSession::default(),
            Some(HostLibrary::named(std::path::Path::new(
                "/nonexistent/libnvidia-ml.so.1",
            ))),
            Duration::from_secs(10),
        );
        let err = facts.init_error.expect("must fail");
        assert_eq!(err.kind, NvmlErrorKind::LibraryNotFound, "{}", err.message);
    }

    #[test]
    fn processes_are_named_from_the_roots_proc() {
        let read = |rel: &str| match rel {
            "proc/7/cmdline" => Some("/usr/bin/python3\0train.py\0".to_string()),
            "proc/8/cmdline" => Some(String::new()),
            "proc/8/comm" => Some("kworker/0:1\n".to_string()),
            _ => None,
        };
        assert_eq!(process_name(7, read).as_deref(), Some("/usr/bin/python3"));
        assert_eq!(process_name(8, read).as_deref(), Some("kworker/0:1"));
        assert_eq!(process_name(9, read), None);
    }

    #[test]
    fn wrapper_errors_keep_their_return_code() {
        assert_eq!(error_kind(&WrapperError::GpuLost), NvmlErrorKind::GpuIsLost);
        assert_eq!(
            error_kind(&WrapperError::NoPermission),
            NvmlErrorKind::NoPermission
        );
        assert_eq!(
            error_kind(&WrapperError::OperatingSystem),
            NvmlErrorKind::OperatingSystem
        );
        assert_eq!(error_kind(&WrapperError::IrqIssue), NvmlErrorKind::IrqIssue);
        // Codes newer than the wrapper's enum arrive as UnexpectedVariant: kept by code.
        assert_eq!(
            error_kind(&WrapperError::UnexpectedVariant(25)),
            NvmlErrorKind::ArgumentVersionMismatch
        );
        assert_eq!(
            error_kind(&WrapperError::UnexpectedVariant(4242)),
            NvmlErrorKind::Unknown
        );
    }
}
