//! Driver layer, XID events: the kernel log's record of what went wrong on each GPU, judged
//! with NVIDIA's XID catalogue (reference/gpu-health.md §8–§9) and by time. Reported as counts,
//! the latest line and its age per GPU and XID, never one finding per line.
//!
//! History or live (checks/history.rs): an XID followed by a boot, the driver loading, the GPU
//! enumerated again, a logged GPU reset or its recovery action going back to none is history
//! (warn with its age and count); one after them, or with nothing after it, is live. The same
//! XID live again after such a line is recurring: it escalates to hardware inspection, as gpud
//! does after two reboots (`xid/threshold.go`) and NVIDIA's catalogue says for a returning XID.
//! XID 154 carries the driver's own recovery action ("Drain and Reset", "Node Reboot Required"),
//! which becomes the finding's action.

use std::collections::{BTreeMap, BTreeSet};

use super::history::{Since, Tally, Timeline, tally};
use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::xid::{MarkerKind, XidEvent, XidSeverity};
use crate::report::{Action, Evidence, Figure, FigureName, Layer};
use crate::text::wording::proper;

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "driver.xid_events",
        layer: Layer::Driver,
        title: "no live fatal XID errors in the kernel log",
        explain: Explain {
            reads: "the kernel log: /dev/kmsg (read without blocking), --kernel-log FILE, or .gpudoctor/kmsg.txt in a capture; NVRM `Xid` lines and the 'fallen off the bus' lines, the lines after which a GPU was brought back (`Linux version`, `NVRM: loading NVIDIA ...`, `pci <bdf>: [10de:....] type ..`, NVSentinel's `GPU reset executed: GPU-<uuid>`, XID 154 back to `(None)`), each line's timestamp, /proc/uptime and /proc/stat btime for ages",
            expects: "no live XID whose catalogue severity is fatal. Live: nothing after the XID says the GPU was brought back (or it came back after one: recurring). History: a boot, driver load, PCI re-enumeration, GPU reset or recovery action `(None)` followed it, or it is stamped before the current boot; history warns with its age and count, live fatal fails. Application-level XIDs (13, 31, 68, 94, 109: the catalogue says restart the application) warn when live and are only noted as history; 43 follows the XID before it (the catalogue says ignore it); 45 alone asks to restart the fabric manager (the catalogue's workflow for XID 45), with other XIDs it follows them; XID 154's recovery action (GPU Reset Required, Drain and Reset, Node Reboot Required) is the action",
            why: "XIDs are the driver's own report of GPU faults: 79 a GPU fallen off the bus, 48 a double-bit ECC error, 119/120 a GSP timeout, 74 an NVLink error; the device plugin marks such a GPU unhealthy and it vanishes from the node's allocatable count. A fault from before a reset is not one now: failing on it forever drains healthy nodes; one that returns after a reset is the hardware (NVIDIA XID catalogue, docs.nvidia.com/deploy/xid-errors; gpud's reboot threshold)",
            fix: "follow the catalogue action printed with the finding: restart the application (13, 31, 94), reset the GPU (46, 62, 95, 119, 120), reboot the node (79), the recovery action XID 154 names, or send it for hardware inspection when the same XID returns after a reset; https://docs.nvidia.com/deploy/xid-errors/",
        },
        // A damaged /proc/uptime or /proc/stat leaves ages unknown: named, judged without.
        run: |ctx| {
            crate::checks::history::noting_log_repairs(ctx, xid_events(ctx))
                .noting_unread(&ctx.boot().problems)
        },
    }]
}

/// Longest kernel-log excerpt kept as evidence.
const EXCERPT_CHARS: usize = 200;

fn excerpt(text: &str) -> String {
    let first_line = text.lines().next().unwrap_or_default();
    let mut out: String = first_line.chars().take(EXCERPT_CHARS).collect();
    if first_line.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

/// The most drastic of `actions` (hardware inspection first).
pub(crate) fn most_drastic(actions: &[Action]) -> Option<Action> {
    [
        Action::HardwareInspection,
        Action::RebootNode,
        Action::ResetGpu,
        Action::ReloadDriver,
        Action::RestartComponent,
        Action::FixConfig,
        Action::CheckWorkload,
    ]
    .into_iter()
    .find(|a| actions.contains(a))
}

/// The driver's GPU instance a line without a bus id names (`NVRM: GPU6 _kgspIsHeartbeatTimedOut:
/// …` -> `GPU6`, src/facts/xid/gsp.rs): the GSP lines say which GPU by the instance the driver
/// numbered it with, not by its bus id.
fn driver_instance(message: &str) -> Option<&str> {
    let text = message.strip_prefix("NVRM:")?.trim_start();
    let digits = text.strip_prefix("GPU")?;
    let n = digits.find(|c: char| !c.is_ascii_digit())?;
    (n > 0 && digits[n..].starts_with(' ')).then(|| &text[..3 + n])
}

fn severity_label(s: XidSeverity) -> &'static str {
    match s {
        XidSeverity::Fatal => "fatal",
        XidSeverity::Application => "application",
        XidSeverity::Informational => "informational",
        XidSeverity::Unknown => "unknown",
    }
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

/// Live fatal XIDs that call for one action: said once, naming the XIDs and, for a reset, the
/// GPUs by PCI bus id (indexes shift when a GPU leaves NVML).
struct FatalGroup {
    action: Action,
    recurring: bool,
    xids: Vec<u32>,
    buses: Vec<String>,
    /// XID 154's recovery texts folded in (the same action).
    asks: Vec<String>,
}

impl FatalGroup {
    fn add(
        groups: &mut Vec<FatalGroup>,
        action: Action,
        recurring: bool,
        xid: u32,
        bus: Option<&str>,
    ) {
        let i = match groups
            .iter()
            .position(|g| g.action == action && g.recurring == recurring)
        {
            Some(i) => i,
            None => {
                groups.push(FatalGroup {
                    action,
                    recurring,
                    xids: Vec::new(),
                    buses: Vec::new(),
                    asks: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[i];
        push_new(&mut g.xids, xid);
        if let Some(bus) = bus {
            push_new(&mut g.buses, bus_id(bus));
        }
    }

    fn hint(&self) -> String {
        let what = match self.action {
            Action::ResetGpu => super::gpu_health::reset_by_bus_id(&self.buses, ""),
            other => other.describe_for(Layer::Driver).to_string(),
        };
        let gpus = if self.buses.is_empty() || self.action == Action::ResetGpu {
            String::new()
        } else {
            format!(" (gpu {})", self.buses.join(", "))
        };
        let why = if self.recurring {
            ": it returned after the gpu was brought back, so the gpu itself is suspect"
        } else {
            ""
        };
        let asks = if self.asks.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = self.asks.iter().map(|a| format!("`{a}`")).collect();
            format!(" (the driver asks for {})", quoted.join(", "))
        };
        format!("xid {}{asks}: {what}{gpus}{why}", numbers(&self.xids))
    }
}

/// Live XID 154s asking for one recovery action: said once, naming the GPUs.
struct Recovery {
    text: String,
    action: Action,
    buses: Vec<String>,
}

impl Recovery {
    fn add(list: &mut Vec<Recovery>, text: &str, action: Action, bus: Option<&str>) {
        let i = match list
            .iter()
            .position(|r| r.text == text && r.action == action)
        {
            Some(i) => i,
            None => {
                list.push(Recovery {
                    text: text.to_string(),
                    action,
                    buses: Vec::new(),
                });
                list.len() - 1
            }
        };
        if let Some(bus) = bus {
            push_new(&mut list[i].buses, bus_id(bus));
        }
    }

    fn hint(&self) -> String {
        let what = match self.action {
            Action::ResetGpu => super::gpu_health::reset_by_bus_id(&self.buses, ""),
            other if self.buses.is_empty() => other.describe_for(Layer::Driver).to_string(),
            other => format!(
                "{} (gpu {})",
                other.describe_for(Layer::Driver),
                self.buses.join(", ")
            ),
        };
        format!("xid 154: the driver asks for `{}`: {what}", self.text)
    }
}

/// The kernel prints `PCI:0000:3a:00` (domain, bus, device); nvidia-smi's `-i` takes a full
/// bus id with the function, which is 0 for a GPU.
fn bus_id(bus: &str) -> String {
    if bus.matches(':').count() == 2 && !bus.contains('.') {
        format!("{bus}.0")
    } else {
        bus.to_string()
    }
}

/// How one group is judged.
enum Verdict {
    Fail(Action),
    Warn(Action),
    Note,
}

fn xid_events(ctx: &Context<'_>) -> Outcome {
    let from = match ctx.kernel_log() {
        Ok(Some((_, from))) => from,
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
    let Some(log) = ctx.kernel_events() else {
        return Outcome::skip("no kernel log to read");
    };
    let timeline = Timeline::new(log, ctx.clock());
    // GPU label by bus id, from NVML when it answered; bus id by UUID, from NVML and the log.
    let nvml = ctx.nvml();
    let index_of: BTreeMap<&str, u32> = nvml
        .devices
        .iter()
        .filter_map(|d| d.pci_bus_id.as_deref().map(|b| (b, d.index)))
        .collect();
    let mut bus_of_uuid: BTreeMap<&str, &str> = log
        .uuids
        .iter()
        .map(|(bus, uuid)| (uuid.as_str(), bus.as_str()))
        .collect();
    for d in &nvml.devices {
        if let (Some(u), Some(b)) = (d.uuid.as_deref(), d.pci_bus_id.as_deref()) {
            bus_of_uuid.insert(u, b);
        }
    }
    let label = |bus: Option<&str>| match bus {
        Some(b) => match index_of.get(b) {
            Some(i) => format!("gpu {i} ({b})"),
            None => format!("gpu {b}"),
        },
        None => "unknown gpu".to_string(),
    };
    // XID 154 back to `(None)`: the driver says the GPU needs nothing any more.
    let recovered: Vec<(usize, Option<&str>)> = log
        .xids
        .iter()
        .filter(|e| e.xid == 154)
        .filter(|e| e.recovery_action().is_some_and(|(_, a)| a == Action::None))
        .map(|e| (e.line_number, e.pci_bus_id.as_deref()))
        .collect();
    let history_of = |e: &XidEvent| -> Option<Since> {
        let bus = e.pci_bus_id.as_deref();
        let since = timeline.history(e.line_number, e.stamp.as_ref(), e.boot, |m| match m.kind {
            MarkerKind::DriverLoad => true,
            MarkerKind::PciEnumerated => m.device.as_deref() == bus && bus.is_some(),
            MarkerKind::ResetExecuted => {
                bus.is_some()
                    && m.uuid
                        .as_deref()
                        .and_then(|u| bus_of_uuid.get(u))
                        .is_some_and(|b| Some(*b) == bus)
            }
            _ => false,
        });
        if since.is_some() {
            return since;
        }
        recovered
            .iter()
            .find(|(line, b)| *line > e.line_number && *b == bus && e.xid != 154)
            .map(|_| Since::After("the gpu's recovery action went back to none (xid 154)".into()))
    };

    let mut groups: BTreeMap<(Option<&str>, u32), Tally<'_, XidEvent>> = BTreeMap::new();
    for event in &log.xids {
        tally(
            &mut groups,
            (event.pci_bus_id.as_deref(), event.xid),
            event,
            history_of(event),
        );
    }
    // GPUs with live XIDs other than 45, 43 and 154: a 45 there follows them (the catalogue's
    // workflow for XID 45).
    let others_live: BTreeSet<Option<&str>> = groups
        .iter()
        .filter(|((_, x), t)| ![45, 43, 154].contains(x) && t.live > 0)
        .map(|((bus, _), _)| *bus)
        .collect();

    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut notes = Vec::new();
    let mut evidence = Vec::new();
    let mut informational = Vec::new();
    let mut actions = Vec::new();
    let mut hints: Vec<String> = Vec::new();
    // Hints are grouped so that one action is said once: fatal XIDs by action (with the GPUs a
    // reset must name), history, application-level and uncatalogued XIDs each as one list.
    let mut fatal: Vec<FatalGroup> = Vec::new();
    let mut recoveries: Vec<Recovery> = Vec::new();
    let mut history_xids: Vec<u32> = Vec::new();
    let mut app_xids: Vec<u32> = Vec::new();
    let mut unknown_xids: Vec<u32> = Vec::new();
    let mut figures = Vec::new();
    for ((bus, number), group) in &groups {
        let info = group.last.info();
        // When this XID was first and last written on this GPU, for a ticket to sort on.
        let first_seen = timeline.seen_at(group.first.stamp.as_ref(), group.first.boot);
        let last_seen = timeline.seen_at(group.last.stamp.as_ref(), group.last.boot);
        for (state, n) in [("live", group.live), ("history", group.history)] {
            if n > 0 {
                figures.push(
                    Figure::new(FigureName::XidEvents, n as f64)
                        .label("gpu", bus.unwrap_or("unknown"))
                        .label("xid", number.to_string())
                        .label("severity", severity_label(info.severity))
                        .label("state", state)
                        .seen(first_seen.clone(), last_seen.clone()),
                );
            }
        }
        let live = group.live > 0;
        let when = timeline
            .when(group.last.stamp.as_ref(), group.last.boot)
            .text();
        let state = match (&group.last_since, group.recurring()) {
            (_, true) => "live, recurring after a reset".to_string(),
            (None, false) => "live".to_string(),
            (Some(since), false) => format!("history: {}", since.text()),
        };
        let name = match group.last.recovery_action() {
            Some((to, _)) => format!("{} to {to}", info.name),
            None => info.name.to_string(),
        };
        let who = match bus {
            Some(_) => label(*bus),
            None => driver_instance(&group.last.message)
                .map(|i| format!("the driver's {i} (its bus id is not in the log)"))
                .unwrap_or_else(|| label(None)),
        };
        let line = format!(
            "{who} xid {number} {} ({name}) last {when}: {state}",
            group.count_text(),
        );
        let verdict = if *number == 154 {
            match group.last.recovery_action() {
                Some((text, action)) if action != Action::None && live => {
                    Recovery::add(&mut recoveries, text, action, *bus);
                    Verdict::Fail(action)
                }
                Some((text, action)) if action != Action::None => {
                    push_new(
                        &mut hints,
                        format!(
                            "xid 154 asked for `{text}` before the gpu was brought back; nothing to do unless it returns"
                        ),
                    );
                    Verdict::Warn(Action::None)
                }
                _ => Verdict::Note,
            }
        } else {
            match info.severity {
                XidSeverity::Fatal if live => {
                    let action = if group.recurring() {
                        Action::HardwareInspection
                    } else {
                        info.action
                    };
                    FatalGroup::add(&mut fatal, action, group.recurring(), *number, *bus);
                    Verdict::Fail(action)
                }
                XidSeverity::Fatal => {
                    push_new(&mut history_xids, *number);
                    Verdict::Warn(Action::None)
                }
                XidSeverity::Application if *number == 45 && others_live.contains(bus) => {
                    Verdict::Note
                }
                XidSeverity::Application if live => {
                    if *number == 45 {
                        push_new(
                            &mut hints,
                            "xid 45 alone: restart the fabric manager on nvswitch systems, else restart the application".to_string(),
                        );
                    } else {
                        push_new(&mut app_xids, *number);
                    }
                    Verdict::Warn(info.action)
                }
                XidSeverity::Unknown if live => {
                    push_new(&mut unknown_xids, *number);
                    Verdict::Warn(Action::None)
                }
                _ => Verdict::Note,
            }
        };
        let observed = excerpt(&group.last.message);
        match verdict {
            Verdict::Fail(action) => {
                fails.push(line.clone());
                actions.push(action);
            }
            Verdict::Warn(action) => {
                warns.push(line.clone());
                actions.push(action);
            }
            Verdict::Note => {
                notes.push(line.clone());
                informational.push(Evidence::quoting(
                    from.as_str(),
                    format!("{observed} ({})", proper(&format!("noted: {line}"))),
                ));
                continue;
            }
        }
        // `expected` says what a healthy node shows; the state and age are what was seen.
        evidence.push(
            Evidence::quoting(
                from.as_str(),
                format!("{observed} ({})", proper(&format!("{state}, last {when}"))),
            )
            .expected(format!("no live xid {number}")),
        );
    }
    // An XID 154 asking for the action another live XID already calls for is said with it.
    recoveries.retain(|r| {
        match fatal
            .iter_mut()
            .find(|g| g.action == r.action && !g.recurring)
        {
            Some(g) => {
                push_new(&mut g.xids, 154);
                push_new(&mut g.asks, r.text.clone());
                for b in &r.buses {
                    push_new(&mut g.buses, b.clone());
                }
                false
            }
            None => true,
        }
    });
    // A node reboot also does what a GPU reset or a driver reload would: one action, said once.
    if fatal
        .iter()
        .any(|g| g.action == Action::RebootNode && !g.recurring)
    {
        let (folded, kept): (Vec<FatalGroup>, Vec<FatalGroup>) =
            std::mem::take(&mut fatal).into_iter().partition(|g| {
                !g.recurring && matches!(g.action, Action::ResetGpu | Action::ReloadDriver)
            });
        fatal = kept;
        if let Some(target) = fatal
            .iter_mut()
            .find(|g| g.action == Action::RebootNode && !g.recurring)
        {
            for g in folded {
                for x in g.xids {
                    push_new(&mut target.xids, x);
                }
                for b in g.buses {
                    push_new(&mut target.buses, b);
                }
                for a in g.asks {
                    push_new(&mut target.asks, a);
                }
            }
        }
    }
    let mut hints: Vec<String> = fatal
        .iter()
        .map(FatalGroup::hint)
        .chain(recoveries.iter().map(Recovery::hint))
        .chain(hints)
        .collect();
    if !history_xids.is_empty() {
        hints.push(format!(
            "xid {} came before the gpu was brought back: nothing to do now, act only if it returns",
            numbers(&history_xids)
        ));
    }
    if !app_xids.is_empty() {
        hints.push(format!(
            "xid {}: application-level, check the workload that ran on the gpu",
            numbers(&app_xids)
        ));
    }
    if !unknown_xids.is_empty() {
        hints.push(format!(
            "xid {}: not in the catalogue, look it up in https://docs.nvidia.com/deploy/xid-errors/",
            numbers(&unknown_xids)
        ));
    }
    let mut tail: Vec<String> = Vec::new();
    if !notes.is_empty() {
        tail.push(format!("noted: {}", notes.join("; ")));
    }
    tail.extend(timeline.notes());
    let tail_text = if tail.is_empty() {
        String::new()
    } else {
        format!("; {}", tail.join("; "))
    };
    evidence.extend(informational);
    if !fails.is_empty() {
        let mut summary = fails.join("; ");
        if !warns.is_empty() {
            summary.push_str("; ");
            summary.push_str(&warns.join("; "));
        }
        return Outcome::fail(format!("{summary}{tail_text}"))
            .evidence_all(evidence)
            .hint(hints.join("; "))
            .action(most_drastic(&actions).unwrap_or(Action::RebootNode))
            .figures(figures);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{}{tail_text}", warns.join("; ")))
            .evidence_all(evidence)
            .hint(hints.join("; "))
            .action(most_drastic(&actions).unwrap_or(Action::None))
            .figures(figures);
    }
    Outcome::pass(format!("no live fatal xid in the kernel log{tail_text}"))
        .evidence_all(evidence)
        .figures(figures)
}
