//! `driver.gpu_processes` on small captures: NVML's process lists and `env.json` as `record`
//! writes them.

use super::*;
use crate::report::Status;
use crate::source::ReplaySource;

/// A capture of two GPUs whose `compute_processes` are `first` and `second` (JSON readings,
/// `None`: not in the file) and `env` as `.gpudoctor/env.json` (if any).
fn node(first: Option<&str>, second: Option<&str>, env: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(".gpudoctor/manifest.json", r#"{"format_version": 1}"#);
    let device = |index: u32, bus: &str, reading: Option<&str>| {
        let processes = reading
            .map(|r| format!(r#", "compute_processes": {r}"#))
            .unwrap_or_default();
        format!(r#"{{"index": {index}, "pci_bus_id": "{bus}"{processes}}}"#)
    };
    write(
        ".gpudoctor/nvml.json",
        &format!(
            r#"{{"device_count": 2, "devices": [{}, {}]}}"#,
            device(0, "0000:18:00.0", first),
            device(1, "0000:2a:00.0", second)
        ),
    );
    if let Some(env) = env {
        write(".gpudoctor/env.json", env);
    }
    dir
}

fn judge(dir: &tempfile::TempDir) -> Outcome {
    let source = ReplaySource::open(dir.path()).unwrap();
    let ctx = Context::new(&source);
    run(&ctx)
}

const NONE: &str = r#"{"value": []}"#;

#[test]
fn no_process_and_no_variable_pass() {
    let out = judge(&node(Some(NONE), Some(NONE), None));
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert_eq!(
        out.summary,
        "no compute process on 2 gpu(s); no variable that changes what cuda or nccl see"
    );
    // Variables no check reads are never judged (nor kept by replay).
    let out = judge(&node(
        Some(NONE),
        Some(NONE),
        Some(r#"{"NODE_NAME": "n1", "AWS_SECRET_ACCESS_KEY": "x", "NCCL_": "1"}"#),
    ));
    assert_eq!(out.status, Status::Pass, "{out:?}");
}

#[test]
fn a_process_on_one_gpu_warns_naming_gpu_pid_name_and_memory() {
    let held = r#"{"value": [{"pid": 48213, "used_memory_mib": 70412, "name": "python3"}]}"#;
    let out = judge(&node(Some(NONE), Some(held), None));
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert_eq!(
        out.summary,
        "gpu 1 (0000:2a:00.0) held by pid 48213 (python3, 70412 MiB)"
    );
    assert_eq!(out.action, Action::CheckWorkload);
    assert!(
        out.hint
            .as_deref()
            .unwrap()
            .contains("nvidia-smi --query-compute-apps=")
    );
    assert!(out.hint.as_deref().unwrap().contains("expected"));
    assert_eq!(out.ties.unwrap().gpus, ["0000:2a:00.0"]);
}

#[test]
fn memory_nvml_could_not_read_is_said_so() {
    // NVML_VALUE_NOT_AVAILABLE (in a container, under MIG): the live path keeps no figure.
    let held = r#"{"value": [{"pid": 7, "used_memory_mib": null, "name": null}]}"#;
    let out = judge(&node(Some(held), Some(NONE), None));
    assert_eq!(
        out.summary,
        "gpu 0 (0000:18:00.0) held by pid 7 (memory not available)"
    );
}

#[test]
fn each_cuda_changing_variable_warns_with_its_value() {
    let env = r#"{"CUDA_VISIBLE_DEVICES": "2,3", "NCCL_IB_HCA": "mlx5_0", "CUDA_INJECTION64_PATH": "/opt/nsys/libToolsInjection64.so", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "NVIDIA_VISIBLE_DEVICES": "all"}"#;
    let out = judge(&node(Some(NONE), Some(NONE), Some(env)));
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert_eq!(
        out.summary,
        "CUDA_INJECTION64_PATH=/opt/nsys/libToolsInjection64.so in gpudoctor's environment; CUDA_VISIBLE_DEVICES=2,3 in gpudoctor's environment; NCCL_IB_HCA=mlx5_0 in gpudoctor's environment"
    );
    assert!(out.hint.as_deref().unwrap().starts_with(
        "unset CUDA_INJECTION64_PATH, CUDA_VISIBLE_DEVICES, NCCL_IB_HCA for gpudoctor"
    ));
}

#[test]
fn a_long_value_is_cut() {
    let long = "x".repeat(500);
    let env = format!(r#"{{"CUDA_COREDUMP_FILE": "{long}"}}"#);
    let out = judge(&node(Some(NONE), Some(NONE), Some(&env)));
    assert!(out.summary.len() < 200, "{}", out.summary);
    assert!(out.summary.contains('…'));
}

#[test]
fn unknown_lists_are_said_and_not_judged() {
    // A capture made before gpudoctor recorded the lists.
    let out = judge(&node(None, None, None));
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert!(
        out.summary
            .starts_with("compute processes of 2 gpu(s) not read"),
        "{}",
        out.summary
    );
    // A reading that failed: unknown for that GPU, the other judged.
    let lost = r#"{"error": {"kind": "gpu_is_lost", "message": "GPU is lost"}}"#;
    let out = judge(&node(Some(NONE), Some(lost), None));
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert!(
        out.summary.starts_with(
            "no compute process on 1 gpu(s), compute processes unknown on gpu 1 (0000:2a:00.0)"
        ),
        "{}",
        out.summary
    );
}

#[test]
fn an_unreadable_env_json_is_an_error_naming_it() {
    let out = judge(&node(Some(NONE), Some(NONE), Some("[1, 2]")));
    assert_eq!(out.status, Status::Error, "{out:?}");
    assert!(
        out.summary.starts_with(
            "the recorded environment could not be read: .gpudoctor/env.json: does not parse"
        ),
        "{}",
        out.summary
    );
}
