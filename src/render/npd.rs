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
            Some(first) => format!("{}: {} {}", first.layer, first.code, first.summary),
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
