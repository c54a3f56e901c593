//! MIG resources in the device plugin: without MIG enumeration (a GPU in MIG mode counts when any
//! MIG device does), and on the MIG fixture: ids matched to their GPU, ids NVML does not know, a
//! re-layout under the plugin, MIG mode without instances, a MIG handle NVML could not open.

use super::*;

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
