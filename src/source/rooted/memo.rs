//! A run's reads, remembered: while a run holds a [`RunReads`] guard (`checks::Context` holds
//! one for as long as it lives), every file read, link read and directory listing under the root
//! is answered from what this run already read, so each is opened at most once per run however
//! many fact families or checks ask (issue 41: `numa_node` was opened 127 times for 67 PCI
//! functions). Outside a run nothing is kept, and reading behaves as it always did.
//!
//! What is remembered, and what is not:
//! - file contents ([`RootedFs::read_bytes`], so `read_to_string` too), link targets
//!   ([`RootedFs::read_link`]) and whole directory listings ([`RootedFs::list_dir`], each caller's
//!   filter applied to the remembered listing); failures too, as they were said for the path
//!   asked;
//! - a file's contents under its resolved location too (`sys/devices/pci0000:17/…/numa_node`),
//!   so that another spelling (`sys/bus/pci/devices/<bdf>/numa_node`) finds them; a failure is
//!   kept only for the spelling that failed (its error names that path and the link on the way);
//! - never the kernel log, a log's tail or a streamed file (`read_records_nonblocking`,
//!   `read_tail`, `open_file`): they are probes or grow while read.
//!
//! `--sample` reads its first counters before the window through a source of its own, outside
//! any run; the run's reading after the window is the second, so a rate is never a rate of one
//! reading (sample/mod.rs). A live run judges one consistent reading of each file.
//!
//! [`OpenCounts`] is the test hook that holds the promise: every real open under the root
//! counted by resolved path (tests/read_once.rs).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use super::{FsError, RootedFs, clean};

/// What a run has read so far, by path; empty while no run holds a [`RunReads`].
#[derive(Debug, Default)]
pub(super) struct Memo {
    /// Runs holding a guard; the memo is kept while one does.
    runs: usize,
    /// File contents by resolved location (or by the path asked when it does not resolve
    /// plainly); a failure by the path asked.
    files: HashMap<String, Result<Arc<[u8]>, FsError>>,
    links: HashMap<String, Result<String, FsError>>,
    /// Every entry name, unsorted and unfiltered (callers filter and sort).
    listings: HashMap<String, Result<Arc<[String]>, FsError>>,
}

/// Held for the length of a run: while any is held, reads under its root are remembered
/// (module doc). Dropping the last one forgets them.
#[derive(Debug)]
pub struct RunReads {
    memo: Arc<Mutex<Memo>>,
}

impl Drop for RunReads {
    fn drop(&mut self) {
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        memo.runs = memo.runs.saturating_sub(1);
        if memo.runs == 0 {
            *memo = Memo::default();
        }
    }
}

/// How often each root-relative location was really opened, by resolved path with the kind in
/// front: a file read (`read sys/devices/…/numa_node`), a directory listed (`list …`) or opened
/// to look up in (`dir …`), a link read, to read it or to follow it (`link …`). The test hook of
/// the module's promise, off unless [`RootedFs::count_opens`] turned it on.
#[derive(Debug, Clone, Default)]
pub struct OpenCounts(Arc<Mutex<BTreeMap<String, u32>>>);

impl OpenCounts {
    /// Every location opened more than once, with its count.
    pub fn repeated(&self) -> Vec<(String, u32)> {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    }

    /// How many locations were opened at all.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RootedFs {
    /// Remember this root's reads until the guard is dropped (module doc): one per run.
    pub fn remember_reads(&self) -> RunReads {
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        memo.runs += 1;
        RunReads {
            memo: self.memo.clone(),
        }
    }

    /// Count every open under this root (and its clones) from now on (tests).
    pub fn count_opens(&self) -> OpenCounts {
        self.opens.get_or_init(OpenCounts::default).clone()
    }

    /// Note a real open of `what` (`read`, `list`, `link`) at `path` when counting.
    pub(super) fn note_open(&self, what: &str, path: impl FnOnce() -> String) {
        if let Some(counts) = self.opens.get() {
            let key = format!("{what} {}", path());
            *counts
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key)
                .or_default() += 1;
        }
    }

    fn memo(&self) -> Option<std::sync::MutexGuard<'_, Memo>> {
        let memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        (memo.runs > 0).then_some(memo)
    }

    /// Where `rel` is, as the memo keys it: resolved (`sys/devices/pci0000:17/…/0000:18:00.0/
    /// numa_node` for `sys/bus/pci/devices/0000:18:00.0/numa_node`) when it is spelt plainly and
    /// its directory resolves — the directory itself for a listing (`whole`), else the directory
    /// and the last name as given; else `rel` itself. Not while recording: a recording resolves
    /// nothing from the directory memo (`RootedFs::resolve`).
    fn location(&self, rel: &str, whole: bool) -> String {
        if self.trace.is_none()
            && let Some(rel) = clean(rel)
        {
            if whole && let Some(dir) = self.dir_of(rel) {
                return dir.path.clone();
            }
            if !whole
                && let Some((dir, name)) = rel.rsplit_once('/')
                && let Some(dir) = self.dir_of(dir)
            {
                return format!("{}/{name}", dir.path);
            }
        }
        rel.to_string()
    }

    /// `read` (the real read of `rel`) unless this run read the same location before. A
    /// failure is answered again only for the path that failed: another spelling may fail
    /// differently (a dangling link on the way), so it is read again.
    fn remembered<T: Clone>(
        &self,
        rel: &str,
        whole: bool,
        map: fn(&mut Memo) -> &mut HashMap<String, Result<T, FsError>>,
        read: impl FnOnce() -> Result<T, FsError>,
    ) -> Result<T, FsError> {
        if self.memo().is_none() {
            return read();
        }
        let key = self.location(rel, whole);
        if let Some(mut memo) = self.memo() {
            match map(&mut memo).get(&key) {
                Some(Ok(found)) => return Ok(found.clone()),
                Some(Err(err)) if err.path() == rel => return Err(err.clone()),
                _ => {}
            }
        }
        let result = read();
        if let Some(mut memo) = self.memo() {
            map(&mut memo).insert(key, result.clone());
        }
        result
    }

    /// The bytes of the file `rel`: `read` reads them unless this run did.
    pub(super) fn remembered_bytes(
        &self,
        rel: &str,
        read: impl FnOnce() -> Result<Vec<u8>, FsError>,
    ) -> Result<Vec<u8>, FsError> {
        if self.memo().is_none() {
            return read();
        }
        self.remembered(rel, false, |m| &mut m.files, || read().map(Arc::from))
            .map(|bytes| bytes.to_vec())
    }

    /// The target of the link `rel`: `read` reads it unless this run did.
    pub(super) fn remembered_link(
        &self,
        rel: &str,
        read: impl FnOnce() -> Result<String, FsError>,
    ) -> Result<String, FsError> {
        self.remembered(rel, false, |m| &mut m.links, read)
    }

    /// Every entry of the directory `rel`, unsorted and unfiltered: `list` lists it unless this
    /// run did.
    pub(super) fn remembered_listing(
        &self,
        rel: &str,
        list: impl FnOnce() -> Result<Vec<String>, FsError>,
    ) -> Result<Arc<[String]>, FsError> {
        self.remembered(rel, true, |m| &mut m.listings, || list().map(Arc::from))
    }
}
