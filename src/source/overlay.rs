//! Fixtures as overlays: a hand-edited fixture holds only what differs from its base.
//!
//! Its `.gpudoctor/manifest.json` names the base — `"base": "hgx-h100-healthy"`, a sibling
//! directory by name, never a path — and may list root-relative paths it takes away
//! (`"removes": ["sys/class/infiniband/mlx5_3"]`). Its tree holds the files it changes or adds,
//! `.gpudoctor/` probe answers included; its manifest is always its own. A base may itself have
//! a base, at most [`MAX_BASES`] deep; a name seen twice in one chain is a loop.
//!
//! Replay composes the chain into a private temporary tree before reading it: the deepest base
//! first, then each overlay above it, its removals applied before its files are laid over. A
//! file of an upper layer replaces one below; directories merge; a removed path is absent with
//! everything under it; a symlink then resolves in the composed tree exactly as it would in a
//! complete capture, and the rooted reader refuses one that leaves it, as for any root. The
//! composition reads each layer through directory descriptors, never following a link (a base
//! that is a symlink, a link inside a layer, are taken as what they are, not followed), so it
//! reads nothing outside the fixtures directory; files are hard-linked where the filesystem
//! allows, else copied, within the same limits as an unpacked archive.
//!
//! Recorded captures and `.tar.gz` files are always complete trees: `record` of an overlay
//! writes the composed tree, and an archive whose manifest names a base is refused
//! (`record/unpack.rs`), since it has no siblings.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use super::MANIFEST;
use super::rooted::{RootedFs, fd};
use crate::process::signals::{TempRegistration, register_temp};

/// Most bases under one overlay: a fixture, its base, that base's base, ... A chain longer than
/// this is refused (no fixture needs more than two).
pub const MAX_BASES: usize = 4;
/// Limits of one composition, as for an unpacked archive (`record/unpack.rs`).
const MAX_ENTRIES: u64 = 200_000;
const MAX_FILE_BYTES: u64 = 64 << 20;
const MAX_TOTAL_BYTES: u64 = 1 << 30;

/// Why an overlay fixture cannot be composed: it names the fixture and says what to fix.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{root}: {why}")]
pub struct OverlayError {
    pub root: String,
    pub why: String,
}

/// A composed overlay: the complete tree, removed when dropped (and on SIGINT/SIGTERM/SIGHUP,
/// `process/signals.rs`).
#[derive(Debug)]
pub struct Composed {
    // Field order: unregistered after the directory is gone.
    dir: tempfile::TempDir,
    _registration: TempRegistration,
    /// The base's directories no layer above touches, read in place (`rooted/graft.rs`).
    grafts: Vec<(String, Arc<OwnedFd>)>,
}

impl Composed {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A reader of the composed tree, its grafts included.
    pub fn fs(&self) -> RootedFs {
        RootedFs::new(self.path()).with_grafts(self.grafts.clone())
    }
}

/// One layer of the chain, opened: its directory descriptor and what it removes below it.
struct Layer {
    name: String,
    dir: OwnedFd,
    removes: Vec<String>,
}

/// The manifest's `base`, when `root` is a capture that names one.
pub fn base_of(fs: &RootedFs) -> Result<Option<String>, String> {
    let Ok(text) = fs.read_to_string(MANIFEST) else {
        return Ok(None);
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    match value.get("base") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(name)) => Ok(Some(name.clone())),
        Some(other) => Err(format!(
            "{MANIFEST}: \"base\" must be the name of a sibling fixture, not {other}"
        )),
    }
}

/// Compose `root` with its bases when its manifest names one; `None` for a complete tree.
pub fn compose(root: &Path) -> Result<Option<Composed>, OverlayError> {
    let shown = root.display().to_string();
    let fail = |why: String| OverlayError {
        root: shown.clone(),
        why,
    };
    let top = fd::open_root(root).map_err(|e| fail(format!("cannot open: {e}")))?;
    let Some(_) = base_of(&layer_fs(&top)).map_err(&fail)? else {
        return Ok(None);
    };
    let parent_path = match root.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = fd::open_root(&parent_path).map_err(|e| {
        fail(format!(
            "cannot open its directory {}: {e}",
            parent_path.display()
        ))
    })?;
    let own_name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.clone());
    let chain = open_chain(top, own_name, parent.as_fd()).map_err(&fail)?;
    // Watched before the tree exists, so a signal never finds it made and not yet registered.
    crate::process::signals::ensure_watcher();
    let dir = tempfile::Builder::new()
        .prefix(".gpudoctor-overlay-")
        .tempdir()
        .map_err(|e| fail(format!("cannot make a temporary directory: {e}")))?;
    let mut composed = Composed {
        _registration: register_temp(dir.path()),
        dir,
        grafts: Vec::new(),
    };
    let mut budget = Budget::default();
    let listing = |layer: &Layer| {
        fd::open_one(
            layer.dir.as_fd(),
            OsStr::new("."),
            libc::O_RDONLY | libc::O_DIRECTORY,
        )
        .map_err(|e| fail(format!("layer {}: cannot list: {e}", layer.name)))
    };
    // Every path a layer above the deepest base writes or removes, with its ancestors: only
    // those directories of the base are made in the composed tree; the rest are grafted.
    let (deepest, above) = chain.split_last().expect("a chain holds its own fixture");
    let mut touched = BTreeSet::new();
    for layer in above {
        collect_paths(&listing(layer)?, "", &mut touched, &mut budget)
            .map_err(|why| fail(format!("layer {}: {why}", layer.name)))?;
        for path in &layer.removes {
            add_with_ancestors(&mut touched, path);
        }
    }
    let mut grafts = Vec::new();
    graft_over(
        &listing(deepest)?,
        composed.path(),
        "",
        &touched,
        &mut grafts,
        &mut budget,
    )
    .map_err(|why| fail(format!("layer {}: {why}", deepest.name)))?;
    composed.grafts = grafts;
    // Each layer above, from the deepest up: its removals, then its files over.
    for layer in above.iter().rev() {
        for path in &layer.removes {
            remove(composed.path(), path)
                .map_err(|why| fail(format!("layer {}: removes {path:?}: {why}", layer.name)))?;
        }
        lay_over(&listing(layer)?, composed.path(), "", &mut budget)
            .map_err(|why| fail(format!("layer {}: {why}", layer.name)))?;
    }
    Ok(Some(composed))
}

/// A rooted reader of an open layer directory (through `/proc/self/fd`, so it reads the
/// directory opened, whatever its name points at by now).
fn layer_fs(dir: &OwnedFd) -> RootedFs {
    RootedFs::new(format!("/proc/self/fd/{}", dir.as_raw_fd()))
}

/// The overlay and its bases, top first, each opened as a sibling of `parent` by name.
fn open_chain(
    top: OwnedFd,
    own_name: String,
    parent: BorrowedFd<'_>,
) -> Result<Vec<Layer>, String> {
    let mut chain: Vec<Layer> = Vec::new();
    let mut dir = top;
    let mut name = own_name;
    loop {
        let fs = layer_fs(&dir);
        let removes = removes_of(&fs).map_err(|why| format!("layer {name}: {why}"))?;
        let base = base_of(&fs).map_err(|why| format!("layer {name}: {why}"))?;
        chain.push(Layer {
            name: name.clone(),
            dir,
            removes,
        });
        let Some(base) = base else {
            return Ok(chain);
        };
        check_name(&base).map_err(|why| format!("layer {name}: base {base:?}: {why}"))?;
        if chain.iter().any(|l| l.name == base) {
            let names: Vec<&str> = chain.iter().map(|l| l.name.as_str()).collect();
            return Err(format!(
                "its bases go round in a loop ({} -> {base}); a base must be a complete tree or \
                 lead to one",
                names.join(" -> ")
            ));
        }
        if chain.len() > MAX_BASES {
            return Err(format!(
                "more than {MAX_BASES} bases deep ({} -> {base}); make a nearer fixture a \
                 complete tree",
                chain
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" -> ")
            ));
        }
        // A sibling directory by name, the name itself never followed if it is a link.
        dir = fd::open_one(parent, OsStr::new(&base), libc::O_PATH | libc::O_DIRECTORY).map_err(
            |e| match e.raw_os_error() {
                Some(libc::ENOENT) => format!(
                    "layer {name}: its base {base:?} is not a fixture beside it (no directory {base} next to {name})"
                ),
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => format!(
                    "layer {name}: its base {base:?} is not a directory beside it (a symlink or a file); refused"
                ),
                _ => format!("layer {name}: cannot open its base {base:?}: {e}"),
            },
        )?;
        name = base;
    }
}

/// A base is named, not addressed: one plain directory name.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name == "." || name == ".." {
        Err("not a fixture name")
    } else if name.contains('/') || name.contains('\0') {
        Err("a base is a sibling fixture's name, never a path")
    } else {
        Ok(())
    }
}

/// The manifest's `removes`: root-relative paths, each plain (no `..`, `.`, empty or absolute
/// component).
fn removes_of(fs: &RootedFs) -> Result<Vec<String>, String> {
    let Ok(text) = fs.read_to_string(MANIFEST) else {
        return Ok(Vec::new());
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{MANIFEST} does not parse: {e}"))?;
    let Some(list) = value.get("removes") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| format!("{MANIFEST}: \"removes\" must be a list of root-relative paths"))?;
    list.iter()
        .map(|v| {
            let path = v
                .as_str()
                .ok_or_else(|| format!("{MANIFEST}: \"removes\" holds {v}, not a path"))?;
            let plain = !path.is_empty()
                && Path::new(path)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if plain {
                Ok(path.to_string())
            } else {
                Err(format!(
                    "{MANIFEST}: \"removes\" names {path:?}; each must be a plain root-relative path"
                ))
            }
        })
        .collect()
}

#[derive(Default)]
struct Budget {
    entries: u64,
    bytes: u64,
}

/// Take `path` (root-relative) out of the composed tree under `top`. Every component above the
/// last must be a directory there: a path through a symlink would remove what the link points
/// at, which may be outside the tree.
fn remove(top: &Path, path: &str) -> Result<(), String> {
    let mut at = top.to_path_buf();
    let parts: Vec<&OsStr> = Path::new(path).iter().collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let meta = at.symlink_metadata().map_err(|_| {
            "its bases do not have it (a stale entry: take it out of the list)".to_string()
        })?;
        let last = i + 1 == parts.len();
        if !last && !meta.is_dir() {
            return Err(format!(
                "{} is not a directory in the bases (a symlink or a file): name the path it leads to",
                Path::new(path)
                    .iter()
                    .take(i + 1)
                    .collect::<PathBuf>()
                    .display()
            ));
        }
        if last {
            let removed = if meta.is_dir() {
                std::fs::remove_dir_all(&at)
            } else {
                std::fs::remove_file(&at)
            };
            removed.map_err(|e| format!("cannot remove: {e}"))?;
        }
    }
    Ok(())
}

/// Lay the directory `src` (open for listing) over `dst` in the composed tree: directories
/// merge, anything else replaces what was there.
fn lay_over(src: &OwnedFd, dst: &Path, rel: &str, budget: &mut Budget) -> Result<(), String> {
    let mut names = fd::list(src).map_err(|e| format!("{}: cannot list: {e}", shown(rel)))?;
    names.sort();
    for name in names {
        count(budget)?;
        let child_rel = join_rel(rel, &name);
        let st = fd::stat_one(src.as_fd(), &name).map_err(|e| format!("{child_rel}: {e}"))?;
        let target = dst.join(&name);
        let existing = target.symlink_metadata().ok();
        if fd::is_dir(&st) {
            if existing.as_ref().is_some_and(|m| !m.is_dir()) {
                std::fs::remove_file(&target).map_err(|e| format!("{child_rel}: {e}"))?;
            }
            if !existing.as_ref().is_some_and(|m| m.is_dir()) {
                make_dir(&target).map_err(|e| format!("{child_rel}: {e}"))?;
            }
            let sub = fd::open_one(src.as_fd(), &name, libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(|e| format!("{child_rel}: {e}"))?;
            lay_over(&sub, &target, &child_rel, budget)?;
            continue;
        }
        if let Some(meta) = &existing {
            let cleared = if meta.is_dir() {
                std::fs::remove_dir_all(&target)
            } else {
                std::fs::remove_file(&target)
            };
            cleared.map_err(|e| format!("{child_rel}: {e}"))?;
        }
        place(src, &name, &st, &target, &child_rel, budget)?;
    }
    Ok(())
}

/// The link or file `name` of `src` at `target` (nothing there yet).
fn place(
    src: &OwnedFd,
    name: &OsStr,
    st: &libc::stat,
    target: &Path,
    rel: &str,
    budget: &mut Budget,
) -> Result<(), String> {
    if fd::is_link(st) {
        let link = fd::read_link(src.as_fd(), name).map_err(|e| format!("{rel}: {e}"))?;
        std::os::unix::fs::symlink(&link, target).map_err(|e| format!("{rel}: {e}"))
    } else if fd::is_file(st) {
        let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
        if size > MAX_FILE_BYTES {
            return Err(format!(
                "{rel}: {size} bytes, more than {MAX_FILE_BYTES}; refused"
            ));
        }
        budget.bytes += size;
        if budget.bytes > MAX_TOTAL_BYTES {
            return Err(format!("more than {MAX_TOTAL_BYTES} bytes; refused"));
        }
        place_file(src.as_fd(), name, target).map_err(|e| format!("{rel}: {e}"))
    } else {
        Err(format!(
            "{rel}: a {}, not a file, directory or symlink; a fixture holds only those",
            fd::kind_name(st)
        ))
    }
}

/// `path` and every directory above it.
fn add_with_ancestors(set: &mut BTreeSet<String>, path: &str) {
    let mut at = String::new();
    for part in path.split('/') {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        set.insert(at.clone());
    }
}

fn count(budget: &mut Budget) -> Result<(), String> {
    budget.entries += 1;
    if budget.entries > MAX_ENTRIES {
        return Err(format!("more than {MAX_ENTRIES} entries; refused"));
    }
    Ok(())
}

/// Every entry path of a layer's tree (links not followed) into `set`, with its ancestors.
fn collect_paths(
    src: &OwnedFd,
    rel: &str,
    set: &mut BTreeSet<String>,
    budget: &mut Budget,
) -> Result<(), String> {
    for name in fd::list(src).map_err(|e| format!("{}: cannot list: {e}", shown(rel)))? {
        count(budget)?;
        let child_rel = join_rel(rel, &name);
        add_with_ancestors(set, &child_rel);
        let st = fd::stat_one(src.as_fd(), &name).map_err(|e| format!("{child_rel}: {e}"))?;
        if fd::is_dir(&st) {
            let sub = fd::open_one(src.as_fd(), &name, libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(|e| format!("{child_rel}: {e}"))?;
            collect_paths(&sub, &child_rel, set, budget)?;
        }
    }
    Ok(())
}

/// Lay the deepest base under `dst`: the directories in `touched` made and descended into,
/// every other directory made empty and grafted (read in place from the base), files and
/// links placed as [`lay_over`] places them.
fn graft_over(
    src: &OwnedFd,
    dst: &Path,
    rel: &str,
    touched: &BTreeSet<String>,
    grafts: &mut Vec<(String, Arc<OwnedFd>)>,
    budget: &mut Budget,
) -> Result<(), String> {
    for name in fd::list(src).map_err(|e| format!("{}: cannot list: {e}", shown(rel)))? {
        count(budget)?;
        let child_rel = join_rel(rel, &name);
        let st = fd::stat_one(src.as_fd(), &name).map_err(|e| format!("{child_rel}: {e}"))?;
        let target = dst.join(&name);
        if !fd::is_dir(&st) {
            place(src, &name, &st, &target, &child_rel, budget)?;
            continue;
        }
        make_dir(&target).map_err(|e| format!("{child_rel}: {e}"))?;
        if touched.contains(&child_rel) {
            let sub = fd::open_one(src.as_fd(), &name, libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(|e| format!("{child_rel}: {e}"))?;
            graft_over(&sub, &target, &child_rel, touched, grafts, budget)?;
        } else {
            let at = fd::open_one(src.as_fd(), &name, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| format!("{child_rel}: {e}"))?;
            grafts.push((child_rel, Arc::new(at)));
        }
    }
    Ok(())
}

fn join_rel(rel: &str, name: &OsStr) -> String {
    if rel.is_empty() {
        name.to_string_lossy().into_owned()
    } else {
        format!("{rel}/{}", name.to_string_lossy())
    }
}

fn shown(rel: &str) -> &str {
    if rel.is_empty() { "its top" } else { rel }
}

fn make_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

/// The file `name` of `dir` at `target`: a hard link to it (no bytes copied, never a link
/// followed), or where the filesystem refuses one (another filesystem, a file not ours under
/// `protected_hardlinks`), a copy read through a descriptor opened without following links.
fn place_file(dir: BorrowedFd<'_>, name: &OsStr, target: &Path) -> io::Result<()> {
    let c_name = std::ffi::CString::new(name.as_bytes()).map_err(io::Error::other)?;
    let c_target =
        std::ffi::CString::new(target.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: both paths are NUL-terminated; `dir` is open for the call; flags 0: the source
    // is not followed if it is a link (it is a regular file here, looked at just before).
    let linked = unsafe {
        libc::linkat(
            dir.as_raw_fd(),
            c_name.as_ptr(),
            libc::AT_FDCWD,
            c_target.as_ptr(),
            0,
        )
    };
    if linked == 0 {
        return Ok(());
    }
    let mut from = std::fs::File::from(fd::open_one(dir, name, libc::O_RDONLY)?);
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(target)?;
    let mut buf = Vec::new();
    (&mut from).take(MAX_FILE_BYTES + 1).read_to_end(&mut buf)?;
    to.write_all(&buf)
}
