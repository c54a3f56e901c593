//! The part of reading whole lines that depends on nothing but their bytes — whether they hold
//! control characters, where each ends, where its content starts after launcher decorations,
//! where its `NCCL INFO|WARN` marker is — done by [`Prepared::of`], so that another thread can
//! do it while the parser interprets the lines before (issue 28: with the kernel's copy of the
//! file and the UTF-8 check, which the reading thread does too, a third of a run, perf).
//!
//! Nothing here changes an answer: [`Prepared::of`] calls the very functions the serial path
//! calls ([`content`](super::content), [`marker`](super::marker)), and
//! [`NcclLogParser::feed_prepared`] uses it only for the text it was made from and only where
//! the serial path would read those lines in place; anywhere else (a line an earlier chunk left
//! open, control characters, an overlong line) it hands the text to
//! [`NcclLogParser::feed_bytes`]. `source/nccl_log.rs` tests both paths give the same facts on
//! every real log.

use memchr::memmem::Finder;

use super::lines::{self, MAX_LINE_BYTES};
use super::scan::INLINE_FIELDS;
use super::table::row_fields;
use super::{Known, Marker, NcclLogParser, content, info_found, marker};

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
    /// For a line starting with a digit, its fields (`table::row_fields`) as `fields_n` pairs
    /// of offsets from `fields_at` in [`Prepared::fields`]; `fields_n` [`NO_FIELDS`] when that
    /// gave none.
    fields_at: u32,
    fields_n: u8,
}

const NO_FIELDS: u8 = u8::MAX;

/// Whole lines, looked at (see the module doc).
#[derive(Debug, Default)]
pub struct Prepared {
    /// The length of the text the shapes describe; `None` when the parser must read it itself
    /// (not whole lines, a control character, a line over [`MAX_LINE_BYTES`], over 4 GiB).
    len: Option<usize>,
    shapes: Vec<Shape>,
    /// The fields of rows: start and end offsets, in pairs.
    fields: Vec<u32>,
}

impl Prepared {
    /// A finder of `NCCL ` for [`Prepared::of`] (set up once per thread).
    pub fn finder() -> Finder<'static> {
        Finder::new("NCCL ")
    }

    /// Prepare `text`, whole lines of a stream (ending with a newline, starting where a line
    /// starts). Reuses `self`'s memory.
    pub fn of(&mut self, text: &str, nccl: &Finder<'_>) {
        self.len = None;
        self.shapes.clear();
        self.fields.clear();
        let bytes = text.as_bytes();
        let whole = bytes.last().is_none_or(|&b| b == b'\n');
        if !whole || u32::try_from(bytes.len()).is_err() || !lines::only_newlines(bytes) {
            return;
        }
        let mut from = 0;
        for pos in memchr::memchr_iter(b'\n', bytes) {
            let line = &text[from..pos];
            if line.len() > MAX_LINE_BYTES {
                self.shapes.clear();
                return;
            }
            let (body, plain) = content(line);
            let found = if body.is_empty() {
                None
            } else {
                marker(body, plain, nccl)
            };
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
            let fields_at = self.fields.len() as u32;
            let mut fields_n = NO_FIELDS;
            if found.is_none() && body.starts_with(|c: char| c.is_ascii_digit()) {
                let mut inline = [""; INLINE_FIELDS];
                if let Some(n) = row_fields(body, &mut inline) {
                    for field in &inline[..n] {
                        let Some(at) = offset_in(field, body).map(|at| body_at + at) else {
                            self.shapes.clear();
                            return;
                        };
                        self.fields.push(at as u32);
                        self.fields.push((at + field.len()) as u32);
                    }
                    fields_n = n as u8;
                }
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
                fields_at,
                fields_n,
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
            let mut inline = [""; INLINE_FIELDS];
            let mut fields = None;
            if s.fields_n != NO_FIELDS {
                let n = usize::from(s.fields_n);
                let at = s.fields_at as usize;
                let pairs = prepared.fields.get(at..at + 2 * n).unwrap_or_default();
                for (slot, pair) in inline.iter_mut().zip(pairs.chunks_exact(2)) {
                    *slot = text
                        .get(pair[0] as usize..pair[1] as usize)
                        .unwrap_or_default();
                }
                fields = Some(&inline[..n.min(INLINE_FIELDS)]);
            }
            let known = Known {
                info_bits: Some(s.info_bits),
                fields,
            };
            self.interpret_content(body, found, known);
        }
        self.keep_chunk_tail(text);
    }
}
