//! What `record` keeps for `driver.gpu_processes` (issue 46): the GPU processes in `nvml.json`
//! and the CUDA/NCCL variables of its own environment in `env.json` — only those, never another
//! variable (it may hold a secret) — with each process named by its executable alone (a path
//! may name a user, the other arguments may hold tokens); the replay judges it as the live run.

mod common;

use std::fs;
use std::path::Path;

use serde_json::Value;

fn check(root: &Path) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
    ]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

fn gpu_processes(report: &Value) -> Value {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == "driver.gpu_processes")
        .cloned()
        .unwrap()
}

#[test]
fn record_keeps_the_processes_and_only_the_variables_it_reads() {
    let fixture = common::repo().join("fixtures/h100-gpu-process-idle");
    let answers = common::complete(&fixture);
    let scratch = common::tempdir().unwrap();
    // A root of the test's own (hard links: files are replaced, never written into), whose
    // holder runs from a home directory with a secret on its command line.
    let root = scratch.path().join("root");
    common::link_tree(&answers, &root);
    fs::remove_dir_all(root.join(".gpudoctor")).unwrap();
    let cmdline = root.join("proc/60321/cmdline");
    fs::remove_file(&cmdline).unwrap();
    fs::write(
        &cmdline,
        "/home/alice/venv/bin/python3\0train.py\0--wandb-key=hunter2-secret\0",
    )
    .unwrap();
    let out_dir = scratch.path().join("capture");
    let out = common::scratch::gpudoctor_command()
        .args(["record", "--root"])
        .arg(&root)
        .arg("--out")
        .arg(&out_dir)
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib())
        .env(common::FAKE_NVML_JSON, answers.join(".gpudoctor/nvml.json"))
        .env("CUDA_VISIBLE_DEVICES", "1,0")
        .env("NCCL_DEBUG", "INFO")
        .env("MY_API_TOKEN", "hunter2-secret")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let env: Value =
        serde_json::from_str(&fs::read_to_string(out_dir.join(".gpudoctor/env.json")).unwrap())
            .unwrap();
    assert_eq!(
        env,
        serde_json::json!({"CUDA_VISIBLE_DEVICES": "1,0", "NCCL_DEBUG": "INFO"})
    );
    let nvml: Value =
        serde_json::from_str(&fs::read_to_string(out_dir.join(".gpudoctor/nvml.json")).unwrap())
            .unwrap();
    assert_eq!(
        nvml["devices"][2]["compute_processes"]["value"],
        serde_json::json!([{"pid": 60321, "used_memory_mib": 10240, "name": "python3"}])
    );
    assert_eq!(
        fs::read(out_dir.join("proc/60321/cmdline")).unwrap(),
        b"python3\0"
    );
    // Nothing of the secret, the user or the other arguments anywhere in the capture.
    let mut stack = vec![out_dir.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = fs::read(&path) {
                let text = String::from_utf8_lossy(&bytes);
                for word in ["hunter2", "alice", "train.py", "MY_API_TOKEN"] {
                    assert!(!text.contains(word), "{} holds {word}", path.display());
                }
            }
        }
    }

    // The replay warns on both, as the live run did.
    let replayed = gpu_processes(&check(&out_dir));
    assert_eq!(replayed["status"], "warn", "{replayed}");
    assert_eq!(
        replayed["summary"],
        "GPU 2 (0000:3a:00.0) held by pid 60321 (python3, 10240 MiB); CUDA_VISIBLE_DEVICES=1,0 in gpudoctor's environment; NCCL_DEBUG=INFO in gpudoctor's environment"
    );
}
