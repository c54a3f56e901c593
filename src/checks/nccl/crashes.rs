//! nccl.kernel_crashes: a process the kernel killed while it ran NCCL's code (`comm[pid]:
//! segfault at ... in libnccl.so.2[...]`, facts/xid/software.rs). The one NCCL check that needs
//! no benchmark and no log of the job: the kernel wrote the crash down whoever ran it. gpud and
//! AWS's EKS node monitoring agent read the same line ("repeated messages may indicate GPU
//! communication issues, which may happen due to fabric manager issues", gpud).
//!
//! A crash in this boot warns, never fails: a segfault is a fault of the process (an NCCL bug,
//! an NCCL and net-plugin pair that do not match, a corrupted buffer) at least as often as of the
//! node, so it tells where to look, not that the node is broken. A crash before the last reboot
//! is history and only noted. With no NCCL run or log to judge, a quiet log is a skip that says
//! so, so the layer does not read "ok" for a question nobody asked.

use std::collections::BTreeMap;

use super::{Context, Outcome};
use crate::answers::nccl::NcclProbe;
use crate::checks::history::{Tally, Timeline, kernel_log_or_outcome, parenthesised, tally};
use crate::facts::xid::{SoftwareEvent, SoftwareEventKind};
use crate::report::{Action, Evidence};

pub(super) fn kernel_crashes(ctx: &Context<'_>) -> Outcome {
    let log = match kernel_log_or_outcome(ctx) {
        Ok(log) => log,
        Err(outcome) => return outcome,
    };
    let from = ctx.kernel_log_origin();
    let timeline = Timeline::new(log, ctx.clock());
    // Per library: a crash is live until the node reboots (nothing else clears a process crash).
    let mut groups: BTreeMap<&str, Tally<'_, SoftwareEvent>> = BTreeMap::new();
    for e in log
        .software_events
        .iter()
        .filter(|e| e.kind == SoftwareEventKind::NcclCrash)
    {
        let since = timeline.history(e.line_number, e.stamp.as_ref(), e.boot, |_| false);
        tally(&mut groups, e.source.as_str(), e, since);
    }
    let mut live = Vec::new();
    let mut notes = Vec::new();
    let mut evidence = Vec::new();
    for (library, group) in &groups {
        let last = group.last_live.unwrap_or(group.last);
        let process = match (&last.process, last.pid) {
            (Some(p), Some(pid)) => format!("{p}[{pid}]"),
            (Some(p), None) => p.clone(),
            _ => "a process".to_string(),
        };
        let when = timeline.when(last.stamp.as_ref(), last.boot).text();
        evidence.push(Evidence::quoting(from.as_str(), last.message.clone()));
        if group.live > 0 {
            live.push(format!(
                "{} crash(es) inside {library} this boot, the last {process} {when}",
                group.live
            ));
        }
        if group.history > 0 {
            notes.push(format!(
                "{} crash(es) inside {library} before the last reboot",
                group.history
            ));
        }
    }
    notes.extend(timeline.notes());
    let noted = parenthesised(&notes);
    if !live.is_empty() {
        return Outcome::warn(format!("{}{noted}", live.join("; ")))
            .evidence_all(evidence)
            .hint("the job died inside NCCL: read its NCCL_DEBUG=INFO log for the last WARN before the crash (`gpudoctor check --nccl-log FILE`), make sure every node runs the same NCCL and net plugin (libnccl-net.so) versions, check the fabric manager on NVSwitch nodes (`gpudoctor check --only nvlink`), then run `gpudoctor check --nccl` on this node; crashes that repeat on one node and not the others point at the node")
            .action(Action::CheckWorkload);
    }
    let summary = format!(
        "no process crashed inside NCCL this boot ({} kernel-log line(s) read){noted}",
        log.lines
    );
    // Without a benchmark or a log to judge, the layer's question (do collectives run at the
    // expected speed?) is unanswered: a quiet kernel log must not make the layer read "ok".
    if matches!(ctx.nccl(), NcclProbe::NotRequested { .. }) {
        return Outcome::skip(summary).evidence_all(evidence);
    }
    Outcome::pass(summary).evidence_all(evidence)
}
