//! nccl-tests' header, table and footer lines, of every generation (reference/nccl.md §2–§4):
//! the `nThread` and device lines, the column header row (how [`rows`](super::rows) reads the
//! result rows under it), `Out of bounds values`, `Avg bus bandwidth`, `Collective test
//! concluded` — with or without their `#` — and which collective a table is.

use super::model::{DeviceLine, Quoted, Row, TestConfig};
use super::scan::{INLINE_FIELDS, split_words};
use super::{MAX_DEVICES, NcclLogParser};

/// The default block of a result row: time, algbw, busbw, #wrong (§3).
pub(super) const DEFAULT_BLOCK: usize = 4;
/// Where time, algbw, busbw and `#wrong` sit in a block without a header.
pub(super) const DEFAULT_SLOTS: [usize; 4] = [0, 1, 2, 3];

/// How a result row maps to columns, from the column header row (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// Names of the leading columns (`size count type redop root`).
    pub(super) lead: Vec<String>,
    /// Names of one timed block (`time algbw busbw #wrong` [+ `i_min i_max i_p99 i_cv%`]).
    pub(super) block: Vec<String>,
    pub(super) cputime: bool,
    pub(super) old_error: bool,
    /// Where time, algbw, busbw and `#wrong`/`error` sit in a block (looked up once here, not
    /// per row).
    pub(super) slots: [usize; 4],
    /// nccl-tests' usual header since 2022-08 (`size count type redop root`, then `time algbw
    /// busbw #wrong` blocks, or `cputime …`): its rows can take `ready.rs`' fast lane.
    pub(super) usual: bool,
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
        let lead: Vec<String> = tokens[..first].iter().map(|s| s.to_string()).collect();
        let old_error = block.iter().any(|t| t == "error" || t == "res");
        let cputime = tokens[first] == "cputime";
        let usual = matches!(
            lead.iter().map(String::as_str).collect::<Vec<_>>()[..],
            [_, _, _, "redop" | "op", "root"]
        ) && block.len() == DEFAULT_BLOCK
            && slots == DEFAULT_SLOTS
            && !old_error;
        Some(Layout {
            lead,
            old_error,
            cputime,
            block,
            slots,
            usual,
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
    pub(super) fn section_output(&mut self) {
        self.section_open = false;
    }

    /// A column header row: a new table unless the current one has printed nothing yet (the
    /// same header repeated by several processes).
    pub(super) fn column_header(&mut self, tokens: &[&str]) -> bool {
        let same = self.layout.as_ref().is_some_and(|l| l.is_from(tokens));
        self.header_of(same, tokens)
    }

    /// A column header row, `text` (it holds `busbw`): [`column_header`](Self::column_header)
    /// of its words, unless it is the very text the current layout came from (every test of a
    /// sweep repeats it: its layout is the same, and splitting it into words was ~1 500
    /// instructions a table). `false` when it is no header.
    pub(super) fn header_line(&mut self, text: &str) -> bool {
        if self.layout.is_some() && self.layout_text == text {
            return self.header_of(true, &[]);
        }
        let mut inline = [""; INLINE_FIELDS];
        let is_header = match split_words(text, &mut inline) {
            Some(n) => self.column_header(&inline[..n]),
            None => self.column_header(&text.split_whitespace().collect::<Vec<_>>()),
        };
        if is_header {
            self.layout_text.clear();
            self.layout_text.push_str(text);
        }
        is_header
    }

    /// [`column_header`](Self::column_header) once it is known whether `tokens` make the current
    /// layout (`same`; then they are not looked at).
    fn header_of(&mut self, same: bool, tokens: &[&str]) -> bool {
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
        // Every test of a sweep prints the same line: what it said last time, when it is the
        // same text (splitting it and looking up its keys was ~3 000 instructions a table).
        let config = match &self.last_config {
            Some((last, config)) if last == text => config.clone(),
            _ => {
                let config = config_of(text);
                self.last_config = Some((text.to_string(), config.clone()));
                config
            }
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

    pub(super) fn quote(&self, text: &str) -> Quoted {
        Quoted::new(self.log.lines, text)
    }
}

/// What an `nThread 1 nGpus 8 minBytes 8 maxBytes … validation: 1 …` line says.
fn config_of(text: &str) -> TestConfig {
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
    TestConfig {
        nthread: after("nThread").and_then(|v| v.parse().ok()),
        ngpus: after("nGpus").and_then(|v| v.parse().ok()),
        min_bytes: after("minBytes").and_then(|v| v.parse().ok()),
        max_bytes: after("maxBytes").and_then(|v| v.parse().ok()),
        // `warmup iters: 1 iters: 20`: the second `iters:`.
        iters: (1..tokens.len())
            .filter(|&i| tokens[i] == "iters:" && !["warmup", "agg"].contains(&tokens[i - 1]))
            .find_map(|i| tokens.get(i + 1).and_then(|v| v.parse().ok())),
        validation: after("validation:").and_then(|v| v.parse().ok()),
    }
}

fn first_token(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
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
    use super::*;

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
