//! Writing answers into the caller's memory: out-pointers, string buffers, fixed C arrays,
//! and `nvmlPciInfo_t` filled from a sysfs bus id as the driver fills it.

use super::*;

/// Write `value` through an out-pointer; null is INVALID_ARGUMENT.
///
/// # Safety
/// `out` is null or valid for a write of one `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T) -> Answer {
    if out.is_null() {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and the caller guarantees it points to a writable `T`.
    unsafe { out.write(value) };
    Ok(())
}

/// Copy `text` and its NUL into a caller buffer of `length` bytes, or INSUFFICIENT_SIZE.
///
/// # Safety
/// `buffer` is null or valid for writes of `length` bytes.
pub(crate) unsafe fn put_str(buffer: *mut c_char, length: c_uint, text: &str) -> Answer {
    if buffer.is_null() {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    let bytes = text.as_bytes().split(|b| *b == 0).next().unwrap_or(&[]);
    if bytes.len() >= length as usize {
        return Err(ERROR_INSUFFICIENT_SIZE);
    }
    // SAFETY: the buffer holds `length` > bytes.len() bytes; source and buffer cannot overlap
    // (the source is this library's own heap data).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buffer, bytes.len());
        buffer.add(bytes.len()).write(0);
    }
    Ok(())
}

/// Copy as much of `text` as fits into a fixed C array, always NUL-terminated.
fn fill(array: &mut [c_char], text: &str) {
    let room = array.len().saturating_sub(1);
    for (dst, src) in array.iter_mut().zip(text.bytes().take(room)) {
        *dst = src as c_char;
    }
    for dst in array.iter_mut().skip(text.len().min(room)) {
        *dst = 0;
    }
}

/// `0000:18:00.0` (sysfs, as nvml.json holds it) → (domain, bus, device, function).
fn parse_bdf(text: &str) -> Option<(u32, u32, u32, u32)> {
    let (head, function) = text.trim().rsplit_once('.')?;
    let mut parts = head.rsplitn(3, ':');
    let device = parts.next()?;
    let bus = parts.next()?;
    let domain = parts.next().unwrap_or("0");
    Some((
        u32::from_str_radix(domain, 16).ok()?,
        u32::from_str_radix(bus, 16).ok()?,
        u32::from_str_radix(device, 16).ok()?,
        u32::from_str_radix(function, 16).ok()?,
    ))
}

/// `nvmlPciInfo_t` as the driver fills it: `busId` with an 8-hex-digit upper-case domain
/// (`00000000:18:00.0`), `busIdLegacy` with 4 (`0000:18:00.0`).
pub(crate) fn pci_info(bus_id: &str) -> PciInfo {
    let mut info = PciInfo {
        bus_id_legacy: [0; DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE],
        domain: 0,
        bus: 0,
        device: 0,
        pci_device_id: 0,
        pci_sub_system_id: 0,
        bus_id: [0; DEVICE_PCI_BUS_ID_BUFFER_SIZE],
    };
    match parse_bdf(bus_id) {
        Some((domain, bus, device, function)) => {
            info.domain = domain;
            info.bus = bus;
            info.device = device;
            fill(
                &mut info.bus_id,
                &format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}"),
            );
            fill(
                &mut info.bus_id_legacy,
                &format!("{domain:04X}:{bus:02X}:{device:02X}.{function:X}"),
            );
        }
        // Not a bus id: hand it over as written, for the caller to reject.
        None => {
            fill(&mut info.bus_id, bus_id);
            fill(&mut info.bus_id_legacy, bus_id);
        }
    }
    info
}
