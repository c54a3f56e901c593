//! Helpers shared by the integration tests: fixture discovery, the CLI binary, snapshots.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every fixture directory (one with `.gpudoctor/manifest.json`), sorted by name.
pub fn fixtures() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .expect("fixtures/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.join(".gpudoctor/manifest.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

pub fn gpudoctor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(args)
        .current_dir(repo())
        .env_remove("NO_COLOR")
        .output()
        .expect("gpudoctor runs")
}

/// Compare `actual` with `tests/snapshots/<name>`; `UPDATE_SNAPSHOTS=1` rewrites it. A missing
/// snapshot fails (CI must never bless its own output).
pub fn assert_snapshot(name: &str, actual: &str) {
    let path = repo().join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "snapshot {} is missing: run `UPDATE_SNAPSHOTS=1 cargo test` and review it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "snapshot {} differs at line {}:\n  expected: {:?}\n  actual:   {:?}\nrun `UPDATE_SNAPSHOTS=1 cargo test` if the change is intended",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

pub fn name_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}
