//! nccl-tests' header, result table and footer, of every generation (reference/nccl.md §2–§4):
//! the `nThread` and device lines, the column header row, result rows, `Out of bounds values`,
//! `Avg bus bandwidth`, `Collective test concluded` — with or without their `#`.
//!
//! Rows are recognised by their shape, not their spacing: a size and an element count (whole
//! numbers), a type name, the lead columns the header names (`redop`, `root`, or neither before
//! 2022-08), then one or two timed blocks (`time algbw busbw #wrong|error`, `-I` adds four more
//! per block), counted from the row's end; and the row must be arithmetic nccl-tests could have
//! printed: algbw = size / time (every collective's `GetBw` divides the printed size by the time,
//! `src/*.cu`). Per-rank markers glued to a field (`-1[0]`, `0[0]`, `NVIDIA/nccl#1453`) separate
//! fields like a space. A row cut in two by another process's lines (the head, then NCCL INFO
//! lines, then the timings on a line of their own, `NVIDIA/nccl#1453`) is put back together.

use super::model::{DeviceLine, Measure, Quoted, Row, TestConfig, Wrong, cut};
use super::scan::{INLINE_FIELDS, parse_f64, parse_u64, split_fields, split_words};
use super::{MAX_DEVICES, MAX_ROWS, NcclLogParser, QUOTE_CHARS};

/// The default block of a result row: time, algbw, busbw, #wrong (§3).
const DEFAULT_BLOCK: usize = 4;
/// Where time, algbw, busbw and `#wrong` sit in a block without a header.
const DEFAULT_SLOTS: [usize; 4] = [0, 1, 2, 3];

/// How a result row maps to columns, from the column header row (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// Names of the leading columns (`size count type redop root`).
    lead: Vec<String>,
    /// Names of one timed block (`time algbw busbw #wrong` [+ `i_min i_max i_p99 i_cv%`]).
    block: Vec<String>,
    cputime: bool,
    old_error: bool,
    /// Where time, algbw, busbw and `#wrong`/`error` sit in a block (looked up once here, not
    /// per row).
    slots: [usize; 4],
}

impl Layout {
    /// A column header row's tokens (without `#`): it names `size`/`bytes`, `time`/`cputime` and
    /// `busbw`.
    pub(super) fn from_header(tokens: &[&str]) -> Option<Layout> {
        let (first, block_end) = Self::bounds(tokens)?;
        let block: Vec<String> = tokens[first..block_end]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let index = |names: &[&str], default: usize| {
            block
                .iter()
                .position(|t| names.contains(&t.as_str()))
                .unwrap_or(default)
        };
        let slots = [
            index(&["time", "cputime"], 0),
            index(&["algbw"], 1),
            index(&["busbw"], 2),
            index(&["#wrong", "error", "res"], 3),
        ];
        Some(Layout {
            lead: tokens[..first].iter().map(|s| s.to_string()).collect(),
            old_error: block.iter().any(|t| t == "error" || t == "res"),
            cputime: tokens[first] == "cputime",
            block,
            slots,
        })
    }

    /// Whether `tokens` make this very layout (every table of a long log repeats its header:
    /// compared, not rebuilt).
    fn is_from(&self, tokens: &[&str]) -> bool {
        Self::bounds(tokens).is_some_and(|(first, block_end)| {
            self.lead.iter().eq(tokens[..first].iter().copied())
                && self
                    .block
                    .iter()
                    .eq(tokens[first..block_end].iter().copied())
        })
    }

    /// Where the first timed block starts and ends in a header's tokens, when they are one.
    fn bounds(tokens: &[&str]) -> Option<(usize, usize)> {
        if !tokens.contains(&"busbw") || !(tokens.contains(&"size") || tokens.contains(&"bytes")) {
            return None;
        }
        let is_time = |t: &&str| *t == "time" || *t == "cputime";
        let first = tokens.iter().position(is_time)?;
        let second = tokens[first + 1..]
            .iter()
            .position(is_time)
            .map(|i| first + 1 + i);
        let end = if tokens.last() == Some(&"timestamp") {
            tokens.len() - 1
        } else {
            tokens.len()
        };
        let block_end = second.unwrap_or(end);
        if !tokens[first..block_end].contains(&"busbw") || first < 3 {
            return None;
        }
        Some((first, block_end))
    }
}

/// The head of a row whose timings have not arrived yet (a row cut by other output).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PendingRow {
    line: u64,
    lead: Vec<String>,
    blocks: Vec<Measure>,
    pub(super) text: String,
}

/// The fields of a row: whitespace and glued per-rank markers (`[0]`) separate them.
fn fields(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    // Most rows hold no marker: split on whitespace alone (a third of the time of a row).
    let mut out = Vec::with_capacity(16);
    if memchr::memchr(b'[', bytes).is_none() {
        out.extend(text.split_ascii_whitespace());
        return out;
    }
    let mut start: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let marker = if b == b'[' {
            let digits = bytes[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            (digits > 0 && bytes.get(i + 1 + digits) == Some(&b']')).then_some(digits + 2)
        } else {
            None
        };
        if b.is_ascii_whitespace() || marker.is_some() {
            if let Some(s) = start.take() {
                out.push(&text[s..i]);
            }
            i += marker.unwrap_or(1);
            continue;
        }
        if start.is_none() {
            start = Some(i);
        }
        i += 1;
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

/// A row's fields when it holds no per-rank marker and fits [`INLINE_FIELDS`] (most rows): into
/// `out`, their count; else `None` (split those with [`fields`]).
pub(super) fn row_fields<'t>(text: &'t str, out: &mut [&'t str; INLINE_FIELDS]) -> Option<usize> {
    if memchr::memchr(b'[', text.as_bytes()).is_some() {
        return None;
    }
    split_fields(text, out)
}

fn is_number(t: &str) -> bool {
    t == "N/A" || parse_f64(t).is_some()
}

/// The size of one element of nccl-tests' type names (`src/common.cu` `test_typenames`).
pub fn type_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "int8" | "uint8" | "char" | "f8e4m3" | "f8e5m2" | "fp8_e4m3" | "fp8_e5m2" => 1,
        "half" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "int" | "float" | "float32" => 4,
        "int64" | "uint64" | "double" | "float64" => 8,
        _ => return None,
    })
}

/// The collective a table's rows fit, when only one does (for logs that never name it): the
/// size column against count × type size, whether there is a reduction and a root (§3, §8:
/// all_reduce and reduce print the per-rank size, reduce_scatter the whole; broadcast has a
/// root, no reduction). all_gather and alltoall print alike: `None`.
pub fn collective_from_rows<'r>(rows: impl Iterator<Item = &'r Row>) -> Option<&'static str> {
    let row = rows.filter(|r| r.count > 0).max_by_key(|r| r.size)?;
    let unit = row.count.checked_mul(type_size(&row.dtype)?)?;
    if unit == 0 || row.size % unit != 0 {
        return None;
    }
    let ratio = row.size / unit;
    let reducing = row.redop.as_deref().is_some_and(|op| op != "none");
    let rooted = row.root.is_some_and(|r| r >= 0);
    match (reducing, rooted, ratio) {
        (true, false, 1) => Some("all_reduce"),
        (true, true, 1) => Some("reduce"),
        (true, false, n) if n > 1 => Some("reduce_scatter"),
        (false, true, 1) => Some("broadcast"),
        _ => None,
    }
}

impl NcclLogParser {
    /// A table of the current section printed something: a later `nThread` line is another test.
    fn section_output(&mut self) {
        self.section_open = false;
    }

    /// A column header row: a new table unless the current one has printed nothing yet (the
    /// same header repeated by several processes).
    pub(super) fn column_header(&mut self, tokens: &[&str]) -> bool {
        let same = self.layout.as_ref().is_some_and(|l| l.is_from(tokens));
        let layout = if same {
            self.layout.take()
        } else {
            Layout::from_header(tokens)
        };
        let Some(layout) = layout else {
            return false;
        };
        let reuse = self
            .current_table
            .and_then(|t| self.table_at(t))
            .is_some_and(|t| t.rows == 0 && !t.has_footer());
        let table = if reuse {
            self.table()
        } else {
            self.new_table()
        };
        if let Some(t) = self.table_at_mut(table) {
            t.old_error_column = layout.old_error;
        }
        self.layout = Some(layout);
        self.pending = None;
        true
    }

    /// `nThread 1 nGpus 8 minBytes 8 maxBytes … validation: 1 …` (with or without `#`).
    pub(super) fn config_line(&mut self, text: &str) {
        self.log.header_blocks += 1;
        if self.section_open {
            // The test above printed nothing of its table before this one began.
            self.log.per_process_headers += 1;
        }
        self.section_open = true;
        let mut inline = [""; INLINE_FIELDS];
        let spilled: Vec<&str>;
        let tokens: &[&str] = match split_words(text, &mut inline) {
            Some(n) => &inline[..n],
            None => {
                spilled = text.split_whitespace().collect();
                &spilled
            }
        };
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
            self.log.config = Some(config.clone());
        }
        self.next_config = Some(config);
    }

    /// `Rank  0 Group  0 Pid  41234 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3`.
    pub(super) fn device_line(&mut self, rest: &str) {
        // A later test of the same log lists its devices again: the first list stands.
        if self.devices_closed || self.log.devices.len() >= MAX_DEVICES {
            return;
        }
        if let Some(d) = device_line(rest) {
            self.log.devices.push(d);
        }
    }

    /// `Out of bounds values : N OK|FAILED`.
    pub(super) fn out_of_bounds(&mut self, value: &str, line: &str) {
        let Ok(n) = first_token(value.trim_start().trim_start_matches(':')).parse::<u64>() else {
            return;
        };
        let quote = self.quote(line);
        let table = self.table();
        self.set_out_of_bounds(table, n, &quote);
        self.log.out_of_bounds = Some((n, quote));
        self.footer_seen();
    }

    /// `Avg bus bandwidth : X [OK|FAILED]`.
    pub(super) fn average(&mut self, value: &str, line: &str) {
        let Ok(x) = first_token(value.trim_start().trim_start_matches(':')).parse::<f64>() else {
            return;
        };
        if !x.is_finite() {
            return;
        }
        let quote = self.quote(line);
        let table = self.table();
        if let Some(t) = self.table_at_mut(table) {
            t.avg_busbw = Some((x, quote.clone()));
        }
        self.log.avg_busbw = Some((x, quote));
        self.footer_seen();
    }

    /// `Collective test concluded: all_reduce_perf`.
    pub(super) fn concluded(&mut self) {
        let table = self.table();
        if let Some(t) = self.table_at_mut(table) {
            t.concluded = true;
        }
        self.log.concluded = true;
        self.footer_seen();
    }

    fn footer_seen(&mut self) {
        self.section_output();
        self.pending = None;
        self.devices_closed = !self.log.devices.is_empty();
    }

    /// `Collective test starting: all_reduce_perf`: names the next table.
    pub(super) fn collective_starting(&mut self, name: &str) {
        let name = name.trim().to_string();
        if self.log.collective.is_none() {
            self.log.collective = Some(name.clone());
        }
        self.next_collective = Some(name);
    }

    /// A line that starts like a result row (a digit first), or the part of a line before
    /// another process's output cut into it.
    pub(super) fn row_line(&mut self, text: &str, split: Option<&[&str]>) {
        // Most rows hold no per-rank marker and fit on the stack: split without allocating
        // (or split already by the reading thread, `split`: what `row_fields` gave there).
        let mut inline = [""; INLINE_FIELDS];
        let spilled: Vec<&str>;
        let tokens: &[&str] = match split {
            Some(tokens) => tokens,
            None => match row_fields(text, &mut inline) {
                Some(n) => &inline[..n],
                None => {
                    spilled = fields(text);
                    &spilled
                }
            },
        };
        let head = tokens.len() >= 3
            && parse_u64(tokens[0]).is_some()
            && parse_u64(tokens[1]).is_some()
            && tokens[2].starts_with(|c: char| c.is_ascii_alphabetic());
        if head {
            if let Some(abandoned) = self.pending.take() {
                self.fragment(&abandoned.text);
            }
            match self.row(tokens, text) {
                Ok(Some(row)) => self.push_row(row),
                Ok(None) => {}
                Err(()) => self.unreadable(text),
            }
            return;
        }
        // Timings alone: the rest of a row whose head came before other output.
        let block_len = self.block_len();
        let blocks = tokens.len() / block_len;
        let timings = !tokens.is_empty()
            && tokens.len() % block_len == 0
            && blocks <= 2
            && tokens.iter().all(|t| is_number(t));
        if !timings {
            self.log.other_lines += 1;
            return;
        }
        let Some(mut pending) = self.pending.take() else {
            // A piece of a row whose head this log does not have.
            self.fragment(text);
            return;
        };
        for b in 0..blocks {
            match self.measure(&tokens[b * block_len..(b + 1) * block_len]) {
                Some(m) => pending.blocks.push(m),
                None => {
                    self.fragment(&pending.text);
                    return;
                }
            }
        }
        if pending.blocks.len() < 2 {
            self.pending = Some(pending);
            return;
        }
        let lead: Vec<&str> = pending.lead.iter().map(String::as_str).collect();
        match self.assemble(&lead, &pending.blocks, pending.line, &pending.text) {
            Some(row) => self.push_row(row),
            None => self.fragment(&pending.text),
        }
    }

    /// A piece of a row that could not be completed: unreadable, and a sign of nccl-tests output.
    pub(super) fn fragment(&mut self, text: &str) {
        self.log.row_fragments += 1;
        self.unreadable(text);
    }

    fn block_len(&self) -> usize {
        self.layout
            .as_ref()
            .map_or(DEFAULT_BLOCK, |l| l.block.len())
            .max(1)
    }

    fn push_row(&mut self, mut row: Row) {
        row.table = self.table();
        self.section_output();
        if self.log.rows.len() < MAX_ROWS && Self::is_kept(row.table) {
            if let Some(t) = self.table_at_mut(row.table) {
                t.rows += 1;
            }
            self.log.rows.push(row);
        } else {
            self.log.dropped_rows += 1;
        }
    }

    /// A row from its fields: `Ok(Some)` a whole row, `Ok(None)` a head (lead fields alone) kept
    /// until its timings come, `Err` not a row nccl-tests could have printed.
    fn row(&mut self, tokens: &[&str], text: &str) -> Result<Option<Row>, ()> {
        let mut tokens = tokens;
        // `-S 1` timestamp: `YYYY-MM-DD HH:MM:SS` at the end.
        let n = tokens.len();
        if n >= 2 && looks_like_date(tokens[n - 2]) && looks_like_time(tokens[n - 1]) {
            tokens = &tokens[..n - 2];
        }
        let block_len = self.block_len();
        let n = tokens.len();
        let fits = |lead: usize, blocks: usize| lead + blocks * block_len == n;
        let shape = match self.layout.as_ref().map(|l| l.lead.len()) {
            Some(lead) => (0..=2)
                .rev()
                .find(|&b| fits(lead, b))
                .map(|b| (lead, b))
                // Lead columns left blank (alltoall's `redop`, and `root` with it, nccl-tests
                // #78): fewer lead fields, whole timed blocks after them. Only `redop` is left
                // blank, so what lead field is there must be a root: a row that lost a timing
                // field instead (`sum` read as the last lead field) stays unreadable.
                .or_else(|| {
                    (3..lead)
                        .rev()
                        .find_map(|l| (1..=2).rev().find(|&b| fits(l, b)).map(|b| (l, b)))
                        .filter(|&(l, _)| tokens[3..l].iter().all(|t| t.parse::<i64>().is_ok()))
                }),
            None => (1..=2)
                .rev()
                .find_map(|b| (3..=5).find(|&l| fits(l, b)).map(|l| (l, b)))
                .or(((3..=5).contains(&n)).then_some((n, 0))),
        };
        let Some((lead, blocks)) = shape else {
            return Err(());
        };
        let unset = Measure {
            time_us: 0.0,
            algbw: 0.0,
            busbw: 0.0,
            wrong: Wrong::NotChecked,
        };
        let mut measures = [unset; 2];
        for (b, slot) in measures.iter_mut().enumerate().take(blocks) {
            let block = &tokens[lead + b * block_len..lead + (b + 1) * block_len];
            *slot = self.measure(block).ok_or(())?;
        }
        let line = self.log.lines;
        if blocks == 0 {
            self.pending = Some(PendingRow {
                line,
                lead: tokens.iter().map(|s| s.to_string()).collect(),
                blocks: Vec::new(),
                text: text.to_string(),
            });
            return Ok(None);
        }
        self.assemble(&tokens[..lead], &measures[..blocks], line, text)
            .map(Some)
            .ok_or(())
    }

    /// A row from its lead fields and blocks, if its arithmetic holds.
    fn assemble(&self, lead: &[&str], blocks: &[Measure], line: u64, text: &str) -> Option<Row> {
        // A row past MAX_ROWS, or of a table past MAX_TABLES, is checked and counted, then
        // dropped: its text is not copied.
        let kept = self.log.rows.len() < MAX_ROWS && self.current_table.is_none_or(Self::is_kept);
        let owned = |s: &str| if kept { s.to_string() } else { String::new() };
        let size: u64 = parse_u64(lead.first()?)?;
        let count: u64 = parse_u64(lead.get(1)?)?;
        let dtype = owned(lead.get(2)?);
        let (mut redop, mut root) = (None, None);
        // With columns left blank the names no longer line up: what is there is told by its
        // shape, as without a header (a number is the root).
        let lead_names = self
            .layout
            .as_ref()
            .map(|l| &l.lead)
            .filter(|names| names.len() == lead.len());
        for (i, token) in lead.iter().enumerate().skip(3) {
            let name = lead_names
                .and_then(|names| names.get(i))
                .map(String::as_str);
            match name {
                Some("root") => root = Some(token.parse().ok()?),
                Some("redop" | "op") => redop = Some(owned(token)),
                _ => match token.parse::<i64>() {
                    Ok(r) => root = Some(r),
                    Err(_) => redop = Some(owned(token)),
                },
            }
        }
        let cputime = self.layout.as_ref().is_some_and(|l| l.cputime);
        if !cputime && !blocks.iter().all(|m| plausible(size, m)) {
            return None;
        }
        let (out_of_place, in_place) = match blocks {
            [one] => (None, Some(*one)),
            [oop, ip, ..] => (Some(*oop), Some(*ip)),
            [] => return None,
        };
        Some(Row {
            line,
            table: self.current_table.unwrap_or(0),
            size,
            count,
            dtype,
            redop,
            root,
            out_of_place,
            in_place,
            text: if kept {
                cut(text.trim(), QUOTE_CHARS)
            } else {
                String::new()
            },
        })
    }

    /// One timed block: time, algbw, busbw and the `#wrong`/`error` slot where the header puts
    /// them (`-I` adds per-iteration columns after them).
    fn measure(&self, block: &[&str]) -> Option<Measure> {
        let layout = self.layout.as_ref();
        let [time_i, algbw_i, busbw_i, wrong_i] = layout.map_or(DEFAULT_SLOTS, |l| l.slots);
        let old_error = layout.is_some_and(|l| l.old_error);
        let number = |i: usize| -> Option<f64> {
            let v = parse_f64(block.get(i)?)?;
            v.is_finite().then_some(v)
        };
        let wrong = match *block.get(wrong_i)? {
            "N/A" => Wrong::NotChecked,
            w if old_error => Wrong::Deviation(parse_f64(w)?),
            w => match parse_u64(w) {
                Some(n) => Wrong::Count(n),
                // An old `error` column without a header (`0e+00`).
                None => Wrong::Deviation(parse_f64(w)?),
            },
        };
        if let Wrong::Deviation(d) = wrong
            && !d.is_finite()
        {
            return None;
        }
        Some(Measure {
            time_us: number(time_i)?,
            algbw: number(algbw_i)?,
            busbw: number(busbw_i)?,
            wrong,
        })
    }

    pub(super) fn quote(&self, text: &str) -> Quoted {
        Quoted::new(self.log.lines, text)
    }
}

/// algbw = size / time, within the rounding of the printed numbers (time `%7s` can be as coarse
/// as `1e+06`, algbw `%.2f`): a factor of two either way, never checked where algbw printed as
/// 0.00 or time as 0.
fn plausible(size: u64, m: &Measure) -> bool {
    if m.time_us <= 0.0 || m.algbw < 0.05 {
        return true;
    }
    let expected = size as f64 / m.time_us / 1e3;
    expected <= m.algbw * 2.0 && expected >= m.algbw * 0.5
}

fn first_token(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
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

/// `Rank  0 Group  0 Pid  41234 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3`
/// (also without `Group`, §2, and with its spaces collapsed, `NVIDIA/nccl-tests#291`).
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
    use super::super::parse_log;
    use super::*;

    #[test]
    fn fields_split_on_glued_rank_markers() {
        assert_eq!(
            fields(
                "1048576  262144  float  sum  -1[0]    1626.5    0.64    1.24      0[0]  2302.3"
            ),
            vec![
                "1048576", "262144", "float", "sum", "-1", "1626.5", "0.64", "1.24", "0", "2302.3"
            ]
        );
        assert_eq!(
            fields("[0]4194304 x[12]y [a]"),
            vec!["4194304", "x", "y", "[a]"]
        );
    }

    #[test]
    fn rows_must_add_up() {
        // algbw 267.61 GB/s for 1 GiB needs ~4012 us; 40 us is not a row nccl-tests printed.
        let text = "\
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
  1073741824     268435456     float     sum      -1   4012.3  267.61  468.32       0   4005.1  268.09  469.16       0
  1073741824     268435456     float     sum      -1     40.1  267.61  468.32       0   4005.1  268.09  469.16       0
";
        let log = parse_log(text);
        assert_eq!(log.rows.len(), 1);
        assert_eq!(log.unreadable_lines, 1);
    }

    /// alltoall and sendrecv have no reduction: old nccl-tests left `redop` blank under a header
    /// that names it (NVIDIA/nccl-tests#78, tests/data/nccl/real), one field fewer than the
    /// header.
    #[test]
    fn rows_with_a_blank_redop_are_read() {
        let text = "\
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error  
   268435456       1048576     float           520935    0.52    0.51  0e+00   519562    0.52    0.51  1e+00
";
        let log = parse_log(text);
        assert_eq!(log.rows.len(), 1, "{log:#?}");
        let row = &log.rows[0];
        assert_eq!(
            (row.size, row.count, row.dtype.as_str()),
            (268435456, 1048576, "float")
        );
        assert_eq!((row.redop.as_deref(), row.root), (None, None));
        assert_eq!(row.out_of_place.unwrap().time_us, 520935.0);
        assert_eq!(row.in_place.unwrap().wrong, Wrong::Deviation(1.0));
        assert_eq!(log.unreadable_lines, 0);
    }

    /// The newer layout has `root` too: both blank, or `redop` blank and the root printed.
    #[test]
    fn rows_with_blank_redop_and_root_are_read() {
        let header = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";
        let both = "    33554432       8388608     float                    250.1  134.17  117.40       0    249.8  134.33  117.54     N/A\n";
        let log = parse_log(&format!("{header}{both}"));
        assert_eq!(log.rows.len(), 1, "{log:#?}");
        let row = &log.rows[0];
        assert_eq!((row.redop.as_deref(), row.root), (None, None));
        assert_eq!(row.in_place.unwrap().busbw, 117.54);
        assert_eq!(row.in_place.unwrap().wrong, Wrong::NotChecked);
        let root_only = "    33554432       8388608     float              -1    250.1  134.17  117.40       0    249.8  134.33  117.54       0\n";
        let log = parse_log(&format!("{header}{root_only}"));
        assert_eq!(log.rows.len(), 1, "{log:#?}");
        assert_eq!(
            (log.rows[0].redop.as_deref(), log.rows[0].root),
            (None, Some(-1))
        );
        // A field missing among the timings is still no row.
        let short = "    33554432       8388608     float    sum      -1    250.1  134.17       0    249.8  134.33  117.54       0\n";
        let log = parse_log(&format!("{header}{short}"));
        assert!(log.rows.is_empty());
        assert_eq!(log.unreadable_lines, 1);
    }

    #[test]
    fn a_row_cut_by_other_output_is_put_back_together() {
        // NVIDIA/nccl#1453: the row's head, NCCL INFO lines, then the timings.
        let text = "\
[0]         8192          2048     float     sum      -1[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 8192 Bytes -> Algo 0 proto 0 time 26.549810
[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 8192 Bytes -> Algo 0 proto 0 time 26.549810
[0]     76.10    0.11    0.20      0[0]     75.38    0.11    0.20      0
";
        let log = parse_log(text);
        assert_eq!(log.rows.len(), 1, "{log:#?}");
        assert_eq!(log.rows[0].size, 8192);
        assert_eq!(log.rows[0].in_place.unwrap().time_us, 75.38);
        assert_eq!(log.info_lines, 2);
        assert_eq!(log.unreadable_lines, 0);
    }

    #[test]
    fn collectives_are_told_from_their_rows() {
        let row = |size: u64, count: u64, redop: Option<&str>, root: Option<i64>| Row {
            line: 1,
            table: 0,
            size,
            count,
            dtype: "float".into(),
            redop: redop.map(str::to_string),
            root,
            out_of_place: None,
            in_place: None,
            text: String::new(),
        };
        let one = |r: Row| collective_from_rows([r].iter());
        assert_eq!(
            one(row(1 << 30, 1 << 28, Some("sum"), Some(-1))),
            Some("all_reduce")
        );
        // Before 2022-08 all_reduce printed no root column (NVIDIA/nccl#527).
        assert_eq!(
            one(row(1 << 30, 1 << 28, Some("sum"), None)),
            Some("all_reduce")
        );
        assert_eq!(
            one(row(1 << 30, 1 << 28, Some("sum"), Some(0))),
            Some("reduce")
        );
        assert_eq!(
            one(row(1 << 30, 1 << 24, Some("sum"), Some(-1))),
            Some("reduce_scatter")
        );
        // NVIDIA/nccl-tests#82: `float 0` (root 0, no redop column).
        assert_eq!(one(row(8, 2, None, Some(0))), Some("broadcast"));
        // all_gather and alltoall print alike (skypilot H200 log: 8 GiB, 134217728 floats).
        assert_eq!(one(row(8 << 30, 134_217_728, Some("none"), Some(-1))), None);
    }
}
