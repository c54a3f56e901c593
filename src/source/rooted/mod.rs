//! Root-confined file access shared by the live host and replay sources.
//!
//! Every path the checks ask for is root-relative (`sys/bus/pci/devices`). This module resolves
//! it component by component under `--root`, following symlinks itself so that it can refuse the
//! ones that leave the root: an absolute target (unless the root is `/`, where every absolute
//! target is inside it) or a `..` that climbs past the root. A fixture that links to `/etc/passwd`
//! must never make the test machine's own files part of a diagnosis (DESIGN.md, "Sources").
//!
//! It also bounds everything a hostile or broken tree can do to a reader:
//! - symlink chains are capped at [`MAX_LINK_HOPS`] (the kernel's own limit is 40, `ELOOP`), so a
//!   `subsystem`-style loop ends in an error, never a hang;
//! - reads are capped in bytes, and only regular files are read: a file's type is looked at
//!   through an `O_PATH` descriptor before it is opened for reading, so a FIFO or a device node
//!   in the tree is never opened at all (`read.rs`);
//! - non-UTF-8 content is an error naming the path, not garbage handed to a parser.
//!
//! Nothing is ever opened by its full path under the root: the root is opened once, and every
//! component is looked up relative to a descriptor of its directory (`fd.rs`), links are read
//! through their own descriptors, and a resolved path is reopened with the kernel refusing any
//! symlink on the way. Another process swapping a directory for a symlink to `/etc` between our
//! look and our open (`renameat2(RENAME_EXCHANGE)` in a loop) then makes the open fail; it never
//! reads outside (tests/root_confinement.rs races it).

mod dir_fds;
mod error;
pub(in crate::source) mod fd;
mod graft;
mod memo;
mod named;
mod read;
mod walk;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use error::FsError;
pub use memo::{OpenCounts, RunReads};
pub use named::{
    Tail, read_capped, read_capped_bytes, read_named_file, read_named_tail, read_regular_file,
};
use walk::Dir;
pub use walk::Resolved;

/// Most symlinks followed while resolving one path (Linux `MAXSYMLINKS` is 40).
pub const MAX_LINK_HOPS: usize = 40;

/// Default cap for one file read. sysfs attributes are at most a page; configs and probe answers
/// are far below this. A larger file is reported, not read.
pub const DEFAULT_READ_CAP: u64 = 8 * 1024 * 1024;

/// A directory tree treated as a machine's `/`.
#[derive(Debug, Clone)]
pub struct RootedFs {
    root: PathBuf,
    /// The root is the real `/`: absolute link targets are then inside it by definition.
    root_is_slash: bool,
    read_cap: u64,
    /// When recording, every path visited and every byte read (see `record.rs`).
    trace: Option<Arc<Mutex<Trace>>>,
    /// Directories already resolved, by the root-relative path asked for ([`RootedFs::resolve`]).
    dirs: Arc<Mutex<foldhash::HashMap<String, Arc<Dir>>>>,
    /// Descriptors of the directories read, by resolved path ([`RootedFs::dir_fd`]).
    dir_fds: Arc<Mutex<dir_fds::DirFds>>,
    /// The root, opened once (`O_PATH`); the errno when it could not be opened.
    root_fd: Arc<OnceLock<Result<Arc<OwnedFd>, i32>>>,
    /// Directories read from elsewhere (an overlay's base, `graft.rs`); usually none.
    grafts: graft::Grafts,
    /// What the run under way read, so that it reads each file once (`memo.rs`).
    memo: Arc<Mutex<memo::Memo>>,
    /// Opens counted by path, when a test asked ([`RootedFs::count_opens`]).
    opens: Arc<OnceLock<OpenCounts>>,
}

/// `rel` without its leading `/` when it is spelt plainly (`a/b/c`: no empty, `.` or `..`
/// component), so that the text itself can key the directory memo.
fn clean(rel: &str) -> Option<&str> {
    let rel = rel.strip_prefix('/').unwrap_or(rel);
    // Byte by byte: asked for every file read, where `split('/')` was a visible cost.
    let plain = |c: &[u8]| !c.is_empty() && c != b"." && c != b"..";
    (!rel.is_empty() && rel.as_bytes().split(|b| *b == b'/').all(plain)).then_some(rel)
}

/// What a recording needs to rebuild the part of the tree the checks saw: each path component
/// visited while resolving (directory, symlink with its target, file), each file's content as
/// read, and each directory listing as returned. Keys are root-relative paths.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub visited: BTreeMap<String, Visited>,
    pub contents: BTreeMap<String, Vec<u8>>,
    pub listings: BTreeMap<String, Vec<String>>,
    /// Paths that could not be read, and why (for the capture's manifest).
    pub failures: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visited {
    Dir,
    File,
    Link(String),
    /// A device node, socket or FIFO: recorded as an empty file.
    Special,
}

impl RootedFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let root_is_slash = root == Path::new("/");
        RootedFs {
            root,
            root_is_slash,
            read_cap: DEFAULT_READ_CAP,
            trace: None,
            dirs: Arc::default(),
            dir_fds: Arc::default(),
            root_fd: Arc::default(),
            grafts: Arc::default(),
            memo: Arc::default(),
            opens: Arc::default(),
        }
    }

    /// The root's descriptor, opened on first use and kept: renaming or replacing the root
    /// directory afterwards changes nothing for this reader.
    fn root_fd(&self) -> io::Result<Arc<OwnedFd>> {
        self.root_fd
            .get_or_init(|| {
                fd::open_root(&self.root)
                    .map(Arc::new)
                    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
            })
            .clone()
            .map_err(io::Error::from_raw_os_error)
    }

    /// A descriptor (`O_PATH`) of the resolved, link-free directory `path`: one kept
    /// (`dir_fds.rs`), or opened beneath the root with no symlink followed. sysfs attributes are
    /// read a directory at a time, so the kernel then looks up one component per file, not the
    /// whole path again (most of a big node's cost).
    ///
    /// `path` is the components joined by `/` (empty for the root), as bytes: a non-UTF-8 name
    /// is its own key, never its lossy spelling.
    fn dir_fd(&self, path: &OsStr) -> io::Result<Arc<OwnedFd>> {
        let root = self.root_fd()?;
        if path.is_empty() {
            return Ok(root);
        }
        let fds = self
            .dir_fds
            .lock()
            .map_err(|_| io::Error::other("directory descriptors poisoned"))?;
        if let Some(found) = fds.get(path) {
            return Ok(found);
        }
        drop(fds);
        self.note_open("dir", || path.to_string_lossy().into_owned());
        if let Some(grafted) = self.grafted_dir(path) {
            let opened = grafted?;
            self.remember_dir_fd(path.to_os_string(), opened.clone());
            return Ok(opened);
        }
        let opened = Arc::new(fd::open_beneath(
            root.as_fd(),
            path,
            libc::O_PATH | libc::O_DIRECTORY,
        )?);
        self.remember_dir_fd(path.to_os_string(), opened.clone());
        Ok(opened)
    }

    /// Keep `fd`, the directory at the resolved path `path` (`dir_fds.rs`).
    fn remember_dir_fd(&self, path: OsString, fd: Arc<OwnedFd>) {
        if let Ok(mut fds) = self.dir_fds.lock() {
            fds.keep(path, fd);
        }
    }

    /// Open the resolved, link-free path `resolved` with `flags`: its directory from
    /// [`RootedFs::dir_fd`], then the last component `O_NOFOLLOW` (a link that appeared since
    /// it was resolved is refused, `ELOOP`). An empty path opens the root itself.
    fn open_resolved(&self, resolved: &Resolved, flags: libc::c_int) -> io::Result<OwnedFd> {
        if !self.grafts.is_empty()
            && let Some(graft) = self.graft_at(resolved.as_os_str())
        {
            return fd::open_one(graft.as_fd(), OsStr::new("."), flags);
        }
        match resolved.split_last() {
            None => fd::open_one(self.root_fd()?.as_fd(), OsStr::new("."), flags),
            Some((last, dir)) => fd::open_one(self.dir_fd(dir)?.as_fd(), last, flags),
        }
    }

    /// Record every access into `trace` from now on. The directory memo and the run's reads
    /// start empty (not shared with clones made before): a traced reader answers a path from
    /// the memo only when its own traced walk put it there, every component of the way noted
    /// then (`walk.rs`, [`RootedFs::resolve`]).
    pub fn with_trace(mut self, trace: Arc<Mutex<Trace>>) -> Self {
        self.trace = Some(trace);
        self.dirs = Arc::default();
        self.memo = Arc::default();
        self
    }

    fn note(&self, f: impl FnOnce(&mut Trace)) {
        if let Some(trace) = &self.trace
            && let Ok(mut trace) = trace.lock()
        {
            f(&mut trace);
        }
    }

    fn note_failure<T>(&self, rel: &str, result: Result<T, FsError>) -> Result<T, FsError> {
        if let Err(err) = &result
            && !err.is_missing()
        {
            let text = err.to_string();
            self.note(|t| {
                t.failures
                    .insert(rel.trim_start_matches('/').to_string(), text);
            });
        }
        result
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root-relative path `rel` really names, all links followed (`sys/devices/pci0000:17/...`).
    pub fn canonical(&self, rel: &str) -> Result<String, FsError> {
        self.resolve(rel, true).map(|r| r.display())
    }

    /// A path on this machine for what `rel` names, every link resolved inside the root: for
    /// the one thing that is not read as a file, a unix socket to connect to. The socket is
    /// opened `O_PATH` beneath the root like any file, and the path handed out is that
    /// descriptor's `/proc/self/fd/N` (a unix socket can be connected through it), so a
    /// directory swapped for a link after the resolve cannot send the connect elsewhere. The
    /// returned value keeps the descriptor open. Without `/proc` the resolved path under the
    /// root is handed out instead (docs/security.md, "Reads").
    pub fn host_path(&self, rel: &str) -> Result<HostPath, FsError> {
        let components = self.resolve(rel, true)?;
        let opened = self
            .open_resolved(&components, libc::O_PATH)
            .map_err(|e| FsError::from_io(rel, &e))?;
        let proc_path = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&opened)
        ));
        if proc_path.exists() {
            return Ok(HostPath {
                path: proc_path,
                _fd: Some(opened),
            });
        }
        let mut path = self.root.clone();
        if !components.as_os_str().is_empty() {
            path.push(components.as_os_str());
        }
        Ok(HostPath { path, _fd: None })
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.resolve(rel, true).is_ok()
    }

    /// Read a regular file as UTF-8 text, at most the read cap.
    pub fn read_to_string(&self, rel: &str) -> Result<String, FsError> {
        let bytes = self.read_bytes(rel)?;
        let text = if bytes.contains(&0) {
            Err(FsError::NotText { path: rel.into() })
        } else {
            String::from_utf8(bytes).map_err(|_| FsError::NotText { path: rel.into() })
        };
        self.note_failure(rel, text)
    }

    /// Read a regular file's bytes (PCI `config` space), at most the read cap.
    pub fn read_bytes(&self, rel: &str) -> Result<Vec<u8>, FsError> {
        let result = self.remembered_bytes(rel, |place| self.read_bytes_untraced(rel, place));
        if let Ok(bytes) = &result
            && self.trace.is_some()
            && let Ok(components) = self.resolve(rel, true)
        {
            let key = components.display();
            let bytes = bytes.clone();
            self.note(|t| {
                t.contents.insert(key, bytes);
            });
        }
        self.note_failure(rel, result)
    }

    /// The last `max` bytes of a regular file as text: a log that grows without bound (the
    /// fabric manager's), where the newest lines matter. When the start was skipped the partial
    /// first line is dropped; invalid UTF-8 is replaced. Traced like [`RootedFs::read_bytes`]:
    /// a capture holds the tail, which replays as the same tail.
    pub fn read_tail(&self, rel: &str, max: u64) -> Result<String, FsError> {
        let result = self.read_tail_untraced(rel, max);
        if let Ok(text) = &result
            && self.trace.is_some()
            && let Ok(components) = self.resolve(rel, true)
        {
            let key = components.display();
            let bytes = text.clone().into_bytes();
            self.note(|t| {
                t.contents.insert(key, bytes);
            });
        }
        self.note_failure(rel, result)
    }

    /// A log's newest bytes, at most the read cap: the kernel log (`dev/kmsg` when `kmsg`, a
    /// capture's `kmsg.txt`), which is read from its tail when longer and decoded by its reader
    /// whatever its bytes (`source/kernel_log.rs`). Traced like [`RootedFs::read_bytes`], but
    /// for `dev/kmsg`'s bytes: a capture keeps only the lines the checks read, redacted
    /// (`record/kmsg.rs`), never the whole log.
    pub fn read_log_tail(&self, rel: &str, kmsg: bool) -> Result<Tail, FsError> {
        let result = self.read_log_tail_untraced(rel, kmsg);
        if let Ok(tail) = &result
            && !kmsg
            && self.trace.is_some()
            && let Ok(components) = self.resolve(rel, true)
        {
            let key = components.display();
            let bytes = tail.bytes.clone();
            self.note(|t| {
                t.contents.insert(key, bytes);
            });
        }
        self.note_failure(rel, result)
    }

    /// What `rel` is, the last component not followed: for `record`, which recreates the
    /// shape of entries no check opened.
    pub fn entry_kind(&self, rel: &str) -> Result<Visited, FsError> {
        let components = self.resolve(rel, false)?;
        let entry = self
            .open_resolved(&components, libc::O_PATH)
            .map_err(|e| FsError::from_io(rel, &e))?;
        let st = fd::fstat(entry.as_fd()).map_err(|e| FsError::from_io(rel, &e))?;
        Ok(if fd::is_link(&st) {
            let target = fd::read_link(entry.as_fd(), OsStr::new(""))
                .map_err(|e| FsError::from_io(rel, &e))?;
            Visited::Link(target.to_string_lossy().into_owned())
        } else if fd::is_dir(&st) {
            Visited::Dir
        } else if fd::is_file(&st) {
            Visited::File
        } else {
            Visited::Special
        })
    }

    /// The device and inode of `rel`, all links followed (`""` is the root): for `record`,
    /// which tells a directory replaced while it walked from the one it first looked at.
    pub fn identity(&self, rel: &str) -> Result<(u64, u64), FsError> {
        let components = self.resolve(rel, true)?;
        let entry = self
            .open_resolved(&components, libc::O_PATH)
            .map_err(|e| FsError::from_io(rel, &e))?;
        let st = fd::fstat(entry.as_fd()).map_err(|e| FsError::from_io(rel, &e))?;
        Ok((st.st_dev, st.st_ino))
    }

    /// `statvfs(3)` of the filesystem `rel` sits on, all links followed inside the root, and
    /// the directory's `st_dev`: asked through an `O_PATH` descriptor opened beneath the root
    /// (`fstatvfs` on an `O_PATH` descriptor works since Linux 3.12, open(2)), never by name.
    pub fn statvfs(&self, rel: &str) -> Result<crate::answers::fs_stat::FsStat, FsError> {
        let components = self.resolve(rel, true)?;
        let entry = self
            .open_resolved(&components, libc::O_PATH)
            .map_err(|e| FsError::from_io(rel, &e))?;
        let st = fd::fstat(entry.as_fd()).map_err(|e| FsError::from_io(rel, &e))?;
        let vfs = fd::fstatvfs(entry.as_fd()).map_err(|e| FsError::from_io(rel, &e))?;
        Ok(crate::answers::fs_stat::FsStat {
            dev: st.st_dev,
            fragment_size: vfs.f_frsize,
            blocks: vfs.f_blocks,
            blocks_available: vfs.f_bavail,
            files: vfs.f_files,
            files_free: vfs.f_ffree,
        })
    }

    /// Entry names of a directory, sorted (sysfs order is not stable across kernels).
    pub fn read_dir(&self, rel: &str) -> Result<Vec<String>, FsError> {
        self.list_dir(rel, &|_| true)
    }

    /// The entries of a directory that `keep` accepts, sorted. A recording keeps only these, so
    /// a check that looks for `libnvidia-ml.so.*` among 3000 libraries records just those.
    pub fn list_dir(&self, rel: &str, keep: &dyn Fn(&str) -> bool) -> Result<Vec<String>, FsError> {
        let result = self.list_dir_untraced(rel, keep);
        if let Ok(names) = &result
            && self.trace.is_some()
            && let Ok(components) = self.resolve(rel, true)
        {
            let key = components.display();
            let names = names.clone();
            self.note(|t| t.listings.entry(key).or_default().extend(names));
        }
        self.note_failure(rel, result)
    }

    fn list_dir_untraced(
        &self,
        rel: &str,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>, FsError> {
        let all = self.remembered_listing(rel, || self.list_all(rel))?;
        let mut names: Vec<String> = all.iter().filter(|n| keep(n)).cloned().collect();
        names.sort();
        Ok(names)
    }

    /// Every entry of the directory `rel`, in directory order, as `getdents64`'s raw records
    /// (`fd::list_typed`).
    fn list_all(&self, rel: &str) -> Result<Box<[u8]>, FsError> {
        let not_listed = |e: io::Error| match e.raw_os_error() {
            Some(libc::ENOTDIR) => FsError::NotADirectory { path: rel.into() },
            _ => FsError::from_io(rel, &e),
        };
        let components = self.resolve(rel, true)?;
        self.note_open("list", || components.display());
        let dir = self
            .open_resolved(
                &components,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK,
            )
            .map_err(not_listed)?;
        fd::list_typed(&dir).map_err(not_listed)
    }

    /// The target text of a symlink, not followed (a `driver` link's target often does not exist
    /// in captures; its basename is all that matters, sysfs.md §1).
    pub fn read_link(&self, rel: &str) -> Result<String, FsError> {
        self.remembered_link(rel, || self.read_link_now(rel))
    }

    fn read_link_now(&self, rel: &str) -> Result<String, FsError> {
        let components = self.resolve(rel, false)?;
        self.note_open("link", || components.display());
        let not_a_link = || FsError::Io {
            path: rel.into(),
            message: "not a symlink".into(),
        };
        let Some((name, dir)) = components.split_last() else {
            return Err(not_a_link());
        };
        let dir = self.dir_fd(dir).map_err(|e| FsError::from_io(rel, &e))?;
        fd::read_link(dir.as_fd(), name)
            .map(|t| t.to_string_lossy().into_owned())
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EINVAL) => not_a_link(),
                _ => FsError::from_io(rel, &e),
            })
    }
}

/// A path to connect to, from [`RootedFs::host_path`]; holds the descriptor it names open.
#[derive(Debug)]
pub struct HostPath {
    path: PathBuf,
    _fd: Option<OwnedFd>,
}

impl HostPath {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests;
