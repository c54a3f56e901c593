//! Printing a fleet [`Summary`]: a table for the terminal, Markdown for a ticket or a wiki page,
//! JSON for automation. Every string from a report or a file name — node names, profiles,
//! codes, layer and check statuses (a report of another version, or a hostile one, can hold
//! any text there), figure keys, file names and reasons — goes through [`clean`] (Markdown:
//! [`code`]) first; JSON escapes them its own way plus `sanitize::json`.

use std::borrow::Cow;
use std::fmt::Write;

use super::summary::{Outlier, Scope, Spread, Summary};
use crate::diff::render::{clean, code};

pub fn json(summary: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(summary)
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialise the summary: {e}\"}}"));
    text.push('\n');
    crate::text::sanitize::json(text)
}

/// A layer status as a short table cell; a status this version does not know is shown as
/// written, escaped.
fn cell(status: &str) -> Cow<'_, str> {
    Cow::Borrowed(match status {
        "pass" => "ok",
        "not_run" => "--",
        "absent" => "",
        "fail" => "FAIL",
        "warn" => "warn",
        "error" => "ERR",
        other => return clean(other),
    })
}

/// A layer status as a Markdown table cell: known ones bold when they need attention, others
/// as a code span (so neither markup nor a `|` in them changes the table).
fn md_cell(status: &str) -> String {
    match status {
        "fail" | "error" | "warn" => format!("**{}**", cell(status)),
        "pass" | "not_run" | "absent" => cell(status).into_owned(),
        other => md(other),
    }
}

fn spread_line(s: &Spread) -> String {
    let nodes: Vec<String> = s.nodes.iter().map(|n| clean(n).into_owned()).collect();
    let shown = if nodes.len() > 10 {
        format!("{} … ({} more)", nodes[..10].join(", "), nodes.len() - 10)
    } else {
        nodes.join(", ")
    };
    format!(
        "{} {} on {} of {} node(s) that ran it: {shown}",
        clean(&s.code),
        clean(&s.status),
        s.nodes.len(),
        s.evaluated
    )
}

fn outlier_line(o: &Outlier) -> String {
    let z =
        o.z.map(|z| format!("modified z {}", crate::text::number::one_decimal(z)))
            .unwrap_or_else(|| "mad 0: most nodes agree exactly".into());
    format!(
        "{} {}: {} {} (median {} of {} node(s), {z}{})",
        clean(&o.node),
        clean(&o.figure),
        o.shown,
        o.direction,
        o.median_shown,
        o.group,
        o.under_floor_text()
    )
}

fn header(s: &Summary) -> String {
    let profiles: std::collections::BTreeSet<&str> = s
        .nodes
        .iter()
        .map(|n| n.profile.as_deref().unwrap_or("none"))
        .collect();
    format!(
        "{} node report(s), {} profile(s), {} file(s) skipped",
        s.reports,
        profiles.len(),
        s.skipped.len()
    )
}

/// The first screen; with `all`, every node's layers and every check after it.
pub fn table(s: &Summary, all: bool) -> String {
    let mut out = super::first_screen::render(s, false);
    if !all {
        let _ = writeln!(
            out,
            "\n--all: every node's layers, checks and outliers; --format json: all of it\nexit {}",
            s.exit_code
        );
        return out;
    }
    let _ = writeln!(out, "\n{}", "-".repeat(78));
    let _ = writeln!(out, "gpudoctor fleet · {}", header(s));
    let mut head: Vec<String> = vec!["node".into(), "profile".into()];
    head.extend(s.columns.iter().map(|c| clean(c).into_owned()));
    head.push("exit".into());
    let rows: Vec<Vec<String>> = s
        .nodes
        .iter()
        .map(|n| {
            let mut row = vec![
                clean(&n.node).into_owned(),
                clean(n.profile.as_deref().unwrap_or("none")).into_owned(),
            ];
            row.extend(
                s.columns
                    .iter()
                    .map(|c| cell(n.layers.get(c).map_or("", String::as_str)).into_owned()),
            );
            row.push(n.exit_code.to_string());
            row
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let _ = writeln!(out);
    for row in std::iter::once(&head).chain(rows.iter()) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    for (scope, title) in [
        (
            Scope::FleetWide,
            "fleet-wide (on more than half of the nodes that ran the check: one cause for all)",
        ),
        (Scope::Node, "node faults (on a few nodes)"),
    ] {
        let lines: Vec<&Spread> = s.checks.iter().filter(|c| c.scope == scope).collect();
        let _ = writeln!(out, "\n{title}:");
        if lines.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for c in lines {
            let _ = writeln!(out, "  {}", spread_line(c));
        }
    }
    let _ = writeln!(
        out,
        "\noutliers (per profile: |modified z| > 3.5, or under a floor the median meets):"
    );
    if s.outliers.is_empty() {
        let _ = writeln!(out, "  none");
    }
    let mut last_profile = None;
    for o in &s.outliers {
        if last_profile != Some(&o.profile) {
            let _ = writeln!(out, "  profile {}:", clean(&o.profile));
            last_profile = Some(&o.profile);
        }
        let _ = writeln!(out, "    {}", outlier_line(o));
    }
    if !s.skipped.is_empty() {
        let _ = writeln!(out, "\nskipped files:");
        for k in &s.skipped {
            let _ = writeln!(out, "  {}: {}", clean(&k.file), clean(&k.why));
        }
    }
    let _ = writeln!(out, "\nexit {}", s.exit_code);
    out
}

/// Node text in Markdown: a code span, so it cannot turn into markup.
fn md(text: &str) -> String {
    code(text)
}

/// A check's status in a sentence: known ones as words, others as a code span.
fn md_status(status: &str) -> String {
    match crate::saved::status(status) {
        Some(known) => known.as_str().to_string(),
        None => md(status),
    }
}

fn md_spread(s: &Spread) -> String {
    let nodes: Vec<String> = s.nodes.iter().map(|n| md(n)).collect();
    let shown = if nodes.len() > 10 {
        format!("{} … ({} more)", nodes[..10].join(", "), nodes.len() - 10)
    } else {
        nodes.join(", ")
    };
    format!(
        "{} {} on {} of {} node(s) that ran it: {shown}",
        md(&s.code),
        md_status(&s.status),
        s.nodes.len(),
        s.evaluated
    )
}

fn md_outlier(o: &Outlier) -> String {
    let z =
        o.z.map(|z| format!("modified z {}", crate::text::number::one_decimal(z)))
            .unwrap_or_else(|| "mad 0: most nodes agree exactly".into());
    format!(
        "{} {}: {} {} (median {} of {} node(s), {z}{})",
        md(&o.node),
        md(&o.figure),
        o.shown,
        o.direction,
        o.median_shown,
        o.group,
        o.under_floor_text()
    )
}

/// The first screen as Markdown; with `all`, the node table and every check after it.
pub fn markdown(s: &Summary, all: bool) -> String {
    let mut out = super::first_screen::render(s, true);
    if !all {
        let _ = writeln!(out, "\nexit {}", s.exit_code);
        return out;
    }
    let _ = writeln!(out, "\n## Every node\n\n{}\n", header(s));
    let mut head = vec!["node".to_string(), "profile".into()];
    head.extend(s.columns.iter().map(|c| clean(c).replace('|', "\\|")));
    head.push("exit".into());
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(head.len()));
    for n in &s.nodes {
        let mut row = vec![md(&n.node), md(n.profile.as_deref().unwrap_or("none"))];
        row.extend(
            s.columns
                .iter()
                .map(|c| md_cell(n.layers.get(c).map_or("", String::as_str))),
        );
        row.push(n.exit_code.to_string());
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    for (scope, title) in [
        (Scope::FleetWide, "Fleet-wide"),
        (Scope::Node, "Node faults"),
    ] {
        let _ = writeln!(out, "\n### {title}\n");
        let lines: Vec<&Spread> = s.checks.iter().filter(|c| c.scope == scope).collect();
        if lines.is_empty() {
            let _ = writeln!(out, "none");
        }
        for c in lines {
            let _ = writeln!(out, "- {}", md_spread(c));
        }
    }
    let _ = writeln!(out, "\n### Outliers\n");
    if s.outliers.is_empty() {
        let _ = writeln!(out, "none");
    }
    for o in &s.outliers {
        let _ = writeln!(out, "- profile {}: {}", md(&o.profile), md_outlier(o));
    }
    if !s.skipped.is_empty() {
        let _ = writeln!(out, "\n### Skipped files\n");
        for k in &s.skipped {
            let _ = writeln!(out, "- {}: {}", md(&k.file), md(&k.why));
        }
    }
    let _ = writeln!(out, "\nexit {}", s.exit_code);
    out
}
