//! Docker's `json-file` container log read back as the text the container wrote: each line of
//! `/var/lib/docker/containers/<id>/<id>-json.log` is one JSON object
//! `{"log":"…\n","stream":"stdout","time":"…"}` (moby daemon/logger/jsonfilelog/jsonlog
//! `JSONLogs.MarshalJSONBuf`: the message bytes as a JSON string, `<`, `>`, `&` written as
//! `\u003c`, `\u003e`, `\u0026`, control bytes but `\n` and `\r` as `\u00XX`, invalid UTF-8 as `\ufffd`, an
//! optional `attrs` object). A message longer than the copier's 16 KiB buffer is written as
//! several entries, the first ones without their `\n` (moby daemon/logger/copier.go, partial
//! metadata): `docker logs` writes each entry's bytes to its stream one after another, so the
//! pieces of a line are joined per stream here the same way.
//!
//! Used by the NCCL log reader (`nccl_log.rs`) when a file's first line is such an object: a
//! log copied out of a Docker host is then read as the log itself. A line that is not an entry
//! (a blank line, a truncated last one) passes through as it is, never dropped.

use std::io::{BufRead, Read};

/// Whether `head`, the first bytes of a file, starts with a json-file entry.
pub fn looks_like(head: &[u8]) -> bool {
    let trimmed = head.trim_ascii_start();
    trimmed.starts_with(b"{\"log\":") || trimmed.starts_with(b"{\"log\" :")
}

/// Decoded bytes gathered before a read is answered.
const BATCH: usize = 64 * 1024;

/// One json-file entry; fields other than these (`time`, `attrs`) are not needed.
#[derive(serde::Deserialize)]
struct Entry {
    /// Left out when the message is empty (`omitempty`).
    #[serde(default)]
    log: String,
    #[serde(default)]
    stream: String,
}

/// The decoded text of a json-file log, as a reader.
pub struct JsonFileLog<R> {
    inner: R,
    /// Decoded bytes not yet handed out, from `at`.
    out: Vec<u8>,
    at: usize,
    /// Per stream, the start of a line whose rest is in a later entry.
    pending: Vec<(String, Vec<u8>)>,
    line: Vec<u8>,
    ended: bool,
}

impl<R: BufRead> JsonFileLog<R> {
    pub fn new(inner: R) -> Self {
        JsonFileLog {
            inner,
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
            if self.inner.read_until(b'\n', &mut self.line)? == 0 {
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
        let line = self.line.trim_ascii();
        match serde_json::from_slice::<Entry>(line) {
            Ok(entry) => {
                let at = match self.pending.iter().position(|(s, _)| *s == entry.stream) {
                    Some(at) => at,
                    None => {
                        self.pending.push((entry.stream, Vec::new()));
                        self.pending.len() - 1
                    }
                };
                let piece = &mut self.pending[at].1;
                piece.extend_from_slice(entry.log.as_bytes());
                if piece.ends_with(b"\n") {
                    self.out.append(piece);
                }
            }
            Err(_) => {
                // Not an entry: kept as written.
                self.out.extend_from_slice(&self.line);
                if !self.out.ends_with(b"\n") {
                    self.out.push(b'\n');
                }
            }
        }
    }
}

impl<R: BufRead> Read for JsonFileLog<R> {
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
        let mut out = String::new();
        JsonFileLog::new(text.as_bytes())
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
        assert!(looks_like(text.as_bytes()));
        assert!(!looks_like(b"host:1:1 [0] NCCL INFO x\n"));
    }

    #[test]
    fn a_real_json_file_log_reads_back() {
        // log2timeline/plaso's test data: a container's json-file log (tests/data/judge/SOURCES.md).
        let text = std::fs::read_to_string(format!(
            "{}/tests/data/judge/docker-json-file_container-json.log_plaso-test-data.log",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert!(looks_like(text.as_bytes()));
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
}
