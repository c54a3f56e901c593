//! The built-in profiles: one constructor per platform, every number with its public source
//! (reference/profiles.md). A table, apart from the code that selects, loads and lists profiles
//! (the parent module), so adding a platform touches this file only.

use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

/// DGX/HGX A100 (reference/profiles.md §3), 40 GB or 80 GB.
fn hgx_a100(name: &str, gpu_names: &[&str], memory: &str) -> Profile {
    Profile {
        name: name.to_string(),
        description: format!("DGX/HGX A100 SXM4 {memory}: 8 GPUs, NVSwitch, 8 x HDR InfiniBand"),
        // pci.ids https://pci-ids.ucw.cz/read/PC/10de; `NVIDIA/nccl#1505` XML (device="0x20b0");
        // model strings from nccl-tests device lines (`NVIDIA/nccl-tests#100`, `#244`) and
        // `stas00/ml-engineering` debug notes.
        gpu_names: strings(gpu_names),
        gpu_names_exclude: Vec::new(),
        // 8 × A100 SXM4: pci.ids; `NVIDIA/nccl#1505` (§3 profile suggestion: 8 GPUs).
        gpu_count: Some(8),
        // `16.0 GT/s PCIe` x16: facebookresearch/gcm
        // gcm/tests/data/health_checks/DGX_A100.json.
        gpu_pcie_gen: Some(4),
        gpu_pcie_width: Some(16),
        // 12 links/GPU, 2 to each of 6 switches, `NV12`: `NVIDIA/nccl#1505`; gpu-health.md §6.
        nvlinks_per_gpu: Some(12),
        // 6 × `10de:1af1`, class 0x0680: gcm DGX_A100.json manifest (0000:c4…c9:00.0).
        nvswitch: Some(true),
        nvswitch_pci_functions: Some(6),
        // 8 × ConnectX-6 (`15b3:101b`) IB HDR, `200 Gb/sec (4X HDR)`: gcm DGX_A100.json manifest.
        rdma_ports: Some(8),
        rdma_rate_gbps: Some(200),
        rdma_link_layer: Some("InfiniBand".to_string()),
        rdma_devices: Vec::new(),
        // GPUDirect RDMA: two GPUs and two compute HCAs per PCIe switch, GPU↔NIC `PXB`
        // (topology.md §5, §7; `NVIDIA/nccl#1505`).
        gpudirect_rdma: Some(true),
        // SR-IOV VFs are a deployment choice (SriovNetworkNodePolicy), not the platform's.
        sriov_vfs: None,
        vbios_version: None,
        // Expected 235: superbench baseline (`microsoft/superbench-results` v0.4.0; NCCL
        // maintainers ~230, `NVIDIA/nccl-tests#149`); fail < 228: AzNHC conf/nd96asr_v4.conf
        // (`Azure/azurehpc-health-checks`). §3 profile suggestion, §11.
        nccl_busbw_warn_gbps: Some(235.0),
        nccl_busbw_fail_gbps: Some(228.0),
        // NVLS is not stated for A100 in the reference; no expectation.
        nccl_nvls: None,
        nccl_ring_busbw_warn_gbps: None,
        nccl_ring_busbw_fail_gbps: None,
        // "we measure 192GB/s AllReduce BusBW" across nodes with 8 × HDR 200 Gb/s
        // (`NVIDIA/nccl#812`, profiles.md §3); fail at 0.9 × that (nccl.md §12, derived).
        nccl_multinode_busbw_warn_gbps: Some(192.0),
        nccl_multinode_busbw_fail_gbps: Some(172.8),
        // AzNHC conf/nd96asr_v4.conf (ND A100 v4, an HGX A100): H2D/D2H fail < 21 GB/s (its
        // README says 23), P2P D2D < 235 (NDm: 238), GDR ib_write_bw < 180 Gb/s (raised from
        // 175, Azure/azurehpc-health-checks PR #73). reference/profiles.md §7.
        host_copy_fail_gbps: Some(21.0),
        p2p_copy_fail_gbps: Some(235.0),
        gpudirect_fail_gbits: Some(180.0),
        provisional: false,
        sources: strings(&[
            "pci.ids https://pci-ids.ucw.cz/read/PC/10de",
            "NVIDIA/nccl#1505 (topology, NV12)",
            "NVIDIA/nccl-tests#100, #244, #149",
            "facebookresearch/gcm gcm/tests/data/health_checks/DGX_A100.json",
            "Azure/azurehpc-health-checks conf/nd96asr_v4.conf (fail < 228; H2D < 21, P2P < 235, GDR < 180 Gb/s)",
            "NVIDIA/nccl#812 (multi-node 192 GB/s busbw, 8 x HDR)",
            "microsoft/superbench-results v0.4.0 baseline (235)",
        ]),
    }
}

/// The built-in profiles, in selection order.
pub fn builtins() -> Vec<Profile> {
    vec![
        hgx_a100("hgx-a100-40gb", &["NVIDIA A100-SXM4-40GB"], "40 GB"),
        // Some HGX boards report `NVIDIA A100-SXM-80GB` (reference/profiles.md §3).
        hgx_a100(
            "hgx-a100-80gb",
            &["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM-80GB"],
            "80 GB",
        ),
        hgx_h100(),
        hgx_h100_roce(),
        Profile {
            name: "hgx-h200".to_string(),
            description: "HGX/DGX H200 SXM 141 GB: 8 GPUs, NVSwitch, 8 x NDR InfiniBand"
                .to_string(),
            // `10de:2335`, `NVIDIA H200`; the PCIe card is `NVIDIA H200 NVL` (`10de:233b`) and
            // Grace Hopper is `GH200`: neither is this platform. pci.ids; gpu-health.md §2;
            // `leptonai/gpud` PR #1206 (GH200 mistaken for H200).
            gpu_names: strings(&["NVIDIA H200"]),
            gpu_names_exclude: strings(&["H200 NVL", "GH200"]),
            // 8 × H200 SXM: MLCommons inference_results_v4.1
            // closed/Lenovo/results/H200_SXM_141GBx8_TRT/README.md.
            gpu_count: Some(8),
            // PCIe Gen5 x16, "18x 4th Gen NVLink, 900GB/s": same MLCommons README.
            gpu_pcie_gen: Some(5),
            gpu_pcie_width: Some(16),
            nvlinks_per_gpu: Some(18),
            // Same NVLink/NIC expectations as H100 (§5 profile suggestion). The reference gives
            // no NVSwitch PCI function count for H200: not counted.
            nvswitch: Some(true),
            nvswitch_pci_functions: None,
            // 8 × 400 Gb/s NDR compute: AzNHC conf/nd96isr_h200_v5.conf.
            rdma_ports: Some(8),
            rdma_rate_gbps: Some(400),
            rdma_link_layer: Some("InfiniBand".to_string()),
            rdma_devices: Vec::new(),
            // Same GPU/NIC pairing as H100 (§5 profile suggestion; topology.md §5).
            gpudirect_rdma: Some(true),
            // SR-IOV VFs are a deployment choice (SriovNetworkNodePolicy), not the platform's.
            sriov_vfs: None,
            vbios_version: None,
            // fail < 431: AzNHC conf/nd96isr_h200_v5.conf (16 GiB; README says 480); warn < 460:
            // H100's AzNHC floor. §5 profile suggestion, §11.
            nccl_busbw_warn_gbps: Some(460.0),
            nccl_busbw_fail_gbps: Some(431.0),
            // Same NVLink 4 as H100, so H100's NVLS and ring figures carry over (derived, §11).
            nccl_nvls: Some(true),
            nccl_ring_busbw_warn_gbps: Some(370.0),
            nccl_ring_busbw_fail_gbps: Some(333.0),
            // Multi-node: no published figure; derived from the 8 NDR ports (profiles.md §4:
            // 8 × 46–49 ≈ 370–390 GB/s) in checks/nccl.rs `thresholds`.
            nccl_multinode_busbw_warn_gbps: None,
            nccl_multinode_busbw_fail_gbps: None,
            // AzNHC conf/nd96isr_h200_v5.conf: H2D/D2H fail < 48 GB/s (README 55), P2P D2D
            // < 335 GB/s, GDR ib_write_bw < 360 Gb/s (README 400). profiles.md §5, §8.
            host_copy_fail_gbps: Some(48.0),
            p2p_copy_fail_gbps: Some(335.0),
            gpudirect_fail_gbits: Some(360.0),
            provisional: false,
            sources: strings(&[
                "pci.ids https://pci-ids.ucw.cz/read/PC/10de",
                "MLCommons inference_results_v4.1 closed/Lenovo/results/H200_SXM_141GBx8_TRT/README.md",
                "Azure/azurehpc-health-checks conf/nd96isr_h200_v5.conf (IB 400, fail < 431; H2D < 48, P2P < 335, GDR < 360 Gb/s)",
                "leptonai/gpud PR #1206 (GH200 is not H200)",
                "ring thresholds carried over from hgx-h100 (derived, same NVLink 4)",
            ]),
        },
        Profile {
            name: "hgx-b200".to_string(),
            description: "DGX/HGX B200 (provisional): 8 GPUs, NVLink 5 fabric, 8 x 400 Gb/s"
                .to_string(),
            // `10de:2901`, `NVIDIA B200`: pci.ids; GB200 (Grace Blackwell) is not this platform,
            // by analogy with GH200/H200 (`leptonai/gpud` PR #1206).
            gpu_names: strings(&["NVIDIA B200"]),
            gpu_names_exclude: strings(&["GB200"]),
            // 8 × B200: DGX B200 datasheet https://www.nvidia.com/en-us/data-center/dgx-b200/
            // and user guide https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html
            gpu_count: Some(8),
            // GPU PCIe generation has no primary public source yet (§11): not checked.
            gpu_pcie_gen: None,
            gpu_pcie_width: None,
            // Fifth-generation NVLink, 18 links/GPU: gpu-health.md §6.
            nvlinks_per_gpu: Some(18),
            // NVLink switches managed through the NVLink subnet manager: fabric state expected,
            // but no class 0x0680 PCI functions. Fabric Manager user guide; sysfs.md §2.
            nvswitch: Some(true),
            nvswitch_pci_functions: Some(0),
            // 8 × single-port ConnectX-7 VPI up to 400 Gb/s IB or Ethernet: DGX B200 datasheet;
            // gpud threshold_default.go (>= 8 ports at >= 400 for "b200"). Link layer is either.
            rdma_ports: Some(8),
            rdma_rate_gbps: Some(400),
            rdma_link_layer: None,
            rdma_devices: Vec::new(),
            // One ConnectX-7 per GPU for GPUDirect RDMA: DGX B200 datasheet (8 × ConnectX-7);
            // topology.md §5 rule for 8-GPU/8-NIC HGX-class nodes.
            gpudirect_rdma: Some(true),
            // SR-IOV VFs are a deployment choice (SriovNetworkNodePolicy), not the platform's.
            sriov_vfs: None,
            vbios_version: None,
            // Only user-reported busbw (830+, `NVIDIA/nccl#1807`): thresholds disabled until a
            // maintainer figure exists (§6 profile suggestion).
            nccl_busbw_warn_gbps: None,
            nccl_busbw_fail_gbps: None,
            nccl_nvls: None,
            nccl_ring_busbw_warn_gbps: None,
            nccl_ring_busbw_fail_gbps: None,
            nccl_multinode_busbw_warn_gbps: None,
            nccl_multinode_busbw_fail_gbps: None,
            // Provisional: no copy or GPUDirect figure until one is published (§6).
            host_copy_fail_gbps: None,
            p2p_copy_fail_gbps: None,
            gpudirect_fail_gbits: None,
            provisional: true,
            sources: strings(&[
                "pci.ids https://pci-ids.ucw.cz/read/PC/10de",
                "DGX B200 datasheet https://www.nvidia.com/en-us/data-center/dgx-b200/",
                "DGX B200 user guide https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
                "NVIDIA Fabric Manager user guide (NVLink switches, no 0x0680 functions)",
                "leptonai/gpud threshold_default.go (8 ports >= 400)",
                "NVIDIA/nccl#1807 (user-reported 830+, not used)",
            ]),
        },
        Profile {
            name: "pcie-h100-nvl".to_string(),
            description: "H100 NVL PCIe cards (provisional): no NVSwitch, NVLink bridges optional"
                .to_string(),
            // `10de:2321`, `NVIDIA H100 NVL`: `nvidia-smi --query-gpu=name,pci.device_id` prints
            // `NVIDIA H100 NVL, 0x232110DE` (akash-network/provider-configs#91); pci.ids lists
            // 10de:2321 (GH100). Not the SXM part (`NVIDIA H100 80GB HBM3`, hgx-h100).
            gpu_names: strings(&["NVIDIA H100 NVL"]),
            gpu_names_exclude: Vec::new(),
            // PCIe servers hold 1 to 8 cards (Azure NC H100 v5: 1 or 2): no count expected.
            gpu_count: None,
            // No primary public source for the slot generation in the reference: not checked.
            gpu_pcie_gen: None,
            gpu_pcie_width: None,
            // Bridges are optional: with none every link is down (no NVLink, skip); with
            // bridges 12 of 18 links are active per GPU and 6 unused by design
            // (Azure/azurehpc-health-checks#162; `NV12`, NVIDIA/nccl-tests#178). Judged per
            // bridge by the nvlink layer, so no single count is expected here.
            nvlinks_per_gpu: None,
            // PCIe cards: no NVSwitch, no fabric manager; the fabric query answers state
            // NOT_SUPPORTED (leptonai/gpud PR #1147, #1140; gpu-health.md §7).
            nvswitch: Some(false),
            nvswitch_pci_functions: Some(0),
            // NICs are the server's choice, not the card's.
            rdma_ports: None,
            rdma_rate_gbps: None,
            rdma_link_layer: None,
            rdma_devices: Vec::new(),
            gpudirect_rdma: None,
            // SR-IOV VFs are a deployment choice (SriovNetworkNodePolicy), not the platform's.
            sriov_vfs: None,
            vbios_version: None,
            // No published NCCL figure for bridged H100 NVL pairs in the reference.
            nccl_busbw_warn_gbps: None,
            nccl_busbw_fail_gbps: None,
            nccl_nvls: None,
            nccl_ring_busbw_warn_gbps: None,
            nccl_ring_busbw_fail_gbps: None,
            nccl_multinode_busbw_warn_gbps: None,
            nccl_multinode_busbw_fail_gbps: None,
            // No published copy or GPUDirect figure for H100 NVL cards in the reference.
            host_copy_fail_gbps: None,
            p2p_copy_fail_gbps: None,
            gpudirect_fail_gbits: None,
            provisional: true,
            sources: strings(&[
                "akash-network/provider-configs#91 (NVIDIA H100 NVL, 0x232110DE)",
                "pci.ids https://pci-ids.ucw.cz/read/PC/10de (10de:2321)",
                "Azure/azurehpc-health-checks#162 (6 of 18 links inactive by design)",
                "NVIDIA/nccl-tests#178 (bridged pairs, NV12)",
                "leptonai/gpud PR #1147, #1140 (fabric NOT_SUPPORTED on PCIe SKUs)",
            ]),
        },
        Profile {
            name: GENERIC_PCIE_GPU.to_string(),
            description:
                "one PCIe GPU, any model: no NVLink peers, no NVSwitch, no RDMA expectation"
                    .to_string(),
            // Any model: chosen when exactly one GPU is present and no platform profile matches.
            gpu_names: Vec::new(),
            gpu_names_exclude: Vec::new(),
            // Definition of this profile, not a measured value.
            gpu_count: Some(1),
            // PCIe generation and width vary by card and slot: consistency checks only.
            gpu_pcie_gen: None,
            gpu_pcie_width: None,
            // A lone GPU has no NVLink peer, and no NVSwitch fabric to join.
            nvlinks_per_gpu: Some(0),
            nvswitch: Some(false),
            nvswitch_pci_functions: None,
            rdma_ports: None,
            rdma_rate_gbps: None,
            rdma_link_layer: None,
            rdma_devices: Vec::new(),
            // A lone PCIe GPU: no GPUDirect RDMA expectation.
            gpudirect_rdma: None,
            // SR-IOV VFs are a deployment choice (SriovNetworkNodePolicy), not the platform's.
            sriov_vfs: None,
            vbios_version: None,
            nccl_busbw_warn_gbps: None,
            nccl_busbw_fail_gbps: None,
            nccl_nvls: None,
            nccl_ring_busbw_warn_gbps: None,
            nccl_ring_busbw_fail_gbps: None,
            nccl_multinode_busbw_warn_gbps: None,
            nccl_multinode_busbw_fail_gbps: None,
            // Any model, any slot: consistency checks only.
            host_copy_fail_gbps: None,
            p2p_copy_fail_gbps: None,
            gpudirect_fail_gbits: None,
            provisional: false,
            sources: strings(&["definition (one GPU, no peers); no measured values"]),
        },
    ]
}

/// DGX/HGX H100 SXM5 with an InfiniBand compute fabric (reference/profiles.md §3).
fn hgx_h100() -> Profile {
    Profile {
        name: "hgx-h100".to_string(),
        description: "DGX/HGX H100 SXM5 80 GB: 8 GPUs, NVSwitch, 8 x NDR InfiniBand".to_string(),
        // `10de:2330`, `NVIDIA H100 80GB HBM3`: pci.ids; nccl-tests logs
        // (`NVIDIA/nccl-tests#252`, `#294`).
        gpu_names: strings(&["NVIDIA H100 80GB HBM3"]),
        gpu_names_exclude: Vec::new(),
        // 8 × H100 SXM5: pci.ids; `NVIDIA/nccl-tests#252`, `#294`.
        gpu_count: Some(8),
        // Gen5 x16 (`32.0 GT/s PCIe`): MLCommons inference_results_v3.1
        // closed/NVIDIA/documentation/start_from_device/dgx-h100.md.
        gpu_pcie_gen: Some(5),
        gpu_pcie_width: Some(16),
        // 18 links/GPU, `NV18`: gpu-health.md §6; `NVIDIA/nccl#1264`.
        nvlinks_per_gpu: Some(18),
        // 4 × `10de:22a3`, class 0x0680: pci.ids; DGX H100 user guide
        // https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html
        nvswitch: Some(true),
        nvswitch_pci_functions: Some(4),
        // 8 × ConnectX-7 NDR 400 Gb/s, `400 Gb/sec (4X NDR)`: MLCommons dgx-h100.md;
        // AzNHC conf/nd96isr_h100_v5.conf (`check_hw_ib 400 …`); gpud threshold_default.go.
        rdma_ports: Some(8),
        rdma_rate_gbps: Some(400),
        rdma_link_layer: Some("InfiniBand".to_string()),
        rdma_devices: Vec::new(),
        // GPUDirect RDMA: one compute NIC per GPU at `PIX` (topology.md §5, §7; `NVIDIA/nccl#1264`).
        gpudirect_rdma: Some(true),
        // SR-IOV VFs are a deployment choice (SriovNetworkNodePolicy), not the platform's.
        sriov_vfs: None,
        vbios_version: None,
        // With NVLS: warn < 465, fail < 460 (AzNHC conf/nd96isr_h100_v5.conf, 16 GiB). NVLS
        // peaks near 480 (`NVIDIA/nccl-tests#212`), but healthy nodes reach it only at the
        // largest sizes: ten HGX H100 nodes (xxrjun/nccl-tests-cluster, nccl-tests 2.17.8,
        // tests/data/nccl/real/nccl-tests-cluster-h100-single-node-*) give 469.7 at 1 GiB,
        // 476.3 at 2 GiB, 479.7 at 4 GiB, 481.2-482.6 at 8-16 GiB; `#290` gives 476.5 at
        // 4 GiB. 480 warned on every healthy sweep that stops below 8 GiB; 465 sits under all
        // of them from 1 GiB up (the smallest size judged).
        nccl_busbw_warn_gbps: Some(465.0),
        nccl_busbw_fail_gbps: Some(460.0),
        nccl_nvls: Some(true),
        // Without NVLS: ring ~370 (`NVIDIA/nccl-tests#212`, `#290`); fail < 333 = 0.9 × 370
        // (derived, §4 profile suggestion).
        nccl_ring_busbw_warn_gbps: Some(370.0),
        nccl_ring_busbw_fail_gbps: Some(333.0),
        // Multi-node: no published figure; derived from the 8 NDR ports (profiles.md §4:
        // 8 × 46–49 ≈ 370–390 GB/s) in checks/nccl.rs `thresholds`.
        nccl_multinode_busbw_warn_gbps: None,
        nccl_multinode_busbw_fail_gbps: None,
        // AzNHC conf/nd96isr_h100_v5.conf (ND H100 v5, an HGX H100): H2D/D2H fail < 48 GB/s
        // (README 52), P2P D2D < 335 GB/s, GDR ib_write_bw < 380 Gb/s. profiles.md §4, §8.
        host_copy_fail_gbps: Some(48.0),
        p2p_copy_fail_gbps: Some(335.0),
        gpudirect_fail_gbits: Some(380.0),
        provisional: false,
        sources: strings(&[
            "pci.ids https://pci-ids.ucw.cz/read/PC/10de",
            "NVIDIA/nccl-tests#252, #294 (model string)",
            "MLCommons inference_results_v3.1 closed/NVIDIA/documentation/start_from_device/dgx-h100.md",
            "DGX H100 user guide https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html",
            "NVIDIA/nccl#1264 (NV18)",
            "Azure/azurehpc-health-checks conf/nd96isr_h100_v5.conf (IB 400, fail < 460; H2D < 48, P2P < 335, GDR < 380 Gb/s)",
            "NVIDIA/nccl-tests#212, #290 (NVLS ~480, ring ~370)",
            "xxrjun/nccl-tests-cluster single-node runs (10 healthy HGX H100: NVLS 469.7 at 1 GiB to 482.6 at 16 GiB)",
            "leptonai/gpud threshold_default.go (8 ports >= 400)",
        ]),
    }
}

/// HGX H100 whose GPU fabric is RoCE (Spectrum-X Ethernet): the same node, eight 400 Gb/s
/// Ethernet compute ports. Chosen instead of hgx-h100 when the node has fewer than eight
/// InfiniBand ports and at least eight Ethernet RDMA ports at 400 Gb/s (`by_fabric`), or with
/// `--profile hgx-h100-roce`; a file with `base` of it can name the fabric's devices in
/// `rdma_devices`, since the reference design's front-end BlueField-3 is Ethernet RDMA too
/// (2 x 200 GbE) and is not part of the fabric.
fn hgx_h100_roce() -> Profile {
    let ib = hgx_h100();
    let mut sources = ib.sources.clone();
    sources.push(
        "NVIDIA HGX AI Factory reference architecture (H100/H200/B200, 2-8-9-400: 8 GPUs, 400 Gb/s Spectrum-X Ethernet per GPU, 2 x 200 GbE converged north/south) https://docs.nvidia.com/enterprise-reference-architectures/hgx-ai-factory-h100-h200-b200/latest/network-logical-architecture.html".to_string(),
    );
    Profile {
        name: "hgx-h100-roce".to_string(),
        description:
            "HGX H100 SXM5 80 GB: 8 GPUs, NVSwitch, 8 x 400 GbE RoCE (Spectrum-X); chosen when the GPU rails are Ethernet"
                .to_string(),
        // Not matched by GPU names (those are hgx-h100's): `by_fabric` turns hgx-h100 into it.
        gpu_names: Vec::new(),
        // 8 × 400 Gb/s per GPU over Ethernet (RoCE): the HGX AI Factory RA's 2-8-9-400 design.
        rdma_ports: Some(8),
        rdma_rate_gbps: Some(400),
        rdma_link_layer: Some("Ethernet".to_string()),
        sources,
        ..ib
    }
}
