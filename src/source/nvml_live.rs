//! The live NVML probe: loads `libnvidia-ml.so.1` (or `--nvml-lib`) through nvml-wrapper and
//! fills [`NvmlFacts`]. Every per-device call is kept as a [`Reading`], so one failing query or
//! one lost GPU never hides the rest (reference/gpu-health.md §1).
//!
//! NVML can hang on a wedged GPU (init waits on the driver), so [`probe`] runs in a thread and
//! gives up after the caller's budget; the thread is left behind and dies with the process.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use nvml_wrapper::bitmasks::InitFlags;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, RetirementCause, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError as WrapperError;
use nvml_wrapper::{Device, Nvml};

use crate::facts::nvml::{
    CurrentPending, EccCounts, MigDevice, NvLink, NvmlDevice, NvmlError, NvmlErrorKind, NvmlFacts,
    Reading, RetiredPages, normalize_bus_id,
};

/// Query NVML, giving up after `budget`.
pub fn probe(lib_path: Option<PathBuf>, budget: Duration) -> NvmlFacts {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("nvml-probe".into())
        .spawn(move || {
            let facts = collect(lib_path);
            let _ = tx.send(facts);
        });
    if let Err(err) = spawned {
        return NvmlFacts::failed(
            NvmlErrorKind::Unknown,
            format!("could not start the nvml probe: {err}"),
        );
    }
    match rx.recv_timeout(budget) {
        Ok(facts) => facts,
        Err(mpsc::RecvTimeoutError::Timeout) => NvmlFacts::failed(
            NvmlErrorKind::Timeout,
            format!("nvml did not answer within {} s", budget.as_secs_f32()),
        ),
        Err(mpsc::RecvTimeoutError::Disconnected) => NvmlFacts::failed(
            NvmlErrorKind::Unknown,
            "the nvml probe stopped without an answer",
        ),
    }
}

fn collect(lib_path: Option<PathBuf>) -> NvmlFacts {
    let mut builder = Nvml::builder();
    // NO_GPUS: a node whose GPUs all fell off the bus still initialises, so the count check can
    // name what is missing instead of one opaque init error.
    builder.flags(InitFlags::NO_GPUS);
    if let Some(path) = lib_path.as_deref() {
        builder.lib_path(OsStr::new(path));
    }
    let nvml = match builder.init() {
        Ok(nvml) => nvml,
        Err(err) => return NvmlFacts::failed(error_kind(&err), err.to_string()),
    };
    let device_count = match nvml.device_count() {
        Ok(n) => n,
        Err(err) => return NvmlFacts::failed(error_kind(&err), format!("device count: {err}")),
    };
    let devices = (0..device_count)
        .map(|index| match nvml.device_by_index(index) {
            Ok(device) => describe(index, &device),
            Err(err) => NvmlDevice {
                index,
                error: Some(to_error(&err)),
                ..NvmlDevice::default()
            },
        })
        .collect();
    NvmlFacts {
        init_error: None,
        driver_version: nvml.sys_driver_version().ok(),
        nvml_version: nvml.sys_nvml_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok(),
        device_count,
        devices,
    }
}

fn describe(index: u32, device: &Device<'_>) -> NvmlDevice {
    let mig_mode = reading(device.mig_mode().map(|m| CurrentPending {
        current: m.current == 1,
        pending: m.pending == 1,
    }));
    let mig_devices = mig_devices(device, &mig_mode);
    NvmlDevice {
        index,
        pci_bus_id: device
            .pci_info()
            .ok()
            .and_then(|p| normalize_bus_id(&p.bus_id)),
        uuid: device.uuid().ok(),
        name: device.name().ok(),
        serial: reading(device.serial()),
        minor_number: reading(device.minor_number()),
        persistence_mode: reading(device.is_in_persistent_mode()),
        error: None,
        ecc_mode: reading(device.is_ecc_enabled().map(|m| CurrentPending {
            current: m.currently_enabled,
            pending: m.pending_enabled,
        })),
        ecc_errors: ecc_counts(device),
        retired_pages: retired_pages(device),
        remapped_rows: raw::remapped_rows(device),
        temperature_c: reading(device.temperature(TemperatureSensor::Gpu)),
        temperature_slowdown_c: reading(
            device.temperature_threshold(TemperatureThreshold::Slowdown),
        ),
        temperature_shutdown_c: reading(
            device.temperature_threshold(TemperatureThreshold::Shutdown),
        ),
        power_usage_mw: reading(device.power_usage()),
        power_limit_mw: reading(device.enforced_power_limit()),
        clock_event_reasons: raw::clock_event_reasons(device),
        utilization_gpu_pct: reading(device.utilization_rates().map(|u| u.gpu)),
        pcie_current_gen: reading(device.current_pcie_link_gen()),
        pcie_max_gen: reading(device.max_pcie_link_gen()),
        pcie_current_width: reading(device.current_pcie_link_width()),
        pcie_max_width: reading(device.max_pcie_link_width()),
        pcie_replay_counter: reading(device.pcie_replay_counter().map(u64::from)),
        mig_mode,
        mig_devices,
        nvlinks: nvlinks(device),
        fabric: raw::fabric_info(device),
    }
}

fn ecc_counts(device: &Device<'_>) -> Reading<EccCounts> {
    let count = |kind, counter| device.total_ecc_errors(kind, counter);
    let all = (|| {
        Ok::<_, WrapperError>(EccCounts {
            volatile_corrected: count(MemoryError::Corrected, EccCounter::Volatile)?,
            volatile_uncorrected: count(MemoryError::Uncorrected, EccCounter::Volatile)?,
            aggregate_corrected: count(MemoryError::Corrected, EccCounter::Aggregate)?,
            aggregate_uncorrected: count(MemoryError::Uncorrected, EccCounter::Aggregate)?,
        })
    })();
    reading(all)
}

fn retired_pages(device: &Device<'_>) -> Reading<RetiredPages> {
    let all = (|| {
        Ok::<_, WrapperError>(RetiredPages {
            single_bit: device
                .retired_pages(RetirementCause::MultipleSingleBitEccErrors)?
                .len() as u32,
            double_bit: device
                .retired_pages(RetirementCause::DoubleBitEccError)?
                .len() as u32,
            pending: device.are_pages_pending_retired()?,
        })
    })();
    reading(all)
}

/// Links 0.. until the driver says the index is invalid (`NVML_NVLINK_MAX_LINKS` grew from 12
/// to 18 to 36 across headers, gpu-health.md §6). No link at all: the GPU has no NVLink.
fn nvlinks(device: &Device<'_>) -> Reading<Vec<NvLink>> {
    let mut links = Vec::new();
    for link in 0..MAX_NVLINKS {
        let wrapper = device.link_wrapper_for(link);
        let active = match wrapper.is_active() {
            Ok(active) => active,
            Err(WrapperError::InvalidArg | WrapperError::NotSupported) => break,
            Err(err) if links.is_empty() => return Reading::Error(err.to_string()),
            // A link whose state cannot be read is not known to work: keep it, as inactive,
            // and go on, so one faulty link cannot hide the ones after it.
            Err(_) => false,
        };
        let counter = |c| reading(wrapper.error_counter(c));
        links.push(NvLink {
            link,
            active,
            version: reading(wrapper.version()),
            remote_pci_bus_id: wrapper
                .remote_pci_info()
                .ok()
                .and_then(|p| normalize_bus_id(&p.bus_id)),
            remote_type: raw::remote_type(device, link),
            replay_errors: counter(ErrorCounter::DlReplay),
            recovery_errors: counter(ErrorCounter::DlRecovery),
            crc_flit_errors: counter(ErrorCounter::DlCrcFlit),
            crc_data_errors: counter(ErrorCounter::DlCrcData),
        });
    }
    if links.is_empty() {
        Reading::NotSupported
    } else {
        Reading::Value(links)
    }
}

/// Highest link index asked; NVML answers `INVALID_ARGUMENT` past the GPU's real count.
const MAX_NVLINKS: u32 = 36;

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

/// Most MIG indexes asked per GPU. A100 and H100 hold at most 7 MIG devices (7 compute slices);
/// the cap only bounds a nonsensical max count, so a broken driver cannot stretch the walk.
const MAX_MIG_DEVICES: u32 = 64;
const MIB: u64 = 1024 * 1024;

/// Calls nvml-wrapper 0.13 does not wrap, or wraps wrongly, made through its raw function table.
mod raw {
    use nvml_wrapper::Device;
    use nvml_wrapper::error::{NvmlError as WrapperError, nvml_sym, nvml_try};
    use nvml_wrapper_sys::bindings::{nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v3_t};

    use super::reading;
    use crate::facts::nvml::{FabricInfo, FabricState, Reading, RemappedRows, RemoteType};

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

    /// `nvmlDeviceGetGpuFabricInfoV` with the v3 struct, else the v1 call (R525+).
    pub fn fabric_info(device: &Device<'_>) -> Reading<FabricInfo> {
        let lib = device.nvml().lib();
        if let Ok(sym) = nvml_sym(lib.nvmlDeviceGetGpuFabricInfoV.as_ref()) {
            // SAFETY: plain-old-data struct; zero is a valid bit pattern.
            let mut info: nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
            // NVML_STRUCT_VERSION(GpuFabricInfo, 3) = sizeof | (3 << 24) (nvml.h).
            info.version = std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() as u32 | (3 << 24);
            // SAFETY: a live handle and a versioned struct of the size announced.
            match nvml_try(unsafe { sym(device.handle(), &mut info) }) {
                Ok(()) => {
                    return Reading::Value(fabric(
                        info.state,
                        info.status,
                        info.cliqueId,
                        &info.clusterUuid,
                        Some(info.healthMask),
                    ));
                }
                Err(WrapperError::NotSupported) => return Reading::NotSupported,
                Err(_) => {} // ARGUMENT_VERSION_MISMATCH on older drivers: try v1.
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
                None,
            ))
        })();
        reading(result)
    }

    fn fabric(
        state: u8,
        status: u32,
        clique: u32,
        uuid: &[u8; 16],
        health_mask: Option<u32>,
    ) -> FabricInfo {
        let state = match state {
            1 => FabricState::NotStarted,
            2 => FabricState::InProgress,
            3 => FabricState::Completed,
            _ => FabricState::NotSupported,
        };
        let status = (state == FabricState::Completed).then(|| match nvml_try(status) {
            Ok(()) => "success".to_string(),
            Err(err) => super::error_kind(&err).name(),
        });
        let cluster_uuid = uuid
            .iter()
            .any(|b| *b != 0)
            .then(|| uuid.iter().map(|b| format!("{b:02x}")).collect::<String>());
        FabricInfo {
            state,
            status,
            clique_id: Some(clique),
            cluster_uuid,
            health_mask,
        }
    }
}

fn reading<T>(result: Result<T, WrapperError>) -> Reading<T> {
    match result {
        Ok(v) => Reading::Value(v),
        // A driver too old to export the function does not support the query either (a
        // pre-R525 driver has no fabric call): not supported, not an error.
        Err(
            WrapperError::NotSupported
            | WrapperError::FailedToLoadSymbol(_)
            | WrapperError::FunctionNotFound,
        ) => Reading::NotSupported,
        Err(err) => Reading::Error(err.to_string()),
    }
}

fn to_error(err: &WrapperError) -> NvmlError {
    NvmlError {
        kind: error_kind(err),
        message: err.to_string(),
    }
}

/// Map nvml-wrapper's error to the kinds gpudoctor gives advice for.
pub fn error_kind(err: &WrapperError) -> NvmlErrorKind {
    match err {
        WrapperError::LibloadingError(_) | WrapperError::LibraryNotFound => {
            NvmlErrorKind::LibraryNotFound
        }
        WrapperError::FailedToLoadSymbol(_) | WrapperError::FunctionNotFound => {
            // An old library without the symbols the wrapper needs: effectively a version skew.
            NvmlErrorKind::LibRmVersionMismatch
        }
        WrapperError::DriverNotLoaded => NvmlErrorKind::DriverNotLoaded,
        WrapperError::LibRmVersionMismatch => NvmlErrorKind::LibRmVersionMismatch,
        WrapperError::NoPermission | WrapperError::OperatingSystem => NvmlErrorKind::NoPermission,
        WrapperError::GpuLost => NvmlErrorKind::GpuIsLost,
        WrapperError::ResetRequired => NvmlErrorKind::ResetRequired,
        WrapperError::InsufficientPower => NvmlErrorKind::InsufficientPower,
        WrapperError::CorruptedInfoROM => NvmlErrorKind::CorruptedInforom,
        WrapperError::Timeout => NvmlErrorKind::Timeout,
        _ => NvmlErrorKind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_library_not_found() {
        let facts = probe(
            Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")),
            Duration::from_secs(10),
        );
        let err = facts.init_error.expect("must fail");
        assert_eq!(err.kind, NvmlErrorKind::LibraryNotFound, "{}", err.message);
    }
}
