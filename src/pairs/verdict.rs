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
    let failure = if out.timed_out {
        Some(format!(
            "killed at the timeout after {} s",
            out.elapsed.as_secs()
        ))
    } else if let Some(sig) = out.interrupted {
        Some(format!("stopped: gpudoctor got signal {sig}"))
    } else if let Some(f) = log.failures.first() {
        Some(format!("{} (on {})", f.quote.text, f.host))
    } else if let Some(q) = log.error_warnings.first() {
        Some(format!("NCCL WARN: {}", q.text))
    } else if let Some(RunExit::Code(c)) = out.exit.filter(|e| *e != RunExit::Code(0)) {
        Some(format!("the launcher exited {c}"))
    } else if let Some(RunExit::Signal(s)) = out.exit {
        Some(format!("the launcher was killed by signal {s}"))
    } else if log.wrong_rows().next().is_some() {
        Some("wrong results (#wrong > 0)".to_string())
    } else if busbw.is_none() {
        Some("no result row".to_string())
    } else if !log.has_footer() {
        Some("cut short: no footer".to_string())
    } else {
        None
    };
    Measured {
        busbw,
        size,
        failure,
        hung: out.timed_out,
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
