//! One NVML session for the whole run. Without persistence mode the driver attaches each GPU
//! when a client first takes its handle and detaches them all when the last client shuts NVML
//! down (reference/gpu-health.md §1), so every `nvmlInit`/`nvmlShutdown` pair pays the
//! initialisation again: seconds per GPU, one GPU after another. A `--sample` window reads
//! NVML twice; both readings share the session that [`NvmlSession`] holds, and so does every
//! clone of the [`SourceOptions`](crate::source::SourceOptions) that carries it.
//!
//! `nvmlShutdown` runs when the session ends, in a thread of its own: a driver that never
//! returns from it costs at most [`SHUTDOWN_WAIT`] (or the probe budget, if shorter), never the
//! exit. A failed or unanswered init is remembered too, so a second reading does not wait on a
//! hung driver again.

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::InitFlags;

use super::error_kind;
use crate::answers::nvml::{NvmlError, NvmlErrorKind};
use crate::source::host_lib::HostLibrary;

/// Longest the end of the run waits for `nvmlShutdown`.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The run's NVML session: opened at the first reading, shut down (bounded) when the last clone
/// goes. `Default` is a session of its own, not yet open.
#[derive(Clone, Default)]
pub struct NvmlSession(Arc<Held>);

impl std::fmt::Debug for NvmlSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*self.0.lock() {
            State::Closed => "closed",
            State::Open(_) => "open",
            State::Failed(_) => "failed",
        };
        f.debug_tuple("NvmlSession").field(&state).finish()
    }
}

#[derive(Default)]
struct Held(Mutex<State>);

#[derive(Default)]
enum State {
    #[default]
    Closed,
    Open(Open),
    /// Init failed or did not answer: every later reading gets the same answer at once.
    Failed(NvmlError),
}

struct Open {
    /// The library it was opened from (`None`: the loader's `libnvidia-ml.so.1`).
    library: Option<String>,
    nvml: Arc<Nvml>,
    shutdown_wait: Duration,
}

/// What init and the system-level calls gave.
pub struct System {
    pub nvml: Arc<Nvml>,
    /// How long `nvmlInit` took, when this call opened the session.
    pub init_ms: Option<u64>,
    pub driver_version: Option<String>,
    pub nvml_version: Option<String>,
    pub cuda_driver_version: Option<i32>,
    pub device_count: u32,
}

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl NvmlSession {
    /// The session's NVML (opened from `lib` on first use) and its system-level answers, each
    /// step under `budget`. An error is init's, to report.
    pub fn system(&self, lib: Option<HostLibrary>, budget: Duration) -> Result<System, NvmlError> {
        let mut state = self.0.lock();
        let library = lib.as_ref().map(|l| l.shown().to_string());
        let reuse = match &*state {
            State::Failed(error) => return Err(error.clone()),
            State::Open(open) if open.library == library => Some(Arc::clone(&open.nvml)),
            _ => None,
        };
        let opened = reuse.is_none();
        let result = in_thread(budget, move || {
            let started = std::time::Instant::now();
            let (nvml, init_ms) = match reuse {
                Some(nvml) => (nvml, None),
                None => {
                    let nvml = Arc::new(init_blocking(lib)?);
                    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    (nvml, Some(ms))
                }
            };
            read_system(nvml, init_ms)
        });
        match &result {
            Ok(system) if opened => {
                let previous = std::mem::replace(
                    &mut *state,
                    State::Open(Open {
                        library,
                        nvml: Arc::clone(&system.nvml),
                        shutdown_wait: budget.min(SHUTDOWN_WAIT),
                    }),
                );
                drop(state);
                if let State::Open(previous) = previous {
                    shut_down(previous);
                }
            }
            Ok(_) => {}
            Err(error) if opened => *state = State::Failed(error.clone()),
            Err(_) => {}
        }
        result
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let state = std::mem::take(&mut *self.lock());
        if let State::Open(open) = state {
            shut_down(open);
        }
    }
}

/// Drop the session's `Nvml` (its `Drop` calls `nvmlShutdown`) in a thread of its own and wait
/// at most its shutdown budget. A worker left hung inside NVML still holds a clone: then this
/// drop is not the last and shuts nothing down (the process exit ends it).
fn shut_down(open: Open) {
    let (tx, rx) = mpsc::channel();
    let nvml = open.nvml;
    let spawned = thread::Builder::new()
        .name("nvml-shutdown".into())
        .spawn(move || {
            drop(nvml);
            let _ = tx.send(());
        });
    if spawned.is_ok() {
        // Unanswered by then: leave it; the exit ends the thread.
        let _ = rx.recv_timeout(open.shutdown_wait);
    }
}

/// Run `work` in a thread of its own, waiting at most `budget`.
fn in_thread<T: Send + 'static>(
    budget: Duration,
    work: impl FnOnce() -> Result<T, NvmlError> + Send + 'static,
) -> Result<T, NvmlError> {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("nvml-init".into())
        .spawn(move || {
            let _ = tx.send(work());
        });
    if let Err(err) = spawned {
        return Err(NvmlError::new(
            NvmlErrorKind::Unknown,
            format!("could not start the nvml probe: {err}"),
        ));
    }
    match rx.recv_timeout(budget) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(NvmlError::new(
            NvmlErrorKind::Timeout,
            format!("nvml did not answer within {} s", budget.as_secs_f32()),
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(NvmlError::new(
            NvmlErrorKind::Unknown,
            "the nvml probe stopped without an answer",
        )),
    }
}

fn init_blocking(lib: Option<HostLibrary>) -> Result<Nvml, NvmlError> {
    let mut builder = Nvml::builder();
    // NO_GPUS: a node whose GPUs all fell off the bus still initialises, so the count check can
    // name what is missing instead of one opaque init error.
    builder.flags(InitFlags::NO_GPUS);
    if let Some(lib) = &lib {
        builder.lib_path(OsStr::new(lib.path()));
    }
    // The loader's message names the path it opened: for a library found under the root that is
    // a /proc/self/fd path, so say which file it is.
    builder.init().map_err(|err| {
        let message = match &lib {
            Some(lib) if lib.path() != std::path::Path::new(lib.shown()) => {
                format!("{err} (loading {})", lib.shown())
            }
            _ => err.to_string(),
        };
        NvmlError::new(error_kind(&err), message)
    })
    // Loaded: the descriptor that named the file may close (`lib` drops here).
}

fn read_system(nvml: Arc<Nvml>, init_ms: Option<u64>) -> Result<System, NvmlError> {
    let device_count = nvml
        .device_count()
        .map_err(|err| NvmlError::new(error_kind(&err), format!("device count: {err}")))?;
    Ok(System {
        driver_version: nvml.sys_driver_version().ok(),
        nvml_version: nvml.sys_nvml_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok(),
        device_count,
        nvml,
        init_ms,
    })
}
