//! `--npd`: node-problem-detector custom-plugin mode (reference/kubernetes.md §9). NPD reads the
//! plugin's exit code — 0 OK, 1 NonOK, anything else Unknown — and its stdout, trimmed and cut to
//! `max_output_length` (default 80) *bytes* (Go slices the string), as the node condition's
//! message. So: one ASCII-safe line of at most [`MAX_MESSAGE_BYTES`], naming the failing layer
//! and check code first, where a cut cannot lose them.

use crate::report::{Report, Status, exit};

/// NPD's default `max_output_length`.
pub const MAX_MESSAGE_BYTES: usize = 80;

/// NPD's three plugin results.
pub mod code {
    pub const OK: i32 = 0;
    pub const PROBLEM: i32 = 1;
    pub const UNKNOWN: i32 = 2;
}

/// The plugin exit code for a report's exit code: a failure (or a warning under `--strict`) is a
/// problem; inconclusive and anything unexpected is unknown, never OK.
pub fn exit_code(report_exit: i32) -> i32 {
    match report_exit {
        exit::HEALTHY => code::OK,
        exit::FAILED => code::PROBLEM,
        _ => code::UNKNOWN,
    }
}

/// The one line NPD shows as the condition's message.
pub fn message(report: &Report) -> String {
    let report = &*super::sanitize::report(report);
    let line = match report.exit_code {
        exit::HEALTHY => {
            let warns: Vec<&str> = report
                .findings()
                .filter(|(_, c)| c.status == Status::Warn)
                .map(|(_, c)| c.code.as_str())
                .collect();
            match warns.as_slice() {
                [] => "gpudoctor: all layers pass".to_string(),
                [one] => format!("gpudoctor: ok, 1 warning: {one}"),
                [first, ..] => format!("gpudoctor: ok, {} warnings: {first}, ...", warns.len()),
            }
        }
        exit::FAILED => match &report.first_failure {
            // What happened must survive the cut: the summary is made shorter first.
            Some(first) => compact(&format!(
                "{}: {} {}",
                first.layer, first.code, first.summary
            )),
            // --strict made a warning fatal: name the first one.
            None => match report.findings().find(|(_, c)| c.status == Status::Warn) {
                Some((layer, check)) => {
                    format!("{}: {} {} (strict)", layer.id, check.code, check.summary)
                }
                None => "gpudoctor: failed".to_string(),
            },
        },
        _ => match report.findings().find(|(_, c)| c.status == Status::Error) {
            Some((layer, check)) => format!(
                "inconclusive: {}: {} {}",
                layer.id, check.code, check.summary
            ),
            None if report.nothing_ran() => {
                "gpudoctor: inconclusive, no layer ran (--only/--skip)".to_string()
            }
            None => "gpudoctor: inconclusive".to_string(),
        },
    };
    fit(&line, MAX_MESSAGE_BYTES)
}

/// A finding's line made shorter, one step at a time until it fits, so that the words saying
/// what happened ("GPU has fallen off the bus", "double-bit ECC error") survive NPD's cut:
/// `GPU 6 (0000:ba:00.0)` becomes `GPU ba:00.0` (the bus id is what stays true when indexes
/// shift), other bus ids lose their `0000:` domain, and a count of one (`×1`) goes.
pub(crate) fn compact(line: &str) -> String {
    let steps: [fn(&str) -> String; 3] = [gpu_by_bus, without_domain, |s| s.replace(" ×1 ", " ")];
    let mut text = line.to_string();
    for step in steps {
        if text.len() <= MAX_MESSAGE_BYTES {
            break;
        }
        text = step(&text);
    }
    text
}

/// `GPU 6 (0000:ba:00.0)` → `GPU 0000:ba:00.0`.
fn gpu_by_bus(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("GPU ") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && let Some(inner) = rest[digits..].strip_prefix(" (")
            && let Some(close) = inner.find(')')
            && inner[..close].contains(':')
            && !inner[..close].contains(' ')
        {
            out.push_str(&inner[..close]);
            rest = &inner[close + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// `0000:ba:00.0` → `ba:00.0` (PCI domain 0, the only one on most nodes), as whole tokens.
fn without_domain(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            let (lead, body) = match word.strip_prefix('(') {
                Some(body) => ("(", body),
                None => ("", word),
            };
            match body.strip_prefix("0000:") {
                Some(short) if short.len() >= 7 && short.as_bytes()[2] == b':' => {
                    format!("{lead}{short}")
                }
                _ => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One line of at most `max` bytes: newlines become spaces, and a cut lands on a character
/// boundary and ends in `...`.
pub fn fit(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<&str>>().join(" ");
    if line.len() <= max {
        return line;
    }
    let ellipsis = if max >= 3 { "..." } else { "" };
    let mut end = max - ellipsis.len();
    while end > 0 && !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", line[..end].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_finding_keeps_what_happened() {
        let line = "driver: driver.xid_events GPU 6 (0000:ba:00.0) XID 79 ×1 (GPU has fallen off the bus) last 2 min ago (2026-01-01T00:00:00Z): live";
        let short = fit(&compact(line), MAX_MESSAGE_BYTES);
        assert!(short.len() <= MAX_MESSAGE_BYTES, "{short}");
        assert!(
            short.starts_with(
                "driver: driver.xid_events GPU ba:00.0 XID 79 (GPU has fallen off the bus)"
            ),
            "{short}"
        );
        // What fits is left alone.
        assert_eq!(
            compact("driver.x GPU 1 (0000:18:00.0) ok"),
            "driver.x GPU 1 (0000:18:00.0) ok"
        );
        assert_eq!(
            gpu_by_bus("GPU 12 (0000:3a:00.0) and GPU 3 (x y)"),
            "GPU 0000:3a:00.0 and GPU 3 (x y)"
        );
        assert_eq!(
            without_domain("at 0000:3a:00.0 (0000:18:00.0) 0000:1"),
            "at 3a:00.0 (18:00.0) 0000:1"
        );
    }

    #[test]
    fn fits_in_bytes_on_a_char_boundary() {
        assert_eq!(fit("short", 80), "short");
        assert_eq!(fit("a\n  b\tc", 80), "a b c");
        let long = "driver: driver.xid_events gpu 0 (0000:18:00.0) xid 48 ×1 (double bit ecc error) and more text after it";
        let cut = fit(long, 80);
        assert!(cut.len() <= 80, "{} bytes", cut.len());
        assert!(cut.ends_with("..."));
        assert!(cut.starts_with("driver: driver.xid_events"));
        // A multi-byte character straddling the limit is dropped whole.
        let cut = fit(&format!("{}×yzw", "a".repeat(76)), 80);
        assert_eq!(cut, format!("{}...", "a".repeat(76)));
        assert!(fit(&"x".repeat(200), 2).len() <= 2);
    }

    #[test]
    fn exit_codes_collapse_to_three() {
        assert_eq!(exit_code(exit::HEALTHY), code::OK);
        assert_eq!(exit_code(exit::FAILED), code::PROBLEM);
        assert_eq!(exit_code(exit::INCONCLUSIVE), code::UNKNOWN);
        assert_eq!(exit_code(exit::INTERNAL), code::UNKNOWN);
        assert_eq!(exit_code(exit::USAGE), code::UNKNOWN);
    }
}
