//! How the real driver spends time, for the timing tests: init that hangs, GPUs that initialise
//! one after another without persistence mode, one wedged GPU that stalls its siblings, an
//! `nvmlShutdown` that does not return, and a log of the session calls.
//!
//! The real driver serialises GPU initialisation under its resource-manager lock: without
//! persistence mode `nvmlDeviceGetHandleByIndex` attaches its GPU, and the next GPU waits
//! (`nvidia-smi` takes ~30 s instead of 2 s on 8×A100 without persistence, Azure aks-gpu#105).
//! A GPU stays attached while a client holds NVML open, so a second handle in the same session
//! is free; the last `nvmlShutdown` detaches them all. A GPU wedged inside the lock stalls every
//! call that needs it: the siblings wait behind it. [`DRIVER_LOCK`] stands for that lock.
//!
//! - `GPUDOCTOR_FAKE_NVML_HANG_SECS=N`: every `nvmlInit*` sleeps N seconds first;
//! - `GPUDOCTOR_FAKE_NVML_HANG_DEVICE=INDEX:SECS`: every call on GPU INDEX sleeps SECS seconds
//!   first, outside the driver lock (one hung GPU that does not stall the others);
//! - `GPUDOCTOR_FAKE_NVML_SERIAL_INIT_MS=N`: the first handle of each GPU in a session takes N ms
//!   inside the driver lock (persistence mode off), GPUs in index order: GPU i's handle waits
//!   until GPU i-1's call has answered (the order `nvidia-smi` and `cuInit` attach them in; it
//!   also makes the tests' interleaving the same every run);
//! - `GPUDOCTOR_FAKE_NVML_WEDGE_DEVICE=INDEX:SECS`: GPU INDEX answers its handle, PCI info, UUID
//!   and name (what identifies it), then its next call holds the driver lock for SECS seconds;
//!   with `SERIAL_INIT_MS` the next GPU's handle waits until it has wedged (else, on a loaded
//!   machine, a sibling could finish before the wedge and the tests would not be the same
//!   every run);
//! - `GPUDOCTOR_FAKE_NVML_SHUTDOWN_HANG_SECS=N`: `nvmlShutdown` sleeps N seconds first;
//! - `GPUDOCTOR_FAKE_NVML_CALL_LOG=FILE`: each `nvmlInit*` and `nvmlShutdown` appends a line, and
//!   so does each call nvml.h deprecates for a successor the library exports
//!   (`deprecated <name>`).

use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub const ENV_HANG_SECS: &str = "GPUDOCTOR_FAKE_NVML_HANG_SECS";
pub const ENV_HANG_DEVICE: &str = "GPUDOCTOR_FAKE_NVML_HANG_DEVICE";
pub const ENV_SERIAL_INIT_MS: &str = "GPUDOCTOR_FAKE_NVML_SERIAL_INIT_MS";
pub const ENV_WEDGE_DEVICE: &str = "GPUDOCTOR_FAKE_NVML_WEDGE_DEVICE";
pub const ENV_SHUTDOWN_HANG_SECS: &str = "GPUDOCTOR_FAKE_NVML_SHUTDOWN_HANG_SECS";
pub const ENV_CALL_LOG: &str = "GPUDOCTOR_FAKE_NVML_CALL_LOG";

/// The driver's resource-manager lock.
static DRIVER_LOCK: Mutex<()> = Mutex::new(());
/// GPUs attached in this session, one bit per index below 64.
static ATTACHED: AtomicU64 = AtomicU64::new(0);
/// GPUs whose handle call has answered in this session (attached or refused).
static ANSWERED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set while a call that identifies a GPU (PCI info, UUID, name) runs on this thread.
    static IDENTIFYING: Cell<bool> = const { Cell::new(false) };
}

fn driver_lock() -> MutexGuard<'static, ()> {
    DRIVER_LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// `INDEX:SECS` from `name`, when it names GPU `index`.
fn told_for(name: &str, index: u32) -> Option<Duration> {
    let spec = std::env::var(name).ok()?;
    let (gpu, secs) = spec.split_once(':')?;
    if gpu.trim().parse::<u32>().ok()? != index {
        return None;
    }
    Some(Duration::from_secs(secs.trim().parse().ok()?))
}

fn log(line: &str) {
    let Some(path) = std::env::var_os(ENV_CALL_LOG) else {
        return;
    };
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// A deprecated call was made (see the module doc).
pub fn deprecated(name: &str) {
    log(&format!("deprecated {name}"));
}

/// Before `nvmlInit*` answers.
pub fn on_init() {
    log("nvmlInit");
    if let Some(secs) = env_u64(ENV_HANG_SECS) {
        std::thread::sleep(Duration::from_secs(secs));
    }
}

/// Before `nvmlShutdown` answers; `last` when it ends the session.
pub fn on_shutdown(last: bool) {
    log("nvmlShutdown");
    if last {
        ATTACHED.store(0, Ordering::SeqCst);
        ANSWERED.store(0, Ordering::SeqCst);
    }
    if let Some(secs) = env_u64(ENV_SHUTDOWN_HANG_SECS) {
        std::thread::sleep(Duration::from_secs(secs));
    }
}

/// Before `nvmlDeviceGetHandleByIndex*` answers for GPU `index`.
pub fn on_handle(index: u32) {
    if let Some(hang) = told_for(ENV_HANG_DEVICE, index) {
        std::thread::sleep(hang);
    }
    let serial = env_u64(ENV_SERIAL_INIT_MS);
    let bit = 1u64.checked_shl(index).unwrap_or(0);
    if serial.is_some() {
        // In index order: every lower GPU's handle has answered first.
        let lower = bit.wrapping_sub(1);
        while ANSWERED.load(Ordering::SeqCst) & lower != lower {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let _lock = driver_lock();
    if ATTACHED.load(Ordering::SeqCst) & bit != 0 {
        return;
    }
    if let Some(ms) = serial {
        std::thread::sleep(Duration::from_millis(ms));
    }
    ATTACHED.fetch_or(bit, Ordering::SeqCst);
}

/// After `nvmlDeviceGetHandleByIndex*` answered for GPU `index`, whatever it answered.
pub fn handle_answered(index: u32) {
    if told_for(ENV_WEDGE_DEVICE, index).is_some() {
        // Answered for its siblings when it wedges (see `on_device_call`).
        return;
    }
    ANSWERED.fetch_or(1u64.checked_shl(index).unwrap_or(0), Ordering::SeqCst);
}

/// Before any other call on GPU `index` answers.
pub fn on_device_call(index: u32) {
    if let Some(hang) = told_for(ENV_HANG_DEVICE, index) {
        std::thread::sleep(hang);
    }
    let _lock = driver_lock();
    if !IDENTIFYING.with(Cell::get)
        && let Some(wedge) = told_for(ENV_WEDGE_DEVICE, index)
    {
        ANSWERED.fetch_or(1u64.checked_shl(index).unwrap_or(0), Ordering::SeqCst);
        std::thread::sleep(wedge);
    }
}

/// Run a call that identifies a GPU: a wedged GPU still answers these.
pub fn identifying<T>(body: impl FnOnce() -> T) -> T {
    IDENTIFYING.with(|c| c.set(true));
    let out = body();
    IDENTIFYING.with(|c| c.set(false));
    out
}
