//! `--state-dir DIR`: the file where each run adds what it saw in this boot of the node
//! (`answers/history.rs`), so a fault that survives reboots can be told from a new one. The
//! directory is the user's (a hostPath in deploy/), read and written outside `--root`; a capture
//! keeps the state it was recorded with as `.gpudoctor/state/history.json`, read-only.
//!
//! A file that is missing starts the history; one that cannot be read, is too large, is not
//! JSON or not ours (another `kind` or `format`) is an error naming it, and is left as it is:
//! never replaced by a fresh history that would forget what it held.
//!
//! Runs share the directory (a DaemonSet's run and an operator's `check` at once, or a Job's
//! retries): an update is a read-modify-write under an exclusive `flock(2)` on
//! `DIR/history.json.lock`, held from reading the file as it is now, through merging in what
//! this run added to the history it judged ([`merge`]), to renaming the new file over it. A run
//! that waits more than [`LOCK_WAIT`] for the lock gives up the update (its verdict stands) and
//! says which file is locked. The lock file stays: removing it while another run waits on it
//! would let a third lock a new file of the same name.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::path::{Path, PathBuf};

use crate::answers::history::{BootRecord, History, SAME_BOOT_S};

/// The file inside the state directory.
pub const FILE: &str = "history.json";
/// The lock file beside it ([`save`]).
pub const LOCK: &str = "history.json.lock";
/// Longest a run waits for another to finish its update: one takes milliseconds, so a lock held
/// this long is a run that hangs.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);
/// Where a capture keeps it.
pub const IN_CAPTURE: &str = ".gpudoctor/state/history.json";
/// A bounded history (32 boots of at most 256 faults) is far below this.
const CAP: u64 = 4 << 20;

/// Where the history is, and whether this run adds to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    pub path: PathBuf,
    /// `--state-dir` on a live run; a capture's own state is read-only.
    pub writable: bool,
}

/// The history in `path`; a missing file is an empty history.
pub fn load(path: &Path, wait: std::time::Duration) -> Result<History, String> {
    let shown = path.display().to_string();
    let text = match super::rooted::read_named_file(path, &shown, CAP, wait) {
        Ok(text) => text,
        Err(err) if err.is_missing() => return Ok(History::default()),
        Err(err) => return Err(err.to_string()),
    };
    parse(&text, &shown)
}

/// A history file's text; errors name `shown`.
pub fn parse(text: &str, shown: &str) -> Result<History, String> {
    let history: History = serde_json::from_str(text)
        .map_err(|e| format!("{shown}: not a gpudoctor state file ({e})"))?;
    if let Some(why) = history.foreign() {
        return Err(format!("{shown}: not this gpudoctor's state file ({why})"));
    }
    Ok(history)
}

/// A `--state-dir` as one run uses it: the history read once (what the run judges and the base
/// its update is merged from), then saved under the lock.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    loaded: OnceLock<Result<History, String>>,
}

impl StateDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir {
            dir: dir.into(),
            loaded: OnceLock::new(),
        }
    }

    /// The history file, read once per run (`wait` bounds the read).
    pub fn answer(&self, wait: Duration) -> crate::answers::history::HistoryAnswer {
        let file = self.dir.join(FILE);
        let loaded = self.loaded.get_or_init(|| load(&file, wait)).clone();
        (file.display().to_string(), true, loaded)
    }

    /// Save `ours` — the history [`StateDir::answer`] gave, with this run added — merged into
    /// the file as it is now, under the lock.
    pub fn save(&self, ours: &History) -> Result<(), String> {
        let base = match self.loaded.get() {
            Some(Ok(base)) => base.clone(),
            _ => History::default(),
        };
        save(&self.dir.join(FILE), &base, ours)
    }
}

/// Add to `path` what `ours` adds to `base` (the history this run read), under the lock:
/// another run may have saved since `base` was read, and what it added stays. Written
/// atomically (a temporary file renamed over it), the directory created; a run that dies
/// half-way leaves the previous file whole.
pub fn save(path: &Path, base: &History, ours: &History) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let _lock = lock(&dir.join(LOCK), LOCK_WAIT)?;
    let shown = path.display().to_string();
    // Read as it is now, never through the cache of the run's first read.
    let mut now = match super::rooted::read_regular_file(path, &shown, CAP) {
        Ok(text) => parse(&text, &shown)?,
        Err(err) if err.is_missing() => History::default(),
        Err(err) => return Err(err.to_string()),
    };
    merge(&mut now, base, ours);
    let text = serde_json::to_vec_pretty(&now).map_err(|e| e.to_string())?;
    crate::output::write_atomically(path, &text).map_err(|e| format!("{shown}: {e}"))
}

/// Hold `path` locked (`flock(2)`, exclusive) until the returned file is dropped; at most
/// `wait` spent waiting for another holder. The file is created if missing, never followed
/// through a symlink.
fn lock(path: &Path, wait: Duration) -> Result<File, String> {
    let shown = path.display();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("{shown}: cannot open the state lock: {e}"))?;
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: flock on a descriptor this function holds open; it only takes a lock, which
        // the kernel drops when the descriptor is closed (flock(2)).
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Some(libc::EWOULDBLOCK) => {
                return Err(format!(
                    "{shown}: another run has held this lock for over {} s, so this run's boot was not added (`fuser -v {shown}` names the holder; run again once it is done)",
                    wait.as_secs()
                ));
            }
            Some(libc::EINTR) => {}
            _ => return Err(format!("{shown}: cannot lock the state: {err}")),
        }
    }
}

/// The same boot ([`SAME_BOOT_S`], as [`History::record`] merges runs).
fn same_boot(a: &BootRecord, b: &BootRecord) -> bool {
    (a.boot_unix - b.boot_unix).abs() < SAME_BOOT_S
}

/// Add to `now` what `ours` adds to `base`: per boot, the runs it counted more and the faults it
/// saw that `base` did not hold. A run records one boot, so this is that boot's record again
/// on top of whatever other runs saved meanwhile.
pub fn merge(now: &mut History, base: &History, ours: &History) {
    for boot in &ours.boots {
        let before = base.boots.iter().find(|b| same_boot(b, boot));
        let runs = boot.runs.saturating_sub(before.map_or(0, |b| b.runs));
        let faults: BTreeSet<String> = match before {
            Some(b) => boot.faults.difference(&b.faults).cloned().collect(),
            None => boot.faults.clone(),
        };
        if runs == 0 && faults.is_empty() {
            continue;
        }
        // `record` counts one run; the rest of what was added is counted beside it.
        now.record(boot.boot_unix, &boot.last_run, &faults);
        if let Some(rec) = now.boots.iter_mut().find(|b| same_boot(b, boot)) {
            rec.runs = rec.runs.saturating_sub(1).saturating_add(runs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Two runs read the same history and save one after the other: the second keeps what the
    /// first added.
    #[test]
    fn a_save_merges_what_another_run_saved_since_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join(FILE);
        let mut base = History::default();
        base.record(1000.0, "t0", &faults(&["xid 79 a"]));
        save(&path, &History::default(), &base).unwrap();
        let (mut first, mut second) = (base.clone(), base.clone());
        first.record(1000.0, "t1", &faults(&["xid 48 b"]));
        second.record(1010.0, "t2", &faults(&[]));
        second.record(90_000.0, "t3", &faults(&["xid 79 a"]));
        save(&path, &base, &first).unwrap();
        save(&path, &base, &second).unwrap();
        let saved = load(&path, Duration::from_secs(1)).unwrap();
        assert_eq!(saved.boots.len(), 2);
        assert_eq!(saved.boots[0].runs, 3, "{saved:?}");
        assert_eq!(saved.boots[0].faults, faults(&["xid 48 b", "xid 79 a"]));
        assert_eq!(saved.boots[1].runs, 1);
        // A second save of the same run from the same base counts it again: one save per run.
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    /// A lock another holder keeps is waited for, then given up with its path named.
    #[test]
    fn a_lock_held_elsewhere_is_named_after_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK);
        let held = lock(&path, Duration::from_secs(1)).unwrap();
        let started = Instant::now();
        let err = lock(&path, Duration::from_millis(200)).unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(
            err.contains(&path.display().to_string()) && err.contains("fuser"),
            "{err}"
        );
        drop(held);
        assert!(lock(&path, Duration::from_millis(200)).is_ok());
        // Never through a symlink.
        let link = dir.path().join("link.lock");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        assert!(lock(&link, Duration::from_millis(10)).is_err());
        assert!(!dir.path().join("elsewhere").exists());
    }
}
