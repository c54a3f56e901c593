//! The probe options `check` and `record` share: how NVML, the kernel log, the kubelet and
//! nccl-tests are reached, the active probes (CUDA, ib_write_bw) and the NCCL layer's options,
//! and which of them cannot apply to a capture (a usage error, never silently ignored).

use super::*;

/// How probes that are not files reach the node: NVML, the kernel log, the kubelet, nccl-tests.
/// Shared by `check` and `record`, so a capture asks exactly what a check would.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Load this NVML library (live nodes only: with a capture it is a usage error). Default:
    /// the host's libnvidia-ml.so.1 found under --root when it is not / (docs/deploy.md), else
    /// the loader's.
    #[arg(long, value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,

    /// Read the kernel log from this file (saved `dmesg` output) instead of /dev/kmsg, or
    /// instead of a capture's recorded kernel log.
    #[arg(long, value_name = "FILE")]
    pub kernel_log: Option<PathBuf>,

    /// Longest any one probe (NVML, kubelet, kernel log) may take, in seconds [default: 10;
    /// the kubelet's pod-resources gRPC gets 5 unless this is given]. NVML gives each GPU's
    /// handle this long after the previous one arrived (GPUs without persistence mode start
    /// one after another) and each GPU's readings this long after its handle. With a capture
    /// only a --kernel-log read is bounded by it.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: Option<u64>,

    /// Ask the kubelet's pod-resources API on this unix socket instead of
    /// /var/lib/kubelet/pod-resources/kubelet.sock under --root (live nodes only: with a
    /// capture it is a usage error).
    #[arg(long, value_name = "PATH")]
    pub kubelet_socket: Option<PathBuf>,

    /// Judge this saved ib_write_bw, ib_read_bw or ib_send_bw output (repeatable; runs
    /// nothing): did it finish, and did its largest message reach the port's rate (rdma layer,
    /// `rdma.perftest_log`). Save the client's output: one-sided tests print results there.
    #[arg(long, value_name = "FILE")]
    pub perftest_log: Vec<PathBuf>,

    /// Remember each boot's faults in DIR/history.json (created if missing; a hostPath in
    /// deploy/): a fault seen in 3 consecutive boots fails `driver.recurring_faults` (it survives
    /// reboots). Without it nothing is kept and that check skips.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    #[command(flatten)]
    pub nccl: NcclArgs,

    #[command(flatten)]
    pub active: ActiveArgs,
}

/// The active probes (docs/checks.md "Active probes"): they occupy every GPU and NIC for
/// seconds, so they run only when asked.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Active probes (run only when asked; they occupy the GPUs and NICs)")]
pub struct ActiveArgs {
    /// Prove CUDA works on every GPU NVML lists: a context and a 1 MiB copy in and out, compared
    /// (about a second per GPU; driver layer, `driver.cuda`).
    #[arg(long)]
    pub cuda: bool,

    /// Also measure host-GPU copies per GPU (from its own NUMA node and another), GPU-GPU peer
    /// copies, and a GPUDirect RDMA `ib_write_bw` loopback per GPU rail (implies --cuda; about
    /// 30 s on 8 GPUs and 8 HCAs).
    #[arg(long)]
    pub bandwidth: bool,

    /// Load this CUDA driver library (live nodes only, with --cuda or --bandwidth). Default:
    /// the host's libcuda.so.1 found under --root when it is not / (docs/deploy.md), else the
    /// loader's.
    #[arg(long, value_name = "PATH")]
    pub cuda_lib: Option<PathBuf>,

    /// Longest one step of the CUDA probe (a context, one series of copies) or one ib_write_bw
    /// loopback may take, in seconds; cuInit gets this much more per 8 GPUs (it attaches each
    /// GPU when persistence mode is off). What hangs longer is stopped and reported
    /// [default: 30].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub cuda_timeout: Option<u64>,

    /// Where ib_write_bw (perftest) is, instead of PATH, /usr/bin, ... (with --bandwidth): asked
    /// for explicitly, so a binary missing there fails the rdma layer rather than skipping.
    #[arg(long, value_name = "DIR")]
    pub perftest_dir: Option<PathBuf>,
}

/// `--cuda-timeout` when not given: a cold cuInit on 8 GPUs without persistence mode takes
/// seconds, a 256 MiB copy series well under one; 30 s is far past both.
pub const DEFAULT_CUDA_TIMEOUT_SECS: u64 = 30;

/// Why an option of the active probes cannot apply to a capture.
const CAPTURE_PROBES_NOTHING: &str = "shapes a live cuda or ib_write_bw probe, and a capture runs nothing: its recorded .gpudoctor/cuda.json and .gpudoctor/gpudirect/ are judged";

impl ActiveArgs {
    pub fn cuda_options(&self) -> CudaOptions {
        CudaOptions {
            run: self.cuda || self.bandwidth,
            bandwidth: self.bandwidth,
            library: self.cuda_lib.clone(),
            step_timeout: Duration::from_secs(self.timeout_secs()),
            ..CudaOptions::default()
        }
    }

    pub fn gpudirect_options(&self) -> GdrOptions {
        GdrOptions {
            run: self.bandwidth,
            dir: self.perftest_dir.clone(),
            timeout: Duration::from_secs(self.timeout_secs()),
            progress: true,
            // The host driver's directory, chosen by the live source (source/mod.rs).
            library_dir: None,
        }
    }

    fn timeout_secs(&self) -> u64 {
        self.cuda_timeout.unwrap_or(DEFAULT_CUDA_TIMEOUT_SECS)
    }

    /// The active-probe options given where they cannot apply: any of them with a capture
    /// (its recorded answers are judged, as `--nccl` with a capture), and on a live root the
    /// options that shape a probe without the flag that runs it.
    fn inapplicable(&self, capture: bool, out: &mut Vec<Inapplicable>) {
        let mut refuse = |given: bool, option: &'static str, why: &'static str| {
            if given {
                out.push(Inapplicable { option, why });
            }
        };
        if capture {
            refuse(
                self.cuda,
                "--cuda",
                "runs the cuda driver on this machine, and a capture runs nothing: its recorded .gpudoctor/cuda.json is judged",
            );
            refuse(
                self.bandwidth,
                "--bandwidth",
                "runs copies and ib_write_bw on this machine, and a capture runs nothing: its recorded .gpudoctor/cuda.json and .gpudoctor/gpudirect/ are judged",
            );
        }
        let cuda = !capture && (self.cuda || self.bandwidth);
        let bandwidth = !capture && self.bandwidth;
        let (cuda_why, bandwidth_why) = if capture {
            (CAPTURE_PROBES_NOTHING, CAPTURE_PROBES_NOTHING)
        } else {
            (
                "shapes the cuda probe: add --cuda or --bandwidth",
                "shapes the gpudirect loopbacks: add --bandwidth",
            )
        };
        refuse(!cuda && self.cuda_lib.is_some(), "--cuda-lib", cuda_why);
        refuse(
            !cuda && self.cuda_timeout.is_some(),
            "--cuda-timeout",
            cuda_why,
        );
        refuse(
            !bandwidth && self.perftest_dir.is_some(),
            "--perftest-dir",
            bandwidth_why,
        );
    }
}

/// A probe option given where it cannot apply: the option as typed and why (a usage error,
/// never silently ignored: DESIGN.md "Sources").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inapplicable {
    pub option: &'static str,
    pub why: &'static str,
}

impl std::fmt::Display for Inapplicable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.option, self.why)
    }
}

/// `--sample` given with a capture: a capture is not read twice; it replays the window `record
/// --sample` stored with it, if any (`check` and `record` alike: re-recording carries it over).
pub fn sample_inapplicable(sample: Option<u64>, capture: bool) -> Option<Inapplicable> {
    (capture && sample.is_some()).then_some(Inapplicable {
        option: "--sample",
        why: "reads a live node's counters twice, and a capture replays the window it was recorded with (`gpudoctor record --sample SECS`), if any",
    })
}

/// Why an option that shapes an nccl-tests run cannot apply to a capture.
const CAPTURE_RUNS_NOTHING: &str = "shapes an nccl-tests run, and a capture runs nothing: its .gpudoctor/nccl/*.log are judged (or the saved logs --nccl-log names)";

impl ProbeArgs {
    /// The probe options given that cannot apply to this source, in the order `--help` lists
    /// them. A capture answers NVML, the kubelet and NCCL from what was recorded: only
    /// `--kernel-log` and `--nccl-log` replace a recorded answer (with `--timeout` bounding the
    /// kernel-log read). On a live root the options that shape an nccl-tests run need a run.
    pub fn inapplicable(&self, capture: bool) -> Vec<Inapplicable> {
        let mut out = Vec::new();
        let mut refuse = |given: bool, option: &'static str, why: &'static str| {
            if given {
                out.push(Inapplicable { option, why });
            }
        };
        let nccl = &self.nccl;
        if capture {
            refuse(
                self.nvml_lib.is_some(),
                "--nvml-lib",
                "loads a live NVML, and a capture's NVML answers are the recorded .gpudoctor/nvml.json",
            );
            refuse(
                self.timeout.is_some() && self.kernel_log.is_none(),
                "--timeout",
                "bounds live probes, and a capture is not probed: its answers are recorded (with --kernel-log it bounds that read)",
            );
            refuse(
                self.kubelet_socket.is_some(),
                "--kubelet-socket",
                "asks a live kubelet, and a capture's pod-resources answers are the recorded .gpudoctor/pod-resources.json",
            );
            refuse(
                nccl.nccl,
                "--nccl",
                "runs nccl-tests on this machine, and a capture runs nothing: its .gpudoctor/nccl/*.log are judged; judge another saved log with --nccl-log",
            );
            refuse(
                nccl.nccl_quick,
                "--nccl-quick",
                "runs nccl-tests on this machine, and a capture runs nothing: its .gpudoctor/nccl/*.log are judged; judge another saved log with --nccl-log",
            );
        }
        let runs = !capture && (nccl.nccl || nccl.nccl_quick);
        let why = if capture {
            CAPTURE_RUNS_NOTHING
        } else {
            "shapes an nccl-tests run: add --nccl or --nccl-quick"
        };
        refuse(!runs && nccl.nccl_test.is_some(), "--nccl-test", why);
        refuse(
            !runs && nccl.nccl_tests_dir.is_some(),
            "--nccl-tests-dir",
            why,
        );
        refuse(
            !runs && nccl.nccl_launcher.is_some(),
            "--nccl-launcher",
            why,
        );
        refuse(!runs && nccl.nccl_gpus.is_some(), "--nccl-gpus", why);
        refuse(!runs && nccl.nccl_timeout.is_some(), "--nccl-timeout", why);
        self.active.inapplicable(capture, &mut out);
        out
    }

    pub fn source_options(&self) -> SourceOptions {
        SourceOptions {
            nvml_lib: self.nvml_lib.clone(),
            kernel_log: self.kernel_log.clone(),
            probe_timeout: Duration::from_secs(self.timeout.unwrap_or(10)),
            kubelet_socket: self.kubelet_socket.clone(),
            kubelet_timeout: Duration::from_secs(self.timeout.unwrap_or(5)),
            nccl: self.nccl.options(),
            cuda: self.active.cuda_options(),
            gpudirect: self.active.gpudirect_options(),
            perftest_logs: self.perftest_log.clone(),
            state_dir: self.state_dir.clone(),
            // A fresh session: callers share one run's options by cloning them.
            nvml_session: Default::default(),
        }
    }
}

/// The NCCL layer's options (docs/nccl.md). A benchmark saturates every GPU (and NIC) for a
/// minute, so the layer runs only when asked: --nccl, --nccl-quick or --nccl-log (a capture
/// with `.gpudoctor/nccl/*.log` is judged without asking).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "NCCL layer (runs only when asked, docs/nccl.md)")]
pub struct NcclArgs {
    /// Run nccl-tests and judge it: an 8 B to 8 GiB sweep (about a minute on 8 GPUs, every GPU
    /// busy), NCCL_DEBUG=INFO set so the transports NCCL chose can be read.
    #[arg(long)]
    pub nccl: bool,

    /// Run a short sweep of large sizes only (1 to 8 GiB), the fast verdict. Implies --nccl.
    #[arg(long)]
    pub nccl_quick: bool,

    /// Judge this saved nccl-tests output instead of running anything (repeatable).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["nccl", "nccl_quick"])]
    pub nccl_log: Vec<PathBuf>,

    /// The collective to run: all_reduce, all_gather, reduce_scatter, broadcast, reduce,
    /// alltoall, sendrecv, gather, scatter, hypercube (profiles state all_reduce figures)
    /// [default: all_reduce].
    #[arg(long, value_name = "NAME", value_parser = parse_nccl_test)]
    pub nccl_test: Option<String>,

    /// Where the nccl-tests binaries are (also DIR/build), on the machine gpudoctor runs on
    /// (the binary runs here, so it is not looked for under --root). Given, it is the only place
    /// looked; without it, PATH, then /opt/nccl-tests/build, /usr/local/nccl-tests/build, ...
    /// A requested run whose binary is not found fails the nccl layer (exit 1).
    #[arg(long, value_name = "DIR")]
    pub nccl_tests_dir: Option<PathBuf>,

    /// Start the test through this launcher, passed through unchanged, for multi-node runs:
    /// "mpirun -np 16 -H a:8,b:8 -x NCCL_DEBUG". Each rank then drives one GPU (-g 1).
    #[arg(long, value_name = "CMD")]
    pub nccl_launcher: Option<String>,

    /// GPUs each test process drives (-g) [default: the GPUs NVML sees; 1 with a launcher].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub nccl_gpus: Option<u32>,

    /// Kill the run, with every process it started, after this many seconds; the output so
    /// far is judged (a hang is a finding) [default: 300].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub nccl_timeout: Option<u64>,
}

/// `--nccl-timeout` when not given: long enough for the full 8 B to 8 GiB sweep on 8 GPUs.
pub const DEFAULT_NCCL_TIMEOUT_SECS: u64 = 300;

impl NcclArgs {
    pub fn options(&self) -> NcclOptions {
        NcclOptions {
            run: self.nccl || self.nccl_quick,
            quick: self.nccl_quick,
            test: self
                .nccl_test
                .clone()
                .unwrap_or_else(|| "all_reduce".to_string()),
            tests_dir: self.nccl_tests_dir.clone(),
            launcher: self.nccl_launcher.clone(),
            gpus: self.nccl_gpus,
            timeout: Duration::from_secs(self.nccl_timeout.unwrap_or(DEFAULT_NCCL_TIMEOUT_SECS)),
            logs: self.nccl_log.clone(),
            progress: true,
        }
    }
}

fn parse_nccl_test(s: &str) -> Result<String, String> {
    let name = s.trim().trim_end_matches("_perf");
    if crate::source::nccl::TESTS.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(format!(
            "unknown nccl test `{s}`; tests are: {}",
            crate::source::nccl::TESTS.join(", ")
        ))
    }
}
