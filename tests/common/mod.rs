//! Helpers shared by the integration tests: fixture discovery, the CLI binary, snapshots.
#![allow(dead_code)]

pub mod kubelet;
pub mod node;

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Copy a tree (a fixture into a scratch directory), symlinks kept as links. An overlay fixture
/// (docs/fixtures.md) is copied composed with its bases, as a complete capture whose manifest
/// names no base (the copy has no siblings to find them by). The composing here is the tests'
/// own — base copied, removals taken out, the overlay copied over — independent of
/// `source/overlay.rs`, which tests/overlays.rs and the snapshots check against it.
pub fn copy_tree(from: &Path, to: &Path) {
    let manifest_path = from.join(".gpudoctor/manifest.json");
    let manifest: Option<serde_json::Value> = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let Some(base) = manifest
        .as_ref()
        .and_then(|m| m.get("base"))
        .and_then(|b| b.as_str())
    else {
        copy_plain(from, to);
        return;
    };
    copy_tree(&from.parent().unwrap().join(base), to);
    let manifest = manifest.unwrap();
    for gone in manifest["removes"].as_array().into_iter().flatten() {
        let path = to.join(gone.as_str().unwrap());
        let meta = path.symlink_metadata().unwrap();
        if meta.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    copy_plain(from, to);
    let mut manifest = manifest;
    if let Some(m) = manifest.as_object_mut() {
        m.remove("base");
        m.remove("removes");
    }
    let text = serde_json::to_string_pretty(&manifest).unwrap() + "\n";
    std::fs::write(to.join(".gpudoctor/manifest.json"), text).unwrap();
}

/// A fixture as a complete tree, composed once per test binary when it is an overlay: for
/// tests that read its files by path (a stand-in library pointed at its `nvml.json`, a live run
/// with `--root`). Kept until the test binary exits.
pub fn complete(fixture: &Path) -> PathBuf {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static DONE: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    // Under cargo's scratch directory for tests, one folder per test binary, emptied on its
    // first use in a run: nothing is left in /tmp, and binaries never share one.
    static KEEP: OnceLock<PathBuf> = OnceLock::new();
    let manifest = fixture.join(".gpudoctor/manifest.json");
    let is_overlay = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v.get("base").is_some());
    if !is_overlay {
        return fixture.to_path_buf();
    }
    let mut done = DONE.get_or_init(Default::default).lock().unwrap();
    if let Some(found) = done.get(fixture) {
        return found.clone();
    }
    let keep = KEEP.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let binary = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("complete-fixtures")
            .join(binary);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    let to = keep.join(name_of(fixture));
    copy_tree(fixture, &to);
    done.insert(fixture.to_path_buf(), to.clone());
    to
}

/// Copy `from` over `to`: directories merge, anything else replaces what is there.
fn copy_plain(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if let Ok(there) = target.symlink_metadata()
            && (!kind.is_dir() || !there.is_dir())
        {
            if there.is_dir() {
                std::fs::remove_dir_all(&target).unwrap();
            } else {
                std::fs::remove_file(&target).unwrap();
            }
        }
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else if kind.is_dir() {
            copy_plain(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The environment variable naming the `nvml.json` the stand-in NVML library answers from.
pub const FAKE_NVML_JSON: &str = "GPUDOCTOR_FAKE_NVML_JSON";

/// Build the stand-in `libnvidia-ml` (tests/fake-nvml) once per test binary, in its own target
/// directory so it never waits on the lock of the `cargo test` that runs this.
pub fn fake_nvml_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| build_fake_nvml("target/fake-nvml", &[]))
}

/// The same stand-in built as an old driver (`--features old-driver`): without
/// `nvmlDeviceGetGpuFabricInfoV` and `nvmlDeviceGetCurrentClocksEventReasons`, so the probe's
/// fallbacks run. Its own target directory, so both builds can sit side by side.
pub fn fake_nvml_old_driver_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        build_fake_nvml("target/fake-nvml-old-driver", &["--features", "old-driver"])
    })
}

/// The environment variable naming the `cuda.json` the stand-in CUDA library answers from.
pub const FAKE_CUDA_JSON: &str = "GPUDOCTOR_FAKE_CUDA_JSON";

/// Build the stand-in `libcuda` (tests/fake-cuda) once per test binary, in its own target
/// directory.
pub fn fake_cuda_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| build_stand_in("fake-cuda", "target/fake-cuda", "cuda_fake", &[]))
}

/// The stand-in `ib_write_bw` (a shell script answering from `GPUDOCTOR_FAKE_PERFTEST`).
pub fn fake_perftest_dir() -> PathBuf {
    repo().join("tests/data/perftest/fake")
}

fn build_fake_nvml(target_dir: &str, extra: &[&str]) -> PathBuf {
    build_stand_in("fake-nvml", target_dir, "nvidia_ml_fake", extra)
}

fn build_stand_in(package: &str, target_dir: &str, lib_name: &str, extra: &[&str]) -> PathBuf {
    {
        let repo = repo();
        let target = repo.join(target_dir);
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "-p", package, "--locked"])
            .args(extra)
            .arg("--target-dir")
            .arg(&target)
            .current_dir(&repo)
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "building tests/{package} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = target
            .join("debug")
            .join(format!("{DLL_PREFIX}{lib_name}{DLL_SUFFIX}"));
        assert!(lib.is_file(), "{} was not built", lib.display());
        lib
    }
}

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

/// Was this fixture recorded with `record --sample` (a first counter reading in
/// `.gpudoctor/sample.json`)? Its verdict is the window's: a live run of its tree reads the
/// counters once, so live-vs-replay comparisons leave it out (tests/time_paths.rs and
/// tests/rerecord.rs cover the window's replay).
pub fn has_sample_window(fixture: &Path) -> bool {
    fixture.join(".gpudoctor/sample.json").is_file()
}

pub fn gpudoctor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(args)
        .current_dir(repo())
        .env_remove("NO_COLOR")
        // Output into a pipe is unwrapped unless COLUMNS says a width (text/wrap.rs): a
        // COLUMNS exported by the shell running the tests must not change what they compare.
        .env_remove("COLUMNS")
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

/// `../shared/real-captures` beside the repository (hwloc's recorded machines, in CI), or `None`
/// locally when it is not there — said on stderr so a skip is never silent. With `CI=true` a
/// missing folder fails the test naming the path: a clone in the wrong place must not pass
/// without running the real-capture tests.
pub fn real_captures_dir() -> Option<PathBuf> {
    shared_data(&repo().join("../shared/real-captures"))
}

/// `path` under `../shared` when it is there; otherwise a panic under `CI=true`, a printed
/// notice and `None` elsewhere.
pub fn shared_data(path: &Path) -> Option<PathBuf> {
    shared_data_in(path, on_ci())
}

/// [`shared_data`] with the CI flag given (so a test can exercise both without touching the
/// process environment).
pub fn shared_data_in(path: &Path, ci: bool) -> Option<PathBuf> {
    if path.exists() {
        return Some(path.to_path_buf());
    }
    assert!(
        !ci,
        "{} is missing: CI=true runs the real-capture tests, and they need it (lay shared/ beside the repository)",
        path.display()
    );
    eprintln!(
        "note: {} is missing; test skipped (it fails under CI=true)",
        path.display()
    );
    None
}

/// `CI=true` (any case) or `CI=1`, as CI services set it.
pub fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}
