//! Reading `--perftest-log` files: saved `ib_write_bw` / `ib_read_bw` / `ib_send_bw` outputs the
//! user names, wherever they are (like `--kernel-log`, the one kind of path read outside the
//! root). perftest prints a few KiB, so a file is read whole, capped and bounded in time as a
//! named kernel log is (`rooted::read_named_file`: a FIFO nobody writes, a file over the cap).

use std::path::PathBuf;
use std::time::Duration;

use super::RootedFs;
use super::rooted;

/// Where a capture keeps the `--perftest-log` files it was recorded with (GID lines masked).
pub const PERFTEST_DIR: &str = ".gpudoctor/perftest";

/// Most bytes read of one output: a full `-a` sweep with its parameter block is ~5 KiB; a file
/// this large is not a perftest output and is refused, not judged on its first megabyte.
const CAP: u64 = 1 << 20;

pub fn read_all(paths: &[PathBuf], wait: Duration) -> Vec<(PathBuf, Result<String, String>)> {
    paths
        .iter()
        .map(|p| {
            let shown = p.display().to_string();
            let text = rooted::read_named_file(p, &shown, CAP, wait).map_err(|e| e.to_string());
            (p.clone(), text)
        })
        .collect()
}

/// A capture's kept outputs (`.gpudoctor/perftest/*`), read through the root like every
/// capture file; none when the capture has no such directory.
pub fn read_capture(fs: &RootedFs) -> Vec<(PathBuf, Result<String, String>)> {
    let names = match fs.list_dir(PERFTEST_DIR, &|n| !n.starts_with('.')) {
        Ok(names) => names,
        Err(err) if err.is_missing() => return Vec::new(),
        Err(err) => return vec![(PathBuf::from(PERFTEST_DIR), Err(err.to_string()))],
    };
    names
        .into_iter()
        .map(|name| {
            let rel = format!("{PERFTEST_DIR}/{name}");
            let text = fs.read_to_string(&rel).map_err(|e| e.to_string());
            (PathBuf::from(rel), text)
        })
        .collect()
}

/// The name a kept output gets in a capture: the file's own name when it is a plain one
/// (`client-mlx5_0.txt`), else `perftest.log`; `-2`, `-3`, ... when taken.
pub fn capture_name(
    path: &std::path::Path,
    taken: &mut std::collections::BTreeSet<String>,
) -> String {
    let base = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| {
            !n.starts_with('.')
                && n.len() <= 128
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
        .unwrap_or("perftest.log")
        .to_string();
    let mut name = base.clone();
    let mut n = 1;
    while !taken.insert(name.clone()) {
        n += 1;
        name = format!("{n}-{base}");
    }
    name
}
