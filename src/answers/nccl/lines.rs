//! Lines of a log: a byte stream split into lines whatever its chunking, and each line made into
//! text the parser can read. Pure byte handling: nothing here knows what a line means.
//!
//! Speed matters here more than anywhere (issue 15: a multi-hundred-MiB log at a third of
//! `grep -c` or better, docs/performance.md): newlines are found with `memchr` (SIMD), a line that
//! lies whole inside a chunk is handed over without a copy, and a clean ASCII line is checked in
//! one word-at-a-time pass.
//!
//! Control characters (issue 13): terminals and launchers leave them in logs — colour escapes
//! (`ESC[36m` from Ray's worker prefixes), carriage returns of progress bars (tqdm redraws a line
//! with `\r`), a stray BEL. A line holding them is still read: escape sequences (presentation
//! only) and C0 controls are removed; a carriage return inside a line stays — it separates what
//! was drawn over (the fields readers split on treat it as a space), and the human formats show it
//! escaped (`text/sanitize.rs`), as they show C1 and bidi characters, which are left alone here.
//! Only a line that is not UTF-8 at all is unreadable.

use std::borrow::Cow;

/// Longer lines are cut here. nccl-tests rows are ~150 bytes, NCCL INFO lines rarely over 1 KiB
/// (the `NET/IB : Using` line on a 16-HCA node is the longest seen).
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// Splits a byte stream into lines of at most [`MAX_LINE_BYTES`], whatever the chunking.
#[derive(Debug, Default)]
pub struct LineSplitter {
    /// The start of a line whose end has not arrived yet.
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
        while let Some(pos) = memchr::memchr(b'\n', rest) {
            let line = &rest[..pos];
            if self.buf.is_empty() && !self.overflowed {
                // The whole line is in this chunk: no copy (the common case).
                if line.len() > MAX_LINE_BYTES {
                    emit(&line[..MAX_LINE_BYTES], true);
                } else {
                    emit(line, false);
                }
            } else {
                self.take(line);
                emit(&self.buf, self.overflowed);
                self.buf.clear();
                self.overflowed = false;
            }
            rest = &rest[pos + 1..];
        }
        self.take(rest);
    }

    /// The start of a line is waiting for its end.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.overflowed
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

/// The text of a raw line: `None` when it is not UTF-8; else as [`clean`] makes it.
pub fn text(raw: &[u8]) -> Option<Cow<'_, str>> {
    std::str::from_utf8(raw).ok().map(clean)
}

/// A line of text without control characters and terminal escapes, and without a trailing `\r`
/// (CRLF logs). Borrowed when nothing had to go.
pub fn clean(text: &str) -> Cow<'_, str> {
    let text = text.strip_suffix('\r').unwrap_or(text);
    if has_control(text.as_bytes()) {
        Cow::Owned(without_controls(text))
    } else {
        Cow::Borrowed(text)
    }
}

/// No control character in `bytes` but newlines: 64 bytes at a time, OR-reduced into one byte
/// (a loop the compiler turns into vector instructions).
pub fn only_newlines(bytes: &[u8]) -> bool {
    bytes.chunks(64).all(|block| {
        let bad = block.iter().fold(0u8, |acc, &b| {
            acc | u8::from((b < 0x20 && b != b'\n') || b == 0x7f)
        });
        bad == 0
    })
}

/// Any byte below 0x20 or DEL, eight bytes at a time (the classic "has less than" bit trick,
/// exact for bounds up to 128; UTF-8 continuation bytes are ≥ 0x80 and never match).
fn has_control(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        // DEL (0x7f): x ^ 0x7f..7f has a zero byte there.
        let y = x ^ (ONES * 0x7f);
        let del = y.wrapping_sub(ONES) & !y & HIGH;
        if below_space | del != 0 {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b < 0x20 || b == 0x7f)
}

/// The line without escape sequences (`ESC [ params final`, `ESC ] ... BEL|ESC \`, `ESC x`) and
/// ASCII control characters; a tab becomes a space; a carriage return stays.
fn without_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameter and intermediate bytes, then one final byte in @..~.
                Some('[') => {
                    for f in chars.by_ref() {
                        if ('@'..='~').contains(&f) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(']') => {
                    while let Some(f) = chars.next() {
                        if f == '\u{7}' {
                            break;
                        }
                        if f == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\t' => out.push(' '),
            '\r' => out.push('\r'),
            c if c.is_ascii_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The largest char boundary of `s` at or below `i`.
pub(super) fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<(String, bool)> {
        let mut splitter = LineSplitter::new();
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, &mut |l, cut| {
                out.push((String::from_utf8_lossy(l).into_owned(), cut))
            });
        }
        splitter.finish(&mut |l, cut| out.push((String::from_utf8_lossy(l).into_owned(), cut)));
        out
    }

    #[test]
    fn splits_whatever_the_chunking_and_cuts_long_lines() {
        let want = vec![
            ("a".to_string(), false),
            (String::new(), false),
            ("bc".to_string(), false),
        ];
        assert_eq!(lines(&[b"a\n\nbc"]), want);
        assert_eq!(lines(&[b"a", b"\n", b"\nb", b"c"]), want);
        let long = vec![b'x'; MAX_LINE_BYTES + 5];
        let got = lines(&[&long, b"\nok\n"]);
        assert_eq!(got[0].0.len(), MAX_LINE_BYTES);
        assert!(got[0].1);
        assert_eq!(got[1], ("ok".to_string(), false));
        // Whole inside one chunk, too long: cut the same way.
        let mut one = long.clone();
        one.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&[&one]), got);
    }

    #[test]
    fn control_characters_are_removed_not_fatal() {
        assert_eq!(text(b"plain line").unwrap(), "plain line");
        assert!(matches!(text(b"plain line").unwrap(), Cow::Borrowed(_)));
        assert_eq!(text(b"crlf line\r").unwrap(), "crlf line");
        // Ray's coloured worker prefix (vllm-project/vllm#6042 shows it with its ESC lost).
        assert_eq!(
            text(
                b"\x1b[36m(RayWorkerWrapper pid=4009)\x1b[0m [rank1]:[E ProcessGroupNCCL.cpp:563]"
            )
            .unwrap(),
            "(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:563]"
        );
        // A progress bar redrawn with \r, then a watchdog line on the same physical line: the
        // carriage return stays (the human formats show it escaped), C1 and bidi characters too.
        assert_eq!(
            text(b"Epoch 0:   6%|##   | 32040/500150\r[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog")
                .unwrap(),
            "Epoch 0:   6%|##   | 32040/500150\r[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog"
        );
        assert_eq!(
            text("x\u{9b}2J\u{202e}\x1b[31my".as_bytes()).unwrap(),
            "x\u{9b}2J\u{202e}y"
        );
        assert_eq!(text(b"a\tb\x07c\x7fd\x00e").unwrap(), "a bcde");
        assert_eq!(
            text(b"\x1b]0;title\x07host:1:1 [0] NCCL INFO x").unwrap(),
            "host:1:1 [0] NCCL INFO x"
        );
        assert!(text(b"\xff\xfe garbage").is_none());
        assert!(only_newlines(&b"a line\nanother\n".repeat(20)));
        assert!(!only_newlines(&b"a line\nanother\r\n".repeat(20)));
        assert!(!only_newlines(&[b"x".repeat(100), vec![0x1b]].concat()));
        // UTF-8 (tqdm's block characters) is not a control character.
        assert!(!has_control("█████████▍| 30/32".as_bytes()));
        for b in 0u8..=0x7f {
            let mut line = b"0123456789abcdef".to_vec();
            line[b as usize % 16] = b;
            assert_eq!(has_control(&line), b < 0x20 || b == 0x7f, "byte {b:#x}");
        }
    }
}
