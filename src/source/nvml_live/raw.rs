//! Calls nvml-wrapper 0.13 does not wrap, or wraps in a way gpudoctor cannot use, made through
//! its raw function table (nvml-wrapper-sys 0.10 bindings, generated from nvml.h).

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError as WrapperError, nvml_sym, nvml_try};
use nvml_wrapper_sys::bindings::field_id::{
    NVML_FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS, NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS,
    NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS,
    NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS,
    NVML_FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS, NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS,
    NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_FAILURE,
    NVML_FI_DEV_REMAPPED_PENDING, NVML_FI_DEV_REMAPPED_UNC,
};
use nvml_wrapper_sys::bindings::{
    nvmlFieldValue_t, nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_v3_t,
    nvmlTemperature_v1_t,
};

use super::reading;
use crate::answers::nvml::{
    FabricInfo, FabricState, HealthSummary, NvLink, NvmlError, NvmlErrorKind, Reading,
    RemappedRows, RemoteType, return_name,
};

pub fn remapped_rows(device: &Device<'_>) -> Reading<RemappedRows> {
    let result = (|| {
        let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetRemappedRows.as_ref())?;
        let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
        // SAFETY: a live handle and four valid out-pointers, as nvml.h specifies.
        nvml_try(unsafe {
            sym(
                device.handle(),
                &mut corr,
                &mut unc,
                &mut pending,
                &mut failure,
            )
        })?;
        Ok::<_, WrapperError>(RemappedRows {
            correctable: corr,
            uncorrectable: unc,
            pending: pending != 0,
            failure: failure != 0,
        })
    })();
    reading(result)
}

/// The row-remap state as field values `NVML_FI_DEV_REMAPPED_{COR,UNC,PENDING,FAILURE}` (nvml.h;
/// ids 142-145 in nvml-wrapper-sys 0.10): asked only when the direct call said "not supported"
/// with MIG on. Any field not answering makes the whole reading not supported.
pub fn remapped_rows_fields(device: &Device<'_>) -> Reading<RemappedRows> {
    let ids = [
        NVML_FI_DEV_REMAPPED_COR,
        NVML_FI_DEV_REMAPPED_UNC,
        NVML_FI_DEV_REMAPPED_PENDING,
        NVML_FI_DEV_REMAPPED_FAILURE,
    ];
    let requests: Vec<(u32, u32)> = ids.iter().map(|id| (*id, 0)).collect();
    let values = match field_values(device, &requests) {
        Ok(values) => values,
        Err(err) => return reading(Err(err)),
    };
    let mut got = [0u64; 4];
    for (slot, value) in got.iter_mut().zip(values) {
        match value {
            Reading::Value(v) => *slot = v,
            Reading::NotSupported => return Reading::NotSupported,
            Reading::Error(e) => return Reading::Error(e),
        }
    }
    let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Reading::Value(RemappedRows {
        correctable: narrow(got[0]),
        uncorrectable: narrow(got[1]),
        pending: got[2] != 0,
        failure: got[3] != 0,
    })
}

/// The NVLink 5 error counters (see `NvLink::rcv_errors`), for every active link in one
/// `nvmlDeviceGetFieldValues` call: `scopeId` is the link ("for NVLink throughput counter data,
/// scopeId can represent linkId", nvml.h `nvmlFieldValue_t`).
pub fn nvlink5_counters(device: &Device<'_>, links: &mut [NvLink]) {
    const FIELDS: [u32; 7] = [
        NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS,
        NVML_FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS,
        NVML_FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS,
        NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS,
        NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS,
        NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS,
        NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS,
    ];
    let active: Vec<usize> = (0..links.len()).filter(|i| links[*i].active).collect();
    let requests: Vec<(u32, u32)> = active
        .iter()
        .flat_map(|i| {
            FIELDS
                .iter()
                .map(move |f| (*f, 0))
                .zip(std::iter::repeat(*i))
        })
        .map(|((field, _), i)| (field, links[i].link))
        .collect();
    if requests.is_empty() {
        return;
    }
    let values = match field_values(device, &requests) {
        Ok(values) => values,
        // The call itself is missing or refused: every counter says so.
        Err(err) => {
            let r: Reading<u64> = reading(Err(err));
            vec![r; requests.len()]
        }
    };
    let mut values = values.into_iter();
    for i in active {
        let link = &mut links[i];
        for slot in [
            &mut link.rcv_errors,
            &mut link.malformed_packet_errors,
            &mut link.buffer_overrun_errors,
            &mut link.local_link_integrity_errors,
            &mut link.link_recovery_failed,
            &mut link.symbol_errors,
            &mut link.effective_errors,
        ] {
            *slot = values.next().unwrap_or(Reading::NotSupported);
        }
    }
}

/// `nvmlDeviceGetFieldValues` with a `scopeId` per request (nvml-wrapper's `field_values_for`
/// always sends 0). Each answer keeps its own `nvmlReturn`.
fn field_values(
    device: &Device<'_>,
    requests: &[(u32, u32)],
) -> Result<Vec<Reading<u64>>, WrapperError> {
    let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetFieldValues.as_ref())?;
    let mut values: Vec<nvmlFieldValue_t> = requests
        .iter()
        .map(|(field, scope)| {
            // SAFETY: plain-old-data struct; zero is a valid bit pattern.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = *field;
            v.scopeId = *scope;
            v
        })
        .collect();
    let count = i32::try_from(values.len()).map_err(|_| WrapperError::InvalidArg)?;
    // SAFETY: a live handle and `count` initialised entries, as nvml.h specifies.
    nvml_try(unsafe { sym(device.handle(), count, values.as_mut_ptr()) })?;
    Ok(values
        .iter()
        .map(|v| {
            if v.nvmlReturn != 0 {
                return reading::<u64>(Err(WrapperError::from(v.nvmlReturn)));
            }
            // SAFETY: the union member named by `valueType` (nvml.h `nvmlValueType_t`) is the
            // one NVML wrote.
            let value = unsafe {
                match v.valueType {
                    0 => v.value.dVal.max(0.0) as u64,
                    1 => u64::from(v.value.uiVal),
                    2 => v.value.ulVal,
                    3 => v.value.ullVal,
                    4 => u64::try_from(v.value.sllVal).unwrap_or(0),
                    5 => u64::try_from(v.value.siVal).unwrap_or(0),
                    6 => u64::from(v.value.usVal),
                    other => {
                        return Reading::Error(NvmlError::new(
                            NvmlErrorKind::Unknown,
                            format!("field {} has unknown value type {other}", v.fieldId),
                        ));
                    }
                }
            };
            Reading::Value(value)
        })
        .collect())
}

/// Which id of a MIG handle [`instance_id`] asks for.
pub enum Instance {
    Gpu,
    Compute,
}

/// `nvmlDeviceGetGpuInstanceId` / `nvmlDeviceGetComputeInstanceId` on a MIG handle
/// (nvml-wrapper 0.13 does not wrap them).
pub fn instance_id(mig: &Device<'_>, which: Instance) -> Reading<u32> {
    let lib = mig.nvml().lib();
    let result = (|| {
        let sym = match which {
            Instance::Gpu => nvml_sym(lib.nvmlDeviceGetGpuInstanceId.as_ref())?,
            Instance::Compute => nvml_sym(lib.nvmlDeviceGetComputeInstanceId.as_ref())?,
        };
        let mut id = 0u32;
        // SAFETY: a live MIG handle and a valid out-pointer.
        nvml_try(unsafe { sym(mig.handle(), &mut id) })?;
        Ok::<_, WrapperError>(id)
    })();
    reading(result)
}

/// `nvmlDeviceGetModuleId` (nvml-wrapper 0.13 does not wrap it): the GPU's module on its
/// baseboard, as `nvidia-smi -q` prints "Module ID". In Debian's libnvidia-ml 535
/// (tests/real_tools.rs); an older library without it reads as not supported.
pub fn module_id(device: &Device<'_>) -> Reading<u32> {
    let result = (|| {
        let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetModuleId.as_ref())?;
        let mut id = 0u32;
        // SAFETY: a live handle and a valid out-pointer.
        nvml_try(unsafe { sym(device.handle(), &mut id) })?;
        Ok::<_, WrapperError>(id)
    })();
    reading(result)
}

/// `nvmlDeviceGetCurrentClocksEventReasons`, falling back to the older
/// `...ClocksThrottleReasons` name (same bits) on drivers before 535.
pub fn clock_event_reasons(device: &Device<'_>) -> Reading<u64> {
    let lib = device.nvml().lib();
    let result = (|| {
        let sym = nvml_sym(lib.nvmlDeviceGetCurrentClocksEventReasons.as_ref())
            .or_else(|_| nvml_sym(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref()))?;
        let mut reasons = 0u64;
        // SAFETY: a live handle and a valid out-pointer.
        nvml_try(unsafe { sym(device.handle(), &mut reasons) })?;
        Ok::<_, WrapperError>(reasons)
    })();
    reading(result)
}

/// The GPU's temperature, °C: `nvmlDeviceGetTemperatureV` (nvml.h: `nvmlDeviceGetTemperature`
/// is deprecated for it), falling back to the deprecated call on a driver without it (an absent
/// symbol, or a struct version it does not know).
pub fn temperature(device: &Device<'_>) -> Reading<u32> {
    let lib = device.nvml().lib();
    let versioned = (|| {
        let sym = nvml_sym(lib.nvmlDeviceGetTemperatureV.as_ref())?;
        let mut t = nvmlTemperature_v1_t {
            version: struct_version::<nvmlTemperature_v1_t>(1),
            // NVML_TEMPERATURE_GPU
            sensorType: 0,
            temperature: 0,
        };
        // SAFETY: a live handle and a versioned struct of the size its version names.
        nvml_try(unsafe { sym(device.handle(), &mut t) })?;
        Ok::<_, WrapperError>(u32::try_from(t.temperature).unwrap_or(0))
    })();
    match versioned {
        Err(
            WrapperError::FailedToLoadSymbol(_)
            | WrapperError::FunctionNotFound
            | WrapperError::NotSupported
            | WrapperError::UnexpectedVariant(25),
        ) => {
            reading(device.temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu))
        }
        other => reading(other),
    }
}

/// nvml-wrapper 0.13's `remote_device_type` writes into a temporary and always answers
/// Unknown; call the function directly.
pub fn remote_type(device: &Device<'_>, link: u32) -> Reading<RemoteType> {
    let result = (|| {
        let sym = nvml_sym(
            device
                .nvml()
                .lib()
                .nvmlDeviceGetNvLinkRemoteDeviceType
                .as_ref(),
        )?;
        let mut kind: u32 = 255;
        // SAFETY: a live handle, a link index the state query accepted, a valid out-pointer.
        nvml_try(unsafe { sym(device.handle(), link, &mut kind) })?;
        Ok::<_, WrapperError>(match kind {
            0 => RemoteType::Gpu,
            1 => RemoteType::Ibmnpu,
            2 => RemoteType::Nvswitch,
            _ => RemoteType::Unknown,
        })
    })();
    reading(result)
}

/// `NVML_STRUCT_VERSION(GpuFabricInfo, v)` = `sizeof | (v << 24)` (nvml.h).
fn struct_version<T>(version: u32) -> u32 {
    std::mem::size_of::<T>() as u32 | (version << 24)
}

/// The fabric as the newest struct the driver knows tells it: `nvmlDeviceGetGpuFabricInfoV`
/// with the v3 struct (health summary and mask), on ARGUMENT_VERSION_MISMATCH the v2 struct
/// (mask only), and on NOT_SUPPORTED, a version mismatch or a driver without the V call the
/// unversioned R525 `nvmlDeviceGetGpuFabricInfo`. NOT_SUPPORTED from the V call is not the
/// end: some drivers answer it there and still fill the v1 struct.
pub fn fabric_info(device: &Device<'_>) -> Reading<FabricInfo> {
    let lib = device.nvml().lib();
    if let Ok(sym) = nvml_sym(lib.nvmlDeviceGetGpuFabricInfoV.as_ref()) {
        // SAFETY: plain-old-data struct; zero is a valid bit pattern.
        let mut v3: nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
        v3.version = struct_version::<nvmlGpuFabricInfo_v3_t>(3);
        // SAFETY: a live handle and a versioned struct of the size announced.
        match nvml_try(unsafe { sym(device.handle(), &mut v3) }) {
            Ok(()) => {
                let mut info = fabric(v3.state, v3.status, v3.cliqueId, &v3.clusterUuid);
                info.health_mask = Some(v3.healthMask);
                info.health_summary = Some(HealthSummary::from_raw(v3.healthSummary));
                return Reading::Value(info);
            }
            Err(WrapperError::UnexpectedVariant(25)) => {
                // SAFETY: as above, the v2 layout (a prefix of v3's).
                let mut v2: nvmlGpuFabricInfo_v2_t = unsafe { std::mem::zeroed() };
                v2.version = struct_version::<nvmlGpuFabricInfo_v2_t>(2);
                // SAFETY: the v2 call takes the same pointer type; the struct announces v2.
                let ptr = (&mut v2 as *mut nvmlGpuFabricInfo_v2_t).cast::<nvmlGpuFabricInfo_v3_t>();
                if nvml_try(unsafe { sym(device.handle(), ptr) }).is_ok() {
                    let mut info = fabric(v2.state, v2.status, v2.cliqueId, &v2.clusterUuid);
                    info.health_mask = Some(v2.healthMask);
                    return Reading::Value(info);
                }
            }
            Err(err @ WrapperError::GpuLost) => return reading(Err(err)),
            // NOT_SUPPORTED and anything else: try the v1 call.
            Err(_) => {}
        }
    }
    let result = (|| {
        let sym = nvml_sym(lib.nvmlDeviceGetGpuFabricInfo.as_ref())?;
        // SAFETY: plain-old-data struct; zero is a valid bit pattern.
        let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: a live handle and a valid out-pointer.
        nvml_try(unsafe { sym(device.handle(), &mut info) })?;
        Ok::<_, WrapperError>(fabric(
            info.state,
            info.status,
            info.cliqueId,
            &info.clusterUuid,
        ))
    })();
    reading(result)
}

fn fabric(state: u8, status: u32, clique: u32, uuid: &[u8; 16]) -> FabricInfo {
    let state = match state {
        1 => FabricState::NotStarted,
        2 => FabricState::InProgress,
        3 => FabricState::Completed,
        _ => FabricState::NotSupported,
    };
    let cluster_uuid = uuid
        .iter()
        .any(|b| *b != 0)
        .then(|| uuid.iter().map(|b| format!("{b:02x}")).collect::<String>());
    FabricInfo {
        state,
        // nvml.h: status "is only meaningful when state is COMPLETED"; unknown codes are kept
        // by number (`return_name`), never folded into "unknown".
        status: (state == FabricState::Completed).then(|| return_name(status)),
        clique_id: Some(clique),
        cluster_uuid,
        health_mask: None,
        health_summary: None,
    }
}
