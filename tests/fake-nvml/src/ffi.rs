//! The parts of `nvml.h` the fake answers with: return codes, enum values and the structs that
//! cross the boundary, declared by hand with `#[repr(C)]`. Layouts are checked against
//! nvml-wrapper-sys 0.10's bindgen output (`bindings.rs`) and by the size tests at the bottom.

use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong};

pub type NvmlReturn = c_uint;

pub const SUCCESS: NvmlReturn = 0;
pub const ERROR_UNINITIALIZED: NvmlReturn = 1;
pub const ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
pub const ERROR_NOT_SUPPORTED: NvmlReturn = 3;
pub const ERROR_NO_PERMISSION: NvmlReturn = 4;
pub const ERROR_ALREADY_INITIALIZED: NvmlReturn = 5;
pub const ERROR_NOT_FOUND: NvmlReturn = 6;
pub const ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
pub const ERROR_INSUFFICIENT_POWER: NvmlReturn = 8;
pub const ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;
pub const ERROR_TIMEOUT: NvmlReturn = 10;
pub const ERROR_IRQ_ISSUE: NvmlReturn = 11;
pub const ERROR_LIBRARY_NOT_FOUND: NvmlReturn = 12;
pub const ERROR_FUNCTION_NOT_FOUND: NvmlReturn = 13;
pub const ERROR_CORRUPTED_INFOROM: NvmlReturn = 14;
pub const ERROR_GPU_IS_LOST: NvmlReturn = 15;
pub const ERROR_RESET_REQUIRED: NvmlReturn = 16;
pub const ERROR_OPERATING_SYSTEM: NvmlReturn = 17;
pub const ERROR_LIB_RM_VERSION_MISMATCH: NvmlReturn = 18;
pub const ERROR_IN_USE: NvmlReturn = 19;
pub const ERROR_MEMORY: NvmlReturn = 20;
pub const ERROR_NO_DATA: NvmlReturn = 21;
pub const ERROR_VGPU_ECC_NOT_SUPPORTED: NvmlReturn = 22;
pub const ERROR_INSUFFICIENT_RESOURCES: NvmlReturn = 23;
pub const ERROR_FREQ_NOT_SUPPORTED: NvmlReturn = 24;
pub const ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
pub const ERROR_DEPRECATED: NvmlReturn = 26;
pub const ERROR_NOT_READY: NvmlReturn = 27;
pub const ERROR_GPU_NOT_FOUND: NvmlReturn = 28;
pub const ERROR_INVALID_STATE: NvmlReturn = 29;
pub const ERROR_RESET_TYPE_NOT_SUPPORTED: NvmlReturn = 30;
pub const ERROR_UNKNOWN: NvmlReturn = 999;

/// `nvmlEnableState_t`.
pub const FEATURE_DISABLED: c_uint = 0;
pub const FEATURE_ENABLED: c_uint = 1;

/// `nvmlTemperatureSensors_t`.
pub const TEMPERATURE_GPU: c_uint = 0;
/// `nvmlTemperatureThresholds_t`.
pub const TEMPERATURE_THRESHOLD_SHUTDOWN: c_uint = 0;
pub const TEMPERATURE_THRESHOLD_SLOWDOWN: c_uint = 1;

/// `nvmlClockType_t`.
pub const CLOCK_GRAPHICS: c_uint = 0;
pub const CLOCK_SM: c_uint = 1;
pub const CLOCK_MEM: c_uint = 2;

/// `nvmlMemoryErrorType_t`.
pub const MEMORY_ERROR_TYPE_CORRECTED: c_uint = 0;
pub const MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;
/// `nvmlEccCounterType_t`.
pub const VOLATILE_ECC: c_uint = 0;
pub const AGGREGATE_ECC: c_uint = 1;

/// `nvmlPageRetirementCause_t`.
pub const PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: c_uint = 0;
pub const PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: c_uint = 1;

/// `nvmlNvLinkErrorCounter_t`.
pub const NVLINK_ERROR_DL_REPLAY: c_uint = 0;
pub const NVLINK_ERROR_DL_RECOVERY: c_uint = 1;
pub const NVLINK_ERROR_DL_CRC_FLIT: c_uint = 2;
pub const NVLINK_ERROR_DL_CRC_DATA: c_uint = 3;
pub const NVLINK_ERROR_DL_ECC_DATA: c_uint = 4;

/// `nvmlIntNvLinkDeviceType_t`.
pub const NVLINK_DEVICE_TYPE_GPU: c_uint = 0;
pub const NVLINK_DEVICE_TYPE_IBMNPU: c_uint = 1;
pub const NVLINK_DEVICE_TYPE_SWITCH: c_uint = 2;
pub const NVLINK_DEVICE_TYPE_UNKNOWN: c_uint = 255;

/// `nvmlGpuFabricState_t` (an `unsigned char`).
pub const GPU_FABRIC_STATE_NOT_SUPPORTED: c_uchar = 0;
pub const GPU_FABRIC_STATE_NOT_STARTED: c_uchar = 1;
pub const GPU_FABRIC_STATE_IN_PROGRESS: c_uchar = 2;
pub const GPU_FABRIC_STATE_COMPLETED: c_uchar = 3;

pub const DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE: usize = 16;
pub const DEVICE_PCI_BUS_ID_BUFFER_SIZE: usize = 32;
pub const GPU_FABRIC_UUID_LEN: usize = 16;

/// `nvmlPciInfo_t` (the v3 layout `nvmlDeviceGetPciInfo_v3` fills).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PciInfo {
    pub bus_id_legacy: [c_char; DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; DEVICE_PCI_BUS_ID_BUFFER_SIZE],
}

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlGpuFabricInfo_t` (the unversioned R525 struct of `nvmlDeviceGetGpuFabricInfo`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpuFabricInfo {
    pub cluster_uuid: [c_uchar; GPU_FABRIC_UUID_LEN],
    pub status: NvmlReturn,
    pub clique_id: c_uint,
    pub state: c_uchar,
}

/// `nvmlGpuFabricInfo_v3_t` = `nvmlGpuFabricInfoV_t` (`nvmlDeviceGetGpuFabricInfoV`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpuFabricInfoV3 {
    pub version: c_uint,
    pub cluster_uuid: [c_uchar; GPU_FABRIC_UUID_LEN],
    pub status: NvmlReturn,
    pub clique_id: c_uint,
    pub state: c_uchar,
    pub health_mask: c_uint,
    pub health_summary: c_uchar,
}

/// `nvmlGpuFabricInfo_v2_t`: same as v3 without `healthSummary`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpuFabricInfoV2 {
    pub version: c_uint,
    pub cluster_uuid: [c_uchar; GPU_FABRIC_UUID_LEN],
    pub status: NvmlReturn,
    pub clique_id: c_uint,
    pub state: c_uchar,
    pub health_mask: c_uint,
}

/// `nvmlValue_t`: the union of `nvmlFieldValue_t` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union Value {
    pub d_val: f64,
    pub ull_val: c_ulonglong,
}

/// `nvmlTemperature_v1_t` (`nvmlDeviceGetTemperatureV`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TemperatureV1 {
    pub version: c_uint,
    pub sensor_type: c_uint,
    pub temperature: c_int,
}

/// `NVML_STRUCT_VERSION(Temperature, 1)` (nvml.h).
pub const TEMPERATURE_V1: c_uint = struct_version::<TemperatureV1>(1);

/// `nvmlFieldValue_t` (`nvmlDeviceGetFieldValues`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FieldValue {
    pub field_id: c_uint,
    pub scope_id: c_uint,
    pub timestamp: i64,
    pub latency_usec: i64,
    pub value_type: c_uint,
    pub nvml_return: NvmlReturn,
    pub value: Value,
}

/// `NVML_VALUE_TYPE_UNSIGNED_LONG_LONG`.
pub const VALUE_TYPE_UNSIGNED_LONG_LONG: c_uint = 3;

/// Field ids (nvml.h `NVML_FI_DEV_*`, as nvml-wrapper-sys 0.10 declares them).
pub const FI_DEV_REMAPPED_COR: c_uint = 142;
pub const FI_DEV_REMAPPED_UNC: c_uint = 143;
pub const FI_DEV_REMAPPED_PENDING: c_uint = 144;
pub const FI_DEV_REMAPPED_FAILURE: c_uint = 145;
pub const FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS: c_uint = 206;
pub const FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS: c_uint = 207;
pub const FI_DEV_NVLINK_COUNT_RCV_ERRORS: c_uint = 208;
pub const FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS: c_uint = 211;
pub const FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS: c_uint = 214;
pub const FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS: c_uint = 219;
pub const FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS: c_uint = 221;

/// `nvmlMemory_v2_t` (`nvmlDeviceGetMemoryInfo_v2`), bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `NVML_STRUCT_VERSION(name, ver)` = `sizeof(name_v##ver##_t) | (ver << 24)` (nvml.h).
pub const fn struct_version<T>(version: u32) -> c_uint {
    std::mem::size_of::<T>() as c_uint | (version << 24)
}

pub const GPU_FABRIC_INFO_V2: c_uint = struct_version::<GpuFabricInfoV2>(2);
pub const GPU_FABRIC_INFO_V3: c_uint = struct_version::<GpuFabricInfoV3>(3);
/// `nvmlMemory_v2` = `NVML_STRUCT_VERSION(Memory, 2)`.
pub const MEMORY_V2: c_uint = struct_version::<MemoryV2>(2);

/// `nvmlErrorString`: the texts libnvidia-ml prints, NUL-terminated for C.
pub fn error_string(code: NvmlReturn) -> &'static std::ffi::CStr {
    match code {
        SUCCESS => c"Success",
        ERROR_UNINITIALIZED => c"Uninitialized",
        ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        ERROR_NOT_SUPPORTED => c"Not Supported",
        ERROR_NO_PERMISSION => c"Insufficient Permissions",
        ERROR_ALREADY_INITIALIZED => c"Already Initialized",
        ERROR_NOT_FOUND => c"Not Found",
        ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        ERROR_INSUFFICIENT_POWER => c"Insufficient External Power",
        ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        ERROR_TIMEOUT => c"Timeout",
        ERROR_IRQ_ISSUE => c"Interrupt request issue",
        ERROR_LIBRARY_NOT_FOUND => c"NVML Shared Library Not Found",
        ERROR_FUNCTION_NOT_FOUND => c"Function Not Found",
        ERROR_CORRUPTED_INFOROM => c"Corrupted infoROM",
        ERROR_GPU_IS_LOST => c"GPU is lost",
        ERROR_RESET_REQUIRED => c"GPU requires restart",
        ERROR_OPERATING_SYSTEM => c"The operating system has blocked the request.",
        ERROR_LIB_RM_VERSION_MISMATCH => c"RM has detected an NVML/RM version mismatch.",
        ERROR_IN_USE => c"In use by another client",
        ERROR_MEMORY => c"Insufficient Memory",
        ERROR_NO_DATA => c"No data",
        ERROR_VGPU_ECC_NOT_SUPPORTED => c"vGPU ECC not supported",
        ERROR_INSUFFICIENT_RESOURCES => c"Insufficient resources",
        ERROR_FREQ_NOT_SUPPORTED => c"Frequency not supported",
        ERROR_ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        ERROR_DEPRECATED => c"Deprecated",
        ERROR_NOT_READY => c"Not ready",
        ERROR_GPU_NOT_FOUND => c"GPU not found",
        ERROR_INVALID_STATE => c"Invalid state",
        ERROR_RESET_TYPE_NOT_SUPPORTED => c"Reset type not supported",
        _ => c"Unknown Error",
    }
}

/// The return code an `nvml.json` error kind (or fabric `status`) stands for: every
/// `nvmlReturn_t` by gpudoctor's snake_case name (`NvmlErrorKind`), or a decimal number (how
/// gpudoctor records a status code nvml.h does not list). Kinds only gpudoctor knows
/// (`not_recorded`, `unreadable`) and anything else answer `NVML_ERROR_UNKNOWN`.
pub fn code_for_kind(kind: &str) -> NvmlReturn {
    if let Ok(code) = kind.parse::<NvmlReturn>() {
        return code;
    }
    match kind {
        "success" => SUCCESS,
        "uninitialized" => ERROR_UNINITIALIZED,
        "invalid_argument" => ERROR_INVALID_ARGUMENT,
        "not_supported" => ERROR_NOT_SUPPORTED,
        "no_permission" => ERROR_NO_PERMISSION,
        "already_initialized" => ERROR_ALREADY_INITIALIZED,
        "not_found" => ERROR_NOT_FOUND,
        "insufficient_size" => ERROR_INSUFFICIENT_SIZE,
        "insufficient_power" => ERROR_INSUFFICIENT_POWER,
        "driver_not_loaded" => ERROR_DRIVER_NOT_LOADED,
        // NVML_ERROR_TIMEOUT maps back to gpudoctor's `timeout`, so a recorded probe timeout
        // round-trips without making the test wait out a real hang.
        "timeout" => ERROR_TIMEOUT,
        "irq_issue" => ERROR_IRQ_ISSUE,
        // A loaded library cannot be "not found"; NVML does return this code (for libcuda, from
        // nvmlSystemGetCudaDriverVersion) and nvml-wrapper maps it to LibraryNotFound.
        "library_not_found" => ERROR_LIBRARY_NOT_FOUND,
        "function_not_found" => ERROR_FUNCTION_NOT_FOUND,
        "corrupted_inforom" => ERROR_CORRUPTED_INFOROM,
        "gpu_is_lost" => ERROR_GPU_IS_LOST,
        "reset_required" => ERROR_RESET_REQUIRED,
        "operating_system" => ERROR_OPERATING_SYSTEM,
        "lib_rm_version_mismatch" => ERROR_LIB_RM_VERSION_MISMATCH,
        "in_use" => ERROR_IN_USE,
        "memory" => ERROR_MEMORY,
        "no_data" => ERROR_NO_DATA,
        "vgpu_ecc_not_supported" => ERROR_VGPU_ECC_NOT_SUPPORTED,
        "insufficient_resources" => ERROR_INSUFFICIENT_RESOURCES,
        "freq_not_supported" => ERROR_FREQ_NOT_SUPPORTED,
        "argument_version_mismatch" => ERROR_ARGUMENT_VERSION_MISMATCH,
        "deprecated" => ERROR_DEPRECATED,
        "not_ready" => ERROR_NOT_READY,
        "gpu_not_found" => ERROR_GPU_NOT_FOUND,
        "invalid_state" => ERROR_INVALID_STATE,
        "reset_type_not_supported" => ERROR_RESET_TYPE_NOT_SUPPORTED,
        _ => ERROR_UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<PciInfo>(), 16 + 5 * 4 + 32);
        assert_eq!(offset_of!(PciInfo, bus_id), 36);
        assert_eq!(size_of::<Utilization>(), 8);
        assert_eq!(size_of::<GpuFabricInfo>(), 28);
        assert_eq!(offset_of!(GpuFabricInfo, state), 24);
        // version 4 + uuid 16 + status 4 + clique 4 + state 1 (+3) + mask 4 + summary 1 (+3).
        assert_eq!(size_of::<GpuFabricInfoV3>(), 40);
        assert_eq!(offset_of!(GpuFabricInfoV3, cluster_uuid), 4);
        assert_eq!(offset_of!(GpuFabricInfoV3, state), 28);
        assert_eq!(offset_of!(GpuFabricInfoV3, health_mask), 32);
        assert_eq!(offset_of!(GpuFabricInfoV3, health_summary), 36);
        assert_eq!(size_of::<GpuFabricInfoV2>(), 36);
        assert_eq!(GPU_FABRIC_INFO_V3, 40 | (3 << 24));
        // nvml.h: #define nvmlTemperature_v1 NVML_STRUCT_VERSION(Temperature, 1), 12 bytes.
        assert_eq!(TEMPERATURE_V1, 12 | (1 << 24));
        // version 4 (+4) + four unsigned long long.
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(offset_of!(MemoryV2, total), 8);
        assert_eq!(MEMORY_V2, 40 | (2 << 24));
        // fieldId 4 + scopeId 4 + timestamp 8 + latency 8 + valueType 4 + nvmlReturn 4 + value 8.
        assert_eq!(size_of::<FieldValue>(), 40);
        assert_eq!(offset_of!(FieldValue, value), 32);
    }

    #[test]
    fn kinds_map_to_nvml_codes() {
        assert_eq!(code_for_kind("gpu_is_lost"), 15);
        assert_eq!(code_for_kind("lib_rm_version_mismatch"), 18);
        assert_eq!(code_for_kind("not_recorded"), ERROR_UNKNOWN);
        assert_eq!(code_for_kind("irq_issue"), 11);
        assert_eq!(code_for_kind("42"), 42);
        assert_eq!(error_string(999).to_str().unwrap(), "Unknown Error");
    }
}
