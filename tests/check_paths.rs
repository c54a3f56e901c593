//! Check paths no fixture reaches. Each test copies a healthy fixture (`hgx-h100-healthy`, or
//! the one named) into a temporary directory, edits the one thing the case is about — a field of
//! `.gpudoctor/nvml.json`, `pod-resources.json` or `env.json`, a sysfs file, a runtime config —
//! replays it with every layer (`--keep-going`), and asserts the named check's status and the
//! part of its summary or evidence that carries the diagnosis. Each case is paired with its
//! near miss where the threshold matters (at the slowdown temperature fails, one degree below
//! passes), so a check whose logic broke in either direction fails here.
//!
//! What the copy is edited from: the healthy HGX H100 node (8 × H100 SXM5 on the `hgx-h100`
//! profile, a GPUDirect RDMA platform; containerd with the `nvidia` handler as default and CDI
//! on; a kubelet with 8 allocatable GPUs, 6 held by two pods). GPUs are renamed to a model no
//! built-in profile knows where a case needs "no profile".

mod common;

use std::fs;

use common::node::{HEALTHY, NVML_JSON, Node, assert_check, assert_evidence, check, layer};
use gpudoctor::engine::RunOptions;
use gpudoctor::report::{Layer, Report, Status};
use serde_json::{Value, json};

const POD_RESOURCES: &str = ".gpudoctor/pod-resources.json";
const CONTAINERD: &str = "etc/containerd/config.toml";

#[test]
fn the_unedited_copy_is_healthy() {
    let report = Node::healthy().run_all();
    assert_eq!(report.exit_code, 0, "{:?}", report.first_failure);
    for code in [
        "device_plugin.allocations",
        "device_plugin.numa_topology",
        "driver.thermal",
        "driver.persistence_mode",
        "driver.gpu_count",
        "nvlink.links_active",
        "nvlink.error_counters",
        "topology.iommu",
        "toolkit.installed",
        "toolkit.container_runtime",
    ] {
        assert_check(&report, code, Status::Pass, &[]);
    }
    assert_check(&report, "driver.retired_pages", Status::Skip, &[]);
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Skip,
        &["not running inside a pod"],
    );
}

// ---------------------------------------------------------------------------------------------
// 1. device-plugin

/// The List answer's container entries, by pod name.
fn pod_devices<'v>(doc: &'v mut Value, pod: &str) -> &'v mut Value {
    doc["list"]["value"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == pod)
        .unwrap_or_else(|| panic!("pod {pod}"))
        .pointer_mut("/containers/0/devices")
        .unwrap()
}

#[test]
fn a_gpu_handed_to_two_containers_fails_allocations() {
    let node = Node::healthy();
    let gpu0 = node.nvml_gpu(0)["uuid"].as_str().unwrap().to_string();
    node.edit_json(POD_RESOURCES, |doc| {
        // bert-finetune gets GPU 0 too, which llama-train-0/trainer already holds.
        let devices = pod_devices(doc, "bert-finetune-7f9c5");
        devices[0]["device_ids"] = json!([gpu0]);
    });
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.allocations",
        Status::Fail,
        &[
            &format!("{gpu0} (GPU 0 (0000:18:00.0)) held by 2 containers without a sharing mode"),
            "ml-team/bert-finetune-7f9c5/main",
            "ml-team/llama-train-0/trainer",
        ],
    );
    assert_evidence(
        &report,
        "device_plugin.allocations",
        &["one container per device id"],
    );
}

#[test]
fn one_replica_held_twice_fails_but_distinct_replicas_share() {
    let node = Node::copy("h100-time-sliced-healthy");
    let doc: Value = serde_json::from_str(&node.read(POD_RESOURCES)).unwrap();
    // Two containers on two replicas of one GPU: time-slicing, allowed.
    let replicas: Vec<String> = doc["allocatable"]["value"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["device_ids"].as_array().unwrap())
        .map(|i| i.as_str().unwrap().to_string())
        .filter(|i| i.ends_with("::0") || i.ends_with("::1"))
        .take(2)
        .collect();
    let (a, b) = (&replicas[0], &replicas[1]);
    assert_eq!(a.split("::").next(), b.split("::").next(), "{a} {b}");
    let pods = |ids: [&String; 2]| {
        json!([
            {"name": "a", "namespace": "t", "containers": [{"name": "c", "devices": [
                {"resource_name": "nvidia.com/gpu", "device_ids": [ids[0]]}]}]},
            {"name": "b", "namespace": "t", "containers": [{"name": "c", "devices": [
                {"resource_name": "nvidia.com/gpu", "device_ids": [ids[1]]}]}]}
        ])
    };
    node.edit_json(POD_RESOURCES, |doc| doc["list"]["value"] = pods([a, b]));
    assert_check(
        &node.run_all(),
        "device_plugin.allocations",
        Status::Pass,
        &["1 of 8 GPU(s) held by 2 container(s), no device handed out twice"],
    );
    node.edit_json(POD_RESOURCES, |doc| doc["list"]["value"] = pods([a, a]));
    assert_check(
        &node.run_all(),
        "device_plugin.allocations",
        Status::Fail,
        &["held by 2 containers the same replica: t/a/c, t/b/c"],
    );
}

#[test]
fn allocatable_numa_disagreeing_with_sysfs_warns() {
    let node = Node::healthy();
    assert_eq!(
        node.read("sys/bus/pci/devices/0000:18:00.0/numa_node")
            .trim(),
        "0"
    );
    node.edit_json(POD_RESOURCES, |doc| {
        doc["allocatable"]["value"]["devices"][0]["topology"] = json!({"nodes": [{"ID": 1}]});
    });
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.numa_topology",
        Status::Warn,
        &["GPU 0 (0000:18:00.0) has NUMA 1, sysfs says NUMA 0"],
    );
    assert_evidence(
        &report,
        "device_plugin.numa_topology",
        &["NUMA 1 (expected NUMA 0 (sys/bus/pci/devices/0000:18:00.0/numa_node))"],
    );

    // No topology at all in the answer, while sysfs knows the node: also a disagreement.
    node.edit_json(POD_RESOURCES, |doc| {
        doc["allocatable"]["value"]["devices"][4]["topology"] = Value::Null;
    });
    assert_check(
        &node.run_all(),
        "device_plugin.numa_topology",
        Status::Warn,
        &["GPU 4 (0000:9a:00.0) has no topology, sysfs says NUMA 1"],
    );
}

/// Mixed MIG strategy on a capture without MIG enumeration (`mig_devices` absent, as in every
/// capture made before gpudoctor walked MIG devices): GPUs 0-1 in MIG mode advertised as
/// `nvidia.com/mig-1g.10gb` MIG devices, the other six as `nvidia.com/gpu`. The MIG ids cannot
/// be attributed to a GPU, so a GPU in MIG mode counts as allocatable when any MIG device is.
#[test]
fn mig_resources_count_for_gpus_in_mig_mode() {
    let node = Node::healthy();
    node.edit_gpus(|d| {
        if d["index"].as_u64().unwrap() < 2 {
            d["mig_mode"] = json!({"value": {"current": true, "pending": true}});
        }
    });
    let mig_ids: Vec<String> = (0..14)
        .map(|i| format!("MIG-5b2c1f0e-4d3a-5e6f-8a9b-{i:012x}"))
        .collect();
    node.edit_json(POD_RESOURCES, |doc| {
        let devices = doc["allocatable"]["value"]["devices"]
            .as_array_mut()
            .unwrap();
        devices.drain(0..2);
        devices.push(json!({"resource_name": "nvidia.com/mig-1g.10gb", "device_ids": mig_ids}));
        doc["list"]["value"] = json!([
            {"name": "infer", "namespace": "t", "containers": [{"name": "c", "devices": [
                {"resource_name": "nvidia.com/mig-1g.10gb", "device_ids": [mig_ids[3]]}]}]}
        ]);
    });
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.allocatable",
        Status::Pass,
        &[
            "8 of 8 GPUs allocatable as nvidia.com/gpu, nvidia.com/mig-1g.10gb",
            "14 MIG device(s)",
        ],
    );
    // MIG devices have no NUMA to compare; the six full GPUs still are.
    assert_check(
        &report,
        "device_plugin.numa_topology",
        Status::Pass,
        &["matches sysfs for 6 GPU(s)"],
    );
    assert_check(
        &report,
        "device_plugin.allocations",
        Status::Pass,
        &["held by 1 container(s)"],
    );

    // GPU 1 left MIG mode, yet only MIG devices stand for it: it is not allocatable.
    node.edit_gpus(|d| {
        if d["index"] == 1 {
            d["mig_mode"] = json!({"value": {"current": false, "pending": false}});
        }
    });
    assert_check(
        &node.run_all(),
        "device_plugin.allocatable",
        Status::Fail,
        &["7 of 8 GPUs allocatable: GPU 1 (0000:2a:00.0)"],
    );

    // One MIG device handed to two containers is as wrong as a whole GPU.
    node.edit_json(POD_RESOURCES, |doc| {
        doc["list"]["value"] = json!([
            {"name": "a", "namespace": "t", "containers": [{"name": "c", "devices": [
                {"resource_name": "nvidia.com/mig-1g.10gb", "device_ids": [mig_ids[3]]}]}]},
            {"name": "b", "namespace": "t", "containers": [{"name": "c", "devices": [
                {"resource_name": "nvidia.com/mig-1g.10gb", "device_ids": [mig_ids[3]]}]}]}
        ]);
    });
    assert_check(
        &node.run_all(),
        "device_plugin.allocations",
        Status::Fail,
        &[&format!(
            "{} held by 2 containers without a sharing mode",
            mig_ids[3]
        )],
    );
}

/// The MIG fixture (`h100-mig-healthy`: GPUs 0-1 in MIG mode, five MIG devices each, NVML's
/// `mig_devices` recorded) with one thing changed at a time. Enumerated MIG UUIDs resolve to
/// their GPU, so each MIG device is expected in allocatable and each advertised MIG id must be
/// one NVML knows.
const MIG_NODE: &str = "h100-mig-healthy";

/// Every allocatable id of `resource` prefix, in order.
fn allocatable_ids(node: &Node, prefix: &str) -> Vec<String> {
    let doc: Value = serde_json::from_str(&node.read(POD_RESOURCES)).unwrap();
    doc["allocatable"]["value"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["resource_name"].as_str().unwrap().starts_with(prefix))
        .flat_map(|d| d["device_ids"].as_array().unwrap().clone())
        .map(|id| id.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn enumerated_mig_devices_are_matched_to_their_gpu() {
    let node = Node::copy(MIG_NODE);
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.allocatable",
        Status::Pass,
        &["8 of 8 GPUs allocatable", "10 MIG device(s) on 2 GPU(s)"],
    );
    // Holders of MIG devices are named by GPU, MIG index and profile; two MIG devices of
    // different GPUs are two physical GPUs.
    assert_check(
        &report,
        "device_plugin.allocations",
        Status::Pass,
        &["8 of 8 GPU(s) held by 4 container(s)"],
    );
    assert_evidence(
        &report,
        "device_plugin.allocations",
        &[
            "(GPU 0 (0000:18:00.0) MIG 0 (3g.40gb))",
            "(GPU 1 (0000:2a:00.0) MIG 3 (1g.10gb))",
        ],
    );

    // Time-slicing of MIG devices: replicas `MIG-…::<n>` resolve to the same MIG device.
    node.edit_json(POD_RESOURCES, |doc| {
        for d in doc["allocatable"]["value"]["devices"]
            .as_array_mut()
            .unwrap()
        {
            let id = d["device_ids"][0].as_str().unwrap().to_string();
            if id.starts_with("MIG-") {
                d["device_ids"] = json!([format!("{id}::0"), format!("{id}::1")]);
            }
        }
    });
    assert_check(
        &node.run_all(),
        "device_plugin.allocatable",
        Status::Pass,
        &["20 MIG device(s) on 2 GPU(s)"],
    );
}

#[test]
fn a_mig_id_nvml_does_not_know_warns() {
    let node = Node::copy(MIG_NODE);
    let stale = "MIG-0a0b0c0d-1e1f-5a2b-8c3d-4e5f60718293";
    node.edit_json(POD_RESOURCES, |doc| {
        doc["allocatable"]["value"]["devices"]
            .as_array_mut()
            .unwrap()
            .push(json!({"resource_name": "nvidia.com/mig-1g.10gb", "device_ids": [stale]}));
    });
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.allocatable",
        Status::Warn,
        &[&format!("1 allocatable MIG id(s) unknown to NVML: {stale}")],
    );
    assert_evidence(&report, "device_plugin.allocatable", &[stale]);

    // The same id on a capture without MIG enumeration cannot be judged: no warning.
    node.edit_gpus(|d| {
        d.as_object_mut().unwrap().remove("mig_devices");
    });
    assert_check(
        &node.run_all(),
        "device_plugin.allocatable",
        Status::Pass,
        &["8 of 8 GPUs allocatable", "11 MIG device(s)"],
    );
}

/// mig-parted re-cut GPU 1 (new MIG UUIDs) after the device plugin started: the plugin still
/// advertises the old ones. NVML's five are all missing, the five advertised are unknown.
#[test]
fn a_mig_layout_changed_under_the_device_plugin_fails() {
    let node = Node::copy(MIG_NODE);
    node.edit_gpus(|d| {
        if d["index"] == 1 {
            for m in d["mig_devices"]["value"].as_array_mut().unwrap() {
                let uuid = m["uuid"].as_str().unwrap();
                m["uuid"] = json!(format!("{}beef", &uuid[..36]));
            }
        }
    });
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.allocatable",
        Status::Fail,
        &[
            "7 of 8 GPUs allocatable: GPU 1 (0000:2a:00.0)",
            "(MIG mode, none of its MIG devices) missing",
            "5 allocatable MIG id(s) unknown to NVML",
            "the MIG layout changed after the device plugin started",
        ],
    );
    assert_evidence(
        &report,
        "device_plugin.allocatable",
        &[
            "absent (GPU 1 (0000:2a:00.0) MIG 4 (1g.10gb))",
            "nvidia.com/mig-3g.40gb",
        ],
    );
}

#[test]
fn mig_mode_without_instances_fails_as_configuration() {
    let node = Node::copy(MIG_NODE);
    let gone: Vec<String> = {
        let gpu = node.nvml_gpu(1);
        gpu["mig_devices"]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["uuid"].as_str().unwrap().to_string())
            .collect()
    };
    node.edit_gpus(|d| {
        if d["index"] == 1 {
            d["mig_devices"] = json!({"value": []});
        }
    });
    node.edit_json(POD_RESOURCES, |doc| {
        doc["allocatable"]["value"]["devices"]
            .as_array_mut()
            .unwrap()
            .retain(|d| !gone.contains(&d["device_ids"][0].as_str().unwrap().to_string()));
        doc["list"]["value"]
            .as_array_mut()
            .unwrap()
            .retain(|p| p["name"] != "embed-1");
    });
    assert_eq!(allocatable_ids(&node, "nvidia.com/mig-").len(), 5);
    let report = node.run_all();
    assert_check(
        &report,
        "device_plugin.allocatable",
        Status::Fail,
        &[
            "GPU 1 (0000:2a:00.0)",
            "(MIG mode on, no MIG device) missing",
            "MIG mode is on but no GPU instance was created",
        ],
    );
    let c = check(&report, "device_plugin.allocatable");
    assert_eq!(
        serde_json::to_value(c.action).unwrap(),
        json!("fix_config"),
        "{c:?}"
    );
}

/// A MIG handle NVML could not open has no UUID: the id the plugin advertises for it cannot be
/// told from a stale one, so it is neither expected nor flagged.
#[test]
fn a_mig_device_nvml_could_not_open_is_not_judged() {
    let node = Node::copy(MIG_NODE);
    node.edit_gpus(|d| {
        if d["index"] == 0 {
            d["mig_devices"]["value"][2] =
                json!({"index": 2, "error": {"kind": "unknown", "message": "Unknown Error"}});
        }
    });
    assert_check(
        &node.run_all(),
        "device_plugin.allocatable",
        Status::Pass,
        &["8 of 8 GPUs allocatable"],
    );
}

// ---------------------------------------------------------------------------------------------
// 2. driver and GPU health

fn set_gpu(node: &Node, index: u64, field: &str, value: Value) {
    node.edit_gpus(|d| {
        if d["index"] == index {
            d[field] = value.clone();
        }
    });
}

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

/// `nvml.json` as a failed `nvmlInit` leaves it.
fn init_error(node: &Node, kind: &str, message: &str) {
    node.write(
        NVML_JSON,
        &json!({"init_error": {"kind": kind, "message": message}, "device_count": 0, "devices": []})
            .to_string(),
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

// ---------------------------------------------------------------------------------------------
// 3. nvlink

#[test]
fn pcie_gpus_without_nvlink_skip_the_layer() {
    let node = Node::healthy();
    node.without_profile("NVIDIA L40S");
    node.edit_gpus(|d| {
        d["nvlinks"] = json!("not_supported");
        d["fabric"] = json!("not_supported");
    });
    // A PCIe node has no NVSwitch either (else the SXID and fabric manager checks judge it).
    for bdf in [
        "0000:05:00.0",
        "0000:06:00.0",
        "0000:07:00.0",
        "0000:08:00.0",
    ] {
        node.remove(&format!("sys/bus/pci/devices/{bdf}"));
    }
    let report = node.run_all();
    let nvlink = layer(&report, Layer::Nvlink);
    assert_eq!(nvlink.status, Status::Skip, "{nvlink:#?}");
    // Each check says why (below); five different reasons make the layer's one general line.
    assert_eq!(
        nvlink.reason.as_deref(),
        Some("does not apply to this node")
    );
    assert_check(
        &report,
        "nvlink.sxid_events",
        Status::Skip,
        &["no kernel log to read"],
    );
    assert_check(
        &report,
        "nvlink.fabric_manager",
        Status::Skip,
        &["fabric manager is not needed"],
    );
    assert_check(
        &report,
        "nvlink.links_active",
        Status::Skip,
        &["no NVLink on these GPUs"],
    );
    assert_check(
        &report,
        "nvlink.error_counters",
        Status::Skip,
        &["no NVLink error counters reported"],
    );
    assert_check(
        &report,
        "nvlink.fabric_state",
        Status::Skip,
        &["PCIe sku or pre-hopper"],
    );
}

/// A PCIe A100 without an NVLink bridge answers every link, all down (NVIDIA/NVSentinel#1481):
/// a node of them has no NVLink, not twelve broken links per GPU.
#[test]
fn pcie_gpus_reporting_every_link_down_skip_the_layer() {
    let node = Node::healthy();
    node.without_profile("NVIDIA A100 80GB PCIe");
    node.edit_gpus(|d| {
        d["fabric"] = json!("not_supported");
        let links = d["nvlinks"]["value"].as_array_mut().unwrap();
        links.truncate(12);
        for link in links {
            link["active"] = json!(false);
            link["remote_pci_bus_id"] = Value::Null;
            link["remote_type"] = json!("not_supported");
        }
    });
    // On an NVSwitch baseboard (the fixture's four NVSwitches are still on PCI) every link down
    // is a fabric that never came up, whatever the GPUs are called: judged, not skipped.
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Fail,
        &["GPU 0 (0000:18:00.0) has 0 of 12 NVLinks active"],
    );
    // PCIe cards: no NVSwitch on PCI.
    for bdf in [
        "0000:05:00.0",
        "0000:06:00.0",
        "0000:07:00.0",
        "0000:08:00.0",
    ] {
        node.remove(&format!("sys/bus/pci/devices/{bdf}"));
    }
    let report = node.run_all();
    let nvlink = layer(&report, Layer::Nvlink);
    assert_eq!(nvlink.status, Status::Skip, "{nvlink:#?}");
    let why = "no NVLink on these GPUs: 96 link(s) reported, none active and no NVSwitch";
    assert_check(&report, "nvlink.links_active", Status::Skip, &[why]);
    assert_check(&report, "nvlink.error_counters", Status::Skip, &[why]);
    // A GPU that reports fabric state sits on an NVSwitch baseboard too.
    node.edit_gpus(|d| {
        if d["index"] == 3 {
            d["fabric"] = json!({"value": {"state": "not_started", "status": "success", "clique_id": 0, "cluster_uuid": null, "health_mask": 0}});
        }
    });
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Fail,
        &["0 of 12 NVLinks active"],
    );
    node.edit_gpus(|d| d["fabric"] = json!("not_supported"));

    // With a profile that expects NVLink, the same answers are links down.
    let report = node.run_with(RunOptions {
        profile: gpudoctor::profile::builtin("hgx-a100-80gb"),
        ..RunOptions::default()
    });
    assert_check(
        &report,
        "nvlink.links_active",
        Status::Fail,
        &["GPU 0 (0000:18:00.0) has 0 of 12 NVLinks active (down: link 0, 1, 2"],
    );

    // One GPU with a link up to an end NVML cannot name (no remote bus id): PCIe boards are
    // judged per bridge, not against a link count, so that link is the finding, not the other
    // GPUs' unused links.
    node.edit_gpus(|d| {
        if d["index"] == 0 {
            d["nvlinks"]["value"][0]["active"] = json!(true);
        }
    });
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Warn,
        &["GPU 0 (0000:18:00.0) has 1 active NVLink(s) to an end NVML does not name as a GPU here"],
    );
}

#[test]
fn without_a_profile_the_most_common_link_count_flags_the_odd_gpu() {
    let node = Node::healthy();
    node.without_profile("NVIDIA H100 80GB HBM3 (no profile)");
    node.edit_gpus(|d| {
        let index = d["index"].as_u64().unwrap();
        let links = d["nvlinks"]["value"].as_array_mut().unwrap();
        match index {
            // Two links down.
            2 => {
                links[3]["active"] = json!(false);
                links[7]["active"] = json!(false);
            }
            // Two links not answered at all: 16 reported.
            6 => links.truncate(16),
            _ => {}
        }
    });
    let report = node.run_all();
    assert_eq!(report.profile, None);
    assert_check(
        &report,
        "nvlink.links_active",
        Status::Fail,
        &[
            "GPU 2 (0000:3a:00.0) has 16 of 18 NVLinks active (down: link 3, 7)",
            "GPU 6 (0000:ba:00.0) has 16 of 18 NVLinks active",
        ],
    );
    assert_evidence(
        &report,
        "nvlink.links_active",
        &[
            "nvml.devices[6].nvlinks: 16 active of 16 reported (expected 18 active (the most common count across GPUs))",
        ],
    );
    let summary = &check(&report, "nvlink.links_active").summary;
    assert!(!summary.contains("GPU 0 "), "{summary}");
}

#[test]
fn nvlink_error_counters_warn_with_their_values() {
    let node = Node::healthy();
    let set = |replay: u64, flit: u64| {
        node.edit_gpus(|d| {
            if d["index"] == 1 {
                let link = &mut d["nvlinks"]["value"][4];
                link["replay_errors"] = json!({"value": replay});
                link["crc_flit_errors"] = json!({"value": flit});
            }
        })
    };
    set(60, 39);
    assert_check(
        &node.run_all(),
        "nvlink.error_counters",
        Status::Pass,
        &["below 100 on 144 link(s)"],
    );
    set(60, 40);
    let report = node.run_all();
    assert_check(
        &report,
        "nvlink.error_counters",
        Status::Warn,
        &["GPU 1 (0000:2a:00.0) link 4: 100 errors"],
    );
    assert_evidence(
        &report,
        "nvlink.error_counters",
        &[
            "nvml.devices[1].nvlinks[4]: replay 60, recovery 0, crc flit 40, crc data 0 (expected < 100 since driver load)",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// 4. topology

/// The IOMMU group type files of the GPUs and RDMA NICs the check reads.
fn group_types(node: &Node) -> Vec<String> {
    let groups = node.path("sys/kernel/iommu_groups");
    fs::read_dir(groups)
        .unwrap()
        .map(|e| {
            format!(
                "sys/kernel/iommu_groups/{}/type",
                e.unwrap().file_name().to_string_lossy()
            )
        })
        .filter(|rel| node.path(rel).is_file())
        .collect()
}

#[test]
fn a_translating_iommu_warns_on_a_gpudirect_platform() {
    let node = Node::healthy();
    let gpu0_group = fs::read_link(node.path("sys/bus/pci/devices/0000:18:00.0/iommu_group"))
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    node.write(
        &format!("sys/kernel/iommu_groups/{gpu0_group}/type"),
        "DMA-FQ\n",
    );
    let report = node.run_all();
    assert_check(
        &report,
        "topology.iommu",
        Status::Warn,
        &[
            // The GPU shares its group with the NIC behind the same switch.
            "IOMMU translates dma for 2 of 18 GPU(s)/rdma NIC(s)",
            "(group type DMA-FQ) on a GPUDirect RDMA platform",
        ],
    );
    assert_evidence(
        &report,
        "topology.iommu",
        &[&format!(
            "sys/kernel/iommu_groups/{gpu0_group}/type: DMA-FQ (0000:18:00.0) (expected identity)"
        )],
    );
    // The same node judged without a GPUDirect expectation: noted, not judged.
    let report = node.run_with(RunOptions {
        profile: gpudoctor::profile::builtin("generic-pcie-gpu"),
        ..RunOptions::default()
    });
    assert_check(
        &report,
        "topology.iommu",
        Status::Pass,
        &["not judged: profile generic-pcie-gpu expects no GPUDirect RDMA"],
    );
}

/// No group types to read (an older kernel): the command line decides.
#[test]
fn an_iommu_without_iommu_pt_on_the_command_line_warns() {
    let node = Node::healthy();
    for rel in group_types(&node) {
        node.remove(&rel);
    }
    assert_check(
        &node.run_all(),
        "topology.iommu",
        Status::Pass,
        &["IOMMU in pass-through mode", "iommu=pt"],
    );
    let cmdline = node.read("proc/cmdline").replace(" iommu=pt", "");
    node.write("proc/cmdline", &cmdline);
    let report = node.run_all();
    assert_check(
        &report,
        "topology.iommu",
        Status::Warn,
        &[
            "without `iommu=pt` on the kernel command line",
            "on a GPUDirect RDMA platform",
        ],
    );
    assert_evidence(
        &report,
        "topology.iommu",
        &["proc/cmdline: intel_iommu=on (expected -)"],
    );
}

/// GPUs 0-3 reach an RDMA NIC only across the CPU interconnect: the fixture fails on the
/// GPUDirect `hgx-h100` platform; without that expectation it warns.
#[test]
fn a_gpu_whose_nearest_nic_is_sys_warns_off_gpudirect_platforms() {
    let node = Node::copy("h100-rdma-nics-one-socket");
    let sys = "4 GPUs (0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0) reach an RDMA NIC only at SYS (across the CPU interconnect";
    assert_check(
        &node.run_all(),
        "topology.gpu_nic_locality",
        Status::Fail,
        &[sys, "[GPUDirect RDMA platform hgx-h100]"],
    );
    node.without_profile("NVIDIA H100 80GB HBM3 (no profile)");
    let report = node.run_all();
    assert_check(
        &report,
        "topology.gpu_nic_locality",
        Status::Warn,
        &[sys, "[no profile]"],
    );
    assert_evidence(
        &report,
        "topology.gpu_nic_locality",
        &["sys/bus/pci/devices/0000:18:00.0: NUMA 0, nearest RDMA NIC"],
    );
}

#[test]
fn a_gpu_below_its_max_link_speed_in_sysfs_is_only_noted() {
    let node = Node::healthy();
    node.write(
        "sys/bus/pci/devices/0000:18:00.0/current_link_speed",
        "2.5 GT/s PCIe\n",
    );
    let report = node.run_all();
    assert_check(
        &report,
        "topology.pcie_link",
        Status::Pass,
        &["GPU link speed below max while idle, not judged: 0000:18:00.0 at 2.5 GT/s of 32 GT/s"],
    );
    // The same on a NIC is judged.
    node.write(
        "sys/bus/pci/devices/0000:18:00.0/current_link_speed",
        "32.0 GT/s PCIe\n",
    );
    node.write(
        "sys/bus/pci/devices/0000:19:00.0/current_link_speed",
        "2.5 GT/s PCIe\n",
    );
    assert_check(
        &node.run_all(),
        "topology.pcie_link",
        Status::Warn,
        &["0000:19:00.0", "PCIe link at 2.5 GT/s of 32 GT/s"],
    );
}

// ---------------------------------------------------------------------------------------------
// 5. toolkit

const TOOLKIT_FILES: &[&str] = &[
    "usr/bin/nvidia-container-toolkit",
    "usr/bin/nvidia-container-runtime",
    "usr/bin/nvidia-container-runtime-hook",
    "usr/bin/nvidia-cdi-hook",
    "usr/bin/nvidia-ctk",
];

#[test]
fn toolkit_installed_fails_when_absent() {
    let node = Node::healthy();
    for rel in TOOLKIT_FILES {
        node.remove(rel);
    }
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.installed",
        Status::Warn,
        &["config present, but no toolkit binary found"],
    );
    node.remove("etc/nvidia-container-runtime");
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.installed",
        Status::Fail,
        &["nvidia container toolkit not installed"],
    );
    assert_evidence(
        &report,
        "toolkit.installed",
        &["no nvidia-container-runtime, nvidia-ctk or nvidia-container-runtime-hook"],
    );
    // The containerd handler still names the binary that is gone.
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Fail,
        &["runs /usr/bin/nvidia-container-runtime, which does not exist"],
    );
}

#[test]
fn a_non_default_nvidia_handler_needs_a_runtime_class() {
    let node = Node::healthy();
    let config = node.read(CONTAINERD).replace(
        "default_runtime_name = \"nvidia\"",
        "default_runtime_name = \"runc\"",
    );
    node.write(CONTAINERD, &config);
    assert_check(
        &node.run_all(),
        "toolkit.container_runtime",
        Status::Pass,
        &[
            "containerd: runtime handler `nvidia` (/usr/bin/nvidia-container-runtime), not the default (`runc`): GPU pods need `runtimeClassName: nvidia`; CDI on",
        ],
    );
}

/// containerd with no NVIDIA handler: CDI carries the GPUs, or nothing does.
#[test]
fn cdi_only_runtime_passes_and_without_cdi_fails() {
    let node = Node::healthy();
    // containerd 1.7's config (version 2), runc only.
    let without_handler = |cdi: &str| {
        format!(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n{cdi}\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"runc\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n"
        )
    };
    node.write(CONTAINERD, &without_handler("enable_cdi = true"));
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Pass,
        &["containerd: no nvidia runtime handler, CDI on: GPUs reach containers through CDI specs"],
    );
    // CDI is all there is, so the spec is judged and must name every GPU.
    assert_check(
        &report,
        "toolkit.cdi_specs",
        Status::Pass,
        &["CDI specs name all 8 GPU(s)"],
    );
    node.remove("var/run/cdi/nvidia.yaml");
    assert_check(
        &node.run_all(),
        "toolkit.cdi_specs",
        Status::Fail,
        &["the runtime relies on CDI but no nvidia.com/gpu spec exists"],
    );

    // containerd 1.7 (config version 2) has CDI off unless enabled.
    node.write(CONTAINERD, &without_handler(""));
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Fail,
        &["containerd has no nvidia runtime handler and CDI is off"],
    );
    assert_evidence(
        &report,
        "toolkit.container_runtime",
        &["handlers: runc; default: runc; CDI: off"],
    );
    // containerd 2.x (config version 3) has it on by default.
    node.write(
        CONTAINERD,
        "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n",
    );
    assert_check(
        &node.run_all(),
        "toolkit.container_runtime",
        Status::Pass,
        &["no nvidia runtime handler, CDI on"],
    );
}

#[test]
fn a_crio_node_is_read_from_its_drop_ins() {
    let node = Node::healthy();
    node.remove("etc/containerd");
    node.write(
        "etc/crio/crio.conf",
        "[crio.runtime]\ndefault_runtime = \"runc\"\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n",
    );
    node.write(
        "etc/crio/crio.conf.d/99-nvidia.toml",
        "[crio.runtime]\ndefault_runtime = \"nvidia\"\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\nruntime_type = \"OCI\"\n",
    );
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Pass,
        &[
            "CRI-O: runtime handler `nvidia` (/usr/bin/nvidia-container-runtime) is the default runtime; CDI on",
        ],
    );
    assert_evidence(
        &report,
        "toolkit.container_runtime",
        &[
            "etc/crio/crio.conf, etc/crio/crio.conf.d/99-nvidia.toml: handlers: runc, nvidia; default: nvidia",
        ],
    );
    // Without the drop-in, runc is the default and there is no NVIDIA handler; CRI-O has CDI
    // on by default.
    node.remove("etc/crio/crio.conf.d/99-nvidia.toml");
    assert_check(
        &node.run_all(),
        "toolkit.container_runtime",
        Status::Pass,
        &["CRI-O: no nvidia runtime handler, CDI on"],
    );
}

/// k3s and RKE2 run their own containerd: their generated config is read before (and instead
/// of) /etc/containerd/config.toml.
#[test]
fn k3s_and_rke2_containerd_configs_are_read() {
    for (dist, path) in [
        (
            "k3s",
            "var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        ),
        (
            "rke2",
            "var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        ),
    ] {
        let node = Node::healthy();
        // The distribution's config has the nvidia handler, but not as the default; the stock
        // /etc/containerd one (ignored by k3s/RKE2) has none at all.
        node.write(
            path,
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"runc\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"]\nruntime_type = \"io.containerd.runc.v2\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\".options]\nBinaryName = \"/usr/bin/nvidia-container-runtime\"\n",
        );
        node.write(CONTAINERD, "version = 2\n");
        let report = node.run_all();
        assert_check(
            &report,
            "toolkit.container_runtime",
            Status::Pass,
            &[
                "runtime handler `nvidia`",
                "GPU pods need `runtimeClassName: nvidia`",
            ],
        );
        let c = check(&report, "toolkit.container_runtime");
        assert_eq!(
            c.evidence[0].source, path,
            "{dist}: only its own config is read"
        );
        assert!(
            c.evidence[0]
                .observed
                .starts_with("version 2; handlers: nvidia")
        );
    }
}

fn in_pod(node: &Node, env: Value) {
    node.write(".gpudoctor/env.json", &env.to_string());
}

#[test]
fn container_gpus_judges_only_inside_a_pod() {
    let node = Node::healthy();
    let host = "10.96.0.1";
    in_pod(
        &node,
        json!({"KUBERNETES_SERVICE_HOST": host, "NVIDIA_VISIBLE_DEVICES": "all"}),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Pass,
        &[
            "container can access 8 GPU(s) 0000:18:00.0 ",
            " 0000:db:00.0: NVIDIA_VISIBLE_DEVICES=all, 8 /dev/nvidia<N> node(s)",
        ],
    );

    // Two GPUs given, eight seen: not what the runtime was asked for.
    let gpu0 = node.nvml_gpu(0)["uuid"].as_str().unwrap().to_string();
    let gpu1 = node.nvml_gpu(1)["uuid"].as_str().unwrap().to_string();
    in_pod(
        &node,
        json!({"KUBERNETES_SERVICE_HOST": host, "NVIDIA_VISIBLE_DEVICES": format!("{gpu0},{gpu1}")}),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Fail,
        &["container was given 2 GPU(s)", "but NVML sees 8"],
    );

    // Given GPUs, but the runtime injected none (no nvidia handler ran): NVML sees nothing.
    in_pod(
        &node,
        json!({"KUBERNETES_SERVICE_HOST": host, "NVIDIA_VISIBLE_DEVICES": "all"}),
    );
    init_error(&node, "library_not_found", "libnvidia-ml.so.1: cannot open");
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Fail,
        &["container was given all GPUs (NVIDIA_VISIBLE_DEVICES=all) but NVML sees 0"],
    );
    assert!(
        check(&report, "toolkit.container_gpus")
            .hint
            .as_deref()
            .unwrap()
            .contains("runtimeClassName: nvidia")
    );

    // A Pod told by its service-account mount alone, given no GPUs: nothing to judge.
    let node = Node::healthy();
    node.write(
        "var/run/secrets/kubernetes.io/serviceaccount/namespace",
        "default\n",
    );
    assert_check(
        &node.run_all(),
        "toolkit.container_gpus",
        Status::Skip,
        &["running in a pod that was given no GPUs (NVIDIA_VISIBLE_DEVICES unset)"],
    );
    in_pod(&node, json!({"NVIDIA_VISIBLE_DEVICES": "void"}));
    assert_check(
        &node.run_all(),
        "toolkit.container_gpus",
        Status::Skip,
        &["NVIDIA_VISIBLE_DEVICES=\"void\""],
    );
}

#[test]
fn a_node_without_kubernetes_or_a_runtime_skips_toolkit_and_device_plugin() {
    let node = Node::healthy();
    for rel in TOOLKIT_FILES {
        node.remove(rel);
    }
    for rel in [
        "etc/nvidia-container-runtime",
        "etc/containerd",
        "var/lib/kubelet",
        "var/run/cdi",
        POD_RESOURCES,
    ] {
        node.remove(rel);
    }
    let report = node.run_all();
    for id in [Layer::Toolkit, Layer::DevicePlugin] {
        let l = layer(&report, id);
        assert_eq!(l.status, Status::Skip, "{l:#?}");
    }
    // Every device-plugin check skips for the one reason, which the layer then carries.
    assert_eq!(
        layer(&report, Layer::DevicePlugin).reason.as_deref(),
        Some("not a kubernetes node (no var/lib/kubelet)")
    );
    for code in [
        "toolkit.installed",
        "toolkit.container_runtime",
        "toolkit.cdi_specs",
        "toolkit.operator_validations",
    ] {
        assert_check(
            &report,
            code,
            Status::Skip,
            &["not a kubernetes node and no container runtime or nvidia toolkit configured"],
        );
    }
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Skip,
        &["not running inside a pod"],
    );
    assert_eq!(report.exit_code, 0, "{:?}", report.first_failure);
}

// ---------------------------------------------------------------------------------------------
// 6. cli: colour

#[test]
fn no_color_output_has_no_escapes() {
    let out = common::scratch::gpudoctor_command()
        .args([
            "check",
            "--root",
            &format!("fixtures/{HEALTHY}"),
            "--keep-going",
        ])
        .current_dir(common::repo())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[ ok ]"), "{text}");
    assert!(!text.contains('\x1b'), "{text}");
}

// ---------------------------------------------------------------------------------------------
// The NVML cases real GPUs produce (issue 20): bridges, fabric health, error kinds, MIG.

/// PCIe H100 NVL pairs are judged per bridge: a pair whose two ends disagree, a pair with fewer
/// links than the node's other bridges, and a 4-way group missing a pair each fail, naming the
/// GPUs; unused links never count as down.
#[test]
fn bridged_pcie_gpus_are_judged_per_bridge() {
    let node = Node::copy("h100-nvl-bridged-healthy");
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Pass,
        &[
            "NVLink bridges whole",
            "12 active NVLinks between bridged GPUs",
        ],
    );
    // GPU 1 sees only 8 of the links GPU 0 sees to it: a half-seated bridge.
    node.edit_gpus(|d| {
        if d["index"] == 1 {
            for link in d["nvlinks"]["value"].as_array_mut().unwrap() {
                if (8..12).contains(&link["link"].as_u64().unwrap()) {
                    link["active"] = json!(false);
                }
            }
        }
    });
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Fail,
        &["GPU 0 (0000:18:00.0) has 12 active NVLink(s) to GPU 1, which has 8 back"],
    );
    // Both ends agree on 8: still a bridge short of the node's other pairs.
    node.edit_gpus(|d| {
        if d["index"] == 0 {
            for link in d["nvlinks"]["value"].as_array_mut().unwrap() {
                if (8..12).contains(&link["link"].as_u64().unwrap()) {
                    link["active"] = json!(false);
                }
            }
        }
    });
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Fail,
        &["GPU 0 (0000:18:00.0) and GPU 1 share 8 active NVLink(s), other bridges carry 12"],
    );
}

/// A 4-way bridge (NV6 between every pair of four GPUs, NVIDIA/nccl#1617) whose GPUs 0 and 3
/// do not reach each other fails; the full mesh passes.
#[test]
fn a_four_way_bridge_must_reach_every_member() {
    let node = Node::copy("h100-nvl-bridged-healthy");
    let bus = [
        "0000:18:00.0",
        "0000:2a:00.0",
        "0000:3a:00.0",
        "0000:5d:00.0",
    ];
    let mesh = |skip: Option<(usize, usize)>| {
        node.edit_gpus(|d| {
            let me = d["index"].as_u64().unwrap() as usize;
            let links = d["nvlinks"]["value"].as_array_mut().unwrap();
            for link in links.iter_mut() {
                link["active"] = json!(false);
            }
            if me >= 4 {
                return;
            }
            let peers: Vec<usize> = (0..4).filter(|p| *p != me).collect();
            for (k, peer) in peers.iter().enumerate() {
                if skip.is_some_and(|(a, b)| (a, b) == (me, *peer) || (b, a) == (me, *peer)) {
                    continue;
                }
                for l in 0..6 {
                    let link = &mut links[k * 6 + l];
                    link["active"] = json!(true);
                    link["remote_pci_bus_id"] = json!(bus[*peer]);
                    link["remote_type"] = json!({"value": "gpu"});
                }
            }
        })
    };
    mesh(None);
    let report = node.run_all();
    assert_check(
        &report,
        "nvlink.links_active",
        Status::Warn,
        &["GPU(s) 4, 5, 6, 7 have no active NVLink while 4 GPU(s) are bridged"],
    );
    assert!(
        check(&report, "nvlink.links_active")
            .summary
            .split("; ")
            .count()
            == 1
    );
    mesh(Some((0, 3)));
    assert_check(
        &node.run_all(),
        "nvlink.links_active",
        Status::Fail,
        &[
            "GPU 0 (0000:18:00.0) has no active NVLink to GPU 3 though both are bridged in group GPU 0, 1, 2, 3",
        ],
    );
}

/// Fabric health from the v3 struct: degraded bandwidth alone warns with the decoded bits, an
/// unknown status code is shown by number, and a v1 answer (no health fields) is judged on its
/// state alone.
#[test]
fn fabric_health_bits_are_decoded() {
    let node = Node::healthy();
    let set = |value: Value| {
        node.edit_gpus(|d| {
            if d["index"] == 2 {
                d["fabric"] = json!({"value": value.clone()});
            }
        })
    };
    set(
        json!({"state": "completed", "status": "success", "clique_id": 0, "cluster_uuid": null,
               "health_mask": 0xa9, "health_summary": "healthy"}),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "nvlink.fabric_state",
        Status::Warn,
        &["GPU 2 (0000:3a:00.0) degraded bandwidth"],
    );
    assert_evidence(
        &report,
        "nvlink.fabric_state",
        &["health mask 0xa9 (degraded bandwidth)"],
    );
    set(
        json!({"state": "completed", "status": "42", "clique_id": 0, "cluster_uuid": null,
               "health_mask": null, "health_summary": null}),
    );
    assert_check(
        &node.run_all(),
        "nvlink.fabric_state",
        Status::Fail,
        &["completed with error 42"],
    );
    set(
        json!({"state": "completed", "status": "success", "clique_id": 0, "cluster_uuid": null,
               "health_mask": 0xaa, "health_summary": "limited_capacity"}),
    );
    assert_check(
        &node.run_all(),
        "nvlink.fabric_state",
        Status::Fail,
        &["fabric at limited capacity"],
    );
}

/// A reading that failed with an error kind is `error` naming GPU, field and kind, never a
/// silent skip; a failure elsewhere still stands, with the unread reading appended.
#[test]
fn a_reading_error_is_an_error_naming_its_kind() {
    let node = Node::healthy();
    set_gpu(
        &node,
        4,
        "temperature_c",
        json!({"error": {"kind": "no_permission", "message": "Insufficient Permissions"}}),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "driver.thermal",
        Status::Error,
        &["could not read GPU 4 (0000:9a:00.0) temperature_c: no_permission"],
    );
    assert_evidence(
        &report,
        "driver.thermal",
        &["nvml.devices[4].temperature_c: no_permission: Insufficient Permissions"],
    );
    set_gpu(&node, 1, "temperature_c", json!({"value": 95}));
    assert_check(
        &node.run_all(),
        "driver.thermal",
        Status::Fail,
        &["GPU 1 (0000:2a:00.0) at 95 °C", "could not read GPU 4"],
    );
}

/// Under MIG: utilisation NVML will not give (NOT_SUPPORTED on a MIG parent, nvitop#5) is not
/// idle, so a generation below max is noted, not judged; row remapping NVML will not give is said
/// plainly.
#[test]
fn mig_hides_utilisation_and_row_remapping_plainly() {
    let node = Node::healthy();
    set_gpu(
        &node,
        0,
        "mig_mode",
        json!({"value": {"current": true, "pending": true}}),
    );
    set_gpu(&node, 0, "utilization_gpu_pct", json!("not_supported"));
    set_gpu(&node, 0, "pcie_current_gen", json!({"value": 1}));
    set_gpu(&node, 0, "remapped_rows", json!("not_supported"));
    let report = node.run_all();
    assert_check(
        &report,
        "driver.pcie_link",
        Status::Pass,
        &["GPU 0 at gen1, utilisation unknown (MIG on): not judged"],
    );
    assert_check(
        &report,
        "driver.row_remap",
        Status::Pass,
        &["row remapping cannot be read while MIG is on (GPU 0)"],
    );
}

/// A handle that did not answer within the budget is an `error` naming the GPU, with its PCI
/// address accounted for; a handle lost (GPU_IS_LOST) still fails.
#[test]
fn an_unanswered_handle_is_an_error_a_lost_one_fails() {
    let node = Node::healthy();
    node.edit_nvml(|n| {
        n["devices"][5] = json!({"index": 5, "error": {"kind": "timeout", "message": "gpu 5 did not answer within 10 s"}});
    });
    let report = node.run_all();
    assert_check(
        &report,
        "driver.gpu_count",
        Status::Error,
        &["GPU(s) 5 did not answer NVML within its budget"],
    );
    assert!(
        !check(&report, "driver.gpu_count")
            .summary
            .contains("fallen off")
    );
    assert_evidence(
        &report,
        "driver.gpu_count",
        &["present on PCI, no handle from NVML"],
    );
    node.edit_nvml(|n| {
        n["devices"][5] =
            json!({"index": 5, "error": {"kind": "gpu_is_lost", "message": "GPU is lost"}});
    });
    assert_check(
        &node.run_all(),
        "driver.gpu_count",
        Status::Fail,
        &["NVML device 5: GPU is lost"],
    );
}
