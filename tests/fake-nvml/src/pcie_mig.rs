//! PCIe link generation, width and replay counter; MIG mode, MIG device handles and what a
//! MIG device answers (instance ids, memory).

use super::*;
use crate::identity::device_u32;

device_u32!(nvmlDeviceGetCurrPcieLinkGeneration, |d: &Device| read(
    &d.pcie_current_gen
));
device_u32!(nvmlDeviceGetMaxPcieLinkGeneration, |d: &Device| read(
    &d.pcie_max_gen
));
device_u32!(nvmlDeviceGetCurrPcieLinkWidth, |d: &Device| read(
    &d.pcie_current_width
));
device_u32!(nvmlDeviceGetMaxPcieLinkWidth, |d: &Device| read(
    &d.pcie_max_width
));
// The C counter is 32 bits; a larger recorded value cannot be answered.
device_u32!(nvmlDeviceGetPcieReplayCounter, |d: &Device| read(
    &d.pcie_replay_counter
)
.and_then(|v| c_uint::try_from(v).map_err(|_| ERROR_UNKNOWN)));

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: Handle,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let mode = read(&d.mig_mode)?;
            // SAFETY: two out-pointers for one unsigned int each (NVML_DEVICE_MIG_ENABLE = 1).
            unsafe {
                put(current, c_uint::from(mode.current))?;
                put(pending, c_uint::from(mode.pending))
            }
        })
    })
}

/// `nvmlDeviceGetMaxMigDeviceCount`: how many MIG indexes to walk.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: Handle,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let list = read(&d.mig_devices)?;
            let needed = list.iter().map(|m| m.index.saturating_add(1)).max();
            let max = needed.unwrap_or(0).max(MAX_MIG_DEVICES);
            // SAFETY: `count` is an out-pointer for one unsigned int.
            unsafe { put(count, max) }
        })
    })
}

/// `nvmlDeviceGetMigDeviceHandleByIndex`: NOT_FOUND for an index without a MIG device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: Handle,
    index: c_uint,
    mig_device: *mut Handle,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let list = match &d.mig_devices {
                Reading::Value(list) => list,
                Reading::NotSupported => return Err(ERROR_NOT_SUPPORTED),
                Reading::Error(e) => return Err(nonzero(code_for_kind(e.kind()))),
            };
            let found = list
                .iter()
                .find(|m| m.index == index)
                .ok_or(ERROR_NOT_FOUND)?;
            if let Some(err) = &found.error {
                return Err(nonzero(code_for_kind(&err.kind)));
            }
            let handle = mig_handle(d.index, index).ok_or(ERROR_INVALID_ARGUMENT)?;
            // SAFETY: `mig_device` is an out-pointer for one nvmlDevice_t.
            unsafe { put(mig_device, handle) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: Handle,
    is_mig: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let answer = if mig_parts(device).is_some() {
            with_mig(device, |_| Ok(()))?;
            1
        } else {
            with_device(device, |_| Ok(()))?;
            0
        };
        // SAFETY: `is_mig` is an out-pointer for one unsigned int.
        unsafe { put(is_mig, answer) }
    })
}

/// A getter with one `unsigned int` out-parameter that only MIG handles answer; a GPU handle
/// gets NOT_SUPPORTED (nvml.h: "if device is not a MIG device").
macro_rules! mig_u32 {
    ($name:ident, $get:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(device: Handle, out: *mut c_uint) -> NvmlReturn {
            guard(|| {
                if mig_parts(device).is_none() {
                    return with_device(device, |_| Err(ERROR_NOT_SUPPORTED));
                }
                with_mig(device, |m| {
                    let value: c_uint = $get(m)?;
                    // SAFETY: `out` is an out-pointer for one unsigned int.
                    unsafe { put(out, value) }
                })
            })
        }
    };
}

mig_u32!(nvmlDeviceGetGpuInstanceId, |m: &MigDevice| read(
    &m.gpu_instance_id
));
mig_u32!(nvmlDeviceGetComputeInstanceId, |m: &MigDevice| read(
    &m.compute_instance_id
));

/// `nvmlDeviceGetMemoryInfo_v2`: a MIG device's memory from `memory_total_mib` (all free). A
/// GPU's own memory is not in `nvml.json`: NOT_SUPPORTED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: Handle,
    memory: *mut MemoryV2,
) -> NvmlReturn {
    guard(|| {
        if mig_parts(device).is_none() {
            return with_device(device, |_| Err(ERROR_NOT_SUPPORTED));
        }
        with_mig(device, |m| {
            let total = read(&m.memory_total_mib)?
                .checked_mul(1024 * 1024)
                .ok_or(ERROR_UNKNOWN)?;
            if memory.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: non-null; the struct starts with its `version` word.
            let version = unsafe { memory.cast::<c_uint>().read() };
            if version != MEMORY_V2 {
                return Err(ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            let out = MemoryV2 {
                version,
                total,
                reserved: 0,
                free: total,
                used: 0,
            };
            // SAFETY: the caller announced a v2 struct.
            unsafe { put(memory, out) }
        })
    })
}
