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

use crate::answers::nccl::{NcclLog, NcclLogParser, Prepared};

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
    // `from_utf8_lossy` walks its input in chunks of valid text a few times slower than
    // `from_utf8` checks it: on up to 8 MiB of transcript, 7 instructions a byte (callgrind).
    let mut text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// What the reading thread hands the parser: whole lines checked as UTF-8 and prepared
/// ([`Prepared`]), or bytes the parser splits itself (a line longer than a chunk, text that is
/// not UTF-8, the end of a stream without a newline).
enum Piece {
    Lines(String, Prepared),
    Raw(Vec<u8>),
}

/// Pieces read ahead of the parser: enough to keep both threads busy, few enough to keep
/// memory flat.
const AHEAD: usize = 2;

/// Read `reader` to its end into the parser; the facts and the transcript (first and last
/// `part` bytes).
///
/// Two threads (issue 28): this one reads the file — the kernel's copy, the UTF-8 check, where
/// lines end and their content and NCCL marker start ([`Prepared`]) — while the calling thread
/// interprets the lines read before. The pieces are cut at line ends and go to the parser in
/// order; it gets the same facts as from one thread (`threads_give_the_facts_of_one`).
///
/// A container log (Docker `json-file`, or the CRI format of `/var/log/pods`) is read as the
/// text its entries hold ([`super::container_log`]); the transcript is then that text.
pub fn read_stream(
    reader: &mut (dyn Read + Send),
    part: usize,
) -> std::io::Result<(NcclLog, String)> {
    use std::io::BufRead as _;
    let mut buffered = std::io::BufReader::with_capacity(CHUNK, reader);
    if let Some(format) = super::container_log::looks_like(buffered.fill_buf()?) {
        let mut decoded = super::container_log::ContainerLog::new(buffered, format);
        return read_plain(&mut decoded, part);
    }
    // A plain log is read from the file itself once the bytes looked at are handed on: through
    // the `BufReader`, every byte was copied once more, and a read a little shorter than its
    // buffer left a few bytes behind that came back as a piece of their own (std's
    // `BufReader::read` reads past its buffer only when the buffer is empty and the request at
    // least its capacity): two pieces a chunk, the second buffer zeroed whole again (7 % of
    // a table-dense log's instructions, callgrind; docs/performance.md, issue 41).
    let head = buffered.buffer().to_vec();
    let mut plain = head.as_slice().chain(buffered.into_inner());
    read_plain(&mut plain, part)
}

/// [`read_stream`] of a log that is its own text.
fn read_plain(reader: &mut (dyn Read + Send), part: usize) -> std::io::Result<(NcclLog, String)> {
    let (pieces, received) = std::sync::mpsc::sync_channel::<std::io::Result<Piece>>(AHEAD);
    let (give_back, spares) = std::sync::mpsc::channel::<(Option<Vec<u8>>, Option<Prepared>)>();
    let mut parser = NcclLogParser::new();
    let mut transcript = Transcript::new(part);
    let mut failed = None;
    std::thread::scope(|scope| {
        scope.spawn(move || read_pieces(reader, &pieces, &spares));
        for piece in received {
            let (bytes, prepared) = match piece {
                Ok(Piece::Lines(text, prepared)) => {
                    parser.feed_prepared(&text, &prepared);
                    (text.into_bytes(), Some(prepared))
                }
                Ok(Piece::Raw(bytes)) => {
                    parser.feed_bytes(&bytes);
                    (bytes, None)
                }
                Err(e) => {
                    failed = Some(e);
                    // Dropping the receiver ends the reading thread.
                    break;
                }
            };
            let n = bytes.len();
            transcript.keep(bytes, n);
            // Buffers out of the tail go back to be read into (the reading thread may have
            // ended: then nothing needs them).
            for spare in transcript.spare.drain(..) {
                let _ = give_back.send((Some(spare), None));
            }
            if prepared.is_some() {
                let _ = give_back.send((None, prepared));
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let log = parser.finish();
    let text = transcript.finish(log.lines);
    Ok((log, text))
}

/// The reading thread: `reader` to its end, in pieces cut after a line's end (see [`Piece`]).
/// Stops when the parser's side hangs up.
fn read_pieces(
    reader: &mut (dyn Read + Send),
    pieces: &std::sync::mpsc::SyncSender<std::io::Result<Piece>>,
    spares: &std::sync::mpsc::Receiver<(Option<Vec<u8>>, Option<Prepared>)>,
) {
    let mut buffers: Vec<Vec<u8>> = Vec::new();
    let mut prepared: Vec<Prepared> = Vec::new();
    // The start of a line the last piece did not end (copied to the front of the next).
    let mut carry: Vec<u8> = Vec::new();
    // The last piece sent ended inside a line: the next bytes up to a newline are its rest.
    let mut mid_line = false;
    let mut eof = false;
    while !eof {
        while let Ok((buffer, prep)) = spares.try_recv() {
            buffers.extend(buffer);
            prepared.extend(prep);
        }
        let mut buf = buffers.pop().unwrap_or_default();
        // A buffer back from the tail is nearly full length: only its end is zeroed here.
        buf.resize(CHUNK.max(carry.len() + 1), 0);
        buf[..carry.len()].copy_from_slice(&carry);
        // Read until the buffer holds a line end (or is full, or the stream ended).
        let mut len = carry.len();
        carry.clear();
        loop {
            match reader.read(&mut buf[len..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    let had = len;
                    len += n;
                    if len == buf.len() || memchr::memchr(b'\n', &buf[had..len]).is_some() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = pieces.send(Err(e));
                    return;
                }
            }
        }
        buf.truncate(len);
        if mid_line {
            // The rest of a line longer than a chunk, up to its newline, goes as bytes.
            match memchr::memchr(b'\n', &buf) {
                Some(pos) => {
                    let rest: Vec<u8> = buf.drain(..=pos).collect();
                    if pieces.send(Ok(Piece::Raw(rest))).is_err() {
                        return;
                    }
                    mid_line = false;
                }
                None => {
                    let empty = buf.is_empty();
                    if !empty && pieces.send(Ok(Piece::Raw(buf))).is_err() {
                        return;
                    }
                    continue;
                }
            }
        }
        let Some(last) = memchr::memrchr(b'\n', &buf) else {
            // No line end: the stream's last line, or a line longer than a chunk.
            mid_line = !eof;
            if !buf.is_empty() && pieces.send(Ok(Piece::Raw(buf))).is_err() {
                return;
            }
            continue;
        };
        carry.extend_from_slice(&buf[last + 1..]);
        buf.truncate(last + 1);
        let mut prep = prepared.pop().unwrap_or_default();
        let piece = match prep.text_of(buf) {
            Ok(text) => Piece::Lines(text, prep),
            Err(bytes) => {
                prepared.push(prep);
                Piece::Raw(bytes)
            }
        };
        if pieces.send(Ok(piece)).is_err() {
            return;
        }
        if eof && !carry.is_empty() {
            let last_line = std::mem::take(&mut carry);
            if pieces.send(Ok(Piece::Raw(last_line))).is_err() {
                return;
            }
        }
    }
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

    /// The facts of `data` read on one thread, in one chunk.
    fn serial(data: &[u8]) -> NcclLog {
        let mut parser = NcclLogParser::new();
        parser.feed_bytes(data);
        parser.finish()
    }

    /// Issue 28: the reading thread cuts the stream at line ends and prepares the lines; the
    /// parser must get the very facts it gets from the bytes alone — on every real log and
    /// fixture log, repeated past a chunk, with lines longer than a chunk, bytes that are not
    /// UTF-8, control characters, CRLF, a last line without a newline, and reads of any size.
    #[test]
    fn threads_give_the_facts_of_one() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut logs: Vec<Vec<u8>> = Vec::new();
        let mut dirs = vec![root.join("tests/data/nccl/real")];
        for fixture in std::fs::read_dir(root.join("fixtures")).unwrap() {
            dirs.push(fixture.unwrap().path().join(".gpudoctor/nccl"));
        }
        for dir in dirs.iter().filter(|d| d.is_dir()) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "log") {
                    logs.push(std::fs::read(path).unwrap());
                }
            }
        }
        assert!(logs.len() > 40, "{}", logs.len());
        let all: Vec<u8> = logs.concat();
        // Past several chunks, and lines cut anywhere by them.
        let mut big = all.repeat(1 + 3 * CHUNK / all.len().max(1));
        big.extend_from_slice(b"a last line without a newline");
        let mut odd = all.clone();
        odd.extend_from_slice(&vec![b'7'; CHUNK + 100]);
        odd.extend_from_slice(b"\n\xff\xfe not utf-8\nnode:1:1 [0] NCCL INFO Using network IB\r\n");
        odd.extend_from_slice(&vec![b'x'; 3 * CHUNK]);
        odd.extend_from_slice(
            b"\n\x1b[36m(RayWorkerWrapper pid=1)\x1b[0m node:1:1 [0] NCCL WARN x\n",
        );
        odd.extend_from_slice(&all);
        // Empty lines behind a pdsh or Slurm label: content that is no piece of its line.
        odd.extend_from_slice(b"node-a01:\n 0:\nnode-a01: \n");
        odd.extend_from_slice(&vec![b'y'; CHUNK - 1]);
        // Rows at the edges of what is read ahead (`rows::ReadyRow`: under 256 bytes, at most
        // 15 fields, `<`/`[` refused, NaN its "not read" mark): a figure that reads as NaN,
        // a row of 256 bytes, 16 and 21 fields, glued markers, a row ending at 64 bytes.
        let header = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";
        let row = "    33554432       4194304    double     sum      -1   182.87  183.49  321.10       0   182.88  183.48  321.08       0";
        let mut edges = String::from(header);
        edges.push_str(&format!("{row}\n{}\n", row.replace("183.49", "nan")));
        edges.push_str(&format!("{}\n", row.replace("321.10", "-nan")));
        // Contents (the row without its indent) of 256 and 255 bytes.
        let wide = |len: usize| {
            let gap = " ".repeat(len - row.trim().len() + 2);
            row.replacen("e  ", &format!("e{gap}"), 1)
        };
        assert_eq!((wide(256).trim().len(), wide(255).trim().len()), (256, 255));
        edges.push_str(&format!("{}\n{}\n", wide(256), wide(255)));
        edges.push_str(&format!("{row} 7\n{row} 1 2 3 4 5 6 7 8\n"));
        edges.push_str(&format!("{}\n", row.replace("-1 ", "-1[0] ")));
        edges.push_str(&format!("{}\n", row.replace("sum ", "sum<stdout> ")));
        edges.push_str("1024 256 float sum -1 8.1 0.13 0.22 0 7.9 0.13 0.23 0\n");
        edges.push_str(&format!("{}\n", &row[..64]));
        // Rows that miss one condition of the usual rows' fast lane (`answers/nccl/ready.rs`)
        // each: a type that is no name, a size that is no whole number, a date and time as the
        // last two of 13 fields, a root that is no number, a deviation, N/A and an infinity as
        // figures, sums that do not add up, a head pending, and headers of other layouts.
        for (from, to) in [
            ("double", "12345"),
            ("33554432", "3355443.2"),
            ("4194304", "4194304.5"),
            ("  183.48  321.08       0", " 183.48 2024-01-02 12:34:56"),
            ("-1", "x1"),
            ("321.10       0", "321.10   1e-05"),
            ("321.08       0", "321.08     N/A"),
            ("182.87", "inf"),
            ("182.87", "1.87"),
        ] {
            edges.push_str(&row.replacen(from, to, 1));
            edges.push('\n');
        }
        edges.push_str(&format!("{}\n{row}\n", &row[..row.find("-1").unwrap() + 2]));
        // A size that is no whole number where the sums are never checked (algbw 0.00).
        edges.push_str("8.5 2 float sum -1 8.1 0.00 0.00 0 7.9 0.00 0.00 0\n");
        for other in [
            ("redop", "op"),
            ("#wrong", "error"),
            ("     time", "  cputime"),
        ] {
            edges.push_str(&header.replacen(other.0, other.1, 1));
            edges.push_str(&format!("{row}\n{}\n", row.replace("       0", "   0e+00")));
            edges.push_str(&format!("{}\n", row.replacen("182.87", "1.87", 1)));
        }
        // A fourth lead column of another name: a number there is a root, not a reduction.
        edges.push_str(&header.replacen("redop", "  xyz", 1));
        edges.push_str(&format!("{}\n", row.replacen("sum", "  7", 1)));
        edges.push_str(header);
        odd.extend_from_slice(edges.repeat(3).as_bytes());
        let edges = edges.repeat(3).into_bytes();
        for data in logs.iter().chain([&all, &big, &odd, &edges]) {
            let want = serial(data);
            for step in [usize::MAX, 4096, 1000, 1 << 20] {
                if step < 4096 && data.len() > 1 << 20 {
                    continue;
                }
                let mut reader = Trickle { data, step };
                let (got, _) = read_stream(&mut reader, 1 << 20).unwrap();
                assert_eq!(got, want, "{} bytes, reads of {step}", data.len());
            }
        }
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
