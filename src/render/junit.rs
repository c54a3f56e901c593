//! `--format junit`: the report as JUnit XML, the test-result format CI systems read (GitLab's
//! `artifacts:reports:junit`, GitHub Actions' test-report actions, Jenkins' `junit` step). One
//! `<testsuite>` per layer, one `<testcase>` per check (`classname` the layer, `name` the check
//! code): `fail` is a `<failure>`, `error` an `<error>`, `skip` and `not_run` are `<skipped>`,
//! each with the summary as its message and the summary, evidence, hint and action as its
//! text; `warn` passes (a warning does not fail a run unless `--strict`) with the same text in
//! `<system-out>`, which CI systems show beside the test — unless the run was `--strict` (the
//! report's exit code 1 with no check failed), where a warning is a `<failure>` as it is for the
//! exit code. A layer skipped or not run as a whole is one skipped testcase named after the
//! layer.
//!
//! The shape follows the Jenkins xUnit plugin's `junit-10.xsd` (tests/data/junit/, validated by
//! tests/junit.rs with xmllint): `testsuites` > `testsuite` (`name`, `tests`, `failures`,
//! `errors`, `skipped`, `time`, `timestamp`, `hostname`) > `properties`, `testcase`.
//!
//! Node text is made terminal-safe first (`text::sanitize`: control characters shown escaped,
//! which also keeps out the characters XML 1.0 forbids), then escaped for XML.

use std::fmt::Write;

use crate::report::{Action, CheckResult, LayerReport, Report, Status};

/// The action as the JSON report names it (`hardware_inspection`).
fn action_name(action: Action) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `&`, `<`, `>`, `"` and `'` as entities: safe in attributes and text alike.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Whatever sanitising left that XML 1.0 cannot hold (it escapes C0 controls; this
            // is the belt to its braces): shown as its code point.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            '\u{fffe}' | '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Seconds as `junit-10.xsd`'s `SUREFIRE_TIME` takes them (`0.012`).
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// What a CI reader needs to act on a finding: summary, evidence, hint, action, and the cause
/// it follows from.
fn details(check: &CheckResult) -> String {
    let mut text = format!("{}: {}\n", check.status.as_str(), check.summary);
    if let Some(cause) = &check.explained_by {
        let _ = writeln!(text, "follows from: {cause}");
    }
    for e in &check.evidence {
        let _ = write!(text, "evidence: {}: {}", e.source, e.observed);
        if let Some(expected) = &e.expected {
            let _ = write!(text, " (expected: {expected})");
        }
        text.push('\n');
    }
    if !check.gpus.is_empty() {
        let _ = writeln!(text, "gpus: {}", check.gpus.join(", "));
    }
    if let Some(hint) = &check.hint {
        let _ = writeln!(text, "hint: {hint}");
    }
    let _ = writeln!(text, "action: {}", action_name(check.action));
    text
}

fn testcase(out: &mut String, classname: &str, check: &CheckResult, strict: bool) {
    let _ = write!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\" time=\"0.000\"",
        escape(&check.code),
        escape(classname)
    );
    let body = match check.status {
        Status::Pass => None,
        Status::Warn if !strict => Some(format!(
            "      <system-out>{}</system-out>\n",
            escape(&details(check))
        )),
        Status::Fail | Status::Warn | Status::Error => {
            let tag = if check.status == Status::Error {
                "error"
            } else {
                "failure"
            };
            Some(format!(
                "      <{tag} type=\"{}\" message=\"{}\">{}</{tag}>\n",
                action_name(check.action),
                escape(&check.summary),
                escape(&details(check))
            ))
        }
        Status::Skip | Status::NotRun => Some(format!(
            "      <skipped message=\"{}\"/>\n",
            escape(&format!("{}: {}", check.status.as_str(), check.summary))
        )),
    };
    match body {
        None => out.push_str("/>\n"),
        Some(body) => {
            out.push_str(">\n");
            out.push_str(&body);
            out.push_str("    </testcase>\n");
        }
    }
}

#[derive(Default)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Counts {
    fn add(&mut self, status: Status, strict: bool) {
        self.tests += 1;
        match status {
            Status::Fail => self.failures += 1,
            Status::Warn if strict => self.failures += 1,
            Status::Error => self.errors += 1,
            Status::Skip | Status::NotRun => self.skipped += 1,
            Status::Pass | Status::Warn => {}
        }
    }
}

/// The run was `--strict`: it failed (exit 1) though no check did, so its warnings failed it.
fn strict(report: &Report) -> bool {
    report.exit_code == 1
        && !report
            .layers
            .iter()
            .flat_map(|l| &l.checks)
            .any(|c| c.status == Status::Fail)
}

fn suite(out: &mut String, report: &Report, layer: &LayerReport, total: &mut Counts) {
    let strict = strict(report);
    let classname = format!("gpudoctor.{}", layer.id.id());
    let mut counts = Counts::default();
    let mut cases = String::new();
    if layer.checks.is_empty() {
        // A layer skipped or blocked as a whole: one testcase says why.
        let status = match layer.status {
            Status::NotRun => Status::NotRun,
            _ => Status::Skip,
        };
        counts.add(status, strict);
        let reason = layer.reason.as_deref().unwrap_or("no checks ran");
        let _ = write!(
            cases,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"0.000\">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
            escape(layer.id.id()),
            escape(&classname),
            escape(&format!("{}: {reason}", status.as_str()))
        );
    }
    for check in &layer.checks {
        counts.add(check.status, strict);
        testcase(&mut cases, &classname, check, strict);
    }
    let _ = write!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\"",
        escape(&classname),
        counts.tests,
        counts.failures,
        counts.errors,
        counts.skipped,
        seconds(layer.duration_ms)
    );
    if let Some(at) = &report.generated_at {
        let _ = write!(out, " timestamp=\"{}\"", escape(at));
    }
    if let Some(host) = &report.node.hostname {
        let _ = write!(out, " hostname=\"{}\"", escape(host));
    }
    out.push_str(">\n");
    out.push_str(&cases);
    out.push_str("  </testsuite>\n");
    total.tests += counts.tests;
    total.failures += counts.failures;
    total.errors += counts.errors;
    total.skipped += counts.skipped;
}

pub fn render(report: &Report) -> String {
    let report = &*super::sanitize::report(report);
    let mut suites = String::new();
    let mut total = Counts::default();
    for layer in &report.layers {
        suite(&mut suites, report, layer, &mut total);
    }
    let host = report.node.hostname.as_deref().unwrap_or("unknown node");
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{}\">",
        escape(&format!("gpudoctor {host}")),
        total.tests,
        total.failures,
        total.errors,
        seconds(report.duration_ms)
    );
    out.push_str(&suites);
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
        assert_eq!(escape("bell\u{7}"), "bell\\u{7}");
        assert_eq!(escape("tab\tok\n"), "tab\tok\n");
        assert_eq!(seconds(1234), "1.234");
        assert_eq!(seconds(5), "0.005");
    }
}
