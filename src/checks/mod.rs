//! Policy: each layer's checks judge facts and return results. One file per layer; this module
//! holds the registry (code, layer, title, explanation, function), the [`Context`] that gathers
//! and memoises facts, and the [`Outcome`] builder checks return.
//!
//! Adding a check touches four places (DESIGN.md): a parser in `facts/` if it needs new facts,
//! the check function with a unit test, one row in [`registry`], and a fixture that makes it fire.

pub mod active;
pub mod causes;
pub mod cdi_spec;
pub mod container;
pub mod dev_char;
pub mod device_plugin;
pub mod disk;
pub mod driver;
pub mod gpu_counters;
pub mod gpu_health;
pub mod gpu_processes;
pub(crate) mod history;
pub mod machine_checks;
pub mod missing;
pub mod nccl;
pub mod nvlink;
pub mod nvml_errors;
pub mod off_nvml;
pub(crate) mod rates;
pub mod rdma;
pub mod recurring;
pub mod sriov;
pub mod toolkit;
pub mod topology;
pub mod xid;

use std::cell::OnceCell;
use std::collections::BTreeMap;

use crate::answers::FactError;
use crate::answers::nvml::{NvmlError, NvmlFacts};
use crate::answers::pod_resources::PodResourcesFacts;
use crate::facts::cdi::CdiFacts;
use crate::facts::k8s::KubeletFacts;
use crate::facts::modules::LoadedModules;
use crate::facts::pci::PciFacts;
use crate::facts::toolkit::{RuntimeFacts, ToolkitFacts};
use crate::facts::{cdi, k8s, modules, nvidia, pci, toolkit as toolkit_facts};
use crate::profile::{self, Profile};
use crate::report::{Action, Evidence, Figure, Layer, Status};
use crate::source::{FsError, Source};

/// Most unreadable files [`Outcome::with_unread`] lists one by one.
pub const MAX_UNREAD_EVIDENCE: usize = 32;

/// What to do about an input a partial capture lacks.
pub const NOT_READ_HINT: &str = "the input is missing from --root: re-record the node with `gpudoctor record` (a capture made by hand or cut short lacks it), or mount the host's whole /sys and /proc; `ls` the path on the node to confirm the kernel has it";

/// What `gpudoctor explain CODE` prints.
#[derive(Debug, Clone, Copy)]
pub struct Explain {
    /// The files and probes the check reads.
    pub reads: &'static str,
    /// What a healthy node shows.
    pub expects: &'static str,
    /// Why it matters to a GPU workload.
    pub why: &'static str,
    /// How to fix a failure.
    pub fix: &'static str,
}

/// One registered check.
#[derive(Clone, Copy)]
pub struct CheckDef {
    pub code: &'static str,
    pub layer: Layer,
    pub title: &'static str,
    pub explain: Explain,
    pub run: fn(&Context<'_>) -> Outcome,
}

/// Every check, in walk order within each layer.
pub fn registry() -> Vec<CheckDef> {
    let mut all = driver::checks();
    all.extend(xid::checks());
    all.extend(gpu_health::checks());
    all.extend(gpu_counters::checks());
    all.extend(recurring::checks());
    all.extend(machine_checks::checks());
    // Before the active probes (the end of this list): who else holds the GPUs they measure.
    all.extend(gpu_processes::checks());
    all.extend(nvlink::checks());
    all.extend(rdma::checks());
    all.extend(sriov::checks());
    all.extend(toolkit::checks());
    all.extend(dev_char::checks());
    all.extend(disk::checks());
    all.extend(container::checks());
    all.extend(device_plugin::checks());
    all.extend(topology::checks());
    all.extend(nccl::checks());
    // Each row names its own layer (driver, topology, nvlink, rdma) and runs after that
    // layer's passive checks.
    all.extend(active::checks());
    all
}

pub fn find(code: &str) -> Option<CheckDef> {
    registry().into_iter().find(|c| c.code == code)
}

/// What a check decided. The engine adds code and title to make a
/// [`CheckResult`](crate::report::CheckResult).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    pub hint: Option<String>,
    pub action: Action,
    /// Numbers measured on the way (XID counts, bus bandwidth, port rates), exported as metrics.
    pub figures: Vec<Figure>,
    /// What ties a finding to others: its GPUs and the cause its check named. Boxed and absent
    /// on most outcomes, to keep `Outcome` (the error of many helpers) small.
    pub ties: Option<Box<Ties>>,
    /// A pass that judged nothing but the kernel log and found nothing in it: a layer whose
    /// other checks all skip is `skip`, not `pass`, on such checks alone (the engine decides).
    pub log_only: bool,
}

/// What ties a finding to others ([`Outcome::ties`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ties {
    /// The GPUs (PCI bus ids) a finding is wholly about (`CheckResult::gpus`).
    pub gpus: Vec<String>,
    /// The cause the check named, as its declared row in [`causes::CAUSES`] (the engine confirms
    /// that this cause warned or failed before it marks the finding `explained_by` it).
    pub follows_from: Option<&'static causes::Cause>,
}

impl Outcome {
    fn new(status: Status, summary: impl Into<String>) -> Self {
        Outcome {
            status,
            summary: summary.into(),
            evidence: Vec::new(),
            hint: None,
            action: Action::None,
            figures: Vec::new(),
            ties: None,
            log_only: false,
        }
    }

    /// Mark a pass as [`Outcome::log_only`].
    pub fn log_only(mut self) -> Self {
        self.log_only = true;
        self
    }
    pub fn pass(summary: impl Into<String>) -> Self {
        Outcome::new(Status::Pass, summary)
    }
    pub fn warn(summary: impl Into<String>) -> Self {
        Outcome::new(Status::Warn, summary)
    }
    pub fn fail(summary: impl Into<String>) -> Self {
        Outcome::new(Status::Fail, summary)
    }
    pub fn skip(summary: impl Into<String>) -> Self {
        Outcome::new(Status::Skip, summary)
    }
    pub fn error(summary: impl Into<String>) -> Self {
        Outcome::new(Status::Error, summary)
    }
    /// "Could not read X": an `error` naming the path, with the generic hint.
    pub fn unreadable(err: &FactError) -> Self {
        Outcome::error(format!("could not read {}: {}", err.path, err.message))
            .evidence(Evidence::new(&err.path, &err.message))
            .hint("check that gpudoctor runs as root and that --root points at the node's root (a DaemonSet mounts it at /host)")
    }
    /// A finding the unread `problems` could explain is held back: a `warn` or `fail` becomes
    /// an `error` that names them ("not read: <path> missing — partial capture or kernel older
    /// than N"), the verdict it would have given kept in the summary (DESIGN.md "Missing is not
    /// absent": a capture without a file must not be judged as hardware without what the file
    /// describes). Without problems nothing changes; a pass or skip goes through
    /// [`Outcome::with_unread`].
    pub fn held_back_by<'e>(mut self, problems: impl IntoIterator<Item = &'e FactError>) -> Self {
        let problems: Vec<&FactError> = problems.into_iter().collect();
        let Some(first) = problems.first() else {
            return self;
        };
        if !matches!(self.status, Status::Warn | Status::Fail) {
            return self.with_unread(problems);
        }
        let what = match problems.len() {
            1 => format!("not read: {} {}", first.path, first.message),
            n => format!(
                "not read: {n} inputs (first {} {})",
                first.path, first.message
            ),
        };
        self.summary = format!("{what}; judged without it: {}", self.summary);
        self.status = Status::Error;
        self.action = Action::None;
        self.hint = Some(NOT_READ_HINT.to_string());
        let shown = problems.len().min(MAX_UNREAD_EVIDENCE);
        self.evidence.extend(problems[..shown].iter().map(|p| {
            Evidence::new(&p.path, &p.message).expected("present on every supported kernel")
        }));
        self
    }

    /// Inputs the check needed but could not read or parse (the `problems` that facts collect
    /// instead of failing): each becomes evidence naming its path. A pass or skip becomes an
    /// `error` — part of the node went unjudged, and a pass over an unreadable file would mislead
    /// (DESIGN.md: `error`, could not be evaluated); a warning or failure found in what was
    /// readable stands, with the unread files added to it.
    pub fn with_unread<'e>(mut self, problems: impl IntoIterator<Item = &'e FactError>) -> Self {
        let problems: Vec<&FactError> = problems.into_iter().collect();
        let Some(first) = problems.first() else {
            return self;
        };
        let what = match problems.len() {
            1 => format!("could not read {}: {}", first.path, first.message),
            n => format!(
                "could not read {n} input files (first {}: {})",
                first.path, first.message
            ),
        };
        if matches!(self.status, Status::Pass | Status::Skip | Status::NotRun) {
            self.summary = format!("{what}; judged without: {}", self.summary);
            self.status = Status::Error;
            if self.hint.is_none() {
                self.hint = Some("read the file by hand (`cat <path>`): an i/o error from sysfs points at the device itself; a permission error means gpudoctor needs root and the host's /sys and /proc (a DaemonSet mounts them under /host)".to_string());
            }
        } else {
            self.summary = format!("{}; {what}", self.summary);
        }
        let shown = problems.len().min(MAX_UNREAD_EVIDENCE);
        self.evidence.extend(
            problems[..shown].iter().map(|p| {
                Evidence::new(&p.path, &p.message).expected("a readable, well-formed file")
            }),
        );
        if problems.len() > shown {
            self.evidence.push(Evidence::new(
                "…",
                format!("{} more unreadable files", problems.len() - shown),
            ));
        }
        self
    }
    /// Files the check could have used but did without (it fell back to another source, or
    /// needed them only in a case that did not arise): named in the summary and the evidence,
    /// status unchanged.
    pub fn noting_unread<'e>(mut self, problems: impl IntoIterator<Item = &'e FactError>) -> Self {
        let problems: Vec<&FactError> = problems.into_iter().collect();
        let Some(first) = problems.first() else {
            return self;
        };
        self.summary = match problems.len() {
            1 => format!(
                "{} (could not read {}: {}; judged without it)",
                self.summary, first.path, first.message
            ),
            n => format!(
                "{} (could not read {n} files, first {}: {}; judged without them)",
                self.summary, first.path, first.message
            ),
        };
        let shown = problems.len().min(MAX_UNREAD_EVIDENCE);
        self.evidence.extend(
            problems[..shown]
                .iter()
                .map(|p| Evidence::new(&p.path, &p.message).expected("a readable file")),
        );
        self
    }
    pub fn evidence(mut self, evidence: Evidence) -> Self {
        self.evidence.push(evidence);
        self
    }
    pub fn evidence_all(mut self, evidence: impl IntoIterator<Item = Evidence>) -> Self {
        self.evidence.extend(evidence);
        self
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn action(mut self, action: Action) -> Self {
        self.action = action;
        self
    }
    /// The GPUs (PCI bus ids) the finding is wholly about: only when every part of it names one.
    pub fn about_gpus<S: Into<String>>(mut self, gpus: impl IntoIterator<Item = S>) -> Self {
        let all = &mut self.ties.get_or_insert_default().gpus;
        for gpu in gpus {
            let gpu = gpu.into();
            if !all.contains(&gpu) {
                all.push(gpu);
            }
        }
        self
    }
    /// This finding follows from the finding of check `cause` (a declared
    /// [`causes::When::Declared`] pair): the engine marks it `explained_by` that cause's root
    /// when the cause warned or failed, and leaves it a finding of its own otherwise. A code no
    /// `Declared` row names as a cause is ignored (a unit test holds every call).
    pub fn follows_from(mut self, cause: &str) -> Self {
        self.ties.get_or_insert_default().follows_from = causes::CAUSES
            .iter()
            .find(|c| c.cause == cause && c.when == causes::When::Declared);
        self
    }
    /// Attach measured figures (any status: a passing check's numbers are worth graphing too).
    pub fn figures(mut self, figures: impl IntoIterator<Item = Figure>) -> Self {
        self.figures.extend(figures);
        self
    }
}

/// Facts for the checks, each gathered at most once per run. Checks ask the context, never the
/// source's paths directly, so that a fact family is parsed once and every check sees the same.
pub struct Context<'a> {
    source: &'a dyn Source,
    /// The source's reads remembered while the context lives: each file under the root is
    /// opened once per run, whichever fact families read it (`source/rooted/memo.rs`).
    _reads: crate::source::RunReads,
    pci: OnceCell<Result<PciFacts, FactError>>,
    modules: OnceCell<Result<LoadedModules, FactError>>,
    nvml: OnceCell<NvmlFacts>,
    gpus_lost: OnceCell<Vec<Option<(String, NvmlError)>>>,
    module_version: OnceCell<Result<Option<(String, &'static str)>, FactError>>,
    kernel_log: OnceCell<Result<Option<(String, String)>, FsError>>,
    kernel_events: OnceCell<Option<crate::facts::xid::KernelLog>>,
    boot: OnceCell<crate::facts::boot::BootFacts>,
    sample: OnceCell<Result<Option<crate::answers::baseline::Baseline>, FactError>>,
    forced_sample: Option<crate::answers::baseline::Baseline>,
    profile: OnceCell<Option<Profile>>,
    forced_profile: Option<Profile>,
    pod_interfaces: Vec<String>,
    rdma: OnceCell<Result<crate::facts::rdma::RdmaFacts, FactError>>,
    sriov: OnceCell<crate::facts::sriov::SriovFacts>,
    // Kubernetes and the container stack (toolkit and device-plugin layers).
    kubelet: OnceCell<KubeletFacts>,
    pod_resources: OnceCell<PodResourcesFacts>,
    toolkit: OnceCell<ToolkitFacts>,
    runtime: OnceCell<Result<Option<RuntimeFacts>, FactError>>,
    cdi: OnceCell<CdiFacts>,
    validations: OnceCell<Result<Option<Vec<String>>, FactError>>,
    env: OnceCell<BTreeMap<String, String>>,
    disk: OnceCell<crate::facts::disk::DiskFacts>,
    // The topology layer.
    topology: OnceCell<Result<crate::facts::topology::Topology, FactError>>,
    kubelet_config:
        OnceCell<Result<Option<(crate::facts::kubelet::KubeletConfig, String)>, FactError>>,
    // The NCCL layer: one benchmark run (or the logs) per walk.
    nccl: OnceCell<crate::answers::nccl::NcclProbe>,
    // The active probes (`--cuda`, `--bandwidth`): run once, when a check first asks.
    cuda: OnceCell<crate::answers::cuda::CudaProbe>,
    gpudirect: OnceCell<crate::answers::gpudirect::GdrProbe>,
}

impl<'a> Context<'a> {
    pub fn new(source: &'a dyn Source) -> Self {
        Context {
            source,
            _reads: source.fs().remember_reads(),
            pci: OnceCell::new(),
            modules: OnceCell::new(),
            nvml: OnceCell::new(),
            gpus_lost: OnceCell::new(),
            module_version: OnceCell::new(),
            kernel_log: OnceCell::new(),
            kernel_events: OnceCell::new(),
            boot: OnceCell::new(),
            sample: OnceCell::new(),
            forced_sample: None,
            profile: OnceCell::new(),
            forced_profile: None,
            pod_interfaces: Vec::new(),
            nccl: OnceCell::new(),
            cuda: OnceCell::new(),
            gpudirect: OnceCell::new(),
            rdma: OnceCell::new(),
            sriov: OnceCell::new(),
            kubelet: OnceCell::new(),
            pod_resources: OnceCell::new(),
            toolkit: OnceCell::new(),
            runtime: OnceCell::new(),
            cdi: OnceCell::new(),
            validations: OnceCell::new(),
            env: OnceCell::new(),
            disk: OnceCell::new(),
            topology: OnceCell::new(),
            kubelet_config: OnceCell::new(),
        }
    }

    /// SR-IOV PFs and their VFs, for the PCI functions on this node.
    pub fn sriov(&self) -> &crate::facts::sriov::SriovFacts {
        self.sriov.get_or_init(|| {
            // The judged functions, and of the rest the classes SR-IOV PFs come in that the
            // SR-IOV device plugin advertises (its `accelerator` type and NVMe): mass storage
            // 0x01, co-processors 0x0b (QAT), processing accelerators 0x12 (FEC) — not the
            // uncore's thousands of system functions (0x08, 0x11), which would cost a probe
            // each (docs/performance.md). Their NUMA node was not read; VF locality only
            // matters for NICs and GPUs, which are judged.
            let functions: Vec<(String, Option<u32>)> = match self.pci() {
                Ok(pci) => pci
                    .functions
                    .iter()
                    // A bridge has no SR-IOV capability (type 1 header): nothing to ask.
                    .filter(|f| f.class >> 8 != 0x0604)
                    .map(|f| (f.bdf.clone(), f.numa_node))
                    .chain(
                        pci.unjudged
                            .iter()
                            .filter(|f| matches!(f.class >> 16, 0x01 | 0x0b | 0x12))
                            .map(|f| (f.bdf.clone(), None)),
                    )
                    .collect(),
                Err(_) => Vec::new(),
            };
            crate::facts::sriov::gather(self.source, &functions)
        })
    }

    /// RDMA devices and ports from /sys/class/infiniband (their `hw_counters/` too when a
    /// `--sample` window is judged).
    pub fn rdma(&self) -> &Result<crate::facts::rdma::RdmaFacts, FactError> {
        self.rdma.get_or_init(|| {
            crate::facts::rdma::gather_with(self.source, matches!(self.sample(), Ok(Some(_))))
        })
    }

    /// Judge counters over this `--sample` window (`check --sample` on a live node).
    pub fn with_sample(mut self, baseline: Option<crate::answers::baseline::Baseline>) -> Self {
        self.forced_sample = baseline;
        self
    }

    /// The first reading of a `--sample` window: the one given to the context, else the
    /// source's (a capture's `.gpudoctor/sample.json`); `Ok(None)` without a window.
    pub fn sample(&self) -> Result<Option<&crate::answers::baseline::Baseline>, &FactError> {
        self.sample
            .get_or_init(|| match &self.forced_sample {
                Some(b) => Ok(Some(b.clone())),
                None => self.source.baseline(),
            })
            .as_ref()
            .map(Option::as_ref)
    }

    /// nccl-tests results: run once per walk (live `--nccl`), or read from logs.
    pub fn nccl(&self) -> &crate::answers::nccl::NcclProbe {
        self.nccl.get_or_init(|| self.source.nccl())
    }

    /// The nccl-tests results if the walk already asked for them: never starts a benchmark
    /// (`snapshot` must not run one the checks did not).
    pub fn nccl_if_asked(&self) -> Option<&crate::answers::nccl::NcclProbe> {
        self.nccl.get()
    }

    /// The CUDA probe's answer: run once per walk (live `--cuda`/`--bandwidth`, with the plan
    /// built from NVML and the topology only then), or read from a capture.
    pub fn cuda(&self) -> &crate::answers::cuda::CudaProbe {
        self.cuda
            .get_or_init(|| self.source.cuda(&|| active::cuda_plan(self)))
    }

    /// The CUDA probe's answer if the walk already asked for it (never starts it).
    pub fn cuda_if_asked(&self) -> Option<&crate::answers::cuda::CudaProbe> {
        self.cuda.get()
    }

    /// The GPUDirect RDMA loopbacks: run once per walk (live `--bandwidth`), or read.
    pub fn gpudirect(&self) -> &crate::answers::gpudirect::GdrProbe {
        self.gpudirect
            .get_or_init(|| self.source.gpudirect(&|| active::gdr_targets(self)))
    }

    /// The loopbacks if the walk already asked for them (never starts them).
    pub fn gpudirect_if_asked(&self) -> Option<&crate::answers::gpudirect::GdrProbe> {
        self.gpudirect.get()
    }

    /// Judge against this profile instead of choosing one from the GPUs (`--profile`).
    pub fn with_profile(mut self, profile: Option<Profile>) -> Self {
        self.forced_profile = profile;
        self
    }

    /// Inside a Pod, the secondary interfaces to judge by name (`--pod-interface`) instead of
    /// Multus's default `net1`, `net2`, ...
    pub fn with_pod_interfaces(mut self, names: Vec<String>) -> Self {
        self.pod_interfaces = names;
        self
    }

    /// `--pod-interface` names; empty = Multus's default names.
    pub fn pod_interfaces(&self) -> &[String] {
        &self.pod_interfaces
    }

    /// The profile in force: `--profile`, else the built-in that matches NVML's GPU names (its
    /// RoCE variant when the node's GPU rails are Ethernet, `profile::by_fabric`), else none
    /// (consistency checks only).
    pub fn profile(&self) -> Option<&Profile> {
        self.profile
            .get_or_init(|| {
                // The fabric decides between a platform's InfiniBand and RoCE variants, and
                // which Ethernet ports are a RoCE profile's rails.
                let ports = || -> Vec<profile::FabricPort<'_>> {
                    match self.rdma() {
                        Ok(rdma) => rdma
                            .devices
                            .iter()
                            .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
                            .map(|(d, p)| {
                                let layer = p.link_layer.as_deref().unwrap_or("");
                                (d.name.as_str(), layer, p.rate_gbps)
                            })
                            .collect(),
                        Err(_) => Vec::new(),
                    }
                };
                if let Some(forced) = &self.forced_profile {
                    return Some(profile::with_rails(forced.clone(), &ports()));
                }
                let nvml = self.nvml();
                let names: Vec<&str> = nvml
                    .devices
                    .iter()
                    .filter_map(|d| d.name.as_deref())
                    .collect();
                let chosen = profile::select_auto(&names)?;
                Some(profile::by_fabric(chosen, &ports()))
            })
            .as_ref()
    }

    pub fn source(&self) -> &dyn Source {
        self.source
    }

    pub fn pci(&self) -> &Result<PciFacts, FactError> {
        self.pci.get_or_init(|| pci::gather(self.source))
    }

    pub fn modules(&self) -> &Result<LoadedModules, FactError> {
        self.modules.get_or_init(|| modules::gather(self.source))
    }

    pub fn nvml(&self) -> &NvmlFacts {
        self.nvml.get_or_init(|| self.source.nvml())
    }

    /// NVML's answer if a check asked for it this run, without asking (a run limited to layers
    /// that never read NVML must not start the probe for the report's GPU identities).
    pub fn nvml_if_read(&self) -> Option<&NvmlFacts> {
        self.nvml.get()
    }

    /// Each NVML device's first reading that answered `GPU_IS_LOST` or `RESET_REQUIRED`
    /// ([`NvmlDevice::lost_at`](crate::answers::nvml::NvmlDevice::lost_at)), in the order of
    /// `nvml().devices`. Worked out once per run: it goes through every reading of every link
    /// of a GPU, and most GPU checks ask (it was a third of a replay's instructions).
    pub fn gpus_lost(&self) -> &[Option<(String, NvmlError)>] {
        self.gpus_lost.get_or_init(|| {
            self.nvml()
                .devices
                .iter()
                .map(|d| d.lost_at().map(|(at, err)| (at, err.clone())))
                .collect()
        })
    }

    /// The loaded nvidia module's version and the file it came from.
    pub fn module_version(&self) -> &Result<Option<(String, &'static str)>, FactError> {
        self.module_version
            .get_or_init(|| nvidia::gather_module_version(self.source))
    }

    /// The kernel log and where it came from (`dev/kmsg`, `--kernel-log`, `.gpudoctor/kmsg.txt`).
    pub fn kernel_log(&self) -> &Result<Option<(String, String)>, FsError> {
        self.kernel_log.get_or_init(|| self.source.kernel_log())
    }

    /// The kernel log parsed once for every check that reads it (XIDs, SXIDs, AER reports,
    /// recovery markers); `None` when there is no log or it could not be read
    /// ([`Context::kernel_log`] says which).
    pub fn kernel_events(&self) -> Option<&crate::facts::xid::KernelLog> {
        self.kernel_events
            .get_or_init(|| match self.kernel_log() {
                Ok(Some((text, _))) => Some(crate::facts::xid::parse_kernel_log(text)),
                _ => None,
            })
            .as_ref()
    }

    /// Uptime and boot time (`/proc/uptime`, `/proc/stat`).
    pub fn boot(&self) -> &crate::facts::boot::BootFacts {
        self.boot
            .get_or_init(|| crate::facts::boot::gather(self.source))
    }

    /// Where the kernel log was read from (`dev/kmsg`, a capture's kmsg.txt, `--kernel-log`),
    /// for evidence; empty when none was.
    pub fn kernel_log_origin(&self) -> String {
        match self.kernel_log() {
            Ok(Some((_, from))) => from.clone(),
            _ => String::new(),
        }
    }

    /// The node's clock for ages and rates: boot time plus uptime as "now" when both were
    /// read (so a replay ages events as the live run did), else this machine's clock on a live
    /// node, else unknown.
    pub fn clock(&self) -> crate::facts::xid::Clock {
        let live_now = (self.source.kind() == crate::report::SourceKind::Live)
            .then(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_secs_f64())
            })
            .flatten();
        self.boot().clock(live_now)
    }

    /// The PCI tree, NUMA nodes and device placement, from sysfs alone (topology layer).
    pub fn topology(&self) -> &Result<crate::facts::topology::Topology, FactError> {
        self.topology.get_or_init(|| {
            crate::facts::topology::gather_with(self.source, self.pci().as_ref().ok())
        })
    }

    /// The kubelet config's resource-manager policies and the file they came from.
    pub fn kubelet_config(
        &self,
    ) -> &Result<Option<(crate::facts::kubelet::KubeletConfig, String)>, FactError> {
        self.kubelet_config
            .get_or_init(|| crate::facts::kubelet::gather(self.source))
    }

    /// The kubelet's directory, config, device-plugin sockets and checkpoint.
    pub fn kubelet(&self) -> &KubeletFacts {
        self.kubelet.get_or_init(|| k8s::gather(self.source))
    }

    /// The pod-resources API's answers (live gRPC, or `.gpudoctor/pod-resources.json`).
    pub fn pod_resources(&self) -> &PodResourcesFacts {
        self.pod_resources
            .get_or_init(|| self.source.pod_resources())
    }

    /// The NVIDIA container toolkit's config and binaries.
    pub fn toolkit(&self) -> &ToolkitFacts {
        self.toolkit
            .get_or_init(|| toolkit_facts::gather_toolkit(self.source))
    }

    /// The container runtime's config (containerd with imports, or CRI-O with drop-ins).
    pub fn runtime(&self) -> &Result<Option<RuntimeFacts>, FactError> {
        self.runtime
            .get_or_init(|| toolkit_facts::gather_runtime(self.source))
    }

    /// CDI specs in the standard directories and those the toolkit or runtime config names.
    pub fn cdi(&self) -> &CdiFacts {
        self.cdi.get_or_init(|| {
            let mut extra = Vec::new();
            if let Some((_, Ok(config))) = &self.toolkit().config {
                extra.extend(config.cdi_spec_dirs.iter().cloned());
            }
            if let Ok(Some(runtime)) = self.runtime() {
                extra.extend(runtime.settings.cdi_spec_dirs.iter().cloned());
            }
            cdi::gather(self.source, &extra)
        })
    }

    /// GPU Operator validation markers: `Ok(None)` when this is not an operator node.
    pub fn validations(&self) -> &Result<Option<Vec<String>>, FactError> {
        self.validations
            .get_or_init(|| toolkit_facts::gather_validations(self.source))
    }

    /// The filesystems under the runtime's root, the kubelet's root and /var/log.
    pub fn disk(&self) -> &crate::facts::disk::DiskFacts {
        self.disk.get_or_init(|| {
            crate::facts::disk::gather(
                self.source,
                self.runtime().as_ref().ok().and_then(Option::as_ref),
            )
        })
    }

    /// The environment variables checks may read (see `source::is_read_env`).
    pub fn env(&self) -> &BTreeMap<String, String> {
        self.env.get_or_init(|| self.source.env_vars())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_prefixed_by_layer_and_explained() {
        let mut seen = HashSet::new();
        for check in registry() {
            assert!(seen.insert(check.code), "duplicate code {}", check.code);
            let prefix = check.layer.id().replace('-', "_");
            assert!(
                check.code.starts_with(&format!("{prefix}.")),
                "{} is not under {}",
                check.code,
                check.layer
            );
            for text in [
                check.title,
                check.explain.reads,
                check.explain.expects,
                check.explain.why,
                check.explain.fix,
            ] {
                assert!(
                    !text.trim().is_empty(),
                    "{} has an empty explanation",
                    check.code
                );
            }
        }
    }
}
