//! Topology: a translating IOMMU (group types, or the command line without them), a GPU whose
//! nearest NIC is SYS off GPUDirect platforms, a GPU below its max link speed in sysfs.

use super::*;

use std::fs;

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
