//! rdma.nic_events: what the ConnectX driver wrote in the kernel log (facts/xid/nic.rs): a NIC
//! that failed to probe (`mlx5_load_one failed with error code -22`, `probe of ... failed`) is
//! invisible to every sysfs check, since it never registered an RDMA device; firmware that
//! stopped answering (`device's health compromised`), a transceiver running hot, a slot without
//! the card's power, a firmware that lets commands time out, and a port that keeps going down. Judged by time as XIDs are
//! (checks/history.rs): an event before a reboot, or before the function was enumerated again, is
//! history.

use std::collections::BTreeMap;

use super::*;
use crate::checks::history::{Tally, Timeline, kernel_log_or_outcome, parenthesised, tally};
use crate::facts::xid::{MarkerKind, NicEvent, NicEventKind};

/// Link-down events (or link-ups after the first) of one port in the current boot from which
/// it is flapping: one down and up is a cable moved or a switch restarted; three is a pattern
/// (Azure's health checks count IB link flaps from the log the same way, per port).
const FLAPS_WARN: usize = 3;

fn what(kind: NicEventKind) -> &'static str {
    match kind {
        NicEventKind::ProbeFailed => "failed to come up",
        NicEventKind::HealthCompromised => "firmware health compromised",
        NicEventKind::ModuleHot => "cable module at high temperature",
        NicEventKind::SlotPower => "insufficient slot power",
        NicEventKind::CommandTimeout => "firmware command timeouts",
        NicEventKind::LinkDown | NicEventKind::LinkUp => "link state changes",
    }
}

/// `NIC 0000:03:00.0`, or what a line without the address allows.
fn nic_name(device: &str) -> String {
    if device.is_empty() {
        "an mlx5 NIC (the line gives no PCI address)".to_string()
    } else {
        format!("NIC {device}")
    }
}

pub(super) fn nic_events(ctx: &Context<'_>) -> Outcome {
    let log = match kernel_log_or_outcome(ctx) {
        Ok(log) => log,
        Err(outcome) => return outcome,
    };
    let from = ctx.kernel_log_origin();
    let timeline = Timeline::new(log, ctx.clock());
    let mut groups: BTreeMap<(&str, NicEventKind), Tally<'_, NicEvent>> = BTreeMap::new();
    let current = log.boots.saturating_sub(1);
    let mut flaps: BTreeMap<(&str, &str), (usize, usize)> = BTreeMap::new();
    for e in &log.nic_events {
        match e.kind {
            NicEventKind::LinkDown | NicEventKind::LinkUp => {
                if e.boot == current {
                    let entry = flaps
                        .entry((e.device.as_str(), e.detail.as_str()))
                        .or_default();
                    if e.kind == NicEventKind::LinkDown {
                        entry.0 += 1;
                    } else {
                        entry.1 += 1;
                    }
                }
            }
            _ => {
                let since = timeline.history(e.line_number, e.stamp.as_ref(), e.boot, |m| {
                    m.kind == MarkerKind::PciEnumerated && m.device.as_deref() == Some(&e.device)
                });
                tally(&mut groups, (e.device.as_str(), e.kind), e, since);
            }
        }
    }
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut evidence = Vec::new();
    for ((device, kind), group) in &groups {
        let when = timeline.when(group.last.stamp.as_ref(), group.last.boot);
        let state = match &group.last_since {
            None => "live".to_string(),
            Some(since) => format!("history: {}", since.text()),
        };
        let line = format!(
            "{}: {} ({}) {}, last {}, {state}",
            nic_name(device),
            what(*kind),
            group.last.detail,
            group.count_text(),
            when.text()
        );
        evidence.push(
            Evidence::quoting(from.as_str(), group.last.message.clone())
                .expected(format!("no {} ({state})", what(*kind))),
        );
        let live = group.live > 0;
        match kind {
            NicEventKind::ProbeFailed
            | NicEventKind::HealthCompromised
            | NicEventKind::CommandTimeout
                if live =>
            {
                fails.push(line)
            }
            _ if live => warns.push(line),
            _ => warns.push(line),
        }
    }
    for ((device, netdev), (downs, ups)) in &flaps {
        let changes = (*downs).max(ups.saturating_sub(1));
        if changes >= FLAPS_WARN {
            warns.push(format!(
                "{} ({netdev}): link went down {changes} time(s) this boot ({downs} `Link down`, {ups} `Link up`): the port is flapping",
                nic_name(device)
            ));
        }
    }
    let notes = timeline.notes();
    let noted = parenthesised(&notes);
    if !fails.is_empty() {
        let mut text = fails;
        text.extend(warns);
        return Outcome::fail(format!("{}{noted}", text.join("; ")))
            .evidence_all(evidence)
            .hint("a NIC that failed to probe or whose firmware stopped is gone from RDMA until the driver reloads it: read `dmesg | grep mlx5` for the first error, check the firmware (`mlxfwmanager --query`, `flint -d <bdf> q`) and the card's seating; reload (`modprobe -r mlx5_ib mlx5_core && modprobe mlx5_core`) or reboot, and replace the card if it returns")
            .action(Action::HardwareInspection);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{}{noted}", warns.join("; ")))
            .evidence_all(evidence)
            .hint("a hot module or flapping link: reseat or replace the cable/transceiver and read the switch port's counters; insufficient slot power: move the card to a slot that supplies it or fix the riser's power; history that recurs after a reboot means hardware")
            .action(Action::HardwareInspection);
    }
    let ports = flaps.len();
    Outcome::pass(format!(
        "no NIC probe failure, firmware fault, hot module or flapping port in the kernel log ({} line(s) read, {ports} port(s) with link changes){noted}",
        log.lines
    ))
    .log_only()
}

/// Does the kernel log show `bdf` failing to probe (`mlx5_load_one failed`, `probe of <bdf>
/// failed`), at any time? For rdma.devices: a function without driver whose probe failed is
/// this check's finding, not a module to load (checks/causes.rs).
pub(super) fn probe_failed(ctx: &Context<'_>, bdf: &str) -> bool {
    ctx.kernel_events().is_some_and(|log| {
        log.nic_events
            .iter()
            .any(|e| e.kind == NicEventKind::ProbeFailed && e.device == bdf)
    })
}
