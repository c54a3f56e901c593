//! What NVML said about this node, as one serde type shared by the live probe (nvml-wrapper) and
//! replay (`.gpudoctor/nvml.json`). No I/O and no policy here.
//!
//! Two rules from the NVML header (`nvml.h`, see reference/gpu-health.md §1):
//! - a query the GPU does not support is `NotSupported`, never zero or false;
//! - per-call errors are data: one lost GPU must not hide the other seven, so a device whose
//!   handle could not be had is kept, with its error.

mod error;
mod fabric;

use serde::{Deserialize, Serialize};

pub use error::{NvmlError, NvmlErrorKind, return_name};
pub use fabric::{FabricInfo, FabricState, HealthBit, HealthMask, HealthSummary};

/// The answer of one NVML query: a value, "not supported on this GPU", or another error with
/// its kind (`{"error": {"kind": "gpu_is_lost", "message": ".."}}`; older captures'
/// `{"error": "text"}` read as kind `unknown`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    Value(T),
    NotSupported,
    Error(NvmlError),
}

impl<T> Reading<T> {
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            _ => None,
        }
    }

    pub fn error(&self) -> Option<&NvmlError> {
        match self {
            Reading::Error(e) => Some(e),
            _ => None,
        }
    }
}

/// A field absent from `nvml.json` (an older capture, a hand-written fixture) reads as
/// "not supported": never as zero, never as an error.
impl<T> Default for Reading<T> {
    fn default() -> Self {
        Reading::NotSupported
    }
}

/// Everything gpudoctor asks NVML, in one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlFacts {
    /// `nvmlInit` failed: nothing else below is meaningful.
    #[serde(default)]
    pub init_error: Option<NvmlError>,
    #[serde(default)]
    pub driver_version: Option<String>,
    #[serde(default)]
    pub nvml_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion_v2`, e.g. 12040 = CUDA 12.4.
    #[serde(default)]
    pub cuda_driver_version: Option<i32>,
    /// `nvmlDeviceGetCount_v2`: counts devices even when their handles fail.
    #[serde(default)]
    pub device_count: u32,
    #[serde(default)]
    pub devices: Vec<NvmlDevice>,
    /// Milliseconds the live probe waited until every GPU's handle had arrived: the driver
    /// attaching GPUs, one after another when persistence mode is off. A measure of this run,
    /// like `probe_ms`: never written to `nvml.json`.
    #[serde(skip)]
    pub handles_ms: Option<u64>,
    /// Milliseconds `nvmlInit` took in the live probe (this run's measure, never recorded).
    #[serde(skip)]
    pub init_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlDevice {
    pub index: u32,
    /// Normalised to the sysfs form (`0000:18:00.0`, lower case) so it joins with PCI facts.
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub serial: Reading<String>,
    #[serde(default)]
    pub minor_number: Reading<u32>,
    #[serde(default)]
    pub persistence_mode: Reading<bool>,
    /// `nvmlDeviceGetArchitecture`: an `nvmlDeviceArchitecture_t` (Hopper 9, Blackwell 10; a
    /// number newer than the wrapper knows is kept as it came). What tells NVLink 5 apart.
    #[serde(default)]
    pub architecture: Reading<u32>,
    /// The handle could not be had (`GPU_IS_LOST`, `NO_PERMISSION` ...): only `index` is known.
    #[serde(default)]
    pub error: Option<NvmlError>,
    /// Milliseconds the live probe spent on this GPU (handle and every reading), or the budget
    /// when it gave up on it. A measure of this run, not a fact of the node: never written to
    /// `nvml.json` (a capture of a capture stays byte for byte the same), so replay has none.
    #[serde(skip)]
    pub probe_ms: Option<u64>,
    /// Milliseconds from when the live probe asked for every GPU until this one's handle came
    /// (GPUs attaching one after another show as a staircase). This run's measure only.
    #[serde(skip)]
    pub handle_ms: Option<u64>,
    /// The live probe gave up on this GPU while it was in this call (`handle`, `identity`, or
    /// a reading's field name): where a wedged GPU stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_at: Option<String>,
    /// This GPU waited behind the one at this index, which stopped answering first: one wedged
    /// GPU inside the driver's lock stalls its siblings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_behind: Option<u32>,

    // --- memory health (gpu-health.md §4)
    /// `nvmlDeviceGetEccMode(current, pending)`.
    #[serde(default)]
    pub ecc_mode: Reading<CurrentPending>,
    /// `nvmlDeviceGetTotalEccErrors` for corrected/uncorrected × volatile/aggregate.
    #[serde(default)]
    pub ecc_errors: Reading<EccCounts>,
    /// Pre-Ampere dynamic page retirement: `nvmlDeviceGetRetiredPages_v2` counts by cause and
    /// `nvmlDeviceGetRetiredPagesPendingStatus`.
    #[serde(default)]
    pub retired_pages: Reading<RetiredPages>,
    /// `nvmlDeviceGetRemappedRows` (Ampere and later).
    #[serde(default)]
    pub remapped_rows: Reading<RemappedRows>,

    // --- thermal and power (§2, §3)
    /// `nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)`, °C.
    #[serde(default)]
    pub temperature_c: Reading<u32>,
    /// `nvmlDeviceGetTemperatureThreshold(SLOWDOWN)`, °C.
    #[serde(default)]
    pub temperature_slowdown_c: Reading<u32>,
    /// `nvmlDeviceGetTemperatureThreshold(SHUTDOWN)`, °C.
    #[serde(default)]
    pub temperature_shutdown_c: Reading<u32>,
    /// `nvmlDeviceGetPowerUsage`, milliwatts.
    #[serde(default)]
    pub power_usage_mw: Reading<u32>,
    /// `nvmlDeviceGetEnforcedPowerLimit`, milliwatts: the lowest of every limit in force
    /// (the one set with `nvidia-smi -pl`, an out-of-band cap from the BMC, …).
    #[serde(default)]
    pub power_limit_mw: Reading<u32>,
    /// `nvmlDeviceGetPowerManagementDefaultLimit`, milliwatts: the board's limit out of the
    /// box. An enforced limit below it is a capped GPU (`driver.power`). Absent in captures made
    /// before gpudoctor read it: `NotSupported`, and the cap is then not judged.
    #[serde(default)]
    pub power_default_limit_mw: Reading<u32>,
    /// `nvmlDeviceGetCurrentClocksEventReasons` bitmask (§3).
    #[serde(default)]
    pub clock_event_reasons: Reading<u64>,
    /// `nvmlDeviceGetUtilizationRates().gpu`, percent: tells idle from busy for PCIe speed.
    #[serde(default)]
    pub utilization_gpu_pct: Reading<u32>,

    // --- PCIe (§5)
    #[serde(default)]
    pub pcie_current_gen: Reading<u32>,
    /// `nvmlDeviceGetMaxPcieLinkGeneration`: max with this device *and* slot.
    #[serde(default)]
    pub pcie_max_gen: Reading<u32>,
    #[serde(default)]
    pub pcie_current_width: Reading<u32>,
    #[serde(default)]
    pub pcie_max_width: Reading<u32>,
    /// `nvmlDeviceGetPcieReplayCounter`, cumulative.
    #[serde(default)]
    pub pcie_replay_counter: Reading<u64>,

    // --- MIG (§2)
    /// `nvmlDeviceGetMigMode(current, pending)`.
    #[serde(default)]
    pub mig_mode: Reading<CurrentPending>,
    /// The MIG devices (compute instances) under this GPU, walked only while `mig_mode` says
    /// MIG is currently on: `nvmlDeviceGetMaxMigDeviceCount` answers 0 both when MIG is off and
    /// when the GPU has none, so only the mode tells them apart. An empty list is a fact (MIG on,
    /// no instance created), never "unknown". `NotSupported` when MIG is off, pending, or not
    /// supported (`mig_mode` says which) or the mode is unreadable; also what an absent field
    /// reads as, i.e. a capture made before gpudoctor enumerated MIG devices: checks then fall
    /// back to treating the GPU's MIG ids as unattributable.
    #[serde(default)]
    pub mig_devices: Reading<Vec<MigDevice>>,

    // --- who may run CUDA here, and who does (the `driver.cuda` probe's hints)
    /// `nvmlDeviceGetComputeMode`: whether several processes may hold a context (nvml.h
    /// `nvmlComputeMode_t`); in exclusive-process mode a second one gets
    /// `CUDA_ERROR_DEVICE_UNAVAILABLE`.
    #[serde(default)]
    pub compute_mode: Reading<ComputeMode>,
    /// `nvmlDeviceGetComputeRunningProcesses` with each name (`nvmlSystemGetProcessName`): the
    /// processes holding a CUDA context on this GPU when NVML was asked.
    #[serde(default)]
    pub compute_processes: Reading<Vec<GpuProcess>>,

    // --- firmware and clocks: what drifts between a node's GPUs (Azure NHC
    // `azure_gpu_vbios.nhc`, `azure_gpu_app_clocks.nhc`; DCGM's software plugin validates the
    // InfoROM). Absent in captures made before gpudoctor read them: `NotSupported`, not judged.
    /// `nvmlDeviceGetVbiosVersion` (`96.00.74.00.01`, as `nvidia-smi -q` prints "VBIOS Version").
    #[serde(default)]
    pub vbios_version: Reading<String>,
    /// `nvmlDeviceGetInforomImageVersion` (`G520.0200.00.05`, "Inforom Version / Image Version").
    #[serde(default)]
    pub inforom_image_version: Reading<String>,
    /// `nvmlDeviceValidateInforom`: `true` when the InfoROM checksum holds, `false` when NVML
    /// answers `NVML_ERROR_CORRUPTED_INFOROM` (nvml.h: "the device's infoROM is corrupted").
    #[serde(default)]
    pub inforom_valid: Reading<bool>,
    /// `nvmlDeviceGetApplicationsClock(NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM)`, MHz: the clocks a
    /// kernel runs at unless boost lifts them (`nvidia-smi -ac` sets them).
    #[serde(default)]
    pub applications_clocks: Reading<Clocks>,
    /// `nvmlDeviceGetDefaultApplicationsClock(NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM)`, MHz.
    #[serde(default)]
    pub default_applications_clocks: Reading<Clocks>,
    /// `nvmlDeviceGetMaxClockInfo(NVML_CLOCK_GRAPHICS, NVML_CLOCK_MEM)`, MHz: the most the GPU
    /// runs at ("Max Clocks" in `nvidia-smi -q`). Where the default application clocks are
    /// already this high, the applications-clocks event reason cannot come from them: a locked
    /// clock (`nvidia-smi -lgc`) holds the GPU (driver.app_clocks).
    #[serde(default)]
    pub max_clocks: Reading<Clocks>,
    /// `nvmlDeviceGetBoardPartNumber` (`692-2G520-0200-000`): what an RMA asks for, with the
    /// serial. Redacted by `record` as the serial is.
    #[serde(default)]
    pub board_part_number: Reading<String>,
    /// `nvmlDeviceGetModuleId`: the GPU's slot on an HGX baseboard (1..8), as `nvidia-smi -q`
    /// prints "Module ID"; how a technician finds the board to pull.
    #[serde(default)]
    pub module_id: Reading<u32>,

    // --- NVLink and fabric (§6, §7)
    /// One entry per link that answered `nvmlDeviceGetNvLinkState`; `NotSupported` when the GPU
    /// has no NVLink at all.
    #[serde(default)]
    pub nvlinks: Reading<Vec<NvLink>>,
    /// `nvmlDeviceGetGpuFabricInfoV` (Hopper and later; `NotSupported` on PCIe SKUs).
    #[serde(default)]
    pub fabric: Reading<FabricInfo>,
}

/// One MIG device: a compute instance inside a GPU instance, what NVIDIA's device plugin
/// advertises as `MIG-<uuid>` (reference/kubernetes.md §2; gpu-health.md §1 for the UUID).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigDevice {
    /// The index under its parent GPU (`nvmlDeviceGetMigDeviceHandleByIndex`). Indexes run up
    /// to `nvmlDeviceGetMaxMigDeviceCount` and may have gaps (NVML answers NOT_FOUND there).
    pub index: u32,
    /// `nvmlDeviceGetUUID` on the MIG handle: `MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    #[serde(default)]
    pub uuid: Option<String>,
    /// `nvmlDeviceGetName` on the MIG handle: the parent's name, ` MIG `, the profile
    /// (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`).
    #[serde(default)]
    pub name: Option<String>,
    /// `nvmlDeviceGetGpuInstanceId`.
    #[serde(default)]
    pub gpu_instance_id: Reading<u32>,
    /// `nvmlDeviceGetComputeInstanceId`.
    #[serde(default)]
    pub compute_instance_id: Reading<u32>,
    /// `nvmlDeviceGetMemoryInfo_v2().total` on the MIG handle, MiB.
    #[serde(default)]
    pub memory_total_mib: Reading<u64>,
    /// The handle could not be had (an error other than NOT_FOUND): only `index` is known.
    #[serde(default)]
    pub error: Option<NvmlError>,
}

impl MigDevice {
    /// The MIG profile from the name (`1g.10gb`): what the device plugin's mixed strategy
    /// names the resource after (`nvidia.com/mig-1g.10gb`, kubernetes.md §2).
    pub fn profile(&self) -> Option<&str> {
        let (_, profile) = self.name.as_deref()?.rsplit_once(" MIG ")?;
        let profile = profile.trim();
        (!profile.is_empty()).then_some(profile)
    }
}

/// nvml.h `NVML_DEVICE_ARCH_BLACKWELL`: the first architecture with NVLink 5.
pub const ARCH_BLACKWELL: u32 = 10;
/// nvml.h `NVML_DEVICE_ARCH_UNKNOWN`.
pub const ARCH_UNKNOWN: u32 = 0xffff_ffff;

impl NvmlDevice {
    /// Whether the GPU's links are NVLink 5 (Blackwell or later: error counters as field values,
    /// no DL counters), as the architecture says; `None` when it does not say.
    pub fn nvlink5(&self) -> Option<bool> {
        match self.architecture.value() {
            Some(&ARCH_UNKNOWN) | None => None,
            Some(arch) => Some(*arch >= ARCH_BLACKWELL),
        }
    }

    /// Every reading that failed with an error (not "not supported"), by field name: the
    /// device's own readings, each link's and each MIG device's.
    pub fn reading_errors<'a>(&'a self) -> Vec<(String, &'a NvmlError)> {
        let mut out: Vec<(String, &'a NvmlError)> = Vec::new();
        let mut add = |name: &str, err: Option<&'a NvmlError>| {
            if let Some(err) = err {
                out.push((name.to_string(), err));
            }
        };
        add("serial", self.serial.error());
        add("minor_number", self.minor_number.error());
        add("persistence_mode", self.persistence_mode.error());
        add("ecc_mode", self.ecc_mode.error());
        add("ecc_errors", self.ecc_errors.error());
        add("retired_pages", self.retired_pages.error());
        add("remapped_rows", self.remapped_rows.error());
        add("temperature_c", self.temperature_c.error());
        add(
            "temperature_slowdown_c",
            self.temperature_slowdown_c.error(),
        );
        add(
            "temperature_shutdown_c",
            self.temperature_shutdown_c.error(),
        );
        add("power_usage_mw", self.power_usage_mw.error());
        add("power_limit_mw", self.power_limit_mw.error());
        add(
            "power_default_limit_mw",
            self.power_default_limit_mw.error(),
        );
        add("clock_event_reasons", self.clock_event_reasons.error());
        add("utilization_gpu_pct", self.utilization_gpu_pct.error());
        add("pcie_current_gen", self.pcie_current_gen.error());
        add("pcie_max_gen", self.pcie_max_gen.error());
        add("pcie_current_width", self.pcie_current_width.error());
        add("pcie_max_width", self.pcie_max_width.error());
        add("pcie_replay_counter", self.pcie_replay_counter.error());
        add("mig_mode", self.mig_mode.error());
        add("mig_devices", self.mig_devices.error());
        add("compute_mode", self.compute_mode.error());
        add("compute_processes", self.compute_processes.error());
        add("vbios_version", self.vbios_version.error());
        add("inforom_image_version", self.inforom_image_version.error());
        add("inforom_valid", self.inforom_valid.error());
        add("applications_clocks", self.applications_clocks.error());
        add(
            "default_applications_clocks",
            self.default_applications_clocks.error(),
        );
        add("max_clocks", self.max_clocks.error());
        add("board_part_number", self.board_part_number.error());
        add("module_id", self.module_id.error());
        add("nvlinks", self.nvlinks.error());
        add("fabric", self.fabric.error());
        // A link's or MIG device's name is spelt only for a reading that failed: 18 links of
        // 13 readings on each of 8 GPUs were 1 900 strings a run, every one thrown away on a
        // healthy node (issue 41).
        if let Reading::Value(links) = &self.nvlinks {
            for link in links {
                let readings = [
                    ("version", link.version.error()),
                    ("remote_type", link.remote_type.error()),
                ]
                .into_iter()
                .chain(link.error_counters().map(|(name, r)| (name, r.error())));
                for (name, err) in readings {
                    if err.is_some() {
                        add(&format!("nvlinks[{}].{name}", link.link), err);
                    }
                }
            }
        }
        if let Reading::Value(migs) = &self.mig_devices {
            for mig in migs.iter().filter(|m| m.error.is_some()) {
                add(&format!("mig_devices[{}]", mig.index), mig.error.as_ref());
            }
        }
        out
    }

    /// The first reading that answered `GPU_IS_LOST` or `RESET_REQUIRED`: the GPU fell off the
    /// bus after its handle was had (an XID 79 while gpudoctor ran, or before and the handle
    /// was cached), or it needs a reset before it answers again (nvml.h: "GPU requires a reset
    /// before it can be used again"). DCGM fails both the same way; neither is a reading that
    /// merely could not be taken.
    pub fn lost_at(&self) -> Option<(String, &NvmlError)> {
        self.reading_errors().into_iter().find(|(_, e)| {
            matches!(
                e.kind,
                NvmlErrorKind::GpuIsLost | NvmlErrorKind::ResetRequired
            )
        })
    }

    /// MIG is currently on (the mode says so).
    pub fn mig_on(&self) -> bool {
        self.mig_mode.value().is_some_and(|m| m.current)
    }

    /// MIG is, or may be, on: the mode says so, or could not be read.
    pub fn mig_possible(&self) -> bool {
        match &self.mig_mode {
            Reading::Value(mode) => mode.current,
            Reading::NotSupported => false,
            Reading::Error(_) => true,
        }
    }

    /// The enumerated MIG devices of a GPU with MIG on; `None` when MIG is off or the devices
    /// were not enumerated (an older capture, or NVML could not say).
    pub fn mig_list(&self) -> Option<&[MigDevice]> {
        if self.mig_possible() {
            self.mig_devices.value().map(Vec::as_slice)
        } else {
            None
        }
    }
}

/// `nvmlComputeMode_t` (nvml.h): 0 default, 1 exclusive thread (deprecated), 2 prohibited,
/// 3 exclusive process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    Default,
    ExclusiveThread,
    Prohibited,
    ExclusiveProcess,
}

impl ComputeMode {
    /// As `nvidia-smi -q` prints it (`Exclusive_Process`).
    pub fn label(self) -> &'static str {
        match self {
            ComputeMode::Default => "Default",
            ComputeMode::ExclusiveThread => "Exclusive_Thread",
            ComputeMode::Prohibited => "Prohibited",
            ComputeMode::ExclusiveProcess => "Exclusive_Process",
        }
    }
}

/// A process with a CUDA context on a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// GPU memory it holds, MiB (`None`: NVML could not say, as under some hypervisors).
    #[serde(default)]
    pub used_memory_mib: Option<u64>,
    /// `nvmlSystemGetProcessName`: its executable, as NVML gives it.
    #[serde(default)]
    pub name: Option<String>,
}

impl GpuProcess {
    /// `pid 4242 (python3, 70412 MiB)`: with the memory it holds, when NVML could say.
    pub fn describe_with_memory(&self) -> String {
        let memory = match self.used_memory_mib {
            Some(mib) => format!("{mib} MiB"),
            None => "memory not available".to_string(),
        };
        match &self.name {
            Some(name) => format!("pid {} ({name}, {memory})", self.pid),
            None => format!("pid {} ({memory})", self.pid),
        }
    }

    /// `pid 4242 (python3)`.
    pub fn describe(&self) -> String {
        match &self.name {
            Some(name) => format!("pid {} ({name})", self.pid),
            None => format!("pid {}", self.pid),
        }
    }
}

/// A pair of clocks, MHz: graphics (`NVML_CLOCK_GRAPHICS`) and memory (`NVML_CLOCK_MEM`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    pub graphics_mhz: u32,
    pub memory_mhz: u32,
}

/// A mode with a current and a pending value (ECC, MIG): pending ≠ current needs a GPU reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentPending {
    pub current: bool,
    pub pending: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccCounts {
    pub volatile_corrected: u64,
    pub volatile_uncorrected: u64,
    pub aggregate_corrected: u64,
    pub aggregate_uncorrected: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredPages {
    /// Cause `MULTIPLE_SINGLE_BIT_ECC_ERRORS`.
    pub single_bit: u32,
    /// Cause `DOUBLE_BIT_ECC_ERROR`.
    pub double_bit: u32,
    /// Retirements waiting for a reset or reboot.
    pub pending: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    /// A remap waits for a GPU reset to take effect.
    pub pending: bool,
    /// Sticky: a remap has failed in the past (RMA signal for gpud and DCGM).
    pub failure: bool,
}

/// What sits at the other end of an NVLink (`nvmlDeviceGetNvLinkRemoteDeviceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteType {
    Gpu,
    Nvswitch,
    Ibmnpu,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    /// `nvmlDeviceGetNvLinkState` = `NVML_FEATURE_ENABLED`.
    pub active: bool,
    /// `nvmlDeviceGetNvLinkVersion`: the raw enum value, not the generation (§6).
    #[serde(default)]
    pub version: Reading<u32>,
    /// `nvmlDeviceGetNvLinkRemotePciInfo_v2`, normalised to the sysfs form.
    #[serde(default)]
    pub remote_pci_bus_id: Option<String>,
    #[serde(default)]
    pub remote_type: Reading<RemoteType>,
    /// `nvmlDeviceGetNvLinkErrorCounter` DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA.
    #[serde(default)]
    pub replay_errors: Reading<u64>,
    #[serde(default)]
    pub recovery_errors: Reading<u64>,
    #[serde(default)]
    pub crc_flit_errors: Reading<u64>,
    #[serde(default)]
    pub crc_data_errors: Reading<u64>,
    /// NVLink 5 (Blackwell and later), where the DL counters above answer NOT_SUPPORTED (the
    /// GB100 driver lists no DL replay/recovery/CRC counter, open-gpu-kernel-modules
    /// `kernel_nvlink_gb100.c` `knvlinkGetSupportedCounters_GB100`): the error counts NVML gives
    /// as field values `NVML_FI_DEV_NVLINK_COUNT_*` with `scopeId` = link (nvml.h
    /// `nvmlFieldValue_t`; ids from nvml-wrapper-sys 0.10). Not asked on earlier GPUs.
    #[serde(default)]
    pub rcv_errors: Reading<u64>,
    #[serde(default)]
    pub malformed_packet_errors: Reading<u64>,
    #[serde(default)]
    pub buffer_overrun_errors: Reading<u64>,
    #[serde(default)]
    pub local_link_integrity_errors: Reading<u64>,
    #[serde(default)]
    pub link_recovery_failed: Reading<u64>,
    #[serde(default)]
    pub symbol_errors: Reading<u64>,
    #[serde(default)]
    pub effective_errors: Reading<u64>,
}

impl NvLink {
    /// Every error counter by name, DL (up to Hopper) and NVLink 5 field values alike.
    pub fn error_counters(&self) -> [(&'static str, &Reading<u64>); 11] {
        [
            ("replay", &self.replay_errors),
            ("recovery", &self.recovery_errors),
            ("crc flit", &self.crc_flit_errors),
            ("crc data", &self.crc_data_errors),
            ("rcv errors", &self.rcv_errors),
            ("malformed packets", &self.malformed_packet_errors),
            ("buffer overruns", &self.buffer_overrun_errors),
            ("link integrity", &self.local_link_integrity_errors),
            ("failed recoveries", &self.link_recovery_failed),
            ("symbol errors", &self.symbol_errors),
            ("effective errors", &self.effective_errors),
        ]
    }
}

impl NvmlFacts {
    /// The GPUs NVML lists a compute process on, with those processes, in NVML's order: what
    /// `driver.gpu_processes` reports and what makes an active probe's figures on that GPU
    /// inconclusive (another process shared it while it was measured).
    pub fn held_gpus(&self) -> Vec<(&NvmlDevice, &[GpuProcess])> {
        self.devices
            .iter()
            .filter_map(|d| match &d.compute_processes {
                Reading::Value(list) if !list.is_empty() => Some((d, list.as_slice())),
                _ => None,
            })
            .collect()
    }

    /// The processes holding the GPU at this PCI bus id (empty when none or unknown).
    pub fn holders_of(&self, bus: &str) -> &[GpuProcess] {
        self.devices
            .iter()
            .find(|d| d.pci_bus_id.as_deref() == Some(bus))
            .and_then(|d| d.compute_processes.value())
            .map_or(&[], |list| list.as_slice())
    }

    /// A snapshot that says only why NVML could not be used.
    pub fn failed(kind: NvmlErrorKind, message: impl Into<String>) -> Self {
        NvmlFacts {
            init_error: Some(NvmlError::new(kind, message)),
            ..NvmlFacts::default()
        }
    }
}

/// Parse `nvml.json`. Errors are serde's message (line and column), for the caller to pair with
/// the path.
pub fn parse_nvml_json(text: &str) -> Result<NvmlFacts, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// NVML prints bus ids as `00000000:17:00.0` (8-hex domain, upper case, `nvmlPciInfo_t.busId`);
/// sysfs uses `0000:17:00.0`. Normalise to the sysfs form; `None` when it is not a bus id.
pub fn normalize_bus_id(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_end_matches('\0');
    let (domain, rest) = raw.rsplit_once(':').and_then(|(head, func)| {
        let (domain, bus) = head.split_once(':')?;
        Some((domain, format!("{bus}:{func}")))
    })?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let (bus, devfn) = rest.split_once(':')?;
    let (dev, func) = devfn.split_once('.')?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    if dev > 0x1f || func > 7 {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_normalise_from_nvml_form() {
        assert_eq!(
            normalize_bus_id("00000000:17:00.0").as_deref(),
            Some("0000:17:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:9A:00.0").as_deref(),
            Some("0000:9a:00.0")
        );
        assert_eq!(
            normalize_bus_id("00010000:00:04.0").as_deref(),
            Some("10000:00:04.0")
        );
        assert_eq!(normalize_bus_id("garbage"), None);
        assert_eq!(normalize_bus_id("0000:17:40.0"), None);
    }

    #[test]
    fn reads_a_snapshot_with_errors_and_not_supported() {
        let text = r#"{
          "init_error": null, "driver_version": "550.54.15", "device_count": 2,
          "devices": [
            {"index": 0, "pci_bus_id": "0000:18:00.0", "serial": "not_supported",
             "persistence_mode": {"value": true}, "minor_number": {"value": 0}},
            {"index": 1, "error": {"kind": "gpu_is_lost", "message": "GPU is lost"}}
          ]}"#;
        let facts = parse_nvml_json(text).unwrap();
        assert_eq!(facts.devices[0].serial, Reading::NotSupported);
        assert_eq!(facts.devices[0].persistence_mode.value(), Some(&true));
        assert_eq!(
            facts.devices[1].error.as_ref().unwrap().kind,
            NvmlErrorKind::GpuIsLost
        );
        assert!(parse_nvml_json("{\"devices\": [").is_err());
        // A capture from before MIG enumeration: the field is absent.
        assert_eq!(facts.devices[0].mig_devices, Reading::NotSupported);
    }

    #[test]
    fn reads_mig_devices_and_their_profile() {
        let text = r#"{"device_count": 2, "devices": [
            {"index": 0, "mig_mode": {"value": {"current": true, "pending": true}},
             "mig_devices": {"value": [
               {"index": 0, "uuid": "MIG-0d5a7f3c-2b1e-5c4d-9e8f-112233445566",
                "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                "gpu_instance_id": {"value": 2}, "compute_instance_id": {"value": 0},
                "memory_total_mib": {"value": 40192}},
               {"index": 2, "error": {"kind": "unknown", "message": "Unknown Error"}}]}},
            {"index": 1, "mig_mode": {"value": {"current": true, "pending": true}}}]}"#;
        let facts = parse_nvml_json(text).unwrap();
        let migs = facts.devices[0].mig_list().unwrap();
        assert_eq!(migs.len(), 2);
        assert_eq!(migs[0].profile(), Some("3g.40gb"));
        assert_eq!(migs[0].memory_total_mib.value(), Some(&40192));
        assert_eq!(migs[1].profile(), None);
        assert!(migs[1].error.is_some());
        // MIG on, devices not recorded: not a list, so nothing can be attributed to it.
        assert!(facts.devices[1].mig_possible());
        assert!(facts.devices[1].mig_list().is_none());
        // MIG off: a recorded list does not count.
        let mut off = facts.devices[0].clone();
        off.mig_mode = Reading::Value(CurrentPending::default());
        assert!(off.mig_list().is_none());
    }
}
