//! What "healthy" means for a platform: expected GPU count and model, PCIe, NVLinks, RDMA ports
//! and NCCL bandwidth. Built-in profiles cite a public source for every number
//! (reference/profiles.md); `--profile NAME|FILE` overrides the automatic choice.
//!
//! Without a profile the checks judge consistency only (every GPU alike, every link at its max).

use serde::{Deserialize, Serialize};

/// One expectation set. Every field is optional: a profile states only what it knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short id used with `--profile` (`hgx-h100`).
    pub name: String,
    /// One line for `gpudoctor profiles`.
    #[serde(default)]
    pub description: String,
    /// NVML name substrings that select this profile (`H100 80GB HBM3`).
    #[serde(default)]
    pub gpu_names: Vec<String>,
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
    /// Compute RDMA ports and their rate in Gb/s, and link layer (`InfiniBand`, `Ethernet`).
    #[serde(default)]
    pub rdma_ports: Option<u32>,
    #[serde(default)]
    pub rdma_rate_gbps: Option<u32>,
    #[serde(default)]
    pub rdma_link_layer: Option<String>,
    /// Single-node all_reduce bus bandwidth at large sizes, GB/s: below `warn` warns, below
    /// `fail` fails.
    #[serde(default)]
    pub nccl_busbw_warn_gbps: Option<f64>,
    #[serde(default)]
    pub nccl_busbw_fail_gbps: Option<f64>,
    /// Where the numbers come from: one line per source.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// The built-in profiles.
pub fn builtins() -> Vec<Profile> {
    Vec::new()
}

/// The built-in profile for these NVML GPU names, if one matches all of them.
pub fn select_auto(gpu_names: &[&str]) -> Option<Profile> {
    if gpu_names.is_empty() {
        return None;
    }
    builtins().into_iter().find(|p| {
        gpu_names
            .iter()
            .all(|name| p.gpu_names.iter().any(|pattern| name.contains(pattern.as_str())))
    })
}
