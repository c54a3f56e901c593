//! NCCL layer: do collectives run at the expected speed, over the path they should take?
//! Judges nccl-tests results (a run made now, `--nccl-log`, or a capture's logs) read by
//! `source/nccl.rs` and `facts/nccl.rs`; it runs nothing and reads no file itself.
//!
//! "A working job does not prove it is using the fast path" (issue 7): NCCL falls back silently
//! to TCP sockets, to host-memory staging without GPUDirect RDMA, and to shared memory without
//! P2P. The verdicts, each quoting the log lines behind it (reference/nccl.md):
//! - `nccl.test_errors`: `Test NCCL/CUDA failure`, `Test timeout`, IB completion errors, with
//!   the layer they most likely point at (§5, §11, §13);
//! - `nccl.run_completed`: the run reached its footer; killed at gpudoctor's timeout, crashed or
//!   cut short fails with its last lines; a harness error (several header blocks, too few GPUs)
//!   fails as such, never as a bandwidth problem (§4, §7);
//! - `nccl.wrong_results`: `#wrong` > 0 or `Out of bounds values : N FAILED` (§4, §13);
//! - `nccl.socket_fallback`, `nccl.gpudirect_rdma`, `nccl.p2p_transport`, `nccl.nvls`: the
//!   transports from `NCCL_DEBUG=INFO` lines (§9, §10) against what the node has;
//! - `nccl.bus_bandwidth`: the peak busbw over sizes ≥ 1 GiB (never the sweep average, §4) against
//!   the profile for this run's shape (reference/profiles.md §1, §4; multi-node derived from the
//!   profile's NICs, nccl.md §12).
//!
//! The layer runs only when asked: a benchmark saturates every GPU and NIC for a minute, which a
//! default `gpudoctor check` on a node with workloads must not do. Without `--nccl`,
//! `--nccl-quick` or `--nccl-log` (or logs in a capture) every check skips, saying how to ask.

use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::nccl::{FailureKind, NcclLog, Quoted, Row, format_size, ibv_wc_status_name};
use crate::facts::nvml::Reading;
use crate::profile::{self, Profile};
use crate::report::{Action, Evidence, Figure, FigureName, Layer, Status};
use crate::source::nccl::{INSTALL_HINT, NcclProbe, NcclRun, RunExit};

/// Rows at least this large are "large sizes" (nccl.md §12: expectations are for ≥ 1–8 GiB;
/// NVLS needs more than 256 MB to reach its peak, `NVIDIA/nccl-tests#212`).
pub const LARGE_BYTES: u64 = 1 << 30;
/// Achievable NCCL busbw per NIC as a share of its line rate: NDR 400 Gb/s = 50 GB/s line rate,
/// "46-48GB/s per NIC" measured (`NVIDIA/nccl-tests#290`); HDR ≈ 24 of 25 (profiles.md §10).
/// 0.92 gives 46 and 23 (derived).
pub const NIC_EFFICIENCY: f64 = 0.92;
/// Fail below this share of the multi-node expectation: nccl.md §12 "≈ 0.9 × (per-NIC GB/s) ×
/// NICs per node" as the floor, the plain product as the expectation (profiles.md §4, derived).
pub const MULTI_NODE_FAIL_SHARE: f64 = 0.9;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "nccl.test_errors",
            layer: Layer::Nccl,
            title: "no NCCL or CUDA failure during the run",
            explain: Explain {
                reads: "nccl-tests output: `Test NCCL failure`, `Test CUDA failure`, `Test timeout`, `# error:` lines and NCCL WARN lines (IB completion errors, NVLS bind failures)",
                expects: "none of them",
                why: "a collective that fails here fails in every multi-GPU job; the error string and the WARN lines before it say which layer broke (an IB completion error is the network, a CUDA error the GPU)",
                fix: "follow the layer named in the finding: IB completion errors → `gpudoctor check --only rdma`, `ibstat`, port counters; `unhandled system error` → IB port, NCCL_SOCKET_IFNAME, /dev/infiniband and /dev/shm in the container; CUDA errors → the driver layer's XIDs",
            },
            run: test_errors,
        },
        CheckDef {
            code: "nccl.run_completed",
            layer: Layer::Nccl,
            title: "the benchmark ran to its footer",
            explain: Explain {
                reads: "nccl-tests output (footer lines `Out of bounds values`, `Avg bus bandwidth`, `Collective test concluded`), the process exit status and gpudoctor's timeout; `# nThread` header blocks; `Invalid number of GPUs`",
                expects: "the footer printed and exit status 0 (7 when wrong values or NCCL_TESTS_MIN_BW explain it); one header block per run",
                why: "a run that hangs or dies midway is the commonest NCCL failure in production; several header blocks mean every process ran its own test (a non-MPI build under mpirun), so none of its numbers mean anything",
                fix: "a hang: check ACS/IOMMU (topology layer), the NVLink fabric (nvlink layer), net plugins that differ between nodes, and blocked bootstrap traffic (NCCL_SOCKET_IFNAME); a harness error: build nccl-tests with MPI=1 or fix --nccl-gpus; raise --nccl-timeout only if the run was merely slow",
            },
            run: run_completed,
        },
        CheckDef {
            code: "nccl.wrong_results",
            layer: Layer::Nccl,
            title: "collectives return correct data",
            explain: Explain {
                reads: "the `#wrong` column of every result row and the `Out of bounds values` footer",
                expects: "0 wrong elements at every size, `Out of bounds values : 0 OK`",
                why: "wrong values are silent data corruption: a faulty GPU, NVLink or PCIe path, P2P broken by ACS/IOMMU, or a driver bug; training continues with garbage gradients",
                fix: "take the node out of service; check XIDs, NVLink error counters and ACS on the PCIe switches; run `dcgmi diag -r 3`; a GPU that corrupts again goes to hardware inspection",
            },
            run: wrong_results,
        },
        CheckDef {
            code: "nccl.socket_fallback",
            layer: Layer::Nccl,
            title: "network traffic uses RDMA, not TCP sockets",
            explain: Explain {
                reads: "NCCL_DEBUG=INFO lines `Using network …`, `via NET/<net>/…`, `NET/Socket : Using`, `NET/IB : No device found`, WARN `Failed to open libibverbs`, `NET/Plugin` lines; sys/class/infiniband; the profile's RDMA ports",
                expects: "on a node with RDMA devices, network channels over NET/IB or an RDMA plugin, never NET/Socket; the network plugin in use is reported",
                why: "NCCL falls back to TCP without a word when libibverbs is missing in the image, /dev/infiniband is not mounted, NCCL_IB_DISABLE=1 is set or no port is active: inter-node bandwidth collapses to a few GB/s",
                fix: "install rdma-core (libibverbs) in the image, mount /dev/infiniband (RDMA device plugin or privileged), unset NCCL_IB_DISABLE, check `ibstat` for an ACTIVE port",
            },
            run: socket_fallback,
        },
        CheckDef {
            code: "nccl.gpudirect_rdma",
            layer: Layer::Nccl,
            title: "network traffic uses GPUDirect RDMA where it can",
            explain: Explain {
                reads: "NCCL_DEBUG=INFO `via NET/<net>/<dev>[/GDRDMA]` lines, `GPU Direct RDMA Enabled|Disabled for HCA`, `DMA-BUF is available`, `<VAR> set by environment to`; the nvidia_peermem module; the profile's RDMA ports",
                expects: "`/GDRDMA` on every network channel when nvidia_peermem or DMA-BUF is available or the platform is built for GPUDirect",
                why: "without GPUDirect RDMA every network transfer is staged through host memory: roughly half the inter-node bandwidth (`NVIDIA/nccl#214`)",
                fix: "load nvidia_peermem (GPU Operator: driver.rdma.enabled=true) or use a DMA-BUF capable kernel and open driver; unset NCCL_NET_GDR_LEVEL/NCCL_NET_GDR_READ overrides; keep each GPU's NIC at PIX/PXB (topology layer)",
            },
            run: gpudirect_rdma,
        },
        CheckDef {
            code: "nccl.p2p_transport",
            layer: Layer::Nccl,
            title: "GPUs of one node talk over P2P, not host memory",
            explain: Explain {
                reads: "NCCL_DEBUG=INFO `via P2P/…`, `via SHM/…` and intra-node `via NET/…` lines; NVML NVLink state; the profile's NVLinks per GPU",
                expects: "on a node with NVLink, every intra-node channel over P2P",
                why: "SHM staging through host memory instead of NVLink P2P costs an order of magnitude of bandwidth; it happens when NCCL_P2P_DISABLE is set, NVLink is down, the fabric manager is not running or ACS blocks P2P",
                fix: "unset NCCL_P2P_DISABLE/NCCL_P2P_LEVEL/NCCL_SHM_DISABLE overrides; check the nvlink layer (links, fabric manager) and ACS on the PCIe switches (topology layer)",
            },
            run: p2p_transport,
        },
        CheckDef {
            code: "nccl.nvls",
            layer: Layer::Nccl,
            title: "NVLink SHARP (NVLS) in use where the platform has it",
            explain: Explain {
                reads: "NCCL_DEBUG=INFO `NVLS multicast support is [not ]available`, `N nvls channels`, WARN `Failed to bind NVLink SHARP`; the profile's `nccl_nvls`",
                expects: "on profiles with nccl_nvls = true (HGX H100/H200), a non-zero nvls channel count in all_reduce runs",
                why: "NVLS offloads the reduction into the NVSwitches: ~480 GB/s busbw on 8 x H100 against ~370 for rings (`NVIDIA/nccl-tests#212`); without it the node is a fifth slower",
                fix: "check the nvlink layer (fabric manager running, fabric trained), unset NCCL_NVLS_ENABLE=0, use NCCL ≥ 2.17 with CUDA ≥ 12.1 and driver ≥ 530",
            },
            run: nvls,
        },
        CheckDef {
            code: "nccl.bus_bandwidth",
            layer: Layer::Nccl,
            title: "bus bandwidth at large sizes meets the profile",
            explain: Explain {
                reads: "the busbw of result rows of 1 GiB and more (the sweep average is shown, never judged); the run's shape (ranks, nodes from device lines); the profile's nccl_busbw_* (NVLS) or nccl_ring_busbw_* thresholds, and for multi-node runs its RDMA ports and rate",
                expects: "single node: peak busbw ≥ the profile's warn figure (hgx-h100: 480 with NVLS, 370 ring); N nodes: ≥ the profile's nccl_multinode_busbw_* (hgx-a100: 192, NVIDIA/nccl#812), else ≥ NICs × 0.92 × rate/8 (derived), failing below 0.9 × that",
                why: "the sweep average mixes latency-bound small sizes in and reads far below peak; the large-size peak is what training all-reduces see, and it is where a downtrained PCIe link, a missing NVLink or a slow NIC shows",
                fix: "read the transport findings first (socket fallback, no GPUDirect, SHM, no NVLS); else check driver.pcie_link, nvlink.links_active and the rdma layer; rerun with --nccl-quick to confirm",
            },
            run: bus_bandwidth,
        },
    ]
}

/// The runs to judge, or the finished outcome when there are none.
fn runs<'c>(ctx: &'c Context<'_>) -> Result<&'c [NcclRun], Outcome> {
    match ctx.nccl() {
        NcclProbe::Runs(runs) if !runs.is_empty() => Ok(runs),
        NcclProbe::Runs(_) => Err(Outcome::skip("no nccl log to judge")),
        NcclProbe::NotRequested { why } => Err(Outcome::skip(why.clone())),
        NcclProbe::BinaryMissing { binary, searched } => Err(Outcome::skip(format!(
            "{binary} not found in {}; {INSTALL_HINT}",
            searched.join(", ")
        ))),
        NcclProbe::Unavailable { .. } => Err(Outcome::skip(
            "no nccl result to judge (see nccl.run_completed)",
        )),
    }
}

/// Judge every run with `judge`; several runs merge into one outcome (worst status first).
fn each_run(ctx: &Context<'_>, judge: impl Fn(&Context<'_>, &NcclRun) -> Outcome) -> Outcome {
    let runs = match runs(ctx) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let outcomes: Vec<(String, Outcome)> = runs
        .iter()
        .map(|run| (run.name.clone(), judge(ctx, run)))
        .collect();
    if outcomes.len() == 1 {
        return outcomes
            .into_iter()
            .next()
            .map(|(_, o)| o)
            .unwrap_or_else(|| Outcome::skip(""));
    }
    let worst = outcomes
        .iter()
        .map(|(_, o)| o.status)
        .max_by_key(|s| s.severity())
        .unwrap_or(Status::Skip);
    let summary = outcomes
        .iter()
        .map(|(name, o)| format!("{name}: {}", o.summary))
        .collect::<Vec<_>>()
        .join("; ");
    let lead = outcomes.iter().find(|(_, o)| o.status == worst);
    let mut merged = Outcome::skip(summary);
    merged.status = worst;
    merged.hint = lead.and_then(|(_, o)| o.hint.clone());
    merged.action = lead.map_or(Action::None, |(_, o)| o.action);
    for (_, o) in outcomes {
        merged.evidence.extend(o.evidence);
        merged.figures.extend(o.figures);
    }
    merged
}

/// A log line as evidence: `origin:line`, the text.
fn quote(run: &NcclRun, q: &Quoted) -> Evidence {
    Evidence::new(format!("{}:{}", run.origin, q.line), q.text.clone())
}

fn row_evidence(run: &NcclRun, row: &Row) -> Evidence {
    Evidence::new(format!("{}:{}", run.origin, row.line), row.text.clone())
}

/// `NCCL_DEBUG=INFO` lines are needed to see transports.
fn needs_info(log: &NcclLog) -> Option<Outcome> {
    (!log.has_info()).then(|| {
        Outcome::skip("no NCCL_DEBUG=INFO lines in the log: transports unknown")
            .hint("rerun with NCCL_DEBUG=INFO (gpudoctor sets it when it runs the test itself)")
    })
}

/// Environment settings NCCL reported, as `NAME=value`.
fn env_setting(run: &NcclRun, name: &str) -> Option<String> {
    run.log
        .transports
        .env
        .get(name)
        .or_else(|| run.meta.as_ref().and_then(|m| m.env.get(name)))
        .map(|v| format!("{name}={v}"))
}

// ---------------------------------------------------------------------------------------------
// nccl.test_errors
// ---------------------------------------------------------------------------------------------

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
    if kind == Some(FailureKind::Cuda) || lower.contains("cuda error") {
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

fn test_errors(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |_, run| {
        let log = &run.log;
        let first = log.failures.first();
        if first.is_none() && log.ib_completions.is_empty() && log.last_error.is_none() {
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
        let outcome = Outcome::fail(format!("{head}{more}; {points}"))
            .evidence_all(evidence)
            .hint(hint)
            .action(action);
        naming_nodes(outcome, run)
    })
}

// ---------------------------------------------------------------------------------------------
// nccl.run_completed
// ---------------------------------------------------------------------------------------------

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

fn tail_evidence(run: &NcclRun, n: usize) -> Vec<Evidence> {
    let tail = &run.log.tail;
    tail[tail.len().saturating_sub(n)..]
        .iter()
        .map(|q| quote(run, q))
        .collect()
}

/// Every node the log shows (device lines, else NCCL INFO prefixes), as evidence: a multi-node
/// run's report names who took part — whether it passed, hung, crashed or failed — for the
/// ticket and for `gpudoctor check` on each of them (issue 9).
fn nodes_evidence(run: &NcclRun) -> Option<Evidence> {
    let hosts: Vec<&str> = run.log.hosts().into_iter().collect();
    (!hosts.is_empty()).then(|| {
        Evidence::new(
            run.origin.clone(),
            format!("nodes in the run: {}", hosts.join(" ")),
        )
    })
}

/// A verdict on the run as a whole (not a skip) with the nodes of the run added to its evidence.
fn naming_nodes(outcome: Outcome, run: &NcclRun) -> Outcome {
    if outcome.status == Status::Skip {
        return outcome;
    }
    outcome.evidence_all(nodes_evidence(run))
}

const HANG_HINT: &str = "a hang (nccl.md §13): check ACS/IOMMU blocking P2P (`gpudoctor check --only topology`), the nvlink fabric (`--only nvlink`), net plugins that differ between nodes, and bootstrap traffic (NCCL_SOCKET_IFNAME); if it was only slow, raise --nccl-timeout";

fn run_completed(ctx: &Context<'_>) -> Outcome {
    if let NcclProbe::Unavailable { origin, message } = ctx.nccl() {
        return Outcome::error(format!("could not run or read nccl-tests: {message}"))
            .evidence(Evidence::new(origin.clone(), message.clone()))
            .hint("check the path and permissions; run the command by hand to see why it does not start");
    }
    each_run(ctx, |_, run| {
        naming_nodes(completed_verdict(run), run).evidence_all(killed_evidence(run))
    })
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
    if log.header_blocks > 1 {
        return Outcome::fail(format!(
            "harness error, not a node fault: {} separate test headers in one output, so every process ran its own test (a non-mpi nccl-tests build under mpirun?)",
            log.header_blocks
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
    if !log.has_footer() {
        if log.rows.is_empty()
            && log.header_blocks == 0
            && log.devices.is_empty()
            && !log.has_info()
        {
            return Outcome::error(format!(
                "no nccl-tests output in {} line(s) ({} unreadable)",
                log.lines, log.unreadable_lines
            ))
            .evidence_all(tail_evidence(run, 2))
            .hint("pass the stdout of an nccl-tests binary (`all_reduce_perf ... > log`), ideally with NCCL_DEBUG=INFO");
        }
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
    let collective = collective_name(run);
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
    Outcome::pass(format!(
        "{collective} ran to its footer: {} rank(s) on {} node(s){sizes}{took}{skipped}",
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
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}

/// `all_reduce_perf` → `all_reduce`.
fn collective_name(run: &NcclRun) -> String {
    let name = run.log.collective.as_deref().unwrap_or(&run.name);
    name.trim_end_matches("_mpi")
        .trim_end_matches("_perf")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// nccl.wrong_results
// ---------------------------------------------------------------------------------------------

fn wrong_results(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |_, run| {
        let log = &run.log;
        if log.rows.is_empty() && log.out_of_bounds.is_none() {
            return Outcome::skip("no result rows to check");
        }
        let wrong: Vec<&Row> = log.wrong_rows().collect();
        let oob = log.out_of_bounds.as_ref().filter(|(n, _)| *n > 0);
        if wrong.is_empty() && oob.is_none() {
            let checked = log
                .rows
                .iter()
                .filter(|r| {
                    r.measures()
                        .any(|m| !matches!(m.wrong, crate::facts::nccl::Wrong::NotChecked))
                })
                .count();
            if checked == 0 && log.out_of_bounds.is_none() {
                return Outcome::skip("results were not checked (-c 0): #wrong is N/A");
            }
            return Outcome::pass(format!(
                "no wrong values in {} result row(s)",
                log.rows.len()
            ));
        }
        let sizes: Vec<String> = wrong
            .iter()
            .take(6)
            .map(|r| format!("{} ({} element(s))", format_size(r.size), r.wrong_count()))
            .collect();
        let summary = if wrong.is_empty() {
            format!(
                "out of bounds values: {} failed check(s): data corruption",
                oob.map_or(0, |(n, _)| *n)
            )
        } else {
            format!(
                "wrong results at {} size(s): {}{}: data corruption on the gpu, nvlink or pcie path",
                wrong.len(),
                sizes.join(", "),
                if wrong.len() > 6 { ", ..." } else { "" }
            )
        };
        let mut evidence: Vec<Evidence> = wrong
            .iter()
            .take(3)
            .map(|r| row_evidence(run, r).expected("#wrong 0"))
            .collect();
        if let Some((_, q)) = &log.out_of_bounds {
            evidence.push(quote(run, q).expected("Out of bounds values : 0 OK"));
        }
        let outcome = Outcome::fail(summary)
            .evidence_all(evidence)
            .hint("take the node out of service: check `gpudoctor check --only driver,nvlink` (XIDs, NVLink errors) and ACS on the pcie switches; run `dcgmi diag -r 3`; a gpu that corrupts again goes to hardware inspection")
            .action(Action::HardwareInspection);
        // Which node corrupted is for the operator to find; which nodes to look at is not.
        naming_nodes(outcome, run)
    })
}

// ---------------------------------------------------------------------------------------------
// Transports
// ---------------------------------------------------------------------------------------------

/// The node has (or should have) RDMA: devices in sysfs (the rdma layer's facts), or the
/// profile expects ports.
fn rdma_expected(ctx: &Context<'_>, run: &NcclRun) -> (bool, Option<Evidence>) {
    if let Ok(facts) = ctx.rdma()
        && !facts.devices.is_empty()
    {
        let devices = &facts.devices;
        // `4: ACTIVE` (sysfs.md §8).
        let active = devices
            .iter()
            .filter(|d| {
                d.ports
                    .iter()
                    .any(|p| p.state.as_ref().is_some_and(|(n, _)| *n == 4))
            })
            .count();
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).take(4).collect();
        return (
            true,
            Some(Evidence::new(
                "sys/class/infiniband",
                format!(
                    "{} rdma device(s) ({}{}), {active} with an active port",
                    devices.len(),
                    names.join(", "),
                    if devices.len() > 4 { ", ..." } else { "" }
                ),
            )),
        );
    }
    match judging_profile(ctx, run).and_then(|p| p.rdma_ports.map(|n| (n, p.name))) {
        Some((n, name)) if n > 0 => (
            true,
            Some(Evidence::new(
                "profile",
                format!("profile {name} expects {n} rdma port(s)"),
            )),
        ),
        _ => (false, None),
    }
}

/// Why NCCL used sockets, from its own lines (§10, §13).
fn socket_cause(run: &NcclRun) -> (String, String, Vec<Evidence>) {
    let log = &run.log;
    let t = &log.transports;
    if let Some(q) = &log.ibverbs_missing {
        return (
            "libibverbs is missing where nccl runs".to_string(),
            "install rdma-core (libibverbs1, libmlx5) in the container image".to_string(),
            vec![quote(run, q)],
        );
    }
    if let Some(v) = env_setting(run, "NCCL_IB_DISABLE").filter(|v| v.ends_with("=1")) {
        return (
            format!("{v} is set"),
            "unset NCCL_IB_DISABLE".to_string(),
            vec![Evidence::new("environment", v)],
        );
    }
    if let Some(q) = &t.ib_no_device {
        return (
            "nccl found no usable hca".to_string(),
            "mount /dev/infiniband into the container (rdma device plugin, or privileged) and check `ibstat` for an ACTIVE port; check NCCL_IB_HCA names a real device".to_string(),
            vec![quote(run, q)],
        );
    }
    (
        "no NET/IB line explains it".to_string(),
        "check that /dev/infiniband is in the container, rdma-core is installed and a port is ACTIVE (`ibstat`); rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET".to_string(),
        Vec::new(),
    )
}

fn socket_fallback(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        if let Some(o) = needs_info(log) {
            return o;
        }
        let t = &log.transports;
        let (rdma, rdma_ev) = rdma_expected(ctx, run);
        let socket = t.net.get("Socket").map_or(0, |n| n.channels);
        let total = t.net_channels();
        let plugin = match &t.plugin {
            Some((name, _)) => format!("net plugin {name}"),
            None => "internal net".to_string(),
        };
        let chosen = t.network.as_ref().map(|(n, _)| n.as_str());
        if socket > 0 || (total == 0 && chosen == Some("Socket")) {
            let (cause, hint, mut evidence) = socket_cause(run);
            if let Some(q) = t.net.get("Socket").and_then(|n| n.example.as_ref()) {
                evidence.insert(0, quote(run, q));
            } else if let Some((_, q)) = &t.network {
                evidence.insert(0, quote(run, q));
            }
            if let Some(q) = &t.socket_interfaces {
                evidence.push(quote(run, q));
            }
            if !rdma {
                return Outcome::pass(format!(
                    "network traffic over tcp (NET/Socket): this node has no rdma device ({cause})"
                ));
            }
            evidence.extend(rdma_ev);
            if socket > 0 {
                return Outcome::fail(format!(
                    "{socket} of {total} network channel(s) over tcp sockets (NET/Socket) on a node with rdma: {cause}"
                ))
                .evidence_all(evidence)
                .hint(hint)
                .action(Action::FixConfig);
            }
            return Outcome::warn(format!(
                "nccl chose NET/Socket on a node with rdma ({cause}): multi-node jobs here would run over tcp"
            ))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::FixConfig);
        }
        if total > 0 {
            let nets: Vec<String> = t
                .net
                .iter()
                .map(|(name, n)| format!("NET/{name} ({} channel(s))", n.channels))
                .collect();
            return Outcome::pass(format!(
                "network traffic over {} via {plugin}",
                nets.join(", ")
            ));
        }
        match chosen {
            Some(net) => Outcome::pass(format!(
                "no network traffic in this run ({} node(s)); nccl's network is {net} via {plugin}",
                log.nodes().max(1)
            )),
            None => Outcome::skip("no network traffic and no `Using network` line in this run"),
        }
    })
}

fn peermem_loaded(ctx: &Context<'_>) -> Option<&'static str> {
    let modules = ctx.modules().as_ref().ok()?;
    ["nvidia_peermem", "nv_peer_mem"]
        .into_iter()
        .find(|m| modules.get(m).is_some_and(|m| m.is_live()))
}

fn gpudirect_rdma(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        if let Some(o) = needs_info(log) {
            return o;
        }
        let t = &log.transports;
        let rdma_nets: Vec<(&String, &crate::facts::nccl::NetUse)> = t
            .net
            .iter()
            .filter(|(name, _)| name.as_str() != "Socket")
            .collect();
        let channels: u64 = rdma_nets.iter().map(|(_, n)| n.channels).sum();
        let gdr: u64 = rdma_nets.iter().map(|(_, n)| n.gdr_channels).sum();
        if channels == 0 {
            return Outcome::skip("no rdma network traffic in this run");
        }
        if gdr == channels {
            return Outcome::pass(format!(
                "gpudirect rdma on all {channels} rdma network channel(s)"
            ));
        }
        let peermem = peermem_loaded(ctx);
        let platform = judging_profile(ctx, run)
            .filter(|p| p.rdma_ports.is_some_and(|n| n > 0))
            .map(|p| p.name);
        let should =
            peermem.is_some() || t.dmabuf_available || t.gdr_enabled_hcas > 0 || platform.is_some();
        let missing = channels - gdr;
        let mut evidence: Vec<Evidence> = rdma_nets
            .iter()
            .filter_map(|(_, n)| n.example_without_gdr.as_ref())
            .take(2)
            .map(|q| quote(run, q).expected("…/GDRDMA"))
            .collect();
        if !should {
            return Outcome::pass(format!(
                "{missing} of {channels} rdma channel(s) without gpudirect rdma: no nvidia_peermem, no dma-buf, no platform expectation"
            ));
        }
        let gdr_vars: Vec<String> = ["NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ"]
            .iter()
            .filter_map(|v| env_setting(run, v))
            .collect();
        let (cause, hint) = if !gdr_vars.is_empty() {
            (
                format!("{} overrides nccl's choice", gdr_vars.join(" ")),
                format!(
                    "unset {}",
                    gdr_vars
                        .iter()
                        .map(|v| v.split('=').next().unwrap_or(v))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )
        } else if t.gdr_disabled_hcas > 0 {
            if let Some(q) = &t.gdr_disabled_example {
                evidence.push(quote(run, q));
            }
            (
                "nccl says gpu direct rdma is disabled for the hca (no peer-memory module, no dma-buf)".to_string(),
                "load nvidia_peermem (`modprobe nvidia_peermem`; GPU Operator: driver.rdma.enabled=true) or use a dma-buf capable kernel with the open driver".to_string(),
            )
        } else {
            (
                "the gpu↔nic distance is beyond NCCL_NET_GDR_LEVEL (default PXB)".to_string(),
                "check each gpu's nearest nic (`gpudoctor topo`, topology layer); keep gpu and nic under one pcie switch".to_string(),
            )
        };
        match (peermem, t.dmabuf_available, &platform) {
            (Some(m), _, _) => evidence.push(Evidence::new("proc/modules", format!("{m} loaded"))),
            (None, true, _) => {}
            (None, false, Some(name)) => evidence.push(
                Evidence::new("proc/modules", "no nvidia_peermem")
                    .expected(format!("gpudirect rdma on profile {name}")),
            ),
            (None, false, None) => {}
        }
        Outcome::warn(format!(
            "{missing} of {channels} rdma network channel(s) without gpudirect rdma: data staged through host memory ({cause})"
        ))
        .evidence_all(evidence)
        .hint(hint)
        .action(Action::FixConfig)
    })
}

/// GPUs here have NVLink: NVML reports active links, or the profile expects them.
fn nvlink_present(ctx: &Context<'_>, run: &NcclRun) -> Option<String> {
    let nvml = ctx.nvml();
    let active = nvml
        .devices
        .iter()
        .filter(|d| matches!(&d.nvlinks, Reading::Value(links) if links.iter().any(|l| l.active)))
        .count();
    if active > 0 {
        return Some(format!("nvml: {active} gpu(s) with active nvlinks"));
    }
    judging_profile(ctx, run)
        .and_then(|p| p.nvlinks_per_gpu.filter(|n| *n > 0).map(|n| (n, p.name)))
        .map(|(n, name)| format!("profile {name}: {n} nvlinks per gpu"))
}

fn p2p_transport(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        if let Some(o) = needs_info(log) {
            return o;
        }
        let t = &log.transports;
        let nodes = log.nodes().max(1);
        let intra_net = if nodes == 1 { t.net_channels() } else { 0 };
        let p2p = t.p2p.channels;
        let shm = t.shm.channels;
        if p2p + shm + intra_net == 0 {
            return Outcome::skip("no intra-node channel in this run (one gpu per node?)");
        }
        let flavours: Vec<String> = t.p2p_kinds.keys().cloned().collect();
        let Some(nvlink) = nvlink_present(ctx, run) else {
            return Outcome::pass(format!(
                "intra-node: {p2p} p2p, {shm} shm channel(s); no nvlink on this node"
            ));
        };
        if shm == 0 && intra_net == 0 {
            return Outcome::pass(format!(
                "all {p2p} intra-node channel(s) over p2p ({})",
                flavours.join(", ")
            ));
        }
        let vars: Vec<String> = ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"]
            .iter()
            .filter_map(|v| env_setting(run, v))
            .collect();
        let mut evidence = Vec::new();
        if let Some(q) = &t.shm.example {
            evidence.push(quote(run, q).expected("via P2P/…"));
        }
        if intra_net > 0
            && let Some(q) = t.net.values().find_map(|n| n.example.as_ref())
        {
            evidence.push(quote(run, q).expected("via P2P/…"));
        }
        evidence.push(Evidence::new("nvlink", nvlink));
        let what = if intra_net > 0 {
            format!("{intra_net} intra-node channel(s) through the network")
        } else {
            format!("{shm} intra-node channel(s) through host shared memory (SHM)")
        };
        let (cause, hint, action) = if vars.is_empty() {
            (
                "p2p unavailable".to_string(),
                "check `gpudoctor check --only nvlink` (links, fabric manager) and ACS on the pcie switches (topology layer)".to_string(),
                Action::RestartComponent,
            )
        } else {
            (
                format!("{} set", vars.join(" ")),
                format!(
                    "unset {} unless the run means to bypass nvlink",
                    vars.iter()
                        .map(|v| v.split('=').next().unwrap_or(v))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                Action::FixConfig,
            )
        };
        Outcome::warn(format!(
            "{what}, not p2p/nvlink ({p2p} p2p channel(s)); {cause}"
        ))
        .evidence_all(evidence)
        .hint(hint)
        .action(action)
    })
}

/// NVLS use from the log: `Some(true)` channels > 0, `Some(false)` said absent, `None` silent.
fn nvls_used(log: &NcclLog) -> Option<bool> {
    let t = &log.transports;
    match (&t.nvls_channels, &t.nvls_support) {
        (Some((n, _)), _) => Some(*n > 0),
        (None, Some((false, _))) => Some(false),
        (None, Some((true, _))) => None,
        (None, None) => None,
    }
}

fn nvls(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        let Some(profile) = judging_profile(ctx, run) else {
            return Outcome::skip("no platform profile: no nvls expectation");
        };
        if profile.nccl_nvls != Some(true) {
            return Outcome::skip(format!("profile {} expects no nvls", profile.name));
        }
        if collective_name(run) != "all_reduce" {
            return Outcome::skip(format!(
                "nvls is judged on all_reduce runs, this is {}",
                collective_name(run)
            ));
        }
        if let Some(o) = needs_info(log) {
            return o;
        }
        let per_node = log.ranks() / log.nodes().max(1);
        if per_node < 2 {
            return Outcome::skip("one gpu per node: nothing for nvls to reduce");
        }
        let t = &log.transports;
        match nvls_used(log) {
            Some(true) => Outcome::pass(format!(
                "nvls in use: {} nvls channel(s)",
                t.nvls_channels.as_ref().map_or(0, |(n, _)| *n)
            )),
            None => Outcome::skip("nccl did not say whether it used nvls (older than 2.17?)"),
            Some(false) => {
                let mut evidence = Vec::new();
                if let Some((_, q)) = &t.nvls_support {
                    evidence.push(quote(run, q).expected("NVLS multicast support is available"));
                }
                if let Some((_, q)) = &t.nvls_channels {
                    evidence.push(quote(run, q).expected("nvls channels > 0"));
                }
                if let Some(q) = &log.nvls_bind_failure {
                    evidence.push(quote(run, q));
                }
                let disabled = env_setting(run, "NCCL_NVLS_ENABLE").filter(|v| v.ends_with("=0"));
                let (cause, hint, action) = match disabled {
                    Some(v) => (
                        format!("{v} set"),
                        "unset NCCL_NVLS_ENABLE".to_string(),
                        Action::FixConfig,
                    ),
                    None => (
                        "nvlink sharp unavailable".to_string(),
                        "check `gpudoctor check --only nvlink` (fabric manager running, fabric trained) and that NCCL ≥ 2.17, CUDA ≥ 12.1 and driver ≥ 530 are in use".to_string(),
                        Action::RestartComponent,
                    ),
                };
                Outcome::warn(format!(
                    "nvls (nvlink sharp) not used, profile {} expects it ({cause}): bandwidth judged against the ring figure",
                    profile.name
                ))
                .evidence_all(evidence)
                .hint(hint)
                .action(action)
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// nccl.bus_bandwidth
// ---------------------------------------------------------------------------------------------

/// The profile in force, else one chosen from the log's own device lines (judging a log copied
/// from another node, where NVML here sees no GPU).
fn judging_profile(ctx: &Context<'_>, run: &NcclRun) -> Option<Profile> {
    if let Some(p) = ctx.profile() {
        return Some(p.clone());
    }
    let first_host = run.log.devices.first().map(|d| d.host.as_str())?;
    let names: Vec<&str> = run
        .log
        .devices
        .iter()
        .filter(|d| d.host == first_host)
        .map(|d| d.name.as_str())
        .collect();
    profile::select_auto(&names)
}

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
    // Multi-node: the profile's own expectation when it states one (a published figure, or a
    // site's measured baseline in a profile file)...
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
            format!(
                "{nodes} nodes, profile {} multi-node expectation",
                profile.name
            ),
        ));
    }
    // ... else inter-node traffic is bounded by the NICs (nccl.md §12, derived).
    let (Some(ports), Some(rate)) = (profile.rdma_ports, profile.rdma_rate_gbps) else {
        return Err(format!(
            "profile {} states no rdma ports and rate: no {nodes}-node expectation",
            profile.name
        ));
    };
    let per_nic = f64::from(rate) / 8.0 * NIC_EFFICIENCY;
    let mut warn = f64::from(ports) * per_nic;
    if let Some((w, _, _)) = &single {
        warn = warn.min(*w);
    }
    let fail = warn * MULTI_NODE_FAIL_SHARE;
    Ok((
        warn,
        fail,
        format!("{nodes} nodes, derived from {ports} x {rate} Gb/s nics"),
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
        "a downtrained pcie link, a missing nvlink or a slow nic (nccl.md §13): check driver.pcie_link, nvlink.links_active and the rdma layer; rerun with --nccl-quick to confirm".to_string(),
        Action::HardwareInspection,
    )
}

fn bus_bandwidth(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let outcome = bandwidth_verdict(ctx, run);
        match peak_figure(run) {
            Some(figure) => outcome.figures([figure]),
            None => outcome,
        }
    })
}

/// The judged peak as a metric (`gpudoctor_nccl_busbw_peak_bytes_per_second`), whatever the
/// verdict: a passing run's number is worth graphing too.
fn peak_figure(run: &NcclRun) -> Option<Figure> {
    let log = &run.log;
    if log.header_blocks > 1 || log.ranks() <= 1 {
        return None;
    }
    let peak = log.peak_row(LARGE_BYTES)?;
    Some(
        Figure::new(
            FigureName::NcclBusbwPeakBytesPerSecond,
            peak.peak_busbw() * 1e9,
        )
        .label("test", collective_name(run))
        .label("nodes", log.nodes().max(1).to_string())
        .label("ranks", log.ranks().to_string()),
    )
}

fn bandwidth_verdict(ctx: &Context<'_>, run: &NcclRun) -> Outcome {
    let log = &run.log;
    if log.rows.is_empty() {
        return Outcome::skip("no result rows (see nccl.run_completed)");
    }
    if log.header_blocks > 1 {
        return Outcome::skip(
            "separate per-process result tables: bandwidth not comparable (see nccl.run_completed)",
        );
    }
    if log.ranks() == 1 {
        return Outcome::skip("one rank: busbw is 0 by definition (nccl.md §4)");
    }
    let avg = log.avg_busbw.as_ref().map(|(x, q)| {
        Evidence::new(
            format!("{}:{}", run.origin, q.line),
            format!(
                "sweep average {x} GB/s (shown, not judged: it averages every size, nccl.md §4)"
            ),
        )
    });
    let Some(peak) = log.peak_row(LARGE_BYTES) else {
        let largest = log.largest_size().map(format_size).unwrap_or_default();
        return Outcome::skip(format!(
            "largest size {largest}: too small to judge (needs rows of ≥ {}; run an 8 GiB sweep)",
            format_size(LARGE_BYTES)
        ));
    };
    let busbw = peak.peak_busbw();
    let at = format_size(peak.size);
    let collective = collective_name(run);
    let nodes = log.nodes().max(1);
    let shape = format!("{} rank(s) on {nodes} node(s)", log.ranks());
    let mut evidence = vec![row_evidence(run, peak)];
    evidence.extend(avg);
    let Some(profile) = judging_profile(ctx, run) else {
        return Outcome::pass(format!(
            "peak busbw {busbw:.1} GB/s at {at} ({shape}); no platform profile to compare with"
        ))
        .evidence_all(evidence);
    };
    if collective != "all_reduce" {
        return Outcome::pass(format!(
            "peak busbw {busbw:.1} GB/s at {at} ({shape}); profile {} states all_reduce figures only, not {collective}",
            profile.name
        ))
        .evidence_all(evidence);
    }
    let (warn, fail, label) = match thresholds(&profile, run) {
        Ok(t) => t,
        Err(why) => {
            return Outcome::skip(format!("peak busbw {busbw:.1} GB/s at {at}: {why}"))
                .evidence_all(evidence);
        }
    };
    let expected = format!(
        "≥ {warn:.0} GB/s, fail < {fail:.0} (profile {}, {label})",
        profile.name
    );
    evidence[0] = row_evidence(run, peak).expected(expected.clone());
    if busbw >= warn {
        return Outcome::pass(format!(
            "peak busbw {busbw:.1} GB/s at {at} ({shape}), expected {expected}"
        ))
        .evidence_all(evidence);
    }
    let (cause, action) = slow_cause(ctx, run);
    let outcome = if busbw < fail {
        Outcome::fail(format!(
            "peak busbw {busbw:.1} GB/s at {at} ({shape}), below the {fail:.0} GB/s floor of profile {} ({label}; expected ≥ {warn:.0})",
            profile.name
        ))
    } else {
        Outcome::warn(format!(
            "peak busbw {busbw:.1} GB/s at {at} ({shape}), below the expected {warn:.0} GB/s of profile {} ({label}; fails below {fail:.0})",
            profile.name
        ))
    };
    outcome.evidence_all(evidence).hint(cause).action(action)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{self, RunOptions};
    use crate::report::Report;
    use crate::source::ReplaySource;

    /// A replay root with `nvml.json`-less capture and one NCCL log; judged with `profile`.
    fn judge(log: &str, profile: Option<&str>) -> Report {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".gpudoctor/nccl")).unwrap();
        std::fs::write(dir.path().join(".gpudoctor/manifest.json"), "{}").unwrap();
        std::fs::write(dir.path().join(".gpudoctor/nccl/all_reduce_perf.log"), log).unwrap();
        let source = ReplaySource::new(dir.path());
        let options = RunOptions {
            only: vec![Layer::Nccl],
            profile: profile
                .and_then(|name| profile::builtins().into_iter().find(|p| p.name == name)),
            ..RunOptions::default()
        };
        engine::run(&source, &options)
    }

    fn status(report: &Report, code: &str) -> (Status, String) {
        let c = report
            .layers
            .iter()
            .flat_map(|l| &l.checks)
            .find(|c| c.code == code)
            .unwrap();
        (c.status, c.summary.clone())
    }

    const HEADER: &str = "\
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41234 on hgx-h100-01 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41234 on hgx-h100-01 device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41234 on hgx-h100-01 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  41234 on hgx-h100-01 device  4 [0000:9a:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  41234 on hgx-h100-01 device  5 [0000:ab:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  41234 on hgx-h100-01 device  6 [0000:ba:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  41234 on hgx-h100-01 device  7 [0000:db:00] NVIDIA H100 80GB HBM3
hgx-h100-01:41234:41262 [0] NCCL INFO Using network IB
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
";
    const FOOTER: &str = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 300.1 \n#\n";

    fn row(size: u64, busbw: f64, wrong: u64) -> String {
        let alg = busbw / 1.75;
        format!(
            "  {size:>10}  {:>12}     float     sum      -1  1000.0  {alg:.2}  {busbw:.2}  {wrong:>6}  1000.0  {alg:.2}  {busbw:.2}  {wrong:>6}\n",
            size / 4
        )
    }

    fn with_nvls(channels: u32) -> String {
        format!(
            "hgx-h100-01:41234:41262 [0] NCCL INFO 32 coll channels, 32 collnet channels, {channels} nvls channels, 32 p2p channels, 32 p2p channels per peer\n"
        )
    }

    #[test]
    fn healthy_nvls_run_passes_every_check() {
        let log = format!(
            "{HEADER}{}{}{}{FOOTER}",
            with_nvls(16),
            row(1 << 30, 468.3, 0),
            row(8 << 30, 482.4, 0)
        );
        let report = judge(&log, Some("hgx-h100"));
        for check in &report.layers[7].checks {
            assert!(
                !check.status.is_finding(),
                "{}: {:?} {}",
                check.code,
                check.status,
                check.summary
            );
        }
        let (s, summary) = status(&report, "nccl.bus_bandwidth");
        assert_eq!(s, Status::Pass);
        assert!(summary.contains("482.4 GB/s at 8 GiB"), "{summary}");
        // The peak is exported as a metric with the run's shape.
        let check = report.layers[7]
            .checks
            .iter()
            .find(|c| c.code == "nccl.bus_bandwidth")
            .unwrap();
        let figure = &check.figures[0];
        assert_eq!(figure.name, FigureName::NcclBusbwPeakBytesPerSecond);
        assert!((figure.value - 482.4e9).abs() < 1e3, "{}", figure.value);
        assert_eq!(figure.labels["test"], "all_reduce");
        assert_eq!(figure.labels["nodes"], "1");
        assert_eq!(figure.labels["ranks"], "8");
    }

    #[test]
    fn bandwidth_uses_the_ring_figure_without_nvls_and_never_the_average() {
        // 380 passes the ring expectation (370) though it is far below the nvls one.
        let log = format!("{HEADER}{}{}{FOOTER}", with_nvls(0), row(8 << 30, 380.0, 0));
        let report = judge(&log, Some("hgx-h100"));
        assert_eq!(status(&report, "nccl.bus_bandwidth").0, Status::Pass);
        assert_eq!(status(&report, "nccl.nvls").0, Status::Warn);
        // 401 with nvls in use fails (floor 460); the average line (300.1) is only evidence.
        let log = format!(
            "{HEADER}{}{}{FOOTER}",
            with_nvls(16),
            row(8 << 30, 401.0, 0)
        );
        let report = judge(&log, Some("hgx-h100"));
        let (s, summary) = status(&report, "nccl.bus_bandwidth");
        assert_eq!(s, Status::Fail);
        assert!(
            summary.contains("401.0") && summary.contains("460"),
            "{summary}"
        );
        // 470: warn band.
        let log = format!(
            "{HEADER}{}{}{FOOTER}",
            with_nvls(16),
            row(8 << 30, 470.0, 0)
        );
        assert_eq!(
            status(&judge(&log, Some("hgx-h100")), "nccl.bus_bandwidth").0,
            Status::Warn
        );
        // Only small sizes: not judged.
        let log = format!("{HEADER}{}{FOOTER}", row(1 << 20, 10.0, 0));
        assert_eq!(
            status(&judge(&log, Some("hgx-h100")), "nccl.bus_bandwidth").0,
            Status::Skip
        );
    }

    #[test]
    fn profile_comes_from_the_log_when_nvml_has_no_gpu() {
        let log = format!(
            "{HEADER}{}{}{FOOTER}",
            with_nvls(16),
            row(8 << 30, 401.0, 0)
        );
        let (s, summary) = status(&judge(&log, None), "nccl.bus_bandwidth");
        assert_eq!(s, Status::Fail);
        assert!(summary.contains("hgx-h100"), "{summary}");
    }

    #[test]
    fn wrong_values_fail_with_sizes() {
        let log = format!(
            "{HEADER}{}{}# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 300.1 \n",
            row(1 << 30, 468.3, 0),
            row(8 << 30, 482.4, 12)
        );
        let (s, summary) = status(&judge(&log, Some("hgx-h100")), "nccl.wrong_results");
        assert_eq!(s, Status::Fail);
        assert!(summary.contains("8 GiB (24 element(s))"), "{summary}");
    }

    #[test]
    fn a_log_without_footer_fails_with_its_last_lines() {
        let log = format!("{HEADER}{}", row(1 << 30, 468.3, 0));
        let report = judge(&log, Some("hgx-h100"));
        let (s, summary) = status(&report, "nccl.run_completed");
        assert_eq!(s, Status::Fail);
        assert!(summary.contains("last result row at 1 GiB"), "{summary}");
    }

    #[test]
    fn system_error_with_ib_completions_points_at_rdma() {
        let log = format!(
            "{HEADER}node-a:2231:2290 [3] transport/net_ib/p2p.cc:1148 NCCL WARN NET/IB: Got completion from peer 10.0.0.12<52131> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) vendor_err=129 hca mlx5_3\nnode-a: Test NCCL failure common.cu:1057 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n"
        );
        let report = judge(&log, Some("hgx-h100"));
        let (s, summary) = status(&report, "nccl.test_errors");
        assert_eq!(s, Status::Fail);
        assert!(
            summary.contains("rdma layer") && summary.contains("RETRY_EXC_ERR"),
            "{summary}"
        );
        assert_eq!(status(&report, "nccl.run_completed").0, Status::Skip);
    }

    #[test]
    fn socket_fallback_on_an_rdma_profile_fails() {
        let log = "\
node-a:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
node-a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.11<0>
node-a:1:1 [0] NCCL INFO Using network Socket
node-a:1:9 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
node-b:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0
";
        let (s, summary) = status(&judge(log, Some("hgx-h100")), "nccl.socket_fallback");
        assert_eq!(s, Status::Fail);
        assert!(summary.contains("libibverbs"), "{summary}");
    }

    fn check<'r>(report: &'r Report, code: &str) -> &'r crate::report::CheckResult {
        report
            .layers
            .iter()
            .flat_map(|l| &l.checks)
            .find(|c| c.code == code)
            .unwrap()
    }

    fn evidence_text(report: &Report, code: &str) -> String {
        check(report, code)
            .evidence
            .iter()
            .map(|e| format!("{}: {}\n", e.source, e.observed))
            .collect()
    }

    #[test]
    fn shm_between_gpus_of_an_nvlink_node_warns() {
        let shm = "\
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct
hgx-h100-01:41234:41263 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[2] via SHM/direct/direct
hgx-h100-01:41234:41262 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
";
        let log = format!("{HEADER}{shm}{}{FOOTER}", row(8 << 30, 150.0, 0));
        let report = judge(&log, Some("hgx-h100"));
        let (s, summary) = status(&report, "nccl.p2p_transport");
        assert_eq!(s, Status::Warn, "{summary}");
        assert!(
            summary.starts_with(
                "2 intra-node channel(s) through host shared memory (SHM), not p2p/nvlink (1 p2p channel(s)); NCCL_P2P_DISABLE=1 set"
            ),
            "{summary}"
        );
        let evidence = evidence_text(&report, "nccl.p2p_transport");
        assert!(evidence.contains("via SHM/direct/direct"), "{evidence}");
        assert!(
            evidence.contains("nvlink: profile hgx-h100: 18 nvlinks per gpu"),
            "{evidence}"
        );
        assert!(
            check(&report, "nccl.p2p_transport")
                .hint
                .as_deref()
                .unwrap()
                .contains("unset NCCL_P2P_DISABLE")
        );
        // The slow run blames the shm path.
        let (s, summary) = status(&report, "nccl.bus_bandwidth");
        assert_eq!(s, Status::Fail);
        let hint = check(&report, "nccl.bus_bandwidth").hint.clone().unwrap();
        assert!(hint.contains("nccl.p2p_transport"), "{summary} / {hint}");

        // On a node without NVLink (generic PCIe profile, no NVML), SHM is how GPUs talk: pass.
        let report = judge(&log, Some("generic-pcie-gpu"));
        assert_eq!(status(&report, "nccl.p2p_transport").0, Status::Pass);
    }

    /// Two nodes, eight ranks each, as `mpirun --tag-output` prints them.
    fn two_node_header() -> String {
        let mut text = String::from(
            "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0\n",
        );
        for (i, host) in ["node-a", "node-b"].iter().enumerate() {
            for d in 0..8 {
                text.push_str(&format!(
                    "#  Rank {:>2} Group  0 Pid  {} on {host} device  {d} [0000:18:00] NVIDIA H100 80GB HBM3\n",
                    i * 8 + d,
                    4100 + i
                ));
            }
        }
        text.push_str("node-a:4100:4120 [0] NCCL INFO Using network IB\n");
        text.push_str("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
        text
    }

    #[test]
    fn a_multi_node_run_that_hung_crashed_or_failed_names_its_nodes() {
        let nodes = "nodes in the run: node-a node-b";
        // Hung or crashed: no footer.
        let log = format!("{}{}", two_node_header(), row(1 << 30, 300.0, 0));
        let report = judge(&log, Some("hgx-h100"));
        let (s, summary) = status(&report, "nccl.run_completed");
        assert_eq!(s, Status::Fail, "{summary}");
        assert!(
            evidence_text(&report, "nccl.run_completed").contains(nodes),
            "{:#?}",
            check(&report, "nccl.run_completed")
        );
        // Failed: an NCCL error on one of them.
        let log = format!(
            "{}node-b:4101:4130 [3] transport/net_ib/p2p.cc:1148 NCCL WARN NET/IB: Got completion from peer 10.0.0.11<52131> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) vendor_err=129 hca mlx5_3\nnode-b: Test NCCL failure common.cu:1057 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n",
            two_node_header()
        );
        let report = judge(&log, Some("hgx-h100"));
        assert_eq!(status(&report, "nccl.test_errors").0, Status::Fail);
        assert!(evidence_text(&report, "nccl.test_errors").contains(nodes));
        // Wrong values.
        let log = format!(
            "{}{}# Out of bounds values : 1 FAILED\n# Avg bus bandwidth    : 300.1 \n",
            two_node_header(),
            row(8 << 30, 300.0, 5)
        );
        let report = judge(&log, Some("hgx-h100"));
        assert_eq!(status(&report, "nccl.wrong_results").0, Status::Fail);
        assert!(evidence_text(&report, "nccl.wrong_results").contains(nodes));
        assert!(evidence_text(&report, "nccl.run_completed").contains(nodes));
    }

    /// Two nodes: judged by the profile's stated multi-node figure when it has one (hgx-a100:
    /// 192 GB/s, `NVIDIA/nccl#812`, fail at 172.8), else by the figure derived from its NICs
    /// (hgx-h100: 8 × 400 Gb/s / 8 × 0.92 = 368, fail at 331.2) — never by single-node figures.
    #[test]
    fn multi_node_runs_are_judged_by_the_profiles_multi_node_expectation() {
        let two_nodes =
            |busbw: f64| format!("{}{}{}", two_node_header(), row(8 << 30, busbw, 0), FOOTER);
        for (profile, busbw, expected, label) in [
            (
                "hgx-a100-80gb",
                195.0,
                Status::Pass,
                "multi-node expectation",
            ),
            (
                "hgx-a100-80gb",
                185.0,
                Status::Warn,
                "multi-node expectation",
            ),
            (
                "hgx-a100-80gb",
                170.0,
                Status::Fail,
                "multi-node expectation",
            ),
            (
                "hgx-h100",
                370.0,
                Status::Pass,
                "derived from 8 x 400 Gb/s nics",
            ),
            (
                "hgx-h100",
                360.0,
                Status::Warn,
                "derived from 8 x 400 Gb/s nics",
            ),
            (
                "hgx-h100",
                330.0,
                Status::Fail,
                "derived from 8 x 400 Gb/s nics",
            ),
        ] {
            let report = judge(&two_nodes(busbw), Some(profile));
            let (s, summary) = status(&report, "nccl.bus_bandwidth");
            assert_eq!(s, expected, "{profile} at {busbw}: {summary}");
            assert!(summary.contains(label), "{profile} at {busbw}: {summary}");
            assert!(summary.contains("2 nodes"), "{summary}");
        }
        let report = judge(&two_nodes(185.0), Some("hgx-a100-80gb"));
        let (_, summary) = status(&report, "nccl.bus_bandwidth");
        assert!(
            summary.contains("expected 192 GB/s") && summary.contains("fails below 173"),
            "{summary}"
        );
    }

    #[test]
    fn not_requested_skips_saying_how() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".gpudoctor")).unwrap();
        let source = ReplaySource::new(dir.path());
        let report = engine::run(
            &source,
            &RunOptions {
                only: vec![Layer::Nccl],
                ..RunOptions::default()
            },
        );
        let layer = &report.layers[7];
        assert_eq!(layer.status, Status::Skip);
        assert!(
            layer
                .checks
                .iter()
                .all(|c| c.summary.contains("--nccl-log"))
        );
    }
}
