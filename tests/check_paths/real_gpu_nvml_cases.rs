//! The NVML cases real GPUs produce (issue 20): bridges, fabric health, error kinds, MIG, and
//! handles that did not answer.

use super::*;

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
