//! The part of reading whole lines that depends on nothing but their bytes — whether they hold
//! control characters, where each ends, where its content starts after launcher decorations,
//! where its `NCCL INFO|WARN` marker is, whether it holds `: Test `, an INFO line's search bits
//! — done by [`Prepared::text_of`], so that another thread can do it while the parser
//! interprets the lines before (issue 28: with the kernel's copy of the file and the UTF-8 check,
//! which the reading thread does too, a third of a run, perf). A result row is cut into fields and its
//! algbw/busbw figures read here too ([`ReadyRow`]): on a table-dense log the parser's thread
//! had twice the reading thread's work, and the two threads' wall time is the busier one's
//! (issue 41, round two, callgrind; round one had moved the rows' splitting to the parser,
//! where one CPU was the goal).
//!
//! Nothing here changes an answer: [`Prepared::text_of`] calls the very functions the serial
//! path calls ([`content`](super::content), [`marker`](super::marker)), and
//! [`NcclLogParser::feed_prepared`] uses it only for the text it was made from and only where
//! the serial path would read those lines in place; anywhere else (a line an earlier chunk left
//! open, control characters, an overlong line) it hands the text to
//! [`NcclLogParser::feed_bytes`]. `source/nccl_log.rs` tests both paths give the same facts on
//! every real log.

use super::bytemask;
use super::lines::MAX_LINE_BYTES;
use super::ready::ReadyRow;
use super::scan::Ahead;
use super::{Known, Marker, NCCL, NcclLogParser, TEST, content, info_found, marker_if};

/// One line of a prepared text, as byte offsets into it.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// Where the line ends (its newline).
    end: u32,
    /// Its content (`content`): empty when `content_start == content_end`.
    content_start: u32,
    content_end: u32,
    /// The NCCL marker in the content, at `marker_at` in it.
    marker: Option<Marker>,
    marker_at: u32,
    /// For an INFO line, what `info_found` gives (the busiest search of an INFO line).
    info_bits: u8,
    /// For a line without a marker, whether its content holds `: Test ` (searched ahead
    /// through the text, not in each line).
    test: bool,
    /// For a line without a marker whose content starts with a digit, its row in
    /// [`Prepared::rows`]; [`NO_ROW`] for none.
    row: u32,
}

/// [`Shape::row`] of a line without a row read ahead.
const NO_ROW: u32 = u32::MAX;

/// Whole lines, looked at (see the module doc).
#[derive(Debug, Default)]
pub struct Prepared {
    /// The length of the text the shapes describe; `None` when the parser must read it itself
    /// (not whole lines, a control character, a line over [`MAX_LINE_BYTES`], over 4 GiB).
    len: Option<usize>,
    shapes: Vec<Shape>,
    /// Where the lines end (reused).
    ends: Vec<u32>,
    /// The rows read ahead ([`ReadyRow`]), in the order of their lines.
    rows: Vec<ReadyRow>,
}

impl Prepared {
    /// `bytes`, whole lines of a stream (ending with a newline, starting where a line starts),
    /// as text, and prepared (reusing `self`'s memory); the bytes back when they are not UTF-8.
    /// Where the lines end is found first, and with it whether every byte is ASCII: such bytes
    /// are text with no UTF-8 check of their own (`from_utf8`'s pass was a twentieth of the
    /// reading thread on a table-dense log, issue 41, callgrind).
    pub fn text_of(&mut self, bytes: Vec<u8>) -> Result<String, Vec<u8>> {
        let scan = self.ends_of(&bytes);
        let text = match scan {
            // SAFETY: every byte is below 0x80 (`line_ends` ORs them all and finds no top bit;
            // its tests hold it to `is_ascii` for every byte at every place): ASCII is UTF-8.
            Some(scan) if scan.ascii => unsafe { String::from_utf8_unchecked(bytes) },
            _ => String::from_utf8(bytes).map_err(|e| e.into_bytes())?,
        };
        if scan.is_some_and(|scan| scan.clean) {
            self.lines_at_ends(&text);
        }
        Ok(text)
    }

    /// Forget the last text, then find where the lines of `bytes` end (into `self.ends`);
    /// `None` when `bytes` are not whole lines under 4 GiB (the parser reads them itself).
    fn ends_of(&mut self, bytes: &[u8]) -> Option<bytemask::LineScan> {
        self.len = None;
        self.shapes.clear();
        self.rows.clear();
        let whole = bytes.last().is_none_or(|&b| b == b'\n');
        if !whole || u32::try_from(bytes.len()).is_err() {
            return None;
        }
        Some(bytemask::line_ends(bytes, &mut self.ends))
    }

    /// [`lines`](Self::lines) of `text` at the ends [`ends_of`](Self::ends_of) found in it.
    fn lines_at_ends(&mut self, text: &str) {
        let ends = std::mem::take(&mut self.ends);
        self.lines(text, &ends);
        self.ends = ends;
    }

    /// [`text_of`](Self::text_of) once the text is known to be whole lines ending at `ends`, with no
    /// control character but the newlines.
    fn lines(&mut self, text: &str, ends: &[u32]) {
        let bytes = text.as_bytes();
        let mut from = 0;
        // `NCCL ` searched ahead through the text, not in each line that lacks the shape, and
        // `: Test ` likewise.
        let mut ahead = Ahead::default();
        let mut test_ahead = Ahead::default();
        for &pos in ends {
            let pos = pos as usize;
            let line = &text[from..pos];
            if line.len() > MAX_LINE_BYTES {
                self.shapes.clear();
                return;
            }
            let (body, plain) = content(line);
            // An empty content may be a literal `""` (`prefix::strip` of `host:`), not a piece
            // of the line: it has no offset to take.
            let body_at = if body.is_empty() {
                Some(from)
            } else {
                offset_in(body, line).map(|at| from + at)
            };
            let Some(body_at) = body_at else {
                // Content that is not a piece of its line: the parser reads this text itself.
                self.shapes.clear();
                return;
            };
            let found = if body.is_empty() {
                None
            } else {
                marker_if(body, plain, || {
                    ahead.occurs_in(&NCCL, bytes, body_at, body_at + body.len())
                })
            };
            let test = found.is_none()
                && !body.is_empty()
                && test_ahead.occurs_in(&TEST, bytes, body_at, body_at + body.len());
            let mut row = NO_ROW;
            if found.is_none()
                && body.starts_with(|c: char| c.is_ascii_digit())
                && let Some(ready) = ReadyRow::of(body)
            {
                // Fewer rows than lines, and lines fewer than the text's 4 GiB.
                row = self.rows.len() as u32;
                self.rows.push(ready);
            }
            // Below 4 GiB (checked above): every offset fits.
            self.shapes.push(Shape {
                end: pos as u32,
                content_start: body_at as u32,
                content_end: (body_at + body.len()) as u32,
                marker: found.map(|(_, m)| m),
                marker_at: found.map_or(0, |(at, _)| at as u32),
                info_bits: match found {
                    Some((at, Marker::Info)) => info_found(body, at),
                    _ => 0,
                },
                test,
                row,
            });
            from = pos + 1;
        }
        self.len = Some(bytes.len());
    }
}

/// Where `part` starts in `whole`, when it is a piece of it.
fn offset_in(part: &str, whole: &str) -> Option<usize> {
    let at = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (at + part.len() <= whole.len()).then_some(at)
}

impl NcclLogParser {
    /// Feed `text` as [`feed_bytes`](Self::feed_bytes) does, with the line work `prepared` did
    /// on it (see the module doc): the same facts either way.
    pub fn feed_prepared(&mut self, text: &str, prepared: &Prepared) {
        if prepared.len != Some(text.len()) || self.splitter.has_partial() {
            self.feed_bytes(text.as_bytes());
            return;
        }
        let mut start = 0;
        for s in &prepared.shapes {
            let (end, from, to) = (
                s.end as usize,
                s.content_start as usize,
                s.content_end as usize,
            );
            self.log.lines += 1;
            self.log.bytes += (end - start) as u64 + 1;
            start = end + 1;
            if from == to {
                continue;
            }
            // Offsets made from this very text: always in it.
            let Some(body) = text.get(from..to) else {
                continue;
            };
            let found = s.marker.map(|m| (s.marker_at as usize, m));
            let known = Known {
                info_bits: Some(s.info_bits),
                test: Some(s.test),
                row: prepared.rows.get(s.row as usize),
            };
            self.interpret_content(body, found, known);
        }
        self.keep_chunk_tail(text);
    }
}
