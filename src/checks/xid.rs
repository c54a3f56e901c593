//! Driver layer, XID events: the kernel log's record of what went wrong on each GPU, judged
//! with NVIDIA's XID catalogue (reference/gpu-health.md §8–§9). Reported as counts and the most
//! recent line per GPU and XID, never one finding per line.

use std::collections::BTreeMap;

use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::xid::{self, XidEvent, XidSeverity};
use crate::report::{Action, Evidence, Figure, FigureName, Layer};

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "driver.xid_events",
        layer: Layer::Driver,
        title: "no fatal XID errors in the kernel log",
        explain: Explain {
            reads: "the kernel log: /dev/kmsg (read without blocking), --kernel-log FILE, or .gpudoctor/kmsg.txt in a capture; NVRM `Xid` lines and the 'fallen off the bus' lines",
            expects: "no XID whose catalogue severity is fatal; application-level XIDs (13, 31, 43, 45, 68, 109) only warn",
            why: "XIDs are the driver's own report of GPU faults: 79 a GPU fallen off the bus, 48 a double-bit ECC error, 119/120 a GSP timeout, 74 an NVLink error; the device plugin marks such a GPU unhealthy and it vanishes from the node's allocatable count",
            fix: "follow the catalogue action printed with the finding: restart the application (13, 31, 43, 45), reset the GPU (46, 62, 119, 120), reboot the node (79), or send it for hardware inspection when the same XID returns; https://docs.nvidia.com/deploy/xid-errors/",
        },
        run: xid_events,
    }]
}

/// Longest kernel-log excerpt kept as evidence.
const EXCERPT_CHARS: usize = 200;

struct Group<'a> {
    count: usize,
    last: &'a XidEvent,
}

fn excerpt(text: &str) -> String {
    let first_line = text.lines().next().unwrap_or_default();
    let mut out: String = first_line.chars().take(EXCERPT_CHARS).collect();
    if first_line.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

fn push_new<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn numbers(xids: &[u32]) -> String {
    xids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The one action for the fatal XIDs, naming the GPUs by PCI bus id where a reset needs it.
fn fatal_hint(action: Action, gpus: &[&str]) -> String {
    match action {
        Action::ResetGpu if !gpus.is_empty() => {
            let commands: Vec<String> = gpus
                .iter()
                .map(|g| format!("`nvidia-smi -r -i {g}`"))
                .collect();
            format!(
                "drain the node, stop what holds the gpu (`lsof /dev/nvidia*`: device plugin and dcgm-exporter pods, nv-hostengine, nvidia-persistenced; leave nvidia-fabricmanager running on HGX/NVSwitch nodes), then reset it by pci bus id: {}; reboot if the reset is refused",
                commands.join(", ")
            )
        }
        other => other.describe_for(crate::report::Layer::Driver).to_string(),
    }
}

/// Hints for application-level and uncatalogued XIDs, one per kind.
fn other_hints(app: &[u32], unknown: &[u32]) -> Vec<String> {
    let mut hints = Vec::new();
    if !app.is_empty() {
        hints.push(format!(
            "xid {}: application-level, check the workload that ran on the gpu",
            numbers(app)
        ));
    }
    if !unknown.is_empty() {
        hints.push(format!(
            "xid {}: not in the catalogue, look it up in https://docs.nvidia.com/deploy/xid-errors/",
            numbers(unknown)
        ));
    }
    hints
}

/// A kmsg timestamp is microseconds since boot; dmesg's are already readable.
fn when(timestamp: Option<&str>) -> String {
    match timestamp {
        Some(t) if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) => match t.parse::<u64>()
        {
            Ok(usec) => format!(
                " at {}.{:06} s after boot",
                usec / 1_000_000,
                usec % 1_000_000
            ),
            Err(_) => String::new(),
        },
        Some(t) => format!(" at {t}"),
        None => String::new(),
    }
}

fn xid_events(ctx: &Context<'_>) -> Outcome {
    let (text, from) = match ctx.kernel_log() {
        Ok(Some((text, from))) => (text, from),
        Ok(None) => {
            return Outcome::skip(
                "no kernel log to read (pass --kernel-log FILE with saved dmesg output)",
            );
        }
        Err(err) => {
            return Outcome::error(format!("could not read the kernel log: {err}"))
                .evidence(Evidence::new(err.path(), err.to_string()))
                .hint("run as root (reading /dev/kmsg needs CAP_SYSLOG when dmesg_restrict=1), or pass --kernel-log with `dmesg` output");
        }
    };
    let log = xid::parse_kernel_log(text);
    // GPU label by bus id, from NVML when it answered.
    let index_of: BTreeMap<&str, u32> = ctx
        .nvml()
        .devices
        .iter()
        .filter_map(|d| d.pci_bus_id.as_deref().map(|b| (b, d.index)))
        .collect();
    let label = |bus: Option<&str>| match bus {
        Some(b) => match index_of.get(b) {
            Some(i) => format!("gpu {i} ({b})"),
            None => format!("gpu {b}"),
        },
        None => "unknown gpu".to_string(),
    };

    let mut groups: BTreeMap<(Option<&str>, u32), Group<'_>> = BTreeMap::new();
    for event in &log.xids {
        groups
            .entry((event.pci_bus_id.as_deref(), event.xid))
            .and_modify(|g| {
                g.count += 1;
                g.last = event;
            })
            .or_insert(Group {
                count: 1,
                last: event,
            });
    }

    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut informational = Vec::new();
    let mut evidence = Vec::new();
    let mut actions = Vec::new();
    // XID numbers by kind, for one hint per kind (catalogue resolution tokens such as
    // WORKFLOW_XID_48 are data, never shown: the action they map to is).
    let mut fatal_xids: Vec<u32> = Vec::new();
    let mut fatal_gpus: Vec<&str> = Vec::new();
    let mut app_xids: Vec<u32> = Vec::new();
    let mut unknown_xids: Vec<u32> = Vec::new();
    let mut figures = Vec::new();
    for ((bus, number), group) in &groups {
        let info = group.last.info();
        figures.push(
            Figure::new(FigureName::XidEvents, group.count as f64)
                .label("gpu", bus.unwrap_or("unknown"))
                .label("xid", number.to_string())
                .label(
                    "severity",
                    match info.severity {
                        XidSeverity::Fatal => "fatal",
                        XidSeverity::Application => "application",
                        XidSeverity::Informational => "informational",
                        XidSeverity::Unknown => "unknown",
                    },
                ),
        );
        let line = format!(
            "{} xid {number} ×{} ({})",
            label(*bus),
            group.count,
            info.name
        );
        let observed = excerpt(&group.last.message);
        match info.severity {
            XidSeverity::Fatal => {
                fails.push(line);
                actions.push(info.action);
                push_new(&mut fatal_xids, *number);
                if let Some(bus) = bus {
                    push_new(&mut fatal_gpus, *bus);
                }
            }
            XidSeverity::Application => {
                warns.push(line);
                push_new(&mut app_xids, *number);
            }
            XidSeverity::Unknown => {
                warns.push(format!(
                    "{} xid {number} ×{} (not in the catalogue)",
                    label(*bus),
                    group.count
                ));
                push_new(&mut unknown_xids, *number);
            }
            XidSeverity::Informational => {
                // Not a fault: shown, with nothing expected of it.
                informational.push(Evidence::new(
                    from.as_str(),
                    format!("{observed} (informational: {line})"),
                ));
                continue;
            }
        }
        // `expected` holds what a healthy node shows; when and how often goes with what was seen.
        evidence.push(
            Evidence::new(
                from.as_str(),
                format!(
                    "{observed} (last of {}{})",
                    group.count,
                    when(group.last.timestamp.as_deref())
                ),
            )
            .expected(format!("no xid {number}")),
        );
    }
    let info_note = if informational.is_empty() {
        String::new()
    } else {
        format!("; {} informational xid record(s)", informational.len())
    };
    evidence.extend(informational);
    if !fails.is_empty() {
        // The most drastic action among the fatal XIDs decides.
        let action = [
            Action::HardwareInspection,
            Action::RebootNode,
            Action::ResetGpu,
            Action::ReloadDriver,
            Action::RestartComponent,
            Action::CheckWorkload,
        ]
        .into_iter()
        .find(|a| actions.contains(a))
        .unwrap_or(Action::RebootNode);
        let mut hints = vec![format!(
            "xid {}: {}",
            numbers(&fatal_xids),
            fatal_hint(action, &fatal_gpus)
        )];
        hints.extend(other_hints(&app_xids, &unknown_xids));
        let mut summary = fails.join("; ");
        if !warns.is_empty() {
            summary.push_str("; ");
            summary.push_str(&warns.join("; "));
        }
        return Outcome::fail(summary)
            .evidence_all(evidence)
            .hint(hints.join("; "))
            .action(action)
            .figures(figures);
    }
    if !warns.is_empty() {
        let hints = other_hints(&app_xids, &unknown_xids);
        return Outcome::warn(format!("{}{info_note}", warns.join("; ")))
            .evidence_all(evidence)
            .hint(hints.join("; "))
            .action(Action::CheckWorkload)
            .figures(figures);
    }
    Outcome::pass(format!("no fatal xid in the kernel log{info_note}")).figures(figures)
}
