//! The JSON contract (`--format json`) that automation and tickets rely on. Renderers see only
//! these types. A change to the JSON shape bumps [`SCHEMA_VERSION`] and `docs/report.md`;
//! `docs/report.schema.json` is generated from these types ([`json_schema`]) and a test keeps it
//! current. Fields added later carry `#[serde(default)]` so older reports still load.

pub mod facts;
mod ticket;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 2;

/// The layers, in the order data crosses them (DESIGN.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Layer {
    #[serde(rename = "driver")]
    Driver,
    #[serde(rename = "toolkit")]
    Toolkit,
    #[serde(rename = "device-plugin")]
    DevicePlugin,
    #[serde(rename = "topology")]
    Topology,
    #[serde(rename = "rdma")]
    Rdma,
    #[serde(rename = "sriov")]
    Sriov,
    #[serde(rename = "nvlink")]
    Nvlink,
    #[serde(rename = "nccl")]
    Nccl,
}

impl Layer {
    pub const ALL: [Layer; 8] = [
        Layer::Driver,
        Layer::Toolkit,
        Layer::DevicePlugin,
        Layer::Topology,
        Layer::Rdma,
        Layer::Sriov,
        Layer::Nvlink,
        Layer::Nccl,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Layer::Driver => "driver",
            Layer::Toolkit => "toolkit",
            Layer::DevicePlugin => "device-plugin",
            Layer::Topology => "topology",
            Layer::Rdma => "rdma",
            Layer::Sriov => "sriov",
            Layer::Nvlink => "nvlink",
            Layer::Nccl => "nccl",
        }
    }

    /// The question the layer answers.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Driver => "does the host see healthy GPUs?",
            Layer::Toolkit => "can a container reach the GPUs?",
            Layer::DevicePlugin => "does Kubernetes see and account the GPUs?",
            Layer::Topology => "is the data path local (NUMA / PCIe)?",
            Layer::Rdma => "is the network between nodes RDMA-fast?",
            Layer::Sriov => "do secondary (Multus/SR-IOV) networks line up?",
            Layer::Nvlink => "is the GPU-to-GPU fabric whole?",
            Layer::Nccl => "do collectives run at the expected speed?",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl FromStr for Layer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        Layer::ALL
            .into_iter()
            .find(|l| l.id() == wanted || (wanted == "deviceplugin" && *l == Layer::DevicePlugin))
            .ok_or_else(|| {
                let ids: Vec<&str> = Layer::ALL.iter().map(|l| l.id()).collect();
                format!("unknown layer `{s}`; layers are: {}", ids.join(", "))
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    Skip,
    Error,
    NotRun,
}

impl Status {
    /// How bad a status is when a layer sums up its checks: fail > error > warn > pass > skip.
    pub fn severity(self) -> u8 {
        match self {
            Status::NotRun => 0,
            Status::Skip => 1,
            Status::Pass => 2,
            Status::Warn => 3,
            Status::Error => 4,
            Status::Fail => 5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::Error => "error",
            Status::NotRun => "not_run",
        }
    }

    /// A status that deserves a line of its own in a report (something to look at).
    pub fn is_finding(self) -> bool {
        matches!(self, Status::Warn | Status::Fail | Status::Error)
    }
}

/// What the operator should do; a closed set so automation can route on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    None,
    FixConfig,
    RestartComponent,
    ReloadDriver,
    ResetGpu,
    RebootNode,
    HardwareInspection,
    CheckWorkload,
}

impl Action {
    /// What the operator does, in words, for hints built from a catalogue.
    pub fn describe(self) -> &'static str {
        match self {
            Action::None => "no action needed",
            Action::FixConfig => "fix the configuration",
            Action::RestartComponent => "restart the component",
            Action::ReloadDriver => "reload the NVIDIA driver",
            Action::ResetGpu => {
                "drain the node and reset the GPU by its PCI bus id (`nvidia-smi -r -i <pci bus id>`)"
            }
            Action::RebootNode => "drain and reboot the node",
            Action::HardwareInspection => {
                "take the failing part the finding names (GPU, link, cable, NIC) out of service for inspection"
            }
            Action::CheckWorkload => "check the workload that ran on the GPU",
        }
    }
}

impl Action {
    /// [`Action::describe`] for a finding of `layer`: hardware inspection names the part that
    /// layer judges (a NIC or cable is not "the GPU").
    pub fn describe_for(self, layer: Layer) -> &'static str {
        match (self, layer) {
            (Action::HardwareInspection, Layer::Driver) => {
                "take the GPU out of service for hardware inspection"
            }
            (Action::HardwareInspection, Layer::Topology) => {
                "have the PCIe path the finding names inspected (slot, riser, retimer, cable)"
            }
            (Action::HardwareInspection, Layer::Rdma | Layer::Sriov) => {
                "have the NIC, cable or switch port the finding names inspected"
            }
            (Action::HardwareInspection, Layer::Nvlink) => {
                "have the NVLink path the finding names inspected (GPU, NVSwitch, bridge or baseboard)"
            }
            _ => self.describe(),
        }
    }
}

/// One observation behind a result: where it was read, what was there, what was expected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// Root-relative path or probe field (`sys/bus/pci/devices/0000:18:00.0/vendor`, `nvml.init`).
    pub source: String,
    pub observed: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// `observed` begins with a line quoted from the node as it was written (a kernel log line,
    /// a benchmark's output), byte for byte but for terminal escapes; gpudoctor's own words, if
    /// any, follow it in parentheses. Absent when `observed` is gpudoctor's wording.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quoted: bool,
}

impl Evidence {
    pub fn new(source: impl Into<String>, observed: impl Into<String>) -> Self {
        Evidence {
            source: source.into(),
            observed: observed.into(),
            expected: None,
            quoted: false,
        }
    }
    /// A line quoted from the node (see [`Evidence::quoted`]).
    pub fn quoting(source: impl Into<String>, line: impl Into<String>) -> Self {
        Evidence {
            quoted: true,
            ..Evidence::new(source, line)
        }
    }

    pub fn expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckResult {
    pub code: String,
    pub title: String,
    pub status: Status,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    #[serde(default)]
    pub hint: Option<String>,
    pub action: Action,
    /// Numbers the check measured, exported as Prometheus gauges (`--format prometheus`); absent
    /// when the check measured none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<Figure>,
    /// The GPUs (PCI bus ids, `0000:3a:00.0`) a finding is wholly about, where the check can say:
    /// every part of it names one of them. Absent when it is about no GPU in particular, or not
    /// only about GPUs. Ties a finding to a cause on the same GPU (an XID 48 and that GPU's ECC
    /// count), and tells a ticket which GPU to pull.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    /// The code of the failed check this finding follows from (`driver.nouveau_absent` for a
    /// missing `nvidia` module): a consequence, fixed by fixing its cause. Renderers show it
    /// under its cause; `first_failure` is never one. Absent on causes, on results that are not
    /// findings, and in schema-1 reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_by: Option<String>,
    /// The cause the check itself named (`checks::Outcome::follows_from`), kept for the engine
    /// to confirm against the other results; never serialised: `explained_by` is what a report
    /// says.
    #[serde(skip)]
    #[schemars(skip)]
    pub follows_from: Option<String>,
}

/// A number a check measured, with its stable name and labels. The Prometheus renderer exports
/// it as the gauge `gpudoctor_<name>{labels}`; docs/report.md lists every name and its labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Figure {
    pub name: FigureName,
    /// In the base unit the name ends with (seconds, bytes per second) or a plain count. Whole
    /// numbers are written as JSON integers (`3`, not `3.0`).
    #[serde(serialize_with = "whole_as_integer")]
    pub value: f64,
    /// Label name → value; names from the figure's documented set, values bounded (a GPU bus id,
    /// an XID number, a device and port), never free text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// For a count of events (XIDs, SXids, AER errors): when the first and the last of them
    /// were written, RFC 3339 UTC, where the log's stamps and the node's clock say (a ticket
    /// system sorts on them; the summary says the same in words). Absent when not known, on
    /// figures that are not event counts, and in reports before issue 46.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub first_seen: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_seen: Option<String>,
    /// The least the node's profile expects of this figure, in the figure's unit, where the
    /// check judged it against one (the NCCL busbw expectation, the copy and GPUDirect floors):
    /// `fleet` calls a node below it an outlier when its siblings' median is above it, however
    /// close the two are. Absent without a profile figure, and in reports before issue 46.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_floor_as_integer"
    )]
    pub floor: Option<f64>,
}

/// A floor as its figure's value prints ([`whole_as_integer`]).
fn whole_floor_as_integer<S: serde::Serializer>(
    value: &Option<f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => whole_as_integer(v, s),
        None => s.serialize_none(),
    }
}

/// Counts and rates print as integers when they are whole; f64 holds integers exactly up to 2^53.
fn whole_as_integer<S: serde::Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        s.serialize_i64(*value as i64)
    } else {
        s.serialize_f64(*value)
    }
}

// Figures are built from finite measurements only (`Figure::new` turns NaN into 0), so equality
// is reflexive and the report types can stay `Eq`.
impl Eq for Figure {}

impl Figure {
    pub fn new(name: FigureName, value: f64) -> Self {
        Figure {
            name,
            value: if value.is_finite() { value } else { 0.0 },
            labels: BTreeMap::new(),
            first_seen: None,
            last_seen: None,
            floor: None,
        }
    }

    /// The profile's floor this figure was judged against (see `floor`).
    pub fn floor(mut self, floor: Option<f64>) -> Self {
        self.floor = floor.filter(|f| f.is_finite());
        self
    }

    /// When the first and last of the events counted were written (see `first_seen`).
    pub fn seen(mut self, first: Option<String>, last: Option<String>) -> Self {
        self.first_seen = first;
        self.last_seen = last;
        self
    }

    pub fn label(mut self, name: &str, value: impl Into<String>) -> Self {
        self.labels.insert(name.to_string(), value.into());
        self
    }
}

/// The closed catalogue of figure names: stable metric names for dashboards and alerts. A new
/// figure adds a variant here, its HELP text and labels in [`FigureName::help`] and
/// [`FigureName::labels`], and a row in docs/report.md.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FigureName {
    /// XID records in the kernel log at run time, per GPU and XID (`driver.xid_events`).
    XidEvents,
    /// Peak NCCL bus bandwidth of a run's sweep (`nccl` layer), whatever its sizes.
    NcclBusbwPeakBytesPerSecond,
    /// The message size the peak bus bandwidth was reached at (`nccl` layer).
    NcclBusbwPeakSizeBytes,
    /// The sweep's average bus bandwidth, as nccl-tests prints it (`nccl` layer).
    NcclBusbwAverageBytesPerSecond,
    /// Signalling rate of an RDMA port (`rdma` layer), as `/sys/class/infiniband/*/ports/*/rate`
    /// gives it, in bytes per second (400 Gb/s = 5e10).
    RdmaPortRateBytesPerSecond,
    /// Time the live NVML probe spent on one GPU (`driver.nvml_init`), in seconds: a GPU that
    /// answers slowly (no persistence mode) or not at all (the budget) shows here.
    NvmlProbeSeconds,
    /// SXID records in the kernel log, per NVSwitch, SXID, severity and state
    /// (`nvlink.sxid_events`).
    SxidEvents,
    /// PCIe AER reports in the kernel log, per device, severity and state
    /// (`topology.aer_errors`).
    PcieAerEvents,
    /// How fast an error counter rose, per second: over the `--sample` window (`window` =
    /// `sample`) or as its total over the node's uptime (`window` = `uptime`). Named
    /// `counter_rate_per_second` before: Prometheus' lint (`promtool check metrics`) refuses a
    /// metric name that includes a type; reports saved under that name still read.
    #[serde(alias = "counter_rate_per_second")]
    ErrorRatePerSecond,
    /// Host↔GPU copy bandwidth of one GPU, per direction and host-memory placement
    /// (`topology.host_bandwidth`, `--bandwidth`).
    HostGpuCopyBytesPerSecond,
    /// GPU→GPU peer copy bandwidth of one ordered pair (`nvlink.p2p_bandwidth`, `--bandwidth`).
    GpuPeerCopyBytesPerSecond,
    /// GPUDirect RDMA `ib_write_bw` loopback bandwidth through one HCA port into GPU memory
    /// (`rdma.gpudirect_bandwidth`, `--bandwidth`).
    GpudirectRdmaBytesPerSecond,
}

impl FigureName {
    pub const ALL: [FigureName; 12] = [
        FigureName::XidEvents,
        FigureName::NcclBusbwPeakBytesPerSecond,
        FigureName::NcclBusbwPeakSizeBytes,
        FigureName::NcclBusbwAverageBytesPerSecond,
        FigureName::RdmaPortRateBytesPerSecond,
        FigureName::NvmlProbeSeconds,
        FigureName::SxidEvents,
        FigureName::PcieAerEvents,
        FigureName::ErrorRatePerSecond,
        FigureName::HostGpuCopyBytesPerSecond,
        FigureName::GpuPeerCopyBytesPerSecond,
        FigureName::GpudirectRdmaBytesPerSecond,
    ];

    /// The name as it appears in JSON and after `gpudoctor_` in Prometheus.
    pub fn id(self) -> &'static str {
        match self {
            FigureName::XidEvents => "xid_events",
            FigureName::NcclBusbwPeakBytesPerSecond => "nccl_busbw_peak_bytes_per_second",
            FigureName::NcclBusbwPeakSizeBytes => "nccl_busbw_peak_size_bytes",
            FigureName::NcclBusbwAverageBytesPerSecond => "nccl_busbw_average_bytes_per_second",
            FigureName::RdmaPortRateBytesPerSecond => "rdma_port_rate_bytes_per_second",
            FigureName::NvmlProbeSeconds => "nvml_probe_seconds",
            FigureName::SxidEvents => "sxid_events",
            FigureName::PcieAerEvents => "pcie_aer_events",
            FigureName::ErrorRatePerSecond => "error_rate_per_second",
            FigureName::HostGpuCopyBytesPerSecond => "host_gpu_copy_bytes_per_second",
            FigureName::GpuPeerCopyBytesPerSecond => "gpu_peer_copy_bytes_per_second",
            FigureName::GpudirectRdmaBytesPerSecond => "gpudirect_rdma_bytes_per_second",
        }
    }

    /// Prometheus HELP text: one line, what is counted and in which unit.
    pub fn help(self) -> &'static str {
        match self {
            FigureName::XidEvents => {
                "XID records in the kernel log when gpudoctor ran, by GPU bus id, XID number, catalogue severity and state (live, or history: before a reboot, driver load or GPU reset)."
            }
            FigureName::NcclBusbwPeakBytesPerSecond => {
                "Peak NCCL bus bandwidth of the last nccl-tests sweep, over all its message sizes, in bytes per second."
            }
            FigureName::NcclBusbwPeakSizeBytes => {
                "Message size at which the last nccl-tests sweep reached its peak bus bandwidth, in bytes."
            }
            FigureName::NcclBusbwAverageBytesPerSecond => {
                "Average bus bandwidth of the last nccl-tests sweep over all its sizes (nccl-tests' Avg bus bandwidth), in bytes per second."
            }
            FigureName::RdmaPortRateBytesPerSecond => {
                "Signalling rate of an RDMA port as the kernel reports it, in bytes per second."
            }
            FigureName::NvmlProbeSeconds => {
                "Time the live NVML probe spent on one GPU (its handle and every reading), in seconds; the budget when it did not answer."
            }
            FigureName::SxidEvents => {
                "NVSwitch SXID records in the kernel log, by switch bus id, SXID number, severity and state (live or history)."
            }
            FigureName::PcieAerEvents => {
                "PCIe AER reports in the kernel log, by reporting device, severity and state (live or history)."
            }
            FigureName::ErrorRatePerSecond => {
                "How fast an error counter rose, per second: over the --sample window (window=sample) or its total over the node's uptime (window=uptime)."
            }
            FigureName::HostGpuCopyBytesPerSecond => {
                "Host-GPU copy bandwidth of one GPU from pinned memory (median of timed 256 MiB copies), by direction (h2d, d2h) and NUMA placement (local, remote), in bytes per second."
            }
            FigureName::GpuPeerCopyBytesPerSecond => {
                "GPU-to-GPU peer copy bandwidth of one ordered pair (cuMemcpyPeer, 256 MiB copies), with the path between them (NV18, PIX, SYS), in bytes per second."
            }
            FigureName::GpudirectRdmaBytesPerSecond => {
                "GPUDirect RDMA ib_write_bw loopback bandwidth (BW average, 8 MiB messages) through one HCA port into the memory of its nearest GPU, in bytes per second."
            }
        }
    }

    /// The labels a figure of this name carries, and the only ones exported: every sample of a
    /// metric then has the same label names (a label a check left out is exported empty, one
    /// not listed here is dropped), so dashboards and alerts can rely on them.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            FigureName::XidEvents => &["gpu", "xid", "severity", "state"],
            FigureName::NcclBusbwPeakBytesPerSecond
            | FigureName::NcclBusbwPeakSizeBytes
            | FigureName::NcclBusbwAverageBytesPerSecond => &["test", "nodes", "ranks"],
            FigureName::RdmaPortRateBytesPerSecond => &["device", "port", "link_layer", "rail"],
            FigureName::NvmlProbeSeconds => &["gpu", "index"],
            FigureName::SxidEvents => &["switch", "sxid", "severity", "state"],
            FigureName::PcieAerEvents => &["device", "severity", "state"],
            FigureName::ErrorRatePerSecond => &["check", "device", "counter", "window"],
            FigureName::HostGpuCopyBytesPerSecond => &["gpu", "direction", "numa"],
            FigureName::GpuPeerCopyBytesPerSecond => &["gpu", "peer", "link"],
            FigureName::GpudirectRdmaBytesPerSecond => &["device", "port", "gpu"],
        }
    }
}

impl fmt::Display for FigureName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LayerReport {
    pub id: Layer,
    pub title: String,
    pub status: Status,
    /// Why a layer was skipped or not run ("blocked by driver", "not implemented yet").
    #[serde(default)]
    pub reason: Option<String>,
    pub duration_ms: u64,
    pub checks: Vec<CheckResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FirstFailure {
    pub layer: Layer,
    pub code: String,
    pub summary: String,
    #[serde(default)]
    pub hint: Option<String>,
    /// The failing check's `action`, as `gpudoctor_first_failure_info` carries it, so automation
    /// routes on the first failure without searching the layers (schema 2; absent before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

// Where a run's facts came from: the node itself, a recorded capture replayed, or files pasted
// into a ticket judged without a node (`gpudoctor judge`). (A plain
// comment: a doc comment would change the published schema, docs/report.schema.json.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Live,
    Replay,
    Files,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SourceInfo {
    pub kind: SourceKind,
    pub root: String,
    /// For a replay: when the node was recorded (the capture manifest's `time`; for a capture
    /// re-recorded from another, the first one's), RFC 3339 UTC. Absent for a live run, a
    /// hand-built fixture, and in reports before schema 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub captured_at: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeInfo {
    /// The node's name: `NODE_NAME` (the downward API's `spec.nodeName`), else the host's own
    /// hostname as the host sees it, never the Pod's.
    pub hostname: Option<String>,
    /// The Pod gpudoctor ran in, when it ran in one (its hostname); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub kernel: Option<String>,
    pub driver_version: Option<String>,
    /// What an RMA form asks for of each GPU NVML named (serial, board part number, module
    /// id), for the findings that send a GPU to hardware inspection (`ticket.rs`). Absent when
    /// NVML named none, and in reports before issue 46.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuIdentity>,
}

/// One GPU's identifiers, by PCI bus id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GpuIdentity {
    pub pci_bus_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_part_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_id: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    pub schema_version: u32,
    pub gpudoctor_version: String,
    pub source: SourceInfo,
    pub node: NodeInfo,
    /// Platform profile the checks judged against; `None` = consistency checks only.
    #[serde(default)]
    pub profile: Option<String>,
    /// When the run finished, RFC 3339 UTC (`2026-01-01T00:00:00Z`). Absent in reports from
    /// versions that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub generated_at: Option<String>,
    pub layers: Vec<LayerReport>,
    pub first_failure: Option<FirstFailure>,
    pub exit_code: i32,
    pub duration_ms: u64,
    /// What each layer's facts said (`check --with-facts`), for `gpudoctor diff` against a saved
    /// report: versions, inventory by PCI address, links, NUMA placement, port states, ...
    /// Absent unless asked for, and in reports from versions that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<facts::Facts>,
}

impl Report {
    pub fn layer(&self, layer: Layer) -> Option<&LayerReport> {
        self.layers.iter().find(|l| l.id == layer)
    }

    /// The findings that follow from the check `code` (their `explained_by` names it), in walk
    /// order.
    pub fn consequences<'r>(&'r self, code: &'r str) -> impl Iterator<Item = &'r CheckResult> {
        self.layers
            .iter()
            .flat_map(|l| l.checks.iter())
            .filter(move |c| c.explained_by.as_deref() == Some(code))
    }

    /// Every check result with a status worth acting on, in walk order.
    pub fn findings(&self) -> impl Iterator<Item = (&LayerReport, &CheckResult)> {
        self.layers
            .iter()
            .flat_map(|l| l.checks.iter().map(move |c| (l, c)))
            .filter(|(_, c)| c.status.is_finding())
    }

    /// No layer ran a check (`--only driver --skip driver`): nothing was judged, so the run is
    /// inconclusive (exit 3), never "healthy".
    pub fn nothing_ran(&self) -> bool {
        self.layers.iter().all(|l| l.checks.is_empty())
    }
}

/// The JSON Schema (draft 2020-12) of [`Report`], as `docs/report.schema.json` holds it.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Report);
    let mut text = serde_json::to_string_pretty(&schema)
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialise the schema: {e}\"}}"));
    text.push('\n');
    text
}

/// Process exit codes (README, `--help`).
pub mod exit {
    pub const HEALTHY: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INCONCLUSIVE: i32 = 3;
    pub const INTERNAL: i32 = 4;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_ids_round_trip() {
        for layer in Layer::ALL {
            assert_eq!(layer.id().parse::<Layer>().unwrap(), layer);
            assert_eq!(
                serde_json::to_string(&layer).unwrap(),
                format!("\"{}\"", layer.id())
            );
        }
        assert_eq!(
            "device_plugin".parse::<Layer>().unwrap(),
            Layer::DevicePlugin
        );
        assert!(
            "gpu"
                .parse::<Layer>()
                .unwrap_err()
                .contains("driver, toolkit")
        );
    }

    #[test]
    fn figure_names_serialize_as_their_metric_names_and_read_their_old_ones() {
        for name in FigureName::ALL {
            let json = serde_json::to_string(&name).unwrap();
            assert_eq!(json, format!("\"{}\"", name.id()));
        }
        // Reports saved before the rename (`promtool check metrics`: no type in a name).
        let old: FigureName = serde_json::from_str("\"counter_rate_per_second\"").unwrap();
        assert_eq!(old, FigureName::ErrorRatePerSecond);
    }
}
