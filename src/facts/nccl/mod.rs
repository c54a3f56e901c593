//! nccl-tests output and `NCCL_DEBUG=INFO` lines, read as a stream (reference/nccl.md).
//!
//! [`NcclLogParser`] takes a log line by line (or as raw byte chunks, split by [`LineSplitter`])
//! and keeps only what the `nccl` checks judge: the result rows, the footer, the failure and
//! warning lines, the transports NCCL chose, and the last few lines. The parser is
//! pure (bytes in, facts out, no I/O); nothing here judges (the checks decide pass/warn/fail).
//!
//! Accepted input, in any mix (nccl.md §14 checklist):
//! - launcher prefixes stripped first (§7): Open MPI `--tag-output` (`[1,0]<stdout>:`), per-rank
//!   `[0]` prefixes (leading, repeated, and in front of fields), Slurm `srun --label` (`0: `);
//! - headers of every vintage (§2): `# nccl-tests version … nccl-headers=… nccl-library=…`,
//!   `# Collective test starting:`, `# nThread …` (also the 2018 form without `#`), device lines
//!   with or without `Group` and with `[0000:18:00]` or `[0x1a]` bus ids;
//! - result tables (§3): the column header row is found by its `size`/`bytes`, `time`/`cputime`
//!   and `busbw` tokens and every row is mapped from it, counting blocks from the row's end, so
//!   `#wrong` or the old `error` column, with or without `redop`/`root`, `-I` per-iteration and
//!   `-S` timestamp columns, trace-replay rows with no out-of-place block, `N/A` and exponent
//!   numbers (`1.2e+06`) all read; a row that does not fit is counted, never guessed;
//! - footer (§4): `Out of bounds values`, `Avg bus bandwidth` (with its optional verdict),
//!   `Collective test concluded`, `# error:`;
//! - failure lines (§5): `Test NCCL failure`, `Test CUDA failure`, `Test timeout`, the unwinding
//!   ` .. host pid N: Test failure` trace, stderr's `Invalid number of GPUs`;
//! - `NCCL INFO` / `NCCL WARN` lines (§9–§11): transports per channel (`via P2P/…`, `SHM/…`,
//!   `NET/<net>/<dev>[/GDRDMA]`), `Using network`, `NET/IB : Using`, `NET/Socket : Using`,
//!   plugin lines, `GPU Direct RDMA Enabled|Disabled for HCA`, NVLS support and channel counts,
//!   `<VAR> set by environment to <value>`, IB completion errors with their `ibv_wc_status`.
//!
//! Bad input (issue 7, "Bad input"): a line with NUL or invalid UTF-8 is counted as unreadable
//! and skipped; a line longer than [`MAX_LINE_BYTES`] is cut there (the rest is discarded as it
//! arrives, so a megabyte line costs no megabyte of memory) and counted; NaN/inf in a row make
//! the row unreadable. Memory is bounded whatever the input size: at most [`MAX_ROWS`] rows,
//! [`MAX_QUOTES`] quoted lines per kind, [`TAIL_LINES`] tail lines, [`MAX_HOSTS`] host names.
//!
//! Only lines matching a known shape are interpreted (§2: MPI warnings, hwloc's "Authorization
//! required" and the like are counted as other lines).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Longer lines are cut here. nccl-tests rows are ~150 bytes, NCCL INFO lines rarely over 1 KiB
/// (the `NET/IB : Using` line on a 16-HCA node is the longest seen).
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Result rows kept. A full sweep is ~35 rows per process; duplicated per-process tables under a
/// non-MPI `mpirun` (§7) multiply that by the process count.
pub const MAX_ROWS: usize = 4096;
/// Lines kept per kind of quoted evidence (failures, warnings, IB errors, ...); more are counted.
pub const MAX_QUOTES: usize = 32;
/// A quoted line is cut to this many characters.
pub const QUOTE_CHARS: usize = 300;
/// The last lines kept, to show where a hung or crashed run stopped.
pub const TAIL_LINES: usize = 10;
/// Distinct host names remembered.
pub const MAX_HOSTS: usize = 4096;
/// Device lines kept (one per rank).
pub const MAX_DEVICES: usize = 4096;
/// The default block of a result row: time, algbw, busbw, #wrong (§3).
const DEFAULT_BLOCK: usize = 4;

/// A line of the log as evidence: its 1-based number in the stream and its text (cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quoted {
    pub line: u64,
    pub text: String,
}

impl Quoted {
    fn new(line: u64, text: &str) -> Self {
        Quoted {
            line,
            text: cut(text.trim(), QUOTE_CHARS),
        }
    }
}

/// The `#wrong` slot of a row (§3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wrong {
    /// Wrong elements summed over ranks (`#wrong`, since tag v2.13.0).
    Count(u64),
    /// `N/A`: not checked (`-c 0`, or in-place skipped).
    NotChecked,
    /// The old `error` column (max deviation, `0e+00`), before 2022-08: not a count; correctness
    /// is judged by the `Out of bounds values` footer instead (`NVIDIA/nccl-tests#176`).
    Deviation(f64),
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
    pub fn wrong_count(&self) -> u64 {
        match self.wrong {
            Wrong::Count(n) => n,
            Wrong::NotChecked | Wrong::Deviation(_) => 0,
        }
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub line: u64,
    /// Bytes (§3: the per-rank data size column).
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
        self.measures().map(Measure::wrong_count).sum()
    }

    pub fn measures(&self) -> impl Iterator<Item = &Measure> {
        self.out_of_place.iter().chain(self.in_place.iter())
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

/// Everything the checks need from one log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NcclLog {
    /// Lines read, and bytes.
    pub lines: u64,
    pub bytes: u64,
    /// Lines that could not be read: binary, cut at [`MAX_LINE_BYTES`], or shaped like a result
    /// row but not readable as one.
    pub unreadable_lines: u64,
    pub unreadable_example: Option<Quoted>,
    /// Of those, lines cut because they were too long.
    pub overlong_lines: u64,
    /// Lines of no known shape (other programs' output).
    pub other_lines: u64,
    /// `# nccl-tests version V nccl-headers=H nccl-library=L`.
    pub tests_version: Option<String>,
    pub nccl_headers: Option<u32>,
    pub nccl_library: Option<u32>,
    /// `NCCL version 2.21.5+cuda12.4` (banner or INFO).
    pub nccl_version: Option<String>,
    /// The program (`all_reduce_perf`) from `Collective test starting:`.
    pub collective: Option<String>,
    /// `# nThread` lines: more than one means each process ran its own test (§7).
    pub header_blocks: u32,
    pub config: Option<TestConfig>,
    /// `# Reducing maxBytes to N due to memory limitation`.
    pub reduced_max_bytes: Option<u64>,
    pub devices: Vec<DeviceLine>,
    pub rows: Vec<Row>,
    /// Rows past [`MAX_ROWS`].
    pub dropped_rows: u64,
    /// `Out of bounds values : N OK|FAILED`.
    pub out_of_bounds: Option<(u64, Quoted)>,
    /// `Avg bus bandwidth : X` (the sweep average, never judged: §4).
    pub avg_busbw: Option<(f64, Quoted)>,
    /// `Collective test concluded:` seen (since 2025-06).
    pub concluded: bool,
    /// `# error: TEXT` with a non-empty text.
    pub last_error: Option<Quoted>,
    pub failures: Vec<TestFailure>,
    pub failure_count: u64,
    /// ` .. host pid N: Test failure file:line` unwinding lines.
    pub trace_lines: u64,
    /// `NCCL WARN` lines (all of them counted; the first [`MAX_QUOTES`] kept).
    pub warnings: Vec<Quoted>,
    pub warning_count: u64,
    pub ib_completions: Vec<IbCompletion>,
    pub ib_completion_count: u64,
    /// `Failed to open libibverbs` (no rdma-core in the image, §10).
    pub ibverbs_missing: Option<Quoted>,
    /// `Failed to bind NVLink SHARP (NVLS) Multicast memory` (§13).
    pub nvls_bind_failure: Option<Quoted>,
    /// `Invalid number of GPUs: N requested but only M were found.` (§2, exit 5).
    pub invalid_gpus: Option<Quoted>,
    /// `NCCL INFO` lines.
    pub info_lines: u64,
    /// Hosts named by `host:pid:tid` prefixes of NCCL lines.
    pub info_hosts: BTreeSet<String>,
    /// Largest `nNodes N` / `nranks N` seen in NCCL INFO lines.
    pub info_nodes: Option<u32>,
    pub info_ranks: Option<u32>,
    pub transports: Transports,
    /// The last [`TAIL_LINES`] non-empty lines.
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

    /// Ranks (GPUs) in the run: device lines, else NCCL's `nranks`.
    pub fn ranks(&self) -> usize {
        if self.devices.is_empty() {
            self.info_ranks.map_or(0, |n| n as usize)
        } else {
            self.devices.len()
        }
    }

    /// The footer's average line was printed (the run reached its end).
    pub fn has_footer(&self) -> bool {
        self.avg_busbw.is_some() || self.out_of_bounds.is_some() || self.concluded
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
    while unit + 1 < UNITS.len() && value >= 1024 && value % 1024 == 0 {
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

fn cut(text: &str, max_chars: usize) -> String {
    // No more bytes than the limit: no more chars either (every line of a big log comes here).
    if text.len() <= max_chars {
        return text.to_string();
    }
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Splits a byte stream into lines of at most [`MAX_LINE_BYTES`], whatever the chunking.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// The current line passed the cap: discard until its newline.
    overflowed: bool,
}

impl LineSplitter {
    pub fn new() -> Self {
        LineSplitter::default()
    }

    /// Feed a chunk; `emit(line, was_cut)` gets every completed line without its `\n`.
    pub fn push(&mut self, chunk: &[u8], emit: &mut dyn FnMut(&[u8], bool)) {
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            self.take(&rest[..pos]);
            emit(&self.buf, self.overflowed);
            self.buf.clear();
            self.overflowed = false;
            rest = &rest[pos + 1..];
        }
        self.take(rest);
    }

    /// The last line when the stream ends without a newline.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&[u8], bool)) {
        if !self.buf.is_empty() || self.overflowed {
            emit(&self.buf, self.overflowed);
        }
        self.buf.clear();
        self.overflowed = false;
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = MAX_LINE_BYTES.saturating_sub(self.buf.len());
        if bytes.len() > room {
            self.overflowed = true;
        }
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// How a result row maps to columns, from the column header row (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    /// Names of the leading columns (`size count type redop root`).
    lead: Vec<String>,
    /// Names of one timed block (`time algbw busbw #wrong` [+ `i_min i_max i_p99 i_cv%`]).
    block: Vec<String>,
    blocks: usize,
    timestamp: bool,
}

impl Layout {
    fn from_header(tokens: &[&str]) -> Option<Layout> {
        let is_time = |t: &&str| *t == "time" || *t == "cputime";
        let first = tokens.iter().position(is_time)?;
        let times: Vec<usize> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| is_time(t))
            .map(|(i, _)| i)
            .collect();
        let timestamp = tokens.last() == Some(&"timestamp");
        let end = if timestamp {
            tokens.len() - 1
        } else {
            tokens.len()
        };
        let block_end = times.get(1).copied().unwrap_or(end);
        let block: Vec<String> = tokens[first..block_end]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if !block.iter().any(|t| t == "busbw") || first < 3 {
            return None;
        }
        Some(Layout {
            lead: tokens[..first].iter().map(|s| s.to_string()).collect(),
            block,
            blocks: times.len().clamp(1, 2),
            timestamp,
        })
    }

    fn index(&self, names: &[&str]) -> Option<usize> {
        self.block.iter().position(|t| names.contains(&t.as_str()))
    }
}

/// The streaming parser. Feed lines (or byte chunks), then [`finish`](Self::finish).
#[derive(Debug, Default)]
pub struct NcclLogParser {
    log: NcclLog,
    layout: Option<Layout>,
    /// The last [`TAIL_LINES`] lines as (line number, text), quoted only at the end: buffers are
    /// reused, so a log of millions of lines does not allocate per line.
    tail: VecDeque<(u64, String)>,
    splitter: LineSplitter,
}

impl NcclLogParser {
    pub fn new() -> Self {
        NcclLogParser::default()
    }

    /// Feed raw bytes from a single stream (lines split here).
    pub fn feed_bytes(&mut self, chunk: &[u8]) {
        let mut splitter = std::mem::take(&mut self.splitter);
        splitter.push(chunk, &mut |line, cut| self.feed_raw_line(line, cut));
        self.splitter = splitter;
    }

    /// Feed one line as bytes; `was_cut` when a [`LineSplitter`] cut it at [`MAX_LINE_BYTES`].
    pub fn feed_raw_line(&mut self, raw: &[u8], was_cut: bool) {
        self.log.lines += 1;
        self.log.bytes += raw.len() as u64 + 1;
        let text = match std::str::from_utf8(raw) {
            Ok(t)
                if !t
                    .bytes()
                    .any(|b| b == 0 || (b < 0x20 && b != b'\t' && b != b'\r')) =>
            {
                t
            }
            _ => {
                let lossy = String::from_utf8_lossy(raw);
                self.unreadable(&lossy);
                return;
            }
        };
        if was_cut {
            self.log.overlong_lines += 1;
            self.unreadable(text);
            return;
        }
        self.interpret(text);
    }

    /// Feed one line of text (no newline).
    pub fn feed_line(&mut self, line: &str) {
        let cut = line.len() > MAX_LINE_BYTES;
        let end = if cut {
            floor_char_boundary(line, MAX_LINE_BYTES)
        } else {
            line.len()
        };
        self.feed_raw_line(&line.as_bytes()[..end], cut);
    }

    /// The last row read so far (for progress reports).
    pub fn last_row(&self) -> Option<&Row> {
        self.log.rows.last()
    }

    pub fn lines(&self) -> u64 {
        self.log.lines
    }

    pub fn finish(mut self) -> NcclLog {
        let mut splitter = std::mem::take(&mut self.splitter);
        splitter.finish(&mut |line, cut| self.feed_raw_line(line, cut));
        self.log.tail = self
            .tail
            .into_iter()
            .map(|(line, text)| Quoted::new(line, &text))
            .collect();
        self.log
    }

    fn unreadable(&mut self, text: &str) {
        self.log.unreadable_lines += 1;
        if self.log.unreadable_example.is_none() {
            self.log.unreadable_example = Some(Quoted::new(self.log.lines, text));
        }
    }

    fn quote(&self, text: &str) -> Quoted {
        Quoted::new(self.log.lines, text)
    }

    fn interpret(&mut self, raw: &str) {
        let line = strip_prefixes(raw.trim_end_matches('\r')).trim_end();
        if line.trim().is_empty() {
            return;
        }
        let mut slot = if self.tail.len() == TAIL_LINES {
            self.tail.pop_front().unwrap_or_default()
        } else {
            (0, String::new())
        };
        slot.0 = self.log.lines;
        slot.1.clear();
        slot.1.push_str(line);
        self.tail.push_back(slot);

        if let Some(pos) = line.find("NCCL INFO ") {
            self.note_host(&line[..pos]);
            self.info(&line[pos + "NCCL INFO ".len()..], line);
            return;
        }
        if let Some(pos) = line.find("NCCL WARN") {
            self.note_host(&line[..pos]);
            self.warn(line[pos + "NCCL WARN".len()..].trim(), line);
            return;
        }
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('#') {
            self.hash_line(rest.trim(), line);
            return;
        }
        if let Some(rest) = trimmed.strip_prefix("NCCL version ") {
            self.log.nccl_version = Some(first_token(rest).to_string());
            return;
        }
        if self.failure(line) {
            return;
        }
        if trimmed.starts_with("..") && trimmed.contains("Test failure") {
            self.log.trace_lines += 1;
            return;
        }
        if trimmed.starts_with("nThread ") {
            self.config_line(trimmed);
            return;
        }
        if trimmed.starts_with("Invalid number of GPUs") {
            self.log.invalid_gpus = Some(self.quote(trimmed));
            return;
        }
        if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
            match self.row(trimmed) {
                Some(row) => {
                    if self.log.rows.len() < MAX_ROWS {
                        self.log.rows.push(row);
                    } else {
                        self.log.dropped_rows += 1;
                    }
                }
                None => self.unreadable(trimmed),
            }
            return;
        }
        self.log.other_lines += 1;
    }

    /// Remember the `host` of a `host:pid:tid [dev] NCCL …` prefix.
    fn note_host(&mut self, prefix: &str) {
        for token in prefix.split_whitespace() {
            let parts: Vec<&str> = token.split(':').collect();
            if parts.len() == 3
                && !parts[0].is_empty()
                && parts[1].chars().all(|c| c.is_ascii_digit())
                && parts[2].chars().all(|c| c.is_ascii_digit())
                && !parts[1].is_empty()
            {
                if self.log.info_hosts.len() < MAX_HOSTS && !self.log.info_hosts.contains(parts[0])
                {
                    self.log.info_hosts.insert(parts[0].to_string());
                }
                return;
            }
        }
    }

    fn hash_line(&mut self, rest: &str, line: &str) {
        if let Some(v) = rest.strip_prefix("nccl-tests version ") {
            let mut tokens = v.split_whitespace();
            self.log.tests_version = tokens.next().map(str::to_string);
            for t in tokens {
                if let Some(n) = t.strip_prefix("nccl-headers=") {
                    self.log.nccl_headers = n.parse().ok();
                } else if let Some(n) = t.strip_prefix("nccl-library=") {
                    self.log.nccl_library = n.parse().ok();
                }
            }
        } else if let Some(name) = rest.strip_prefix("Collective test starting:") {
            self.log.collective = Some(name.trim().to_string());
        } else if rest.starts_with("nThread ") {
            self.config_line(rest);
        } else if rest.starts_with("Rank ") {
            if let Some(d) = device_line(rest)
                && self.log.devices.len() < MAX_DEVICES
            {
                self.log.devices.push(d);
            }
        } else if let Some(v) = rest.strip_prefix("Reducing maxBytes to ") {
            self.log.reduced_max_bytes = first_token(v).parse().ok();
        } else if let Some(v) = rest.strip_prefix("Out of bounds values") {
            let v = v.trim_start().trim_start_matches(':').trim();
            if let Ok(n) = first_token(v).parse() {
                self.log.out_of_bounds = Some((n, self.quote(line)));
            }
        } else if let Some(v) = rest.strip_prefix("Avg bus bandwidth") {
            let v = v.trim_start().trim_start_matches(':').trim();
            if let Ok(x) = first_token(v).parse::<f64>() {
                self.log.avg_busbw = Some((x, self.quote(line)));
            }
        } else if rest.starts_with("Collective test concluded") {
            self.log.concluded = true;
        } else if let Some(v) = rest.strip_prefix("error:") {
            if !v.trim().is_empty() {
                self.log.last_error = Some(self.quote(line));
            }
        } else {
            let tokens: Vec<&str> = rest.split_whitespace().collect();
            let is_header = tokens.contains(&"busbw")
                && (tokens.contains(&"size") || tokens.contains(&"bytes"));
            if is_header && let Some(layout) = Layout::from_header(&tokens) {
                self.layout = Some(layout);
            }
        }
    }

    fn config_line(&mut self, text: &str) {
        self.log.header_blocks += 1;
        let tokens: Vec<&str> = text.split_whitespace().collect();
        let after = |key: &str| -> Option<&str> {
            tokens
                .iter()
                .position(|t| *t == key)
                .and_then(|i| tokens.get(i + 1).copied())
        };
        let config = TestConfig {
            nthread: after("nThread").and_then(|v| v.parse().ok()),
            ngpus: after("nGpus").and_then(|v| v.parse().ok()),
            min_bytes: after("minBytes").and_then(|v| v.parse().ok()),
            max_bytes: after("maxBytes").and_then(|v| v.parse().ok()),
            // `warmup iters: 1 iters: 20`: the second `iters:`.
            iters: (1..tokens.len())
                .filter(|&i| tokens[i] == "iters:" && !["warmup", "agg"].contains(&tokens[i - 1]))
                .find_map(|i| tokens.get(i + 1).and_then(|v| v.parse().ok())),
            validation: after("validation:").and_then(|v| v.parse().ok()),
        };
        if self.log.config.is_none() {
            self.log.config = Some(config);
        }
    }

    /// `host: Test NCCL failure common.cu:1057 'internal error / '` and siblings.
    fn failure(&mut self, line: &str) -> bool {
        const SHAPES: [(&str, FailureKind); 3] = [
            (": Test NCCL failure ", FailureKind::Nccl),
            (": Test CUDA failure ", FailureKind::Cuda),
            (": Test timeout ", FailureKind::Timeout),
        ];
        for (marker, kind) in SHAPES {
            let Some(pos) = line.find(marker) else {
                continue;
            };
            let host = line[..pos].trim().to_string();
            let rest = &line[pos + marker.len()..];
            let (location, error) = match kind {
                FailureKind::Timeout => {
                    // `(300s) common.cu:123`
                    let after = rest.split_once(')').map_or(rest, |(_, r)| r);
                    (first_token(after).to_string(), String::new())
                }
                _ => {
                    let error = match (rest.find('\''), rest.rfind('\'')) {
                        (Some(a), Some(b)) if b > a => rest[a + 1..b].to_string(),
                        _ => String::new(),
                    };
                    (first_token(rest).to_string(), error)
                }
            };
            self.log.failure_count += 1;
            if self.log.failures.len() < MAX_QUOTES {
                let quote = self.quote(line);
                self.log.failures.push(TestFailure {
                    kind,
                    host,
                    location,
                    error,
                    quote,
                });
            }
            return true;
        }
        false
    }

    fn info(&mut self, text: &str, line: &str) {
        self.log.info_lines += 1;
        let text = text.trim();
        let t = &mut self.log.transports;
        // Quoted only where kept: most INFO lines are channel lines whose example is taken.
        let number = self.log.lines;
        let quote = || Quoted::new(number, line);
        if let Some(name) = text.strip_prefix("Using network ") {
            t.network = Some((name.trim().to_string(), quote()));
        } else if let Some(via) = via_path(text) {
            let mut parts = via.split('/');
            let kind = parts.next().unwrap_or_default();
            match kind {
                "P2P" => {
                    t.p2p.channels += 1;
                    t.p2p.example.get_or_insert_with(quote);
                    let flavour = parts.next().unwrap_or("?").trim();
                    match t.p2p_kinds.get_mut(flavour) {
                        Some(n) => *n += 1,
                        None => {
                            t.p2p_kinds.insert(flavour.to_string(), 1);
                        }
                    }
                }
                "SHM" => {
                    t.shm.channels += 1;
                    t.shm.example.get_or_insert_with(quote);
                }
                "NET" => {
                    let name = parts.next().unwrap_or("?").trim();
                    let gdr = via.split('/').any(|p| p.starts_with("GDRDMA"));
                    if !t.net.contains_key(name) {
                        t.net.insert(name.to_string(), NetUse::default());
                    }
                    let Some(net) = t.net.get_mut(name) else {
                        return;
                    };
                    net.channels += 1;
                    if gdr {
                        net.gdr_channels += 1;
                    } else if net.example_without_gdr.is_none() {
                        net.example_without_gdr = Some(quote());
                    }
                    net.example.get_or_insert_with(quote);
                }
                _ => {}
            }
        } else if text.starts_with("NET/IB") && text.contains("No device found") {
            t.ib_no_device = Some(quote());
        } else if text.starts_with("NET/IB") && text.contains("Using") {
            t.ib_devices = Some(quote());
        } else if text.starts_with("NET/Socket") && text.contains("Using") {
            t.socket_interfaces = Some(quote());
        } else if text.starts_with("NET/Plugin") {
            if let Some(rest) = text.split("Loaded net plugin ").nth(1) {
                let name = rest.split(" (").next().unwrap_or(rest).trim().to_string();
                t.plugin = Some((name, quote()));
            } else if text.contains("Could not find")
                || text.contains("No plugin found")
                || text.contains("Plugin load returned")
            {
                t.plugin_absent = true;
            }
        } else if text.contains("GPU Direct RDMA Enabled for HCA") {
            t.gdr_enabled_hcas += 1;
        } else if text.contains("GPU Direct RDMA Disabled for HCA") {
            t.gdr_disabled_hcas += 1;
            t.gdr_disabled_example.get_or_insert_with(quote);
        } else if text.starts_with("DMA-BUF is available") {
            t.dmabuf_available = true;
        } else if let Some(rest) = text.strip_prefix("NVLS multicast support is ") {
            t.nvls_support = Some((!rest.starts_with("not"), quote()));
        } else if text.contains(" nvls channels") {
            let n = text
                .split(", ")
                .find_map(|seg| seg.strip_suffix(" nvls channels"))
                .and_then(|n| n.trim().rsplit(' ').next())
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(n) = n
                && t.nvls_channels.as_ref().is_none_or(|(m, _)| n > *m)
            {
                t.nvls_channels = Some((n, quote()));
            }
        } else if let Some((var, value)) = text.split_once(" set by environment to ") {
            if t.env.len() < MAX_QUOTES * 4 {
                t.env.insert(
                    var.trim().to_string(),
                    value.trim().trim_end_matches('.').to_string(),
                );
            }
        } else if let Some(rest) = text.strip_prefix("NCCL version ") {
            self.log.nccl_version = Some(first_token(rest).to_string());
        } else {
            // `comm 0x… rank 0 nRanks 16 nNodes 2 localRanks 8 …`, `… nranks 8 cudaDev 0 …`.
            let tokens: Vec<&str> = text.split_whitespace().collect();
            for pair in tokens.windows(2) {
                let value = pair[1].parse::<u32>().ok();
                match (pair[0], value) {
                    ("nNodes", Some(n)) => {
                        self.log.info_nodes = Some(self.log.info_nodes.map_or(n, |m| m.max(n)));
                    }
                    ("nRanks" | "nranks", Some(n)) => {
                        self.log.info_ranks = Some(self.log.info_ranks.map_or(n, |m| m.max(n)));
                    }
                    _ => {}
                }
            }
        }
    }

    fn warn(&mut self, text: &str, line: &str) {
        self.log.warning_count += 1;
        let quote = self.quote(line);
        if text.contains("Failed to open libibverbs") {
            self.log.ibverbs_missing.get_or_insert(quote.clone());
        }
        if text.contains("Failed to bind NVLink SHARP") {
            self.log.nvls_bind_failure.get_or_insert(quote.clone());
        }
        if text.contains("Got completion") {
            self.log.ib_completion_count += 1;
            if self.log.ib_completions.len() < MAX_QUOTES {
                self.log.ib_completions.push(IbCompletion {
                    status: completion_status(text),
                    quote: quote.clone(),
                });
            }
        }
        if self.log.warnings.len() < MAX_QUOTES {
            self.log.warnings.push(quote);
        }
    }

    fn row(&self, text: &str) -> Option<Row> {
        // Per-rank `[0]` markers in front of fields (§7), glued or separate.
        let mut tokens: Vec<&str> = text
            .split_whitespace()
            .map(strip_rank_marker)
            .filter(|t| !t.is_empty())
            .collect();
        let size: u64 = tokens.first()?.parse().ok()?;
        let count: u64 = tokens.get(1)?.parse().ok()?;
        let dtype = tokens.get(2)?;
        if !dtype.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return None;
        }
        let dtype = dtype.to_string();
        // `-S 1` timestamp: `YYYY-MM-DD HH:MM:SS` at the end.
        let n = tokens.len();
        if n >= 2 && looks_like_date(tokens[n - 2]) && looks_like_time(tokens[n - 1]) {
            tokens.truncate(n - 2);
        }
        let layout = self.layout.as_ref();
        let block_len = layout.map_or(DEFAULT_BLOCK, |l| l.block.len());
        let n = tokens.len();
        let known_lead = layout.map(|l| l.lead.len());
        let fits = |lead: usize, blocks: usize| lead + blocks * block_len == n;
        let (lead, blocks) = match known_lead {
            Some(lead) if fits(lead, 2) => (lead, 2),
            Some(lead) if fits(lead, 1) => (lead, 1),
            _ => {
                let two = (3..=5).find(|&l| fits(l, 2));
                let one = (3..=5).find(|&l| fits(l, 1));
                match (two, one) {
                    (Some(l), _) => (l, 2),
                    (None, Some(l)) => (l, 1),
                    (None, None) => return None,
                }
            }
        };
        let (mut redop, mut root) = (None, None);
        let lead_names = layout.map(|l| &l.lead);
        for (i, token) in tokens.iter().enumerate().take(lead).skip(3) {
            let name = lead_names
                .and_then(|names| names.get(i))
                .map(String::as_str);
            match name {
                Some("root") => root = Some(token.parse().ok()?),
                Some("redop" | "op") => redop = Some(token.to_string()),
                _ => match token.parse::<i64>() {
                    Ok(r) => root = Some(r),
                    Err(_) => redop = Some(token.to_string()),
                },
            }
        }
        let time_i = layout
            .and_then(|l| l.index(&["time", "cputime"]))
            .unwrap_or(0);
        let algbw_i = layout.and_then(|l| l.index(&["algbw"])).unwrap_or(1);
        let busbw_i = layout.and_then(|l| l.index(&["busbw"])).unwrap_or(2);
        let wrong_i = layout
            .and_then(|l| l.index(&["#wrong", "error", "res"]))
            .unwrap_or(3);
        let old_error = layout.is_some_and(|l| l.index(&["error", "res"]).is_some());
        let measure = |b: usize| -> Option<Measure> {
            let block = &tokens[lead + b * block_len..lead + (b + 1) * block_len];
            let number = |i: usize| -> Option<f64> {
                let v: f64 = block.get(i)?.parse().ok()?;
                v.is_finite().then_some(v)
            };
            let wrong = match *block.get(wrong_i)? {
                "N/A" => Wrong::NotChecked,
                w if old_error => Wrong::Deviation(w.parse().ok()?),
                w => match w.parse::<u64>() {
                    Ok(n) => Wrong::Count(n),
                    // An old `error` column without a header (`0e+00`).
                    Err(_) => Wrong::Deviation(w.parse().ok()?),
                },
            };
            Some(Measure {
                time_us: number(time_i)?,
                algbw: number(algbw_i)?,
                busbw: number(busbw_i)?,
                wrong,
            })
        };
        let (out_of_place, in_place) = if blocks == 2 {
            (Some(measure(0)?), Some(measure(1)?))
        } else {
            (None, Some(measure(0)?))
        };
        Some(Row {
            line: self.log.lines,
            size,
            count,
            dtype,
            redop,
            root,
            out_of_place,
            in_place,
            text: cut(text.trim(), QUOTE_CHARS),
        })
    }
}

/// Parse a whole log held in memory (tests, small files).
pub fn parse_log(text: &str) -> NcclLog {
    let mut parser = NcclLogParser::new();
    for line in text.lines() {
        parser.feed_line(line);
    }
    parser.finish()
}

/// Strip launcher prefixes (§7): `[1,0]<stdout>:`, `[0] ` (repeated), Slurm's `0: `.
fn strip_prefixes(line: &str) -> &str {
    let mut rest = line;
    loop {
        let before = rest;
        // Open MPI --tag-output: `[jobid,rank]<stdout>:` or `<stderr>:`.
        if let Some(after) = rest.strip_prefix('[')
            && let Some(close) = after.find(']')
        {
            let inside = &after[..close];
            let tail = &after[close + 1..];
            let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
            if let Some((a, b)) = inside.split_once(',')
                && numeric(a)
                && numeric(b)
            {
                for tag in ["<stdout>:", "<stderr>:"] {
                    if let Some(t) = tail.strip_prefix(tag) {
                        rest = t.strip_prefix(' ').unwrap_or(t);
                    }
                }
            } else if numeric(inside) {
                rest = tail.trim_start();
            }
        }
        // Slurm --label: `12: `.
        if let Some((label, tail)) = rest.split_once(": ")
            && !label.is_empty()
            && label.len() <= 6
            && label.chars().all(|c| c.is_ascii_digit())
        {
            rest = tail;
        }
        if rest.len() == before.len() {
            return rest;
        }
    }
}

/// `[0]` → ``, `[0]4194304` → `4194304`.
fn strip_rank_marker(token: &str) -> &str {
    if let Some(after) = token.strip_prefix('[')
        && let Some(close) = after.find(']')
        && close > 0
        && after[..close].chars().all(|c| c.is_ascii_digit())
    {
        return &after[close + 1..];
    }
    token
}

fn first_token(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn looks_like_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && t.chars().filter(char::is_ascii_digit).count() == 8
}

fn looks_like_time(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 8
        && b[2] == b':'
        && b[5] == b':'
        && t.chars().filter(char::is_ascii_digit).count() == 6
}

/// The path after `via ` in a channel line (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`,
/// old `Ring 00 : 7 -> 8 [send] via NET/IB/0/GDRDMA`).
fn via_path(text: &str) -> Option<&str> {
    if !(text.starts_with("Channel") || text.starts_with("Ring")) || !text.contains("->") {
        return None;
    }
    text.split_once(" via ").map(|(_, p)| p.trim())
}

/// The `ibv_wc_status` number in a `Got completion` line, any vintage (§11):
/// `status=transport retry counter exceeded(12)`, `status=12`, `with error 12,`.
fn completion_status(text: &str) -> Option<u32> {
    if let Some(rest) = text.split("status=").nth(1) {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() {
            return digits.parse().ok();
        }
        let open = rest.find('(')?;
        let close = rest[open..].find(')')? + open;
        return rest[open + 1..close].trim().parse().ok();
    }
    let rest = text.split("with error ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `Rank  0 Group  0 Pid  41234 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3`
/// (also without `Group`, §2).
fn device_line(rest: &str) -> Option<DeviceLine> {
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    let after = |key: &str| -> Option<usize> { tokens.iter().position(|t| *t == key) };
    let rank = tokens.get(after("Rank")? + 1)?.parse().ok()?;
    let host = tokens.get(after("on")? + 1)?.to_string();
    let dev_i = after("device")?;
    let device = tokens.get(dev_i + 1)?.parse().ok()?;
    let bus = tokens.get(dev_i + 2)?;
    let bus_id = bus.strip_prefix('[')?.strip_suffix(']')?.to_string();
    let name = tokens
        .get(dev_i + 3..)
        .map(|t| t.join(" "))
        .unwrap_or_default();
    Some(DeviceLine {
        rank,
        host,
        device,
        bus_id,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Modern single-node 8 x H100 output with NCCL_DEBUG=INFO (nccl.md §2, §3, §4, §9; row
    /// layout exact, numbers illustrative).
    const MODERN: &str = "\
# nccl-tests version 2.19.6 nccl-headers=22105 nccl-library=22105
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41234 on hgx-h100-01 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
hgx-h100-01:41234:41234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.11<0>
hgx-h100-01:41234:41234 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
hgx-h100-01:41234:41234 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
hgx-h100-01:41234:41262 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.11<0>
hgx-h100-01:41234:41262 [0] NCCL INFO Using network IB
hgx-h100-01:41234:41262 [0] NCCL INFO DMA-BUF is available on GPU device 0
hgx-h100-01:41234:41262 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0
hgx-h100-01:41234:41262 [0] NCCL INFO NVLS multicast support is available on dev 0
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
hgx-h100-01:41234:41263 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM/read
hgx-h100-01:41234:41262 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer
hgx-h100-01:41234:41262 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8d1f34ad6f1e2b71 - Init COMPLETE
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)        
  1073741824     268435456     float     sum      -1   4012.3  267.61  468.32       0   4005.1  268.09  469.16       0
  8589934592    2147483648     float     sum      -1  31161.0  275.66  482.41       0  31150.2  275.76  482.58       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 475.617 
#
# Collective test concluded: all_reduce_perf
";

    #[test]
    fn reads_modern_output() {
        let log = parse_log(MODERN);
        assert_eq!(log.tests_version.as_deref(), Some("2.19.6"));
        assert_eq!(log.nccl_headers, Some(22105));
        assert_eq!(log.collective.as_deref(), Some("all_reduce_perf"));
        assert_eq!(log.header_blocks, 1);
        let config = log.config.as_ref().unwrap();
        assert_eq!(config.ngpus, Some(8));
        assert_eq!(config.max_bytes, Some(8589934592));
        assert_eq!(config.iters, Some(20));
        assert_eq!(log.devices.len(), 2);
        assert_eq!(log.devices[1].bus_id, "0000:2a:00");
        assert_eq!(log.devices[1].name, "NVIDIA H100 80GB HBM3");
        assert_eq!(log.rows.len(), 2);
        let big = &log.rows[1];
        assert_eq!(big.size, 8589934592);
        assert_eq!(big.redop.as_deref(), Some("sum"));
        assert_eq!(big.root, Some(-1));
        assert_eq!(big.out_of_place.unwrap().busbw, 482.41);
        assert_eq!(big.in_place.unwrap().wrong, Wrong::Count(0));
        assert_eq!(big.peak_busbw(), 482.58);
        assert_eq!(log.peak_row(1 << 30).unwrap().size, 8589934592);
        assert_eq!(log.out_of_bounds.as_ref().unwrap().0, 0);
        assert_eq!(log.avg_busbw.as_ref().unwrap().0, 475.617);
        assert!(log.concluded && log.has_footer());
        assert_eq!(log.nccl_version.as_deref(), Some("2.21.5+cuda12.4"));
        let t = &log.transports;
        assert_eq!(t.network.as_ref().unwrap().0, "IB");
        assert_eq!(t.p2p.channels, 2);
        assert_eq!(t.p2p_kinds.get("CUMEM"), Some(&2));
        assert!(t.plugin_absent && t.dmabuf_available && t.ib_devices.is_some());
        assert!(t.nvls_support.as_ref().unwrap().0);
        assert_eq!(t.nvls_channels.as_ref().unwrap().0, 16);
        assert_eq!(log.info_nodes, Some(1));
        assert_eq!(log.ranks(), 2);
        assert_eq!(log.nodes(), 1);
        assert_eq!(log.unreadable_lines, 0);
        assert_eq!(log.other_lines, 0);
        assert_eq!(
            log.tail.last().unwrap().text,
            "# Collective test concluded: all_reduce_perf"
        );
    }

    /// 2022-era (v2.13-v2.17) rows: one space fewer, busbw >= 1000 overflowing its column.
    #[test]
    fn reads_overflowing_columns_and_exponents() {
        let text = "\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  8589934592    2147483648     float     sum      -1  1.2e+04  715.83 1252.70      0  12001.0  715.76 1252.58      0
";
        let log = parse_log(text);
        assert_eq!(log.rows.len(), 1);
        assert_eq!(log.rows[0].out_of_place.unwrap().time_us, 12000.0);
        assert_eq!(log.rows[0].out_of_place.unwrap().busbw, 1252.70);
    }

    /// Before 2022-08: `error` column, per-op headers without `root` (nccl.md §3, NVIDIA/nccl#527).
    #[test]
    fn reads_old_error_column_without_root() {
        let text = "\
# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  65996 on ubuntu-116 device  0 [0x0e] NVIDIA A100-SXM-80GB
#
#                                                       out-of-place                       in-place          
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
  1073741824     268435456     float     sum   8175.9  131.33  229.82  2e-07   8165.2  131.50  230.13  2e-07
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 229.975 
#
";
        let log = parse_log(text);
        assert_eq!(log.devices[0].host, "ubuntu-116");
        assert_eq!(log.devices[0].bus_id, "0x0e");
        let row = &log.rows[0];
        assert_eq!(row.root, None);
        assert_eq!(row.redop.as_deref(), Some("sum"));
        assert_eq!(row.out_of_place.unwrap().wrong, Wrong::Deviation(2e-7));
        assert_eq!(row.wrong_count(), 0);
        assert!(log.has_footer() && !log.concluded);
    }

    /// all_gather without redop/root, `N/A` (-c 0), `-S 1` timestamps, 2018 header without `#`.
    #[test]
    fn reads_rootless_unchecked_rows_with_timestamps() {
        let text = "\
nThread 1 nGpus 8 minBytes 9 maxBytes 33554432 step: 1048576(bytes) warmup iters: 5 iters: 20 validation: 0
#       size         count      type     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong  timestamp
    33554432       1048576     float    125.3  267.80  234.33     N/A    120.1  279.39  244.47     N/A  2026-03-01 10:22:03
";
        let log = parse_log(text);
        assert_eq!(log.header_blocks, 1);
        let row = &log.rows[0];
        assert_eq!(row.redop, None);
        assert_eq!(row.in_place.unwrap().wrong, Wrong::NotChecked);
        assert_eq!(row.peak_busbw(), 244.47);
    }

    /// Per-iteration columns (`-I 1`) widen each block to eight fields.
    #[test]
    fn reads_per_iteration_blocks() {
        let text = "\
#       size         count      type   redop    root     time   algbw   busbw  #wrong   i_min   i_max   i_p99  i_cv%     time   algbw   busbw  #wrong   i_min   i_max   i_p99  i_cv%
  1073741824     268435456     float     sum      -1   4012.3  267.61  468.32       0  4001.0  4030.2  4029.9   0.21   4005.1  268.09  469.16       0  4000.0  4020.0  4019.0   0.18
";
        let log = parse_log(text);
        assert_eq!(log.rows[0].in_place.unwrap().busbw, 469.16);
    }

    /// mpirun --tag-output and per-rank prefixes (nccl.md §7).
    #[test]
    fn strips_launcher_prefixes() {
        let text = "\
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
[1,0]<stdout>:  8589934592    2147483648     float     sum      -1  93021.3   92.34  173.15       0  92998.1   92.37  173.19       0
[1,0]<stdout>:# Avg bus bandwidth    : 92.3405
[0]      4194304 [0]     1048576 float sum -1 [0]     622.6    6.74   12.63      0    620.1    6.76   12.68      0
[0] [0] node-b:77:77 [3] NCCL INFO Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA
0: node-a:1:1 [0] NCCL INFO Using network IB
";
        let log = parse_log(text);
        assert_eq!(log.rows.len(), 2);
        assert_eq!(log.rows[0].out_of_place.unwrap().busbw, 173.15);
        assert_eq!(log.rows[1].size, 4194304);
        assert_eq!(log.avg_busbw.as_ref().unwrap().0, 92.3405);
        let ib = &log.transports.net["IB"];
        assert_eq!((ib.channels, ib.gdr_channels), (1, 1));
        assert_eq!(
            log.info_hosts.iter().collect::<Vec<_>>(),
            vec!["node-a", "node-b"]
        );
        assert_eq!(log.transports.network.as_ref().unwrap().0, "IB");
    }

    /// Socket fallback lines (nccl.md §10, NVIDIA/nccl-tests#100) and old transport lines.
    #[test]
    fn classifies_transports() {
        let text = "\
node2:1208:1208 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
node2:1208:1208 [0] NCCL INFO NET/Socket : Using [0]ibp5s0:<0> [1]ibp70s0:<0>
node2:1208:1208 [0] NCCL INFO Using network Socket
node2:1208:1230 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
node2:1208:1230 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5
node2:1208:1230 [0] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0/GDRDMA
node2:1208:1230 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
node2:1208:1230 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
node2:1208:1230 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)
node2:1208:1230 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC
node2:1208:1230 [0] NCCL INFO NVLS multicast support is not available on dev 0
";
        let log = parse_log(text);
        let t = &log.transports;
        assert!(log.ibverbs_missing.is_some());
        assert_eq!(log.warning_count, 1);
        assert_eq!(t.network.as_ref().unwrap().0, "Socket");
        assert!(t.socket_interfaces.is_some());
        assert_eq!(t.net["Socket"].channels, 1);
        assert_eq!(t.net["IB"].gdr_channels, 0);
        assert!(t.net["IB"].example_without_gdr.is_some());
        assert_eq!(t.net["AWS Libfabric"].gdr_channels, 1);
        assert_eq!(t.shm.channels, 1);
        assert_eq!(t.gdr_disabled_hcas, 1);
        assert_eq!(t.plugin.as_ref().unwrap().0, "NCCL RDMA Plugin v8");
        assert_eq!(t.env["NCCL_NET_GDR_LEVEL"], "LOC");
        assert!(!t.nvls_support.as_ref().unwrap().0);
    }

    /// Failure lines (§5, §11): NCCL/CUDA failures, unwinding, IB completions of every vintage.
    #[test]
    fn collects_failures() {
        let text = "\
node-a:2231:2290 [3] transport/net_ib/p2p.cc:1148 NCCL WARN NET/IB: Got completion from peer 10.0.0.12<52131> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) vendor_err=129 [localGid fe80::1] [remoteGids fe80::2] hca mlx5_3
[2026-07-01 10:00:00] node-a:2231:2290 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.12<52131> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid fe80::1
node-a:2231:2290 [3] NCCL WARN NET/IB : Got completion with error 4, opcode 8983, len 0, vendor err 81
pkb-aa8dbd1b-1: Test NCCL failure common.cu:345 'unhandled system error'
 .. pkb-aa8dbd1b-1 pid 2231: Test failure common.cu:393
h100-4: Test NCCL failure common.cu:1057 'internal error / '
node-b: Test CUDA failure common.cu:732 'an illegal memory access was encountered'
node-c: Test timeout (300s) common.cu:512
# error: unhandled system error (run with NCCL_DEBUG=INFO for details)
Invalid number of GPUs: 8 requested but only 4 were found.
";
        let log = parse_log(text);
        let statuses: Vec<Option<u32>> = log.ib_completions.iter().map(|c| c.status).collect();
        assert_eq!(statuses, vec![Some(12), Some(12), Some(4)]);
        assert_eq!(log.failure_count, 4);
        assert_eq!(log.failures[0].kind, FailureKind::Nccl);
        assert_eq!(log.failures[0].host, "pkb-aa8dbd1b-1");
        assert_eq!(log.failures[0].error, "unhandled system error");
        assert_eq!(log.failures[1].error, "internal error / ");
        assert_eq!(log.failures[1].location, "common.cu:1057");
        assert_eq!(log.failures[2].kind, FailureKind::Cuda);
        assert_eq!(log.failures[3].kind, FailureKind::Timeout);
        assert_eq!(log.failures[3].location, "common.cu:512");
        assert_eq!(log.trace_lines, 1);
        assert!(log.last_error.is_some());
        assert!(log.invalid_gpus.is_some());
        assert_eq!(log.info_hosts.len(), 1);
    }

    /// Noise, binary garbage, huge lines, NaN, truncated rows: skipped and counted, never fatal.
    #[test]
    fn skips_what_it_cannot_read() {
        let mut parser = NcclLogParser::new();
        parser.feed_bytes(b"Authorization required, but no authorization protocol specified\n");
        parser.feed_bytes(b"\x00\x01\xff\xfe garbage\n");
        parser.feed_bytes(&vec![b'7'; 3 * MAX_LINE_BYTES]);
        parser
            .feed_bytes(b"\n  1048576  262144  float  sum  -1  nan  nan  nan  0  1.0 1.0 1.0 0\n");
        parser.feed_bytes(b"  8589934592    2147483648     float     sum      -1  34012.1  252.55");
        let log = parser.finish();
        assert_eq!(log.lines, 5);
        assert_eq!(log.other_lines, 1);
        assert_eq!(log.overlong_lines, 1);
        assert_eq!(log.unreadable_lines, 4);
        assert!(log.rows.is_empty());
        assert_eq!(log.tail.len(), 3);
    }

    #[test]
    fn repeated_headers_count_blocks() {
        let one = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0\nNCCL version 2.19.3+cuda12.3\n";
        let log = parse_log(&one.repeat(3));
        assert_eq!(log.header_blocks, 3);
        assert_eq!(log.nccl_version.as_deref(), Some("2.19.3+cuda12.3"));
    }

    #[test]
    fn splitter_is_chunking_independent() {
        let text = MODERN.as_bytes();
        let whole = parse_log(MODERN);
        for chunk in [1, 7, 64, 4096] {
            let mut parser = NcclLogParser::new();
            for piece in text.chunks(chunk) {
                parser.feed_bytes(piece);
            }
            assert_eq!(parser.finish(), whole, "chunk {chunk}");
        }
    }

    #[test]
    fn sizes_read_like_nccl_tests_suffixes() {
        assert_eq!(format_size(8), "8 B");
        assert_eq!(format_size(1 << 30), "1 GiB");
        assert_eq!(format_size(8589934592), "8 GiB");
        assert_eq!(format_size(134217728), "128 MiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(ibv_wc_status_name(12), Some("RETRY_EXC_ERR"));
    }
}
