//! Unpacking a `.tar.gz` capture given as `--root`, within limits checked while streaming: total
//! bytes of the uncompressed archive, number of entries, size of one file. A 4 MB archive of
//! zeros that inflates to 4 GB, or 2 MB that hold 300 000 empty files, stops at the first entry
//! past a limit, with nothing left on disk: the directory is removed (and registered, so that
//! SIGINT/SIGTERM/SIGHUP remove it too, process/signals.rs).
//!
//! A capture holds only regular files, directories and symlinks (`record` writes nothing else):
//! any other entry (hard link, device, FIFO, sparse file) and any path that would land outside
//! the directory is refused, not skipped. Symlinks are created as they are; the rooted reader
//! refuses those that leave the root when the capture is read.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use thiserror::Error;

use crate::process::signals::{self, Interrupted, TempRegistration};

/// Limits of [`unpack`]; `check`/`topo` flags raise them (docs/security.md, "Unpacking captures").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Uncompressed archive bytes (headers and data).
    pub max_bytes: u64,
    pub max_entries: u64,
    /// One file's size.
    pub max_file_bytes: u64,
}

/// A recorded node is a few MiB in a few thousand entries (the healthy H100 fixture: 4000
/// entries, 1.5 MiB; the synthetic 2000-function node: 48 000 entries, 1.2 MiB of content). No
/// file of a capture is larger than the read cap (8 MiB) or an NCCL transcript (2 x 4 MiB).
pub const DEFAULT_LIMITS: UnpackLimits = UnpackLimits {
    max_bytes: 1 << 30,
    max_entries: 200_000,
    max_file_bytes: 64 << 20,
};

impl Default for UnpackLimits {
    fn default() -> Self {
        DEFAULT_LIMITS
    }
}

/// Extension headers (GNU long names, PAX records) the tar reader holds in memory between two
/// entries: real ones are a few hundred bytes (`PATH_MAX` is 4096).
const MAX_METADATA_BYTES: u64 = 1 << 20;

#[derive(Debug, Error)]
pub enum UnpackError {
    #[error("cannot open: {0}")]
    Open(io::Error),
    #[error(
        "more than {limit} bytes once uncompressed; refused (a capture is a few MiB; raise the limit with {flag} if this one really is that large)"
    )]
    TooManyBytes { limit: u64, flag: &'static str },
    #[error(
        "more than {limit} entries; refused (a capture has a few thousand; raise the limit with {flag} if this one really has that many)"
    )]
    TooManyEntries { limit: u64, flag: &'static str },
    #[error(
        "{path}: {size} bytes, more than the {limit}-byte limit for one file; refused (raise it with {flag})"
    )]
    FileTooLarge {
        path: String,
        size: u64,
        limit: u64,
        flag: &'static str,
    },
    #[error(
        "more than {MAX_METADATA_BYTES} bytes of tar extension headers before one entry; refused"
    )]
    MetadataTooLarge,
    #[error("{path}: {why}; a capture holds only files, directories and symlinks under its root")]
    BadEntry { path: String, why: String },
    #[error("not a readable .tar.gz: {0}")]
    Corrupt(io::Error),
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Interrupted(#[from] Interrupted),
}

pub const FLAG_BYTES: &str = "--unpack-max-bytes";
pub const FLAG_ENTRIES: &str = "--unpack-max-entries";
pub const FLAG_FILE: &str = "--unpack-max-file-bytes";

/// An unpacked capture: removed when dropped.
#[derive(Debug)]
pub struct Unpacked {
    // Field order: unregistered after the directory is gone.
    dir: tempfile::TempDir,
    _registration: TempRegistration,
}

impl Unpacked {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Which limit a read from the archive hit.
#[derive(Debug, Clone, Copy)]
enum Hit {
    Bytes,
    Metadata,
}

impl std::fmt::Display for Hit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unpack limit: {self:?}")
    }
}

impl std::error::Error for Hit {}

/// The uncompressed archive, counted as the tar reader pulls it: everything against the total,
/// and what is read between two entries (extension headers) against [`MAX_METADATA_BYTES`].
struct Counted<R> {
    inner: R,
    total: Rc<Cell<u64>>,
    since_entry: Rc<Cell<u64>>,
    /// Set while the tar reader looks for the next entry (headers, not data).
    in_headers: Rc<Cell<bool>>,
    max_total: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Never more than one byte past a limit: the limit is seen on the read that crosses it.
        let room = self.max_total.saturating_sub(self.total.get()) + 1;
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.total.set(self.total.get() + n as u64);
        self.since_entry.set(self.since_entry.get() + n as u64);
        if self.total.get() > self.max_total {
            return Err(io::Error::other(Hit::Bytes));
        }
        if self.in_headers.get() && self.since_entry.get() > MAX_METADATA_BYTES {
            return Err(io::Error::other(Hit::Metadata));
        }
        Ok(n)
    }
}

/// The limit behind an error, however the tar reader wrapped it ("failed to unpack `x`").
fn hit(err: &io::Error) -> Option<Hit> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = err.get_ref().map(|e| e as _);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<Hit>() {
            return Some(*found);
        }
        next = match e.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as _),
            None => e.source(),
        };
    }
    None
}

/// Unpack `archive` into a new temporary directory within `limits`.
pub fn unpack(archive: &Path, limits: &UnpackLimits) -> Result<Unpacked, UnpackError> {
    let file = File::open(archive).map_err(UnpackError::Open)?;
    let dir = tempfile::Builder::new()
        .prefix(".gpudoctor-unpack-")
        .tempdir()
        .map_err(|source| UnpackError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let unpacked = Unpacked {
        _registration: signals::register_temp(dir.path()),
        dir,
    };
    // On any error `unpacked` is dropped: the directory and all written so far go with it.
    fill(file, unpacked.path(), limits)?;
    Ok(unpacked)
}

fn fill(file: File, dir: &Path, limits: &UnpackLimits) -> Result<(), UnpackError> {
    let total = Rc::new(Cell::new(0));
    let since_entry = Rc::new(Cell::new(0));
    let in_headers = Rc::new(Cell::new(false));
    let counted = Counted {
        inner: flate2::read::GzDecoder::new(io::BufReader::new(file)),
        total: total.clone(),
        since_entry: since_entry.clone(),
        in_headers: in_headers.clone(),
        max_total: limits.max_bytes,
    };
    let read_error = |err: io::Error| match hit(&err) {
        Some(Hit::Bytes) => UnpackError::TooManyBytes {
            limit: limits.max_bytes,
            flag: FLAG_BYTES,
        },
        Some(Hit::Metadata) => UnpackError::MetadataTooLarge,
        None => UnpackError::Corrupt(err),
    };
    let mut tar = tar::Archive::new(counted);
    tar.set_preserve_permissions(false);
    tar.set_overwrite(true);
    let mut entries = tar.entries().map_err(read_error)?;
    let mut count: u64 = 0;
    loop {
        since_entry.set(0);
        in_headers.set(true);
        let next = entries.next();
        in_headers.set(false);
        let Some(entry) = next else {
            break;
        };
        let mut entry = entry.map_err(read_error)?;
        count += 1;
        if count > limits.max_entries {
            return Err(UnpackError::TooManyEntries {
                limit: limits.max_entries,
                flag: FLAG_ENTRIES,
            });
        }
        let path = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "(unreadable name)".to_string());
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir() || kind.is_symlink()) {
            return Err(UnpackError::BadEntry {
                path,
                why: format!("a {} entry", kind_name(kind)),
            });
        }
        let size = entry.size();
        if size > limits.max_file_bytes {
            return Err(UnpackError::FileTooLarge {
                path,
                size,
                limit: limits.max_file_bytes,
                flag: FLAG_FILE,
            });
        }
        let _writing = signals::hold_writes()?;
        let inside = entry.unpack_in(dir).map_err(|err| match hit(&err) {
            Some(_) => read_error(err),
            None => UnpackError::Write {
                path: dir.join(&path),
                source: err,
            },
        })?;
        if !inside {
            return Err(UnpackError::BadEntry {
                path,
                why: "the path leaves the capture's directory".into(),
            });
        }
    }
    Ok(())
}

fn kind_name(kind: tar::EntryType) -> &'static str {
    use tar::EntryType;
    match kind {
        EntryType::Link => "hard link",
        EntryType::Char => "character device",
        EntryType::Block => "block device",
        EntryType::Fifo => "fifo",
        EntryType::GNUSparse => "sparse file",
        _ => "special",
    }
}
