//! Every fixture read live through the stand-in library equals its replay: the NVML facts field by
//! field, and the whole report once what legitimately differs is set aside.

use super::*;
use gpudoctor::engine::{self, RunOptions};
use gpudoctor::report::Report;
use gpudoctor::report::SourceKind;
use gpudoctor::source;

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
