//! The shape of gpudoctor's `nvml.json` (src/answers/nvml/), re-declared here so the fake does
//! not depend on the crate it tests. Field names, defaults and the `Reading` encoding must stay
//! the same as gpudoctor's: a field that is absent reads as "not supported".
//!
//! Error kinds are kept as strings (not an enum) so a fixture with a kind this file does not
//! know still loads; such a kind answers `NVML_ERROR_UNKNOWN`.

use serde::Deserialize;

/// `{"value": x}` | `"not_supported"` | `{"error": {"kind": .., "message": ..}}` | an older
/// capture's `{"error": "text"}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    Value(T),
    /// Also what an absent field reads as.
    #[default]
    NotSupported,
    Error(ReadingError),
}

/// A failed reading: its kind answers that kind's code; an older capture's bare text answers
/// NVML_ERROR_UNKNOWN, as gpudoctor reads it (kind `unknown`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ReadingError {
    Text(#[allow(dead_code)] String),
    Full(ErrorInfo),
}

impl ReadingError {
    pub fn kind(&self) -> &str {
        match self {
            ReadingError::Text(_) => "unknown",
            ReadingError::Full(info) => &info.kind,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ErrorInfo {
    pub kind: String,
    #[serde(default)]
    #[allow(dead_code)] // NVML's own text comes from nvmlErrorString, not from here.
    pub message: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Facts {
    #[serde(default)]
    pub init_error: Option<ErrorInfo>,
    #[serde(default)]
    pub driver_version: Option<String>,
    #[serde(default)]
    pub nvml_version: Option<String>,
    #[serde(default)]
    pub cuda_driver_version: Option<i32>,
    #[serde(default)]
    pub device_count: u32,
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Device {
    pub index: u32,
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub serial: Reading<String>,
    #[serde(default)]
    pub minor_number: Reading<u32>,
    #[serde(default)]
    pub persistence_mode: Reading<bool>,
    /// `nvmlDeviceArchitecture_t` (Blackwell 10).
    #[serde(default)]
    pub architecture: Reading<u32>,
    #[serde(default)]
    pub error: Option<ErrorInfo>,
    #[serde(default)]
    pub ecc_mode: Reading<CurrentPending>,
    #[serde(default)]
    pub ecc_errors: Reading<EccCounts>,
    #[serde(default)]
    pub retired_pages: Reading<RetiredPages>,
    #[serde(default)]
    pub remapped_rows: Reading<RemappedRows>,
    #[serde(default)]
    pub temperature_c: Reading<u32>,
    #[serde(default)]
    pub temperature_slowdown_c: Reading<u32>,
    #[serde(default)]
    pub temperature_shutdown_c: Reading<u32>,
    #[serde(default)]
    pub power_usage_mw: Reading<u32>,
    #[serde(default)]
    pub power_limit_mw: Reading<u32>,
    #[serde(default)]
    pub power_default_limit_mw: Reading<u32>,
    #[serde(default)]
    pub clock_event_reasons: Reading<u64>,
    #[serde(default)]
    pub utilization_gpu_pct: Reading<u32>,
    #[serde(default)]
    pub pcie_current_gen: Reading<u32>,
    #[serde(default)]
    pub pcie_max_gen: Reading<u32>,
    #[serde(default)]
    pub pcie_current_width: Reading<u32>,
    #[serde(default)]
    pub pcie_max_width: Reading<u32>,
    #[serde(default)]
    pub pcie_replay_counter: Reading<u64>,
    #[serde(default)]
    pub mig_mode: Reading<CurrentPending>,
    #[serde(default)]
    pub mig_devices: Reading<Vec<MigDevice>>,
    #[serde(default)]
    pub nvlinks: Reading<Vec<NvLink>>,
    #[serde(default)]
    pub fabric: Reading<FabricInfo>,
    /// `default`, `exclusive_thread`, `prohibited`, `exclusive_process`.
    #[serde(default)]
    pub compute_mode: Reading<String>,
    #[serde(default)]
    pub compute_processes: Reading<Vec<GpuProcess>>,
    #[serde(default)]
    pub vbios_version: Reading<String>,
    #[serde(default)]
    pub inforom_image_version: Reading<String>,
    /// `false`: `nvmlDeviceValidateInforom` answers `NVML_ERROR_CORRUPTED_INFOROM`.
    #[serde(default)]
    pub inforom_valid: Reading<bool>,
    #[serde(default)]
    pub applications_clocks: Reading<Clocks>,
    #[serde(default)]
    pub default_applications_clocks: Reading<Clocks>,
    #[serde(default)]
    pub max_clocks: Reading<Clocks>,
    #[serde(default)]
    pub board_part_number: Reading<String>,
    #[serde(default)]
    pub module_id: Reading<u32>,
}

/// Graphics and memory clocks, MHz.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Clocks {
    pub graphics_mhz: u32,
    pub memory_mhz: u32,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    #[serde(default)]
    pub used_memory_mib: Option<u64>,
    // The recorded `name` is not answered: the library names a process from its own
    // namespace's /proc (`nvmlSystemGetProcessName` in lib.rs).
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MigDevice {
    pub index: u32,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub gpu_instance_id: Reading<u32>,
    #[serde(default)]
    pub compute_instance_id: Reading<u32>,
    #[serde(default)]
    pub memory_total_mib: Reading<u64>,
    #[serde(default)]
    pub error: Option<ErrorInfo>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct CurrentPending {
    pub current: bool,
    pub pending: bool,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct EccCounts {
    pub volatile_corrected: u64,
    pub volatile_uncorrected: u64,
    pub aggregate_corrected: u64,
    pub aggregate_uncorrected: u64,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct RetiredPages {
    pub single_bit: u32,
    pub double_bit: u32,
    pub pending: bool,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    pub pending: bool,
    pub failure: bool,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteType {
    Gpu,
    Nvswitch,
    Ibmnpu,
    Unknown,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NvLink {
    pub link: u32,
    pub active: bool,
    #[serde(default)]
    pub version: Reading<u32>,
    #[serde(default)]
    pub remote_pci_bus_id: Option<String>,
    #[serde(default)]
    pub remote_type: Reading<RemoteType>,
    #[serde(default)]
    pub replay_errors: Reading<u64>,
    #[serde(default)]
    pub recovery_errors: Reading<u64>,
    #[serde(default)]
    pub crc_flit_errors: Reading<u64>,
    #[serde(default)]
    pub crc_data_errors: Reading<u64>,
    // NVLink 5 field values (`NVML_FI_DEV_NVLINK_COUNT_*`, scopeId = link).
    #[serde(default)]
    pub rcv_errors: Reading<u64>,
    #[serde(default)]
    pub malformed_packet_errors: Reading<u64>,
    #[serde(default)]
    pub buffer_overrun_errors: Reading<u64>,
    #[serde(default)]
    pub local_link_integrity_errors: Reading<u64>,
    #[serde(default)]
    pub link_recovery_failed: Reading<u64>,
    #[serde(default)]
    pub symbol_errors: Reading<u64>,
    #[serde(default)]
    pub effective_errors: Reading<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FabricInfo {
    pub state: FabricState,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub clique_id: Option<u32>,
    #[serde(default)]
    pub cluster_uuid: Option<String>,
    #[serde(default)]
    pub health_mask: Option<u32>,
    /// `healthSummary` of the v3 struct by name, or a number past nvml.h's list; absent: a
    /// driver with only the v2 struct.
    #[serde(default)]
    pub health_summary: Option<HealthSummary>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthSummary {
    NotSupported,
    Healthy,
    Unhealthy,
    LimitedCapacity,
    #[serde(untagged)]
    Other(u8),
}

impl HealthSummary {
    /// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*` (nvml.h).
    pub fn raw(self) -> u8 {
        match self {
            HealthSummary::NotSupported => 0,
            HealthSummary::Healthy => 1,
            HealthSummary::Unhealthy => 2,
            HealthSummary::LimitedCapacity => 3,
            HealthSummary::Other(raw) => raw,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    NotSupported,
    NotStarted,
    InProgress,
    Completed,
}

pub fn parse(text: &str) -> Result<Facts, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// nvml.h `NVML_DEVICE_ARCH_BLACKWELL` and `NVML_DEVICE_ARCH_UNKNOWN`.
const ARCH_BLACKWELL: u32 = 10;
const ARCH_UNKNOWN: u32 = 0xffff_ffff;

impl Device {
    /// Blackwell or later, as its architecture says: NVLink 5.
    pub fn blackwell(&self) -> bool {
        matches!(self.architecture, Reading::Value(a) if a >= ARCH_BLACKWELL && a != ARCH_UNKNOWN)
    }
}
