//! `gpudoctor fleet`: a fleet of reports generated from the fixtures, plus synthetic variations
//! (one node with low NCCL bus bandwidth, a fleet-wide failing check, a port trained low, a
//! newer version's report, a duplicate, files that are not reports), names exactly the right
//! nodes and checks; of two reports of one host, the worse verdict is kept whatever either
//! file's times say. Speed is benches/fleet.py's job, not a test's.
//!
//! Submodules: `faults_and_outliers` (a mixed fleet, its table and Markdown, mixed versions,
//! outliers), `first_screen` (hundreds of nodes on one screen) and `report_files` (which files
//! count and which verdict a node's reports give it).

mod common;

use std::path::Path;

use serde_json::{Value, json};

#[path = "fleet/faults_and_outliers.rs"]
mod faults_and_outliers;
#[path = "fleet/first_screen.rs"]
mod first_screen;
#[path = "fleet/report_files.rs"]
mod report_files;

/// `check --keep-going --format json` of a fixture, as a DaemonSet would save it.
fn report(fixture: &str) -> Value {
    let root = format!("fixtures/{fixture}");
    let out = common::gpudoctor(&["check", "--root", &root, "--keep-going", "--format", "json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn write(dir: &Path, name: &str, value: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// Set a file's modification time `ago` seconds into the past.
fn set_modified(file: &Path, ago: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(ago);
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

fn summary(dir: &Path) -> (Value, String, i32) {
    let out = common::gpudoctor(&["fleet", dir.to_str().unwrap(), "--format", "json"]);
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap(),
    )
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}
