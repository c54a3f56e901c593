//! `gpudoctor record --root <capture>` re-records (issue 14): a capture, as a directory and
//! as a `.tar.gz`, re-records into a capture that replays to the same exit code, first failing
//! layer and failing codes as the fixture's manifest expects — the capture's probe answers
//! (NVML, pod-resources, environment, kernel log, NCCL logs and their run records) are carried
//! over, never asked of the machine the test runs on — with redaction applied again and the
//! manifest and stderr saying it was re-recorded.
//!
//! Both legs run on each full tree and on one fixture per kind of capture (the set of probe
//! answers under `.gpudoctor/`, [`common::one_per_kind`]): what a re-record does differently
//! from a live record is where the answers come from, and that is the same code for every
//! capture of a kind. Which node files a capture keeps is the same code in both, and
//! `tests/record.rs` records every fixture and holds each one's verdict.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use gpudoctor::answers::pod_resources::parse_pod_resources_json;
use serde_json::Value;

fn gpudoctor(args: &[&str]) -> Output {
    common::scratch::gpudoctor_command()
        .args(args)
        // The environment must not reach a capture: its env.json is carried over instead.
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env(
            "NVIDIA_VISIBLE_DEVICES",
            "gpudoctor-test-must-not-be-recorded",
        )
        .output()
        .expect("gpudoctor runs")
}

/// Exit code, first failing layer and the codes of every finding, as an `expect` block says.
fn verdict(root: &Path) -> (Value, Value, BTreeSet<String>) {
    let out = gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no report ({e}): {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(Value::from(out.status.code().unwrap()), report["exit_code"]);
    let codes = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().iter())
        .filter(|c| !matches!(c["status"].as_str(), Some("pass" | "skip" | "not_run")))
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect();
    (
        report["exit_code"].clone(),
        report["first_failure"]["layer"].clone(),
        codes,
    )
}

fn expected(fixture: &Path) -> (Value, Value, BTreeSet<String>) {
    let manifest: Value = serde_json::from_str(
        &fs::read_to_string(fixture.join(".gpudoctor/manifest.json")).unwrap(),
    )
    .unwrap();
    let e = &manifest["expect"];
    (
        e["exit_code"].clone(),
        e["first_failing_layer"].clone(),
        e["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect(),
    )
}

fn manifest(capture: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(capture.join(".gpudoctor/manifest.json")).unwrap())
        .unwrap()
}

fn rerecord(root: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "record",
        "--root",
        root.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let result = gpudoctor(&args);
    assert!(
        result.status.success(),
        "record --root {}: {}",
        root.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    result
}

fn check_one(fixture: &Path) -> Vec<String> {
    let name = common::name_of(fixture);
    let want = expected(fixture);
    let tmp = common::tempdir().unwrap();
    let mut problems = Vec::new();

    // A directory, re-recorded into a directory.
    let out_dir = tmp.path().join("dir");
    let result = rerecord(fixture, &out_dir, &[]);
    let err = String::from_utf8_lossy(&result.stderr);
    if !err.contains("re-recording the capture") || !err.contains("re-recorded the capture") {
        problems.push(format!("{name}: stderr does not say it re-recorded: {err}"));
    }
    let got = verdict(&out_dir);
    if got != want {
        problems.push(format!(
            "{name} (dir): re-recorded {got:?}, expected {want:?}"
        ));
    }
    let m = manifest(&out_dir);
    if m["made"]["how"] != "re-recorded" || m["made"]["from"] != fixture.display().to_string() {
        problems.push(format!("{name}: manifest `made` is {}", m["made"]));
    }
    let m_expect = (
        m["expect"]["exit_code"].clone(),
        m["expect"]["first_failing_layer"].clone(),
    );
    if m_expect != (want.0.clone(), want.1.clone()) {
        problems.push(format!("{name}: the new manifest expects {m_expect:?}"));
    }
    if fs::read_to_string(out_dir.join(".gpudoctor/env.json"))
        .unwrap_or_default()
        .contains("gpudoctor-test-must-not-be-recorded")
    {
        problems.push(format!("{name}: the test's own environment was recorded"));
    }

    // A .tar.gz, re-recorded into a .tar.gz, replayed packed.
    let packed = tmp.path().join("in.tar.gz");
    // An archive holds a complete capture: an overlay fixture is packed composed.
    pack(&common::complete(fixture), &packed);
    let out_packed = tmp.path().join("out.tar.gz");
    rerecord(&packed, &out_packed, &[]);
    let got = verdict(&out_packed);
    if got != want {
        problems.push(format!(
            "{name} (tar.gz): re-recorded {got:?}, expected {want:?}"
        ));
    }
    problems
}

/// `tar czf OUT -C DIR .`, built with the tar crate: GNU tar exits 1 when a file's ctime moves
/// while it reads it, and the composed trees are hard links that other threads link again
/// (which moves the ctime) while this one packs.
fn pack(dir: &Path, out: &Path) {
    let file = std::fs::File::create(out).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all(".", dir).unwrap();
    tar.into_inner().unwrap().finish().unwrap();
}

#[test]
fn every_kind_of_capture_re_records_to_the_same_verdict_as_dir_and_tar_gz() {
    let fixtures = common::fixtures();
    assert!(fixtures.len() >= 40, "{} fixtures", fixtures.len());
    let kinds: Vec<PathBuf> = common::one_per_kind(&fixtures).into_iter().collect();
    assert!(kinds.len() >= 6, "{} kinds of capture", kinds.len());
    let problems: Vec<String> = common::parallel::map(&kinds, |f| check_one(f)).concat();
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn re_recording_carries_the_probe_answers_and_redacts_again() {
    let fixture = common::repo().join("fixtures/h100-nccl-low-bandwidth");
    let tmp = common::tempdir().unwrap();
    // Unredacted: the answers come over as they were recorded.
    let plain = tmp.path().join("plain");
    rerecord(&fixture, &plain, &["--no-redact"]);
    // The fixture is an overlay: its answers are read by path in its composed tree.
    let complete = common::complete(&fixture);
    for answer in ["nvml.json", "pod-resources.json"] {
        let a: Value = serde_json::from_str(
            &fs::read_to_string(complete.join(".gpudoctor").join(answer)).unwrap(),
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            &fs::read_to_string(plain.join(".gpudoctor").join(answer)).unwrap(),
        )
        .unwrap();
        for device in 0..8 {
            assert_eq!(
                a["devices"][device]["uuid"], b["devices"][device]["uuid"],
                "{answer}: device {device}"
            );
        }
        if answer == "pod-resources.json" {
            // The same answers, whatever defaults the hand-made file left out.
            let parse = |v: &Value| parse_pod_resources_json(&v.to_string()).unwrap();
            let (a, b) = (parse(&a), parse(&b));
            assert_eq!(a.list, b.list, "pod-resources list carried over");
            assert_eq!(a.allocatable, b.allocatable, "allocatable carried over");
        }
    }
    assert_eq!(
        fs::read_to_string(fixture.join(".gpudoctor/nccl/all_reduce_perf.log")).unwrap(),
        fs::read_to_string(plain.join(".gpudoctor/nccl/all_reduce_perf.log")).unwrap(),
        "the NCCL log is carried over verbatim"
    );
    // Redacted (the default): GPU UUIDs do not survive, the verdict does.
    let redacted = tmp.path().join("redacted");
    rerecord(&fixture, &redacted, &[]);
    let nvml = fs::read_to_string(complete.join(".gpudoctor/nvml.json")).unwrap();
    let uuid = serde_json::from_str::<Value>(&nvml).unwrap()["devices"][0]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let again = fs::read_to_string(redacted.join(".gpudoctor/nvml.json")).unwrap();
    assert!(!again.contains(&uuid), "{uuid} survived redaction");
    assert!(manifest(&redacted)["redaction"]["enabled"] == true);
    assert_eq!(verdict(&redacted), expected(&fixture));
}

#[test]
fn re_recording_with_a_kernel_log_judges_and_keeps_that_log() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let tmp = common::tempdir().unwrap();
    let log = tmp.path().join("dmesg.txt");
    fs::write(
        &log,
        "[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n[ 1235.0] usb 1-1: new device\n",
    )
    .unwrap();
    let out = tmp.path().join("cap");
    rerecord(&fixture, &out, &["--kernel-log", log.to_str().unwrap()]);
    let kept = fs::read_to_string(out.join(".gpudoctor/kmsg.txt")).unwrap();
    assert!(kept.contains("Xid") && !kept.contains("usb"), "{kept}");
    let (exit, layer, codes) = verdict(&out);
    assert_eq!((exit, layer), (Value::from(1), Value::from("driver")));
    assert!(codes.contains("driver.xid_events"), "{codes:?}");
}

/// A capture is not read twice: `record --sample` is for a live node, and a capture re-records
/// with the window it was recorded with (h100-hca-errors-rising keeps its first reading).
#[test]
fn a_capture_keeps_its_sample_window_and_refuses_a_new_one() {
    let tmp = common::tempdir().unwrap();
    let fixture = common::repo().join("fixtures/h100-hca-errors-rising");
    let out = tmp.path().join("never");
    let result = gpudoctor(&[
        "record",
        "--root",
        fixture.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--sample",
        "1",
    ]);
    let err = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(2), "{err}");
    assert!(
        err.contains("gpudoctor: --sample ") && err.contains("is a capture"),
        "{err}"
    );
    assert!(!out.exists());
    let again = tmp.path().join("again");
    rerecord(&fixture, &again, &[]);
    let window = |root: &Path| -> Value {
        serde_json::from_str(&fs::read_to_string(root.join(".gpudoctor/sample.json")).unwrap())
            .unwrap()
    };
    assert_eq!(window(&again), window(&fixture));
}

#[test]
fn an_incomplete_capture_is_not_re_recorded_as_a_live_node() {
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("cut-short");
    common::copy_tree(&common::repo().join("fixtures/hgx-h100-healthy"), &root);
    fs::remove_file(root.join(".gpudoctor/manifest.json")).unwrap();
    let out = tmp.path().join("never");
    let result = gpudoctor(&[
        "record",
        "--root",
        root.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&result.stderr).contains("not a complete capture"));
    assert!(!out.exists());
}

#[test]
fn an_archive_that_is_not_a_capture_is_not_recorded() {
    let tmp = common::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir_all(tree.join("sys/bus/pci/devices")).unwrap();
    let packed = tmp.path().join("not-a-capture.tar.gz");
    pack(&tree, &packed);
    let out = tmp.path().join("never");
    let result = gpudoctor(&[
        "record",
        "--root",
        packed.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(2));
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(
        err.contains("is not a capture: no .gpudoctor/manifest.json"),
        "{err}"
    );
    assert!(!out.exists());
}

/// `check --keep-going --format json` of `root` with `extra`: the exit code and every check's
/// status and summary, by code.
fn judged(
    root: &Path,
    extra: &[&str],
) -> (i32, std::collections::BTreeMap<String, (String, String)>) {
    let mut args = vec![
        "check",
        "--root",
        root.to_str().unwrap(),
        "--keep-going",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = gpudoctor(&args);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let checks = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["code"].as_str().unwrap().to_string(),
                (
                    c["status"].as_str().unwrap().to_string(),
                    c["summary"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    (out.status.code().unwrap(), checks)
}

/// Issue 41, item 2: `record --root CAPTURE --perftest-log F` dropped the log (the new capture
/// replayed exit 0 where `check --root CAPTURE --perftest-log F` exits 1), and `--state-dir`
/// was dropped the same way. Every per-run input `check` takes with a capture is taken by a
/// re-record too: the new capture replays with the exit code and the statuses `check` gives
/// with that input, the check the input feeds included.
#[test]
fn re_recording_with_a_per_run_input_replays_as_check_judges_with_it() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let tmp = common::tempdir().unwrap();
    let perftest = common::repo().join("tests/data/perftest/perftest-31-cuda-mr-fail.txt");
    let nccl = tmp.path().join("run.log");
    fs::copy(
        common::repo().join("fixtures/h100-nccl-low-bandwidth/.gpudoctor/nccl/all_reduce_perf.log"),
        &nccl,
    )
    .unwrap();
    let kernel = tmp.path().join("dmesg.txt");
    fs::write(
        &kernel,
        "[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n",
    )
    .unwrap();
    let cases: [(&str, &str, PathBuf, &str); 4] = [
        ("perftest", "--perftest-log", perftest, "rdma.perftest_log"),
        ("nccl", "--nccl-log", nccl, "nccl.bus_bandwidth"),
        ("kernel", "--kernel-log", kernel, "driver.xid_events"),
        // A fresh directory for each run: both start from the same (empty) state.
        (
            "state",
            "--state-dir",
            PathBuf::new(),
            "driver.recurring_faults",
        ),
    ];
    let mut problems = Vec::new();
    for (name, option, input, code) in cases {
        let given = |leg: &str| -> PathBuf {
            if option == "--state-dir" {
                tmp.path().join(format!("state-{leg}"))
            } else {
                input.clone()
            }
        };
        let checked = given("check");
        let (exit, checks) = judged(&fixture, &[option, checked.to_str().unwrap()]);
        let out = tmp.path().join(format!("cap-{name}"));
        let recorded = given("record");
        rerecord(&fixture, &out, &[option, recorded.to_str().unwrap()]);
        let (replayed_exit, replayed) = judged(&out, &[]);
        let status = |m: &std::collections::BTreeMap<String, (String, String)>| {
            m.get(code).map(|(s, _)| s.clone()).unwrap_or_default()
        };
        if status(&checks) == "skip" {
            problems.push(format!(
                "{name}: {code} skipped by check itself: {:?}",
                checks.get(code)
            ));
        }
        if (replayed_exit, status(&replayed)) != (exit, status(&checks)) {
            problems.push(format!(
                "{name}: check {option} gave exit {exit}, {code} {:?}; the re-recorded capture replays exit {replayed_exit}, {code} {:?}",
                checks.get(code),
                replayed.get(code)
            ));
        }
        let differing: Vec<&String> = checks
            .iter()
            .filter(|(c, (s, _))| replayed.get(*c).map(|(r, _)| r) != Some(s))
            .map(|(c, _)| c)
            .collect();
        if !differing.is_empty() {
            problems.push(format!("{name}: statuses differ for {differing:?}"));
        }
    }
    assert!(
        fs::read_dir(tmp.path().join("cap-perftest/.gpudoctor/perftest"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 1,
        "the perftest output is not kept in the new capture"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
