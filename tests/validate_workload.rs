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
    // A capture runs nothing: its .gpudoctor/cuda.json stands for the Job's live `--cuda`.
    let cuda = args
        .iter()
        .position(|a| a == "--cuda")
        .expect("the Job asks for --cuda");
    args.remove(cuda);
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
    assert!(summary.contains("CUDA took a context on each"), "{summary}");
    let cgroup = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == "toolkit.container_device_cgroup")
        .unwrap();
    assert_eq!(cgroup["status"], "pass", "{cgroup}");
    assert!(
        cgroup["summary"].as_str().unwrap().contains("cgroup v2"),
        "{cgroup}"
    );
}

/// A copy of the Pod view changed by `edit`, judged as the Job judges it: the exit code and
/// `toolkit.container_gpus`.
fn judge_edited(edit: impl Fn(&Path)) -> (i32, Value) {
    judge_edited_on("toolkit.container_gpus", edit)
}

/// As [`judge_edited`], the check `code`.
fn judge_edited_on(code: &str, edit: impl Fn(&Path)) -> (i32, Value) {
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
        .find(|c| c["code"] == code)
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

fn edit_json(path: &Path, edit: impl Fn(&mut Value)) {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, value.to_string()).unwrap();
}

#[test]
fn the_job_fails_when_cuda_cannot_use_a_gpu_it_was_given() {
    let (code, check) = judge_edited(|root| {
        edit_json(&root.join(".gpudoctor/cuda.json"), |cuda| {
            // CUDA_ERROR_DEVICES_UNAVAILABLE at the context: the second GPU is held elsewhere.
            cuda["devices"][1]["error"] = serde_json::json!({"step": "context", "code": 46});
            cuda["devices"][1]
                .as_object_mut()
                .unwrap()
                .remove("mismatched_bytes");
        });
    });
    assert_eq!(
        (code, check["status"].as_str()),
        (1, Some("fail")),
        "{check}"
    );
    let summary = check["summary"].as_str().unwrap();
    assert!(summary.contains("0000:2a:00.0"), "{summary}");
    assert!(!summary.contains("0000:18:00.0"), "{summary}");
}

/// NVIDIA/nvidia-container-toolkit#192: a Kubernetes container's `devices.list` on cgroup v1,
/// given one GPU (`c 195:7 rw`); here the two GPUs of the view, the control node and UVM, with
/// the UVM major of the view's /proc/devices (510; 508 on the node).
const V1_RULES: &str = "c 136:* rwm\nc 10:200 rwm\nc 5:2 rwm\nc 5:0 rwm\nc 1:9 rwm\nc 1:8 rwm\nc 1:7 rwm\nc 1:5 rwm\nc 1:3 rwm\nc *:* m\nb *:* m\nc 195:255 rw\nc 510:0 rw\nc 510:1 rw\nc 195:0 rw\nc 195:1 rw\n";

/// The view on cgroup v1 with `rules` as the container's devices.list.
fn on_cgroup_v1(root: &Path, rules: &str) {
    std::fs::write(
        root.join("proc/self/cgroup"),
        "12:devices:/kubepods/burstable/pod4a1b/cri-containerd-c703\n11:memory:/kubepods/burstable/pod4a1b/cri-containerd-c703\n0::/\n",
    )
    .unwrap();
    std::fs::remove_file(root.join("sys/fs/cgroup/cgroup.controllers")).unwrap();
    std::fs::create_dir_all(root.join("sys/fs/cgroup/devices")).unwrap();
    std::fs::write(root.join("sys/fs/cgroup/devices/devices.list"), rules).unwrap();
}

#[test]
fn the_device_cgroup_is_judged_on_cgroup_v1() {
    let cgroup = "toolkit.container_device_cgroup";
    let (code, check) = judge_edited_on(cgroup, |root| on_cgroup_v1(root, V1_RULES));
    assert_eq!(
        (code, check["status"].as_str()),
        (0, Some("pass")),
        "{check}"
    );
    // After `systemctl daemon-reload` (NVIDIA/nvidia-container-toolkit#251): only mknod left.
    let (code, check) = judge_edited_on(cgroup, |root| {
        let lost = V1_RULES
            .replace("c 195:0 rw\n", "")
            .replace("c 195:1 rw\n", "")
            + "c 195:* m\n";
        on_cgroup_v1(root, &lost)
    });
    assert_eq!(
        (code, check["status"].as_str()),
        (1, Some("fail")),
        "{check}"
    );
    let summary = check["summary"].as_str().unwrap();
    assert!(summary.contains("/dev/nvidia0 (c 195:0)"), "{summary}");
    assert!(summary.contains("/dev/nvidia1 (c 195:1)"), "{summary}");
    assert!(!summary.contains("nvidiactl"), "{summary}");
    assert!(
        check["hint"].as_str().unwrap().contains("daemon-reload"),
        "{check}"
    );
}

#[test]
fn lost_device_rules_on_cgroup_v2_are_named_from_nvmls_unknown_error() {
    let (code, check) = judge_edited_on("toolkit.container_device_cgroup", |root| {
        edit_json(&root.join(".gpudoctor/nvml.json"), |nvml| {
            nvml["init_error"] = serde_json::json!({"kind": "unknown", "message": "Unknown Error"});
            nvml["devices"] = serde_json::json!([]);
            nvml["device_count"] = 0.into();
        });
    });
    assert_eq!(
        (code, check["status"].as_str()),
        (1, Some("fail")),
        "{check}"
    );
    assert!(
        check["summary"].as_str().unwrap().contains("dev/nvidia0"),
        "{check}"
    );
}
