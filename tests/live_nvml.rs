//! The live NVML path (src/source/nvml_live.rs: nvml-wrapper → libnvidia-ml) against a stand-in
//! library built from tests/fake-nvml, which answers from a gpudoctor `nvml.json`. For every
//! fixture, what the live probe reads back must equal what replay reads from the file, and the
//! two reports must match; injected errors must come back as the same kinds.
//!
//! The fake reads the JSON path from `GPUDOCTOR_FAKE_NVML_JSON`, which is process-global: every
//! test here that loads NVML holds [`NVML`], and no test touches the environment without it.

mod common;
common::tests_mostly_wait!();

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use gpudoctor::answers::nvml::{NvmlErrorKind, NvmlFacts, parse_nvml_json};
use gpudoctor::engine::{self, RunOptions};
use gpudoctor::report::Report;
use gpudoctor::report::SourceKind;
use gpudoctor::source::{self, HostSource, KMSG_TXT, NVML_JSON, Source, SourceOptions};
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

fn parse_file(path: &Path) -> NvmlFacts {
    let text = std::fs::read_to_string(path).unwrap();
    parse_nvml_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the live probe can give back for these recorded facts: gpudoctor-only kinds
/// (`not_recorded`, `unreadable`) are plain NVML_ERROR_UNKNOWN to a library.
fn as_live_can_answer(mut facts: NvmlFacts) -> NvmlFacts {
    let fold = |kind: &mut NvmlErrorKind| {
        if matches!(kind, NvmlErrorKind::NotRecorded | NvmlErrorKind::Unreadable) {
            *kind = NvmlErrorKind::Unknown;
        }
    };
    if let Some(err) = &mut facts.init_error {
        fold(&mut err.kind);
    }
    for device in &mut facts.devices {
        if let Some(err) = &mut device.error {
            fold(&mut err.kind);
        }
        // Time spent is the live probe's own measure, never recorded.
        device.probe_ms = None;
        if let gpudoctor::answers::nvml::Reading::Value(migs) = &mut device.mig_devices {
            for err in migs.iter_mut().filter_map(|m| m.error.as_mut()) {
                fold(&mut err.kind);
            }
        }
    }
    facts
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

/// (live text, recorded text) for every error message the two snapshots hold at the same place.
fn message_pairs(recorded: &Value, live: &Value, out: &mut Vec<(String, String)>) {
    match (recorded, live) {
        (Value::Object(r), Value::Object(l)) => {
            for (key, r_value) in r {
                let Some(l_value) = l.get(key) else { continue };
                match (key.as_str(), r_value, l_value) {
                    ("message" | "error", Value::String(r_text), Value::String(l_text)) => {
                        if r_text != l_text && !l_text.is_empty() {
                            out.push((l_text.clone(), r_text.clone()));
                        }
                    }
                    _ => message_pairs(r_value, l_value, out),
                }
            }
        }
        (Value::Array(r), Value::Array(l)) => {
            for (r, l) in r.iter().zip(l) {
                message_pairs(r, l, out);
            }
        }
        _ => {}
    }
}

fn replace_texts(value: &mut Value, pairs: &[(String, String)]) {
    match value {
        Value::String(text) => {
            for (live, recorded) in pairs {
                if text.contains(live.as_str()) {
                    *text = text.replace(live.as_str(), recorded);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_texts(v, pairs)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_texts(v, pairs)),
        _ => {}
    }
}

/// A report as JSON, minus what legitimately differs between a live run and a replay: the
/// source, durations, the kernel-log path, NVML's error texts (`nvml.init` evidence) and the
/// live probe's own timings (the disk checks: `common::without_disk_checks`).
fn comparable(report: &Report, kernel_log: Option<&Path>) -> Value {
    let mut value = serde_json::to_value(report).unwrap();
    value["source"] = Value::Null;
    value["generated_at"] = Value::Null;
    value["duration_ms"] = json!(0);
    for layer in value["layers"].as_array_mut().unwrap() {
        layer["duration_ms"] = json!(0);
        for check in layer["checks"].as_array_mut().unwrap() {
            // NVML time per GPU is measured live only.
            if let Some(figures) = check.get_mut("figures").and_then(Value::as_array_mut) {
                figures.retain(|f| f["name"] != "nvml_probe_seconds");
                if figures.is_empty() {
                    check.as_object_mut().unwrap().remove("figures");
                }
            }
            let evidence = check["evidence"].as_array_mut().unwrap();
            // So are nvmlInit's and each handle's times.
            evidence.retain(|e| e["source"] != "nvml timing (this run)");
            for evidence in evidence {
                if evidence["source"] == "nvml.init" {
                    evidence["observed"] = json!("");
                }
            }
        }
    }
    // A live run names the kernel log by the path it was given (in evidence and summaries),
    // replay by its place in the capture.
    if let Some(path) = kernel_log {
        replace_texts(
            &mut value,
            &[(path.display().to_string(), KMSG_TXT.to_string())],
        );
    }
    value
}

#[test]
fn every_fixture_reads_the_same_live_as_in_replay() {
    let held = nvml_lock();
    // A live run reads a node's root, not a fixture's overlay: each fixture as its composed tree.
    let fixtures: Vec<PathBuf> = common::fixtures()
        .into_iter()
        .filter(|dir| !common::has_sample_window(dir))
        .map(|dir| common::complete(&dir))
        .filter(|dir| dir.join(NVML_JSON).is_file())
        .collect();
    assert!(
        fixtures.len() >= 40,
        "{} fixtures have {NVML_JSON}",
        fixtures.len()
    );

    for root in &fixtures {
        let name = common::name_of(root);
        let json = root.join(NVML_JSON);
        use_json(&held, &json);
        let host = live_source(root);

        // (a) the facts, field by field.
        let recorded = as_live_can_answer(parse_file(&json));
        let live = host.nvml();
        assert_same(
            &format!("{name}: live NVML facts vs {NVML_JSON}"),
            &without_messages(&recorded),
            &without_messages(&live),
        );

        // A capture of the active probes (`.gpudoctor/cuda.json`) is judged live only with the
        // stand-in CUDA library and ib_write_bw running: tests/active_probes.rs compares
        // those live runs with their replay.
        if root.join(".gpudoctor/cuda.json").is_file() {
            continue;
        }
        // A capture's `env.json` is what a live run reads from its own environment, which this
        // process (its tests run on threads) may not change: tests/record.rs runs such a
        // fixture live in a child given that environment and compares it with its replay.
        if root.join(".gpudoctor/env.json").is_file() {
            continue;
        }
        // A capture's `--state-dir` history is what a live run reads from the directory the
        // option names: tests/state_dir.rs runs that path.
        if root.join(".gpudoctor/state/history.json").is_file() {
            continue;
        }

        // (b) the whole diagnosis, every layer but the device plugin's: its probe is the
        // kubelet's socket, which a fixture holds as an empty file (tests/pod_resources.rs
        // serves it live and compares the same way).
        let options = RunOptions {
            keep_going: true,
            skip: vec![gpudoctor::report::Layer::DevicePlugin],
            ..Default::default()
        };
        let live_report = engine::run(&host, &options);
        let replay = source::open(root, SourceOptions::default()).expect("a complete capture");
        assert_eq!(replay.kind(), SourceKind::Replay, "{name} must replay");
        let replay_report = engine::run(replay.as_ref(), &options);

        let mut pairs = Vec::new();
        message_pairs(
            &serde_json::to_value(&recorded).unwrap(),
            &serde_json::to_value(&live).unwrap(),
            &mut pairs,
        );
        pairs.sort_by_key(|(live, _)| std::cmp::Reverse(live.len()));
        let kmsg = root.join(KMSG_TXT);
        let kernel_log = kmsg.is_file().then_some(kmsg.as_path());
        let mut got = comparable(&live_report, kernel_log);
        replace_texts(&mut got, &pairs);
        // NCCL logs likewise: the `--nccl-log` path live, `.gpudoctor/nccl/...` in replay.
        let nccl_pairs: Vec<(String, String)> = nccl_logs(root)
            .iter()
            .filter_map(|p| {
                let rel = p.strip_prefix(root).ok()?.display().to_string();
                Some((p.display().to_string(), rel))
            })
            .collect();
        replace_texts(&mut got, &nccl_pairs);
        let mut expected = comparable(&replay_report, None);
        // The disk checks: this machine's disk live, the capture's `statvfs.json` in replay
        // (tests/record.rs compares a live recording with its replay instead).
        common::without_disk_checks(&mut expected, &mut got);
        assert_same(
            &format!("{name}: live report vs replay report"),
            &expected,
            &got,
        );
    }
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

fn init_failure(kind: &str, message: &str) -> Value {
    json!({
        "init_error": {"kind": kind, "message": message},
        "driver_version": null,
        "nvml_version": null,
        "cuda_driver_version": null,
        "device_count": 0,
        "devices": []
    })
}

#[test]
fn an_injected_version_mismatch_fails_init() {
    let live = probe_injected(
        "init lib_rm_version_mismatch",
        &init_failure(
            "lib_rm_version_mismatch",
            "RM has detected an NVML/RM version mismatch.",
        ),
    );
    assert_eq!(
        live.init_error.unwrap().kind,
        NvmlErrorKind::LibRmVersionMismatch
    );
}

#[test]
fn an_injected_driver_not_loaded_fails_init() {
    let live = probe_injected(
        "init driver_not_loaded",
        &init_failure("driver_not_loaded", "Driver Not Loaded"),
    );
    assert_eq!(
        live.init_error.unwrap().kind,
        NvmlErrorKind::DriverNotLoaded
    );
}

/// NVLink 5 is known by the architecture: the stand-in answers a Blackwell GPU's DL counters
/// with zeros (what a quiet NVLink 4 link answers), so a probe that tells NVLink 5 by the DL
/// answers reads eight quiet links and never asks the field values that hold link 9's errors.
#[test]
fn nvlink5_is_known_by_the_architecture_not_by_the_dl_answers() {
    let path =
        common::complete(&common::repo().join("fixtures/b200-nvlink-errors")).join(NVML_JSON);
    let facts: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(facts["devices"][0]["architecture"], json!({"value": 10}));
    let live = probe_injected("b200 NVLink 5 counters", &facts);
    let noisy = live
        .devices
        .iter()
        .find(|d| d.pci_bus_id.as_deref() == Some("0000:9a:00.0"))
        .unwrap();
    let link = &noisy.nvlinks.value().unwrap()[9];
    assert_eq!(link.symbol_errors.value(), Some(&187));
    assert_eq!(
        link.replay_errors,
        gpudoctor::answers::nvml::Reading::NotSupported
    );
}

#[test]
fn a_lost_gpu_keeps_the_others() {
    let mut facts = healthy_json();
    let devices = facts["devices"].as_array_mut().unwrap();
    assert!(devices.len() >= 4, "the healthy fixture has 8 GPUs");
    devices[3] = json!({"index": 3, "error": {"kind": "gpu_is_lost", "message": "GPU is lost"}});
    let live = probe_injected("device 3 gpu_is_lost", &facts);
    assert_eq!(live.devices.len(), live.device_count as usize);
    assert_eq!(
        live.devices[3].error.as_ref().unwrap().kind,
        NvmlErrorKind::GpuIsLost
    );
    assert!(live.devices[2].uuid.is_some() && live.devices[4].uuid.is_some());
}

#[test]
fn queries_a_gpu_does_not_support_stay_not_supported() {
    let mut facts = healthy_json();
    let device = &mut facts["devices"][1];
    for field in ["ecc_errors", "remapped_rows", "nvlinks", "fabric"] {
        device[field] = json!("not_supported");
    }
    probe_injected(
        "device 1 without ECC, row remapping, NVLink, fabric",
        &facts,
    );
}

/// The firmware, part number, module and clock readings (issue 46): a corrupted InfoROM is the
/// answer `false` (NVML_ERROR_CORRUPTED_INFOROM), not a failed reading; an odd VBIOS and lowered
/// application clocks come back as recorded; a GPU that answers none of them stays "not
/// supported"; an error kind stays that kind.
#[test]
fn firmware_and_clock_readings_round_trip() {
    let mut facts = healthy_json();
    facts["devices"][2]["inforom_valid"] = json!({"value": false});
    facts["devices"][3]["vbios_version"] = json!({"value": "96.00.89.00.01"});
    facts["devices"][4]["applications_clocks"] =
        json!({"value": {"graphics_mhz": 1410, "memory_mhz": 1593}});
    for field in [
        "vbios_version",
        "inforom_image_version",
        "inforom_valid",
        "applications_clocks",
        "default_applications_clocks",
        "max_clocks",
        "board_part_number",
        "module_id",
    ] {
        facts["devices"][5][field] = json!("not_supported");
        facts["devices"][6][field] = json!({"error": {"kind": "no_permission", "message": "x"}});
    }
    facts["devices"][4]["max_clocks"] =
        json!({"value": {"graphics_mhz": 1980, "memory_mhz": 2619}});
    let live = probe_injected("firmware and clocks", &facts);
    assert_eq!(live.devices[2].inforom_valid.value(), Some(&false));
    let max = live.devices[4].max_clocks.value().copied();
    assert_eq!(
        max.map(|c| (c.graphics_mhz, c.memory_mhz)),
        Some((1980, 2619))
    );
    assert_eq!(live.devices[7].module_id.value(), Some(&8));
    assert_eq!(
        live.devices[0]
            .board_part_number
            .value()
            .map(String::as_str),
        Some("692-2G520-0200-000")
    );
}

/// Every reading with a value, so each fake entry point and each live mapping is crossed even
/// while the fixtures carry fewer fields.
#[test]
fn every_reading_round_trips() {
    let mut facts = healthy_json();
    let link = |n: u32, active: bool, remote: &str| {
        if !active {
            // Only the state is asked of a down link.
            return json!({"link": n, "active": false});
        }
        json!({
            "link": n, "active": active, "version": {"value": 4},
            "remote_pci_bus_id": remote, "remote_type": {"value": "nvswitch"},
            "replay_errors": {"value": n}, "recovery_errors": {"value": 0},
            "crc_flit_errors": {"value": 7}, "crc_data_errors": "not_supported"
        })
    };
    let rich = json!({
        "ecc_mode": {"value": {"current": true, "pending": false}},
        "ecc_errors": {"value": {"volatile_corrected": 1, "volatile_uncorrected": 2,
                                  "aggregate_corrected": 30, "aggregate_uncorrected": 4}},
        "retired_pages": {"value": {"single_bit": 2, "double_bit": 1, "pending": true}},
        "remapped_rows": {"value": {"correctable": 3, "uncorrectable": 1, "pending": true, "failure": false}},
        "temperature_c": {"value": 41},
        "temperature_slowdown_c": {"value": 87},
        "temperature_shutdown_c": {"value": 92},
        "power_usage_mw": {"value": 71234},
        "power_limit_mw": {"value": 700000},
        "clock_event_reasons": {"value": 4294967297u64},
        "utilization_gpu_pct": {"value": 0},
        "pcie_current_gen": {"value": 5},
        "pcie_max_gen": {"value": 5},
        "pcie_current_width": {"value": 16},
        "pcie_max_width": {"value": 16},
        "pcie_replay_counter": {"value": 12},
        "mig_mode": {"value": {"current": false, "pending": true}},
        "nvlinks": {"value": [link(0, true, "0000:05:00.0"), link(1, false, ""), link(2, true, "0000:9A:00.0")]},
        "fabric": {"value": {"state": "completed", "status": "success", "clique_id": 32766,
                              "cluster_uuid": "0123456789abcdef0123456789abcdef", "health_mask": 5}}
    });
    for (key, value) in rich.as_object().unwrap() {
        facts["devices"][0][key] = value.clone();
    }
    // An older driver's fabric answer (no health mask: the v1 call) and one not yet trained.
    facts["devices"][1]["fabric"] = json!({"value": {"state": "completed", "status": "success", "clique_id": 1, "cluster_uuid": null, "health_mask": null}});
    facts["devices"][2]["fabric"] = json!({"value": {"state": "in_progress", "status": null, "clique_id": 0, "cluster_uuid": null, "health_mask": 0}});
    // Errors other than not-supported, per reading.
    for field in [
        "serial",
        "temperature_c",
        "ecc_errors",
        "retired_pages",
        "nvlinks",
        "fabric",
    ] {
        facts["devices"][3][field] = json!({"error": "Unknown Error"});
    }
    facts["devices"][4]["persistence_mode"] = json!({"value": false});
    facts["devices"][4]["minor_number"] = json!("not_supported");

    // The remote bus id is normalised on the way back, as for the gpu's own.
    let mut expected = facts.clone();
    expected["devices"][0]["nvlinks"]["value"][2]["remote_pci_bus_id"] = json!("0000:9a:00.0");
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, facts.to_string()).unwrap();
    use_json(&held, &json_path);
    let live = live_source(dir.path()).nvml();
    let expected = parse_nvml_json(&expected.to_string()).unwrap();
    assert_same(
        "every reading",
        &without_messages(&expected),
        &without_messages(&live),
    );
}

/// MIG devices through the live walk: a GPU in MIG mode with every MIG field, index gaps
/// (NVML's NOT_FOUND) and a MIG handle that fails; MIG on with no instance (an empty list, a
/// fact); MIG on but not enumerated (an older capture: `not_supported`) or unreadable; and a
/// GPU with MIG off, whose devices are never walked.
#[test]
fn mig_devices_round_trip() {
    let mut facts = healthy_json();
    let on = json!({"value": {"current": true, "pending": true}});
    let mig = |index: u32, gi: u32, profile: &str, mib: u64| {
        json!({
            "index": index,
            "uuid": format!("MIG-5b2c1f0e-4d3a-5e6f-8a9b-{index:012x}"),
            "name": format!("NVIDIA H100 80GB HBM3 MIG {profile}"),
            "gpu_instance_id": {"value": gi}, "compute_instance_id": {"value": 0},
            "memory_total_mib": {"value": mib}, "error": null
        })
    };
    facts["devices"][0]["mig_mode"] = on.clone();
    facts["devices"][0]["mig_devices"] = json!({"value": [
        mig(0, 2, "3g.40gb", 40192),
        mig(1, 7, "1g.10gb", 9984),
        // Index 2 has no MIG device (a gap), index 3 one whose handle failed.
        {"index": 3, "uuid": null, "name": null, "gpu_instance_id": "not_supported",
         "compute_instance_id": "not_supported", "memory_total_mib": "not_supported",
         "error": {"kind": "unknown", "message": "Unknown Error"}},
        {"index": 4, "uuid": "MIG-5b2c1f0e-4d3a-5e6f-8a9b-000000000004", "name": null,
         "gpu_instance_id": {"value": 9}, "compute_instance_id": {"error": "Unknown Error"},
         "memory_total_mib": "not_supported", "error": null}
    ]});
    facts["devices"][1]["mig_mode"] = on.clone();
    facts["devices"][1]["mig_devices"] = json!({"value": []});
    facts["devices"][2]["mig_mode"] = on.clone();
    facts["devices"][2]["mig_devices"] = json!("not_supported");
    facts["devices"][3]["mig_mode"] = on;
    facts["devices"][3]["mig_devices"] = json!({"error": "Unknown Error"});
    let live = probe_injected("MIG devices", &facts);
    let migs = live.devices[0].mig_list().expect("GPU 0 enumerated");
    assert_eq!(
        migs.iter().map(|m| m.index).collect::<Vec<_>>(),
        [0, 1, 3, 4]
    );
    assert_eq!(migs[1].profile(), Some("1g.10gb"));
    assert_eq!(live.devices[1].mig_list(), Some(&[][..]));
    assert!(live.devices[2].mig_list().is_none());

    // MIG off: a recorded list is not walked (the max count is 0 on a real driver), so what
    // comes back is "not supported", whatever the file says.
    let mut off = facts.clone();
    off["devices"][0]["mig_mode"] = json!({"value": {"current": false, "pending": false}});
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, off.to_string()).unwrap();
    use_json(&held, &json_path);
    let live = live_source(dir.path()).nvml();
    assert_eq!(
        live.devices[0].mig_devices,
        gpudoctor::answers::nvml::Reading::NotSupported
    );
}

/// Error kinds per reading: each failed reading comes back with the kind the library answered
/// (not just "unknown"), and a GPU lost after its handle answers `gpu_is_lost` from its first
/// reading on, every later one recorded as lost without being asked.
#[test]
fn reading_error_kinds_round_trip() {
    let mut facts = healthy_json();
    let err = |kind: &str| json!({"error": {"kind": kind, "message": "x"}});
    facts["devices"][1]["temperature_c"] = err("no_permission");
    facts["devices"][1]["ecc_errors"] = err("timeout");
    facts["devices"][1]["power_usage_mw"] = err("irq_issue");
    facts["devices"][1]["clock_event_reasons"] = err("argument_version_mismatch");
    facts["devices"][1]["remapped_rows"] = err("not_ready");
    // GPU 2: lost after its handle; every reading after the first answers GPU_IS_LOST.
    let lost = facts["devices"][2].as_object_mut().unwrap();
    for (key, value) in lost.iter_mut() {
        if !["index", "pci_bus_id", "uuid", "name", "error"].contains(&key.as_str()) {
            *value = err("gpu_is_lost");
        }
    }
    for key in [
        "mig_devices",
        "compute_mode",
        "compute_processes",
        "architecture",
    ] {
        lost.insert(key.into(), err("gpu_is_lost"));
    }
    let live = probe_injected("reading error kinds", &facts);
    let kind = |r: &gpudoctor::answers::nvml::Reading<u32>| r.error().map(|e| e.kind);
    assert_eq!(
        kind(&live.devices[1].temperature_c),
        Some(NvmlErrorKind::NoPermission)
    );
    let gone = &live.devices[2];
    let (at, e) = gone.lost_at().expect("GPU 2 is lost");
    assert_eq!(at, "serial");
    assert_eq!(e.kind, NvmlErrorKind::GpuIsLost);
    assert!(
        gone.temperature_c
            .error()
            .unwrap()
            .message
            .contains("not asked"),
        "{:?}",
        gone.temperature_c
    );
}

/// The fabric through every struct version the probe knows: v3 (health summary and mask), v2
/// (mask only: the driver refuses v3 with ARGUMENT_VERSION_MISMATCH), and v1 when the V call
/// answers NOT_SUPPORTED; an unknown status code kept by number. NVLink 5 counters as field
/// values where the DL counters are not supported; row remapping under MIG from the field
/// values; utilisation not supported under MIG.
#[test]
fn newer_readings_round_trip() {
    let mut facts = healthy_json();
    let v = |x: Value| json!({"value": x});
    facts["devices"][0]["fabric"] = v(json!({"state": "completed", "status": "success",
        "clique_id": 32766, "cluster_uuid": "3143b15bc2cd192b28cc9b5473fb5b93",
        "health_mask": 0xa9, "health_summary": "limited_capacity"}));
    facts["devices"][1]["fabric"] = v(json!({"state": "completed", "status": "42",
        "clique_id": 0, "cluster_uuid": null, "health_mask": 0xaa, "health_summary": null}));
    facts["devices"][2]["fabric"] = v(json!({"state": "completed", "status": "success",
        "clique_id": 0, "cluster_uuid": null, "health_mask": null, "health_summary": null}));
    facts["devices"][3]["fabric"] = v(json!({"state": "completed", "status": "success",
        "clique_id": 0, "cluster_uuid": null, "health_mask": 0, "health_summary": 7}));
    // GPU 4: NVLink 5 (Blackwell): DL counters not supported, field values instead.
    for link in facts["devices"][4]["nvlinks"]["value"]
        .as_array_mut()
        .unwrap()
    {
        for dl in [
            "replay_errors",
            "recovery_errors",
            "crc_flit_errors",
            "crc_data_errors",
        ] {
            link[dl] = json!("not_supported");
        }
        let n = link["link"].as_u64().unwrap();
        link["rcv_errors"] = v(json!(n));
        link["malformed_packet_errors"] = v(json!(0));
        link["buffer_overrun_errors"] = v(json!(0));
        link["local_link_integrity_errors"] = v(json!(1));
        link["link_recovery_failed"] = v(json!(0));
        link["symbol_errors"] = v(json!(n * 3));
        link["effective_errors"] = json!("not_supported");
    }
    // GPU 5: MIG on; the direct row-remap call refuses, the field values answer.
    facts["devices"][5]["mig_mode"] = v(json!({"current": true, "pending": true}));
    facts["devices"][5]["mig_devices"] = v(json!([]));
    facts["devices"][5]["remapped_rows"] =
        v(json!({"correctable": 2, "uncorrectable": 1, "pending": true, "failure": false}));
    facts["devices"][5]["utilization_gpu_pct"] = json!("not_supported");
    let live = probe_injected("newer readings", &facts);
    let summary = live.devices[0].fabric.value().unwrap().health_summary;
    assert_eq!(
        summary,
        Some(gpudoctor::answers::nvml::HealthSummary::LimitedCapacity)
    );
    assert_eq!(
        live.devices[1].fabric.value().unwrap().status.as_deref(),
        Some("42")
    );
    assert_eq!(live.devices[2].fabric.value().unwrap().health_mask, None);
    let link = &live.devices[4].nvlinks.value().unwrap()[3];
    assert_eq!(link.symbol_errors.value(), Some(&9));
    assert_eq!(
        link.replay_errors,
        gpudoctor::answers::nvml::Reading::NotSupported
    );
    assert!(live.devices[5].remapped_rows.value().unwrap().pending);
}

/// A driver without the newer symbols (the stand-in built with `--features old-driver`): the
/// fabric comes from the v1 call (no health mask or summary) and the clock-event reasons from
/// the pre-R535 `nvmlDeviceGetCurrentClocksThrottleReasons`.
#[test]
fn an_old_driver_takes_the_fallbacks() {
    let mut facts = healthy_json();
    facts["devices"][0]["fabric"] = json!({"value": {"state": "completed", "status": "success",
        "clique_id": 5, "cluster_uuid": null, "health_mask": 0xaa, "health_summary": "healthy"}});
    facts["devices"][0]["clock_event_reasons"] = json!({"value": 0x88});
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, facts.to_string()).unwrap();
    use_json(&held, &json_path);
    let host = HostSource::new(
        dir.path(),
        SourceOptions {
            nvml_lib: Some(common::fake_nvml_old_driver_lib().to_path_buf()),
            probe_timeout: Duration::from_secs(30),
            ..SourceOptions::default()
        },
    );
    let live = host.nvml();
    let mut expected = facts.clone();
    for d in expected["devices"].as_array_mut().unwrap() {
        if let Some(f) = d["fabric"].get_mut("value") {
            f["health_mask"] = Value::Null;
            f["health_summary"] = Value::Null;
        }
    }
    let expected = parse_nvml_json(&expected.to_string()).unwrap();
    assert_same(
        "old driver",
        &without_messages(&expected),
        &without_messages(&live),
    );
    assert_eq!(live.devices[0].clock_event_reasons.value(), Some(&0x88));
}

// GPUs that attach one after another without persistence mode: tests/persistence.rs.

/// One GPU whose every call hangs (`GPUDOCTOR_FAKE_NVML_HANG_DEVICE=3:600`) costs the budget,
/// not the run: `check` ends within two budgets (init, then the GPUs), driver.gpu_count names
/// GPU 3 as not answering (an `error`, not a fallen-off-the-bus `fail`), and the other seven are
/// judged. Run as a child process so the hung worker thread dies with it.
#[test]
fn a_hung_gpu_costs_the_budget_and_is_named() {
    let _held = nvml_lock();
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let dir = common::tempdir().unwrap();
    let root = common::live_root(&fixture);
    let json = dir.path().join("nvml.json");
    std::fs::copy(fixture.join(NVML_JSON), &json).unwrap();
    let budget = 3u64;
    // Built before the clock starts: in a clean clone the first call compiles the stand-in,
    // which under CI's load took longer than the whole limit (the red runs of 2026-12-06/07).
    let lib = fake_lib();
    let started = std::time::Instant::now();
    let mut child = common::scratch::gpudoctor_command()
        .args([
            "check",
            "--keep-going",
            "--only",
            "driver",
            "--format",
            "json",
            "--root",
        ])
        .arg(&root)
        .arg("--nvml-lib")
        .arg(lib)
        .args(["--timeout", &budget.to_string()])
        .env(ENV_JSON, &json)
        .env("GPUDOCTOR_FAKE_NVML_HANG_DEVICE", "3:600")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gpudoctor runs");
    let limit = Duration::from_secs(2 * budget + 20);
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            // What it had said by then: the only clue to where it waited.
            let out = child.wait_with_output().unwrap();
            panic!(
                "gpudoctor did not end within {limit:?}; stderr: {}; stdout {} bytes",
                String::from_utf8_lossy(&out.stderr),
                out.stdout.len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(budget),
        "took {took:?}: it did not wait"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let checks = report["layers"][0]["checks"].as_array().unwrap();
    let check = |code: &str| checks.iter().find(|c| c["code"] == code).unwrap().clone();
    let count = check("driver.gpu_count");
    assert_eq!(count["status"], "error", "{count}");
    let summary = count["summary"].as_str().unwrap();
    assert!(summary.contains("GPU(s) 3 did not answer"), "{summary}");
    assert!(!summary.contains("fallen off"), "{summary}");
    let persistence = check("driver.persistence_mode");
    assert_eq!(persistence["summary"], "persistence mode on for 7 GPU(s)");
    // Its time is the budget; the others' is their own.
    let figures = check("driver.nvml_init")["figures"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(figures.len(), 8, "{figures:?}");
}

#[test]
fn a_missing_library_is_library_not_found() {
    let _held = nvml_lock();
    let host = HostSource::new(
        "/nonexistent-root",
        SourceOptions {
            nvml_lib: Some(PathBuf::from("/nonexistent.so")),
            ..Default::default()
        },
    );
    let err = host.nvml().init_error.expect("init must fail");
    assert_eq!(err.kind, NvmlErrorKind::LibraryNotFound, "{}", err.message);
}

/// The way docs/testing.md runs it by hand: the binary, `--nvml-lib`, the variable set for the
/// child only.
#[test]
fn the_cli_reads_the_fake_through_nvml_lib() {
    // Spawning copies the environment: not while another test is changing it.
    let _held = nvml_lock();
    let lib = fake_lib();
    let root = common::tempdir().unwrap();
    let json = common::repo()
        .join("fixtures/hgx-h100-healthy")
        .join(NVML_JSON);
    let out = common::scratch::gpudoctor_command()
        .args(["check", "--only", "driver", "--format", "json", "--root"])
        .arg(root.path())
        .arg("--nvml-lib")
        .arg(lib)
        .env(ENV_JSON, &json)
        .output()
        .expect("gpudoctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a json report ({e}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let init = report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "driver.nvml_init")
        .expect("driver.nvml_init ran");
    assert_eq!(init["status"], "pass", "{init}");
    let summary = init["summary"].as_str().unwrap();
    assert!(
        summary.contains("driver 550.54.15, 8 device(s)"),
        "{summary}"
    );
}

/// `check --root` of a copy of the healthy node with the stand-in placed where a host keeps
/// `libnvidia-ml.so.1`, no `--nvml-lib`: the binary finds and loads it (the DaemonSet case,
/// issue 19), and the driver layer judges what it answers.
fn check_with_library_at(place: impl Fn(&Path, &Path)) -> Value {
    let _held = nvml_lock();
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let dir = common::tempdir().unwrap();
    let root = dir.path().join("root");
    common::copy_tree(&fixture, &root);
    let json = dir.path().join("nvml.json");
    std::fs::copy(root.join(NVML_JSON), &json).unwrap();
    std::fs::remove_dir_all(root.join(".gpudoctor")).unwrap();
    place(&root, dir.path());
    let out = common::scratch::gpudoctor_command()
        .args(["check", "--only", "driver", "--format", "json", "--root"])
        .arg(&root)
        .env(ENV_JSON, &json)
        .output()
        .expect("gpudoctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a json report ({e}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "driver.nvml_init")
        .expect("driver.nvml_init ran")
        .clone()
}

fn put(root: &Path, rel: &str, from: &Path) {
    let to = root.join(rel);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

#[test]
fn the_host_library_is_found_under_the_root() {
    use gpudoctor::source::host_lib::{LIB_DIRS, NVML_SONAME};
    // The GPU Operator's driver root, and a distribution path behind a soname link.
    let operator = format!("{}/{NVML_SONAME}", LIB_DIRS[0]);
    let init = check_with_library_at(|root, _| put(root, &operator, fake_lib()));
    assert_eq!(init["status"], "pass", "{init}");
    assert!(
        init["summary"]
            .as_str()
            .unwrap()
            .contains("driver 550.54.15, 8 device(s)"),
        "{init}"
    );
    let init = check_with_library_at(|root, _| {
        let rel = "usr/lib64/libnvidia-ml.so.550.54.15";
        put(root, rel, fake_lib());
        std::os::unix::fs::symlink(
            "libnvidia-ml.so.550.54.15",
            root.join("usr/lib64/libnvidia-ml.so.1"),
        )
        .unwrap();
    });
    assert_eq!(init["status"], "pass", "{init}");
    // GKE Container-Optimized OS: the installer's directory, nothing in /usr/lib*.
    let init = check_with_library_at(|root, _| {
        put(
            root,
            "home/kubernetes/bin/nvidia/lib64/libnvidia-ml.so.1",
            fake_lib(),
        )
    });
    assert_eq!(init["status"], "pass", "{init}");
}

#[test]
fn a_library_outside_the_root_is_not_loaded() {
    // The candidate links to the stand-in by an absolute path outside the root: refused, so no
    // NVML answers (this machine has no libnvidia-ml of its own to fall back to).
    let init = check_with_library_at(|root, scratch| {
        let outside = scratch.join("libnvidia-ml.so.1");
        std::fs::copy(fake_lib(), &outside).unwrap();
        use gpudoctor::source::host_lib::{LIB_DIRS, NVML_SONAME};
        let link = root.join(format!("{}/{NVML_SONAME}", LIB_DIRS[0]));
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&outside, link).unwrap();
    });
    assert_ne!(init["status"], "pass", "{init}");
    assert!(
        !init["summary"]
            .as_str()
            .unwrap()
            .contains("driver 550.54.15, 8 device(s)"),
        "{init}"
    );
}

/// `nvmlDeviceGetComputeRunningProcesses_v3` through nvml-wrapper as the real library answers it
/// (nvml.h): a first call with a count of 0 and no array answers INSUFFICIENT_SIZE with the
/// count, the second fills `nvmlProcessInfo_v2_t` (pid, usedGpuMemory, gpuInstanceId,
/// computeInstanceId); a GPU with none answers SUCCESS with 0 to the first call; used memory
/// NVML_VALUE_NOT_AVAILABLE (ULLONG_MAX: in a container, under MIG) comes back as no figure,
/// never 16 EiB.
#[test]
fn compute_processes_cross_the_v3_call_with_unavailable_memory() {
    let mut facts = healthy_json();
    facts["devices"][2]["compute_processes"] = json!({"value": [
        {"pid": 60321, "used_memory_mib": 10240},
        {"pid": 60400, "used_memory_mib": null}
    ]});
    facts["devices"][3]["compute_processes"] = json!({"value": []});
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, facts.to_string()).unwrap();
    use_json(&held, &json_path);
    let live = live_source(dir.path()).nvml();
    let list: Vec<(u32, Option<u64>)> = live.devices[2]
        .compute_processes
        .value()
        .expect("a process list")
        .iter()
        .map(|p| (p.pid, p.used_memory_mib))
        .collect();
    assert_eq!(list, [(60321, Some(10240)), (60400, None)]);
    assert_eq!(
        live.devices[3].compute_processes.value().map(Vec::len),
        Some(0)
    );
    let held: Vec<&str> = live
        .held_gpus()
        .iter()
        .filter_map(|(d, _)| d.pci_bus_id.as_deref())
        .collect();
    assert_eq!(held, ["0000:3a:00.0"]);
}
