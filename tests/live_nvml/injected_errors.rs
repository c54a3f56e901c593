//! Failures injected into the stand-in come back as the same kinds: init failures, a lost GPU,
//! unsupported queries, per-reading error kinds, and a hung GPU that costs only the budget.

use super::*;

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
