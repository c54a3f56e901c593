//! One pair's run read by the NCCL log parser (`answers/nccl`): the bus bandwidth at large
//! sizes (the same figure `nccl.bus_bandwidth` judges: the best of out-of-place and in-place
//! over sizes ≥ 1 GiB, never the sweep average), whether it finished, and the network NCCL chose
//! (IB with or without GPUDirect RDMA, or TCP sockets) from the `NCCL_DEBUG=INFO` lines.

use crate::answers::nccl::NcclLog;
use crate::process::RunExit;
use crate::source::nccl::RunOutput;

/// Sizes from which busbw is judged (nccl.md §12; as `checks::nccl::LARGE_BYTES`).
pub const LARGE_BYTES: u64 = 1 << 30;

/// What one pair's run measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measured {
    /// Peak busbw over sizes ≥ 1 GiB (GB/s), else at the largest size run, and that size.
    pub busbw: Option<f64>,
    pub size: Option<u64>,
    /// Why the run did not give a usable figure (a failure line, an exit status, no footer).
    pub failure: Option<String>,
    /// Killed at the per-pair timeout.
    pub hung: bool,
    /// Why the pair says nothing about the hosts: the launcher could not start here, or
    /// gpudoctor was interrupted. Such a pair is reported, never judged.
    pub not_run: Option<String>,
    /// A WARN line NCCL printed in a run that otherwise finished (teardown noise such as
    /// `Accept failed Resource temporarily unavailable`): shown, not judged.
    pub warning: Option<String>,
    /// `IB`, `Socket`, a net plugin's name, or `unknown` without NCCL INFO lines.
    pub transport: String,
    /// GPUDirect RDMA on the IB channels (`/GDRDMA`); `None` when not said.
    pub gdr: Option<bool>,
}

impl Measured {
    /// The transport as shown: `IB/GDRDMA`, `IB (no GDR)`, `Socket`, `unknown`.
    pub fn transport_text(&self) -> String {
        match (self.transport.as_str(), self.gdr) {
            ("IB", Some(true)) => "IB/GDRDMA".to_string(),
            ("IB", Some(false)) => "IB (no GDR)".to_string(),
            (t, _) => t.to_string(),
        }
    }

    pub fn fell_back_to_sockets(&self) -> bool {
        self.transport == "Socket"
    }
}

/// Read a finished run.
pub fn measure(out: &RunOutput) -> Measured {
    let log = &out.log;
    let (transport, gdr) = network(log);
    let (busbw, size) = match log.peak_row(LARGE_BYTES) {
        Some(row) => (Some(row.peak_busbw()), Some(row.size)),
        None => match log.rows.iter().max_by_key(|r| r.size) {
            Some(row) => (Some(row.peak_busbw()), Some(row.size)),
            None => (None, None),
        },
    };
    let warning = log
        .error_warnings
        .first()
        .map(|q| format!("NCCL WARN: {}", q.text));
    let exit_failed = matches!(out.exit, Some(e) if e != RunExit::Code(0));
    let failure = if out.timed_out {
        Some(format!(
            "killed at the timeout after {} s",
            out.elapsed.as_secs()
        ))
    } else if let Some(f) = log.failures.first() {
        Some(format!("{} (on {})", f.quote.text, f.host))
    } else if log.wrong_rows().next().is_some() {
        Some("wrong results (#wrong > 0)".to_string())
    } else if exit_failed {
        // The WARN line says why better than the status does.
        let status = match out.exit {
            Some(RunExit::Signal(s)) => format!("the launcher was killed by signal {s}"),
            Some(RunExit::Code(c)) => format!("the launcher exited {c}"),
            None => "the launcher did not exit".to_string(),
        };
        // Else the launcher's own words (`mpirun has detected an attempt to run as root.`).
        let said = super::errors::headline(&out.stderr_tail);
        Some(match (&warning, said) {
            (Some(w), _) => format!("{status}; {w}"),
            (None, Some(said)) => format!("{status}: {said}"),
            (None, None) => status,
        })
    } else if busbw.is_none() {
        Some(
            warning
                .clone()
                .or_else(|| super::errors::headline(&out.stderr_tail))
                .unwrap_or_else(|| "no result row".to_string()),
        )
    } else if !log.has_footer() {
        Some("cut short: no footer".to_string())
    } else {
        None
    };
    let not_run = out
        .interrupted
        .map(|sig| format!("stopped: gpudoctor got signal {sig}"));
    Measured {
        busbw,
        size,
        warning: warning.filter(|_| failure.is_none()),
        failure,
        hung: out.timed_out && out.interrupted.is_none(),
        not_run,
        transport,
        gdr,
    }
}

/// The network NCCL used between the two nodes.
fn network(log: &NcclLog) -> (String, Option<bool>) {
    let t = &log.transports;
    if let Some((name, _)) = t.net.iter().max_by_key(|(_, u)| u.channels) {
        let gdr = (name == "IB").then(|| t.net.get("IB").is_some_and(|u| u.gdr_channels > 0));
        return (name.clone(), gdr);
    }
    match &t.network {
        Some((name, _)) => (name.clone(), None),
        None => ("unknown".to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answers::nccl::parse_log;

    /// The real two-node 2 × 8 H100 run (nccl-tests#290), with what a launcher reports.
    fn run(extra: &str, exit: Option<RunExit>, timed_out: bool) -> RunOutput {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/nccl/real/nccl-tests-290-slurm-label-two-node.log"
        ))
        .unwrap();
        RunOutput {
            exit,
            timed_out,
            interrupted: None,
            killed: Vec::new(),
            containment: Default::default(),
            elapsed: std::time::Duration::from_secs(40),
            log: parse_log(&(text + extra)),
            transcript: String::new(),
            stderr_tail: Vec::new(),
        }
    }

    #[test]
    fn a_finished_run_gives_its_peak_and_a_teardown_warn_is_only_shown() {
        let m = measure(&run("", Some(RunExit::Code(0)), false));
        assert_eq!((m.busbw, m.failure, m.hung), (Some(155.57), None, false));
        assert_eq!(m.size, Some(8589934592));
        // NVIDIA/nccl#1610's teardown line after a finished run: not a failure.
        let warn = "node005:291005:291100 [0] proxy.cc:1517 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable\n";
        let m = measure(&run(warn, Some(RunExit::Code(0)), false));
        assert_eq!(m.failure, None);
        assert!(m.warning.unwrap().contains("Accept failed"));
        // The same line with a failed exit says why.
        let m = measure(&run(warn, Some(RunExit::Code(1)), false));
        let failure = m.failure.unwrap();
        assert!(
            failure.contains("exited 1") && failure.contains("Accept failed"),
            "{failure}"
        );
    }

    #[test]
    fn a_timeout_is_hung_and_no_rows_is_a_failure() {
        let m = measure(&run("", None, true));
        assert!(m.hung && m.failure.unwrap().contains("timeout"));
        let mut empty = run("", Some(RunExit::Code(0)), false);
        empty.log = parse_log("ssh: connect to host gpu02 port 22: Connection refused\n");
        let m = measure(&empty);
        assert_eq!(m.failure.as_deref(), Some("no result row"));
        assert_eq!(m.transport, "unknown");
    }
}
