//! Where facts come from. Two sources share one interface:
//! - [`HostSource`]: the live machine, files under `--root` (default `/`, `/host` in a DaemonSet),
//!   NVML through nvml-wrapper;
//! - [`ReplaySource`]: a recorded or hand-built fixture (chosen when
//!   `<root>/.gpudoctor/manifest.json` exists): the same files under that root, and the probes
//!   that are not files (NVML, the kubelet's pod-resources API, ...) answered from `.gpudoctor/`.
//!
//! Only this module and `facts/` know paths. Nothing here judges anything.

pub mod child;
mod container_log;
pub mod cuda;
pub mod gpudirect;
pub mod host_lib;
pub mod kernel_log;
pub mod ld_cache;
pub mod nccl;
mod nccl_log;
pub mod node_root;
pub mod nvml_live;
pub mod overlay;
mod own_memory;
pub mod perftest_log;
mod replay;
pub use replay::{
    CAPTURE_FORMAT_VERSION, NotACapture, ReplaySource, capture_manifest, capture_time, is_capture,
};
pub mod podresources;
pub mod rooted;
pub mod state_dir;
mod uts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::answers::cuda::{CudaPlan, CudaProbe};
use crate::answers::gpudirect::{GdrProbe, GdrTarget};
use crate::answers::nccl::NcclProbe;
use crate::answers::nvml::{NvmlErrorKind, NvmlFacts, parse_nvml_json};
use crate::answers::pod_resources::{POD_RESOURCES_SOCKET, PodResourcesFacts, RpcErrorKind};
use crate::report::SourceKind;
pub use cuda::CudaOptions;
pub use gpudirect::GdrOptions;
pub use nccl::NcclOptions;
pub use rooted::{FsError, RootedFs, RunReads};

/// Root-relative directory that marks a capture and holds its probe answers.
pub const CAPTURE_DIR: &str = ".gpudoctor";
pub const MANIFEST: &str = ".gpudoctor/manifest.json";
pub const NVML_JSON: &str = ".gpudoctor/nvml.json";
pub const KMSG_TXT: &str = ".gpudoctor/kmsg.txt";
/// The kubelet's pod-resources answers in a capture (`answers::pod_resources::PodResourcesFacts`).
pub const POD_RESOURCES_JSON: &str = ".gpudoctor/pod-resources.json";
/// The process environment gpudoctor ran with, as far as checks read it ([`ENV_VARS`]).
pub const ENV_JSON: &str = ".gpudoctor/env.json";
/// The environment variables a check may read: whether we run in a Pod, and what the container
/// runtime gave it (reference/kubernetes.md §5).
pub const ENV_VARS: &[&str] = &[
    "KUBERNETES_SERVICE_HOST",
    // The node's name from the downward API (`spec.nodeName`), set by every manifest in deploy/.
    "NODE_NAME",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_VISIBLE_DEVICES",
];
/// Variables that change which GPUs CUDA shows, in what order, or how every kernel runs
/// (`driver.gpu_processes`): `CUDA_DEVICE_ORDER` (CUDA Programming Guide §5.2.1, "Device
/// Enumeration and Properties"), and the ten DCGM warns about in its software plugin
/// (NVIDIA/DCGM `nvvs/plugin_src/software/Software.cpp` `checkForBadEnvVaribles`, the list gpud's
/// `accelerator-nvidia-bad-envs` component ports as `BAD_CUDA_ENV_KEYS`): debugger, injection
/// (tracing), boost, core dump and profiler switches. `CUDA_VISIBLE_DEVICES` is in
/// [`ENV_VARS`].
pub const CUDA_ENV_VARS: &[&str] = &[
    "CUDA_DEVICE_ORDER",
    "NSIGHT_CUDA_DEBUGGER",
    "CUDA_INJECTION32_PATH",
    "CUDA_INJECTION64_PATH",
    "CUDA_AUTO_BOOST",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_COREDUMP_FILE",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION",
    "CUDA_PROFILE",
    "COMPUTE_PROFILE",
    "OPENCL_PROFILE",
];
/// NCCL reads every setting from a variable of this prefix (NCCL's `src/misc/param.cc`
/// `ncclGetEnv`, docs "Environment Variables"); nccl-tests and the probes inherit them.
pub const NCCL_ENV_PREFIX: &str = "NCCL_";

/// Whether a source reads (and `record` keeps in `.gpudoctor/env.json`) this variable: the
/// names above and `NCCL_*`, never any other (other values may hold secrets).
pub fn is_read_env(name: &str) -> bool {
    ENV_VARS.contains(&name)
        || CUDA_ENV_VARS.contains(&name)
        || (name.len() > NCCL_ENV_PREFIX.len() && name.starts_with(NCCL_ENV_PREFIX))
}
/// The live kernel log, read without blocking.
pub const DEV_KMSG: &str = "dev/kmsg";

/// Options that shape how probes run (not what is judged).
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// `--nvml-lib`: load this NVML library instead of the host's under `--root` or the loader's
    /// `libnvidia-ml.so.1` (`host_lib.rs`).
    pub nvml_lib: Option<PathBuf>,
    /// `--kernel-log FILE`: read the kernel log from this file (a saved `dmesg`, `/dev/kmsg`,
    /// a pipe such as `<(journalctl -k)`) instead of `dev/kmsg` under the root, or instead of a
    /// capture's `kmsg.txt`. The one path the user names outside the root.
    pub kernel_log: Option<PathBuf>,
    /// Longest any one probe may take.
    pub probe_timeout: Duration,
    /// `--kubelet-socket PATH`: ask the kubelet's pod-resources API here instead of
    /// `var/lib/kubelet/pod-resources/kubelet.sock` under the root. Used as given.
    pub kubelet_socket: Option<PathBuf>,
    /// Budget for the whole pod-resources probe (connect and both calls): 5 s unless
    /// `--timeout` is given, a kubelet that answers at all answers in milliseconds.
    pub kubelet_timeout: Duration,
    /// The NCCL layer: run nccl-tests or read `--nccl-log` files (source/nccl.rs).
    pub nccl: NcclOptions,
    /// `--cuda`, `--bandwidth`: the CUDA helper (source/cuda/).
    pub cuda: CudaOptions,
    /// `--bandwidth`: GPUDirect RDMA loopbacks (source/gpudirect.rs).
    pub gpudirect: GdrOptions,
    /// `--perftest-log FILE`: saved `ib_*_bw` outputs to judge (`rdma.perftest_log`); files the
    /// user names, read wherever they are, like `--nccl-log`.
    pub perftest_logs: Vec<PathBuf>,
    /// `--state-dir DIR`: where each run adds what it saw this boot (`state_dir.rs`).
    pub state_dir: Option<PathBuf>,
    /// The run's one NVML session, shared by every clone of these options (a `--sample`
    /// window's two readings): `nvml_live/session.rs`.
    pub nvml_session: nvml_live::NvmlSession,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            nvml_lib: None,
            kernel_log: None,
            probe_timeout: Duration::from_secs(10),
            kubelet_socket: None,
            kubelet_timeout: Duration::from_secs(5),
            nccl: NcclOptions::default(),
            cuda: CudaOptions::default(),
            gpudirect: GdrOptions::default(),
            perftest_logs: Vec::new(),
            state_dir: None,
            nvml_session: nvml_live::NvmlSession::default(),
        }
    }
}

/// Facts a check may ask for. File primitives are root-relative and never leave the root.
pub trait Source: Send + Sync {
    fn kind(&self) -> SourceKind;
    /// The process ends next: do what must be done (end an NVML session, remove a composed
    /// tree) and leave the rest to the kernel. Dropping it does the same, one allocation and
    /// one descriptor at a time (issue 41: a replay's remembered reads were 1 % of a `check`).
    fn release_at_exit(self: Box<Self>) {}
    fn fs(&self) -> &RootedFs;
    /// NVML's answer. A probe that cannot run is an `init_error`, never a panic.
    fn nvml(&self) -> NvmlFacts;
    /// The kernel log text and where it came from; `Ok(None)` when this node has none to give.
    /// Decoded lossily and read from its tail when long (`kernel_log.rs`).
    fn kernel_log(&self) -> Result<Option<(String, String)>, FsError>;
    /// What reading the kernel log [`Source::kernel_log`] gave repaired or left out (invalid
    /// bytes replaced, the oldest part of a log over the cap skipped), one note each, for the
    /// kernel-log checks' evidence; empty when it was read as written.
    fn kernel_log_notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The kubelet's pod-resources answers. A source that cannot ask says "not available".
    fn pod_resources(&self) -> PodResourcesFacts {
        PodResourcesFacts::failed(
            POD_RESOURCES_SOCKET,
            RpcErrorKind::NotAvailable,
            "this source cannot ask a kubelet",
        )
    }
    /// The variables [`is_read_env`] names that are set. The environment is not under the
    /// root: live sources read the process's own, replay reads `.gpudoctor/env.json`.
    fn env_vars(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Why the recorded environment (`.gpudoctor/env.json`) could not be read, for a capture
    /// whose file is there but unreadable or not a JSON object of strings; `None` otherwise
    /// (a live source, or no file: no variable was set).
    fn env_error(&self) -> Option<String> {
        None
    }
    /// `statvfs(3)` of the filesystem the root-relative directory `rel` sits on (the disk
    /// checks), or that there is no such directory, or why it could not be asked; `None` when
    /// this source has no answer for it (a capture recorded before it kept
    /// `.gpudoctor/statvfs.json`, or one that did not look at that directory).
    fn fs_stat(&self, _rel: &str) -> Option<crate::answers::fs_stat::StatAnswer> {
        None
    }
    /// The first reading of a `--sample` window, when this source has one: a capture made with
    /// `record --sample` stores it (`.gpudoctor/sample.json`); a live source has none of its
    /// own (`check --sample` takes it and gives it to the context).
    fn baseline(
        &self,
    ) -> Result<Option<crate::answers::baseline::Baseline>, crate::answers::FactError> {
        Ok(None)
    }
    /// When the node was recorded, for a capture (RFC 3339); `None` for a live node or a capture
    /// that does not say (a hand-built fixture).
    fn captured_at(&self) -> Option<String> {
        None
    }
    /// For a capture whose manifest says the node changed while it was recorded
    /// (`node_changed`, `record/changes.rs`): why. Such a capture may hold part of the node.
    fn node_changed(&self) -> Option<String> {
        None
    }
    /// The node's name as the host's own UTS namespace has it, which only a live host can say
    /// (`uts.rs`: in a Pod, `proc/sys/kernel/hostname` answers with the Pod's name); `None` for
    /// a capture.
    fn host_nodename(&self) -> Option<String> {
        None
    }
    /// nccl-tests results to judge: a run made now, `--nccl-log` files, or a capture's
    /// `.gpudoctor/nccl/*.log`. A source that cannot run or read them says "not requested".
    fn nccl(&self) -> NcclProbe {
        NcclProbe::NotRequested {
            why: crate::answers::nccl::NOT_REQUESTED.to_string(),
        }
    }

    /// `--perftest-log` files: each path with its text, or why it could not be read. Empty when
    /// none was given (`rdma.perftest_log` then skips).
    fn perftest_logs(&self) -> Vec<(PathBuf, Result<String, String>)> {
        Vec::new()
    }

    /// A pasted `nvidia-smi topo -m` matrix and its name (`gpudoctor judge`); no node has one.
    fn smi_topo(&self) -> Option<(String, String)> {
        None
    }

    /// The history `--state-dir` keeps (or a capture recorded): where it is, whether this run
    /// adds to it, and what it holds. `None` without one.
    fn history(&self) -> Option<crate::answers::history::HistoryAnswer> {
        None
    }

    /// Write the history back (only where [`Source::history`] said it is writable).
    fn save_history(&self, _history: &crate::answers::history::History) -> Result<(), String> {
        Err("this run keeps no state".to_string())
    }

    /// The CUDA probe: a run now (`--cuda`, `--bandwidth`) with what the walk knows about the
    /// GPUs (`plan`, asked only when the probe runs), or a capture's `.gpudoctor/cuda.json`.
    fn cuda(&self, _plan: &dyn Fn() -> CudaPlan) -> CudaProbe {
        CudaProbe::NotRequested {
            why: crate::answers::cuda::NOT_REQUESTED.to_string(),
        }
    }
    /// GPUDirect RDMA loopbacks through these HCAs (`--bandwidth`; `targets` asked only when
    /// they run), or a capture's `.gpudoctor/gpudirect/`.
    fn gpudirect(&self, _targets: &dyn Fn() -> Vec<GdrTarget>) -> GdrProbe {
        GdrProbe::NotRequested {
            why: crate::answers::gpudirect::NOT_REQUESTED.to_string(),
        }
    }

    fn root(&self) -> &Path {
        self.fs().root()
    }
    fn read_to_string(&self, rel: &str) -> Result<String, FsError> {
        self.fs().read_to_string(rel)
    }
    fn read_dir(&self, rel: &str) -> Result<Vec<String>, FsError> {
        self.fs().read_dir(rel)
    }
    /// Directory entries `keep` accepts; prefer this to `read_dir` + filter so a recording
    /// captures only what matters.
    fn list_dir(&self, rel: &str, keep: &dyn Fn(&str) -> bool) -> Result<Vec<String>, FsError> {
        self.fs().list_dir(rel, keep)
    }
    fn read_bytes(&self, rel: &str) -> Result<Vec<u8>, FsError> {
        self.fs().read_bytes(rel)
    }
    /// The last `max` bytes of a log file as text (see [`RootedFs::read_tail`]).
    fn read_tail(&self, rel: &str, max: u64) -> Result<String, FsError> {
        self.fs().read_tail(rel, max)
    }
    fn read_link(&self, rel: &str) -> Result<String, FsError> {
        self.fs().read_link(rel)
    }
    fn canonical(&self, rel: &str) -> Result<String, FsError> {
        self.fs().canonical(rel)
    }
    fn exists(&self, rel: &str) -> bool {
        self.fs().exists(rel)
    }
}

/// The live machine.
pub struct HostSource {
    fs: RootedFs,
    options: SourceOptions,
    /// One NVML snapshot per run, shared by every layer (the `nccl` probe's GPU count too):
    /// NVML is asked once, and every check judges the same answer.
    nvml: std::sync::OnceLock<NvmlFacts>,
    /// The kernel log, read once: its text and the notes on its decoding belong to one read.
    kernel_log: std::sync::OnceLock<Result<Option<kernel_log::KernelLogText>, FsError>>,
    /// `--state-dir`: read once, updated under its lock.
    state: Option<state_dir::StateDir>,
}

impl HostSource {
    pub fn new(root: impl Into<PathBuf>, options: SourceOptions) -> Self {
        HostSource {
            fs: RootedFs::new(root),
            state: options.state_dir.clone().map(state_dir::StateDir::new),
            options,
            nvml: std::sync::OnceLock::new(),
            kernel_log: std::sync::OnceLock::new(),
        }
    }

    /// Record every file access into `trace` (for `gpudoctor record`).
    pub fn with_trace(mut self, trace: std::sync::Arc<std::sync::Mutex<rooted::Trace>>) -> Self {
        self.fs = self.fs.with_trace(trace);
        self
    }

    pub fn options(&self) -> &SourceOptions {
        &self.options
    }

    /// The libcuda the CUDA helper loads: `--cuda-lib`; else, under a root other than `/`, the
    /// host's (`host_lib.rs`: a Pod that requests no GPU has none of its own); under `/`, a
    /// driver root's (the GPU Operator's, GKE's); else, or when the root holds none, the
    /// loader's search for `libcuda.so.1`.
    fn cuda_library(&self) -> cuda::CudaLibrary {
        let loader = |shown: Option<String>| cuda::CudaLibrary::Loader {
            name: host_lib::CUDA_SONAME.to_string(),
            shown,
        };
        if let Some(named) = &self.options.cuda.library {
            return cuda::CudaLibrary::Loader {
                name: named.display().to_string(),
                shown: None,
            };
        }
        if self.fs.root() == Path::new("/") {
            return match host_lib::find_in_driver_roots(&self.fs, host_lib::CUDA_SONAME) {
                Some(lib) => cuda::CudaLibrary::UnderRoot {
                    root: self.fs.root().to_path_buf(),
                    relative: lib.relative().unwrap_or(host_lib::CUDA_SONAME).to_string(),
                    shown: lib.shown().to_string(),
                },
                None => loader(None),
            };
        }
        match host_lib::find_under_root(&self.fs, host_lib::CUDA_SONAME) {
            Some(lib) => cuda::CudaLibrary::UnderRoot {
                root: self.fs.root().to_path_buf(),
                relative: lib.relative().unwrap_or(host_lib::CUDA_SONAME).to_string(),
                shown: lib.shown().to_string(),
            },
            None => loader(Some(format!(
                "{} through this container's loader, none being under {} (looked in {} and its ld.so.cache)",
                host_lib::CUDA_SONAME,
                self.fs.root().display(),
                host_lib::LIB_DIRS
                    .iter()
                    .map(|d| format!("/{d}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

impl Source for HostSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Live
    }
    fn fs(&self) -> &RootedFs {
        &self.fs
    }
    fn nvml(&self) -> NvmlFacts {
        self.nvml
            .get_or_init(|| {
                let lib = host_lib::choose(
                    &self.fs,
                    self.options.nvml_lib.as_deref(),
                    host_lib::NVML_SONAME,
                );
                let mut facts =
                    nvml_live::probe(&self.options.nvml_session, lib, self.options.probe_timeout);
                // Under a root (the host mounted in a Pod), the host's /proc names the GPU
                // processes: NVML's own lookup sees the container's PID namespace.
                if self.fs.root() != Path::new("/") && self.fs.exists("proc") {
                    nvml_live::name_processes(&mut facts, |pid| {
                        nvml_live::process_name(pid, |rel| self.fs.read_to_string(rel).ok())
                    });
                }
                facts
            })
            .clone()
    }
    fn kernel_log(&self) -> Result<Option<(String, String)>, FsError> {
        text_and_origin(self.kernel_log_read())
    }
    fn kernel_log_notes(&self) -> Vec<String> {
        notes_of(self.kernel_log_read())
    }
    fn pod_resources(&self) -> PodResourcesFacts {
        let timeout = self.options.kubelet_timeout;
        if let Some(path) = &self.options.kubelet_socket {
            return podresources::probe(path, &path.display().to_string(), timeout);
        }
        // Resolved inside the root like every file, so a link cannot send us elsewhere.
        match self.fs.host_path(POD_RESOURCES_SOCKET) {
            Ok(path) => podresources::probe(path.path(), POD_RESOURCES_SOCKET, timeout),
            Err(err) => socket_error(POD_RESOURCES_SOCKET, &err),
        }
    }
    fn env_vars(&self) -> BTreeMap<String, String> {
        // `vars_os`: a variable that is not UTF-8 (name or value) is left out, never a panic.
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| is_read_env(k))
            .collect()
    }
    /// Only under a node's own root (`node_root.rs`): a copy's directories sit on another
    /// machine's disk.
    fn fs_stat(&self, rel: &str) -> Option<crate::answers::fs_stat::StatAnswer> {
        use crate::answers::fs_stat::StatAnswer;
        if !node_root::is_node_root(self.fs.root()) {
            return None;
        }
        Some(match self.fs.statvfs(rel) {
            Ok(stat) => StatAnswer::Stat(stat),
            Err(err) if err.is_missing() => StatAnswer::Missing { missing: true },
            Err(err) => StatAnswer::Failed {
                error: err.to_string(),
            },
        })
    }
    fn host_nodename(&self) -> Option<String> {
        let ns = self.fs.host_path("proc/1/ns").ok()?;
        uts::host_nodename(ns.path())
    }
    fn nccl(&self) -> NcclProbe {
        // `-g N` needs the GPU count: NVML's (what CUDA will see), else the driver's list.
        let gpus = || {
            let nvml = self.nvml();
            let n = nvml.devices.len() as u32;
            if n > 0 {
                return Some(n);
            }
            self.fs
                .read_dir("proc/driver/nvidia/gpus")
                .ok()
                .map(|d| d.len() as u32)
        };
        let nccl = &self.options.nccl;
        if nccl.progress && (nccl.run || nccl.quick) {
            held_notice("nccl", &self.nvml());
        }
        nccl::probe_live(nccl, &gpus)
    }
    fn perftest_logs(&self) -> Vec<(PathBuf, Result<String, String>)> {
        perftest_log::read_all(&self.options.perftest_logs, self.options.probe_timeout)
    }
    fn history(&self) -> Option<crate::answers::history::HistoryAnswer> {
        Some(self.state.as_ref()?.answer(self.options.probe_timeout))
    }
    fn save_history(&self, history: &crate::answers::history::History) -> Result<(), String> {
        match &self.state {
            Some(state) => state.save(history),
            None => Err("no --state-dir".to_string()),
        }
    }
    fn cuda(&self, plan: &dyn Fn() -> CudaPlan) -> CudaProbe {
        if !self.options.cuda.requested() {
            return CudaProbe::NotRequested {
                why: crate::answers::cuda::NOT_REQUESTED.to_string(),
            };
        }
        if self.options.cuda.progress {
            held_notice("cuda", &self.nvml());
        }
        cuda::probe_live(&self.options.cuda, &self.cuda_library(), &plan())
    }
    fn gpudirect(&self, targets: &dyn Fn() -> Vec<GdrTarget>) -> GdrProbe {
        if !self.options.gpudirect.run {
            return GdrProbe::NotRequested {
                why: crate::answers::gpudirect::NOT_REQUESTED.to_string(),
            };
        }
        let mut options = self.options.gpudirect.clone();
        if options.library_dir.is_none() {
            options.library_dir = self.cuda_library().directory();
        }
        gpudirect::probe_live(&options, &targets())
    }
}

/// Before an active probe runs: a stderr line per GPU NVML lists a process on (what
/// `driver.gpu_processes`, earlier in the report, names), saying its figures will be
/// inconclusive.
fn held_notice(probe: &str, nvml: &NvmlFacts) {
    for (device, processes) in nvml.held_gpus() {
        let who: Vec<String> = processes.iter().map(|p| p.describe()).collect();
        eprintln!(
            "gpudoctor: {probe}: gpu {} is held by {}: its figures will be inconclusive (driver.gpu_processes)",
            crate::text::sanitize::text(device.pci_bus_id.as_deref().unwrap_or("?")),
            crate::text::sanitize::text(&who.join(", "))
        );
    }
}

impl HostSource {
    /// `--kernel-log FILE`, else `dev/kmsg` under the root (its records so far, read without
    /// blocking), once per run.
    fn kernel_log_read(&self) -> &Result<Option<kernel_log::KernelLogText>, FsError> {
        self.kernel_log
            .get_or_init(|| match &self.options.kernel_log {
                Some(path) => kernel_log::read_named(path, self.options.probe_timeout).map(Some),
                None => kernel_log::read_rooted(&self.fs, DEV_KMSG, true),
            })
    }
}

/// A kernel log read as [`Source::kernel_log`] answers it.
fn text_and_origin(
    read: &Result<Option<kernel_log::KernelLogText>, FsError>,
) -> Result<Option<(String, String)>, FsError> {
    match read {
        Ok(Some(log)) => Ok(Some((log.text.clone(), log.origin.clone()))),
        Ok(None) => Ok(None),
        Err(err) => Err(err.clone()),
    }
}

/// The notes of a kernel log read ([`Source::kernel_log_notes`]).
fn notes_of(read: &Result<Option<kernel_log::KernelLogText>, FsError>) -> Vec<String> {
    match read {
        Ok(Some(log)) => log.decoding.notes(),
        _ => Vec::new(),
    }
}

/// Pick replay when the root is a capture (it holds `.gpudoctor/`), else the live host. A root
/// holding `.gpudoctor/` without a valid manifest is an error, never read as a live node: a
/// capture cut short would otherwise be judged with this machine's NVML.
pub fn open(root: &Path, options: SourceOptions) -> Result<Box<dyn Source>, NotACapture> {
    let fs = RootedFs::new(root);
    match fs.entry_kind(CAPTURE_DIR) {
        // A tree gpudoctor unpacked from an archive (or is building) is never a host: judging it
        // live would load its `libnvidia-ml.so.1` into this process (issue 30). The archive's
        // unpacking refuses it before this (record::unpack_capture); this holds whoever calls.
        Err(err) if err.is_missing() && crate::process::signals::is_own_temp(root) => {
            return Err(NotACapture {
                root: root.display().to_string(),
                why: format!(
                    "no {MANIFEST}, and it is a tree gpudoctor unpacked, not a host's filesystem"
                ),
            });
        }
        Err(err) if err.is_missing() => return Ok(Box::new(HostSource::new(root, options))),
        Err(err) => {
            return Err(NotACapture {
                root: root.display().to_string(),
                why: err.to_string(),
            });
        }
        Ok(_) => {}
    }
    match capture_manifest(&fs) {
        Ok(_) => {
            let replay = ReplaySource::open(root).map_err(|err| NotACapture {
                root: root.display().to_string(),
                why: err.why,
            })?;
            Ok(Box::new(
                replay
                    .with_nccl_logs(options.nccl.logs)
                    .with_perftest_logs(options.perftest_logs, options.probe_timeout)
                    .with_state_dir(options.state_dir)
                    .with_kernel_log(options.kernel_log, options.probe_timeout),
            ))
        }
        Err(why) => Err(NotACapture {
            root: root.display().to_string(),
            why,
        }),
    }
}

// A source failure as a fact family's error: the path, and the reason without it.
impl From<FsError> for crate::answers::FactError {
    fn from(err: FsError) -> Self {
        let path = err.path().to_string();
        let full = err.to_string();
        // FsError's text starts with "<path>: "; keep only the reason.
        let message = full
            .strip_prefix(&format!("{path}: "))
            .map(str::to_string)
            .unwrap_or(full);
        crate::answers::FactError { path, message }
    }
}

/// Map a root-relative lookup failure of the socket to an answer.
fn socket_error(shown: &str, err: &FsError) -> PodResourcesFacts {
    let kind = match err {
        FsError::NotFound { .. } | FsError::Dangling { .. } => RpcErrorKind::NoSocket,
        FsError::PermissionDenied { .. } => RpcErrorKind::PermissionDenied,
        FsError::EscapesRoot { .. } => RpcErrorKind::OutsideRoot,
        _ => RpcErrorKind::Other,
    };
    PodResourcesFacts::failed(shown, kind, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Whoever calls `open` on a tree gpudoctor unpacked (or is building) without a manifest
    /// gets an error, never a live source that would load the tree's NVML (issue 30).
    #[test]
    fn a_tree_gpudoctor_unpacked_is_never_a_live_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("usr/lib64")).unwrap();
        assert!(open(dir.path(), SourceOptions::default()).is_ok());
        let registration = crate::process::signals::register_temp(dir.path());
        let err = open(dir.path(), SourceOptions::default()).err().unwrap();
        assert!(err.why.contains("a tree gpudoctor unpacked"), "{err}");
        assert!(open(&dir.path().join("usr"), SourceOptions::default()).is_err());
        drop(registration);
        assert!(open(dir.path(), SourceOptions::default()).is_ok());
    }

    #[test]
    fn a_capture_time_is_the_first_recording_and_well_formed() {
        let t = |m: serde_json::Value| capture_time(&m);
        assert_eq!(
            t(json!({"time": "2025-06-01T12:00:00Z"})).as_deref(),
            Some("2025-06-01T12:00:00Z")
        );
        // Re-recorded twice: the innermost original's time.
        let chain = json!({"time": "2025-06-03T00:00:00Z", "made": {"original": {
            "time": "2025-06-02T00:00:00Z", "made": {"original": {"time": "2025-06-01T00:00:00Z"}}}}});
        assert_eq!(t(chain).as_deref(), Some("2025-06-01T00:00:00Z"));
        // Re-recorded from a hand-built fixture (no time): the recording's.
        let fixture = json!({"time": "2025-06-03T00:00:00Z", "made": {"original": {
            "time": null, "made": {"how": "hand-edited"}}}});
        assert_eq!(t(fixture).as_deref(), Some("2025-06-03T00:00:00Z"));
        // An offset is said in UTC; anything else is no time.
        assert_eq!(
            t(json!({"time": "2025-06-01T14:00:00+02:00"})).as_deref(),
            Some("2025-06-01T12:00:00Z")
        );
        for bad in [
            json!({}),
            json!({"time": 5}),
            json!({"time": "yesterday\x1b[2J"}),
        ] {
            assert_eq!(t(bad), None);
        }
    }
}
