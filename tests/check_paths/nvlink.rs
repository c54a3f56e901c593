//! NVLink: PCIe GPUs without NVLink (no links, or every link down) skip the layer; without a
//! profile the most common link count flags the odd GPU; error counters warn with their values.

use super::*;

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
