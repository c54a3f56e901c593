//! `gpudoctor fleet DIR|FILES…`: many saved reports (the DaemonSet's `--save-report` output,
//! one per node) read as a whole — a nodes × layers table of verdicts, the checks that fail on
//! most nodes (a fleet-wide cause such as a bad driver rollout) apart from those failing on a
//! few (node faults), and the nodes whose measured figures stray from their siblings of the same
//! profile (`summary`), printed by `render`.
//!
//! This module finds and reads the reports: directories are walked (bounded depth and count,
//! symlinked directories not followed), every file is read bounded in size and time on a few
//! threads, and a file that cannot be read or is not a report is skipped with a named warning.
//! Reports of any gpudoctor version are read (`saved`). Two reports of one node: `pick`.

pub mod first_screen;
pub mod pick;
pub mod prometheus;
pub mod render;
pub mod summary;
pub mod triage;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::saved::{self, SavedReport};

pub use summary::{Summary, summarise, summarise_at};

/// Deepest directory level walked below a DIR argument (`reports/<cluster>/<node>/last.json`).
pub const MAX_DEPTH: usize = 6;
/// Most files read in one run: far above any fleet, a bound on a mistaken `fleet /`.
pub const MAX_FILES: usize = 200_000;

/// One node's report.
#[derive(Debug, Clone)]
pub struct NodeReport {
    /// Host name from the report, else the file's name.
    pub name: String,
    pub file: String,
    /// The file's modification time, when the file system says.
    pub modified: Option<SystemTime>,
    pub report: SavedReport,
}

/// A file left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub file: String,
    pub why: String,
}

/// A node that wrote reports lately but has none now (`fleet --prometheus`: its series went
/// stale, its scrape fails).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreachable {
    /// The node's name from its last series, else its target.
    pub name: String,
    /// Its target's labels (`instance="10.0.3.7:9100",job="node-exporter"`).
    pub target: String,
}

#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub nodes: Vec<NodeReport>,
    pub skipped: Vec<Skipped>,
    /// Only from Prometheus: a directory of reports cannot tell a node that stopped writing.
    pub unreachable: Vec<Unreachable>,
    /// Check code → how many nodes passed it, when the nodes' reports list only the checks
    /// that did not pass (and those carrying figures): `fleet --prometheus` counts passes with
    /// one query instead of reading a series per node and check. `None`: every check is listed.
    pub passes: Option<std::collections::BTreeMap<String, usize>>,
}

/// The files named: files as given, directories walked for `*.json`.
pub fn find_files(args: &[PathBuf]) -> (Vec<PathBuf>, Vec<Skipped>) {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for arg in args {
        match std::fs::metadata(arg) {
            Ok(meta) if meta.is_dir() => walk(arg, 0, &mut files, &mut skipped),
            Ok(_) => files.push(arg.clone()),
            Err(err) => skipped.push(Skipped {
                file: arg.display().to_string(),
                why: format!("cannot read it: {err}"),
            }),
        }
        if files.len() > MAX_FILES {
            break;
        }
    }
    if files.len() > MAX_FILES {
        skipped.push(Skipped {
            file: format!("{} more files", files.len() - MAX_FILES),
            why: format!("more than {MAX_FILES} files: the rest were not read"),
        });
        files.truncate(MAX_FILES);
    }
    files.sort();
    files.dedup();
    (files, skipped)
}

fn walk(dir: &Path, depth: usize, files: &mut Vec<PathBuf>, skipped: &mut Vec<Skipped>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(err) => {
            skipped.push(Skipped {
                file: dir.display().to_string(),
                why: format!("cannot list it: {err}"),
            });
            return;
        }
    };
    for entry in entries.flatten() {
        if files.len() > MAX_FILES {
            return;
        }
        let path = entry.path();
        // The entry itself, not what a link points at: a link to a directory is not walked (no
        // loops), a link to a file is read like a file.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, files, skipped);
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        // A FIFO or socket named `*.json` in a collected directory is not a report: skip it
        // now rather than wait on it. The directory entry says what it is, but for a link.
        if kind.is_file()
            || (kind.is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_file()))
        {
            files.push(path);
        } else {
            skipped.push(Skipped {
                file: path.display().to_string(),
                why: "not a regular file".to_string(),
            });
        }
    }
}

/// `f` of every item, on up to `threads` threads (each a run of items), in the items' order.
/// A thread that panics yields `crashed` of each of its items: one bad report costs its
/// neighbours their verdicts, not the fleet its summary.
pub fn parallel_map<'a, T: Sync, R: Send>(
    items: &'a [T],
    threads: usize,
    crashed: impl Fn(&'a T) -> R,
    f: impl Fn(&'a T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, 16).min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                (
                    part,
                    scope.spawn(move || part.iter().map(f).collect::<Vec<_>>()),
                )
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(part, h)| {
                h.join()
                    .unwrap_or_else(|_| part.iter().map(&crashed).collect())
            })
            .collect()
    })
}

/// How many threads the fleet's work is spread over: the CPUs this process may use.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// A report read, with its file's modification time when the file system says.
pub type Read = Result<(SavedReport, Option<SystemTime>), String>;

/// Read every file, on up to `threads` threads; results in file order.
pub fn read_all(files: &[PathBuf], threads: usize) -> Vec<Read> {
    parallel_map(
        files,
        threads,
        |_| Err("reading it crashed".to_string()),
        |path| {
            let report = saved::read_text(path)
                .and_then(|text| saved::parse(&text))
                .map_err(|e| e.to_string())?;
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            Ok((report, modified))
        },
    )
}

/// Find, read and name the reports. Two reports of one host keep one (`pick`: the worst
/// verdict, then the file modified last) and skip the others with a warning naming both files:
/// a fleet counts nodes, not files.
pub fn load(args: &[PathBuf]) -> Loaded {
    let (files, mut skipped) = find_files(args);
    let threads = threads();
    let mut nodes: Vec<NodeReport> = Vec::new();
    for (path, result) in files.iter().zip(read_all(&files, threads)) {
        let file = path.display().to_string();
        match result {
            Ok((report, modified)) => {
                let name = report
                    .node
                    .hostname
                    .clone()
                    .filter(|h| !h.trim().is_empty())
                    .unwrap_or_else(|| {
                        path.file_stem()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_else(|| file.clone())
                    });
                nodes.push(NodeReport {
                    name,
                    file,
                    modified,
                    report,
                });
            }
            Err(why) => skipped.push(Skipped { file, why }),
        }
    }
    let (nodes, duplicates) = pick::one_per_node(nodes);
    skipped.extend(duplicates);
    Loaded {
        nodes,
        skipped,
        unreachable: Vec::new(),
        passes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_costs_its_run_of_items_not_the_rest() {
        let items: Vec<u32> = (0..8).collect();
        let out = parallel_map(
            &items,
            4,
            |i| format!("crashed {i}"),
            |i| {
                assert!(*i != 5, "a bug met item 5");
                format!("ok {i}")
            },
        );
        // Four threads, two items each: 4 and 5 shared a thread.
        assert_eq!(
            out,
            [
                "ok 0",
                "ok 1",
                "ok 2",
                "ok 3",
                "crashed 4",
                "crashed 5",
                "ok 6",
                "ok 7"
            ]
        );
        assert!(parallel_map(&[] as &[u32], 4, |_| 0, |i| *i).is_empty());
    }
}
