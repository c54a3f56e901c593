//! `gpudoctor pairs`: find the slow node or link of a multi-node job by running a two-node
//! nccl-tests benchmark per pair of hosts through the cluster's own launcher, then re-pairing the
//! hosts of slow pairs with hosts that were fast (docs/pairs.md).
//!
//! - [`hosts`]: the host list (`--hosts`, `--hostfile`, `SLURM_JOB_NODELIST`);
//! - [`launch`]: the `mpirun`/`srun` command for one pair;
//! - [`plan`]: which pairs each round runs and what the results convict (pure, unit-tested);
//! - [`verdict`]: one pair's output read by the NCCL log parser;
//! - [`errors`]: what the launcher said when a run failed, and the fix for a shared cause;
//! - [`scale`]: round zero, each host alone, before any pair (`--no-singles` skips it);
//! - [`render`]: the table and the JSON.
//!
//! Slow means below [`SLOW_SHARE`] of the best busbw any pair reached (pairs that finished over
//! RDMA, all rounds; at least two of them), or below the profile's multi-node floor when one is
//! given. The best pair, not the median: when half of round one's pairs hold a slow node (two
//! or three hosts, or several slow nodes) the median is slow itself and hides them.

pub mod errors;
pub mod hosts;
pub mod launch;
pub mod names;
pub mod plan;
pub mod render;
pub mod scale;
pub mod verdict;

use std::time::Duration;

use serde::Serialize;

use crate::source::nccl::run_command_keeping;
use launch::{LaunchPlan, LauncherKind};
use plan::{HostId, Verdict};
use verdict::Measured;

/// A pair is slow below this share of the best pair. Real pairwise sweeps of a 17-node H100
/// cluster (xxrjun/nccl-tests-cluster, `example-cluster00` pairwise summary: 810 two-node runs)
/// put every healthy pair at 90–100 % of the best of its sweep and every slow pair at 50–75 %,
/// with nothing between: 0.85 falls in that gap, clear of run-to-run noise.
pub const SLOW_SHARE: f64 = 0.85;

/// Bytes of each pair's output head and tail kept (the 4 MiB `check --nccl` keeps, times
/// hundreds of pairs at once, would not fit a launcher Pod).
const TRANSCRIPT_KEPT: usize = 16 * 1024;

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct PairsOptions {
    pub hosts: Vec<String>,
    pub plan: LaunchPlan,
    /// Per pair; a pair still running then is killed with everything it started.
    pub timeout: Duration,
    /// Pairs run at once at most (`--parallel`): a wave larger than this runs in parts.
    pub parallel: usize,
    pub max_rounds: u32,
    /// The profile's multi-node busbw floor (GB/s) and where it comes from.
    pub floor: Option<(f64, String)>,
    /// Environment changes for the launcher process itself (`NCCL_DEBUG=INFO`, ...).
    pub launcher_env: Vec<(String, Option<String>)>,
    pub progress: bool,
    /// Said with the results (duplicate hosts dropped, defaults taken).
    pub notes: Vec<String>,
    /// Variables pointed at a private directory per launcher, removed after it (`TMPDIR` for
    /// Open MPI; see [`private_tmp`]); empty for srun.
    pub private_tmp_vars: Vec<String>,
    /// Round zero: each host alone first ([`scale`]).
    pub singles: bool,
    /// The profile's single-node busbw floor (GB/s) and where it comes from.
    pub single_floor: Option<(f64, String)>,
    /// Every pair of hosts once (a round-robin tournament) instead of round one's matching.
    pub all_links: bool,
    /// `--node-name-env`: the variable each host's rank prints to name its Kubernetes node
    /// (the downward API's `spec.nodeName`), asked through the launcher before any pair.
    pub node_name_env: Option<String>,
}

/// What one run covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// Two hosts.
    Pair,
    /// One host on its own GPUs (round zero).
    Alone,
    /// One host with NCCL kept off NVLink and shared memory: every byte over its NICs.
    AloneNics,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairStatus {
    Fast,
    Slow,
    Failed,
    Hung,
    /// Says nothing about the hosts: the launcher could not start, or gpudoctor was stopped.
    NotRun,
}

/// One pair's run, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct PairResult {
    /// The two hosts; a host alone (round zero) is named twice.
    pub hosts: [String; 2],
    pub run: RunKind,
    pub round: u32,
    pub busbw_gbps: Option<f64>,
    /// The size the busbw is for (bytes).
    pub size: Option<u64>,
    pub status: PairStatus,
    pub transport: String,
    /// Why it is not fast: the failure, sockets, below what.
    pub detail: Option<String>,
    pub elapsed_s: f64,
    pub command: Vec<String>,
    /// Processes left behind by the run and killed.
    pub killed: Vec<String>,
    /// The launcher's last stderr lines when the run failed or hung (bounded: 12 lines of 300
    /// bytes), as it said them; escaped when printed.
    pub launcher_said: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspectKind {
    Node,
    Link,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suspect {
    pub kind: SuspectKind,
    pub hosts: Vec<String>,
    pub evidence: Vec<String>,
    /// Per host, where Kubernetes runs it (with `--node-name-env`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kubernetes: Vec<names::KubeName>,
}

/// How slow was decided.
#[derive(Debug, Clone, Serialize)]
pub struct Threshold {
    /// The best busbw of a finished pair over RDMA, and how many such pairs there were.
    pub best_gbps: Option<f64>,
    pub measured_pairs: usize,
    pub slow_share: f64,
    pub floor_gbps: Option<f64>,
    pub floor_from: Option<String>,
    /// The larger of the two: pairs below it are slow — except when every pair is below the
    /// floor: then the share of the best pair alone, so a pair far below the others is still
    /// named (and the floor is said beside it).
    pub slow_below_gbps: Option<f64>,
    /// Every measured pair was below the profile's floor.
    pub all_below_floor: bool,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct PairsReport {
    pub hosts: Vec<String>,
    pub launcher: LauncherKind,
    pub gpus_per_node: u32,
    pub env: Vec<String>,
    pub timeout_s: u64,
    pub max_rounds: u32,
    pub rounds: u32,
    pub threshold: Threshold,
    pub pairs: Vec<PairResult>,
    pub suspects: Vec<Suspect>,
    /// Hosts in slow or failed pairs that the rounds could not clear or convict.
    pub unresolved: Vec<String>,
    pub verdict: String,
    /// 0 no suspect, 1 a suspect, 3 the runs could not tell.
    pub exit_code: i32,
    pub notes: Vec<String>,
    /// Every pair of round one failed the same way: what the launcher said, and the fix.
    pub shared_failure: Option<SharedFailure>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SharedFailure {
    pub what: String,
    pub fix: String,
}

/// A pair run and measured, before it is judged against the threshold.
struct Raw {
    a: HostId,
    b: HostId,
    round: u32,
    measured: Measured,
    elapsed_s: f64,
    command: Vec<String>,
    killed: Vec<String>,
    launcher_said: Vec<String>,
    run: RunKind,
}

/// Before any pair: for `mpirun`, that it starts and is Open MPI's (`--version`, 10 s). `Err`
/// is a usage error to print; `Ok` may carry a note (the MPI it found, or that it could not
/// tell).
pub fn check_launcher(plan: &LaunchPlan) -> Result<Option<String>, String> {
    if plan.kind != LauncherKind::Mpirun {
        return Ok(None);
    }
    let argv = vec![plan.program.clone(), "--version".to_string()];
    let out = run_command_keeping(&argv, &[], Duration::from_secs(10), &mut |_| {}, 4096)
        .map_err(|e| format!("--launcher {}: cannot start it: {e}", plan.program))?;
    if out.timed_out {
        return Err(format!(
            "--launcher {}: `--version` did not answer within 10 s",
            plan.program
        ));
    }
    Ok(match launch::which_mpi(&out.transcript)? {
        Some(version) => Some(format!("launcher: {version}")),
        // `mpirun.openmpi`, `mpiexec.mpich`: a suffixed name is taken on its word only.
        None if !launch::canonical(&plan.program) => {
            return Err(format!(
                "--launcher {}: `--version` does not say Open MPI; gpudoctor speaks Open MPI's mpirun and Slurm's srun",
                plan.program
            ));
        }
        None => Some(format!(
            "could not tell which MPI `{} --version` belongs to; the commands are Open MPI's",
            plan.program
        )),
    })
}

/// Run round zero (each host alone, [`scale`]) and the rounds of pairs.
pub fn run(options: &PairsOptions) -> PairsReport {
    let mut options = options.clone();
    // Under TMPDIR as the caller has it; each launcher gets a directory of its own inside.
    let run_dir = if options.private_tmp_vars.is_empty() {
        None
    } else {
        match tempfile::Builder::new()
            .prefix("gpudoctor-pairs-")
            .tempdir()
        {
            Ok(dir) => Some(dir),
            Err(e) => {
                options.notes.push(format!(
                    "no private temporary directory per launcher ({e}): launchers side by side may share Open MPI's session directory"
                ));
                None
            }
        }
    };
    let names = names::learn(&options, run_dir.as_ref());
    let mut report = scale::run(&options, run_dir.as_ref());
    names::attach(&mut report, &names);
    report
}

/// The threshold before any run: the profile's floor alone.
fn initial_threshold(options: &PairsOptions) -> Threshold {
    Threshold {
        best_gbps: None,
        measured_pairs: 0,
        slow_share: SLOW_SHARE,
        floor_gbps: options.floor.as_ref().map(|f| f.0),
        floor_from: options.floor.as_ref().map(|f| f.1.clone()),
        slow_below_gbps: options.floor.as_ref().map(|f| f.0),
        all_below_floor: false,
    }
}

/// The rounds of pairs over `options.hosts`, starting with `waves`.
fn run_pairs(
    options: &PairsOptions,
    run_dir: Option<&tempfile::TempDir>,
    mut waves: Vec<Vec<(HostId, HostId)>>,
) -> PairsReport {
    let hosts = &options.hosts;
    let mut raws: Vec<Raw> = Vec::new();
    let mut round = 1;
    let mut threshold = initial_threshold(options);
    let mut notes = options.notes.clone();
    let mut shared_failure = None;
    loop {
        let pairs: usize = waves.iter().map(Vec::len).sum();
        progress(
            options,
            format!(
                "round {round}: {pairs} pair(s) in {} wave(s) of pairs side by side, each up to {} s",
                waves.len(),
                options.timeout.as_secs()
            ),
        );
        'waves: for wave in &waves {
            for part in wave.chunks(options.parallel.max(1)) {
                raws.extend(run_wave(options, run_dir, part, round));
                if crate::process::signals::interrupted().is_some() {
                    break 'waves;
                }
            }
        }
        threshold = judge_threshold(&raws, threshold);
        let verdicts = verdicts(&raws, &threshold);
        let findings = plan::findings(&verdicts);
        if let Some(sig) = crate::process::signals::interrupted() {
            notes.push(format!("stopped in round {round}: signal {sig}"));
            break;
        }
        // Every pair of round one failed the same way: another round would repeat it.
        if round == 1 {
            shared_failure = shared(hosts, &raws);
            if shared_failure.is_some() {
                break;
            }
        }
        if findings.settled() || round >= options.max_rounds {
            break;
        }
        waves = plan::next_round(&verdicts, &findings);
        if waves.is_empty() {
            break;
        }
        round += 1;
    }
    let mut report = report(options, raws, threshold, round, notes);
    if let Some(shared) = shared_failure {
        report.verdict = format!(
            "could not tell: every pair of round one failed the same way: {}; {}",
            shared.what, shared.fix
        );
        report.exit_code = 3;
        report.suspects.clear();
        report.shared_failure = Some(shared);
    }
    report
}

/// Every pair of round one failed (not hung, not unstarted) and the launcher said the same
/// thing for each: the cause is shared (the launcher, ssh, PMI), not a node.
fn shared(hosts: &[String], raws: &[Raw]) -> Option<SharedFailure> {
    let first = raws.first()?;
    let failed =
        |r: &Raw| r.measured.failure.is_some() && !r.measured.hung && r.measured.not_run.is_none();
    if !raws.iter().all(failed) {
        return None;
    }
    let sig = |r: &Raw| {
        errors::signature(
            &r.launcher_said,
            &[hosts[r.a].as_str(), hosts[r.b].as_str()],
        )
    };
    let want = sig(first)?;
    if raws.iter().any(|r| sig(r).as_ref() != Some(&want)) {
        return None;
    }
    Some(match errors::known(&first.launcher_said) {
        Some(cause) => SharedFailure {
            what: cause.what,
            fix: cause.fix,
        },
        None => SharedFailure {
            what: format!(
                "the launcher said \"{}\"",
                errors::headline(&first.launcher_said).unwrap_or_default()
            ),
            fix: "a cause every pair shares (the launcher, its access to the hosts, the fabric) is more likely than one node: run the first pair's command by hand".to_string(),
        },
    })
}

/// A private directory for one launcher, removed when dropped. Open MPI puts its session
/// directory under `TMPDIR` (`opal_tmp_directory()`: TMPDIR, then TEMP, TMP, else /tmp; the
/// `orte_tmpdir_base` MCA parameter wins when set: Open MPI 4.1 `orte/util/session_dir.c`,
/// `opal/util/os_path.c`), named after the launcher's pid (`pid.<pid>`); every launcher here
/// runs in a PID namespace of its own (`process::contain`), where each `mpirun` has the same
/// pid, so side by side they would share one session directory ("File exists",
/// `orte_session_dir failed`, `MPI_INIT failed`) and fail each other at random.
pub fn private_tmp(
    run_dir: Option<&tempfile::TempDir>,
    vars: &[String],
) -> (Option<tempfile::TempDir>, Vec<(String, Option<String>)>) {
    let Some(run_dir) = run_dir else {
        return (None, Vec::new());
    };
    match tempfile::Builder::new()
        .prefix("launcher-")
        .tempdir_in(run_dir.path())
    {
        Ok(dir) => {
            let path = dir.path().display().to_string();
            let env = vars
                .iter()
                .map(|v| (v.clone(), Some(path.clone())))
                .collect();
            (Some(dir), env)
        }
        Err(_) => (None, Vec::new()),
    }
}

/// The verdicts the plan reads: every pair that ran, bad unless fast.
fn verdicts(raws: &[Raw], threshold: &Threshold) -> Vec<Verdict> {
    raws.iter()
        .filter_map(|r| match status(&r.measured, threshold).0 {
            PairStatus::NotRun => None,
            s => Some(Verdict {
                a: r.a,
                b: r.b,
                bad: s != PairStatus::Fast,
            }),
        })
        .collect()
}

/// The best pair so far (finished over RDMA, not sockets) and the threshold it gives: with
/// fewer than two such pairs there is nothing to compare with, and only a profile floor judges.
/// When even the best pair is below the floor, the floor would make every pair slow and hide
/// the one far below the others: the share of the best pair judges alone, the floor is noted.
fn judge_threshold(raws: &[Raw], threshold: Threshold) -> Threshold {
    let measured: Vec<&Measured> = raws
        .iter()
        .map(|r| &r.measured)
        .filter(|m| !m.fell_back_to_sockets())
        .collect();
    let floor = threshold
        .floor_gbps
        .map(|f| (f, threshold.floor_from.unwrap_or_default()));
    scale::threshold(&measured, floor.as_ref())
}

/// A pair's status and why.
fn status(m: &Measured, threshold: &Threshold) -> (PairStatus, Option<String>) {
    if let Some(why) = &m.not_run {
        return (PairStatus::NotRun, Some(why.clone()));
    }
    if m.hung {
        return (PairStatus::Hung, m.failure.clone());
    }
    if let Some(failure) = &m.failure {
        return (PairStatus::Failed, Some(failure.clone()));
    }
    if m.fell_back_to_sockets() {
        return (
            PairStatus::Slow,
            Some("NCCL fell back to TCP sockets between the two nodes".to_string()),
        );
    }
    match (m.busbw, threshold.slow_below_gbps) {
        (Some(bw), Some(below)) if bw < below => {
            let why = match (threshold.best_gbps, threshold.floor_gbps) {
                (Some(best), Some(floor)) if threshold.all_below_floor => format!(
                    "{:.0} % of the best pair's {best:.1}; every pair is below the profile's floor {floor:.1}",
                    bw / best * 100.0
                ),
                (_, Some(floor)) if bw < floor => format!("below the profile's floor {floor:.1}"),
                (Some(best), _) => {
                    format!("{:.0} % of the best pair's {best:.1}", bw / best * 100.0)
                }
                _ => format!("below {below:.1}"),
            };
            (PairStatus::Slow, Some(why))
        }
        (Some(_), _) if threshold.all_below_floor => (
            PairStatus::Fast,
            Some(format!(
                "below the profile's floor {:.1}, as every pair; near the best pair",
                threshold.floor_gbps.unwrap_or_default()
            )),
        ),
        _ => (PairStatus::Fast, m.warning.clone()),
    }
}

/// Run one wave's pairs side by side, each under its own timeout.
fn run_wave(
    options: &PairsOptions,
    run_dir: Option<&tempfile::TempDir>,
    wave: &[(HostId, HostId)],
    round: u32,
) -> Vec<Raw> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = wave
            .iter()
            .map(|&(a, b)| {
                scope.spawn(move || {
                    let argv = options.plan.argv(&options.hosts[a], &options.hosts[b]);
                    let raw = run_pair(options, run_dir, (a, b, round), argv, &[]);
                    progress(options, pair_line(options, &raw));
                    raw
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// One launcher run (a pair, or one host as `(a, a)`), in a private temporary directory when
/// the launcher needs one, with `more_env` set on the launcher's own process.
fn run_pair(
    options: &PairsOptions,
    run_dir: Option<&tempfile::TempDir>,
    (a, b, round): (HostId, HostId, u32),
    argv: Vec<String>,
    more_env: &[(String, String)],
) -> Raw {
    let (_private, mut env) = private_tmp(run_dir, &options.private_tmp_vars);
    env.splice(0..0, options.launcher_env.iter().cloned());
    env.extend(more_env.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
    // The parser reads the whole output; of the text itself only a little is kept (many pairs
    // run at once, and the report shows figures, not transcripts).
    match run_command_keeping(&argv, &env, options.timeout, &mut |_| {}, TRANSCRIPT_KEPT) {
        Ok(out) => {
            let measured = verdict::measure(&out);
            let launcher_said = if measured.failure.is_some() {
                out.stderr_tail.clone()
            } else {
                Vec::new()
            };
            Raw {
                a,
                b,
                round,
                measured,
                elapsed_s: out.elapsed.as_secs_f64(),
                command: argv,
                killed: out.killed.iter().map(|k| k.describe()).collect(),
                launcher_said,
                run: RunKind::Pair,
            }
        }
        Err(err) => Raw {
            a,
            b,
            round,
            measured: Measured {
                not_run: Some(format!("the launcher could not start here: {err}")),
                transport: "unknown".to_string(),
                ..Measured::default()
            },
            elapsed_s: 0.0,
            command: argv,
            killed: Vec::new(),
            launcher_said: Vec::new(),
            run: RunKind::Pair,
        },
    }
}

/// `round 1: gpu01 + gpu02: 45.1 GB/s over IB/GDRDMA in 41 s`.
fn pair_line(options: &PairsOptions, raw: &Raw) -> String {
    let m = &raw.measured;
    let figure = match (m.busbw, m.failure.as_ref().or(m.not_run.as_ref())) {
        (_, Some(f)) => crate::text::sanitize::text(f).to_string(),
        (Some(bw), None) => format!("{bw:.1} GB/s over {}", m.transport_text()),
        (None, None) => "no figure".to_string(),
    };
    format!(
        "round {}: {} + {}: {figure} in {:.0} s",
        raw.round,
        crate::text::sanitize::text(&options.hosts[raw.a]),
        crate::text::sanitize::text(&options.hosts[raw.b]),
        raw.elapsed_s
    )
}

fn progress(options: &PairsOptions, line: String) {
    if options.progress {
        eprintln!("gpudoctor: pairs: {line}");
    }
}

/// The results judged, the suspects named with their evidence.
fn report(
    options: &PairsOptions,
    raws: Vec<Raw>,
    threshold: Threshold,
    rounds: u32,
    notes: Vec<String>,
) -> PairsReport {
    let hosts = &options.hosts;
    let pairs: Vec<PairResult> = raws
        .iter()
        .map(|r| {
            let (status, detail) = status(&r.measured, &threshold);
            PairResult {
                hosts: [hosts[r.a].clone(), hosts[r.b].clone()],
                run: r.run,
                round: r.round,
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
        })
        .collect();
    let findings = plan::findings(&verdicts(&raws, &threshold));
    let suspects = render::suspects(hosts, &raws_view(&raws), &pairs, &findings);
    let unresolved: Vec<String> = findings
        .unresolved
        .iter()
        .map(|h| hosts[*h].clone())
        .collect();
    let measured = pairs.iter().any(|p| p.busbw_gbps.is_some());
    let interrupted = crate::process::signals::interrupted().is_some();
    let (verdict, exit_code) = if interrupted {
        (
            format!(
                "could not tell: interrupted in round {rounds}{}",
                if suspects.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} so far)",
                        render::suspects_line(&suspects, &unresolved)
                    )
                }
            ),
            3,
        )
    } else if !suspects.is_empty() {
        let mut line = render::suspects_line(&suspects, &unresolved);
        if threshold.all_below_floor {
            line.push_str(&format!(
                "; every pair is below the profile's floor {:.1} GB/s too (best {:.1}): a cause every node shares as well",
                threshold.floor_gbps.unwrap_or_default(),
                threshold.best_gbps.unwrap_or_default()
            ));
        }
        (line, 1)
    } else if pairs.iter().all(|p| p.status == PairStatus::NotRun) {
        (
            "could not tell: no pair ran (see each pair's detail)".to_string(),
            3,
        )
    } else if !unresolved.is_empty() {
        (
            render::unresolved_line(&unresolved, findings.good.is_empty()),
            3,
        )
    } else if !findings.retry.is_empty() {
        (
            format!(
                "could not tell: {} bad once between hosts fast elsewhere, not run again within --max-rounds",
                render::pair_names(hosts, &findings.retry)
            ),
            3,
        )
    } else if !measured {
        ("could not tell: no pair gave a figure".to_string(), 3)
    } else if threshold.slow_below_gbps.is_none() {
        (
            "could not tell: one finished pair has none to compare with; give --profile for a floor, or more hosts".to_string(),
            3,
        )
    } else if threshold.all_below_floor {
        (
            format!(
                "could not tell: every pair is below the profile's floor {:.1} GB/s (best {:.1}) and none far below the others: a cause every node shares (the fabric, NCCL settings) is more likely than one node",
                threshold.floor_gbps.unwrap_or_default(),
                threshold.best_gbps.unwrap_or_default()
            ),
            3,
        )
    } else {
        (no_suspect_line(&pairs, threshold.best_gbps), 0)
    };
    PairsReport {
        hosts: hosts.clone(),
        launcher: options.plan.kind,
        gpus_per_node: options.plan.gpus_per_node,
        env: options
            .plan
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        timeout_s: options.timeout.as_secs(),
        max_rounds: options.max_rounds,
        rounds,
        threshold,
        pairs,
        suspects,
        unresolved,
        verdict,
        exit_code,
        notes,
        shared_failure: None,
    }
}

/// `no suspect: all 128 pair(s) fast (best 155.6 GB/s)`, or, when some runs were not fast,
/// how many were: `no suspect: 4 of 5 pair(s) fast (best 155.6 GB/s); 1 hung, each fast when
/// run again`. Only pairs judged fast are counted as fast. With no suspect, nothing unresolved
/// and nothing left to retry, every pair that was bad had both hosts fast elsewhere and was fast
/// itself when run again (plan.rs), so it convicts nothing; a pair that did not run says
/// nothing about its hosts.
fn no_suspect_line(pairs: &[PairResult], best: Option<f64>) -> String {
    let count = |s: PairStatus| pairs.iter().filter(|p| p.status == s).count();
    let fast = count(PairStatus::Fast);
    let best = best
        .map(|m| format!(" (best {m:.1} GB/s)"))
        .unwrap_or_default();
    if fast == pairs.len() {
        return format!("no suspect: all {fast} pair(s) fast{best}");
    }
    let mut line = format!("no suspect: {fast} of {} pair(s) fast{best}", pairs.len());
    let bad: Vec<String> = [
        (PairStatus::Hung, "hung"),
        (PairStatus::Failed, "failed"),
        (PairStatus::Slow, "slow"),
    ]
    .into_iter()
    .map(|(s, word)| (count(s), word))
    .filter(|(n, _)| *n > 0)
    .map(|(n, word)| format!("{n} {word}"))
    .collect();
    if !bad.is_empty() {
        line.push_str(&format!("; {}, each fast when run again", bad.join(", ")));
    }
    let not_run = count(PairStatus::NotRun);
    if not_run > 0 {
        line.push_str(&format!("; {not_run} not run (see each pair's detail)"));
    }
    line
}

/// (a, b) of each run, in order, for the evidence.
fn raws_view(raws: &[Raw]) -> Vec<(HostId, HostId)> {
    raws.iter().map(|r| (r.a, r.b)).collect()
}
