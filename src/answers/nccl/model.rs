//! What one log says, as the `nccl` checks read it: result tables, footers, failures, transports,
//! an application's NCCL errors. Plain data and the questions asked of it (hosts, ranks, which
//! kind of log); the parser in [`super`] fills it, the checks judge it.

use std::collections::{BTreeMap, BTreeSet};

/// A quoted line is cut to this many characters.
pub const QUOTE_CHARS: usize = 300;

/// A line of the log as evidence: its 1-based number in the stream and its text (cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quoted {
    pub line: u64,
    pub text: String,
}

impl Quoted {
    pub fn new(line: u64, text: &str) -> Self {
        Quoted {
            line,
            text: cut(text.trim(), QUOTE_CHARS),
        }
    }
}

pub(crate) fn cut(text: &str, max_chars: usize) -> String {
    // No more bytes than the limit: no more chars either (every line of a big log comes here).
    if text.len() <= max_chars {
        return text.to_string();
    }
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The `#wrong` slot of a row (§3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wrong {
    /// Wrong elements summed over ranks (`#wrong`, since tag v2.13.0).
    Count(u64),
    /// `N/A`: not checked (`-c 0`, or in-place skipped).
    NotChecked,
    /// The old `error` column (max deviation, `0e+00`), before 2022-08: not a count; the run
    /// failed a check when it passed its type's tolerance ([`deviation_tolerance`]), which the
    /// `Out of bounds values` footer also counts (`NVIDIA/nccl-tests#176`).
    Deviation(f64),
}

/// The largest deviation an old nccl-tests build let pass, by data type: `DeltaMaxValue` in
/// `src/common.cu` (half and bfloat16 1e-2 — 5e-2 in some releases, float 1e-5, double 1e-12,
/// integers 1e-200: any difference). Healthy float runs print `0e+00` to `5e-07`
/// (`NVIDIA/nccl#527`, `aws/aws-ofi-nccl#65`, 1e-06 on 128 GPUs in `NVIDIA/nccl-tests#176`).
pub fn deviation_tolerance(dtype: &str) -> f64 {
    match dtype {
        "half" | "float16" | "bfloat16" => 5e-2,
        "float" | "float32" => 1e-5,
        "double" | "float64" => 1e-12,
        _ => 1e-200,
    }
}

/// One timed block of a row (out-of-place or in-place).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    pub time_us: f64,
    /// GB/s, decimal (§3).
    pub algbw: f64,
    pub busbw: f64,
    pub wrong: Wrong,
}

impl Measure {
    /// Wrong elements (`#wrong`); an old `error` column's deviation beyond `tolerance` counts
    /// as one (the column says "wrong", not how many).
    pub fn wrong_count(&self, tolerance: f64) -> u64 {
        match self.wrong {
            Wrong::Count(n) => n,
            Wrong::Deviation(d) if d.abs() > tolerance => 1,
            Wrong::NotChecked | Wrong::Deviation(_) => 0,
        }
    }

    pub fn checked(&self) -> bool {
        !matches!(self.wrong, Wrong::NotChecked)
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub line: u64,
    /// Index of its table in [`NcclLog::tables`].
    pub table: usize,
    /// Bytes (§3: the size column).
    pub size: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: Option<String>,
    pub root: Option<i64>,
    /// `None` for trace-replay rows (§3) and one-block layouts.
    pub out_of_place: Option<Measure>,
    pub in_place: Option<Measure>,
    /// The row as printed (cut), for evidence.
    pub text: String,
}

impl Row {
    /// The better busbw of the two blocks.
    pub fn peak_busbw(&self) -> f64 {
        self.measures().map(|m| m.busbw).fold(0.0, f64::max)
    }

    /// Wrong elements over both blocks.
    pub fn wrong_count(&self) -> u64 {
        let tolerance = deviation_tolerance(&self.dtype);
        self.measures().map(|m| m.wrong_count(tolerance)).sum()
    }

    pub fn measures(&self) -> impl Iterator<Item = &Measure> {
        self.out_of_place.iter().chain(self.in_place.iter())
    }
}

/// One result table: the rows under a column header, up to its footer. A log holds several when
/// a script ran several tests (or collectives) one after the other.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// `Collective test starting: all_reduce_perf` before it (since 2025-06).
    pub collective: Option<String>,
    /// The `# nThread …` line of its section, when one was printed.
    pub config: Option<TestConfig>,
    /// Rows kept for it.
    pub rows: usize,
    /// The header had the old `error` column (before 2022-08).
    pub old_error_column: bool,
    /// `Out of bounds values : N OK|FAILED`.
    pub out_of_bounds: Option<(u64, Quoted)>,
    /// `Avg bus bandwidth : X` (nccl-tests' own sweep average).
    pub avg_busbw: Option<(f64, Quoted)>,
    /// `Collective test concluded:` seen.
    pub concluded: bool,
}

impl Table {
    pub fn has_footer(&self) -> bool {
        self.avg_busbw.is_some() || self.out_of_bounds.is_some() || self.concluded
    }
}

/// The `# nThread …` line (§2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestConfig {
    pub nthread: Option<u32>,
    pub ngpus: Option<u32>,
    pub min_bytes: Option<u64>,
    pub max_bytes: Option<u64>,
    pub iters: Option<u32>,
    pub validation: Option<u32>,
}

/// A `#  Rank  0 Group  0 Pid  41234 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLine {
    pub rank: u32,
    pub host: String,
    pub device: u32,
    /// The text inside `[...]` (`0000:18:00`, or `0x1a` before 2025-02).
    pub bus_id: String,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// `Test NCCL failure`
    Nccl,
    /// `Test CUDA failure`
    Cuda,
    /// `Test timeout (Ns)`: nccl-tests' own `-T` limit expired (exit 4).
    Timeout,
}

/// `host: Test NCCL failure file:line 'error / last error'` and its siblings (§5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestFailure {
    pub kind: FailureKind,
    pub host: String,
    /// `common.cu:1057`
    pub location: String,
    /// The quoted error text (`internal error / `), empty for timeouts.
    pub error: String,
    pub quote: Quoted,
}

/// `NET/IB : Got completion …` (§11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbCompletion {
    /// libibverbs `ibv_wc_status` number.
    pub status: Option<u32>,
    pub quote: Quoted,
}

/// A collective that did not finish in time, as PyTorch's ProcessGroupNCCL watchdog reports it:
/// `[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST,
/// NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800000 milliseconds before timing out.`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectiveTimeout {
    pub rank: Option<u32>,
    /// `SeqNum`: the work item (one timeout is reported twice by newer releases).
    pub seq: Option<u64>,
    /// `ALLREDUCE`, `BROADCAST`, `_REDUCE_SCATTER_BASE`, ...
    pub op: Option<String>,
    pub timeout_ms: Option<u64>,
    pub ran_ms: Option<u64>,
    pub quote: Quoted,
}

/// Channels over one kind of path, with a first example.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathUse {
    pub channels: u64,
    pub example: Option<Quoted>,
}

/// Channels over one network (`IB`, `Socket`, a plugin's name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetUse {
    pub channels: u64,
    /// Channels whose line carries `/GDRDMA` (GPUDirect RDMA in use).
    pub gdr_channels: u64,
    pub example: Option<Quoted>,
    pub example_without_gdr: Option<Quoted>,
}

/// What NCCL said about its data paths (§9, §10). Empty without `NCCL_DEBUG=INFO`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transports {
    /// `via P2P/…`: NVLink or PCIe peer-to-peer inside a node.
    pub p2p: PathUse,
    /// P2P flavours seen: `CUMEM`, `direct pointer`, `IPC`, `MNNVL`, `indirect`.
    pub p2p_kinds: BTreeMap<String, u64>,
    /// `via SHM/…`: staged through host shared memory.
    pub shm: PathUse,
    /// `via NET/<net>/…`, by network name.
    pub net: BTreeMap<String, NetUse>,
    /// `Using network X` (the last one seen) and its line.
    pub network: Option<(String, Quoted)>,
    /// `NET/IB : Using [0]mlx5_0:1/IB …`
    pub ib_devices: Option<Quoted>,
    /// `NET/IB : No device found.`
    pub ib_no_device: Option<Quoted>,
    /// `NET/Socket : Using [0]eth0:…`
    pub socket_interfaces: Option<Quoted>,
    /// `NET/Plugin: Loaded net plugin NAME (vN)`: the plugin's name.
    pub plugin: Option<(String, Quoted)>,
    /// A "no plugin, using internal implementation" line.
    pub plugin_absent: bool,
    /// `GPU Direct RDMA Enabled for HCA …` lines.
    pub gdr_enabled_hcas: u64,
    /// `GPU Direct RDMA Disabled for HCA …` lines.
    pub gdr_disabled_hcas: u64,
    pub gdr_disabled_example: Option<Quoted>,
    /// `DMA-BUF is available on GPU device N`.
    pub dmabuf_available: bool,
    /// `NVLS multicast support is [not ]available on dev N`: the last verdict and its line.
    pub nvls_support: Option<(bool, Quoted)>,
    /// Largest `N nvls channels` count seen, and its line.
    pub nvls_channels: Option<(u32, Quoted)>,
    /// `<VAR> set by environment to <value>`.
    pub env: BTreeMap<String, String>,
}

impl Transports {
    pub fn net_channels(&self) -> u64 {
        self.net.values().map(|n| n.channels).sum()
    }
}

/// What kind of log this is (issue 15: any NCCL application's log, not only nccl-tests').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// nccl-tests output: a header, a result table, a footer or a test failure.
    NcclTests,
    /// Another program's output with NCCL lines in it (PyTorch, JAX, Megatron...): `NCCL INFO` /
    /// `NCCL WARN` lines, NCCL error strings, collective timeouts — no result table.
    Application,
    /// Neither.
    Unknown,
}

/// Everything the checks need from one log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NcclLog {
    /// Lines read, and bytes.
    pub lines: u64,
    pub bytes: u64,
    /// Lines that could not be read: not UTF-8, cut at [`super::MAX_LINE_BYTES`], or shaped like
    /// a result row but not readable as one.
    pub unreadable_lines: u64,
    pub unreadable_example: Option<Quoted>,
    /// Of those, lines cut because they were too long.
    pub overlong_lines: u64,
    /// Of those, pieces of result rows that could not be put together (the head of a row without
    /// its timings, timings without a head): nccl-tests output cut short or interleaved.
    pub row_fragments: u64,
    /// Lines of no known shape (other programs' output).
    pub other_lines: u64,
    /// `# nccl-tests version V nccl-headers=H nccl-library=L`.
    pub tests_version: Option<String>,
    pub nccl_headers: Option<u32>,
    pub nccl_library: Option<u32>,
    /// `NCCL version 2.21.5+cuda12.4` (banner or INFO).
    pub nccl_version: Option<String>,
    /// The program (`all_reduce_perf`) from the first `Collective test starting:`.
    pub collective: Option<String>,
    /// The program the log's own command line names (`$ ./build/all_reduce_perf -b 8 ...`,
    /// `mpirun ... alltoall_perf`), for logs without `Collective test starting:` (`command.rs`).
    pub command_program: Option<String>,
    /// `# nThread` lines.
    pub header_blocks: u32,
    /// `# nThread` lines that began before the test above them printed anything of its table:
    /// several processes each running its own test (a non-MPI build under mpirun, §7).
    pub per_process_headers: u32,
    pub config: Option<TestConfig>,
    /// `# Reducing maxBytes to N due to memory limitation`.
    pub reduced_max_bytes: Option<u64>,
    /// Device lines of the first test.
    pub devices: Vec<DeviceLine>,
    /// The first [`super::MAX_TABLES`] tables.
    pub tables: Vec<Table>,
    /// Tables past [`super::MAX_TABLES`]: counted, not kept (`answers/nccl/tables.rs`).
    pub dropped_tables: u64,
    /// The latest of those, for what the end of the log says ([`NcclLog::last_table`]).
    pub last_dropped: Option<Table>,
    /// The first `Out of bounds values` footer of a table past the cap that counted failures,
    /// else the first such footer.
    pub dropped_out_of_bounds: Option<(u64, Quoted)>,
    pub rows: Vec<Row>,
    /// Rows past [`super::MAX_ROWS`], and rows of tables past [`super::MAX_TABLES`].
    pub dropped_rows: u64,
    /// The last `Out of bounds values : N OK|FAILED` (every table's is in [`Table`]).
    pub out_of_bounds: Option<(u64, Quoted)>,
    /// The last `Avg bus bandwidth : X` (the sweep average, never judged: §4).
    pub avg_busbw: Option<(f64, Quoted)>,
    /// `Collective test concluded:` seen (since 2025-06).
    pub concluded: bool,
    /// `# error: TEXT` with a non-empty text.
    pub last_error: Option<Quoted>,
    pub failures: Vec<TestFailure>,
    pub failure_count: u64,
    /// ` .. host pid N: Test failure file:line` unwinding lines.
    pub trace_lines: u64,
    /// `NCCL WARN` lines (all of them counted; the first [`super::MAX_QUOTES`] kept).
    pub warnings: Vec<Quoted>,
    pub warning_count: u64,
    /// Of the WARN lines, those reporting an error (a failure, an error code, a timeout), not
    /// advice (`falling back to simple order`).
    pub error_warnings: Vec<Quoted>,
    pub error_warning_count: u64,
    pub ib_completions: Vec<IbCompletion>,
    pub ib_completion_count: u64,
    /// `Failed to open libibverbs` (no rdma-core in the image, §10), as WARN or (2.16+) INFO.
    pub ibverbs_missing: Option<Quoted>,
    /// `Failed to bind NVLink SHARP (NVLS) Multicast memory` (§13).
    pub nvls_bind_failure: Option<Quoted>,
    /// `Invalid number of GPUs: N requested but only M were found.` (§2, exit 5).
    pub invalid_gpus: Option<Quoted>,
    /// Collective timeouts reported by the application (PyTorch's ProcessGroupNCCL watchdog).
    pub timeouts: Vec<CollectiveTimeout>,
    pub timeout_count: u64,
    /// Lines outside nccl-tests' failure lines carrying an NCCL error string (§11: `unhandled
    /// system error`, `unhandled cuda error`, `remote process exited…`, `internal error`), as an
    /// application's exception prints them (`torch.distributed.DistBackendError: NCCL error in:
    /// …, unhandled system error …`).
    pub app_errors: Vec<Quoted>,
    pub app_error_count: u64,
    /// `NCCL INFO` lines.
    pub info_lines: u64,
    /// Hosts named by `host:pid:tid` prefixes of NCCL lines.
    pub info_hosts: BTreeSet<String>,
    /// Largest `nNodes N` / `nranks N` seen in NCCL INFO lines.
    pub info_nodes: Option<u32>,
    pub info_ranks: Option<u32>,
    pub transports: Transports,
    /// The last [`super::TAIL_LINES`] non-empty lines.
    pub tail: Vec<Quoted>,
}

impl NcclLog {
    /// Hosts that ran ranks: from device lines, else from NCCL line prefixes.
    pub fn hosts(&self) -> BTreeSet<&str> {
        let from_devices: BTreeSet<&str> = self.devices.iter().map(|d| d.host.as_str()).collect();
        if from_devices.is_empty() {
            self.info_hosts.iter().map(String::as_str).collect()
        } else {
            from_devices
        }
    }

    /// Nodes in the run: NCCL's own `nNodes` when it said so, else the hosts seen.
    pub fn nodes(&self) -> usize {
        let seen = self.hosts().len();
        match self.info_nodes {
            Some(n) => (n as usize).max(seen),
            None => seen,
        }
    }

    /// Ranks (GPUs) in the run: device lines — counted, or the highest rank they name when an
    /// excerpt shows only some (`#  Rank 71 …` alone means at least 72) — else NCCL's `nranks`.
    pub fn ranks(&self) -> usize {
        if self.devices.is_empty() {
            self.info_ranks.map_or(0, |n| n as usize)
        } else {
            let highest = self.devices.iter().map(|d| d.rank as usize + 1).max();
            self.devices.len().max(highest.unwrap_or(0))
        }
    }

    /// The last table of the log, kept or not.
    pub fn last_table(&self) -> Option<&Table> {
        self.last_dropped.as_ref().or(self.tables.last())
    }

    /// Every table's `Out of bounds values` footer, in order: the kept tables', then the one
    /// kept for the tables past the cap.
    pub fn out_of_bounds_footers(&self) -> impl Iterator<Item = &(u64, Quoted)> {
        self.tables
            .iter()
            .filter_map(|t| t.out_of_bounds.as_ref())
            .chain(self.dropped_out_of_bounds.as_ref())
    }

    /// Some footer line was printed.
    pub fn has_footer(&self) -> bool {
        self.tables.iter().any(Table::has_footer)
            || self.avg_busbw.is_some()
            || self.out_of_bounds.is_some()
            || self.concluded
    }

    /// The start of an nccl-tests run was printed: its `nThread` line or the lines before it.
    pub fn has_header(&self) -> bool {
        self.header_blocks > 0 || self.tests_version.is_some() || self.collective.is_some()
    }

    /// What kind of log this is.
    pub fn kind(&self) -> LogKind {
        let tests = self.has_header()
            || !self.rows.is_empty()
            || !self.devices.is_empty()
            || !self.tables.is_empty()
            || self.has_footer()
            || self.failure_count > 0
            || self.row_fragments > 0
            || self.invalid_gpus.is_some();
        if tests {
            return LogKind::NcclTests;
        }
        let app = self.has_info()
            || self.warning_count > 0
            || self.nccl_version.is_some()
            || self.timeout_count > 0
            || self.app_error_count > 0;
        if app {
            LogKind::Application
        } else {
            LogKind::Unknown
        }
    }

    pub fn largest_size(&self) -> Option<u64> {
        self.rows.iter().map(|r| r.size).max()
    }

    /// The row with the highest busbw among rows of at least `min_size` bytes.
    pub fn peak_row(&self, min_size: u64) -> Option<&Row> {
        self.rows
            .iter()
            .filter(|r| r.size >= min_size)
            .max_by(|a, b| a.peak_busbw().total_cmp(&b.peak_busbw()))
    }

    /// Rows of one table.
    pub fn table_rows(&self, table: usize) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(move |r| r.table == table)
    }

    /// Rows with wrong elements.
    pub fn wrong_rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.wrong_count() > 0)
    }

    /// NCCL_DEBUG=INFO output was present.
    pub fn has_info(&self) -> bool {
        self.info_lines > 0
    }
}

/// Human size, binary units as nccl-tests' `-b/-e` suffixes (§1): `8 B`, `128 MiB`, `8 GiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while unit + 1 < UNITS.len() && value >= 1024 && value.is_multiple_of(1024) {
        value /= 1024;
        unit += 1;
    }
    if value >= 1024 && unit + 1 < UNITS.len() {
        // Not a whole multiple: one decimal in the next unit.
        return format!("{:.1} {}", value as f64 / 1024.0, UNITS[unit + 1]);
    }
    format!("{value} {}", UNITS[unit])
}

/// `ibv_wc_status` names for the numbers NCCL prints (§11, rdma-core `libibverbs/verbs.h`).
pub fn ibv_wc_status_name(status: u32) -> Option<&'static str> {
    Some(match status {
        1 => "LOC_LEN_ERR",
        2 => "LOC_QP_OP_ERR",
        3 => "LOC_EEC_OP_ERR",
        4 => "LOC_PROT_ERR",
        5 => "WR_FLUSH_ERR",
        6 => "MW_BIND_ERR",
        7 => "BAD_RESP_ERR",
        8 => "LOC_ACCESS_ERR",
        9 => "REM_INV_REQ_ERR",
        10 => "REM_ACCESS_ERR",
        11 => "REM_OP_ERR",
        12 => "RETRY_EXC_ERR",
        13 => "RNR_RETRY_EXC_ERR",
        _ => return None,
    })
}
