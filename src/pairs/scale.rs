//! Narrowing down by scale: round zero runs each host alone before any pair — one
//! `all_reduce_perf` over its own GPUs, and where NCCL saw RDMA NICs (its `NET/IB` INFO lines)
//! the same run with NCCL kept off NVLink and shared memory (`NCCL_P2P_DISABLE=1`,
//! `NCCL_SHM_DISABLE=1`: every byte then crosses the node's own NICs and switch port). A host
//! slow alone (its NVLinks, one of its NICs) is convicted from its own run and never paired, so
//! it cannot make a partner look slow. The order of nccl-tests' own advice ("narrow it down by
//! scale": one node, then across nodes at the same GPU count and message sizes).
//!
//! Judged like pairs: below [`super::SLOW_SHARE`] of the best host alone (at least two ran),
//! or below the profile's single-node floor (`nccl.bus_bandwidth`'s); the NIC-forced runs
//! against the best NIC-forced run and the profile's multi-node floor.

use super::plan::{self, HostId};
use super::{
    PairResult, PairStatus, PairsOptions, PairsReport, Raw, RunKind, Suspect, SuspectKind,
    Threshold, verdict::Measured,
};

/// What NCCL is told for the NIC-forced run.
pub fn nic_env() -> Vec<(String, String)> {
    vec![
        ("NCCL_P2P_DISABLE".to_string(), "1".to_string()),
        ("NCCL_SHM_DISABLE".to_string(), "1".to_string()),
    ]
}

/// NCCL saw RDMA NICs in the host's own run: its network is IB or a net plugin, not sockets.
pub fn has_rdma(m: &Measured) -> bool {
    !matches!(m.transport.as_str(), "Socket" | "unknown")
}

/// The threshold over a set of single-host runs (finished, with a figure).
pub fn threshold(runs: &[&Measured], floor: Option<&(f64, String)>) -> Threshold {
    let figures: Vec<f64> = runs
        .iter()
        .filter(|m| m.failure.is_none() && m.not_run.is_none())
        .filter_map(|m| m.busbw)
        .collect();
    let best = figures.iter().copied().reduce(f64::max);
    let relative = best
        .filter(|_| figures.len() >= 2)
        .map(|b| b * super::SLOW_SHARE);
    let floor_gbps = floor.map(|f| f.0);
    let all_below_floor =
        matches!((best, floor_gbps, relative), (Some(b), Some(f), Some(_)) if b < f);
    let slow_below_gbps = match (relative, floor_gbps) {
        (Some(r), Some(_)) if all_below_floor => Some(r),
        (Some(r), Some(f)) => Some(r.max(f)),
        (r, f) => r.or(f),
    };
    Threshold {
        best_gbps: best,
        measured_pairs: figures.len(),
        slow_share: super::SLOW_SHARE,
        floor_gbps,
        floor_from: floor.map(|f| f.1.clone()),
        slow_below_gbps,
        all_below_floor,
    }
}

/// A host alone is convicted: it failed, hung, or was slow (not a run that never started).
pub fn convicts(status: PairStatus) -> bool {
    matches!(
        status,
        PairStatus::Slow | PairStatus::Failed | PairStatus::Hung
    )
}

/// Round zero, then the pairs over the hosts it did not convict, as one report.
pub fn run(options: &PairsOptions, run_dir: Option<&tempfile::TempDir>) -> PairsReport {
    let zero = if options.singles {
        round_zero(options, run_dir)
    } else {
        Zero::default()
    };
    let healthy: Vec<String> = options
        .hosts
        .iter()
        .filter(|h| !zero.convicted.contains(h))
        .cloned()
        .collect();
    let sub = PairsOptions {
        hosts: healthy,
        ..options.clone()
    };
    let n = sub.hosts.len();
    let mut report = if zero.shared.is_some() || n < 2 || interrupted() {
        let mut report = super::report(
            &sub,
            Vec::new(),
            super::initial_threshold(&sub),
            0,
            sub.notes.clone(),
        );
        if zero.shared.is_none() && !interrupted() {
            report
                .notes
                .push(format!("{n} host(s) left after round zero: no pair to run"));
        }
        report
    } else {
        let waves = if options.all_links {
            let waves = plan::tournament(n);
            let pairs: usize = waves.iter().map(Vec::len).sum();
            super::progress(
                options,
                format!(
                    "--all-links: {pairs} pair(s) in {} wave(s) of up to {} side by side, each up to {} s: at most {} s",
                    waves.len(),
                    n / 2,
                    options.timeout.as_secs(),
                    waves.len() as u64 * options.timeout.as_secs()
                ),
            );
            waves
        } else {
            plan::first_round(n)
        };
        super::run_pairs(&sub, run_dir, waves)
    };
    report.hosts = options.hosts.clone();
    let mut pairs = zero.results;
    pairs.append(&mut report.pairs);
    report.pairs = pairs;
    if let Some(shared) = zero.shared {
        report.verdict = format!(
            "could not tell: every host failed alone the same way: {}; {}",
            shared.what, shared.fix
        );
        report.exit_code = 3;
        report.shared_failure = Some(shared);
        return report;
    }
    if !zero.suspects.is_empty() {
        let mut suspects = zero.suspects;
        suspects.append(&mut report.suspects);
        report.suspects = suspects;
        if report.shared_failure.is_none() && !interrupted() {
            report.verdict = super::render::suspects_line(&report.suspects, &report.unresolved);
            report.exit_code = 1;
        }
    }
    report
}

fn interrupted() -> bool {
    crate::process::signals::interrupted().is_some()
}

/// What round zero found.
#[derive(Default)]
struct Zero {
    results: Vec<PairResult>,
    suspects: Vec<Suspect>,
    convicted: Vec<String>,
    shared: Option<super::SharedFailure>,
}

/// Each host alone, side by side; then the NIC-forced run on those that showed RDMA NICs.
fn round_zero(options: &PairsOptions, run_dir: Option<&tempfile::TempDir>) -> Zero {
    let hosts = &options.hosts;
    let all: Vec<HostId> = (0..hosts.len()).collect();
    super::progress(
        options,
        format!(
            "round 0: each of {} host(s) alone, side by side, each up to {} s",
            hosts.len(),
            options.timeout.as_secs()
        ),
    );
    let alone = run_alone(options, run_dir, &all, RunKind::Alone);
    if let Some(shared) = super::shared(hosts, &alone) {
        let threshold = threshold(&[], options.single_floor.as_ref());
        return Zero {
            results: alone.iter().map(|r| result(hosts, r, &threshold)).collect(),
            shared: Some(shared),
            ..Zero::default()
        };
    }
    let with_nics: Vec<HostId> = alone
        .iter()
        .filter(|r| r.measured.failure.is_none() && has_rdma(&r.measured))
        .map(|r| r.a)
        .collect();
    let nics = if with_nics.is_empty() || interrupted() {
        Vec::new()
    } else {
        run_alone(options, run_dir, &with_nics, RunKind::AloneNics)
    };
    let t_alone = threshold(
        &alone.iter().map(|r| &r.measured).collect::<Vec<_>>(),
        options.single_floor.as_ref(),
    );
    let t_nics = threshold(
        &nics.iter().map(|r| &r.measured).collect::<Vec<_>>(),
        options.floor.as_ref(),
    );
    let mut zero = Zero::default();
    for (raws, t) in [(&alone, &t_alone), (&nics, &t_nics)] {
        for r in raws.iter() {
            let p = result(hosts, r, t);
            if convicts(p.status) {
                let host = &hosts[r.a];
                let evidence = super::render::describe(&p);
                match zero.suspects.iter_mut().find(|s| s.hosts[0] == *host) {
                    Some(s) => s.evidence.push(evidence),
                    None => {
                        zero.convicted.push(host.clone());
                        zero.suspects.push(Suspect {
                            kind: SuspectKind::Node,
                            hosts: vec![host.clone()],
                            evidence: vec![evidence],
                            kubernetes: Vec::new(),
                        });
                    }
                }
            }
            zero.results.push(p);
        }
    }
    zero
}

fn result(hosts: &[String], r: &Raw, t: &Threshold) -> PairResult {
    let (status, detail) = super::status(&r.measured, t);
    PairResult {
        hosts: [hosts[r.a].clone(), hosts[r.b].clone()],
        run: r.run,
        round: 0,
        busbw_gbps: r.measured.busbw,
        size: r.measured.size,
        status,
        transport: r.measured.transport_text(),
        detail,
        elapsed_s: r.elapsed_s,
        command: r.command.clone(),
        killed: r.killed.clone(),
        launcher_said: r.launcher_said.clone(),
    }
}

/// `ids` alone, side by side in waves of at most `--parallel`.
fn run_alone(
    options: &PairsOptions,
    run_dir: Option<&tempfile::TempDir>,
    ids: &[HostId],
    kind: RunKind,
) -> Vec<Raw> {
    let env = if kind == RunKind::AloneNics {
        nic_env()
    } else {
        Vec::new()
    };
    let mut raws = Vec::new();
    for part in ids.chunks(options.parallel.max(1)) {
        let env = &env;
        raws.extend(std::thread::scope(|scope| {
            let handles: Vec<_> = part
                .iter()
                .map(|&h| {
                    scope.spawn(move || {
                        let argv = options.plan.argv_on(&[options.hosts[h].as_str()], env);
                        let mut raw = super::run_pair(options, run_dir, (h, h, 0), argv, env);
                        raw.run = kind;
                        let m = &raw.measured;
                        let figure = match (m.busbw, m.failure.as_ref().or(m.not_run.as_ref())) {
                            (_, Some(f)) => f.clone(),
                            (Some(bw), None) => format!("{bw:.1} GB/s over {}", m.transport_text()),
                            (None, None) => "no figure".to_string(),
                        };
                        super::progress(
                            options,
                            format!(
                                "round 0: {} {}: {} in {:.0} s",
                                crate::text::sanitize::text(&options.hosts[h]),
                                if kind == RunKind::AloneNics {
                                    "alone, NICs only"
                                } else {
                                    "alone"
                                },
                                crate::text::sanitize::text(&figure),
                                raw.elapsed_s
                            ),
                        );
                        raw
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok())
                .collect::<Vec<_>>()
        }));
        if interrupted() {
            break;
        }
    }
    raws
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(bw: f64, transport: &str) -> Measured {
        Measured {
            busbw: Some(bw),
            size: Some(1 << 33),
            transport: transport.to_string(),
            ..Measured::default()
        }
    }

    #[test]
    fn the_best_host_alone_sets_the_bar_and_the_floor_adds_to_it() {
        let runs = [run(480.0, "IB"), run(470.0, "IB"), run(200.0, "IB")];
        let refs: Vec<&Measured> = runs.iter().collect();
        let t = threshold(&refs, None);
        assert_eq!(t.best_gbps, Some(480.0));
        assert!((t.slow_below_gbps.unwrap() - 408.0).abs() < 1e-9);
        let floor = (450.0, "profile h100".to_string());
        assert_eq!(threshold(&refs, Some(&floor)).slow_below_gbps, Some(450.0));
        // Every host below the floor: the share of the best judges, so 200 is still named.
        let floor = (600.0, "profile h100".to_string());
        let t = threshold(&refs, Some(&floor));
        assert!(t.all_below_floor && t.slow_below_gbps.unwrap() < 410.0);
        assert!(has_rdma(&runs[0]) && !has_rdma(&run(1.0, "unknown")));
        assert!(convicts(PairStatus::Failed) && !convicts(PairStatus::NotRun));
    }
}
