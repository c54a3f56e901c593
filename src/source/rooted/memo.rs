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

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Dir, FsError, RootedFs, clean};

/// What a run has read so far, by path; empty while no run holds a [`RunReads`].
#[derive(Debug, Default)]
pub(super) struct Memo {
    /// Runs holding a guard; the memo is kept while one does.
    runs: usize,
    /// File contents by resolved location (or by the path asked when it does not resolve
    /// plainly); a failure by the path asked. Boxed keys, contents and errors: a
    /// 2 000-function node keeps some 12 000 of these for the run, and their size was most of
    /// the memo's cost (page faults).
    files: Remembered<Box<[u8]>>,
    links: Remembered<Box<str>>,
    /// Every entry name, unsorted and unfiltered (callers filter and sort).
    listings: Remembered<Arc<[String]>>,
    /// Each listed directory's raw `getdents64` records by resolved path: what type each entry
    /// is, so that a file the listing calls regular is opened for reading at once (`read.rs`).
    typed: HashMap<Box<str>, Arc<[u8]>>,
    /// Directories found not there, by the plain path asked (`run`, `var/lib/rancher`), each
    /// below a directory reached without a link: every later path through one is not there
    /// either, without asking again (issue 41: the kubelet's and the runtimes' candidate
    /// locations looked `run` up 13 times and `var/lib/rancher` 12 times a run).
    missing_dirs: foldhash::HashSet<Box<str>>,
    /// Listings longer than [`SEARCHED`], sorted by name when first asked for a name.
    sorted: HashMap<Box<str>, Arc<super::fd::SortedListing>>,
}

/// The longest listing (in `fd::list_typed`'s bytes: two and the name's per entry) that
/// [`RootedFs::listed_type`] searches for a name from its start: about 300 PCI functions' names.
/// A longer one is sorted once and searched by halves.
const SEARCHED: usize = 4096;

/// What a run read of one kind, by location.
type Remembered<T> = HashMap<Box<str>, Result<T, Box<FsError>>>;

/// How an answer is kept in the memo (as small as it goes) and given again.
trait Kept: Sized {
    type Stored;
    fn keep(&self) -> Self::Stored;
    fn give(stored: &Self::Stored) -> Self;
}

impl Kept for Vec<u8> {
    type Stored = Box<[u8]>;
    fn keep(&self) -> Box<[u8]> {
        self.as_slice().into()
    }
    fn give(stored: &Box<[u8]>) -> Self {
        stored.to_vec()
    }
}

impl Kept for String {
    type Stored = Box<str>;
    fn keep(&self) -> Box<str> {
        self.as_str().into()
    }
    fn give(stored: &Box<str>) -> Self {
        stored.to_string()
    }
}

impl Kept for Arc<[String]> {
    type Stored = Arc<[String]>;
    fn keep(&self) -> Self {
        self.clone()
    }
    fn give(stored: &Self) -> Self {
        stored.clone()
    }
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

    /// Every location opened (or looked up and found missing), `read …`, `list …`, `link …`.
    pub fn locations(&self) -> Vec<String> {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts.keys().cloned().collect()
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

    /// Did this run find the directory `key` (a [`clean`] path) not there, below a directory
    /// reached without a link (`walk.rs`, `dir_of`)?
    pub(super) fn known_missing(&self, key: &str) -> bool {
        self.memo().is_some_and(|m| m.missing_dirs.contains(key))
    }

    /// Remember for this run that the directory `key` is not there (see [`Memo`]).
    pub(super) fn note_missing(&self, key: &str) {
        if let Some(mut memo) = self.memo() {
            memo.missing_dirs.insert(key.into());
        }
    }

    /// Where the file `rel` is: its directory resolved (from the directory memo) and its own
    /// name, when `rel` is spelt plainly and its directory resolves. Not while tracing: a
    /// recording notes the file itself, which a walk from its directory does (`RootedFs::resolve`).
    pub(super) fn place<'r>(&self, rel: &'r str) -> Option<(Arc<Dir>, &'r str)> {
        if self.trace.is_some() {
            return None;
        }
        let (dir, name) = clean(rel)?.rsplit_once('/')?;
        Some((self.dir_of(dir)?, name))
    }

    /// `read` (the real read of `rel`) unless this run read the location `key` before. A
    /// failure is answered again only for the path that failed: another spelling may fail
    /// differently (a dangling link on the way), so it is read again.
    fn remembered<T: Kept>(
        &self,
        rel: &str,
        key: Box<str>,
        map: fn(&mut Memo) -> &mut Remembered<T::Stored>,
        read: impl FnOnce() -> Result<T, FsError>,
    ) -> Result<T, FsError> {
        if let Some(mut memo) = self.memo() {
            match map(&mut memo).get(&key) {
                Some(Ok(found)) => return Ok(T::give(found)),
                Some(Err(err)) if err.path() == rel => return Err((**err).clone()),
                _ => {}
            }
        }
        let result = read();
        if let Some(mut memo) = self.memo() {
            let kept = match &result {
                Ok(value) => Ok(value.keep()),
                Err(err) => Err(Box::new(err.clone())),
            };
            map(&mut memo).insert(key, kept);
        }
        result
    }

    /// The key of a file or link: its resolved directory and its name
    /// (`sys/devices/pci0000:17/…/0000:18:00.0/numa_node` for
    /// `sys/bus/pci/devices/0000:18:00.0/numa_node`), else `rel` as asked.
    fn key(rel: &str, place: Option<&(Arc<Dir>, &str)>) -> Box<str> {
        match place {
            Some((dir, name)) => {
                let mut key = String::with_capacity(dir.path.len() + 1 + name.len());
                key.push_str(&dir.path);
                key.push('/');
                key.push_str(name);
                key.into_boxed_str()
            }
            None => rel.into(),
        }
    }

    /// The bytes of the file `rel`: `read` reads them unless this run did. `read` is handed
    /// the file's place when it was worked out for the key, so it need not work it out again.
    pub(super) fn remembered_bytes(
        &self,
        rel: &str,
        read: impl FnOnce(Option<(&Dir, &str)>) -> Result<Vec<u8>, FsError>,
    ) -> Result<Vec<u8>, FsError> {
        if self.memo().is_none() {
            return read(None);
        }
        let place = self.place(rel);
        let key = Self::key(rel, place.as_ref());
        let at = place.as_ref().map(|(dir, name)| (&**dir, *name));
        self.remembered(rel, key, |m| &mut m.files, || read(at))
    }

    /// The target of the link `rel`: `read` reads it unless this run did.
    pub(super) fn remembered_link(
        &self,
        rel: &str,
        read: impl FnOnce() -> Result<String, FsError>,
    ) -> Result<String, FsError> {
        if self.memo().is_none() {
            return read();
        }
        let key = Self::key(rel, self.place(rel).as_ref());
        self.remembered(rel, key, |m| &mut m.links, read)
    }

    /// Every entry of the directory `rel`, unsorted and unfiltered: `list` lists it unless this
    /// run did. `list` answers the typed entries
    /// (`fd::list_typed`), kept for reads in the directory (`read.rs`, `open_listed`).
    pub(super) fn remembered_listing(
        &self,
        rel: &str,
        list: impl FnOnce() -> Result<Box<[u8]>, FsError>,
    ) -> Result<Arc<[String]>, FsError> {
        let names_of = |typed: &[u8]| -> Arc<[String]> {
            super::fd::names(typed)
                .into_iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect()
        };
        if self.memo().is_none() {
            return list().map(|typed| names_of(&typed));
        }
        // The directory itself resolved, when it does (`sys/class/infiniband/mlx5_0/ports`).
        let dir = (self.trace.is_none())
            .then(|| clean(rel).and_then(|c| self.dir_of(c)))
            .flatten();
        let key: Box<str> = dir.map_or_else(|| rel.into(), |d| d.path.as_str().into());
        let typed_key = key.clone();
        self.remembered(
            rel,
            key,
            |m| &mut m.listings,
            || {
                let known = self.memo().and_then(|m| m.typed.get(&typed_key).cloned());
                let typed: Arc<[u8]> = match known {
                    Some(typed) => typed,
                    None => list()?.into(),
                };
                if let Some(mut memo) = self.memo() {
                    memo.typed.insert(typed_key, typed.clone());
                }
                Ok(names_of(&typed))
            },
        )
    }

    /// The raw listing this run made of the resolved directory `dir`, when it made one
    /// (a [`RootedFs::list_dir`] of it).
    pub(super) fn typed_listing(&self, dir: &Dir) -> Option<Arc<[u8]>> {
        if self.trace.is_some() {
            return None;
        }
        self.memo()?.typed.get(dir.path.as_str()).cloned()
    }

    /// What this run's listing of the resolved directory `dir` says `name` is: `None` when the
    /// run did not list it (or while recording: a recording looks at every component),
    /// `Some(None)` when the listing has no such entry, else its `d_type` (`fd::entry_type`). A
    /// short listing — a GPU node's few hundred functions, a port's files — is searched from its
    /// start; a longer one is sorted by name once and searched by halves (`fd::SortedListing`):
    /// searching `sys/bus/pci/devices` of a 20 000-function node from its start for each of its
    /// 20 000 names made the 10x node's check twice as slow, and looking each name up in that
    /// directory instead (`fstatat`) made its kernel time grow faster than the node (issue 41).
    pub(super) fn listed_type(
        &self,
        dir: &std::ffi::OsStr,
        name: &std::ffi::OsStr,
    ) -> Option<Option<u8>> {
        use std::os::unix::ffi::OsStrExt as _;
        if self.trace.is_some() {
            return None;
        }
        let dir = dir.to_str()?;
        let mut memo = self.memo()?;
        let typed = memo.typed.get(dir).cloned()?;
        if typed.len() <= SEARCHED {
            drop(memo);
            return Some(super::fd::entry_type(&typed, name.as_bytes()));
        }
        let sorted = memo
            .sorted
            .entry(dir.into())
            .or_insert_with(|| Arc::new(super::fd::SortedListing::of(typed)))
            .clone();
        drop(memo);
        Some(sorted.entry_type(name.as_bytes()))
    }
}
