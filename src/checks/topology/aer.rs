//! Topology layer, PCIe AER: the errors counted in sysfs (`aer_dev_*` of the GPUs, NICs and the
//! ports above them, sysfs.md §5) and the reports the kernel printed (facts/xid/events.rs),
//! each attributed to the GPU or NIC it concerns and judged by time.
//!
//! Attribution: a report printed by a GPU or NIC is that device's; one printed by a port (the
//! downstream or root port that saw a link go down: `Surprise Down` is reported above the
//! device that vanished) is every GPU and NIC below that port; a report from another function
//! of the same slot (the GPU's audio function) is the slot's GPU. Reports on other devices
//! (NVMe, USB controllers) are counted and not judged.
//!
//! Verdicts (PCIe base spec severities, Documentation/PCI/pcieaer-howto.rst): uncorrected fatal
//! on a GPU, a NIC or a port above them fails while live and warns as history; uncorrected
//! non-fatal warns; corrected errors are counted and warn only at a rate above
//! [`CORRECTED_WARN_PER_MIN`]. History: a later boot, the device enumerated again, or the port
//! reporting `AER: device recovery successful` (a failed recovery keeps it live); counters that
//! did not move during a `--sample` window.

use std::collections::{BTreeMap, BTreeSet};

use super::{attr_path, in_scope, label, topo};
use crate::checks::history::{Tally, Timeline, tally};
use crate::checks::rates::{SAMPLE_MORE, Window, rate_figure, window};
use crate::checks::{Context, Outcome};
use crate::facts::topology::{DeviceKind, PciDevice};
use crate::facts::xid::{AerEvent, AerSeverity, KernelLog, MarkerKind};
use crate::report::{Action, Evidence, Figure, FigureName};
use crate::sample::{Change, change, over_uptime, rate};

/// Corrected errors per minute above which they warn: DCGM's PCIe replay limit (8 per minute,
/// `DCGM_FR_PCI_REPLAY_RATE`), since a corrected link error is what makes the link replay.
pub const CORRECTED_WARN_PER_MIN: f64 = 8.0;

/// The GPUs and NICs `device` concerns: itself, the ends below it (a port), or the end in the
/// same slot (another function of a multi-function device).
fn ends_for<'t>(ends: &[&'t PciDevice], device: &str) -> Vec<&'t PciDevice> {
    if let Some(d) = ends.iter().find(|d| d.bdf == device) {
        return vec![*d];
    }
    let below: Vec<&PciDevice> = ends
        .iter()
        .filter(|d| d.chain.iter().any(|b| b == device))
        .copied()
        .collect();
    if !below.is_empty() {
        return below;
    }
    let slot = device.rsplit_once('.').map(|(s, _)| s);
    ends.iter()
        .filter(|d| slot.is_some() && d.bdf.rsplit_once('.').map(|(s, _)| s) == slot)
        .copied()
        .collect()
}

fn names(e: &AerEvent) -> String {
    let mut n: Vec<&str> = Vec::new();
    for name in &e.errors {
        if !n.contains(&name.as_str()) {
            n.push(name);
        }
    }
    if n.is_empty() {
        e.layer.clone().unwrap_or_else(|| "no detail".to_string())
    } else {
        n.join(", ")
    }
}

/// Lines either side of a report within which a driver's own AER line names the device the
/// burst was about (the PCI core prints the port's report and each device's recovery line
/// together; rwth-i6/returnn#1500 has them 1-8 lines apart).
const BURST_LINES: usize = 16;

/// The GPUs and NICs named by their driver's lines in the same burst as `e`.
fn burst_named<'l>(log: &'l KernelLog, e: &AerEvent) -> Vec<&'l str> {
    let mut out: Vec<&str> = Vec::new();
    for n in &log.aer_named {
        if n.boot == e.boot
            && n.line_number.abs_diff(e.line_number) <= BURST_LINES
            && !out.contains(&n.device.as_str())
        {
            out.push(&n.device);
        }
    }
    out
}

pub(super) fn aer_errors(ctx: &Context<'_>) -> Outcome {
    // `gpudoctor judge` has a kernel log and no sysfs: the log's reports are judged alone, on
    // the devices their own drivers' lines name.
    let no_node = crate::facts::topology::Topology::default();
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(_) if ctx.source().kind() == crate::report::SourceKind::Files => &no_node,
        Err(o) => return o,
    };
    let (window, broken) = window(ctx);
    let scope = in_scope(t);
    let ends: Vec<&PciDevice> = t
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu || d.kind.is_nic())
        .collect();
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut notes = Vec::new();
    let mut evidence = Vec::new();
    let mut actions = Vec::new();
    let mut figures = Vec::new();
    let mut counted = 0usize;
    // Whether a counter (not a kernel-log report) was judged on its total: --sample would tell.
    let mut totals_judged = false;

    // 1. The sysfs counters: totals since boot, or their increase over a --sample window.
    for d in &scope {
        let aer = &d.aer;
        if aer.fatal.is_none() && aer.nonfatal.is_none() && aer.correctable.is_none() {
            continue;
        }
        counted += 1;
        let who = label(d);
        for (kind, counts, file) in [
            ("fatal", &aer.fatal, "aer_dev_fatal"),
            ("nonfatal", &aer.nonfatal, "aer_dev_nonfatal"),
            ("correctable", &aer.correctable, "aer_dev_correctable"),
        ] {
            let Some(c) = counts else { continue };
            // A zero total says nothing without a window: nothing to spell (issue 41, three
            // strings for each of a node's sixty functions).
            if c.total == 0 && matches!(window, Window::Totals { .. }) {
                continue;
            }
            let named: Vec<String> = c.nonzero.iter().map(|(n, v)| format!("{n} {v}")).collect();
            let detail = if named.is_empty() {
                String::new()
            } else {
                format!(" ({})", named.join(", "))
            };
            let shown = match kind {
                "nonfatal" => "non-fatal",
                other => other,
            };
            let ev = Evidence::new(attr_path(d, file), format!("total {}{detail}", c.total));
            match &window {
                Window::Sample(b) => {
                    let was = b.aer.get(&d.bdf).and_then(|m| m.get(kind)).copied();
                    match change(was, Some(c.total), b.window_s, None) {
                        Some(ch @ Change::Rising { per_s, .. }) => {
                            figures.push(rate_figure(
                                "topology.aer_errors",
                                &d.bdf,
                                kind,
                                per_s,
                                &window,
                            ));
                            let line = format!(
                                "{who}: {shown} aer errors rising {}: {}{detail}",
                                window.text(),
                                ch.text()
                            );
                            let ev = ev.expected(format!("no increase {}", window.text()));
                            match kind {
                                "fatal" => {
                                    fails.push(line);
                                    actions.push(Action::HardwareInspection);
                                    evidence.push(ev);
                                }
                                "nonfatal" => {
                                    warns.push(line);
                                    evidence.push(ev);
                                }
                                _ if per_s * 60.0 > CORRECTED_WARN_PER_MIN => {
                                    warns.push(line);
                                    evidence.push(ev);
                                }
                                _ => notes.push(line),
                            }
                        }
                        Some(Change::Unmoved) if c.total > 0 && kind != "correctable" => {
                            warns.push(format!(
                                "{who}: {} {shown} aer error(s) since boot{detail}, none {} (history)",
                                c.total,
                                window.text()
                            ));
                            evidence.push(ev.expected(format!("no increase {}", window.text())));
                        }
                        Some(ch @ (Change::Backwards { .. } | Change::Vanished { .. })) => {
                            warns.push(format!("{who}: {file} {}", ch.text()));
                        }
                        _ => {}
                    }
                }
                Window::Totals { uptime_s } => {
                    if c.total == 0 {
                        continue;
                    }
                    totals_judged = true;
                    let per_s = over_uptime(c.total, *uptime_s);
                    if let Some(per_s) = per_s {
                        figures.push(rate_figure(
                            "topology.aer_errors",
                            &d.bdf,
                            kind,
                            per_s,
                            &window,
                        ));
                    }
                    let line = format!(
                        "{who}: {} {shown} aer error(s){detail} {}",
                        c.total,
                        window.text()
                    );
                    match kind {
                        "fatal" => {
                            fails.push(line);
                            actions.push(Action::HardwareInspection);
                            evidence.push(ev.expected("TOTAL 0"));
                        }
                        "nonfatal" => {
                            warns.push(line);
                            evidence.push(ev.expected("TOTAL 0"));
                        }
                        _ => match per_s {
                            Some(r) if r * 60.0 > CORRECTED_WARN_PER_MIN => {
                                warns.push(format!("{line}, {}", rate(r)));
                                evidence.push(
                                    ev.expected(format!("≤ {CORRECTED_WARN_PER_MIN} per minute")),
                                );
                            }
                            Some(r) => notes.push(format!("{line}, {}", rate(r))),
                            None => notes.push(line),
                        },
                    }
                }
            }
        }
        if let Some(rp) = aer.rootport {
            for (kind, value) in [("fatal", rp.fatal), ("non-fatal", rp.nonfatal)] {
                if let Some(n) = value.filter(|n| *n > 0) {
                    evidence.push(Evidence::new(
                        attr_path(
                            d,
                            &format!("aer_rootport_total_err_{}", kind.replace('-', "")),
                        ),
                        format!("{n} {kind} message(s) received from below"),
                    ));
                }
            }
        }
    }

    // 2. The kernel log's reports, attributed and aged.
    let mut log_events = 0usize;
    let mut other = 0usize;
    // The first reports about other devices, named with what they say (`0000:01:00.1 fatal:
    // UnsupReq`): a pasted log's only reports may be about them.
    let mut others: Vec<String> = Vec::new();
    if let Some(log) = ctx.kernel_events() {
        let timeline = Timeline::new(log, ctx.clock());
        let from = ctx.kernel_log_origin();
        type Key<'a> = (&'a str, AerSeverity);
        let mut groups: BTreeMap<Key<'_>, Tally<'_, AerEvent>> = BTreeMap::new();
        let mut reporters: BTreeMap<Key<'_>, BTreeSet<&str>> = BTreeMap::new();
        // GPUs and NICs an AER burst names by their own driver's line but that sysfs does not
        // hold (gone from the bus with the link, or a capture without them).
        let ghosts: Vec<(&str, String)> = log
            .aer_named
            .iter()
            .filter(|n| !ends.iter().any(|d| d.bdf == n.device))
            .map(|n| {
                let kind = if n.driver == "nvidia" { "GPU" } else { "NIC" };
                (
                    n.device.as_str(),
                    format!("{kind} {} ({}; not on the PCI bus now)", n.device, n.driver),
                )
            })
            .collect();
        for e in &log.aer {
            let mut targets: Vec<(&str, &[String])> = ends_for(&ends, &e.device)
                .into_iter()
                .map(|d| (d.bdf.as_str(), d.chain.as_slice()))
                .collect();
            if targets.is_empty()
                && let Some(port) = &e.received_by
            {
                targets = ends_for(&ends, port)
                    .into_iter()
                    .map(|d| (d.bdf.as_str(), d.chain.as_slice()))
                    .collect();
            }
            if targets.is_empty() {
                // A report from a port sysfs does not know: the GPUs and NICs the same burst
                // names (their driver's `AER: can't recover` within a few lines, same boot).
                targets = burst_named(log, e)
                    .into_iter()
                    .map(|bdf| (bdf, &[][..]))
                    .collect();
            }
            if targets.is_empty() {
                other += 1;
                let said = format!("{} {}: {}", e.device, e.severity.name(), names(e));
                if others.len() < 3 && !others.contains(&said) {
                    others.push(said);
                }
                continue;
            }
            log_events += 1;
            for (end_bdf, chain) in targets {
                let since = timeline.history(e.line_number, e.stamp.as_ref(), e.boot, |m| {
                    let Some(dev) = m.device.as_deref() else {
                        return false;
                    };
                    match m.kind {
                        MarkerKind::PciEnumerated => dev == end_bdf || dev == e.device,
                        MarkerKind::AerRecovered => {
                            dev == e.device
                                || Some(dev) == e.received_by.as_deref()
                                || chain.iter().any(|b| b == dev)
                        }
                        _ => false,
                    }
                });
                reporters
                    .entry((end_bdf, e.severity))
                    .or_default()
                    .insert(e.device.as_str());
                tally(&mut groups, (end_bdf, e.severity), e, since);
            }
        }
        for ((bdf, severity), group) in &groups {
            let first_seen = timeline.seen_at(group.first.stamp.as_ref(), group.first.boot);
            let last_seen = timeline.seen_at(group.last.stamp.as_ref(), group.last.boot);
            for (state, n) in [("live", group.live), ("history", group.history)] {
                if n > 0 {
                    figures.push(
                        Figure::new(FigureName::PcieAerEvents, n as f64)
                            .label("device", *bdf)
                            .label("severity", severity.name())
                            .label("state", state)
                            .seen(first_seen.clone(), last_seen.clone()),
                    );
                }
            }
            let end = ends.iter().find(|d| d.bdf == *bdf);
            let who = end.map(|d| label(d)).unwrap_or_else(|| {
                ghosts
                    .iter()
                    .find(|(b, _)| b == bdf)
                    .map(|(_, shown)| shown.clone())
                    .unwrap_or_else(|| bdf.to_string())
            });
            let by: Vec<&str> = reporters
                .get(&(*bdf, *severity))
                .map(|s| s.iter().copied().filter(|r| r != bdf).collect())
                .unwrap_or_default();
            let by_text = if by.is_empty() {
                String::new()
            } else {
                format!(" (reported by {})", by.join(", "))
            };
            let when = timeline.when(group.last.stamp.as_ref(), group.last.boot);
            let state = match (&group.last_since, group.recurring()) {
                (_, true) => "live, recurring after recovery".to_string(),
                (None, false) => "live".to_string(),
                (Some(since), false) => format!("history: {}", since.text()),
            };
            let line = format!(
                "{who}{by_text}: {} aer {} [{}], last {}, {state}",
                severity.name(),
                group.count_text(),
                names(group.last),
                when.text()
            );
            let ev = Evidence::quoting(from.as_str(), group.last.message.clone())
                .expected(format!("no {} aer report ({state})", severity.name()));
            let live = group.live > 0;
            match severity {
                AerSeverity::Fatal if live => {
                    fails.push(line);
                    actions.push(if group.recurring() {
                        Action::HardwareInspection
                    } else {
                        Action::RebootNode
                    });
                    evidence.push(ev);
                }
                AerSeverity::Fatal | AerSeverity::NonFatal => {
                    warns.push(line);
                    evidence.push(ev);
                }
                AerSeverity::Corrected => {
                    // Reports in the last hour, per minute (the kernel rate-limits them, so
                    // this is a floor).
                    let recent = log
                        .aer
                        .iter()
                        .filter(|e| e.severity == AerSeverity::Corrected)
                        .filter(|e| ends_for(&ends, &e.device).iter().any(|d| d.bdf == *bdf))
                        .filter(|e| {
                            timeline
                                .when(e.stamp.as_ref(), e.boot)
                                .secs()
                                .is_some_and(|s| s <= 3_600.0)
                        })
                        .count();
                    let per_min = recent as f64 / 60.0;
                    if per_min > CORRECTED_WARN_PER_MIN {
                        warns.push(format!(
                            "{line}; {recent} in the last hour ({per_min:.1}/min)"
                        ));
                        evidence.push(ev);
                    } else {
                        notes.push(line);
                    }
                }
            }
        }
        notes.extend(if log_events > 0 {
            timeline.notes()
        } else {
            Vec::new()
        });
    }

    if counted == 0 && log_events == 0 {
        let mut why = "no aer counters on the gpus, nics or ports above them (kernel before 4.19, aer owned by the firmware, or not captured)".to_string();
        if ctx.kernel_events().is_some() {
            why.push_str(" and no aer report about them in the kernel log");
        }
        if other > 0 {
            why.push_str(&format!(
                " ({other} report(s) about other devices: {})",
                others.join("; ")
            ));
        }
        let outcome = Outcome::skip(why);
        return match broken {
            Some(err) => outcome.with_unread([err]),
            None => outcome,
        };
    }
    let mut tail = Vec::new();
    if !notes.is_empty() {
        tail.push(format!("noted: {}", notes.join("; ")));
    }
    if other > 0 {
        tail.push(format!(
            "{other} aer report(s) about other devices not judged ({})",
            others.join("; ")
        ));
    }
    if totals_judged {
        tail.push(SAMPLE_MORE.to_string());
    }
    let tail_text = if tail.is_empty() {
        String::new()
    } else {
        format!("; {}", tail.join("; "))
    };
    let hint = "read the full report with `dmesg | grep -i aer` (the device and error bits); a fatal error on a gpu or nic port (surprise down: the link below that port went away) needs the node drained and rebooted, and the card, riser or cable of that link reseated or replaced if it returns; either end may count the errors; sysfs counters reset only at reboot, so `gpudoctor check --sample 60` tells whether they still rise";
    let outcome = if !fails.is_empty() {
        fails.extend(warns);
        Outcome::fail(format!("{}{tail_text}", fails.join("; ")))
            .evidence_all(evidence)
            .hint(hint)
            .action(
                crate::checks::xid::most_drastic(&actions).unwrap_or(Action::HardwareInspection),
            )
    } else if !warns.is_empty() {
        Outcome::warn(format!("{}{tail_text}", warns.join("; ")))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::HardwareInspection)
    } else {
        Outcome::pass(format!(
            "no uncorrectable aer errors on {counted} gpu(s), nic(s) and port(s) {}{}{tail_text}",
            window.text(),
            if log_events > 0 {
                format!(", {log_events} kernel-log report(s) below the limits")
            } else {
                String::new()
            }
        ))
    };
    // Nothing counted in sysfs (no GPU or NIC with AER counters): only the kernel log was
    // judged, and a pass then found nothing in it.
    let outcome = if counted == 0 {
        outcome.figures(figures).log_only()
    } else {
        outcome.figures(figures)
    };
    match broken {
        Some(err) => outcome.with_unread([err]),
        None => outcome,
    }
}
