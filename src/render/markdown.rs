//! `--format markdown`: a ticket body. Node, time and version first, the verdict in one line, a
//! table of the layers in walk order, then every finding with its evidence, hint and action —
//! the first failing layer's findings first, each cause with the findings it explains listed under
//! it as consequences. GitHub-flavoured Markdown that still reads as plain
//! text in a ticket system that does not render it.
//!
//! Everything shown comes from the report; text from the node (kernel-log lines, file contents)
//! goes into code spans or is escaped, so it cannot turn into markup; control characters in it
//! are shown escaped first (`text/sanitize.rs`), so it cannot drive a terminal either.

use std::fmt::Write;

use crate::report::SourceKind;
use crate::report::{CheckResult, LayerReport, Report, Status};

/// Status as a ticket reader scans for it.
fn word(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Warn => "**WARN**",
        Status::Fail => "**FAIL**",
        Status::Error => "**ERROR**",
        Status::Skip => "skip",
        Status::NotRun => "not run",
    }
}

/// An inline code span that holds `text` verbatim, whatever backticks it contains
/// (CommonMark: a fence one backtick longer than the longest run inside, padded with spaces).
fn code(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 || text.starts_with(' ') || text.ends_with(' ') || text.is_empty() {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// Prose from a check (summary, hint): the `code spans` it writes on purpose stay, and a word
/// that Markdown would read as markup (`gpu_is_lost`, `<index>`, `mlx5_0`) becomes a code span
/// of its own rather than a backslash escape, so the ticket reads the same pasted into a
/// plain-text tracker as rendered (issue 27).
fn prose(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text.as_str();
    while let Some(start) = rest.find('`') {
        let (before, from_tick) = rest.split_at(start);
        escape_into(&mut out, before);
        match from_tick[1..].find('`') {
            Some(end) => {
                out.push_str(&from_tick[..end + 2]);
                rest = &from_tick[end + 2..];
            }
            None => {
                // A lone backtick: no span can hold it plainly; the one escape left.
                out.push_str("\\`");
                rest = &from_tick[1..];
            }
        }
    }
    escape_into(&mut out, rest);
    out
}

/// Characters Markdown may read as markup outside a code span.
fn is_markup(c: char) -> bool {
    matches!(
        c,
        '\\' | '*' | '_' | '<' | '>' | '[' | ']' | '|' | '#' | '~'
    )
}

/// `text` (no backticks) with each word that holds markup put in a code span; the punctuation
/// around a word (`(`, `,`, `.`, `:`, `;`, `)`) stays outside it.
fn escape_into(out: &mut String, text: &str) {
    let mut first = true;
    for word in text.split(' ') {
        if !first {
            out.push(' ');
        }
        first = false;
        if !word.chars().any(is_markup) {
            out.push_str(word);
            continue;
        }
        let body_start = word.len() - word.trim_start_matches(['(', '"', '\'']).len();
        let body_end = word
            .trim_end_matches([',', '.', ':', ';', ')', '"', '\'', '!', '?'])
            .len();
        let (lead, body, tail) = if body_start < body_end {
            (
                &word[..body_start],
                &word[body_start..body_end],
                &word[body_end..],
            )
        } else {
            ("", word, "")
        };
        out.push_str(lead);
        out.push_str(&code(body));
        out.push_str(tail);
    }
}

/// A table cell: pipes would end the cell even inside a code span (GFM), so escape them last.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// One line that says how the run went, as the first line of the ticket says it.
pub fn verdict(report: &Report) -> String {
    let report = &*super::sanitize::report(report);
    if let Some(first) = &report.first_failure {
        return format!(
            "**FAIL** at the `{}` layer: {} — {}",
            first.layer,
            code(&first.code),
            prose(&first.summary)
        );
    }
    let count = |status: Status| {
        report
            .findings()
            .filter(|(_, c)| c.status == status)
            .count()
    };
    let (warns, errors) = (count(Status::Warn), count(Status::Error));
    match report.exit_code {
        3 if errors == 0 && report.nothing_ran() => {
            "**inconclusive**: no layer ran (every layer deselected by --only/--skip)".to_string()
        }
        4 => "**internal error**: an output file could not be written".to_string(),
        0 if warns == 0 => "**healthy**: no layer failed".to_string(),
        0 => format!("**healthy with {warns} warning(s)**: no layer failed"),
        3 => format!("**inconclusive**: {errors} check(s) could not be evaluated, none failed"),
        code => format!("**FAIL**: {warns} warning(s) under --strict (exit {code})"),
    }
}

fn exit_meaning(code: i32) -> &'static str {
    match code {
        0 => "healthy",
        1 => "a layer failed",
        3 => "inconclusive",
        4 => "internal error",
        _ => "see `gpudoctor check --help`",
    }
}

/// The layer table's last column: why it did not run, or what it found.
fn layer_detail(layer: &LayerReport) -> String {
    if let Some(reason) = &layer.reason {
        return prose(reason);
    }
    let ran = layer
        .checks
        .iter()
        .filter(|c| c.status != Status::Skip)
        .count();
    let findings = layer
        .checks
        .iter()
        .filter(|c| c.status.is_finding())
        .count();
    match findings {
        0 => format!("{ran} check(s) passed"),
        n => format!("{n} finding(s) of {ran} check(s)"),
    }
}

/// Findings in ticket order: the first failing layer's (its first failure leading), then the
/// rest in walk order.
fn ordered_findings(report: &Report) -> Vec<(&LayerReport, &CheckResult)> {
    // A consequence is listed under its cause (see `render`), not as a finding of its own.
    let mut findings: Vec<(&LayerReport, &CheckResult)> = report
        .findings()
        .filter(|(_, c)| c.explained_by.is_none())
        .collect();
    if let Some(first) = &report.first_failure {
        // A stable sort keeps walk order inside each group.
        findings.sort_by_key(|(layer, check)| {
            if layer.id != first.layer {
                2
            } else if check.code == first.code {
                0
            } else {
                1
            }
        });
    }
    findings
}

pub fn render(report: &Report) -> String {
    // Node text first made terminal-safe (a ticket is read in terminals too), then escaped
    // for Markdown below.
    let report = &*super::sanitize::report(report);
    let mut out = String::new();
    let node = &report.node;
    let host = node.hostname.as_deref().unwrap_or("unknown node");
    let _ = writeln!(out, "## gpudoctor: {}", prose(host));
    out.push('\n');
    let _ = writeln!(out, "{}", verdict(report));
    out.push('\n');

    let or_unknown = |v: Option<&str>| v.map(code).unwrap_or_else(|| "unknown".to_string());
    let source = match report.source.kind {
        SourceKind::Live => format!("live, root {}", code(&report.source.root)),
        SourceKind::Replay => format!("replay of {}", code(&report.source.root)),
        SourceKind::Files => format!("files {} (no node)", code(&report.source.root)),
    };
    // A replay's ticket is about the node when it was recorded: the capture's time leads, the
    // replay's follows (issue 19: a replayed ticket showed only when it was replayed).
    let run_time = report
        .generated_at
        .as_deref()
        .map(code)
        .unwrap_or_else(|| "not recorded".to_string());
    let time = match (report.source.kind, &report.source.captured_at) {
        (SourceKind::Live | SourceKind::Files, _) => run_time,
        (SourceKind::Replay, Some(captured)) => {
            format!("{} (recorded; replayed {run_time})", code(captured))
        }
        (SourceKind::Replay, None) => {
            format!("recorded: unknown (replayed {run_time})")
        }
    };
    let rows = [
        (
            "node",
            match &node.pod {
                Some(pod) => format!(
                    "{} (from the Pod {})",
                    or_unknown(node.hostname.as_deref()),
                    code(pod)
                ),
                None => or_unknown(node.hostname.as_deref()),
            },
        ),
        ("time", time),
        (
            "gpudoctor",
            format!(
                "{} (report schema {})",
                code(&report.gpudoctor_version),
                report.schema_version
            ),
        ),
        ("kernel", or_unknown(node.kernel.as_deref())),
        ("driver", or_unknown(node.driver_version.as_deref())),
        (
            "profile",
            report
                .profile
                .as_deref()
                .map(code)
                .unwrap_or_else(|| "none matched: consistency checks only".to_string()),
        ),
        ("source", source),
        (
            "exit code",
            format!("{} ({})", report.exit_code, exit_meaning(report.exit_code)),
        ),
    ];
    out.push_str("| | |\n|---|---|\n");
    for (key, value) in rows {
        let _ = writeln!(out, "| {key} | {} |", cell(&value));
    }
    out.push('\n');

    out.push_str("### Layers\n\n");
    out.push_str("| # | layer | status | question | detail |\n");
    out.push_str("|---|-------|--------|----------|--------|\n");
    for (i, layer) in report.layers.iter().enumerate() {
        let first = report
            .first_failure
            .as_ref()
            .is_some_and(|f| f.layer == layer.id);
        let _ = writeln!(
            out,
            "| {} | {} | {}{} | {} | {} |",
            i + 1,
            code(layer.id.id()),
            word(layer.status),
            if first { " (first failure)" } else { "" },
            cell(&prose(&layer.title)),
            cell(&layer_detail(layer)),
        );
    }
    out.push('\n');

    let findings = ordered_findings(report);
    out.push_str("### Findings\n\n");
    if findings.is_empty() {
        out.push_str("None: every check that ran passed or did not apply.\n\n");
    }
    for (layer, check) in findings {
        let _ = writeln!(
            out,
            "#### {} {} — `{}` layer",
            word(check.status),
            code(&check.code),
            layer.id
        );
        out.push('\n');
        let _ = writeln!(out, "{}", prose(&check.summary));
        out.push('\n');
        for e in &check.evidence {
            let expected = e
                .expected
                .as_deref()
                .map(|x| format!(" (expected: {})", prose(x)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "- evidence: {}: {}{expected}",
                code(&e.source),
                code(&e.observed)
            );
        }
        if let Some(hint) = &check.hint {
            let _ = writeln!(out, "- hint: {}", prose(hint));
        }
        let _ = writeln!(
            out,
            "- action: {} ({})",
            code(action_id(check)),
            prose(check.action.describe_for(layer.id))
        );
        for rma in report.rma_lines(check) {
            let _ = writeln!(out, "- rma: {}", code(&rma));
        }
        if let Some(drain) = report.drain_line(check) {
            let _ = writeln!(out, "- cordon: {}", code(&drain));
        }
        let _ = writeln!(
            out,
            "- more: `gpudoctor explain {}`",
            check.code.replace('`', "")
        );
        let mut consequences = report.consequences(&check.code).peekable();
        if consequences.peek().is_some() {
            out.push_str("- consequences (they clear when this is fixed):\n");
        }
        for consequence in consequences {
            let _ = writeln!(
                out,
                "  - {} {}: {}",
                word(consequence.status),
                code(&consequence.code),
                prose(&consequence.summary)
            );
            for e in &consequence.evidence {
                let expected = e
                    .expected
                    .as_deref()
                    .map(|x| format!(" (expected: {})", prose(x)))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "    - evidence: {}: {}{expected}",
                    code(&e.source),
                    code(&e.observed)
                );
            }
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "_gpudoctor {}: `gpudoctor explain CODE` explains a check; `gpudoctor render REPORT.json --format markdown` re-renders a saved JSON report._",
        prose(&report.gpudoctor_version)
    );
    out
}

/// The action as it appears in JSON (`reboot_node`).
fn action_id(check: &CheckResult) -> &'static str {
    match check.action {
        crate::report::Action::None => "none",
        crate::report::Action::FixConfig => "fix_config",
        crate::report::Action::RestartComponent => "restart_component",
        crate::report::Action::ReloadDriver => "reload_driver",
        crate::report::Action::ResetGpu => "reset_gpu",
        crate::report::Action::RebootNode => "reboot_node",
        crate::report::Action::HardwareInspection => "hardware_inspection",
        crate::report::Action::CheckWorkload => "check_workload",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_hold_backticks_and_pipes_are_escaped_in_cells() {
        assert_eq!(code("nvidia-smi"), "`nvidia-smi`");
        assert_eq!(code("a `b` c"), "`` a `b` c ``");
        assert_eq!(code("``x"), "``` ``x ```");
        assert_eq!(code(""), "`  `");
        assert_eq!(cell(&code("a|b")), "`a\\|b`");
    }

    #[test]
    fn prose_keeps_intended_code_and_escapes_the_rest() {
        assert_eq!(
            prose("run `nvidia-smi -r -i <index>` on gpu_3 <now>"),
            "run `nvidia-smi -r -i <index>` on `gpu_3` `<now>`"
        );
        assert_eq!(
            prose("nvml answered gpu_is_lost (serial), then (mlx5_0)."),
            "nvml answered `gpu_is_lost` (serial), then (`mlx5_0`)."
        );
        // Markup that is only punctuation still cannot become markup.
        assert_eq!(prose("a * b"), "a `*` b");
        assert_eq!(prose("odd ` tick"), "odd \\` tick");
        assert_eq!(prose("two\nlines"), "two lines");
    }
}
