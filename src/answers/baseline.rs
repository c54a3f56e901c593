//! The first reading of a `--sample` window, as the source answers it: taken live by
//! `sample::take` before the window, or replayed from a capture's `.gpudoctor/sample.json`
//! (`record --sample` stores it), so a replay judges the same window.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a capture keeps its first reading.
pub const SAMPLE_JSON: &str = ".gpudoctor/sample.json";
/// The first reading of every judged counter, and the window until the second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Seconds from the first reading to the second.
    pub window_s: f64,
    /// Per RDMA port (`mlx5_0/1`): counter name (`symbol_error`, `hw_counters/out_of_buffer`).
    #[serde(default)]
    pub rdma: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per PCI function (`0000:3b:00.0`): `fatal`, `nonfatal`, `correctable` AER totals.
    #[serde(default)]
    pub aer: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per GPU bus id: `pcie_replay`, `ecc_volatile_corrected`, `ecc_volatile_uncorrected`,
    /// `clock_event_reasons`, `nvlink<N>/<counter>`.
    #[serde(default)]
    pub gpus: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per EDAC memory controller (`mc0`): `ce_count`, `ue_count` (`facts/mce.rs`). Left out
    /// when empty, so a capture recorded before it re-records byte for byte.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub edac: BTreeMap<String, BTreeMap<String, u64>>,
}
