//! Reading `--perftest-log` files: saved `ib_write_bw` / `ib_read_bw` / `ib_send_bw` outputs the
//! user names, wherever they are (like `--kernel-log`, the one kind of path read outside the
//! root). perftest prints a few KiB, so a file is read whole, capped and bounded in time as a
//! named kernel log is (`rooted::read_named_file`: a FIFO nobody writes, a file over the cap).

use std::path::PathBuf;
use std::time::Duration;

use super::rooted;

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
