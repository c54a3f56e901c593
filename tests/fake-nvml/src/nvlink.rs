//! NVLink per link: state, version, remote end and DL error counters; and the field values
//! that carry the NVLink 5 counters (`scopeId` = link) and the row-remap fields.

use super::*;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: Handle,
    link: c_uint,
    is_active: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_link(device, link, |l| {
            // SAFETY: `is_active` is an out-pointer for one nvmlEnableState_t.
            unsafe { put(is_active, enable_state(l.active)) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkVersion(
    device: Handle,
    link: c_uint,
    version: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_link(device, link, |l| {
            let value = read(&l.version)?;
            // SAFETY: `version` is an out-pointer for one unsigned int.
            unsafe { put(version, value) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: Handle,
    link: c_uint,
    pci: *mut PciInfo,
) -> NvmlReturn {
    guard(|| {
        with_link(device, link, |l| {
            let info = pci_info(present(l.remote_pci_bus_id.as_deref())?);
            // SAFETY: `pci` is an out-pointer for one nvmlPciInfo_t.
            unsafe { put(pci, info) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: Handle,
    link: c_uint,
    counter: c_uint,
    counter_value: *mut c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        // A Blackwell GPU's DL counters answer zeros here. What a given driver branch answers
        // for the legacy calls on NVLink 5 is not documented; zeros are the case an answer-based
        // test cannot tell from a quiet NVLink 4 link, so only the architecture may decide.
        let blackwell = with_device(device, |d| {
            if d.blackwell() {
                Ok(())
            } else {
                Err(ERROR_NOT_FOUND)
            }
        })
        .is_ok();
        with_link(device, link, |l| {
            if blackwell && counter <= NVLINK_ERROR_DL_CRC_DATA {
                // SAFETY: `counter_value` is an out-pointer for one unsigned long long.
                return unsafe { put(counter_value, 0u64) };
            }
            let value = match counter {
                NVLINK_ERROR_DL_REPLAY => read(&l.replay_errors)?,
                NVLINK_ERROR_DL_RECOVERY => read(&l.recovery_errors)?,
                NVLINK_ERROR_DL_CRC_FLIT => read(&l.crc_flit_errors)?,
                NVLINK_ERROR_DL_CRC_DATA => read(&l.crc_data_errors)?,
                NVLINK_ERROR_DL_ECC_DATA => return Err(ERROR_NOT_SUPPORTED),
                _ => return Err(ERROR_INVALID_ARGUMENT),
            };
            // SAFETY: `counter_value` is an out-pointer for one unsigned long long.
            unsafe { put(counter_value, value) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: Handle,
    link: c_uint,
    kind: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_link(device, link, |l| {
            let value = match read(&l.remote_type)? {
                RemoteType::Gpu => NVLINK_DEVICE_TYPE_GPU,
                RemoteType::Ibmnpu => NVLINK_DEVICE_TYPE_IBMNPU,
                RemoteType::Nvswitch => NVLINK_DEVICE_TYPE_SWITCH,
                RemoteType::Unknown => NVLINK_DEVICE_TYPE_UNKNOWN,
            };
            // SAFETY: `kind` is an out-pointer for one nvmlIntNvLinkDeviceType_t.
            unsafe { put(kind, value) }
        })
    })
}

// --- field values -------------------------------------------------------------------------------

/// One field value: the row-remap fields and the NVLink 5 counters (scopeId = link); any other
/// id NOT_SUPPORTED, as a driver answers a field its GPU lacks.
fn field_value(d: &Device, field: c_uint, scope: c_uint) -> Result<u64, NvmlReturn> {
    let rows = || read(&d.remapped_rows);
    let link = |get: fn(&NvLink) -> &Reading<u64>| -> Result<u64, NvmlReturn> {
        match &d.nvlinks {
            Reading::Value(links) => {
                let l = links
                    .iter()
                    .find(|l| l.link == scope)
                    .ok_or(ERROR_INVALID_ARGUMENT)?;
                read(get(l))
            }
            Reading::NotSupported => Err(ERROR_NOT_SUPPORTED),
            Reading::Error(e) => Err(nonzero(code_for_kind(e.kind()))),
        }
    };
    match field {
        FI_DEV_REMAPPED_COR => rows().map(|r| u64::from(r.correctable)),
        FI_DEV_REMAPPED_UNC => rows().map(|r| u64::from(r.uncorrectable)),
        FI_DEV_REMAPPED_PENDING => rows().map(|r| u64::from(r.pending)),
        FI_DEV_REMAPPED_FAILURE => rows().map(|r| u64::from(r.failure)),
        FI_DEV_NVLINK_COUNT_RCV_ERRORS => link(|l| &l.rcv_errors),
        FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS => link(|l| &l.malformed_packet_errors),
        FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS => link(|l| &l.buffer_overrun_errors),
        FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS => link(|l| &l.local_link_integrity_errors),
        FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS => link(|l| &l.link_recovery_failed),
        FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS => link(|l| &l.symbol_errors),
        FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS => link(|l| &l.effective_errors),
        _ => Err(ERROR_NOT_SUPPORTED),
    }
}

/// `nvmlDeviceGetFieldValues`: each entry gets its own `nvmlReturn` (nvml.h).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: Handle,
    values_count: c_int,
    values: *mut FieldValue,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let count = usize::try_from(values_count).map_err(|_| ERROR_INVALID_ARGUMENT)?;
            if values.is_null() || count == 0 {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            for i in 0..count {
                // SAFETY: the caller passes `values_count` initialised entries (nvml.h).
                let entry = unsafe { &mut *values.add(i) };
                match field_value(d, entry.field_id, entry.scope_id) {
                    Ok(v) => {
                        entry.nvml_return = SUCCESS;
                        entry.value_type = VALUE_TYPE_UNSIGNED_LONG_LONG;
                        entry.value = Value { ull_val: v };
                    }
                    Err(code) => entry.nvml_return = code,
                }
            }
            Ok(())
        })
    })
}
