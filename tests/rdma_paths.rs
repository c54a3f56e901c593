//! The `rdma` and `sriov` layers, one behaviour at a time: a healthy fixture is copied into a
//! temporary directory, one thing is changed the way it changes on a real node (a counter that
//! ticked, an HCA left on old firmware, a module not loaded, a VF unbound, ...), and the engine
//! replays the copy. Each test asserts the check's status and the part of its summary or
//! evidence an operator acts on — the numbers, the device, the path.

mod common;

use std::fs;

use common::node::{HEALTHY, Node, assert_check, assert_evidence, check, evidence};
use gpudoctor::profile::{self, Profile};
use gpudoctor::report::{Layer, Status};

const SRIOV: &str = "h100-sriov-healthy";

/// A profile like `hgx-h100` with some RDMA or SR-IOV expectations changed.
fn h100_with(edit: impl FnOnce(&mut Profile)) -> Profile {
    let mut p = profile::builtin("hgx-h100").unwrap();
    p.name = "lab".to_string();
    edit(&mut p);
    p
}

// ---------------------------------------------------------------------------------------------
// rdma
// ---------------------------------------------------------------------------------------------

#[test]
fn the_healthy_copy_passes_so_every_edit_below_is_what_fails() {
    let node = Node::copy(HEALTHY);
    let report = node.run_layer(Layer::Rdma, None);
    let layer = report.layer(Layer::Rdma).unwrap();
    assert_eq!(layer.status, Status::Pass, "{layer:#?}");
}

#[test]
fn error_counters_above_zero_warn_with_their_values() {
    let node = Node::copy(HEALTHY);
    let ports = format!("{}/ports/1/counters", node.ib_dir("mlx5_3"));
    node.write(&format!("{ports}/symbol_error"), "17\n");
    node.write(&format!("{ports}/link_downed"), "2\n");
    // One hour up: 19 errors are a rate (19/h), not an old burst spread over weeks.
    node.write("proc/uptime", "3600.00 7000.00\n");
    let report = node.run_layer(Layer::Rdma, None);
    assert_check(
        &report,
        "rdma.error_counters",
        Status::Warn,
        &["mlx5_3 port 1", "symbol_error 17", "link_downed 2"],
    );
    let c = check(&report, "rdma.error_counters");
    // Only the port that ticked is named.
    assert!(!c.summary.contains("mlx5_2"), "{}", c.summary);
    assert!(
        evidence(c)
            .contains("mlx5_3/ports/1/counters: link_downed 2 (2.00/h), symbol_error 17 (17.00/h)"),
        "{}",
        evidence(c)
    );
}

#[test]
fn firmware_differing_across_hcas_of_one_model_warns() {
    let node = Node::copy(HEALTHY);
    let dir = node.ib_dir("mlx5_2");
    let model = fs::read_to_string(node.path(&format!("{dir}/hca_type"))).unwrap();
    node.write(&format!("{dir}/fw_ver"), "28.38.1002\n");
    let report = node.run_layer(Layer::Rdma, None);
    let c = check(&report, "rdma.firmware");
    assert_eq!(c.status, Status::Warn, "{c:#?}");
    assert!(
        c.summary.contains(model.trim())
            && c.summary.contains("28.38.1002 on mlx5_2")
            && c.summary.contains("28.39.1002 on mlx5_0 mlx5_1 mlx5_3"),
        "{}",
        c.summary
    );
    assert!(c.hint.as_deref().unwrap().contains("mlxfwmanager"));
}

#[test]
fn mtu_differing_across_roce_ports_warns() {
    let node = Node::copy(HEALTHY);
    node.write("sys/class/net/enp105s0f1np1/mtu", "1500\n");
    let report = node.run_layer(Layer::Rdma, None);
    assert_check(
        &report,
        "rdma.roce_config",
        Status::Warn,
        &[
            "Ethernet RDMA netdevs use different mtus",
            "MTU 1500 on enp105s0f1np1",
            "MTU 9000 on enp105s0f0np0",
        ],
    );
    let c = check(&report, "rdma.roce_config");
    // IPoIB (4092) and Ethernet (9000) differ by design and are never compared.
    assert!(!c.summary.contains("4092"), "{}", c.summary);
}

#[test]
fn verbs_fail_without_ib_uverbs_or_mlx5_ib() {
    for module in ["ib_uverbs", "mlx5_ib"] {
        let node = Node::copy(HEALTHY);
        node.drop_lines("proc/modules", &format!("{module} "));
        let report = node.run_layer(Layer::Rdma, None);
        let c = check(&report, "rdma.verbs");
        assert_eq!(c.status, Status::Fail, "{module}: {c:#?}");
        assert!(
            c.summary
                .contains(&format!("module(s) not loaded: {module}")),
            "{}",
            c.summary
        );
        assert!(
            c.hint
                .as_deref()
                .unwrap()
                .contains("modprobe ib_uverbs mlx5_ib")
        );
    }
}

#[test]
fn verbs_fail_when_a_uverbs_device_node_is_missing() {
    let node = Node::copy(HEALTHY);
    node.remove("dev/infiniband/uverbs9");
    let report = node.run_layer(Layer::Rdma, None);
    assert_check(
        &report,
        "rdma.verbs",
        Status::Fail,
        &["9 /dev/infiniband/uverbs node(s) for 10 RDMA device(s)"],
    );
    assert_evidence(&report, "rdma.verbs", &["expected 10 uverbs nodes"]);
}

#[test]
fn fewer_ports_than_the_profile_expects_fail() {
    let node = Node::copy(HEALTHY);
    let report = node.run_layer(Layer::Rdma, Some(h100_with(|p| p.rdma_ports = Some(9))));
    assert_check(
        &report,
        "rdma.devices",
        Status::Fail,
        &["8 InfiniBand port(s), profile lab expects 9"],
    );
    assert_evidence(
        &report,
        "rdma.devices",
        &["2 Ethernet, 8 InfiniBand (expected 9 InfiniBand ports (profile lab))"],
    );
}

#[test]
fn an_hca_gone_from_the_node_fails_naming_its_function() {
    let node = Node::copy(HEALTHY);
    let dir = node.ib_dir("mlx5_7");
    node.remove("sys/class/infiniband/mlx5_7");
    node.remove(&dir);
    let report = node.run_layer(Layer::Rdma, Some(profile::builtin("hgx-h100").unwrap()));
    let c = check(&report, "rdma.devices");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    let bdf = dir.split('/').rev().nth(2).unwrap();
    assert!(
        c.summary.contains(&format!(
            "1 connectx function(s) without an RDMA device: {bdf}"
        )) && c
            .summary
            .contains("7 InfiniBand port(s), profile hgx-h100 expects 8"),
        "{}",
        c.summary
    );
}

#[test]
fn a_link_layer_other_than_the_profiles_fails() {
    // An HCA flipped to Ethernet mode (mlxconfig LINK_TYPE_P1=2): still an RDMA device, but no
    // longer one of the profile's InfiniBand ports.
    let node = Node::copy(HEALTHY);
    let port = format!("{}/ports/1", node.ib_dir("mlx5_4"));
    node.write(&format!("{port}/link_layer"), "Ethernet\n");
    let report = node.run_layer(Layer::Rdma, Some(profile::builtin("hgx-h100").unwrap()));
    assert_check(
        &report,
        "rdma.devices",
        Status::Fail,
        &["7 InfiniBand port(s), profile hgx-h100 expects 8"],
    );
    assert_evidence(&report, "rdma.devices", &["3 Ethernet, 7 InfiniBand"]);
    let c = check(&report, "rdma.devices");
    assert!(c.hint.as_deref().unwrap().contains("LINK_TYPE"));
}

#[test]
fn without_a_profile_a_port_slower_than_the_others_fails_naming_both() {
    let node = Node::copy(HEALTHY);
    // No NVML answers: no GPU names, so no profile is chosen.
    node.remove(".gpudoctor/nvml.json");
    let port = format!("{}/ports/1", node.ib_dir("mlx5_5"));
    node.write(&format!("{port}/rate"), "200 Gb/sec (4X HDR)\n");
    let report = node.run_layer(Layer::Rdma, None);
    assert_eq!(report.profile, None, "no profile must be in force");
    assert_check(
        &report,
        "rdma.port_rate",
        Status::Fail,
        &[
            "mlx5_5 port 1",
            "at 200 Gb/s, the fastest InfiniBand port runs 400 Gb/s",
        ],
    );
    assert_evidence(
        &report,
        "rdma.port_rate",
        &["200 Gb/sec (4X HDR) (expected 400 Gb/sec (the fastest InfiniBand port))"],
    );
    let c = check(&report, "rdma.port_rate");
    // The RoCE ports (200 GbE) are compared with each other, not with the InfiniBand ones.
    assert!(!c.summary.contains("mlx5_8"), "{}", c.summary);
}

/// RoCE LAG: the dual-port card's two RDMA devices become one `mlx5_bond_0` under its first PF,
/// over the bond netdev (no `device` link: a virtual interface); the second PF has no RDMA device
/// of its own.
fn bonded(node: &Node) {
    let first = node.ib_dir("mlx5_8");
    let second = node.ib_dir("mlx5_9");
    let bond = first.replace("/infiniband/mlx5_8", "/infiniband/mlx5_bond_0");
    fs::rename(node.path(&first), node.path(&bond)).unwrap();
    node.remove("sys/class/infiniband/mlx5_8");
    node.remove("sys/class/infiniband/mlx5_9");
    node.remove(&second);
    node.link(
        "sys/class/infiniband/mlx5_bond_0",
        bond.replacen("sys/", "../../", 1),
    );
    for i in 0..4 {
        node.write(&format!("{bond}/ports/1/gid_attrs/ndevs/{i}"), "bond0\n");
    }
    node.write("sys/devices/virtual/net/bond0/operstate", "up\n");
    node.write("sys/devices/virtual/net/bond0/mtu", "9000\n");
    node.link("sys/class/net/bond0", "../../devices/virtual/net/bond0");
    node.remove("dev/infiniband/uverbs9");
}

#[test]
fn a_bonded_roce_device_is_one_healthy_rdma_device() {
    let node = Node::copy(HEALTHY);
    bonded(&node);
    let report = node.run_layer(Layer::Rdma, Some(profile::builtin("hgx-h100").unwrap()));
    let devices = check(&report, "rdma.devices");
    // The second PF of a LAG has no RDMA device of its own: not "a NIC without RDMA".
    assert_eq!(devices.status, Status::Pass, "{devices:#?}");
    assert!(
        devices
            .summary
            .contains("9 RDMA device(s): 1 Ethernet, 8 InfiniBand"),
        "{}",
        devices.summary
    );
    assert!(evidence(devices).contains("mlx5_bond_0"));
    let roce = check(&report, "rdma.roce_config");
    assert_eq!(roce.status, Status::Pass, "{roce:#?}");
    assert!(
        roce.summary.starts_with("1 RoCE port(s)"),
        "{}",
        roce.summary
    );
    for code in [
        "rdma.port_state",
        "rdma.port_rate",
        "rdma.verbs",
        "rdma.gpudirect",
    ] {
        assert_eq!(check(&report, code).status, Status::Pass, "{code}");
    }
    // Its netdev is the bond, read like any other.
    node.write("sys/devices/virtual/net/bond0/operstate", "down\n");
    let report = node.run_layer(Layer::Rdma, None);
    let roce = check(&report, "rdma.roce_config");
    assert_eq!(roce.status, Status::Fail, "{roce:#?}");
    assert!(
        roce.summary.contains("mlx5_bond_0 port 1")
            && roce.summary.contains("netdev bond0 is down"),
        "{}",
        roce.summary
    );
}

#[test]
fn no_rdma_devices_and_none_expected_skips_the_layer() {
    let node = Node::copy(HEALTHY);
    // A GPU node without RDMA NICs: no RDMA devices and no ConnectX functions.
    for dev in fs::read_dir(node.path("sys/class/infiniband")).unwrap() {
        let name = dev.unwrap().file_name().to_string_lossy().into_owned();
        let dir = node.ib_dir(&name);
        let function = dir.split("/infiniband/").next().unwrap().to_string();
        let bdf = function.rsplit('/').next().unwrap().to_string();
        node.remove(&format!("sys/bus/pci/devices/{bdf}"));
        node.remove(&function);
    }
    node.remove("sys/class/infiniband");
    let none = h100_with(|p| {
        p.rdma_ports = Some(0);
        p.rdma_rate_gbps = None;
    });
    let report = node.run_layer(Layer::Rdma, Some(none));
    let layer = report.layer(Layer::Rdma).unwrap();
    assert_eq!(layer.status, Status::Skip, "{layer:#?}");
    let devices = check(&report, "rdma.devices");
    assert_eq!(devices.status, Status::Skip);
    assert_eq!(
        devices.summary,
        "no RDMA devices, none expected (profile lab)"
    );
    for c in &layer.checks {
        assert_eq!(c.status, Status::Skip, "{c:#?}");
    }
}

// GPUDirect RDMA: the three outcomes issue 6 names.

/// The healthy node without nvidia_peermem (module and its sysfs directory).
fn without_peermem(node: &Node) {
    node.drop_lines("proc/modules", "nvidia_peermem ");
    node.remove("sys/module/nvidia_peermem");
}

#[test]
fn gpudirect_via_nvidia_peermem_passes_naming_it() {
    let node = Node::copy(HEALTHY);
    let report = node.run_layer(Layer::Rdma, None);
    let c = check(&report, "rdma.gpudirect");
    assert_eq!(c.status, Status::Pass, "{c:#?}");
    assert!(
        c.summary.starts_with("GPUDirect RDMA via nvidia_peermem"),
        "{}",
        c.summary
    );
}

#[test]
fn gpudirect_via_dma_buf_passes_naming_the_path_and_what_it_needs() {
    // Linux 5.15 with the open kernel module 550: dma-buf.
    let node = Node::copy(HEALTHY);
    without_peermem(&node);
    let report = node.run_layer(Layer::Rdma, None);
    let c = check(&report, "rdma.gpudirect");
    assert_eq!(c.status, Status::Pass, "{c:#?}");
    assert!(
        c.summary.starts_with(
            "GPUDirect RDMA via dma-buf: linux 5.15.0-105-generic with the open nvidia kernel module 550.54.15"
        ) && c.summary.contains("needs NCCL ≥ 2.13 and CUDA ≥ 11.7"),
        "{}",
        c.summary
    );
    let ev = evidence(c);
    assert!(ev.contains("open kernel module 550.54.15"), "{ev}");
    assert!(ev.contains("NCCL ≥ 2.13 and CUDA ≥ 11.7"), "{ev}");
}

#[test]
fn gpudirect_without_peermem_or_dma_buf_fails_with_the_modprobe_hint() {
    // The proprietary kernel module has no dma-buf export.
    let node = Node::copy(HEALTHY);
    without_peermem(&node);
    node.edit("proc/driver/nvidia/version", |t| {
        t.replace("Open Kernel Module", "Kernel Module")
    });
    let report = node.run_layer(Layer::Rdma, None);
    let c = check(&report, "rdma.gpudirect");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert!(
        c.summary.starts_with(
            "no GPUDirect RDMA path: nvidia_peermem not loaded and no dma-buf support"
        ),
        "{}",
        c.summary
    );
    assert!(
        c.hint
            .as_deref()
            .unwrap()
            .contains("modprobe nvidia_peermem")
    );
    assert!(
        evidence(c).contains("proprietary kernel module"),
        "{}",
        evidence(c)
    );

    // The open module on a kernel older than 5.12: no dma-buf either.
    let node = Node::copy(HEALTHY);
    without_peermem(&node);
    node.write("proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
    let c = check(&node.run_layer(Layer::Rdma, None), "rdma.gpudirect").clone();
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert!(
        evidence(&c).contains("5.4.0-150-generic (expected ≥ 5.12 for dma-buf)"),
        "{}",
        evidence(&c)
    );
}

// ---------------------------------------------------------------------------------------------
// sriov
// ---------------------------------------------------------------------------------------------

/// The first VF of the first SR-IOV PF in the fixture, root-relative `sys/bus/pci/devices/<vf>`.
fn first_vf(node: &Node) -> (String, String) {
    let pf = "0000:19:00.0";
    let target = fs::read_link(node.path(&format!("sys/bus/pci/devices/{pf}/virtfn0"))).unwrap();
    let vf = target.file_name().unwrap().to_string_lossy().into_owned();
    (pf.to_string(), vf)
}

#[test]
fn the_healthy_sriov_copy_passes() {
    let node = Node::copy(SRIOV);
    let report = node.run_layer(Layer::Sriov, None);
    let layer = report.layer(Layer::Sriov).unwrap();
    for c in &layer.checks {
        assert!(!c.status.is_finding(), "{c:#?}");
    }
    assert_eq!(check(&report, "sriov.vf_binding").status, Status::Pass);
}

#[test]
fn an_unbound_vf_fails() {
    let node = Node::copy(SRIOV);
    let (pf, vf) = first_vf(&node);
    node.remove(&format!("sys/bus/pci/devices/{vf}/driver"));
    let report = node.run_layer(Layer::Sriov, None);
    let c = check(&report, "sriov.vf_binding");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert_eq!(
        c.summary,
        format!("VF {vf} of {pf} is not bound to a driver")
    );
    assert!(
        evidence(c).contains(&format!("sys/bus/pci/devices/{vf}/driver: absent")),
        "{}",
        evidence(c)
    );
}

#[test]
fn a_vf_of_an_rdma_pf_without_its_rdma_device_fails() {
    let node = Node::copy(SRIOV);
    let (pf, vf) = first_vf(&node);
    let dir = format!("sys/bus/pci/devices/{vf}/infiniband");
    let dev = fs::read_dir(node.path(&dir))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();
    // mlx5_ib did not create the VF's device: neither its directory nor its class link exist.
    node.remove(&format!("sys/class/infiniband/{dev}"));
    node.remove(&dir);
    let report = node.run_layer(Layer::Sriov, None);
    let c = check(&report, "sriov.vf_binding");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert_eq!(
        c.summary,
        format!("VF {vf} of RDMA PF {pf} has no RDMA device")
    );
    assert!(c.hint.as_deref().unwrap().contains("isRdma"));
}

#[test]
fn vf_resources_without_a_multus_config_fail() {
    let node = Node::copy(SRIOV);
    node.remove("etc/cni/net.d/00-multus.conf");
    let report = node.run_layer(Layer::Sriov, None);
    assert_check(
        &report,
        "sriov.multus",
        Status::Fail,
        &["Multus is not configured"],
    );
    assert_evidence(
        &report,
        "sriov.multus",
        &[
            "etc/cni/net.d: 10-calico.conflist (`calico+portmap+bandwidth`) (expected a Multus config",
        ],
    );
}

#[test]
fn device_plugin_resources_naming_vfs_that_do_not_exist_fail() {
    let node = Node::copy(SRIOV);
    let (_, vf) = first_vf(&node);
    // The plugin still advertises a VF from before the PF was reconfigured.
    node.edit(".gpudoctor/pod-resources.json", |t| {
        t.replace(&format!("\"{vf}\""), "\"0000:19:07.7\"")
    });
    let report = node.run_layer(Layer::Sriov, None);
    assert_check(
        &report,
        "sriov.vfs_enabled",
        Status::Fail,
        &["nvidia.com/rdma_vf names 1 VF(s) that do not exist: 0000:19:07.7"],
    );
    assert_evidence(
        &report,
        "sriov.vfs_enabled",
        &["pod-resources allocatable: nvidia.com/rdma_vf: 0000:19:07.7"],
    );
}

#[test]
fn fewer_vfs_than_the_profile_expects_fail_naming_each_pf() {
    let node = Node::copy(SRIOV);
    let report = node.run_layer(Layer::Sriov, Some(h100_with(|p| p.sriov_vfs = Some(16))));
    let c = check(&report, "sriov.vfs_enabled");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert!(
        c.summary.starts_with(
            "8 network VF(s) enabled, profile lab expects 16 (sriov_numvfs/totalvfs 0000:19:00.0 1/8,"
        ),
        "{}",
        c.summary
    );
    assert!(
        evidence(c).contains("(expected 16 VFs in total (profile lab sriov_vfs))"),
        "{}",
        evidence(c)
    );

    // As many as expected: pass, saying so.
    let report = node.run_layer(Layer::Sriov, Some(h100_with(|p| p.sriov_vfs = Some(8))));
    let c = check(&report, "sriov.vfs_enabled");
    assert_eq!(c.status, Status::Pass, "{c:#?}");
    assert!(
        c.summary.ends_with("profile lab expects 8"),
        "{}",
        c.summary
    );
}

#[test]
fn a_node_the_profile_expects_vfs_on_fails_even_with_nothing_advertised() {
    // No VFs enabled and no VF resource: without a profile SR-IOV does not apply...
    let node = Node::copy(HEALTHY);
    let report = node.run_layer(Layer::Sriov, None);
    assert_eq!(report.layer(Layer::Sriov).unwrap().status, Status::Skip);
    // ...but a profile that expects VFs makes it a failure.
    let report = node.run_layer(Layer::Sriov, Some(h100_with(|p| p.sriov_vfs = Some(8))));
    let c = check(&report, "sriov.vfs_enabled");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert!(
        c.summary
            .starts_with("0 network VF(s) enabled, profile lab expects 8"),
        "{}",
        c.summary
    );
    // sriov_vfs = 0 is no expectation.
    let report = node.run_layer(Layer::Sriov, Some(h100_with(|p| p.sriov_vfs = Some(0))));
    assert_eq!(report.layer(Layer::Sriov).unwrap().status, Status::Skip);
}

/// SR-IOV PFs of classes no other layer judges (an NVMe drive here; QAT and FEC cards alike)
/// are still found, so a device-plugin resource naming their VFs names VFs that exist.
#[test]
fn vfs_of_a_pf_of_another_class_exist_for_the_sriov_layer() {
    let node = Node::copy(SRIOV);
    let pf = "sys/devices/pci0000:00/0000:00:1d.0/0000:70:00.0";
    let vf = "sys/devices/pci0000:00/0000:00:1d.0/0000:70:00.1";
    for dir in [pf, vf] {
        node.write(&format!("{dir}/class"), "0x010802\n");
        node.write(&format!("{dir}/vendor"), "0x8086\n");
        node.write(&format!("{dir}/device"), "0x0b60\n");
    }
    node.write(&format!("{pf}/sriov_totalvfs"), "4\n");
    node.write(&format!("{pf}/sriov_numvfs"), "1\n");
    node.link(&format!("{pf}/virtfn0"), "../0000:70:00.1");
    node.link(&format!("{vf}/physfn"), "../0000:70:00.0");
    node.link(&format!("{vf}/driver"), "../../../../bus/pci/drivers/nvme");
    for bdf in ["0000:70:00.0", "0000:70:00.1"] {
        node.link(
            &format!("sys/bus/pci/devices/{bdf}"),
            format!("../../../devices/pci0000:00/0000:00:1d.0/{bdf}"),
        );
    }
    node.edit_json(".gpudoctor/pod-resources.json", |doc| {
        doc["allocatable"]["value"]["devices"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "resource_name": "intel.com/nvme_vf",
                "device_ids": ["0000:70:00.1"],
            }));
    });
    let report = node.run_layer(Layer::Sriov, None);
    let c = check(&report, "sriov.vfs_enabled");
    assert_eq!(c.status, Status::Pass, "{c:#?}");
    assert!(!c.summary.contains("do not exist"), "{}", c.summary);
}

/// `sriov_vfs` counts network VFs: VFs a vGPU host enables on its GPUs do not make up for
/// missing NIC VFs.
#[test]
fn gpu_vfs_do_not_count_toward_the_profiles_network_vfs() {
    let node = Node::copy(SRIOV);
    let gpu = node.path("sys/bus/pci/devices/0000:18:00.0");
    assert_eq!(
        fs::read_to_string(gpu.join("class")).unwrap().trim(),
        "0x030200"
    );
    node.write("sys/bus/pci/devices/0000:18:00.0/sriov_totalvfs", "16\n");
    node.write("sys/bus/pci/devices/0000:18:00.0/sriov_numvfs", "16\n");
    let report = node.run_layer(Layer::Sriov, Some(h100_with(|p| p.sriov_vfs = Some(16))));
    let c = check(&report, "sriov.vfs_enabled");
    assert_eq!(c.status, Status::Fail, "{c:#?}");
    assert!(
        c.summary
            .starts_with("8 network VF(s) enabled, profile lab expects 16"),
        "{}",
        c.summary
    );
    assert!(!c.summary.contains("0000:18:00.0"), "{}", c.summary);
}
