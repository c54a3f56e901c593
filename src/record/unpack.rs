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
//!
//! The archive's modes are not the capture's: every directory is made 0700 and every file 0600
//! as it is written (a 0777 directory would let any user of the machine change what is judged;
//! a 0000 one would stop a non-root gpudoctor from writing into it, and from removing it).
//! Concatenated gzip members (`cat a.gz b.gz`, pigz, a resumed upload) are read to the end, as
//! gzip(1) reads them.
//!
//! An archive is replayed only as a capture: [`unpack_capture`] refuses one without a valid
//! `.gpudoctor/manifest.json` at its top (issue 30: an archive judged as a live node loaded the
//! `libnvidia-ml.so.1` it carried), saying what to do when the capture sits one level down.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use thiserror::Error;

use crate::process::signals::{self, Interrupted, TempRegistration};
use crate::source::rooted::{RootedFs, Visited};
use crate::source::{CAPTURE_DIR, MANIFEST};

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
    /// Unpacked, but not a capture: the text says what it holds and what to do.
    #[error("{0}")]
    NotACapture(String),
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

/// Unpack `archive` and require a capture at its top: a `.gpudoctor/manifest.json` that
/// [`crate::source::capture_manifest`] accepts. Anything else is refused (and removed) here, so
/// no command ever judges an archive's tree as a live node or loads a library from it.
pub fn unpack_capture(archive: &Path, limits: &UnpackLimits) -> Result<Unpacked, UnpackError> {
    let unpacked = unpack(archive, limits)?;
    let fs = RootedFs::new(unpacked.path());
    if let Err(why) = crate::source::capture_manifest(&fs) {
        return Err(UnpackError::NotACapture(not_a_capture(&fs, &why)));
    }
    // An overlay fixture names a sibling directory as its base; an archive has no siblings,
    // and a base found next to the temporary directory would be whatever lies there.
    match crate::source::overlay::base_of(&fs) {
        Ok(None) => Ok(unpacked),
        Ok(Some(base)) => Err(UnpackError::NotACapture(format!(
            "its {MANIFEST} names a base ({base:?}): it is an overlay fixture, which is only read \
             beside its base; an archive must hold a complete capture (`gpudoctor record --root \
             <the overlay> --out NAME.tar.gz` writes one)"
        ))),
        Err(why) => Err(UnpackError::NotACapture(why)),
    }
}

/// Why an unpacked archive is no capture, and what to do about it.
fn not_a_capture(fs: &RootedFs, why: &str) -> String {
    const MADE_BY: &str = "a .tar.gz is replayed only as a capture written by `gpudoctor record --out NAME.tar.gz`; a live node is read from its root directory, never from an archive";
    let top = fs.read_dir("").unwrap_or_default();
    if top.is_empty() {
        return format!("the archive is empty; {MADE_BY}");
    }
    if top.iter().any(|name| name == CAPTURE_DIR) {
        return format!("its {CAPTURE_DIR}/ is not a complete capture: {why}; re-record it");
    }
    // `tar czf cap.tgz cap/` puts the capture one level down, under `cap/`.
    let nested: Vec<&String> = top
        .iter()
        .filter(|dir| {
            matches!(
                fs.entry_kind(&format!("{dir}/{MANIFEST}")),
                Ok(Visited::File)
            )
        })
        .collect();
    if let [dir] = nested.as_slice() {
        return format!(
            "the capture is packed one level down, under {dir}/ (as `tar czf NAME.tar.gz {dir}/` packs it); pack it from inside the directory, `tar czf NAME.tar.gz -C {dir} .`, or unpack it and pass {dir}/ as --root"
        );
    }
    format!("no {MANIFEST} at its top; {MADE_BY}")
}

/// Unpack `archive` into a new temporary directory within `limits`, whatever it holds (see
/// [`unpack_capture`] for a `--root`).
pub fn unpack(archive: &Path, limits: &UnpackLimits) -> Result<Unpacked, UnpackError> {
    let file = File::open(archive).map_err(UnpackError::Open)?;
    // Watched before the tree exists, so a signal never finds it made and not yet registered.
    signals::ensure_watcher();
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
        inner: flate2::read::MultiGzDecoder::new(io::BufReader::new(file)),
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
    // No group or other bit survives (the explicit 0700/0600 after each entry is the rule; the
    // mask keeps an entry from being more open than that even for the instant between).
    tar.set_mask(0o077);
    tar.set_overwrite(true);
    let mut entries = tar.entries().map_err(read_error)?;
    let mut count: u64 = 0;
    let mut owned_dirs = std::collections::HashSet::new();
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
        if let Some(rel) = entry.path().ok().and_then(|p| inside_path(&p)) {
            let write_error = |source| UnpackError::Write {
                path: dir.join(&path),
                source,
            };
            own_mode(&dir.join(&rel), kind.is_dir()).map_err(write_error)?;
            // Directories tar made on the way (no entry of their own) got the umask's mode.
            for parent in rel.ancestors().skip(1) {
                if !parent.as_os_str().is_empty() && owned_dirs.insert(parent.to_path_buf()) {
                    own_mode(&dir.join(parent), true).map_err(write_error)?;
                }
            }
        }
    }
    Ok(())
}

/// Where `tar` put an entry, relative to the directory: its normal components, as
/// `Entry::unpack_in` takes them (a leading `/` and `.` skipped); `None` for `..` (refused
/// there already).
fn inside_path(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut rel = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(name) => rel.push(name),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => return None,
        }
    }
    Some(rel)
}

/// Make what an entry wrote its owner's alone: 0700 for a directory, 0600 for a file. A
/// symlink is left as it is (its mode means nothing, and chmod would follow it).
fn own_mode(path: &Path, dir: bool) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    let mode = match (dir, meta.file_type()) {
        (true, t) if t.is_dir() => 0o700,
        (false, t) if t.is_file() => 0o600,
        _ => return Ok(()),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
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
