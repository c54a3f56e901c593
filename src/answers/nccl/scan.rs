//! Byte-level helpers of the parser's hot path (issues 28, 41: 600 MB/s on logs of real
//! lines): a row split into fields without allocating, substring searches built once instead of
//! on every call (and run ahead through a text instead of in every line), and `str::trim`
//! without decoding. Numbers are [`numbers`](super::numbers)' business.
//!
//! Every helper gives exactly what the std function it stands for gives (`str::contains`,
//! `split_ascii_whitespace`, `str::trim`): the fast paths cover the shapes logs print and hand
//! anything else to std. The unit tests below compare them on every odd shape.

use std::sync::OnceLock;

use memchr::memmem::Finder;

use super::bytemask;

/// A substring search set up once (std's `str::contains` builds its searcher on every call: a
/// third of the run on an `NCCL_DEBUG=INFO` log, perf).
pub(super) struct Needle {
    text: &'static str,
    finder: OnceLock<Finder<'static>>,
}

impl Needle {
    pub(super) const fn new(text: &'static str) -> Self {
        Needle {
            text,
            finder: OnceLock::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.text.len()
    }

    /// Where the needle first occurs in `hay` at or after `from` (as `str::find` there).
    pub(super) fn find_from(&self, hay: &[u8], from: usize) -> Option<usize> {
        let finder = self.finder.get_or_init(|| Finder::new(self.text));
        hay.get(from..)
            .and_then(|rest| finder.find(rest))
            .map(|at| from + at)
    }

    /// Where the needle first occurs in `hay` (as `str::find`).
    pub(super) fn find(&self, hay: &str) -> Option<usize> {
        self.find_from(hay.as_bytes(), 0)
    }

    /// `hay.contains(needle)`.
    pub(super) fn is_in(&self, hay: &str) -> bool {
        self.find(hay).is_some()
    }

    /// `hay.split_once(needle)`.
    pub(super) fn split_once<'h>(&self, hay: &'h str) -> Option<(&'h str, &'h str)> {
        let at = self.find(hay)?;
        Some((&hay[..at], &hay[at + self.text.len()..]))
    }
}

/// Where a needle next occurs in a text read line by line, in order: one search runs ahead
/// over the lines that do not hold it instead of one search in every line (issue 41: no line
/// of a table-dense log holds `NCCL `, yet each was searched for it, 7 % of the run).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ahead {
    /// Where the last search started (`usize::MAX`: none yet).
    from: usize,
    /// What it found: the first occurrence at or after `from`, or none up to the text's end.
    next: Option<usize>,
}

impl Default for Ahead {
    fn default() -> Self {
        Ahead {
            from: usize::MAX,
            next: None,
        }
    }
}

impl Ahead {
    /// Whether `needle` occurs inside `text[start..end]`; asked of the
    /// pieces of one `text` at positions that do not go back (any other question searches
    /// again, and gets the same answer).
    pub(super) fn occurs_in(
        &mut self,
        needle: &Needle,
        text: &[u8],
        start: usize,
        end: usize,
    ) -> bool {
        let stale = start < self.from || self.next.is_some_and(|n| n < start);
        if stale {
            self.from = start;
            self.next = needle.find_from(text, start);
        }
        // The first occurrence at or after `start`: inside when it ends by `end`.
        self.next.is_some_and(|n| n + needle.len() <= end)
    }
}

/// `text.trim()`: the ends are trimmed here while they are ASCII (what `char::is_whitespace`
/// says of an ASCII byte is `matches!` below); a non-ASCII byte at either end goes to std,
/// which knows Unicode's whitespace. `str::trim` decodes and classifies every char it looks at
/// (a tenth of a table-dense run's `#` lines, issue 41).
pub(super) fn trim(text: &str) -> &str {
    let b = text.as_bytes();
    let space = |c: u8| c == b' ' || (b'\t'..=b'\r').contains(&c);
    // Runs of spaces 16 bytes at a time first: nccl-tests' column headers start with up to 62
    // of them (`#` then the `out-of-place` line), and a byte loop over them was a twentieth of
    // the parser's thread on a table-dense log (issue 41, perf).
    let mut start = 0;
    while let Some(block) = b.get(start..start + bytemask::BLOCK) {
        let spaces = bytemask::mask(block, b" ", 0).trailing_ones() as usize;
        start += spaces;
        if spaces < bytemask::BLOCK {
            break;
        }
    }
    while start < b.len() && space(b[start]) {
        start += 1;
    }
    let mut end = b.len();
    while end >= start + bytemask::BLOCK {
        // The spaces a block ends with: the high ones of its 16 bits.
        let mask = bytemask::mask(&b[end - bytemask::BLOCK..end], b" ", 0) as u16;
        let spaces = mask.leading_ones() as usize;
        end -= spaces;
        if spaces < bytemask::BLOCK {
            break;
        }
    }
    while end > start && space(b[end - 1]) {
        end -= 1;
    }
    if start < end && (b[start] >= 0x80 || b[end - 1] >= 0x80) {
        return text.trim();
    }
    // Both ends at ASCII bytes (or the empty end): char boundaries.
    text.get(start..end).unwrap_or_default()
}

/// Up to this many fields a row is split into an array on the stack.
pub(super) const INLINE_FIELDS: usize = 32;

/// The fields of a text (whitespace-separated, as `split_ascii_whitespace`) as the byte
/// ranges they take in it, up to [`INLINE_FIELDS`] of them.
///
/// A byte-by-byte split mispredicts a branch at nearly every edge of a row's ~26 fields (a sixth
/// of a table-dense run, perf): here the whitespace of 64 bytes becomes a mask, 16 bytes at a
/// time ([`bytemask`]; 8 at a time with word arithmetic was 3 instructions a byte, issue 41),
/// and where fields start and end is read from its bits, each kind in a loop of its own.
pub(super) struct Spans<'t> {
    text: &'t str,
    cut: Cut,
}

/// Where the fields of a text start and end ([`Spans`] without the text; a row read ahead keeps
/// a smaller one of its own, `ready::ReadyRow`).
#[derive(Debug, Clone, Copy)]
struct Cut {
    n: usize,
    /// Offsets below 64 KiB (a line is at most `MAX_LINE_BYTES`): a small value to make and
    /// move, a row at a time.
    starts: [u16; INLINE_FIELDS],
    /// Where each field ends (the whitespace after it, or the text's end).
    ends: [u16; INLINE_FIELDS],
}

impl Cut {
    /// The fields of `b` (see [`Spans::of`]).
    #[inline]
    fn of(b: &[u8]) -> Option<Cut> {
        if b.len() > usize::from(u16::MAX) {
            return None;
        }
        let mut cut = Cut {
            n: 0,
            starts: [0; INLINE_FIELDS],
            ends: [0; INLINE_FIELDS],
        };
        // Below 64 KiB (checked above).
        cut.n = cut_fields(
            b,
            &[],
            bytemask::whitespace64_and,
            &mut cut.starts,
            &mut cut.ends,
            |at| at as u16,
        )?;
        Some(cut)
    }

    /// Field `i`'s start and end.
    #[inline]
    fn span(&self, i: usize) -> Option<(usize, usize)> {
        (i < self.n).then(|| (usize::from(self.starts[i]), usize::from(self.ends[i])))
    }
}

/// Where the fields of `b` start and end, written to `starts` and `ends` as `offset` makes them
/// (the caller's type holds every offset of `b`); how many fields, `None` when there are more
/// than `starts` holds or `b` holds one of the bytes of `refuse`. The whitespace of 64 bytes
/// at a time becomes a mask ([`Spans`]), as `masks` finds it ([`bytemask::whitespace64_and`],
/// or [`bytemask::spaces64_and`] for a text without control characters).
#[inline]
pub(super) fn cut_fields<T: Copy>(
    b: &[u8],
    refuse: &[u8],
    masks: impl Fn(&[u8], &[u8]) -> (u64, u64),
    starts: &mut [T],
    ends: &mut [T],
    offset: impl Fn(usize) -> T,
) -> Option<usize> {
    let mut n = 0;
    let mut closed = 0;
    // Whether the byte before the current block was whitespace (the start counts as such).
    let mut before: u64 = 1;
    for (block, chunk) in b.chunks(64).enumerate() {
        let (ws, refused) = masks(chunk, refuse);
        if refused != 0 {
            return None;
        }
        let valid = u64::MAX >> (64 - chunk.len());
        let after_ws = (ws << 1) | before;
        let mut start_bits = !ws & after_ws & valid;
        let mut end_bits = ws & !after_ws & valid;
        before = (ws >> (chunk.len() - 1)) & 1;
        let base = block * 64;
        while start_bits != 0 {
            *starts.get_mut(n)? = offset(base + start_bits.trailing_zeros() as usize);
            n += 1;
            start_bits &= start_bits - 1;
        }
        while end_bits != 0 {
            // Every end closes a field started before it: `closed < n`.
            if let Some(slot) = ends.get_mut(closed) {
                *slot = offset(base + end_bits.trailing_zeros() as usize);
            }
            closed += 1;
            end_bits &= end_bits - 1;
        }
    }
    if closed < n
        && let Some(slot) = ends.get_mut(n - 1)
    {
        // The last field runs to the end.
        *slot = offset(b.len());
    }
    Some(n)
}

impl<'t> Spans<'t> {
    /// `None` when `text` has more than [`INLINE_FIELDS`] fields, or is 64 KiB or longer (the
    /// callers split such texts with std, into the same fields).
    #[inline]
    pub(super) fn of(text: &'t str) -> Option<Spans<'t>> {
        Cut::of(text.as_bytes()).map(|cut| Spans { text, cut })
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.cut.n
    }

    /// Field `i`'s bytes.
    #[inline]
    pub(super) fn bytes_of(&self, i: usize) -> Option<&'t [u8]> {
        let (start, end) = self.cut.span(i)?;
        self.text.as_bytes().get(start..end)
    }

    /// Field `i`'s bytes and the rest of the text after them, and the field's length.
    #[inline]
    pub(super) fn window_of(&self, i: usize) -> Option<(&'t [u8], usize)> {
        let (start, end) = self.cut.span(i)?;
        Some((self.text.as_bytes().get(start..)?, end - start))
    }

    /// Field `i` (both ends at ASCII bytes or the text's end: char boundaries).
    pub(super) fn text_of(&self, i: usize) -> Option<&'t str> {
        let (start, end) = self.cut.span(i)?;
        self.text.get(start..end)
    }
}

/// The fields of a text into `out`, as `split_ascii_whitespace` gives them; `None` when there
/// are more than [`INLINE_FIELDS`] (the caller splits those into a `Vec`).
pub(super) fn split_fields<'t>(text: &'t str, out: &mut [&'t str; INLINE_FIELDS]) -> Option<usize> {
    let spans = Spans::of(text)?;
    for (i, slot) in out.iter_mut().enumerate().take(spans.len()) {
        *slot = spans.text_of(i).unwrap_or_default();
    }
    Some(spans.len())
}

/// `text.split_whitespace()` into `out` for ASCII text without a vertical tab (where it splits
/// as [`split_fields`]); `None` for other text or too many words (split those with std).
pub(super) fn split_words<'t>(text: &'t str, out: &mut [&'t str; INLINE_FIELDS]) -> Option<usize> {
    if !text.is_ascii() || memchr::memchr(0x0b, text.as_bytes()).is_some() {
        return None;
    }
    split_fields(text, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_split_as_std_splits_them() {
        for text in [
            "",
            "   ",
            "  1073741824     268435456     float     sum      -1   4012.3  267.61",
            "a\tb\r\nc\x0cd  ",
            "é ü x",
            "x",
            " x",
            "x\x0by z",
        ] {
            let long = format!("{text} {} {text}", "y ".repeat(9) + &" ".repeat(70));
            for text in [text, long.as_str()] {
                let mut out = [""; INLINE_FIELDS];
                let n = split_fields(text, &mut out).unwrap();
                let want: Vec<&str> = text.split_ascii_whitespace().collect();
                assert_eq!(&out[..n], &want[..], "{text:?}");
                let want: Vec<&str> = text.split_whitespace().collect();
                match split_words(text, &mut out) {
                    Some(n) => assert_eq!(&out[..n], &want[..], "{text:?}"),
                    None => assert!(!text.is_ascii() || text.contains('\x0b'), "{text:?}"),
                }
            }
        }
        // Every split of a 64-byte boundary.
        for at in 60..70 {
            let text = format!("{}ab cd", " ".repeat(at));
            let mut out = [""; INLINE_FIELDS];
            let n = split_fields(&text, &mut out).unwrap();
            assert_eq!(&out[..n], &["ab", "cd"], "{at}");
            let text = format!("{}   {}", "a".repeat(at), "b".repeat(at));
            let n = split_fields(&text, &mut out).unwrap();
            assert_eq!(&out[..n], &[&text[..at], &text[at + 3..]], "{at}");
        }
        let many = "x ".repeat(INLINE_FIELDS + 1);
        assert_eq!(split_fields(&many, &mut [""; INLINE_FIELDS]), None);
        let exactly = "x ".repeat(INLINE_FIELDS);
        assert_eq!(
            split_fields(&exactly, &mut [""; INLINE_FIELDS]),
            Some(INLINE_FIELDS)
        );
    }

    #[test]
    fn trim_trims_as_std_trims() {
        let mut texts: Vec<String> = [
            "",
            " ",
            "  a  ",
            "\u{a0}a\u{a0}",
            " \u{3000}x ",
            "x\u{85}",
            "\u{1c}a\u{1f}",
            "é",
            " é ",
            "\u{b}a\u{c}",
            "a b",
            "\t\r\n",
        ]
        .map(str::to_string)
        .to_vec();
        for c in (0..=0x7fu8)
            .map(char::from)
            .chain(['\u{85}', '\u{a0}', '\u{2028}', 'é'])
        {
            texts.push(format!("{c}x{c}"));
            texts.push(format!("{c}{c}"));
            texts.push(format!(" {c} "));
        }
        // Runs of spaces around every 16-byte edge, with other whitespace at their ends.
        for n in 0..=40 {
            let run = " ".repeat(n);
            for inner in ["a", "a b", "\ta\t", "\u{b}", "é", ""] {
                texts.push(format!("{run}{inner}{run}"));
                texts.push(format!("\t{run}{inner}{run}\r"));
                texts.push(format!("{run}{inner}"));
                texts.push(format!("{inner}{run}"));
            }
        }
        for t in &texts {
            assert_eq!(trim(t), t.trim(), "{t:?}");
        }
    }

    #[test]
    fn needles_find_as_std_finds() {
        static SET: Needle = Needle::new(" set by environment to ");
        let line = "NCCL_IB_HCA set by environment to mlx5_0 set by environment to x";
        assert_eq!(
            SET.split_once(line),
            line.split_once(" set by environment to ")
        );
        assert!(!SET.is_in("nothing"));
        assert_eq!(SET.find(""), None);
        let needles = [
            "NCCL ", ": Test ", "busbw", "ab", "a", "aab", "nNodes", "error", "",
        ];
        let hays = [
            "",
            "a",
            "aab",
            "aaab",
            "NCCL",
            "x NCCL y NCCL ",
            ": Test : Test",
            "busbwbusbw",
            "abab",
            "nnNodes nNodes",
            "errorerror",
            "é error é",
        ];
        for needle in needles {
            let n = Needle {
                text: needle,
                finder: OnceLock::new(),
            };
            for hay in hays {
                assert_eq!(n.find(hay), hay.find(needle), "{needle:?} in {hay:?}");
                for from in 0..=hay.len() {
                    let want = (from..=hay.len())
                        .find(|&p| hay.as_bytes()[p..].starts_with(needle.as_bytes()));
                    let got = n.find_from(hay.as_bytes(), from);
                    assert_eq!(got, want, "{needle:?} {hay:?} {from}");
                }
            }
        }
    }
}
