//! Temperatures and their thresholds, compute mode and running processes, power, clock event
//! (throttle) reasons and utilisation.

use super::*;
use crate::identity::device_u32;

/// `nvmlProcessInfo_t` (v2 layout, what `nvmlDeviceGetComputeRunningProcesses_v3` fills).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// nvml.h `NVML_VALUE_NOT_AVAILABLE`: used memory NVML could not read.
const VALUE_NOT_AVAILABLE: c_ulonglong = c_ulonglong::MAX;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: Handle,
    sensor: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    // Deprecated in nvml.h for a successor this build exports: logged, so a test can hold
    // gpudoctor to the successor.
    #[cfg(not(feature = "old-driver"))]
    driver::deprecated("nvmlDeviceGetTemperature");
    guard(|| {
        with_device(device, |d| {
            if sensor != TEMPERATURE_GPU {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let value = read(&d.temperature_c)?;
            // SAFETY: `temp` is an out-pointer for one unsigned int.
            unsafe { put(temp, value) }
        })
    })
}

/// The successor of the deprecated call (nvml.h), absent from the old-driver build.
#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureV(
    device: Handle,
    temperature: *mut TemperatureV1,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            if temperature.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: non-null; the struct starts with its version word.
            let asked = unsafe { temperature.read() };
            if asked.version != TEMPERATURE_V1 {
                return Err(ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            if asked.sensor_type != TEMPERATURE_GPU {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let value = read(&d.temperature_c)?;
            let out = TemperatureV1 {
                temperature: c_int::try_from(value).unwrap_or(c_int::MAX),
                ..asked
            };
            // SAFETY: an out-pointer for one versioned struct.
            unsafe { put(temperature, out) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: Handle,
    threshold_type: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let value = match threshold_type {
                TEMPERATURE_THRESHOLD_SHUTDOWN => read(&d.temperature_shutdown_c)?,
                TEMPERATURE_THRESHOLD_SLOWDOWN => read(&d.temperature_slowdown_c)?,
                _ => return Err(ERROR_NOT_SUPPORTED),
            };
            // SAFETY: `temp` is an out-pointer for one unsigned int.
            unsafe { put(temp, value) }
        })
    })
}

// `compute_mode` → `nvmlComputeMode_t`: 0 default, 1 exclusive thread, 2 prohibited, 3
// exclusive process (nvml.h).
device_u32!(nvmlDeviceGetComputeMode, |d: &Device| {
    match read(&d.compute_mode)?.as_str() {
        "default" => Ok(0),
        "exclusive_thread" => Ok(1),
        "prohibited" => Ok(2),
        "exclusive_process" => Ok(3),
        _ => Err(ERROR_UNKNOWN),
    }
});

/// nvml.h: `*infoCount` in, the count out; INSUFFICIENT_SIZE (with the count) when the array
/// is too small, which is how callers ask for the count with a NULL array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: Handle,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let list = read(&d.compute_processes)?;
            if count.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: `count` is a valid in/out pointer (nvml.h).
            let room = unsafe { count.read() } as usize;
            // SAFETY: as above.
            unsafe { count.write(list.len() as c_uint) };
            if room < list.len() || (infos.is_null() && !list.is_empty()) {
                return Err(ERROR_INSUFFICIENT_SIZE);
            }
            for (i, p) in list.iter().enumerate() {
                let info = ProcessInfo {
                    pid: p.pid,
                    used_gpu_memory: p
                        .used_memory_mib
                        .map_or(VALUE_NOT_AVAILABLE, |m| m * 1024 * 1024),
                    gpu_instance_id: c_uint::MAX,
                    compute_instance_id: c_uint::MAX,
                };
                // SAFETY: the caller's array holds `room` >= len entries.
                unsafe { infos.add(i).write(info) };
            }
            Ok(())
        })
    })
}

/// The name of a process some GPU lists, NOT_FOUND for any other pid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    // As the real library: the process table of this process's own PID namespace (the test
    // machine's, as a container's would be), never the recorded name. A recorded pid is not
    // there, or is another process.
    guard(|| {
        with_facts(|_| {
            let cmdline =
                std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|_| ERROR_NOT_FOUND)?;
            let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            let text = String::from_utf8_lossy(first).into_owned();
            if text.is_empty() {
                return Err(ERROR_NOT_FOUND);
            }
            // SAFETY: `name` holds `length` bytes (nvml.h).
            unsafe { put_str(name, length, &text) }
        })
    })
}

device_u32!(nvmlDeviceGetPowerUsage, |d: &Device| read(
    &d.power_usage_mw
));
device_u32!(nvmlDeviceGetEnforcedPowerLimit, |d: &Device| read(
    &d.power_limit_mw
));
device_u32!(nvmlDeviceGetPowerManagementDefaultLimit, |d: &Device| read(
    &d.power_default_limit_mw
));

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    device: Handle,
    reasons: *mut c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let value = read(&d.clock_event_reasons)?;
            // SAFETY: `reasons` is an out-pointer for one unsigned long long.
            unsafe { put(reasons, value) }
        })
    })
}

/// The pre-R535 name of the same call (same bits).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: Handle,
    reasons: *mut c_ulonglong,
) -> NvmlReturn {
    // Deprecated in nvml.h for a successor this build exports: logged, so a test can hold
    // gpudoctor to the successor.
    #[cfg(not(feature = "old-driver"))]
    driver::deprecated("nvmlDeviceGetCurrentClocksThrottleReasons");
    guard(|| {
        with_device(device, |d| {
            let value = read(&d.clock_event_reasons)?;
            // SAFETY: `reasons` is an out-pointer for one unsigned long long.
            unsafe { put(reasons, value) }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: Handle,
    utilization: *mut Utilization,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let gpu = read(&d.utilization_gpu_pct)?;
            // Memory utilisation is not in nvml.json; gpudoctor does not read it.
            // SAFETY: `utilization` is an out-pointer for one nvmlUtilization_t.
            unsafe { put(utilization, Utilization { gpu, memory: 0 }) }
        })
    })
}
