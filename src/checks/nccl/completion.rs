//! `nccl.run_completed`: did the nccl-tests run reach its end — its footer printed, its exit
//! status clean, one test per header (reference/nccl.md §4, §7)? A hang, a crash, a harness
//! error and an excerpt that lacks the start of the run each say so; an application's log is not
//! judged here (it has no footer).

use super::{collective_name, each_run, naming_nodes, quote, table_collective, tail_evidence};
use crate::answers::nccl::{INSTALL_HINT, NcclProbe, NcclRun};
use crate::answers::nccl::{LogKind, NcclLog, format_size};
use crate::checks::{Context, Outcome};
use crate::process::RunExit;
use crate::report::{Action, Evidence};

/// What an nccl-tests exit status means (`testResult_t`, nccl.md §4).
fn exit_meaning(code: i32) -> &'static str {
    match code {
        0 => "success",
        1 => "internal error",
        2 => "cuda error",
        3 => "nccl error",
        4 => "timeout",
        5 => "not implemented or invalid gpu count",
        6 => "invalid usage",
        7 => "wrong values or bandwidth below NCCL_TESTS_MIN_BW",
        _ => "launcher or shell status",
    }
}

const HANG_HINT: &str = "a hang: check ACS/IOMMU blocking P2P (`gpudoctor check --only topology`), the nvlink fabric (`--only nvlink`), net plugins that differ between nodes, and bootstrap traffic (NCCL_SOCKET_IFNAME); if it was only slow, raise --nccl-timeout";

pub(super) fn run_completed(ctx: &Context<'_>) -> Outcome {
    match ctx.nccl() {
        // Asked means required: a run or log the user asked for that cannot be had fails the
        // layer (exit 1) instead of passing as "skip".
        NcclProbe::Unavailable {
            origin,
            message,
            requested: true,
        } => {
            return Outcome::fail(format!(
                "the nccl-tests run or log asked for could not be run or read: {origin}: {message}"
            ))
            .evidence(Evidence::new(origin.clone(), message.clone()))
            .hint("check the path and permissions; run the command by hand to see why it does not start")
            .action(Action::FixConfig);
        }
        NcclProbe::Unavailable {
            origin, message, ..
        } => {
            return Outcome::error(format!("could not read the recorded nccl log: {message}"))
                .evidence(Evidence::new(origin.clone(), message.clone()))
                .hint("re-record the node with `gpudoctor record --nccl-quick`, or judge a saved log with --nccl-log FILE");
        }
        NcclProbe::BinaryMissing { binary, searched } => {
            return Outcome::fail(format!(
                "an nccl-tests run was asked for (--nccl or --nccl-quick), but {binary} was not found ({} place(s) looked in)",
                searched.len()
            ))
            .evidence(
                Evidence::new("nccl-tests search", searched.join(", "))
                    .expected(format!("{binary} or {binary}_mpi, executable, in one of them")),
            )
            .hint(INSTALL_HINT)
            .action(Action::FixConfig);
        }
        _ => {}
    }
    each_run(ctx, |_, run| {
        naming_nodes(survivors(completed_verdict(run), run), run).evidence_all(killed_evidence(run))
    })
}

/// A process of the run that is still there after SIGKILL (process/mod.rs marks it
/// `survived`) leaves the node with part of a benchmark running: `error` naming the pids,
/// unless the run already failed (then the summary says it too).
fn survivors(outcome: Outcome, run: &NcclRun) -> Outcome {
    let killed = run.meta.as_ref().map_or(&[][..], |m| m.killed.as_slice());
    let pids: Vec<String> = killed
        .iter()
        .filter(|k| k.survived)
        .map(|k| k.pid.to_string())
        .collect();
    if pids.is_empty() {
        return outcome;
    }
    let note = format!(
        "{} process(es) of the run still alive after SIGKILL: pid {}",
        pids.len(),
        pids.join(", ")
    );
    let hint = format!(
        "look at them with `ps -o pid,stat,wchan:32,args -p {}`: a process in D state waits on the kernel or a device (a hung GPU driver call?) and goes only when that returns, or with a reboot",
        pids.join(",")
    );
    if outcome.status == crate::report::Status::Fail {
        let mut outcome = outcome;
        outcome.summary = format!("{}; {note}", outcome.summary);
        return outcome;
    }
    Outcome::error(note)
        .hint(hint)
        .action(Action::CheckWorkload)
}

/// What gpudoctor had to kill after the run (left running after the leader exited, or still
/// there at the timeout): one evidence line each, at most ten (process.rs).
fn killed_evidence(run: &NcclRun) -> Vec<Evidence> {
    let killed = run.meta.as_ref().map_or(&[][..], |m| m.killed.as_slice());
    let mut evidence: Vec<Evidence> = killed
        .iter()
        .take(10)
        .map(|k| {
            Evidence::new("process killed by gpudoctor", k.describe())
                .expected("nothing left running after the run")
        })
        .collect();
    if !killed.is_empty()
        && let Some(c) = run.meta.as_ref().and_then(|m| m.containment)
    {
        evidence.push(Evidence::new("containment", c.describe()));
    }
    if killed.len() > 10 {
        evidence.push(Evidence::new(
            "process killed by gpudoctor",
            format!("and {} more", killed.len() - 10),
        ));
    }
    evidence
}

fn completed_verdict(run: &NcclRun) -> Outcome {
    let log = &run.log;
    let meta = run.meta.as_ref();
    let skipped = skipped_note(log);
    if log.failure_count > 0 {
        return Outcome::skip(format!(
            "the run ended at its test failure (see nccl.test_errors){skipped}"
        ));
    }
    if let Some(q) = &log.invalid_gpus {
        return Outcome::fail(format!(
            "harness error, not a node fault: {}",
            q.text.to_ascii_lowercase()
        ))
        .evidence(quote(run, q))
        .hint("pass --nccl-gpus N with the gpus this process can see (check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES), or one rank per gpu with --nccl-launcher")
        .action(Action::FixConfig);
    }
    if log.per_process_headers > 0 {
        return Outcome::fail(format!(
            "harness error, not a node fault: {} test headers printed before any result, so every process ran its own test (a non-mpi nccl-tests build under mpirun?)",
            log.per_process_headers + 1
        ))
        .evidence_all(meta.map(|m| Evidence::new("command", m.command.join(" "))))
        .hint("build nccl-tests with `make MPI=1 MPI_HOME=<mpi>` for launcher runs, or run it without the launcher on one node")
        .action(Action::FixConfig);
    }
    if meta.is_some_and(|m| m.timed_out) {
        let timeout = meta.and_then(|m| m.timeout_s).unwrap_or(0);
        let last = match log.rows.last() {
            Some(r) => format!("last result row at {}", format_size(r.size)),
            None => "no result row printed".to_string(),
        };
        return Outcome::fail(format!(
            "killed by gpudoctor after {timeout} s without finishing ({last}, {} line(s) kept){skipped}",
            log.lines
        ))
        .evidence_all(tail_evidence(run, 3))
        .hint(HANG_HINT)
        .action(Action::FixConfig);
    }
    let exit = meta.and_then(|m| m.exit);
    let kind = log.kind();
    if meta.is_none() && kind == LogKind::Application {
        return Outcome::skip(format!(
            "not an nccl-tests log: an application's output ({} line(s), {} NCCL INFO line(s)) has no footer to reach; its failures are judged by nccl.test_errors",
            log.lines, log.info_lines
        ));
    }
    if kind == LogKind::Unknown {
        return Outcome::error(format!(
            "no nccl-tests output in {} line(s) ({} unreadable)",
            log.lines, log.unreadable_lines
        ))
        .evidence_all(tail_evidence(run, 2))
        .hint("pass the stdout of an nccl-tests binary (`all_reduce_perf ... > log`), ideally with NCCL_DEBUG=INFO, or an application's log with NCCL_DEBUG=INFO");
    }
    // The last test of the log printed its footer (a log can hold several tests in a row).
    let finished = match log.last_table() {
        Some(t) => t.has_footer(),
        None => log.has_footer(),
    };
    if !finished {
        let last = match log.rows.last() {
            Some(r) => format!("last result row at {}", format_size(r.size)),
            None => "before the first result row".to_string(),
        };
        let (how, action, hint) = match exit {
            Some(RunExit::Code(c)) if c != 0 => (
                format!("exited {c} ({})", exit_meaning(c)),
                Action::CheckWorkload,
                "read the last lines and the NCCL WARN lines; rerun by hand to reproduce".to_string(),
            ),
            Some(RunExit::Signal(s)) => (
                format!("was killed by signal {s}"),
                Action::CheckWorkload,
                "a crash or an outside kill (OOM killer? `dmesg | grep -i oom`); rerun by hand to reproduce".to_string(),
            ),
            Some(RunExit::Code(_)) => (
                "exited 0".to_string(),
                Action::CheckWorkload,
                "the output was cut short; rerun".to_string(),
            ),
            None => (
                "stopped (killed, hung or crashed?)".to_string(),
                Action::FixConfig,
                HANG_HINT.to_string(),
            ),
        };
        return Outcome::fail(format!(
            "the run {how} without its closing lines, {last}{skipped}"
        ))
        .evidence_all(tail_evidence(run, 3))
        .hint(hint)
        .action(action);
    }
    if meta.is_none() && !log.has_header() {
        // A footer without the lines that open a run: a copied excerpt. Nothing in it shows
        // that the run was whole, or what ran: never called healthy.
        return Outcome::error(format!(
            "an excerpt: the footer is there but not the start of the run (no `nThread` line), so it cannot show the run was whole{}",
            match log.rows.len() {
                0 => ", and no result row".to_string(),
                n => format!("; {n} result row(s) read"),
            }
        ))
        .evidence_all(log.out_of_bounds.as_ref().map(|(_, q)| quote(run, q)))
        .hint("pass the whole output of the run, from its `# nThread` line to its footer");
    }
    if let Some(RunExit::Code(c)) = exit
        && c != 0
        && c != 7
    {
        return Outcome::fail(format!("exited {c} ({}) after its footer", exit_meaning(c)))
            .evidence_all(tail_evidence(run, 2))
            .hint(
                "read the NCCL WARN lines; with a launcher, a rank on another node may have failed",
            )
            .action(Action::CheckWorkload);
    }
    // A footer, yet no row read and lines that could not be: the rows are there in a form not
    // read (a container log's parts, a prefix), so nothing shows what the run measured.
    if log.rows.is_empty() && log.unreadable_lines > 0 {
        let mut outcome = Outcome::error(format!(
            "the run printed its footer, but none of its result rows could be read ({} unreadable line(s)): what it measured is unknown",
            log.unreadable_lines
        ))
        .hint("pass the output as the test printed it (`kubectl logs`, or the launcher's own output), not a transformed copy; if it is, report the line below as a format gpudoctor should read");
        if let Some(q) = &log.unreadable_example {
            outcome =
                outcome.evidence(quote(run, q).expected("a result row or a line NCCL prints"));
        }
        return outcome;
    }
    let sizes = match (log.rows.first(), log.largest_size()) {
        (Some(first), Some(max)) => format!(
            ", {} size(s) {}–{}",
            log.rows.len(),
            format_size(log.rows.iter().map(|r| r.size).min().unwrap_or(first.size)),
            format_size(max)
        ),
        _ => String::new(),
    };
    let took = meta
        .and_then(|m| m.elapsed_ms)
        .map(|ms| format!(" in {} s", ms / 1000))
        .unwrap_or_default();
    let tests: Vec<String> = (0..log.tables.len())
        .filter(|&t| log.tables[t].rows > 0 || log.tables[t].has_footer())
        .map(|t| table_collective(run, t).unwrap_or_else(|| "unknown".to_string()))
        .collect();
    let collective = if tests.len() > 1 {
        format!("{} tests ({})", tests.len(), tests.join(", "))
    } else {
        match collective_name(run).as_str() {
            "unknown" => "the test (its collective not named)".to_string(),
            name => name.to_string(),
        }
    };
    let mut evidence = Vec::new();
    if let Some(m) = meta {
        evidence.push(Evidence::new("command", m.command.join(" ")));
        if !m.env.is_empty() || !m.changed.is_empty() {
            let inherited: Vec<String> = m.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut parts = Vec::new();
            if !inherited.is_empty() {
                parts.push(format!("inherited {}", inherited.join(" ")));
            }
            if !m.changed.is_empty() {
                parts.push(format!("set by gpudoctor {}", m.changed.join(", ")));
            }
            evidence.push(Evidence::new("environment", parts.join("; ")));
        }
    }
    if !log.transports.env.is_empty() {
        let set: Vec<String> = log
            .transports
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        evidence.push(Evidence::new(
            format!("{} (NCCL INFO)", run.origin),
            format!("set by environment: {}", set.join(" ")),
        ));
    }
    if let (Some(h), Some(l)) = (log.nccl_headers, log.nccl_library)
        && h != l
    {
        evidence.push(Evidence::new(
            run.origin.clone(),
            format!("built against nccl {h}, running with nccl {l}"),
        ));
    }
    if let Some(q) = &log.unreadable_example {
        evidence.push(quote(run, q).expected("a line nccl-tests or NCCL prints"));
    }
    let footer = if tests.len() > 1 {
        "their footers"
    } else {
        "its footer"
    };
    Outcome::pass(format!(
        "{collective} ran to {footer}: {} rank(s) on {} node(s){sizes}{took}{skipped}",
        log.ranks(),
        log.nodes().max(1)
    ))
    .evidence_all(evidence)
}

fn skipped_note(log: &NcclLog) -> String {
    let mut parts = Vec::new();
    if log.unreadable_lines > 0 {
        parts.push(format!(
            "skipped {} unreadable line(s)",
            log.unreadable_lines
        ));
    }
    if log.dropped_rows > 0 {
        parts.push(format!(
            "ignored {} row(s) past the first {}",
            log.dropped_rows,
            log.rows.len()
        ));
    }
    if log.dropped_tables > 0 {
        // Their tests are not named above; their rows were not read, their failed
        // `Out of bounds` footers still are (nccl.wrong_results).
        parts.push(format!(
            "did not keep {} test table(s) past the first {}",
            log.dropped_tables,
            log.tables.len()
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}
