//! Memory health: ECC mode and error counts, retired pages and remapped rows.

use super::*;
use crate::identity::device_u32;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: Handle,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let mode = read(&d.ecc_mode)?;
            // SAFETY: two out-pointers for one nvmlEnableState_t each.
            unsafe {
                put(current, enable_state(mode.current))?;
                put(pending, enable_state(mode.pending))
            }
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: Handle,
    error_type: c_uint,
    counter_type: c_uint,
    ecc_counts: *mut c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let counts = read(&d.ecc_errors)?;
            let value = match (error_type, counter_type) {
                (MEMORY_ERROR_TYPE_CORRECTED, VOLATILE_ECC) => counts.volatile_corrected,
                (MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC) => counts.volatile_uncorrected,
                (MEMORY_ERROR_TYPE_CORRECTED, AGGREGATE_ECC) => counts.aggregate_corrected,
                (MEMORY_ERROR_TYPE_UNCORRECTED, AGGREGATE_ECC) => counts.aggregate_uncorrected,
                _ => return Err(ERROR_INVALID_ARGUMENT),
            };
            // SAFETY: `ecc_counts` is an out-pointer for one unsigned long long.
            unsafe { put(ecc_counts, value) }
        })
    })
}

/// `nvmlDeviceGetRetiredPages[_v2]`: `*page_count` in is the buffers' capacity, out the number
/// of pages for `cause`; too small a capacity (0 asks for the size) is INSUFFICIENT_SIZE with
/// nothing written to the buffers, which is what nvml-wrapper's two-call protocol expects.
///
/// # Safety
/// `page_count` is valid; `addresses` (and `timestamps` unless null) hold `*page_count` entries.
unsafe fn retired_pages(
    device: Handle,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            let pages = read(&d.retired_pages)?;
            let count = match cause {
                PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS => pages.single_bit,
                PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR => pages.double_bit,
                _ => return Err(ERROR_INVALID_ARGUMENT),
            };
            if page_count.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: non-null, valid for a read and write of one unsigned int (nvml.h).
            let capacity = unsafe { page_count.read() };
            // SAFETY: as above.
            unsafe { page_count.write(count) };
            if capacity < count {
                return Err(ERROR_INSUFFICIENT_SIZE);
            }
            if count > 0 && addresses.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            for i in 0..count as usize {
                // Made-up but stable page addresses (4 KiB pages, one region per cause) and
                // timestamps (seconds since the epoch).
                let address = (u64::from(cause) << 32) | ((i as u64 + 1) << 12);
                // SAFETY: i < count <= capacity entries in each caller buffer.
                unsafe {
                    addresses.add(i).write(address);
                    if !timestamps.is_null() {
                        timestamps.add(i).write(1_700_000_000 + i as u64);
                    }
                }
            }
            Ok(())
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: Handle,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> NvmlReturn {
    // SAFETY: the caller's buffers, as nvml.h specifies; no timestamps buffer.
    unsafe { retired_pages(device, cause, page_count, addresses, std::ptr::null_mut()) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: Handle,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> NvmlReturn {
    // SAFETY: the caller's buffers, as nvml.h specifies.
    unsafe { retired_pages(device, cause, page_count, addresses, timestamps) }
}

device_u32!(nvmlDeviceGetRetiredPagesPendingStatus, |d: &Device| read(
    &d.retired_pages
)
.map(|p| enable_state(p.pending)));

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: Handle,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| {
            // nvml.h: NOT_SUPPORTED "if MIG is enabled"; the field values still answer.
            if matches!(&d.mig_mode, Reading::Value(m) if m.current) {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let rows = read(&d.remapped_rows)?;
            // SAFETY: four out-pointers for one unsigned int each.
            unsafe {
                put(corr_rows, rows.correctable)?;
                put(unc_rows, rows.uncorrectable)?;
                put(is_pending, c_uint::from(rows.pending))?;
                put(failure_occurred, c_uint::from(rows.failure))
            }
        })
    })
}
