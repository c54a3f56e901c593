//! `--state-dir DIR`: the file where each run adds what it saw in this boot of the node
//! (`answers/history.rs`), so a fault that survives reboots can be told from a new one. The
//! directory is the user's (a hostPath in deploy/), read and written outside `--root`; a capture
//! keeps the state it was recorded with as `.gpudoctor/state/history.json`, read-only.
//!
//! A file that is missing starts the history; one that cannot be read, is too large, is not
//! JSON or not ours (another `kind` or `format`) is an error naming it, and is left as it is:
//! never replaced by a fresh history that would forget what it held.

use std::path::{Path, PathBuf};

use crate::answers::history::History;

/// The file inside the state directory.
pub const FILE: &str = "history.json";
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

/// Write `history` to `path` atomically (a temporary file renamed over it), creating the
/// directory; a run that dies half-way leaves the previous file whole.
pub fn save(path: &Path, history: &History) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_vec_pretty(history).map_err(|e| e.to_string())?;
    crate::output::write_atomically(path, &text).map_err(|e| format!("{}: {e}", path.display()))
}
