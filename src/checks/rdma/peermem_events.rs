//! rdma.peermem_events: what the GPUDirect RDMA peer memory client (nvidia-peermem, or the older
//! nv_mem) wrote in the kernel log (facts/xid/software.rs). Two messages, two verdicts, both
//! from NVIDIA's own answers:
//! - `detected invalid context, skipping further processing` is "harmless": the print of a
//!   mitigation for bug 4272659 (535.129.03 release notes), fixed in R560, after which "that
//!   diagnostic should never appear" (Mellanox/nv_peer_memory#120). Before R560 it is noted,
//!   never a finding (gpud stopped alerting on it for the same reason, gpud#288); on R560 or
//!   later it means the fix is not doing its job, and warns.
//! - `invalid page_table` / `invalid dma_mapping` is "a GPU kernel driver with a known problem"
//!   (fixed in R510, R470 after May 2021) or the memory-region clean-up bug of
//!   Mellanox/nv_peer_memory#53 "when those checks are not able to mitigate the issue": warn.
//!
//! Judged by time as XIDs are (checks/history.rs): a line before a reboot or before the nvidia
//! driver loaded again (peermem goes with it) is history.

use std::collections::BTreeMap;

use super::*;
use crate::checks::history::{Tally, Timeline, kernel_log_or_outcome, parenthesised, tally};
use crate::facts::xid::{MarkerKind, SoftwareEvent, SoftwareEventKind};

/// The first driver branch with the full fix for the `invalid context` print's cause
/// (R560TRD1, 560.35.03; nv_peer_memory#120).
const CONTEXT_FIXED_BRANCH: u32 = 560;

/// `535.129.03` → 535.
fn branch(version: &str) -> Option<u32> {
    version.split('.').next()?.trim().parse().ok()
}

pub(super) fn peermem_events(ctx: &Context<'_>) -> Outcome {
    let log = match kernel_log_or_outcome(ctx) {
        Ok(log) => log,
        Err(outcome) => return outcome,
    };
    let from = ctx.kernel_log_origin();
    let timeline = Timeline::new(log, ctx.clock());
    let mut groups: BTreeMap<(&str, SoftwareEventKind), Tally<'_, SoftwareEvent>> = BTreeMap::new();
    for e in log.software_events.iter().filter(|e| {
        matches!(
            e.kind,
            SoftwareEventKind::PeermemInvalidContext
                | SoftwareEventKind::PeermemInvalidMapping
                | SoftwareEventKind::PeermemLoadFailed
        )
    }) {
        let since = timeline.history(e.line_number, e.stamp.as_ref(), e.boot, |m| {
            m.kind == MarkerKind::DriverLoad
        });
        tally(&mut groups, (e.source.as_str(), e.kind), e, since);
    }
    let driver = match ctx.module_version() {
        Ok(Some((version, _))) => Some(version.as_str()),
        _ => None,
    };
    let fixed = driver.and_then(branch).map(|b| b >= CONTEXT_FIXED_BRANCH);
    let mut warns = Vec::new();
    let mut load_failed = Vec::new();
    let mut notes = Vec::new();
    let mut evidence = Vec::new();
    for ((module, kind), group) in &groups {
        let when = timeline.when(group.last.stamp.as_ref(), group.last.boot);
        let state = match &group.last_since {
            None => "live".to_string(),
            Some(since) => format!("history: {}", since.text()),
        };
        let what = match kind {
            SoftwareEventKind::PeermemInvalidContext => "`detected invalid context`",
            SoftwareEventKind::PeermemLoadFailed => {
                "failed to load (`Unknown symbol`, `disagrees about version of symbol`)"
            }
            _ => "`invalid page_table`/`invalid dma_mapping`",
        };
        let line = format!(
            "{module}: {what} {}, last {}, {state}",
            group.count_text(),
            when.text()
        );
        evidence.push(Evidence::quoting(from.as_str(), group.last.message.clone()));
        let live = group.live > 0;
        match (kind, fixed) {
            (SoftwareEventKind::PeermemLoadFailed, _) if live => load_failed.push(format!(
                "{line}: GPUDirect RDMA is off (NCCL stages inter-node traffic through host memory)"
            )),
            (SoftwareEventKind::PeermemInvalidMapping, _) if live => warns.push(format!(
                "{line}: a known peer-memory bug of the driver (fixed in R510) or of memory-region clean-up"
            )),
            (SoftwareEventKind::PeermemInvalidContext, Some(true)) if live => warns.push(format!(
                "{line}: NVIDIA says driver {} (R{CONTEXT_FIXED_BRANCH} or later) should never print it",
                driver.unwrap_or("?")
            )),
            (SoftwareEventKind::PeermemInvalidContext, Some(false)) if live => notes.push(format!(
                "{line}: harmless on driver {} (NVIDIA: a mitigation's print, gone from R{CONTEXT_FIXED_BRANCH})",
                driver.unwrap_or("?")
            )),
            (SoftwareEventKind::PeermemInvalidContext, None) if live => notes.push(format!(
                "{line}: harmless before driver R{CONTEXT_FIXED_BRANCH} (the driver's version was not read)"
            )),
            _ => notes.push(line),
        }
    }
    let mut noted = notes;
    noted.extend(timeline.notes());
    if log.software_dropped > 0 {
        noted.push(format!(
            "{} more peer-memory or crash line(s) past the first {} not counted",
            log.software_dropped,
            crate::facts::xid::MAX_SOFTWARE_EVENTS
        ));
    }
    let noted = parenthesised(&noted);
    if !load_failed.is_empty() {
        load_failed.extend(warns);
        return Outcome::warn(format!("{}{noted}", load_failed.join("; ")))
            .evidence_all(evidence)
            .hint("the peer memory module was built for another kernel, ib_core (MLNX_OFED/DOCA or inbox) or NVIDIA driver than the ones loaded: rebuild or reinstall it against them (the GPU Operator's driver container with the matching OFED, `dkms autoinstall`, or the nvidia-peermem of the installed driver), then `modprobe nvidia-peermem` and check `lsmod | grep peermem`")
            .action(Action::FixConfig);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{}{noted}", warns.join("; ")))
            .evidence_all(evidence)
            .hint("upgrade the GPU driver to a current branch (R560 or later) and with it nvidia-peermem; or move GPUDirect RDMA to dma-buf (open kernel modules, kernel ≥ 5.12, recent MLNX_OFED/DOCA), which needs no peermem at all. If the lines come with CUDA errors or driver crashes in the jobs, report them to NVIDIA with `nvidia-bug-report.sh`")
            .action(Action::FixConfig);
    }
    Outcome::pass(format!(
        "no nvidia-peermem error to act on in the kernel log ({} line(s) read){noted}",
        log.lines
    ))
    .evidence_all(evidence)
    .log_only()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_driver_branch() {
        assert_eq!(branch("535.129.03"), Some(535));
        assert_eq!(branch("560.35.03"), Some(560));
        assert_eq!(branch("garbage"), None);
        assert_eq!(branch(""), None);
    }
}
