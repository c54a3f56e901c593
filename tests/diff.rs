//! `gpudoctor diff`: every failure fixture against the healthy node names the difference that
//! was injected (the manifest's `made.edit`) and nothing unrelated; a node against itself, a
//! copy of itself, its packed capture and its own saved report is empty; reports without facts,
//! usage errors, formats and terminal safety.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpudoctor::diff::{self, Diff, DiffOptions, Kind};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    common::repo().join("fixtures").join(name)
}

fn run(a: &Path, b: &Path) -> Diff {
    let options = DiffOptions::default();
    let a = diff::open(a, &options).unwrap();
    let b = diff::open(b, &options).unwrap();
    diff::compare::compare(&a, &b)
}

/// `section/subject/attribute` of each counted fact or measurement (`-` for a subject present on
/// one side only).
fn fact_keys(d: &Diff) -> Vec<String> {
    d.differences
        .iter()
        .filter(|x| x.counted && x.kind != Kind::Verdict)
        .map(|x| {
            format!(
                "{}/{}/{}",
                x.section,
                x.subject,
                x.attribute.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

/// `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.is_char_boundary(head.len() + i) && glob(tail, &text[head.len() + i..])
                })
        }
    }
}

/// What each fixture's edit changed (its manifest's `made.edit`), as the facts it must show:
/// `(pattern, how many facts match it)`. Every counted fact must match one pattern.
const INJECTED: &[(&str, &[(&str, usize)])] = &[
    (
        "h100-ecc-off",
        &[
            ("driver/nvml gpu 0000:5d:00.0/ecc mode", 1),
            ("driver/nvml gpu 0000:5d:00.0/uncorrected ecc", 1),
        ],
    ),
    (
        "h100-vbios-mismatch",
        &[("driver/nvml gpu 0000:ab:00.0/vbios", 1)],
    ),
    (
        "h100-app-clocks-low",
        &[("driver/nvml gpu 0000:2a:00.0/application clocks", 1)],
    ),
    // The clock-setting event reason is not a fact (it follows the load of the moment,
    // src/snapshot/gpus.rs): only the verdict differs.
    ("h100-clocks-locked", &[]),
    (
        "h100-acs-redirect",
        &[("topology/gpu 0000:9a:00.0/acs on path", 1)],
    ),
    // The stale UUID is an identifier: shown with --all, not counted (the verdict counts).
    ("h100-cdi-spec-stale", &[]),
    // statvfs figures are judged, not compared as facts: only the verdicts differ.
    ("h100-disk-full", &[]),
    ("h100-inodes-low", &[]),
    // EDAC counters are judged, not compared as facts.
    // The corrected-error rate is a figure (error_rate_per_second).
    (
        "h100-edac-uncorrected",
        &[(
            "driver/error_rate_per_second{check=driver.machine_checks,*device=mc5,*}/-",
            1,
        )],
    ),
    (
        "h100-edac-corrected-rising",
        &[(
            "driver/error_rate_per_second{check=driver.machine_checks,*device=mc2,*}/-",
            1,
        )],
    ),
    (
        "h100-containerd-no-nvidia-runtime",
        &[
            ("toolkit/container runtime/cdi", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
        ],
    ),
    (
        "h100-device-plugin-not-registered",
        &[
            ("device-plugin/checkpoint/nvidia.com/gpu registered", 1),
            ("device-plugin/kubelet/plugin sockets", 1),
            ("device-plugin/pod-resources allocatable/nvidia.com/gpu", 1),
        ],
    ),
    (
        "h100-driver-not-loaded",
        &[
            ("node/kernel modules/nvidia*", 5),
            ("node/node/profile", 1),
            ("driver/driver/module version", 1),
            ("driver/gpu 0000:*/driver", 8),
            ("driver/nvswitch 0000:*/driver", 4),
            ("driver/nvml/init", 1),
        ],
    ),
    (
        "h100-fabric-not-started",
        &[("nvlink/nvml gpu 0000:*/fabric", 8)],
    ),
    (
        "h100-gpu-missing-from-nvml",
        &[
            ("driver/nvml gpu 0000:ba:00.0/-", 1),
            ("nvlink/nvml gpu 0000:ba:00.0/-", 1),
            ("driver/nvml versions/device count", 1),
            ("driver/xid events/0000:ba:00.0 xid 79", 1),
        ],
    ),
    (
        "h100-gpu-unhealthy",
        &[
            ("driver/xid events/0000:ab:00.0 xid 92", 1),
            ("device-plugin/checkpoint/nvidia.com/gpu registered", 1),
            ("device-plugin/pod-resources allocatable/nvidia.com/gpu", 1),
        ],
    ),
    (
        "h100-hw-slowdown",
        &[("driver/nvml gpu 0000:db:00.0/slowdown", 1)],
    ),
    ("h100-ib-port-hdr", &[("rdma/port mlx5_5/1/rate", 1)]),
    (
        "h100-power-capped",
        &[("driver/nvml gpu 0000:9a:00.0/power limit", 1)],
    ),
    (
        "h100-power-over-limit",
        &[("driver/nvml gpu 0000:ba:00.0/power draw", 1)],
    ),
    (
        "h100-ib-port-polling",
        &[
            ("rdma/port mlx5_3/1/state", 1),
            ("rdma/port mlx5_3/1/phys state", 1),
            ("rdma/port mlx5_3/1/rate", 1),
            ("rdma/port mlx5_3/1/netdev state", 1),
        ],
    ),
    (
        "h100-kubelet-socket-missing",
        &[
            ("device-plugin/kubelet/pod-resources socket", 1),
            ("device-plugin/pod-resources/answer", 1),
        ],
    ),
    (
        "h100-mig-device-unhealthy",
        &[
            ("driver/nvml gpu 0000:18:00.0/*", 3),
            ("driver/nvml gpu 0000:2a:00.0/*", 3),
            // NVML reports a MIG GPU's links down.
            ("nvlink/nvml gpu 0000:18:00.0/nvlinks", 1),
            ("nvlink/nvml gpu 0000:2a:00.0/nvlinks", 1),
            ("device-plugin/checkpoint/nvidia.com/*", 3),
            ("device-plugin/pod-resources allocatable/nvidia.com/*", 3),
            ("device-plugin/kubelet/plugin sockets", 1),
        ],
    ),
    (
        "h100-mig-healthy",
        &[
            ("driver/nvml gpu 0000:18:00.0/*", 3),
            ("driver/nvml gpu 0000:2a:00.0/*", 3),
            // NVML reports a MIG GPU's links down.
            ("nvlink/nvml gpu 0000:18:00.0/nvlinks", 1),
            ("nvlink/nvml gpu 0000:2a:00.0/nvlinks", 1),
            ("device-plugin/checkpoint/nvidia.com/*", 3),
            ("device-plugin/pod-resources allocatable/nvidia.com/*", 3),
            ("device-plugin/kubelet/plugin sockets", 1),
        ],
    ),
    (
        "h100-mig-pending",
        &[("driver/nvml gpu 0000:18:00.0/mig mode", 1)],
    ),
    ("h100-nccl-collapse", &[("nccl/run all_reduce_perf/-", 1)]),
    // The active probes' fixtures: the healthy node measured (`--cuda`, `--bandwidth`). Their
    // figures are compared only where both sides measured them (not the healthy node), and the
    // facts hold no probe answer: the verdict is the only difference. The healthy measurement
    // differs in nothing that matters.
    ("h100-bandwidth-healthy", &[]),
    ("h100-h2d-third", &[]),
    ("h100-cuda-exclusive-busy", &[]),
    // Who holds a GPU and the probe's environment are judged, not compared as facts.
    ("h100-bandwidth-gpu-held", &[]),
    ("h100-gpu-process-idle", &[]),
    ("h100-env-cuda-changing", &[]),
    ("h100-gdr-slow-hca", &[]),
    ("h100-gdr-perftest-no-cuda", &[]),
    ("h100-gdr-perftest-no-libcuda", &[]),
    ("h100-gdr-perftest-libcuda-loader", &[]),
    ("h100-gdr-one-rail-unsupported", &[]),
    // No peer-memory client: the dma-buf path (perftest's --use_cuda_dmabuf, issue 42).
    (
        "h100-gdr-dmabuf-healthy",
        &[("node/kernel modules/nvidia_peermem", 1)],
    ),
    // The compute HCAs as RoCE rails: each port's link layer, GIDs, MTU and netdev, and the
    // profile the fabric chose.
    (
        "h100-roce-rails-healthy",
        &[
            ("node/node/profile", 1),
            ("rdma/port mlx5_*/1/gid types", 8),
            ("rdma/port mlx5_*/1/link layer", 8),
            ("rdma/port mlx5_*/1/mtu", 8),
            ("rdma/port mlx5_*/1/netdev", 8),
        ],
    ),
    (
        "h100-no-persistence-healthy",
        &[("driver/nvml gpu 0000:*/persistence mode", 8)],
    ),
    (
        "h100-gpu-reset-required",
        &[
            // One line for the cause: every reading NVML failed on, folded.
            ("driver/nvml gpu 0000:9a:00.0/-", 1),
            ("driver/xid events/0000:9a:00.0 xid 154", 1),
        ],
    ),
    (
        "h100-nccl-gdr-disabled",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    ("h100-nccl-hang", &[("nccl/run all_reduce_perf/-", 1)]),
    ("h100-nccl-healthy", &[("nccl/run all_reduce_perf/-", 1)]),
    (
        "h100-nccl-ib-system-error",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    (
        "h100-nccl-low-bandwidth",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    (
        "h100-nccl-old-wrong-results",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    ("h100-nccl-pytorch-watchdog", &[("nccl/run train/-", 1)]),
    (
        "h100-nccl-slurm-two-node",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    (
        "h100-nccl-socket-fallback",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    (
        "h100-nccl-tag-output-info",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    (
        "h100-nccl-wrong-values",
        &[("nccl/run all_reduce_perf/-", 1)],
    ),
    (
        "h100-nic-aer-fatal",
        &[("topology/rdma nic 0000:3b:00.0/aer errors", 1)],
    ),
    (
        "h100-nic-probe-failed",
        &[("rdma/hca mlx5_3/-", 1), ("rdma/port mlx5_3/1/-", 1)],
    ),
    (
        "h100-uvm-not-loaded",
        &[("node/kernel modules/nvidia_uvm", 1)],
    ),
    (
        "h100-sriov-multus-cluster-network-missing",
        &[
            ("device-plugin/checkpoint/nvidia.com/rdma_vf registered", 1),
            (
                "device-plugin/pod-resources allocatable/nvidia.com/rdma_vf",
                1,
            ),
            ("topology/rdma nic 0000:*.1/-", 8),
            ("rdma/hca mlx5_1*/-", 8),
            ("rdma/port mlx5_1*/1/-", 8),
            ("sriov/pf 0000:*/-", 8),
        ],
    ),
    (
        "h100-sriov-vf-unbound",
        &[
            ("device-plugin/checkpoint/nvidia.com/rdma_vf registered", 1),
            (
                "device-plugin/pod-resources allocatable/nvidia.com/rdma_vf",
                1,
            ),
            ("topology/rdma nic 0000:*.1/-", 8),
            ("rdma/hca mlx5_1*/-", 7),
            ("rdma/port mlx5_1*/1/-", 7),
            ("sriov/pf 0000:*/-", 8),
        ],
    ),
    (
        "h100-nouveau-loaded",
        &[
            ("node/kernel modules/nvidia*", 5),
            ("node/kernel modules/nouveau", 1),
            ("node/kernel modules/mxm_wmi", 1),
            ("node/kernel modules/video", 1),
            ("node/kernel modules/wmi", 1),
            ("node/node/profile", 1),
            ("driver/driver/module version", 1),
            ("driver/gpu 0000:*/driver", 8),
            ("driver/nvswitch 0000:*/driver", 4),
            ("driver/nvml/init", 1),
        ],
    ),
    (
        "h100-numa-node-unknown",
        &[
            ("topology/gpu 0000:*/numa node", 8),
            ("topology/nvswitch 0000:*/numa node", 4),
            ("topology/rdma nic 0000:*/numa node", 10),
        ],
    ),
    (
        "h100-nvlink-links-down",
        &[("nvlink/nvml gpu 0000:3a:00.0/nvlinks", 1)],
    ),
    ("h100-ib-port-init", &[("rdma/port mlx5_3/1/state", 1)]),
    (
        "h100-toolkit-fault-nvlinks-down",
        &[
            ("toolkit/container runtime/cdi", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("nvlink/nvml gpu 0000:3a:00.0/nvlinks", 1),
        ],
    ),
    (
        "h100-nvml-version-mismatch",
        &[
            ("driver/driver/nvml libraries", 1),
            ("driver/nvml/init", 1),
            ("node/node/profile", 1),
        ],
    ),
    (
        "h100-operator-toolkit-not-validated",
        &[("toolkit/gpu operator/validations", 1)],
    ),
    (
        "h100-pcie-x8",
        &[("topology/gpu 0000:5d:00.0/pcie link width", 1)],
    ),
    (
        "h100-pcie-x8-sysfs",
        &[("topology/gpu 0000:5d:00.0/pcie link width", 1)],
    ),
    (
        "h100-peermem-missing",
        &[("node/kernel modules/nvidia_peermem", 1)],
    ),
    (
        "h100-rdma-nics-one-socket",
        &[
            ("topology/rdma nic 0000:19:00.0/-", 1),
            ("topology/rdma nic 0000:2b:00.0/-", 1),
            ("topology/rdma nic 0000:3b:00.0/-", 1),
            ("topology/rdma nic 0000:5e:00.0/-", 1),
            ("topology/rdma nic 0000:69:00.*/numa node", 2),
            ("rdma/hca mlx5_*/-", 4),
            ("rdma/port mlx5_*/1/-", 4),
        ],
    ),
    (
        "h100-roce-no-v2-gid",
        &[("rdma/port mlx5_8/1/gid types", 1)],
    ),
    (
        "h100-row-remap-failure",
        &[
            ("driver/nvml gpu 0000:2a:00.0/remapped rows", 1),
            ("driver/xid events/0000:2a:00.0 xid 64", 1),
        ],
    ),
    (
        "h100-row-remap-pending",
        &[
            ("driver/nvml gpu 0000:ba:00.0/remapped rows", 1),
            ("driver/xid events/0000:ba:00.0 xid 63", 1),
        ],
    ),
    (
        "h100-sriov-healthy",
        &[
            ("device-plugin/checkpoint/nvidia.com/rdma_vf registered", 1),
            (
                "device-plugin/pod-resources allocatable/nvidia.com/rdma_vf",
                1,
            ),
            ("topology/rdma nic 0000:*.1/-", 8),
            ("rdma/hca mlx5_1*/-", 8),
            ("rdma/port mlx5_1*/1/-", 8),
            ("sriov/pf 0000:*/-", 8),
        ],
    ),
    (
        "h100-sriov-multus-shadowed",
        &[
            ("device-plugin/checkpoint/nvidia.com/rdma_vf registered", 1),
            (
                "device-plugin/pod-resources allocatable/nvidia.com/rdma_vf",
                1,
            ),
            ("topology/rdma nic 0000:*.1/-", 8),
            ("rdma/hca mlx5_1*/-", 8),
            ("rdma/port mlx5_1*/1/-", 8),
            ("sriov/pf 0000:*/-", 8),
        ],
    ),
    (
        "h100-sriov-numvfs-zero",
        &[
            ("device-plugin/checkpoint/nvidia.com/rdma_vf registered", 1),
            ("sriov/pf 0000:*/-", 8),
        ],
    ),
    (
        "h100-sriov-vf-wrong-socket",
        &[
            ("device-plugin/checkpoint/nvidia.com/rdma_vf registered", 1),
            (
                "device-plugin/pod-resources allocatable/nvidia.com/rdma_vf",
                1,
            ),
            ("topology/rdma nic 0000:9b:00.*/-", 2),
            ("topology/rdma nic 0000:ac:00.*/-", 2),
            ("topology/rdma nic 0000:bb:00.*/-", 2),
            ("topology/rdma nic 0000:dc:00.*/-", 2),
            ("rdma/hca mlx5_1*/-", 8),
            ("rdma/port mlx5_1*/1/-", 8),
            ("sriov/pf 0000:*/-", 8),
        ],
    ),
    (
        "h100-time-sliced-healthy",
        &[
            ("device-plugin/checkpoint/nvidia.com/gpu registered", 1),
            ("device-plugin/pod-resources allocatable/nvidia.com/gpu", 1),
        ],
    ),
    (
        "h100-topology-manager-none",
        &[
            ("topology/kubelet config/* policy", 3),
            ("topology/kubelet config/topology manager scope", 1),
            ("topology/kubelet config/reserved memory", 1),
        ],
    ),
    (
        "h100-kubelet-managers-misaligned",
        &[
            ("topology/kubelet config/* policy", 2),
            ("topology/kubelet config/reserved cpus", 1),
        ],
    ),
    (
        "h100-kubelet-static-unreserved",
        &[
            ("topology/kubelet config/reserved cpus", 1),
            ("topology/kubelet config/reserved memory", 1),
        ],
    ),
    (
        "h100-xid13-app-error",
        &[
            ("driver/xid events/0000:9a:00.0 xid 13", 1),
            ("driver/xid events/0000:9a:00.0 xid 43", 1),
        ],
    ),
    (
        "h100-xid48-dbe",
        &[
            ("driver/nvml gpu 0000:3a:00.0/remapped rows", 1),
            ("driver/nvml gpu 0000:3a:00.0/uncorrected ecc", 1),
            ("driver/xid events/0000:3a:00.0 xid 48", 1),
            ("driver/xid events/0000:3a:00.0 xid 63", 1),
        ],
    ),
    (
        "hgx-a100-healthy",
        &[
            ("node/node/profile", 1),
            ("driver/gpu 0000:*/pci id", 8),
            ("driver/driver gpu 0000:*/vbios", 8),
            ("driver/nvml gpu 0000:*/vbios", 8),
            ("driver/nvml gpu 0000:*/inforom image", 8),
            ("driver/nvml gpu 0000:*/application clocks", 8),
            ("driver/nvml gpu 0000:*/max clocks", 8),
            ("driver/nvml gpu 0000:*/model", 8),
            ("driver/nvml gpu 0000:*/power limit", 8),
            ("driver/nvswitch 0000:*/pci id", 4),
            ("topology/gpu 0000:*/pcie max link", 8),
            ("topology/nvswitch 0000:*/pcie *", 8),
            ("topology/rdma nic 0000:*/pcie *", 16),
            ("rdma/hca mlx5_*/firmware", 8),
            ("rdma/hca mlx5_*/hca type", 8),
            ("rdma/port mlx5_*/1/rate", 8),
            ("nvlink/nvml gpu 0000:*/fabric", 8),
            ("nvlink/nvml gpu 0000:*/nvlinks", 8),
        ],
    ),
    (
        "no-gpu-on-pci",
        &[
            ("node/kernel modules/nvidia*", 5),
            ("node/node/profile", 1),
            ("driver/driver/module version", 1),
            ("driver/nvml/init", 1),
            ("driver/gpu 0000:*/-", 8),
            ("driver/nvswitch 0000:*/-", 4),
            ("topology/gpu 0000:*/-", 8),
            ("topology/nvswitch 0000:*/-", 4),
        ],
    ),
    (
        "h100-nvl-pcie-healthy",
        &[
            ("driver/gpu 0000:*/pci id", 8),
            ("driver/nvml gpu 0000:*/model", 8),
            ("driver/nvml gpu 0000:*/power limit", 8),
            ("driver/nvswitch 0000:*/-", 4),
            ("node/node/profile", 1),
            ("nvlink/nvml gpu 0000:*/fabric", 8),
            ("nvlink/nvml gpu 0000:*/nvlinks", 8),
            ("topology/nvswitch 0000:*/-", 4),
        ],
    ),
    (
        "h100-nvl-bridged-healthy",
        &[
            ("driver/gpu 0000:*/pci id", 8),
            ("driver/nvml gpu 0000:*/model", 8),
            ("driver/nvml gpu 0000:*/power limit", 8),
            ("driver/nvswitch 0000:*/-", 4),
            ("node/node/profile", 1),
            ("nvlink/nvml gpu 0000:*/fabric", 8),
            ("nvlink/nvml gpu 0000:*/nvlinks", 8),
            ("topology/nvswitch 0000:*/-", 4),
        ],
    ),
    (
        "h100-gpu-lost-after-handle",
        &[
            // One line for the cause: every reading NVML failed on, folded.
            ("driver/nvml gpu 0000:ba:00.0/-", 1),
            ("driver/xid events/0000:ba:00.0 xid 79", 1),
        ],
    ),
    (
        "h100-gpu-no-permission",
        &[
            ("driver/nvml gpu 0000:5d:00.0/-", 1),
            ("driver/nvml gpu index 3/-", 1),
            ("nvlink/nvml gpu 0000:5d:00.0/-", 1),
            ("nvlink/nvml gpu index 3/-", 1),
        ],
    ),
    (
        "h100-fabric-unhealthy",
        &[("nvlink/nvml gpu 0000:*/fabric", 8)],
    ),
    (
        "b200-nvlink-errors",
        &[
            ("driver/gpu 0000:*/pci id", 8),
            // No public Blackwell capture gives its firmware or clocks: not recorded.
            ("driver/nvml gpu 0000:*/vbios", 8),
            ("driver/nvml gpu 0000:*/inforom image", 8),
            ("driver/nvml gpu 0000:*/application clocks", 8),
            ("driver/nvml gpu 0000:*/max clocks", 8),
            ("driver/nvml gpu 0000:*/model", 8),
            ("driver/nvml gpu 0000:*/power limit", 8),
            ("driver/nvswitch 0000:*/-", 4),
            ("node/node/profile", 1),
            ("nvlink/nvml gpu 0000:*/fabric", 8),
            ("rdma/port mlx5_*/1/rate", 2),
            ("topology/nvswitch 0000:*/-", 4),
        ],
    ),
    // Verdicts over time (issue 16). The b200 node as b200-nvlink-errors is, plus its XIDs.
    (
        "b200-xid154-drain-reset",
        &[
            ("driver/gpu 0000:*/pci id", 8),
            // No public Blackwell capture gives its firmware or clocks: not recorded.
            ("driver/nvml gpu 0000:*/vbios", 8),
            ("driver/nvml gpu 0000:*/inforom image", 8),
            ("driver/nvml gpu 0000:*/application clocks", 8),
            ("driver/nvml gpu 0000:*/max clocks", 8),
            ("driver/nvml gpu 0000:*/model", 8),
            ("driver/nvml gpu 0000:*/power limit", 8),
            ("driver/nvswitch 0000:*/-", 4),
            ("driver/xid events/0000:2a:00.0 xid 149", 1),
            ("driver/xid events/0000:2a:00.0 xid 154", 1),
            ("node/node/profile", 1),
            ("nvlink/nvml gpu 0000:*/fabric", 8),
            ("rdma/port mlx5_*/1/rate", 2),
            ("topology/nvswitch 0000:*/-", 4),
        ],
    ),
    // The b200 node as a GB200 compute tray: GPUs renamed, no fabric manager, IMEX running
    // (services are judged, not compared as facts).
    (
        "gb200-tray-healthy",
        &[
            ("driver/gpu 0000:*/pci id", 8),
            // No public Blackwell capture gives its firmware or clocks: not recorded.
            ("driver/nvml gpu 0000:*/vbios", 8),
            ("driver/nvml gpu 0000:*/inforom image", 8),
            ("driver/nvml gpu 0000:*/application clocks", 8),
            ("driver/nvml gpu 0000:*/max clocks", 8),
            ("driver/nvml gpu 0000:*/model", 8),
            ("driver/nvml gpu 0000:*/power limit", 8),
            ("driver/nvswitch 0000:*/-", 4),
            ("node/node/profile", 1),
            ("nvlink/nvml gpu 0000:*/fabric", 8),
            ("rdma/port mlx5_*/1/rate", 2),
            ("topology/nvswitch 0000:*/-", 4),
        ],
    ),
    // Kernel-log AER and SXID reports and counter windows are judged, not compared as facts:
    // the verdict is the whole difference.
    ("h100-aer-surprise-down-gpu", &[]),
    // /dev/char links are judged, not compared as facts.
    ("h100-dev-char-links-missing", &[]),
    ("h100-sxid-fatal", &[]),
    ("h100-hca-errors-rising", &[]),
    ("h100-hca-old-errors", &[]),
    // Stopped fabric manager: the GPUs' fabric state is not completed.
    (
        "h100-fabric-manager-stopped",
        &[("nvlink/nvml gpu 0000:*/fabric", 8)],
    ),
    (
        "h100-operator-peermem-not-validated",
        &[("toolkit/gpu operator/validations", 1)],
    ),
    (
        "h100-xid79-reset-history",
        &[("driver/xid events/0000:2a:00.0 xid 79", 1)],
    ),
    // After the reset the GPU fell off the bus again: NVML lost it, its link is down.
    (
        "h100-xid79-after-reset",
        &[
            // One line for the cause: every reading NVML failed on, folded.
            ("driver/nvml gpu 0000:2a:00.0/-", 1),
            ("driver/xid events/0000:2a:00.0 xid 79", 1),
        ],
    ),
    (
        "h100-xid79-three-boots",
        &[
            // One line for the cause: every reading NVML failed on, folded.
            ("driver/nvml gpu 0000:2a:00.0/-", 1),
            ("driver/xid events/0000:2a:00.0 xid 79", 1),
        ],
    ),
    // GKE: no toolkit, no CDI, runc only; the plugin's socket renamed (the ids map to the same GPUs).
    (
        "gke-h100-healthy",
        &[
            ("toolkit/cdi spec var/run/cdi/nvidia.yaml/-", 1),
            ("toolkit/container runtime/cdi", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("toolkit/toolkit/*", 4),
            ("device-plugin/kubelet/plugin sockets", 1),
        ],
    ),
    // GKE as above with one GPU fewer allocatable.
    (
        "gke-h100-gpu-unhealthy",
        &[
            ("toolkit/cdi spec var/run/cdi/nvidia.yaml/-", 1),
            ("toolkit/container runtime/cdi", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("toolkit/toolkit/*", 4),
            ("device-plugin/kubelet/plugin sockets", 1),
            ("device-plugin/pod-resources allocatable/nvidia.com/gpu", 1),
        ],
    ),
    // EKS nodeadm: kubeReserved cpu and a reservedMemory that adds up to nodeadm's kubeReserved.
    (
        "eks-h100-healthy",
        &[
            ("topology/kubelet config/reserved cpus", 1),
            ("topology/kubelet config/reserved memory", 1),
        ],
    ),
    // EKS with the kubeadm guide's reservedMemory: the same figure as the healthy node, no longer adding up.
    (
        "eks-h100-reserved-memory-wrong",
        &[("topology/kubelet config/reserved cpus", 1)],
    ),
    // RKE2: its generated containerd config (nvidia not the default, CDI off).
    (
        "rke2-h100-healthy",
        &[
            ("toolkit/container runtime/cdi", 1),
            ("toolkit/container runtime/default runtime", 1),
        ],
    ),
    // RKE2 without the nvidia handler.
    (
        "rke2-h100-no-nvidia-runtime",
        &[
            ("toolkit/container runtime/cdi", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
        ],
    ),
    // OpenShift: CRI-O, the operator's toolkit.
    (
        "openshift-h100-healthy",
        &[
            ("toolkit/container runtime/config version", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/kind", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("toolkit/toolkit/binaries", 1),
        ],
    ),
    // OpenShift without the CDI spec.
    (
        "openshift-h100-no-cdi-spec",
        &[
            ("toolkit/cdi spec var/run/cdi/nvidia.yaml/-", 1),
            ("toolkit/container runtime/config version", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/kind", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("toolkit/toolkit/binaries", 1),
        ],
    ),
    // AKS: AgentBaker's GPU containerd config (its runtime named nvidia-container-runtime, an
    // untrusted one beside), its kubelet config without the memory manager.
    (
        "aks-h100-healthy",
        &[
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("topology/kubelet config/memory manager policy", 1),
            ("topology/kubelet config/reserved memory", 1),
        ],
    ),
    // AKS rendered as a node without GPUs: runc only, no CDI spec.
    (
        "aks-h100-not-gpu-pool",
        &[
            ("toolkit/cdi spec var/run/cdi/nvidia.yaml/-", 1),
            ("toolkit/container runtime/default runtime", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("topology/kubelet config/memory manager policy", 1),
            ("topology/kubelet config/reserved memory", 1),
        ],
    ),
    // The GPU Operator's driver container seen from the host: its toolkit, runtimes, markers.
    (
        "gpu-operator-h100-healthy",
        &[
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("toolkit/gpu operator/validations", 1),
            ("toolkit/toolkit/binaries", 1),
        ],
    ),
    // As above with another driver's library in the driver root: NVML refuses to start.
    (
        "gpu-operator-h100-library-mismatch",
        &[
            ("node/*", 1),
            ("driver/driver/nvml libraries", 1),
            ("driver/nvml/*", 1),
            ("toolkit/container runtime/nvidia runtimes", 1),
            ("toolkit/gpu operator/validations", 1),
            ("toolkit/toolkit/binaries", 1),
        ],
    ),
    // The RoCE node with rail mlx5_3 at 200 Gb/s.
    (
        "h100-roce-rail-downtrained",
        &[
            ("node/node/profile", 1),
            ("rdma/port mlx5_*/1/gid types", 8),
            ("rdma/port mlx5_*/1/link layer", 8),
            ("rdma/port mlx5_*/1/mtu", 8),
            ("rdma/port mlx5_*/1/netdev", 8),
            ("rdma/port mlx5_3/1/rate", 1),
        ],
    ),
];

fn manifest(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join(".gpudoctor/manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_failure_fixture_names_its_injected_difference_and_nothing_else() {
    let healthy = fixture("hgx-h100-healthy");
    let table: BTreeMap<&str, &[(&str, usize)]> = INJECTED.iter().copied().collect();
    let mut seen = 0;
    for dir in common::fixtures() {
        let name = common::name_of(&dir);
        if name == "hgx-h100-healthy" {
            continue;
        }
        let expected = table
            .get(name.as_str())
            .unwrap_or_else(|| panic!("{name}: add its injected difference to INJECTED"));
        seen += 1;
        let d = run(&healthy, &dir);

        // Verdicts: exactly the codes its manifest expects to fire (the healthy node has none).
        let codes: Vec<String> = manifest(&dir)["expect"]["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let mut verdicts: Vec<String> = d
            .differences
            .iter()
            .filter(|x| x.counted && x.kind == Kind::Verdict)
            .map(|x| x.subject.clone())
            .collect();
        verdicts.sort();
        let mut codes = codes;
        codes.sort();
        assert_eq!(verdicts, codes, "{name}: changed verdicts");

        // Facts: every counted one is explained by the edit, and each pattern matches as often
        // as the edit says.
        let keys = fact_keys(&d);
        for key in &keys {
            assert!(
                expected.iter().any(|(p, n)| *n > 0 && glob(p, key)),
                "{name}: unrelated difference {key}\nall: {keys:#?}"
            );
        }
        for (pattern, n) in expected.iter() {
            let matched = keys.iter().filter(|k| glob(pattern, k)).count();
            assert_eq!(
                matched, *n,
                "{name}: {pattern} matched {matched}\nall: {keys:#?}"
            );
        }
        // Exit 1 exactly when something counted differs: a changed verdict or a counted fact
        // (a passing fixture such as MIG-healthy still differs from the healthy node in facts).
        let differs = !verdicts.is_empty() || !keys.is_empty();
        assert_eq!(
            d.exit_code,
            if differs { 1 } else { 0 },
            "{name}: exit code does not follow what counted differs\nverdicts: {verdicts:?}\nfacts: {keys:#?}"
        );
    }
    assert_eq!(
        seen,
        INJECTED.len(),
        "INJECTED names a fixture that is gone"
    );
}

#[test]
fn the_done_when_example_prints_the_link_change_and_the_verdict_only() {
    let out = common::gpudoctor(&["diff", "fixtures/hgx-h100-healthy", "fixtures/h100-pcie-x8"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    common::assert_snapshot("diff-h100-pcie-x8.txt", &text);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert_eq!(
        lines,
        [
            "verdict driver.pcie_link: pass → fail — GPU 3 (0000:5d:00.0) PCIe link at x8, capable of x16",
            "gpu 0000:5d:00.0 pcie link width: x16 → x8",
        ]
    );
    let md = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        "fixtures/h100-pcie-x8",
        "--format",
        "markdown",
    ]);
    common::assert_snapshot(
        "diff-h100-pcie-x8.md",
        &String::from_utf8(md.stdout).unwrap(),
    );
}

#[test]
fn a_node_against_itself_its_copy_its_archive_and_its_report_is_empty() {
    let scratch = common::tempdir().unwrap();
    common::parallel::for_each(&common::fixtures(), |dir| {
        let name = common::name_of(dir);
        let d = run(dir, dir);
        assert!(d.differences.is_empty(), "{name}: {:?}", d.differences);
        assert_eq!(d.exit_code, 0);
    });
    // A copy elsewhere (what `record --root <capture>` re-recording would give once it exists
    // on main: issue 14), and the same capture packed as `record --out x.tar.gz` packs it.
    for name in [
        "hgx-h100-healthy",
        "h100-sriov-vf-wrong-socket",
        "h100-nccl-ib-system-error",
    ] {
        let copy = scratch.path().join(name);
        common::link_tree(&fixture(name), &copy); // only read
        let d = run(&fixture(name), &copy);
        assert!(d.differences.is_empty(), "{name} copy: {:?}", d.differences);

        let packed = scratch.path().join(format!("{name}.tar.gz"));
        let file = std::fs::File::create(&packed).unwrap();
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ));
        tar.follow_symlinks(false);
        // An archive holds a complete capture: an overlay is packed composed.
        tar.append_dir_all(".", common::complete(&fixture(name)))
            .unwrap();
        tar.into_inner().unwrap().finish().unwrap();
        let d = run(&fixture(name), &packed);
        assert!(
            d.differences.is_empty(),
            "{name} packed: {:?}",
            d.differences
        );
        assert_eq!(d.b.kind, diff::InputKind::PackedCapture);

        // Its own report, saved with facts: nothing differs; without facts: verdicts only.
        for with_facts in [true, false] {
            let report = scratch.path().join(format!("{name}-{with_facts}.json"));
            let mut args = vec!["check", "--root", fixture_str(name), "--format", "json"];
            if with_facts {
                args.push("--with-facts");
            }
            let out = common::gpudoctor(&args);
            std::fs::write(&report, &out.stdout).unwrap();
            let d = run(&fixture(name), &report);
            assert!(
                d.differences.is_empty(),
                "{name} report: {:?}",
                d.differences
            );
            assert_eq!(d.b.kind, diff::InputKind::Report);
            assert_eq!(d.b.has_facts, with_facts);
            assert_eq!(d.b.note.is_some(), !with_facts);
        }
    }
}

fn fixture_str(name: &str) -> &'static str {
    Box::leak(format!("fixtures/{name}").into_boxed_str())
}

#[test]
fn saved_reports_with_facts_compare_as_their_captures_do() {
    let scratch = common::tempdir().unwrap();
    let save = |name: &str| {
        let path = scratch.path().join(format!("{name}.json"));
        let out = common::gpudoctor(&[
            "check",
            "--root",
            fixture_str(name),
            "--save-report",
            path.to_str().unwrap(),
            "--with-facts",
        ]);
        assert!(path.is_file(), "{}", String::from_utf8_lossy(&out.stderr));
        path
    };
    let (a, b) = (save("hgx-h100-healthy"), save("h100-ib-port-polling"));
    let from_reports = run(&a, &b);
    let from_captures = run(
        &fixture("hgx-h100-healthy"),
        &fixture("h100-ib-port-polling"),
    );
    assert_eq!(from_reports.differences, from_captures.differences);

    // Without facts the reports still give verdicts and the port rates they measured.
    let bare = |name: &str| {
        let path = scratch.path().join(format!("{name}-bare.json"));
        let out = common::gpudoctor(&["check", "--root", fixture_str(name), "--format", "json"]);
        std::fs::write(&path, out.stdout).unwrap();
        path
    };
    let d = run(&bare("hgx-h100-healthy"), &bare("h100-ib-port-polling"));
    let subjects: Vec<&str> = d.differences.iter().map(|x| x.subject.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "rdma.port_state",
            "rdma_port_rate_bytes_per_second{device=mlx5_3,link_layer=InfiniBand,port=1,rail=true}"
        ],
        "{:?}",
        d.differences
    );
    let rate = &d.differences[1];
    assert_eq!((rate.a.as_str(), rate.b.as_str()), ("400 Gb/s", "10 Gb/s"));
}

#[test]
fn measurements_differ_beyond_the_tolerance() {
    let d = run(
        &fixture("h100-nccl-healthy"),
        &fixture("h100-nccl-low-bandwidth"),
    );
    let m: Vec<_> = d
        .differences
        .iter()
        .filter(|x| x.kind == Kind::Measurement)
        .collect();
    // The sweep's peak and its average (issue 15: both always figures); the size at the peak
    // (8 GiB on both) is the same.
    assert_eq!(m.len(), 2, "{:?}", d.differences);
    let peak = m
        .iter()
        .find(|x| x.subject.starts_with("nccl_busbw_peak_bytes_per_second"))
        .unwrap();
    assert_eq!(
        (peak.a.as_str(), peak.b.as_str(), peak.detail.as_deref()),
        ("482.6 GB/s", "401.5 GB/s", Some("-16.8%"))
    );
    assert!(
        m.iter()
            .any(|x| x.subject.starts_with("nccl_busbw_average_bytes_per_second")),
        "{m:?}"
    );
}

#[test]
fn keep_going_compares_the_layers_after_a_failure() {
    let options = DiffOptions {
        keep_going: true,
        ..DiffOptions::default()
    };
    let a = diff::open(&fixture("hgx-h100-healthy"), &options).unwrap();
    let b = diff::open(&fixture("h100-pcie-x8"), &options).unwrap();
    let d = diff::compare::compare(&a, &b);
    let verdicts: Vec<&str> = d
        .differences
        .iter()
        .filter(|x| x.kind == Kind::Verdict)
        .map(|x| x.subject.as_str())
        .collect();
    // The topology layer judges the same link from sysfs once it runs.
    assert_eq!(verdicts, ["driver.pcie_link", "topology.pcie_link"]);
    assert!(d.b.blocked_by.is_none());
}

#[test]
fn identifiers_do_not_count_and_all_lists_them() {
    let scratch = common::tempdir().unwrap();
    let other = scratch.path().join("other-node");
    common::copy_tree(&fixture("hgx-h100-healthy"), &other);
    // Another host, with control characters a capture could carry into a terminal.
    std::fs::write(
        other.join("proc/sys/kernel/hostname"),
        "gpu-node-7\x1b]0;pwned\x07\n",
    )
    .unwrap();
    std::fs::write(other.join("etc/hostname"), "gpu-node-7\n").unwrap();
    let other = other.to_str().unwrap();
    let out = common::gpudoctor(&["diff", "fixtures/hgx-h100-healthy", other]);
    assert_eq!(out.status.code(), Some(0), "a host name does not count");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
    assert!(text.contains("gpu-node-7\\x1b]0;pwned\\x07"), "{text}");
    assert!(text.contains("no difference that matters"), "{text}");
    let all = common::gpudoctor(&["diff", "fixtures/hgx-h100-healthy", other, "--all"]);
    let text = String::from_utf8(all.stdout).unwrap();
    assert!(
        text.contains("(not counted) node hostname: hgx-h100-01 → gpu-node-7\\x1b]0;pwned\\x07"),
        "{text}"
    );
    // The stale CDI spec's UUID is an identifier, listed with --all.
    let out = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        "fixtures/h100-cdi-spec-stale",
        "--all",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&Value> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "informational")
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0]["b"].as_str().unwrap().contains("GPU-27b04e8b"));
}

#[test]
fn inputs_that_cannot_be_compared_are_usage_errors() {
    let scratch = common::tempdir().unwrap();
    let garbage = scratch.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let report = scratch.path().join("report.json");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--format",
        "json",
    ]);
    std::fs::write(&report, out.stdout).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["diff", "fixtures/hgx-h100-healthy", "no/such/dir"],
            "no/such/dir",
        ),
        (
            vec![
                "diff",
                "fixtures/hgx-h100-healthy",
                garbage.to_str().unwrap(),
            ],
            "not a gpudoctor JSON report",
        ),
        (
            vec![
                "diff",
                "fixtures/hgx-h100-healthy",
                report.to_str().unwrap(),
                "--keep-going",
            ],
            "cannot apply",
        ),
        (
            vec![
                "diff",
                "fixtures/hgx-h100-healthy",
                "fixtures/hgx-a100-healthy",
                "--profile",
                "no-such-profile",
            ],
            "--profile",
        ),
    ];
    for (args, says) in cases {
        let out = common::gpudoctor(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // --with-facts goes into JSON only.
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--with-facts",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn json_is_the_same_diff() {
    let out = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        "fixtures/h100-ib-port-hdr",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["counted"], 2);
    assert_eq!(v["a"]["kind"], "capture");
    let d = &v["differences"];
    assert_eq!(d[0]["kind"], "verdict");
    assert_eq!(d[0]["subject"], "rdma.port_rate");
    assert_eq!(d[1]["subject"], "port mlx5_5/1");
    assert_eq!(d[1]["attribute"], "rate");
    assert_eq!(d[1]["b"], "200 Gb/sec (4X HDR)");
}

#[test]
fn redacted_captures_compare_by_their_placeholders() {
    // Re-record two fixtures (`record --root <capture>` carries their probe answers over and
    // redacts them again, tests/rerecord.rs): host names,
    // GUIDs, MACs and serials are replaced by placeholders in each capture, in the same order,
    // so two nodes built alike compare equal on them and only the injected port rate differs.
    let scratch = common::tempdir().unwrap();
    let record = |fixture: &str, out: &str| {
        let out = scratch.path().join(out);
        let run = common::gpudoctor(&[
            "record",
            "--root",
            fixture_str(fixture),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        out
    };
    let a = record("hgx-h100-healthy", "a.tar.gz");
    let b = record("h100-ib-port-hdr", "b.tar.gz");
    let d = run(&a, &b);
    let keys: Vec<String> = d
        .differences
        .iter()
        .map(|x| format!("{}/{}", x.subject, x.attribute.as_deref().unwrap_or("-")))
        .collect();
    // Both are re-recorded captures: their NVML answers come along, the hgx-h100 profile
    // applies on both sides, and the one injected fact changes the one verdict that reads it.
    let mut keys = keys;
    keys.sort();
    assert_eq!(
        keys,
        ["port mlx5_5/1/rate", "rdma.port_rate/-"],
        "{:#?}",
        d.differences
    );
    assert_ne!(d.a.hostname.as_deref(), Some("hgx-h100-01"), "redacted");
    assert_eq!(d.a.hostname, d.b.hostname, "same placeholder on both");
}

#[test]
fn a_report_with_facts_validates_against_the_published_schema() {
    let schema: Value = serde_json::from_str(&gpudoctor::report::json_schema()).unwrap();
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    for name in [
        "hgx-h100-healthy",
        "h100-driver-not-loaded",
        "h100-nccl-healthy",
    ] {
        let out = common::gpudoctor(&[
            "check",
            "--root",
            fixture_str(name),
            "--format",
            "json",
            "--with-facts",
            "--keep-going",
        ]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(report["facts"]["sections"]["driver"].is_object(), "{name}");
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
}

#[test]
fn a_damaged_capture_is_compared_not_crashed_on() {
    // Files the facts come from, damaged as a broken node or a mangled attachment would have
    // them: binary garbage, JSON cut short, a FIFO where a file should be, a file gone.
    let scratch = common::tempdir().unwrap();
    let bad = scratch.path().join("bad");
    common::copy_tree(&fixture("hgx-h100-healthy"), &bad);
    std::fs::write(
        bad.join("proc/driver/nvidia/gpus/0000:18:00.0/information"),
        b"\xff\xfe\x00Video BIOS:\x1b[31m\n",
    )
    .unwrap();
    std::fs::write(bad.join(".gpudoctor/nvml.json"), "{\"devices\": [").unwrap();
    std::fs::write(bad.join("proc/modules"), b"\x00\x01\x02 garbage\n").unwrap();
    std::fs::remove_file(bad.join("proc/cmdline")).unwrap();
    let fifo = std::ffi::CString::new(bad.join("proc/cmdline").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::remove_file(bad.join("var/lib/kubelet/config.yaml")).unwrap();

    let started = std::time::Instant::now();
    let out = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        bad.to_str().unwrap(),
        "--all",
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains('\x1b'), "{text}");
    for needle in [
        "nvml init: ok → unreadable",
        "kernel command line (file): absent → unreadable",
        "kernel modules (list): absent → unreadable",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
}
