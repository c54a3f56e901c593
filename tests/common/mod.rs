//! Helpers shared by the integration tests: fixture discovery, the CLI binary, snapshots.
#![allow(dead_code)]

pub mod before_main;
mod kept;
pub mod kubelet;
pub mod live;
pub mod nccl_logs;
pub mod node;
pub mod parallel;
pub mod scratch;

use kept::kept;

#[allow(unused_imports)]
pub(crate) use before_main::tests_mostly_wait;
// Not every test binary makes a FIFO; `dead_code` does not cover an unused re-export.
#[allow(unused_imports)]
pub use scratch::make_fifo;
pub use scratch::tempdir;

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Copy a tree (a fixture into a scratch directory), symlinks kept as links. An overlay fixture
/// (docs/fixtures.md) is copied composed with its bases, as a complete capture whose manifest
/// names no base (the copy has no siblings to find them by). The composing here is the tests'
/// own — base copied, removals taken out, the overlay copied over — independent of
/// `source/overlay.rs`, which tests/overlays.rs and the snapshots check against it. The copy is
/// the test's to change.
pub fn copy_tree(from: &Path, to: &Path) {
    compose_tree(from, to, Files::Copy);
}

/// [`copy_tree`] with hard links for files: for a scratch tree the test only reads, or prunes
/// (removes files from, adds new ones to), never writes into.
pub fn link_tree(from: &Path, to: &Path) {
    compose_tree(from, to, Files::Link);
}

/// How [`compose_tree`] puts a file in place.
#[derive(Clone, Copy, PartialEq)]
enum Files {
    /// A copy of its own: the test may write into it.
    Copy,
    /// A hard link to the fixture's file: five times faster than a copy of a 2,300-file tree,
    /// and only for trees nobody writes into (removing or replacing a link is safe; writing
    /// through it would change the fixture in the repository).
    Link,
}

fn compose_tree(from: &Path, to: &Path, files: Files) {
    let manifest_path = from.join(".gpudoctor/manifest.json");
    let manifest: Option<serde_json::Value> = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let Some(base) = manifest
        .as_ref()
        .and_then(|m| m.get("base"))
        .and_then(|b| b.as_str())
    else {
        put_tree(from, to, files);
        return;
    };
    compose_tree(&from.parent().unwrap().join(base), to, files);
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
    put_tree(from, to, files);
    let mut manifest = manifest;
    if let Some(m) = manifest.as_object_mut() {
        m.remove("base");
        m.remove("removes");
    }
    // Written anew (never through a link): the composed manifest names no base.
    let target = to.join(".gpudoctor/manifest.json");
    std::fs::remove_file(&target).unwrap();
    let text = serde_json::to_string_pretty(&manifest).unwrap() + "\n";
    std::fs::write(target, text).unwrap();
}

/// A fixture as a complete tree, composed when it is an overlay (kept between runs, see
/// [`kept`]): for
/// tests that read its files by path (a stand-in library pointed at its `nvml.json`, a live run
/// with `--root`). Its files are hard links to the fixtures': read it, never write into it
/// (copy it with [`copy_tree`] to change it).
pub fn complete(fixture: &Path) -> PathBuf {
    let manifest = fixture.join(".gpudoctor/manifest.json");
    let is_overlay = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v.get("base").is_some());
    if !is_overlay {
        return fixture.to_path_buf();
    }
    kept("complete", fixture, |to| {
        compose_tree(fixture, to, Files::Link)
    })
}

/// A fixture as a live node's root: its complete tree without `.gpudoctor/`, so gpudoctor asks
/// the probes (the stand-in libraries, a test's kubelet socket) instead of reading answers.
/// Made of hard links and kept between runs ([`kept`]): read it, never write into it.
pub fn live_root(fixture: &Path) -> PathBuf {
    kept("live", fixture, |to| {
        compose_tree(fixture, to, Files::Link);
        std::fs::remove_dir_all(to.join(".gpudoctor")).unwrap();
    })
}

/// Put `from` over `to`: directories merge, anything else replaces what is there.
fn put_tree(from: &Path, to: &Path, files: Files) {
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
            put_tree(&entry.path(), &target, files);
        } else if files == Files::Copy {
            std::fs::copy(entry.path(), &target).unwrap();
        } else if let Err(err) = std::fs::hard_link(entry.path(), &target) {
            // Only a link across file systems (a target directory elsewhere) falls back to a
            // copy. Any other failure is fatal: were `target` a link to the fixture's file by
            // then, `fs::copy` would truncate the fixture in the repository.
            assert_eq!(
                err.kind(),
                std::io::ErrorKind::CrossesDevices,
                "linking {}: {err}",
                target.display()
            );
            copy_new(&entry.path(), &target);
        }
    }
}

/// Copy `from` to a `to` that must not exist yet (never opened for writing if it does).
fn copy_new(from: &Path, to: &Path) {
    let mut source = std::fs::File::open(from).unwrap();
    let mut target = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(to)
        .unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    std::io::copy(&mut source, &mut target).unwrap();
    let mode = source.metadata().unwrap().permissions();
    target.set_permissions(mode).unwrap();
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

/// The directory of the stand-in `ib_write_bw` (tests/fake-perftest, answering from
/// `GPUDOCTOR_FAKE_PERFTEST`), built once per test binary: put it first on `PATH`.
pub fn fake_perftest_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = repo().join("target/fake-perftest");
        build_package("fake-perftest", &target, &[]);
        let dir = target.join("debug");
        assert!(
            dir.join("ib_write_bw").is_file(),
            "ib_write_bw was not built"
        );
        dir
    })
    .clone()
}

fn build_fake_nvml(target_dir: &str, extra: &[&str]) -> PathBuf {
    build_stand_in("fake-nvml", target_dir, "nvidia_ml_fake", extra)
}

/// `cargo build -p PACKAGE` into its own target directory, so it never waits on the lock of the
/// `cargo test` that runs this.
fn build_package(package: &str, target: &Path, extra: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "-p", package, "--locked"])
        .args(extra)
        .arg("--target-dir")
        .arg(target)
        .current_dir(repo())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building tests/{package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build_stand_in(package: &str, target_dir: &str, lib_name: &str, extra: &[&str]) -> PathBuf {
    {
        let target = repo().join(target_dir);
        build_package(package, &target, extra);
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

/// Every full tree (a fixture without a base) and the first fixture of each kind of capture —
/// the names under its composed `.gpudoctor/` (NVML and pod-resources answers, a kernel log,
/// NCCL logs, a sample window, the active probes' answers): for a leg of a sweep whose code is
/// the same for every capture of a kind (packing into a `.tar.gz`, recording unredacted), so
/// that it runs on each kind once instead of on all 69 fixtures.
pub fn one_per_kind(fixtures: &[PathBuf]) -> std::collections::BTreeSet<PathBuf> {
    let mut kinds = std::collections::BTreeSet::new();
    let mut chosen = std::collections::BTreeSet::new();
    for fixture in fixtures {
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture.join(".gpudoctor/manifest.json")).unwrap(),
        )
        .unwrap();
        let full_tree = manifest.get("base").is_none();
        let kind: std::collections::BTreeSet<String> =
            std::fs::read_dir(complete(fixture).join(".gpudoctor"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
        if kinds.insert(kind) || full_tree {
            chosen.insert(fixture.clone());
        }
    }
    chosen
}

/// Was this fixture recorded with `record --sample` (a first counter reading in
/// `.gpudoctor/sample.json`)? Its verdict is the window's: a live run of its tree reads the
/// counters once, so live-vs-replay comparisons leave it out (tests/time_paths.rs and
/// tests/rerecord.rs cover the window's replay).
pub fn has_sample_window(fixture: &Path) -> bool {
    fixture.join(".gpudoctor/sample.json").is_file()
}

pub fn gpudoctor(args: &[&str]) -> Output {
    scratch::gpudoctor_command()
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

/// A program on `PATH` the test needs (Prometheus' `promtool`, `prometheus`): `.ci/run`
/// installs Debian's `prometheus` package when they are missing. Without it the test says so
/// and passes, but fails under `CI=true`.
pub fn tool_on_path(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !on_ci(),
            "{name} is not on PATH: .ci/run installs Debian's prometheus package; install it"
        );
        eprintln!("{name} is not on PATH: `apt-get install prometheus` to run this test");
    }
    found
}

/// A Debian package's program at `path` (absolute): `None` with a note when it is missing,
/// a failure under `CI=true` (where `.ci/run` installs `package`) — never a silent skip there.
pub fn debian_tool(path: &str, package: &str) -> Option<PathBuf> {
    let path = PathBuf::from(path);
    if path.exists() {
        return Some(path);
    }
    assert!(
        !on_ci(),
        "{} not found: .ci/run installs Debian's {package}",
        path.display()
    );
    eprintln!(
        "{} not found: `apt-get install {package}` to run this test; skipped",
        path.display()
    );
    None
}

/// Two reports (as JSON) of the same node without their disk checks (`toolkit.disk_*`), for
/// comparing a live run on a copied tree with a replay: live, statvfs is asked only of `/` or a
/// mount point (the copy sits on this machine's disk, so they skip), a capture answers from its
/// `statvfs.json`. Where a removed check warned or failed in either, what follows from it —
/// the toolkit layer's status, the exit code and the first failure — is left out of both too;
/// otherwise those are still compared.
pub fn without_disk_checks(a: &mut serde_json::Value, b: &mut serde_json::Value) {
    let mut decided = false;
    for report in [&mut *a, &mut *b] {
        for layer in report["layers"].as_array_mut().into_iter().flatten() {
            let Some(checks) = layer["checks"].as_array_mut() else {
                continue;
            };
            checks.retain(|c| {
                let disk = c["code"]
                    .as_str()
                    .is_some_and(|code| code.starts_with("toolkit.disk_"));
                if disk && !matches!(c["status"].as_str(), Some("pass" | "skip")) {
                    decided = true;
                }
                !disk
            });
        }
    }
    if decided {
        for report in [a, b] {
            for layer in report["layers"].as_array_mut().into_iter().flatten() {
                if layer["id"] == "toolkit" {
                    layer["status"] = serde_json::Value::Null;
                }
            }
            report["exit_code"] = serde_json::Value::Null;
            report["first_failure"] = serde_json::Value::Null;
        }
    }
}
