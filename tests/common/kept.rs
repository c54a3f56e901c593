//! Composed fixture trees (`complete`, `live_root`), kept between runs.
//!
//! A composed tree is directories, symlinks and hard links to the fixtures' files: making one
//! creates about a thousand inodes, and on the ext4 this project's machines run (no journal:
//! each new inode is looked for past the recently deleted ones, `recently_deleted()` in
//! fs/ext4/ialloc.c) that was the largest share of the suite's system time when every test
//! binary composed every tree again. A tree of a repository fixture is therefore kept under
//! `target/tmp/kept-trees/<kind>/<fixture>-<fingerprint>/` and reused by every test binary and
//! every later run while the fixture (and its bases) are unchanged: the fingerprint covers
//! every entry's path, type, inode, size, modification time and link target, so an edited,
//! replaced, added or removed file makes a new tree and the old one is removed. A tree is
//! built under a private name and renamed into place whole, so two runs at once never see a
//! half-made one. Trees of anything else (a test's scratch root) are made once per process
//! under `kept-trees/run-<pid>/` and removed by the next run.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The tree `make` builds from `fixture` for `kind`: kept across runs for a repository
/// fixture, once per process otherwise.
pub fn kept(kind: &str, fixture: &Path, make: impl FnOnce(&Path)) -> PathBuf {
    static DONE: OnceLock<Mutex<HashMap<(String, PathBuf), PathBuf>>> = OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    let key = (kind.to_string(), fixture.to_path_buf());
    if let Some(found) = done.lock().unwrap().get(&key) {
        return found.clone();
    }
    let name = super::name_of(fixture);
    let fixtures = super::repo().join("fixtures");
    if fixture.parent() == Some(fixtures.as_path()) {
        // Not under the lock: a sweep's threads fingerprint and build different fixtures'
        // trees at once (two building one tree is safe: `shared` renames one into place).
        let to = shared(kind, fixture, &name, make);
        done.lock().unwrap().insert(key, to.clone());
        return to;
    }
    let mut done = done.lock().unwrap();
    if let Some(found) = done.get(&key) {
        return found.clone();
    }
    // Numbered (two scratch roots may share a name, `node`); the tree keeps the name.
    let to = run_dir().join(done.len().to_string()).join(&name);
    make(&to);
    done.insert(key, to.clone());
    to
}

fn trees() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("kept-trees")
}

/// This process's folder for trees of scratch roots; folders of runs that have ended (and
/// the per-binary folders of the layout before this one) are removed first.
fn run_dir() -> &'static Path {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let _ =
            std::fs::remove_dir_all(Path::new(env!("CARGO_TARGET_TMPDIR")).join("kept-fixtures"));
        for entry in std::fs::read_dir(trees()).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name.strip_prefix("run-").or_else(|| {
                name.strip_prefix("building-")
                    .and_then(|n| n.split('-').next())
            });
            if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = trees().join(format!("run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// A repository fixture's tree, kept under its fingerprint.
fn shared(kind: &str, fixture: &Path, name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    run_dir(); // tidies what ended runs left
    let family = trees().join(kind);
    let home = family.join(format!("{name}-{:016x}", fingerprint(fixture)));
    let tree = home.join(name);
    if home.join(".complete").is_file() {
        return tree;
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let building = trees().join(format!("building-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    make(&building.join(name));
    std::fs::write(building.join(".complete"), b"").unwrap();
    std::fs::create_dir_all(&family).unwrap();
    // Trees of this fixture under an older fingerprint are stale.
    for entry in std::fs::read_dir(&family).into_iter().flatten().flatten() {
        let other = entry.file_name().to_string_lossy().into_owned();
        let stale = other
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|fp| fp.len() == 16 && fp.chars().all(|c| c.is_ascii_hexdigit()));
        if stale && entry.path() != home {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    if std::fs::rename(&building, &home).is_err() {
        // Another run put the same tree in place first: use that one.
        let _ = std::fs::remove_dir_all(&building);
        assert!(home.join(".complete").is_file(), "{}", home.display());
    }
    tree
}

/// What a composed tree of `fixture` depends on: every entry of it and of its bases.
fn fingerprint(fixture: &Path) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut at = fixture.to_path_buf();
    for _ in 0..8 {
        entries_hash(&at).hash(&mut hasher);
        let manifest =
            std::fs::read_to_string(at.join(".gpudoctor/manifest.json")).unwrap_or_default();
        let base = serde_json::from_str::<serde_json::Value>(&manifest)
            .ok()
            .and_then(|m| m.get("base").and_then(|b| b.as_str()).map(str::to_string));
        match base {
            Some(base) => at = at.parent().unwrap().join(base),
            None => break,
        }
    }
    hasher.finish()
}

/// The hash of every entry under the fixture directory `dir`, walked once per process: the
/// tests never write in `fixtures/`, and a base (the H100 node's 3 300 entries) is under dozens
/// of overlays, whose trees each sweep asks for (issue 41: `record`'s fixtures walked it 700
/// times, a tenth of the suite's system time).
fn entries_hash(dir: &Path) -> u64 {
    static WALKED: OnceLock<Mutex<HashMap<PathBuf, u64>>> = OnceLock::new();
    let walked = WALKED.get_or_init(Default::default);
    if let Some(hash) = walked.lock().unwrap().get(dir) {
        return *hash;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    walk(dir, dir, &mut hasher);
    let hash = hasher.finish();
    walked.lock().unwrap().insert(dir.to_path_buf(), hash);
    hash
}

fn walk(top: &Path, dir: &Path, hasher: &mut impl Hasher) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let meta = path.symlink_metadata().unwrap();
        path.strip_prefix(top).unwrap().hash(hasher);
        (
            meta.mode(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
        )
            .hash(hasher);
        if meta.file_type().is_symlink() {
            std::fs::read_link(&path).unwrap().hash(hasher);
        } else if meta.is_dir() {
            walk(top, &path, hasher);
        }
    }
}
