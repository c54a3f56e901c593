//! What identifies a GPU: PCI info, serial, UUID, name, VBIOS and InfoROM, board part number,
//! module id and architecture, clocks as set and their maxima, persistence mode; and the
//! `device_u32!` macro the other groups use for one-`unsigned int` getters.

use super::*;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: Handle, pci: *mut PciInfo) -> NvmlReturn {
    guard(|| {
        driver::identifying(|| {
            with_device(device, |d| {
                let info = pci_info(present(d.pci_bus_id.as_deref())?);
                // SAFETY: `pci` is an out-pointer for one nvmlPciInfo_t.
                unsafe { put(pci, info) }
            })
        })
    })
}

macro_rules! device_string {
    ($name:ident, $get:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            device: Handle,
            buffer: *mut c_char,
            length: c_uint,
        ) -> NvmlReturn {
            guard(|| {
                with_device(device, |d| {
                    let text: String = $get(d)?;
                    // SAFETY: `buffer` holds `length` bytes (nvml.h).
                    unsafe { put_str(buffer, length, &text) }
                })
            })
        }
    };
}

device_string!(nvmlDeviceGetSerial, |d: &Device| read(&d.serial));
device_string!(nvmlDeviceGetVbiosVersion, |d: &Device| read(
    &d.vbios_version
));
device_string!(nvmlDeviceGetInforomImageVersion, |d: &Device| read(
    &d.inforom_image_version
));
device_string!(nvmlDeviceGetBoardPartNumber, |d: &Device| read(
    &d.board_part_number
));

/// nvml.h: `NVML_SUCCESS` when the InfoROM checksum holds, `NVML_ERROR_CORRUPTED_INFOROM` when
/// it does not.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceValidateInforom(device: Handle) -> NvmlReturn {
    guard(|| {
        with_device(device, |d| match read(&d.inforom_valid)? {
            true => Ok(()),
            false => Err(ERROR_CORRUPTED_INFOROM),
        })
    })
}

/// One clock of a recorded pair: `NVML_CLOCK_GRAPHICS` and `NVML_CLOCK_MEM` as recorded; the
/// SM clock follows the graphics clock on the GPUs NVML sets application clocks for (nvidia-smi
/// prints no SM application clock); any other type `INVALID_ARGUMENT`.
fn clock_of(clocks: Clocks, clock_type: c_uint) -> Result<c_uint, NvmlReturn> {
    match clock_type {
        CLOCK_GRAPHICS | CLOCK_SM => Ok(clocks.graphics_mhz),
        CLOCK_MEM => Ok(clocks.memory_mhz),
        _ => Err(ERROR_INVALID_ARGUMENT),
    }
}

macro_rules! device_clock {
    ($name:ident, $field:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            device: Handle,
            clock_type: c_uint,
            mhz: *mut c_uint,
        ) -> NvmlReturn {
            guard(|| {
                with_device(device, |d| {
                    let value = clock_of(read(&d.$field)?, clock_type)?;
                    // SAFETY: `mhz` is an out-pointer for one unsigned int.
                    unsafe { put(mhz, value) }
                })
            })
        }
    };
}

device_clock!(nvmlDeviceGetApplicationsClock, applications_clocks);
device_clock!(
    nvmlDeviceGetDefaultApplicationsClock,
    default_applications_clocks
);
device_clock!(nvmlDeviceGetMaxClockInfo, max_clocks);

/// A string getter NVML answers for GPU and MIG handles alike.
macro_rules! device_or_mig_string {
    ($name:ident, $gpu:expr, $mig:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            device: Handle,
            buffer: *mut c_char,
            length: c_uint,
        ) -> NvmlReturn {
            guard(|| {
                let write = |text: String| {
                    // SAFETY: `buffer` holds `length` bytes (nvml.h).
                    unsafe { put_str(buffer, length, &text) }
                };
                if mig_parts(device).is_some() {
                    with_mig(device, |m| write($mig(m)?))
                } else {
                    // UUID and name identify a GPU: a wedged one still answers them.
                    driver::identifying(|| with_device(device, |d| write($gpu(d)?)))
                }
            })
        }
    };
}

device_or_mig_string!(
    nvmlDeviceGetUUID,
    |d: &Device| present(d.uuid.clone()),
    |m: &MigDevice| present(m.uuid.clone())
);
device_or_mig_string!(
    nvmlDeviceGetName,
    |d: &Device| present(d.name.clone()),
    |m: &MigDevice| present(m.name.clone())
);

/// A getter with one `unsigned int` out-parameter, answered from a `Reading<u32>` field.
macro_rules! device_u32 {
    ($name:ident, $get:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(device: Handle, out: *mut c_uint) -> NvmlReturn {
            guard(|| {
                with_device(device, |d| {
                    let value: c_uint = $get(d)?;
                    // SAFETY: `out` is an out-pointer for one unsigned int.
                    unsafe { put(out, value) }
                })
            })
        }
    };
}
pub(crate) use device_u32;

device_u32!(nvmlDeviceGetMinorNumber, |d: &Device| read(&d.minor_number));
device_u32!(nvmlDeviceGetModuleId, |d: &Device| read(&d.module_id));
device_u32!(nvmlDeviceGetArchitecture, |d: &Device| read(
    &d.architecture
));
device_u32!(nvmlDeviceGetPersistenceMode, |d: &Device| read(
    &d.persistence_mode
)
.map(enable_state));
