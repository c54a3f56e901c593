//! NVLink layer: is the GPU-to-GPU fabric whole? Every expected link active, error counters
//! quiet, and on NVSwitch systems the fabric trained and healthy.
//!
//! Judged by platform (reference/gpu-health.md §6, §7):
//! - NVSwitch systems (HGX/DGX, NVL): every GPU has the profile's link count, or without a
//!   profile the most common count;
//! - PCIe boards (no NVSwitch on PCI, fabric state "not supported", no link to a switch):
//!   without an active link they have no NVLink and the layer skips (a PCIe A100 reports every
//!   link down, NVIDIA/NVSentinel#1481; H100 PCIe/NVL answer the fabric query with state
//!   NOT_SUPPORTED, leptonai/gpud PR #1147); with NVLink bridges each bridged group is judged
//!   on its own: the links between two GPUs are up on both ends and alike across the node's
//!   bridges. The links a bridge leaves unused stay down by design (6 of 18 on H100 NVL,
//!   Azure/azurehpc-health-checks#162), so they are never counted as down.

mod bridges;
mod fabric_manager;
mod sxid;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::gpu_health::{PerGpu, field, gpu_label, usable_devices};
use super::rates::{SAMPLE_MORE, Window, rate_figure, window};
use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::nvml::{
    FabricState, HealthBit, HealthMask, HealthSummary, NvLink, NvmlDevice, Reading, RemoteType,
};
use crate::facts::pci::VENDOR_NVIDIA;
use crate::report::{Action, Evidence, Layer};
use crate::sample::{Change, change, over_uptime, rate};

/// Errors on one link (replay + recovery + CRC, cumulative since the driver loaded) above which
/// it warns. NVML gives no rate: DCGM's CRC limit is 100 per second and gcm fails on any count,
/// so a cumulative 100 is a conservative middle that ignores a few replays from link training.
pub const NVLINK_ERRORS_WARN: u64 = 100;

/// Errors per second on one link, over a `--sample` window, from which it fails: DCGM's NVLink
/// CRC error limit (`DcgmGPUHardwareLimits.h`, 100 per second; gpu-health.md §10).
pub const NVLINK_ERRORS_FAIL_PER_S: f64 = 100.0;

/// Counters of which any increase over a `--sample` window fails, whatever its rate. DCGM
/// (`DcgmHealthWatch.cpp`, MonitorNVLink): "Replay and recovery errors are failures, not
/// warnings" (DCGM_FR_NVLINK_ERROR_CRITICAL), while CRC errors fail only from 100 per second.
/// On NVLink 5 the same holds for what gets past forward error correction (effective errors)
/// and for a recovery that failed. Symbol errors are the pre-FEC raw errors that FEC corrects,
/// the analogue of CRC: a healthy 200 Gb/s lane sees some, so they keep the rate rule.
pub const FAIL_ON_ANY_INCREASE: &[&str] = &[
    "replay",
    "recovery",
    "failed recoveries",
    "effective errors",
];

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "nvlink.links_active",
            layer: Layer::Nvlink,
            title: "every expected NVLink is active",
            explain: Explain {
                reads: "NVML nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2 and nvmlDeviceGetNvLinkRemoteDeviceType per GPU and active link; NVSwitch functions on PCI; the fabric state; the profile's NVLinks per GPU",
                expects: "NVSwitch systems: the profile's count of active links on every GPU (HGX H100: 18, A100: 12), or without a profile the most common count across the GPUs. PCIe boards (no NVSwitch, fabric state not supported): no active link is no NVLink (skip); with NVLink bridges, the links between two GPUs are active on both ends and every bridged pair (or 4-way group) has the same count; links a bridge leaves unused are not counted as down. GPUs in MIG mode are not judged (NVML reports their links down: peer-to-peer is off in MIG mode) and are named",
                why: "a GPU with links down falls back to fewer lanes or to PCIe: all-reduce slows for the whole job, or NCCL hangs on a half-trained fabric",
                fix: "drain the node and reset the GPUs or reboot; if the same link stays down, it is the GPU baseboard or NVSwitch tray: hardware inspection",
            },
            run: links_active,
        },
        CheckDef {
            code: "nvlink.error_counters",
            layer: Layer::Nvlink,
            title: "NVLink error counters are not rising",
            explain: Explain {
                reads: "NVML nvmlDeviceGetNvLinkErrorCounter (DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA) per active link; on NVLink 5 (Blackwell), where those are not supported, the field values NVML_FI_DEV_NVLINK_COUNT_{RCV_ERRORS, MALFORMED_PACKET_ERRORS, BUFFER_OVERRUN_ERRORS, LOCAL_LINK_INTEGRITY_ERRORS, LINK_RECOVERY_FAILED_EVENTS, SYMBOL_ERRORS, EFFECTIVE_ERRORS} per link",
                expects: "live: with --sample, no counter rising during the window (replay, recovery, failed recoveries and NVLink 5 effective errors fail on any increase, as DCGM judges them; CRC, symbol and the other counters warn with the rate and fail at DCGM's limit of 100 errors per second on a link); without it, fewer than 100 errors per link since the driver loaded (warn, with the rate over uptime). History: counters that did not move during the window, or totals below 100, are reported and not judged; a counter that went back or vanished during the window is said, never given a negative rate",
                why: "replays and CRC errors mean a marginal link: bandwidth drops and XID 74 follows; a total since the driver loaded cannot tell a link erring now from one that erred once during training",
                fix: "watch `gpudoctor check --sample 60` or `nvidia-smi nvlink -e` over a few minutes; if a link's counters keep rising, reset the GPU; repeated on the same link: hardware inspection",
            },
            run: |ctx| error_counters(ctx).noting_unread(&ctx.boot().problems),
        },
        CheckDef {
            code: "nvlink.fabric_state",
            layer: Layer::Nvlink,
            title: "the NVSwitch fabric is trained",
            explain: Explain {
                reads: "NVML nvmlDeviceGetGpuFabricInfoV (v3 struct: state, status, health mask, health summary; v2, then the v1 nvmlDeviceGetGpuFabricInfo on older drivers) per GPU (Hopper and later)",
                expects: "state COMPLETED with status SUCCESS on every GPU that reports fabric info; health summary not unhealthy or limited capacity (fail); no route-unhealthy or incorrect-configuration field in the health mask (fail); degraded bandwidth or a recovery in progress warns",
                why: "until the fabric manager trains the NVSwitch links, CUDA fails with cudaErrorSystemNotReady (802) and NCCL cannot use NVLink",
                fix: "`systemctl status nvidia-fabricmanager` (or the GPU Operator driver pod's fabric manager); its version must equal the driver's; read /var/log/fabricmanager.log and restart it",
            },
            run: fabric_state,
        },
        CheckDef {
            code: "nvlink.fabric_manager",
            layer: Layer::Nvlink,
            title: "the fabric manager runs on an NVSwitch node and logs no error",
            explain: Explain {
                reads: "the nvidia-fabricmanager systemd unit's cgroup (/sys/fs/cgroup/system.slice/nvidia-fabricmanager.service/cgroup.procs, cgroup v1 under systemd/) and /proc/<pid>/comm, else every /proc/<pid>/comm (the GPU Operator runs it in its driver container); the unit file; the last 256 KiB of /var/log/fabricmanager.log (or under /run/nvidia/driver); NVML's fabric state for context",
                expects: "on a node with NVSwitches (on PCI, a fabric state other than not supported, links to a switch, or a profile saying so), an nv-fabricmanager process; no [ERROR] line in its log since its last `Fabric Manager version ... is running` line. History: errors before the last start belong to an earlier run and are only counted; live: errors since it started (warn), the process missing (fail). A GB200/GB300-class compute tray (no NVSwitch PCI function) runs no fabric manager: there an installed nvidia-imex unit must have its process running",
                why: "the fabric manager trains the NVSwitch links and programs their routing: without it the GPUs never register with the fabric and CUDA fails with cudaErrorSystemNotReady (802); stopping it on a running node needs the GPUs reset before NVLink works again (Fabric Manager User Guide; NVIDIA/nccl#1488)",
                fix: "`systemctl enable --now nvidia-fabricmanager`; its version must equal the driver's; HGX B200 and later also need the NVLink subnet manager (nvlsm) and ib_umad; then reset the GPUs (drain, `nvidia-smi -r`) or reboot so they register; read /var/log/fabricmanager.log for why it stopped",
            },
            run: fabric_manager::fabric_manager,
        },
        CheckDef {
            code: "nvlink.sxid_events",
            layer: Layer::Nvlink,
            title: "no live fatal NVSwitch SXID errors in the kernel log",
            explain: Explain {
                reads: "the kernel log (as driver.xid_events): `nvidia-nvswitchN: SXid (PCI:<bdf>): <sxid>, Fatal|Non-fatal, Link <n> ...` lines with their Severity/Data follow-ups, the lines after which a switch was brought back (`Linux version`, `NVRM: loading NVIDIA`, `nvidia-nvswitch: Probing device <bdf>`, `pci <bdf>: [10de:....]`), timestamps, /proc/uptime and /proc/stat btime",
                expects: "no live fatal SXID (the line's own Fatal/Non-fatal word, else the Fabric Manager guide's class: D.5 fatal, D.6 always fatal); live non-fatal SXIDs warn, fatal ones from before a boot, driver load or switch re-probe (history) warn with their age and count; the same SXID on the same link live again after that is recurring",
                why: "a fatal SXID stalls the NVLink traffic through that switch port: the GPUs behind it see XID 45/74 and NCCL jobs hang or fail; an always-fatal one takes the whole fabric down (NVIDIA Fabric Manager User Guide, appendix D, NVSwitch SXid errors)",
                fix: "drain the node and reset all GPUs and NVSwitches (guide D.9: stop nvidia-fabricmanager, `nvidia-smi -r`, start it) or reboot; an always-fatal SXID needs the host restarted; the same SXID returning on the same link: inspect the NVSwitch tray or GPU baseboard",
            },
            run: |ctx| {
                super::history::noting_log_repairs(ctx, sxid::sxid_events(ctx))
                    .noting_unread(&ctx.boot().problems)
            },
        },
    ]
}

/// The GPUs whose links are judged, and a note naming those in MIG mode, which are not: NVML
/// reports a MIG-enabled GPU's NVLinks as down (peer-to-peer is off in MIG mode), and DCGM
/// treats them as disabled for this reason (`DcgmHealthWatch.cpp`), so a healthy partitioned
/// HGX would otherwise read "0 of 18 active".
fn without_mig<'c>(devices: &[&'c NvmlDevice]) -> (Vec<&'c NvmlDevice>, Option<Evidence>) {
    let (mig, rest): (Vec<&NvmlDevice>, Vec<&NvmlDevice>) =
        devices.iter().partition(|d| d.mig_on());
    let note = (!mig.is_empty()).then(|| {
        let names: Vec<String> = mig.iter().map(|d| gpu_label(d)).collect();
        Evidence::new(
            "nvml.devices[*].mig_mode",
            format!(
                "{} in MIG mode, links not judged: nvml reports a MIG gpu's nvlinks down, as peer-to-peer is off in MIG mode",
                names.join(", ")
            ),
        )
    });
    (rest, note)
}

/// The skip for a node whose every GPU with links is in MIG mode.
fn all_mig(note: Evidence) -> Outcome {
    Outcome::skip("every gpu is in MIG mode: nvlink is not used and its links are not judged")
        .evidence(note)
}

fn links_of(d: &NvmlDevice) -> Option<&Vec<NvLink>> {
    match &d.nvlinks {
        Reading::Value(links) if !links.is_empty() => Some(links),
        _ => None,
    }
}

/// Why this node counts as an NVSwitch system, or `None` for a PCIe board: an NVSwitch on PCI
/// (NVIDIA, class 0x0680), a GPU that reports a fabric state other than "not supported"
/// (Hopper and later on NVSwitch baseboards; PCIe boards answer NOT_SUPPORTED, gpu-health.md
/// §7), a link whose far end is a switch, or a profile that says so. On such a system every
/// link down is a fabric that never came up (fabric manager stopped, baseboard fault), whatever
/// the GPU model is called (A800, H800, H20 match no built-in profile).
fn nvswitch_system(ctx: &Context<'_>, devices: &[&NvmlDevice]) -> Option<String> {
    if let Some(p) = ctx.profile()
        && p.nvswitch == Some(true)
    {
        return Some(format!("profile {}", p.name));
    }
    let on_pci = ctx.pci().as_ref().is_ok_and(|pci| {
        pci.functions
            .iter()
            .any(|f| f.vendor == VENDOR_NVIDIA && f.class >> 8 == 0x0680)
    });
    if on_pci {
        return Some("nvswitch on pci".into());
    }
    let fabric = devices.iter().any(|d| {
        d.fabric
            .value()
            .is_some_and(|f| f.state != FabricState::NotSupported)
    });
    if fabric {
        return Some("gpu fabric state reported".into());
    }
    let to_switch = devices
        .iter()
        .filter_map(|d| links_of(d))
        .flatten()
        .any(|l| l.remote_type.value() == Some(&RemoteType::Nvswitch));
    to_switch.then(|| "links to an nvswitch".into())
}

/// `Some(reason)` when no GPU has an active link and nothing expects one: a node without
/// NVLink (PCIe GPUs without a bridge). A profile that expects links judges them, and so does
/// an NVSwitch system.
fn no_active_nvlink(ctx: &Context<'_>, devices: &[&NvmlDevice]) -> Option<String> {
    if ctx.profile().and_then(|p| p.nvlinks_per_gpu).is_some() {
        return None;
    }
    if nvswitch_system(ctx, devices).is_some() {
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

/// The expected link count on an NVSwitch system: the profile's, else the most common total.
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

fn links_active(ctx: &Context<'_>) -> Outcome {
    let all = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (devices, mig) = without_mig(&all);
    if let (true, Some(note)) = (devices.is_empty(), mig.clone()) {
        return all_mig(note);
    }
    links_active_of(ctx, &devices).evidence_all(mig)
}

fn links_active_of(ctx: &Context<'_>, devices: &[&NvmlDevice]) -> Outcome {
    let devices = devices.to_vec();
    let mut acc = PerGpu::new();
    for d in &devices {
        acc.read(d, "nvlinks", &d.nvlinks);
    }
    let profile_count = ctx.profile().and_then(|p| p.nvlinks_per_gpu);
    if profile_count == Some(0) {
        let name = ctx.profile().map(|p| p.name.clone()).unwrap_or_default();
        return Outcome::skip(format!("no nvlink expected (profile {name})"));
    }
    if let Some(why) = no_active_nvlink(ctx, &devices) {
        return Outcome::skip(why);
    }
    if profile_count.is_none() && nvswitch_system(ctx, &devices).is_none() {
        if devices.iter().all(|d| links_of(d).is_none()) {
            return acc.finish(String::new(), "no nvlink on these gpus", "", Action::None);
        }
        return bridges::judge(&devices, acc);
    }
    let Some((expected, from)) = expected_links(ctx, &devices) else {
        return acc.finish(String::new(), "no nvlink on these gpus", "", Action::None);
    };
    let with_links = devices.iter().filter(|d| links_of(d).is_some()).count();
    if with_links == 0 {
        if profile_count.is_some() {
            return Outcome::fail(format!("no gpu reports nvlink, {from} expects {expected} per gpu"))
                .evidence(Evidence::new("nvml.devices[*].nvlinks", "not supported").expected(format!("{expected} links ({from})")))
                .hint("the gpus may not be the sxm parts the profile describes; check `nvidia-smi nvlink -s` and pass --profile if the platform was misdetected")
                .action(Action::HardwareInspection);
        }
        return acc.finish(String::new(), "no nvlink on these gpus", "", Action::None);
    }
    for d in &devices {
        let Some(links) = links_of(d) else { continue };
        acc.judged += 1;
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
        acc.fails.push(format!(
            "{} has {active} of {expected} nvlinks active{down_text}",
            gpu_label(d)
        ));
        acc.evidence.push(
            Evidence::new(
                field(d, "nvlinks"),
                format!("{active} active of {} reported{down_text}", links.len()),
            )
            .expected(format!("{expected} active ({from})")),
        );
    }
    let passed = acc.fails.is_empty();
    let outcome = acc.finish(
        format!("{expected} nvlinks active on each of {with_links} gpu(s)"),
        "no nvlink on these gpus",
        "drain the node and reset the gpus (`nvidia-smi -r`) or reboot; a link that stays down is the baseboard or nvswitch tray: hardware inspection; confirm with `nvidia-smi nvlink -s`",
        Action::HardwareInspection,
    );
    if passed && outcome.status == crate::report::Status::Pass {
        return outcome.evidence(
            Evidence::new(
                "nvml.devices[*].nvlinks",
                format!("{expected} active per gpu"),
            )
            .expected(from),
        );
    }
    outcome
}

fn error_counters(ctx: &Context<'_>) -> Outcome {
    let all = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (devices, mig) = without_mig(&all);
    if let (true, Some(note)) = (devices.is_empty(), mig.clone()) {
        return all_mig(note);
    }
    error_counters_of(ctx, &devices).evidence_all(mig)
}

fn error_counters_of(ctx: &Context<'_>, devices: &[&NvmlDevice]) -> Outcome {
    let devices = devices.to_vec();
    if let Some(why) = no_active_nvlink(ctx, &devices) {
        return Outcome::skip(why);
    }
    let (window, broken) = window(ctx);
    let mut acc = PerGpu::new();
    let mut judged = 0;
    let mut history = Vec::new();
    let mut figures = Vec::new();
    let mut rising_fast = false;
    for d in &devices {
        let Some(links) = acc.read(d, "nvlinks", &d.nvlinks) else {
            continue;
        };
        let bus = d.pci_bus_id.clone().unwrap_or_default();
        let before = match &window {
            Window::Sample(b) => b.gpus.get(&bus),
            Window::Totals { .. } => None,
        };
        for link in links.iter().filter(|l| l.active) {
            let mut known: Vec<(&str, u64)> = Vec::new();
            for (name, reading) in link.error_counters() {
                // The reading's name is spelt only for one that did not answer (`acc.read`
                // notes it): 1 600 strings a run on a healthy HGX node otherwise (issue 41).
                // A counter this GPU does not have is none, unnamed (most of the eleven on an
                // H100: `NotSupported`).
                let value = match reading {
                    Reading::Value(v) => Some(v),
                    Reading::NotSupported => None,
                    Reading::Error(_) => {
                        acc.read(d, &format!("nvlinks[{}].{name}", link.link), reading)
                    }
                };
                if let Some(v) = value {
                    known.push((name, *v));
                }
            }
            if known.is_empty() {
                continue;
            }
            judged += 1;
            let total: u64 = known.iter().map(|(_, v)| v).sum();
            // Spelt only for a link that is reported (issue 41: two strings per link of a
            // healthy HGX node otherwise).
            let at = || format!("{}[{}]", field(d, "nvlinks"), link.link);
            let here = || format!("{} link {}", gpu_label(d), link.link);
            if let Window::Sample(b) = &window {
                let mut rising = Vec::new();
                let mut odd = Vec::new();
                let mut per_s_sum = 0.0;
                let mut critical = false;
                // The sample's key (`nvlink<N>/<counter>`), written into one buffer.
                let mut key = String::new();
                for (name, v) in &known {
                    key.clear();
                    let _ = write!(key, "nvlink{}/{name}", link.link);
                    let was = before.and_then(|m| m.get(key.as_str())).copied();
                    match change(was, Some(*v), b.window_s, None) {
                        Some(c @ Change::Rising { per_s, .. }) => {
                            per_s_sum += per_s;
                            critical |= FAIL_ON_ANY_INCREASE.contains(name);
                            figures.push(rate_figure(
                                "nvlink.error_counters",
                                &format!("{bus}/link{}", link.link),
                                name,
                                per_s,
                                &window,
                            ));
                            rising.push(format!("{name} {}", c.text()));
                        }
                        Some(Change::Unmoved) | None => {}
                        Some(Change::Appeared) if before.is_none() => {}
                        Some(c) => odd.push(format!("{name} {}", c.text())),
                    }
                }
                if !rising.is_empty() {
                    let fails = critical || per_s_sum >= NVLINK_ERRORS_FAIL_PER_S;
                    rising_fast |= fails;
                    let line = format!(
                        "{}: rising {}: {}",
                        here(),
                        window.text(),
                        rising.join(", ")
                    );
                    if fails {
                        acc.fails.push(line);
                    } else {
                        acc.warns.push(line);
                    }
                    acc.evidence.push(
                        Evidence::new(at(), rising.join(", "))
                            .expected(format!("no increase {}", window.text())),
                    );
                } else if total > 0 {
                    history.push(format!("{} {total}", here()));
                }
                if !odd.is_empty() {
                    acc.warns.push(format!("{}: {}", here(), odd.join(", ")));
                    acc.evidence.push(
                        Evidence::new(at(), odd.join(", ")).expected("two readings of a counter"),
                    );
                }
                continue;
            }
            let uptime_s = match &window {
                Window::Totals { uptime_s } => *uptime_s,
                Window::Sample(_) => None,
            };
            let per_s = over_uptime(total, uptime_s);
            if let Some(per_s) = per_s.filter(|_| total > 0) {
                figures.push(rate_figure(
                    "nvlink.error_counters",
                    &format!("{bus}/link{}", link.link),
                    "total",
                    per_s,
                    &window,
                ));
            }
            if total >= NVLINK_ERRORS_WARN {
                let detail: Vec<String> = known.iter().map(|(n, v)| format!("{n} {v}")).collect();
                let rate_text = per_s.map(|r| format!(", {}", rate(r))).unwrap_or_default();
                acc.warns.push(format!(
                    "{}: {total} errors {}{rate_text}",
                    here(),
                    window.text()
                ));
                acc.evidence.push(
                    Evidence::new(at(), detail.join(", "))
                        .expected(format!("< {NVLINK_ERRORS_WARN} since driver load")),
                );
            } else if total > 0 {
                history.push(format!("{} {total}", here()));
            }
        }
    }
    acc.judged = judged;
    let history_text = if history.is_empty() {
        String::new()
    } else {
        format!("; history: {}", history.join(", "))
    };
    let more = match &window {
        Window::Totals { .. } => format!("; {SAMPLE_MORE}"),
        Window::Sample(_) => String::new(),
    };
    let ok = match &window {
        Window::Sample(_) => format!(
            "nvlink error counters not rising {} on {judged} link(s){history_text}",
            window.text()
        ),
        Window::Totals { .. } => format!(
            "nvlink error counters below {NVLINK_ERRORS_WARN} on {judged} link(s){history_text}{more}"
        ),
    };
    let mut outcome = acc.finish(
        ok,
        "no nvlink error counters reported",
        if rising_fast {
            "replay, recovery or post-fec errors rising, or any errors at dcgm's nvlink limit of 100/s: drain the node and reset the gpu; if the link keeps erring, hardware inspection of the gpu baseboard or nvswitch tray"
        } else {
            "watch `nvidia-smi nvlink -e -i <gpu>` (`nvidia-smi nvlink -c` on nvlink 5) for a few minutes, or `gpudoctor check --sample 60`; counters that keep rising mean a marginal link: reset the gpu, then hardware inspection if it repeats"
        },
        Action::HardwareInspection,
    );
    if matches!(window, Window::Totals { .. })
        && matches!(outcome.status, crate::report::Status::Warn)
    {
        outcome.summary.push_str(&more);
    }
    let outcome = outcome.figures(figures);
    match broken {
        Some(err) => outcome.with_unread([err]),
        None => outcome,
    }
}

fn fabric_state(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut acc = PerGpu::new();
    let mut untrained = false;
    let mut unhealthy = false;
    for d in &devices {
        let Some(info) = acc.read(d, "fabric", &d.fabric) else {
            continue;
        };
        if info.state == FabricState::NotSupported {
            continue;
        }
        acc.judged += 1;
        let status = info.status.as_deref().unwrap_or("none");
        let label = gpu_label(d);
        let training = match info.state {
            FabricState::Completed if status == "success" => None,
            FabricState::Completed => Some(format!(
                "{label} fabric training completed with error {status}"
            )),
            FabricState::InProgress => Some(format!("{label} fabric training still in progress")),
            FabricState::NotStarted => Some(format!("{label} fabric not started")),
            FabricState::NotSupported => None,
        };
        let mask = info.health_mask.map(HealthMask);
        let mut observed = format!("state {:?}, status {status}", info.state).to_lowercase();
        if let Some(summary) = info.health_summary {
            observed.push_str(&format!(", health {}", summary.name()));
        }
        if let Some(mask) = mask.filter(|m| m.0 != 0) {
            observed.push_str(&format!(", health mask {}", mask.describe()));
        }
        if let Some(problem) = training {
            untrained = true;
            acc.fails.push(problem);
            acc.evidence.push(
                Evidence::new(field(d, "fabric"), observed)
                    .expected("state completed, status success"),
            );
            continue;
        }
        // Trained: what the driver says of the fabric's health (v3: summary and mask; v2:
        // mask only; v1: neither).
        let mut fails = Vec::new();
        let mut warns = Vec::new();
        match info.health_summary {
            Some(HealthSummary::Unhealthy) => fails.push("fabric unhealthy".to_string()),
            Some(HealthSummary::LimitedCapacity) => {
                fails.push("fabric at limited capacity".to_string())
            }
            Some(HealthSummary::Other(raw)) => warns.push(format!("fabric health summary {raw}")),
            _ => {}
        }
        if let Some(mask) = mask {
            for (bit, name) in mask.set() {
                match bit {
                    HealthBit::RouteUnhealthy => fails.push(name.to_string()),
                    HealthBit::DegradedBandwidth
                    | HealthBit::RouteRecovery
                    | HealthBit::AccessTimeoutRecovery => warns.push(name.to_string()),
                }
            }
            fails.extend(mask.incorrect_configuration());
        }
        if fails.is_empty() && warns.is_empty() {
            continue;
        }
        unhealthy = true;
        let mut parts = fails.clone();
        parts.extend(warns);
        let line = format!("{label} {}", parts.join(", "));
        if fails.is_empty() {
            acc.warns.push(line);
        } else {
            acc.fails.push(line);
        }
        acc.evidence.push(
            Evidence::new(field(d, "fabric"), observed)
                .expected("health summary healthy, no health mask field set"),
        );
    }
    let (hint, action) = if unhealthy && !untrained {
        (
            "read the fabric manager log (/var/log/fabricmanager.log) and `nvidia-smi -q | grep -A10 Fabric`; drain the node and reset the gpus or reboot; a fabric that stays degraded needs the nvswitch tray or gpu baseboard inspected",
            Action::HardwareInspection,
        )
    } else {
        (
            "check the fabric manager: `systemctl status nvidia-fabricmanager` (or the gpu operator driver pod); its version must equal the driver's; read /var/log/fabricmanager.log, then restart it",
            Action::RestartComponent,
        )
    };
    let judged = acc.judged;
    acc.finish(
        format!("nvswitch fabric trained on {judged} gpu(s)"),
        "gpus report no fabric state (pcie sku or pre-hopper)",
        hint,
        action,
    )
}
