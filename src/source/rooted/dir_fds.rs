//! The directory descriptors a reader keeps open (`O_PATH`), by resolved root-relative path, so
//! that a file is opened relative to its directory (one component for the kernel to look up)
//! and a directory is opened once per run rather than once per fact family that reads it.
//!
//! A run reads the PCI functions' directories in several passes (PCI facts, topology, SR-IOV,
//! RDMA): with the last 32 kept, each of the H100 fixture's 220 directories was opened up to six
//! times (issue 41). Now up to [`most`] are kept — far more than a GPU node's judged directories,
//! and a quarter of the descriptors the process may open — and the oldest goes first beyond
//! that (a 20 000-function node keeps its linear cost, not its descriptors).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::sync::{Arc, OnceLock};

/// Descriptors kept, oldest first.
#[derive(Debug, Default)]
pub(super) struct DirFds {
    by_path: foldhash::HashMap<OsString, Arc<OwnedFd>>,
    order: VecDeque<OsString>,
}

/// The most directory descriptors kept: a quarter of `RLIMIT_NOFILE`'s soft limit, between 32
/// and 1024 (a limit of 1024, still common, keeps 256).
pub(super) fn most() -> usize {
    static MOST: OnceLock<usize> = OnceLock::new();
    *MOST.get_or_init(|| {
        // SAFETY: an all-zero `rlimit` is a valid value for the kernel to overwrite.
        let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
        // SAFETY: `limit` is a valid out pointer for the call.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
        } else {
            1024
        };
        (soft / 4).clamp(32, 1024)
    })
}

impl DirFds {
    pub(super) fn get(&self, path: &std::ffi::OsStr) -> Option<Arc<OwnedFd>> {
        self.by_path.get(path).cloned()
    }

    /// Keep `fd`, the directory at the resolved path `path`; the oldest goes beyond [`most`].
    pub(super) fn keep(&mut self, path: OsString, fd: Arc<OwnedFd>) {
        if self.by_path.contains_key(&path) {
            return;
        }
        while self.order.len() >= most() {
            if let Some(oldest) = self.order.pop_front() {
                self.by_path.remove(&oldest);
            }
        }
        self.order.push_back(path.clone());
        self.by_path.insert(path, fd);
    }
}
