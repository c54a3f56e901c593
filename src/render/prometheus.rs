//! `--format prometheus`: the report as Prometheus text exposition (version 0.0.4), the format
//! node_exporter's textfile collector reads (reference/kubernetes.md §10). Metric names are a
//! stable contract (docs/formats.md): one `gpudoctor_` prefix, base units in the name, layer and
//! check ids only in labels, HELP and TYPE before each family's samples, no timestamps.
//!
//! Families, in this order: run metadata (`gpudoctor_info`, exit code, timestamp, duration),
//! per-layer status and duration, per-check status, the first failure, every failure with its
//! cause class, then the figures the checks measured (`report::FigureName`: XID counts, NCCL
//! peak bus bandwidth, RDMA port rates).
//! A family with no sample is left out, so an absent figure is "not measured", never 0. A
//! figure's labels are exactly its name's catalogue labels (`FigureName::labels`).
//!
//! Label values are node text (a host name, a device name). The format escapes only `\`, `"`
//! and newline in them and passes any other character through, so a value first goes through
//! `text/sanitize.rs`: an escape sequence planted on the node shows as `\x1b` text, and the file stays
//! safe to `curl` to a terminal and parseable by the strict OpenMetrics grammars, which refuse
//! control characters.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::report::SourceKind;
use crate::report::{Figure, FigureName, Report, Status};

/// The value `gpudoctor_layer_status` and `gpudoctor_check_status` carry for each status,
/// ordered by severity so that PromQL's comparisons and `max()` rank statuses as an operator
/// does: nothing to act on (pass, then skip: does not apply, then not_run: not looked at
/// because an earlier layer failed, whose own series says so), then the findings in the order
/// a layer sums its checks ([`Status::severity`]: warn < error < fail). `>= 3` is "a finding",
/// `== 5` "failed", `max by (instance) (...)` the node's worst. Before report schema 2 the
/// values were 0 pass, 1 warn, 2 fail, 3 error, 4 skip, 5 not_run (docs/formats.md, migration
/// note; `gpudoctor_info{schema_version}` tells which a node writes).
pub fn status_value(status: Status) -> u8 {
    match status {
        Status::Pass => 0,
        Status::Skip => 1,
        Status::NotRun => 2,
        Status::Warn => 3,
        Status::Error => 4,
        Status::Fail => 5,
    }
}

const STATUS_HELP: &str = "(by severity: 0 pass, 1 skip, 2 not_run, 3 warn, 4 error, 5 fail)";

/// One metric family being written: HELP and TYPE once, then samples.
struct Family<'a> {
    out: &'a mut String,
    name: String,
    seen: BTreeSet<String>,
}

impl<'a> Family<'a> {
    fn gauge(out: &'a mut String, name: &str, help: &str) -> Self {
        let _ = writeln!(out, "# HELP gpudoctor_{name} {}", escape_help(help));
        let _ = writeln!(out, "# TYPE gpudoctor_{name} gauge");
        Family {
            out,
            name: format!("gpudoctor_{name}"),
            seen: BTreeSet::new(),
        }
    }

    /// One sample; a second sample with the same labels is dropped (it would make node_exporter
    /// reject the whole file).
    fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let labels = format_labels(labels);
        if !self.seen.insert(labels.clone()) {
            return;
        }
        let _ = writeln!(self.out, "{}{labels} {}", self.name, format_value(value));
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label_value(text: &str) -> String {
    crate::text::sanitize::text(text)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// A label name as the format allows it: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`
/// (reserved). Anything else becomes `_`.
fn label_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit()) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    while out.starts_with("__") {
        out.remove(0);
    }
    out
}

fn format_labels(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{}=\"{}\"", label_name(k), escape_label_value(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Rust prints finite floats without exponents (`50000000000`, `0.003`), which the format reads;
/// non-finite values never reach here (`Figure::new`), but say them the format's way if they do.
fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{value}")
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Every check's status: the report's results, then — for each layer the report holds — the
/// registered checks of that layer it has no result for, as `not_run`. A blocked layer (the
/// walk stopped at an earlier failure) has no results, and a series that vanishes while the
/// node is broken would resolve the very alerts that watch it (Prometheus marks it stale);
/// kept as `not_run`, it stays, below the finding threshold, until the layer runs again. The
/// check registry is the catalogue `list-checks` prints, not node data.
fn check_statuses(report: &Report) -> Vec<(&'static str, String, Status)> {
    let registry = crate::checks::registry();
    let mut out = Vec::new();
    for layer in &report.layers {
        let id = layer.id.id();
        for check in &layer.checks {
            out.push((id, check.code.clone(), check.status));
        }
        for def in registry.iter().filter(|d| d.layer == layer.id) {
            if !layer.checks.iter().any(|c| c.code == def.code) {
                out.push((id, def.code.to_string(), Status::NotRun));
            }
        }
    }
    out
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let node = &report.node;

    let schema = report.schema_version.to_string();
    let source = match report.source.kind {
        SourceKind::Live => "live",
        SourceKind::Replay => "replay",
        SourceKind::Files => "files",
    };
    Family::gauge(
        &mut out,
        "info",
        "Constant 1; labels name the gpudoctor version, report schema, node, kernel, driver, profile and source of the last run.",
    )
    .sample(
        &[
            ("version", &report.gpudoctor_version),
            ("schema_version", &schema),
            ("node", node.hostname.as_deref().unwrap_or("")),
            ("kernel", node.kernel.as_deref().unwrap_or("")),
            ("driver_version", node.driver_version.as_deref().unwrap_or("")),
            ("profile", report.profile.as_deref().unwrap_or("")),
            ("source", source),
        ],
        1.0,
    );
    Family::gauge(
        &mut out,
        "exit_code",
        "Exit code of the last run (0 healthy, 1 a layer failed, 3 inconclusive, 4 an output file could not be written).",
    )
    .sample(&[], f64::from(report.exit_code));
    if let Some(ts) = report
        .generated_at
        .as_deref()
        .and_then(crate::time::unix_seconds)
    {
        Family::gauge(
            &mut out,
            "last_run_timestamp_seconds",
            "Unix time the last run finished.",
        )
        .sample(&[], ts as f64);
    }
    Family::gauge(
        &mut out,
        "run_duration_seconds",
        "Wall time of the last run, in seconds.",
    )
    .sample(&[], seconds(report.duration_ms));

    let mut family = Family::gauge(
        &mut out,
        "layer_status",
        &format!("Layer status {STATUS_HELP}."),
    );
    for layer in &report.layers {
        family.sample(
            &[("layer", layer.id.id())],
            f64::from(status_value(layer.status)),
        );
    }
    let mut family = Family::gauge(
        &mut out,
        "layer_duration_seconds",
        "Time the layer's checks took in the last run, in seconds (0 when it did not run).",
    );
    for layer in &report.layers {
        family.sample(&[("layer", layer.id.id())], seconds(layer.duration_ms));
    }

    let checks = check_statuses(report);
    if !checks.is_empty() {
        let mut family = Family::gauge(
            &mut out,
            "check_status",
            &format!(
                "Status of each check {STATUS_HELP}, not_run for a check whose layer did not run; `gpudoctor explain <check>` describes it."
            ),
        );
        for (layer, code, status) in &checks {
            family.sample(
                &[("layer", layer), ("check", code)],
                f64::from(status_value(*status)),
            );
        }
    }

    if let Some(first) = &report.first_failure {
        // A schema-1 report has no `action` on its first failure: its check result has.
        let action = first.action.or_else(|| {
            report
                .layers
                .iter()
                .flat_map(|l| l.checks.iter())
                .find(|c| c.code == first.code)
                .map(|c| c.action)
        });
        let action = action
            .and_then(|a| serde_json::to_value(a).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        Family::gauge(
            &mut out,
            "first_failure_info",
            "Constant 1, present only when a layer failed: the first failing layer, check and the action it asks for.",
        )
        .sample(
            &[
                ("layer", first.layer.id()),
                ("check", &first.code),
                ("action", &action),
            ],
            1.0,
        );
    }

    // Every failure, not only the first, with the cause class NPD's conditions use (a
    // `--keep-going` run's NVLinks down behind a toolkit fault is a failure of its own): the
    // alert that pages selects class="gpu-hardware" (docs/alerts.yaml), so a configuration
    // fault rolled out to every node never pages (issue 43).
    let failures = super::npd_conditions::failures(report);
    if report.first_failure.is_some() && !failures.is_empty() {
        let mut family = Family::gauge(
            &mut out,
            "failure_info",
            "Constant 1 for each failing check: its layer, check, the action it asks for and its cause class (gpu-hardware: a broken part, drain; any other: configuration, alert).",
        );
        for (class, layer, check) in failures {
            let action = serde_json::to_value(check.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            family.sample(
                &[
                    ("layer", layer.id.id()),
                    ("check", &check.code),
                    ("action", &action),
                    ("class", class.id()),
                ],
                1.0,
            );
        }
    }

    let consequences: Vec<(&str, &str, &str)> = report
        .layers
        .iter()
        .flat_map(|l| l.checks.iter().map(move |c| (l.id.id(), c)))
        .filter_map(|(layer, c)| Some((layer, c.code.as_str(), c.explained_by.as_deref()?)))
        .collect();
    if !consequences.is_empty() {
        let mut family = Family::gauge(
            &mut out,
            "consequence_info",
            "Constant 1 for each finding that follows from another: the check and the check it follows from (its cause), so a fleet counts the cause once.",
        );
        for (layer, check, cause) in consequences {
            family.sample(&[("layer", layer), ("check", check), ("cause", cause)], 1.0);
        }
    }

    let figures: Vec<&Figure> = report
        .layers
        .iter()
        .flat_map(|l| l.checks.iter())
        .flat_map(|c| c.figures.iter())
        .collect();
    for name in FigureName::ALL {
        let of_name: Vec<&&Figure> = figures.iter().filter(|f| f.name == name).collect();
        if of_name.is_empty() {
            continue;
        }
        let mut family = Family::gauge(&mut out, name.id(), name.help());
        for figure in of_name {
            // Exactly the catalogue's labels, in its order: one label set per family.
            let labels: Vec<(&str, &str)> = name
                .labels()
                .iter()
                .map(|k| (*k, figure.labels.get(*k).map_or("", String::as_str)))
                .collect();
            family.sample(&labels, figure.value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_names() {
        assert_eq!(escape_label_value("a\"b\\c"), "a\\\"b\\\\c");
        // A newline (and any other control) is shown as its escape, whose backslash the
        // format then escapes: the value reads `a\nd`, never a line break.
        assert_eq!(escape_label_value("a\nd"), "a\\\\nd");
        assert_eq!(escape_label_value("h\x1b]0;t\x07"), "h\\\\x1b]0;t\\\\x07");
        assert_eq!(escape_help("x\\y\nz"), "x\\\\y\\nz");
        assert_eq!(label_name("link-layer"), "link_layer");
        assert_eq!(label_name("9port"), "_port");
        assert_eq!(label_name("__name__"), "_name__");
        assert_eq!(label_name(""), "_");
        assert_eq!(format_value(5e10), "50000000000");
        assert_eq!(format_value(0.003), "0.003");
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
    }

    #[test]
    fn a_blocked_layer_keeps_its_check_series_as_not_run() {
        use crate::report::{Layer, LayerReport, NodeInfo, SourceInfo};
        let layer = |id: Layer, status| LayerReport {
            id,
            title: id.title().to_string(),
            status,
            reason: None,
            duration_ms: 0,
            checks: Vec::new(),
        };
        let report = Report {
            schema_version: crate::report::SCHEMA_VERSION,
            gpudoctor_version: "0".into(),
            source: SourceInfo {
                kind: SourceKind::Replay,
                root: "r".into(),
                captured_at: None,
            },
            node: NodeInfo::default(),
            profile: None,
            generated_at: None,
            layers: vec![layer(Layer::Nvlink, Status::NotRun)],
            first_failure: None,
            exit_code: 1,
            duration_ms: 0,
            facts: None,
        };
        let text = render(&report);
        let nvlink: Vec<_> = crate::checks::registry()
            .into_iter()
            .filter(|d| d.layer == Layer::Nvlink)
            .collect();
        assert!(!nvlink.is_empty());
        for def in nvlink {
            let line = format!(
                "gpudoctor_check_status{{layer=\"nvlink\",check=\"{}\"}} 2\n",
                def.code
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(
            text.contains("gpudoctor_layer_status{layer=\"nvlink\"} 2\n"),
            "{text}"
        );
    }

    #[test]
    fn a_repeated_label_set_is_written_once() {
        let mut out = String::new();
        let mut family = Family::gauge(&mut out, "x", "help");
        family.sample(&[("a", "1")], 1.0);
        family.sample(&[("a", "1")], 2.0);
        family.sample(&[("a", "2")], 3.0);
        assert_eq!(
            out,
            "# HELP gpudoctor_x help\n# TYPE gpudoctor_x gauge\ngpudoctor_x{a=\"1\"} 1\ngpudoctor_x{a=\"2\"} 3\n"
        );
    }
}
