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

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use error::FsError;
pub use memo::{OpenCounts, RunReads};
pub use named::{read_capped, read_capped_bytes, read_named_file, read_regular_file};

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
    dirs: Arc<Mutex<HashMap<String, Arc<Dir>>>>,
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

    /// A descriptor (`O_PATH`) of the resolved, link-free directory `components`: one kept
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

    /// Open the resolved, link-free path `components` with `flags`: its directory from
    /// [`RootedFs::dir_fd`], then the last component `O_NOFOLLOW` (a link that appeared since
    /// it was resolved is refused, `ELOOP`). An empty path opens the root itself.
    fn open_resolved(&self, components: &[OsString], flags: libc::c_int) -> io::Result<OwnedFd> {
        if !self.grafts.is_empty()
            && let Some(graft) = self.graft_at(&join_os(components))
        {
            return fd::open_one(graft.as_fd(), OsStr::new("."), flags);
        }
        match components.split_last() {
            None => fd::open_one(self.root_fd()?.as_fd(), OsStr::new("."), flags),
            Some((last, dir)) => fd::open_one(self.dir_fd(&join_os(dir))?.as_fd(), last, flags),
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
            // From the deepest directory on the way that resolves (usually the parent; an
            // ancestor when the parent is not there, so that a missing `hw_counters/` under
            // `sys/class/infiniband/mlx5_0` does not walk that link again for every file).
            let mut rest: Vec<OsString> = Vec::new();
            let mut at = clean;
            while let Some((dir, last)) = at.rsplit_once('/') {
                rest.push(OsString::from(last));
                let Some(dir) = self.dir_of(dir) else {
                    at = dir;
                    continue;
                };
                let walked = self.walk(rel, rest, dir.walk(), follow_last)?;
                // A directory reached through a link (`sys/class/infiniband/mlx5_0`) is
                // remembered like one on the way, so that reading in it does not walk the link
                // again.
                if follow_last
                    && walked.is_dir
                    && let Some(found) = Dir::new(&walked)
                    && let Ok(mut dirs) = self.dirs.lock()
                {
                    dirs.entry(clean.to_string())
                        .or_insert_with(|| Arc::new(found));
                }
                return Ok(walked.resolved);
            }
        }
        // Not spelt plainly, a single component, tracing, or no directory on the way that
        // resolves: the plain walk, which gives the exact answer or error.
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

    /// Is `resolved` (link-free components) a directory this filesystem resolved before?
    fn known_dir(&self, resolved: &[OsString]) -> bool {
        let key = display_components(resolved);
        self.known(&key)
            .is_some_and(|dir| dir.hops == 0 && dir.last_link.is_none() && dir.path == key)
    }

    /// Visit `pending` (last element = next component) from `state`. Each component is opened
    /// `O_PATH|O_NOFOLLOW` relative to its directory's descriptor and looked at through its own
    /// descriptor (`fstat`, `readlinkat(fd, "")`), so what is judged is what was opened.
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
        // The descriptor of the directory `resolved` names, when the walk holds it (else opened
        // from `resolved` when needed: after a `..`, a known directory or a memo state).
        let mut here: Option<Arc<OwnedFd>> = None;

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
                here = None;
                continue;
            }
            let is_last = pending.is_empty();
            // A link target walks the real path again (`../../../devices/pci0000:17/...`):
            // its directories are usually known already.
            resolved.push(component);
            if !is_last && self.trace.is_none() && self.known_dir(&resolved) {
                is_dir = true;
                here = None;
                continue;
            }
            let Some(name) = resolved.last() else {
                continue;
            };
            // Looked at relative to its directory's descriptor (`fstatat`, not followed): the
            // one the walk holds, or one of the last few used (sysfs resolves many links into
            // one directory), or that directory opened beneath the root now.
            let parent = match here.take() {
                Some(dir) => dir,
                None => self
                    .dir_fd(&join_os(&resolved[..resolved.len() - 1]))
                    .map_err(|e| FsError::from_io(rel, &e))?,
            };
            let st = match fd::stat_one(parent.as_fd(), name) {
                Ok(st) => st,
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
            let is_link = fd::is_link(&st);
            is_dir = fd::is_dir(&st);
            // By its name in the directory's descriptor: whatever it reads is a link in there.
            let link_text =
                || fd::read_link(parent.as_fd(), name).map_err(|e| FsError::from_io(rel, &e));
            if self.trace.is_some() {
                let kind = if is_link {
                    link_text()
                        .map(|t| Visited::Link(t.to_string_lossy().into_owned()))
                        .ok()
                } else if is_dir {
                    Some(Visited::Dir)
                } else if fd::is_file(&st) {
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
            if is_link && (!is_last || follow_last) {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(FsError::Loop { path: rel.into() });
                }
                let link_name = display_components(&resolved);
                self.note_open("link", || link_name.clone());
                let target = PathBuf::from(link_text()?);
                let target_text = target.to_string_lossy().into_owned();
                resolved.pop();
                here = Some(parent);
                if target.is_absolute() {
                    if !self.root_is_slash {
                        return Err(FsError::EscapesRoot {
                            path: rel.into(),
                            link: link_name,
                            target: target_text,
                        });
                    }
                    resolved.clear();
                    here = None;
                }
                push_components(&mut pending, &target);
                last_link = Some((link_name, target_text));
                // The root itself, if the target ends there (`..` back to it).
                is_dir = true;
            } else if !is_last && !is_dir {
                return Err(FsError::NotADirectory {
                    path: display_components(&resolved),
                });
            } else if !is_last {
                // Opened as a directory, not followed: a link swapped in since the look fails.
                let graft = if self.grafts.is_empty() {
                    None
                } else {
                    self.graft_at(&join_os(&resolved))
                };
                here = Some(match graft {
                    Some(graft) => graft,
                    None => {
                        // Link-free and opened component by component without following any:
                        // what `dir_fd` opens for this path, so one kept serves, and one opened
                        // here is kept for it.
                        let path = join_os(&resolved);
                        let kept = self.dir_fds.lock().ok().and_then(|fds| fds.get(&path));
                        match kept {
                            Some(kept) => kept,
                            None => {
                                self.note_open("dir", || path.to_string_lossy().into_owned());
                                let opened = Arc::new(
                                    fd::open_one(
                                        parent.as_fd(),
                                        name,
                                        libc::O_PATH | libc::O_DIRECTORY,
                                    )
                                    .map_err(|e| FsError::from_io(rel, &e))?,
                                );
                                self.remember_dir_fd(path, opened.clone());
                                opened
                            }
                        }
                    }
                });
                if self.trace.is_none() {
                    // A real directory on the way: asked for by its own path, it resolves to
                    // itself.
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
        for c in &components {
            path.push(c);
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
        let result = self.remembered_bytes(rel, || self.read_bytes_untraced(rel));
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
            let key = display_components(&components);
            let bytes = text.clone().into_bytes();
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
        let all = self.remembered_listing(rel, || self.list_all(rel))?;
        let mut names: Vec<String> = all.iter().filter(|n| keep(n)).cloned().collect();
        names.sort();
        Ok(names)
    }

    /// Every entry name of the directory `rel`, in directory order.
    fn list_all(&self, rel: &str) -> Result<Vec<String>, FsError> {
        let not_listed = |e: io::Error| match e.raw_os_error() {
            Some(libc::ENOTDIR) => FsError::NotADirectory { path: rel.into() },
            _ => FsError::from_io(rel, &e),
        };
        let components = self.resolve(rel, true)?;
        self.note_open("list", || display_components(&components));
        let dir = self
            .open_resolved(
                &components,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK,
            )
            .map_err(not_listed)?;
        Ok(fd::list(&dir)
            .map_err(not_listed)?
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect())
    }

    /// The target text of a symlink, not followed (a `driver` link's target often does not exist
    /// in captures; its basename is all that matters, sysfs.md §1).
    pub fn read_link(&self, rel: &str) -> Result<String, FsError> {
        self.remembered_link(rel, || self.read_link_now(rel))
    }

    fn read_link_now(&self, rel: &str) -> Result<String, FsError> {
        let components = self.resolve(rel, false)?;
        self.note_open("link", || display_components(&components));
        let not_a_link = || FsError::Io {
            path: rel.into(),
            message: "not a symlink".into(),
        };
        let Some((name, dir)) = components.split_last() else {
            return Err(not_a_link());
        };
        let dir = self
            .dir_fd(&join_os(dir))
            .map_err(|e| FsError::from_io(rel, &e))?;
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

/// Components joined by `/`, byte for byte.
fn join_os(components: &[OsString]) -> OsString {
    let mut path = OsString::new();
    for (i, c) in components.iter().enumerate() {
        if i > 0 {
            path.push("/");
        }
        path.push(c);
    }
    path
}

fn display_components(components: &[OsString]) -> String {
    components
        .iter()
        .map(|c| c.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests;
