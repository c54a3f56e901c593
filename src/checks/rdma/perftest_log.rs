//! rdma.perftest_log: a saved `ib_write_bw` / `ib_read_bw` / `ib_send_bw` output (`--perftest-log`,
//! the test everyone runs by hand between two nodes) judged as `--nccl-log` judges an NCCL log:
//! did it finish (no `Couldn't ...` / `Failed to ...` line, a result row that is whole), and did
//! its largest message reach the port's rate. Parsing is `answers/perftest.rs`, tested on real
//! outputs (tests/data/perftest/README.md).
//!
//! The rate is the one sysfs gives the HCA the output names (` Device : mlx5_0`), on this node:
//! the output must come from it (the client side, which prints the results of one-sided tests).
//! The bar is the GPUDirect loopback's: [`RATE_FAIL`] of the port (AzNHC's floors are 90-95 % of
//! 400 and 200 Gb/s, reference/profiles.md), since a two-node run crosses the same port.

use std::path::Path;

use super::gpudirect::RATE_FAIL;
use super::*;
use crate::answers::perftest::{self, PerftestOutput};
use crate::report::Status;

/// One output's verdict: status, a line for the summary, evidence.
struct Verdict {
    status: Status,
    line: String,
    evidence: Vec<Evidence>,
}

fn name_of(path: &Path) -> String {
    path.display().to_string()
}

/// The active port's rate of `device` (perftest uses port 1 unless `-i` says otherwise; the
/// output does not name it, so a device with one active port is unambiguous and port 1 is
/// perftest's default).
fn port_rate(ctx: &Context<'_>, device: &str) -> Option<(u32, f64)> {
    let facts = ctx.rdma().as_ref().ok()?;
    let dev = facts.devices.iter().find(|d| d.name == device)?;
    let active: Vec<&RdmaPort> = dev
        .ports
        .iter()
        .filter(|p| p.state.as_ref().is_some_and(|(n, _)| *n == 4))
        .collect();
    let port = match active.as_slice() {
        [one] => *one,
        _ => dev.ports.iter().find(|p| p.port == 1)?,
    };
    Some((port.port, port.rate_gbps?))
}

fn judge(ctx: &Context<'_>, path: &Path, out: &PerftestOutput) -> Verdict {
    let file = name_of(path);
    let device = out.device.as_deref().unwrap_or("an unnamed device");
    // `RDMA_Write BW Test on mlx5_0`, or as much of it as the output says.
    let what = match (&out.test, &out.device) {
        (Some(t), Some(d)) => format!("{t} on {d}"),
        (Some(t), None) => t.clone(),
        (None, Some(d)) => format!("perftest on {d}"),
        (None, None) => "perftest".to_string(),
    };
    let test = what.as_str();
    if let Some(first) = out.errors.first() {
        let more = match out.errors.len() {
            1 => String::new(),
            n => format!(" (and {} more error line(s))", n - 1),
        };
        return Verdict {
            status: Status::Fail,
            line: format!("{file}: {test} failed: {first}{more}"),
            evidence: out
                .errors
                .iter()
                .map(|e| Evidence::quoting(&file, e).expected("no error line"))
                .collect(),
        };
    }
    if let Some(cut) = out.malformed_rows.first() {
        return Verdict {
            status: Status::Fail,
            line: format!(
                "{file}: {test} stopped inside a result row ({cut:?}): killed or hung mid-run"
            ),
            evidence: vec![Evidence::quoting(&file, cut).expected("a whole result row")],
        };
    }
    let Some(row) = out.largest() else {
        let (status, why) = if out.server && out.unit.is_some() {
            (
                Status::Warn,
                "no result row: a server's output (ib_write_bw and ib_read_bw print results on the client only); judge the client's",
            )
        } else if out.unit.is_some() {
            (
                Status::Fail,
                "a result header but no row: the run was cut short (killed, or hung waiting for its peer)",
            )
        } else {
            (
                Status::Fail,
                "no result table: perftest never got to measure (not connected, or not a perftest output)",
            )
        };
        return Verdict {
            status,
            line: format!("{file}: {test}: {why}"),
            evidence: vec![
                Evidence::new(&file, format!("{} line(s), no result row", out.lines))
                    .expected("the #bytes header and a row per size"),
            ],
        };
    };
    let g = row.average_gbits;
    let measured = format!("BW average {g:.2} Gb/s at {} bytes", row.bytes);
    // A sweep (`-a`: 2 B to 8 MiB) cut after its first rows ends on messages too small to fill
    // a link: their bandwidth is bound by the message rate, and says nothing of the port.
    if out.rows.len() > 1 && row.bytes < SWEEP_JUDGED_FROM {
        return Verdict {
            status: Status::Warn,
            line: format!(
                "{file}: {test} sweep cut after {} row(s), at {} bytes ({g:.2} Gb/s): messages below {} KiB are bound by the message rate, so bandwidth is not judged",
                out.rows.len(),
                row.bytes,
                SWEEP_JUDGED_FROM / 1024
            ),
            evidence: vec![
                Evidence::new(&file, measured)
                    .expected("the sweep's rows up to 8 MiB (perftest -a), or one large -s"),
            ],
        };
    }
    let no_node = ctx.source().kind() == crate::report::SourceKind::Files;
    match out.device.as_deref().and_then(|d| port_rate(ctx, d)) {
        Some((port, rate)) if g < RATE_FAIL * rate => Verdict {
            status: Status::Fail,
            line: format!(
                "{file}: {test} port {port} reached {g:.1} Gb/s, {:.0} % of its {rate:.0} Gb/s port",
                g / rate * 100.0
            ),
            evidence: vec![Evidence::new(&file, measured).expected(format!(
                "≥ {:.0} Gb/s ({:.0} % of the port)",
                RATE_FAIL * rate,
                RATE_FAIL * 100.0
            ))],
        },
        Some((port, rate)) => Verdict {
            status: Status::Pass,
            line: format!(
                "{file}: {test} port {port} {g:.1} Gb/s ({:.0} % of {rate:.0} Gb/s)",
                g / rate * 100.0
            ),
            evidence: vec![Evidence::new(&file, measured)],
        },
        None if no_node => Verdict {
            status: Status::Pass,
            line: format!(
                "{file}: {test} finished at {g:.1} Gb/s; the pasted files do not say {device}'s port rate, so bandwidth is not judged (`gpudoctor check --perftest-log` on the node that ran the client judges it)"
            ),
            evidence: vec![Evidence::new(&file, measured)],
        },
        None => Verdict {
            status: Status::Warn,
            line: format!(
                "{file}: {test} finished at {g:.1} Gb/s, but {device} has no port rate on this node: bandwidth not judged (run the check on the node that ran the client)"
            ),
            evidence: vec![
                Evidence::new(&file, measured)
                    .expected("a device this node has, with a port rate in sysfs"),
            ],
        },
    }
}

/// Smallest message whose bandwidth a cut sweep is judged on: below 64 KiB a ConnectX port is
/// bound by its message rate, not its link (perftest's own default size for a bandwidth test,
/// `DEF_SIZE_BW` 65536, perftest_parameters.h).
const SWEEP_JUDGED_FROM: u64 = 65536;

pub(super) fn perftest_log(ctx: &Context<'_>) -> Outcome {
    let logs = ctx.source().perftest_logs();
    if logs.is_empty() {
        return Outcome::skip(
            "no --perftest-log given (a saved ib_write_bw, ib_read_bw or ib_send_bw output)",
        );
    }
    let mut verdicts = Vec::new();
    for (path, text) in &logs {
        verdicts.push(match text {
            Ok(text) => judge(ctx, path, &perftest::parse(text)),
            Err(why) => Verdict {
                status: Status::Fail,
                line: format!("{}: cannot be read: {why}", name_of(path)),
                evidence: vec![
                    Evidence::new(name_of(path), why.clone())
                        .expected("a readable perftest output"),
                ],
            },
        });
    }
    let worst = verdicts
        .iter()
        .map(|v| v.status)
        .max_by_key(|s| match s {
            Status::Fail => 3,
            Status::Warn => 2,
            _ => 1,
        })
        .unwrap_or(Status::Pass);
    let text = verdicts
        .iter()
        .filter(|v| v.status == worst || worst == Status::Pass)
        .map(|v| v.line.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let evidence: Vec<Evidence> = verdicts.into_iter().flat_map(|v| v.evidence).collect();
    let outcome = match worst {
        Status::Fail => Outcome::fail(text)
            .hint("an error line: read it (`Couldn't connect`: the server side is not listening or a firewall drops the port, 18515 by default; `Failed to modify QP`: the port or GID index is wrong, try -x for RoCE); a cut run: rerun with a timeout and compare both sides; a slow one: check the port's rate and error counters on both nodes (rdma.port_rate, rdma.error_counters), then the PCIe link of each HCA")
            .action(Action::HardwareInspection),
        Status::Warn => Outcome::warn(text)
            .hint("save the client's output (the side started with the server's address) and judge it on the node that ran it"),
        _ => Outcome::pass(text),
    };
    outcome.evidence_all(evidence)
}
