//! The fleet formats end to end: the Prometheus text parses with a real exposition-format parser
//! and says what the report says, the NPD line fits NPD's limit for every fixture, Markdown puts
//! the first failing layer first, and the CLI writes textfiles and saved reports atomically and
//! re-renders them with `gpudoctor render`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::render;
use gpudoctor::report::{FigureName, Report, Status};
use gpudoctor::source;
use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{PrometheusType, PrometheusValue};

fn replay(dir: &Path, options: &RunOptions) -> Report {
    let source = source::open(dir, source::SourceOptions::default()).expect("a complete capture");
    engine::run(source.as_ref(), options)
}

/// Every fixture replayed every way ([`every_walk`]), once per test binary (in parallel) for
/// the sweeps that read them: (fixture name, walk, report).
fn every_report() -> &'static [(String, &'static str, Report)] {
    static REPORTS: std::sync::OnceLock<Vec<(String, &'static str, Report)>> =
        std::sync::OnceLock::new();
    REPORTS.get_or_init(|| {
        let mut all: Vec<_> = common::parallel::map(&common::fixtures(), |dir| {
            every_walk()
                .into_iter()
                .map(|(how, options)| (common::name_of(dir), how, replay(dir, &options)))
                .collect::<Vec<_>>()
        })
        .concat();
        all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        all
    })
}

fn every_walk() -> [(&'static str, RunOptions); 3] {
    [
        ("default", RunOptions::default()),
        (
            "keep-going",
            RunOptions {
                keep_going: true,
                ..Default::default()
            },
        ),
        (
            "strict",
            RunOptions {
                strict: true,
                ..Default::default()
            },
        ),
    ]
}

/// Metric name → label set (sorted name=value pairs) → value, as the parser read them.
type Parsed = BTreeMap<String, BTreeMap<Vec<(String, String)>, f64>>;

fn parse(text: &str, what: &str) -> Parsed {
    let exposition =
        parse_prometheus(text).unwrap_or_else(|e| panic!("{what}: not valid exposition: {e}"));
    let mut out = Parsed::new();
    for (name, family) in exposition.families {
        assert!(
            name.starts_with("gpudoctor_"),
            "{what}: {name} lacks the prefix"
        );
        assert_eq!(
            family.family_type,
            PrometheusType::Gauge,
            "{what}: {name} is not a gauge"
        );
        assert!(!family.help.is_empty(), "{what}: {name} has no HELP");
        let samples = out.entry(name.clone()).or_default();
        for sample in family.iter_samples() {
            let labels = sample.get_labelset().unwrap();
            let mut pairs: Vec<(String, String)> =
                labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            pairs.sort();
            // The textfile collector refuses samples with timestamps.
            assert!(sample.timestamp.is_none(), "{what}: {name} has a timestamp");
            let value = match &sample.value {
                PrometheusValue::Gauge(n) => n.as_f64(),
                other => panic!("{what}: {name} sample is {other:?}"),
            };
            assert!(
                samples.insert(pairs, value).is_none(),
                "{what}: duplicate series in {name}"
            );
        }
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn prometheus_output_parses_and_matches_the_report_for_every_fixture() {
    for (name, how, report) in every_report() {
        {
            let what = format!("{name} ({how})");
            let text = render::prometheus::render(report);
            let parsed = parse(&text, &what);

            assert!(
                text.ends_with('\n'),
                "{what}: every line ends with a newline"
            );

            assert_eq!(parsed["gpudoctor_info"].len(), 1, "{what}");
            assert_eq!(
                parsed["gpudoctor_exit_code"][&vec![]],
                f64::from(report.exit_code),
                "{what}"
            );
            let ts = parsed["gpudoctor_last_run_timestamp_seconds"][&vec![]];
            assert!(ts > 1.7e9, "{what}: timestamp {ts}");
            let layers = &parsed["gpudoctor_layer_status"];
            assert_eq!(layers.len(), 8, "{what}: one series per layer");
            for layer in &report.layers {
                assert_eq!(
                    layers[&labels(&[("layer", layer.id.id())])],
                    f64::from(render::prometheus::status_value(layer.status)),
                    "{what}: {}",
                    layer.id
                );
                for check in &layer.checks {
                    assert_eq!(
                        parsed["gpudoctor_check_status"]
                            [&labels(&[("layer", layer.id.id()), ("check", &check.code)])],
                        f64::from(render::prometheus::status_value(check.status)),
                        "{what}: {}",
                        check.code
                    );
                }
            }
            match &report.first_failure {
                Some(first) => {
                    let series = &parsed["gpudoctor_first_failure_info"];
                    assert_eq!(series.len(), 1, "{what}");
                    let (set, value) = series.iter().next().unwrap();
                    assert_eq!(*value, 1.0);
                    assert!(set.contains(&("check".to_string(), first.code.clone())));
                }
                None => assert!(!parsed.contains_key("gpudoctor_first_failure_info")),
            }

            // Figures: one family per name, exactly the catalogue's labels, values as measured.
            let figures: Vec<_> = report
                .layers
                .iter()
                .flat_map(|l| &l.checks)
                .flat_map(|c| &c.figures)
                .collect();
            for figure in &figures {
                let keys: BTreeSet<&str> = figure.labels.keys().map(String::as_str).collect();
                let wanted: BTreeSet<&str> = figure.name.labels().iter().copied().collect();
                assert_eq!(keys, wanted, "{what}: labels of {}", figure.name);
                let set: Vec<(String, String)> = figure
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(
                    parsed[&format!("gpudoctor_{}", figure.name)][&set],
                    figure.value,
                    "{what}"
                );
            }
            for figure_name in FigureName::ALL {
                let metric = format!("gpudoctor_{figure_name}");
                assert_eq!(
                    parsed.contains_key(&metric),
                    figures.iter().any(|f| f.name == figure_name),
                    "{what}: {metric} present exactly when measured"
                );
            }
        }
    }
}

#[test]
fn xid_counts_are_exported_per_gpu_and_xid() {
    let report = replay(
        &common::repo().join("fixtures/h100-xid48-dbe"),
        &RunOptions::default(),
    );
    let parsed = parse(&render::prometheus::render(&report), "xid48");
    let xids = &parsed["gpudoctor_xid_events"];
    assert_eq!(
        xids[&labels(&[
            ("gpu", "0000:3a:00.0"),
            ("xid", "48"),
            ("severity", "fatal"),
            ("state", "live")
        ])],
        1.0,
        "{xids:?}"
    );
}

#[test]
fn the_npd_line_fits_and_names_the_failing_layer_and_code_for_every_fixture() {
    for (name, how, report) in every_report() {
        {
            let what = format!("{name} ({how})");
            let line = render::npd::message(report);
            assert!(
                line.len() <= render::npd::MAX_MESSAGE_BYTES,
                "{what}: {} bytes: {line}",
                line.len()
            );
            assert!(!line.is_empty() && !line.contains('\n'), "{what}");
            let code = render::npd::exit_code(report.exit_code);
            match report.exit_code {
                0 => assert_eq!(code, 0, "{what}"),
                1 => {
                    assert_eq!(code, 1, "{what}");
                    // The layer and code lead the line, where NPD's cut cannot reach them.
                    let (layer, check) = match &report.first_failure {
                        Some(f) => (f.layer.id().to_string(), f.code.clone()),
                        None => {
                            let (l, c) = report
                                .findings()
                                .find(|(_, c)| c.status == Status::Warn)
                                .unwrap();
                            (l.id.id().to_string(), c.code.clone())
                        }
                    };
                    assert!(
                        line.starts_with(&format!("{layer}: {check}")),
                        "{what}: {line}"
                    );
                }
                _ => assert_eq!(code, 2, "{what}"),
            }
        }
    }
}

#[test]
fn markdown_leads_with_the_first_failing_layer() {
    for (name, _, report) in every_report()
        .iter()
        .filter(|(_, how, _)| *how == "keep-going")
    {
        let text = render::markdown::render(report);
        let verdict = text.lines().nth(2).unwrap_or_default();
        let findings = text.split("### Findings").nth(1).unwrap_or_default();
        match &report.first_failure {
            Some(first) => {
                assert!(
                    verdict.contains(&format!("`{}` layer", first.layer))
                        && verdict.contains(&first.code),
                    "{name}: verdict line {verdict:?}"
                );
                let heading = findings
                    .lines()
                    .find(|l| l.starts_with("#### "))
                    .unwrap_or_default();
                assert!(
                    heading.contains(&format!("`{}`", first.code)),
                    "{name}: first finding {heading:?}"
                );
            }
            None => assert!(verdict.contains("healthy") || verdict.contains("inconclusive")),
        }
        for (_, check) in report.findings() {
            assert!(
                findings.contains(&format!("`{}`", check.code)),
                "{name}: {}",
                check.code
            );
        }
        for field in ["| node |", "| time |", "| gpudoctor |", "### Layers"] {
            assert!(text.contains(field), "{name}: {field}");
        }
    }
}

// ---- the CLI ----

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn check_npd_prints_one_line_and_exits_0_1_or_2() {
    let healthy = common::gpudoctor(&["check", "--root", "fixtures/hgx-h100-healthy", "--npd"]);
    assert_eq!(healthy.status.code(), Some(0));
    assert_eq!(stdout(&healthy).lines().count(), 1);

    let failed = common::gpudoctor(&["check", "--root", "fixtures/h100-xid48-dbe", "--npd"]);
    assert_eq!(failed.status.code(), Some(1));
    let line = stdout(&failed);
    assert!(line.starts_with("driver: driver.xid_events"), "{line}");
    assert!(line.trim_end().len() <= 80);

    // A usage error is "unknown" to NPD, with a line that says where to look.
    let usage = common::gpudoctor(&["check", "--root", "/nonexistent/root", "--npd"]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(stdout(&usage).contains("usage error"));

    // --npd replaces --format; asking for both is a usage error.
    let both = common::gpudoctor(&["check", "--npd", "--format", "json"]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn textfile_and_saved_report_are_written_and_render_reproduces_the_formats() {
    let tmp = common::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let saved = tmp.path().join("last.json");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/h100-xid48-dbe",
        "--format",
        "markdown",
        "--textfile-dir",
        dir,
        "--save-report",
        saved.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let markdown = stdout(&out);
    assert!(markdown.starts_with("## gpudoctor: "), "{markdown}");

    // Only the two files: no temporary left behind, nothing matching *.prom but ours.
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["gpudoctor.prom", "last.json"]);
    let prom = std::fs::read_to_string(tmp.path().join("gpudoctor.prom")).unwrap();
    parse(&prom, "textfile");

    // render: the saved report gives back the same texts.
    let saved = saved.to_str().unwrap();
    let again = common::gpudoctor(&["render", saved, "--format", "markdown"]);
    assert_eq!(again.status.code(), Some(0), "render exits 0: it rendered");
    assert_eq!(stdout(&again), markdown);
    let again = common::gpudoctor(&["render", saved, "--format", "prometheus"]);
    assert_eq!(stdout(&again), prom);
    let json = common::gpudoctor(&["render", saved, "--format", "json"]);
    assert_eq!(stdout(&json), std::fs::read_to_string(saved).unwrap());
    let table = common::gpudoctor(&["render", saved]);
    assert!(stdout(&table).contains("first failure: driver layer"));
}

#[test]
fn render_reads_stdin_and_refuses_what_is_not_a_report() {
    let report = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--format",
        "json",
    ]);
    let mut child = common::scratch::gpudoctor_command()
        .args(["render", "-", "--format", "prometheus"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&report.stdout).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    parse(&stdout(&out), "stdin");

    let tmp = common::tempdir().unwrap();
    let junk = tmp.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let out = common::gpudoctor(&["render", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a gpudoctor JSON report"));
    let out = common::gpudoctor(&["render", "/nonexistent/report.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_missing_textfile_directory_is_a_usage_error_before_the_run() {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--textfile-dir",
        "/nonexistent/textfile",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--textfile-dir"));
}

#[test]
fn schema_command_prints_the_documented_schema() {
    let out = common::gpudoctor(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let doc = std::fs::read_to_string(common::repo().join("docs/report.schema.json")).unwrap();
    assert_eq!(stdout(&out), doc);
}

#[test]
fn the_parser_rejects_what_node_exporter_rejects() {
    // Proof the parse above has teeth: each of these would break a textfile scrape.
    let good = "# HELP gpudoctor_x x.\n# TYPE gpudoctor_x gauge\ngpudoctor_x{a=\"1\"} 1\n";
    assert!(parse_prometheus(good).is_ok());
    for bad in [
        // the same series twice
        "# TYPE gpudoctor_x gauge\ngpudoctor_x{a=\"1\"} 1\ngpudoctor_x{a=\"1\"} 2\n",
        // two TYPE lines for one family
        "# TYPE gpudoctor_x gauge\n# TYPE gpudoctor_x counter\ngpudoctor_x 1\n",
        // an unescaped quote in a label value
        "# TYPE gpudoctor_x gauge\ngpudoctor_x{a=\"say \"hi\"\"} 1\n",
        // not a number
        "# TYPE gpudoctor_x gauge\ngpudoctor_x one\n",
    ] {
        assert!(parse_prometheus(bad).is_err(), "accepted: {bad:?}");
    }
}

/// A stopped fabric manager leaves every GPU's fabric state "not started": the state follows
/// from it, so the NPD line leads with the fabric manager, not with its symptom (issue 26).
#[test]
fn the_npd_line_leads_with_the_cause_not_its_symptom() {
    let (_, _, report) = every_report()
        .iter()
        .find(|(name, how, _)| name == "h100-fabric-manager-stopped" && *how == "default")
        .expect("the fixture");
    let line = render::npd::message(report);
    assert!(
        line.starts_with("nvlink: nvlink.fabric_manager nvidia-fabricmanager is installed"),
        "{line}"
    );
    let state = report
        .findings()
        .find(|(_, c)| c.code == "nvlink.fabric_state")
        .expect("the fabric state fails too");
    assert_eq!(
        state.1.explained_by.as_deref(),
        Some("nvlink.fabric_manager")
    );
}

/// One node condition per cause class (issue 26), answered from every failure of the run
/// (issue 43): on every fixture a failed run sets the condition of each failing check's class
/// and no other — the first failure's with the `--npd` line — leaves unknown a class a layer
/// blocked by the first failure could hold, says "no problem" for the rest; a healthy run sets
/// none, an inconclusive run leaves every condition unknown; and the classes fall where an
/// operator drains or only alerts.
#[test]
fn every_failure_sets_the_npd_conditions_of_its_classes() {
    use gpudoctor::render::npd_conditions::{Condition, answer, failures};
    use gpudoctor::report::exit;
    for (name, how, report) in every_report() {
        let answers: Vec<(Condition, i32, String)> = Condition::ALL
            .iter()
            .map(|c| {
                let (code, line) = answer(report, *c);
                (*c, code, line)
            })
            .collect();
        let set: Vec<Condition> = answers
            .iter()
            .filter(|(_, code, _)| *code == exit::FAILED)
            .map(|(c, _, _)| *c)
            .collect();
        match report.exit_code {
            exit::FAILED => {
                let found = failures(report);
                let mut classes: Vec<Condition> = found.iter().map(|(c, _, _)| *c).collect();
                classes.sort();
                classes.dedup();
                assert_eq!(set, classes, "{name} ({how})");
                let first = found[0].0;
                let (_, _, line) = answers.iter().find(|(c, _, _)| *c == first).unwrap();
                assert_eq!(*line, render::npd::message(report), "{name} ({how})");
                let blocked = report.layers.iter().any(|l| l.status == Status::NotRun);
                for (condition, code, line) in &answers {
                    if *code == exit::INCONCLUSIVE {
                        assert!(blocked, "{name} ({how}) {condition:?}: {line}");
                        assert!(line.contains(" unknown: "), "{name}: {line}");
                    }
                }
                if !blocked {
                    assert!(
                        answers
                            .iter()
                            .all(|(_, code, _)| *code != exit::INCONCLUSIVE),
                        "{name} ({how}): every layer ran, every class is known"
                    );
                }
            }
            exit::HEALTHY => assert!(set.is_empty(), "{name} ({how}): {set:?}"),
            _ => assert!(
                answers
                    .iter()
                    .all(|(_, code, _)| *code == exit::INCONCLUSIVE),
                "{name} ({how})"
            ),
        }
        for (condition, _, line) in &answers {
            assert!(
                line.len() <= render::npd::MAX_MESSAGE_BYTES,
                "{name}: {line}"
            );
            assert!(!line.contains('\n'), "{name} {condition:?}");
        }
    }
    let class_of = |fixture: &str| {
        let (_, _, report) = every_report()
            .iter()
            .find(|(name, how, _)| name == fixture && *how == "default")
            .unwrap_or_else(|| panic!("no fixture {fixture}"));
        gpudoctor::render::npd_conditions::failing(report)
    };
    for (fixture, class) in [
        ("h100-xid48-dbe", Condition::GpuHardware),
        ("h100-xid79-after-reset", Condition::GpuHardware),
        ("h100-hca-errors-rising", Condition::GpuHardware),
        ("h100-nvml-version-mismatch", Condition::GpuDriver),
        (
            "h100-containerd-no-nvidia-runtime",
            Condition::ContainerToolkit,
        ),
        ("h100-device-plugin-not-registered", Condition::DevicePlugin),
        ("h100-rdma-nics-one-socket", Condition::GpuTopology),
        ("h100-nccl-socket-fallback", Condition::GpuNetwork),
        ("h100-fabric-manager-stopped", Condition::NvlinkFabric),
        // No subnet manager: the link is up, the fabric's management is not (issue 43).
        ("h100-ib-port-init", Condition::GpuNetwork),
        ("h100-ib-port-polling", Condition::GpuHardware),
    ] {
        assert_eq!(class_of(fixture), Some(class), "{fixture}");
    }
}

/// `--npd --npd-condition gpu-hardware` on a node whose NVLinks are down behind a
/// container-toolkit fault (issue 43): NPD mode runs every layer, so the condition that drains
/// is true although the first failure is configuration; the toolkit's condition is true too,
/// and one for a class nothing failed in is false. A saved report of a run that stopped at the
/// toolkit cannot say: gpu-hardware is unknown, never "no problem".
#[test]
fn a_configuration_fault_does_not_mask_a_hardware_fault_behind_it() {
    let root = common::repo().join("fixtures/h100-toolkit-fault-nvlinks-down");
    let root = root.to_str().unwrap();
    for (condition, code, starts) in [
        ("gpu-hardware", 1, "nvlink: nvlink.links_active"),
        ("container-toolkit", 1, "toolkit: toolkit.container_runtime"),
        ("gpu-driver", 0, "gpudoctor: no gpu-driver problem"),
    ] {
        let out = common::gpudoctor(&[
            "check",
            "--root",
            root,
            "--npd",
            "--npd-condition",
            condition,
        ]);
        let line = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(code), "{condition}: {line}");
        assert!(line.starts_with(starts), "{condition}: {line}");
    }
    let tmp = common::tempdir().unwrap();
    let saved = tmp.path().join("stopped.json");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root,
        "--format",
        "json",
        "--save-report",
        saved.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let out = common::gpudoctor(&[
        "render",
        saved.to_str().unwrap(),
        "--npd-condition",
        "gpu-hardware",
    ]);
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "NPD's unknown: {line}");
    assert!(line.contains("gpu-hardware unknown"), "{line}");
}

/// `render --npd-condition` answers from a saved report, and a report older than `--max-age`
/// is unknown (NPD exit 2) with one line saying how old, never the node's state.
#[test]
fn a_saved_report_answers_each_condition_until_it_is_stale() {
    let tmp = common::tempdir().unwrap();
    let saved = tmp.path().join("npd-last.json");
    let root = common::repo().join("fixtures/h100-xid48-dbe");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--npd",
        "--npd-condition",
        "gpu-hardware",
        "--save-report",
        saved.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with("driver: driver.xid_events"), "{line}");
    for (condition, code) in [("gpu-hardware", 1), ("gpu-driver", 0), ("nvlink-fabric", 0)] {
        let out = common::gpudoctor(&[
            "render",
            saved.to_str().unwrap(),
            "--npd-condition",
            condition,
            "--max-age",
            "900",
        ]);
        assert_eq!(out.status.code(), Some(code), "{condition}");
        assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
    }
    // The fixture's snapshot was saved on 2026-01-01: stale against any sane --max-age.
    let old = common::repo().join("tests/snapshots/h100-xid48-dbe.json");
    let out = common::gpudoctor(&[
        "render",
        old.to_str().unwrap(),
        "--npd-condition",
        "gpu-hardware",
        "--max-age",
        "900",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains("s old (--max-age 900)"), "{stdout}");
}

/// Markdown reads the same pasted into a plain-text tracker as rendered (issue 27): no
/// backslash escape in any fixture's ticket, but `\|` (a pipe inside a table cell, which GFM
/// ends the cell at even in a code span) and a lone backtick's `` \` ``. A word Markdown would
/// read as markup is a code span instead.
#[test]
fn markdown_has_no_backslash_escapes_in_prose() {
    let mut found = Vec::new();
    for (name, how, report) in every_report() {
        let text = render::markdown::render(report);
        for line in text.lines() {
            // Outside code spans only: a backslash inside one is the text itself (a hint's
            // `printf '...\n'`). A span opens and closes with a run of as many backticks.
            let bytes = line.as_bytes();
            let mut open: Option<usize> = None;
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'`' {
                    let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
                    open = match open {
                        None => Some(run),
                        Some(n) if n == run => None,
                        keep => keep,
                    };
                    i += run;
                    continue;
                }
                if open.is_none()
                    && bytes[i] == b'\\'
                    && !matches!(bytes.get(i + 1), Some(b'|' | b'`'))
                {
                    found.push(format!("{name} ({how}): {line}"));
                    break;
                }
                i += 1;
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
