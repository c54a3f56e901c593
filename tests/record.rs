//! `gpudoctor record` round trips: every fixture, recorded through the live host source (with
//! the stand-in NVML library answering from the fixture's nvml.json), replays to the same
//! findings; a capture of a capture is identical; redaction leaves no identifier behind; packed
//! captures replay directly.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use gpudoctor::answers::pod_resources::{PodResourcesFacts, parse_pod_resources_json};
use serde_json::Value;

/// Run `gpudoctor record` on `root` as if it were a live node: NVML from the stand-in library
/// answering `answers`' nvml.json, the kernel log from its kmsg.txt. A fixture is a capture,
/// which `record` would re-record (tests/rerecord.rs): it is recorded from a copy without its
/// `.gpudoctor/`, a tree like a live node's.
fn record_from(root: &Path, answers: &Path, out: &Path, extra: &[&str]) -> Output {
    // The probes' answers are read by path: an overlay fixture's are in its composed tree.
    let answers = &common::complete(answers);
    let root = if root.join(".gpudoctor").exists() {
        common::live_root(root)
    } else {
        root.to_path_buf()
    };
    let mut cmd = common::scratch::gpudoctor_command();
    cmd.arg("record")
        .arg("--root")
        .arg(&root)
        .arg("--out")
        .arg(out)
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib())
        .args(extra)
        .env(common::FAKE_NVML_JSON, answers.join(".gpudoctor/nvml.json"));
    let kmsg = answers.join(".gpudoctor/kmsg.txt");
    if kmsg.is_file() {
        cmd.arg("--kernel-log").arg(kmsg);
    }
    // nccl-tests logs (and their run records beside them) as `--nccl-log` files.
    let mut logs: Vec<_> = fs::read_dir(answers.join(".gpudoctor/nccl"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    logs.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|x| x == "log"));
    logs.sort();
    for log in logs {
        cmd.arg("--nccl-log").arg(log);
    }
    // The `--state-dir` history the fixture was judged with, from a copy (a recording reads
    // it and keeps it in the capture, and never adds to it).
    let state = common::tempdir().unwrap();
    let history = answers.join(".gpudoctor/state/history.json");
    if history.is_file() {
        fs::copy(&history, state.path().join("history.json")).unwrap();
        cmd.arg("--state-dir").arg(state.path());
    }
    // The active probes ran when the fixture was made: the stand-in libcuda answers its
    // cuda.json, the stand-in ib_write_bw prints its loopback logs (tests/active_probes.rs).
    let perftest = common::tempdir().unwrap();
    let cuda_json = answers.join(".gpudoctor/cuda.json");
    if let Ok(text) = fs::read_to_string(&cuda_json) {
        let cuda: Value = serde_json::from_str(&text).unwrap();
        let flag = if cuda["bandwidth"] == true {
            "--bandwidth"
        } else {
            "--cuda"
        };
        for entry in fs::read_dir(answers.join(".gpudoctor/gpudirect"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(hca) = name
                .strip_suffix(".log")
                .filter(|n| !n.ends_with(".server"))
            {
                fs::copy(entry.path(), perftest.path().join(format!("{hca}.out"))).unwrap();
            }
            // A server that could not use GPU memory before it listened (a perftest built
            // without CUDA, a memory type compiled out, one the loader stopped for want of
            // libcuda.so.1): so is the stand-in that records it again.
            if let Some(hca) = name.strip_suffix(".server.log") {
                let said = fs::read_to_string(entry.path()).unwrap_or_default();
                let mode = if said.contains("unrecognized option '--use_cuda") {
                    Some("no-cuda")
                } else if said.contains(" Unsupported memory type") {
                    Some("unsupported")
                } else if said.contains("error while loading shared libraries: libcuda.so.1") {
                    Some("loader")
                } else {
                    None
                };
                if let Some(mode) = mode {
                    fs::write(perftest.path().join(format!("{hca}.mode")), mode).unwrap();
                }
            }
        }
        cmd.arg(flag)
            .arg("--cuda-lib")
            .arg(common::fake_cuda_lib())
            .env(common::FAKE_CUDA_JSON, &cuda_json)
            .env("GPUDOCTOR_FAKE_PERFTEST", perftest.path())
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    common::fake_perftest_dir().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env_remove("CUDA_VISIBLE_DEVICES");
    }
    // The kubelet answered when the fixture was made: serve its answers on a real socket.
    let kubelet_dir = common::tempdir().unwrap();
    if let Some(facts) = answered_pod_resources(answers) {
        let socket = common::kubelet::serve(
            kubelet_dir.path(),
            common::kubelet::Behaviour::Serve(Arc::new(facts)),
        );
        cmd.arg("--kubelet-socket").arg(socket);
    }
    // The environment the in-Pod checks read, as the fixture recorded it.
    for name in gpudoctor::source::ENV_VARS {
        cmd.env_remove(name);
    }
    if let Ok(text) = fs::read_to_string(answers.join(".gpudoctor/env.json")) {
        let env: BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
        cmd.envs(env);
    }
    cmd.output().expect("gpudoctor runs")
}

fn answered_pod_resources(root: &Path) -> Option<PodResourcesFacts> {
    let text = fs::read_to_string(root.join(".gpudoctor/pod-resources.json")).ok()?;
    let facts = parse_pod_resources_json(&text).ok()?;
    (facts.error.is_none() && facts.allocatable_value().is_some() && facts.list_value().is_some())
        .then_some(facts)
}

fn record(root: &Path, out: &Path, extra: &[&str]) -> Output {
    record_from(root, root, out, extra)
}

fn replay(root: &Path) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
        "--keep-going",
    ]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no JSON report ({e}): {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// (code, status, summary) of every check. The disk checks are left out: a fixture is recorded
/// from a copy of its tree, and a copy's directories sit on this machine's disk, so the live
/// source gives no statvfs figures there (source/node_root.rs) and the recording has none, where
/// the fixture kept its node's (tests of the disk checks: checks/disk/tests.rs).
fn findings(report: &Value, with_summary: bool) -> BTreeSet<(String, String, String)> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().iter())
        .filter(|c| {
            !c["code"]
                .as_str()
                .unwrap_or("")
                .starts_with("toolkit.disk_")
        })
        .map(|c| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                if with_summary {
                    c["summary"].as_str().unwrap().to_string()
                } else {
                    String::new()
                },
            )
        })
        .collect()
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_fixture_round_trips_through_record() {
    // Each fixture runs in its own gpudoctor processes (the fake NVML reads its JSON from the
    // child's environment), so the fixtures can be recorded in parallel.
    let fixtures: Vec<_> = common::fixtures()
        .into_iter()
        .filter(|f| !common::has_sample_window(f))
        // A fixture whose verdict is its statvfs figures (h100-disk-full) cannot keep it
        // through a copy of its tree: see `findings`.
        .filter(|f| {
            !f.join(".gpudoctor/statvfs.json").is_file() || common::name_of(f) == "hgx-h100-healthy"
        })
        .collect();
    // Unredacted, a capture must replay word for word: once per kind of capture (the redacted
    // leg below, on every fixture, holds each fixture's verdict).
    let unredacted = common::one_per_kind(&fixtures);
    assert!(unredacted.len() >= 5, "{} unredacted", unredacted.len());
    common::parallel::for_each(&fixtures, |f| round_trip(f, unredacted.contains(f)));
}

fn round_trip(fixture: &Path, unredacted_too: bool) {
    {
        let fixture = fixture.to_path_buf();
        let name = common::name_of(&fixture);
        let tmp = common::tempdir().unwrap();
        let original = replay(&fixture);

        if unredacted_too {
            let plain = tmp.path().join("plain");
            ok(&record(&fixture, &plain, &["--no-redact"]), &name);
            assert_eq!(
                findings(&replay(&plain), true),
                findings(&original, true),
                "{name}: the unredacted capture replays differently"
            );
        }

        let redacted = tmp.path().join("redacted");
        ok(&record(&fixture, &redacted, &[]), &name);
        let again = replay(&redacted);
        assert_eq!(
            findings(&again, false),
            findings(&original, false),
            "{name}: the redacted capture replays differently"
        );
        assert_eq!(again["exit_code"], original["exit_code"], "{name}");
        for field in ["layer", "code"] {
            assert_eq!(
                again["first_failure"][field], original["first_failure"][field],
                "{name}: redaction changed the first failure"
            );
        }

        // A node and its own (redacted) recording are the same node: `diff` of every layer
        // counts nothing — identifiers, boot ids (`root=UUID=`) and provenance are shown apart.
        let diff = common::gpudoctor(&[
            "diff",
            "--keep-going",
            fixture.to_str().unwrap(),
            redacted.to_str().unwrap(),
        ]);
        assert_eq!(
            diff.status.code(),
            Some(0),
            "{name}: diff against its own recording:\n{}{}",
            String::from_utf8_lossy(&diff.stdout),
            String::from_utf8_lossy(&diff.stderr)
        );

        // The manifest's expect block is the capture's own verdict.
        let manifest: Value = serde_json::from_str(
            &fs::read_to_string(redacted.join(".gpudoctor/manifest.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            manifest["expect"]["exit_code"],
            replay_default_exit(&redacted),
            "{name}"
        );
        assert!(
            redacted.join(".gpudoctor/report.json").is_file(),
            "{name}: report stored beside the capture"
        );
    }
}

fn replay_default_exit(root: &Path) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
    ]);
    Value::from(out.status.code().unwrap())
}

/// Every file under `dir` (relative path → content or link target), without the parts that
/// carry a time or a duration.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = path.symlink_metadata().unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    format!("-> {}", fs::read_link(&path).unwrap().display()).into_bytes(),
                );
            } else if meta.is_dir() {
                stack.push(path);
            } else if rel != ".gpudoctor/manifest.json" && rel != ".gpudoctor/report.json" {
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn a_capture_of_a_capture_is_identical() {
    let fixture = common::repo().join("fixtures/h100-xid48-dbe");
    let tmp = common::tempdir().unwrap();
    let first = tmp.path().join("first");
    let second = tmp.path().join("second");
    ok(&record(&fixture, &first, &[]), "first");
    // The second is a re-record: the first capture's answers carried over, redaction again.
    ok(
        &common::gpudoctor(&[
            "record",
            "--root",
            first.to_str().unwrap(),
            "--out",
            second.to_str().unwrap(),
        ]),
        "second",
    );
    let (a, b) = (tree(&first), tree(&second));
    let only_a: Vec<&String> = a.keys().filter(|k| !b.contains_key(*k)).collect();
    let only_b: Vec<&String> = b.keys().filter(|k| !a.contains_key(*k)).collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "paths differ: {only_a:?} / {only_b:?}"
    );
    for (path, content) in &a {
        assert!(
            content == &b[path],
            "{path} differs between a capture and its capture"
        );
    }
}

#[test]
fn a_redacted_capture_keeps_no_identifier_and_stays_small() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let nvml: Value =
        serde_json::from_str(&fs::read_to_string(fixture.join(".gpudoctor/nvml.json")).unwrap())
            .unwrap();
    let mut secrets: Vec<String> = vec!["hgx-h100-01".into()];
    for device in nvml["devices"].as_array().unwrap() {
        secrets.push(device["uuid"].as_str().unwrap().to_string());
        secrets.push(device["serial"]["value"].as_str().unwrap().to_string());
    }
    let tmp = common::tempdir().unwrap();
    // Named the way README's ticket workflow names it: `--out /tmp/$(hostname)-gpudoctor...`.
    let out = tmp.path().join("hgx-h100-01-gpudoctor");
    ok(&record(&fixture, &out, &[]), "record");
    let files = tree(&out);
    for (path, content) in &files {
        let text = String::from_utf8_lossy(content);
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "{path} still contains {secret}"
            );
        }
    }
    // The manifest (its command line names the output) and the stored report (its source root
    // is the capture's path) are written after the files: redacted all the same.
    for kept in [".gpudoctor/manifest.json", ".gpudoctor/report.json"] {
        let text = fs::read_to_string(out.join(kept)).unwrap();
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{kept} contains {secret}");
        }
    }
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap())
            .unwrap();
    let command_line = manifest["command_line"].to_string();
    assert!(
        command_line.contains("record") && command_line.contains("-gpudoctor"),
        "the command line is kept, only the host name replaced: {command_line}"
    );
    assert_eq!(manifest["redaction"]["enabled"], true);
    assert!(
        manifest["redaction"]["replaced"]["hostname"].as_u64() >= Some(1),
        "{}",
        manifest["redaction"]
    );
    // Only what the checks read: far fewer entries than the fixture, and small.
    let bytes: usize = files.values().map(Vec::len).sum();
    assert!(bytes < 512 * 1024, "capture holds {bytes} bytes");
    assert!(
        files.len() < tree(&fixture).len() / 2,
        "{} entries captured",
        files.len()
    );
    // And no identifier in the replayed report either (moved first: the report names its root).
    let moved = tmp.path().join("cap");
    fs::rename(&out, &moved).unwrap();
    let report = replay(&moved).to_string();
    for secret in &secrets {
        assert!(
            !report.contains(secret.as_str()),
            "the replayed report contains {secret}"
        );
    }
}

#[test]
fn a_packed_capture_replays_directly() {
    let fixture = common::repo().join("fixtures/h100-nvlink-links-down");
    let tmp = common::tempdir().unwrap();
    let packed = tmp.path().join("node.tar.gz");
    ok(&record(&fixture, &packed, &[]), "record");
    assert!(packed.is_file());
    let out = common::gpudoctor(&[
        "check",
        "--root",
        packed.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["source"]["kind"], "replay");
    assert_eq!(report["source"]["root"], packed.to_str().unwrap());
    assert_eq!(report["first_failure"]["code"], "nvlink.links_active");
    // `topo` reads the same capture: everything the topology layer read is in it.
    let topo = common::gpudoctor(&[
        "topo",
        "--root",
        packed.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(
        topo.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&topo.stderr)
    );
    let text = String::from_utf8_lossy(&topo.stdout);
    assert!(text.contains("PIX") && text.contains("NV18"), "{text}");
}

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

/// A replayed ticket is about the node when it was recorded: the table and Markdown show the
/// capture's time (its manifest's), the JSON carries it as `source.captured_at`, and a capture
/// re-recorded from it keeps the first one's time (issue 19).
#[test]
fn a_replay_shows_when_the_node_was_recorded() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let tmp = common::tempdir().unwrap();
    let cap = tmp.path().join("cap");
    ok(&record(&fixture, &cap, &[]), "record");
    let manifest_path = cap.join(".gpudoctor/manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&fs::read_to_string(&manifest_path).unwrap()).unwrap();
    assert!(manifest["time"].is_string(), "record writes its time");
    let when = "2025-06-01T12:00:00Z";
    manifest["time"] = Value::from(when);
    fs::write(&manifest_path, serde_json::to_string(&manifest).unwrap()).unwrap();
    let root = cap.to_str().unwrap();

    let table = common::gpudoctor(&["check", "--root", root]);
    let table = String::from_utf8_lossy(&table.stdout);
    let header = table.lines().next().unwrap();
    assert!(header.ends_with(&format!("· recorded {when}")), "{header}");
    let md = common::gpudoctor(&["check", "--root", root, "--format", "markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    let row = md.lines().find(|l| l.starts_with("| time |")).unwrap();
    assert!(
        row.starts_with(&format!("| time | `{when}` (recorded; replayed `")),
        "{row}"
    );
    let json = common::gpudoctor(&["check", "--root", root, "--format", "json"]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["source"]["captured_at"], when);
    assert_ne!(report["generated_at"], when);

    // Re-recorded: no node was read again, so the first capture's time stands.
    let again = tmp.path().join("again");
    ok(
        &common::gpudoctor(&["record", "--root", root, "--out", again.to_str().unwrap()]),
        "re-record",
    );
    let json = common::gpudoctor(&[
        "check",
        "--root",
        again.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["source"]["captured_at"], when);

    // A hand-built fixture says nothing of when; a live run has no capture time.
    let md = common::gpudoctor(&[
        "check",
        "--root",
        fixture.to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    let md = String::from_utf8_lossy(&md.stdout);
    let row = md.lines().find(|l| l.starts_with("| time |")).unwrap();
    assert!(
        row.starts_with("| time | recorded: unknown (replayed `"),
        "{row}"
    );
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

/// Every `AllocResp` of a capture's kubelet checkpoint, decoded to the text of its strings
/// (protobuf strings are stored as they are: the UUIDs show in the raw bytes).
fn alloc_resp_texts(capture: &Path) -> Vec<String> {
    use base64::Engine as _;
    let path = capture.join("var/lib/kubelet/device-plugins/kubelet_internal_checkpoint");
    let doc: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    doc["Data"]["PodDeviceEntries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(e["AllocResp"].as_str().unwrap())
                .unwrap();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect()
}

#[test]
fn every_kind_of_identifier_is_redacted_and_the_verdict_holds() {
    // A copy of a fixture with an NCCL run, given what the issue found surviving redaction:
    // IPv6 addresses (the bootstrap lines of NVIDIA/nccl#529 and Oneflow-Inc/oneflow#3586, with
    // this node's name), MACs with dashes, Cisco dots and 0x, a partition UUID, a Pod UID in a
    // cgroup path. The checkpoint's AllocResp answers hold the GPU UUIDs in base64.
    let node = common::node::Node::copy("h100-nccl-healthy");
    let cmdline = node
        .read("proc/cmdline")
        .replace(" ro ", " resume=PARTUUID=0a1b2c3d-02 ro ");
    node.write("proc/cmdline", &cmdline);
    let planted = [
        "hgx-h100-01:41234:41234 [0] NCCL INFO Bootstrap : Using [0]ip6tnl0:fe80::e866:19ff:fe1e:a688%ip6tnl0<0> [1]veth0:2a02:6b8:fc1d:3606:0:4457:edef:600a<0>",
        "hgx-h100-01:41234:41234 [0] NCCL INFO NET/Socket : Using [0]eno1:172.18.40.41<0> [1]veth25f2e72:fe80::380d:bfff:fe5b:54d2%veth25f2e72<0>",
        "hgx-h100-01:41234:41234 [0] NCCL INFO cgroup /kubepods.slice/kubepods-pod599e915e_5142_4dcb_8a89_feac2562f998.slice mac 94-6D-AE-5C-69-00 946d.ae5c.6901 MAC 0x946dae5c6902",
    ];
    node.edit(".gpudoctor/nccl/all_reduce_perf.log", |log| {
        log.replacen(
            "hgx-h100-01:41234:41234 [0] NCCL INFO cudaDriverVersion",
            &format!(
                "{}\nhgx-h100-01:41234:41234 [0] NCCL INFO cudaDriverVersion",
                planted.join("\n")
            ),
            1,
        )
    });
    let secrets = [
        "fe80::e866:19ff:fe1e:a688",
        "2a02:6b8:fc1d:3606:0:4457:edef:600a",
        "172.18.40.41",
        "fe80::380d:bfff:fe5b:54d2",
        "599e915e_5142_4dcb_8a89_feac2562f998",
        "94-6D-AE-5C-69-00",
        "946d.ae5c.6901",
        "0x946dae5c6902",
        "0a1b2c3d-02",
        "5c1b6a3e-9d0f-4b8e-a2c4-7f1e0d3b9a61",
        "llama-train-0",
        "bert-finetune-7f9c5",
        "hgx-h100-01",
        "10.0.0.11",
    ];
    let gpus: Vec<String> = {
        let nvml: Value = serde_json::from_str(&node.read(".gpudoctor/nvml.json")).unwrap();
        nvml["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                d["uuid"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("GPU-")
                    .to_string()
            })
            .collect()
    };
    // The defect: the checkpoint's answers name the GPUs, out of a text scan's sight.
    let before = alloc_resp_texts(&node.root);
    assert!(
        gpus.iter()
            .any(|u| before.iter().any(|t| t.contains(u.as_str())))
    );

    let original = replay(&node.root);
    let tmp = common::tempdir().unwrap();
    let out = tmp.path().join("capture");
    let recorded = record(&node.root, &out, &[]);
    ok(&recorded, "record");
    let again = replay(&out);
    assert_eq!(findings(&again, false), findings(&original, false));
    assert_eq!(again["exit_code"], original["exit_code"]);
    assert_eq!(again["first_failure"], original["first_failure"]);
    for (path, content) in tree(&out) {
        let text = String::from_utf8_lossy(&content);
        for secret in secrets
            .iter()
            .copied()
            .chain(gpus.iter().map(String::as_str))
        {
            assert!(!text.contains(secret), "{path} still contains {secret}");
        }
    }
    for answer in alloc_resp_texts(&out) {
        assert!(answer.contains("NVIDIA_VISIBLE_DEVICES"), "{answer:?}");
        for uuid in &gpus {
            assert!(
                !answer.contains(uuid.as_str()),
                "AllocResp still names {uuid}"
            );
        }
    }
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap())
            .unwrap();
    let replaced = &manifest["redaction"]["replaced"];
    for kind in [
        "ipv6_address",
        "ipv4_address",
        "mac_address",
        "filesystem_uuid",
        "pod_uid",
        "pod_name",
        "gpu_uuid",
        "hostname",
    ] {
        assert!(replaced[kind].as_u64() >= Some(1), "{kind}: {replaced}");
    }
    assert!(
        manifest["redaction"]["notes"]
            .to_string()
            .contains("AllocResp"),
        "{}",
        manifest["redaction"]
    );
}

#[test]
fn a_short_host_name_is_kept_and_said_unless_asked_for() {
    // A node named `gpu` used to have `nvidia.com/gpu` rewritten to `nvidia.com/node-0001`
    // everywhere, and its replay failed the device-plugin layer.
    let node = common::node::Node::copy("hgx-h100-healthy");
    node.write("proc/sys/kernel/hostname", "gpu\n");
    let original = replay(&node.root);
    let tmp = common::tempdir().unwrap();

    let kept = tmp.path().join("kept");
    let out = record(&node.root, &kept, &[]);
    ok(&out, "record");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("host name `gpu` kept") && stderr.contains("--redact-hostname-anyway"),
        "{stderr}"
    );
    let manifest = fs::read_to_string(kept.join(".gpudoctor/manifest.json")).unwrap();
    assert!(manifest.contains("host name `gpu` kept"), "{manifest}");
    assert!(
        fs::read_to_string(kept.join("var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"))
            .unwrap()
            .contains("nvidia.com/gpu")
    );
    let again = replay(&kept);
    assert_eq!(findings(&again, false), findings(&original, false));
    assert_eq!(again["exit_code"], original["exit_code"]);

    let anyway = tmp.path().join("anyway");
    let out = record(&node.root, &anyway, &["--redact-hostname-anyway"]);
    ok(&out, "record --redact-hostname-anyway");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("replaced anyway"), "{stderr}");
    assert_eq!(
        fs::read_to_string(anyway.join("proc/sys/kernel/hostname")).unwrap(),
        "node-0001\n"
    );
}

/// Hosts named by `host:pid:tid [dev]` prefixes (NCCL's debug lines), found here without the
/// code under test: a whitespace token ending in `:<digits>:<digits>` followed by `[<digits>]`,
/// the host being the run of name characters before the pid.
fn nccl_prefix_hosts(text: &str) -> BTreeSet<String> {
    let mut hosts = BTreeSet::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        for pair in tokens.windows(2) {
            let next = pair[1];
            let marker = next.len() > 2
                && next.starts_with('[')
                && next.ends_with(']')
                && next[1..next.len() - 1].bytes().all(|b| b.is_ascii_digit());
            let parts: Vec<&str> = pair[0].rsplitn(3, ':').collect();
            if !marker || parts.len() != 3 {
                continue;
            }
            let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !numeric(parts[0]) || !numeric(parts[1]) {
                continue;
            }
            let host: String = parts[2]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if host.chars().any(|c| c.is_ascii_alphabetic()) {
                hosts.insert(host);
            }
        }
    }
    hosts
}

/// Issue 30, item 2: the peers of a multi-node run that appear only in NCCL's `host:pid:tid`
/// prefixes were kept in a redacted capture when the log also had nccl-tests device lines (the
/// parser's host list then holds the device lines' hosts only). Every real log of
/// tests/data/nccl/real/ is recorded as `--nccl-log`, and so is one job's output made of two of
/// them (nccl-tests on `node005`, then a PyTorch job of `h100clust-worker-1`, as a job that runs
/// a benchmark before training prints them). No prefix host may remain in the capture, unless
/// it is a common word the redaction refuses and says so in `redaction.notes`.
#[test]
fn nccl_peers_named_only_in_line_prefixes_are_redacted() {
    let real = common::repo().join("tests/data/nccl/real");
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("node");
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(root.join("etc/hostname"), "recorder-node-1\n").unwrap();
    let job = tmp.path().join("benchmark-then-training.log");
    let mut joined = fs::read(real.join("nccl-tests-290-h100-single-node.log")).unwrap();
    joined.extend(fs::read(real.join("nccl-1453-interleaved-info-excerpt.log")).unwrap());
    fs::write(&job, joined).unwrap();
    let mut logs: Vec<_> = fs::read_dir(&real)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.push(job);
    let mut checked = 0;
    for (n, log) in logs.iter().enumerate() {
        let hosts = nccl_prefix_hosts(&fs::read_to_string(log).unwrap());
        if hosts.is_empty() {
            continue;
        }
        let out = tmp.path().join(format!("capture-{n}"));
        let recorded = common::gpudoctor(&[
            "record",
            "--root",
            root.to_str().unwrap(),
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
            "--nccl-log",
            log.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        ok(&recorded, &log.display().to_string());
        let manifest = fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap();
        let notes: Value = serde_json::from_str(&manifest).unwrap();
        let notes = notes["redaction"]["notes"].to_string();
        for (path, content) in tree(&out) {
            let left = nccl_prefix_hosts(&String::from_utf8_lossy(&content));
            let text = String::from_utf8_lossy(&content);
            for host in &hosts {
                let kept_on_purpose = notes.contains(&format!("`{host}` kept"));
                assert!(
                    kept_on_purpose || !left.contains(host) && !text.contains(host.as_str()),
                    "{}: {path} still names the NCCL peer {host}",
                    log.display()
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} logs had NCCL prefixes");
}

/// `record --perftest-log FILE` keeps the output (GID lines masked) as
/// `.gpudoctor/perftest/<name>`, and a replay of the capture judges it as the live run did.
#[test]
fn a_recorded_perftest_log_is_judged_again_on_replay() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let dir = common::tempdir().unwrap();
    let out = dir.path().join("capture");
    let log = common::repo().join("tests/data/perftest/ndr-cx7-write-gbits-cpu-freq-warning.txt");
    let recorded = record(&fixture, &out, &["--perftest-log", log.to_str().unwrap()]);
    assert!(
        recorded.status.success() || recorded.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    let kept = out.join(".gpudoctor/perftest/ndr-cx7-write-gbits-cpu-freq-warning.txt");
    let text = fs::read_to_string(&kept).expect("the output kept in the capture");
    assert!(
        text.contains("BW average") || text.contains("BW peak"),
        "{text}"
    );
    let report = replay(&out);
    let check = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().iter())
        .find(|c| c["code"] == "rdma.perftest_log")
        .unwrap();
    assert_eq!(check["status"], "pass", "{check}");
    assert!(
        check["summary"].as_str().unwrap().contains("392.3 Gb/s"),
        "{check}"
    );
}
