//! What each check gives when an input it reads is not there (DESIGN.md "Missing is not
//! absent"; `explain`, `list-checks` and docs/checks.md print it). A data table apart from the
//! checks: one line per registered code, kept complete by a test.
//!
//! The rule every line follows, and tests/missing_inputs.rs holds every layer to: a file or
//! directory the kernel provides on every supported kernel (under `sys/`, `proc/`) and a probe
//! answer a capture records (`.gpudoctor/`) never turn a check `fail` or `warn` when missing —
//! the check says `not read: <path> missing — partial capture or kernel older than N`
//! (`error`), judges without it, or skips. `fail` for absence stays only where absence is the
//! fault: a kernel module, a device node, a configuration file, a kernel object (an RDMA device)
//! that is not there.

/// What a missing input yields for `code`; `None` for a code the table lacks (a test keeps it
/// complete).
pub fn missing_input(code: &str) -> Option<&'static str> {
    TABLE.iter().find(|(c, _)| *c == code).map(|(_, t)| *t)
}

const NVML_RECORDED: &str = "no NVML answer (a capture without .gpudoctor/nvml.json): skip, see driver.nvml_init; a GPU's field NVML did not answer: that GPU not judged on it";

const TABLE: &[(&str, &str)] = &[
    (
        "driver.gpu_on_pci",
        "sys/bus/pci/devices missing: error; a function whose vendor, device or class is missing: error naming it (it may be the GPU), never a warning about the node",
    ),
    (
        "driver.nvidia_module",
        "/proc/modules missing: read from /sys/module/*/initstate; both missing: error. No nvidia module in what was read: fail (absence of the module is the fault); version files missing: judged without them",
    ),
    (
        "driver.nvidia_uvm_module",
        "/proc/modules missing: read from /sys/module/*/initstate; both missing: error. No nvidia_uvm in what was read: fail (absence of the module is the fault)",
    ),
    (
        "driver.nouveau_absent",
        "/proc/modules and /sys/module missing: error; a missing driver link reads as an unbound function",
    ),
    (
        "driver.device_nodes",
        "a missing /dev/nvidiactl, /dev/nvidia-uvm or /dev/nvidia<N>: fail (absence of the device node is the fault); /proc/driver/nvidia/gpus/*/information missing: the minors come from NVML, or error",
    ),
    (
        "driver.nvml_init",
        "no .gpudoctor/nvml.json in a capture: error (no NVML answer recorded), never \"driver not loaded\"",
    ),
    (
        "driver.gpu_count",
        "a GPU function whose class, vendor or device is missing: error naming it, never \"fallen off the bus\"; no NVML answer: skip",
    ),
    (
        "driver.driver_version_match",
        "module version files missing: error or judged with the other; no NVML answer: skip",
    ),
    ("driver.persistence_mode", NVML_RECORDED),
    (
        "driver.xid_events",
        "no kernel log (/dev/kmsg, --kernel-log, .gpudoctor/kmsg.txt): skip, saying how to give one; /proc/uptime or /proc/stat missing: the XIDs are judged and their age is said to be unknown (never read as history)",
    ),
    (
        "driver.pcie_replays",
        "no NVML answer (a capture without .gpudoctor/nvml.json): skip, see driver.nvml_init; a GPU's replay counter NVML did not answer: that GPU not judged on it; /proc/uptime missing: a nonzero total cannot become a rate, error naming it (never a pass); a damaged .gpudoctor/sample.json: error naming it, or the totals judged and the damage said",
    ),
    ("driver.ecc_errors", NVML_RECORDED),
    ("driver.retired_pages", NVML_RECORDED),
    ("driver.row_remap", NVML_RECORDED),
    ("driver.thermal", NVML_RECORDED),
    ("driver.clock_slowdown", NVML_RECORDED),
    (
        "driver.recurring_faults",
        "no --state-dir (and no .gpudoctor/state/history.json in a capture): skip, nothing else changes; the state file missing: a new history; unreadable, not JSON or not gpudoctor's: error naming it, left as it is; no kernel log: the boot is recorded with no fault; no boot time (/proc/uptime, /proc/stat btime): error",
    ),
    (
        "driver.power",
        "no NVML answer: skip, see driver.nvml_init; a GPU's draw or enforced limit not answered: that GPU not judged on it; the default limit not answered (or a capture made before it was read): the cap not judged, and the summary says so",
    ),
    ("driver.ecc_mode", NVML_RECORDED),
    (
        "driver.machine_checks",
        "no /sys/devices/system/edac/mc/mc* (no EDAC driver for this memory, a VM): judged from the kernel log alone and said so; no kernel log either: skip; an unreadable log and no EDAC: error naming it; a ce_count/ue_count that cannot be read or is not a number: error naming the file; no /proc/uptime or --sample baseline: corrected counts not turned into a rate",
    ),
    (
        "driver.gpu_processes",
        "no NVML answer: the processes are unknown and said so (the variables are still judged); a GPU whose process list is not supported or not recorded (a capture made before gpudoctor kept it) or failed: unknown for that GPU, said, never a pass claiming none; no .gpudoctor/env.json in a capture: no variable was set; one that cannot be read or parsed: error naming it",
    ),
    (
        "driver.gpu_firmware",
        "no NVML answer: skip, see driver.nvml_init; a GPU's VBIOS, InfoROM version or InfoROM validity not answered (or a capture made before gpudoctor read them): that GPU not compared on it; none answered: skip",
    ),
    (
        "driver.app_clocks",
        "no NVML answer: skip, see driver.nvml_init; a GPU's application or default clocks not answered (or a capture made before gpudoctor read them): that GPU not judged; none answered: skip",
    ),
    ("driver.pcie_link", NVML_RECORDED),
    ("driver.mig_pending", NVML_RECORDED),
    (
        "driver.cuda",
        "no .gpudoctor/cuda.json in a capture: skip (recorded without --cuda: not probed), never a CUDA verdict; an unreadable or unparsable one: error naming it; live, a libcuda that does not load when --cuda was asked: fail naming where it looked",
    ),
    (
        "toolkit.installed",
        "the toolkit's config and binaries missing: fail (an uninstalled toolkit is the fault) on a node that runs containers",
    ),
    (
        "toolkit.container_runtime",
        "the containerd / CRI-O config missing on a Kubernetes node: fail (the runtime then runs on defaults, without the nvidia runtime: the fault)",
    ),
    (
        "toolkit.cdi_specs",
        "no CDI spec directory: judged as CDI not in use; an unreadable spec: error naming it",
    ),
    (
        "toolkit.operator_validations",
        "no /run/nvidia/validations: skip (not a GPU Operator node); a marker missing on an operator node is the finding (that validation did not pass)",
    ),
    (
        "toolkit.container_gpus",
        "no .gpudoctor/env.json: skip (not recorded in a Pod); missing device nodes in a Pod: fail (absence of the device node is the fault)",
    ),
    (
        "toolkit.disk_space",
        "no container runtime, kubelet or toolkit: skip; a directory the node lacks (no CRI-O root on a containerd node): not judged; no statvfs figures (a capture made before gpudoctor kept .gpudoctor/statvfs.json, or a live root that is neither / nor a mount point): skip; statvfs refused: error naming the directory",
    ),
    (
        "toolkit.disk_inodes",
        "as toolkit.disk_space; a filesystem that reports no inode count (btrfs: f_files 0): not judged, and named",
    ),
    (
        "toolkit.dev_char_links",
        "no /dev/nvidia* node: skip (driver.device_nodes judges that); /proc/devices missing: error naming it (the majors come from it); a node whose driver has no major there: not judged, and named; a missing /dev/char link: fail (its absence is the fault)",
    ),
    (
        "toolkit.container_device_cgroup",
        "not in a Pod given GPUs: skip; no /proc/self/cgroup under the root (a capture made elsewhere): skip, not judged; a v1 devices.list that cannot be read: error naming it; /proc/devices missing: error naming it; cgroup v2 with NVML unavailable for another reason than Unknown Error: skip (driver.nvml_init says why)",
    ),
    (
        "device_plugin.kubelet",
        "no /var/lib/kubelet: skip (not a Kubernetes node); an unreadable kubelet config: error naming it",
    ),
    (
        "device_plugin.registered",
        "/var/lib/kubelet/device-plugins missing on a kubelet node: fail (no device plugin can register: the fault); an unreadable checkpoint: error naming it",
    ),
    (
        "device_plugin.pod_resources",
        "no .gpudoctor/pod-resources.json in a capture: error (not recorded), never a kubelet fault",
    ),
    (
        "device_plugin.allocatable",
        "no pod-resources answer: the checkpoint's RegisteredDevices, else skip; no NVML answer: skip",
    ),
    (
        "device_plugin.numa_topology",
        "a GPU's numa_node missing: that GPU not compared, error naming the file, never \"sysfs says no topology\"",
    ),
    (
        "device_plugin.allocations",
        "no pod-resources answer: the checkpoint's PodDeviceEntries, else skip",
    ),
    (
        "topology.pcie_link",
        "link attributes missing (old kernels, bridges without a PCIe capability): the link is unknown and not judged; a missing class/vendor/device: error naming it",
    ),
    (
        "topology.aer_errors",
        "AER counter files missing (kernel without AER stats, before 4.17): skip or judged without them; no kernel log: the counters alone are judged; /proc/uptime missing: totals judged without a rate; a damaged .gpudoctor/sample.json: error naming it, or the totals judged and the damage said",
    ),
    (
        "topology.numa_affinity",
        "numa_node missing: not read, error naming it (never counted as -1); /sys/devices/system/node missing: skip or error",
    ),
    (
        "topology.gpu_nic_locality",
        "a function whose class, vendor or device is missing (it may be the GPU or NIC): error naming it, never a placement warning",
    ),
    (
        "topology.acs",
        "a switch port's config space missing: error naming it; /proc/cpuinfo missing: judged without the hypervisor flag",
    ),
    (
        "topology.iommu",
        "/sys/class/iommu empty or missing: no active IOMMU unit (kernels without one have none); /proc/cmdline missing: judged without it",
    ),
    (
        "topology.kubelet_topology_manager",
        "no kubelet config: skip (not a Kubernetes node) or error naming an unreadable one",
    ),
    (
        "topology.kubelet_managers",
        "no kubelet config: skip (not a Kubernetes node) or error naming an unreadable one; a key left out reads as the kubelet's default (policies none/None, evictionHard memory.available 100Mi)",
    ),
    (
        "topology.host_bandwidth",
        "no .gpudoctor/cuda.json or one recorded without --bandwidth: skip (not measured); a GPU's link attributes missing: its figure reported and held to its siblings only, never to an unknown link",
    ),
    (
        "rdma.devices",
        "/sys/class/infiniband missing: no RDMA device (the class appears when the RDMA core registers one) — fail if ConnectX functions lack one; a device's ports/ or a port's link_layer missing: error naming it, never a port-count shortfall",
    ),
    (
        "rdma.port_state",
        "a port's state or phys_state missing: that port not judged, error naming the file, never \"port down\"",
    ),
    (
        "rdma.port_rate",
        "a port's rate missing: that port not judged, error naming the file",
    ),
    (
        "rdma.roce_config",
        "gid_attrs/types or ndevs missing (kernels before 4.5, partial captures): error naming it, never \"no RoCE v2 GID\" or \"no netdev\"; a netdev's operstate missing: error, never \"down\"",
    ),
    (
        "rdma.error_counters",
        "a counter the driver does not expose: not judged; an unreadable one: error naming it; /proc/uptime missing: a nonzero total warns without a rate; a counter that vanished during a --sample window: warn naming it, never a negative rate; a damaged .gpudoctor/sample.json: error naming it, or the totals judged and the damage said",
    ),
    (
        "rdma.verbs",
        "/dev/infiniband/uverbs* missing: fail (absence of the device nodes is the fault); /proc/modules missing: /sys/module, else error",
    ),
    (
        "rdma.gpudirect",
        "no nvidia_peermem in the modules read: fail or warn (absence of the module is the fault); version files missing: judged without them",
    ),
    (
        "rdma.firmware",
        "a device's fw_ver or hca_type missing: that device not compared, error naming it",
    ),
    (
        "rdma.nic_events",
        "no kernel log recorded: skip; an unreadable one: error naming it; lines it cannot read are ignored, never a finding",
    ),
    (
        "rdma.peermem_events",
        "no kernel log recorded: skip; an unreadable one: error naming it; the nvidia module's version unreadable: `invalid context` judged as before R560 and said so (noted, never a warning); lines it cannot read are ignored",
    ),
    (
        "rdma.perftest_log",
        "no --perftest-log: skip (nothing to judge); a file that cannot be read (missing, a directory, over 1 MiB, a FIFO nobody writes within --timeout): fail naming it (it was asked for); the named device missing from this node: the run's completion judged, its bandwidth not (warn)",
    ),
    (
        "rdma.gpudirect_bandwidth",
        "no .gpudoctor/gpudirect/ in a capture: skip (recorded without --bandwidth); an unreadable log: error naming it; a port's rate missing: its figure reported, held to the profile's floor only; ib_write_bw not installed: skip naming the package (fail when --perftest-dir names where it should be)",
    ),
    (
        "sriov.vfs_enabled",
        "sys/bus/pci/devices missing: error; an advertised VF on the bus whose PF was not read: error naming it, never \"VF does not exist\"",
    ),
    (
        "sriov.vf_binding",
        "a VF's infiniband/ missing: fail (mlx5_ib did not bind it: the fault); driver link or net/ unreadable: error naming it",
    ),
    (
        "sriov.vf_locality",
        "a PF's or GPU's numa_node missing: not compared, named",
    ),
    (
        "sriov.pod_interface",
        "not in a Pod (no .gpudoctor/env.json in a capture): skip; the Pod's interface missing: fail (the secondary network did not attach: the fault)",
    ),
    (
        "sriov.multus",
        "/etc/cni/net.d missing or without a .conf/.conflist/.json where VFs are set up: fail (Multus is not configured: the fault); an unreadable directory: error naming it; an unreadable file reads as one that does not load (libcni fails on it too)",
    ),
    ("nvlink.links_active", NVML_RECORDED),
    ("nvlink.error_counters", NVML_RECORDED),
    ("nvlink.fabric_state", NVML_RECORDED),
    (
        "nvlink.sxid_events",
        "no kernel log (/dev/kmsg, --kernel-log, .gpudoctor/kmsg.txt): skip, saying how to give one; an unreadable one: error; /proc/uptime or /proc/stat missing: the SXIDs are judged and their age is said to be unknown",
    ),
    (
        "nvlink.fabric_manager",
        "none of /sys/fs/cgroup, /proc, the nvidia-fabricmanager unit file or its log readable: error (cannot tell), never \"stopped\"; a /proc/<pid>/comm that cannot be read: error (that process may be it); no nv-fabricmanager process where the cgroups or /proc were read: fail (a stopped service is the fault); its log missing: judged without it",
    ),
    (
        "nvlink.p2p_bandwidth",
        "no .gpudoctor/cuda.json or one recorded without --bandwidth: skip (not measured); NVLink state NVML did not answer: a pair is classed by its PCIe path and held to pairs of that class, never called a degraded NVLink",
    ),
    (
        "nccl.test_errors",
        "no nccl-tests log (none recorded, no --nccl-log, no run asked for): the layer skips; a log or run that cannot be had: skip, nccl.run_completed names it",
    ),
    (
        "nccl.run_completed",
        "no nccl-tests log and none asked for: skip; a run or --nccl-log asked for that cannot be had (binary not found, does not start, unreadable): fail naming where it looked (asked means required); an unreadable recorded log: error naming it; a log cut short: the missing footer is the finding (a run that did not conclude)",
    ),
    ("nccl.wrong_results", "no nccl-tests log: skip"),
    (
        "nccl.socket_fallback",
        "no NCCL_DEBUG=INFO lines in the log: skip (nothing says which network was used)",
    ),
    (
        "nccl.gpudirect_rdma",
        "no NCCL_DEBUG=INFO lines in the log: skip",
    ),
    (
        "nccl.p2p_transport",
        "no NCCL_DEBUG=INFO lines in the log: skip",
    ),
    ("nccl.nvls", "no NCCL_DEBUG=INFO lines in the log: skip"),
    (
        "nccl.bandwidth_collapse",
        "no nccl-tests log, or too few result rows to compare sizes: skip",
    ),
    (
        "nccl.bus_bandwidth",
        "no result rows of 1 GiB or more: skip (nothing to judge)",
    ),
    (
        "nccl.kernel_crashes",
        "no kernel log recorded: skip; an unreadable one: error naming it; no /proc/uptime or boot time: crashes with since-boot stamps are judged by the log's own boots and their age is said to be unknown",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_check_says_what_a_missing_input_gives() {
        for check in super::super::registry() {
            assert!(
                missing_input(check.code).is_some_and(|t| !t.trim().is_empty()),
                "{} has no line in checks/missing.rs",
                check.code
            );
        }
        for (code, _) in TABLE {
            assert!(
                super::super::find(code).is_some(),
                "checks/missing.rs names {code}, which is not registered"
            );
        }
    }
}
