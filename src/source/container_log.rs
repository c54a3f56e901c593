//! A container's log file read back as the text the container wrote, in the two formats the
//! runtimes write:
//! - Docker's `json-file`: each line of `/var/lib/docker/containers/<id>/<id>-json.log` is one
//!   JSON object `{"log":"…\n","stream":"stdout","time":"…"}` (moby daemon/logger/jsonfilelog/
//!   jsonlog `JSONLogs.MarshalJSONBuf`: the message bytes as a JSON string, `<`, `>`, `&`
//!   written as `\u003c`, `\u003e`, `\u0026`, control bytes but `\n` and `\r` as `\u00XX`,
//!   invalid UTF-8 as `\ufffd`, an optional `attrs` object). A message longer than the copier's
//!   16 KiB buffer is written as several entries, the first ones without their `\n` (moby
//!   daemon/logger/copier.go, partial metadata).
//! - The CRI format the kubelet reads from `/var/log/pods/…/<n>.log` (containerd, CRI-O):
//!   `<RFC 3339 time> <stream> <tag> <log>`, the tag `F` for the end of a line and `P` for a
//!   part of a longer one whose rest follows (kubernetes pkg/kubelet/kuberuntime/logs/logs.go,
//!   `parseCRILog`: `2016-10-06T00:17:09.669794202Z stdout P log content 1`).
//!
//! `docker logs` and the kubelet's `ReadLogs` write each entry's bytes to its stream one after
//! another, so the pieces of a line are joined per stream here the same way.
//!
//! Used by the NCCL log reader (`nccl_log.rs`) when a file's first line is such an entry: a log
//! copied out of a node is then read as the log itself. A line that is not an entry (a blank
//! line, a truncated last one) passes through as it is, never dropped.

use std::io::{BufRead, Read};

/// The two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    JsonFile,
    Cri,
}

/// The format of a file whose first bytes are `head`, if it is a container log.
pub fn looks_like(head: &[u8]) -> Option<Format> {
    let trimmed = head.trim_ascii_start();
    if trimmed.starts_with(b"{\"log\":") || trimmed.starts_with(b"{\"log\" :") {
        return Some(Format::JsonFile);
    }
    let first = trimmed.split(|b| *b == b'\n').next().unwrap_or_default();
    cri_entry(first).map(|_| Format::Cri)
}

/// A CRI log line as (stream, text, whether the line ends here); `None` when it is not one.
/// The time is checked for its shape only (`2016-10-06T00:17:09.669794202Z`, any zone): the
/// kubelet writes it, and a line that merely starts with a date is not taken for an entry
/// without the stream and tag after it.
fn cri_entry(line: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    // The `\r` of a line the container ended with `\r\n` is its own: kept, as the kubelet does.
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut fields = line.splitn(4, |b| *b == b' ');
    let time = fields.next()?;
    let stamped = time.len() >= 20
        && time[..4].iter().all(u8::is_ascii_digit)
        && time[4] == b'-'
        && time[10] == b'T'
        && time[13] == b':';
    let stream = fields.next()?;
    if !stamped || !matches!(stream, b"stdout" | b"stderr") {
        return None;
    }
    // The tag: `F` or `P`, and later flags after `:` (cri-api `LogTagDelimiter`).
    let tag = fields.next()?;
    let full = match tag.split(|b| *b == b':').next()? {
        b"F" => true,
        b"P" => false,
        _ => return None,
    };
    Some((stream, fields.next().unwrap_or_default(), full))
}

/// Decoded bytes gathered before a read is answered.
const BATCH: usize = 64 * 1024;
/// The longest line read as one entry: both runtimes cut a message at 16 KiB (moby's copier
/// buffer, the kubelet's CRI writer), so a longer line is no entry.
const MAX_ENTRY: usize = 1024 * 1024;

/// One json-file entry; fields other than these (`time`, `attrs`) are not needed.
#[derive(serde::Deserialize)]
struct Entry {
    /// Left out when the message is empty (`omitempty`).
    #[serde(default)]
    log: String,
    #[serde(default)]
    stream: String,
}

/// The decoded text of a container log, as a reader.
pub struct ContainerLog<R> {
    inner: R,
    format: Format,
    /// Decoded bytes not yet handed out, from `at`.
    out: Vec<u8>,
    at: usize,
    /// Per stream, the start of a line whose rest is in a later entry.
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    line: Vec<u8>,
    ended: bool,
}

impl<R: BufRead> ContainerLog<R> {
    pub fn new(inner: R, format: Format) -> Self {
        ContainerLog {
            inner,
            format,
            out: Vec::new(),
            at: 0,
            pending: Vec::new(),
            line: Vec::new(),
            ended: false,
        }
    }

    /// Decode entries until a batch of text is ready (the NCCL reader takes pieces ending at a
    /// line end: one entry at a time would make a piece of every line) or the file has ended.
    fn refill(&mut self) -> std::io::Result<()> {
        self.out.clear();
        self.at = 0;
        while self.out.len() < BATCH && !self.ended {
            self.line.clear();
            // At most MAX_ENTRY bytes a line: a file that is one endless line is passed on in
            // pieces (the NCCL reader bounds its lines), never gathered whole in memory.
            let n = (&mut self.inner)
                .take(MAX_ENTRY as u64)
                .read_until(b'\n', &mut self.line)?;
            if n == MAX_ENTRY && !self.line.ends_with(b"\n") {
                self.out.extend_from_slice(&self.line);
                continue;
            }
            if n == 0 {
                self.ended = true;
                // Pieces whose line never ended: as `docker logs` shows them, each then ended.
                for (_, piece) in self.pending.drain(..) {
                    if !piece.is_empty() {
                        self.out.extend_from_slice(&piece);
                        self.out.push(b'\n');
                    }
                }
                break;
            }
            self.take_line();
        }
        Ok(())
    }

    fn take_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let entry = match self.format {
            Format::JsonFile => serde_json::from_slice::<Entry>(line.trim_ascii())
                .ok()
                .map(|e| (e.stream.into_bytes(), e.log.into_bytes(), false)),
            Format::Cri => cri_entry(&line).map(|(stream, text, full)| {
                let mut text = text.to_vec();
                if full {
                    text.push(b'\n');
                }
                (stream.to_vec(), text, full)
            }),
        };
        match entry {
            Some((stream, text, _)) => {
                let at = match self.pending.iter().position(|(s, _)| *s == stream) {
                    Some(at) => at,
                    None => {
                        self.pending.push((stream, Vec::new()));
                        self.pending.len() - 1
                    }
                };
                let piece = &mut self.pending[at].1;
                piece.extend_from_slice(&text);
                if piece.ends_with(b"\n") {
                    self.out.append(piece);
                }
            }
            None => {
                // Not an entry: kept as written.
                self.out.extend_from_slice(&line);
                if !self.out.ends_with(b"\n") {
                    self.out.push(b'\n');
                }
            }
        }
        self.line = line;
    }
}

impl<R: BufRead> Read for ContainerLog<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at >= self.out.len() {
            self.refill()?;
        }
        let left = &self.out[self.at..];
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> String {
        let format = looks_like(text.as_bytes()).unwrap_or(Format::JsonFile);
        let mut out = String::new();
        ContainerLog::new(text.as_bytes(), format)
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn entries_become_the_text_written() {
        // The shape of a real entry (log2timeline/plaso test_data/docker/containers/…/
        // container-json.log) and moby's escapes (jsonlogbytes_test.go).
        let text = concat!(
            "{\"log\":\"host:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1\\u003c0\\u003e\\n\",\"stream\":\"stdout\",\"time\":\"2016-01-07T16:49:10.237222729Z\"}\n",
            "{\"log\":\"a \\\"quoted\\\" tab\\there \\u0026 back\\\\slash\\r\\n\",\"stream\":\"stderr\",\"attrs\":{\"k\":\"v\"},\"time\":\"2016-01-07T16:49:10.2Z\"}\n",
        );
        assert_eq!(
            decode(text),
            "host:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\na \"quoted\" tab\there & back\\slash\r\n"
        );
        assert_eq!(looks_like(text.as_bytes()), Some(Format::JsonFile));
        assert_eq!(looks_like(b"host:1:1 [0] NCCL INFO x\n"), None);
    }

    #[test]
    fn a_real_json_file_log_reads_back() {
        // log2timeline/plaso's test data: a container's json-file log (tests/data/judge/SOURCES.md).
        let text = std::fs::read_to_string(format!(
            "{}/tests/data/judge/docker-json-file_container-json.log_plaso-test-data.log",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert_eq!(looks_like(text.as_bytes()), Some(Format::JsonFile));
        let line =
            "\u{1b}]0;root@e7d0b7ea5ccf: /home/plaso\u{7}root@e7d0b7ea5ccf:/home/plaso# ls\r\n";
        assert_eq!(decode(&text), line.repeat(10));
    }

    #[test]
    fn partial_entries_are_joined_per_stream() {
        let text = concat!(
            "{\"log\":\"#  Rank  0 Gro\",\"stream\":\"stdout\",\"time\":\"t\"}\n",
            "{\"log\":\"warn line\\n\",\"stream\":\"stderr\",\"time\":\"t\"}\n",
            "{\"log\":\"up  0 Pid\\n\",\"stream\":\"stdout\",\"time\":\"t\"}\n",
            "\n",
            "not json at all\n",
            "{\"log\":\"cut at the end\",\"stream\":\"stdout\",\"time\":\"t\"}\n",
            "{\"log\":\"truncated",
        );
        assert_eq!(
            decode(text),
            "warn line\n#  Rank  0 Group  0 Pid\n\nnot json at all\n{\"log\":\"truncated\ncut at the end\n"
        );
    }

    /// The kubelet's own examples (pkg/kubelet/kuberuntime/logs/logs.go, `parseCRILog`): a `P`
    /// part and the `F` line it continues are one line, joined per stream; an empty `F` entry is
    /// an empty line; a line that is not an entry passes through.
    #[test]
    fn cri_parts_are_joined_per_stream() {
        let text = concat!(
            "2016-10-06T00:17:09.669794202Z stdout P log content 1\n",
            "2016-10-06T00:17:09.669794203Z stderr F log content 2\n",
            "2016-10-06T00:17:09.669794204Z stdout F  and its rest\n",
            "2016-10-06T00:17:09.669794205Z stdout F\n",
            "a line that is no entry\n",
            "2026-01-06T10:00:00.123456789+01:00 stdout F:x #  Rank  0 Group  0\r\n",
            "2026-01-06T10:00:01Z stdout P cut at the end",
        );
        assert_eq!(looks_like(text.as_bytes()), Some(Format::Cri));
        assert_eq!(
            decode(text),
            "log content 2\nlog content 1 and its rest\n\na line that is no entry\n#  Rank  0 Group  0\r\ncut at the end\n"
        );
        // A date at the start of a line is not enough.
        assert_eq!(looks_like(b"2016-10-06T00:17:09Z NCCL INFO x\n"), None);
        assert_eq!(looks_like(b"2016-10-06T00:17:09Z stdout X y\n"), None);
    }

    /// A file that is one line of 3 MiB without an end comes back as it was, in pieces.
    #[test]
    fn an_endless_line_passes_through_in_pieces() {
        let mut text = String::from("2016-10-06T00:17:09.669794202Z stdout F ");
        text.push_str(&"x".repeat(3 * MAX_ENTRY));
        let mut out = Vec::new();
        ContainerLog::new(text.as_bytes(), Format::Cri)
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out.len(), text.len() + 1);
        assert!(out.starts_with(b"2016-10-06T00:17:09.669794202Z stdout F xxx"));
        assert!(out.ends_with(b"xxx\n"));
    }
}
