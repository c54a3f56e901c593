//! Where `record --out` writes, and how, so that a capture is complete or absent:
//! - before the run, the name itself: a directory or a `.tar.gz`/`.tgz`, never another archive
//!   ending, never the root being recorded or above it;
//! - before the run, what `--out` holds is looked at without following it (a symlink is
//!   refused, `--force` or not); `--force` replaces only an earlier capture (a directory with a
//!   valid `.gpudoctor/manifest.json`, or a `.tar.gz` holding one), never another non-empty
//!   directory or file;
//! - still before the run, the capture's temporary sibling is created next to `--out`
//!   (`mkdir`, which fails if present; mode 0700) and a probe file written and synced in it: a
//!   read-only, missing or full `--out` is a usage error then, not after minutes of probing;
//! - the capture is built in that sibling (a `.tar.gz` is packed into a temporary file beside
//!   it), manifest last, and renamed into place at the end: `renameat2(RENAME_NOREPLACE)`, so a
//!   file, directory or symlink that appeared at `--out` meanwhile (another record, a planted
//!   link) makes this record fail instead of writing through it; an earlier capture is swapped
//!   out with `RENAME_EXCHANGE` and removed only after it is checked again to be a capture;
//! - on any failure, and on SIGINT/SIGTERM/SIGHUP (process/signals.rs), the temporaries go.

use std::ffi::{CString, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::process::signals::{self, TempRegistration};
use crate::record::RecordError;
use crate::source::{self, RootedFs};

/// What `--out` holds before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    Nothing,
    EmptyDir,
    /// An earlier capture (directory or archive), which `--force` may replace.
    Capture,
}

/// The place a capture is built and then published.
#[derive(Debug)]
pub struct Output {
    out: PathBuf,
    parent: PathBuf,
    packed: bool,
    existing: Existing,
    /// The capture's tree, built here (a temporary sibling of `--out`).
    tree: PathBuf,
    _tree_registration: TempRegistration,
    /// What is at `tree` is ours to remove when this is dropped: the unpublished capture, the
    /// staging tree of an archive, or the earlier capture swapped out by `--force`.
    remove_tree: bool,
}

/// File name endings that promise an archive or a compressed file `record` does not write: an
/// `--out` ending in one would otherwise silently become a directory of that name (issue 19).
const OTHER_ARCHIVES: &[&str] = &[
    "zip", "tar", "gz", "bz2", "xz", "zst", "lz4", "lzma", "7z", "rar", "tbz", "tbz2", "txz",
    "tzst",
];

/// The archive ending of an `--out` that is neither a directory name nor `.tar.gz`/`.tgz`.
fn other_archive(out: &Path) -> Option<String> {
    if is_packed(out) {
        return None;
    }
    let ext = out.extension()?.to_str()?.to_ascii_lowercase();
    OTHER_ARCHIVES.contains(&ext.as_str()).then_some(ext)
}

/// Is `out` a packed capture (`.tar.gz` / `.tgz`)?
pub fn is_packed(path: &Path) -> bool {
    let name = path.to_string_lossy();
    name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// `--out` must not be the root being recorded, or above it. What `--out` holds is judged by
/// `out.rs`.
pub(super) fn check_output(options: &super::RecordOptions) -> Result<(), RecordError> {
    let out = &options.out;
    if let Some(ext) = other_archive(out) {
        return Err(RecordError::OutputNotACapture {
            path: out.clone(),
            why: format!(
                "record writes a directory or a .tar.gz (.tgz), and a name ending in .{ext} is neither; end it in .tar.gz, or name a directory"
            ),
        });
    }
    let Ok(out_real) = out.canonicalize() else {
        return Ok(());
    };
    // The root read, and the packed capture it was unpacked from.
    for root in std::iter::once(&options.root).chain(&options.root_given) {
        if let Ok(root_real) = root.canonicalize()
            && (out_real == root_real || root_real.starts_with(&out_real))
        {
            return Err(RecordError::OutputIsRoot(out.clone()));
        }
    }
    Ok(())
}

fn output_error(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Output {
        path: path.to_path_buf(),
        source,
    }
}

impl Output {
    /// Look at `--out` and create the temporary sibling (see the module doc).
    pub fn prepare(out: &Path, force: bool) -> Result<Output, RecordError> {
        let packed = is_packed(out);
        let existing = classify(out, packed)?;
        if existing == Existing::Capture && !force {
            return Err(RecordError::OutputExists(out.to_path_buf()));
        }
        let name = out
            .file_name()
            .ok_or_else(|| RecordError::OutputNotACapture {
                path: out.to_path_buf(),
                why: "does not name a file or directory".into(),
            })?
            .to_os_string();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Like `mkdir -p` for the directories above --out (they are not part of the capture).
        fs::create_dir_all(&parent).map_err(output_error(&parent))?;
        let mut prefix = OsString::from(".");
        prefix.push(&name);
        prefix.push(".gpudoctor-");
        // Watched before the tree exists, so a signal never finds it made and not registered.
        signals::ensure_watcher();
        let tree = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir_in(&parent)
            .map_err(output_error(out))?
            .keep();
        let output = Output {
            out: out.to_path_buf(),
            parent,
            packed,
            existing,
            _tree_registration: signals::register_temp(&tree),
            tree,
            remove_tree: true,
        };
        // A probe file, written and synced: a full file system says so now.
        let probe = output.tree.join(".write-test");
        let written = fs::File::create(&probe).and_then(|mut f| {
            f.write_all(&[0u8; 4096])?;
            f.sync_all()
        });
        let _ = fs::remove_file(&probe);
        written.map_err(output_error(out))?;
        Ok(output)
    }

    /// The directory the capture's tree is written into.
    pub fn tree(&self) -> &Path {
        &self.tree
    }

    /// Move the finished capture into place (see the module doc).
    pub fn publish(mut self) -> Result<(), RecordError> {
        if self.packed {
            self.publish_archive()
        } else {
            self.publish_dir()
        }
    }

    fn publish_dir(&mut self) -> Result<(), RecordError> {
        match self.existing {
            Existing::Capture => self.replace_capture_dir(),
            Existing::EmptyDir => {
                // rename(2) replaces an empty directory and fails on anything else.
                rename(&self.tree, &self.out, 0).map_err(|e| self.changed_or(e))?;
                self.remove_tree = false;
                Ok(())
            }
            Existing::Nothing => {
                rename(&self.tree, &self.out, libc::RENAME_NOREPLACE)
                    .map_err(|e| self.changed_or(e))?;
                self.remove_tree = false;
                Ok(())
            }
        }
    }

    /// `--force` over an earlier capture: swap the new one in atomically (the old one is then
    /// at `tree`, removed on drop), after checking that what was swapped out is a capture.
    fn replace_capture_dir(&mut self) -> Result<(), RecordError> {
        match rename(&self.tree, &self.out, libc::RENAME_EXCHANGE) {
            Ok(()) => {
                if !is_capture_dir(&self.tree) {
                    // Something else took the old capture's place since it was looked at:
                    // put it back and leave it alone.
                    let _ = rename(&self.tree, &self.out, libc::RENAME_EXCHANGE);
                    return Err(RecordError::OutputChanged(self.out.clone()));
                }
                Ok(())
            }
            // No RENAME_EXCHANGE on this file system: move the old one aside, then ours in.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let mut aside = self.tree.clone().into_os_string();
                aside.push(".old");
                let aside = PathBuf::from(aside);
                fs::rename(&self.out, &aside).map_err(|e| self.changed_or(e))?;
                if !is_capture_dir(&aside) {
                    let _ = fs::rename(&aside, &self.out);
                    return Err(RecordError::OutputChanged(self.out.clone()));
                }
                rename(&self.tree, &self.out, libc::RENAME_NOREPLACE)
                    .map_err(|e| self.changed_or(e))?;
                self.remove_tree = false;
                let _ = fs::remove_dir_all(&aside);
                Ok(())
            }
            Err(e) => Err(self.changed_or(e)),
        }
    }

    fn publish_archive(&mut self) -> Result<(), RecordError> {
        let mut prefix = OsString::from(".");
        prefix.push(self.out.file_name().unwrap_or_default());
        prefix.push(".gpudoctor-");
        signals::ensure_watcher();
        let mut file = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .tempfile_in(&self.parent)
            .map_err(output_error(&self.out))?;
        let _registration = signals::register_temp(file.path());
        super::pack(&self.tree, file.as_file_mut()).map_err(output_error(&self.out))?;
        file.as_file().sync_all().map_err(output_error(&self.out))?;
        use std::os::unix::fs::PermissionsExt;
        file.as_file()
            .set_permissions(fs::Permissions::from_mode(0o644))
            .map_err(output_error(&self.out))?;
        let flags = match self.existing {
            Existing::Capture => 0,
            Existing::Nothing | Existing::EmptyDir => libc::RENAME_NOREPLACE,
        };
        rename(file.path(), &self.out, flags).map_err(|e| self.changed_or(e))?;
        // Published: the temporary name no longer exists, nothing to remove.
        let _ = file.into_temp_path().keep();
        Ok(())
    }

    fn changed_or(&self, err: io::Error) -> RecordError {
        match err.raw_os_error() {
            Some(libc::EEXIST | libc::ENOTEMPTY | libc::ENOTDIR | libc::EISDIR) => {
                RecordError::OutputChanged(self.out.clone())
            }
            _ => RecordError::Output {
                path: self.out.clone(),
                source: err,
            },
        }
    }
}

impl Drop for Output {
    /// Not published (an error, an early return): the tree goes. Published with `--force`: the
    /// earlier capture, swapped out into the tree's name, goes.
    fn drop(&mut self) {
        if self.remove_tree {
            let _ = fs::remove_dir_all(&self.tree);
        }
    }
}

/// What is at `out`, not followed; errors for what `record` must never replace.
fn classify(out: &Path, packed: bool) -> Result<Existing, RecordError> {
    let meta = match fs::symlink_metadata(out) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Existing::Nothing),
        Err(err) => return Err(output_error(out)(err)),
    };
    let refuse = |why: &str| {
        Err(RecordError::OutputNotACapture {
            path: out.to_path_buf(),
            why: why.to_string(),
        })
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return refuse("is a symlink; a capture is never written through one");
    }
    if kind.is_dir() {
        if packed {
            return refuse("is a directory, not a .tar.gz capture");
        }
        let empty = fs::read_dir(out)
            .map(|mut d| d.next().is_none())
            .map_err(output_error(out))?;
        if empty {
            return Ok(Existing::EmptyDir);
        }
        if is_capture_dir(out) {
            return Ok(Existing::Capture);
        }
        return refuse(
            "exists and is not a gpudoctor capture (no valid .gpudoctor/manifest.json); --force replaces only an earlier capture",
        );
    }
    if kind.is_file() && packed {
        if is_capture_archive(out) {
            return Ok(Existing::Capture);
        }
        return refuse(
            "exists and is not a gpudoctor capture (no .gpudoctor/manifest.json inside); --force replaces only an earlier capture",
        );
    }
    refuse("exists and is not a directory")
}

fn is_capture_dir(dir: &Path) -> bool {
    source::capture_manifest(&RootedFs::new(dir)).is_ok()
}

/// Does this `.tar.gz` hold a capture manifest? Read within the unpack limits, to a temporary
/// directory that is removed at once.
fn is_capture_archive(path: &Path) -> bool {
    super::unpack::unpack(path, &super::unpack::DEFAULT_LIMITS)
        .is_ok_and(|dir| is_capture_dir(dir.path()))
}

/// `renameat2(2)` with `flags`. Where the file system does not support the flag (`EINVAL`),
/// `RENAME_NOREPLACE` falls back to `link` + `unlink` for a file (link(2) fails if the name
/// exists) and to a plain rename for a directory (which fails over a non-empty one).
fn rename(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    let (from_c, to_c) = (c(from)?, c(to)?);
    // SAFETY: renameat2 with two NUL-terminated paths relative to the working directory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from_c.as_ptr(),
            libc::AT_FDCWD,
            to_c.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) || flags == 0 {
        return Err(err);
    }
    if flags == libc::RENAME_NOREPLACE {
        if fs::symlink_metadata(from)?.is_dir() {
            return fs::rename(from, to);
        }
        fs::hard_link(from, to)?;
        return fs::remove_file(from);
    }
    Err(err)
}
