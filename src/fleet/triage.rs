//! The 2 a.m. view of a fleet: how many nodes are healthy, failing, stale or unreachable, and
//! each failing node's cause with its action and the age of its report — what an on-call engineer
//! reads first, before the nodes × layers table (`fleet --all`).
//!
//! A node's **cause** is its report's first failure (the root cause, its consequences folded
//! under it by `explained_by`, as `check` prints them); a node that failed nothing but warned or
//! could not judge has its worst finding that follows from no other. A report is **stale** when
//! it is older than the threshold (`--stale`, default [`DEFAULT_STALE`]: three of the
//! DaemonSet's five-minute runs, deploy/base/daemonset.yaml `GPUDOCTOR_INTERVAL`, the same age the
//! NPD plugin stops trusting a saved report at): the node's gpudoctor stopped running, and its
//! verdict may no longer hold. A report dated in the future beyond `saved::CLOCK_SKEW` is stale
//! too: its node's clock is wrong, and how old it really is nobody knows.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::NodeReport;
use crate::report::{Layer, Status};
use crate::saved::{self, SavedReport};

/// A report older than this is stale unless `--stale` says otherwise.
pub const DEFAULT_STALE: Duration = Duration::from_secs(15 * 60);

/// What a node's report says, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A layer failed (exit 1, or a report whose exit code says worse).
    Failing,
    /// Nothing failed, but a check could not judge (exit 3).
    Inconclusive,
    /// Nothing failed; a check warned.
    Warning,
    Healthy,
}

impl Verdict {
    pub fn of(report: &SavedReport) -> Verdict {
        let worst = report
            .layers
            .iter()
            .flat_map(|l| &l.checks)
            .filter_map(|c| saved::status(&c.status))
            .map(Status::severity)
            .max()
            .unwrap_or(0);
        if report.first_failure.is_some()
            || report.exit_code == 1
            || worst >= Status::Fail.severity()
        {
            Verdict::Failing
        } else if report.exit_code == 3 || worst >= Status::Error.severity() {
            Verdict::Inconclusive
        } else if worst >= Status::Warn.severity() {
            Verdict::Warning
        } else {
            Verdict::Healthy
        }
    }
}

/// The finding a node's verdict comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Cause {
    pub layer: String,
    pub code: String,
    pub status: String,
    /// What it asks for (`reboot_node`); empty when the report does not say (schema 1).
    pub action: String,
    /// Its summary; empty where the source has none (Prometheus series carry no text).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub summary: String,
}

/// The cause of `report`'s verdict: its first failure, else its worst finding that follows from
/// no other (ties: the earlier layer, then the code).
pub fn cause_of(report: &SavedReport) -> Option<Cause> {
    let checks = || {
        report
            .layers
            .iter()
            .flat_map(|l| l.checks.iter().map(move |c| (l.id.as_str(), c)))
    };
    if let Some(first) = &report.first_failure {
        let check = checks().find(|(_, c)| c.code == first.code).map(|(_, c)| c);
        return Some(Cause {
            layer: first.layer.clone(),
            code: first.code.clone(),
            status: check.map_or_else(|| "fail".into(), |c| c.status.clone()),
            action: first
                .action
                .clone()
                .or_else(|| check.and_then(|c| c.action.clone()))
                .unwrap_or_default(),
            summary: first.summary.clone(),
        });
    }
    worst_root_finding(report, &|_| false)
}

/// The worst finding of `report` that follows from no other and is not `left_out` (ties: the
/// earlier layer, then the code).
fn worst_root_finding(report: &SavedReport, left_out: &dyn Fn(&str) -> bool) -> Option<Cause> {
    report
        .layers
        .iter()
        .flat_map(|l| l.checks.iter().map(move |c| (l.id.as_str(), c)))
        .filter(|(_, c)| c.explained_by.is_none() && !left_out(&c.code))
        .filter_map(|(layer, c)| {
            let status = saved::status(&c.status)?;
            status.is_finding().then_some((status.severity(), layer, c))
        })
        .max_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| layer_rank(b.1).cmp(&layer_rank(a.1)))
                .then_with(|| b.2.code.cmp(&a.2.code))
        })
        .map(|(_, layer, c)| Cause {
            layer: layer.to_string(),
            code: c.code.clone(),
            status: c.status.clone(),
            action: c.action.clone().unwrap_or_default(),
            summary: c.summary.clone(),
        })
}

pub fn layer_rank(id: &str) -> usize {
    Layer::ALL
        .iter()
        .position(|l| l.id() == id)
        .unwrap_or(Layer::ALL.len())
}

/// How old a report is at `now`, by the time it says it was made (`saved::Age`: a time more
/// than the clock skew ahead of `now` is no age at all).
pub fn age(report: &SavedReport, now: SystemTime) -> saved::Age {
    saved::Age::of(report.generated_at.as_deref(), now)
}

/// One node in the first screen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeTriage {
    pub node: String,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    /// Seconds since the report was made; absent when it says no time, or a time in the future.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<u64>,
    /// Seconds the report is dated ahead of the summary's time, beyond the clock skew allowed
    /// (`saved::CLOCK_SKEW`): its node's clock is wrong, its age unknown, and it is stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ahead_seconds: Option<u64>,
    /// Older than the threshold, or dated in the future.
    pub stale: bool,
    /// Its cause fails on most nodes: counted in a fleet-wide fault, not listed alone.
    pub fleet_wide: bool,
    /// When its cause is fleet-wide: its worst finding of its own beside it, if any (a node
    /// with the fleet's bad rollout and a slow NCCL run of its own is listed for the latter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_fault: Option<Cause>,
}

/// The counts the first line gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub healthy: usize,
    pub warning: usize,
    pub failing: usize,
    pub inconclusive: usize,
    pub stale: usize,
    pub unreachable: usize,
}

/// Every node's triage, worst first: failing before inconclusive before warning before
/// healthy, then by the cause's layer and code, then by name.
/// Within a verdict: by the cause's layer in walk order, then its code.
fn sort_key(t: &NodeTriage) -> Option<(usize, &str)> {
    t.cause
        .as_ref()
        .map(|c| (layer_rank(&c.layer), c.code.as_str()))
}

pub fn triage(
    nodes: &[NodeReport],
    now: SystemTime,
    stale_after: Duration,
    fleet_wide: &(dyn Fn(&str) -> bool + Sync),
) -> Vec<NodeTriage> {
    let mut out: Vec<NodeTriage> = super::parallel_map(
        nodes,
        super::threads(),
        // A node whose judging crashed could not be judged.
        |n| NodeTriage {
            node: n.name.clone(),
            verdict: Verdict::Inconclusive,
            fleet_wide: false,
            own_fault: None,
            cause: None,
            age_seconds: None,
            ahead_seconds: None,
            stale: false,
        },
        |n| {
            let cause = cause_of(&n.report);
            let age = age(&n.report, now);
            let wide = cause.as_ref().is_some_and(|c| fleet_wide(&c.code));
            NodeTriage {
                node: n.name.clone(),
                verdict: Verdict::of(&n.report),
                fleet_wide: wide,
                own_fault: if wide {
                    worst_root_finding(&n.report, fleet_wide)
                } else {
                    None
                },
                cause,
                age_seconds: match age {
                    saved::Age::Old(a) => Some(a.as_secs()),
                    _ => None,
                },
                ahead_seconds: match age {
                    saved::Age::Ahead(a) => Some(a.as_secs()),
                    _ => None,
                },
                // A report of no time is not called stale: fleet shows "time unknown".
                stale: age.stale(stale_after, false).is_some(),
            }
        },
    );
    out.sort_by(|a, b| {
        a.verdict
            .cmp(&b.verdict)
            .then_with(|| sort_key(a).cmp(&sort_key(b)))
            .then_with(|| a.node.cmp(&b.node))
    });
    out
}

pub fn counts(nodes: &[NodeTriage], unreachable: usize) -> Counts {
    let mut c = Counts {
        unreachable,
        ..Counts::default()
    };
    for n in nodes {
        match n.verdict {
            Verdict::Healthy => c.healthy += 1,
            Verdict::Warning => c.warning += 1,
            Verdict::Failing => c.failing += 1,
            Verdict::Inconclusive => c.inconclusive += 1,
        }
        c.stale += usize::from(n.stale);
    }
    c
}

/// Nodes that need a look, grouped by cause (status, code, action) in triage order: each group
/// one line of the first screen.
pub fn by_cause(nodes: &[NodeTriage]) -> Vec<(Cause, Vec<&NodeTriage>)> {
    let mut groups: Vec<(Cause, Vec<&NodeTriage>)> = Vec::new();
    let mut index: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.verdict != Verdict::Healthy) {
        let listed = if n.fleet_wide { &n.own_fault } else { &n.cause };
        let Some(cause) = listed else { continue };
        let key = (
            cause.status.clone(),
            cause.code.clone(),
            cause.action.clone(),
        );
        match index.get(&key) {
            Some(&i) => groups[i].1.push(n),
            None => {
                index.insert(key, groups.len());
                let mut shown = cause.clone();
                shown.summary.clear();
                groups.push((shown, vec![n]));
            }
        }
    }
    groups
}
