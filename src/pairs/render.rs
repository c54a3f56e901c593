//! `gpudoctor pairs` output: the suspects with the runs that convict them, then a table of
//! every pair by round (plain text, safe to paste) or the report as JSON. Both escape what came
//! from the cluster (`text::sanitize`: `text` for the table, `json` for the JSON).

use super::plan::{Findings, HostId};
use super::{PairResult, PairStatus, PairsReport, RunKind, Suspect, SuspectKind};
use crate::text::sanitize::text as safe;

/// Failed runs whose launcher lines the table shows (all are in the JSON).
const SAID_SHOWN: usize = 3;

fn figure(p: &PairResult) -> String {
    match p.busbw_gbps {
        Some(bw) => format!("{bw:.1} GB/s"),
        None => "no figure".to_string(),
    }
}

fn status_word(s: PairStatus) -> &'static str {
    match s {
        PairStatus::Fast => "fast",
        PairStatus::Slow => "slow",
        PairStatus::Failed => "failed",
        PairStatus::Hung => "hung",
        PairStatus::NotRun => "not run",
    }
}

/// `gpu03 + gpu01`, `gpu03 alone`, `gpu03 alone, NICs only`.
pub fn what_ran(p: &PairResult) -> String {
    match p.run {
        RunKind::Pair => format!("{} + {}", p.hosts[0], p.hosts[1]),
        RunKind::Alone => format!("{} alone", p.hosts[0]),
        RunKind::AloneNics => format!("{} alone, NICs only", p.hosts[0]),
    }
}

/// `round 2: gpu03 + gpu01: 12.1 GB/s, slow (27 % of the best pair's 45.0) over IB/GDRDMA`.
pub fn describe(p: &PairResult) -> String {
    let detail = p
        .detail
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    format!(
        "round {}: {}: {}, {}{detail} over {}",
        p.round,
        what_ran(p),
        figure(p),
        status_word(p.status),
        p.transport
    )
}

/// The suspects the findings name, each with its evidence.
pub fn suspects(
    hosts: &[String],
    ids: &[(HostId, HostId)],
    pairs: &[PairResult],
    findings: &Findings,
) -> Vec<Suspect> {
    let with = |h: HostId| {
        ids.iter()
            .zip(pairs)
            .filter(move |((a, b), _)| *a == h || *b == h)
            .map(|(_, p)| p)
    };
    let first_fast = |h: HostId| with(h).find(|p| p.status == PairStatus::Fast);
    let mut out = Vec::new();
    for (host, partners) in &findings.nodes {
        let mut evidence: Vec<String> = with(*host)
            .filter(|p| p.status != PairStatus::Fast)
            .map(describe)
            .collect();
        for p in partners {
            if let Some(fast) = first_fast(*p) {
                evidence.push(format!(
                    "{} is fast elsewhere: {}",
                    hosts[*p],
                    describe(fast)
                ));
            }
        }
        out.push(Suspect {
            kind: SuspectKind::Node,
            hosts: vec![hosts[*host].clone()],
            evidence,
            kubernetes: Vec::new(),
        });
    }
    for (a, b) in &findings.links {
        let mut evidence: Vec<String> = ids
            .iter()
            .zip(pairs)
            .filter(|((x, y), _)| (x.min(y), x.max(y)) == (a, b))
            .map(|(_, p)| describe(p))
            .collect();
        for h in [a, b] {
            if let Some(fast) = first_fast(*h) {
                evidence.push(format!(
                    "{} is fast elsewhere: {}",
                    hosts[*h],
                    describe(fast)
                ));
            }
        }
        out.push(Suspect {
            kind: SuspectKind::Link,
            hosts: vec![hosts[*a].clone(), hosts[*b].clone()],
            evidence,
            kubernetes: Vec::new(),
        });
    }
    out
}

/// `gpu01 + gpu05, gpu02 + gpu06`.
pub fn pair_names(hosts: &[String], pairs: &[(HostId, HostId)]) -> String {
    pairs
        .iter()
        .map(|(a, b)| format!("{} + {}", hosts[*a], hosts[*b]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `suspects: node gpu03; link gpu05-gpu06`.
pub fn suspects_line(suspects: &[Suspect], unresolved: &[String]) -> String {
    let named: Vec<String> = suspects
        .iter()
        .map(|s| match s.kind {
            SuspectKind::Node => format!("node {}", s.hosts.join(", ")),
            SuspectKind::Link => format!("link {}", s.hosts.join(" - ")),
        })
        .collect();
    let mut line = format!("{} suspect(s): {}", suspects.len(), named.join("; "));
    if !unresolved.is_empty() {
        line.push_str(&format!(
            "; not resolved within the rounds: {}",
            unresolved.join(", ")
        ));
    }
    line
}

pub fn unresolved_line(unresolved: &[String], no_good_host: bool) -> String {
    if no_good_host {
        format!(
            "could not tell: no pair was fast, so no host is known good to re-pair with ({}); a cause every node shares (the fabric, NCCL settings, the launcher) is more likely than one node",
            unresolved.join(", ")
        )
    } else {
        format!(
            "could not tell: {} stayed in slow or failed pairs without two good partners to convict or clear them (raise --max-rounds, or add hosts)",
            unresolved.join(", ")
        )
    }
}

/// The plain-text report.
pub fn table(report: &PairsReport) -> String {
    let mut out = String::new();
    let t = &report.threshold;
    let slow = match (t.slow_below_gbps, t.best_gbps, t.floor_gbps) {
        (Some(below), _, Some(floor)) if below == floor => format!(
            "slow below {below:.1} GB/s (the profile's floor{})",
            t.best_gbps
                .filter(|_| t.measured_pairs >= 2)
                .map(|b| format!(
                    "; {:.0} % of the best pair's {b:.1} is lower",
                    t.slow_share * 100.0
                ))
                .unwrap_or_default()
        ),
        (Some(below), Some(best), _) => format!(
            "slow below {below:.1} GB/s ({:.0} % of the best pair's {best:.1})",
            t.slow_share * 100.0
        ),
        (Some(below), None, _) => format!("slow below {below:.1} GB/s (the profile's floor)"),
        _ => "no figure to judge speed by".to_string(),
    };
    out.push_str(&format!(
        "gpudoctor pairs · {} host(s) · {} · {} GPU(s) per node · {} round(s) of at most {} · {slow}\n\n",
        report.hosts.len(),
        report.launcher.name(),
        report.gpus_per_node,
        report.rounds,
        report.max_rounds
    ));
    if !report.suspects.is_empty() {
        out.push_str("SUSPECTS\n");
        for s in &report.suspects {
            let kind = match s.kind {
                SuspectKind::Node => "node",
                SuspectKind::Link => "link",
            };
            out.push_str(&format!("{kind}  {}\n", safe(&s.hosts.join(" - "))));
            for e in &s.evidence {
                out.push_str(&format!("      {}\n", safe(e)));
            }
        }
        out.push('\n');
    }
    let header: Vec<String> = ["ROUND", "PAIR", "BUSBW", "TRANSPORT", "STATUS", "DETAIL"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows: Vec<Vec<String>> = report
        .pairs
        .iter()
        .map(|p| {
            vec![
                p.round.to_string(),
                safe(&what_ran(p)).to_string(),
                figure(p),
                safe(&p.transport).to_string(),
                status_word(p.status).to_string(),
                safe(p.detail.as_deref().unwrap_or("")).to_string(),
            ]
        })
        .collect();
    out.push_str(&crate::text::grid::text(&header, &rows));
    if let Some(p) = report.pairs.iter().find(|p| p.run == RunKind::Pair) {
        out.push_str(&format!(
            "\nfirst pair's command: {}\n",
            safe(&super::launch::shell_quoted(&p.command))
        ));
    }
    // What the launcher said, for the first few failed runs that said something different.
    let mut shown: Vec<&[String]> = Vec::new();
    for p in report.pairs.iter().filter(|p| !p.launcher_said.is_empty()) {
        if shown.len() == SAID_SHOWN || shown.contains(&p.launcher_said.as_slice()) {
            continue;
        }
        shown.push(&p.launcher_said);
        out.push_str(&format!("the launcher said for {}:\n", safe(&what_ran(p))));
        for line in &p.launcher_said {
            out.push_str(&format!("  | {}\n", safe(line)));
        }
    }
    out.push_str(&format!(
        "environment of the ranks: {}\n",
        safe(&report.env.join(" "))
    ));
    for p in report.pairs.iter().filter(|p| !p.killed.is_empty()) {
        out.push_str(&format!(
            "killed after {} + {}: {}\n",
            safe(&p.hosts[0]),
            safe(&p.hosts[1]),
            safe(&p.killed.join("; "))
        ));
    }
    for note in &report.notes {
        out.push_str(&format!("note: {}\n", safe(note)));
    }
    out.push_str(&format!(
        "\n{}; exit {}\n",
        safe(&report.verdict),
        report.exit_code
    ));
    out
}

/// The report as JSON, lossless, with the characters serde_json leaves raw (DEL, C1, bidi
/// controls, invisible characters) escaped as `\uXXXX` like every JSON output
/// (`text::sanitize::json`): host names, the launcher's version line, failure details and
/// killed processes come from the cluster.
pub fn json(report: &PairsReport) -> String {
    crate::text::sanitize::json(
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")),
    )
}
