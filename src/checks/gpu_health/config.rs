//! What is set on a GPU rather than broken in it, and differs from its siblings: ECC switched
//! off (driver.ecc_mode), a VBIOS or InfoROM unlike the other GPUs' or the profile's, an InfoROM
//! whose checksum fails (driver.gpu_firmware), application clocks left below their default or a
//! locked clock holding the GPU (driver.app_clocks). Each slows or endangers jobs silently: nothing crashes.
//!
//! What the peers do: Azure NHC `azure_gpu_vbios.nhc` fails a node whose GPUs do not all run
//! the expected VBIOS and `azure_gpu_app_clocks.nhc` one whose application clocks are below the
//! maximum; DCGM's software plugin (`nvvs/plugin_src/software/Software.cpp`, `checkInforom`)
//! fails on `nvmlDeviceValidateInforom` answering `NVML_ERROR_CORRUPTED_INFOROM`; gcm maps
//! `CORRUPTED_INFOROM` to CRITICAL (gpu-health.md §1).

use std::collections::BTreeMap;

use super::*;
use crate::answers::nvml::Clocks;

/// Data-centre GPUs ship with ECC on and persistence expected; GeForce and TITAN boards have no
/// ECC on their GDDR and are left out (nvidia-smi(1): `-e` "Set the ECC mode for the target
/// GPUs", supported on data-centre products).
pub(crate) fn is_server_gpu(name: Option<&str>) -> bool {
    !name.is_some_and(|n| n.contains("GeForce") || n.contains("TITAN"))
}

pub(super) fn ecc_mode(ctx: &Context<'_>) -> Outcome {
    match usable_devices(ctx) {
        Ok(devices) => ecc_mode_of(&devices),
        Err(o) => o,
    }
}

fn ecc_mode_of(devices: &[&NvmlDevice]) -> Outcome {
    let mut acc = PerGpu::new();
    let mut off = Vec::new();
    for d in devices.iter().filter(|d| is_server_gpu(d.name.as_deref())) {
        let Some(mode) = acc.read(d, "ecc_mode", &d.ecc_mode).copied() else {
            continue;
        };
        acc.judged += 1;
        if mode.current {
            continue;
        }
        let coming = if mode.pending {
            " (on after the next reset: pending enabled)"
        } else {
            ""
        };
        acc.warn_on(
            d,
            format!(
                "{} ecc off: memory errors there are neither corrected nor counted{coming}",
                gpu_label(d)
            ),
        );
        acc.evidence.push(
            Evidence::new(
                field(d, "ecc_mode"),
                format!("current {}, pending {}", mode.current, mode.pending),
            )
            .expected("current true on a data-centre gpu"),
        );
        off.push(d.pci_bus_id.clone().unwrap_or_else(|| d.index.to_string()));
    }
    let hint = if off.is_empty() {
        String::new()
    } else {
        let on: Vec<String> = off
            .iter()
            .map(|b| format!("`nvidia-smi -i {b} -e 1`"))
            .collect();
        format!(
            "turn ecc back on ({}), then reset the gpu for it to take effect: {}",
            on.join(", "),
            acc.reset_hint("")
        )
    };
    let judged = acc.judged;
    acc.finish_with(
        format!("ecc on for every data-centre gpu ({judged})"),
        "ecc mode not reported",
        hint,
        Action::FixConfig,
    )
}

/// The value most GPUs share and the GPUs that differ from it, for one string reading.
struct Drift<'d> {
    common: Option<String>,
    odd: Vec<(&'d NvmlDevice, String)>,
}

fn drift<'d>(
    devices: &[&'d NvmlDevice],
    acc: &mut PerGpu,
    name: &str,
    get: impl Fn(&'d NvmlDevice) -> &'d Reading<String>,
) -> Drift<'d> {
    let mut seen: Vec<(&'d NvmlDevice, String)> = Vec::new();
    for d in devices {
        if let Some(v) = acc.read(d, name, get(d)) {
            seen.push((d, v.trim().to_string()));
        }
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, v) in &seen {
        *counts.entry(v.as_str()).or_default() += 1;
    }
    // The most common value; a tie goes to the one the lowest-indexed GPU has.
    let top = counts.values().copied().max().unwrap_or(0);
    let common = seen
        .iter()
        .find(|(_, v)| counts.get(v.as_str()) == Some(&top))
        .map(|(_, v)| v.clone());
    let odd = seen
        .iter()
        .filter(|(_, v)| Some(v) != common.as_ref())
        .cloned()
        .collect();
    Drift { common, odd }
}

pub(super) fn gpu_firmware(ctx: &Context<'_>) -> Outcome {
    let expected = ctx.profile().and_then(|p| p.vbios_version.clone());
    match usable_devices(ctx) {
        Ok(devices) => gpu_firmware_of(&devices, expected.as_deref()),
        Err(o) => o,
    }
}

fn gpu_firmware_of(devices: &[&NvmlDevice], expected: Option<&str>) -> Outcome {
    let mut acc = PerGpu::new();
    let mut corrupt = false;
    let mut inforoms_checked = 0usize;
    // GPUs of one model are compared with each other; a node with two models compares each.
    let mut models: BTreeMap<&str, Vec<&NvmlDevice>> = BTreeMap::new();
    for d in devices {
        models
            .entry(d.name.as_deref().unwrap_or("?"))
            .or_default()
            .push(d);
    }
    let mut vbios_seen = Vec::new();
    for group in models.values() {
        let vbios = drift(group, &mut acc, "vbios_version", |d| &d.vbios_version);
        let inforom = drift(group, &mut acc, "inforom_image_version", |d| {
            &d.inforom_image_version
        });
        if let Some(v) = &vbios.common {
            vbios_seen.push(v.clone());
        }
        for (readings, what, name) in [
            (&vbios, "vbios", "vbios_version"),
            (&inforom, "inforom image", "inforom_image_version"),
        ] {
            let Some(common) = &readings.common else {
                continue;
            };
            let siblings = group.len() - readings.odd.len();
            for (d, v) in &readings.odd {
                acc.warn_on(
                    d,
                    format!(
                        "{} {what} {v}, its {siblings} sibling(s) run {common}",
                        gpu_label(d)
                    ),
                );
                acc.evidence
                    .push(Evidence::new(field(d, name), v.as_str()).expected(common.as_str()));
            }
        }
        if let Some(want) = expected {
            let (want, mut on_other) = (want.trim(), Vec::new());
            for d in group.iter() {
                if let Some(v) = d.vbios_version.value()
                    && v.trim() != want
                {
                    on_other.push((*d, v.trim().to_string()));
                }
            }
            for (d, v) in on_other {
                // Already named above as the odd one out: say the profile's version there too.
                acc.warn_on(
                    d,
                    format!("{} vbios {v}, the profile expects {want}", gpu_label(d)),
                );
                acc.evidence.push(
                    Evidence::new(field(d, "vbios_version"), v.as_str())
                        .expected(format!("{want} (profile vbios_version)")),
                );
            }
        }
        for d in group.iter() {
            let Some(valid) = acc.read(d, "inforom_valid", &d.inforom_valid).copied() else {
                continue;
            };
            inforoms_checked += 1;
            if !valid {
                corrupt = true;
                acc.fail_on(
                    d,
                    format!(
                        "{} inforom corrupted (its checksum fails): ecc and retirement records may be lost",
                        gpu_label(d)
                    ),
                );
                acc.evidence.push(
                    Evidence::new(field(d, "inforom_valid"), "NVML_ERROR_CORRUPTED_INFOROM")
                        .expected("a valid inforom"),
                );
            }
        }
        let judged = group
            .iter()
            .filter(|d| d.vbios_version.value().is_some() || d.inforom_valid.value().is_some())
            .count();
        acc.judged += judged;
    }
    let hint = if corrupt {
        "a corrupted inforom holds the gpu's ecc, retirement and error records: drain the node and have the gpu replaced (RMA, with its serial and board part number); `nvidia-smi -q -i <pci bus id>` shows the inforom versions"
    } else {
        "update the odd gpu to the firmware its siblings run with the platform's firmware package (NVIDIA's HGX/DGX firmware update container or the server vendor's), on a drained node; mixed firmware on one board is a replaced gpu that missed the fleet's update"
    };
    let action = if corrupt {
        Action::HardwareInspection
    } else {
        Action::FixConfig
    };
    let versions = match vbios_seen.as_slice() {
        [] => "vbios not reported".to_string(),
        [one] => format!("vbios {one}"),
        many => format!("vbios {}", many.join(", ")),
    };
    let inforoms = if inforoms_checked == 0 {
        "inforom validity not reported".to_string()
    } else {
        format!("{inforoms_checked} inforom(s) valid")
    };
    let judged = acc.judged;
    acc.finish(
        format!("{judged} gpu(s) alike: {versions}; {inforoms}"),
        "firmware versions not reported",
        hint,
        action,
    )
}

/// Application clocks below this share of the default count as lowered: 1 % absorbs the
/// supported-clock table's steps (`nvidia-smi -q -d SUPPORTED_CLOCKS`).
const LOWERED_BELOW: f64 = 0.99;

/// `nvmlClocksEventReasonApplicationsClocksSetting` (nvml.h, 0x2): "GPU clocks are limited by
/// current setting of applications clocks". The same bit is the only trace a locked clock leaves:
/// NVML has `nvmlDeviceSetGpuLockedClocks` and `nvmlDeviceResetGpuLockedClocks` but no getter
/// (none in the NVML reference, none among the symbols of Debian's libnvidia-ml 535).
const APPLICATIONS_CLOCKS_SETTING: u64 = 0x2;

pub(super) fn app_clocks(ctx: &Context<'_>) -> Outcome {
    match usable_devices(ctx) {
        Ok(devices) => app_clocks_of(&devices),
        Err(o) => o,
    }
}

/// How one GPU's clocks are held below what it could run at, if they are.
enum Held {
    /// Application clocks below the default (`nvidia-smi -ac`): what is low, per clock.
    Lowered(Vec<String>),
    /// The clock-setting event reason is active although the application clocks are at the
    /// default and the default is already the maximum: only a locked clock (`nvidia-smi -lgc`,
    /// `-lmc`) is left to hold the GPU. A GPU whose default sits below its maximum (A100: 1155 of
    /// 1410 MHz) can show the bit from its application clocks alone, so it is not judged so.
    Locked { bits: u64, max: Clocks },
}

fn held(d: &NvmlDevice, now: Clocks, default: Clocks) -> Option<Held> {
    let low = |a: u32, b: u32| b > 0 && f64::from(a) < f64::from(b) * LOWERED_BELOW;
    let mut parts = Vec::new();
    if low(now.graphics_mhz, default.graphics_mhz) {
        parts.push(format!(
            "graphics {} of {} MHz",
            now.graphics_mhz, default.graphics_mhz
        ));
    }
    if low(now.memory_mhz, default.memory_mhz) {
        parts.push(format!(
            "memory {} of {} MHz",
            now.memory_mhz, default.memory_mhz
        ));
    }
    if !parts.is_empty() {
        return Some(Held::Lowered(parts));
    }
    let bits = *d.clock_event_reasons.value()?;
    let max = *d.max_clocks.value()?;
    (bits & APPLICATIONS_CLOCKS_SETTING != 0 && !low(default.graphics_mhz, max.graphics_mhz))
        .then_some(Held::Locked { bits, max })
}

fn app_clocks_of(devices: &[&NvmlDevice]) -> Outcome {
    let mut acc = PerGpu::new();
    let (mut lowered, mut locked) = (Vec::new(), Vec::new());
    for d in devices {
        let now = acc
            .read(d, "applications_clocks", &d.applications_clocks)
            .copied();
        let default = acc
            .read(
                d,
                "default_applications_clocks",
                &d.default_applications_clocks,
            )
            .copied();
        let (Some(now), Some(default)) = (now, default) else {
            continue;
        };
        acc.judged += 1;
        let bus = d.pci_bus_id.clone().unwrap_or_else(|| d.index.to_string());
        match held(d, now, default) {
            None => {}
            Some(Held::Lowered(parts)) => {
                acc.warn_on(
                    d,
                    format!(
                        "{} application clocks below their default: {}",
                        gpu_label(d),
                        parts.join(", ")
                    ),
                );
                acc.evidence.push(
                    Evidence::new(field(d, "applications_clocks"), mhz(now))
                        .expected(format!("{} (the default)", mhz(default))),
                );
                lowered.push(bus);
            }
            Some(Held::Locked { bits, max }) => {
                acc.warn_on(
                    d,
                    format!(
                        "{} clocks held by a clock setting although its application clocks are at their default ({} MHz graphics, its maximum): a locked clock (`nvidia-smi -lgc`)",
                        gpu_label(d),
                        default.graphics_mhz
                    ),
                );
                acc.evidence.push(
                    Evidence::new(
                        field(d, "clock_event_reasons"),
                        format!("{bits:#x} (applications clocks setting active)"),
                    )
                    .expected(format!(
                        "no 0x2 bit while the application clocks ({}) are the maximum ({})",
                        mhz(now),
                        mhz(max)
                    )),
                );
                locked.push(bus);
            }
        }
    }
    let commands = |buses: &[String], flag: &str| {
        buses
            .iter()
            .map(|b| format!("`nvidia-smi -i {b} {flag}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut hints = Vec::new();
    if !lowered.is_empty() {
        hints.push(format!(
            "restore the default application clocks ({}); something set them with `nvidia-smi -ac` (a benchmark or tuning script, a dcgm config group): find it before the next job, or it sets them again",
            commands(&lowered, "-rac")
        ));
    }
    if !locked.is_empty() {
        hints.push(format!(
            "release the locked clocks ({}, and `-rmc` where the memory clock was locked too); something ran `nvidia-smi -lgc`/`-lmc` or nvmlDeviceSetGpuLockedClocks (a profiling or power-capping script): find it, or it locks them again",
            commands(&locked, "-rgc")
        ));
    }
    let judged = acc.judged;
    acc.finish_with(
        format!("application clocks at their default on {judged} gpu(s)"),
        "application clocks not reported",
        hints.join("; "),
        Action::FixConfig,
    )
}

fn mhz(c: Clocks) -> String {
    format!(
        "graphics {} MHz, memory {} MHz",
        c.graphics_mhz, c.memory_mhz
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answers::nvml::CurrentPending;
    use crate::report::Status;

    fn gpu(index: u32) -> NvmlDevice {
        let clocks = Clocks {
            graphics_mhz: 1980,
            memory_mhz: 2619,
        };
        NvmlDevice {
            index,
            pci_bus_id: Some(format!("0000:{:02x}:00.0", 0x18 + index)),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            ecc_mode: Reading::Value(CurrentPending {
                current: true,
                pending: true,
            }),
            vbios_version: Reading::Value("96.00.74.00.01".into()),
            inforom_image_version: Reading::Value("G520.0200.00.05".into()),
            inforom_valid: Reading::Value(true),
            applications_clocks: Reading::Value(clocks),
            default_applications_clocks: Reading::Value(clocks),
            ..NvmlDevice::default()
        }
    }

    fn run(devices: Vec<NvmlDevice>, check: fn(&[&NvmlDevice]) -> Outcome) -> Outcome {
        let refs: Vec<&NvmlDevice> = devices.iter().collect();
        check(&refs)
    }

    fn firmware(devices: &[&NvmlDevice]) -> Outcome {
        gpu_firmware_of(devices, None)
    }

    #[test]
    fn alike_gpus_pass_and_an_odd_one_is_named() {
        let all: Vec<NvmlDevice> = (0..8).map(gpu).collect();
        assert_eq!(run(all.clone(), firmware).status, Status::Pass);
        assert_eq!(run(all.clone(), ecc_mode_of).status, Status::Pass);
        assert_eq!(run(all.clone(), app_clocks_of).status, Status::Pass);

        let mut odd = all.clone();
        odd[5].vbios_version = Reading::Value("96.00.89.00.01".into());
        let out = run(odd, firmware);
        assert_eq!(out.status, Status::Warn);
        assert!(
            out.summary
                .contains("gpu 5 (0000:1d:00.0) vbios 96.00.89.00.01")
        );
        assert!(out.summary.contains("7 sibling(s) run 96.00.74.00.01"));

        // The profile's version names every gpu that runs another.
        let refs: Vec<&NvmlDevice> = all.iter().collect();
        let out = gpu_firmware_of(&refs, Some("96.00.89.00.01"));
        assert_eq!(out.status, Status::Warn);
        assert!(out.summary.contains(
            "gpu 0 (0000:18:00.0) vbios 96.00.74.00.01, the profile expects 96.00.89.00.01"
        ));

        let mut bad = all.clone();
        bad[2].inforom_valid = Reading::Value(false);
        let out = run(bad, firmware);
        assert_eq!(out.status, Status::Fail);
        assert!(
            out.summary
                .contains("gpu 2 (0000:1a:00.0) inforom corrupted")
        );
        assert_eq!(out.action, Action::HardwareInspection);
    }

    #[test]
    fn ecc_off_and_lowered_clocks_warn_naming_the_gpu() {
        let mut all: Vec<NvmlDevice> = (0..4).map(gpu).collect();
        all[3].ecc_mode = Reading::Value(CurrentPending::default());
        all[1].applications_clocks = Reading::Value(Clocks {
            graphics_mhz: 1410,
            memory_mhz: 2619,
        });
        let out = run(all.clone(), ecc_mode_of);
        assert_eq!(out.status, Status::Warn);
        assert!(out.summary.starts_with("gpu 3 (0000:1b:00.0) ecc off"));
        assert!(
            out.hint
                .as_deref()
                .unwrap_or_default()
                .contains("`nvidia-smi -i 0000:1b:00.0 -e 1`")
        );
        let out = run(all.clone(), app_clocks_of);
        assert_eq!(out.status, Status::Warn);
        assert!(out.summary.contains("graphics 1410 of 1980 MHz"));
        assert!(
            out.hint
                .as_deref()
                .unwrap_or_default()
                .contains("`nvidia-smi -i 0000:19:00.0 -rac`")
        );
        // A GeForce board has no ECC to turn on; absent readings are not judged.
        let mut geforce = gpu(0);
        geforce.name = Some("NVIDIA GeForce RTX 4090".into());
        geforce.ecc_mode = Reading::Value(CurrentPending::default());
        assert_eq!(run(vec![geforce], ecc_mode_of).status, Status::Skip);
        let old = NvmlDevice {
            index: 0,
            ..NvmlDevice::default()
        };
        assert_eq!(run(vec![old.clone()], firmware).status, Status::Skip);
        assert_eq!(run(vec![old], app_clocks_of).status, Status::Skip);
    }

    /// A locked clock leaves only the 0x2 event reason: judged where the default application
    /// clocks are the maximum (H100: 1980 of 1980 MHz), not where they sit below it (A100:
    /// 1155 of 1410 MHz, where the application clocks alone can set the bit), nor without the
    /// maximum (a capture made before it was read), nor for idle or power-capped bits.
    #[test]
    fn a_locked_clock_is_named_only_where_the_bit_cannot_come_from_application_clocks() {
        let max = Clocks {
            graphics_mhz: 1980,
            memory_mhz: 2619,
        };
        let mut all: Vec<NvmlDevice> = (0..4).map(gpu).collect();
        for d in &mut all {
            d.max_clocks = Reading::Value(max);
            d.clock_event_reasons = Reading::Value(0x4);
        }
        assert_eq!(run(all.clone(), app_clocks_of).status, Status::Pass);
        all[2].clock_event_reasons = Reading::Value(0x2 | 0x4);
        let out = run(all.clone(), app_clocks_of);
        assert_eq!(out.status, Status::Warn, "{}", out.summary);
        assert!(
            out.summary
                .starts_with("gpu 2 (0000:1a:00.0) clocks held by a clock setting"),
            "{}",
            out.summary
        );
        assert!(out.summary.contains("a locked clock (`nvidia-smi -lgc`)"));
        let hint = out.hint.clone().unwrap_or_default();
        assert!(hint.contains("`nvidia-smi -i 0000:1a:00.0 -rgc`"), "{hint}");
        assert!(!hint.contains("-rac"), "{hint}");
        assert!(
            out.evidence.iter().any(|e| e
                .observed
                .contains("0x6 (applications clocks setting active)")),
            "{:?}",
            out.evidence
        );

        // The A100's default sits below its maximum: the bit may be the application clocks'.
        let mut a100 = all.clone();
        for d in &mut a100 {
            d.applications_clocks = Reading::Value(Clocks {
                graphics_mhz: 1155,
                memory_mhz: 1593,
            });
            d.default_applications_clocks = d.applications_clocks.clone();
            d.max_clocks = Reading::Value(Clocks {
                graphics_mhz: 1410,
                memory_mhz: 1593,
            });
        }
        assert_eq!(run(a100, app_clocks_of).status, Status::Pass);
        let mut unknown_max = all.clone();
        unknown_max[2].max_clocks = Reading::NotSupported;
        assert_eq!(run(unknown_max, app_clocks_of).status, Status::Pass);

        // Lowered application clocks set the bit too: they are named as such, not as a lock.
        all[2].applications_clocks = Reading::Value(Clocks {
            graphics_mhz: 1410,
            memory_mhz: 2619,
        });
        let out = run(all, app_clocks_of);
        assert!(
            out.summary
                .contains("application clocks below their default")
        );
        assert!(!out.summary.contains("locked"), "{}", out.summary);
    }
}
