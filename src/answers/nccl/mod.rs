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
//! - [`table`]: headers and footers of every nccl-tests generation (§2–§4), and which
//!   collective a table is;
//! - [`rows`]: result rows, recognised by their shape and arithmetic (§3);
//! - [`tables`]: which table a row or footer belongs to, and the cap on tables kept;
//! - [`sweep`]: a table's figures — peak busbw and its size, the sweep average, a collapse;
//! - [`transport`]: `NCCL INFO` lines (§9, §10);
//! - [`errors`]: failure, WARN and IB completion lines (§5, §11), watchdog timeouts and NCCL
//!   errors in an application's output;
//! - [`model`]: the facts themselves ([`NcclLog`]);
//! - the hot path's byte work: [`prepare`] (a line's shape, on the reading thread), [`scan`]
//!   (fields, searches, trimming), [`numbers`] (a row's numbers), [`bytemask`] (16 bytes at a
//!   time).
//!
//! Bad input (issue 7): a line that is not UTF-8 is counted as unreadable and skipped; one longer
//! than [`MAX_LINE_BYTES`] is cut there (the rest is discarded as it arrives) and counted; a line
//! with control characters is read without them (issue 13); NaN/inf or arithmetic that does not
//! add up make a row unreadable. Memory is bounded whatever the input size: at most [`MAX_ROWS`]
//! rows, [`MAX_TABLES`] tables ([`tables`] says what the checks see past it), [`MAX_QUOTES`]
//! quoted lines per kind, [`TAIL_LINES`] tail lines, [`MAX_HOSTS`] hosts.
//! Only lines matching a known shape are interpreted (§2: MPI warnings, hwloc's "Authorization
//! required" and the like are counted as other lines).
//!
//! Speed (issues 15, 28, 41; docs/performance.md): each line is looked at once — line ends come
//! from one vector pass over a chunk, a plain NCCL line's marker from its shape, searches that
//! most lines fail run ahead through the chunk instead of in each line, launcher prefixes are
//! judged on their first bytes, a line that only counts allocates nothing, and what a sweep
//! repeats for every test (its `nThread` line, its column header) is read once. Every fast path
//! gives exactly what the general one gives: unit tests compare them on odd input, and the
//! property tests and real logs hold the facts.

mod bytemask;
mod command;
mod errors;
mod lines;
mod model;
mod numbers;
mod prefix;
mod prepare;
mod ready;
mod rows;
mod run;
mod scan;
mod sweep;
mod table;
mod tables;
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
pub use prepare::Prepared;
pub use sweep::{Collapse, Point, Sweep};
pub use table::{collective_from_rows, type_size};
pub use tables::MAX_TABLES;

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
    /// The text of a column header whose words make `layout` (`table::header_line`).
    layout_text: String,
    /// The last `nThread` line and what it said (`table::config_line`).
    last_config: Option<(String, TestConfig)>,
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
    pending: Option<rows::PendingRow>,
    /// The host of the last NCCL line (most lines repeat it).
    last_host: String,
    /// `host:pid:tid` tokens seen lately and the length of their host, latest first
    /// (`transport.rs`).
    recent_tokens: Vec<(Vec<u8>, usize)>,
    /// Channels by network and P2P flavour, moved into [`Transports`] at the end.
    nets: Vec<(String, NetUse)>,
    p2p_flavours: Vec<(String, u64)>,
    /// The last [`TAIL_LINES`] lines as (line number, text), quoted only at the end: buffers are
    /// reused, so a log of millions of lines does not allocate per line.
    tail: VecDeque<(u64, String)>,
    splitter: LineSplitter,
    /// A WARN line's text lower-cased (`errors::reports_error`), reused.
    lower: String,
}

impl Default for NcclLogParser {
    fn default() -> Self {
        NcclLogParser {
            log: NcclLog::default(),
            layout: None,
            layout_text: String::new(),
            last_config: None,
            current_table: None,
            next_collective: None,
            next_config: None,
            section_open: false,
            devices_closed: false,
            pending: None,
            last_host: String::new(),
            recent_tokens: Vec::with_capacity(transport::RECENT_TOKENS),
            nets: Vec::new(),
            p2p_flavours: Vec::new(),
            tail: VecDeque::with_capacity(TAIL_LINES),
            splitter: LineSplitter::new(),
            lower: String::new(),
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
        let found = marker(line, plain);
        self.interpret_content(line, found, Known::default());
    }

    /// Interpret a line's non-empty content, its NCCL marker found ([`marker`]), with what the
    /// reading thread worked out about it.
    fn interpret_content(&mut self, line: &str, marker: Option<(usize, Marker)>, known: Known<'_>) {
        if let Some((pos, marker)) = marker {
            let after = &line[pos + "NCCL ".len()..];
            match marker {
                Marker::Info => {
                    self.nccl_line(pos, line);
                    self.info(&after["INFO ".len()..], line, known.info_bits);
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
            self.hash_line(scan::trim(rest), line);
            return;
        }
        if known.test.unwrap_or_else(|| TEST.is_in(line)) && self.failure(line) {
            return;
        }
        if line.starts_with(|c: char| c.is_ascii_digit()) {
            match known.row {
                Some(ready) => self.ready_row_line(line, ready),
                None => self.row_line(line),
            }
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
        if let Some(start) = self.note_host(before)
            && start > 0
        {
            // Nothing in front of the host (most lines): nothing glued to read.
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
        } else if has_busbw(text) {
            return self.header_line(text);
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
    if raw.starts_with('#') {
        // What `prefix::strip` gives a line starting with `#`: itself (a `#` line of nccl-tests,
        // most of a table-dense log, spared the call).
        return (raw, None);
    }
    if raw.starts_with(|c: char| c.is_ascii_alphabetic())
        && let Some(marker) = nccl_marker(raw)
    {
        return (raw, Some(marker));
    }
    (prefix::strip(raw), None)
}

/// Where a line's content holds the `NCCL ` of an `NCCL INFO`, `NCCL WARN` or bare `NCCL
/// version` marker, and which: `plain` when [`content`] found it, else searched with `nccl` (a
/// finder of `NCCL `).
fn marker(line: &str, plain: Option<(usize, Marker)>) -> Option<(usize, Marker)> {
    marker_if(line, plain, || true)
}

/// [`marker`], where `holds` says whether `NCCL ` occurs in `line` at all (asked only when the
/// line's shape did not tell; `false` saves the search).
fn marker_if(
    line: &str,
    plain: Option<(usize, Marker)>,
    holds: impl FnOnce() -> bool,
) -> Option<(usize, Marker)> {
    plain.or_else(|| {
        // Behind launcher decorations most NCCL lines are plain ones: found by their shape,
        // at the very place the search below finds it (`nccl_marker` only accepts a marker
        // with no `NCCL ` before it that the search would take).
        if line.starts_with(|c: char| c.is_ascii_alphabetic())
            && let Some(found) = nccl_marker(line)
        {
            return Some(found);
        }
        if !holds() {
            return None;
        }
        let bytes = line.as_bytes();
        std::iter::successors(NCCL.find_from(bytes, 0), |&at| {
            NCCL.find_from(bytes, at + 1)
        })
        .find_map(|pos| {
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
    })
}

/// For an `NCCL INFO` line's content with its marker at `pos`: which substrings its text holds
/// that [`NcclLogParser::info`] looks for (`transport::found`).
fn info_found(line: &str, pos: usize) -> u8 {
    let text = line.get(pos + "NCCL INFO ".len()..).unwrap_or("");
    transport::found(text.trim_ascii())
}

/// Where the marker of a plain `host:pid:tid [dev] NCCL INFO|WARN` line is, found from its
/// shape without a search (most lines of a big log are such lines).
fn nccl_marker(line: &str) -> Option<(usize, Marker)> {
    let b = line.as_bytes();
    // The first space, 16 bytes at a time: a `memchr` call costs more than the few blocks a
    // host:pid:tid takes.
    let space = bytemask::first_position(&b[..b.len().min(128)], b" ", b'x')?;
    // `[`, then a `]` among the 8 bytes after it, then the marker: one mask of the 16 bytes
    // from the `[` (most lines have them) instead of a byte loop.
    let from = space + 1;
    let window = b.get(from..(from + bytemask::BLOCK).min(b.len()))?;
    if window.first() != Some(&b'[') {
        return None;
    }
    let closes = bytemask::mask(window, b"]", 0) & 0b1_1111_1110;
    if closes == 0 {
        return None;
    }
    let close = from + closes.trailing_zeros() as usize;
    let pos = close + 2;
    let marker = b.get(close + 1..pos + 10)?;
    if marker.starts_with(b" NCCL WARN") {
        return Some((pos, Marker::Warn));
    }
    (marker == b" NCCL INFO ").then_some((pos, Marker::Info))
}

/// `text.contains("busbw")`, from the `w`s of a short line: a search set up once still cost
/// ~900 instructions a `#` line (issue 41, callgrind).
fn has_busbw(text: &str) -> bool {
    let b = text.as_bytes();
    let mut found = false;
    bytemask::each_position(b, b"w", 0, |pos| {
        found |= pos >= 4 && b[pos - 4..].starts_with(b"busbw");
    });
    found
}
/// nccl-tests' failure lines hold it (`host: Test NCCL failure …`, [`errors`]).
static TEST: scan::Needle = scan::Needle::new(": Test ");
/// The marker of NCCL's own lines.
static NCCL: scan::Needle = scan::Needle::new("NCCL ");
static TEST_FAILURE: scan::Needle = scan::Needle::new("Test failure");

/// What the reading thread already worked out about a line ([`prepare`]); nothing when read
/// on one thread.
#[derive(Debug, Default, Clone, Copy)]
struct Known<'r> {
    /// For an INFO line, what [`info_found`] gives.
    info_bits: Option<u8>,
    /// For a line without a marker, whether it holds [`TEST`].
    test: Option<bool>,
    /// For a line without a marker whose content starts with a digit, the row read ahead
    /// (`ready::ReadyRow::of` of the content; `None`: read it in place).
    row: Option<&'r ready::ReadyRow>,
}

/// What an `NCCL ` in a line introduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
mod tests;
