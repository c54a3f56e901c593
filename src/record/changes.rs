//! Did the node change while `record` walked it? A live node can hot-remove and rescan PCI
//! functions, reset a GPU (which drops it from the bus and brings it back) or reload a driver in
//! the seconds a recording takes; the capture then holds a view no moment of the node had (issue
//! 41: captures holding 1 to 5 of a node's 67 PCI functions, saying nothing). Such a capture is
//! kept — it may be all there is of a node that is failing — but its manifest says
//! `node_changed` and why, `record` says so, and its replay says so (`driver.gpu_on_pci`).
//!
//! What is looked at, never through a path that could leave the root (the rooted reader, without
//! the walk's cached descriptors): the root's own identity (device and inode) and, for each
//! [`WATCHED`] directory — those whose every entry the facts read — its identity and entries,
//! once before the walk and once after the capture is written. The node changed when any of
//! these differ; when the walk listed such a directory with other entries than both looks saw,
//! or with entries that differ between its own listings; when an entry it listed was never
//! reached (gone before it was read) or was gone when its shape was copied; or when a path was
//! seen as two kinds of entry (`tree.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::source::RootedFs;
use crate::source::rooted::Trace;

/// A directory whose entries are the node's devices.
struct Watched {
    dir: &'static str,
    /// The names that are devices (the rest, such as a `sys/bus/pci/devices` entry that is not a
    /// bus address, is not looked at).
    keep: fn(&str) -> bool,
    /// The walk reads every such entry whenever it lists the directory (`facts/pci.rs` reads
    /// each function's `class`), so one it listed and never reached was gone by then.
    every_entry_read: bool,
}

const WATCHED: &[Watched] = &[
    Watched {
        dir: "sys/bus/pci/devices",
        keep: crate::facts::pci::is_bdf,
        every_entry_read: true,
    },
    Watched {
        dir: "sys/class/infiniband",
        keep: every,
        every_entry_read: false,
    },
    Watched {
        dir: "proc/driver/nvidia/gpus",
        keep: every,
        every_entry_read: false,
    },
];

fn every(_: &str) -> bool {
    true
}

/// One look at a watched directory: its identity and its entries; `None` when it could not be
/// looked at (not there on this node).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Look {
    id: (u64, u64),
    names: BTreeSet<String>,
}

/// The root and the watched directories, as one look saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Census {
    root: Option<(u64, u64)>,
    dirs: BTreeMap<&'static str, Option<Look>>,
}

/// Look at the root and the watched directories through a fresh reader of `root` (with the
/// grafts of `like`, for an overlay capture), so nothing the walk resolved is reused.
pub(super) fn census(root: &Path, like: &RootedFs) -> Census {
    let fs = RootedFs::new(root).with_grafts_of(like);
    let dirs = WATCHED
        .iter()
        .map(|Watched { dir, keep, .. }| {
            let look = match (fs.identity(dir), fs.list_dir(dir, keep)) {
                (Ok(id), Ok(names)) => Some(Look {
                    id,
                    names: names.into_iter().collect(),
                }),
                _ => None,
            };
            (*dir, look)
        })
        .collect();
    Census {
        root: fs.identity("").ok(),
        dirs,
    }
}

/// Why the capture may not be one view of the node: one line per thing seen to change, none
/// when nothing was. `vanished` are entries the walk listed that were gone when the capture
/// copied their shape (`tree.rs`), `seen_as_two` the paths seen as two kinds of entry.
pub(super) fn reasons(
    before: &Census,
    after: &Census,
    trace: &Trace,
    vanished: &[String],
    seen_as_two: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    if before.root != after.root {
        out.push(match after.root {
            Some(_) => "the root directory was replaced by another at its path".to_string(),
            None => "the root directory was gone from its path after the walk".to_string(),
        });
    }
    for Watched {
        dir,
        keep,
        every_entry_read,
    } in WATCHED
    {
        let (was, now) = (before.dirs.get(dir), after.dirs.get(dir));
        let (was, now) = (was.cloned().flatten(), now.cloned().flatten());
        match (&was, &now) {
            (Some(a), Some(b)) if a.id != b.id => {
                out.push(format!("{dir} was replaced by another directory"));
            }
            (Some(a), Some(b)) if a.names != b.names => out.push(format!(
                "{dir} held {} entries before the walk and {} after it: {}",
                a.names.len(),
                b.names.len(),
                difference(&a.names, &b.names)
            )),
            (Some(_), None) => out.push(format!("{dir} was there before the walk, not after it")),
            (None, Some(_)) => out.push(format!("{dir} appeared during the walk")),
            _ => {}
        }
        // What the walk itself listed: each listing of the directory is in the trace, one after
        // the other.
        let Some(listed) = trace.listings.get(*dir) else {
            continue;
        };
        let mut times: BTreeMap<&str, usize> = BTreeMap::new();
        for name in listed.iter().filter(|n| keep(n.as_str())) {
            *times.entry(name.as_str()).or_default() += 1;
        }
        let walked: BTreeSet<String> = times.keys().map(|n| n.to_string()).collect();
        let steady = times.values().collect::<BTreeSet<_>>().len() <= 1;
        if !steady {
            out.push(format!(
                "the walk listed {dir} more than once and saw other entries each time"
            ));
        } else if let (Some(a), Some(b)) = (&was, &now)
            && a.names == b.names
            && walked != a.names
        {
            out.push(format!(
                "the walk listed {} entries of {dir} where {} were there before and after it: {}",
                walked.len(),
                a.names.len(),
                difference(&a.names, &walked)
            ));
        }
        let unreached: Vec<&String> = walked
            .iter()
            .filter(|n| *every_entry_read && !trace.visited.contains_key(&format!("{dir}/{n}")))
            .collect();
        if let Some(first) = unreached.first() {
            out.push(format!(
                "{} entr{} of {dir} listed by the walk {} gone before {} read (first {first})",
                unreached.len(),
                if unreached.len() == 1 { "y" } else { "ies" },
                if unreached.len() == 1 { "was" } else { "were" },
                if unreached.len() == 1 {
                    "it was"
                } else {
                    "they were"
                },
            ));
        }
        let gone: Vec<&String> = vanished
            .iter()
            .filter(|p| p.rsplit_once('/').is_some_and(|(parent, _)| parent == *dir))
            .collect();
        if let Some(first) = gone.first() {
            out.push(format!(
                "{} entr{} of {dir} listed by the walk {} gone when the capture was written (first {first})",
                gone.len(),
                if gone.len() == 1 { "y" } else { "ies" },
                if gone.len() == 1 { "was" } else { "were" },
            ));
        }
    }
    for path in seen_as_two {
        out.push(format!("{path} was seen as two kinds of entry"));
    }
    out
}

/// `2 gone, 1 new`: how two sets of entries differ.
fn difference(before: &BTreeSet<String>, after: &BTreeSet<String>) -> String {
    let gone = before.difference(after).count();
    let new = after.difference(before).count();
    match (gone, new) {
        (0, n) => format!("{n} new"),
        (g, 0) => format!("{g} gone"),
        (g, n) => format!("{g} gone, {n} new"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::rooted::Visited;

    fn node(devices: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let pci = dir.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(&pci).unwrap();
        for d in devices {
            std::fs::create_dir(pci.join(d)).unwrap();
        }
        dir
    }

    const A: &str = "0000:18:00.0";
    const B: &str = "0000:2a:00.0";

    /// The walk listed and read both functions of a node that stayed still: nothing to say.
    #[test]
    fn a_still_node_read_whole_says_nothing() {
        let root = node(&[A, B]);
        let fs = RootedFs::new(root.path());
        let before = census(root.path(), &fs);
        let mut trace = Trace::default();
        let dir = "sys/bus/pci/devices";
        trace
            .listings
            .insert(dir.into(), vec![A.into(), B.into(), A.into(), B.into()]);
        for d in [A, B] {
            trace.visited.insert(format!("{dir}/{d}"), Visited::Dir);
        }
        let after = census(root.path(), &fs);
        assert_eq!(
            reasons(&before, &after, &trace, &[], &[]),
            Vec::<String>::new()
        );
    }

    /// A function removed after the first look; one the walk listed but never reached; a
    /// directory replaced; the root replaced.
    #[test]
    fn each_change_is_said() {
        let root = node(&[A, B]);
        let fs = RootedFs::new(root.path());
        let before = census(root.path(), &fs);
        let dir = "sys/bus/pci/devices";
        let mut trace = Trace::default();
        trace.listings.insert(dir.into(), vec![A.into(), B.into()]);
        trace.visited.insert(format!("{dir}/{A}"), Visited::Dir);
        std::fs::remove_dir(root.path().join(dir).join(B)).unwrap();
        let after = census(root.path(), &fs);
        let said = reasons(&before, &after, &trace, &[], &[]);
        assert_eq!(
            said,
            [
                "sys/bus/pci/devices held 2 entries before the walk and 1 after it: 1 gone",
                "1 entry of sys/bus/pci/devices listed by the walk was gone before it was read (first 0000:2a:00.0)",
            ]
        );
        // Removed and put back (a new directory, a new inode).
        let pci = root.path().join(dir);
        std::fs::rename(&pci, root.path().join("old")).unwrap();
        std::fs::create_dir(&pci).unwrap();
        std::fs::create_dir(pci.join(A)).unwrap();
        let later = census(root.path(), &fs);
        assert!(
            reasons(&after, &later, &Trace::default(), &[], &[])
                .contains(&"sys/bus/pci/devices was replaced by another directory".to_string())
        );
        assert_ne!(census(root.path(), &fs).root, None);
        let moved = census(&root.path().join("nowhere"), &fs);
        assert_eq!(
            reasons(&later, &moved, &Trace::default(), &[], &[])[0],
            "the root directory was gone from its path after the walk"
        );
    }
}
