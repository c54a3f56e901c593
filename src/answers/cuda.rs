//! What the CUDA probe found (`--cuda`, `--bandwidth`): one serde type shared by the live probe
//! (`source/cuda/`, which builds it from the events its helper process prints) and replay
//! (`.gpudoctor/cuda.json`). No I/O and no policy here.
//!
//! The helper speaks one JSON object per line ([`Event`]); [`CudaFacts::apply`] folds them, so
//! the same code reads a live run and a test's canned lines. Every CUDA call that failed is kept
//! with the step it failed at and its `CUresult` (`cuda.h`: the numbers below are the driver
//! API's, stable across CUDA 11 to 13), never as a bare "failed".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::process::Killed;
use crate::process::RunExit;

/// `CUresult` codes gpudoctor gives a meaning to (`cuda.h`, `enum cudaError_enum`).
pub mod code {
    pub const SUCCESS: i32 = 0;
    pub const INVALID_VALUE: i32 = 1;
    pub const OUT_OF_MEMORY: i32 = 2;
    pub const NOT_INITIALIZED: i32 = 3;
    pub const STUB_LIBRARY: i32 = 34;
    /// "requested CUDA device is unavailable at the current time. Devices are often unavailable
    /// due to use of CU_COMPUTEMODE_EXCLUSIVE_PROCESS or CU_COMPUTEMODE_PROHIBITED" (cuda.h).
    pub const DEVICE_UNAVAILABLE: i32 = 46;
    pub const NO_DEVICE: i32 = 100;
    pub const INVALID_DEVICE: i32 = 101;
    pub const ECC_UNCORRECTABLE: i32 = 214;
    pub const PEER_ACCESS_UNSUPPORTED: i32 = 217;
    pub const NVLINK_UNCORRECTABLE: i32 = 220;
    pub const OPERATING_SYSTEM: i32 = 304;
    pub const ILLEGAL_ADDRESS: i32 = 700;
    pub const NOT_PERMITTED: i32 = 800;
    pub const NOT_SUPPORTED: i32 = 801;
    /// Without the fabric manager on an NVSwitch system (reference/gpu-health.md §7).
    pub const SYSTEM_NOT_READY: i32 = 802;
    /// libcuda and the kernel module are from different drivers.
    pub const SYSTEM_DRIVER_MISMATCH: i32 = 803;
    /// A forward-compatibility libcuda on a GPU that does not support it.
    pub const COMPAT_NOT_SUPPORTED_ON_DEVICE: i32 = 804;
    pub const UNKNOWN: i32 = 999;
}

/// `CUDA_ERROR_*` name of a code (`cuda.h`); `CUDA_ERROR_<n>` for one this table lacks.
pub fn code_name(code: i32) -> String {
    let name = match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        46 => "CUDA_ERROR_DEVICE_UNAVAILABLE",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        102 => "CUDA_ERROR_DEVICE_NOT_LICENSED",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        214 => "CUDA_ERROR_ECC_UNCORRECTABLE",
        216 => "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
        217 => "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
        220 => "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        500 => "CUDA_ERROR_NOT_FOUND",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        704 => "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        705 => "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
        708 => "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
        709 => "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        711 => "CUDA_ERROR_TOO_MANY_PEERS",
        714 => "CUDA_ERROR_HARDWARE_STACK_ERROR",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        800 => "CUDA_ERROR_NOT_PERMITTED",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        802 => "CUDA_ERROR_SYSTEM_NOT_READY",
        803 => "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        804 => "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        805 => "CUDA_ERROR_MPS_CONNECTION_FAILED",
        909 => "CUDA_ERROR_TIMEOUT",
        999 => "CUDA_ERROR_UNKNOWN",
        other => return format!("CUDA_ERROR_{other}"),
    };
    name.to_string()
}

/// A step of the probe, as the helper names it in events and errors.
pub mod step {
    /// `dlopen` of libcuda and its symbols.
    pub const LOAD: &str = "load";
    pub const INIT: &str = "init";
    pub const COUNT: &str = "count";
    /// `cuDeviceGet`, name and PCI bus id.
    pub const DEVICE: &str = "device";
    /// `cuDevicePrimaryCtxRetain` + `cuCtxSetCurrent`: what the runtime does on first use.
    pub const CONTEXT: &str = "context";
    pub const ALLOC: &str = "alloc";
    pub const COPY_IN: &str = "copy_in";
    pub const COPY_OUT: &str = "copy_out";
    /// Pinned host memory (`cuMemHostAlloc`) for a bandwidth measurement.
    pub const HOST_ALLOC: &str = "host_alloc";
    pub const H2D: &str = "h2d";
    pub const D2H: &str = "d2h";
    /// `cuDeviceCanAccessPeer`, `cuCtxEnablePeerAccess`, `cuMemcpyPeer`.
    pub const PEER: &str = "peer";
}

/// A CUDA call that did not return `CUDA_SUCCESS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaError {
    /// The step it failed at ([`step`]).
    pub step: String,
    /// The `CUresult`.
    pub code: i32,
}

impl CudaError {
    pub fn new(step: &str, code: i32) -> Self {
        CudaError {
            step: step.to_string(),
            code,
        }
    }

    /// `context: CUDA_ERROR_DEVICE_UNAVAILABLE (46)`.
    pub fn describe(&self) -> String {
        format!("{}: {} ({})", self.step, code_name(self.code), self.code)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Host to device (`cuMemcpyHtoD`).
    H2d,
    /// Device to host (`cuMemcpyDtoH`).
    D2h,
}

impl Direction {
    pub fn id(self) -> &'static str {
        match self {
            Direction::H2d => "h2d",
            Direction::D2h => "d2h",
        }
    }
}

/// Where the pinned host buffer and the copying thread were placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The GPU's own NUMA node: what a well-pinned job gets.
    Local,
    /// Another NUMA node: what a mis-pinned job loses (evidence, not judged).
    Remote,
}

impl Placement {
    pub fn id(self) -> &'static str {
        match self {
            Placement::Local => "local",
            Placement::Remote => "remote",
        }
    }
}

/// One host↔GPU copy series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCopy {
    pub direction: Direction,
    pub placement: Placement,
    /// The NUMA node the thread and the buffer were bound to, when known.
    #[serde(default)]
    pub numa_node: Option<u32>,
    /// Why binding to that node's CPUs or memory failed (the copy ran unbound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_error: Option<String>,
    pub bytes: u64,
    pub iterations: u32,
    /// Median over the timed iterations, GB/s (10^9 bytes per second).
    #[serde(default)]
    pub gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CudaError>,
}

/// One CUDA device as the probe saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CudaDevice {
    /// CUDA's ordinal in the helper's run (depends on `CUDA_VISIBLE_DEVICES`, `CUDA_DEVICE_ORDER`).
    pub ordinal: u32,
    /// `cuDeviceGetPCIBusId`, in the sysfs form (`0000:18:00.0`): how it joins NVML and sysfs.
    #[serde(default)]
    pub bus_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// The first step of the round trip that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CudaError>,
    /// Bytes that came back different from what was sent (`Some(0)`: the round trip is whole).
    #[serde(default)]
    pub mismatched_bytes: Option<u64>,
    /// Bytes of the round trip.
    #[serde(default)]
    pub round_trip_bytes: u64,
    /// Context, allocation and both copies, microseconds.
    #[serde(default)]
    pub round_trip_us: Option<u64>,
    /// The step that did not return within the probe's timeout (the helper was killed there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<String>,
    /// Host↔device copies (`--bandwidth`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<HostCopy>,
}

impl CudaDevice {
    /// The round trip worked: context, allocation, both copies, nothing changed on the way.
    pub fn works(&self) -> bool {
        self.error.is_none() && self.timed_out.is_none() && self.mismatched_bytes == Some(0)
    }

    pub fn copy(&self, direction: Direction, placement: Placement) -> Option<&HostCopy> {
        self.copies
            .iter()
            .find(|c| c.direction == direction && c.placement == placement)
    }
}

/// One peer copy `from` → `to` (`cuMemcpyPeer`), between GPUs named by bus id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerCopy {
    pub from: String,
    pub to: String,
    /// `cuDeviceCanAccessPeer(from, to)`.
    #[serde(default)]
    pub access: Option<bool>,
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub iterations: u32,
    /// GB/s over the timed iterations.
    #[serde(default)]
    pub gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CudaError>,
    /// The copy did not return within the timeout.
    #[serde(default)]
    pub timed_out: bool,
    /// Bytes that differed when a pattern written on `from` was copied to `to` and read back
    /// (once per pair, after the timed copies): silent peer-to-peer corruption (a path through
    /// ACS or the IOMMU that mangles DMA). `None`: not verified (an older capture, or no copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatched_bytes: Option<u64>,
}

/// The step a helper was stuck in when the timeout killed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    pub step: String,
    /// The GPU it was working on, when the step was a GPU's.
    #[serde(default)]
    pub bus_id: Option<String>,
    #[serde(default)]
    pub peer: Option<String>,
    pub after_ms: u64,
}

/// One run of the helper process (a stall on one GPU restarts it without that GPU).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRun {
    pub command: Vec<String>,
    #[serde(default)]
    pub exit: Option<RunExit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<Stall>,
    #[serde(default)]
    pub elapsed_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub killed: Vec<Killed>,
    /// The last lines the helper wrote on stderr (a crash message, a driver's complaint).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    /// Lines on stdout that were not events (garbage from a broken helper or library).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unparsed: Vec<String>,
    /// The memory limit of gpudoctor's own cgroup (the Pod's), bytes; `None`: none or unread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// The cgroup's OOM-kill count rose while the helper ran (`None`: not readable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_killed: Option<bool>,
}

impl ProbeRun {
    /// The helper ended by a signal gpudoctor did not send (it was not stopped for a stall): the
    /// OOM killer, a crash, someone's `kill`.
    pub fn signalled(&self) -> Option<i32> {
        match self.exit {
            Some(RunExit::Signal(s)) if self.stalled.is_none() => Some(s),
            _ => None,
        }
    }

    /// "killed by signal 9 (SIGKILL): the OOM killer, at the memory limit of 256 MiB".
    pub fn signal_text(&self) -> Option<String> {
        let s = self.signalled()?;
        let name = match s {
            6 => " (SIGABRT)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            7 => " (SIGBUS)",
            _ => "",
        };
        // A crash (SIGABRT, SIGSEGV) is not about memory; SIGKILL usually is.
        if s != 9 && self.oom_killed != Some(true) {
            return Some(format!("killed by signal {s}{name}"));
        }
        let limit = self
            .memory_limit_bytes
            .map(|b| format!("the memory limit of {}", mebibytes(b)))
            .unwrap_or_else(|| "no memory limit found for gpudoctor's cgroup".into());
        let why = match self.oom_killed {
            Some(true) => format!(": the OOM killer, at {limit}"),
            Some(false) => format!(" (not the OOM killer; {limit})"),
            None => format!(" ({limit}; the OOM-kill count could not be read)"),
        };
        Some(format!("killed by signal {s}{name}{why}"))
    }
}

fn mebibytes(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// Everything the CUDA probe found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CudaFacts {
    /// `--bandwidth` was asked: host↔GPU and peer copies were measured, not only the round trip.
    #[serde(default)]
    pub bandwidth: bool,
    /// The library loaded: `--cuda-lib`, the host's found under `--root`
    /// (`source/host_lib.rs`), or `libcuda.so.1` from the loader's search path.
    #[serde(default)]
    pub library: Option<String>,
    /// The driver version in the name of the file it is (`libcuda.so.550.54.15`, as mapped into
    /// the helper): which driver's user-space half was loaded, compared with the kernel
    /// module's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_version: Option<String>,
    /// Why it could not be loaded (no library, a missing symbol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
    /// `cuDriverGetVersion`: 12040 = CUDA 12.4.
    #[serde(default)]
    pub driver_version: Option<i32>,
    /// `cuInit(0)`'s `CUresult`.
    #[serde(default)]
    pub init: Option<i32>,
    /// Microseconds `cuInit(0)` took (seconds without persistence mode: it attaches every GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_us: Option<u64>,
    /// `cuDeviceGetCount`.
    #[serde(default)]
    pub device_count: Option<u32>,
    /// The `CUDA_*` variables the helper ran with (`CUDA_VISIBLE_DEVICES` hides GPUs from CUDA).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Bus ids gpudoctor did not ask CUDA to probe: GPUs in MIG mode (CUDA reaches their MIG
    /// devices, not the GPU) and GPUs a stall removed from a restarted run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
    #[serde(default)]
    pub devices: Vec<CudaDevice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerCopy>,
    /// The helper's runs, in order.
    #[serde(default)]
    pub runs: Vec<ProbeRun>,
    /// The helper said it finished (`done`); false when it crashed or was killed.
    #[serde(default)]
    pub completed: bool,
}

/// One line the helper prints on stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Library {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_version: Option<String>,
    },
    LoadError {
        message: String,
    },
    DriverVersion {
        version: i32,
    },
    Init {
        code: i32,
        /// How long `cuInit` took: without persistence mode it attaches every GPU.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        micros: Option<u64>,
    },
    Count {
        code: i32,
        count: u32,
    },
    /// A device was enumerated (before anything is asked of it).
    Device {
        ordinal: u32,
        #[serde(default)]
        bus_id: Option<String>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        error: Option<CudaError>,
    },
    /// A step is about to start: what the parent names when the helper stops answering.
    Step {
        step: String,
        #[serde(default)]
        ordinal: Option<u32>,
        #[serde(default)]
        peer: Option<u32>,
    },
    RoundTrip {
        ordinal: u32,
        bytes: u64,
        #[serde(default)]
        error: Option<CudaError>,
        #[serde(default)]
        mismatched_bytes: Option<u64>,
        micros: u64,
    },
    Copy {
        ordinal: u32,
        copy: HostCopy,
    },
    Peer {
        from: u32,
        to: u32,
        #[serde(default)]
        access: Option<bool>,
        #[serde(default)]
        bytes: u64,
        #[serde(default)]
        iterations: u32,
        #[serde(default)]
        gbps: Option<f64>,
        #[serde(default)]
        error: Option<CudaError>,
        /// Bytes wrong in the verifying copy (see [`PeerCopy::mismatched_bytes`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mismatched_bytes: Option<u64>,
    },
    Done,
}

impl CudaFacts {
    fn device_mut(&mut self, ordinal: u32) -> Option<&mut CudaDevice> {
        self.devices.iter_mut().find(|d| d.ordinal == ordinal)
    }

    /// The bus id of the device with this ordinal, or `cuda <n>` when CUDA did not say.
    pub fn bus_of(&self, ordinal: u32) -> String {
        self.devices
            .iter()
            .find(|d| d.ordinal == ordinal)
            .and_then(|d| d.bus_id.clone())
            .unwrap_or_else(|| format!("cuda {ordinal}"))
    }

    /// Fold one event into the facts.
    pub fn apply(&mut self, event: Event) {
        match event {
            Event::Library { path, file_version } => {
                self.library = Some(path);
                self.library_version = file_version;
            }
            Event::LoadError { message } => self.load_error = Some(message),
            Event::DriverVersion { version } => self.driver_version = Some(version),
            Event::Init { code, micros } => {
                self.init = Some(code);
                self.init_us = micros;
            }
            Event::Count { code, count } => {
                if code == code::SUCCESS {
                    self.device_count = Some(count);
                }
            }
            Event::Device {
                ordinal,
                bus_id,
                name,
                error,
            } => {
                let bus_id = bus_id.and_then(|b| super::nvml::normalize_bus_id(&b));
                self.devices.retain(|d| d.ordinal != ordinal);
                self.devices.push(CudaDevice {
                    ordinal,
                    bus_id,
                    name,
                    error,
                    ..CudaDevice::default()
                });
            }
            Event::Step { .. } => {}
            Event::RoundTrip {
                ordinal,
                bytes,
                error,
                mismatched_bytes,
                micros,
            } => {
                if let Some(d) = self.device_mut(ordinal) {
                    d.error = error;
                    d.round_trip_bytes = bytes;
                    d.mismatched_bytes = mismatched_bytes;
                    d.round_trip_us = Some(micros);
                }
            }
            Event::Copy { ordinal, copy } => {
                if let Some(d) = self.device_mut(ordinal) {
                    d.copies
                        .retain(|c| (c.direction, c.placement) != (copy.direction, copy.placement));
                    d.copies.push(copy);
                }
            }
            Event::Peer {
                from,
                to,
                access,
                bytes,
                iterations,
                gbps,
                error,
                mismatched_bytes,
            } => {
                let (from, to) = (self.bus_of(from), self.bus_of(to));
                self.peers.retain(|p| (&p.from, &p.to) != (&from, &to));
                self.peers.push(PeerCopy {
                    from,
                    to,
                    access,
                    bytes,
                    iterations,
                    gbps: gbps.filter(|g| g.is_finite()),
                    error,
                    timed_out: false,
                    mismatched_bytes,
                });
            }
            Event::Done => self.completed = true,
        }
    }

    /// Mark where a helper stalled: the device's step, or the peer pair.
    pub fn mark_stall(&mut self, step: &str, ordinal: Option<u32>, peer: Option<u32>) {
        match (ordinal, peer) {
            (Some(from), Some(to)) => {
                let (from, to) = (self.bus_of(from), self.bus_of(to));
                self.peers.retain(|p| (&p.from, &p.to) != (&from, &to));
                self.peers.push(PeerCopy {
                    from,
                    to,
                    access: None,
                    bytes: 0,
                    iterations: 0,
                    gbps: None,
                    error: None,
                    timed_out: true,
                    mismatched_bytes: None,
                });
            }
            (Some(ordinal), None) => {
                if let Some(d) = self.device_mut(ordinal) {
                    d.timed_out = Some(step.to_string());
                }
            }
            _ => {}
        }
    }

    /// Devices sorted by bus id (then ordinal), peers by pair: the order reports and captures
    /// use, whatever order the helper printed them in.
    pub fn sort(&mut self) {
        self.devices
            .sort_by(|a, b| (&a.bus_id, a.ordinal).cmp(&(&b.bus_id, b.ordinal)));
        for d in &mut self.devices {
            d.copies.sort_by_key(|c| (c.placement, c.direction));
        }
        self.peers
            .sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
        self.excluded.sort();
        self.excluded.dedup();
    }

    /// The device with this bus id.
    pub fn device(&self, bus_id: &str) -> Option<&CudaDevice> {
        self.devices
            .iter()
            .find(|d| d.bus_id.as_deref() == Some(bus_id))
    }
}

/// Parse one line of helper output; `None` for a line that is not an event.
pub fn parse_event(line: &str) -> Option<Event> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str(line).ok()
}

/// `12040` → `12.4` (major = v / 1000, minor = v % 1000 / 10; reference/gpu-health.md §1).
pub fn version_text(version: i32) -> String {
    format!("{}.{}", version / 1000, version % 1000 / 10)
}

/// Parse `.gpudoctor/cuda.json`.
pub fn parse_cuda_json(text: &str) -> Result<CudaFacts, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// The probe's answer as the source returns it, and what the walk asks it to measure.

/// The library name the driver installs (`libcuda.so` is the development symlink only).
pub const DEFAULT_LIBRARY: &str = "libcuda.so.1";

/// Why nothing was probed: the same words live and in replay.
pub const NOT_REQUESTED: &str =
    "cuda probe not requested: pass --cuda (or --bandwidth) to create a context on every gpu";
/// Why no bandwidth was measured.
pub const NO_BANDWIDTH: &str =
    "bandwidth not requested: pass --bandwidth to measure host-gpu and gpu-gpu copies";

/// Where one bandwidth measurement runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementPlan {
    pub placement: Placement,
    #[serde(default)]
    pub node: Option<u32>,
    /// The CPUs to bind the copying thread to (empty: leave it unbound).
    #[serde(default)]
    pub cpus: Vec<u32>,
}

/// What the walk knows that the probe needs: which GPUs not to probe, where each GPU's NUMA
/// node is. Built by the checks' context from NVML and the topology facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaPlan {
    /// Bus ids not to probe (GPUs in MIG mode), with why.
    pub exclude: Vec<String>,
    /// Per bus id: the local placement first, then a remote one.
    pub placements: BTreeMap<String, Vec<PlacementPlan>>,
    /// GPUs the driver counts (NVML): `cuInit` attaches each, one after another when persistence
    /// mode is off, so the init step's allowance grows with them.
    pub gpus: u32,
}

/// The probe's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum CudaProbe {
    NotRequested {
        why: String,
    },
    /// The helper could not be started, or a capture's file could not be read.
    Unavailable {
        origin: String,
        message: String,
    },
    Ran(Box<CudaFacts>),
}

impl CudaProbe {
    pub fn facts(&self) -> Option<&CudaFacts> {
        match self {
            CudaProbe::Ran(f) => Some(f),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_fold_into_devices_copies_and_peers() {
        let lines = [
            r#"{"event":"library","path":"libcuda.so.1"}"#,
            r#"{"event":"driver_version","version":12040}"#,
            r#"{"event":"init","code":0}"#,
            r#"{"event":"count","code":0,"count":2}"#,
            r#"{"event":"device","ordinal":0,"bus_id":"00000000:18:00.0","name":"NVIDIA H100 80GB HBM3"}"#,
            r#"{"event":"device","ordinal":1,"bus_id":"00000000:2A:00.0","name":"NVIDIA H100 80GB HBM3"}"#,
            r#"{"event":"step","step":"context","ordinal":0}"#,
            r#"{"event":"round_trip","ordinal":0,"bytes":1048576,"mismatched_bytes":0,"micros":812}"#,
            r#"{"event":"round_trip","ordinal":1,"bytes":1048576,"error":{"step":"context","code":46},"micros":3}"#,
            r#"{"event":"copy","ordinal":0,"copy":{"direction":"h2d","placement":"local","numa_node":0,"bytes":268435456,"iterations":5,"gbps":53.2}}"#,
            r#"{"event":"peer","from":0,"to":1,"access":true,"bytes":268435456,"iterations":5,"gbps":371.5}"#,
            "garbage",
            r#"{"event":"done"}"#,
        ];
        let mut facts = CudaFacts::default();
        for line in lines {
            if let Some(event) = parse_event(line) {
                facts.apply(event);
            }
        }
        facts.sort();
        assert_eq!(facts.driver_version, Some(12040));
        assert_eq!(facts.device_count, Some(2));
        assert!(facts.completed);
        let gpu0 = facts.device("0000:18:00.0").unwrap();
        assert!(gpu0.works());
        assert_eq!(
            gpu0.copy(Direction::H2d, Placement::Local).unwrap().gbps,
            Some(53.2)
        );
        let gpu1 = facts.device("0000:2a:00.0").unwrap();
        assert!(!gpu1.works());
        assert_eq!(
            gpu1.error.as_ref().unwrap().describe(),
            "context: CUDA_ERROR_DEVICE_UNAVAILABLE (46)"
        );
        assert_eq!(facts.peers[0].from, "0000:18:00.0");
        assert_eq!(facts.peers[0].to, "0000:2a:00.0");
        // A capture round-trips.
        let text = serde_json::to_string(&facts).unwrap();
        assert_eq!(parse_cuda_json(&text).unwrap(), facts);
    }

    #[test]
    fn a_stall_names_the_device_or_the_pair() {
        let mut facts = CudaFacts::default();
        facts.apply(Event::Device {
            ordinal: 3,
            bus_id: Some("0000:5d:00.0".into()),
            name: None,
            error: None,
        });
        facts.mark_stall(step::CONTEXT, Some(3), None);
        assert_eq!(facts.devices[0].timed_out.as_deref(), Some(step::CONTEXT));
        facts.mark_stall(step::PEER, Some(3), Some(7));
        assert!(facts.peers[0].timed_out);
        assert_eq!(facts.peers[0].to, "cuda 7");
    }

    #[test]
    fn names_and_versions() {
        assert_eq!(code_name(802), "CUDA_ERROR_SYSTEM_NOT_READY");
        assert_eq!(code_name(12345), "CUDA_ERROR_12345");
        assert_eq!(version_text(12040), "12.4");
        assert_eq!(version_text(11080), "11.8");
        assert!(parse_event("not json").is_none());
        assert!(parse_event(r#"{"event":"nonsense"}"#).is_none());
    }
}
