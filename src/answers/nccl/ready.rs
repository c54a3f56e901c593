//! Rows read ahead by the reading thread ([`ReadyRow`], `prepare.rs`), and the parser's fast
//! lane for them: a row of nccl-tests' usual shape (13 fields under the usual header, issue
//! 41) is read straight from its fields' places and taken; any other row, or one the lane
//! would not take as it is, goes to the generic reader ([`NcclLogParser::row_of`]), which
//! tries every layout and blank column nccl-tests has printed.
//!
//! The lane changes no answer: it takes a row only where `row_of` would take it with the very
//! same values ([`NcclLogParser::take_row`] does both), and does nothing else. The generic
//! reader cost ~1 100 instructions a row on the parser's thread — the layout's shape searched,
//! the lead columns' names compared, every field reached through two layers of views — the
//! busier thread on a table-dense log (callgrind, docs/performance.md). `source/nccl_log.rs`'
//! `threads_give_the_facts_of_one` holds the lane to the serial path (which never takes it) on
//! every real log and on rows made to miss each of its conditions.

use super::NcclLogParser;
use super::bytemask;
use super::model::{Measure, Wrong};
use super::numbers::{parse_f64_at, parse_i64_bytes};
use super::rows::{Fields, TakenRow, part, plausible};
use super::scan::cut_fields;

/// A row cut and its numbers read by the reading thread ([`ReadyRow::of`], `prepare.rs`): the
/// part of a row that depends on nothing but its bytes — a third of the parser's work on a
/// table-dense log, where the parser's thread had twice the reading thread's (issue 41,
/// callgrind).
///
/// One cache line (`u8` offsets, at most [`READY_FIELDS`] fields, a row under 256 bytes): it is
/// written on one core and read on the other, a row at a time. With `u16` offsets for 32 fields
/// it took three, and copying it (to return it, to push it, to read it) was a twentieth of the
/// reading thread's instructions on a table-dense log (issue 41, callgrind). A longer row, or
/// one with more fields (`-I`'s per-iteration columns), is read in place by the parser.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadyRow {
    /// `parse_f64_at` of the fields [`TIMED`] after the row's last 8; NaN where it was not
    /// read (`None`, or too few fields). A field that reads as NaN (`nan`) is read again in
    /// place and gives NaN again: the sentinel changes no answer.
    numbers: [f64; TIMED.len()],
    starts: [u8; READY_FIELDS],
    /// Where each field ends (the whitespace after it, or the text's end).
    ends: [u8; READY_FIELDS],
    n: u8,
}

/// The most fields a row read ahead has: nccl-tests' usual row has 13 (5 lead fields, two
/// blocks of 4), 15 with `-S 1`'s date and time.
const READY_FIELDS: usize = 15;

// The point of the layout: one cache line.
const _: () = assert!(std::mem::size_of::<ReadyRow>() <= 64);

/// The fields read ahead as numbers, counted from the row's last 8 fields: the algbw and busbw
/// of its two timed blocks in nccl-tests' usual layout (`time algbw busbw #wrong` twice at the
/// row's end, `table.rs`); the times, and the numbers of another layout, are read in place.
/// Every number read ahead made the reading thread the busier one (a number is ~100
/// instructions, 6 a row; with 4 the two threads' shares of a table-dense log are even,
/// callgrind). Round three (numbers now ~60 instructions) tried six again: the reading thread
/// became the busier one and the run took 7 % longer (203 against 190 ms median wall, 2 CPUs).
const TIMED: [usize; 4] = [1, 2, 5, 6];

impl ReadyRow {
    /// `text` (a line's content, a digit first, no control character in it: a line of a
    /// prepared chunk, `Prepared::lines`) cut into fields, as [`NcclLogParser::row_line`]
    /// cuts it in place, and the numbers of its timed blocks read; `None` where `row_line`
    /// would not read it in place (a glued tag or per-rank marker, too many fields) or it does
    /// not fit (see the type's doc).
    pub(super) fn of(text: &str) -> Option<ReadyRow> {
        let bytes = text.as_bytes();
        if bytes.len() > usize::from(u8::MAX) {
            return None;
        }
        let mut ready = ReadyRow {
            numbers: [f64::NAN; TIMED.len()],
            starts: [0; READY_FIELDS],
            ends: [0; READY_FIELDS],
            n: 0,
        };
        // Below 256 bytes (checked above): every offset fits. A glued tag (`<`) or per-rank
        // marker (`[`) refuses the row, looked for in the loads that find the whitespace. A
        // prepared line holds no control character: its one whitespace is the space.
        let n = cut_fields(
            bytes,
            b"<[",
            bytemask::spaces64_and,
            &mut ready.starts,
            &mut ready.ends,
            |at| at as u8,
        )?;
        ready.n = n as u8;
        if let Some(base) = ready.base() {
            for (k, at) in TIMED.iter().enumerate() {
                let (start, end) = ready.span(base + at);
                if let Some(v) = parse_f64_at(&bytes[start..], end - start) {
                    ready.numbers[k] = v;
                }
            }
        }
        Some(ready)
    }

    /// Where the last 8 fields start (past the lead fields: size, count, type); `None` for a
    /// shorter row, where nothing was read ahead.
    #[inline]
    fn base(&self) -> Option<usize> {
        let n = usize::from(self.n);
        (n >= 3 + 8).then(|| n - 8)
    }

    /// Field `i`'s start and end (`i` below `n`).
    #[inline]
    fn span(&self, i: usize) -> (usize, usize) {
        (usize::from(self.starts[i]), usize::from(self.ends[i]))
    }

    /// Field `i` as read ahead, if it was.
    #[inline]
    fn number(&self, i: usize) -> Option<f64> {
        let k = match i.checked_sub(self.base()?)? {
            1 => 0,
            2 => 1,
            5 => 2,
            6 => 3,
            _ => return None,
        };
        let v = self.numbers[k];
        (!v.is_nan()).then_some(v)
    }
}

/// A row's text with its cut and the numbers read ahead ([`ReadyRow`]).
pub(super) struct Ready<'t, 'r> {
    text: &'t str,
    ready: &'r ReadyRow,
}

impl Ready<'_, '_> {
    #[inline]
    fn span(&self, i: usize) -> Option<(usize, usize)> {
        (i < usize::from(self.ready.n)).then(|| self.ready.span(i))
    }
}

impl Fields for Ready<'_, '_> {
    #[inline]
    fn count(&self) -> usize {
        usize::from(self.ready.n)
    }
    #[inline]
    fn bytes(&self, i: usize) -> Option<&[u8]> {
        let (start, end) = self.span(i)?;
        self.text.as_bytes().get(start..end)
    }
    #[inline]
    fn text(&self, i: usize) -> Option<&str> {
        let (start, end) = self.span(i)?;
        self.text.get(start..end)
    }
    #[inline]
    fn window(&self, i: usize) -> Option<(&[u8], usize)> {
        let (start, end) = self.span(i)?;
        Some((self.text.as_bytes().get(start..)?, end - start))
    }
    #[inline]
    fn f64_at(&self, i: usize) -> Option<f64> {
        if let Some(v) = self.ready.number(i) {
            return Some(v);
        }
        let (window, len) = self.window(i)?;
        parse_f64_at(window, len)
    }
}

/// The fields of a row of the usual layout: `size count type redop root`, then two blocks of
/// `time algbw busbw #wrong`.
const USUAL_FIELDS: usize = 13;
/// Where the usual row's timed blocks start.
const USUAL_BLOCKS: [usize; 2] = [5, 9];

impl NcclLogParser {
    /// [`row_line`](Self::row_line) of `text`, cut and read ahead by [`ReadyRow::of`] of this
    /// very text: the fast lane where it takes the row, else the generic reader.
    pub(super) fn ready_row_line(&mut self, text: &str, ready: &ReadyRow) {
        let row = Ready { text, ready };
        let usual = self.pending.is_none()
            && usize::from(ready.n) == USUAL_FIELDS
            && self.layout.as_ref().is_some_and(|l| l.usual);
        if usual && let Some(taken) = usual_row(&row) {
            self.take_row(
                &part(&row, 0, USUAL_BLOCKS[0]),
                &taken,
                self.log.lines,
                text,
            );
            return;
        }
        self.row_of(&row, text);
    }
}

/// A usual row (see [`USUAL_FIELDS`]) as [`NcclLogParser::row_of`] takes it under the usual
/// header with nothing pending; `None` where it would not take it with these values (a type
/// that is no name, sizes that are no whole numbers, a root that is no number, a `#wrong` that
/// is a deviation, a figure that is no finite number, sums that do not add up): `row_of` reads
/// those. The lane is stricter than `row_of`, never looser: a `cputime` table's rows are not
/// held to their sums there, and those that add up are taken here with the same values.
fn usual_row(row: &Ready<'_, '_>) -> Option<TakenRow> {
    if !row.bytes(2)?.first().is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let size = row.u64_at(0)?;
    let count = row.u64_at(1)?;
    // `-S 1`'s date and time, which `row_of` drops from a row's end, would stand where the
    // last busbw and `#wrong` are: no number, so no row here (`row_of` reads it).
    let root = parse_i64_bytes(row.bytes(4)?)?;
    let finite = |i: usize| row.f64_at(i).filter(|v| v.is_finite());
    let block = |at: usize| -> Option<Measure> {
        let wrong = match row.bytes(at + 3)? {
            b"N/A" => Wrong::NotChecked,
            _ => Wrong::Count(row.u64_at(at + 3)?),
        };
        let m = Measure {
            time_us: finite(at)?,
            algbw: finite(at + 1)?,
            busbw: finite(at + 2)?,
            wrong,
        };
        plausible(size, &m).then_some(m)
    };
    Some(TakenRow {
        size,
        count,
        redop: Some(3),
        root: Some(root),
        out_of_place: Some(block(USUAL_BLOCKS[0])?),
        in_place: Some(block(USUAL_BLOCKS[1])?),
    })
}
