//! Resolving a root-relative path under the root, component by component, every symlink
//! followed by us (so that one leaving the root is refused), and the directory memo that makes
//! a run resolve each directory once (moved here from `mod.rs` with the issue-41 work).
//!
//! A resolved path is one buffer ([`Resolved`]: the components joined by `/`, byte for byte),
//! not a vector of components: a walk pushes and pops names on it, and the directory memo,
//! the descriptor cache and the error messages take it as it is. On a 2 000-function node the
//! per-component allocations were a quarter of a `check`'s instructions.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::{FsError, MAX_LINK_HOPS, RootedFs, Visited, clean, fd};

/// A resolved, link-free root-relative path: its components joined by `/`, byte for byte (a
/// non-UTF-8 name is kept as it is); empty for the root itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved(Vec<u8>);

impl Resolved {
    /// The path `path` (already resolved and plain: `sys/devices/pci0000:17`).
    fn of(path: &str) -> Self {
        Resolved(path.as_bytes().to_vec())
    }

    fn push(&mut self, name: &OsStr) {
        if !self.0.is_empty() {
            self.0.push(b'/');
        }
        self.0.extend_from_slice(name.as_bytes());
    }

    /// Drop the last component; `false` at the root, which has none.
    fn pop(&mut self) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let cut = self.0.iter().rposition(|b| *b == b'/').unwrap_or(0);
        self.0.truncate(cut);
        true
    }

    fn clear(&mut self) {
        self.0.clear();
    }

    /// The path as the kernel takes it (`openat2` beneath the root, descriptor keys).
    pub fn as_os_str(&self) -> &OsStr {
        OsStr::from_bytes(&self.0)
    }

    /// The last component and the directory it is in (`None` at the root).
    pub fn split_last(&self) -> Option<(&OsStr, &OsStr)> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.iter().rposition(|b| *b == b'/') {
            Some(cut) => (
                OsStr::from_bytes(&self.0[cut + 1..]),
                OsStr::from_bytes(&self.0[..cut]),
            ),
            None => (self.as_os_str(), OsStr::new("")),
        })
    }

    fn last(&self) -> Option<&OsStr> {
        self.split_last().map(|(name, _)| name)
    }

    /// The directory the last component is in (the root's own path, empty, for one at the top).
    fn parent(&self) -> &OsStr {
        self.split_last().map_or(OsStr::new(""), |(_, dir)| dir)
    }

    /// The path as text when every name is UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The path as shown in errors and traces (a non-UTF-8 name replaced).
    pub fn display(&self) -> String {
        match String::from_utf8_lossy(&self.0) {
            Cow::Borrowed(text) => text.to_string(),
            Cow::Owned(text) => text,
        }
    }
}

/// A directory in the memo: the walk state there, its resolved path kept as one string (a
/// 20 000-function node has some 40 000 of these; one allocation each, not one per component).
#[derive(Debug)]
pub(super) struct Dir {
    /// Resolved root-relative path, `/`-separated (empty for the root itself).
    pub(super) path: String,
    hops: usize,
    pub(super) last_link: Option<(String, String)>,
}

impl Dir {
    /// `None` for a path with a non-UTF-8 component (it could not be split back exactly).
    fn new(walk: &Walk) -> Option<Self> {
        Some(Dir {
            path: walk.resolved.to_str()?.to_string(),
            hops: walk.hops,
            last_link: walk.last_link.clone(),
        })
    }

    /// The walk state at this directory, to walk on from.
    fn walk(&self) -> Walk {
        Walk {
            resolved: Resolved::of(&self.path),
            hops: self.hops,
            last_link: self.last_link.clone(),
            is_dir: true,
        }
    }
}

/// Where a walk through the tree stands: the path resolved so far, the links followed,
/// the last link (named in a dangling-link error), and whether the last component is a directory.
#[derive(Debug, Clone, Default)]
struct Walk {
    resolved: Resolved,
    hops: usize,
    last_link: Option<(String, String)>,
    is_dir: bool,
}

impl RootedFs {
    /// Resolve `rel` to a root-relative path with every symlink followed (the last one too
    /// when `follow_last`); join it under the root to open.
    ///
    /// A check reads many files of one directory (`sys/bus/pci/devices/<bdf>/{vendor,device,
    /// class,...}`), so the directory part is resolved once and remembered: resolving component
    /// by component costs a `statx` per component and was most of a `check`'s time. Only
    /// directories that resolved cleanly are remembered, with the state the walk had there, so a
    /// path resolves to the same components and fails with the same error as without the memo.
    /// While tracing too: a recording must see every component visited, and it does, since
    /// the memo of a traced reader holds only directories its own traced walks reached
    /// ([`RootedFs::with_trace`] starts it empty), each component noted on the way; the walk
    /// from a remembered directory notes the rest.
    pub fn resolve(&self, rel: &str, follow_last: bool) -> Result<Resolved, FsError> {
        if let Some(clean) = clean(rel) {
            if follow_last && let Some(dir) = self.known(clean) {
                return Ok(Resolved::of(&dir.path));
            }
            // From the deepest directory on the way that resolves (usually the parent; an
            // ancestor when the parent is not there, so that a missing `hw_counters/` under
            // `sys/class/infiniband/mlx5_0` does not walk that link again for every file).
            let mut rest: Vec<OsString> = Vec::new();
            let mut at = clean;
            while let Some((dir, last)) = at.rsplit_once('/') {
                rest.push(OsString::from(last));
                let Some(dir) = self.dir_of(dir) else {
                    // Not there, below directories reached without a link: what the walk
                    // from the root would say, without walking to it again.
                    if self.known_missing(dir) {
                        return Err(FsError::NotFound { path: rel.into() });
                    }
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
    pub(super) fn known(&self, key: &str) -> Option<Arc<Dir>> {
        self.dirs.lock().ok()?.get(key).cloned()
    }

    /// The directory `key` (a [`clean`] path) from the memo, or from its parent's walk state
    /// plus one step; `None` when it is not a directory that resolves.
    pub(super) fn dir_of(&self, key: &str) -> Option<Arc<Dir>> {
        if let Some(found) = self.known(key) {
            return Some(found);
        }
        if self.known_missing(key) {
            return None;
        }
        let (start, last) = match key.rsplit_once('/') {
            Some((parent, last)) => (self.dir_of(parent)?.walk(), last),
            None => (Walk::default(), key),
        };
        let plain = start.last_link.is_none();
        let state = match self.walk(key, vec![OsString::from(last)], start, true) {
            Ok(state) => state,
            Err(FsError::NotFound { .. }) if plain => {
                self.note_missing(key);
                return None;
            }
            Err(_) => return None,
        };
        if !state.is_dir {
            return None;
        }
        let found = Arc::new(Dir::new(&state)?);
        self.dirs
            .lock()
            .ok()?
            .insert(key.to_string(), found.clone());
        Some(found)
    }

    /// Is `resolved` (link-free) a directory this filesystem resolved before?
    fn known_dir(&self, resolved: &Resolved) -> bool {
        let Some(key) = resolved.to_str() else {
            return false;
        };
        self.known(key)
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
                if !resolved.pop() {
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
            resolved.push(&component);
            if !is_last && self.known_dir(&resolved) {
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
                    .dir_fd(resolved.parent())
                    .map_err(|e| FsError::from_io(rel, &e))?,
            };
            // In a directory this run listed, a link or a directory is told by its listing's
            // `d_type` (read.rs, `open_listed`, says why that is as safe as a look: what is
            // opened next is opened without following a link), and a name the listing lacks is
            // not there (issue 41: a `fstatat` per PCI function's link and `driver`).
            let listed = self.listed_type(resolved.parent(), name);
            let st = match listed {
                Some(None) => Err(io::Error::from_raw_os_error(libc::ENOENT)),
                Some(Some(libc::DT_LNK | libc::DT_DIR)) => Ok(None),
                _ => fd::stat_one(parent.as_fd(), name).map(Some),
            };
            let st = match st {
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
            let (is_link, dir_here) = match &st {
                Some(st) => (fd::is_link(st), fd::is_dir(st)),
                None => (
                    listed == Some(Some(libc::DT_LNK)),
                    listed == Some(Some(libc::DT_DIR)),
                ),
            };
            is_dir = dir_here;
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
                } else if st.as_ref().is_some_and(fd::is_file) {
                    Some(Visited::File)
                } else {
                    Some(Visited::Special)
                };
                if let Some(kind) = kind {
                    let key = resolved.display();
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
                let link_name = resolved.display();
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
                    path: resolved.display(),
                });
            } else if !is_last {
                // Opened as a directory, not followed: a link swapped in since the look fails.
                let graft = if self.grafts.is_empty() {
                    None
                } else {
                    self.graft_at(resolved.as_os_str())
                };
                here = Some(match graft {
                    Some(graft) => graft,
                    None => {
                        // Link-free and opened component by component without following any:
                        // what `dir_fd` opens for this path, so one kept serves, and one opened
                        // here is kept for it.
                        let path = resolved.as_os_str().to_os_string();
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
                // A real directory on the way: asked for by its own path, it resolves to itself.
                if let Some(key) = resolved.to_str()
                    && let Ok(mut dirs) = self.dirs.lock()
                    && !dirs.contains_key(key)
                {
                    let dir = Dir {
                        path: key.to_string(),
                        hops: 0,
                        last_link: None,
                    };
                    dirs.insert(key.to_string(), Arc::new(dir));
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
