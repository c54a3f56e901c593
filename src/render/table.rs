//! `--format table` (the default): one line per layer with a status mark, each finding indented
//! under its layer with evidence and hint, the findings it explains as `consequence:` lines under
//! it (their evidence is in the JSON), and a closing line naming the first failure's cause.
//! Colour only on a terminal without `NO_COLOR` (https://no-color.org); plain text otherwise.
//! Not a grid (a layer line, then its findings indented with evidence and hint lines of any
//! length), so not laid out by comfy-table as the grids are (`grid.rs`): a table cell would wrap
//! or pad the evidence that operators paste into tickets. Lines longer than [`Style::width`]
//! (the terminal's, else `COLUMNS`; none into a pipe) wrap at spaces (`wrap.rs`), each
//! continuation under the text it continues: a layer's title, a finding's summary, or two
//! columns in from `evidence:`/`hint:`. With `--verbose` the checks that passed with figures are
//! listed too, each figure on a `measured:` line in the units people read (GB/s, MiB, s).

use crate::report::{CheckResult, Figure, Report, Status};

use crate::text::wrap;

/// Where continuation lines start: under a layer's title, a finding's summary, two columns in
/// from `evidence:` and `hint:`, two in for the header and verdict lines.
const LAYER_INDENT: usize = 22;
const FINDING_INDENT: usize = 14;
const DETAIL_INDENT: usize = 16;
const LINE_INDENT: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
    /// Wrap lines at this many columns (`wrap::stdout_width`); `None`: one line per item.
    pub width: Option<usize>,
    /// `--verbose`: every check with figures is listed, passing ones too, each figure on a
    /// `measured:` line (the numbers the JSON carries).
    pub verbose: bool,
}

impl Style {
    pub const PLAIN: Style = Style {
        color: false,
        width: None,
        verbose: false,
    };

    /// The same style wrapping at `width`.
    pub fn with_width(self, width: Option<usize>) -> Style {
        Style { width, ..self }
    }

    /// The same style with `--verbose` on or off.
    pub fn verbose(self, verbose: bool) -> Style {
        Style { verbose, ..self }
    }

    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty (https://no-color.org:
    /// "when present and not an empty string"). The one rule for every table gpudoctor prints.
    pub fn for_stdout(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> Style {
        Style {
            color: terminal && no_color.is_none_or(|v| v.is_empty()),
            width: None,
            verbose: false,
        }
    }

    fn paint(self, status: Status, text: &str) -> String {
        if !self.color {
            return text.to_string();
        }
        let code = match status {
            Status::Pass => "32",
            Status::Warn => "33",
            Status::Fail => "1;31",
            Status::Error => "35",
            Status::Skip | Status::NotRun => "2",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }

    fn dim(self, text: &str) -> String {
        if self.color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// A fixed-width status mark: readable without colour, aligned in columns.
fn mark(status: Status) -> &'static str {
    match status {
        Status::Pass => "[ ok ]",
        Status::Warn => "[warn]",
        Status::Fail => "[FAIL]",
        Status::Error => "[ERR ]",
        Status::Skip => "[skip]",
        Status::NotRun => "[ -- ]",
    }
}

pub fn render(report: &Report, style: Style) -> String {
    // Node text (host names, kernel-log lines, device names) cannot reach the terminal raw.
    let report = &*super::sanitize::report(report);
    let mut out = String::new();
    let node = &report.node;
    let w = style.width;
    let line = format!(
        "gpudoctor {} · node {} · kernel {} · driver {} · {} {}{}",
        report.gpudoctor_version,
        node.hostname.as_deref().unwrap_or("?"),
        node.kernel.as_deref().unwrap_or("?"),
        node.driver_version.as_deref().unwrap_or("?"),
        match report.source.kind {
            crate::report::SourceKind::Live => "live",
            crate::report::SourceKind::Replay => "replay of",
            crate::report::SourceKind::Files => "files",
        },
        report.source.root,
        // When the replayed node was recorded: the verdict is about the node then, not now.
        match &report.source.captured_at {
            Some(at) => format!(" · recorded {at}"),
            None => String::new(),
        },
    );
    wrap::push(&mut out, &line, w, LINE_INDENT);
    let line = match &report.profile {
        Some(name) => format!("profile {name} (`gpudoctor profiles` lists what it expects)"),
        None => "no platform profile matched: judging consistency only".to_string(),
    };
    wrap::push(&mut out, &line, w, LINE_INDENT);
    out.push('\n');
    for layer in &report.layers {
        let counted = layer
            .checks
            .iter()
            .filter(|c| c.status != Status::Skip)
            .count();
        let detail = match (&layer.reason, layer.checks.is_empty()) {
            (Some(reason), _) => reason.clone(),
            (None, false) => format!("{counted} check(s), {} ms", layer.duration_ms),
            (None, true) => String::new(),
        };
        let line = format!(
            "{} {:<14} {}  {}",
            style.paint(layer.status, mark(layer.status)),
            layer.id.id(),
            layer.title,
            style.dim(&format!("({detail})")),
        );
        wrap::push(&mut out, &line, w, LAYER_INDENT);
        // A consequence is shown under its cause (below), not in its own place.
        // Under --verbose a check that passed with figures is listed too, with them.
        let shown = |c: &&CheckResult| {
            (c.status.is_finding() && c.explained_by.is_none())
                || (style.verbose && !c.status.is_finding() && !c.figures.is_empty())
        };
        for check in layer.checks.iter().filter(shown) {
            let line = format!(
                "       {} {}  {}",
                style.paint(check.status, mark(check.status)),
                check.code,
                check.summary
            );
            wrap::push(&mut out, &line, w, FINDING_INDENT);
            if style.verbose {
                for f in &check.figures {
                    let line = format!("              measured: {}", figure_text(f));
                    wrap::push(&mut out, &line, w, DETAIL_INDENT);
                }
            }
            if !check.status.is_finding() {
                continue;
            }
            for e in &check.evidence {
                let expected = e
                    .expected
                    .as_ref()
                    .map(|x| format!(" (expected: {x})"))
                    .unwrap_or_default();
                let line = format!(
                    "              evidence: {}: {}{}",
                    e.source, e.observed, expected
                );
                wrap::push(&mut out, &line, w, DETAIL_INDENT);
            }
            if let Some(hint) = &check.hint {
                let line = format!("              hint: {hint}");
                wrap::push(&mut out, &line, w, DETAIL_INDENT);
            }
            for rma in report.rma_lines(check) {
                let line = format!("              rma: {rma}");
                wrap::push(&mut out, &line, w, DETAIL_INDENT);
            }
            if let Some(drain) = report.drain_line(check) {
                let line = format!("              cordon: {drain}");
                wrap::push(&mut out, &line, w, DETAIL_INDENT);
            }
            for consequence in report.consequences(&check.code) {
                let line = format!(
                    "              consequence: {} {}  {}",
                    style.paint(consequence.status, mark(consequence.status)),
                    consequence.code,
                    consequence.summary
                );
                wrap::push(&mut out, &line, w, DETAIL_INDENT);
            }
        }
    }
    out.push('\n');
    let verdict = match &report.first_failure {
        Some(first) => {
            let consequences = match report.consequences(&first.code).count() {
                0 => String::new(),
                n => format!(", with {n} consequence(s)"),
            };
            format!(
                "first failure: {} layer — {} ({}){consequences}; exit {}",
                first.layer, first.summary, first.code, report.exit_code
            )
        }
        None => {
            let warns = report
                .findings()
                .filter(|(_, c)| c.status == Status::Warn)
                .count();
            let errors = report
                .findings()
                .filter(|(_, c)| c.status == Status::Error)
                .count();
            let skipped = report
                .layers
                .iter()
                .filter(|l| l.status == Status::Skip)
                .count();
            let skipped = if skipped > 0 {
                format!(", {skipped} layer(s) skipped")
            } else {
                String::new()
            };
            match (report.exit_code, errors, warns) {
                (3, 0, _) if report.nothing_ran() => {
                    "inconclusive: no layer ran (every layer deselected by --only/--skip); exit 3"
                        .to_string()
                }
                (4, _, _) => "internal error: an output file could not be written (stderr says which); exit 4".to_string(),
                (0, _, 0) => format!("healthy: no layer failed{skipped}; exit 0"),
                (0, _, w) => {
                    format!("healthy with {w} warning(s): no layer failed{skipped}; exit 0")
                }
                (3, e, _) => format!(
                    "inconclusive: {e} check(s) could not be evaluated, none failed; exit 3"
                ),
                (code, _, w) => format!("{w} warning(s) under --strict; exit {code}"),
            }
        }
    };
    let status = if report.first_failure.is_some() {
        Status::Fail
    } else {
        Status::Pass
    };
    wrap::push(&mut out, &style.paint(status, &verdict), w, LINE_INDENT);
    out
}

/// One figure as people read it: `nccl_busbw_peak_bytes_per_second 361.2 GB/s (collective
/// all_reduce)`; bandwidths in GB/s (10^9 bytes, as nccl-tests and perftest print them), sizes
/// in MiB, seconds and counts as they are.
fn figure_text(f: &Figure) -> String {
    let name = f.name.id();
    let number = |v: f64| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{}", v as i64)
        } else {
            format!("{v:.3}")
        }
    };
    let value = if name.ends_with("_bytes_per_second") {
        format!("{:.1} GB/s", f.value / 1e9)
    } else if name.ends_with("_bytes") {
        format!("{:.1} MiB", f.value / (1024.0 * 1024.0))
    } else if name.ends_with("_seconds") {
        format!("{} s", number(f.value))
    } else {
        number(f.value)
    };
    let labels: Vec<String> = f.labels.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if labels.is_empty() {
        format!("{name} {value}")
    } else {
        format!("{name} {value} ({})", labels.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Layer, LayerReport};
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let on = |terminal, no_color: Option<&str>| {
            Style::for_stdout(terminal, no_color.map(OsStr::new)).color
        };
        assert!(on(true, None));
        assert!(on(true, Some("")), "an empty NO_COLOR does not count");
        assert!(!on(true, Some("1")));
        assert!(!on(true, Some("0")), "any non-empty value disables colour");
        assert!(!on(false, None), "never into a pipe or file");
        assert!(!on(false, Some("1")));
    }

    #[test]
    fn escapes_only_with_colour() {
        let report = Report {
            layers: vec![LayerReport {
                id: Layer::Driver,
                title: Layer::Driver.title().to_string(),
                status: Status::Pass,
                reason: None,
                duration_ms: 0,
                checks: Vec::new(),
            }],
            schema_version: crate::report::SCHEMA_VERSION,
            gpudoctor_version: "0".into(),
            source: crate::report::SourceInfo {
                kind: crate::report::SourceKind::Replay,
                root: "fixture".into(),
                captured_at: None,
            },
            node: crate::report::NodeInfo::default(),
            profile: None,
            generated_at: None,
            first_failure: None,
            exit_code: 0,
            duration_ms: 0,
            facts: None,
        };
        let coloured = render(
            &report,
            Style {
                color: true,
                width: None,
                verbose: false,
            },
        );
        assert!(coloured.contains("\x1b[32m[ ok ]\x1b[0m"), "{coloured}");
        let plain = render(&report, Style::PLAIN);
        assert!(plain.contains("[ ok ]"), "{plain}");
        assert!(!plain.contains('\x1b'), "{plain}");
    }

    #[test]
    fn figures_read_in_the_units_people_use() {
        use crate::report::FigureName;
        let peak = Figure::new(FigureName::NcclBusbwPeakBytesPerSecond, 482.6e9)
            .label("test", "all_reduce");
        assert_eq!(
            figure_text(&peak),
            "nccl_busbw_peak_bytes_per_second 482.6 GB/s (test all_reduce)"
        );
        let size = Figure::new(
            FigureName::NcclBusbwPeakSizeBytes,
            8.0 * 1024.0 * 1024.0 * 1024.0,
        );
        assert_eq!(figure_text(&size), "nccl_busbw_peak_size_bytes 8192.0 MiB");
        let probe = Figure::new(FigureName::NvmlProbeSeconds, 0.25);
        assert_eq!(figure_text(&probe), "nvml_probe_seconds 0.250 s");
        let xids = Figure::new(FigureName::XidEvents, 3.0);
        assert_eq!(figure_text(&xids), "xid_events 3");
    }
}
