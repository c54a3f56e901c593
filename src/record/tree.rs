//! Rebuilding, in the capture being built, the part of the node's tree the checks saw: each
//! directory, symlink (kept relative) and file visited, and the shape of listed entries no check
//! opened.
//!
//! The node is live and can change while it is walked: a directory swapped for a file or a
//! symlink of the same name (`renameat2(RENAME_EXCHANGE)`, a driver rebinding, a tool rewriting
//! its state) is then seen as one thing by some reads and as another by later ones, and the trace
//! holds a path as a file or a link with entries under it. Such an entry is **left out** and
//! listed among the manifest's unreadable paths, naming the node's path ("the node changed during
//! recording"), instead of failing the record as if `--out` could not be written.
//!
//! Nothing is ever written through a link: every directory on the way to an entry is looked at
//! without following it (`lstat`) and made with `mkdir`, a file is created `O_EXCL` and a link
//! with `symlink(2)`, neither of which follows a link at the last component. A link the walk saw
//! (its target perhaps `../../../..`) is recreated as a link and nothing is written under it, so
//! a write never lands outside the capture.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::{RecordError, excluded, hold, io_err};
use crate::redact::Redactor;
use crate::source::RootedFs;
use crate::source::rooted::{Trace, Visited};

#[derive(Debug, Default)]
pub(super) struct Counts {
    pub files: usize,
    pub links: usize,
    pub dirs: usize,
    pub bytes: u64,
}

/// A path of the node seen as two different things during one recording, and how many entries
/// of the capture were left out because of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Changed {
    /// Root-relative path on the node.
    pub path: String,
    /// `a directory and a file`.
    seen_as: String,
    left_out: usize,
}

impl std::fmt::Display for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the node changed during recording: {} was seen both as {}; {} entr{} left out of the capture (record again once the node is settled)",
            self.path,
            self.seen_as,
            self.left_out,
            if self.left_out == 1 { "y" } else { "ies" }
        )
    }
}

/// What a file-system entry of the capture is, as [`Changed`] says it.
fn kind(meta: &fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_symlink() {
        "a symlink"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "a file"
    }
}

/// The capture being built.
struct Builder<'a> {
    capture: &'a Path,
    counts: Counts,
    /// By the node's path that changed.
    changed: BTreeMap<String, Changed>,
    /// Directories of the capture already made or seen to be real directories (root-relative).
    /// Nothing else writes in the capture's private temporary directory (out.rs, mode 0700).
    dirs: HashSet<String>,
}

impl Builder<'_> {
    fn note(&mut self, path: &str, seen_as: String) {
        self.changed
            .entry(path.to_string())
            .or_insert_with(|| Changed {
                path: path.to_string(),
                seen_as,
                left_out: 0,
            })
            .left_out += 1;
    }

    /// Make the directories above `rel`, none followed if it is a link. `None` (and a note)
    /// when one of them is in the capture as something else: the walk saw it so at another
    /// moment.
    fn parent(&mut self, rel: &str) -> Result<Option<PathBuf>, RecordError> {
        let Some((parent, _)) = rel.rsplit_once('/') else {
            return Ok(Some(self.capture.join(rel)));
        };
        let mut at = 0;
        while at <= parent.len() {
            let end = parent[at..].find('/').map_or(parent.len(), |i| at + i);
            let dir = &parent[..end];
            at = end + 1;
            if self.dirs.contains(dir) {
                continue;
            }
            let path = self.capture.join(dir);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_dir() => {}
                Ok(meta) => {
                    let seen_as = format!("a directory and {}", kind(&meta));
                    self.note(dir, seen_as);
                    return Ok(None);
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    let _writing = hold()?;
                    fs::create_dir(&path).map_err(io_err(&path))?;
                }
                Err(err) => return Err(io_err(&path)(err)),
            }
            self.dirs.insert(dir.to_string());
        }
        Ok(Some(self.capture.join(rel)))
    }

    /// Where `rel` goes when it is not in the capture yet. `None` when it is there already:
    /// as `wanted`, nothing to do; as something else, noted.
    fn target(&mut self, rel: &str, wanted: &str) -> Result<Option<PathBuf>, RecordError> {
        let Some(target) = self.parent(rel)? else {
            return Ok(None);
        };
        match fs::symlink_metadata(&target) {
            Ok(meta) => {
                if kind(&meta) != wanted {
                    self.note(rel, format!("{wanted} and {}", kind(&meta)));
                }
                Ok(None)
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Some(target)),
            Err(err) => Err(io_err(&target)(err)),
        }
    }

    fn dir(&mut self, rel: &str) -> Result<(), RecordError> {
        let Some(target) = self.target(rel, "a directory")? else {
            return Ok(());
        };
        let _writing = hold()?;
        fs::create_dir(&target).map_err(io_err(&target))?;
        self.dirs.insert(rel.to_string());
        self.counts.dirs += 1;
        Ok(())
    }

    /// A symlink; an absolute target (possible only when the root is `/`) becomes relative so
    /// the capture stays self-contained.
    fn link(&mut self, rel: &str, link_target: &str) -> Result<(), RecordError> {
        let Some(target) = self.target(rel, "a symlink")? else {
            return Ok(());
        };
        let relative = if let Some(stripped) = link_target.strip_prefix('/') {
            let depth = rel.matches('/').count();
            format!("{}{stripped}", "../".repeat(depth))
        } else {
            link_target.to_string()
        };
        let _writing = hold()?;
        symlink(&relative, &target).map_err(io_err(&target))?;
        self.counts.links += 1;
        Ok(())
    }

    fn file(&mut self, rel: &str, bytes: &[u8]) -> Result<(), RecordError> {
        let Some(target) = self.target(rel, "a file")? else {
            return Ok(());
        };
        let _writing = hold()?;
        // `create_new`: O_EXCL, which never follows a link at the last component.
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(io_err(&target))?;
        self.counts.files += 1;
        self.counts.bytes += bytes.len() as u64;
        Ok(())
    }
}

/// What [`materialize`] wrote, and what of the node it found changed.
#[derive(Debug)]
pub(super) struct Materialized {
    pub counts: Counts,
    /// Paths of the node seen as two kinds of entry (their entries left out).
    pub changed: Vec<Changed>,
    /// Entries the walk listed that were gone when their shape was copied (root-relative).
    pub vanished: Vec<String>,
}

/// Rebuild the traced part of the tree under `capture`.
pub(super) fn materialize(
    trace: &Trace,
    live: &RootedFs,
    capture: &Path,
    mut redactor: Option<&mut Redactor>,
) -> Result<Materialized, RecordError> {
    let mut tree = Builder {
        capture,
        counts: Counts::default(),
        changed: BTreeMap::new(),
        dirs: HashSet::new(),
    };
    for (path, kind) in &trace.visited {
        if excluded(path) || path.is_empty() {
            continue;
        }
        match kind {
            Visited::Dir => tree.dir(path)?,
            Visited::Link(link_target) => tree.link(path, link_target)?,
            Visited::File | Visited::Special => {
                let bytes = trace.contents.get(path).cloned().unwrap_or_default();
                let bytes = match (redactor.as_deref_mut(), String::from_utf8(bytes)) {
                    (Some(r), Ok(text)) => r.redact_file(path, &text).into_bytes(),
                    (_, Ok(text)) => text.into_bytes(),
                    (_, Err(raw)) => raw.into_bytes(),
                };
                tree.file(path, &bytes)?;
            }
        }
    }
    // Entries of listed directories that no check opened: recreate their shape, not content.
    // Looked at through the rooted reader: never by a path that could lead out of the root.
    let mut vanished = std::collections::BTreeSet::new();
    for (dir, names) in &trace.listings {
        for name in names {
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            if excluded(&path) || trace.visited.contains_key(&path) {
                continue;
            }
            if capture.join(&path).symlink_metadata().is_ok() {
                continue;
            }
            match live.entry_kind(&path) {
                Ok(Visited::Link(link_target)) => tree.link(&path, &link_target)?,
                Ok(Visited::Dir) => tree.dir(&path)?,
                Ok(Visited::File | Visited::Special) => tree.file(&path, b"")?,
                // Listed by the walk, gone now: the node changed (`changes.rs` judges where).
                Err(err) if err.is_missing() => {
                    vanished.insert(path);
                }
                Err(_) => {}
            }
        }
    }
    Ok(Materialized {
        counts: tree.counts,
        changed: tree.changed.into_values().collect(),
        vanished: vanished.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(visited: &[(&str, Visited)]) -> Trace {
        let mut trace = Trace::default();
        for (path, kind) in visited {
            trace.visited.insert(path.to_string(), kind.clone());
        }
        trace
    }

    /// A directory seen as a file by a later read: its entries are left out and the path is
    /// named, not an error about the output.
    #[test]
    fn a_path_seen_as_a_file_and_a_directory_is_named_and_its_entries_left_out() {
        let root = tempfile::tempdir().unwrap();
        let capture = tempfile::tempdir().unwrap();
        let trace = trace(&[
            ("sys", Visited::Dir),
            ("sys/bus", Visited::File),
            ("sys/bus/a", Visited::File),
            ("sys/bus/b", Visited::Link("../x".into())),
            ("sys/ok", Visited::File),
        ]);
        let Materialized {
            counts, changed, ..
        } = materialize(&trace, &RootedFs::new(root.path()), capture.path(), None).unwrap();
        assert_eq!(counts.files, 2);
        assert_eq!(changed.len(), 1, "{changed:?}");
        let said = changed[0].to_string();
        assert!(
            said.starts_with("the node changed during recording: sys/bus was seen both as a directory and a file; 2 entries left out"),
            "{said}"
        );
    }

    /// A directory recreated as the symlink it was swapped for: nothing is written through
    /// the link, even where it leads out of the capture.
    #[test]
    fn nothing_is_written_through_a_link_in_the_capture() {
        let root = tempfile::tempdir().unwrap();
        let outer = tempfile::tempdir().unwrap();
        let capture = outer.path().join("cap");
        fs::create_dir(&capture).unwrap();
        let trace = trace(&[
            ("sys", Visited::Dir),
            ("sys/devices", Visited::Link("../../escape".into())),
            ("sys/devices/gpu", Visited::Dir),
            ("sys/devices/gpu/vendor", Visited::File),
        ]);
        let changed = materialize(&trace, &RootedFs::new(root.path()), &capture, None)
            .unwrap()
            .changed;
        assert!(!outer.path().join("escape").exists());
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert!(
            changed[0]
                .to_string()
                .contains("sys/devices was seen both as a directory and a symlink; 2 entries"),
            "{}",
            changed[0]
        );
    }
}
