//! Bandwidth: `nccl.bus_bandwidth` judges the peak busbw at large sizes against the profile and
//! reports every table's sweep figures whatever the verdict (issue 15: figures always);
//! `nccl.bandwidth_collapse` finds a sweep whose larger sizes fall under half its own peak.

use super::transports::{nvls_used, rdma_expected};
use super::{
    LARGE_BYTES, MULTI_NODE_FAIL_SHARE, NIC_EFFICIENCY, each_run, judging_profile, naming_nodes,
    not_tests_log, row_evidence, table_collective,
};
use crate::answers::nccl::NcclRun;
use crate::answers::nccl::{Point, Sweep, format_size};
use crate::checks::{Context, Outcome};
use crate::profile::Profile;
use crate::report::{Action, Evidence, Figure, FigureName};

/// A sweep collapses when every size after its peak, to the largest, stays under this share of
/// the peak (see the `nccl.bandwidth_collapse` explanation for why half).
pub const COLLAPSE_SHARE: f64 = 0.5;
/// ... over at least this many sizes: one low row at the end can be a straggler, two in a row
/// are the link.
pub const COLLAPSE_MIN_SIZES: usize = 2;

/// Thresholds for this run's shape: (warn, fail, label).
fn thresholds(profile: &Profile, run: &NcclRun) -> Result<(f64, f64, String), String> {
    let log = &run.log;
    if profile.provisional {
        return Err(format!(
            "profile {} is provisional: no bandwidth expectation",
            profile.name
        ));
    }
    let nodes = log.nodes().max(1);
    let per_node = log.ranks() / nodes;
    if let Some(expected) = profile.gpu_count
        && per_node as u32 != expected
    {
        return Err(format!(
            "run used {per_node} gpu(s) per node; profile {} thresholds are for {expected}",
            profile.name
        ));
    }
    let nvls = nvls_used(log);
    let single = if profile.nccl_nvls == Some(true) && nvls == Some(false) {
        match (
            profile.nccl_ring_busbw_warn_gbps,
            profile.nccl_ring_busbw_fail_gbps,
        ) {
            (Some(w), Some(f)) => Some((w, f, "ring, no nvls".to_string())),
            _ => None,
        }
    } else {
        match (profile.nccl_busbw_warn_gbps, profile.nccl_busbw_fail_gbps) {
            (Some(w), Some(f)) => Some((
                w,
                f,
                if profile.nccl_nvls == Some(true) {
                    if nvls.is_none() {
                        "nvls (use unknown)"
                    } else {
                        "nvls"
                    }
                    .to_string()
                } else {
                    "single node".to_string()
                },
            )),
            _ => None,
        }
    };
    if nodes == 1 {
        return single.ok_or_else(|| {
            format!(
                "profile {} has no single-node bandwidth expectation",
                profile.name
            )
        });
    }
    let (warn, fail, from) = multi_node_expectation(profile, single.as_ref().map(|s| s.0))?;
    Ok((warn, fail, format!("{nodes} nodes, {from}")))
}

/// The busbw a run across nodes should reach on this profile, and below which it fails: the
/// profile's own multi-node figures when it states them (a published figure, or a site's
/// measured baseline in a profile file), else derived from its NICs (nccl.md §12: inter-node
/// traffic is bounded by the NICs), never above the single-node expectation `single_warn`.
/// (warn, fail, where the figures come from). `gpudoctor pairs` takes its floor from here too.
pub fn multi_node_expectation(
    profile: &Profile,
    single_warn: Option<f64>,
) -> Result<(f64, f64, String), String> {
    let stated = match (
        profile.nccl_multinode_busbw_warn_gbps,
        profile.nccl_multinode_busbw_fail_gbps,
    ) {
        (Some(w), f) => Some((w, f.unwrap_or(w * MULTI_NODE_FAIL_SHARE))),
        (None, Some(f)) => Some((f, f)),
        (None, None) => None,
    };
    if let Some((warn, fail)) = stated {
        return Ok((
            warn,
            fail,
            format!("profile {} multi-node expectation", profile.name),
        ));
    }
    let (Some(ports), Some(rate)) = (profile.rdma_ports, profile.rdma_rate_gbps) else {
        return Err(format!(
            "profile {} states no rdma ports and rate: no multi-node expectation",
            profile.name
        ));
    };
    let per_nic = f64::from(rate) / 8.0 * NIC_EFFICIENCY;
    let mut warn = f64::from(ports) * per_nic;
    if let Some(w) = single_warn {
        warn = warn.min(w);
    }
    let fail = warn * MULTI_NODE_FAIL_SHARE;
    Ok((
        warn,
        fail,
        format!("derived from {ports} x {rate} Gb/s nics"),
    ))
}

/// The most likely reason for low bandwidth, from the transport findings.
fn slow_cause(ctx: &Context<'_>, run: &NcclRun) -> (String, Action) {
    let t = &run.log.transports;
    if t.net.get("Socket").is_some_and(|n| n.channels > 0) && rdma_expected(ctx, run).0 {
        return (
            "network traffic went over tcp sockets: fix nccl.socket_fallback first".to_string(),
            Action::FixConfig,
        );
    }
    let rdma: Vec<_> = t
        .net
        .iter()
        .filter(|(n, _)| n.as_str() != "Socket")
        .collect();
    let channels: u64 = rdma.iter().map(|(_, n)| n.channels).sum();
    let gdr: u64 = rdma.iter().map(|(_, n)| n.gdr_channels).sum();
    if channels > gdr {
        return (
            "network channels without gpudirect rdma stage data through host memory: see nccl.gpudirect_rdma".to_string(),
            Action::FixConfig,
        );
    }
    if t.shm.channels > 0 {
        return (
            "intra-node traffic went through host memory (SHM): see nccl.p2p_transport".to_string(),
            Action::FixConfig,
        );
    }
    (
        "a downtrained pcie link, a missing nvlink or a slow nic: check driver.pcie_link, nvlink.links_active and the rdma layer; rerun with --nccl-quick to confirm".to_string(),
        Action::HardwareInspection,
    )
}

pub(super) fn bus_bandwidth(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let outcome = bandwidth_verdict(ctx, run);
        // The expectation the verdict held the all_reduce peak to, on that peak's figure.
        let expected = judging_profile(ctx, run)
            .and_then(|p| thresholds(&p, run).ok())
            .map(|(warn, _, _)| warn * 1e9);
        outcome.figures(sweep_figures(run, expected))
    })
}

/// Tables with rows, in order.
fn tables_with_rows(run: &NcclRun) -> impl Iterator<Item = usize> + '_ {
    (0..run.log.tables.len()).filter(|&t| run.log.tables[t].rows > 0)
}

/// The table `nccl.bus_bandwidth` judges: the first all_reduce one (the profiles' figures are
/// all_reduce figures), else the first with rows.
fn judged_table(run: &NcclRun) -> Option<usize> {
    tables_with_rows(run)
        .find(|&t| table_collective(run, t).as_deref() == Some("all_reduce"))
        .or_else(|| tables_with_rows(run).next())
}

fn label_count(n: usize) -> String {
    if n == 0 {
        "unknown".to_string()
    } else {
        n.to_string()
    }
}

/// Every table's sweep as metrics, whatever the verdicts (a passing run's numbers are worth
/// graphing too): its peak busbw, the size it was reached at, and the sweep average. One set per
/// collective (the first table of each); none for per-process tables, which measure nothing
/// together.
fn sweep_figures(run: &NcclRun, all_reduce_expected: Option<f64>) -> Vec<Figure> {
    let log = &run.log;
    if log.per_process_headers > 0 {
        return Vec::new();
    }
    let mut seen: Vec<String> = Vec::new();
    let mut figures = Vec::new();
    // Every table's sweep in one walk of the rows (`Sweep::each`): the tables with rows.
    for sweep in Sweep::each(log) {
        let table = sweep.table;
        let test = table_collective(run, table).unwrap_or_else(|| "unknown".to_string());
        if seen.contains(&test) {
            continue;
        }
        let Some(peak) = sweep.peak() else {
            continue;
        };
        let labelled = |figure: Figure| {
            figure
                .label("test", test.clone())
                .label("nodes", label_count(log.nodes()))
                .label("ranks", label_count(log.ranks()))
        };
        let floor = all_reduce_expected.filter(|_| test == "all_reduce" && log.ranks() > 1);
        figures.push(labelled(
            Figure::new(FigureName::NcclBusbwPeakBytesPerSecond, peak.busbw * 1e9).floor(floor),
        ));
        figures.push(labelled(Figure::new(
            FigureName::NcclBusbwPeakSizeBytes,
            peak.size as f64,
        )));
        if let Some(average) = sweep.average {
            figures.push(labelled(Figure::new(
                FigureName::NcclBusbwAverageBytesPerSecond,
                average * 1e9,
            )));
        }
        seen.push(test);
    }
    figures
}

/// Which timed block of its row a sweep point's busbw was printed in: nccl-tests prints an
/// out-of-place and an in-place figure per size, and the peak is the higher of the two.
fn column(log: &crate::answers::nccl::NcclLog, p: crate::answers::nccl::Point) -> &'static str {
    let out_of_place = log
        .rows
        .get(p.row)
        .and_then(|r| r.out_of_place.as_ref())
        .is_some_and(|m| m.busbw >= p.busbw);
    if out_of_place {
        "out-of-place"
    } else {
        "in-place"
    }
}

/// `peak busbw 29.5 GB/s at 32 MiB, sweep average 13.7 GB/s` (nccl-tests' own when it printed
/// one).
fn sweep_numbers(sweep: &Sweep) -> String {
    let peak = match sweep.peak() {
        Some(p) => format!(
            "peak busbw {} GB/s at {}",
            gbps(p.busbw),
            format_size(p.size)
        ),
        None => "no busbw".to_string(),
    };
    match sweep.average {
        Some(avg) => format!("{peak}, sweep average {} GB/s", gbps(avg)),
        None => peak,
    }
}

/// GB/s as a summary shows them: one decimal, two below 10 (3.15 and 3.12 differ).
fn gbps(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

/// `16 rank(s) on 2 node(s)`; an excerpt that lists fewer device lines than its highest rank
/// says how many nodes it shows, not how many ran.
fn shape(log: &crate::answers::nccl::NcclLog) -> String {
    let nodes = log.nodes().max(1);
    if !log.devices.is_empty() && log.devices.len() < log.ranks() {
        format!(
            "{} rank(s), {} of them listed, on {nodes} node(s) or more",
            log.ranks(),
            log.devices.len()
        )
    } else {
        format!("{} rank(s) on {nodes} node(s)", label_count(log.ranks()))
    }
}

fn bandwidth_verdict(ctx: &Context<'_>, run: &NcclRun) -> Outcome {
    if let Some(skip) = not_tests_log(run) {
        return skip;
    }
    let log = &run.log;
    let Some(table) = judged_table(run) else {
        return Outcome::skip("no result rows (see nccl.run_completed)");
    };
    let sweep = Sweep::of(log, table);
    let numbers = sweep_numbers(&sweep);
    if log.per_process_headers > 0 {
        return Outcome::skip(format!(
            "{numbers} in one of several per-process result tables: bandwidth not comparable (see nccl.run_completed)"
        ));
    }
    if log.ranks() == 1 {
        return Outcome::skip(format!(
            "{numbers}; one rank: busbw is 0 by definition (nccl-tests scales it by (ranks - 1) / ranks), nothing to judge"
        ));
    }
    let avg = log.tables[table].avg_busbw.as_ref().map(|(x, q)| {
        Evidence::new(
            format!("{}:{}", run.origin, q.line),
            format!(
                "sweep average {x} GB/s (shown, not judged: nccl-tests averages every size of the sweep, far below the peak)"
            ),
        )
    });
    let Some(large) = sweep.peak_from(LARGE_BYTES) else {
        let largest = sweep
            .largest()
            .map(|p| format_size(p.size))
            .unwrap_or_default();
        return Outcome::skip(format!(
            "{numbers}; largest size {largest}: too small to judge (needs rows of ≥ {}; run an 8 GiB sweep)",
            format_size(LARGE_BYTES)
        ))
        .evidence_all(sweep.peak().and_then(|p| log.rows.get(p.row)).map(|r| row_evidence(run, r)));
    };
    let Some(peak) = log.rows.get(large.row) else {
        return Outcome::skip(numbers);
    };
    let busbw = large.busbw;
    let at = format_size(large.size);
    // The sweep's own peak below 1 GiB, when higher: said, not judged.
    let earlier = match sweep.peak() {
        Some(p) if p.busbw > busbw => format!(
            " (sweep peak {} GB/s at {}, {})",
            gbps(p.busbw),
            format_size(p.size),
            column(log, p)
        ),
        _ => String::new(),
    };
    let average = sweep
        .average
        .map(|a| format!(", sweep average {} GB/s", gbps(a)))
        .unwrap_or_default();
    let collective = table_collective(run, table);
    let shape = format!("{}{average}", shape(log));
    let mut evidence = vec![row_evidence(run, peak)];
    evidence.extend(avg);
    let head = format!("peak busbw {} GB/s at {at}{earlier}", gbps(busbw));
    let Some(profile) = judging_profile(ctx, run) else {
        return Outcome::pass(format!(
            "{head} ({shape}); no platform profile to compare with"
        ))
        .evidence_all(evidence);
    };
    if collective.as_deref() != Some("all_reduce") {
        let what = collective.unwrap_or_else(|| "a collective this log does not name".to_string());
        return Outcome::pass(format!(
            "{head} ({shape}); profile {} states all_reduce figures only, not {what}",
            profile.name
        ))
        .evidence_all(evidence);
    }
    let (warn, fail, label) = match thresholds(&profile, run) {
        Ok(t) => t,
        Err(why) => {
            return Outcome::skip(format!("{head} ({shape}): {why}")).evidence_all(evidence);
        }
    };
    let expected = format!(
        "≥ {warn:.0} GB/s, fail < {fail:.0} (profile {}, {label})",
        profile.name
    );
    evidence[0] = row_evidence(run, peak).expected(expected.clone());
    if busbw >= warn {
        return Outcome::pass(format!("{head} ({shape}), expected {expected}"))
            .evidence_all(evidence);
    }
    // A run gpudoctor made (or recorded) while another process held one of this node's GPUs
    // measured the sharing: inconclusive, not slow (driver.gpu_processes names the holders). A
    // `--nccl-log` from another time says nothing of who held the GPUs then.
    let held = ctx.nvml().held_gpus();
    if run.meta.is_some() && !held.is_empty() {
        let named: Vec<String> = held
            .iter()
            .map(|(d, ps)| {
                let who: Vec<String> = ps.iter().map(|p| p.describe()).collect();
                format!(
                    "gpu {} ({}) was held by {}",
                    d.index,
                    d.pci_bus_id.as_deref().unwrap_or("?"),
                    who.join(", ")
                )
            })
            .collect();
        return Outcome::error(format!(
            "{head} ({shape}) is inconclusive because {} while it ran (expected {expected})",
            named.join("; ")
        ))
        .evidence_all(evidence)
        .hint("another process shared the gpus while nccl-tests ran (driver.gpu_processes names it): stop it or wait for it (`nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv`), then run `gpudoctor check --nccl` again")
        .action(Action::CheckWorkload)
        .about_gpus(held.iter().filter_map(|(d, _)| d.pci_bus_id.clone()));
    }
    let (cause, action) = slow_cause(ctx, run);
    let outcome = if busbw < fail {
        Outcome::fail(format!(
            "{head} ({shape}), below the {fail:.0} GB/s floor of profile {} ({label}; expected ≥ {warn:.0})",
            profile.name
        ))
    } else {
        Outcome::warn(format!(
            "{head} ({shape}), below the expected {warn:.0} GB/s of profile {} ({label}; fails below {fail:.0})",
            profile.name
        ))
    };
    outcome.evidence_all(evidence).hint(cause).action(action)
}

// ---------------------------------------------------------------------------------------------
// nccl.bandwidth_collapse
// ---------------------------------------------------------------------------------------------

const COLLAPSE_HINT: &str = "a link that cannot sustain load: check the pcie links and their aer/replay counters (`gpudoctor check --only driver,topology`), the nics' port counters and link flaps (`gpudoctor check --only rdma`, `perfquery -x`, `ethtool -S`) and the switch ports between the nodes; rerun the sweep to see whether it collapses at the same size";

pub(super) fn bandwidth_collapse(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |_, run| {
        if let Some(skip) = not_tests_log(run) {
            return skip;
        }
        let log = &run.log;
        if log.rows.is_empty() {
            return Outcome::skip("no result rows (see nccl.run_completed)");
        }
        if log.per_process_headers > 0 {
            return Outcome::skip(
                "separate per-process result tables: bandwidth not comparable (see nccl.run_completed)",
            );
        }
        if log.ranks() == 1 {
            return Outcome::skip(
                "one rank: busbw is 0 by definition (nccl-tests scales it by (ranks - 1) / ranks)",
            );
        }
        let mut judged: Vec<(usize, Sweep)> = Vec::new();
        let mut fewest = 0;
        for sweep in Sweep::each(log) {
            fewest = fewest.max(sweep.points.len());
            if sweep.points.len() > COLLAPSE_MIN_SIZES {
                judged.push((sweep.table, sweep));
            }
        }
        if judged.is_empty() {
            return Outcome::skip(format!(
                "{} size(s) in the longest sweep: too few to see a collapse (needs {} or more)",
                fewest,
                COLLAPSE_MIN_SIZES + 1
            ));
        }
        let collapsed = judged.iter().find_map(|(table, sweep)| {
            sweep
                .collapse(COLLAPSE_SHARE, COLLAPSE_MIN_SIZES)
                .map(|c| (*table, c))
        });
        let Some((table, c)) = collapsed else {
            let (table, sweep) = &judged[0];
            let (Some(peak), Some(last)) = (sweep.peak(), sweep.largest()) else {
                return Outcome::skip("no busbw in the sweep");
            };
            let share = if peak.busbw > 0.0 {
                format!("{:.0}%", last.busbw / peak.busbw * 100.0)
            } else {
                "all".to_string()
            };
            return Outcome::pass(format!(
                "{}: at the largest size ({}) busbw {} GB/s, {share} of the sweep's peak {} GB/s at {}",
                name(run, *table),
                format_size(last.size),
                gbps(last.busbw),
                gbps(peak.busbw),
                format_size(peak.size)
            ));
        };
        let half = c.peak.busbw * COLLAPSE_SHARE;
        let point = |p: Point, expected: Option<String>| {
            log.rows.get(p.row).map(|r| match &expected {
                Some(e) => row_evidence(run, r).expected(e.clone()),
                None => row_evidence(run, r),
            })
        };
        let expected = Some(format!("≥ {} GB/s (half the sweep's peak)", gbps(half)));
        let mut evidence: Vec<Evidence> = Vec::new();
        evidence.extend(point(c.peak, None));
        evidence.extend(point(c.from, expected.clone()));
        if c.to.size != c.from.size {
            evidence.extend(point(c.to, expected));
        }
        let outcome = Outcome::fail(format!(
            "{}: busbw collapses after its peak: {} GB/s at {}, then at most {} GB/s from {} to {} ({} size(s) under half the peak)",
            name(run, table),
            gbps(c.peak.busbw),
            format_size(c.peak.size),
            gbps(c.best_after),
            format_size(c.from.size),
            format_size(c.to.size),
            c.sizes
        ))
        .evidence_all(evidence)
        .hint(COLLAPSE_HINT)
        .action(Action::HardwareInspection);
        naming_nodes(outcome, run)
    })
}

fn name(run: &NcclRun, table: usize) -> String {
    table_collective(run, table).unwrap_or_else(|| "the sweep".to_string())
}
