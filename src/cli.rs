//! Command-line types (clap derive). They are converted to plain options here; clap goes no
//! further than this file and `main.rs`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engine::RunOptions;
use crate::render::npd_conditions::Condition as NpdCondition;
use crate::report::Layer;
use crate::source::{CudaOptions, GdrOptions, NcclOptions, SourceOptions};

// The probe options `check` and `record` share live in cli/probes.rs (this file stays cli.rs:
// tests/deploy.rs reads it by path); their public paths stay `cli::*`.
pub mod judge;
mod pairs;
mod probes;
pub use judge::JudgeArgs;
pub use pairs::{DEFAULT_GPUS_PER_NODE, DEFAULT_PAIR_TIMEOUT_SECS, PairsArgs};
pub use probes::{
    ActiveArgs, DEFAULT_CUDA_TIMEOUT_SECS, DEFAULT_NCCL_TIMEOUT_SECS, Inapplicable, NcclArgs,
    ProbeArgs, sample_inapplicable,
};

const EXIT_CODES: &str = "\
Exit codes:
  0  healthy (warnings allowed, unless --strict)
  1  a layer failed (or warned, with --strict)
  2  usage error
  3  inconclusive: some checks could not be evaluated, none failed
  4  internal error";

#[derive(Debug, Parser)]
#[command(
    name = "gpudoctor",
    version,
    about = "Find the layer under a Kubernetes GPU workload that is broken, and say why.",
    long_about = "gpudoctor walks the layers data crosses on a GPU node — driver, container toolkit, \
device plugin, NUMA/PCIe topology, RDMA, SR-IOV, NVLink, NCCL — stops at the first that fails, and \
prints what failed, the evidence and what to do. It runs on a live node or replays a recorded one.",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Walk the layers and report the first that fails.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor check                               # this node\n",
        "  gpudoctor check --root /host                  # from a DaemonSet with the host's / at /host\n",
        "  gpudoctor check --root fixtures/hgx-h100-healthy   # replay a recorded node\n",
        "  gpudoctor check --format json --keep-going    # every layer, for a ticket or a pipeline\n",
        "  gpudoctor check --only driver,topology        # just these layers\n",
        "  gpudoctor check --sample 60                   # error counters as rates over a minute\n",
        "  gpudoctor check --nccl-quick                  # also run nccl-tests (1-8 GiB) and judge it\n",
        "  gpudoctor check --only nccl --nccl-log run.log   # judge a saved nccl-tests log\n",
        "  gpudoctor check --cuda                        # prove CUDA works on every GPU\n",
        "  gpudoctor check --bandwidth                   # + host-GPU, GPU-GPU and GPUDirect bandwidth\n",
        "  gpudoctor check --format markdown > ticket.md # a ticket body\n",
        "  gpudoctor check --root /host --textfile-dir /var/lib/node_exporter/textfile_collector \\\n",
        "      --save-report /var/lib/gpudoctor/last.json   # metrics for node_exporter, report kept\n",
        "  gpudoctor check --root /host --npd            # as a node-problem-detector plugin\n",
        "\n",
        "Layers: driver, toolkit, device-plugin, topology, rdma, sriov, nvlink, nccl\n",
        "\n",
        "Cause first: a finding that follows from another (nouveau loaded explains the missing\n",
        "nvidia module and NVML) is shown under its cause as a consequence, and the first failure\n",
        "names the cause (docs/report.md, `gpudoctor explain CODE` lists what explains what).\n",
        "A probe asked for that cannot run (--nccl, --nccl-quick without nccl-tests, an\n",
        "unreadable --nccl-log) fails its layer, saying where it looked.\n",
        "\n",
        "Exit codes:\n",
        "  0  healthy (warnings allowed, unless --strict)\n",
        "  1  a layer failed (or warned, with --strict)\n",
        "  2  usage error\n",
        "  3  inconclusive: some checks could not be evaluated, none failed\n",
        "  4  internal error\n",
        "\n",
        "With --npd: 0 OK, 1 problem, 2 unknown (node-problem-detector's plugin protocol), and one\n",
        "line of at most 80 bytes on stdout naming the failing layer and check."
    ))]
    Check(CheckArgs),
    /// Judge files pasted into a ticket, without the node: kernel logs, NCCL logs, perftest
    /// outputs, `nvidia-smi topo -m`, kubelet/containerd/CRI-O/CDI configs.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor judge dmesg.txt                      # a kernel log (dmesg, -T, journalctl -k)\n",
        "  gpudoctor judge dmesg.txt job.log bw.txt topo.txt   # a ticket's attachments, one report\n",
        "  nvidia-smi topo -m | gpudoctor judge -         # standard input\n",
        "  kubectl logs job/nccl-test | gpudoctor judge - --format markdown\n",
        "\n",
        "Each file's kind is told from its content; a file of no known kind is a usage error.\n",
        "The checks are `check`'s; layers no file speaks to are skip (\"needs the node\").\n",
        "\n",
        "Exit codes: as `check`: 0 healthy, 1 a layer failed (or warned, with --strict),\n",
        "2 usage error (a file unreadable or of no known kind), 3 inconclusive, 4 internal error"
    ))]
    Judge(JudgeArgs),
    /// Re-render a saved JSON report (`check --format json`, `--save-report`) in another format.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor render last.json                          # the table\n",
        "  gpudoctor render last.json --format markdown > ticket.md\n",
        "  gpudoctor render last.json --format prometheus --textfile-dir /var/lib/node_exporter/textfile_collector\n",
        "  gpudoctor check --format json | gpudoctor render - --format markdown\n",
        "\n",
        "Exit codes: 0 rendered, 2 the file is not a gpudoctor JSON report (or a pipe not closed\n",
        "within --timeout), 4 internal error (a --textfile-dir file could not be written)"
    ))]
    Render(RenderArgs),
    /// Print the JSON Schema of `check --format json` (docs/report.schema.json).
    #[command(after_help = "Example:\n  gpudoctor schema > report.schema.json")]
    Schema,
    /// List every registered check: code, layer, title.
    #[command(
        after_help = "Examples:\n  gpudoctor list-checks --format json | jq '.[].code'\n  gpudoctor list-checks --format markdown > docs/checks.md"
    )]
    ListChecks {
        #[arg(long, value_enum, default_value_t = CatalogueFormat::Table)]
        format: CatalogueFormat,
    },
    /// Explain a check: what it reads, what it expects, why it matters, how to fix it.
    #[command(after_help = "Example:\n  gpudoctor explain driver.nvml_init")]
    Explain {
        /// A check code, as printed in reports and by `list-checks` (e.g. driver.gpu_count).
        code: String,
    },
    /// Capture this node into a replayable fixture (what the checks read + probe answers).
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor record --out /tmp/node.tar.gz          # redacted, for a ticket\n",
        "  gpudoctor record --root /host --out /tmp/cap     # from a DaemonSet pod\n",
        "  gpudoctor record --sample 60 --out /tmp/cap.tar.gz   # with a counter window\n",
        "  gpudoctor check --root /tmp/node.tar.gz          # replay it anywhere\n",
        "  gpudoctor record --root sent.tar.gz --out redacted.tar.gz   # re-record a capture\n",
        "\n",
        "Host names, serial numbers, GPU/MIG UUIDs, Pod UIDs and names, filesystem UUIDs, GUIDs,\n",
        "MAC and IP (v4 and v6) addresses are replaced by consistent placeholders, as whole tokens,\n",
        "unless --no-redact is given; docs/security.md says what and how."
    ))]
    Record(RecordArgs),
    /// List the built-in platform profiles: what each expects, and its sources.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor profiles\n",
        "  gpudoctor profiles --format json | jq '.[] | {name, gpu_count, nccl_busbw_fail_gbyte_per_s}'\n",
        "\n",
        "A profile is chosen from the GPU model and count; `gpudoctor check --profile NAME|FILE`\n",
        "overrides it. Profile files are TOML with the same keys (docs/profiles.md)."
    ))]
    Profiles {
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Print the GPU/NIC topology matrix (PIX/PXB/PHB/NODE/SYS, NV#), like `nvidia-smi topo -m`
    /// but computed from sysfs, so it works without the driver.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor topo                                  # this node\n",
        "  gpudoctor topo --root fixtures/hgx-h100-healthy # a recorded node\n",
        "  gpudoctor topo --format json | jq '.matrix.cells'\n",
        "\n",
        "Classes (docs/topology.md): X self, NV# bonded NVLinks (from NVML when it answers), PIX at most\n",
        "one PCIe switch, PXB several switches, PHB through a host bridge, NODE between host bridges\n",
        "of one NUMA node, SYS across the CPU interconnect, ? not computable. See docs/topology.md.\n",
        "\n",
        "Exit codes: 0 printed, 2 usage error, 3 the PCI tree could not be read"
    ))]
    Topo(TopoArgs),
    /// Compare two nodes, or one node over time: what each layer's facts say and every check's
    /// verdict, only what differs (captures, saved reports or a live root).
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor diff healthy.tar.gz sick.tar.gz                   # two captures\n",
        "  gpudoctor diff fixtures/hgx-h100-healthy fixtures/h100-pcie-x8\n",
        "  gpudoctor diff / last-week.tar.gz                            # this node now and then\n",
        "  gpudoctor diff a.json b.json --format markdown > ticket.md   # saved reports\n",
        "\n",
        "A and B are each a capture directory or .tar.gz (replayed with today's checks), a live\n",
        "root (walked now), or a JSON report (`check --format json`, --save-report; with\n",
        "--with-facts its facts are compared too, else only verdicts and measurements).\n",
        "Identifiers (serials, UUIDs, GUIDs, host names) do not count; --all lists them.\n",
        "\n",
        "Exit codes: 0 nothing that matters differs, 1 something does, 2 usage error (an input\n",
        "that cannot be read), 4 internal error"
    ))]
    Diff(DiffArgs),
    /// Summarise many saved reports (one per node): verdicts by node and layer, fleet-wide
    /// failures apart from node faults, and nodes whose figures stray from their siblings.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor fleet reports/                          # every *.json under reports/\n",
        "  gpudoctor fleet node-*.json --format markdown > fleet.md\n",
        "  gpudoctor fleet reports/ --format json | jq '.outliers[] | {node, figure}'\n",
        "  gpudoctor fleet --prometheus http://prometheus.monitoring:9090   # no files needed\n",
        "  gpudoctor fleet reports/ --all --stale 1h\n",
        "\n",
        "The first screen counts healthy, failing, stale and unreachable nodes, then lists the\n",
        "nodes that need a look grouped by cause, with the action and each report's age.\n",
        "Collect the DaemonSet's --save-report files (one per node) into a directory, or read\n",
        "its metrics from Prometheus (--prometheus: causes by check code, no summaries).\n",
        "Files that cannot be read or are not reports are skipped with a warning on stderr.\n",
        "Two reports of one host: the worse verdict is summarised (then the file modified last),\n",
        "never the one a report's own timestamp favours; the warning names both files.\n",
        "\n",
        "Exit codes: 0 no node failing and no outlier, 1 a node's report failed (a check failed,\n",
        "or a warning under --strict) or a node is an outlier, 2 usage error (no readable report,\n",
        "a --prometheus URL that is not one), 3 Prometheus could not be read, 4 internal error"
    ))]
    Fleet(FleetArgs),
    /// Find the slow node or link of a multi-node job: each host alone first, then a two-node
    /// nccl-tests run per pair of hosts through mpirun or srun, slow pairs re-paired with fast
    /// hosts until one node or one link is left.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gpudoctor pairs --hosts gpu01,gpu02,gpu03,gpu04          # mpirun, 8 GPUs per node\n",
        "  gpudoctor pairs --hostfile hosts.txt --quick --env NCCL_IB_HCA=mlx5\n",
        "  gpudoctor pairs --quick         # in an sbatch script: runs once, srun per pair (docs/pairs.md)\n",
        "  gpudoctor pairs --launcher mpirun --launcher-args \"--allow-run-as-root\" \\\n",
        "      --hostfile /etc/mpi/hostfile --format json           # from an MPIJob's launcher\n",
        "  gpudoctor pairs --hosts 'gpu[01-16]' --all-links --no-singles  # every link once\n",
        "  gpudoctor pairs --launcher /usr/bin/mpirun.openmpi --hosts a,b,c,d  # Debian's name\n",
        "\n",
        "Round zero runs each host alone (its GPUs, then its NICs only: NCCL_P2P_DISABLE=1\n",
        "NCCL_SHM_DISABLE=1); a host slow alone is a node suspect and is never paired.\n",
        "Round one runs disjoint pairs side by side (--all-links: every pair, n-1 waves); later\n",
        "rounds pair each host of a slow or failed pair with hosts that were fast. A host slow\n",
        "with two different good partners is a node suspect; a slow pair of two hosts each fast\n",
        "elsewhere is a link suspect. Slow: below 85 % of the best pair's busbw, or below\n",
        "--profile's multi-node floor; with every pair below the floor, the far slower ones are\n",
        "still named (docs/pairs.md).\n",
        "Progress goes to stderr; each pair's command is in the output.\n",
        "\n",
        "Exit codes: 0 no suspect, 1 a suspect named, 2 usage error, 3 the runs could not tell\n",
        "(every pair slow, a host left unresolved, every pair of round one failing the same way:\n",
        "the launcher's words and the fix are named), 4 internal error"
    ))]
    Pairs(PairsArgs),
    /// The CUDA probe's helper process (`--cuda`, `--bandwidth`): gpudoctor runs itself with
    /// this to keep a hung or crashing CUDA driver out of its own process. Not for people.
    #[command(name = "__cuda-probe", hide = true)]
    CudaProbe {
        /// What to probe, as JSON (source/cuda/mod.rs `Request`).
        #[arg(long)]
        request: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TriageFormat {
    /// Human-readable (colourless).
    Table,
    /// One JSON document.
    Json,
    /// A ticket body.
    Markdown,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The reference: a capture (DIR or .tar.gz), a JSON report, or a live root (`/`).
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// The node to compare with it, in any of the same forms.
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TriageFormat::Table)]
    pub format: TriageFormat,

    /// Walk every layer of captures and live roots, even after one failed, so every verdict
    /// is compared (default: each side stops at its first failing layer, as `check` does).
    #[arg(long)]
    pub keep_going: bool,

    /// Judge captures and live roots against this profile (a built-in name or a TOML file).
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,

    /// Also list what differs but does not count towards the exit code: identifiers (serials,
    /// UUIDs, GUIDs, host names), the files facts came from, and checks that moved between
    /// pass and skip.
    #[arg(long)]
    pub all: bool,

    /// Longest any one probe of a live root may take, in seconds [default: 10; kubelet 5].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: Option<u64>,
}

impl DiffArgs {
    pub fn source_options(&self) -> SourceOptions {
        SourceOptions {
            probe_timeout: Duration::from_secs(self.timeout.unwrap_or(10)),
            kubelet_timeout: Duration::from_secs(self.timeout.unwrap_or(5)),
            ..SourceOptions::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Saved JSON reports, or directories holding them (walked for *.json).
    #[arg(
        value_name = "DIR|FILE",
        required_unless_present = "prometheus",
        conflicts_with = "prometheus"
    )]
    pub inputs: Vec<PathBuf>,

    /// Read the fleet from a Prometheus server's `gpudoctor_*` series (the DaemonSet's metrics
    /// through node-exporter) instead of saved reports: http://host:port[/prefix].
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// A report older than this is stale: 90s, 15m, 2h, 1d [default: 15m, three of the
    /// DaemonSet's five-minute runs].
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub stale: Option<Duration>,

    /// After the first screen, every node's layers, every failing check and every outlier.
    #[arg(long)]
    pub all: bool,

    /// Longest a Prometheus query may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TriageFormat::Table)]
    pub format: TriageFormat,
}

/// `90s`, `15m`, `2h`, `1d`, or plain seconds.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not an age such as 90s, 15m, 2h or 1d"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("`{text}`: the unit is s, m, h or d (15m)")),
    };
    n.checked_mul(scale)
        .filter(|&s| s > 0)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is not an age above zero"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Human-readable, one line per layer with findings under it, consequences under their cause
    /// (colour on a terminal).
    Table,
    /// One JSON document on stdout (schema: docs/report.md, docs/report.schema.json).
    Json,
    /// A ticket body: node, time, verdict, a table of layers, every finding with evidence and hint.
    Markdown,
    /// Prometheus text exposition: per-layer and per-check status gauges, run time, XID counts
    /// and other measured figures (docs/formats.md).
    Prometheus,
    /// JUnit XML for CI systems: one testcase per check, a failure with its summary, evidence
    /// and hint (docs/ci.md).
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CatalogueFormat {
    Table,
    Json,
    /// The checks catalogue as docs/checks.md holds it.
    Markdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The node's root directory: `/` on the node, the host mount in a Pod, or a recorded
    /// fixture (replayed when it holds .gpudoctor/manifest.json).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,

    /// Also write the Prometheus text to DIR/gpudoctor.prom, atomically (node_exporter's
    /// textfile collector directory), whatever --format prints.
    #[arg(long, value_name = "DIR")]
    pub textfile_dir: Option<PathBuf>,

    /// Also save the full JSON report to FILE, atomically (`gpudoctor render FILE` re-renders it).
    #[arg(long, value_name = "FILE", visible_alias = "npd-report")]
    pub save_report: Option<PathBuf>,

    /// Add what each layer's facts said (versions, inventory, links, port states, ...) to the
    /// JSON report, so `gpudoctor diff` can compare a saved report's facts, not only verdicts.
    #[arg(long)]
    pub with_facts: bool,

    /// node-problem-detector custom-plugin mode: exit 0 OK, 1 problem, 2 unknown, and one line
    /// of at most 80 bytes on stdout naming the failing layer and check (instead of --format).
    /// Runs every layer, as --keep-going does.
    #[arg(long, conflicts_with = "format")]
    pub npd: bool,

    /// With --npd: answer for one node condition (one NPD rule each, docs/deploy.md): exit 1
    /// when any failure of the node is of this class, 0 when none is, 2 when inconclusive.
    /// --npd runs every layer (--keep-going), so an early fault never hides a later one.
    #[arg(long, value_enum, value_name = "CONDITION", requires = "npd")]
    pub npd_condition: Option<NpdCondition>,

    /// Run every layer, even after one has failed.
    #[arg(long)]
    pub keep_going: bool,

    /// Run only these layers (comma-separated).
    #[arg(long, value_name = "LAYER,..", value_delimiter = ',', value_parser = parse_layer)]
    pub only: Vec<Layer>,

    /// Skip these layers (comma-separated).
    #[arg(long, value_name = "LAYER,..", value_delimiter = ',', value_parser = parse_layer)]
    pub skip: Vec<Layer>,

    /// Treat warnings as failures (exit 1).
    #[arg(long)]
    pub strict: bool,

    /// The table also lists the checks that passed with what they measured (peak bus
    /// bandwidth, copy and GPUDirect bandwidths, port rates, NVML probe times): the figures the
    /// JSON and Prometheus outputs carry. Other formats carry them already.
    #[arg(long)]
    pub verbose: bool,

    /// Judge the node against this profile instead of the one chosen from its GPU model and
    /// count: a built-in name (`gpudoctor profiles` lists them) or a TOML profile file, which
    /// may start from a built-in with `base = "hgx-h100"` (docs/profiles.md).
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,

    /// Read every error counter (InfiniBand, NVLink, PCIe replay and AER, ECC, clock events)
    /// twice, SECS seconds apart, and judge the increase instead of the totals since boot; a
    /// progress line counts down on stderr. Live nodes only (a capture made with `record
    /// --sample` replays its own window).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=crate::sample::MAX_WINDOW_S))]
    pub sample: Option<u64>,

    /// Inside a Pod: the secondary network interface to judge (an SR-IOV VF with an RDMA
    /// device), when the NetworkAttachmentDefinition names it (`sriov-net@ib0`) instead of
    /// Multus's default net1, net2, ... (repeatable or comma-separated).
    #[arg(long, value_name = "NAME,..", value_delimiter = ',')]
    pub pod_interface: Vec<String>,

    #[command(flatten)]
    pub probes: ProbeArgs,

    #[command(flatten)]
    pub unpack: UnpackArgs,
}

/// Limits for unpacking a `.tar.gz` capture given as `--root`, checked while streaming; a
/// capture past one is refused (exit 2) and nothing is left on disk (docs/security.md).
#[derive(Debug, Clone, Args)]
pub struct UnpackArgs {
    /// Most bytes a .tar.gz --root may hold once uncompressed (K, M, G suffixes).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "1G")]
    pub unpack_max_bytes: u64,

    /// Most entries (files, directories, links) a .tar.gz --root may hold.
    #[arg(long, value_name = "N", default_value_t = crate::record::unpack::DEFAULT_LIMITS.max_entries)]
    pub unpack_max_entries: u64,

    /// Largest single file a .tar.gz --root may hold (K, M, G suffixes).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "64M")]
    pub unpack_max_file_bytes: u64,
}

impl UnpackArgs {
    pub fn limits(&self) -> crate::record::UnpackLimits {
        crate::record::UnpackLimits {
            max_bytes: self.unpack_max_bytes,
            max_entries: self.unpack_max_entries,
            max_file_bytes: self.unpack_max_file_bytes,
        }
    }
}

/// `1G`, `512M`, `64K` (powers of 1024) or plain bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let shift = match unit
        .trim_end_matches(['i', 'B', 'b'])
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "`{s}`: a size is a number with an optional K, M, G or T"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}`: a size is a number with an optional K, M, G or T"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}`: too large"))
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where to write the capture: a directory, or a file ending in .tar.gz (or .tgz). A name
    /// ending in another archive's extension (.zip, .tar, .xz, ...) is a usage error.
    #[arg(long, value_name = "DIR|FILE.tar.gz")]
    pub out: PathBuf,

    /// The node's root directory (`/` on the node, the host mount in a Pod), or a capture
    /// (directory or .tar.gz) to re-record: its recorded answers are carried over and redaction
    /// applied again.
    #[arg(long, value_name = "DIR|CAPTURE", default_value = "/")]
    pub root: PathBuf,

    /// Keep host names, serials, UUIDs, GUIDs, addresses and pod names as they are.
    #[arg(long)]
    pub no_redact: bool,

    /// Replace the host name even when it is shorter than 4 characters or a common word
    /// (`gpu`, `worker`), which redaction otherwise keeps and says so: every word equal to it
    /// is replaced too, and the replay's verdict may change.
    #[arg(long, conflicts_with = "no_redact")]
    pub redact_hostname_anyway: bool,

    /// Replace --out if it is an earlier capture (a directory or .tar.gz with a valid
    /// .gpudoctor/manifest.json); anything else at --out is never replaced.
    #[arg(long)]
    pub force: bool,

    /// Read every error counter twice, SECS seconds apart, and keep both readings in the
    /// capture (the first as .gpudoctor/sample.json), so a replay judges the same window.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=crate::sample::MAX_WINDOW_S))]
    pub sample: Option<u64>,

    #[command(flatten)]
    pub probes: ProbeArgs,

    #[command(flatten)]
    pub unpack: UnpackArgs,
}

impl RecordArgs {
    pub fn source_options(&self) -> SourceOptions {
        self.probes.source_options()
    }
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// A report saved by `check --format json` or `--save-report`; `-` reads stdin.
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,

    /// The table also lists the checks that passed with what they measured (as `check
    /// --verbose`).
    #[arg(long)]
    pub verbose: bool,

    /// Also write the Prometheus text to DIR/gpudoctor.prom, atomically.
    #[arg(long, value_name = "DIR")]
    pub textfile_dir: Option<PathBuf>,

    /// Longest to wait for a pipe or FIFO given as REPORT.json to be written and closed
    /// (`render <(ssh node gpudoctor check --format json)`), in seconds; a file is read at once.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,

    /// node-problem-detector mode for one node condition, from the report another rule saved:
    /// exit 1 when any of its failures is of this class, 0 when none is, 2 when inconclusive,
    /// when a layer blocked by an earlier failure could hold one, or older than --max-age
    /// (instead of --format).
    #[arg(long, value_enum, value_name = "CONDITION", conflicts_with = "format")]
    pub npd_condition: Option<NpdCondition>,

    /// With --npd-condition: a report whose `generated_at` is more than SECS old (or absent)
    /// is unknown (exit 2), not the node's state.
    #[arg(long, value_name = "SECS", requires = "npd_condition", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_age: Option<u64>,
}

fn parse_layer(s: &str) -> Result<Layer, String> {
    s.parse()
}

impl CheckArgs {
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            // NPD's conditions are answered from every layer (render::npd_conditions): a
            // configuration fault in an early layer must not hide a broken part behind it.
            keep_going: self.keep_going || self.npd,
            only: self.only.clone(),
            skip: self.skip.clone(),
            strict: self.strict,
            profile: None,
            pod_interfaces: self.pod_interface.clone(),
            sample: None,
        }
    }

    pub fn source_options(&self) -> SourceOptions {
        self.probes.source_options()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TopoFormat {
    /// The matrix with CPU/NUMA affinity, legend and NIC legend.
    Table,
    /// One JSON document: matrix, devices, switches, NUMA nodes (docs/topology.md).
    Json,
}

#[derive(Debug, Args)]
pub struct TopoArgs {
    /// The node's root directory (`/`, the host mount in a Pod, or a recorded fixture).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TopoFormat::Table)]
    pub format: TopoFormat,

    /// Do not ask NVML for NVLinks: PCIe classes only (nothing loads the driver's library).
    #[arg(long)]
    pub no_nvml: bool,

    /// Also print a pasted `nvidia-smi topo -m` as read, below this node's matrix (`-` reads
    /// standard input): what `gpudoctor judge` reads from it. The table only.
    #[arg(long, value_name = "FILE", conflicts_with = "format")]
    pub matrix: Option<PathBuf>,

    /// Load this NVML library instead of libnvidia-ml.so.1 (live nodes only).
    #[arg(long, value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,

    #[command(flatten)]
    pub unpack: UnpackArgs,
}

impl TopoArgs {
    /// `--nvml-lib` with a capture: it loads a live NVML, and a capture's answers are recorded.
    pub fn inapplicable(&self, capture: bool) -> Vec<Inapplicable> {
        if capture && self.nvml_lib.is_some() {
            return vec![Inapplicable {
                option: "--nvml-lib",
                why: "loads a live NVML, and a capture's NVML answers are the recorded .gpudoctor/nvml.json",
            }];
        }
        Vec::new()
    }

    pub fn source_options(&self) -> SourceOptions {
        SourceOptions {
            nvml_lib: self.nvml_lib.clone(),
            ..SourceOptions::default()
        }
    }
}
