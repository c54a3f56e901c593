//! Driver and GPU health from `nvml.json`: the slowdown temperature, pending page retirement, PCIe
//! generation idle vs busy, persistence off, a lost or reset-required GPU, NVML init errors.

use super::*;

#[test]
fn thermal_fires_at_the_slowdown_threshold_not_below() {
    let node = Node::healthy();
    set_gpu(&node, 6, "temperature_c", json!({"value": 87}));
    let report = node.run_all();
    assert_check(
        &report,
        "driver.thermal",
        Status::Fail,
        &["GPU 6 (0000:ba:00.0) at 87 °C, at or above its slowdown threshold 87 °C"],
    );
    assert_evidence(
        &report,
        "driver.thermal",
        &[
            "nvml.devices[6].temperature_c: 87 °C (slowdown 87 °C, shutdown 92 °C) (expected < 87 °C)",
        ],
    );
    set_gpu(&node, 6, "temperature_c", json!({"value": 86}));
    assert_check(
        &node.run_all(),
        "driver.thermal",
        Status::Pass,
        &["hottest 86 °C"],
    );
}

/// A Volta node: page retirement reported, row remapping not. A pending retirement fails the
/// check; it must not read as "not supported".
#[test]
fn pending_page_retirement_on_a_pre_ampere_gpu_fails() {
    let node = Node::healthy();
    node.edit_gpus(|d| {
        d["name"] = json!("Tesla V100-SXM2-32GB");
        d["remapped_rows"] = json!("not_supported");
        d["fabric"] = json!("not_supported");
        let pending = d["index"] == 2;
        d["retired_pages"] =
            json!({"value": {"single_bit": 2, "double_bit": 1, "pending": pending}});
    });
    let report = node.run_all();
    assert_check(
        &report,
        "driver.retired_pages",
        Status::Fail,
        &["GPU 2 (0000:3a:00.0) has a page retirement pending (reset needed)"],
    );
    assert_evidence(
        &report,
        "driver.retired_pages",
        &["nvml.devices[2].retired_pages: 2 single-bit, 1 double-bit retired, pending true"],
    );
    assert_check(&report, "driver.row_remap", Status::Skip, &["not reported"]);

    // Nothing pending, under DCGM's 63: pass; at 63 retired pages: fail without pending.
    set_gpu(
        &node,
        2,
        "retired_pages",
        json!({"value": {"single_bit": 2, "double_bit": 1, "pending": false}}),
    );
    assert_check(
        &node.run_all(),
        "driver.retired_pages",
        Status::Pass,
        &["no page retirement pending"],
    );
    set_gpu(
        &node,
        5,
        "retired_pages",
        json!({"value": {"single_bit": 60, "double_bit": 3, "pending": false}}),
    );
    assert_check(
        &node.run_all(),
        "driver.retired_pages",
        Status::Fail,
        &["GPU 5 (0000:ab:00.0) has 63 retired pages (limit 63)"],
    );
}

#[test]
fn pcie_generation_below_max_is_a_note_idle_and_a_failure_busy() {
    let node = Node::healthy();
    set_gpu(&node, 3, "pcie_current_gen", json!({"value": 1}));
    set_gpu(&node, 3, "utilization_gpu_pct", json!({"value": 49}));
    assert_check(
        &node.run_all(),
        "driver.pcie_link",
        Status::Pass,
        &["GPU 3 at gen1 while idle (power saving, expected)"],
    );
    set_gpu(&node, 3, "utilization_gpu_pct", json!({"value": 50}));
    let report = node.run_all();
    assert_check(
        &report,
        "driver.pcie_link",
        Status::Fail,
        &["GPU 3 (0000:5d:00.0) PCIe at gen1 while 50% busy, capable of gen5"],
    );
    assert_evidence(
        &report,
        "driver.pcie_link",
        &[
            "nvml.devices[3].pcie_current_gen: gen1 x16 (max gen5 x16), utilisation 50% (expected gen5 under load)",
        ],
    );
}

#[test]
fn persistence_mode_off_warns_naming_the_gpu() {
    let node = Node::healthy();
    set_gpu(&node, 5, "persistence_mode", json!({"value": false}));
    let report = node.run_all();
    assert_check(
        &report,
        "driver.persistence_mode",
        Status::Warn,
        &["persistence mode off on 1 GPU(s): 5 (0000:ab:00.0)"],
    );
    assert_evidence(
        &report,
        "driver.persistence_mode",
        &["nvml.devices[5].persistence_mode: disabled (expected enabled)"],
    );
    assert!(
        check(&report, "driver.persistence_mode")
            .hint
            .as_deref()
            .unwrap()
            .contains("nvidia-persistenced")
    );
}

/// A lost GPU as both live and replay record it: the device keeps its index and error, nothing
/// else (the live probe gets no handle, so no bus id).
#[test]
fn a_lost_gpu_fails_the_gpu_count_naming_it() {
    let node = Node::healthy();
    node.edit_nvml(|doc| {
        doc["devices"][3] =
            json!({"index": 3, "error": {"kind": "gpu_is_lost", "message": "GPU is lost"}});
    });
    let report = node.run_all();
    assert_check(
        &report,
        "driver.gpu_count",
        Status::Fail,
        &[
            "NVML device 3: GPU is lost",
            "GPU 0000:5d:00.0 is on PCI but unknown to NVML",
            "8 on PCI, 8 in NVML",
        ],
    );
    assert_evidence(
        &report,
        "driver.gpu_count",
        &[
            "nvml.devices[3]: GPU is lost (expected a usable handle)",
            "sys/bus/pci/devices/0000:5d:00.0: present on PCI, absent from NVML (expected known to NVML)",
        ],
    );
    // The other seven are still judged.
    assert_check(
        &report,
        "driver.thermal",
        Status::Pass,
        &["all GPUs below their slowdown temperature"],
    );
}

/// A GPU whose handle was had but whose readings answer `RESET_REQUIRED` (nvml.h: "GPU requires a
/// reset before it can be used again") fails like one that answers `GPU_IS_LOST`, named by its
/// bus id; it used to leave the readings "inconclusive" (error) instead.
#[test]
fn a_gpu_answering_reset_required_fails_naming_it() {
    let node = Node::healthy();
    let reset = json!({"error": {"kind": "reset_required", "message": "GPU requires reset"}});
    set_gpu(&node, 2, "temperature_c", reset.clone());
    set_gpu(&node, 2, "ecc_errors", reset);
    let report = node.run_all();
    assert_check(
        &report,
        "driver.gpu_count",
        Status::Fail,
        &[
            "(0000:3a:00.0",
            "needs a reset: NVML answered reset_required",
        ],
    );
    // The other GPUs are still judged, and this one is not judged as merely unread.
    assert_check(
        &report,
        "driver.thermal",
        Status::Pass,
        &["all GPUs below their slowdown temperature"],
    );
}

#[test]
fn nvml_init_errors_give_their_own_finding_and_hint() {
    let node = Node::healthy();
    let hint = |r: &Report| check(r, "driver.nvml_init").hint.clone().unwrap();

    init_error(&node, "no_permission", "Insufficient Permissions");
    let report = node.run_all();
    assert_check(
        &report,
        "driver.nvml_init",
        Status::Error,
        &["NVML: no permission to open the GPUs"],
    );
    assert_evidence(
        &report,
        "driver.nvml_init",
        &["nvml.init: no_permission: Insufficient Permissions (expected success)"],
    );
    assert!(hint(&report).contains("run gpudoctor as root"));
    // Everything NVML answers is not judged, and says where to look.
    for code in ["driver.gpu_count", "driver.thermal", "nvlink.links_active"] {
        assert_check(&report, code, Status::Skip, &["see driver.nvml_init"]);
    }
    assert_eq!(report.exit_code, 3, "an error, not a verdict");

    init_error(&node, "unknown", "Unknown Error");
    let report = node.run_all();
    assert_check(
        &report,
        "driver.nvml_init",
        Status::Error,
        &["NVML answer unavailable: Unknown Error"],
    );
    assert!(hint(&report).contains("run `nvidia-smi` on the node"));

    init_error(&node, "library_not_found", "libnvidia-ml.so.1: cannot open");
    let report = node.run_all();
    assert_check(
        &report,
        "driver.nvml_init",
        Status::Fail,
        &["NVML library not found (libnvidia-ml.so.1: cannot open)"],
    );
    assert!(hint(&report).contains("--nvml-lib"));
    assert_eq!(
        report.first_failure.as_ref().map(|f| f.code.as_str()),
        Some("driver.nvml_init")
    );
}
