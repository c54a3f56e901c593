//! The device plugin's allocations (`pod-resources.json`): a GPU handed to two containers, a
//! replica held twice vs distinct replicas shared, allocatable NUMA hints that disagree with sysfs.

use super::*;

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
