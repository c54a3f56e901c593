//! What a fleet's reports say together:
//! - a nodes × layers table of verdicts;
//! - each check that does not pass somewhere, with the nodes, as **fleet-wide** when it fails
//!   (or warns, or errors) on more than half of the nodes that ran it and on a tenth of the fleet
//!   at least — one cause for all, such as a driver rollout — or as **node faults** otherwise;
//! - **outliers**: within each profile, on every measured figure (NCCL peak bus bandwidth, port
//!   rates, XID counts, any figure a newer version adds), the nodes whose value lies far from
//!   the others by the modified z-score of Iglewicz and Hoaglin (1993): `0.6745 (x − median) /
//!   MAD`, an outlier beyond 3.5. Median and MAD (median absolute deviation) are not dragged by
//!   the outliers themselves, as mean and standard deviation are; a node 30% below its siblings
//!   stands out though it passes every absolute threshold.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use std::time::{Duration, SystemTime};

use super::triage::{self, Counts, DEFAULT_STALE, NodeTriage};
use super::{Loaded, Skipped, Unreachable};
use crate::diff::compare::{RATE_TOLERANCE, figure_key, show_value};
use crate::report::{FigureName, Layer, Status};
use crate::saved;

/// The modified z-score beyond which a value is an outlier (Iglewicz and Hoaglin, "How to Detect
/// and Handle Outliers", ASQC 1993, §3.2: |M| > 3.5).
pub const OUTLIER_Z: f64 = 3.5;
/// `0.6745` = Φ⁻¹(0.75): makes the MAD of normal data comparable to its standard deviation.
const MAD_TO_Z: f64 = 0.6745;
/// Fewest nodes of a profile with a figure before its median means anything.
pub const MIN_GROUP: usize = 3;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    pub node: String,
    pub file: String,
    pub profile: Option<String>,
    /// Layer id → status, for every column (`absent` when the report has no such layer).
    pub layers: BTreeMap<String, String>,
    pub exit_code: i32,
    pub gpudoctor_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated_at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// On more than half of the nodes that ran the check.
    FleetWide,
    /// On fewer.
    Node,
}

/// A check with one status on some nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub code: String,
    pub layer: String,
    /// `fail`, `warn` or `error`.
    pub status: String,
    pub scope: Scope,
    pub nodes: Vec<String>,
    /// Nodes that ran the check (its layer was evaluated and it did not skip).
    pub evaluated: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlier {
    pub profile: String,
    /// `name{labels}`, or `xid_events` (every XID record of the node).
    pub figure: String,
    pub node: String,
    pub value: f64,
    pub median: f64,
    pub mad: f64,
    /// The modified z-score; `None` when the MAD is 0 (more than half the nodes agree exactly,
    /// and any other value stands out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub z: Option<f64>,
    /// `low` or `high`.
    pub direction: &'static str,
    /// Nodes of the profile with this figure.
    pub group: usize,
    /// Value and median as read (`401 GB/s`).
    pub shown: String,
    pub median_shown: String,
    /// The profile's floor the value is below while the median is not (see [`under_floor`]);
    /// absent when the value is an outlier by its distance from the median alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_shown: Option<String>,
}

impl Outlier {
    /// `, under the profile's floor of 380 GB/s` where that made the node an outlier.
    pub fn under_floor_text(&self) -> String {
        self.floor_shown
            .as_ref()
            .map(|f| format!(", under the profile's floor of {f}"))
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub reports: usize,
    pub skipped: Vec<Skipped>,
    /// The table's columns: the layer ids in walk order, then any a newer version added.
    pub columns: Vec<String>,
    pub nodes: Vec<NodeRow>,
    /// Fleet-wide first, then node faults; fail before warn before error.
    pub checks: Vec<Spread>,
    pub outliers: Vec<Outlier>,
    /// When the summary was made (ages are counted to it), RFC 3339 UTC.
    pub at: String,
    /// A report older than this many seconds is stale.
    pub stale_after_seconds: u64,
    pub counts: Counts,
    /// Every node, worst first, with its cause, action and report age (`triage.rs`).
    pub triage: Vec<NodeTriage>,
    /// Nodes that wrote lately and have nothing now (`--prometheus` only).
    pub unreachable: Vec<Unreachable>,
    /// 1 when a node's report failed (a check failed, or a warning under `--strict`: the verdict
    /// its own exit code gave, counted in `counts.failing`) or a node is an outlier, else 0.
    pub exit_code: i32,
}

/// [`summarise_at`] now, with the default stale threshold.
pub fn summarise(loaded: &Loaded) -> Summary {
    summarise_at(loaded, SystemTime::now(), DEFAULT_STALE)
}

/// The fleet's summary as of `now`; reports older than `stale_after` are stale.
pub fn summarise_at(loaded: &Loaded, now: SystemTime, stale_after: Duration) -> Summary {
    let mut columns: Vec<String> = Layer::ALL.iter().map(|l| l.id().to_string()).collect();
    for n in &loaded.nodes {
        for l in &n.report.layers {
            if !columns.contains(&l.id) {
                columns.push(l.id.clone());
            }
        }
    }
    // Rows, spreads and outliers read the reports each on their own: side by side.
    let (nodes, checks, outliers) = std::thread::scope(|scope| {
        let rows = scope.spawn(|| rows(loaded, &columns));
        let checks = scope.spawn(|| spreads(loaded));
        let outliers = outliers(loaded);
        (joined(rows), joined(checks), outliers)
    });
    let failing = checks.iter().any(|c| c.status == Status::Fail.as_str());
    let wide: BTreeSet<&str> = checks
        .iter()
        .filter(|c| c.scope == Scope::FleetWide)
        .map(|c| c.code.as_str())
        .collect();
    let triage = triage::triage(&loaded.nodes, now, stale_after, &|code| wide.contains(code));
    let counts = triage::counts(&triage, loaded.unreachable.len());
    // A node is failing by its own verdict: a failed check, or its report's exit code 1 — what
    // `check --strict` gives a warning (docs/report.md, "Exit code"), which the node's NPD
    // condition reports as a problem too. The exit code says what the count says.
    let failing = failing || counts.failing > 0;
    Summary {
        at: crate::time::rfc3339(now),
        stale_after_seconds: stale_after.as_secs(),
        counts,
        triage,
        unreachable: loaded.unreachable.clone(),
        reports: loaded.nodes.len(),
        skipped: loaded.skipped.clone(),
        columns,
        nodes,
        exit_code: i32::from(failing || !outliers.is_empty()),
        checks,
        outliers,
    }
}

/// A scoped thread's result; its panic goes on as the caller's, as if it had run here.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Each node's row of the nodes × layers table.
fn rows(loaded: &Loaded, columns: &[String]) -> Vec<NodeRow> {
    loaded
        .nodes
        .iter()
        .map(|n| NodeRow {
            node: n.name.clone(),
            file: n.file.clone(),
            profile: n.report.profile.clone(),
            layers: columns
                .iter()
                .map(|c| {
                    let status = n
                        .report
                        .layer(c)
                        .map(|l| l.status.clone())
                        .unwrap_or_else(|| "absent".into());
                    (c.clone(), status)
                })
                .collect(),
            exit_code: n.report.exit_code,
            gpudoctor_version: n.report.gpudoctor_version.clone(),
            generated_at: n.report.generated_at.clone(),
        })
        .collect()
}

/// One check across the fleet: its layer, how many nodes ran it, and the nodes per status.
struct Tally<'a> {
    layer: &'a str,
    evaluated: usize,
    by_status: BTreeMap<&'a str, Vec<&'a str>>,
}

fn spreads(loaded: &Loaded) -> Vec<Spread> {
    let mut by_code: BTreeMap<&str, Tally<'_>> = BTreeMap::new();
    let passes_counted = loaded.passes.is_some();
    for n in &loaded.nodes {
        for l in n.report.layers.iter().filter(|l| l.evaluated()) {
            // A consequence is counted under its cause, not as a fault of its own.
            for c in l.checks.iter().filter(|c| c.explained_by.is_none()) {
                if passes_counted && c.status == Status::Pass.as_str() {
                    continue;
                }
                let tally = by_code.entry(c.code.as_str()).or_insert(Tally {
                    layer: l.id.as_str(),
                    evaluated: 0,
                    by_status: BTreeMap::new(),
                });
                if c.status != Status::Skip.as_str() && c.status != Status::NotRun.as_str() {
                    tally.evaluated += 1;
                }
                // Findings, and statuses a newer version wrote that this one cannot rank.
                if saved::status(&c.status).is_none_or(Status::is_finding) {
                    tally
                        .by_status
                        .entry(c.status.as_str())
                        .or_default()
                        .push(&n.name);
                }
            }
        }
    }
    if let Some(passes) = &loaded.passes {
        for (code, tally) in &mut by_code {
            tally.evaluated += passes.get(*code).copied().unwrap_or(0);
        }
    }
    let mut out = Vec::new();
    let fleet = loaded.nodes.len();
    for (code, tally) in by_code {
        for (status, nodes) in tally.by_status {
            // Most of the nodes that ran it, and a tenth of the fleet at least: four failures
            // among the four nodes of five hundred that recorded a kernel log are node faults.
            let scope = if nodes.len() >= 2
                && nodes.len() * 2 > tally.evaluated
                && nodes.len() * 10 >= fleet
            {
                Scope::FleetWide
            } else {
                Scope::Node
            };
            out.push(Spread {
                code: code.to_string(),
                layer: tally.layer.to_string(),
                status: status.to_string(),
                scope,
                nodes: nodes.iter().map(|s| s.to_string()).collect(),
                evaluated: tally.evaluated,
            });
        }
    }
    out.sort_by_cached_key(|s| {
        let severity = saved::status(&s.status).map_or(0, |x| x.severity());
        (
            s.scope,
            std::cmp::Reverse(severity),
            s.layer_rank(),
            s.code.clone(),
        )
    });
    out
}

impl Spread {
    fn layer_rank(&self) -> usize {
        Layer::ALL
            .iter()
            .position(|l| l.id() == self.layer)
            .unwrap_or(Layer::ALL.len())
    }
}

/// Each node's figures: `figure key → value`. XID records are summed per node (`xid_events`):
/// which GPU or XID differs between nodes, the count is what stands out. A node whose XID check
/// ran and found none counts 0; one whose check did not run has no value.
/// One node's figure: its name, value, and the profile's floor the node judged it against.
type NodeFigure<'a> = (&'a str, f64, Option<f64>);

fn node_figures(loaded: &Loaded) -> Vec<BTreeMap<String, NodeFigure<'_>>> {
    let xid = FigureName::XidEvents.id();
    let xid_checks: BTreeSet<&str> = loaded
        .nodes
        .iter()
        .flat_map(|n| n.report.layers.iter().flat_map(|l| &l.checks))
        .filter(|c| c.figures.iter().any(|f| f.name == xid))
        .map(|c| c.code.as_str())
        .collect();
    // Each node's figures are its own: spread over the CPUs (10,000 nodes are a million keys).
    super::parallel_map(
        &loaded.nodes,
        super::threads(),
        |_| BTreeMap::new(),
        |n| {
            let mut m: BTreeMap<String, NodeFigure<'_>> = BTreeMap::new();
            for l in n.report.layers.iter().filter(|l| l.evaluated()) {
                for c in &l.checks {
                    let ran = !matches!(
                        saved::status(&c.status),
                        Some(Status::Skip | Status::NotRun | Status::Error)
                    );
                    if xid_checks.contains(c.code.as_str()) && ran {
                        m.entry(xid.to_string()).or_insert((xid, 0.0, None));
                    }
                    for f in &c.figures {
                        if f.name == xid {
                            m.entry(xid.to_string()).or_insert((xid, 0.0, None)).1 += f.value;
                        } else {
                            m.entry(figure_key(&f.name, &f.labels)).or_insert((
                                f.name.as_str(),
                                f.value,
                                f.floor,
                            ));
                        }
                    }
                }
            }
            m
        },
    )
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Median and MAD of `values`.
pub fn median_mad(values: &[f64]) -> (f64, f64) {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = median(&v);
    let mut dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    dev.sort_by(f64::total_cmp);
    (m, median(&dev))
}

/// Is `x` an outlier among values with this median and MAD? Rates also need to be more than
/// [`RATE_TOLERANCE`] from the median: when nearly every node measures the same, the MAD is tiny
/// and a 1% wobble would otherwise stand out. Returns the modified z-score (`None` if MAD is 0).
pub fn judge(name: &str, x: f64, median: f64, mad: f64) -> Option<Option<f64>> {
    let off = (x - median).abs();
    if off == 0.0 {
        return None;
    }
    if name.ends_with("_per_second") && off <= RATE_TOLERANCE * median.abs() {
        return None;
    }
    if mad == 0.0 {
        return Some(None);
    }
    let z = MAD_TO_Z * (x - median) / mad;
    (z.abs() > OUTLIER_Z).then_some(Some(z))
}

/// Is a value below its floor while the median of its siblings is not? Then the node is an
/// outlier however close to the median it lies: the profile says what the figure must reach, and
/// the siblings show that the platform reaches it (a node 4 % under a median just over the floor
/// is within [`RATE_TOLERANCE`] and a small z, yet it is the one node that misses). Where the
/// median is under the floor as well, the whole group misses: the checks say so on every node.
pub fn under_floor(x: f64, median: f64, floor: Option<f64>) -> bool {
    floor.is_some_and(|f| x < f && median >= f)
}

fn outliers(loaded: &Loaded) -> Vec<Outlier> {
    let figures = node_figures(loaded);
    // profile → figure key → (figure name, [(node index, value, floor)]).
    type Values<'a> = (&'a str, Vec<(usize, f64, Option<f64>)>);
    let mut groups: BTreeMap<String, BTreeMap<&str, Values<'_>>> = BTreeMap::new();
    for (i, n) in loaded.nodes.iter().enumerate() {
        let profile = n.report.profile.clone().unwrap_or_else(|| "none".into());
        let group = groups.entry(profile).or_default();
        for (key, (name, value, floor)) in &figures[i] {
            group
                .entry(key.as_str())
                .or_insert((*name, Vec::new()))
                .1
                .push((i, *value, *floor));
        }
    }
    let mut out = Vec::new();
    for (profile, keys) in &groups {
        for (key, (name, values)) in keys {
            if values.len() < MIN_GROUP {
                continue;
            }
            let just: Vec<f64> = values.iter().map(|(_, v, _)| *v).collect();
            let (m, mad) = median_mad(&just);
            for (i, x, floor) in values {
                let below = under_floor(*x, m, *floor);
                let z = match judge(name, *x, m, mad) {
                    Some(z) => z,
                    None if below => (mad > 0.0).then(|| MAD_TO_Z * (x - m) / mad),
                    None => continue,
                };
                out.push(Outlier {
                    profile: profile.clone(),
                    figure: key.to_string(),
                    node: loaded.nodes[*i].name.clone(),
                    value: *x,
                    median: m,
                    mad,
                    z,
                    direction: if *x < m { "low" } else { "high" },
                    group: values.len(),
                    shown: show_value(name, *x),
                    median_shown: show_value(name, m),
                    floor: floor.filter(|_| below),
                    floor_shown: floor.filter(|_| below).map(|f| show_value(name, f)),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::NodeReport;
    use crate::saved::{SavedCheck, SavedLayer, SavedReport};

    fn node(name: &str, checks: &[(&str, &str)]) -> NodeReport {
        NodeReport {
            name: name.into(),
            file: format!("{name}.json"),
            modified: None,
            report: SavedReport {
                schema_version: 2,
                layers: vec![SavedLayer {
                    id: "driver".into(),
                    status: "fail".into(),
                    checks: checks
                        .iter()
                        .map(|(code, status)| SavedCheck {
                            code: code.to_string(),
                            status: status.to_string(),
                            ..SavedCheck::default()
                        })
                        .collect(),
                    ..SavedLayer::default()
                }],
                ..SavedReport::default()
            },
        }
    }

    #[test]
    fn passes_counted_apart_weigh_as_listed_ones() {
        // Two nodes fail a check that eight others passed: a node fault, whether the passes
        // are listed in reports or counted by Prometheus.
        let failing = [("driver.nvml_init", "fail"), ("driver.xid_events", "pass")];
        let mut listed = Loaded::default();
        for i in 0..10 {
            let status = if i < 2 { "fail" } else { "pass" };
            listed.nodes.push(node(
                &format!("n{i}"),
                &[("driver.nvml_init", status), ("driver.xid_events", "pass")],
            ));
        }
        let counted = Loaded {
            nodes: vec![node("n0", &failing), node("n1", &failing)],
            // A pass a node lists anyway (the XID check) is in the count, not counted twice.
            passes: Some(
                [
                    ("driver.nvml_init".to_string(), 8),
                    ("driver.xid_events".to_string(), 10),
                ]
                .into(),
            ),
            ..Loaded::default()
        };
        for loaded in [&listed, &counted] {
            let checks = spreads(loaded);
            assert_eq!(checks.len(), 1, "{checks:?}");
            assert_eq!(checks[0].evaluated, 10);
            assert_eq!(checks[0].nodes, ["n0", "n1"]);
            assert_eq!(checks[0].scope, Scope::Node);
        }
    }

    #[test]
    fn median_and_mad_resist_the_outlier() {
        let (m, mad) = median_mad(&[480.0, 482.0, 481.0, 483.0, 350.0]);
        assert_eq!(m, 481.0);
        assert_eq!(mad, 1.0);
        // 350 is 131 MADs off: z = 0.6745 × -131.
        let z = judge("x_bytes_per_second", 350.0, m, mad).unwrap().unwrap();
        assert!((z - -88.36).abs() < 0.01, "{z}");
        assert_eq!(judge("x_bytes_per_second", 479.0, m, mad), None);
        let (m, mad) = median_mad(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((m, mad), (2.5, 1.0));
    }

    #[test]
    fn with_most_nodes_equal_any_other_value_stands_out_beyond_the_tolerance() {
        let (m, mad) = median_mad(&[5e10, 5e10, 5e10, 2.5e10]);
        assert_eq!(mad, 0.0);
        assert_eq!(
            judge("rdma_port_rate_bytes_per_second", 2.5e10, m, mad),
            Some(None)
        );
        // 2% off a rate is within the tolerance even with a zero MAD.
        assert_eq!(
            judge("rdma_port_rate_bytes_per_second", 4.9e10, m, mad),
            None
        );
        // Counts have no tolerance: one XID where the others have none.
        let (m, mad) = median_mad(&[0.0, 0.0, 0.0, 1.0]);
        assert_eq!(judge("xid_events", 1.0, m, mad), Some(None));
    }

    /// Issue 46: a node 4 % below siblings whose median is just over the profile's floor, itself
    /// under it, is within the 5 % tolerance and a small z, yet the one node that misses: an
    /// outlier, with the floor said. Where the whole group is under the floor, nobody is.
    #[test]
    fn a_node_under_the_floor_its_siblings_meet_is_an_outlier_however_close() {
        let fleet = |values: &[f64]| {
            let mut loaded = Loaded::default();
            for (i, v) in values.iter().enumerate() {
                let mut n = node(&format!("n{i}"), &[("nccl.bus_bandwidth", "pass")]);
                n.report.profile = Some("hgx-h100".into());
                n.report.layers[0].checks[0].figures = vec![crate::saved::SavedFigure {
                    name: "nccl_busbw_peak_bytes_per_second".into(),
                    value: *v,
                    labels: [("test".to_string(), "all_reduce".to_string())].into(),
                    floor: Some(450e9),
                }];
                loaded.nodes.push(n);
            }
            outliers(&loaded)
        };
        // Siblings at 460-462 GB/s, n3 at 443: 4 % below, under the 450 floor.
        let out = fleet(&[461e9, 460e9, 462e9, 443e9, 461e9, 460e9]);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].node, "n3");
        assert_eq!(out[0].direction, "low");
        assert_eq!(out[0].floor, Some(450e9));
        assert!(
            out[0]
                .floor_shown
                .as_deref()
                .unwrap_or_default()
                .contains("450")
        );
        // Without the floor the same node is within the tolerance: not an outlier.
        assert!(judge("nccl_busbw_peak_bytes_per_second", 443e9, 460.5e9, 0.5e9).is_none());
        assert!(!under_floor(443e9, 460.5e9, None));
        // Every node under the floor: no outlier by it (the checks fail them all).
        assert!(fleet(&[440e9, 441e9, 439e9, 440e9]).is_empty());
        // Above the floor and close to the median: nothing.
        assert!(fleet(&[461e9, 460e9, 462e9, 455e9, 461e9]).is_empty());
    }
}
