//! Reading the kernel log, wherever it comes from (`dev/kmsg` under the root, `--kernel-log
//! FILE`, a capture's `.gpudoctor/kmsg.txt`), so that damage in one part of it never hides the
//! events in another:
//! - **decoded lossily**: a byte sequence that is not UTF-8 becomes U+FFFD (as
//!   `String::from_utf8_lossy` replaces it), and a run of NUL bytes ends the line it is in. A
//!   kernel never writes NUL into its log (`/dev/kmsg` escapes unprintable bytes as `\xNN`,
//!   Documentation/ABI/testing/dev-kmsg); a syslog file has runs of them where blocks were
//!   allocated but never written before a crash, followed by the next boot's lines, which must
//!   parse from their own first byte. How many bytes were replaced, on how many lines, is said.
//! - **read from its tail** when longer than the read cap (8 MiB): the newest events are the
//!   ones that matter; the older bytes are skipped (a file is seeked past them), the cut line
//!   dropped, and how many bytes were skipped is said.
//!
//! What this says goes into the kernel-log checks' evidence (`checks/xid.rs`, `nvlink/sxid.rs`),
//! never an error: the events that could be read are judged. Nothing here parses events
//! (`facts/xid`).

use std::path::Path;
use std::time::Duration;

use super::rooted::{self, FsError, Tail};

/// The kernel log as read: its text, where it came from, and what reading it had to repair or
/// leave out ([`Decoding::notes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelLogText {
    pub text: String,
    /// `dev/kmsg`, the `--kernel-log` path, `.gpudoctor/kmsg.txt`.
    pub origin: String,
    pub decoding: Decoding,
}

/// What decoding a kernel log repaired or left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoding {
    /// Bytes that were not UTF-8, replaced by U+FFFD.
    pub invalid_bytes: u64,
    /// NUL bytes, taken as line ends.
    pub nul_bytes: u64,
    /// Lines of the decoded text holding a replacement or ended by NUL bytes.
    pub lines: u64,
    /// Bytes before the tail that was read (the log was longer than the cap), the cut line
    /// included.
    pub skipped: u64,
    /// The read cap, for the note.
    pub cap: u64,
}

impl Decoding {
    /// One note per thing repaired or left out; none for a clean log.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.invalid_bytes > 0 || self.nul_bytes > 0 {
            let mut what = Vec::new();
            if self.invalid_bytes > 0 {
                what.push(format!(
                    "{} byte(s) of invalid utf-8 replaced with U+FFFD",
                    self.invalid_bytes
                ));
            }
            if self.nul_bytes > 0 {
                what.push(format!("{} nul byte(s) taken as line ends", self.nul_bytes));
            }
            notes.push(format!(
                "kernel log decoded lossily: {} on {} line(s); the other lines were read as written",
                what.join(" and "),
                self.lines
            ));
        }
        if self.skipped > 0 {
            notes.push(format!(
                "kernel log larger than the {} MiB read cap: its oldest {} byte(s) skipped, the newest events read",
                self.cap >> 20,
                self.skipped
            ));
        }
        notes
    }
}

/// Decode a log's tail: lossy UTF-8, NUL runs as line ends, the cut first line dropped.
pub fn decode(tail: Tail, cap: u64) -> (String, Decoding) {
    let mut decoding = Decoding {
        skipped: tail.skipped,
        cap,
        ..Decoding::default()
    };
    let mut bytes: &[u8] = &tail.bytes;
    if !tail.starts_line {
        // The first line began before the tail: what is left of it is not a record.
        let cut = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        decoding.skipped += cut as u64;
        bytes = &bytes[cut..];
    }
    let mut text = String::with_capacity(bytes.len());
    // Whether the line being built holds a repair already (counted once per line).
    let mut line_repaired = false;
    for chunk in bytes.utf8_chunks() {
        let mut valid = chunk.valid();
        while let Some(nul) = valid.find('\0') {
            push_valid(&mut text, &valid[..nul], &mut line_repaired);
            let run = valid[nul..].len() - valid[nul..].trim_start_matches('\0').len();
            decoding.nul_bytes += run as u64;
            repaired(&mut line_repaired, &mut decoding);
            // A run of NULs ends the line it interrupts; at a line's start it is dropped.
            if !(text.is_empty() || text.ends_with('\n')) {
                text.push('\n');
            }
            line_repaired = false;
            valid = &valid[nul + run..];
        }
        push_valid(&mut text, valid, &mut line_repaired);
        if !chunk.invalid().is_empty() {
            decoding.invalid_bytes += chunk.invalid().len() as u64;
            repaired(&mut line_repaired, &mut decoding);
            text.push(char::REPLACEMENT_CHARACTER);
        }
    }
    (text, decoding)
}

/// Append valid text; a newline in it starts a line without repairs.
fn push_valid(text: &mut String, valid: &str, line_repaired: &mut bool) {
    if valid.contains('\n') {
        *line_repaired = false;
    }
    text.push_str(valid);
}

/// Count the line being built as repaired, once.
fn repaired(line_repaired: &mut bool, decoding: &mut Decoding) {
    if !*line_repaired {
        decoding.lines += 1;
        *line_repaired = true;
    }
}

/// `--kernel-log PATH`, read the one way that cannot block: a regular file from its tail
/// (capped), a character device to its current end (`/dev/kmsg`: the records so far,
/// `O_NONBLOCK` read until `EAGAIN`), a pipe or FIFO until its writer closes it, at most `wait`
/// (`--timeout`); decoded as [`decode`] says.
pub fn read_named(path: &Path, wait: Duration) -> Result<KernelLogText, FsError> {
    let shown = path.display().to_string();
    let cap = rooted::DEFAULT_READ_CAP;
    let tail = rooted::read_named_tail(path, &shown, cap, wait)?;
    let (text, decoding) = decode(tail, cap);
    Ok(KernelLogText {
        text,
        origin: shown,
        decoding,
    })
}

/// A kernel log under the root (`dev/kmsg` when `kmsg`, a capture's `kmsg.txt`); `Ok(None)`
/// when it is not there.
pub fn read_rooted(
    fs: &rooted::RootedFs,
    rel: &str,
    kmsg: bool,
) -> Result<Option<KernelLogText>, FsError> {
    match fs.read_log_tail(rel, kmsg) {
        Ok(tail) => {
            let (text, decoding) = decode(tail, rooted::DEFAULT_READ_CAP);
            Ok(Some(KernelLogText {
                text,
                origin: rel.to_string(),
                decoding,
            }))
        }
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> Tail {
        Tail {
            bytes: bytes.to_vec(),
            skipped: 0,
            starts_line: true,
        }
    }

    #[test]
    fn invalid_bytes_and_nul_runs_are_repaired_and_counted_per_line() {
        let log = b"a \xff\xfe b\nclean\n\0\0\0next line\nmid\0dle \xc3\n";
        let (text, d) = decode(whole(log), 100);
        assert_eq!(
            text,
            "a \u{fffd}\u{fffd} b\nclean\nnext line\nmid\ndle \u{fffd}\n"
        );
        assert_eq!((d.invalid_bytes, d.nul_bytes, d.lines), (3, 4, 4));
        assert_eq!(d.notes().len(), 1);
        assert!(
            d.notes()[0].contains("3 byte(s) of invalid utf-8"),
            "{:?}",
            d.notes()
        );
        let (text, d) = decode(whole(b"clean\n"), 100);
        assert_eq!(text, "clean\n");
        assert!(d.notes().is_empty());
    }

    #[test]
    fn a_cut_first_line_is_dropped_and_counted_as_skipped() {
        let tail = Tail {
            bytes: b"end of a line\nwhole\n".to_vec(),
            skipped: 10,
            starts_line: false,
        };
        let (text, d) = decode(tail, 8 << 20);
        assert_eq!(text, "whole\n");
        assert_eq!(d.skipped, 24);
        assert_eq!(
            d.notes(),
            [
                "kernel log larger than the 8 MiB read cap: its oldest 24 byte(s) skipped, the newest events read"
            ]
        );
    }
}
