//! One GPU's readings, in the order they are asked. Two rules cut calls where an answer cannot
//! change: after a call answers `GPU_IS_LOST` the GPU is gone (XID 79), so every later reading
//! is recorded as lost without asking; and NVLink details are asked only of links that are up
//! (a down link has no remote end, and its state is the finding).

use std::cell::RefCell;

use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, RetirementCause, TemperatureThreshold,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError as WrapperError;
use nvml_wrapper::{Device, Nvml};

use super::{raw, reading, to_error};
use crate::answers::nvml::{
    Clocks, ComputeMode, CurrentPending, EccCounts, GpuProcess, MigDevice, NvLink, NvmlDevice,
    NvmlError, NvmlErrorKind, Reading, RetiredPages, normalize_bus_id,
};

/// Most processes listed per GPU (the name lookup is a call each).
const MAX_PROCESSES: usize = 32;

/// Highest link index asked; NVML answers `INVALID_ARGUMENT` past the GPU's real count
/// (`NVML_NVLINK_MAX_LINKS` grew from 12 to 18 to 36 across headers, gpu-health.md §6).
const MAX_NVLINKS: u32 = 36;

/// Most MIG indexes asked per GPU. A100 and H100 hold at most 7 MIG devices (7 compute slices);
/// the cap only bounds a nonsensical max count, so a broken driver cannot stretch the walk.
const MAX_MIG_DEVICES: u32 = 64;
const MIB: u64 = 1024 * 1024;

/// Told where the walk of one GPU is, so a GPU that hangs is named with the call it hung in
/// (`workers.rs` passes it on to the probe).
pub trait Progress {
    /// The handle arrived: the driver attached the GPU.
    fn handle(&self);
    /// Who the GPU is (bus id, UUID, name), before any reading.
    fn identity(&self, device: &NvmlDevice);
    /// About to ask this reading.
    fn asking(&self, field: &'static str);
}

/// Remembers the first reading that answered `GPU_IS_LOST`, and tells the probe which reading
/// is being asked (so a GPU that hangs is named with the call it hung in).
struct Lost<'p> {
    at: RefCell<Option<&'static str>>,
    progress: &'p dyn Progress,
}

impl Lost<'_> {
    /// Ask `call` unless the GPU was lost already; note a loss.
    fn read<T>(
        &self,
        field: &'static str,
        call: impl FnOnce() -> Result<T, WrapperError>,
    ) -> Reading<T> {
        if let Some(err) = self.error() {
            return Reading::Error(err);
        }
        self.progress.asking(field);
        let result = call();
        if matches!(result, Err(WrapperError::GpuLost)) {
            self.at.replace(Some(field));
        }
        reading(result)
    }

    /// Same, for readings made of several calls that already map their own errors.
    fn read_with<T>(&self, field: &'static str, call: impl FnOnce() -> Reading<T>) -> Reading<T> {
        if let Some(err) = self.error() {
            return Reading::Error(err);
        }
        self.progress.asking(field);
        let result = call();
        if result
            .error()
            .is_some_and(|e| e.kind == NvmlErrorKind::GpuIsLost)
        {
            self.at.replace(Some(field));
        }
        result
    }

    fn error(&self) -> Option<NvmlError> {
        self.at.borrow().map(|at| {
            NvmlError::new(
                NvmlErrorKind::GpuIsLost,
                format!("not asked: the gpu was lost at {at}"),
            )
        })
    }
}

/// Everything about GPU `index`. `progress` is told when the handle arrives, who the GPU is as
/// soon as that is known (so a GPU that hangs later is still named by its bus id), and each
/// reading before it is asked.
pub fn describe(nvml: &Nvml, index: u32, progress: &dyn Progress) -> NvmlDevice {
    let device = match nvml.device_by_index(index) {
        Ok(device) => {
            progress.handle();
            device
        }
        Err(err) => {
            return NvmlDevice {
                index,
                error: Some(to_error(&err)),
                ..NvmlDevice::default()
            };
        }
    };
    let mut out = NvmlDevice {
        index,
        pci_bus_id: device
            .pci_info()
            .ok()
            .and_then(|p| normalize_bus_id(&p.bus_id)),
        uuid: device.uuid().ok(),
        name: device.name().ok(),
        ..NvmlDevice::default()
    };
    progress.identity(&out);
    let lost = Lost {
        at: RefCell::new(None),
        progress,
    };
    let d = &device;
    out.serial = lost.read("serial", || d.serial());
    out.minor_number = lost.read("minor_number", || d.minor_number());
    out.persistence_mode = lost.read("persistence_mode", || d.is_in_persistent_mode());
    out.architecture = lost.read("architecture", || match d.architecture() {
        Ok(arch) => Ok(arch.as_c()),
        // An architecture newer than nvml-wrapper knows: keep its number.
        Err(WrapperError::UnexpectedVariant(code)) => Ok(code),
        Err(err) => Err(err),
    });
    out.mig_mode = lost.read("mig_mode", || {
        d.mig_mode().map(|m| CurrentPending {
            current: m.current == 1,
            pending: m.pending == 1,
        })
    });
    let mig_on = out.mig_on();
    out.mig_devices = lost.read_with("mig_devices", || mig_devices(d, &out.mig_mode));
    out.ecc_mode = lost.read("ecc_mode", || {
        d.is_ecc_enabled().map(|m| CurrentPending {
            current: m.currently_enabled,
            pending: m.pending_enabled,
        })
    });
    out.ecc_errors = lost.read("ecc_errors", || ecc_counts(d));
    out.retired_pages = lost.read("retired_pages", || retired_pages(d));
    out.remapped_rows = lost.read_with("remapped_rows", || {
        let direct = raw::remapped_rows(d);
        // nvml.h: NOT_SUPPORTED "if MIG is enabled" (gpu-health.md §4). Ask the field values
        // NVML_FI_DEV_REMAPPED_* instead, which may still answer; if they do not, the reading
        // stays "not supported" and driver.row_remap says it cannot be read under MIG.
        if mig_on && direct == Reading::NotSupported {
            raw::remapped_rows_fields(d)
        } else {
            direct
        }
    });
    out.temperature_c = lost.read_with("temperature_c", || raw::temperature(d));
    out.temperature_slowdown_c = lost.read("temperature_slowdown_c", || {
        d.temperature_threshold(TemperatureThreshold::Slowdown)
    });
    out.temperature_shutdown_c = lost.read("temperature_shutdown_c", || {
        d.temperature_threshold(TemperatureThreshold::Shutdown)
    });
    out.power_usage_mw = lost.read("power_usage_mw", || d.power_usage());
    out.power_limit_mw = lost.read("power_limit_mw", || d.enforced_power_limit());
    out.power_default_limit_mw = lost.read("power_default_limit_mw", || {
        d.power_management_limit_default()
    });
    out.clock_event_reasons = lost.read_with("clock_event_reasons", || raw::clock_event_reasons(d));
    // NOT_SUPPORTED on a GPU in MIG mode (nvitop#5: `nvmlDeviceGetUtilizationRates` raises
    // NotSupported on a MIG-enabled A100): kept as such, never read as idle.
    out.utilization_gpu_pct = lost.read("utilization_gpu_pct", || {
        d.utilization_rates().map(|u| u.gpu)
    });
    out.pcie_current_gen = lost.read("pcie_current_gen", || d.current_pcie_link_gen());
    out.pcie_max_gen = lost.read("pcie_max_gen", || d.max_pcie_link_gen());
    out.pcie_current_width = lost.read("pcie_current_width", || d.current_pcie_link_width());
    out.pcie_max_width = lost.read("pcie_max_width", || d.max_pcie_link_width());
    out.pcie_replay_counter = lost.read("pcie_replay_counter", || {
        d.pcie_replay_counter().map(u64::from)
    });
    out.compute_mode = lost.read("compute_mode", || {
        d.compute_mode().map(|m| {
            use nvml_wrapper::enum_wrappers::device::ComputeMode as M;
            match m {
                M::Default => ComputeMode::Default,
                M::ExclusiveThread => ComputeMode::ExclusiveThread,
                M::Prohibited => ComputeMode::Prohibited,
                M::ExclusiveProcess => ComputeMode::ExclusiveProcess,
            }
        })
    });
    out.compute_processes = lost.read("compute_processes", || {
        d.running_compute_processes()
            .map(|list| processes(nvml, list))
    });
    let nvlink5 = out.nvlink5();
    out.nvlinks = lost.read_with("nvlinks", || nvlinks(d, nvlink5));
    out.fabric = lost.read_with("fabric", || raw::fabric_info(d));
    out.vbios_version = lost.read("vbios_version", || d.vbios_version());
    out.inforom_image_version = lost.read("inforom_image_version", || d.info_rom_image_version());
    out.inforom_valid = lost.read("inforom_valid", || match d.validate_info_rom() {
        Ok(()) => Ok(true),
        // nvml.h nvmlDeviceValidateInforom: NVML_ERROR_CORRUPTED_INFOROM "if the device's
        // infoROM is corrupted, the checksum failed": the answer, not a failed call.
        Err(WrapperError::CorruptedInfoROM) => Ok(false),
        Err(err) => Err(err),
    });
    out.applications_clocks = lost.read("applications_clocks", || {
        clocks(|c| d.applications_clock(c))
    });
    out.default_applications_clocks = lost.read("default_applications_clocks", || {
        clocks(|c| d.default_applications_clock(c))
    });
    out.max_clocks = lost.read("max_clocks", || clocks(|c| d.max_clock_info(c)));
    out.board_part_number = lost.read("board_part_number", || d.board_part_number());
    out.module_id = lost.read_with("module_id", || raw::module_id(d));
    out
}

/// Graphics and memory clocks from one getter (`nvmlDeviceGet[Default]ApplicationsClock`,
/// `nvmlDeviceGetMaxClockInfo`) with `NVML_CLOCK_GRAPHICS` and `NVML_CLOCK_MEM`; either
/// failing fails the pair.
fn clocks(get: impl Fn(Clock) -> Result<u32, WrapperError>) -> Result<Clocks, WrapperError> {
    Ok(Clocks {
        graphics_mhz: get(Clock::Graphics)?,
        memory_mhz: get(Clock::Memory)?,
    })
}

/// NVML's process list with names, at most [`MAX_PROCESSES`].
fn processes(
    nvml: &Nvml,
    list: Vec<nvml_wrapper::struct_wrappers::device::ProcessInfo>,
) -> Vec<GpuProcess> {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    list.into_iter()
        .take(MAX_PROCESSES)
        .map(|p| GpuProcess {
            pid: p.pid,
            used_memory_mib: match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes / MIB),
                UsedGpuMemory::Unavailable => None,
            },
            // nvml.h: a buffer of NVML_DEVICE_NAME_BUFFER_SIZE-like length; 256 holds a path.
            name: nvml.sys_process_name(p.pid, 256).ok(),
        })
        .collect()
}

fn ecc_counts(device: &Device<'_>) -> Result<EccCounts, WrapperError> {
    let count = |kind, counter| device.total_ecc_errors(kind, counter);
    Ok(EccCounts {
        volatile_corrected: count(MemoryError::Corrected, EccCounter::Volatile)?,
        volatile_uncorrected: count(MemoryError::Uncorrected, EccCounter::Volatile)?,
        aggregate_corrected: count(MemoryError::Corrected, EccCounter::Aggregate)?,
        aggregate_uncorrected: count(MemoryError::Uncorrected, EccCounter::Aggregate)?,
    })
}

fn retired_pages(device: &Device<'_>) -> Result<RetiredPages, WrapperError> {
    Ok(RetiredPages {
        single_bit: device
            .retired_pages(RetirementCause::MultipleSingleBitEccErrors)?
            .len() as u32,
        double_bit: device
            .retired_pages(RetirementCause::DoubleBitEccError)?
            .len() as u32,
        pending: device.are_pages_pending_retired()?,
    })
}

/// Links 0.. until the driver says the index is invalid. No link at all: the GPU has no
/// NVLink. Only an active link is asked for its version, remote end and error counters; on
/// NVLink 5 the counters come from one field-value call for every active link instead of four
/// DL calls per link. NVLink 5 is known by the architecture (`nvlink5`: Blackwell or later),
/// never by what the DL calls answer there; only where the architecture is not reported does
/// a DL counter answering NOT_SUPPORTED on the first active link stand for it.
fn nvlinks(device: &Device<'_>, nvlink5: Option<bool>) -> Reading<Vec<NvLink>> {
    let mut links = Vec::new();
    // None until the architecture or the first active link says whether the DL counters exist.
    let mut dl_counters: Option<bool> = nvlink5.map(|five| !five);
    for link in 0..MAX_NVLINKS {
        let wrapper = device.link_wrapper_for(link);
        let active = match wrapper.is_active() {
            Ok(active) => active,
            Err(WrapperError::InvalidArg | WrapperError::NotSupported) => break,
            Err(err @ WrapperError::GpuLost) => return Reading::Error(to_error(&err)),
            Err(err) if links.is_empty() => return Reading::Error(to_error(&err)),
            // A link whose state cannot be read is not known to work: keep it, as inactive,
            // and go on, so one faulty link cannot hide the ones after it.
            Err(_) => false,
        };
        let mut entry = NvLink {
            link,
            active,
            version: Reading::NotSupported,
            remote_pci_bus_id: None,
            remote_type: Reading::NotSupported,
            replay_errors: Reading::NotSupported,
            recovery_errors: Reading::NotSupported,
            crc_flit_errors: Reading::NotSupported,
            crc_data_errors: Reading::NotSupported,
            rcv_errors: Reading::NotSupported,
            malformed_packet_errors: Reading::NotSupported,
            buffer_overrun_errors: Reading::NotSupported,
            local_link_integrity_errors: Reading::NotSupported,
            link_recovery_failed: Reading::NotSupported,
            symbol_errors: Reading::NotSupported,
            effective_errors: Reading::NotSupported,
        };
        if active {
            entry.version = reading(wrapper.version());
            entry.remote_pci_bus_id = wrapper
                .remote_pci_info()
                .ok()
                .and_then(|p| normalize_bus_id(&p.bus_id));
            entry.remote_type = raw::remote_type(device, link);
            if dl_counters != Some(false) {
                entry.replay_errors = reading(wrapper.error_counter(ErrorCounter::DlReplay));
                if dl_counters.is_none() {
                    dl_counters = Some(entry.replay_errors != Reading::NotSupported);
                }
                if dl_counters == Some(true) {
                    let counter = |c| reading(wrapper.error_counter(c));
                    entry.recovery_errors = counter(ErrorCounter::DlRecovery);
                    entry.crc_flit_errors = counter(ErrorCounter::DlCrcFlit);
                    entry.crc_data_errors = counter(ErrorCounter::DlCrcData);
                }
            }
        }
        links.push(entry);
    }
    if links.is_empty() {
        return Reading::NotSupported;
    }
    if dl_counters == Some(false) {
        raw::nvlink5_counters(device, &mut links);
    }
    Reading::Value(links)
}

/// The MIG devices of a GPU whose MIG mode is currently on (see `NvmlDevice::mig_devices`):
/// indexes 0 .. `nvmlDeviceGetMaxMigDeviceCount`, skipping the NOT_FOUND gaps nvml.h documents
/// for indexes without a compute instance. Off, pending or unsupported MIG: not walked, since
/// the max count is 0 then and would read as "no MIG devices".
fn mig_devices(device: &Device<'_>, mode: &Reading<CurrentPending>) -> Reading<Vec<MigDevice>> {
    if !mode.value().is_some_and(|m| m.current) {
        return Reading::NotSupported;
    }
    // nvml-wrapper 0.13's `mig_device_count` is nvmlDeviceGetMaxMigDeviceCount.
    let max = match device.mig_device_count() {
        Ok(max) => max,
        Err(err) => return reading(Err(err)),
    };
    let mut found = Vec::new();
    for index in 0..max.min(MAX_MIG_DEVICES) {
        match device.mig_device_by_index(index) {
            Ok(mig) => found.push(MigDevice {
                index,
                uuid: mig.uuid().ok(),
                name: mig.name().ok(),
                gpu_instance_id: raw::instance_id(&mig, raw::Instance::Gpu),
                compute_instance_id: raw::instance_id(&mig, raw::Instance::Compute),
                memory_total_mib: reading(mig.memory_info().map(|m| m.total / MIB)),
                error: None,
            }),
            Err(WrapperError::NotFound) => {}
            Err(err) => found.push(MigDevice {
                index,
                error: Some(to_error(&err)),
                ..MigDevice::default()
            }),
        }
    }
    Reading::Value(found)
}
