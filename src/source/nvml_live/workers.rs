//! Every GPU in a thread of its own, all started at once, with deadlines that tell a slow node
//! from a hung GPU.
//!
//! Without persistence mode the driver attaches GPUs one after another under its lock as their
//! handles are taken (`nvmlDeviceGetHandleByIndex` initialises its GPU; `nvidia-smi` takes ~30 s
//! instead of 2 s on 8×A100, Azure aks-gpu#105). So handles get a budget that scales with the
//! GPU count: each waiting handle has `budget` from the last handle that arrived, `budget × GPUs`
//! in all; a GPU's readings then have `budget` from its own handle. While handles keep coming the
//! node is slow, not hung. The time the handles took is kept apart
//! ([`Timing::handles_ms`]).
//!
//! One wedged GPU inside the driver's lock stalls its siblings: their calls wait behind it. The
//! GPU that stopped answering first (it said who it is, then hung in a reading) is the one
//! named; the others are recorded as waiting behind it (`stalled_behind`), not as a pile of
//! independent hangs.
//!
//! A thread blocked inside NVML cannot be killed: the probe stops waiting at the deadline and
//! leaves it behind, detached, holding its own `Arc<Nvml>` (nvml.h: "NVML is thread-safe").

use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use super::device;
use super::session::System;
use crate::answers::nvml::{NvmlDevice, NvmlError, NvmlErrorKind};

/// Most GPUs probed. A node holds at most 16 (HGX 8, GB200 NVL trays 4); the cap only bounds a
/// nonsensical device count so a broken driver cannot make gpudoctor start thousands of threads.
pub const MAX_DEVICES: u32 = 64;

/// What a GPU's worker reports as it goes.
enum Report {
    /// The handle arrived (the GPU is attached).
    Handle(u32),
    /// Who the GPU is: bus id, UUID, name.
    Identity(u32, NvmlDevice),
    /// About to ask this reading.
    Asking(u32, &'static str),
    Done(u32, NvmlDevice),
}

/// How a worker tells the probe where it is.
struct Reporter {
    index: u32,
    tx: mpsc::Sender<Report>,
}

impl device::Progress for Reporter {
    fn handle(&self) {
        let _ = self.tx.send(Report::Handle(self.index));
    }
    fn identity(&self, device: &NvmlDevice) {
        let _ = self.tx.send(Report::Identity(self.index, device.clone()));
    }
    fn asking(&self, field: &'static str) {
        let _ = self.tx.send(Report::Asking(self.index, field));
    }
}

/// Time measures of one device walk (not facts of the node: never recorded).
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// From the start until the last handle arrived.
    pub handles_ms: Option<u64>,
}

/// What the probe knows of a GPU still running.
#[derive(Default)]
struct Seen {
    handle_at: Option<Instant>,
    identity: Option<NvmlDevice>,
    /// The call it is in, and since when.
    asking: Option<(&'static str, Instant)>,
}

pub fn probe_devices(system: &System, budget: Duration) -> (Vec<NvmlDevice>, Timing) {
    let started = Instant::now();
    let count = system.device_count.min(MAX_DEVICES);
    let (tx, rx) = mpsc::channel::<Report>();
    let mut done: BTreeMap<u32, NvmlDevice> = BTreeMap::new();
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    for index in 0..count {
        match spawn(system, index, tx.clone()) {
            Ok(()) => {
                seen.insert(index, Seen::default());
            }
            Err(err) => {
                let error = NvmlError::new(
                    NvmlErrorKind::Unknown,
                    format!("could not start a probe thread: {err}"),
                );
                done.insert(index, handle_error(index, error));
            }
        }
    }
    drop(tx);
    let handles_cap = started + budget.saturating_mul(count.max(1));
    let mut last_handle = started;
    loop {
        // Each GPU still running has a deadline: readings `budget` after its handle; a handle
        // `budget` after the last one that came, `budget × GPUs` after the start at most.
        let handles_due = (last_handle + budget).min(handles_cap);
        let due = seen
            .values()
            .map(|s| s.handle_at.map_or(handles_due, |at| at + budget))
            .max();
        let Some(due) = due else { break };
        let Some(left) = due.checked_duration_since(Instant::now()) else {
            break;
        };
        match rx.recv_timeout(left) {
            Ok(Report::Handle(index)) => {
                let now = Instant::now();
                last_handle = now;
                if let Some(s) = seen.get_mut(&index) {
                    s.handle_at = Some(now);
                }
            }
            Ok(Report::Identity(index, device)) => {
                if let Some(s) = seen.get_mut(&index) {
                    s.identity = Some(device);
                }
            }
            Ok(Report::Asking(index, field)) => {
                if let Some(s) = seen.get_mut(&index) {
                    s.asking = Some((field, Instant::now()));
                }
            }
            Ok(Report::Done(index, mut device)) => {
                if let Some(at) = seen.remove(&index).and_then(|s| s.handle_at) {
                    device.handle_ms = Some(millis(at - started));
                }
                done.insert(index, device);
            }
            Err(_) => break,
        }
    }
    let timing = Timing {
        handles_ms: (last_handle > started).then(|| millis(last_handle - started)),
    };
    let waited = millis(started.elapsed());
    let culprit = first_stuck(&seen);
    for (index, s) in seen {
        done.insert(
            index,
            unanswered(index, s, started, culprit.as_ref(), budget, waited),
        );
    }
    for index in count..system.device_count {
        let error = NvmlError::new(
            NvmlErrorKind::Unknown,
            format!("not probed: nvml counts more than {MAX_DEVICES} devices"),
        );
        done.insert(index, handle_error(index, error));
    }
    (done.into_values().collect(), timing)
}

fn spawn(system: &System, index: u32, tx: mpsc::Sender<Report>) -> std::io::Result<()> {
    let nvml = Arc::clone(&system.nvml);
    thread::Builder::new()
        .name(format!("nvml-gpu{index}"))
        .spawn(move || {
            let started = Instant::now();
            let progress = Reporter {
                index,
                tx: tx.clone(),
            };
            // A panic inside the wrapper must not read as a hang: it is this GPU's error.
            let described = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                device::describe(&nvml, index, &progress)
            }));
            let mut device = described.unwrap_or_else(|_| {
                let error = NvmlError::new(NvmlErrorKind::Unknown, "the probe of this gpu crashed");
                handle_error(index, error)
            });
            device.probe_ms = Some(millis(started.elapsed()));
            let _ = tx.send(Report::Done(index, device));
        })
        .map(drop)
}

/// The GPU the others waited behind: the only one still running that had said who it is (it
/// hung in a reading), else the only one that had its handle. Several in readings at once
/// cannot be told apart from outside the driver's lock: then none is singled out and each is
/// named with the call it stopped in.
fn first_stuck(seen: &BTreeMap<u32, Seen>) -> Option<(u32, Option<String>)> {
    let only = |keep: &dyn Fn(&Seen) -> bool| {
        let mut found = seen.iter().filter(|(_, s)| keep(s));
        match (found.next(), found.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    };
    only(&|s| s.identity.is_some())
        .or_else(|| {
            seen.values()
                .all(|s| s.identity.is_none())
                .then(|| only(&|s| s.handle_at.is_some()))
                .flatten()
        })
        .map(|(index, s)| {
            let bus = s.identity.as_ref().and_then(|d| d.pci_bus_id.clone());
            (*index, bus)
        })
}

/// The record of a GPU still inside NVML at its deadline: what it said about itself, where it
/// stopped, and whom it waited behind.
fn unanswered(
    index: u32,
    seen: Seen,
    started: Instant,
    culprit: Option<&(u32, Option<String>)>,
    budget: Duration,
    waited: u64,
) -> NvmlDevice {
    let mut device = seen.identity.unwrap_or(NvmlDevice {
        index,
        ..NvmlDevice::default()
    });
    let secs = budget.as_secs_f32();
    let stuck_at = match (seen.handle_at, seen.asking) {
        (None, _) => "handle",
        (Some(_), None) => "identity",
        (Some(_), Some((field, _))) => field,
    };
    device.stuck_at = Some(stuck_at.to_string());
    let message = match culprit {
        Some((first, bus)) if *first != index => {
            device.stalled_behind = Some(*first);
            let bus = bus
                .as_deref()
                .map(|b| format!(" ({b})"))
                .unwrap_or_default();
            format!(
                "gpu {index} waited behind gpu {first}{bus} at {stuck_at}: one wedged gpu stalls its siblings"
            )
        }
        _ if stuck_at == "handle" => {
            format!("gpu {index} gave no handle within {secs} s of the last one")
        }
        _ => format!("gpu {index} stopped answering at {stuck_at}: no answer within {secs} s"),
    };
    device.error = Some(NvmlError::new(NvmlErrorKind::Timeout, message));
    device.probe_ms = Some(waited);
    device.handle_ms = seen.handle_at.map(|at| millis(at - started));
    device
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
