//! `gpudoctor judge FILE…` (issue 45): pasted files told apart by their content, judged by
//! `check`'s checks with no node behind them, into one report; findings name file and line.
//! Inputs are real pastes (tests/data/judge/SOURCES.md, tests/data/topo-m/README.md).
//!
//! Tests, in tests/judge/: input kinds, topology matrices, node configs, NCCL and RDMA/kernel logs.

mod common;

use std::io::Write as _;
use std::process::Stdio;

use common::gpudoctor;
use serde_json::Value;

const DATA: &str = "tests/data/judge";
const TOPO: &str = "tests/data/topo-m";

fn judge_json(files: &[&str]) -> (Value, i32) {
    let mut args = vec!["judge", "--format", "json"];
    args.extend_from_slice(files);
    let out = gpudoctor(&args);
    let code = out.status.code().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{files:?}: not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, code)
}

fn stdin_json(path: &str) -> (Value, i32) {
    let text = std::fs::read(common::repo().join(path)).unwrap();
    let mut child = common::scratch::gpudoctor_command()
        .args(["judge", "--format", "json", "-"])
        .current_dir(common::repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    let report = serde_json::from_slice(&out.stdout).expect("one JSON report");
    (report, out.status.code().unwrap())
}

/// Every check result of the report, with its layer.
fn checks(report: &Value) -> Vec<(String, Value)> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| {
            let id = l["id"].as_str().unwrap().to_string();
            l["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |c| (id.clone(), c.clone()))
        })
        .collect()
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    checks(report)
        .into_iter()
        .map(|(_, c)| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn status_of<'r>(report: &'r Value, code: &str) -> Vec<&'r Value> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .filter(|c| c["code"] == code)
        .collect()
}

/// Write `text` to a scratch file named `name`; judge it.
fn judge_text(name: &str, text: &str) -> (Value, i32) {
    let dir = common::scratch::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, text).unwrap();
    judge_json(&[file.to_str().unwrap()])
}

#[path = "judge/input_kinds.rs"]
mod input_kinds;

#[path = "judge/topology_matrices.rs"]
mod topology_matrices;

#[path = "judge/node_configs.rs"]
mod node_configs;

#[path = "judge/nccl_logs.rs"]
mod nccl_logs;

#[path = "judge/rdma_and_kernel_logs.rs"]
mod rdma_and_kernel_logs;
