//! NVLink layer, the fabric manager itself: on a node with NVSwitches, `nv-fabricmanager` must
//! run (it trains the NVSwitch links and programs their routing; without it CUDA fails with
//! cudaErrorSystemNotReady, gpu-health.md §7), and its log must show no error since it last
//! started. Facts: facts/fabric_manager.rs. NVML's fabric state (nvlink.fabric_state) tells
//! whether the GPUs were registered; this check tells whether the service is there to do it.
//!
//! A GB200/GB300-class compute tray (its GPUs named so, no NVSwitch among its PCI functions)
//! is part of a rack-scale NVLink domain whose fabric manager runs on the NVSwitch trays, not
//! here: it reports a fabric state (judged by nvlink.fabric_state) and runs the IMEX daemon
//! for multi-node memory sharing instead. There the check judges `nvidia-imex` where it is
//! installed, and never asks for a fabric manager.

use super::super::{Context, Outcome};
use crate::answers::nvml::FabricState;
use crate::facts::fabric_manager::{self, FmLine, IMEX, LOGS, UNIT_CGROUPS, UNIT_FILES};
use crate::facts::pci::VENDOR_NVIDIA;
use crate::report::{Action, Evidence};

/// Most error lines quoted.
const QUOTED: usize = 3;

fn quote(line: &FmLine) -> String {
    let text: String = line.message.chars().take(160).collect();
    match &line.time {
        Some(t) => format!("[{t}] [{}] {text}", line.level),
        None => format!("[{}] {text}", line.level),
    }
}

/// "8 gpu(s) fabric not_started" from NVML, when it answered.
fn nvml_fabric(ctx: &Context<'_>) -> Option<String> {
    let states: Vec<FabricState> = ctx
        .nvml()
        .devices
        .iter()
        .filter_map(|d| d.fabric.value().map(|f| f.state))
        .filter(|s| *s != FabricState::NotSupported)
        .collect();
    let first = *states.first()?;
    let same = states.iter().all(|s| *s == first);
    let name = match first {
        FabricState::NotSupported => "not supported",
        FabricState::NotStarted => "not started",
        FabricState::InProgress => "in progress",
        FabricState::Completed => "completed",
    };
    Some(if same {
        format!("nvml fabric state {name} on {} gpu(s)", states.len())
    } else {
        format!("nvml fabric state mixed across {} gpu(s)", states.len())
    })
}

/// GPU model names of rack-scale NVLink compute trays (`NVIDIA GB200`, `NVIDIA GB300`).
const TRAY_GPUS: &[&str] = &["GB200", "GB300"];

/// `Some(gpu name)` on a GB200-class compute tray: such GPUs and no NVSwitch PCI function.
fn compute_tray(
    ctx: &Context<'_>,
    devices: &[&crate::answers::nvml::NvmlDevice],
) -> Option<String> {
    let name = devices
        .iter()
        .filter_map(|d| d.name.as_deref())
        .find(|n| TRAY_GPUS.iter().any(|t| n.contains(t)))?;
    let nvswitch_on_pci = ctx.pci().as_ref().is_ok_and(|pci| {
        pci.functions
            .iter()
            .any(|f| f.vendor == VENDOR_NVIDIA && f.class >> 8 == 0x0680)
    });
    (!nvswitch_on_pci).then(|| name.to_string())
}

/// A compute tray: no fabric manager here; `nvidia-imex` judged where installed.
fn tray(ctx: &Context<'_>, gpu: &str) -> Outcome {
    let facts = fabric_manager::gather_service(ctx.source(), &IMEX);
    let fabric = nvml_fabric(ctx)
        .map(|f| format!("; {f}"))
        .unwrap_or_default();
    let no_fm = format!(
        "{gpu} compute tray: its nvlink fabric manager runs on the nvswitch trays, not here{fabric}"
    );
    let evidence = Evidence::new(
        IMEX.unit_cgroups[0],
        match (&facts.running, &facts.unit_file) {
            (Some((pid, how)), _) => format!("nvidia-imex running (pid {pid}, found by {how})"),
            (None, Some(unit)) => format!("installed ({unit}), no nvidia-imex process"),
            (None, None) => "no nvidia-imex unit installed".to_string(),
        },
    );
    match (&facts.running, &facts.unit_file) {
        // Found another way (the process list) when its unit's cgroup could not be read: said.
        (Some(_), _) => Outcome::pass(format!("{no_fm}; nvidia-imex runs"))
            .evidence(evidence)
            .noting_unread(&facts.problems),
        (None, Some(_)) => Outcome::fail(format!(
            "nvidia-imex is installed but not running on {no_fm}: multi-node nvlink memory sharing (imex channels) fails"
        ))
        .evidence(evidence.expected("nvidia-imex running"))
        .hint("`systemctl enable --now nvidia-imex`; its nodes_config.cfg (/etc/nvidia-imex/) must list every tray of the nvlink domain, and its version equal the driver's; read /var/log/nvidia-imex.log")
        .action(Action::RestartComponent)
        .noting_unread(&facts.problems),
        (None, None) => Outcome::pass(format!(
            "{no_fm}; no nvidia-imex service on the host (in kubernetes the dra driver's compute domains run imex in pods)"
        ))
        .evidence(evidence)
        .noting_unread(&facts.problems),
    }
}

pub(super) fn fabric_manager(ctx: &Context<'_>) -> Outcome {
    let devices = super::super::gpu_health::usable_devices(ctx).unwrap_or_default();
    let Some(why) = super::nvswitch_system(ctx, &devices) else {
        return Outcome::skip("no nvswitch on this node: the fabric manager is not needed");
    };
    if let Some(gpu) = compute_tray(ctx, &devices) {
        return tray(ctx, &gpu);
    }
    let facts = fabric_manager::gather(ctx.source());
    let mut evidence = Vec::new();
    let fabric = nvml_fabric(ctx);
    let fabric_text = fabric
        .as_deref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    if let Some(log) = &facts.log {
        let observed = match (&log.last_start, &log.exited) {
            (_, Some(exit)) => format!("exited after its last start: {}", quote(exit)),
            (Some(start), None) => format!(
                "last started {} (line {}); {} error line(s) since, {} before",
                start.time.as_deref().unwrap_or("at an unstamped line"),
                start.line_number,
                log.errors.len(),
                log.earlier_errors
            ),
            (None, None) => format!(
                "{} line(s), no start line in the tail; {} error line(s)",
                log.lines,
                log.errors.len()
            ),
        };
        evidence.push(Evidence::new(log.path.as_str(), observed));
        for e in log.errors.iter().rev().take(QUOTED) {
            evidence.push(
                Evidence::new(format!("{}:{}", log.path, e.line_number), quote(e))
                    .expected("no error since the fabric manager started"),
            );
        }
    }
    if let Some((pid, how)) = facts.running {
        let errors = facts.log.as_ref().map_or(0, |l| l.errors.len());
        let summary = format!("nv-fabricmanager running (pid {pid}, found by {how}; {why})");
        let outcome = if errors > 0 {
            let path = facts
                .log
                .as_ref()
                .map(|l| l.path.as_str())
                .unwrap_or_default();
            Outcome::warn(format!(
                "{summary}, but its log has {errors} error line(s) since it started ({path}){fabric_text}"
            ))
            .hint("read the errors in the fabric manager log; an nvlink fatal error or a gpu it lost needs the gpus and nvswitches reset (drain, stop the fabric manager, `nvidia-smi -r`, start it) or a reboot")
            .action(Action::RestartComponent)
        } else {
            let earlier = facts
                .log
                .as_ref()
                .filter(|l| l.earlier_errors > 0)
                .map(|l| {
                    format!(
                        " ({} error line(s) from earlier runs, history)",
                        l.earlier_errors
                    )
                })
                .unwrap_or_default();
            Outcome::pass(format!("{summary}{earlier}"))
        };
        return outcome
            .evidence_all(evidence)
            .noting_unread(&facts.problems);
    }
    // Not found running: can we tell? A process whose name could not be read may be it.
    let looked = facts.cgroups_readable || facts.proc_readable;
    let unnamed: Vec<_> = facts
        .problems
        .iter()
        .filter(|p| p.path.ends_with("/comm"))
        .collect();
    if !unnamed.is_empty() {
        return Outcome::error(format!(
            "cannot tell whether the fabric manager runs: {} process name(s) could not be read{fabric_text}",
            unnamed.len()
        ))
        .evidence_all(evidence)
        .hint("`systemctl status nvidia-fabricmanager` on the node; a capture missing /proc/<pid>/comm is partial: record it again")
        .with_unread(unnamed);
    }
    if !looked && facts.unit_file.is_none() && facts.log.is_none() {
        return Outcome::error(format!(
            "cannot tell whether the fabric manager runs: none of /sys/fs/cgroup, /proc, the unit file or {} could be read{fabric_text}",
            LOGS[0]
        ))
        .evidence(Evidence::new(UNIT_CGROUPS[0], "not readable (not captured, or not mounted)"))
        .hint("run gpudoctor with the host's /sys and /proc (a DaemonSet mounts them under /host), then `systemctl status nvidia-fabricmanager`")
        .with_unread(&facts.problems);
    }
    evidence.insert(
        0,
        Evidence::new(
            UNIT_CGROUPS[0],
            "no nv-fabricmanager process (no unit cgroup, none in /proc)",
        )
        .expected(format!("nv-fabricmanager running ({why})")),
    );
    let (installed, hint, action) = match &facts.unit_file {
        Some(unit) => (
            format!("installed ({unit}) but not running"),
            "`systemctl start nvidia-fabricmanager` (and `systemctl enable` it); if it exits again read /var/log/fabricmanager.log: its version must equal the driver's, and on hgx b200 and later it needs the nvlink subnet manager (nvlsm) and ib_umad; after restarting it, reset the gpus or reboot so they register with the fabric",
            Action::RestartComponent,
        ),
        None => (
            format!("not installed (no {})", UNIT_FILES[1]),
            "install the nvidia-fabricmanager package of the driver's exact version (`nvidia-fabricmanager-<branch>`), or let the gpu operator's driver container run it; then start it and reset the gpus or reboot",
            Action::FixConfig,
        ),
    };
    let exited = facts
        .log
        .as_ref()
        .and_then(|l| l.exited.as_ref().or(l.errors.last()))
        .map(|l| format!("; its log ends with {}", quote(l)))
        .unwrap_or_default();
    Outcome::fail(format!(
        "nvidia-fabricmanager is {installed} on a node with nvswitches ({why}){fabric_text}{exited}"
    ))
    .evidence_all(evidence)
    .hint(hint)
    .action(action)
    .noting_unread(&facts.problems)
}
