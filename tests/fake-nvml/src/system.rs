//! Initialisation, shutdown and the system-wide calls: driver, NVML and CUDA versions, the
//! device count and the GPU handles.

use super::*;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    init()
}

/// Flags (`NVML_INIT_FLAG_NO_GPUS`, `..._NO_ATTACH`) change nothing here.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    let mut last = false;
    let answer = guard(|| {
        let mut st = state();
        if st.refs == 0 {
            return Err(ERROR_UNINITIALIZED);
        }
        st.refs -= 1;
        if st.refs == 0 {
            st.facts = None;
            last = true;
        }
        Ok(())
    });
    driver::on_shutdown(last);
    answer
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    error_string(result).as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    guard(|| {
        with_facts(|f| {
            let text = present(f.driver_version.as_deref())?;
            // SAFETY: `version` holds `length` bytes (nvml.h).
            unsafe { put_str(version, length, text) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    guard(|| {
        with_facts(|f| {
            let text = present(f.nvml_version.as_deref())?;
            // SAFETY: `version` holds `length` bytes (nvml.h).
            unsafe { put_str(version, length, text) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    guard(|| {
        with_facts(|f| {
            let v = present(f.cuda_driver_version)?;
            // SAFETY: `version` is an out-pointer for one int.
            unsafe { put(version, v) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> NvmlReturn {
    // SAFETY: same contract as the _v2 call.
    unsafe { nvmlSystemGetCudaDriverVersion_v2(version) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    guard(|| {
        with_facts(|f| {
            // SAFETY: `count` is an out-pointer for one unsigned int.
            unsafe { put(count, f.device_count) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> NvmlReturn {
    // SAFETY: same contract as the _v2 call.
    unsafe { nvmlDeviceGetCount_v2(count) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut Handle,
) -> NvmlReturn {
    driver::on_handle(index);
    let answer = guard(|| {
        with_facts(|f| {
            if index >= f.device_count {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // A count larger than the device list: nothing recorded for this index.
            let found = device_at(f, index).ok_or(ERROR_UNKNOWN)?;
            if let Some(err) = &found.error {
                return Err(nonzero(code_for_kind(&err.kind)));
            }
            let handle: Handle = std::ptr::without_provenance_mut(index as usize + 1);
            // SAFETY: `device` is an out-pointer for one nvmlDevice_t.
            unsafe { put(device, handle) }
        })
    });
    driver::handle_answered(index);
    answer
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut Handle,
) -> NvmlReturn {
    // SAFETY: same contract as the _v2 call.
    unsafe { nvmlDeviceGetHandleByIndex_v2(index, device) }
}
