//! The GPUs and their fabric: driver and NVML versions, the GPU/NVSwitch inventory by PCI
//! address (binding, VBIOS, NVML's model, memory-error state, MIG, XIDs), every GPU/NIC's NUMA
//! node and PCIe link, ACS on the switch ports above them, and each GPU's NVLinks and fabric.

use std::collections::BTreeMap;

use super::{DRIVER_GPU, Facts, NVML, NVML_GPU, list, unreadable};
use crate::answers::nvml::{NvmlDevice, Reading};
use crate::checks::Context;
use crate::checks::gpu_health::{self, clock_event};
use crate::facts::pci::{LinkSpeed, VENDOR_NVIDIA};
use crate::facts::pcicfg::{ACS_BITS, AcsReading};
use crate::facts::topology::{self, DeviceKind, PciDevice};
use crate::facts::{iommu, nvidia, xid};

/// NVIDIA "other bridge" class (`0x0680`): an HGX NVSwitch (facts/topology.rs `kind_of`).
const CLASS_NVSWITCH: u32 = 0x0680;

/// The subject of one GPU's NVML facts.
fn nvml_subject(device: &NvmlDevice) -> String {
    match &device.pci_bus_id {
        Some(bdf) => format!("{NVML_GPU} {bdf}"),
        None => format!("{NVML_GPU} index {}", device.index),
    }
}

/// An NVML reading as a value: the value, `not supported`, or the error.
fn reading<T>(r: &Reading<T>, show: impl Fn(&T) -> String) -> String {
    match r {
        Reading::Value(v) => show(v),
        Reading::NotSupported => "not supported".into(),
        // The kind only: its wording differs between NVML versions (facts version 2).
        Reading::Error(e) => format!("error ({})", e.kind.name()),
    }
}

fn health_mask_text(mask: u32) -> String {
    crate::answers::nvml::HealthMask(mask).describe()
}

fn on_off(current: bool) -> &'static str {
    if current { "enabled" } else { "disabled" }
}

pub(super) fn driver(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "driver";
    match ctx.module_version() {
        Ok(Some((version, from))) => {
            facts.put(s, "driver", "module version", version.as_str());
            facts.put(s, "driver", "module version from", *from);
        }
        Ok(None) => {
            facts.put(s, "driver", "module version", "not loaded");
            facts
                .unavailable
                .insert(DRIVER_GPU.into(), "nvidia module not loaded".into());
        }
        Err(err) => facts.put(s, "driver", "module version", unreadable(err)),
    }
    let libraries = nvidia::gather_nvml_library_versions(ctx.source());
    facts.put(
        s,
        "driver",
        "nvml libraries",
        list(libraries.iter().map(|(v, _)| v)),
    );

    let nvml = ctx.nvml();
    match &nvml.init_error {
        Some(err) => {
            // The kind is the fact; the library's wording of it differs between NVML versions
            // and stand-ins (`Driver Not Loaded`, `NVIDIA driver is not loaded`): shown apart.
            facts.put(s, "nvml", "init", err.kind.name());
            facts.put(s, "nvml", "message", err.message.as_str());
            let why = format!("{}: {}", err.kind.name(), err.message);
            facts.unavailable.insert(NVML.to_string(), why);
        }
        None => {
            facts.put(s, "nvml", "init", "ok");
            let v = "nvml versions";
            let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
            facts.put(s, v, "driver version", or_unknown(&nvml.driver_version));
            facts.put(s, v, "nvml version", or_unknown(&nvml.nvml_version));
            if let Some(cuda) = nvml.cuda_driver_version {
                // `12040` is CUDA 12.4 (cudaDriverGetVersion: 1000 × major + 10 × minor).
                facts.put(
                    s,
                    v,
                    "cuda driver version",
                    format!("{}.{}", cuda / 1000, (cuda % 1000) / 10),
                );
            }
            facts.put(s, v, "device count", nvml.device_count.to_string());
            for device in &nvml.devices {
                nvml_device(facts, device);
            }
        }
    }

    match ctx.pci() {
        Err(err) => facts.put(s, "pci", "functions", unreadable(err)),
        Ok(pci) => {
            for f in &pci.functions {
                let subject = if f.is_nvidia_gpu() {
                    format!("gpu {}", f.bdf)
                } else if f.vendor == VENDOR_NVIDIA && f.class >> 8 == CLASS_NVSWITCH {
                    format!("nvswitch {}", f.bdf)
                } else {
                    continue;
                };
                facts.put(
                    s,
                    &subject,
                    "pci id",
                    format!("{:04x}:{:04x}", f.vendor, f.device),
                );
                facts.put(
                    s,
                    &subject,
                    "driver",
                    f.driver.clone().unwrap_or_else(|| "none".into()),
                );
                if f.is_nvidia_gpu() {
                    let subject = format!("{DRIVER_GPU} {}", f.bdf);
                    match nvidia::gather_information(ctx.source(), &f.bdf) {
                        Ok(Some(info)) => {
                            for (key, attribute) in
                                [("Video BIOS", "vbios"), ("GPU Excluded", "excluded")]
                            {
                                if let Some(value) = info.get(key) {
                                    facts.put(s, &subject, attribute, value.as_str());
                                }
                            }
                        }
                        Ok(None) => facts.put(s, &subject, "information", "absent"),
                        Err(err) => facts.put(s, &subject, "information", unreadable(&err)),
                    }
                }
            }
        }
    }
    xids(ctx, facts);
}

fn nvml_device(facts: &mut Facts, d: &NvmlDevice) {
    let s = "driver";
    let subject = nvml_subject(d);
    facts.touch(s, &subject);
    if let Some(err) = &d.error {
        facts.put(s, &subject, "error", err.kind.name());
        facts.put(s, &subject, "message", err.message.as_str());
    }
    if let Some(name) = &d.name {
        facts.put(s, &subject, "model", name.as_str());
    }
    if let Some(uuid) = &d.uuid {
        facts.put(s, &subject, "uuid", uuid.as_str());
    }
    if let Some(serial) = d.serial.value() {
        facts.put(s, &subject, "serial", serial.as_str());
    }
    facts.put(
        s,
        &subject,
        "persistence mode",
        reading(&d.persistence_mode, |on| on_off(*on).into()),
    );
    let mode = |m: &crate::answers::nvml::CurrentPending| {
        if m.current == m.pending {
            on_off(m.current).to_string()
        } else {
            format!("{} (pending {})", on_off(m.current), on_off(m.pending))
        }
    };
    facts.put(s, &subject, "ecc mode", reading(&d.ecc_mode, mode));
    // Firmware and application clocks: what drifts between GPUs and nodes (driver.gpu_firmware,
    // driver.app_clocks). "not supported" in captures made before gpudoctor read them.
    facts.put(
        s,
        &subject,
        "vbios",
        reading(&d.vbios_version, String::clone),
    );
    facts.put(
        s,
        &subject,
        "inforom image",
        reading(&d.inforom_image_version, String::clone),
    );
    facts.put(
        s,
        &subject,
        "application clocks",
        reading(&d.applications_clocks, |c| {
            format!(
                "graphics {} MHz, memory {} MHz",
                c.graphics_mhz, c.memory_mhz
            )
        }),
    );
    facts.put(
        s,
        &subject,
        "max clocks",
        reading(&d.max_clocks, |c| {
            format!(
                "graphics {} MHz, memory {} MHz",
                c.graphics_mhz, c.memory_mhz
            )
        }),
    );
    facts.put(s, &subject, "mig mode", reading(&d.mig_mode, mode));
    if let Some(migs) = d.mig_list() {
        facts.put(
            s,
            &subject,
            "mig devices",
            list(migs.iter().map(|m| m.profile().unwrap_or("?"))),
        );
    }
    // Uncorrected errors only: corrected counts grow on healthy GPUs and would make any two
    // captures differ.
    facts.put(
        s,
        &subject,
        "uncorrected ecc",
        reading(&d.ecc_errors, |e| {
            format!(
                "volatile {}, aggregate {}",
                e.volatile_uncorrected, e.aggregate_uncorrected
            )
        }),
    );
    facts.put(
        s,
        &subject,
        "retired pages",
        reading(&d.retired_pages, |r| {
            format!(
                "single-bit {}, double-bit {}{}",
                r.single_bit,
                r.double_bit,
                if r.pending {
                    ", retirement pending"
                } else {
                    ""
                }
            )
        }),
    );
    facts.put(
        s,
        &subject,
        "remapped rows",
        reading(&d.remapped_rows, |r| {
            format!(
                "correctable {}, uncorrectable {}{}{}",
                r.correctable,
                r.uncorrectable,
                if r.pending { ", remap pending" } else { "" },
                if r.failure { ", remapping failed" } else { "" }
            )
        }),
    );
    // The enforced limit against the default (driver.power); the draw only as within or over
    // the limit, as the check judges it: the watts themselves follow the load of the moment.
    facts.put(
        s,
        &subject,
        "power limit",
        reading(&d.power_limit_mw, |limit| {
            match d.power_default_limit_mw.value() {
                Some(default) if default == limit => format!("{} W (the default)", limit / 1000),
                Some(default) => format!("{} W (default {} W)", limit / 1000, default / 1000),
                None => format!("{} W", limit / 1000),
            }
        }),
    );
    facts.put(
        s,
        &subject,
        "power draw",
        reading(&d.power_usage_mw, |usage| match d.power_limit_mw.value() {
            Some(limit)
                if f64::from(*usage) > f64::from(*limit) * gpu_health::POWER_OVER_LIMIT_MARGIN =>
            {
                "over the limit".to_string()
            }
            Some(_) => "within the limit".to_string(),
            None => "limit unknown".to_string(),
        }),
    );
    // The slowdown reasons the driver.clock_events check judges (gpu-health.md §3); the
    // others (idle, application clocks, power cap) follow the load of the moment.
    facts.put(
        s,
        &subject,
        "slowdown",
        reading(&d.clock_event_reasons, |bits| {
            let names: Vec<&str> = [
                (clock_event::HW_SLOWDOWN, "hw slowdown"),
                (clock_event::SW_THERMAL_SLOWDOWN, "sw thermal"),
                (clock_event::HW_THERMAL_SLOWDOWN, "hw thermal"),
                (clock_event::HW_POWER_BRAKE_SLOWDOWN, "hw power brake"),
            ]
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|(_, name)| *name)
            .collect();
            list(names)
        }),
    );
}

/// XID records in the kernel log, counted per GPU and XID (history since boot, as
/// `driver.xid_events` reads it).
fn xids(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "driver";
    let subject = "xid events";
    match ctx.kernel_log() {
        Ok(None) => facts.put(s, subject, "kernel log", "not recorded"),
        Err(err) => facts.put(s, subject, "kernel log", format!("unreadable ({err})")),
        Ok(Some((text, _))) => {
            facts.put(s, subject, "kernel log", "read");
            let log = xid::parse_kernel_log(text);
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for event in &log.xids {
                let gpu = event.pci_bus_id.as_deref().unwrap_or("unknown gpu");
                *counts
                    .entry(format!("{gpu} xid {}", event.xid))
                    .or_default() += 1;
            }
            for (key, n) in counts {
                facts.put(s, subject, &key, n.to_string());
            }
        }
    }
}

/// `gen5`, or the rate when it is not a standard one.
fn generation(speed: LinkSpeed) -> String {
    speed
        .generation()
        .map(|g| format!("gen{g}"))
        .unwrap_or_else(|| speed.to_string())
}

fn link_text(speed: Option<LinkSpeed>, width: Option<u32>) -> String {
    let speed = speed.map(generation).unwrap_or_else(|| "gen?".into());
    let width = width
        .map(|w| format!("x{w}"))
        .unwrap_or_else(|| "x?".into());
    format!("{speed} {width}")
}

pub(super) fn topology(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "topology";
    let t = match ctx.topology() {
        Ok(t) => t,
        Err(err) => {
            facts.put(s, "pci tree", "devices", unreadable(err));
            return;
        }
    };
    facts.put(s, "numa", "nodes", t.numa.nodes.len().to_string());
    for node in &t.numa.nodes {
        facts.put(
            s,
            "numa",
            &format!("node {} cpus", node.id),
            node.cpus.to_string(),
        );
    }
    // NVML's view of each GPU's link, to say when it disagrees with sysfs.
    let nvml = ctx.nvml();
    let nvml_width: BTreeMap<&str, String> = nvml
        .devices
        .iter()
        .filter_map(|d| {
            let bdf = d.pci_bus_id.as_deref()?;
            let width = reading(&d.pcie_current_width, |w| format!("x{w}"));
            Some((bdf, width))
        })
        .collect();
    let ends: Vec<&PciDevice> = t
        .devices
        .iter()
        .filter(|d| {
            matches!(
                d.kind,
                DeviceKind::Gpu | DeviceKind::NvSwitch | DeviceKind::RdmaNic | DeviceKind::Nic
            )
        })
        .collect();
    // The devices `topology.iommu` and `topology.acs` judge, so a capture holds what is read.
    let judged = |d: &PciDevice| matches!(d.kind, DeviceKind::Gpu | DeviceKind::RdmaNic);
    let bdfs: Vec<&str> = ends
        .iter()
        .filter(|d| judged(d))
        .map(|d| d.bdf.as_str())
        .collect();
    let iommu = iommu::gather(ctx.source(), &bdfs);
    let groups: BTreeMap<&str, &iommu::DeviceGroup> =
        iommu.groups.iter().map(|g| (g.bdf.as_str(), g)).collect();
    for d in &ends {
        let subject = d.label();
        facts.put(
            s,
            &subject,
            "numa node",
            d.numa
                .map(|n| n.to_string())
                .unwrap_or_else(|| "unknown".into()),
        );
        let link = &d.link;
        if !link.is_empty() {
            let mut width = link
                .current_width
                .map(|w| format!("x{w}"))
                .unwrap_or_else(|| "x?".into());
            if d.kind == DeviceKind::Gpu
                && let Some(from_nvml) = nvml_width.get(d.bdf.as_str())
                && *from_nvml != width
            {
                width = format!("{width} (nvml: {from_nvml})");
            }
            facts.put(s, &subject, "pcie link width", width);
            // A GPU lowers its link speed when idle (gpu-health.md §5), so its current speed
            // says nothing about the node; NICs and NVSwitches hold theirs.
            if d.kind != DeviceKind::Gpu {
                facts.put(
                    s,
                    &subject,
                    "pcie link speed",
                    link.current_speed
                        .map(generation)
                        .unwrap_or_else(|| "unknown".into()),
                );
            }
            facts.put(
                s,
                &subject,
                "pcie max link",
                link_text(link.max_speed, link.max_width),
            );
        }
        let aer = [
            ("correctable", &d.aer.correctable),
            ("nonfatal", &d.aer.nonfatal),
            ("fatal", &d.aer.fatal),
        ];
        if aer.iter().any(|(_, c)| c.is_some()) {
            facts.put(
                s,
                &subject,
                "aer errors",
                list(
                    aer.iter()
                        .filter_map(|(name, c)| c.as_ref().map(|c| format!("{name} {}", c.total))),
                ),
            );
        }
        if let Some(group) = groups.get(d.bdf.as_str()) {
            facts.put(
                s,
                &subject,
                "iommu",
                group
                    .kind
                    .clone()
                    .unwrap_or_else(|| "group without type".into()),
            );
        }
        if judged(d) {
            facts.put(s, &subject, "acs on path", acs_on_path(ctx, t, d));
        }
    }
}

/// ACS control of the PCIe switch ports between a GPU or RDMA NIC and its root port (what
/// `topology.acs` judges): `none`, or each port with bits set and what they are. Kept with the
/// device, so a NIC that disappears does not also make its ports disappear from the diff.
fn acs_on_path(ctx: &Context<'_>, t: &topology::Topology, end: &PciDevice) -> String {
    let mut parts = Vec::new();
    for port in t.ancestors(end).into_iter().filter(|a| {
        matches!(
            a.kind,
            DeviceKind::SwitchUpstream | DeviceKind::SwitchDownstream
        )
    }) {
        let (_, result) = topology::read_acs(ctx.source(), port);
        let state = match result {
            Ok(None) => "config not recorded".to_string(),
            Err(err) => unreadable(&err),
            Ok(Some(AcsReading::Truncated { len })) => format!("config truncated at {len} bytes"),
            Ok(Some(AcsReading::NoAcs | AcsReading::NoExtendedCapabilities)) => continue,
            Ok(Some(AcsReading::Present(acs))) if acs.control == 0 => continue,
            Ok(Some(AcsReading::Present(acs))) => ACS_BITS
                .iter()
                .filter(|(bit, _)| acs.control & bit != 0)
                .map(|(_, name)| *name)
                .collect::<Vec<_>>()
                .join(" "),
        };
        parts.push(format!("{} {state}", port.bdf));
    }
    list(parts)
}

pub(super) fn nvlink(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "nvlink";
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return;
    }
    for d in &nvml.devices {
        let subject = nvml_subject(d);
        facts.put(
            s,
            &subject,
            "nvlinks",
            reading(&d.nvlinks, |links| {
                let down: Vec<String> = links
                    .iter()
                    .filter(|l| !l.active)
                    .map(|l| l.link.to_string())
                    .collect();
                let active = links.len() - down.len();
                if down.is_empty() {
                    format!("{active} of {} active", links.len())
                } else {
                    format!(
                        "{active} of {} active (inactive: {})",
                        links.len(),
                        down.join(", ")
                    )
                }
            }),
        );
        facts.put(
            s,
            &subject,
            "fabric",
            reading(&d.fabric, |f| {
                let state = serde_json::to_value(f.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "unknown".into());
                let mut text = match &f.status {
                    Some(status) => format!("{state} ({status})"),
                    None => state,
                };
                // The v3 struct's health, when the driver gave it (gpu-health.md §7).
                if let Some(summary) = f.health_summary {
                    text.push_str(&format!(", health {}", summary.name()));
                }
                if let Some(mask) = f.health_mask.filter(|m| *m != 0) {
                    text.push_str(&format!(", health mask {}", health_mask_text(mask)));
                }
                text
            }),
        );
    }
}
