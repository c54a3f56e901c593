//! NVLink layer, SXID events: what the NVSwitch driver logged about each switch and port,
//! judged with the Fabric Manager guide's SXID catalogue (facts/xid/sxid.rs) and by time
//! (checks/history.rs): an SXID followed by a boot, the driver loading, or the switch probed or
//! enumerated again is history; otherwise live.

use std::collections::BTreeMap;

use super::super::history::{Tally, Timeline, tally};
use super::super::xid::most_drastic;
use super::super::{Context, Outcome};
use crate::facts::xid::sxid::{SxidClass, sxid_info};
use crate::facts::xid::{MarkerKind, SxidEvent};
use crate::report::{Action, Evidence, Figure, FigureName};

fn class_label(class: SxidClass) -> &'static str {
    match class {
        SxidClass::NonFatal => "non-fatal",
        SxidClass::Fatal => "fatal",
        SxidClass::AlwaysFatal => "always fatal",
        SxidClass::Notable => "notable",
        SxidClass::Unknown => "not in the guide",
    }
}

pub(super) fn sxid_events(ctx: &Context<'_>) -> Outcome {
    let from = match ctx.kernel_log() {
        Ok(Some((_, from))) => from.clone(),
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
    if log.sxids.is_empty() {
        let devices = super::super::gpu_health::usable_devices(ctx).unwrap_or_default();
        return match super::nvswitch_system(ctx, &devices) {
            Some(why) => Outcome::pass(format!("no sxid in the kernel log ({why})")),
            None => Outcome::skip("no nvswitch on this node and no sxid in the kernel log"),
        };
    }
    let timeline = Timeline::new(log, ctx.clock());
    type Key<'a> = (Option<&'a str>, u32, Option<u32>);
    let mut groups: BTreeMap<Key<'_>, Tally<'_, SxidEvent>> = BTreeMap::new();
    for e in &log.sxids {
        let bus = e.pci_bus_id.as_deref();
        let since = timeline.history(e.line_number, e.stamp.as_ref(), e.boot, |m| match m.kind {
            MarkerKind::DriverLoad => true,
            MarkerKind::NvswitchProbe | MarkerKind::PciEnumerated => {
                bus.is_some() && m.device.as_deref() == bus
            }
            _ => false,
        });
        tally(&mut groups, (bus, e.sxid, e.link), e, since);
    }
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut notes = Vec::new();
    let mut evidence = Vec::new();
    let mut actions = Vec::new();
    let mut figures = Vec::new();
    for ((bus, number, link), group) in &groups {
        let info = sxid_info(*number);
        let fatal = group.last.is_fatal();
        let severity = if fatal { "fatal" } else { "non-fatal" };
        let first_seen = timeline.seen_at(group.first.stamp.as_ref(), group.first.boot);
        let last_seen = timeline.seen_at(group.last.stamp.as_ref(), group.last.boot);
        for (state, n) in [("live", group.live), ("history", group.history)] {
            if n > 0 {
                figures.push(
                    Figure::new(FigureName::SxidEvents, n as f64)
                        .label("switch", bus.unwrap_or("unknown"))
                        .label("sxid", number.to_string())
                        .label("severity", severity)
                        .label("state", state)
                        .seen(first_seen.clone(), last_seen.clone()),
                );
            }
        }
        let switch = match (bus, group.last.switch.as_deref()) {
            (Some(b), Some(s)) => format!("nvswitch {b} ({s})"),
            (Some(b), None) => format!("nvswitch {b}"),
            (None, Some(s)) => s.to_string(),
            (None, None) => "unknown nvswitch".to_string(),
        };
        let port = link.map(|l| format!(" link {l}")).unwrap_or_default();
        let when = timeline
            .when(group.last.stamp.as_ref(), group.last.boot)
            .text();
        let state = match (&group.last_since, group.recurring()) {
            (_, true) => "live, recurring after a reset".to_string(),
            (None, false) => "live".to_string(),
            (Some(since), false) => format!("history: {}", since.text()),
        };
        let line = format!(
            "{switch}{port} sxid {number} {} ({}, {severity}; guide: {}) last {when}: {state}",
            group.count_text(),
            info.name,
            class_label(info.class)
        );
        let observed = group
            .last
            .detail
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        // `expected` says what a healthy node shows; the state and age are what was seen.
        let ev = Evidence::new(
            from.as_str(),
            format!("sxid {number}: {observed} ({state}, last {when})"),
        );
        let live = group.live > 0;
        if fatal && live {
            fails.push(line);
            actions.push(if group.recurring() {
                Action::HardwareInspection
            } else {
                Action::RebootNode
            });
            evidence.push(ev.expected("no live fatal sxid"));
        } else if fatal || live {
            warns.push(line);
            evidence.push(ev.expected("no sxid"));
        } else {
            notes.push(line);
        }
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
    if !fails.is_empty() {
        fails.extend(warns);
        return Outcome::fail(format!("{}{tail_text}", fails.join("; ")))
            .evidence_all(evidence)
            .hint("a fatal sxid stalls nvlink traffic through that switch port (the gpus behind it see xid 45/74): drain the node, then reset all gpus and nvswitches (fabric manager guide d.9: stop nvidia-fabricmanager, `nvidia-smi -r`, start it) or reboot; an always-fatal sxid needs the host restarted; the same sxid on the same link after that: inspect the nvswitch tray or gpu baseboard")
            .action(most_drastic(&actions).unwrap_or(Action::RebootNode))
            .figures(figures);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{}{tail_text}", warns.join("; ")))
            .evidence_all(evidence)
            .hint("non-fatal sxids are corrected by the switch (single-bit ecc, replays): watch for them rising or for a fatal one; a fatal sxid from before the switch was reset needs nothing now unless it returns")
            .figures(figures);
    }
    Outcome::pass(format!("no live sxid in the kernel log{tail_text}")).figures(figures)
}
