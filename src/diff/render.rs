//! Printing a [`Diff`]: the table (a terminal), Markdown (the ticket) and JSON (automation).
//! One section per layer with only what differs, one line per difference, changed verdicts
//! first. What does not count (identifiers, provenance, verdicts between pass and skip) is
//! only counted in the closing line unless asked for (`--all`).
//!
//! Everything printed from the node (values, summaries, file names) goes through [`clean`]
//! first, so control characters in a capture cannot drive the terminal.

use std::borrow::Cow;
use std::fmt::Write;

use super::compare::{ABSENT, Diff, Difference, Kind, SideSummary};

/// Text from a node or a saved report, safe for a terminal (the one rule every human format
/// follows: [`crate::text::sanitize::text`]).
pub fn clean(text: &str) -> Cow<'_, str> {
    crate::text::sanitize::text(text)
}

pub fn json(diff: &Diff) -> String {
    let mut text = serde_json::to_string_pretty(diff)
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialise the diff: {e}\"}}"));
    text.push('\n');
    crate::text::sanitize::json(text)
}

/// Sections in output order, each with its lines (those not counted only when `all`).
fn sections(diff: &Diff, all: bool) -> Vec<(&str, Vec<&Difference>)> {
    let mut out: Vec<(&str, Vec<&Difference>)> = Vec::new();
    for d in diff.differences.iter().filter(|d| all || d.counted) {
        match out.last_mut() {
            Some((section, lines)) if *section == d.section => lines.push(d),
            _ => out.push((&d.section, vec![d])),
        }
    }
    out
}

/// `A  fixtures/x  capture · node n · profile p · exit 1 (layers after driver not run)`.
fn side_line(label: &str, s: &SideSummary) -> String {
    let mut parts = vec![s.kind.describe().to_string()];
    if let Some(host) = &s.hostname {
        parts.push(format!("node {}", clean(host)));
    }
    parts.push(format!(
        "profile {}",
        s.profile.as_deref().map(clean).unwrap_or("none".into())
    ));
    let mut exit = format!("exit {}", s.exit_code);
    if let Some(layer) = &s.blocked_by {
        exit.push_str(&format!(
            " (stopped at {}: verdicts of {} later layer(s) not compared, --keep-going compares them)",
            clean(layer),
            s.not_evaluated.len()
        ));
    }
    parts.push(exit);
    if !s.gpudoctor_version.is_empty() && s.kind == super::InputKind::Report {
        parts.push(format!("gpudoctor {}", clean(&s.gpudoctor_version)));
    }
    let mut line = format!("{label}  {}  {}", clean(&s.input), parts.join(" · "));
    if let Some(note) = &s.note {
        line.push_str(&format!("\n   {}", clean(note)));
    }
    line
}

fn value(v: &str) -> Cow<'_, str> {
    if v.is_empty() {
        Cow::Borrowed("\"\"")
    } else {
        clean(v)
    }
}

/// One difference as a table line (without indentation).
fn line(d: &Difference) -> String {
    let what = match &d.attribute {
        Some(attribute) => format!("{} {}", clean(&d.subject), clean(attribute)),
        None => clean(&d.subject).into_owned(),
    };
    let mut text = match d.kind {
        Kind::Verdict => format!("verdict {what}: {} → {}", value(&d.a), value(&d.b)),
        _ => format!("{what}: {} → {}", value(&d.a), value(&d.b)),
    };
    if let Some(detail) = &d.detail {
        match d.kind {
            Kind::Verdict => text.push_str(&format!(" — {}", clean(detail))),
            _ => text.push_str(&format!(" ({})", clean(detail))),
        }
    }
    text
}

fn closing(diff: &Diff, all: bool) -> String {
    let mut text = if diff.counted == 0 {
        "no difference that matters".to_string()
    } else {
        let mut parts = Vec::new();
        for (kind, word) in [
            (Kind::Verdict, "verdict"),
            (Kind::Fact, "fact"),
            (Kind::Measurement, "measurement"),
        ] {
            let n = diff
                .differences
                .iter()
                .filter(|d| d.kind == kind && d.counted)
                .count();
            if n > 0 {
                parts.push(format!("{n} {word}{}", if n == 1 { "" } else { "s" }));
            }
        }
        format!(
            "{} difference{} ({})",
            diff.counted,
            if diff.counted == 1 { "" } else { "s" },
            parts.join(", ")
        )
    };
    let hidden = diff.differences.len() - diff.counted;
    if hidden > 0 && !all {
        text.push_str(&format!(
            "; {hidden} more not counted (identifiers, source files, checks between pass and skip: --all lists them)"
        ));
    }
    text
}

pub fn table(diff: &Diff, all: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "gpudoctor diff");
    let _ = writeln!(out, "{}", side_line("A", &diff.a));
    let _ = writeln!(out, "{}", side_line("B", &diff.b));
    for (section, lines) in sections(diff, all) {
        let _ = writeln!(out, "\n{}", clean(section));
        for d in lines {
            let mark = if d.counted { "  " } else { "  (not counted) " };
            let _ = writeln!(out, "{mark}{}", line(d));
        }
    }
    let _ = writeln!(out, "\n{}; exit {}", closing(diff, all), diff.exit_code);
    out
}

/// An inline code span holding `text` verbatim (CommonMark: a fence longer than any run of
/// backticks inside), with pipes escaped so it can sit in a table cell.
pub(crate) fn code(text: &str) -> String {
    let text = clean(text).replace('|', "\\|");
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    if longest > 0 || text.starts_with(' ') || text.ends_with(' ') || text.is_empty() {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

fn md_value(v: &str) -> String {
    if v == ABSENT || v == "present" {
        format!("*{v}*")
    } else {
        code(v)
    }
}

fn md_line(d: &Difference) -> String {
    let what = match &d.attribute {
        Some(attribute) => format!("{} {}", code(&d.subject), clean(attribute)),
        None => code(&d.subject),
    };
    let mut text = match d.kind {
        Kind::Verdict => format!(
            "- **verdict** {what}: {} → **{}**",
            clean(&d.a),
            clean(&d.b)
        ),
        _ => format!("- {what}: {} → {}", md_value(&d.a), md_value(&d.b)),
    };
    if let Some(detail) = &d.detail {
        match d.kind {
            Kind::Verdict => text.push_str(&format!(" — {}", code(detail))),
            _ => text.push_str(&format!(" ({})", clean(detail))),
        }
    }
    if !d.counted {
        text.push_str(" *(not counted)*");
    }
    text
}

pub fn markdown(diff: &Diff, all: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## gpudoctor diff\n");
    let _ = writeln!(out, "| | input | kind | node | profile | exit |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for (label, s) in [("A", &diff.a), ("B", &diff.b)] {
        let mut exit = s.exit_code.to_string();
        if let Some(layer) = &s.blocked_by {
            exit.push_str(&format!(
                " (stopped at {}: later verdicts not compared)",
                clean(layer)
            ));
        }
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {exit} |",
            code(&s.input),
            s.kind.describe(),
            s.hostname
                .as_deref()
                .map(code)
                .unwrap_or_else(|| "?".into()),
            s.profile
                .as_deref()
                .map(code)
                .unwrap_or_else(|| "none".into()),
        );
    }
    for (label, s) in [("A", &diff.a), ("B", &diff.b)] {
        if let Some(note) = &s.note {
            let _ = writeln!(out, "\n{label}: {}", clean(note));
        }
    }
    for (section, lines) in sections(diff, all) {
        let _ = writeln!(out, "\n### {}\n", clean(section));
        for d in lines {
            let _ = writeln!(out, "{}", md_line(d));
        }
    }
    let _ = writeln!(
        out,
        "\n**{}** (exit {})",
        closing(diff, all),
        diff.exit_code
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_hold_backticks_and_pipes() {
        assert_eq!(code("x16"), "`x16`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("a|b"), "`a\\|b`");
    }
}
