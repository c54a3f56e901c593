//! `gpudoctor record` round trips: every fixture, recorded through the live host source (with
//! the stand-in NVML library answering from the fixture's nvml.json), replays to the same
//! findings; a capture of a capture is identical; redaction leaves no identifier behind; packed
//! captures replay directly.
//! In tests/record/: round_trips (replays, re-records), redaction, refusals (outputs, links).

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

#[path = "record/redaction.rs"]
mod redaction;
#[path = "record/refusals.rs"]
mod refusals;
#[path = "record/round_trips.rs"]
mod round_trips;
