//! Driver layer, GPU health: "nvidia-smi works" is not "the GPU is healthy". Memory errors,
//! row remapping, thermal and power slowdown, PCIe link width and a pending MIG change, each tied
//! to one GPU and paired with the action that fixes it.
//!
//! Thresholds and their sources: reference/gpu-health.md §3 (clock events), §4 (memory),
//! §5 (PCIe), §10 (what DCGM, gpud, gcm and Azure NHC do).

use super::rates::{SAMPLE_MORE, Window, rate_figure, window};
use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::nvml::{NvmlDevice, NvmlError, NvmlErrorKind, Reading};
use crate::report::{Action, Evidence, Layer};
use crate::sample::{Change, change, rate};

// The memory checks (ECC, retired pages, row remapping) are one concern with their own
// thresholds; the shared per-GPU machinery stays here for them and the other layers.
mod memory;
use memory::{ecc_errors, retired_pages, row_remap};
mod power;
pub use power::OVER_LIMIT_MARGIN as POWER_OVER_LIMIT_MARGIN;
mod config;
pub(crate) use config::is_server_gpu;

/// Clock-event reason bits (nvml.h `nvmlClocksEventReason*`, gpu-health.md §3).
pub mod clock_event {
    pub const SW_THERMAL_SLOWDOWN: u64 = 0x20;
    pub const HW_SLOWDOWN: u64 = 0x8;
    pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
    pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
}

/// At or above this utilisation a GPU is busy: a PCIe generation below max is then a real downtrain,
/// not idle power saving (gpu-health.md §5: "Curr < Max at load points at signal integrity").
const BUSY_UTILIZATION_PCT: u32 = 50;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "driver.ecc_errors",
            layer: Layer::Driver,
            title: "no uncorrected ECC errors since the driver loaded",
            explain: Explain {
                reads: "NVML nvmlDeviceGetTotalEccErrors (uncorrected, volatile and aggregate) and nvmlDeviceGetEccMode",
                expects: "volatile uncorrected count 0 on every GPU with ECC on (fail); ECC mode current = pending. With --sample: live is the uncorrected count rising during the window (fail), history a count that did not move (warn: since the driver loaded, none now); corrected errors are reported as a rate, not judged (NVIDIA's catalogue ignores them)",
                why: "an uncorrected (double-bit) error kills the CUDA context that touched it and often comes with XID 48; gcm fails on any volatile uncorrected error",
                fix: "drain the node, stop what holds the GPU (`lsof /dev/nvidia*`: device plugin, dcgm-exporter, nv-hostengine, nvidia-persistenced; leave nvidia-fabricmanager running on NVSwitch systems) and reset it by PCI bus id (`nvidia-smi -r -i <pci bus id>`: indexes shift when a GPU leaves NVML), or reboot if the reset is refused; on Ampere and later the reset also applies a pending row remap (driver.row_remap); uncorrected errors that return after it mean hardware inspection",
            },
            run: ecc_errors,
        },
        CheckDef {
            code: "driver.retired_pages",
            layer: Layer::Driver,
            title: "no page retirement pending (pre-Ampere GPUs)",
            explain: Explain {
                reads: "NVML nvmlDeviceGetRetiredPages_v2 (by cause) and nvmlDeviceGetRetiredPagesPendingStatus",
                expects: "no pending retirement and fewer than 63 retired pages",
                why: "a pending retirement only takes effect after a reset: until then the bad page can still be handed out; 63 or more retired pages is DCGM's RMA threshold",
                fix: "drain and reset the GPU or reboot to apply pending retirements; at 63+ retired pages replace the GPU",
            },
            run: retired_pages,
        },
        CheckDef {
            code: "driver.row_remap",
            layer: Layer::Driver,
            title: "no row remap pending or failed (Ampere and later)",
            explain: Explain {
                reads: "NVML nvmlDeviceGetRemappedRows (correctable, uncorrectable, pending, failure)",
                expects: "pending = 0 and failure = 0",
                why: "a pending remap needs a GPU reset before the faulty row is retired; a failed remap means the memory cannot heal itself (DCGM, gpud and gcm treat it as an RMA signal)",
                fix: "pending: drain the node, stop what holds the GPU and reset it by PCI bus id (`nvidia-smi -r -i <pci bus id>`), or reboot; failure: take the GPU out of service (`kubectl cordon`, then RMA): a failed remap does not heal",
            },
            run: row_remap,
        },
        CheckDef {
            code: "driver.thermal",
            layer: Layer::Driver,
            title: "GPU temperature below the slowdown threshold",
            explain: Explain {
                reads: "NVML nvmlDeviceGetTemperature (GPU) and nvmlDeviceGetTemperatureThreshold (SLOWDOWN, SHUTDOWN)",
                expects: "temperature below the GPU's own slowdown threshold",
                why: "at the slowdown threshold the GPU halves its clocks; at shutdown it stops; a job on it runs at a fraction of its speed",
                fix: "check the chassis airflow, fans and inlet temperature with the BMC (`ipmitool sdr`); a single hot GPU in a cool chassis needs hardware inspection",
            },
            run: thermal,
        },
        CheckDef {
            code: "driver.clock_slowdown",
            layer: Layer::Driver,
            title: "no hardware slowdown or power brake active",
            explain: Explain {
                reads: "NVML nvmlDeviceGetCurrentClocksEventReasons (bitmask) and power draw / limit",
                expects: "none of HW slowdown (0x8), HW thermal slowdown (0x40), HW power brake (0x80); SW thermal slowdown (0x20) warns. One reading: 0x40 and 0x80 fail, a lone 0x8 warns (it can flash during P-state changes). With --sample: a hardware bit in both readings is live and sustained (fail); one that came on during the window warns; one that cleared is history (noted)",
                why: "hardware slowdown cuts clocks by half or more; in a data-parallel job the slowest GPU sets everyone's pace",
                fix: "power brake: check PSUs and the BMC event log; thermal: cooling; a lone 0x8 can flash during P-state changes, so re-run before acting; repeated events need hardware inspection",
            },
            run: clock_slowdown,
        },
        CheckDef {
            code: "driver.power",
            layer: Layer::Driver,
            title: "GPU power draw held by its limit, the limit not capped below the default",
            explain: Explain {
                reads: "NVML nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit and nvmlDeviceGetPowerManagementDefaultLimit",
                expects: "enforced limit ≥ 99% of the default limit (warn: a capped gpu); draw ≤ enforced limit + 5% (warn in one reading; with --sample, over in both readings fails)",
                why: "a gpu capped below its default runs every kernel slower and sets the pace of a data-parallel job; a draw its limit does not hold points at the power controller or its sensor (DCGM and gpud report both)",
                fix: "`nvidia-smi -q -d POWER -i <pci bus id>`: a requested limit below the default was set on the node (`nvidia-smi -i <bus id> -pl <default W>` restores it); a lower enforced limit with the default requested is an out-of-band cap from the bmc or the rack budget; a draw that stays over the limit needs hardware inspection",
            },
            run: power::power,
        },
        CheckDef {
            code: "driver.ecc_mode",
            layer: Layer::Driver,
            title: "ECC on for every data-centre GPU",
            explain: Explain {
                reads: "NVML nvmlDeviceGetEccMode (current, pending) and the GPU's name",
                expects: "current mode enabled on every GPU that is not a GeForce or TITAN board (warn, naming each GPU with ECC off)",
                why: "with ECC off a flipped bit in GPU memory is neither corrected nor counted: a job computes on corrupted data without a sign, and driver.ecc_errors has nothing to judge; data-centre GPUs ship with it on, so off is a leftover `nvidia-smi -e 0`",
                fix: "`nvidia-smi -i <pci bus id> -e 1`, then drain the node and reset the gpu (or reboot) for the mode to take effect",
            },
            run: config::ecc_mode,
        },
        CheckDef {
            code: "driver.gpu_firmware",
            layer: Layer::Driver,
            title: "every GPU runs the same VBIOS and InfoROM, and each InfoROM is valid",
            explain: Explain {
                reads: "NVML nvmlDeviceGetVbiosVersion, nvmlDeviceGetInforomImageVersion and nvmlDeviceValidateInforom; the profile's vbios_version",
                expects: "GPUs of one model on one version of each (warn, naming the GPUs unlike the most common version), the profile's VBIOS when it names one (warn), every InfoROM valid (fail on NVML_ERROR_CORRUPTED_INFOROM)",
                why: "a GPU on other firmware (a replacement board that missed the fleet's update) behaves differently from its siblings, and Azure NHC fails the node on it; a corrupted InfoROM loses the ECC and page-retirement records the driver relies on (DCGM's software plugin fails on it)",
                fix: "update the odd GPU with the platform's firmware package on a drained node; a corrupted InfoROM: drain the node and have the GPU replaced",
            },
            run: config::gpu_firmware,
        },
        CheckDef {
            code: "driver.app_clocks",
            layer: Layer::Driver,
            title: "application clocks at their default, no locked clock",
            explain: Explain {
                reads: "NVML nvmlDeviceGetApplicationsClock, nvmlDeviceGetDefaultApplicationsClock and nvmlDeviceGetMaxClockInfo (graphics and memory), nvmlDeviceGetCurrentClocksEventReasons",
                expects: "each GPU's application clocks ≥ 99% of its default ones (warn, naming the GPU and both clocks); no applications-clocks-setting event reason (0x2) on a GPU whose application clocks are at a default that is already its maximum (warn: only a locked clock, `nvidia-smi -lgc`, is left to hold it; NVML has no getter for locked clocks, so this is their one trace, seen while the GPU runs work)",
                why: "application clocks set below the default (`nvidia-smi -ac`) or a locked clock range (`nvidia-smi -lgc`) left by a benchmark, profiling or power-capping script slow every kernel on that GPU the way a power cap does, and the slowest GPU sets a data-parallel job's pace; Azure NHC checks application clocks too",
                fix: "`nvidia-smi -i <pci bus id> -rac` restores the default application clocks, `-rgc` (and `-rmc`) releases locked clocks; find what set them (a tuning or profiling script, a DCGM config group) or it sets them again",
            },
            run: config::app_clocks,
        },
        CheckDef {
            code: "driver.pcie_link",
            layer: Layer::Driver,
            title: "GPU PCIe links at full width",
            explain: Explain {
                reads: "NVML nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width}, nvmlDeviceGetUtilizationRates; the profile's PCIe expectation (the replay counter is driver.pcie_replays')",
                expects: "current width = max width (and ≥ the profile's); generation below max only while idle",
                why: "a link trained at x8 halves host↔GPU and GPUDirect bandwidth; GPUs drop the generation at idle to save power, so that alone is not a fault",
                fix: "reseat the GPU or its riser/baseboard cable, check the slot in the BIOS; confirm with `lspci -vv -s <bdf> | grep LnkSta`",
            },
            run: pcie_link,
        },
        CheckDef {
            code: "driver.mig_pending",
            layer: Layer::Driver,
            title: "no MIG mode change waiting for a GPU reset",
            explain: Explain {
                reads: "NVML nvmlDeviceGetMigMode (current, pending)",
                expects: "current = pending",
                why: "a MIG mode change takes effect only after a GPU reset: until then the device plugin advertises the old layout and MIG-strategy pods do not schedule",
                fix: "on GPU Operator nodes let the MIG manager finish (it drains and resets the GPU itself); otherwise drain the node, stop what holds the GPU and reset it by PCI bus id (`nvidia-smi -r -i <pci bus id>`); reboot if the reset is refused",
            },
            run: mig_pending,
        },
    ]
}

/// Devices NVML could open and that are not lost, or the finished outcome when there are none
/// to judge. A GPU whose handle failed, or that answered `GPU_IS_LOST` to any reading, is
/// judged by driver.gpu_count alone (docs/checks.md, "NVML errors").
pub(crate) fn usable_devices<'c>(ctx: &'c Context<'_>) -> Result<Vec<&'c NvmlDevice>, Outcome> {
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Err(Outcome::skip("nvml unavailable (see driver.nvml_init)"));
    }
    let devices: Vec<&NvmlDevice> = nvml
        .devices
        .iter()
        .zip(ctx.gpus_lost())
        .filter(|(d, lost)| d.error.is_none() && lost.is_none())
        .map(|(d, _)| d)
        .collect();
    if devices.is_empty() {
        return Err(Outcome::skip("no gpu nvml can query"));
    }
    Ok(devices)
}

/// `gpu 3 (0000:9a:00.0)`: every finding names the GPU by index and bus id.
pub(crate) fn gpu_label(d: &NvmlDevice) -> String {
    format!(
        "gpu {} ({})",
        d.index,
        d.pci_bus_id.as_deref().unwrap_or("?")
    )
}

pub(crate) fn field(d: &NvmlDevice, name: &str) -> String {
    format!("nvml.devices[{}].{name}", d.index)
}

/// Collect per-GPU problems; when every GPU answered "not supported", skip with `unsupported`.
/// A reading that failed with an error is `unread`: the check is `error` for it, unless
/// another GPU fails or warns (docs/checks.md, "NVML errors").
pub(crate) struct PerGpu {
    pub fails: Vec<String>,
    pub warns: Vec<String>,
    pub evidence: Vec<Evidence>,
    pub judged: usize,
    unread: Vec<(String, String, NvmlError)>,
    /// PCI bus ids of the GPUs with a finding, for a reset hint that names them.
    targets: Vec<String>,
    /// How many of `fails` and `warns` name a GPU with a bus id ([`PerGpu::fail_on`]): when all
    /// do, the outcome is wholly about `targets` (`Outcome::about_gpus`).
    named: usize,
}

/// How to reset `buses` (PCI bus ids; none known: a placeholder the operator fills in), by bus id
/// and after stopping what holds them; see [`PerGpu::reset_hint`]. `after` is appended.
pub(crate) fn reset_by_bus_id<S: AsRef<str>>(buses: &[S], after: &str) -> String {
    let commands = if buses.is_empty() {
        "`nvidia-smi -r -i <pci bus id>`".to_string()
    } else {
        buses
            .iter()
            .map(|t| format!("`nvidia-smi -r -i {}`", t.as_ref()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "drain the node, stop what holds the gpu (`lsof /dev/nvidia*`: device plugin and dcgm-exporter pods, nv-hostengine, nvidia-persistenced; leave nvidia-fabricmanager running on HGX/NVSwitch nodes), then reset it by pci bus id: {commands}; reboot if the reset is refused{after}"
    )
}

impl PerGpu {
    pub fn new() -> Self {
        PerGpu {
            fails: Vec::new(),
            warns: Vec::new(),
            evidence: Vec::new(),
            judged: 0,
            unread: Vec::new(),
            targets: Vec::new(),
            named: 0,
        }
    }

    /// A failure of GPU `d`: said, and `d` targeted.
    pub fn fail_on(&mut self, d: &NvmlDevice, text: String) {
        self.target(d);
        self.fails.push(text);
        self.named += usize::from(d.pci_bus_id.is_some());
    }

    /// A warning about GPU `d`: said, and `d` targeted.
    pub fn warn_on(&mut self, d: &NvmlDevice, text: String) {
        self.target(d);
        self.warns.push(text);
        self.named += usize::from(d.pci_bus_id.is_some());
    }

    /// `d` has a finding: a reset hint names it.
    pub fn target(&mut self, d: &NvmlDevice) {
        if let Some(bdf) = &d.pci_bus_id
            && !self.targets.contains(bdf)
        {
            self.targets.push(bdf.clone());
        }
    }

    /// How to reset the GPUs with a finding, by PCI bus id (indexes shift when a GPU leaves
    /// NVML; nvidia-smi(1), `-i`), after stopping what holds them: `nvidia-smi -r` refuses a GPU
    /// any process has open (nvidia-smi(1), `-r`). The fabric manager stays up on NVSwitch
    /// systems: it retrains the reset GPU's NVLinks (Fabric Manager user guide, GPU reset).
    pub fn reset_hint(&self, after: &str) -> String {
        reset_by_bus_id(&self.targets, after)
    }

    /// The value of a reading; an error is noted as unread, "not supported" is just `None`.
    pub fn read<'r, T>(&mut self, d: &NvmlDevice, name: &str, r: &'r Reading<T>) -> Option<&'r T> {
        match r {
            Reading::Value(v) => Some(v),
            Reading::NotSupported => None,
            Reading::Error(err) => {
                self.unread
                    .push((gpu_label(d), field(d, name), err.clone()));
                None
            }
        }
    }

    fn unread_text(&self) -> String {
        let parts: Vec<String> = self
            .unread
            .iter()
            .map(|(gpu, field, err)| {
                let name = field.rsplit_once('.').map(|(_, f)| f).unwrap_or(field);
                format!("{gpu} {name}: {}", err.kind.name())
            })
            .collect();
        format!("could not read {}", parts.join(", "))
    }

    fn unread_evidence(&self) -> Vec<Evidence> {
        self.unread
            .iter()
            .map(|(_, field, err)| {
                Evidence::new(
                    field.as_str(),
                    format!("{}: {}", err.kind.name(), err.message),
                )
                .expected("a value or not supported")
            })
            .collect()
    }

    fn unread_hint(&self) -> &'static str {
        let kinds: Vec<NvmlErrorKind> = self.unread.iter().map(|(_, _, e)| e.kind).collect();
        if kinds.iter().all(|k| k.is_permission()) {
            "run gpudoctor as root (or as the privileged DaemonSet) so nvml may read every gpu; compare with `nvidia-smi -q -i <pci bus id>`"
        } else if kinds.iter().all(|k| *k == NvmlErrorKind::Timeout) {
            "nvml did not answer in time: read `dmesg | grep -i xid`, enable persistence mode, raise --timeout if the node is only slow"
        } else {
            "run `nvidia-smi -q -i <pci bus id>` to see the error directly; if it repeats, read `dmesg | grep -i xid` before resetting the gpu"
        }
    }

    pub fn finish(self, ok: String, unsupported: &str, hint: &str, action: Action) -> Outcome {
        self.finish_with(ok, unsupported, hint.to_string(), action)
    }

    /// [`PerGpu::finish`] with a hint made for the GPUs found (see [`PerGpu::reset_hint`]).
    pub fn finish_with(
        self,
        ok: String,
        unsupported: &str,
        hint: String,
        action: Action,
    ) -> Outcome {
        if !self.fails.is_empty() || !self.warns.is_empty() {
            let mut parts = self.fails.clone();
            parts.extend(self.warns.iter().cloned());
            if !self.unread.is_empty() {
                parts.push(self.unread_text());
            }
            let outcome = if self.fails.is_empty() {
                Outcome::warn(parts.join("; "))
            } else {
                Outcome::fail(parts.join("; "))
            };
            let unread = self.unread_evidence();
            // Named GPUs only when every part of the finding is about one of them.
            let wholly = self.named == self.fails.len() + self.warns.len();
            let about: &[String] = if self.unread.is_empty() && wholly {
                &self.targets
            } else {
                &[]
            };
            return outcome
                .about_gpus(about.iter().cloned())
                .evidence_all(self.evidence)
                .evidence_all(unread)
                .hint(hint)
                .action(action);
        }
        if !self.unread.is_empty() {
            let judged = if self.judged == 0 {
                String::new()
            } else {
                format!("; judged without it: {ok}")
            };
            return Outcome::error(format!("{}{judged}", self.unread_text()))
                .evidence_all(self.unread_evidence())
                .hint(self.unread_hint());
        }
        if self.judged == 0 {
            return Outcome::skip(unsupported);
        }
        Outcome::pass(ok)
    }
}

fn thermal(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut acc = PerGpu::new();
    let mut hottest = 0u32;
    for d in &devices {
        let temp = acc.read(d, "temperature_c", &d.temperature_c).copied();
        let slowdown = acc
            .read(d, "temperature_slowdown_c", &d.temperature_slowdown_c)
            .copied();
        let (Some(temp), Some(slowdown)) = (temp, slowdown) else {
            continue;
        };
        acc.judged += 1;
        hottest = hottest.max(temp);
        if temp >= slowdown {
            let shutdown = d
                .temperature_shutdown_c
                .value()
                .map(|s| format!(", shutdown {s} °C"))
                .unwrap_or_default();
            acc.fails.push(format!(
                "{} at {temp} °C, at or above its slowdown threshold {slowdown} °C",
                gpu_label(d)
            ));
            acc.evidence.push(
                Evidence::new(
                    field(d, "temperature_c"),
                    format!("{temp} °C (slowdown {slowdown} °C{shutdown})"),
                )
                .expected(format!("< {slowdown} °C")),
            );
        }
    }
    acc.finish(
        format!("all gpus below their slowdown temperature (hottest {hottest} °C)"),
        "temperature or thresholds not reported",
        "check chassis airflow, fans and inlet temperature with the bmc (`ipmitool sdr`); one hot gpu in a cool chassis needs hardware inspection",
        Action::HardwareInspection,
    )
}

fn reason_names(bits: u64) -> Vec<&'static str> {
    use clock_event::*;
    [
        (HW_SLOWDOWN, "hw slowdown"),
        (SW_THERMAL_SLOWDOWN, "sw thermal slowdown"),
        (HW_THERMAL_SLOWDOWN, "hw thermal slowdown"),
        (HW_POWER_BRAKE_SLOWDOWN, "hw power brake"),
    ]
    .into_iter()
    .filter(|(bit, _)| bits & bit != 0)
    .map(|(_, name)| name)
    .collect()
}

fn clock_slowdown(ctx: &Context<'_>) -> Outcome {
    use clock_event::*;
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (window, broken) = window(ctx);
    let mut acc = PerGpu::new();
    let mut notes = Vec::new();
    for d in &devices {
        let Some(&bits) = acc.read(d, "clock_event_reasons", &d.clock_event_reasons) else {
            continue;
        };
        acc.judged += 1;
        let before = match &window {
            Window::Sample(b) => d
                .pci_bus_id
                .as_ref()
                .and_then(|bus| b.gpus.get(bus))
                .and_then(|m| m.get("clock_event_reasons"))
                .copied(),
            Window::Totals { .. } => None,
        };
        if let Some(was) = before {
            let cleared = reason_names(was & !bits);
            if !cleared.is_empty() {
                notes.push(format!(
                    "gpu {} {} cleared during the window",
                    d.index,
                    cleared.join(", ")
                ));
            }
        }
        let names = reason_names(bits);
        if names.is_empty() {
            continue;
        }
        let power = match (d.power_usage_mw.value(), d.power_limit_mw.value()) {
            (Some(u), Some(l)) => format!(", power {} W of {} W", u / 1000, l / 1000),
            _ => String::new(),
        };
        let line = format!("{} clocks cut: {}", gpu_label(d), names.join(", "));
        acc.evidence.push(
            Evidence::new(
                field(d, "clock_event_reasons"),
                format!("{bits:#x} ({}){power}", names.join(", ")),
            )
            .expected("no hw slowdown, hw thermal, power brake or sw thermal bit"),
        );
        // 0x40 and 0x80 are sustained hardware conditions; a lone 0x8 can flash during P-state
        // changes (nvml.h), so one reading of it warns (gpu-health.md §3). Over a --sample
        // window a hardware bit set in both readings is sustained (NVSentinel's power-brake
        // watch needs 3 consecutive polls, NVIDIA/NVSentinel#1666; two are what one run has).
        let hardware = HW_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN;
        match before {
            Some(was) if bits & was & hardware != 0 => acc.fails.push(format!(
                "{line} (in both readings {}: sustained)",
                window.text()
            )),
            Some(_) if bits & hardware != 0 => acc.warns.push(format!(
                "{line} (only in the second reading: it came on during the window)"
            )),
            _ if bits & (HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN) != 0 => {
                acc.fails.push(line)
            }
            _ => acc.warns.push(line),
        }
    }
    let noted = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    let mut outcome = acc.finish(
        format!(
            "no clock slowdown on {} gpu(s){}{noted}",
            devices.len(),
            match &window {
                Window::Sample(_) => format!(" in either reading {}", window.text()),
                Window::Totals { .. } => String::new(),
            }
        ),
        "clock event reasons not reported",
        "power brake: check the psus and the bmc event log; thermal: airflow and fans; a lone hw slowdown can flash during p-state changes, so run again (or with --sample) before acting; repeated events need hardware inspection",
        Action::HardwareInspection,
    );
    if matches!(window, Window::Totals { .. })
        && matches!(
            outcome.status,
            crate::report::Status::Warn | crate::report::Status::Fail
        )
    {
        outcome.summary.push_str(&format!("; {SAMPLE_MORE}"));
    }
    match broken {
        Some(err) => outcome.with_unread([err]),
        None => outcome,
    }
}

fn pcie_link(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let profile = ctx.profile();
    let mut acc = PerGpu::new();
    let mut notes = Vec::new();
    for d in &devices {
        let cur_w = acc
            .read(d, "pcie_current_width", &d.pcie_current_width)
            .copied();
        let max_w = acc.read(d, "pcie_max_width", &d.pcie_max_width).copied();
        let (Some(cur_w), Some(max_w)) = (cur_w, max_w) else {
            continue;
        };
        let read = |r: &Reading<u32>| r.value().copied();
        acc.judged += 1;
        let cur_g = read(&d.pcie_current_gen);
        let max_g = read(&d.pcie_max_gen);
        let gen_text = |g: Option<u32>| {
            g.map(|g| format!("gen{g}"))
                .unwrap_or_else(|| "gen?".into())
        };
        let observed = format!(
            "{} x{cur_w} (max {} x{max_w})",
            gen_text(cur_g),
            gen_text(max_g)
        );
        if cur_w < max_w {
            acc.fails.push(format!(
                "{} pcie link at x{cur_w}, capable of x{max_w}",
                gpu_label(d)
            ));
            acc.evidence.push(
                Evidence::new(field(d, "pcie_current_width"), observed.clone())
                    .expected(format!("x{max_w}")),
            );
        }
        if let Some(p) = profile {
            if let Some(want) = p.gpu_pcie_width.filter(|w| max_w < *w) {
                acc.fails.push(format!(
                    "{} pcie link max x{max_w}, profile {} expects x{want}",
                    gpu_label(d),
                    p.name
                ));
                acc.evidence.push(
                    Evidence::new(field(d, "pcie_max_width"), observed.clone())
                        .expected(format!("x{want} (profile {})", p.name)),
                );
            }
            if let (Some(want), Some(max)) = (p.gpu_pcie_gen, max_g)
                && max < want
            {
                acc.fails.push(format!(
                    "{} pcie max gen{max}, profile {} expects gen{want}",
                    gpu_label(d),
                    p.name
                ));
                acc.evidence.push(
                    Evidence::new(field(d, "pcie_max_gen"), observed.clone())
                        .expected(format!("gen{want} (profile {})", p.name)),
                );
            }
        }
        if let (Some(cur), Some(max)) = (cur_g, max_g)
            && cur < max
        {
            // Unknown utilisation is not idle: a MIG parent answers NOT_SUPPORTED (nvitop#5),
            // so the generation is noted, not judged.
            let Some(busy) = d.utilization_gpu_pct.value().copied() else {
                let why = if d.mig_on() { "mig on" } else { "not reported" };
                notes.push(format!(
                    "gpu {} at gen{cur}, utilisation unknown ({why}): not judged",
                    d.index
                ));
                continue;
            };
            if busy >= BUSY_UTILIZATION_PCT {
                acc.fails.push(format!(
                    "{} pcie at gen{cur} while {busy}% busy, capable of gen{max}",
                    gpu_label(d)
                ));
                acc.evidence.push(
                    Evidence::new(
                        field(d, "pcie_current_gen"),
                        format!("{observed}, utilisation {busy}%"),
                    )
                    .expected(format!("gen{max} under load")),
                );
            } else {
                notes.push(format!("gpu {} at gen{cur} while idle", d.index));
            }
        }
    }
    let mut outcome = acc.finish(
        format!("gpu pcie links at full width on {} gpu(s)", devices.len()),
        "pcie link state not reported",
        "reseat the gpu or its riser/baseboard cable and check the slot in the bios; confirm with `lspci -vv -s <bdf> | grep LnkSta`",
        Action::HardwareInspection,
    );
    if !notes.is_empty() && outcome.status == crate::report::Status::Pass {
        // Idle GPUs drop the link generation to save power: noted, not judged (gpu-health.md §5).
        let (idle, unknown): (Vec<String>, Vec<String>) =
            notes.into_iter().partition(|n| n.ends_with("while idle"));
        if !idle.is_empty() {
            outcome
                .summary
                .push_str(&format!("; {} (power saving, expected)", idle.join(", ")));
        }
        if !unknown.is_empty() {
            outcome
                .summary
                .push_str(&format!("; {}", unknown.join(", ")));
        }
    }
    outcome
}

fn mig_pending(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut acc = PerGpu::new();
    let mut enabled = 0;
    for d in &devices {
        let Some(mode) = acc.read(d, "mig_mode", &d.mig_mode) else {
            continue;
        };
        acc.judged += 1;
        enabled += usize::from(mode.current);
        if mode.current != mode.pending {
            let change = if mode.pending { "enable" } else { "disable" };
            acc.target(d);
            acc.fails.push(format!(
                "{} mig {change} pending (gpu reset needed)",
                gpu_label(d)
            ));
            acc.evidence.push(
                Evidence::new(
                    field(d, "mig_mode"),
                    format!(
                        "current {}, pending {}",
                        on_off(mode.current),
                        on_off(mode.pending)
                    ),
                )
                .expected("current = pending"),
            );
        }
    }
    let hint =
        acc.reset_hint(" (on GPU Operator nodes the mig-manager does this itself: let it finish)");
    acc.finish_with(
        format!("no mig change pending ({enabled} gpu(s) in mig mode)"),
        "mig not supported on these gpus",
        hint,
        Action::ResetGpu,
    )
}

fn on_off(b: bool) -> &'static str {
    if b { "enabled" } else { "disabled" }
}
