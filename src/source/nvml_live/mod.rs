//! The live NVML probe: loads `libnvidia-ml.so.1` (`--nvml-lib`, or the host's found under
//! `--root`: `host_lib.rs`) through nvml-wrapper and
//! fills [`NvmlFacts`]. Every per-device call is kept as a [`Reading`] with its error kind, so
//! one failing query or one lost GPU never hides the rest (reference/gpu-health.md §1).
//!
//! Time: NVML can hang on a wedged GPU, and a GPU initialising without persistence mode takes
//! seconds per handle. So init runs in a thread of its own under the budget, then each GPU in a
//! thread of its own, all at once, each under the same budget counted from when they start:
//! a GPU that has not answered by then is recorded as a `timeout` naming it, the others keep
//! their answers, and the whole probe costs at most two budgets (init, then the GPUs).
//!
//! A thread blocked inside NVML cannot be killed. Each GPU's worker therefore owns an
//! `Arc<Nvml>` (nvml-wrapper's `Nvml` is `Send + Sync`, and nvml.h: "NVML is thread-safe so it
//! is safe to make simultaneous NVML calls from multiple threads"); the probe stops waiting at
//! the budget and leaves a hung worker behind, detached. `nvmlShutdown` runs when the last
//! `Arc` goes (never, for a worker that stays hung: the process exit ends it). `Device<'nvml>`
//! borrows the `Nvml`, so each worker takes its handle from its own `Arc`.

mod device;
mod raw;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::InitFlags;
use nvml_wrapper::error::NvmlError as WrapperError;

use super::host_lib::HostLibrary;
use crate::answers::nvml::{NvmlDevice, NvmlError, NvmlErrorKind, NvmlFacts, Reading};

/// Most GPUs probed. A node holds at most 16 (HGX 8, GB200 NVL trays 4); the cap only bounds a
/// nonsensical device count so a broken driver cannot make gpudoctor start thousands of threads.
const MAX_DEVICES: u32 = 64;

/// Query NVML: init under `budget`, then every GPU at once, each under `budget`.
pub fn probe(lib: Option<HostLibrary>, budget: Duration) -> NvmlFacts {
    let system = match init(lib, budget) {
        Ok(system) => system,
        Err(facts) => return facts,
    };
    let devices = probe_devices(&system, budget);
    NvmlFacts {
        init_error: None,
        driver_version: system.driver_version,
        nvml_version: system.nvml_version,
        cuda_driver_version: system.cuda_driver_version,
        device_count: system.device_count,
        devices,
    }
}

/// What init and the system-level calls gave.
struct System {
    nvml: Arc<Nvml>,
    driver_version: Option<String>,
    nvml_version: Option<String>,
    cuda_driver_version: Option<i32>,
    device_count: u32,
}

fn init(lib: Option<HostLibrary>, budget: Duration) -> Result<System, NvmlFacts> {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("nvml-init".into())
        .spawn(move || {
            let _ = tx.send(init_blocking(lib));
        });
    if let Err(err) = spawned {
        return Err(NvmlFacts::failed(
            NvmlErrorKind::Unknown,
            format!("could not start the nvml probe: {err}"),
        ));
    }
    match rx.recv_timeout(budget) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(NvmlFacts::failed(
            NvmlErrorKind::Timeout,
            format!("nvml did not answer within {} s", budget.as_secs_f32()),
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(NvmlFacts::failed(
            NvmlErrorKind::Unknown,
            "the nvml probe stopped without an answer",
        )),
    }
}

fn init_blocking(lib: Option<HostLibrary>) -> Result<System, NvmlFacts> {
    let mut builder = Nvml::builder();
    // NO_GPUS: a node whose GPUs all fell off the bus still initialises, so the count check can
    // name what is missing instead of one opaque init error.
    builder.flags(InitFlags::NO_GPUS);
    if let Some(lib) = &lib {
        builder.lib_path(OsStr::new(lib.path()));
    }
    // The loader's message names the path it opened: for a library found under the root that is
    // a /proc/self/fd path, so say which file it is.
    let nvml = builder.init().map_err(|err| {
        let message = match &lib {
            Some(lib) if lib.path() != std::path::Path::new(lib.shown()) => {
                format!("{err} (loading {})", lib.shown())
            }
            _ => err.to_string(),
        };
        NvmlFacts::failed(error_kind(&err), message)
    })?;
    // Loaded: the descriptor that named the file may close.
    drop(lib);
    let device_count = nvml
        .device_count()
        .map_err(|err| NvmlFacts::failed(error_kind(&err), format!("device count: {err}")))?;
    Ok(System {
        driver_version: nvml.sys_driver_version().ok(),
        nvml_version: nvml.sys_nvml_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok(),
        device_count,
        nvml: Arc::new(nvml),
    })
}

/// What a GPU's worker reports: who it is as soon as it knows, then everything.
enum Report {
    Identity(u32, NvmlDevice),
    Done(u32, NvmlDevice),
}

fn probe_devices(system: &System, budget: Duration) -> Vec<NvmlDevice> {
    let started = Instant::now();
    let deadline = started + budget;
    let count = system.device_count.min(MAX_DEVICES);
    let (tx, rx) = mpsc::channel::<Report>();
    let mut done: BTreeMap<u32, NvmlDevice> = BTreeMap::new();
    let mut known: BTreeMap<u32, NvmlDevice> = BTreeMap::new();
    let mut running = 0usize;
    for index in 0..count {
        let nvml = Arc::clone(&system.nvml);
        let tx = tx.clone();
        let spawned = thread::Builder::new()
            .name(format!("nvml-gpu{index}"))
            .spawn(move || {
                let started = Instant::now();
                let identity = |d: &NvmlDevice| {
                    let _ = tx.send(Report::Identity(index, d.clone()));
                };
                // A panic inside the wrapper must not read as a hang: it is this GPU's error.
                let described = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    device::describe(&nvml, index, &identity)
                }));
                let mut device = described.unwrap_or_else(|_| {
                    handle_error(
                        index,
                        NvmlError::new(NvmlErrorKind::Unknown, "the probe of this gpu crashed"),
                    )
                });
                device.probe_ms = Some(millis(started.elapsed()));
                let _ = tx.send(Report::Done(index, device));
            });
        match spawned {
            Ok(_) => running += 1,
            Err(err) => {
                done.insert(
                    index,
                    handle_error(
                        index,
                        NvmlError::new(
                            NvmlErrorKind::Unknown,
                            format!("could not start a probe thread: {err}"),
                        ),
                    ),
                );
            }
        }
    }
    drop(tx);
    while done.len() < count as usize && running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Report::Identity(index, device)) => {
                known.insert(index, device);
            }
            Ok(Report::Done(index, device)) => {
                running -= 1;
                done.insert(index, device);
            }
            Err(_) => break,
        }
    }
    let waited = millis(started.elapsed());
    for index in 0..count {
        if done.contains_key(&index) {
            continue;
        }
        // Still inside NVML at the budget: keep what it said about itself, name the hang.
        let mut device = known.remove(&index).unwrap_or(NvmlDevice {
            index,
            ..NvmlDevice::default()
        });
        device.error = Some(NvmlError::new(
            NvmlErrorKind::Timeout,
            format!(
                "gpu {index} did not answer within {} s",
                budget.as_secs_f32()
            ),
        ));
        device.probe_ms = Some(waited);
        done.insert(index, device);
    }
    for index in count..system.device_count {
        done.insert(
            index,
            handle_error(
                index,
                NvmlError::new(
                    NvmlErrorKind::Unknown,
                    format!("not probed: nvml counts more than {MAX_DEVICES} devices"),
                ),
            ),
        );
    }
    done.into_values().collect()
}

fn handle_error(index: u32, error: NvmlError) -> NvmlDevice {
    NvmlDevice {
        index,
        error: Some(error),
        ..NvmlDevice::default()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
            Some(HostLibrary::named(std::path::Path::new(
                "/nonexistent/libnvidia-ml.so.1",
            ))),
            Duration::from_secs(10),
        );
        let err = facts.init_error.expect("must fail");
        assert_eq!(err.kind, NvmlErrorKind::LibraryNotFound, "{}", err.message);
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
