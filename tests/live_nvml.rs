//! The live NVML path (src/source/nvml_live.rs: nvml-wrapper → libnvidia-ml) against a stand-in
//! library built from tests/fake-nvml, which answers from a gpudoctor `nvml.json`. For every
//! fixture, what the live probe reads back must equal what replay reads from the file, and the
//! two reports must match; injected errors must come back as the same kinds.
//!
//! The fake reads the JSON path from `GPUDOCTOR_FAKE_NVML_JSON`, which is process-global: every
//! test here that loads NVML holds [`NVML`], and no test touches the environment without it.
//! In tests/live_nvml/: replay_parity, injected_errors, reading_round_trips, library_loading.

mod common;
common::tests_mostly_wait!();

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use gpudoctor::answers::nvml::{NvmlErrorKind, NvmlFacts, parse_nvml_json};
use gpudoctor::source::{HostSource, KMSG_TXT, NVML_JSON, Source, SourceOptions};
use serde_json::{Value, json};

const ENV_JSON: &str = "GPUDOCTOR_FAKE_NVML_JSON";

/// Serialises the tests that set [`ENV_JSON`] or load an NVML library.
static NVML: Mutex<()> = Mutex::new(());

fn nvml_lock() -> MutexGuard<'static, ()> {
    NVML.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn fake_lib() -> &'static Path {
    common::fake_nvml_lib()
}

/// Point the fake at `json`. The caller holds [`nvml_lock`].
fn use_json(_held: &MutexGuard<'static, ()>, json: &Path) {
    // SAFETY: every test in this binary that reads or writes the environment, or loads NVML
    // (whose probe thread reads it), holds the NVML lock, so nothing reads it concurrently.
    unsafe { std::env::set_var(ENV_JSON, json) };
}

fn live_source(root: &Path) -> HostSource {
    let kmsg = root.join(KMSG_TXT);
    HostSource::new(
        root,
        SourceOptions {
            nvml_lib: Some(fake_lib().to_path_buf()),
            kernel_log: kmsg.is_file().then_some(kmsg),
            probe_timeout: Duration::from_secs(30),
            nccl: gpudoctor::source::NcclOptions {
                logs: nccl_logs(root),
                ..Default::default()
            },
            ..SourceOptions::default()
        },
    )
}

/// A capture's nccl-tests logs, given to the live source as `--nccl-log` files.
fn nccl_logs(root: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(root.join(".gpudoctor/nccl"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    logs.retain(|p| p.extension().is_some_and(|x| x == "log"));
    logs.sort();
    logs
}

/// Facts as JSON with every error text blanked: live texts come from
/// nvml-wrapper, recorded ones from wherever the fixture got them. `NvmlError` is
/// `{"kind", "message"}` (in `Reading::Error` too, `{"error": {"kind", "message"}}`).
fn without_messages(facts: &NvmlFacts) -> Value {
    fn blank(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.contains_key("kind") && map.get("message").is_some_and(Value::is_string) {
                    map.insert("message".into(), Value::from(""));
                }
                if map.len() == 1
                    && let Some(Value::String(text)) = map.get_mut("error")
                {
                    text.clear();
                }
                map.values_mut().for_each(blank);
            }
            Value::Array(items) => items.iter_mut().for_each(blank),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(facts).unwrap();
    blank(&mut value);
    value
}

/// Every leaf where `got` differs from `expected`, as `path: expected X, got Y`.
fn differences(path: &str, expected: &Value, got: &Value, out: &mut Vec<String>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let mut keys: Vec<&String> = e.keys().chain(g.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let null = Value::Null;
                differences(
                    &format!("{path}.{key}"),
                    e.get(key).unwrap_or(&null),
                    g.get(key).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(e), Value::Array(g)) if e.len() == g.len() => {
            for (i, (e, g)) in e.iter().zip(g).enumerate() {
                differences(&format!("{path}[{i}]"), e, g, out);
            }
        }
        _ if expected != got => out.push(format!("{path}: expected {expected}, got {got}")),
        _ => {}
    }
}

fn assert_same(what: &str, expected: &Value, got: &Value) {
    let mut diffs = Vec::new();
    differences("", expected, got, &mut diffs);
    assert!(
        diffs.is_empty(),
        "{what}: {} difference(s):\n  {}",
        diffs.len(),
        diffs
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

fn healthy_json() -> Value {
    let path = common::repo()
        .join("fixtures/hgx-h100-healthy")
        .join(NVML_JSON);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Write `facts` to a temporary `nvml.json`, probe it live, and check the probe read back
/// exactly that (error texts aside). Returns the live facts for further checks.
fn probe_injected(what: &str, facts: &Value) -> NvmlFacts {
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json = dir.path().join("nvml.json");
    std::fs::write(&json, serde_json::to_string_pretty(facts).unwrap()).unwrap();
    use_json(&held, &json);
    let live = live_source(dir.path()).nvml();
    let expected = parse_nvml_json(&facts.to_string()).unwrap();
    assert_same(what, &without_messages(&expected), &without_messages(&live));
    live
}

#[path = "live_nvml/injected_errors.rs"]
mod injected_errors;
#[path = "live_nvml/library_loading.rs"]
mod library_loading;
#[path = "live_nvml/reading_round_trips.rs"]
mod reading_round_trips;
#[path = "live_nvml/replay_parity.rs"]
mod replay_parity;
