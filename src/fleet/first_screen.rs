//! The first screen of `gpudoctor fleet`: counts, fleet-wide faults, then the nodes that need a
//! look grouped by cause with the action and each report's age, stale and unreachable nodes,
//! outliers. Sized for 80 columns and some 40 lines whatever the fleet's size: healthy nodes
//! are only counted, nodes sharing a cause share a line (their names wrapped under it), and a
//! fleet-wide fault is one line however many nodes it takes down (`--all` and `--format json`
//! name them all).

use std::fmt::Write;

use super::summary::{Scope, Summary};
use super::triage::{NodeTriage, Verdict};
use crate::diff::render::{clean, code};
use crate::text::wrap;

/// Width the node lists wrap at.
const WIDTH: usize = 80;
/// Most node names listed under one cause before "and N more".
const NAMES_PER_CAUSE: usize = 24;

fn age(n: &NodeTriage) -> String {
    match (n.age_seconds, n.ahead_seconds) {
        (_, Some(ahead)) => format!(
            "dated {} in the future, stale: clock skew?",
            crate::time::span(ahead as f64)
        ),
        (Some(s), _) if n.stale => format!("{}, stale", crate::time::span(s as f64)),
        (Some(s), _) => crate::time::span(s as f64),
        (None, None) => "time unknown".into(),
    }
}

fn status_word(status: &str) -> String {
    match status {
        "fail" => "FAIL".into(),
        "error" => "ERROR".into(),
        "warn" => "WARN".into(),
        other => clean(other).into_owned(),
    }
}

/// `names` joined and wrapped at [`WIDTH`] under an indent.
fn wrapped(names: &[String], indent: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = " ".repeat(indent);
    for (i, name) in names.iter().enumerate() {
        let piece = if i + 1 < names.len() {
            format!("{name},")
        } else {
            name.clone()
        };
        if line.trim().is_empty() {
            line.push_str(&piece);
        } else if line.chars().count() + 1 + piece.chars().count() > WIDTH {
            lines.push(std::mem::replace(
                &mut line,
                format!("{}{piece}", " ".repeat(indent)),
            ));
        } else {
            line.push(' ');
            line.push_str(&piece);
        }
    }
    if !line.trim().is_empty() {
        lines.push(line);
    }
    lines
}

/// `line` cut to `width` columns, an ellipsis where it was cut (`--format json` carries each
/// node's whole cause; the node's own report says the rest).
fn cut(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut short: String = line.chars().take(width - 1).collect();
    short.truncate(short.trim_end().len());
    short.push('…');
    short
}

/// A title line, then `names` wrapped under it.
fn listed(out: &mut String, title: &str, names: &[String]) {
    let _ = writeln!(out, "{title}");
    for line in wrapped(names, 4) {
        let _ = writeln!(out, "{line}");
    }
}

fn node_names(nodes: &[&NodeTriage], markdown: bool) -> Vec<String> {
    let mut names: Vec<String> = nodes
        .iter()
        .take(NAMES_PER_CAUSE)
        .map(|n| {
            let name = if markdown {
                code(&n.node)
            } else {
                clean(&n.node).into_owned()
            };
            format!("{name} ({})", age(n))
        })
        .collect();
    if nodes.len() > NAMES_PER_CAUSE {
        names.push(format!("and {} more", nodes.len() - NAMES_PER_CAUSE));
    }
    names
}

/// The first screen, as plain text or as Markdown (the same lines, names in code spans).
pub fn render(s: &Summary, markdown: bool) -> String {
    let shown = |t: &str| {
        if markdown {
            code(t)
        } else {
            clean(t).into_owned()
        }
    };
    let mut out = String::new();
    let c = &s.counts;
    let heading = if markdown { "## " } else { "" };
    let _ = writeln!(
        out,
        "{heading}gpudoctor fleet: {} node(s) at {}",
        s.triage.len() + c.unreachable,
        s.at.replace('T', " ").replace('Z', " UTC")
    );
    let mut parts = vec![
        format!("{} healthy", c.healthy),
        format!("{} failing", c.failing),
    ];
    for (n, what) in [
        (c.inconclusive, "inconclusive"),
        (c.warning, "warning"),
        (c.unreachable, "unreachable"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    parts.push(format!(
        "{} stale (report over {} old)",
        c.stale,
        crate::time::span(s.stale_after_seconds as f64)
    ));
    let _ = writeln!(out, "{}", parts.join(", "));

    let wide: Vec<_> = s
        .checks
        .iter()
        .filter(|c| c.scope == Scope::FleetWide)
        .collect();
    if !wide.is_empty() {
        let _ = writeln!(
            out,
            "\n{}fleet-wide, on most nodes (one cause for all, likely configuration):",
            if markdown { "### " } else { "" }
        );
        // A fleet-wide fault names thousands of nodes: look each up once, not by a scan.
        let by_name: std::collections::HashMap<&str, &NodeTriage> =
            s.triage.iter().map(|t| (t.node.as_str(), t)).collect();
        for w in wide {
            let action = s
                .triage
                .iter()
                .filter_map(|n| n.cause.as_ref())
                .find(|c| c.code == w.code && !c.action.is_empty())
                .map(|c| format!(" -> {}", shown(&c.action)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{}{} {} on {} of {} node(s){action}",
                if markdown { "- " } else { "  " },
                status_word(&w.status),
                shown(&w.code),
                w.nodes.len(),
                w.evaluated
            );
            let nodes: Vec<&NodeTriage> = w
                .nodes
                .iter()
                .filter_map(|name| by_name.get(name.as_str()).copied())
                .collect();
            for line in wrapped(&node_names(&nodes, markdown), 4) {
                let _ = writeln!(out, "{line}");
            }
        }
    }

    let groups = super::triage::by_cause(&s.triage);
    let _ = writeln!(
        out,
        "\n{}nodes that need a look, worst first (cause -> action; report age):",
        if markdown { "### " } else { "" }
    );
    if groups.is_empty() {
        let _ = writeln!(out, "{}none", if markdown { "" } else { "  " });
    }
    for (cause, nodes) in &groups {
        let action = if cause.action.is_empty() {
            String::new()
        } else {
            format!(" -> {}", shown(&cause.action))
        };
        let header = format!(
            "{}{} {}{action}: {} node(s)",
            if markdown { "- " } else { "  " },
            status_word(&cause.status),
            shown(&cause.code),
            nodes.len()
        );
        wrap::push(&mut out, &header, Some(WIDTH), 6);
        // One node: its name and what its report says, on one line (ten causes of one node each
        // are twenty lines). Several: their names, wrapped; what they share is the header's.
        if let [one] = nodes.as_slice() {
            let fault = if one.fleet_wide {
                &one.own_fault
            } else {
                &one.cause
            };
            let name = node_names(nodes, markdown).remove(0);
            let line = match fault.as_ref().map(|c| c.summary.as_str()) {
                Some(summary) if !summary.is_empty() => {
                    format!("    {name}: {}", clean(summary).replace('\n', " "))
                }
                _ => format!("    {name}"),
            };
            let _ = writeln!(out, "{}", cut(&line, WIDTH));
            continue;
        }
        for line in wrapped(&node_names(nodes, markdown), 4) {
            let _ = writeln!(out, "{line}");
        }
    }
    let unknown: Vec<&NodeTriage> = s
        .triage
        .iter()
        .filter(|n| n.verdict != Verdict::Healthy && n.cause.is_none())
        .collect();
    if !unknown.is_empty() {
        let title = format!("  cause not in the report: {} node(s)", unknown.len());
        listed(&mut out, &title, &node_names(&unknown, markdown));
    }

    let stale: Vec<&NodeTriage> = s
        .triage
        .iter()
        .filter(|n| n.stale && n.verdict == Verdict::Healthy)
        .collect();
    if !stale.is_empty() {
        let title = format!(
            "\nstale, last report healthy (is gpudoctor still running there?): {}",
            stale.len()
        );
        listed(&mut out, &title, &node_names(&stale, markdown));
    }
    if !s.unreachable.is_empty() {
        let title = format!(
            "\nunreachable (wrote in the last day, nothing now): {}",
            s.unreachable.len()
        );
        let names: Vec<String> = s.unreachable.iter().map(|u| shown(&u.name)).collect();
        listed(&mut out, &title, &names);
    }
    if !s.outliers.is_empty() {
        let _ = writeln!(
            out,
            "\noutliers (stray from their profile's median, or under its floor): {}",
            s.outliers.len()
        );
        for o in s.outliers.iter().take(8) {
            let line = format!(
                "  {} {}: {} {} (median {}{})",
                shown(&o.node),
                shown(&o.figure),
                o.shown,
                o.direction,
                o.median_shown,
                o.under_floor_text()
            );
            wrap::push(&mut out, &line, Some(WIDTH), 6);
        }
        if s.outliers.len() > 8 {
            let _ = writeln!(out, "  and {} more (--all)", s.outliers.len() - 8);
        }
    }
    if !s.skipped.is_empty() {
        let _ = writeln!(out, "\n{} input(s) skipped (see stderr)", s.skipped.len());
    }
    out
}
