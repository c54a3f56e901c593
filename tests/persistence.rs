//! GPUs without persistence mode, and one wedged GPU among eight, against the stand-in NVML and
//! libcuda behaving as the driver does (tests/fake-nvml/src/driver.rs): handles attach one GPU
//! after another under the driver's lock, `cuInit` attaches every GPU in silence, a GPU wedged
//! inside the lock stalls its siblings, `nvmlShutdown` can hang (issue 25, "persistence off is
//! not a hang"), and holds the probe to the successors of deprecated NVML calls.
//!
//! Each run is a child process bounded here: a hung NVML thread must never hold the exit.

mod common;
common::tests_mostly_wait!();

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::live::{Live, SLACK, check, edit_json, live_from};
use serde_json::Value;

/// Run `cmd`, killing it past `limit`; its output and report.
fn run_bounded(mut cmd: Command, limit: Duration) -> (Output, Value, Duration) {
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpudoctor runs");
    // The report is small: it fits the pipe, so waiting before reading cannot block the child.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "gpudoctor did not end within {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a report ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report, took)
}

/// `check --only driver --keep-going` against the stand-in NVML (no CUDA probe asked).
fn nvml_only(live: &Live, args: &[&str]) -> Command {
    let mut cmd = live.command_with_lib(&["--only", "driver", "--keep-going"], None);
    cmd.args(args);
    cmd
}

/// Every GPU in the stand-in's `nvml.json` with persistence mode off.
fn persistence_off(nvml: &Path) {
    edit_json(nvml, |facts| {
        for device in facts["devices"].as_array_mut().unwrap() {
            device["persistence_mode"] = serde_json::json!({"value": false});
        }
    });
}

fn summary(report: &Value, code: &str) -> String {
    check(report, code)["summary"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Eight GPUs attaching 400 ms each, one after another (3.2 s), with a 2 s budget: every GPU is
/// judged (none "did not answer"), the attach time is reported apart, and persistence mode is
/// the finding, with its cost. Before, each GPU had the budget from the start and the last three
/// (attached after 2 s) read as hung. The budget was 1 s: on a clean-clone CI run, four test
/// binaries on two loaded cores, a GPU's readings after the last attach once waited longer than
/// that for a CPU (`GPU 3 stopped answering at fabric: no answer within 1 s`); 2 s still leaves
/// the attaches longer than the budget, which is what this test is about.
#[test]
fn eight_gpus_without_persistence_attach_one_after_another_and_are_judged() {
    let live = live_from("hgx-h100-healthy");
    persistence_off(&live.nvml);
    let mut cmd = nvml_only(&live, &["--timeout", "2"]);
    cmd.env("GPUDOCTOR_FAKE_NVML_SERIAL_INIT_MS", "400");
    let (_, report, took) = run_bounded(cmd, Duration::from_secs(20) + SLACK);
    assert!(took >= Duration::from_millis(3200), "took {took:?}");
    let count = check(&report, "driver.gpu_count");
    assert_eq!(count["status"], "pass", "{count}");
    let init = summary(&report, "driver.nvml_init");
    assert!(init.contains("GPU handles took"), "{init}");
    let persistence = check(&report, "driver.persistence_mode");
    assert_eq!(persistence["status"], "warn", "{persistence}");
    let text = persistence["summary"].as_str().unwrap();
    assert!(text.contains("persistence mode off on 8 GPU(s)"), "{text}");
    assert!(
        text.contains("initialising without persistence mode took"),
        "{text}"
    );
    assert!(
        persistence["hint"]
            .as_str()
            .unwrap()
            .contains("nvidia-persistenced"),
        "{persistence}"
    );
}

/// GPU 0 says who it is, then wedges inside the driver's lock; GPUs 1-7 wait for their handles
/// behind it. driver.gpu_count names GPU 0 by bus id and the call it stopped in, and says the
/// others waited behind it; the run ends within about two budgets although eight NVML threads
/// never return.
#[test]
fn one_wedged_gpu_is_named_and_its_siblings_wait_behind_it() {
    let live = live_from("hgx-h100-healthy");
    let mut cmd = nvml_only(&live, &["--timeout", "1"]);
    cmd.env("GPUDOCTOR_FAKE_NVML_SERIAL_INIT_MS", "100")
        .env("GPUDOCTOR_FAKE_NVML_WEDGE_DEVICE", "0:600");
    let (_, report, _) = run_bounded(cmd, Duration::from_secs(10) + SLACK);
    let count = check(&report, "driver.gpu_count");
    assert_eq!(count["status"], "error", "{count}");
    let text = count["summary"].as_str().unwrap();
    let bus = first_bus_id(&live);
    assert!(
        text.contains(&format!("GPU 0 ({bus}")) && text.contains("stopped answering NVML at "),
        "{text}"
    );
    assert!(
        text.contains("GPU(s) 1, 2, 3, 4, 5, 6, 7 waited behind it"),
        "{text}"
    );
    assert!(!text.contains("fallen off"), "{text}");
}

fn first_bus_id(live: &Live) -> String {
    let facts: Value = serde_json::from_str(&std::fs::read_to_string(&live.nvml).unwrap()).unwrap();
    facts["devices"][0]["pci_bus_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `--sample` reads NVML twice: both readings share one session, so GPUs without persistence
/// mode attach once, not twice (one `nvmlInit`, one `nvmlShutdown` in the stand-in's log).
#[test]
fn a_sample_window_opens_nvml_once() {
    let live = live_from("hgx-h100-healthy");
    let log = live.scratch.path().join("nvml-calls.log");
    let mut cmd = nvml_only(&live, &["--sample", "1"]);
    cmd.env("GPUDOCTOR_FAKE_NVML_CALL_LOG", &log);
    let (_, report, _) = run_bounded(cmd, Duration::from_secs(20) + SLACK);
    assert_eq!(
        check(&report, "driver.gpu_count")["status"],
        "pass",
        "{report}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        ["nvmlInit", "nvmlShutdown"],
        "{calls}"
    );
}

/// An `nvmlShutdown` that never returns costs at most the probe budget at exit: the report is
/// whole and the process ends.
#[test]
fn a_hanging_nvml_shutdown_does_not_hold_the_exit() {
    let live = live_from("hgx-h100-healthy");
    let log = live.scratch.path().join("nvml-calls.log");
    let mut cmd = nvml_only(&live, &["--timeout", "1"]);
    cmd.env("GPUDOCTOR_FAKE_NVML_SHUTDOWN_HANG_SECS", "600")
        .env("GPUDOCTOR_FAKE_NVML_CALL_LOG", &log);
    let (out, report, _) = run_bounded(cmd, Duration::from_secs(10) + SLACK);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(check(&report, "driver.gpu_count")["status"], "pass");
    // It was asked (and hung): the bound, not a skipped shutdown, let the run end.
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.contains("nvmlShutdown"), "{calls}");
}

/// `cuInit` on eight GPUs without persistence mode attaches each (here 700 ms a GPU, 5.6 s in
/// silence) under a 4 s step timeout: the init step's allowance grows with the GPU count (8 s
/// for eight), so the probe passes instead of stopping `cuInit` as a hang ("reboot the node").
#[test]
fn cuinit_attaching_eight_gpus_is_not_a_hang() {
    let live = live_from("h100-bandwidth-healthy");
    let mut cmd = live.command(&["--only", "driver", "--cuda", "--cuda-timeout", "4"]);
    cmd.env("GPUDOCTOR_FAKE_CUDA_ATTACH_MS", "700");
    let (out, report, took) = run_bounded(cmd, Duration::from_secs(60) + SLACK);
    assert!(took >= Duration::from_millis(5600), "took {took:?}");
    let cuda = check(&report, "driver.cuda");
    assert_eq!(
        cuda["status"],
        "pass",
        "{cuda}\n{}",
        common::live::stderr(&out)
    );
}

/// No call nvml.h deprecates is made where the driver exports its successor
/// (`nvmlDeviceGetTemperatureV`, `nvmlDeviceGetCurrentClocksEventReasons`,
/// `nvmlDeviceGetGpuFabricInfoV`): the stand-in logs each deprecated call it answers.
#[test]
fn no_deprecated_nvml_call_where_its_successor_exists() {
    let live = live_from("hgx-h100-healthy");
    let log = live.scratch.path().join("nvml-calls.log");
    let mut cmd = nvml_only(&live, &[]);
    cmd.env("GPUDOCTOR_FAKE_NVML_CALL_LOG", &log);
    let (_, report, _) = run_bounded(cmd, Duration::from_secs(20) + SLACK);
    assert_eq!(
        check(&report, "driver.thermal")["status"],
        "pass",
        "{report}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(!calls.contains("deprecated"), "{calls}");
    assert!(calls.contains("nvmlInit"), "{calls}");
}
