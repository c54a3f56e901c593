//! nccl-tests output, `NCCL_DEBUG` lines and any NCCL application's log, read as a stream
//! (reference/nccl.md; issue 15).
//!
//! [`NcclLogParser`] takes a log as raw byte chunks (split into lines by [`LineSplitter`]) or
//! line by line, and keeps only what the `nccl` checks judge: result tables and footers, failure
//! and warning lines, an application's collective timeouts and NCCL errors, the transports NCCL
//! chose, and the last few lines. Pure (bytes in, facts out, no I/O); nothing here judges.
//!
//! By sub-concern:
//! - [`lines`]: splitting and cleaning lines (control characters, terminal escapes);
//! - [`prefix`]: launcher decorations in front of the content (Slurm, Open MPI, SkyPilot, Ray,
//!   kubectl, pdsh, per-rank markers), peeled in any order (§7);
//! - [`table`]: headers, result rows recognised by shape, footers, of every nccl-tests
//!   generation (§2–§4), and which collective a table is;
//! - [`sweep`]: a table's figures — peak busbw and its size, the sweep average, a collapse;
//! - [`transport`]: `NCCL INFO` lines (§9, §10);
//! - [`errors`]: failure, WARN and IB completion lines (§5, §11), watchdog timeouts and NCCL
//!   errors in an application's output;
//! - [`model`]: the facts themselves ([`NcclLog`]).
//!
//! Bad input (issue 7): a line that is not UTF-8 is counted as unreadable and skipped; one longer
//! than [`MAX_LINE_BYTES`] is cut there (the rest is discarded as it arrives) and counted; a line
//! with control characters is read without them (issue 13); NaN/inf or arithmetic that does not
//! add up make a row unreadable. Memory is bounded whatever the input size: at most [`MAX_ROWS`]
//! rows, [`MAX_QUOTES`] quoted lines per kind, [`TAIL_LINES`] tail lines, [`MAX_HOSTS`] hosts.
//! Only lines matching a known shape are interpreted (§2: MPI warnings, hwloc's "Authorization
//! required" and the like are counted as other lines).
//!
//! Speed (issue 15, docs/performance.md): each line is looked at once — `memchr` finds the line
//! end and the `NCCL ` marker, launcher prefixes are judged on their first bytes, and a line
//! that only counts allocates nothing.

mod command;
mod errors;
mod lines;
mod model;
mod prefix;
mod run;
mod scan;
mod sweep;
mod table;
mod transport;

pub use run::{INSTALL_HINT, NOT_REQUESTED, NcclProbe, NcclRun, RunMeta};

use std::collections::VecDeque;

use lines::floor_char_boundary;
pub use lines::{LineSplitter, MAX_LINE_BYTES};
pub use model::{
    CollectiveTimeout, DeviceLine, FailureKind, IbCompletion, LogKind, Measure, NcclLog, NetUse,
    PathUse, QUOTE_CHARS, Quoted, Row, Table, TestConfig, TestFailure, Transports, Wrong,
    deviation_tolerance, format_size, ibv_wc_status_name,
};
pub use prefix::strip as strip_decorations;
pub use sweep::{Collapse, Point, Sweep};
pub use table::{collective_from_rows, type_size};

/// Result rows kept. A full sweep is ~35 rows per process; duplicated per-process tables under a
/// non-MPI `mpirun` (§7) multiply that by the process count.
pub const MAX_ROWS: usize = 4096;
/// Lines kept per kind of quoted evidence (failures, warnings, IB errors, ...); more are counted.
pub const MAX_QUOTES: usize = 32;
/// The last lines kept, to show where a hung or crashed run stopped.
pub const TAIL_LINES: usize = 10;
/// Distinct host names remembered.
pub const MAX_HOSTS: usize = 4096;
/// Device lines kept (one per rank).
pub const MAX_DEVICES: usize = 4096;

/// The streaming parser. Feed byte chunks (or lines), then [`finish`](Self::finish).
#[derive(Debug)]
pub struct NcclLogParser {
    log: NcclLog,
    layout: Option<table::Layout>,
    /// The table rows and footers go to.
    current_table: Option<usize>,
    /// `Collective test starting:` and `nThread` lines wait for the table they introduce.
    next_collective: Option<String>,
    next_config: Option<TestConfig>,
    /// An `nThread` line was read and its test has printed no row or footer yet.
    section_open: bool,
    /// The first test's footer was read: device lines of later tests are theirs.
    devices_closed: bool,
    /// A row's head whose timings were cut off by other output.
    pending: Option<table::PendingRow>,
    /// The host of the last NCCL line (most lines repeat it).
    last_host: String,
    /// Channels by network and P2P flavour, moved into [`Transports`] at the end.
    nets: Vec<(String, NetUse)>,
    p2p_flavours: Vec<(String, u64)>,
    /// The last [`TAIL_LINES`] lines as (line number, text), quoted only at the end: buffers are
    /// reused, so a log of millions of lines does not allocate per line.
    tail: VecDeque<(u64, String)>,
    splitter: LineSplitter,
    /// `NCCL ` (every line is searched for it).
    nccl: memchr::memmem::Finder<'static>,
}

impl Default for NcclLogParser {
    fn default() -> Self {
        NcclLogParser {
            log: NcclLog::default(),
            layout: None,
            current_table: None,
            next_collective: None,
            next_config: None,
            section_open: false,
            devices_closed: false,
            pending: None,
            last_host: String::new(),
            nets: Vec::new(),
            p2p_flavours: Vec::new(),
            tail: VecDeque::with_capacity(TAIL_LINES),
            splitter: LineSplitter::new(),
            nccl: memchr::memmem::Finder::new("NCCL "),
        }
    }
}

impl NcclLogParser {
    pub fn new() -> Self {
        NcclLogParser::default()
    }

    /// Feed raw bytes from a single stream (lines split here). The whole lines of a chunk are
    /// checked for UTF-8 in one pass and read in place; a chunk that is not UTF-8 goes line by
    /// line (only its bad lines are unreadable).
    pub fn feed_bytes(&mut self, chunk: &[u8]) {
        let mut splitter = std::mem::take(&mut self.splitter);
        let mut rest = chunk;
        if splitter.has_partial() {
            // The end of a line an earlier chunk began.
            let Some(pos) = memchr::memchr(b'\n', rest) else {
                splitter.push(rest, &mut |line, cut| self.feed_raw_line(line, cut));
                self.splitter = splitter;
                return;
            };
            splitter.push(&rest[..=pos], &mut |line, cut| {
                self.feed_raw_line(line, cut)
            });
            rest = &rest[pos + 1..];
        }
        let end = memchr::memrchr(b'\n', rest).map_or(0, |p| p + 1);
        let (whole, partial) = rest.split_at(end);
        match std::str::from_utf8(whole) {
            Ok(text) => {
                // No control character but the newlines: no line of the chunk needs cleaning.
                let clean = lines::only_newlines(whole);
                let mut start = 0;
                for pos in memchr::memchr_iter(b'\n', whole) {
                    self.feed_text_line(&text[start..pos], clean);
                    start = pos + 1;
                }
                self.keep_chunk_tail(text);
            }
            Err(_) => splitter.push(whole, &mut |line, cut| self.feed_raw_line(line, cut)),
        }
        // The start of the next chunk's first line.
        splitter.push(partial, &mut |line, cut| self.feed_raw_line(line, cut));
        self.splitter = splitter;
    }

    /// One whole line known to be UTF-8, and known to hold no control character when `clean`.
    fn feed_text_line(&mut self, line: &str, clean: bool) {
        if line.len() > MAX_LINE_BYTES {
            self.feed_raw_line(&line.as_bytes()[..MAX_LINE_BYTES], true);
            return;
        }
        self.log.lines += 1;
        self.log.bytes += line.len() as u64 + 1;
        if clean {
            self.interpret_keeping(line, false);
            return;
        }
        match lines::clean(line) {
            std::borrow::Cow::Borrowed(text) => self.interpret_keeping(text, false),
            std::borrow::Cow::Owned(text) => self.interpret_keeping(&text, false),
        }
    }

    /// After the whole lines of a chunk (`text`, ending with a newline): its last non-empty
    /// lines join the tail — copying ten lines a chunk instead of every line.
    fn keep_chunk_tail(&mut self, text: &str) {
        let mut last: Vec<(u64, String)> = Vec::with_capacity(TAIL_LINES);
        let mut number = self.log.lines;
        let body = text.strip_suffix('\n').unwrap_or(text);
        for raw in body.rsplit('\n') {
            if last.len() == TAIL_LINES {
                break;
            }
            if raw.len() <= MAX_LINE_BYTES {
                let clean = lines::clean(raw);
                let line = content(&clean).0;
                if !line.is_empty() {
                    last.push((number, line.to_string()));
                }
            }
            number = number.saturating_sub(1);
        }
        for (number, line) in last.into_iter().rev() {
            self.keep_tail_at(number, &line);
        }
    }

    /// Feed one line as bytes; `was_cut` when a [`LineSplitter`] cut it at [`MAX_LINE_BYTES`].
    pub fn feed_raw_line(&mut self, raw: &[u8], was_cut: bool) {
        self.log.lines += 1;
        self.log.bytes += raw.len() as u64 + 1;
        if was_cut {
            self.log.overlong_lines += 1;
            self.unreadable(&String::from_utf8_lossy(raw));
            return;
        }
        match lines::text(raw) {
            Some(text) => self.interpret(&text),
            None => self.unreadable(&String::from_utf8_lossy(raw)),
        }
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
        if let Some(pending) = self.pending.take() {
            // A row's head whose timings never came.
            self.fragment(&pending.text);
        }
        self.finish_transports();
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
            let clean: String = text.chars().filter(|c| !c.is_control()).collect();
            self.log.unreadable_example = Some(Quoted::new(self.log.lines, &clean));
        }
    }

    fn keep_tail(&mut self, line: &str) {
        self.keep_tail_at(self.log.lines, line);
    }

    fn keep_tail_at(&mut self, number: u64, line: &str) {
        let mut slot = if self.tail.len() == TAIL_LINES {
            self.tail.pop_front().unwrap_or_default()
        } else {
            (0, String::new())
        };
        slot.0 = number;
        slot.1.clear();
        slot.1.push_str(line);
        self.tail.push_back(slot);
    }

    fn interpret(&mut self, raw: &str) {
        self.interpret_keeping(raw, true);
    }

    /// Interpret one line; `keep` it among the tail lines (the chunk reader keeps its tail
    /// itself, [`keep_chunk_tail`](Self::keep_chunk_tail)).
    fn interpret_keeping(&mut self, raw: &str, keep: bool) {
        let (line, plain) = content(raw);
        if line.is_empty() {
            return;
        }
        if keep {
            self.keep_tail(line);
        }
        let marker = plain.or_else(|| {
            self.nccl.find_iter(line.as_bytes()).find_map(|pos| {
                let after = &line[pos + "NCCL ".len()..];
                if after.starts_with("INFO ") {
                    Some((pos, Marker::Info))
                } else if after.starts_with("WARN") {
                    Some((pos, Marker::Warn))
                } else if pos == 0 && after.starts_with("version ") {
                    Some((pos, Marker::Version))
                } else {
                    None
                }
            })
        });
        if let Some((pos, marker)) = marker {
            let after = &line[pos + "NCCL ".len()..];
            match marker {
                Marker::Info => {
                    self.nccl_line(pos, line);
                    self.info(&after["INFO ".len()..], line);
                }
                Marker::Warn => {
                    self.nccl_line(pos, line);
                    self.warn(after["WARN".len()..].trim(), line);
                }
                Marker::Version => {
                    self.log.nccl_version = after["version ".len()..]
                        .split_whitespace()
                        .next()
                        .map(str::to_string);
                }
            }
            return;
        }
        if let Some(rest) = line.strip_prefix('#') {
            self.hash_line(rest.trim(), line);
            return;
        }
        if TEST.is_in(line) && self.failure(line) {
            return;
        }
        if line.starts_with(|c: char| c.is_ascii_digit()) {
            self.row_line(line);
            return;
        }
        if line.starts_with("..") && TEST_FAILURE.is_in(line) {
            self.log.trace_lines += 1;
            return;
        }
        if self.footer_or_header(line, line) {
            return;
        }
        if line.starts_with("Invalid number of GPUs") {
            self.log.invalid_gpus = Some(self.quote(line));
            return;
        }
        if self.application_error(line) {
            return;
        }
        if self.log.command_program.is_none() && line.contains("_perf") {
            self.log.command_program = command::program_on_command_line(line);
        }
        self.log.other_lines += 1;
    }

    /// The `host:pid:tid` prefix of an NCCL line at `pos`: its host noted, and whatever another
    /// stream printed in front of it on the same line (a row's head, `NVIDIA/nccl#1453`) read.
    fn nccl_line(&mut self, pos: usize, line: &str) {
        let before = &line[..pos];
        if let Some(start) = self.note_host(before) {
            let glued = prefix::strip(&before[..start]);
            if glued.starts_with(|c: char| c.is_ascii_digit()) {
                self.row_line(glued);
            }
        }
    }

    /// `#` lines without their `#` (`rest`), and the same lines as old builds and copies print
    /// them without it: `nThread …`, `Out of bounds values …`, `Avg bus bandwidth …`, the
    /// column header.
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
            self.collective_starting(name);
        } else if rest.starts_with("Rank ") {
            self.device_line(rest);
        } else if let Some(v) = rest.strip_prefix("Reducing maxBytes to ") {
            self.log.reduced_max_bytes = v.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if let Some(v) = rest.strip_prefix("error:") {
            if !v.trim().is_empty() {
                self.log.last_error = Some(self.quote(line));
            }
        } else {
            self.footer_or_header(rest, line);
        }
    }

    /// Lines nccl-tests prints with `#` and old builds (and copies through Markdown) without:
    /// `true` when `text` was one.
    fn footer_or_header(&mut self, text: &str, line: &str) -> bool {
        if text.starts_with("nThread ") {
            self.config_line(text);
        } else if let Some(v) = text.strip_prefix("Out of bounds values") {
            self.out_of_bounds(v, line);
        } else if let Some(v) = text.strip_prefix("Avg bus bandwidth") {
            self.average(v, line);
        } else if text.starts_with("Collective test concluded") {
            self.concluded();
        } else if text.starts_with("Using devices") {
        } else if text.starts_with("Rank ") && text.contains(" device ") {
            self.device_line(text);
        } else if BUSBW.is_in(text) {
            let mut inline = [""; scan::INLINE_FIELDS];
            return match scan::split_words(text, &mut inline) {
                Some(n) => self.column_header(&inline[..n]),
                None => self.column_header(&text.split_whitespace().collect::<Vec<_>>()),
            };
        } else {
            return false;
        }
        true
    }
}

/// A line's content: without launcher decorations; a plain NCCL line (a host name first, then
/// `[dev] NCCL INFO|WARN`) has none to strip, and its marker is found on the way.
fn content(raw: &str) -> (&str, Option<(usize, Marker)>) {
    let raw = raw.trim_ascii();
    if raw.starts_with(|c: char| c.is_ascii_alphabetic())
        && let Some(marker) = nccl_marker(raw)
    {
        return (raw, Some(marker));
    }
    (prefix::strip(raw), None)
}

/// Where the marker of a plain `host:pid:tid [dev] NCCL INFO|WARN` line is, found from its
/// shape without a search (most lines of a big log are such lines).
fn nccl_marker(line: &str) -> Option<(usize, Marker)> {
    let b = line.as_bytes();
    let space = memchr::memchr(b' ', &b[..b.len().min(128)])?;
    if b.get(space + 1) != Some(&b'[') {
        return None;
    }
    let close = space
        + 2
        + b.get(space + 2..)?
            .iter()
            .take(8)
            .position(|&c| c == b']')?;
    let pos = close + 2;
    let marker = b.get(close + 1..pos + 10)?;
    match marker {
        b" NCCL INFO " => Some((pos, Marker::Info)),
        _ if marker.starts_with(b" NCCL WARN") => Some((pos, Marker::Warn)),
        _ => None,
    }
}

static BUSBW: scan::Needle = scan::Needle::new("busbw");
static TEST: scan::Needle = scan::Needle::new(": Test ");
static TEST_FAILURE: scan::Needle = scan::Needle::new("Test failure");

/// What an `NCCL ` in a line introduces.
enum Marker {
    Info,
    Warn,
    /// The bare `NCCL version 2.21.5+cuda12.4` banner.
    Version,
}

/// Parse a whole log held in memory (tests, small files).
pub fn parse_log(text: &str) -> NcclLog {
    let mut parser = NcclLogParser::new();
    for line in text.lines() {
        parser.feed_line(line);
    }
    parser.finish()
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

    /// A script that runs two tests into one log: two tables, each with its name and footer;
    /// not per-process headers.
    #[test]
    fn sequential_tests_make_tables() {
        let test = |name: &str, redop: &str| {
            format!(
                "# Collective test starting: {name}
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
  1073741824     268435456     float   {redop:>5}      -1   4012.3  267.61  468.32       0   4005.1  268.09  469.16       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 468.74
#
# Collective test concluded: {name}
"
            )
        };
        let log = parse_log(&(test("all_reduce_perf", "sum") + &test("all_gather_perf", "none")));
        assert_eq!(log.tables.len(), 2);
        assert_eq!(log.per_process_headers, 0);
        assert_eq!(log.header_blocks, 2);
        assert_eq!(log.tables[1].collective.as_deref(), Some("all_gather_perf"));
        assert!(log.tables.iter().all(|t| t.rows == 1 && t.has_footer()));
        assert_eq!(log.rows[1].table, 1);
        // The devices of the first test only.
        assert_eq!(log.devices.len(), 1);
        // Headers before any result: several processes, each its own test.
        let header = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 validation: 1\n";
        assert_eq!(parse_log(&header.repeat(2)).per_process_headers, 1);
    }

    /// Issue 13: a line with a control character is read without it, not dropped — colour
    /// codes around a Ray prefix, a BEL, CRLF line ends, a progress bar redrawn with `\r`.
    #[test]
    fn lines_with_control_characters_are_read() {
        let mut parser = NcclLogParser::new();
        parser.feed_bytes(
            b"\x1b[36m(RayWorkerWrapper pid=4009)\x1b[0m node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\r\n\
step 12 |####      | 40%\rnode-b:2:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM/read\n\
node-a:1:1 [0] NCCL INFO Using network IB\x07\r\n\
Epoch 0:  6%|##  | 32040/500150\r[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800002 milliseconds before timing out.\n",
        );
        let log = parser.finish();
        assert_eq!(log.unreadable_lines, 0);
        assert_eq!(log.info_lines, 3);
        assert_eq!(log.transports.p2p.channels, 2);
        let hosts: Vec<&str> = log.info_hosts.iter().map(String::as_str).collect();
        assert_eq!(hosts, vec!["node-a", "node-b"]);
        assert_eq!(log.transports.network.as_ref().unwrap().0, "IB");
        assert_eq!(log.timeouts[0].ran_ms, Some(1_800_002));
        assert!(log.tail.iter().all(|q| !q.text.contains('\u{1b}')));
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
