//! Readers shared by the rooted reader and the files a user names outside any root
//! (`--kernel-log`, the run record beside an `--nccl-log`): capped reads, record devices read to
//! their current end, pipes read with a deadline. None of them can block past its bound. A log
//! (the kernel log) is read from its tail instead: its newest bytes up to the cap, the rest
//! skipped and counted ([`Tail`]), never refused for being long.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::FsError;

/// What a read of a log kept: every byte up to the cap ([`Keep::All`], more is an error), or
/// its newest bytes ([`Keep::Tail`]): the last `cap` of them, and how many came before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    pub bytes: Vec<u8>,
    /// Bytes before `bytes` that were read (or seeked over) and not kept.
    pub skipped: u64,
    /// `bytes` starts a line: nothing was skipped, or the byte before it was a newline. When
    /// not, the first line of `bytes` is the end of a line cut in two.
    pub starts_line: bool,
}

/// How much of a stream a read keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// At most the cap; more is [`FsError::TooLarge`], never a silent truncation.
    All,
    /// The newest `cap` bytes (a kernel log, whose newest events matter most).
    Tail,
}

/// Bytes of a stream as they arrive, bounded: with [`Keep::Tail`] the oldest are dropped once
/// twice the cap is held (so memory stays at two caps, however long the stream).
struct Window<'a> {
    bytes: Vec<u8>,
    dropped: u64,
    cap: u64,
    keep: Keep,
    shown: &'a str,
}

impl<'a> Window<'a> {
    fn new(shown: &'a str, cap: u64, keep: Keep) -> Self {
        Window {
            bytes: Vec::new(),
            dropped: 0,
            cap,
            keep,
            shown,
        }
    }

    fn push(&mut self, chunk: &[u8]) -> Result<(), FsError> {
        self.bytes.extend_from_slice(chunk);
        let held = self.bytes.len() as u64;
        match self.keep {
            Keep::All if held > self.cap => Err(FsError::TooLarge {
                path: self.shown.into(),
                cap: self.cap,
            }),
            // One byte more than the cap is kept: it says whether the tail starts a line.
            Keep::Tail if held > 2 * (self.cap + 1) => {
                let excess = (held - (self.cap + 1)) as usize;
                self.bytes.drain(..excess);
                self.dropped += excess as u64;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn len(&self) -> usize {
        self.bytes.len()
    }

    fn finish(mut self) -> Tail {
        let held = self.bytes.len() as u64;
        if held <= self.cap {
            return Tail {
                starts_line: self.dropped == 0,
                bytes: self.bytes,
                skipped: self.dropped,
            };
        }
        let excess = (held - self.cap) as usize;
        let starts_line = self.bytes[excess - 1] == b'\n';
        self.bytes.drain(..excess);
        Tail {
            bytes: self.bytes,
            skipped: self.dropped + excess as u64,
            starts_line,
        }
    }
}

/// Read a non-blocking record device or pipe to its current end: `EAGAIN` ends the read, as does
/// EOF. Lossy UTF-8, at most `cap` bytes.
pub(super) fn read_records(file: &mut File, rel: &str, cap: u64) -> Result<String, FsError> {
    let tail = read_records_kept(file, rel, cap, Keep::All)?;
    Ok(String::from_utf8_lossy(&tail.bytes).into_owned())
}

/// [`read_records`] as bytes, keeping what `keep` says.
pub(super) fn read_records_kept(
    file: &mut File,
    rel: &str,
    cap: u64,
    keep: Keep,
) -> Result<Tail, FsError> {
    let mut window = Window::new(rel, cap, keep);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => window.push(&buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            // EPIPE: records were overwritten while reading; the next read continues.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FsError::from_io(rel, &e)),
        }
    }
    Ok(window.finish())
}

/// The last `cap` bytes of a regular file of `len` bytes (as `fstat` stated it): a seek past
/// the rest, never a read of it. One byte before the tail is read too, to tell whether the
/// tail starts a line.
pub(super) fn read_file_tail(
    file: &mut File,
    rel: &str,
    cap: u64,
    len: u64,
) -> Result<Tail, FsError> {
    use std::io::{Seek, SeekFrom};
    if len <= cap {
        // A file that grew since `fstat` keeps its newest bytes all the same.
        let mut window = Window::new(rel, cap, Keep::Tail);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => window.push(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FsError::from_io(rel, &e)),
            }
        }
        return Ok(window.finish());
    }
    let from = len - cap - 1;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| FsError::from_io(rel, &e))?;
    let mut bytes = Vec::with_capacity(cap as usize + 1);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::from_io(rel, &e))?;
    let Some((before, kept)) = bytes.split_first() else {
        // Truncated since `fstat`: nothing there any more.
        return Ok(Tail {
            bytes: Vec::new(),
            skipped: 0,
            starts_line: true,
        });
    };
    Ok(Tail {
        starts_line: *before == b'\n',
        bytes: kept.to_vec(),
        skipped: from + 1,
    })
}

/// A regular file outside any root (a side file the user did not name, like the run record
/// beside an `--nccl-log`), as text, at most `cap` bytes. Anything else — a FIFO, a device, a
/// directory — is refused without being opened: its type is looked at through an `O_PATH`
/// descriptor first, and only a regular file is then opened, by reopening that descriptor
/// (`read.rs` explains why).
pub fn read_regular_file(path: &Path, shown: &str, cap: u64) -> Result<String, FsError> {
    use std::os::fd::AsFd;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .map_err(|e| FsError::from_io(shown, &e))?;
    let checked = super::fd::fstat(opened.as_fd()).map_err(|e| FsError::from_io(shown, &e))?;
    if !super::fd::is_file(&checked) {
        return Err(FsError::NotAFile {
            path: shown.into(),
            kind: super::fd::kind_name(&checked).into(),
        });
    }
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    let mut file = match super::fd::reopen(opened.as_fd(), flags) {
        Some(reopened) => File::from(reopened.map_err(|e| FsError::from_io(shown, &e))?),
        None => OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|e| FsError::from_io(shown, &e))?,
    };
    let meta = file.metadata().map_err(|e| FsError::from_io(shown, &e))?;
    {
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() || (meta.dev(), meta.ino()) != (checked.st_dev, checked.st_ino) {
            return Err(FsError::Io {
                path: shown.into(),
                message: "replaced while it was being opened; run again".into(),
            });
        }
    }
    read_capped(&mut file, shown, cap, meta.len())
}

/// Read a file the user named on the command line, outside any root (`--kernel-log`), without
/// ever blocking past `wait`:
/// - a regular file: to its end, as UTF-8 text without NUL bytes, at most `cap` bytes;
/// - a character device (`--kernel-log /dev/kmsg`): its records to the current end;
/// - a pipe or FIFO (`--kernel-log <(dmesg)`): until the writer closes it; a writer that never
///   comes or never finishes is an error after `wait`, not a hang.
///
/// The open itself is `O_NONBLOCK`: a plain `open` of a FIFO waits for a writer forever.
/// `shown` names the file in errors.
pub fn read_named_file(
    path: &Path,
    shown: &str,
    cap: u64,
    wait: std::time::Duration,
) -> Result<String, FsError> {
    // `O_NOCTTY`: a terminal named here never becomes gpudoctor's controlling terminal.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| FsError::from_io(shown, &e))?;
    let meta = file.metadata().map_err(|e| FsError::from_io(shown, &e))?;
    let kind = meta.file_type();
    if meta.is_file() {
        return read_capped(&mut file, shown, cap, meta.len());
    }
    if kind.is_char_device() {
        return read_records(&mut file, shown, cap);
    }
    if !kind.is_fifo() {
        return Err(FsError::NotAFile {
            path: shown.into(),
            kind: if meta.is_dir() {
                "a directory"
            } else {
                "a socket or block device"
            }
            .into(),
        });
    }
    read_pipe(&mut file, shown, cap, wait)
}

/// [`read_named_file`] for a log the user names (`--kernel-log`): its newest `cap` bytes,
/// whatever it is (a regular file is seeked to them, a device or a pipe read through), as bytes
/// — the caller decodes them, invalid UTF-8 and NUL bytes included.
pub fn read_named_tail(
    path: &Path,
    shown: &str,
    cap: u64,
    wait: std::time::Duration,
) -> Result<Tail, FsError> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| FsError::from_io(shown, &e))?;
    let meta = file.metadata().map_err(|e| FsError::from_io(shown, &e))?;
    let kind = meta.file_type();
    if meta.is_file() {
        return read_file_tail(&mut file, shown, cap, meta.len());
    }
    if kind.is_char_device() {
        return read_records_kept(&mut file, shown, cap, Keep::Tail);
    }
    if !kind.is_fifo() {
        return Err(FsError::NotAFile {
            path: shown.into(),
            kind: if meta.is_dir() {
                "a directory"
            } else {
                "a socket or block device"
            }
            .into(),
        });
    }
    read_pipe_kept(&mut file, shown, cap, wait, Keep::Tail)
}

/// A pipe or FIFO opened `O_NONBLOCK`, read until EOF after its writer closed it, at most `wait`.
/// Before any writer has opened a FIFO, `read` returns EOF at once although a writer may still
/// come, so reads happen only when `poll` says there is data or a hang-up.
fn read_pipe(
    file: &mut File,
    shown: &str,
    cap: u64,
    wait: std::time::Duration,
) -> Result<String, FsError> {
    let bytes = read_pipe_kept(file, shown, cap, wait, Keep::All)?.bytes;
    if bytes.contains(&0) {
        return Err(FsError::NotText { path: shown.into() });
    }
    String::from_utf8(bytes).map_err(|_| FsError::NotText { path: shown.into() })
}

/// [`read_pipe`] as bytes, keeping what `keep` says.
fn read_pipe_kept(
    file: &mut File,
    shown: &str,
    cap: u64,
    wait: std::time::Duration,
    keep: Keep,
) -> Result<Tail, FsError> {
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + wait;
    let mut window = Window::new(shown, cap, keep);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(FsError::Io {
                path: shown.into(),
                message: format!(
                    "a pipe whose writer did not finish within {} s (read {} bytes)",
                    wait.as_secs(),
                    window.len()
                ),
            });
        }
        let mut poll = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for a descriptor this function holds open.
        let ready = unsafe { libc::poll(&mut poll, 1, millis) };
        if ready < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(FsError::from_io(shown, &err));
        }
        if ready == 0 {
            continue; // the deadline check above ends it
        }
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => window.push(&buf[..n])?,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(FsError::from_io(shown, &e)),
        }
    }
    Ok(window.finish())
}

/// Read at most `cap` bytes; more is an error rather than a silent truncation.
pub fn read_capped_bytes(
    file: &mut File,
    rel: &str,
    cap: u64,
    size: u64,
) -> Result<Vec<u8>, FsError> {
    // `Take` hides the file's size from `read_to_end`, which would then grow the buffer by
    // doubling (a copy and fresh pages each time): start at the size the file states.
    let mut bytes = Vec::with_capacity(size.min(cap) as usize + 1);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::from_io(rel, &e))?;
    if bytes.len() as u64 > cap {
        return Err(FsError::TooLarge {
            path: rel.into(),
            cap,
        });
    }
    Ok(bytes)
}

/// [`read_capped_bytes`] as UTF-8 text without NUL bytes.
pub fn read_capped(file: &mut File, rel: &str, cap: u64, size: u64) -> Result<String, FsError> {
    let bytes = read_capped_bytes(file, rel, cap, size)?;
    if bytes.contains(&0) {
        return Err(FsError::NotText { path: rel.into() });
    }
    String::from_utf8(bytes).map_err(|_| FsError::NotText { path: rel.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream longer than twice the cap keeps its newest `cap` bytes, counts the rest, and
    /// knows whether they start a line; within the cap, or with `Keep::All`, it keeps all or
    /// refuses.
    #[test]
    fn a_window_keeps_the_newest_bytes_of_a_long_stream() {
        let lines: Vec<u8> = (0..100)
            .flat_map(|i| format!("l{i:02}\n").into_bytes())
            .collect();
        let mut w = Window::new("log", 10, Keep::Tail);
        for chunk in lines.chunks(7) {
            w.push(chunk).unwrap();
        }
        let tail = w.finish();
        assert_eq!(tail.bytes, b"7\nl98\nl99\n");
        assert_eq!(tail.skipped, 390);
        assert!(!tail.starts_line);
        let mut w = Window::new("log", 6, Keep::Tail);
        w.push(b"ab\ncdefg\n").unwrap();
        let tail = w.finish();
        assert_eq!(
            (tail.bytes.as_slice(), tail.skipped, tail.starts_line),
            (&b"cdefg\n"[..], 3, true)
        );
        let mut w = Window::new("log", 100, Keep::Tail);
        w.push(b"short\n").unwrap();
        assert_eq!(w.finish().skipped, 0);
        let mut w = Window::new("log", 4, Keep::All);
        assert!(matches!(
            w.push(b"12345"),
            Err(FsError::TooLarge { cap: 4, .. })
        ));
    }
}
