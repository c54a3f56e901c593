//! The validation workload, `deploy/validate.yaml` (issue 43): a Job that requests
//! `nvidia.com/gpu` through the scheduler, unprivileged and with no host mount, and runs
//! gpudoctor inside on what the container was given. Its command line is gpudoctor's own, and
//! run on a Pod's view — `tests/data/pod-view/h100-two-gpus`: the env the device plugin and the
//! downward API set, the two device nodes and `/proc/driver/nvidia/gpus` entries the NVIDIA
//! runtime leaves, NVML's two GPUs — it passes and its report names the node and the allocated
//! GPUs' bus ids; the same view with a GPU missing, or with a GPU the plugin named that NVML
//! does not see, fails.

mod common;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

fn job() -> Value {
    let text = std::fs::read_to_string(common::repo().join("deploy/validate.yaml")).unwrap();
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    assert_eq!(docs.len(), 1);
    docs.into_iter().next().unwrap()
}

fn pod_view() -> PathBuf {
    common::repo().join("tests/data/pod-view/h100-two-gpus")
}

/// The Job's gpudoctor arguments with `--root` pointed at `root`.
fn args_at(root: &Path) -> Vec<String> {
    let job = job();
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let mut args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let at = args.iter().position(|a| a == "--root").unwrap();
    args[at + 1] = root.display().to_string();
    // JSON instead of the Markdown ticket, to read the verdicts.
    let f = args.iter().position(|a| a == "--format").unwrap();
    args[f + 1] = "json".into();
    args
}

#[test]
fn the_job_requests_gpus_through_the_device_plugin_unprivileged() {
    let job = job();
    let pod = &job["spec"]["template"]["spec"];
    // Through the scheduler, so the GPUs are accounted as for a workload.
    assert!(pod["nodeName"].is_null());
    assert!(pod["nodeSelector"]["kubernetes.io/hostname"].is_string());
    assert!(
        pod["volumes"].is_null(),
        "no host mount: {}",
        pod["volumes"]
    );
    let c = &pod["containers"][0];
    let gpus = &c["resources"]["limits"]["nvidia.com/gpu"];
    assert!(gpus.as_u64().is_some_and(|n| n >= 1), "{gpus}");
    assert_eq!(c["securityContext"]["privileged"], false);
    assert_eq!(c["command"][0], "/usr/local/bin/gpudoctor");
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "NODE_NAME"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName")
    );
    // gpudoctor's own CLI accepts the arguments.
    use clap::Parser;
    let mut argv = vec!["gpudoctor".to_string()];
    argv.extend(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    gpudoctor::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
}

#[test]
fn the_job_passes_on_a_pods_view_and_names_the_node_and_bus_ids() {
    let out = common::gpudoctor(
        &args_at(&pod_view())
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{report}");
    let env: Value = serde_json::from_str(
        &std::fs::read_to_string(pod_view().join(".gpudoctor/env.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["node"]["hostname"], env["NODE_NAME"]);
    let check = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == "toolkit.container_gpus")
        .unwrap();
    assert_eq!(check["status"], "pass", "{check}");
    let summary = check["summary"].as_str().unwrap();
    for bus in ["0000:18:00.0", "0000:2a:00.0"] {
        assert!(summary.contains(bus), "{summary}");
    }
}

/// A copy of the Pod view changed by `edit`, judged as the Job judges it.
fn judge_edited(edit: impl Fn(&Path)) -> (i32, Value) {
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("view");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(pod_view())
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    edit(&root);
    let out = common::gpudoctor(
        &args_at(&root)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().clone())
        .find(|c| c["code"] == "toolkit.container_gpus")
        .unwrap();
    (out.status.code().unwrap(), check)
}

#[test]
fn the_job_fails_when_the_container_lacks_what_it_was_given() {
    // The runtime left out one of the two GPUs (no device node, NVML sees one).
    let (code, check) = judge_edited(|root| {
        std::fs::remove_file(root.join("dev/nvidia1")).unwrap();
        let path = root.join(".gpudoctor/nvml.json");
        let mut nvml: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        nvml["devices"].as_array_mut().unwrap().truncate(1);
        nvml["device_count"] = 1.into();
        std::fs::write(&path, nvml.to_string()).unwrap();
    });
    assert_eq!(
        (code, check["status"].as_str()),
        (1, Some("fail")),
        "{check}"
    );
    // The device plugin named a GPU the container cannot open.
    let (code, check) = judge_edited(|root| {
        let path = root.join(".gpudoctor/env.json");
        let mut env: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        env["NVIDIA_VISIBLE_DEVICES"] =
            "GPU-263526ca-0ed0-753b-08aa-4ed33dd41658,GPU-f5d905e7-8b69-603e-7864-770be5941f7b"
                .into();
        std::fs::write(&path, env.to_string()).unwrap();
    });
    assert_eq!(
        (code, check["status"].as_str()),
        (1, Some("fail")),
        "{check}"
    );
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("GPU-f5d905e7-8b69-603e-7864-770be5941f7b"),
        "{check}"
    );
}
