//! Fixtures as overlays (src/source/overlay.rs, docs/fixtures.md): an overlay's reads come from
//! its own tree first, then its base's; what it removes is absent; symlinks resolve across both
//! as in the composed tree and never out of it; a base is a sibling by name, in a chain of
//! bounded depth without loops; `record` of an overlay writes a complete capture, and an
//! archive that names a base is refused.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpudoctor::source::{ReplaySource, Source};
use serde_json::json;

fn gpudoctor() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A fixture directory `dir` with a manifest naming `base` (if any) and removing `removes`.
fn manifest(dir: &Path, base: Option<&str>, removes: &[&str]) {
    let mut m = json!({"format_version": 1, "node": "n", "description": "d"});
    if let Some(base) = base {
        m["base"] = json!(base);
    }
    if !removes.is_empty() {
        m["removes"] = json!(removes);
    }
    write(dir, ".gpudoctor/manifest.json", &m.to_string());
}

/// `fixtures/base` (complete) and `fixtures/top` (an overlay of it) in a temporary directory.
fn pair(removes: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("fixtures/base");
    manifest(&base, None, &[]);
    write(&base, "proc/version", "base kernel\n");
    write(&base, "etc/only-in-base", "from the base\n");
    write(
        &base,
        "sys/devices/pci0000:00/0000:00:01.0/vendor",
        "0x10de\n",
    );
    write(
        &base,
        "sys/devices/pci0000:00/0000:00:01.0/device",
        "0x2330\n",
    );
    write(&base, "var/gone/one", "1\n");
    write(&base, "var/gone/two", "2\n");
    write(&base, "etc/removed-file", "x\n");
    let top = tmp.path().join("fixtures/top");
    manifest(&top, Some("base"), removes);
    write(&top, "proc/version", "overlay kernel\n");
    write(&top, "etc/only-in-overlay", "added\n");
    (tmp, top)
}

#[test]
fn reads_come_from_the_overlay_first_then_the_base_and_removed_paths_are_absent() {
    let (_tmp, top) = pair(&["var/gone", "etc/removed-file"]);
    let source = ReplaySource::open(&top).expect("composes");
    assert_eq!(
        source.read_to_string("proc/version").unwrap(),
        "overlay kernel\n"
    );
    assert_eq!(
        source.read_to_string("etc/only-in-base").unwrap(),
        "from the base\n"
    );
    assert_eq!(
        source.read_to_string("etc/only-in-overlay").unwrap(),
        "added\n"
    );
    assert!(
        source
            .read_to_string("etc/removed-file")
            .unwrap_err()
            .is_missing()
    );
    assert!(!source.exists("var/gone"));
    assert!(!source.exists("var/gone/one"));
    let etc = source.read_dir("etc").unwrap();
    assert_eq!(
        etc,
        ["only-in-base", "only-in-overlay"],
        "the union, less what is removed"
    );
    // The report names the fixture, not the composed tree.
    assert_eq!(source.root(), top.as_path());
    assert_ne!(source.fs().root(), top.as_path());
}

#[test]
fn a_link_in_the_overlay_resolves_into_a_directory_only_the_base_has() {
    let (_tmp, top) = pair(&[]);
    fs::create_dir_all(top.join("sys/bus/pci/devices")).unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        top.join("sys/bus/pci/devices/0000:00:01.0"),
    )
    .unwrap();
    let source = ReplaySource::open(&top).unwrap();
    assert_eq!(
        source
            .read_to_string("sys/bus/pci/devices/0000:00:01.0/device")
            .unwrap(),
        "0x2330\n"
    );
}

#[test]
fn a_link_that_leaves_the_composed_tree_is_refused_and_nothing_outside_is_read() {
    let (tmp, top) = pair(&[]);
    // A secret beside the fixtures directory, and links to it two ways.
    write(tmp.path(), "secret", "outside\n");
    symlink("../../../secret", top.join("etc/up-and-out")).unwrap();
    symlink(tmp.path().join("secret"), top.join("etc/absolute")).unwrap();
    let source = ReplaySource::open(&top).unwrap();
    for rel in ["etc/up-and-out", "etc/absolute"] {
        let err = source.read_to_string(rel).unwrap_err();
        assert!(err.to_string().contains("leaves the root"), "{rel}: {err}");
    }
}

/// `check --root DIR`: exit code and stderr.
fn check(root: &Path) -> (i32, String) {
    let out = gpudoctor()
        .args(["check", "--only", "driver", "--root"])
        .arg(root)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_base_that_is_missing_a_path_a_loop_or_too_deep_is_a_clear_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = tmp.path().join("fixtures");
    let cases: [(&str, &str, &str); 5] = [
        ("missing", "nowhere", "not a fixture beside it"),
        ("dotdot", "..", "not a fixture name"),
        ("slash", "a/b", "never a path"),
        ("absolute", "/etc", "never a path"),
        ("empty", "", "not a fixture name"),
    ];
    for (name, base, says) in cases {
        let dir = fixtures.join(name);
        manifest(&dir, Some(base), &[]);
        let (code, err) = check(&dir);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(
            err.contains(name),
            "{name}: the error names the fixture: {err}"
        );
    }
    // a -> b -> a
    manifest(&fixtures.join("loop-a"), Some("loop-b"), &[]);
    manifest(&fixtures.join("loop-b"), Some("loop-a"), &[]);
    let (code, err) = check(&fixtures.join("loop-a"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("loop") && err.contains("loop-a -> loop-b -> loop-a"),
        "{err}"
    );
    // c0 -> c1 -> ... -> c5 (complete): five bases, one more than allowed.
    for i in 0..5 {
        manifest(
            &fixtures.join(format!("c{i}")),
            Some(&format!("c{}", i + 1)),
            &[],
        );
    }
    manifest(&fixtures.join("c5"), None, &[]);
    let (code, err) = check(&fixtures.join("c0"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than 4 bases deep"), "{err}");
    // Four bases are allowed.
    let (code, err) = check(&fixtures.join("c1"));
    assert_ne!(code, 2, "{err}");
}

#[test]
fn a_base_that_is_a_symlink_is_refused_and_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    manifest(&elsewhere, None, &[]);
    write(
        &elsewhere,
        "proc/version",
        "read from outside the fixtures\n",
    );
    let fixtures = tmp.path().join("fixtures");
    fs::create_dir_all(&fixtures).unwrap();
    symlink(&elsewhere, fixtures.join("linked")).unwrap();
    manifest(&fixtures.join("top"), Some("linked"), &[]);
    let (code, err) = check(&fixtures.join("top"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a symlink or a file"), "{err}");
    assert!(ReplaySource::open(fixtures.join("top")).is_err());
}

#[test]
fn removes_must_name_what_the_base_has_and_never_a_path_through_a_link() {
    let (_tmp, top) = pair(&["etc/not-there"]);
    let Err(err) = ReplaySource::open(&top) else {
        panic!("composed")
    };
    assert!(
        err.why.contains("etc/not-there") && err.why.contains("stale"),
        "{err}"
    );

    let (tmp, top) = pair(&["sys/bus/pci/devices/0000:00:01.0/vendor"]);
    let base = tmp.path().join("fixtures/base");
    fs::create_dir_all(base.join("sys/bus/pci/devices")).unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        base.join("sys/bus/pci/devices/0000:00:01.0"),
    )
    .unwrap();
    let Err(err) = ReplaySource::open(&top) else {
        panic!("composed")
    };
    assert!(err.why.contains("not a directory in the bases"), "{err}");
    // The file behind the link is untouched.
    assert!(
        base.join("sys/devices/pci0000:00/0000:00:01.0/vendor")
            .exists()
    );

    let (_tmp, top) = pair(&["../outside"]);
    let Err(err) = ReplaySource::open(&top) else {
        panic!("composed")
    };
    assert!(err.why.contains("plain root-relative path"), "{err}");
}

#[test]
fn record_of_an_overlay_fixture_writes_a_complete_capture_without_a_base() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture = repo.join("fixtures/h100-peermem-missing");
    let manifest: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(fixture.join(".gpudoctor/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["base"], "hgx-h100-healthy",
        "the fixture is an overlay"
    );
    assert!(
        !fixture.join(".gpudoctor/nvml.json").exists(),
        "its NVML answer is the base's"
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capture");
    let run = gpudoctor()
        .args(["record", "--root"])
        .arg(&fixture)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let written: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap())
            .unwrap();
    assert!(
        written.get("base").is_none() && written.get("removes").is_none(),
        "{written}"
    );
    assert!(
        out.join(".gpudoctor/nvml.json").exists(),
        "the base's answers are carried"
    );
    assert!(
        out.join("proc/modules").exists(),
        "files only the base has are in the capture"
    );
    // The capture replays to the overlay's verdict.
    let verdict = |root: &Path| {
        let o = gpudoctor()
            .args(["check", "--format", "json", "--root"])
            .arg(root)
            .output()
            .unwrap();
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (r["exit_code"].clone(), r["first_failure"]["code"].clone())
    };
    assert_eq!(verdict(&out), verdict(&fixture));
}

#[test]
fn an_archive_whose_manifest_names_a_base_is_refused() {
    let (tmp, top) = pair(&[]);
    let archive = tmp.path().join("overlay.tar.gz");
    let tar = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(&top)
        .arg(".")
        .status()
        .unwrap();
    assert!(tar.success());
    let (code, err) = check(&archive);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("names a base") && err.contains("complete capture"),
        "{err}"
    );
}

/// The size target of issue 24: the fixtures stay a few tens of MB and a few thousand files
/// because the hand-edited ones hold only what they change.
#[test]
fn the_fixtures_directory_stays_small() {
    fn walk(dir: &Path, files: &mut u64, bytes: &mut u64) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            *files += 1;
            if meta.is_dir() {
                walk(&entry.path(), files, bytes);
            } else {
                *bytes += meta.len();
            }
        }
    }
    let (mut entries, mut bytes) = (0, 0);
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        &mut entries,
        &mut bytes,
    );
    assert!(entries < 20_000, "{entries} entries under fixtures/");
    assert!(bytes < 40 << 20, "{bytes} bytes under fixtures/");
}
