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
//! - reads are capped in bytes, and only regular files are read (a FIFO or a character device
//!   would block; files are opened `O_NONBLOCK` so even the open cannot hang);
//! - non-UTF-8 content is an error naming the path, not garbage handed to a parser.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use thiserror::Error;

/// Most symlinks followed while resolving one path (Linux `MAXSYMLINKS` is 40).
pub const MAX_LINK_HOPS: usize = 40;

/// Default cap for one file read. sysfs attributes are at most a page; configs and probe answers
/// are far below this. A larger file is reported, not read.
pub const DEFAULT_READ_CAP: u64 = 8 * 1024 * 1024;

/// Why a root-relative path could not be read. Every variant names the root-relative path.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum FsError {
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: dangling symlink ({link} -> {target})")]
    Dangling {
        path: String,
        link: String,
        target: String,
    },
    #[error("{path}: symlink {link} -> {target} leaves the root; refused")]
    EscapesRoot {
        path: String,
        link: String,
        target: String,
    },
    #[error("{path}: too many levels of symbolic links (loop?)")]
    Loop { path: String },
    #[error("{path}: permission denied")]
    PermissionDenied { path: String },
    #[error("{path}: not a regular file ({kind})")]
    NotAFile { path: String, kind: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: larger than the {cap}-byte read cap")]
    TooLarge { path: String, cap: u64 },
    #[error("{path}: not text (binary or invalid UTF-8)")]
    NotText { path: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl FsError {
    /// The root-relative path the error is about.
    pub fn path(&self) -> &str {
        match self {
            FsError::NotFound { path }
            | FsError::Dangling { path, .. }
            | FsError::EscapesRoot { path, .. }
            | FsError::Loop { path }
            | FsError::PermissionDenied { path }
            | FsError::NotAFile { path, .. }
            | FsError::NotADirectory { path }
            | FsError::TooLarge { path, .. }
            | FsError::NotText { path }
            | FsError::Io { path, .. } => path,
        }
    }

    /// True when the path simply is not there (absent attribute, dangling link): callers often
    /// treat that as "this fact is unknown" rather than as a damaged node.
    pub fn is_missing(&self) -> bool {
        matches!(self, FsError::NotFound { .. } | FsError::Dangling { .. })
    }

    fn from_io(path: &str, err: &io::Error) -> FsError {
        match err.kind() {
            io::ErrorKind::NotFound => FsError::NotFound { path: path.into() },
            io::ErrorKind::PermissionDenied => FsError::PermissionDenied { path: path.into() },
            _ if err.raw_os_error() == Some(libc::ELOOP) => FsError::Loop { path: path.into() },
            _ => FsError::Io {
                path: path.into(),
                message: err.to_string(),
            },
        }
    }
}

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
    dirs: Arc<Mutex<HashMap<String, Arc<Dir>>>>,
    /// Descriptors of the directories read last, by resolved path ([`RootedFs::open_at`]).
    dir_fds: Arc<Mutex<Vec<(String, std::os::fd::OwnedFd)>>>,
}

/// A directory in the memo: the walk state there, its resolved path kept as one string (a
/// 20 000-function node has some 40 000 of these; one allocation each, not one per component).
#[derive(Debug)]
struct Dir {
    /// Resolved root-relative path, `/`-separated (empty for the root itself).
    path: String,
    hops: usize,
    last_link: Option<(String, String)>,
}

impl Dir {
    /// `None` for a path with a non-UTF-8 component (it could not be split back exactly).
    fn new(walk: &Walk) -> Option<Self> {
        walk.resolved
            .iter()
            .all(|c| c.to_str().is_some())
            .then(|| Dir {
                path: display_components(&walk.resolved),
                hops: walk.hops,
                last_link: walk.last_link.clone(),
            })
    }

    fn components(&self) -> Vec<OsString> {
        if self.path.is_empty() {
            return Vec::new();
        }
        self.path.split('/').map(OsString::from).collect()
    }

    /// The walk state at this directory, to walk on from.
    fn walk(&self) -> Walk {
        Walk {
            resolved: self.components(),
            hops: self.hops,
            last_link: self.last_link.clone(),
            is_dir: true,
        }
    }
}

/// `rel` without its leading `/` when it is spelt plainly (`a/b/c`: no empty, `.` or `..`
/// component), so that the text itself can key the directory memo.
fn clean(rel: &str) -> Option<&str> {
    let rel = rel.strip_prefix('/').unwrap_or(rel);
    (!rel.is_empty()
        && rel
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".."))
    .then_some(rel)
}

/// How many directory descriptors [`RootedFs`] keeps open.
const DIR_FDS: usize = 8;

/// Where a walk through the tree stands: the components resolved so far, the links followed,
/// the last link (named in a dangling-link error), and whether the last component is a directory.
#[derive(Debug, Clone, Default)]
struct Walk {
    resolved: Vec<OsString>,
    hops: usize,
    last_link: Option<(String, String)>,
    is_dir: bool,
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
        }
    }

    /// Record every access into `trace` from now on.
    pub fn with_trace(mut self, trace: Arc<Mutex<Trace>>) -> Self {
        self.trace = Some(trace);
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

    /// Resolve `rel` to root-relative components with every symlink followed (the last one too
    /// when `follow_last`). Returns the components; join them under the root to open.
    ///
    /// A check reads many files of one directory (`sys/bus/pci/devices/<bdf>/{vendor,device,
    /// class,...}`), so the directory part is resolved once and remembered: resolving component
    /// by component costs a `statx` per component and was most of a `check`'s time. Only
    /// directories that resolved cleanly are remembered, with the state the walk had there, so a
    /// path resolves to the same components and fails with the same error as without the memo.
    /// Not while tracing: a recording must see every component visited.
    pub fn resolve(&self, rel: &str, follow_last: bool) -> Result<Vec<OsString>, FsError> {
        if self.trace.is_none()
            && let Some(clean) = clean(rel)
        {
            if follow_last && let Some(dir) = self.known(clean) {
                return Ok(dir.components());
            }
            if let Some((dir, last)) = clean.rsplit_once('/')
                && let Some(dir) = self.dir_of(dir)
            {
                let state = dir.walk();
                return self
                    .walk(rel, vec![OsString::from(last)], state, follow_last)
                    .map(|w| w.resolved);
            }
        }
        // Not spelt plainly, a single component, tracing, or a directory part that does not
        // resolve: the plain walk, which gives the exact answer or error.
        let mut pending: Vec<OsString> = Vec::new();
        push_components(&mut pending, Path::new(rel));
        self.walk(rel, pending, Walk::default(), follow_last)
            .map(|w| w.resolved)
    }

    /// A directory in the memo, by the path asked for.
    fn known(&self, key: &str) -> Option<Arc<Dir>> {
        self.dirs.lock().ok()?.get(key).cloned()
    }

    /// The directory `key` (a [`clean`] path) from the memo, or resolved now.
    fn dir_of(&self, key: &str) -> Option<Arc<Dir>> {
        if let Some(dir) = self.known(key) {
            return Some(dir);
        }
        let components: Vec<OsString> = key.split('/').map(OsString::from).collect();
        self.resolve_dir(&components)
    }

    /// The directory `dir` (plain components, no `..`), from the memo or from its parent's walk
    /// state plus one step; `None` when it is not a directory that resolves.
    fn resolve_dir(&self, dir: &[OsString]) -> Option<Arc<Dir>> {
        let key = display_components(dir);
        if let Some(found) = self.known(&key) {
            return Some(found);
        }
        let (last, parent) = dir.split_last()?;
        let start = if parent.is_empty() {
            Walk::default()
        } else {
            self.resolve_dir(parent)?.walk()
        };
        let state = self.walk(&key, vec![last.clone()], start, true).ok()?;
        if !state.is_dir {
            return None;
        }
        let found = Arc::new(Dir::new(&state)?);
        self.dirs.lock().ok()?.insert(key, found.clone());
        Some(found)
    }

    /// The fast way to open a file whose directory resolved before: open the last component
    /// directly (`O_NOFOLLOW`), skipping the `statx` a walk would make. `None` when this does
    /// not apply or cannot decide (not spelt plainly, the last component is a link, tracing, any
    /// error other than "not there"): the caller then walks, which gives the exact result.
    fn open_in_known_dir(&self, rel: &str) -> Option<Result<File, FsError>> {
        if self.trace.is_some() {
            return None;
        }
        let (dir, name) = clean(rel)?.rsplit_once('/')?;
        let dir = self.dir_of(dir)?;
        match self.open_at(&dir, name) {
            Ok(file) => Some(Ok(file)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Some(Err(match &dir.last_link {
                Some((link, target)) => FsError::Dangling {
                    path: rel.into(),
                    link: link.clone(),
                    target: target.clone(),
                },
                None => FsError::NotFound { path: rel.into() },
            })),
            Err(_) => None,
        }
    }

    /// Open `name` (one plain component, not followed if a link) in the resolved directory
    /// `dir`, relative to a descriptor of that directory: the kernel then looks up one
    /// component, not the whole path from `/` again (most of a big node's cost). The last few
    /// directories' descriptors are kept (sysfs attributes are read a directory at a time).
    fn open_at(&self, dir: &Dir, name: &str) -> io::Result<File> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let c_name = std::ffi::CString::new(name)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut fds = self
            .dir_fds
            .lock()
            .map_err(|_| io::Error::other("directory descriptors poisoned"))?;
        let position = fds.iter().position(|(k, _)| *k == dir.path);
        let fd = match position {
            Some(i) => fds[i].1.as_raw_fd(),
            None => {
                let dir_file = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
                    .open(self.root.join(&dir.path))?;
                if fds.len() >= DIR_FDS {
                    fds.remove(0);
                }
                fds.push((dir.path.clone(), OwnedFd::from(dir_file)));
                fds.last().map_or(-1, |(_, fd)| fd.as_raw_fd())
            }
        };
        // SAFETY: `fd` is an open directory descriptor owned by `fds`, held locked for the
        // call; `c_name` is NUL-terminated. The returned descriptor is new and ours to own.
        let raw = unsafe {
            libc::openat(
                fd,
                c_name.as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid descriptor just returned by openat and owned by nothing else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Is `resolved` (link-free components) a directory this filesystem resolved before?
    fn known_dir(&self, resolved: &[OsString]) -> bool {
        let key = display_components(resolved);
        self.known(&key)
            .is_some_and(|dir| dir.hops == 0 && dir.last_link.is_none() && dir.path == key)
    }

    /// Visit `pending` (last element = next component) from `state`.
    fn walk(
        &self,
        rel: &str,
        mut pending: Vec<OsString>,
        state: Walk,
        follow_last: bool,
    ) -> Result<Walk, FsError> {
        let Walk {
            mut resolved,
            mut hops,
            mut last_link,
            mut is_dir,
        } = state;

        while let Some(component) = pending.pop() {
            if component == ".." {
                if resolved.pop().is_none() {
                    let (link, target) = last_link
                        .clone()
                        .unwrap_or_else(|| (rel.into(), "..".into()));
                    return Err(FsError::EscapesRoot {
                        path: rel.into(),
                        link,
                        target,
                    });
                }
                continue;
            }
            resolved.push(component);
            let is_last = pending.is_empty();
            // A link target walks the real path again (`../../../devices/pci0000:17/...`):
            // its directories are usually known already.
            if !is_last && self.trace.is_none() && self.known_dir(&resolved) {
                is_dir = true;
                continue;
            }
            let full = self.join(&resolved);
            let meta = match fs::symlink_metadata(&full) {
                Ok(meta) => meta,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return Err(match last_link {
                        Some((link, target)) => FsError::Dangling {
                            path: rel.into(),
                            link,
                            target,
                        },
                        None => FsError::NotFound { path: rel.into() },
                    });
                }
                Err(err) => return Err(FsError::from_io(rel, &err)),
            };
            is_dir = meta.is_dir();
            if self.trace.is_some() {
                let kind = if meta.file_type().is_symlink() {
                    fs::read_link(&full)
                        .map(|t| Visited::Link(t.to_string_lossy().into_owned()))
                        .ok()
                } else if meta.is_dir() {
                    Some(Visited::Dir)
                } else if meta.is_file() {
                    Some(Visited::File)
                } else {
                    Some(Visited::Special)
                };
                if let Some(kind) = kind {
                    let key = display_components(&resolved);
                    self.note(|t| {
                        t.visited.insert(key, kind);
                    });
                }
            }
            if meta.file_type().is_symlink() && (!is_last || follow_last) {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(FsError::Loop { path: rel.into() });
                }
                let target = fs::read_link(&full).map_err(|e| FsError::from_io(rel, &e))?;
                let link_name = display_components(&resolved);
                let target_text = target.to_string_lossy().into_owned();
                resolved.pop();
                if target.is_absolute() {
                    if !self.root_is_slash {
                        return Err(FsError::EscapesRoot {
                            path: rel.into(),
                            link: link_name,
                            target: target_text,
                        });
                    }
                    resolved.clear();
                }
                push_components(&mut pending, &target);
                last_link = Some((link_name, target_text));
                // The root itself, if the target ends there (`..` back to it).
                is_dir = true;
            } else if !is_last && !meta.is_dir() {
                return Err(FsError::NotADirectory {
                    path: display_components(&resolved),
                });
            } else if !is_last && self.trace.is_none() {
                // A real directory on the way: asked for by its own path, it resolves to itself.
                let key = display_components(&resolved);
                if let Ok(mut dirs) = self.dirs.lock()
                    && !dirs.contains_key(&key)
                    && let Some(dir) = Dir::new(&Walk {
                        resolved: resolved.clone(),
                        ..Walk::default()
                    })
                {
                    dirs.insert(key, Arc::new(dir));
                }
            }
        }
        Ok(Walk {
            resolved,
            hops,
            last_link,
            is_dir,
        })
    }

    /// The root-relative path `rel` really names, all links followed (`sys/devices/pci0000:17/...`).
    pub fn canonical(&self, rel: &str) -> Result<String, FsError> {
        self.resolve(rel, true).map(|c| display_components(&c))
    }

    /// The real path on this machine that `rel` names, every link resolved inside the root: for
    /// the one thing that is not read as a file, a unix socket to connect to.
    pub fn host_path(&self, rel: &str) -> Result<PathBuf, FsError> {
        self.resolve(rel, true).map(|c| self.join(&c))
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
        let result = self.read_bytes_untraced(rel);
        if let Ok(bytes) = &result
            && self.trace.is_some()
            && let Ok(components) = self.resolve(rel, true)
        {
            let key = display_components(&components);
            let bytes = bytes.clone();
            self.note(|t| {
                t.contents.insert(key, bytes);
            });
        }
        self.note_failure(rel, result)
    }

    fn read_bytes_untraced(&self, rel: &str) -> Result<Vec<u8>, FsError> {
        let mut file = match self.open_in_known_dir(rel) {
            Some(opened) => opened?,
            None => {
                let full = self.join(&self.resolve(rel, true)?);
                OpenOptions::new()
                    .read(true)
                    // O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOFOLLOW: the
                    // path is already resolved; a link appearing now (a race) is refused.
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
                    .open(&full)
                    .map_err(|e| FsError::from_io(rel, &e))?
            }
        };
        let meta = file.metadata().map_err(|e| FsError::from_io(rel, &e))?;
        if !meta.is_file() {
            let kind = if meta.is_dir() {
                "a directory"
            } else {
                "a device, socket or pipe"
            };
            return Err(FsError::NotAFile {
                path: rel.into(),
                kind: kind.into(),
            });
        }
        let len = meta.len();
        if len > 0 && len <= self.read_cap {
            // A file on disk (a fixture, a capture, /etc) states its size: read exactly that,
            // without the read that only confirms the end. sysfs states 4096 for every
            // attribute and procfs 0, so those are read to the end as below.
            let mut bytes = Vec::with_capacity(len as usize);
            (&mut file)
                .take(len)
                .read_to_end(&mut bytes)
                .map_err(|e| FsError::from_io(rel, &e))?;
            // Shorter than stated (sysfs) means `read_to_end` met the end.
            return Ok(bytes);
        }
        read_capped_bytes(&mut file, rel, self.read_cap)
    }

    /// Read a record device such as `/dev/kmsg` to its current end without blocking: each
    /// `read` returns one record and `EAGAIN` means "no more for now" (kernel
    /// `Documentation/ABI/testing/dev-kmsg`). A regular file is read to EOF. Capped like any read.
    pub fn read_records_nonblocking(&self, rel: &str) -> Result<String, FsError> {
        let full = self.join(&self.resolve(rel, true)?);
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&full)
            .map_err(|e| FsError::from_io(rel, &e))?;
        read_records(&mut file, rel, self.read_cap)
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
            let key = display_components(&components);
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
        let full = self.join(&self.resolve(rel, true)?);
        let entries = fs::read_dir(&full).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR) => FsError::NotADirectory { path: rel.into() },
            _ => FsError::from_io(rel, &e),
        })?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| FsError::from_io(rel, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if keep(&name) {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// The target text of a symlink, not followed (a `driver` link's target often does not exist
    /// in captures; its basename is all that matters, sysfs.md §1).
    pub fn read_link(&self, rel: &str) -> Result<String, FsError> {
        let full = self.join(&self.resolve(rel, false)?);
        fs::read_link(&full)
            .map(|t| t.to_string_lossy().into_owned())
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EINVAL) => FsError::Io {
                    path: rel.into(),
                    message: "not a symlink".into(),
                },
                _ => FsError::from_io(rel, &e),
            })
    }

    fn join(&self, components: &[OsString]) -> PathBuf {
        let mut path = self.root.clone();
        for c in components {
            path.push(c);
        }
        path
    }
}

/// Read a non-blocking record device or pipe to its current end: `EAGAIN` ends the read, as does
/// EOF. Lossy UTF-8, at most `cap` bytes.
fn read_records(file: &mut File, rel: &str, cap: u64) -> Result<String, FsError> {
    let mut out = String::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.push_str(&String::from_utf8_lossy(&buf[..n]));
                if out.len() as u64 > cap {
                    return Err(FsError::TooLarge {
                        path: rel.into(),
                        cap,
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            // EPIPE: records were overwritten while reading; the next read continues.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FsError::from_io(rel, &e)),
        }
    }
    Ok(out)
}

/// A regular file outside any root (a side file the user did not name, like the run record
/// beside an `--nccl-log`), as text, at most `cap` bytes. Anything else — a FIFO, a device, a
/// directory — is refused without blocking (the open is `O_NONBLOCK`).
pub fn read_regular_file(path: &Path, shown: &str, cap: u64) -> Result<String, FsError> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| FsError::from_io(shown, &e))?;
    let meta = file.metadata().map_err(|e| FsError::from_io(shown, &e))?;
    if !meta.is_file() {
        return Err(FsError::NotAFile {
            path: shown.into(),
            kind: "not a regular file".into(),
        });
    }
    read_capped(&mut file, shown, cap)
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
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| FsError::from_io(shown, &e))?;
    let meta = file.metadata().map_err(|e| FsError::from_io(shown, &e))?;
    let kind = meta.file_type();
    if meta.is_file() {
        return read_capped(&mut file, shown, cap);
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

/// A pipe or FIFO opened `O_NONBLOCK`, read until EOF after its writer closed it, at most `wait`.
/// Before any writer has opened a FIFO, `read` returns EOF at once although a writer may still
/// come, so reads happen only when `poll` says there is data or a hang-up.
fn read_pipe(
    file: &mut File,
    shown: &str,
    cap: u64,
    wait: std::time::Duration,
) -> Result<String, FsError> {
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + wait;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(FsError::Io {
                path: shown.into(),
                message: format!(
                    "a pipe whose writer did not finish within {} s (read {} bytes)",
                    wait.as_secs(),
                    bytes.len()
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
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() as u64 > cap {
                    return Err(FsError::TooLarge {
                        path: shown.into(),
                        cap,
                    });
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(FsError::from_io(shown, &e)),
        }
    }
    if bytes.contains(&0) {
        return Err(FsError::NotText { path: shown.into() });
    }
    String::from_utf8(bytes).map_err(|_| FsError::NotText { path: shown.into() })
}

/// Read at most `cap` bytes; more is an error rather than a silent truncation.
pub fn read_capped_bytes(file: &mut File, rel: &str, cap: u64) -> Result<Vec<u8>, FsError> {
    let mut bytes = Vec::new();
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
pub fn read_capped(file: &mut File, rel: &str, cap: u64) -> Result<String, FsError> {
    let bytes = read_capped_bytes(file, rel, cap)?;
    if bytes.contains(&0) {
        return Err(FsError::NotText { path: rel.into() });
    }
    String::from_utf8(bytes).map_err(|_| FsError::NotText { path: rel.into() })
}

/// Push the normal components of `path` so that the first is popped first.
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

fn display_components(components: &[OsString]) -> String {
    components
        .iter()
        .map(|c| c.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, RootedFs) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:01.0")).unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        fs::write(
            root.join("sys/devices/pci0000:00/0000:00:01.0/vendor"),
            "0x10de\n",
        )
        .unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0",
            root.join("sys/bus/pci/devices/0000:00:01.0"),
        )
        .unwrap();
        symlink(
            "../../../bus/pci",
            root.join("sys/devices/pci0000:00/0000:00:01.0/subsystem"),
        )
        .unwrap();
        let fs = RootedFs::new(root);
        (dir, fs)
    }

    #[test]
    fn follows_relative_links_inside_the_root() {
        let (_d, fs) = tree();
        assert_eq!(
            fs.read_to_string("sys/bus/pci/devices/0000:00:01.0/vendor")
                .unwrap(),
            "0x10de\n"
        );
        assert_eq!(
            fs.canonical("/sys/bus/pci/devices/0000:00:01.0").unwrap(),
            "sys/devices/pci0000:00/0000:00:01.0"
        );
        // Through the subsystem loop and back again: still resolves, bounded.
        assert!(
            fs.exists("sys/bus/pci/devices/0000:00:01.0/subsystem/devices/0000:00:01.0/vendor")
        );
    }

    #[test]
    fn refuses_absolute_and_escaping_links() {
        let (dir, fs) = tree();
        symlink("/etc/hostname", dir.path().join("abs")).unwrap();
        symlink(
            "../../../../../../../../etc/hostname",
            dir.path().join("sys/up"),
        )
        .unwrap();
        assert!(matches!(
            fs.read_to_string("abs"),
            Err(FsError::EscapesRoot { .. })
        ));
        assert!(matches!(
            fs.read_to_string("sys/up"),
            Err(FsError::EscapesRoot { .. })
        ));
        assert!(matches!(
            fs.read_to_string("../etc/hostname"),
            Err(FsError::EscapesRoot { .. })
        ));
    }

    #[test]
    fn loops_and_dangling_links_are_errors() {
        let (dir, fs) = tree();
        symlink("b", dir.path().join("a")).unwrap();
        symlink("a", dir.path().join("b")).unwrap();
        symlink("nowhere", dir.path().join("dangling")).unwrap();
        assert!(matches!(fs.read_to_string("a"), Err(FsError::Loop { .. })));
        let err = fs.read_to_string("dangling").unwrap_err();
        assert!(matches!(err, FsError::Dangling { .. }), "{err}");
        assert_eq!(fs.read_link("dangling").unwrap(), "nowhere");
    }

    #[test]
    fn caps_and_rejects_non_text() {
        let (dir, mut fs) = tree();
        fs.read_cap = 4;
        fs::write(dir.path().join("big"), "12345").unwrap();
        fs::write(dir.path().join("bin"), [0u8, 1, 2]).unwrap();
        assert!(matches!(
            fs.read_to_string("big"),
            Err(FsError::TooLarge { .. })
        ));
        fs.read_cap = 100;
        assert!(matches!(
            fs.read_to_string("bin"),
            Err(FsError::NotText { .. })
        ));
        assert!(matches!(
            fs.read_to_string("sys"),
            Err(FsError::NotAFile { .. })
        ));
    }

    #[test]
    fn the_directory_memo_changes_no_answer() {
        let (dir, _) = tree();
        let root = dir.path();
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        symlink("nowhere", root.join("sys/bus/pci/devices/0000:00:02.0")).unwrap();
        symlink("/etc", root.join("sys/abs")).unwrap();
        fs::write(root.join("sys/file"), "x").unwrap();
        let paths = [
            "sys/bus/pci/devices/0000:00:01.0/vendor",
            "sys/bus/pci/devices/0000:00:01.0/missing",
            "sys/bus/pci/devices/0000:00:01.0/subsystem/devices/0000:00:01.0/vendor",
            "sys/devices/pci0000:00/0000:00:01.0/vendor",
            "sys/bus/pci/devices/0000:00:02.0/vendor",
            "sys/bus/pci/devices/0000:00:02.0",
            "sys/abs/hostname",
            "sys/file/below",
            "a/x",
            "sys/../sys/file",
            "nope/x",
        ];
        // Tracing turns the memo off: the plain walk, fresh for every path.
        let plain = |p: &str| {
            let fs = RootedFs::new(root).with_trace(Arc::default());
            (fs.resolve(p, true), fs.read_to_string(p), fs.read_link(p))
        };
        let memo = RootedFs::new(root);
        for round in 0..2 {
            for p in paths.iter().chain(paths.iter().rev()) {
                let got = (
                    memo.resolve(p, true),
                    memo.read_to_string(p),
                    memo.read_link(p),
                );
                assert_eq!(got, plain(p), "{p} (round {round})");
            }
        }
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let (dir, fs) = tree();
        let path = std::ffi::CString::new(dir.path().join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: plain libc call with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            fs.read_to_string("fifo"),
            Err(FsError::NotAFile { .. })
        ));
    }
}
