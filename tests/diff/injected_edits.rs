//! What each failure fixture's edit changed (its manifest's `made.edit`), as the facts `diff` must
//! show against the healthy node: the table failure_fixtures.rs checks.

/// What each fixture's edit changed (its manifest's `made.edit`), as the facts it must show:
/// `(pattern, how many facts match it)`. Every counted fact must match one pattern.
pub(super) const INJECTED: &[(&str, &[(&str, usize)])] = &[
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
