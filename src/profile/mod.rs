//! What "healthy" means for a platform: expected GPU count and model, PCIe, NVLinks, RDMA ports
//! and NCCL bandwidth. Built-in profiles cite a public source for every number
//! (reference/profiles.md); `--profile NAME|FILE` overrides the automatic choice.
//!
//! Without a profile the checks judge consistency only (every GPU alike, every link at its max).
//!
//! This module decides expectations only: it reads a profile file when asked to (`load`) and
//! never looks at the node. The file format and the selection rules are in docs/profiles.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One expectation set. Every field is optional: a profile states only what it knows.
///
/// The profile file format (docs/profiles.md) uses exactly these field names as TOML keys, plus
/// `base`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short id used with `--profile` (`hgx-h100`).
    pub name: String,
    /// One line for `gpudoctor profiles`.
    #[serde(default)]
    pub description: String,
    /// NVML product names that select this profile (`NVIDIA H100 80GB HBM3`). Compared whole,
    /// case-insensitively, with or without the leading `NVIDIA ` (older drivers omit it); a
    /// trailing `*` matches any rest. Never a bare substring: gpud took `GH200` for `H200`
    /// (`leptonai/gpud` PR #1206). Empty = any model.
    #[serde(default)]
    pub gpu_names: Vec<String>,
    /// Substrings that veto a match even when `gpu_names` matches (`H200 NVL`, `GH200`).
    #[serde(default)]
    pub gpu_names_exclude: Vec<String>,
    /// Expected number of GPUs on the node.
    #[serde(default)]
    pub gpu_count: Option<u32>,
    /// Expected PCIe generation and width of each GPU's link.
    #[serde(default)]
    pub gpu_pcie_gen: Option<u32>,
    #[serde(default)]
    pub gpu_pcie_width: Option<u32>,
    /// Active NVLinks per GPU (0 = none expected).
    #[serde(default)]
    pub nvlinks_per_gpu: Option<u32>,
    /// NVSwitch fabric expected (fabric manager must have completed training).
    #[serde(default)]
    pub nvswitch: Option<bool>,
    /// NVSwitch PCI functions (class 0x0680) expected on the PCI bus. `Some(0)` on platforms
    /// whose switches are managed over NVLink instead (B200); `None` = do not count them.
    #[serde(default)]
    pub nvswitch_pci_functions: Option<u32>,
    /// Compute RDMA ports and their rate in Gb/s, and link layer (`InfiniBand`, `Ethernet`).
    #[serde(default)]
    pub rdma_ports: Option<u32>,
    #[serde(default, rename = "rdma_rate_gbit_per_s")]
    pub rdma_rate_gbps: Option<u32>,
    #[serde(default)]
    pub rdma_link_layer: Option<String>,
    /// The RDMA devices that are the GPU fabric (`mlx5_0`; a trailing `*` matches any rest,
    /// `mlx5_*`): only their ports count toward `rdma_ports` and are held to
    /// `rdma_rate_gbit_per_s`, so a front-end NIC of the same link layer (the storage or
    /// management port of a RoCE node) is left out. Empty = every device.
    #[serde(default)]
    pub rdma_devices: Vec<String>,
    /// GPUDirect RDMA carries inter-node traffic (the NIC DMAs straight into GPU memory, so each
    /// GPU needs an RDMA NIC at PIX/PXB): a GPU whose nearest RDMA NIC is across the CPU
    /// interconnect (SYS) fails the topology layer instead of warning, and a translating IOMMU
    /// warns (reference/topology.md §5, §6).
    #[serde(default)]
    pub gpudirect_rdma: Option<bool>,
    /// SR-IOV VFs expected enabled on the node, summed over its PFs (`sriov_numvfs`; the
    /// `numVfs` of each SriovNetworkNodePolicy times the PFs it selects): fewer fails
    /// `sriov.vfs_enabled`, naming each network PF's count. `None` or `Some(0)` = no
    /// expectation: judged only by what the kubelet advertises.
    #[serde(default)]
    pub sriov_vfs: Option<u32>,
    /// Single-node all_reduce bus bandwidth at large sizes, GB/s: below `warn` warns, below
    /// `fail` fails.
    #[serde(default, rename = "nccl_busbw_warn_gbyte_per_s")]
    pub nccl_busbw_warn_gbps: Option<f64>,
    #[serde(default, rename = "nccl_busbw_fail_gbyte_per_s")]
    pub nccl_busbw_fail_gbps: Option<f64>,
    /// NVLink SHARP (NVLS) expected in NCCL runs. The `nccl_busbw_*` thresholds assume it; a
    /// run without NVLS is judged by the `nccl_ring_busbw_*` thresholds instead and the missing
    /// NVLS is its own finding (reference/profiles.md §4).
    #[serde(default)]
    pub nccl_nvls: Option<bool>,
    #[serde(default, rename = "nccl_ring_busbw_warn_gbyte_per_s")]
    pub nccl_ring_busbw_warn_gbps: Option<f64>,
    #[serde(default, rename = "nccl_ring_busbw_fail_gbyte_per_s")]
    pub nccl_ring_busbw_fail_gbps: Option<f64>,
    /// Multi-node all_reduce bus bandwidth at large sizes, GB/s (busbw as nccl-tests prints it
    /// for the whole run): below `warn` warns, below `fail` fails (`fail` unset: 0.9 × `warn`).
    /// Unset: derived from `rdma_ports` × `rdma_rate_gbps` (checks/nccl.rs `thresholds`).
    #[serde(default, rename = "nccl_multinode_busbw_warn_gbyte_per_s")]
    pub nccl_multinode_busbw_warn_gbps: Option<f64>,
    #[serde(default, rename = "nccl_multinode_busbw_fail_gbyte_per_s")]
    pub nccl_multinode_busbw_fail_gbps: Option<f64>,
    /// Host↔GPU copy bandwidth per GPU and direction (`--bandwidth`, pinned memory on the GPU's
    /// own NUMA node), GB/s: below fails `topology.host_bandwidth`.
    #[serde(default, rename = "host_copy_fail_gbyte_per_s")]
    pub host_copy_fail_gbps: Option<f64>,
    /// GPU↔GPU peer copy bandwidth over NVLink per pair and direction (`--bandwidth`), GB/s:
    /// below fails `nvlink.p2p_bandwidth`.
    #[serde(default, rename = "p2p_copy_fail_gbyte_per_s")]
    pub p2p_copy_fail_gbps: Option<f64>,
    /// GPUDirect RDMA `ib_write_bw` loopback per HCA (`--bandwidth`, 8 MiB messages), Gb/s:
    /// below fails `rdma.gpudirect_bandwidth`. Unset: 90 % of the port's rate.
    #[serde(default, rename = "gpudirect_fail_gbit_per_s")]
    pub gpudirect_fail_gbits: Option<f64>,
    /// Not yet validated on hardware: counts and link states only, no bandwidth thresholds.
    #[serde(default)]
    pub provisional: bool,
    /// Where the numbers come from: one line per source.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// Keys of earlier versions, still read, and the key each now is: `_gbps` meant Gb/s in
/// `rdma_rate_gbps` and GB/s in the `nccl_*` keys (issue 19). A file using one gets a
/// deprecation note on stderr.
pub const DEPRECATED_KEYS: &[(&str, &str)] = &[
    ("rdma_rate_gbps", "rdma_rate_gbit_per_s"),
    ("nccl_busbw_warn_gbps", "nccl_busbw_warn_gbyte_per_s"),
    ("nccl_busbw_fail_gbps", "nccl_busbw_fail_gbyte_per_s"),
    (
        "nccl_ring_busbw_warn_gbps",
        "nccl_ring_busbw_warn_gbyte_per_s",
    ),
    (
        "nccl_ring_busbw_fail_gbps",
        "nccl_ring_busbw_fail_gbyte_per_s",
    ),
    (
        "nccl_multinode_busbw_warn_gbps",
        "nccl_multinode_busbw_warn_gbyte_per_s",
    ),
    (
        "nccl_multinode_busbw_fail_gbps",
        "nccl_multinode_busbw_fail_gbyte_per_s",
    ),
];

/// Every key a profile file may set: the `Profile` fields plus `base`. A unit test keeps this
/// list equal to the struct's serde fields.
pub const FILE_KEYS: &[&str] = &[
    "base",
    "name",
    "description",
    "gpu_names",
    "gpu_names_exclude",
    "gpu_count",
    "gpu_pcie_gen",
    "gpu_pcie_width",
    "nvlinks_per_gpu",
    "nvswitch",
    "nvswitch_pci_functions",
    "rdma_ports",
    "rdma_rate_gbit_per_s",
    "rdma_link_layer",
    "rdma_devices",
    "gpudirect_rdma",
    "sriov_vfs",
    "nccl_busbw_warn_gbyte_per_s",
    "nccl_busbw_fail_gbyte_per_s",
    "nccl_nvls",
    "nccl_ring_busbw_warn_gbyte_per_s",
    "nccl_ring_busbw_fail_gbyte_per_s",
    "nccl_multinode_busbw_warn_gbyte_per_s",
    "nccl_multinode_busbw_fail_gbyte_per_s",
    "host_copy_fail_gbyte_per_s",
    "p2p_copy_fail_gbyte_per_s",
    "gpudirect_fail_gbit_per_s",
    "provisional",
    "sources",
];

/// Name of the built-in profile for a node with one PCIe GPU and no platform profile.
pub const GENERIC_PCIE_GPU: &str = "generic-pcie-gpu";

impl Profile {
    /// Whether an RDMA device is part of the GPU fabric (see `rdma_devices`).
    pub fn is_fabric_device(&self, name: &str) -> bool {
        self.rdma_devices.is_empty()
            || self
                .rdma_devices
                .iter()
                .any(|pattern| match pattern.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => name == pattern,
                })
    }

    /// Whether an NVML product name is one this profile expects (see `gpu_names`).
    pub fn matches_gpu_name(&self, name: &str) -> bool {
        let name = normalize_gpu_name(name);
        if self
            .gpu_names_exclude
            .iter()
            .any(|x| name.contains(&normalize_gpu_name(x)))
        {
            return false;
        }
        if self.gpu_names.is_empty() {
            return true;
        }
        self.gpu_names.iter().any(|pattern| {
            let pattern = normalize_gpu_name(pattern);
            match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == pattern,
            }
        })
    }
}

/// Lowercase, single spaces, without the `NVIDIA ` prefix older drivers omit.
fn normalize_gpu_name(name: &str) -> String {
    let joined = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = joined.to_ascii_lowercase();
    match lower.strip_prefix("nvidia ") {
        Some(rest) => rest.to_string(),
        None => lower,
    }
}

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
        // With NVLS: warn < 480 (NVLS peak ~480, `NVIDIA/nccl-tests#212`, `#290`), fail < 460
        // (AzNHC conf/nd96isr_h100_v5.conf, 16 GiB). §4 profile suggestion.
        nccl_busbw_warn_gbps: Some(480.0),
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
            "leptonai/gpud threshold_default.go (8 ports >= 400)",
        ]),
    }
}

/// HGX H100 whose GPU fabric is RoCE (Spectrum-X Ethernet): the same node, eight 400 Gb/s
/// Ethernet compute ports. Never chosen automatically (the GPUs are hgx-h100's; the link layer
/// is not known when the profile is chosen): `--profile hgx-h100-roce`, or `base` of a file
/// that names the fabric's devices in `rdma_devices`, since the reference design's front-end
/// BlueField-3 is Ethernet RDMA too (2 x 200 GbE) and is not part of the fabric.
fn hgx_h100_roce() -> Profile {
    let ib = hgx_h100();
    let mut sources = ib.sources.clone();
    sources.push(
        "NVIDIA HGX AI Factory reference architecture (H100/H200/B200, 2-8-9-400: 8 GPUs, 400 Gb/s Spectrum-X Ethernet per GPU, 2 x 200 GbE converged north/south) https://docs.nvidia.com/enterprise-reference-architectures/hgx-ai-factory-h100-h200-b200/latest/network-logical-architecture.html".to_string(),
    );
    Profile {
        name: "hgx-h100-roce".to_string(),
        description:
            "HGX H100 SXM5 80 GB: 8 GPUs, NVSwitch, 8 x 400 GbE RoCE (Spectrum-X); --profile only"
                .to_string(),
        // Explicit only: an auto-selected profile must be the one platform for these GPUs.
        gpu_names: Vec::new(),
        // 8 × 400 Gb/s per GPU over Ethernet (RoCE): the HGX AI Factory RA's 2-8-9-400 design.
        rdma_ports: Some(8),
        rdma_rate_gbps: Some(400),
        rdma_link_layer: Some("Ethernet".to_string()),
        sources,
        ..ib
    }
}

/// The built-in profile for these NVML GPU names (one entry per GPU), if one fits.
///
/// A platform profile fits when every name matches it and the count is more than half of its
/// `gpu_count` and at most all of it: a node that lost a GPU or two still gets its platform
/// profile (so the count check can say which is missing), while a VM with 1, 2 or 4 GPUs of an
/// 8-GPU board does not. `generic-pcie-gpu` fits exactly one GPU that no platform profile fits.
/// Anything else (mixed models, unknown platforms) is `None`: consistency checks only.
pub fn select_auto(gpu_names: &[&str]) -> Option<Profile> {
    let count = gpu_names.len();
    if count == 0 {
        return None;
    }
    let all = builtins();
    let platform = all.iter().find(|p| {
        !p.gpu_names.is_empty()
            && count_fits(count, p.gpu_count)
            && gpu_names.iter().all(|name| p.matches_gpu_name(name))
    });
    if let Some(p) = platform {
        return Some(p.clone());
    }
    if count == 1 {
        return all.into_iter().find(|p| p.name == GENERIC_PCIE_GPU);
    }
    None
}

fn count_fits(seen: usize, expected: Option<u32>) -> bool {
    match expected {
        None => true,
        Some(expected) => {
            let expected = expected as usize;
            seen <= expected && seen * 2 > expected
        }
    }
}

/// The built-in profile with this name.
pub fn builtin(name: &str) -> Option<Profile> {
    builtins().into_iter().find(|p| p.name == name)
}

fn builtin_names() -> String {
    builtins()
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `--profile` could not be used. Each message names the file, the key and the line.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "no built-in profile is named `{name}` and no such file exists; built-in profiles: {valid} (or pass a profile file, see docs/profiles.md)"
    )]
    UnknownName { name: String, valid: String },
    #[error("cannot read profile file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("profile file {}{}: {message}", path.display(), at_line(*line))]
    Syntax {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("profile file {}, line {line}: unknown key `{key}`; valid keys: {valid}", path.display())]
    UnknownKey {
        path: PathBuf,
        key: String,
        line: usize,
        valid: String,
    },
    #[error("profile file {}, line {line}: key `{key}`: {message}", path.display())]
    BadValue {
        path: PathBuf,
        key: String,
        line: usize,
        message: String,
    },
    #[error(
        "profile file {}, line {line}: key `base`: `{base}` is not a built-in profile; built-in profiles: {valid}",
        path.display()
    )]
    UnknownBase {
        path: PathBuf,
        base: String,
        line: usize,
        valid: String,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(", line {l}")).unwrap_or_default()
}

/// 1-based line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// `--profile ARG`: a built-in name, or a path to a profile file (docs/profiles.md).
pub fn load(arg: &str) -> Result<Profile, ProfileError> {
    load_noting(arg).map(|(profile, _)| profile)
}

/// [`load`], with a note for each deprecated key the file used ([`DEPRECATED_KEYS`]), for
/// stderr.
pub fn load_noting(arg: &str) -> Result<(Profile, Vec<String>), ProfileError> {
    if let Some(p) = builtin(arg) {
        return Ok((p, Vec::new()));
    }
    let path = Path::new(arg);
    let looks_like_path = path.exists()
        || arg.contains(std::path::MAIN_SEPARATOR)
        || arg.contains('/')
        || arg.ends_with(".toml");
    if !looks_like_path {
        return Err(ProfileError::UnknownName {
            name: arg.to_string(),
            valid: builtin_names(),
        });
    }
    // Not a plain read: a FIFO without a writer would block it forever. A regular file, or a
    // pipe that ends (`--profile <(...)`) within PROFILE_READ_WAIT, capped at 1 MiB.
    let shown = path.display().to_string();
    let text = crate::source::rooted::read_named_file(path, &shown, 1 << 20, PROFILE_READ_WAIT)
        .map_err(|err| {
            let full = err.to_string();
            let reason = full
                .strip_prefix(&format!("{shown}: "))
                .map(str::to_string)
                .unwrap_or(full);
            ProfileError::Read {
                path: path.to_path_buf(),
                source: std::io::Error::other(reason),
            }
        })?;
    parse_file_noting(path, &text)
}

/// Longest `--profile` waits for a pipe to end.
pub const PROFILE_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Parse the text of a profile file; `path` names it in errors and gives the default `name`.
pub fn parse_file(path: &Path, text: &str) -> Result<Profile, ProfileError> {
    parse_file_noting(path, text).map(|(profile, _)| profile)
}

/// [`parse_file`], with a note for each deprecated key used.
pub fn parse_file_noting(path: &Path, text: &str) -> Result<(Profile, Vec<String>), ProfileError> {
    let raw: BTreeMap<String, toml::Spanned<toml::Value>> =
        toml::from_str(text).map_err(|err| ProfileError::Syntax {
            path: path.to_path_buf(),
            line: err.span().map(|s| line_of(text, s.start)),
            message: err.message().trim().to_string(),
        })?;
    // Old key names become today's, each said once; both names of one key is an error.
    let mut notes = Vec::new();
    let mut doc: BTreeMap<String, toml::Spanned<toml::Value>> = BTreeMap::new();
    for (key, value) in raw {
        let Some((_, new)) = DEPRECATED_KEYS.iter().find(|(old, _)| *old == key) else {
            doc.insert(key, value);
            continue;
        };
        let line = line_of(text, value.span().start);
        if doc.contains_key(*new) || text_has_key(text, new) {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key,
                line,
                message: format!("set twice: `{new}` is its new name; keep that one"),
            });
        }
        notes.push(format!(
            "profile {}, line {line}: `{key}` is deprecated (`_gbps` said Gb/s in one key and GB/s in others): rename it `{new}`",
            path.display()
        ));
        doc.insert((*new).to_string(), value);
    }

    let mut merged = toml::Table::new();
    let mut base_profile: Option<Profile> = None;
    if let Some(base) = doc.get("base") {
        let line = line_of(text, base.span().start);
        let Some(base_name) = base.get_ref().as_str() else {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key: "base".to_string(),
                line,
                message: format!(
                    "expected the name of a built-in profile (a string), found {}",
                    base.get_ref().type_str()
                ),
            });
        };
        let Some(profile) = builtin(base_name) else {
            return Err(ProfileError::UnknownBase {
                path: path.to_path_buf(),
                base: base_name.to_string(),
                line,
                valid: builtin_names(),
            });
        };
        merged = toml::Table::try_from(&profile).map_err(|err| ProfileError::Syntax {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot use base `{base_name}`: {err}"),
        })?;
        base_profile = Some(profile);
    }

    // In file order, so the first error reported is the first in the file.
    let mut entries: Vec<(&String, &toml::Spanned<toml::Value>)> = doc.iter().collect();
    entries.sort_by_key(|(_, value)| value.span().start);
    for (key, value) in entries {
        if key == "base" {
            continue;
        }
        let line = line_of(text, value.span().start);
        if !FILE_KEYS.contains(&key.as_str()) {
            return Err(ProfileError::UnknownKey {
                path: path.to_path_buf(),
                key: key.clone(),
                line,
                valid: FILE_KEYS.join(", "),
            });
        }
        // Check this one key's type on its own, so the error can name the key and its line.
        let mut single = toml::Table::new();
        single.insert("name".to_string(), toml::Value::String(String::new()));
        single.insert(key.clone(), value.get_ref().clone());
        if let Err(err) = toml::Value::Table(single).try_into::<Profile>() {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key: key.clone(),
                line,
                message: err.message().trim().to_string(),
            });
        }
        merged.insert(key.clone(), value.get_ref().clone());
    }

    // A stated multi-node figure belongs to the base's NICs (hgx-a100's 192 GB/s is 8 × HDR):
    // a file that changes the NICs without restating it gets the figure derived from its own.
    let changes_nics = doc.contains_key("rdma_ports") || doc.contains_key("rdma_rate_gbit_per_s");
    for key in [
        "nccl_multinode_busbw_warn_gbyte_per_s",
        "nccl_multinode_busbw_fail_gbyte_per_s",
    ] {
        if changes_nics && !doc.contains_key(key) {
            merged.remove(key);
        }
    }

    if !doc.contains_key("name") {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "custom".to_string());
        merged.insert("name".to_string(), toml::Value::String(stem));
    }
    if let Some(base) = &base_profile
        && !doc.contains_key("description")
    {
        merged.insert(
            "description".to_string(),
            toml::Value::String(format!(
                "{} (base {}, edited in {})",
                base.description,
                base.name,
                path.display()
            )),
        );
    }

    toml::Value::Table(merged)
        .try_into::<Profile>()
        .map(|profile| (profile, notes))
        .map_err(|err| ProfileError::Syntax {
            path: path.to_path_buf(),
            line: None,
            message: err.message().trim().to_string(),
        })
}

/// Whether a top-level `key =` line is in the text (the map above has already lost which of
/// two names came first).
fn text_has_key(text: &str, key: &str) -> bool {
    text.lines().any(|l| {
        l.trim_start()
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    })
}

/// `gpudoctor profiles`: one row per built-in profile, then the sources of each.
pub fn list_table() -> String {
    let rows: Vec<[String; 6]> = builtins().iter().map(table_row).collect();
    let headers = [
        "NAME",
        "GPUS",
        "PCIE",
        "NVLINK",
        "RDMA",
        "NCCL BUSBW warn/fail",
    ];
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    let mut out = crate::render::grid::text(&headers.map(str::to_string), &rows);
    let _ = writeln!(out, "\nSources:");
    for p in builtins() {
        let _ = writeln!(out, "  {}:", p.name);
        for s in &p.sources {
            let _ = writeln!(out, "    - {s}");
        }
    }
    let _ = writeln!(
        out,
        "\nSelection: by GPU model and count (docs/profiles.md); `--profile NAME|FILE` overrides."
    );
    out
}

fn table_row(p: &Profile) -> [String; 6] {
    let model = match p.gpu_names.first() {
        Some(n) => n.strip_prefix("NVIDIA ").unwrap_or(n).to_string(),
        None => "any".to_string(),
    };
    let gpus = match p.gpu_count {
        Some(c) => format!("{c} x {model}"),
        None => model,
    };
    let pcie = match (p.gpu_pcie_gen, p.gpu_pcie_width) {
        (Some(g), Some(w)) => format!("gen{g} x{w}"),
        (Some(g), None) => format!("gen{g}"),
        (None, Some(w)) => format!("x{w}"),
        (None, None) => "-".to_string(),
    };
    let nvlink = match (p.nvlinks_per_gpu, p.nvswitch) {
        (Some(n), Some(true)) => format!("{n} +nvswitch"),
        (Some(n), _) => n.to_string(),
        (None, Some(true)) => "nvswitch".to_string(),
        (None, _) => "-".to_string(),
    };
    let rdma = match (p.rdma_ports, p.rdma_rate_gbps) {
        (Some(n), Some(r)) => format!("{n} x {r} Gb/s"),
        (Some(n), None) => format!("{n} ports"),
        (None, Some(r)) => format!("{r} Gb/s"),
        (None, None) => "-".to_string(),
    };
    let rdma = match &p.rdma_link_layer {
        Some(l) if rdma != "-" => format!("{rdma} {l}"),
        _ => rdma,
    };
    let nccl = match (p.nccl_busbw_warn_gbps, p.nccl_busbw_fail_gbps) {
        (Some(w), Some(f)) => format!("{w} / {f} GB/s"),
        (Some(w), None) => format!("{w} / - GB/s"),
        (None, Some(f)) => format!("- / {f} GB/s"),
        (None, None) if p.provisional => "- (provisional)".to_string(),
        (None, None) => "-".to_string(),
    };
    let nccl = if p.nccl_nvls == Some(true) {
        format!("{nccl} (nvls)")
    } else {
        nccl
    };
    [p.name.clone(), gpus, pcie, nvlink, rdma, nccl]
}

/// `gpudoctor profiles --format json`: the built-ins as an array of profile objects (the same
/// keys as the profile file format).
pub fn list_json() -> String {
    let mut text = serde_json::to_string_pretty(&builtins()).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(names: &[&str]) -> Option<String> {
        select_auto(names).map(|p| p.name)
    }

    #[test]
    fn h100_x8_selects_hgx_h100() {
        let names = ["NVIDIA H100 80GB HBM3"; 8];
        assert_eq!(select(&names).as_deref(), Some("hgx-h100"));
    }

    #[test]
    fn h100_node_that_lost_a_gpu_keeps_its_platform_profile() {
        let names = ["NVIDIA H100 80GB HBM3"; 7];
        assert_eq!(select(&names).as_deref(), Some("hgx-h100"));
    }

    #[test]
    fn half_an_hgx_board_is_not_the_platform() {
        assert_eq!(select(&["NVIDIA H100 80GB HBM3"; 4]), None);
        assert_eq!(select(&["NVIDIA H100 80GB HBM3"; 9]), None);
        assert_eq!(
            select(&["NVIDIA H100 80GB HBM3"]).as_deref(),
            Some(GENERIC_PCIE_GPU)
        );
    }

    #[test]
    fn h200_nvl_is_a_pcie_card_not_hgx_h200() {
        assert_eq!(
            select(&["NVIDIA H200 NVL"]).as_deref(),
            Some(GENERIC_PCIE_GPU)
        );
        assert_eq!(select(&["NVIDIA H200 NVL"; 8]), None);
        assert_eq!(select(&["NVIDIA H200"; 8]).as_deref(), Some("hgx-h200"));
    }

    #[test]
    fn gh200_is_not_h200() {
        assert_eq!(select(&["NVIDIA GH200 480GB"; 8]), None);
        let h200 = builtin("hgx-h200").unwrap();
        assert!(!h200.matches_gpu_name("NVIDIA GH200 480GB"));
        assert!(!h200.matches_gpu_name("NVIDIA H200 NVL"));
        assert!(h200.matches_gpu_name("NVIDIA H200"));
        assert!(h200.matches_gpu_name("H200"));
    }

    #[test]
    fn a100_names_select_by_memory() {
        assert_eq!(
            select(&["NVIDIA A100-SXM4-80GB"; 8]).as_deref(),
            Some("hgx-a100-80gb")
        );
        assert_eq!(
            select(&["NVIDIA A100-SXM-80GB"; 8]).as_deref(),
            Some("hgx-a100-80gb")
        );
        assert_eq!(
            select(&["NVIDIA A100-SXM4-40GB"; 8]).as_deref(),
            Some("hgx-a100-40gb")
        );
        // Older drivers omit the `NVIDIA ` prefix.
        assert_eq!(
            select(&["A100-SXM4-80GB"; 8]).as_deref(),
            Some("hgx-a100-80gb")
        );
    }

    #[test]
    fn b200_and_unknown_platforms() {
        assert_eq!(select(&["NVIDIA B200"; 8]).as_deref(), Some("hgx-b200"));
        assert_eq!(select(&["NVIDIA GB200"; 4]), None);
        assert_eq!(select(&["NVIDIA L4"; 4]), None);
        assert_eq!(select(&["NVIDIA L4"]).as_deref(), Some(GENERIC_PCIE_GPU));
        assert_eq!(select(&[]), None);
    }

    #[test]
    fn mixed_models_select_nothing() {
        let mut names = vec!["NVIDIA H100 80GB HBM3"; 7];
        names.push("NVIDIA H200");
        assert_eq!(select(&names), None);
    }

    #[test]
    fn at_most_one_platform_profile_claims_each_known_name() {
        for name in [
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100-SXM-80GB",
            "NVIDIA H100 80GB HBM3",
            "NVIDIA H200",
            "NVIDIA H200 NVL",
            "NVIDIA GH200 480GB",
            "NVIDIA B200",
        ] {
            let claims = builtins()
                .iter()
                .filter(|p| !p.gpu_names.is_empty() && p.matches_gpu_name(name))
                .count();
            assert!(claims <= 1, "{name} is claimed by {claims} profiles");
        }
    }

    #[test]
    fn builtins_are_well_formed() {
        let all = builtins();
        let mut names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "duplicate built-in names");
        for p in &all {
            assert!(!p.sources.is_empty(), "{} has no sources", p.name);
            assert!(!p.description.is_empty(), "{} has no description", p.name);
            if let (Some(w), Some(f)) = (p.nccl_busbw_warn_gbps, p.nccl_busbw_fail_gbps) {
                assert!(f <= w, "{}: fail threshold above warn", p.name);
            }
            if p.provisional {
                assert!(p.nccl_busbw_fail_gbps.is_none(), "{} provisional", p.name);
            }
        }
    }

    #[test]
    fn file_keys_are_the_profile_fields_plus_base() {
        // Every field written out (no `..`), so a new field fails to compile here until it
        // is added to the literal, and then fails this test until it is in FILE_KEYS.
        let full = Profile {
            name: String::new(),
            description: String::new(),
            gpu_names: vec![String::new()],
            gpu_names_exclude: vec![String::new()],
            gpu_count: Some(0),
            gpu_pcie_gen: Some(0),
            gpu_pcie_width: Some(0),
            nvlinks_per_gpu: Some(0),
            nvswitch: Some(false),
            nvswitch_pci_functions: Some(0),
            rdma_ports: Some(0),
            rdma_rate_gbps: Some(0),
            rdma_link_layer: Some(String::new()),
            rdma_devices: vec![String::new()],
            gpudirect_rdma: Some(false),
            sriov_vfs: Some(0),
            nccl_busbw_warn_gbps: Some(0.0),
            nccl_busbw_fail_gbps: Some(0.0),
            nccl_nvls: Some(false),
            nccl_ring_busbw_warn_gbps: Some(0.0),
            nccl_ring_busbw_fail_gbps: Some(0.0),
            nccl_multinode_busbw_warn_gbps: Some(0.0),
            nccl_multinode_busbw_fail_gbps: Some(0.0),
            host_copy_fail_gbps: Some(0.0),
            p2p_copy_fail_gbps: Some(0.0),
            gpudirect_fail_gbits: Some(0.0),
            provisional: false,
            sources: vec![String::new()],
        };
        let table = toml::Table::try_from(&full).unwrap();
        let mut fields: Vec<&str> = table.keys().map(String::as_str).collect();
        fields.push("base");
        fields.sort();
        let mut keys = FILE_KEYS.to_vec();
        keys.sort();
        assert_eq!(fields, keys);
    }

    #[test]
    fn builtin_survives_a_round_trip_through_the_file_format() {
        for p in builtins() {
            let text = toml::to_string(&p).unwrap();
            let back = parse_file(Path::new("x.toml"), &text).unwrap();
            assert_eq!(back, p);
        }
    }

    #[test]
    fn file_with_base_overrides_only_what_it_sets() {
        let text = "# four of eight\nbase = \"hgx-h100\"\nname = \"h100-half\"\ngpu_count = 4\n";
        let p = parse_file(Path::new("half.toml"), text).unwrap();
        let h100 = builtin("hgx-h100").unwrap();
        assert_eq!(p.name, "h100-half");
        assert_eq!(p.gpu_count, Some(4));
        assert_eq!(p.nvlinks_per_gpu, h100.nvlinks_per_gpu);
        assert_eq!(p.nccl_busbw_fail_gbps, h100.nccl_busbw_fail_gbps);
        assert_eq!(p.sources, h100.sources);
    }

    #[test]
    fn a_file_that_changes_the_nics_does_not_inherit_the_multi_node_figure() {
        let file = |text: &str| parse_file(Path::new("p.toml"), text).unwrap();
        let kept = file("base = \"hgx-a100-80gb\"\ngpu_count = 8\n");
        assert_eq!(kept.nccl_multinode_busbw_warn_gbps, Some(192.0));
        let four_nics = file("base = \"hgx-a100-80gb\"\nrdma_ports = 4\n");
        assert_eq!(four_nics.nccl_multinode_busbw_warn_gbps, None);
        assert_eq!(four_nics.nccl_multinode_busbw_fail_gbps, None);
        let restated = file(
            "base = \"hgx-a100-80gb\"\nrdma_rate_gbps = 400\nnccl_multinode_busbw_warn_gbps = 370.0\n",
        );
        assert_eq!(restated.nccl_multinode_busbw_warn_gbps, Some(370.0));
        assert_eq!(restated.nccl_multinode_busbw_fail_gbps, None);
    }

    #[test]
    fn sriov_vfs_is_read_and_checked_like_the_other_counts() {
        let p = parse_file(Path::new("p.toml"), "base = \"hgx-h100\"\nsriov_vfs = 8\n").unwrap();
        assert_eq!(p.sriov_vfs, Some(8));
        assert_eq!(p.rdma_ports, Some(8));
        let msg = parse_file(Path::new("p.toml"), "sriov_vfs = -1\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`sriov_vfs`") && msg.contains("line 1"),
            "{msg}"
        );
    }

    #[test]
    fn file_without_name_is_named_after_the_file() {
        let p = parse_file(Path::new("/etc/gpudoctor/lab-node.toml"), "gpu_count = 2\n").unwrap();
        assert_eq!(p.name, "lab-node");
        assert_eq!(p.gpu_count, Some(2));
        assert_eq!(p.nvlinks_per_gpu, None);
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let text = "base = \"hgx-h100\"\n\ngpu_cout = 4\n";
        let err = parse_file(Path::new("p.toml"), text).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ProfileError::UnknownKey { line: 3, .. }),
            "{msg}"
        );
        assert!(
            msg.contains("`gpu_cout`") && msg.contains("line 3"),
            "{msg}"
        );
        assert!(msg.contains("p.toml") && msg.contains("gpu_count"), "{msg}");
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let text = "name = \"x\"\ngpu_count = \"eight\"\n";
        let err = parse_file(Path::new("p.toml"), text).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ProfileError::BadValue { line: 2, .. }),
            "{msg}"
        );
        assert!(
            msg.contains("`gpu_count`") && msg.contains("line 2"),
            "{msg}"
        );

        let text = "nvswitch = 1\n";
        let msg = parse_file(Path::new("p.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`nvswitch`") && msg.contains("line 1"),
            "{msg}"
        );

        let text = "gpu_count = -8\n";
        let msg = parse_file(Path::new("p.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`gpu_count`") && msg.contains("line 1"),
            "{msg}"
        );
    }

    #[test]
    fn first_error_in_file_order_is_reported() {
        let text = "zzz = 1\naaa = 2\n";
        let msg = parse_file(Path::new("p.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`zzz`") && msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn bad_base_and_bad_syntax_name_the_line() {
        let msg = parse_file(Path::new("p.toml"), "\nbase = \"hgx-h900\"\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("line 2") && msg.contains("hgx-h100"), "{msg}");

        let msg = parse_file(Path::new("p.toml"), "gpu_count = 8\ngpu_count = [\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("p.toml") && msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn load_resolves_names_and_rejects_unknown_ones() {
        assert_eq!(load("hgx-h100").unwrap().name, "hgx-h100");
        let msg = load("hgx-h900").unwrap_err().to_string();
        for p in builtins() {
            assert!(msg.contains(&p.name), "{msg}");
        }
    }

    #[test]
    fn line_of_counts_newlines_before_the_offset() {
        let text = "a\nb\nc";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 2), 2);
        assert_eq!(line_of(text, 4), 3);
        assert_eq!(line_of(text, 99), 3);
    }

    #[test]
    fn listings_name_every_builtin() {
        let table = list_table();
        let json: serde_json::Value = serde_json::from_str(&list_json()).unwrap();
        assert_eq!(json.as_array().unwrap().len(), builtins().len());
        for p in builtins() {
            assert!(table.contains(&p.name), "table lacks {}", p.name);
        }
    }
}
