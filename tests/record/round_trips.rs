//! Recordings that replay as the node did: every fixture (redacted and not), a capture of a capture,
//! a packed capture, the recording time shown on replay, a perftest log judged again.

use super::*;

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
