//! Reading a saved NCCL log (`--nccl-log FILE`, a capture's `.gpudoctor/nccl/*.log`): the file
//! streamed into [`NcclLogParser`] in large chunks, and its first and last bytes kept for
//! `gpudoctor record` (what `source/nccl.rs` calls the transcript).
//!
//! A log can be hundreds of MiB (issue 15: parsing must stay within a third of `grep -c`'s
//! speed, docs/performance.md), so nothing here touches a byte twice that it need not: the read
//! buffers themselves are kept for the tail and reused once they fall out of it, and only the
//! first [`TRANSCRIPT_PART`] bytes are copied. Memory stays flat: about two parts plus a chunk.

use std::collections::VecDeque;
use std::io::Read;

use crate::answers::nccl::{NcclLog, NcclLogParser};

/// Bytes read at a time.
const CHUNK: usize = 256 * 1024;

/// The first and last `cap` bytes of a stream, cut to whole lines, with a marker line between
/// them saying how much was left out.
#[derive(Debug)]
struct Transcript {
    cap: usize,
    head: Vec<u8>,
    /// The most recent chunks, oldest first; together at least `cap` bytes once the stream is.
    tail: VecDeque<Vec<u8>>,
    tail_bytes: usize,
    total: u64,
    spare: Vec<Vec<u8>>,
}

impl Transcript {
    fn new(cap: usize) -> Self {
        Transcript {
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            tail_bytes: 0,
            total: 0,
            spare: Vec::new(),
        }
    }

    /// A buffer to read into (one that left the tail, or a new one).
    fn buffer(&mut self) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.resize(CHUNK, 0);
        buf
    }

    /// Keep the first `n` bytes of `buf`, a chunk just read.
    fn keep(&mut self, mut buf: Vec<u8>, n: usize) {
        buf.truncate(n);
        self.total += n as u64;
        if self.head.len() < self.cap {
            let room = self.cap - self.head.len();
            self.head.extend_from_slice(&buf[..n.min(room)]);
        }
        self.tail_bytes += n;
        self.tail.push_back(buf);
        while let Some(front) = self.tail.front() {
            if self.tail_bytes - front.len() < self.cap {
                break;
            }
            self.tail_bytes -= front.len();
            if let Some(old) = self.tail.pop_front() {
                self.spare.push(old);
            }
        }
    }

    /// The transcript, given how many lines the whole stream had.
    fn finish(self, lines: u64) -> String {
        let total = usize::try_from(self.total).unwrap_or(usize::MAX);
        let mut tail: Vec<u8> = Vec::with_capacity(self.tail_bytes);
        for chunk in &self.tail {
            tail.extend_from_slice(chunk);
        }
        // Where the tail starts in the stream.
        let tail_at = total - tail.len();
        if total <= self.head.len() || tail_at <= self.head.len() {
            // Head and tail meet: the whole stream.
            let from = self.head.len() - tail_at;
            let mut all = self.head;
            all.extend_from_slice(&tail[from..]);
            return text_with_newline(&all);
        }
        // Whole lines only: the head up to its last newline, the tail from its first (a line
        // longer than a part is cut where the part ends).
        let head_end = memchr::memrchr(b'\n', &self.head).map_or(self.head.len(), |i| i + 1);
        let head = &self.head[..head_end];
        let keep = tail.len().min(self.cap);
        let window = &tail[tail.len() - keep..];
        let tail_start = if tail_at + tail.len() - keep == head_end {
            0
        } else {
            memchr::memchr(b'\n', window).map_or(0, |i| i + 1)
        };
        let tail = &window[tail_start..];
        let head_lines = memchr::memchr_iter(b'\n', head).count() as u64;
        let tail_lines = memchr::memchr_iter(b'\n', tail).count() as u64
            + u64::from(!tail.is_empty() && !tail.ends_with(b"\n"));
        let omitted_bytes = total - head.len() - tail.len();
        let omitted_lines = lines.saturating_sub(head_lines + tail_lines);
        let mut out = text_with_newline(head);
        out.push_str(&format!(
            "# gpudoctor: {omitted_lines} line(s), {omitted_bytes} byte(s) of output omitted here\n"
        ));
        out.push_str(&text_with_newline(tail));
        out
    }
}

/// Bytes as text (invalid UTF-8 replaced), ending with a newline unless empty.
fn text_with_newline(bytes: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Read `reader` to its end into the parser; the facts and the transcript (first and last
/// `part` bytes).
pub fn read_stream(reader: &mut dyn Read, part: usize) -> std::io::Result<(NcclLog, String)> {
    let mut parser = NcclLogParser::new();
    let mut transcript = Transcript::new(part);
    loop {
        let mut buf = transcript.buffer();
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                parser.feed_bytes(&buf[..n]);
                transcript.keep(buf, n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let log = parser.finish();
    let text = transcript.finish(log.lines);
    Ok((log, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes a call, like a pipe.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.data.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn transcript(data: &[u8], part: usize, step: usize) -> String {
        let mut reader = Trickle { data, step };
        read_stream(&mut reader, part).unwrap().1
    }

    #[test]
    fn a_small_log_is_kept_verbatim() {
        let text = "a\nbb\nccc";
        for step in [1, 2, 1000] {
            assert_eq!(transcript(text.as_bytes(), 64, step), "a\nbb\nccc\n");
        }
        assert_eq!(transcript(b"", 64, 10), "");
    }

    #[test]
    fn a_big_log_keeps_whole_lines_of_its_head_and_tail() {
        let text: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        for step in [7, 100, 4096] {
            let got = transcript(text.as_bytes(), 64, step);
            let lines: Vec<&str> = got.lines().collect();
            assert_eq!(lines[0], "line 0000", "step {step}");
            assert_eq!(lines.last(), Some(&"line 0999"), "step {step}");
            let marker = lines
                .iter()
                .find(|l| l.starts_with("# gpudoctor:"))
                .unwrap();
            let kept = lines.iter().filter(|l| l.starts_with("line ")).count();
            assert_eq!(
                *marker,
                format!(
                    "# gpudoctor: {} line(s), {} byte(s) of output omitted here",
                    1000 - kept,
                    (1000 - kept) * 10
                ),
                "step {step}"
            );
            assert!(got.len() < 64 * 2 + 80, "{}", got.len());
        }
    }
}
