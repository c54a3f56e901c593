//! Grafts: directories of a composed overlay fixture (`source/overlay.rs`) read from its base
//! where the overlay changes nothing under them.
//!
//! Composing a whole 2,300-file base for every replay cost more than the replay itself (every
//! entry created again). Instead the composed tree holds only the directories an overlay
//! touches; each untouched directory of the base is an empty placeholder there, grafted: the
//! reader, arriving at the placeholder's path, continues in the base's own directory, opened
//! once, through its descriptor. Below a graft point the path is resolved beneath that
//! descriptor with the same no-symlink, no-escape opening as under the root (`fd.rs`), and every
//! link there still resolves from the composed root, so a replay reads exactly what a complete
//! tree would give, and nothing outside the fixtures.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use super::{RootedFs, fd};

/// Graft points by resolved root-relative path (`sys/bus`), each with its base directory.
pub(super) type Grafts = Arc<Vec<(OsString, Arc<OwnedFd>)>>;

impl RootedFs {
    /// Read these directories from the descriptors given instead of from under the root
    /// (each path a plain root-relative path of a directory that exists under the root).
    pub fn with_grafts(mut self, grafts: Vec<(String, Arc<OwnedFd>)>) -> Self {
        self.grafts = Arc::new(
            grafts
                .into_iter()
                .map(|(path, fd)| (OsString::from(path), fd))
                .collect(),
        );
        self
    }

    /// The same grafts as `other` (a reader of the same composed tree, without its trace).
    pub fn with_grafts_of(mut self, other: &RootedFs) -> Self {
        self.grafts = other.grafts.clone();
        self
    }

    /// The base directory grafted exactly at `path`, if any.
    pub(super) fn graft_at(&self, path: &OsStr) -> Option<Arc<OwnedFd>> {
        if self.grafts.is_empty() {
            return None;
        }
        self.grafts
            .iter()
            .find(|(at, _)| at.as_os_str() == path)
            .map(|(_, fd)| fd.clone())
    }

    /// `path` (resolved, link-free) opened as a directory when it lies at or under a graft
    /// point: the graft's descriptor, or what lies beneath it opened without following links.
    pub(super) fn grafted_dir(&self, path: &OsStr) -> Option<io::Result<Arc<OwnedFd>>> {
        if self.grafts.is_empty() {
            return None;
        }
        let bytes = path.as_bytes();
        let (at, base) = self
            .grafts
            .iter()
            .filter(|(at, _)| {
                let at = at.as_bytes();
                bytes == at || (bytes.starts_with(at) && bytes.get(at.len()) == Some(&b'/'))
            })
            .max_by_key(|(at, _)| at.len())?;
        let rest = &bytes[at.len()..];
        if rest.is_empty() {
            return Some(Ok(base.clone()));
        }
        let rest = OsStr::from_bytes(&rest[1..]);
        Some(fd::open_beneath(base.as_fd(), rest, libc::O_PATH | libc::O_DIRECTORY).map(Arc::new))
    }
}
