//! NCCL layer: do collectives run at the expected speed, over the path they should take?
//! Judges nccl-tests results (a run made now, `--nccl-log`, or a capture's logs) and any NCCL
//! application's log, read by `source/nccl.rs` and `answers/nccl/`; it runs nothing and reads no
//! file itself.
//!
//! "A working job does not prove it is using the fast path" (issue 7): NCCL falls back silently
//! to TCP sockets, to host-memory staging without GPUDirect RDMA, and to shared memory without
//! P2P. The verdicts, each quoting the log lines behind it (reference/nccl.md), by file:
//! - [`errors`] `nccl.test_errors`: `Test NCCL/CUDA failure`, `Test timeout`, IB completion
//!   errors, with the layer they most likely point at (§5, §11, §13); in an application's log,
//!   collective timeouts (PyTorch's ProcessGroupNCCL watchdog), NCCL error strings and error
//!   WARN lines (issue 15);
//! - [`completion`] `nccl.run_completed`: the run reached its footer; killed at gpudoctor's
//!   timeout, crashed or cut short fails with its last lines; a harness error (per-process
//!   headers, too few GPUs) fails as such, never as a bandwidth problem (§4, §7); an excerpt
//!   without its start is inconclusive, never healthy;
//! - [`results`] `nccl.wrong_results`: `#wrong` > 0, the old `error` column past nccl-tests'
//!   tolerance, or `Out of bounds values : N FAILED` (§3, §4, §13);
//! - [`transports`] `nccl.socket_fallback`, `nccl.gpudirect_rdma`, `nccl.p2p_transport`,
//!   `nccl.nvls`: the transports from `NCCL_DEBUG=INFO` lines (§9, §10) against what the node
//!   has — from nccl-tests and applications alike;
//! - [`bandwidth`] `nccl.bus_bandwidth`: the peak busbw over sizes ≥ 1 GiB (never the sweep
//!   average, §4) against the profile for this run's shape (reference/profiles.md §1, §4;
//!   multi-node derived from the profile's NICs, nccl.md §12), with the sweep's peak, its size
//!   and average always reported as figures; `nccl.bandwidth_collapse`: bus bandwidth at the
//!   larger sizes staying under half the sweep's own peak;
//! - [`crashes`] `nccl.kernel_crashes`: a process the kernel killed inside libnccl (from the
//!   kernel log, so it runs without `--nccl`).
//!
//! The result-table checks skip an application's log ("not an nccl-tests log"). The layer runs
//! only when asked: a benchmark saturates every GPU and NIC for a minute, which a default
//! `gpudoctor check` on a node with workloads must not do. Without `--nccl`, `--nccl-quick` or
//! `--nccl-log` (or logs in a capture) every check but `nccl.kernel_crashes` skips, saying how to
//! ask.

mod bandwidth;
mod completion;
mod crashes;
mod errors;
mod results;
mod transports;

use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::nccl::{LogKind, NcclLog, Quoted, Row, collective_from_rows};
use crate::answers::nccl::{NcclProbe, NcclRun};
use crate::profile::{self, Profile};
use crate::report::{Action, Evidence, Layer, Status};

pub use bandwidth::{COLLAPSE_MIN_SIZES, COLLAPSE_SHARE, multi_node_expectation};

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
                reads: "nccl-tests output: `Test NCCL failure`, `Test CUDA failure`, `Test timeout`, `# error:` lines and NCCL WARN lines (IB completion errors, NVLS bind failures); an application's log (PyTorch, JAX, Megatron with NCCL_DEBUG=INFO or WARN): ProcessGroupNCCL's `Watchdog caught collective operation timeout`, NCCL error strings (`unhandled system error`, `unhandled cuda error`, `remote process exited or there was a network error`) and NCCL WARN lines that report an error",
                expects: "none of them",
                why: "a collective that fails here fails in every multi-GPU job; the error string and the WARN lines before it say which layer broke (an IB completion error is the network, a CUDA error the GPU). In a training job the same faults show as a collective that never completes: the watchdog kills the job after its timeout, so the timeout line is the one place the job says which collective and rank hung; WARN lines that only advise (`falling back to simple order`) are quoted, never failed",
                fix: "follow the layer named in the finding: IB completion errors → `gpudoctor check --only rdma`, `ibstat`, port counters; `unhandled system error` → IB port, NCCL_SOCKET_IFNAME, /dev/infiniband and /dev/shm in the container; CUDA errors → the driver layer's XIDs; a collective timeout → the first error on any rank before it (every node's log), then `gpudoctor check` on each node of the job",
            },
            run: errors::test_errors,
        },
        CheckDef {
            code: "nccl.run_completed",
            layer: Layer::Nccl,
            title: "the benchmark ran to its footer",
            explain: Explain {
                reads: "nccl-tests output (footer lines `Out of bounds values`, `Avg bus bandwidth`, `Collective test concluded`, with or without `#`), the process exit status and gpudoctor's timeout; `# nThread` header blocks; `Invalid number of GPUs`",
                expects: "the start of the run (its `nThread` line) and its footer printed, exit status 0 (7 when wrong values or NCCL_TESTS_MIN_BW explain it); one header block per test",
                why: "a run that hangs or dies midway is the commonest NCCL failure in production; header blocks printed before any table mean every process ran its own test (a non-MPI build under mpirun), so none of its numbers mean anything; a log that starts mid-run (an excerpt) cannot show that the run was whole, so it is inconclusive, never healthy; so is a footer whose result rows none could be read (a transformed copy of the output). An application's log has no footer: this check skips it",
                fix: "a hang: check ACS/IOMMU (topology layer), the NVLink fabric (nvlink layer), net plugins that differ between nodes, and blocked bootstrap traffic (NCCL_SOCKET_IFNAME); a harness error: build nccl-tests with MPI=1 or fix --nccl-gpus; raise --nccl-timeout only if the run was merely slow",
            },
            run: completion::run_completed,
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
            run: results::wrong_results,
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
            run: transports::socket_fallback,
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
            run: transports::gpudirect_rdma,
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
            run: transports::p2p_transport,
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
            run: transports::nvls,
        },
        CheckDef {
            code: "nccl.bus_bandwidth",
            layer: Layer::Nccl,
            title: "bus bandwidth at large sizes meets the profile",
            explain: Explain {
                reads: "the busbw of result rows of 1 GiB and more (the sweep average is shown, never judged); the run's shape (ranks, nodes from device lines); the collective (`Collective test starting`, the log's own command line, the binary, else the table's own arithmetic: size = count × type size with a reduction and no root is all_reduce); the profile's nccl_busbw_* (NVLS) or nccl_ring_busbw_* thresholds, and for multi-node runs its RDMA ports and rate",
                expects: "single node: peak busbw ≥ the profile's warn figure (hgx-h100: 465 with NVLS, 370 ring); N nodes: ≥ the profile's nccl_multinode_busbw_* (hgx-a100: 192, NVIDIA/nccl#812), else ≥ NICs × 0.92 × rate/8 (derived), failing below 0.9 × that; whatever the verdict, the sweep's peak busbw, the size it was reached at and the sweep average are reported (figures nccl_busbw_peak_bytes_per_second, nccl_busbw_peak_size_bytes, nccl_busbw_average_bytes_per_second, and the summary)",
                why: "the sweep average mixes latency-bound small sizes in and reads far below peak; the large-size peak is what training all-reduces see, and it is where a downtrained PCIe link, a missing NVLink or a slow NIC shows. A sweep too small to judge still measured something: its numbers are reported with the reason they are not judged",
                fix: "read the transport findings first (socket fallback, no GPUDirect, SHM, no NVLS); else check driver.pcie_link, nvlink.links_active and the rdma layer; rerun with --nccl-quick to confirm",
            },
            run: bandwidth::bus_bandwidth,
        },
        CheckDef {
            code: "nccl.bandwidth_collapse",
            layer: Layer::Nccl,
            title: "bus bandwidth holds up at the larger sizes of the sweep",
            explain: Explain {
                reads: "every result table's busbw by message size (the better of out-of-place and in-place, the best of repeated sizes); no profile needed",
                expects: "after the sweep's peak, the larger sizes stay at or above half of it: at least one of them, the largest included, or fewer than two sizes under half",
                why: "nccl-tests' bus bandwidth rises with message size until the links saturate and then stays flat: it is normalised so that it measures the hardware, whatever the size and rank count (nccl-tests doc/PERFORMANCE.md); protocol and algorithm switches move it by tens of percent (NVIDIA/nccl-tests#290, two nodes: 167.9 GB/s at 256 MiB, 143.7-155.6 above). Every larger size under half the sweep's own peak, to the end, is not a switch: a link, NIC or switch port that cannot sustain load — PCIe replays or a downtrained link, a flapping or congested NIC (NVIDIA/nccl#1453: 29.5 GB/s at 32 MiB, then 4.1-5.3 GB/s from 64 MiB on). A dip that recovers at the larger sizes is not judged here (aws/aws-ofi-nccl#65)",
                fix: "check the PCIe links and their AER/replay counters (`gpudoctor check --only driver,topology`), the NICs' port counters and link flaps (`gpudoctor check --only rdma`, `perfquery -x`, `ethtool -S`), and the switch ports between the nodes; rerun the sweep to see whether the collapse repeats at the same size",
            },
            run: bandwidth::bandwidth_collapse,
        },
        CheckDef {
            code: "nccl.kernel_crashes",
            layer: Layer::Nccl,
            title: "no process crashed inside NCCL this boot (kernel log)",
            explain: Explain {
                reads: "the kernel log: `comm[pid]: segfault at ... in libnccl.so.2[...]` lines (also with the library on a line of its own, as 6.x kernels may print it; NCCL's net plugins `libnccl-net*.so` count as NCCL)",
                expects: "no such crash since the last boot (warn); crashes before it are history (noted). Needs no --nccl: the kernel wrote the crash whoever ran the job",
                why: "a training job that dies with a segfault inside NCCL leaves little in its own log; the kernel's line names the process, the library and the time, which is where the job's own logs and the node's NCCL path should be looked at. gpud and AWS's node monitoring agent read the same line",
                fix: "the job's NCCL_DEBUG=INFO log around the time (`gpudoctor check --nccl-log FILE`), the same NCCL and net-plugin versions on every node, the fabric manager on NVSwitch nodes, then `gpudoctor check --nccl` on this node",
            },
            run: crashes::kernel_crashes,
        },
    ]
}

/// The runs to judge, or the finished outcome when there are none.
fn runs<'c>(ctx: &'c Context<'_>) -> Result<&'c [NcclRun], Outcome> {
    match ctx.nccl() {
        NcclProbe::Runs(runs) if !runs.is_empty() => Ok(runs),
        NcclProbe::Runs(_) => Err(Outcome::skip("no nccl log to judge")),
        NcclProbe::NotRequested { why } => Err(Outcome::skip(why.clone())),
        NcclProbe::BinaryMissing { .. } | NcclProbe::Unavailable { .. } => Err(Outcome::skip(
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
    Evidence::quoting(format!("{}:{}", run.origin, q.line), q.text.clone())
}

fn row_evidence(run: &NcclRun, row: &Row) -> Evidence {
    Evidence::quoting(format!("{}:{}", run.origin, row.line), row.text.clone())
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

/// The collective of a run's first table (see [`table_collective`]), `unknown` when nothing says.
fn collective_name(run: &NcclRun) -> String {
    table_collective(run, 0).unwrap_or_else(|| "unknown".to_string())
}

/// The collective a table measured: `Collective test starting:` before it, else the program
/// the log's own command line names (`$ ./build/alltoall_perf ...`), else the binary gpudoctor
/// ran or the log is named after (`all_reduce_perf`), else what its rows' arithmetic says (`answers::nccl::collective_from_rows`). `all_reduce_perf_mpi` → `all_reduce`.
fn table_collective(run: &NcclRun, table: usize) -> Option<String> {
    let log = &run.log;
    let named = log
        .tables
        .get(table)
        .and_then(|t| t.collective.clone())
        .or_else(|| (table == 0).then(|| log.collective.clone()).flatten())
        .or_else(|| {
            (log.tables.len() <= 1)
                .then(|| log.command_program.clone())
                .flatten()
        })
        .or_else(|| {
            let stem = run.name.trim_end_matches("_mpi");
            (log.tables.len() <= 1 && stem.ends_with("_perf")).then(|| run.name.clone())
        });
    match named {
        Some(name) => Some(
            name.trim_end_matches("_mpi")
                .trim_end_matches("_perf")
                .to_string(),
        ),
        None => collective_from_rows(log.table_rows(table)).map(str::to_string),
    }
}

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

/// The result-table checks judge nccl-tests output only: `Some(skip)` for anything else.
fn not_tests_log(run: &NcclRun) -> Option<Outcome> {
    let log = &run.log;
    match log.kind() {
        LogKind::NcclTests => None,
        // A run gpudoctor made is nccl-tests whatever it printed (see nccl.run_completed).
        _ if run.meta.is_some() => Some(Outcome::skip(
            "no nccl-tests result printed (see nccl.run_completed)",
        )),
        LogKind::Application => Some(Outcome::skip(format!(
            "not an nccl-tests log: an application's output with {} NCCL INFO line(s) and {} NCCL WARN line(s); its transports and failures are judged, it has no result table",
            log.info_lines, log.warning_count
        ))),
        LogKind::Unknown => Some(Outcome::skip(
            "no nccl-tests output in the log (see nccl.run_completed)",
        )),
    }
}
