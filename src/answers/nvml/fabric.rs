//! GPU fabric info (`nvmlDeviceGetGpuFabricInfoV`, nvml.h; reference/gpu-health.md §7): the
//! fabric manager's training state, its status code, and on drivers with the v3 struct the
//! health summary and the health mask, decoded here into named fields. No policy.

use serde::{Deserialize, Serialize};

/// `nvmlGpuFabricInfo_v3_t` (`nvmlGpuFabricInfoV_t`), or what the v2/v1 call could say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricInfo {
    pub state: FabricState,
    /// The `nvmlReturn_t` in `status`: `success`, a kind's name, or the number when nvml.h does
    /// not list it (`errors::return_name`); meaningful only when completed.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub clique_id: Option<u32>,
    #[serde(default)]
    pub cluster_uuid: Option<String>,
    /// `healthMask` (v2 and v3 structs); `None` from the v1 call.
    #[serde(default)]
    pub health_mask: Option<u32>,
    /// `healthSummary` (v3 struct only); `None` from the v2 and v1 calls.
    #[serde(default)]
    pub health_summary: Option<HealthSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    /// `NVML_GPU_FABRIC_STATE_NOT_SUPPORTED` (0): what PCIe boards (H100 PCIe/NVL, H200 NVL)
    /// and single GPUs answer with a successful call (leptonai/gpud PR #1147, #1140).
    NotSupported,
    /// `NOT_STARTED` (1): fabric manager has not trained the links.
    NotStarted,
    /// `IN_PROGRESS` (2).
    InProgress,
    /// `COMPLETED` (3): check `status`.
    Completed,
}

/// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*` (nvml.h): 0 not supported, 1 healthy, 2 unhealthy,
/// 3 limited capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthSummary {
    NotSupported,
    Healthy,
    Unhealthy,
    LimitedCapacity,
    /// A value past nvml.h's list, kept by number so it is shown, not guessed.
    #[serde(untagged)]
    Other(u8),
}

impl HealthSummary {
    pub fn from_raw(raw: u8) -> HealthSummary {
        match raw {
            0 => HealthSummary::NotSupported,
            1 => HealthSummary::Healthy,
            2 => HealthSummary::Unhealthy,
            3 => HealthSummary::LimitedCapacity,
            other => HealthSummary::Other(other),
        }
    }

    pub fn raw(self) -> u8 {
        match self {
            HealthSummary::NotSupported => 0,
            HealthSummary::Healthy => 1,
            HealthSummary::Unhealthy => 2,
            HealthSummary::LimitedCapacity => 3,
            HealthSummary::Other(raw) => raw,
        }
    }

    pub fn name(self) -> String {
        match self {
            HealthSummary::NotSupported => "not supported".into(),
            HealthSummary::Healthy => "healthy".into(),
            HealthSummary::Unhealthy => "unhealthy".into(),
            HealthSummary::LimitedCapacity => "limited capacity".into(),
            HealthSummary::Other(raw) => format!("summary {raw}"),
        }
    }
}

/// One decoded field of the health mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthBit {
    /// `DEGRADED_BW` (bits 0-1): 1 = bandwidth degraded.
    DegradedBandwidth,
    /// `ROUTE_RECOVERY` (bits 2-3): 1 = route recovery in progress.
    RouteRecovery,
    /// `ROUTE_UNHEALTHY` (bits 4-5): 1 = route unhealthy.
    RouteUnhealthy,
    /// `ACCESS_TIMEOUT_RECOVERY` (bits 6-7): 1 = access-timeout recovery in progress.
    AccessTimeoutRecovery,
}

/// The health mask's fields (nvml.h `NVML_GPU_FABRIC_HEALTH_MASK_*`; nvml-wrapper-sys 0.10
/// `SHIFT_*`/`WIDTH_*`; NVML API reference R580 "Fabric definitions"): each 2-bit field is 0 not
/// supported, 1 true, 2 false; incorrect configuration is 4 bits at 8. A healthy NVLink domain
/// reads 0xaa (every 2-bit field false), as NCCL prints it: `healthMask 0xaa` (NVIDIA/nccl#1769).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthMask(pub u32);

impl HealthMask {
    const FIELDS: [(HealthBit, u32, &'static str); 4] = [
        (HealthBit::DegradedBandwidth, 0, "degraded bandwidth"),
        (HealthBit::RouteRecovery, 2, "route recovery in progress"),
        (HealthBit::RouteUnhealthy, 4, "route unhealthy"),
        (
            HealthBit::AccessTimeoutRecovery,
            6,
            "access-timeout recovery in progress",
        ),
    ];

    /// The 2-bit fields that read 1 ("true"), with their names.
    pub fn set(self) -> Vec<(HealthBit, &'static str)> {
        Self::FIELDS
            .iter()
            .filter(|(_, shift, _)| (self.0 >> shift) & 0x3 == 1)
            .map(|(bit, _, name)| (*bit, *name))
            .collect()
    }

    /// `INCORRECT_CONFIGURATION` (bits 8-11): `None` when not supported (0) or correct (1),
    /// else what is wrong.
    pub fn incorrect_configuration(self) -> Option<String> {
        let value = (self.0 >> 8) & 0xf;
        let what = match value {
            0 | 1 => return None,
            2 => "incorrect sysguid",
            3 => "incorrect chassis serial number",
            4 => "no partition",
            5 => "insufficient nvlinks",
            6 => "incompatible gpu firmware",
            7 => "invalid location",
            _ => return Some(format!("incorrect configuration {value}")),
        };
        Some(format!("incorrect configuration: {what}"))
    }

    /// Every field that is not healthy, for evidence: `0x01 (degraded bandwidth)`.
    pub fn describe(self) -> String {
        let mut parts: Vec<String> = self.set().iter().map(|(_, n)| n.to_string()).collect();
        parts.extend(self.incorrect_configuration());
        if parts.is_empty() {
            format!("{:#x}", self.0)
        } else {
            format!("{:#x} ({})", self.0, parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_nccl_prints_for_a_healthy_domain_decodes_to_nothing() {
        // `MNNVL busId 0x901000 fabric UUID ... cliqueId 0x7ffe state 3 healthMask 0xaa`
        // (NVIDIA/nccl#1769, gpu-health.md §7), byte for byte the mask value.
        let mask = HealthMask(0xaa);
        assert!(mask.set().is_empty());
        assert_eq!(mask.incorrect_configuration(), None);
        assert_eq!(mask.describe(), "0xaa");
    }

    #[test]
    fn set_fields_are_named() {
        // Degraded bandwidth (1 at bits 0-1), the rest false.
        let mask = HealthMask(0xa9);
        assert_eq!(
            mask.set(),
            vec![(HealthBit::DegradedBandwidth, "degraded bandwidth")]
        );
        // Route unhealthy and insufficient NVLinks.
        let mask = HealthMask(0x59a);
        assert_eq!(mask.set()[0].0, HealthBit::RouteUnhealthy);
        assert_eq!(
            mask.incorrect_configuration().as_deref(),
            Some("incorrect configuration: insufficient nvlinks")
        );
        assert_eq!(
            mask.describe(),
            "0x59a (route unhealthy, incorrect configuration: insufficient nvlinks)"
        );
        assert_eq!(HealthMask(0).describe(), "0x0");
    }

    #[test]
    fn summaries_keep_unknown_values_by_number() {
        for raw in 0..6u8 {
            assert_eq!(HealthSummary::from_raw(raw).raw(), raw);
        }
        let json = serde_json::to_string(&HealthSummary::LimitedCapacity).unwrap();
        assert_eq!(json, "\"limited_capacity\"");
        let other: HealthSummary = serde_json::from_str("7").unwrap();
        assert_eq!(other, HealthSummary::Other(7));
        assert_eq!(serde_json::to_string(&other).unwrap(), "7");
    }
}
