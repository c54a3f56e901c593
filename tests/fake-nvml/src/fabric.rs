//! The GPU fabric (NVLink domain) state: `nvmlDeviceGetGpuFabricInfo` and, unless built as an
//! old driver, the versioned `nvmlDeviceGetGpuFabricInfoV` (v2 and v3 structs).

use super::*;

/// The fields every fabric struct version shares.
struct FabricFields {
    cluster_uuid: [u8; GPU_FABRIC_UUID_LEN],
    status: NvmlReturn,
    clique_id: c_uint,
    state: u8,
}

fn fabric_fields(info: &FabricInfo) -> FabricFields {
    // gpudoctor prints the 16 bytes as 32 hex digits; accept dashes as in a UUID too.
    let hex: Vec<u8> = info
        .cluster_uuid
        .as_deref()
        .unwrap_or("")
        .bytes()
        .filter(|b| *b != b'-')
        .collect();
    let mut cluster_uuid = [0u8; GPU_FABRIC_UUID_LEN];
    if hex.len() == 2 * GPU_FABRIC_UUID_LEN {
        for (byte, pair) in cluster_uuid.iter_mut().zip(hex.chunks(2)) {
            let pair = std::str::from_utf8(pair).unwrap_or("");
            *byte = u8::from_str_radix(pair, 16).unwrap_or(0);
        }
    }
    FabricFields {
        cluster_uuid,
        status: info.status.as_deref().map(code_for_kind).unwrap_or(SUCCESS),
        clique_id: info.clique_id.unwrap_or(0),
        state: match info.state {
            FabricState::NotSupported => GPU_FABRIC_STATE_NOT_SUPPORTED,
            FabricState::NotStarted => GPU_FABRIC_STATE_NOT_STARTED,
            FabricState::InProgress => GPU_FABRIC_STATE_IN_PROGRESS,
            FabricState::Completed => GPU_FABRIC_STATE_COMPLETED,
        },
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: Handle,
    info: *mut GpuFabricInfo,
) -> NvmlReturn {
    // Deprecated in nvml.h for a successor this build exports: logged, so a test can hold
    // gpudoctor to the successor.
    #[cfg(not(feature = "old-driver"))]
    driver::deprecated("nvmlDeviceGetGpuFabricInfo");
    guard(|| {
        with_device(device, |d| {
            let f = fabric_fields(&read(&d.fabric)?);
            let out = GpuFabricInfo {
                cluster_uuid: f.cluster_uuid,
                status: f.status,
                clique_id: f.clique_id,
                state: f.state,
            };
            // SAFETY: `info` is an out-pointer for one nvmlGpuFabricInfo_t.
            unsafe { put(info, out) }
        })
    })
}

/// The versioned call: the caller sets `version` (v2 or v3) and gets that struct back, as far
/// as the recorded answer goes (see the module doc: summary → v3, mask only → v2, neither →
/// NOT_SUPPORTED so only the v1 call answers).
#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: Handle,
    info: *mut GpuFabricInfoV3,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let fabric = read(&d.fabric)?;
            let health_mask = fabric.health_mask.ok_or(ERROR_NOT_SUPPORTED)?;
            let f = fabric_fields(&fabric);
            if info.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: non-null; every version of the struct starts with its `version` word.
            let version = unsafe { info.cast::<c_uint>().read() };
            match version {
                GPU_FABRIC_INFO_V3 => {
                    let summary = fabric
                        .health_summary
                        .ok_or(ERROR_ARGUMENT_VERSION_MISMATCH)?;
                    let out = GpuFabricInfoV3 {
                        version,
                        cluster_uuid: f.cluster_uuid,
                        status: f.status,
                        clique_id: f.clique_id,
                        state: f.state,
                        health_mask,
                        health_summary: summary.raw(),
                    };
                    // SAFETY: the caller announced a v3 struct.
                    unsafe { put(info, out) }
                }
                GPU_FABRIC_INFO_V2 => {
                    let out = GpuFabricInfoV2 {
                        version,
                        cluster_uuid: f.cluster_uuid,
                        status: f.status,
                        clique_id: f.clique_id,
                        state: f.state,
                        health_mask,
                    };
                    // SAFETY: the caller announced a v2 struct (a prefix of v3's layout).
                    unsafe { put(info.cast::<GpuFabricInfoV2>(), out) }
                }
                _ => Err(ERROR_ARGUMENT_VERSION_MISMATCH),
            }
        })
    })
}
