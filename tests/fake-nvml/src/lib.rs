//! A stand-in `libnvidia-ml.so` for tests: it exports the NVML C functions gpudoctor's live
//! probe (src/source/nvml_live.rs, through nvml-wrapper 0.13) reaches, and answers them from a
//! gpudoctor `nvml.json` named by `GPUDOCTOR_FAKE_NVML_JSON`. The file is read again at every
//! `nvmlInit*`, so one process can walk many fixtures; `nvmlShutdown` forgets it.
//!
//! How `nvml.json` becomes NVML answers:
//! - `init_error.kind` → `nvmlInit*` returns that code (`not_recorded`, `unreadable` → UNKNOWN);
//! - a device with `error` → `nvmlDeviceGetHandleByIndex` returns its code;
//! - a reading `"not_supported"` → NOT_SUPPORTED; `{"error": {"kind": K}}` → K's code (an
//!   older capture's `{"error": "text"}` → UNKNOWN); an absent optional string (`uuid`,
//!   `pci_bus_id`, ...) → NOT_SUPPORTED;
//! - NVLink: a link index the list lacks → INVALID_ARGUMENT (how the real library ends the
//!   walk); `nvlinks: "not_supported"` → NOT_SUPPORTED for every link;
//! - fabric with `health_summary` → `nvmlDeviceGetGpuFabricInfoV` fills the v3 struct; with a
//!   `health_mask` but no summary it refuses v3 with ARGUMENT_VERSION_MISMATCH and fills v2 (a
//!   driver before the v3 struct); with neither it answers NOT_SUPPORTED, and only the v1
//!   `nvmlDeviceGetGpuFabricInfo` answers (the fallback gpudoctor must take);
//! - `architecture` → `nvmlDeviceGetArchitecture`; on a Blackwell GPU (10 or later) the DL
//!   NVLink error counters answer zeros (undocumented for NVLink 5, and the case only the
//!   architecture can tell apart: its counters are the field values below);
//! - `remapped_rows` on a GPU with MIG on → `nvmlDeviceGetRemappedRows` NOT_SUPPORTED (nvml.h),
//!   the field values `NVML_FI_DEV_REMAPPED_*` answer instead; NVLink 5 counters
//!   (`rcv_errors`, `symbol_errors`, ...) answer as `NVML_FI_DEV_NVLINK_COUNT_*` field values
//!   with `scopeId` = link;
//! - `mig_devices` with a list → `nvmlDeviceGetMaxMigDeviceCount` says 7 (A100/H100, or more
//!   when an index needs it), an index the list lacks answers NOT_FOUND (the gaps real NVML
//!   leaves), a MIG device with `error` answers that kind's code; `"not_supported"` or absent →
//!   NOT_SUPPORTED from the max count (what gpudoctor records when it did not enumerate).
//!
//! - timing (`driver.rs`): init that hangs, one hung GPU, GPUs that initialise one after another
//!   under the driver's lock (persistence mode off), one wedged GPU that stalls its siblings, an
//!   `nvmlShutdown` that does not return, and a log of `nvmlInit`/`nvmlShutdown` calls;
//! - built with `--features old-driver`: without the symbols newer drivers added
//!   (`nvmlDeviceGetGpuFabricInfoV`, `nvmlDeviceGetCurrentClocksEventReasons`), so gpudoctor's
//!   fallbacks to the older calls run.
//!
//! Sleeps happen before this library's own state lock is taken; only `driver.rs`'s driver lock
//! (the real driver's) makes one GPU wait for another.
//!
//! Nothing may unwind into C: every entry point runs inside `catch_unwind` and a panic becomes
//! `NVML_ERROR_UNKNOWN`. Device handles are `index + 1` as a pointer, MIG device handles
//! [`MIG_HANDLE_BASE`] + (GPU index << 8) + MIG index, checked on every call: a GPU-only query
//! on a MIG handle, or a MIG-only one on a GPU handle, is refused as real NVML does.
//!
//! Modules: `state.rs` (the loaded file, the guard, handle checks), `out_params.rs` (writing into
//! the caller's memory), and the entry points by group: `system.rs`, `identity.rs`,
//! `memory_health.rs`, `thermal_power.rs`, `pcie_mig.rs`, `nvlink.rs` (with field values),
//! `fabric.rs`; `ffi.rs` holds nvml.h's types, `model.rs` nvml.json's, `driver.rs` the timing.

#![allow(non_snake_case)]
// Every entry point's safety contract is nvml.h's: the pointers are valid for the documented
// types and buffer sizes. A `# Safety` section on each of ~40 functions would only repeat it.
#![allow(clippy::missing_safety_doc)]
// The old-driver build leaves the newer structs and constants unused.
#![cfg_attr(feature = "old-driver", allow(dead_code))]

mod driver;
mod ffi;
mod model;
mod out_params;
mod state;

// The exported entry points, one module per group of nvml.h calls.
mod fabric;
mod identity;
mod memory_health;
mod nvlink;
mod pcie_mig;
mod system;
mod thermal_power;

// What every module above takes with `use super::*`.
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use ffi::*;
use model::{
    Clocks, Device, FabricInfo, FabricState, Facts, MigDevice, NvLink, Reading, RemoteType,
};
use out_params::*;
use state::*;

/// The environment variable naming the `nvml.json` to answer from.
pub const ENV_JSON: &str = "GPUDOCTOR_FAKE_NVML_JSON";
pub use driver::{
    ENV_CALL_LOG, ENV_HANG_DEVICE, ENV_HANG_SECS, ENV_SERIAL_INIT_MS, ENV_SHUTDOWN_HANG_SECS,
    ENV_WEDGE_DEVICE,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn text(array: &[c_char]) -> String {
        array
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8 as char)
            .collect()
    }

    #[test]
    fn bus_ids_come_out_in_nvml_form() {
        let info = pci_info("0000:9a:00.0");
        assert_eq!(text(&info.bus_id), "00000000:9A:00.0");
        assert_eq!(text(&info.bus_id_legacy), "0000:9A:00.0");
        assert_eq!((info.domain, info.bus, info.device), (0, 0x9a, 0));
    }

    #[test]
    fn mig_handles_never_look_like_gpu_handles() {
        let handle = mig_handle(3, 6).unwrap();
        assert_eq!(mig_parts(handle), Some((3, 6)));
        assert_eq!(mig_parts(std::ptr::without_provenance_mut(4)), None);
        assert!(mig_handle(0, 256).is_none());
    }

    #[test]
    fn strings_respect_the_buffer_length() {
        let mut buffer = [1 as c_char; 6];
        // SAFETY: a local buffer of the announced length.
        unsafe {
            assert_eq!(
                put_str(buffer.as_mut_ptr(), 6, "abcdef"),
                Err(ERROR_INSUFFICIENT_SIZE)
            );
            assert_eq!(put_str(buffer.as_mut_ptr(), 6, "abcde"), Ok(()));
        }
        assert_eq!(text(&buffer), "abcde");
    }
}
