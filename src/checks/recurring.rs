//! driver.recurring_faults: a fault that comes back after every reboot (`--state-dir`). The
//! kernel log forgets at each boot, so `driver.xid_events` sees an XID 79 that returns after
//! the reboot meant to clear it as a fresh one; this check adds the current boot's faults to
//! the state (`answers/history.rs`) and fails a fault seen in [`ESCALATE_AFTER`] consecutive
//! boots. Three, because a reboot is the catalogue's remedy for most fatal XIDs: back once may
//! be the same job hitting it again, back after a second reboot is the hardware (gpud escalates
//! a fault that survives repeated reboots to "needs hardware inspection" the same way).
//!
//! Faults recorded: fatal XIDs (catalogue severity), fatal SXids, uncorrectable fatal AER
//! reports on any device, and NIC probe and firmware faults, each with its device, from lines
//! of the current boot. Without `--state-dir` (and no state in a capture) the check skips and
//! nothing else changes; a state file that cannot be read is an error naming it, left as it is.

use std::collections::BTreeSet;

use super::{CheckDef, Context, Explain, Outcome};
use crate::checks::history::Timeline;
use crate::facts::xid::{AerSeverity, NicEventKind, When, XidSeverity};
use crate::report::{Action, Evidence, Layer};

/// Consecutive boots a fault must be seen in to fail.
pub const ESCALATE_AFTER: usize = 3;

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "driver.recurring_faults",
        layer: Layer::Driver,
        title: "no fault survives repeated reboots (--state-dir)",
        explain: Explain {
            reads: "the kernel log's fatal XIDs, fatal SXids, fatal AER reports and NIC probe/firmware faults of the current boot; --state-dir DIR/history.json (or a capture's .gpudoctor/state/history.json), to which each run adds its boot",
            expects: "no fault in 3 consecutive boots (fail); in 2 (this one and the one before) warns",
            why: "a reboot is the remedy for most fatal XIDs and AER faults; a fault that returns after two of them is the hardware, and each reboot costs the node its jobs; without memory every recurrence looks like the first",
            fix: "drain the node and take the named GPU, NVSwitch or NIC out of service (RMA with the recorded boots as evidence); reseat first if the fault is a link (XID 79, AER Surprise Down)",
        },
        run: recurring_faults,
    }]
}

/// The current boot's faults, as history keys.
fn current_faults(ctx: &Context<'_>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(log) = ctx.kernel_events() else {
        return out;
    };
    let timeline = Timeline::new(log, ctx.clock());
    let current = log.boots.saturating_sub(1);
    let this_boot = |boot: u32, stamp: Option<&crate::facts::xid::Stamp>| {
        boot == current && timeline.when(stamp, boot) != When::EarlierBoot
    };
    for e in &log.xids {
        if this_boot(e.boot, e.stamp.as_ref())
            && crate::facts::xid::xid_info(e.xid).severity == XidSeverity::Fatal
        {
            let dev = e.pci_bus_id.as_deref().unwrap_or("unknown");
            out.insert(format!("xid {} {dev}", e.xid));
        }
    }
    for e in &log.sxids {
        if this_boot(e.boot, e.stamp.as_ref()) && e.is_fatal() {
            let dev = e.pci_bus_id.as_deref().unwrap_or("unknown");
            out.insert(format!("sxid {} {dev}", e.sxid));
        }
    }
    for e in &log.aer {
        if this_boot(e.boot, e.stamp.as_ref()) && e.severity == AerSeverity::Fatal {
            out.insert(format!("aer fatal {}", e.device));
        }
    }
    for e in &log.nic_events {
        let kind = match e.kind {
            NicEventKind::ProbeFailed => "nic probe",
            NicEventKind::HealthCompromised => "nic firmware",
            _ => continue,
        };
        if this_boot(e.boot, e.stamp.as_ref()) {
            out.insert(format!("{kind} {}", e.device));
        }
    }
    out
}

fn recurring_faults(ctx: &Context<'_>) -> Outcome {
    let Some((path, writable, loaded)) = ctx.source().history() else {
        return Outcome::skip(
            "no --state-dir: nothing is remembered across runs (a fault that returns after each reboot looks new each time)",
        );
    };
    let mut history = match loaded {
        Ok(h) => h,
        Err(why) => {
            return Outcome::error(format!("state not read: {why}"))
                .evidence(Evidence::new(path.as_str(), why).expected("a gpudoctor state file"))
                .hint("move the file aside (gpudoctor starts a new history where none exists); it is never overwritten while it cannot be read");
        }
    };
    let clock = ctx.clock();
    let Some(boot) = clock.boot_unix.filter(|b| b.is_finite()) else {
        return Outcome::error(
            "no boot time (/proc/uptime and the capture's time, or /proc/stat btime): boots cannot be told apart",
        )
        .evidence(Evidence::new(path.as_str(), "not updated"));
    };
    let faults = current_faults(ctx);
    let at = clock
        .now_unix
        .map(|s| {
            crate::time::rfc3339(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(s.max(0.0)),
            )
        })
        .unwrap_or_default();
    history.record(boot, &at, &faults);
    let boots = history.boots.len();
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut evidence = Vec::new();
    for f in &faults {
        let n = history.streak(boot, f);
        let line = format!("{f} in {n} consecutive boots");
        if n >= ESCALATE_AFTER {
            fails.push(format!("{line}: it survives reboots"));
            evidence.push(
                Evidence::new(path.as_str(), line)
                    .expected(format!("fewer than {ESCALATE_AFTER} consecutive boots")),
            );
        } else if n == 2 {
            warns.push(format!("{line} (back after the last reboot)"));
        }
    }
    let saved = if writable {
        ctx.source().save_history(&history).err()
    } else {
        None
    };
    let mut notes = vec![format!(
        "{} fault(s) this boot, {boots} boot(s) remembered in {path}{}",
        faults.len(),
        if writable { "" } else { " (read-only)" }
    )];
    if let Some(why) = &saved {
        notes.push(format!("the state could not be saved: {why}"));
        evidence.push(Evidence::new(path.as_str(), format!("not saved: {why}")));
    }
    let noted = notes.join("; ");
    if !fails.is_empty() {
        let mut text = fails;
        text.extend(warns);
        return Outcome::fail(format!("{}; {noted}", text.join("; ")))
            .evidence_all(evidence)
            .hint("drain the node and take the device named out of service: it came back after every reboot (reseat first if it is a link fault: XID 79, AER Surprise Down); the state file lists the boots")
            .action(Action::HardwareInspection);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{}; {noted}", warns.join("; ")))
            .evidence_all(evidence)
            .hint(
                "a fault back after one reboot: watch it; a third boot with it fails this check",
            );
    }
    if saved.is_some() {
        return Outcome::error(format!("no recurring fault; {noted}")).evidence_all(evidence);
    }
    Outcome::pass(format!(
        "no fault in {ESCALATE_AFTER} consecutive boots; {noted}"
    ))
}
