//! `nccl.test_errors`: what went wrong in a run — nccl-tests' failure lines, IB completion
//! errors and `# error:` (reference/nccl.md §5, §11, §13), and in an application's log the
//! collective timeouts, NCCL error strings and error WARN lines (issue 15) — with the layer the
//! error most likely points at.

use super::{each_run, naming_nodes, quote};
use crate::answers::nccl::NcclRun;
use crate::answers::nccl::{FailureKind, LogKind, NcclLog, ibv_wc_status_name};
use crate::checks::{Context, Outcome};
use crate::report::{Action, Evidence};

/// Where an error most likely comes from (nccl.md §11, §13): a phrase, a hint, an action.
fn diagnose(log: &NcclLog, error: &str, kind: Option<FailureKind>) -> (String, String, Action) {
    let lower = error.to_ascii_lowercase();
    if !log.ib_completions.is_empty() {
        let mut statuses: Vec<u32> = log.ib_completions.iter().filter_map(|c| c.status).collect();
        statuses.sort_unstable();
        statuses.dedup();
        let named: Vec<String> = statuses
            .iter()
            .map(|s| match ibv_wc_status_name(*s) {
                Some(n) => format!("status {s} {n}"),
                None => format!("status {s}"),
            })
            .collect();
        let what = format!(
            "{} ib completion error(s){}: points at the rdma layer",
            log.ib_completion_count,
            if named.is_empty() {
                String::new()
            } else {
                format!(" ({})", named.join(", "))
            }
        );
        // §11: NCCL's own hints per status (printIbWcStatusHint).
        let (hint, action) = if statuses.contains(&4) {
            (
                "LOC_PROT_ERR: GPUDirect RDMA registration blocked, usually ACS on the PCIe switches: check `lspci -vvv | grep ACSCtl` and the topology layer; then `gpudoctor check --only rdma`",
                Action::FixConfig,
            )
        } else if statuses.contains(&12) || statuses.contains(&13) {
            (
                "retry counter exceeded: link or fabric loss between the nodes, or NCCL_IB_TIMEOUT too short (default 20): check `ibstat`, port error counters (`perfquery -x`), cables and switch ports; `gpudoctor check --only rdma` on both nodes",
                Action::HardwareInspection,
            )
        } else if statuses.contains(&5) {
            (
                "WR_FLUSH_ERR: NICs that cannot talk to each other (routing, partition keys, RoCE GID/VLAN): check the fabric configuration; `gpudoctor check --only rdma` on both nodes",
                Action::FixConfig,
            )
        } else {
            (
                "check the rdma layer on both nodes (`gpudoctor check --only rdma`, `ibstat`, port counters)",
                Action::HardwareInspection,
            )
        };
        return (what, hint.to_string(), action);
    }
    if log.nvls_bind_failure.is_some() {
        return (
            "nvls multicast memory could not be bound: points at the nvlink layer (fabric manager / nvswitches)".to_string(),
            "check `gpudoctor check --only nvlink` and `systemctl status nvidia-fabricmanager`; NCCL_NVLS_ENABLE=0 works around it".to_string(),
            Action::RestartComponent,
        );
    }
    if kind == Some(FailureKind::Cuda)
        || lower.contains("cuda error")
        || lower.contains("cuda failure")
    {
        return (
            "a cuda error: points at the driver layer (gpu fault or xid)".to_string(),
            "run `gpudoctor check --only driver` and look for XIDs (`dmesg | grep -i xid`); reset the gpu if it repeats".to_string(),
            Action::ResetGpu,
        );
    }
    if kind == Some(FailureKind::Timeout) || lower == "timeout" {
        return (
            "nccl-tests' own -T timeout expired: a hang".to_string(),
            "a hang: check ACS/IOMMU (topology layer), the nvlink fabric, net plugins that differ between nodes, bootstrap traffic (NCCL_SOCKET_IFNAME)".to_string(),
            Action::FixConfig,
        );
    }
    if lower.contains("system error") {
        return (
            "a syscall, verbs or socket failure: points at the rdma layer or the container's devices".to_string(),
            "check the IB port is ACTIVE (`ibstat`), NCCL_SOCKET_IFNAME names a real interface, /dev/infiniband is mounted and /dev/shm is large enough in the container; rerun with NCCL_DEBUG=INFO".to_string(),
            Action::FixConfig,
        );
    }
    if lower.contains("remote process exited") || lower.contains("network error") {
        return (
            "a peer process died or its network failed: look at the other node".to_string(),
            "read the other ranks' output for `Got completion` or test failure lines; run gpudoctor on every node of the run".to_string(),
            Action::CheckWorkload,
        );
    }
    if lower.contains("internal error")
        && log
            .warnings
            .iter()
            .any(|w| w.text.contains("neither AF_INET"))
    {
        return (
            "bootstrap interface misconfigured (address family neither AF_INET nor AF_INET6)"
                .to_string(),
            "set NCCL_SOCKET_IFNAME to the interface that reaches the other nodes (`ip -br addr`)"
                .to_string(),
            Action::FixConfig,
        );
    }
    if lower.contains("invalid usage") || lower.contains("invalid argument") {
        return (
            "nccl rejected the test's arguments or environment".to_string(),
            "read the NCCL WARN lines before the failure; check NCCL_* overrides".to_string(),
            Action::CheckWorkload,
        );
    }
    (
        "see the NCCL WARN lines before it".to_string(),
        "rerun with NCCL_DEBUG=INFO and read the WARN lines before the failure".to_string(),
        Action::CheckWorkload,
    )
}

pub(super) fn test_errors(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |_, run| {
        let log = &run.log;
        let app = run.meta.is_none() && log.kind() == LogKind::Application;
        let first = log.failures.first();
        let tests_failure =
            first.is_some() || !log.ib_completions.is_empty() || log.last_error.is_some();
        let app_failure = !log.timeouts.is_empty()
            || !log.app_errors.is_empty()
            || (app && !log.error_warnings.is_empty());
        if !tests_failure && app_failure {
            return naming_nodes(application_verdict(run), run);
        }
        if !tests_failure {
            if run.meta.is_none() && log.kind() == LogKind::Unknown {
                return Outcome::skip(format!(
                    "no nccl-tests or NCCL output in {} line(s) (see nccl.run_completed)",
                    log.lines
                ));
            }
            if app {
                return Outcome::pass(format!(
                    "no nccl error in {} line(s) of an application's log ({} NCCL INFO, {} NCCL WARN line(s))",
                    log.lines, log.info_lines, log.warning_count
                ));
            }
            return Outcome::pass(format!("no nccl or cuda failure in {} line(s)", log.lines));
        }
        let (head, error, kind) = match first {
            Some(f) => {
                let what = match f.kind {
                    FailureKind::Nccl => "test nccl failure",
                    FailureKind::Cuda => "test cuda failure",
                    FailureKind::Timeout => "test timeout",
                };
                let error = f.error.trim().trim_end_matches('/').trim().to_string();
                let head = if error.is_empty() {
                    format!("{what} on {} at {}", f.host, f.location)
                } else {
                    format!("{what} on {}: '{error}'", f.host)
                };
                (head, f.error.clone(), Some(f.kind))
            }
            None if !log.ib_completions.is_empty() => {
                ("ib completion errors".to_string(), String::new(), None)
            }
            None => {
                let text = log
                    .last_error
                    .as_ref()
                    .map(|q| q.text.clone())
                    .unwrap_or_default();
                (
                    format!("nccl reported an error: {}", text.trim_start_matches("# ")),
                    text,
                    None,
                )
            }
        };
        let more = if log.failure_count > 1 {
            format!(" (+{} more failure line(s))", log.failure_count - 1)
        } else {
            String::new()
        };
        let (points, hint, action) = diagnose(log, &error, kind);
        let mut evidence: Vec<Evidence> = log
            .failures
            .iter()
            .take(3)
            .map(|f| quote(run, &f.quote))
            .collect();
        evidence.extend(
            log.ib_completions
                .iter()
                .take(3)
                .map(|c| quote(run, &c.quote)),
        );
        if let Some(q) = &log.nvls_bind_failure {
            evidence.push(quote(run, q));
        }
        evidence.extend(
            log.warnings
                .iter()
                .filter(|w| {
                    !log.ib_completions.iter().any(|c| c.quote == **w)
                        && log.nvls_bind_failure.as_ref() != Some(*w)
                })
                .take(2)
                .map(|w| quote(run, w)),
        );
        if let Some(q) = &log.last_error {
            evidence.push(quote(run, q));
        }
        evidence.extend(app_evidence(run));
        let outcome = Outcome::fail(format!("{head}{more}; {points}"))
            .evidence_all(evidence)
            .hint(hint)
            .action(action);
        naming_nodes(outcome, run)
    })
}

/// Quotes of an application's failure lines: timeouts, NCCL errors, error WARN lines.
fn app_evidence(run: &NcclRun) -> Vec<Evidence> {
    let log = &run.log;
    let mut evidence: Vec<Evidence> = log
        .timeouts
        .iter()
        .take(3)
        .map(|t| quote(run, &t.quote))
        .collect();
    evidence.extend(log.app_errors.iter().take(2).map(|q| quote(run, q)));
    evidence.extend(
        log.error_warnings
            .iter()
            .filter(|w| !log.ib_completions.iter().any(|c| c.quote == **w))
            .take(3)
            .map(|q| quote(run, q)),
    );
    evidence
}

const TIMEOUT_HINT: &str = "a collective did not complete on every rank within the timeout: find the first error on any rank before it (every node's log; NCCL_DEBUG=INFO adds the WARN lines that say why), then run `gpudoctor check` on every node of the job (rdma, nvlink, driver layers); a rank that was only slower (data loading, checkpointing) needs a longer timeout (`init_process_group(timeout=...)`), not a repair";

/// An application's log: its collective timeouts, NCCL errors and error WARN lines.
fn application_verdict(run: &NcclRun) -> Outcome {
    let log = &run.log;
    let evidence = app_evidence(run);
    if let Some(first) = log.timeouts.first() {
        let mut ranks: Vec<u32> = log.timeouts.iter().filter_map(|t| t.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let who = match ranks.as_slice() {
            [] => String::new(),
            [one] => format!(" on rank {one}"),
            many => format!(
                " on ranks {}",
                many.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let op = first
            .op
            .as_deref()
            .unwrap_or("a collective")
            .to_ascii_lowercase();
        let how_long = match (first.ran_ms, first.timeout_ms) {
            (Some(ran), Some(limit)) => format!(" ran {ran} ms against its {limit} ms timeout"),
            (Some(ran), None) => format!(" ran {ran} ms"),
            _ => String::new(),
        };
        // An error the timeout followed says more than the timeout itself.
        let cause = log
            .app_errors
            .first()
            .or_else(|| log.error_warnings.first())
            .map(|q| q.text.clone());
        let (points, hint, action) = match cause {
            Some(text) if !log.ib_completions.is_empty() || text.contains("error") => {
                let (points, hint, action) = diagnose(log, &text, None);
                (format!("; before it: {points}"), hint, action)
            }
            _ => (
                String::new(),
                TIMEOUT_HINT.to_string(),
                Action::CheckWorkload,
            ),
        };
        return Outcome::fail(format!(
            "collective operation timeout{who}: {op}{how_long} (pytorch processgroupnccl watchdog, {} line(s)){points}",
            log.timeout_count
        ))
        .evidence_all(evidence)
        .hint(hint)
        .action(action);
    }
    let (head, text) = match (log.app_errors.first(), log.error_warnings.first()) {
        (Some(q), _) => ("nccl error in the application", q.text.clone()),
        (None, Some(q)) => ("nccl warn reporting an error", q.text.clone()),
        (None, None) => ("nccl error", String::new()),
    };
    let (points, hint, action) = diagnose(log, &text, None);
    let count = log.app_error_count + log.error_warning_count;
    Outcome::fail(format!(
        "{head}: '{}' ({count} line(s)); {points}",
        short(&text)
    ))
    .evidence_all(evidence)
    .hint(hint)
    .action(action)
}

/// The message of an error line: after `NCCL WARN`, else the NCCL error string in it.
fn short(text: &str) -> String {
    if let Some((_, after)) = text.split_once("NCCL WARN") {
        return after.trim().to_string();
    }
    const STRINGS: [&str; 4] = [
        "unhandled system error",
        "unhandled cuda error",
        "remote process exited or there was a network error",
        "internal error",
    ];
    match STRINGS.iter().find(|s| text.contains(*s)) {
        Some(s) => s.to_string(),
        None => text.chars().take(120).collect(),
    }
}
