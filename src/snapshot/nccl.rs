//! The NCCL layer's facts: for each nccl-tests run or log, what ran (test, NCCL version, ranks,
//! nodes), how it ended, and which transports NCCL chose. Bus bandwidth is a measurement, not a
//! fact: the diff compares it from the report's figures, with a tolerance.

use super::{Facts, list};
use crate::answers::nccl::NcclProbe;
use crate::checks::Context;
use crate::report::SourceKind;

pub(super) fn nccl(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "nccl";
    // A capture's logs are read whether or not the layer ran (cheap, and the facts of a capture
    // should not depend on an earlier layer failing); a live benchmark is never started here.
    let probe = match ctx.nccl_if_asked() {
        Some(probe) => probe,
        None if ctx.source().kind() == SourceKind::Replay => ctx.nccl(),
        None => return,
    };
    let runs = match probe {
        NcclProbe::Runs(runs) => runs,
        // Nothing ran: the layer is `skip`, and its verdict already says why.
        _ => return,
    };
    for run in runs {
        let subject = format!("run {}", run.name);
        let log = &run.log;
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        facts.put(s, &subject, "test", opt(&log.collective));
        facts.put(s, &subject, "nccl version", opt(&log.nccl_version));
        facts.put(s, &subject, "ranks", log.ranks().to_string());
        facts.put(s, &subject, "nodes", log.nodes().to_string());
        let ended = if let Some(meta) = &run.meta
            && meta.timed_out
        {
            "killed at the timeout".to_string()
        } else if log.has_footer() {
            "completed".to_string()
        } else {
            "no summary line".to_string()
        };
        facts.put(s, &subject, "ended", ended);
        facts.put(
            s,
            &subject,
            "rows with wrong values",
            log.wrong_rows().count().to_string(),
        );
        facts.put(s, &subject, "test failures", log.failure_count.to_string());
        facts.put(
            s,
            &subject,
            "ib completion errors",
            log.ib_completion_count.to_string(),
        );
        let t = &log.transports;
        if !log.has_info() {
            facts.put(s, &subject, "transports", "not logged (no NCCL_DEBUG=INFO)");
            continue;
        }
        facts.put(s, &subject, "p2p channels", t.p2p.channels.to_string());
        facts.put(s, &subject, "shm channels", t.shm.channels.to_string());
        facts.put(
            s,
            &subject,
            "net channels",
            list(t.net.iter().map(|(name, u)| {
                format!("{name} {} (gpudirect rdma {})", u.channels, u.gdr_channels)
            })),
        );
        if let Some((network, _)) = &t.network {
            facts.put(s, &subject, "network", network.as_str());
        }
        if let Some((available, _)) = &t.nvls_support {
            facts.put(
                s,
                &subject,
                "nvls",
                match (&t.nvls_channels, available) {
                    (Some((n, _)), true) => format!("available, {n} channels"),
                    (None, true) => "available".to_string(),
                    (_, false) => "not available".to_string(),
                },
            );
        }
        for (key, value) in &t.env {
            facts.put(s, &subject, &format!("env {key}"), value.as_str());
        }
    }
}
