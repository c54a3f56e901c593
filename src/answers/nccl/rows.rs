//! nccl-tests' result rows (reference/nccl.md §3), of every generation.
//!
//! Rows are recognised by their shape, not their spacing: a size and an element count (whole
//! numbers), a type name, the lead columns the header names (`redop`, `root`, or neither before
//! 2022-08), then one or two timed blocks (`time algbw busbw #wrong|error`, `-I` adds four more
//! per block), counted from the row's end; and the row must be arithmetic nccl-tests could have
//! printed: algbw = size / time (every collective's `GetBw` divides the printed size by the time,
//! `src/*.cu`). Per-rank markers glued to a field (`-1[0]`, `0[0]`, `NVIDIA/nccl#1453`) separate
//! fields like a space. A row cut in two by another process's lines (the head, then NCCL INFO
//! lines, then the timings on a line of their own, `NVIDIA/nccl#1453`) is put back together.
//!
//! Speed (issue 41): a table-dense log is a third rows. A row is read from the byte ranges of
//! its fields ([`Spans`]), its numbers parsed from those bytes: making each field a `&str` cost
//! its char-boundary checks, a fifth of a row (callgrind). Rows with glued markers, or too many
//! fields, are split into `&str`s ([`fields`]); one reader ([`Fields`]) serves both, so both
//! read a row the same way.

use super::bytemask;
use super::model::{Measure, Row, Wrong, cut};
use super::numbers::{
    parse_f64_at, parse_f64_bytes, parse_i64_bytes, parse_u64_at, parse_u64_bytes,
};
use super::scan::Spans;
use super::table::{DEFAULT_BLOCK, DEFAULT_SLOTS};
use super::{MAX_ROWS, NcclLogParser, QUOTE_CHARS};

/// The head of a row whose timings have not arrived yet (a row cut by other output).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PendingRow {
    line: u64,
    lead: Vec<String>,
    blocks: Vec<Measure>,
    pub(super) text: String,
}

/// A row's fields, however the row was split.
pub(super) trait Fields {
    fn count(&self) -> usize;
    /// Field `i`'s bytes (`None` past the last).
    fn bytes(&self, i: usize) -> Option<&[u8]>;
    /// Field `i` as text (`None` past the last).
    fn text(&self, i: usize) -> Option<&str>;
    /// Field `i`'s bytes and what follows them on the line, and the field's length (the
    /// number parsers read a word at a time where the line goes on, `numbers`).
    fn window(&self, i: usize) -> Option<(&[u8], usize)>;

    /// Field `i` as a `u64` (`str::parse`).
    #[inline]
    fn u64_at(&self, i: usize) -> Option<u64> {
        let (window, len) = self.window(i)?;
        parse_u64_at(window, len)
    }

    /// Field `i` as an `f64` (`str::parse`).
    #[inline]
    fn f64_at(&self, i: usize) -> Option<f64> {
        let (window, len) = self.window(i)?;
        parse_f64_at(window, len)
    }
}

impl Fields for Spans<'_> {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn bytes(&self, i: usize) -> Option<&[u8]> {
        self.bytes_of(i)
    }
    #[inline]
    fn text(&self, i: usize) -> Option<&str> {
        self.text_of(i)
    }
    #[inline]
    fn window(&self, i: usize) -> Option<(&[u8], usize)> {
        self.window_of(i)
    }
}

impl Fields for [&str] {
    fn count(&self) -> usize {
        self.len()
    }
    fn bytes(&self, i: usize) -> Option<&[u8]> {
        self.get(i).map(|t| t.as_bytes())
    }
    fn text(&self, i: usize) -> Option<&str> {
        self.get(i).copied()
    }
    fn window(&self, i: usize) -> Option<(&[u8], usize)> {
        self.get(i).map(|t| (t.as_bytes(), t.len()))
    }
}

/// What a row read as one says, but for its text: [`NcclLogParser::take_row`].
pub(super) struct TakenRow {
    pub(super) size: u64,
    pub(super) count: u64,
    /// Which lead field is the reduction.
    pub(super) redop: Option<usize>,
    pub(super) root: Option<i64>,
    pub(super) out_of_place: Option<Measure>,
    pub(super) in_place: Option<Measure>,
}

/// Fields `from..from + len` of `all`.
pub(super) struct Part<'f, F: ?Sized> {
    all: &'f F,
    from: usize,
    len: usize,
}

impl<F: Fields + ?Sized> Fields for Part<'_, F> {
    #[inline]
    fn count(&self) -> usize {
        self.len
    }
    #[inline]
    fn bytes(&self, i: usize) -> Option<&[u8]> {
        (i < self.len)
            .then(|| self.all.bytes(self.from + i))
            .flatten()
    }
    #[inline]
    fn text(&self, i: usize) -> Option<&str> {
        (i < self.len)
            .then(|| self.all.text(self.from + i))
            .flatten()
    }
    #[inline]
    fn window(&self, i: usize) -> Option<(&[u8], usize)> {
        (i < self.len)
            .then(|| self.all.window(self.from + i))
            .flatten()
    }
    #[inline]
    fn f64_at(&self, i: usize) -> Option<f64> {
        (i < self.len)
            .then(|| self.all.f64_at(self.from + i))
            .flatten()
    }
    #[inline]
    fn u64_at(&self, i: usize) -> Option<u64> {
        (i < self.len)
            .then(|| self.all.u64_at(self.from + i))
            .flatten()
    }
}

pub(super) fn part<F: Fields + ?Sized>(all: &F, from: usize, len: usize) -> Part<'_, F> {
    Part { all, from, len }
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

fn is_number(t: &[u8]) -> bool {
    t == b"N/A" || parse_f64_bytes(t).is_some()
}

impl NcclLogParser {
    /// A line that starts like a result row (a digit first), or the part of a line before
    /// another process's output cut into it.
    pub(super) fn row_line(&mut self, text: &str) {
        // Open MPI's tag glued inside a row that reached mpirun in two reads.
        if memchr::memchr(b'<', text.as_bytes()).is_some()
            && let Some(clean) = super::prefix::without_glued_tags(text)
        {
            self.row_line(&clean);
            return;
        }
        // Most rows hold no per-rank marker and have few fields: read in place, nothing copied.
        if bytemask::first_position(text.as_bytes(), b"[", b'x').is_none()
            && let Some(spans) = Spans::of(text)
        {
            self.row_of(&spans, text);
            return;
        }
        let tokens = fields(text);
        self.row_of(tokens.as_slice(), text);
    }

    /// [`row_line`](Self::row_line) with the line split into `tokens`.
    pub(super) fn row_of<F: Fields + ?Sized>(&mut self, tokens: &F, text: &str) {
        // A size and an element count, then a type name; the numbers kept for the row.
        let head = match tokens.bytes(2) {
            Some(dtype) if dtype.first().is_some_and(u8::is_ascii_alphabetic) => {
                tokens.u64_at(0).zip(tokens.u64_at(1))
            }
            _ => None,
        };
        if let Some(head) = head {
            if let Some(abandoned) = self.pending.take() {
                self.fragment(&abandoned.text);
            }
            if self.row(tokens, text, head).is_err() {
                self.unreadable(text);
            }
            return;
        }
        // Timings alone: the rest of a row whose head came before other output.
        let block_len = self.block_len();
        let n = tokens.count();
        let blocks = n / block_len;
        let timings = n > 0
            && n.is_multiple_of(block_len)
            && blocks <= 2
            && (0..n).all(|i| tokens.bytes(i).is_some_and(is_number));
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
            match self.measure(&part(tokens, b * block_len, block_len)) {
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
        let head = lead
            .first()
            .and_then(|t| parse_u64_bytes(t.as_bytes()))
            .zip(lead.get(1).and_then(|t| parse_u64_bytes(t.as_bytes())));
        let taken = head.is_some_and(|head| {
            self.assemble(
                lead.as_slice(),
                head,
                &pending.blocks,
                pending.line,
                &pending.text,
            )
        });
        if !taken {
            self.fragment(&pending.text);
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

    /// A row from its fields, taken ([`assemble`](Self::assemble)); or a head (lead fields
    /// alone) kept until its timings come; `Err` when it is not a row nccl-tests could have
    /// printed. `head`: the size and element count of the first two fields.
    fn row<F: Fields + ?Sized>(&mut self, all: &F, text: &str, head: (u64, u64)) -> Result<(), ()> {
        // `-S 1` timestamp: `YYYY-MM-DD HH:MM:SS` at the end.
        let mut n = all.count();
        if n >= 2
            && all.bytes(n - 2).is_some_and(looks_like_date)
            && all.bytes(n - 1).is_some_and(looks_like_time)
        {
            n -= 2;
        }
        let tokens = part(all, 0, n);
        let block_len = self.block_len();
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
                        .filter(|&(l, _)| {
                            (3..l).all(|i| tokens.text(i).is_some_and(|t| t.parse::<i64>().is_ok()))
                        })
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
            let block = part(&tokens, lead + b * block_len, block_len);
            *slot = self.measure(&block).ok_or(())?;
        }
        let line = self.log.lines;
        if blocks == 0 {
            self.pending = Some(PendingRow {
                line,
                lead: (0..n)
                    .map(|i| tokens.text(i).unwrap_or_default().to_string())
                    .collect(),
                blocks: Vec::new(),
                text: text.to_string(),
            });
            return Ok(());
        }
        if self.assemble(
            &part(&tokens, 0, lead),
            head,
            &measures[..blocks],
            line,
            text,
        ) {
            Ok(())
        } else {
            Err(())
        }
    }

    /// A row from its lead fields and blocks, if its arithmetic holds: counted in its table,
    /// and kept (up to [`MAX_ROWS`], and only for a table that is kept); `false` when it is no
    /// row. `head`: the size and element count `lead` starts with, parsed.
    ///
    /// A row past the caps is checked and counted, never built: most rows of a long log are
    /// such, and making each a `Row` to drop it (moving its ~200 bytes three times) was a tenth
    /// of a row's cost (issue 41, callgrind).
    fn assemble<F: Fields + ?Sized>(
        &mut self,
        lead: &F,
        head: (u64, u64),
        blocks: &[Measure],
        line: u64,
        text: &str,
    ) -> bool {
        let (size, count) = head;
        if lead.bytes(2).is_none() {
            return false;
        }
        // The last lead field read as a reduction, and the root.
        let (mut redop, mut root) = (None, None);
        // With columns left blank the names no longer line up: what is there is told by its
        // shape, as without a header (a number is the root).
        let lead_names = self
            .layout
            .as_ref()
            .map(|l| &l.lead)
            .filter(|names| names.len() == lead.count());
        for i in 3..lead.count() {
            let Some(token) = lead.bytes(i) else {
                return false;
            };
            let name = lead_names
                .and_then(|names| names.get(i))
                .map(String::as_str);
            match name {
                Some("root") => match parse_i64_bytes(token) {
                    Some(r) => root = Some(r),
                    None => return false,
                },
                Some("redop" | "op") => redop = Some(i),
                _ => match parse_i64_bytes(token) {
                    Some(r) => root = Some(r),
                    None => redop = Some(i),
                },
            }
        }
        let cputime = self.layout.as_ref().is_some_and(|l| l.cputime);
        if !cputime && !blocks.iter().all(|m| plausible(size, m)) {
            return false;
        }
        let (out_of_place, in_place) = match blocks {
            [one] => (None, Some(*one)),
            [oop, ip, ..] => (Some(*oop), Some(*ip)),
            [] => return false,
        };
        let taken = TakenRow {
            size,
            count,
            redop,
            root,
            out_of_place,
            in_place,
        };
        self.take_row(lead, &taken, line, text);
        true
    }

    /// A row found to be one: counted in its table, and kept (up to [`MAX_ROWS`], and only for
    /// a table that is kept). `lead`: its lead fields (the type is the third).
    pub(super) fn take_row<F: Fields + ?Sized>(
        &mut self,
        lead: &F,
        taken: &TakenRow,
        line: u64,
        text: &str,
    ) {
        let table = self.table();
        self.section_output();
        if self.log.rows.len() >= MAX_ROWS || !Self::is_kept(table) {
            self.log.dropped_rows += 1;
            return;
        }
        if let Some(t) = self.table_at_mut(table) {
            t.rows += 1;
        }
        let owned = |i: usize| lead.text(i).unwrap_or_default().to_string();
        self.log.rows.push(Row {
            line,
            table,
            size: taken.size,
            count: taken.count,
            dtype: owned(2),
            redop: taken.redop.map(owned),
            root: taken.root,
            out_of_place: taken.out_of_place,
            in_place: taken.in_place,
            text: cut(text.trim(), QUOTE_CHARS),
        });
    }

    /// One timed block: time, algbw, busbw and the `#wrong`/`error` slot where the header puts
    /// them (`-I` adds per-iteration columns after them).
    pub(super) fn measure<F: Fields + ?Sized>(&self, block: &F) -> Option<Measure> {
        let layout = self.layout.as_ref();
        let [time_i, algbw_i, busbw_i, wrong_i] = layout.map_or(DEFAULT_SLOTS, |l| l.slots);
        let old_error = layout.is_some_and(|l| l.old_error);
        let number = |i: usize| -> Option<f64> {
            let v = block.f64_at(i)?;
            v.is_finite().then_some(v)
        };
        let wrong = match block.bytes(wrong_i)? {
            b"N/A" => Wrong::NotChecked,
            _ if old_error => Wrong::Deviation(block.f64_at(wrong_i)?),
            _ => match block.u64_at(wrong_i) {
                Some(n) => Wrong::Count(n),
                // An old `error` column without a header (`0e+00`).
                None => Wrong::Deviation(block.f64_at(wrong_i)?),
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
}

/// algbw = size / time, within the rounding of the printed numbers (time `%7s` can be as coarse
/// as `1e+06`, algbw `%.2f`): a factor of two either way, never checked where algbw printed as
/// 0.00 or time as 0.
pub(super) fn plausible(size: u64, m: &Measure) -> bool {
    if m.time_us <= 0.0 || m.algbw < 0.05 {
        return true;
    }
    let expected = size as f64 / m.time_us / 1e3;
    expected <= m.algbw * 2.0 && expected >= m.algbw * 0.5
}

/// `YYYY-MM-DD` (its digits counted as chars of a text: no byte of another char is one).
pub(super) fn looks_like_date(b: &[u8]) -> bool {
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().filter(|c| c.is_ascii_digit()).count() == 8
}

/// `HH:MM:SS`.
pub(super) fn looks_like_time(b: &[u8]) -> bool {
    b.len() == 8
        && b[2] == b':'
        && b[5] == b':'
        && b.iter().filter(|c| c.is_ascii_digit()).count() == 6
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
}
