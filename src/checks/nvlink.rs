//! NVLink layer: is the GPU-to-GPU fabric whole? Every expected link active, error counters
//! quiet, and on NVSwitch systems the fabric trained by the fabric manager.
//!
//! Sources: reference/gpu-health.md §6 (links per SKU, counters, thresholds) and §7 (fabric
//! state). GPUs without NVLink make the layer `skip`, never `fail` (a PCIe A100 reports every
//! link down, NVIDIA/NVSentinel#1481).

use std::collections::BTreeMap;

use super::gpu_health::{field, gpu_label, usable_devices};
use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::nvml::{FabricState, NvLink, NvmlDevice, Reading};
use crate::facts::pci::VENDOR_NVIDIA;
use crate::report::{Action, Evidence, Layer};

/// Errors on one link (replay + recovery + CRC, cumulative since the driver loaded) above which
/// it warns. NVML gives no rate: DCGM's CRC limit is 100 per second and gcm fails on any count,
/// so a cumulative 100 is a conservative middle that ignores a few replays from link training.
pub const NVLINK_ERRORS_WARN: u64 = 100;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "nvlink.links_active",
            layer: Layer::Nvlink,
            title: "every expected NVLink is active",
            explain: Explain {
                reads: "NVML nvmlDeviceGetNvLinkState per GPU and link; the profile's NVLinks per GPU",
                expects: "the profile's count of active links on every GPU (HGX H100: 18, A100: 12), or without a profile the most common count across the GPUs; without a profile, links reported but none active on any GPU, no NVSwitch on PCI and no fabric state (PCIe GPUs without a bridge) is no NVLink: skip",
                why: "a GPU with links down falls back to fewer lanes or to PCIe: all-reduce slows for the whole job, or NCCL hangs on a half-trained fabric",
                fix: "drain the node and reset the GPUs or reboot; if the same link stays down, it is the GPU baseboard or NVSwitch tray: hardware inspection",
            },
            run: links_active,
        },
        CheckDef {
            code: "nvlink.error_counters",
            layer: Layer::Nvlink,
            title: "NVLink error counters are quiet",
            explain: Explain {
                reads: "NVML nvmlDeviceGetNvLinkErrorCounter (DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA) per link",
                expects: "fewer than 100 errors per link since the driver loaded",
                why: "replays and CRC errors mean a marginal link: bandwidth drops and XID 74 follows",
                fix: "watch `nvidia-smi nvlink -e` over a few minutes; if a link's counters keep rising, reset the GPU; repeated on the same link: hardware inspection",
            },
            run: error_counters,
        },
        CheckDef {
            code: "nvlink.fabric_state",
            layer: Layer::Nvlink,
            title: "the NVSwitch fabric is trained",
            explain: Explain {
                reads: "NVML nvmlDeviceGetGpuFabricInfoV (state, status) per GPU (Hopper and later)",
                expects: "state COMPLETED with status SUCCESS on every GPU that reports fabric info",
                why: "until the fabric manager trains the NVSwitch links, CUDA fails with cudaErrorSystemNotReady (802) and NCCL cannot use NVLink",
                fix: "`systemctl status nvidia-fabricmanager` (or the GPU Operator driver pod's fabric manager); its version must equal the driver's; read /var/log/fabricmanager.log and restart it",
            },
            run: fabric_state,
        },
    ]
}

fn links_of(d: &NvmlDevice) -> Option<&Vec<NvLink>> {
    match &d.nvlinks {
        Reading::Value(links) if !links.is_empty() => Some(links),
        _ => None,
    }
}

/// The expected link count: the profile's, else the most common total across GPUs.
fn expected_links(ctx: &Context<'_>, devices: &[&NvmlDevice]) -> Option<(u32, String)> {
    if let Some(p) = ctx.profile()
        && let Some(n) = p.nvlinks_per_gpu
    {
        return Some((n, format!("profile {}", p.name)));
    }
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for d in devices {
        if let Some(links) = links_of(d) {
            *counts.entry(links.len()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(len, n)| (*n, *len))
        .map(|(len, _)| (len as u32, "the most common count across gpus".to_string()))
}

/// `Some(reason)` when no GPU has an active link and no profile expects any: a node without
/// NVLink. A PCIe A100 without a bridge answers every link, all down (NVIDIA/NVSentinel#1481):
/// that is no NVLink, not every link broken. A profile that expects links judges them, and so
/// does an NVSwitch system — an NVSwitch on PCI (NVIDIA, class 0x0680) or a GPU that reports
/// fabric state (Hopper and later on NVSwitch baseboards, gpu-health.md §7) — where every link
/// down is a fabric that never came up (fabric manager stopped, baseboard fault), not a PCIe
/// card, whatever its GPU model is called (A800, H800, H20 match no built-in profile).
fn no_active_nvlink(ctx: &Context<'_>, devices: &[&NvmlDevice]) -> Option<String> {
    if ctx.profile().and_then(|p| p.nvlinks_per_gpu).is_some() {
        return None;
    }
    let nvswitch_on_pci = ctx.pci().as_ref().is_ok_and(|pci| {
        pci.functions
            .iter()
            .any(|f| f.vendor == VENDOR_NVIDIA && f.class >> 8 == 0x0680)
    });
    let fabric_reported = devices.iter().any(|d| d.fabric.value().is_some());
    if nvswitch_on_pci || fabric_reported {
        return None;
    }
    let reported: usize = devices
        .iter()
        .filter_map(|d| links_of(d))
        .map(Vec::len)
        .sum();
    let active = devices
        .iter()
        .filter_map(|d| links_of(d))
        .flatten()
        .any(|l| l.active);
    (reported > 0 && !active).then(|| {
        format!(
            "no nvlink on these gpus: {reported} link(s) reported, none active and no nvswitch (pcie gpus without an nvlink bridge); if these gpus have a bridge, pass --profile to judge them"
        )
    })
}

fn links_active(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let with_links: Vec<&NvmlDevice> = devices
        .iter()
        .copied()
        .filter(|d| links_of(d).is_some())
        .collect();
    let Some((expected, from)) = expected_links(ctx, &devices) else {
        return Outcome::skip("no nvlink on these gpus");
    };
    if expected == 0 {
        return Outcome::skip(format!("no nvlink expected ({from})"));
    }
    if let Some(why) = no_active_nvlink(ctx, &devices) {
        return Outcome::skip(why);
    }
    if with_links.is_empty() {
        if ctx.profile().and_then(|p| p.nvlinks_per_gpu).is_some() {
            return Outcome::fail(format!("no gpu reports nvlink, {from} expects {expected} per gpu"))
                .evidence(Evidence::new("nvml.devices[*].nvlinks", "not supported").expected(format!("{expected} links ({from})")))
                .hint("the gpus may not be the sxm parts the profile describes; check `nvidia-smi nvlink -s` and pass --profile if the platform was misdetected")
                .action(Action::HardwareInspection);
        }
        return Outcome::skip("no nvlink on these gpus");
    }
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    for d in &devices {
        let links = links_of(d).map(Vec::as_slice).unwrap_or_default();
        let active = links.iter().filter(|l| l.active).count() as u32;
        if active >= expected {
            continue;
        }
        let down: Vec<String> = links
            .iter()
            .filter(|l| !l.active)
            .map(|l| l.link.to_string())
            .collect();
        let down_text = if down.is_empty() {
            String::new()
        } else {
            format!(" (down: link {})", down.join(", "))
        };
        problems.push(format!(
            "{} has {active} of {expected} nvlinks active{down_text}",
            gpu_label(d)
        ));
        evidence.push(
            Evidence::new(
                field(d, "nvlinks"),
                format!("{active} active of {} reported{down_text}", links.len()),
            )
            .expected(format!("{expected} active ({from})")),
        );
    }
    if problems.is_empty() {
        return Outcome::pass(format!(
            "{expected} nvlinks active on each of {} gpu(s)",
            with_links.len()
        ))
        .evidence(
            Evidence::new(
                "nvml.devices[*].nvlinks",
                format!("{expected} active per gpu"),
            )
            .expected(from),
        );
    }
    Outcome::fail(problems.join("; "))
        .evidence_all(evidence)
        .hint("drain the node and reset the gpus (`nvidia-smi -r`) or reboot; a link that stays down is the baseboard or nvswitch tray: hardware inspection; confirm with `nvidia-smi nvlink -s`")
        .action(Action::HardwareInspection)
}

fn error_counters(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    if let Some(why) = no_active_nvlink(ctx, &devices) {
        return Outcome::skip(why);
    }
    let mut judged = 0;
    let mut noisy = Vec::new();
    let mut evidence = Vec::new();
    for d in &devices {
        let Some(links) = links_of(d) else { continue };
        for link in links {
            let counters = [
                ("replay", &link.replay_errors),
                ("recovery", &link.recovery_errors),
                ("crc flit", &link.crc_flit_errors),
                ("crc data", &link.crc_data_errors),
            ];
            let known: Vec<(&str, u64)> = counters
                .iter()
                .filter_map(|(n, r)| r.value().map(|v| (*n, *v)))
                .collect();
            if known.is_empty() {
                continue;
            }
            judged += 1;
            let total: u64 = known.iter().map(|(_, v)| v).sum();
            if total >= NVLINK_ERRORS_WARN {
                let detail: Vec<String> = known.iter().map(|(n, v)| format!("{n} {v}")).collect();
                noisy.push(format!(
                    "{} link {}: {total} errors",
                    gpu_label(d),
                    link.link
                ));
                evidence.push(
                    Evidence::new(
                        format!("{}[{}]", field(d, "nvlinks"), link.link),
                        detail.join(", "),
                    )
                    .expected(format!("< {NVLINK_ERRORS_WARN} since driver load")),
                );
            }
        }
    }
    if judged == 0 {
        return Outcome::skip("no nvlink error counters reported");
    }
    if noisy.is_empty() {
        return Outcome::pass(format!(
            "nvlink error counters below {NVLINK_ERRORS_WARN} on {judged} link(s)"
        ));
    }
    Outcome::warn(noisy.join("; "))
        .evidence_all(evidence)
        .hint("watch `nvidia-smi nvlink -e -i <gpu>` for a few minutes; counters that keep rising mean a marginal link: reset the gpu, then hardware inspection if it repeats")
        .action(Action::HardwareInspection)
}

fn fabric_state(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut judged = 0;
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    for d in &devices {
        let Some(info) = d.fabric.value() else {
            continue;
        };
        if info.state == FabricState::NotSupported {
            continue;
        }
        judged += 1;
        let status = info.status.as_deref().unwrap_or("none");
        let problem = match info.state {
            FabricState::Completed if status == "success" => None,
            FabricState::Completed => Some(format!(
                "{} fabric training completed with error {status}",
                gpu_label(d)
            )),
            FabricState::InProgress => Some(format!(
                "{} fabric training still in progress",
                gpu_label(d)
            )),
            FabricState::NotStarted => Some(format!("{} fabric not started", gpu_label(d))),
            FabricState::NotSupported => None,
        };
        if let Some(problem) = problem {
            problems.push(problem);
            evidence.push(
                Evidence::new(
                    field(d, "fabric"),
                    format!("state {:?}, status {status}", info.state).to_lowercase(),
                )
                .expected("state completed, status success"),
            );
        }
    }
    if judged == 0 {
        return Outcome::skip("gpus report no fabric state (pcie sku or pre-hopper)");
    }
    if problems.is_empty() {
        return Outcome::pass(format!("nvswitch fabric trained on {judged} gpu(s)"));
    }
    Outcome::fail(problems.join("; "))
        .evidence_all(evidence)
        .hint("check the fabric manager: `systemctl status nvidia-fabricmanager` (or the gpu operator driver pod); its version must equal the driver's; read /var/log/fabricmanager.log, then restart it")
        .action(Action::RestartComponent)
}
