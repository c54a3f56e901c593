//! What `record` refuses: an occupied or archive-named output, a requested NCCL run that cannot
//! run, links out of the root.

use super::*;

#[test]
fn an_occupied_output_is_refused_and_force_replaces_only_a_capture() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let tmp = common::tempdir().unwrap();
    // A directory that is not a capture: never replaced, --force or not (issue 13, item 8).
    let out = tmp.path().join("cap");
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("keep-me"), "data").unwrap();
    for extra in [&[][..], &["--force"][..]] {
        let refused = record(&fixture, &out, extra);
        assert_eq!(refused.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.contains("is not a gpudoctor capture"), "{err}");
        assert_eq!(
            err.matches("gpudoctor: --out").count(),
            1,
            "said once: {err}"
        );
        assert_eq!(fs::read_to_string(out.join("keep-me")).unwrap(), "data");
    }
    // An earlier capture: refused without --force, replaced with it.
    let cap = tmp.path().join("cap2");
    ok(&record(&fixture, &cap, &[]), "first record");
    fs::write(cap.join("planted"), "x").unwrap();
    let refused = record(&fixture, &cap, &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    assert!(cap.join("planted").is_file(), "nothing was touched");
    ok(&record(&fixture, &cap, &["--force"]), "with --force");
    assert!(!cap.join("planted").exists());
    assert!(cap.join(".gpudoctor/manifest.json").is_file());
    // Same for a packed capture; a .tar.gz that is not one is never replaced.
    let packed = tmp.path().join("node.tar.gz");
    ok(&record(&fixture, &packed, &[]), "packed");
    assert_eq!(record(&fixture, &packed, &[]).status.code(), Some(2));
    ok(
        &record(&fixture, &packed, &["--force"]),
        "packed with --force",
    );
    let other = tmp.path().join("other.tar.gz");
    fs::write(&other, b"not a capture").unwrap();
    assert_eq!(
        record(&fixture, &other, &["--force"]).status.code(),
        Some(2)
    );
    assert_eq!(fs::read(&other).unwrap(), b"not a capture");
    // Never over the root itself (here a capture being re-recorded).
    let over_root = common::gpudoctor(&[
        "record",
        "--root",
        fixture.to_str().unwrap(),
        "--out",
        fixture.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(over_root.status.code(), Some(2));
    assert!(fixture.join(".gpudoctor/manifest.json").is_file());
    // No temporary sibling left by any of it.
    let left: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `--out cap.zip` used to write a directory named `cap.zip`: an archive ending record does not
/// write is a usage error, said once, with nothing left behind (issue 19).
#[test]
fn an_output_named_like_another_archive_is_a_usage_error() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let tmp = common::tempdir().unwrap();
    for name in [
        "cap.zip",
        "cap.tar",
        "cap.ZIP",
        "cap.tar.xz",
        "cap.7z",
        "cap.gz",
    ] {
        let out = tmp.path().join(name);
        let refused = record(&fixture, &out, &[]);
        assert_eq!(refused.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(
            err.contains("a directory or a .tar.gz") && err.contains(name),
            "{name}: {err}"
        );
        assert!(!out.exists(), "{name}: nothing written");
    }
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // A directory name with dots in it, and the two packed endings, are captures.
    for name in ["node-01.example.com", "cap.tgz", "cap.tar.gz"] {
        ok(&record(&fixture, &tmp.path().join(name), &[]), name);
    }
}

/// Asked means required (issue 19): `record --nccl-quick` whose nccl-tests directory holds no
/// binary writes no capture (one without the run would replay as "not requested"), exit 2,
/// naming where it looked; nothing is left beside --out.
#[test]
fn a_requested_nccl_run_that_cannot_run_leaves_no_capture() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let tmp = common::tempdir().unwrap();
    let missing = tmp.path().join("nccl-tests");
    let out = tmp.path().join("cap");
    let refused = record(
        &fixture,
        &out,
        &[
            "--nccl-quick",
            "--nccl-tests-dir",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("all_reduce_perf was not found in"), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!out.exists(), "no capture written");
    let left: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `record` reads through the same confined source as `check`: a link out of the root (absolute,
/// or `..` past it) is refused, so nothing outside lands in the capture, and the refusal is listed
/// under the manifest's `unreadable` with the path that was asked for.
#[test]
fn record_never_follows_links_out_of_the_root() {
    let tmp = common::tempdir().unwrap();
    let outside = tmp.path().join("outside.txt");
    fs::write(&outside, "SECRET-OUTSIDE-THE-ROOT nvidia 1 0 - Live\n").unwrap();
    let root = tmp.path().join("node");
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    common::copy_tree(&fixture, &root);
    // Two files the driver layer reads: one absolute link, one relative link climbing out.
    fs::remove_file(root.join("proc/modules")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("proc/modules")).unwrap();
    fs::remove_file(root.join("proc/cmdline")).unwrap();
    std::os::unix::fs::symlink("../../outside.txt", root.join("proc/cmdline")).unwrap();

    let out = tmp.path().join("cap");
    let run = record_from(&root, &fixture, &out, &[]);
    assert!(
        matches!(run.status.code(), Some(0..=3)),
        "record: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    for (path, content) in tree(&out) {
        assert!(
            !String::from_utf8_lossy(&content).contains("SECRET-OUTSIDE"),
            "{path} holds the file outside the root"
        );
    }
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap())
            .unwrap();
    let unreadable: Vec<&str> = manifest["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["path"].as_str())
        .collect();
    for path in ["proc/modules", "proc/cmdline"] {
        assert!(
            unreadable.contains(&path),
            "{path} not listed: {unreadable:?}"
        );
    }
}
