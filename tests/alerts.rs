//! docs/alerts.yaml is a Prometheus rules file `promtool check rules` accepts, and it watches
//! series gpudoctor writes. The real promtool checks the rules and every fixture's metrics
//! where it is installed (`.ci/run` installs it); without it, the test still checks what promtool checks
//! (Prometheus `rulefmt`: the fields of a group and a rule, one of `alert`/`record`, a
//! non-empty `expr`, a valid `for` duration, valid label names, no duplicate group names,
//! annotation templates that close), then that every metric an expression names is one the
//! fixtures' Prometheus output holds (or node_exporter's textfile stamp), with every label it
//! matches on, and every `$labels.x` an annotation uses is a label the alert's series carry.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use gpudoctor::render::npd_conditions::NOT_A_BROKEN_PART;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    name: String,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    limit: Option<u32>,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(default)]
    alert: Option<String>,
    #[serde(default)]
    record: Option<String>,
    expr: String,
    #[serde(default, rename = "for")]
    for_: Option<String>,
    #[serde(default)]
    keep_firing_for: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// Prometheus' duration syntax (`model.ParseDuration`): units largest first, each at most once.
fn is_duration(text: &str) -> bool {
    let units = ["y", "w", "d", "h", "m", "s", "ms"];
    let mut rest = text;
    let mut last = None;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        // "ms" before "m".
        let Some(unit) = ["ms", "y", "w", "d", "h", "m", "s"]
            .into_iter()
            .find(|u| rest.starts_with(u))
        else {
            return false;
        };
        let index = units.iter().position(|u| *u == unit);
        if index <= last {
            return false;
        }
        last = index;
        rest = &rest[unit.len()..];
    }
    true
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

/// Identifiers in an expression that name metrics: a name directly before `{`, or a bare word
/// that is neither a PromQL keyword, function, nor a label inside `by (...)`/`on (...)`/braces.
fn selectors(expr: &str) -> Vec<(String, Vec<String>)> {
    const WORDS: &[&str] = &[
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "max",
        "min",
        "sum",
        "avg",
        "count",
        "time",
        "rate",
        "increase",
        "absent",
        "changes",
    ];
    let bytes: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut in_grouping = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c == '"' {
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            let mut j = i;
            while j < bytes.len() && bytes[j] == ' ' {
                j += 1;
            }
            if WORDS.contains(&word.as_str()) {
                in_grouping = matches!(word.as_str(), "by" | "without" | "on" | "ignoring")
                    || (in_grouping && matches!(word.as_str(), "group_left" | "group_right"));
                continue;
            }
            if in_grouping {
                continue;
            }
            let mut labels = Vec::new();
            if j < bytes.len() && bytes[j] == '{' {
                let end = bytes[j..]
                    .iter()
                    .position(|c| *c == '}')
                    .map(|p| p + j)
                    .expect("a selector's braces close");
                let inner: String = bytes[j + 1..end].iter().collect();
                for matcher in inner.split(',') {
                    let name: String = matcher
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    labels.push(name);
                }
                i = end + 1;
            }
            out.push((word, labels));
            continue;
        }
        if c == ')' {
            in_grouping = false;
        }
        i += 1;
    }
    out
}

/// Metric names and their label names, from every fixture's `--format prometheus --keep-going`.
fn emitted() -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for dir in common::fixtures() {
        let root = dir.to_string_lossy().into_owned();
        let run = common::gpudoctor(&[
            "check",
            "--root",
            &root,
            "--keep-going",
            "--format",
            "prometheus",
        ]);
        let text = String::from_utf8(run.stdout).unwrap();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let labels = out.entry(name.clone()).or_default();
            if let Some(inner) = line
                .strip_prefix(&name)
                .and_then(|r| r.strip_prefix('{'))
                .and_then(|r| r.rsplit_once('}'))
            {
                for pair in inner.0.split("\",") {
                    if let Some((k, _)) = pair.split_once('=') {
                        labels.insert(k.to_string());
                    }
                }
            }
        }
    }
    // node_exporter's, for the file gpudoctor writes (textfile collector).
    out.insert(
        "node_textfile_mtime_seconds".into(),
        BTreeSet::from(["file".to_string()]),
    );
    // kube-state-metrics' node capacity (its docs/metrics/cluster/node-metrics.md: labels
    // node, resource, unit; an extended resource's `/` and `.` become `_`): the series every
    // GPU node has, whatever its labels, for the no-report alert.
    out.insert(
        "kube_node_status_capacity".into(),
        ["node", "resource", "unit"].map(String::from).into(),
    );
    out
}

/// The actions that say the part itself is broken, and so page (docs/alerts.yaml), less the
/// checks whose drastic action mends no broken part (`NOT_A_BROKEN_PART`): written out here,
/// not read from the code that classes them, so a change there shows up as a failing test.
const HARDWARE_ACTIONS: [&str; 3] = ["hardware_inspection", "reset_gpu", "reboot_node"];

fn rules() -> RuleFile {
    let text = std::fs::read_to_string(common::repo().join("docs/alerts.yaml")).unwrap();
    serde_yaml_ng::from_str(&text).expect("docs/alerts.yaml is a rules file")
}

#[test]
fn the_alert_rules_have_the_shape_promtool_checks() {
    let file = rules();
    assert!(!file.groups.is_empty());
    let mut names = BTreeSet::new();
    for group in &file.groups {
        assert!(!group.name.is_empty(), "a group needs a name");
        assert!(names.insert(&group.name), "group {} twice", group.name);
        if let Some(interval) = &group.interval {
            assert!(is_duration(interval), "interval {interval}");
        }
        let _ = group.limit;
        assert!(!group.rules.is_empty(), "group {} has no rules", group.name);
        for rule in &group.rules {
            let what = format!("{rule:?}");
            assert!(
                rule.alert.is_some() != rule.record.is_some(),
                "one of alert/record: {what}"
            );
            assert!(rule.record.is_none(), "examples are alerts: {what}");
            assert!(!rule.alert.as_deref().unwrap_or("").is_empty(), "{what}");
            assert!(!rule.expr.trim().is_empty(), "{what}");
            assert_eq!(
                rule.expr.matches('(').count(),
                rule.expr.matches(')').count(),
                "{what}"
            );
            for d in rule.for_.iter().chain(&rule.keep_firing_for) {
                assert!(is_duration(d), "duration {d}: {what}");
            }
            for name in rule.labels.keys().chain(rule.annotations.keys()) {
                assert!(is_label_name(name), "label name {name}: {what}");
            }
            for text in rule.labels.values().chain(rule.annotations.values()) {
                assert_eq!(
                    text.matches("{{").count(),
                    text.matches("}}").count(),
                    "template: {text}"
                );
            }
        }
    }
}

#[test]
fn the_alert_rules_watch_what_gpudoctor_writes() {
    let emitted = emitted();
    for name in [
        "gpudoctor_layer_status",
        "gpudoctor_check_status",
        "gpudoctor_first_failure_info",
    ] {
        assert!(emitted.contains_key(name), "{name}: {emitted:?}");
    }
    for group in rules().groups {
        for rule in group.rules {
            let found = selectors(&rule.expr);
            assert!(!found.is_empty(), "no metric in {}", rule.expr);
            let mut carried: BTreeSet<String> = ["instance", "job"].map(String::from).into();
            for (metric, matched) in &found {
                let labels = emitted.get(metric).unwrap_or_else(|| {
                    panic!(
                        "{}: {metric} is not a metric gpudoctor writes: {:?}",
                        rule.expr,
                        emitted.keys()
                    )
                });
                for label in matched {
                    assert!(
                        labels.contains(label),
                        "{}: {metric} has no label {label}",
                        rule.expr
                    );
                }
                carried.extend(labels.iter().cloned());
            }
            for text in rule.annotations.values() {
                for part in text.split("$labels.").skip(1) {
                    let label: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    assert!(
                        carried.contains(&label),
                        "{}: $labels.{label} is on none of its series",
                        rule.expr
                    );
                }
            }
        }
    }
}

#[test]
fn the_checks_catch_what_promtool_would_refuse() {
    assert!(is_duration("10m") && is_duration("1h30m") && is_duration("500ms"));
    assert!(!is_duration("10") && !is_duration("m") && !is_duration("30m1h"));
    assert!(!is_duration("1.5h"));
    assert!(is_label_name("severity") && !is_label_name("9x") && !is_label_name("a-b"));
    let bad = "groups:\n  - name: g\n    rules:\n      - alert: A\n        exprr: up\n";
    assert!(serde_yaml_ng::from_str::<RuleFile>(bad).is_err());
    assert_eq!(
        selectors("max by (instance) (gpudoctor_x{a=\"b\", c=~\"d\"}) > on (instance) y"),
        vec![
            ("gpudoctor_x".to_string(), vec!["a".to_string(), "c".into()]),
            ("y".to_string(), vec![])
        ]
    );
}

/// The status values the rules compare against are the ones the renderer writes.
#[test]
fn the_status_values_are_ordered_by_severity() {
    use gpudoctor::render::prometheus::status_value;
    use gpudoctor::report::Status;
    let order = [
        Status::Pass,
        Status::Skip,
        Status::NotRun,
        Status::Warn,
        Status::Error,
        Status::Fail,
    ];
    let values: Vec<u8> = order.iter().map(|s| status_value(*s)).collect();
    assert_eq!(values, vec![0, 1, 2, 3, 4, 5]);
    let text = std::fs::read_to_string(common::repo().join("docs/alerts.yaml")).unwrap();
    assert!(text.contains("0 pass, 1 skip, 2 not_run, 3 warn, 4 error, 5 fail"));
}

/// One sample of a snapshot's Prometheus text: metric name, labels, value.
fn samples(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once("=\"")?;
                    Some((k.to_string(), v.trim_end_matches('"').to_string()))
                })
                .collect();
            Some((name.to_string(), labels, value.parse().ok()?))
        })
        .collect()
}

/// What GPURdmaPortSlow and GPUFatalXid select, evaluated on every fixture's Prometheus output
/// (tests/snapshots/*.prom, one instance each): the rails-only rate comparison fires on the
/// fixture whose rail trained down and on no fixture whose rdma layer passes (the healthy HGX
/// H100's 200 GbE front-end ports are not rails); the live-only fatal XID fires on a live fatal
/// XID and never on a history-only fixture. promtool is not here: these are the two rules'
/// selections computed by hand, so a label the renderer stops writing breaks them here.
#[test]
fn the_rate_and_xid_alerts_select_only_what_they_name() {
    let dir = common::repo().join("tests/snapshots");
    let mut rdma_fired = BTreeSet::new();
    let mut xid_fired = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("prom") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let samples = samples(&std::fs::read_to_string(&path).unwrap());
        let rails: Vec<f64> = samples
            .iter()
            .filter(|(n, l, _)| {
                n == "gpudoctor_rdma_port_rate_bytes_per_second"
                    && l.get("rail").map(String::as_str) == Some("true")
            })
            .map(|(_, _, v)| *v)
            .collect();
        let fastest = rails.iter().cloned().fold(f64::MIN, f64::max);
        if rails.iter().any(|v| *v < fastest) {
            rdma_fired.insert(name.clone());
        }
        if samples.iter().any(|(n, l, v)| {
            n == "gpudoctor_xid_events"
                && l.get("severity").map(String::as_str) == Some("fatal")
                && l.get("state").map(String::as_str) == Some("live")
                && *v > 0.0
        }) {
            xid_fired.insert(name);
        }
    }
    assert!(rdma_fired.contains("h100-ib-port-hdr"), "{rdma_fired:?}");
    for healthy in [
        "hgx-h100-healthy",
        "h100-roce-rails-healthy",
        "hgx-a100-healthy",
    ] {
        assert!(!rdma_fired.contains(healthy), "{healthy}: {rdma_fired:?}");
        assert!(!xid_fired.contains(healthy), "{healthy}: {xid_fired:?}");
    }
    assert!(
        !xid_fired.contains("h100-xid79-reset-history"),
        "{xid_fired:?}"
    );
    assert!(
        xid_fired.contains("h100-xid79-after-reset"),
        "{xid_fired:?}"
    );

    // And the rules select just that: the selectors computed above are the rules' own.
    let rules = std::fs::read_to_string(common::repo().join("docs/alerts.yaml")).unwrap();
    let file: RuleFile = serde_yaml_ng::from_str(&rules).unwrap();
    let rule = |name: &str| {
        file.groups
            .iter()
            .flat_map(|g| &g.rules)
            .find(|r| r.alert.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no alert {name}"))
    };
    let xid = rule("GPUFatalXid");
    assert!(xid.expr.contains("state=\"live\""), "{}", xid.expr);
    assert!(xid.for_.is_some(), "one scrape must not page: {}", xid.expr);
    let rdma = rule("GPURdmaPortSlow");
    assert_eq!(
        rdma.expr.matches("rail=\"true\"").count(),
        2,
        "{}",
        rdma.expr
    );
}

/// promtool on `PATH`; `None` (with a notice) where it is missing, a failure under `CI=true`.
fn promtool() -> Option<std::path::PathBuf> {
    common::tool_on_path("promtool")
}

/// The real promtool, where it is (`.ci/run` installs Debian's `prometheus` package when it is
/// missing; without it the test says so and passes, but fails under `CI=true`): the rules file
/// passes `promtool check rules`, and every fixture's Prometheus output (the snapshots
/// tests/fixtures.rs holds equal to the renderer's) passes `promtool check metrics`, the
/// exposition linter (no type in a metric name, counters ending `_total`, base units).
#[test]
fn promtool_accepts_the_rules_and_every_fixtures_metrics() {
    let Some(promtool) = promtool() else {
        return;
    };
    let repo = common::repo();
    let out = std::process::Command::new(&promtool)
        .args(["check", "rules"])
        .arg(repo.join("docs/alerts.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules docs/alerts.yaml:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut checked = 0;
    for entry in std::fs::read_dir(repo.join("tests/snapshots")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "prom") {
            continue;
        }
        let out = std::process::Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(std::fs::File::open(&path).unwrap())
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.trim().is_empty(),
            "promtool check metrics < {}:\n{said}",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= common::fixtures().len(),
        "{checked} outputs checked"
    );
}

/// `promtool test rules` over every fixture (issue 26): each fixture's Prometheus output, held
/// for two hours as one node's series (scraped every 5 minutes), against docs/alerts.yaml. What must fire comes from the
/// fixture's report, not from the rules: the node failed (GPUNodeLayerFailed), a check warns or
/// errs (GPUNodeCheckDegraded), a live fatal XID (GPUFatalXid, never a history-only one), a GPU
/// rail slower than the node's fastest rail (GPURdmaPortSlow), an inconclusive run
/// (GPUDoctorInconclusive); gpudoctor.prom rewritten every scrape (no GPUDoctorNotRunning). So
/// a healthy fixture fires nothing, and a new fixture is covered without editing this test. The
/// first scrape pages nothing. Needs promtool, as the test above.
#[test]
fn promtool_fires_each_alert_on_the_fixtures_whose_report_names_its_fault() {
    use serde_json::{Value, json};
    let Some(promtool) = promtool() else {
        return;
    };
    let repo = common::repo();
    let rules = rules();
    let template = |alert: &str| -> BTreeMap<String, String> {
        let rule = rules
            .groups
            .iter()
            .flat_map(|g| &g.rules)
            .find(|r| r.alert.as_deref() == Some(alert))
            .unwrap();
        rule.annotations.clone()
    };
    let severity = |alert: &str| {
        rules
            .groups
            .iter()
            .flat_map(|g| &g.rules)
            .find(|r| r.alert.as_deref() == Some(alert))
            .unwrap()
            .labels["severity"]
            .clone()
    };
    // An alert as promtool reports it: the series' labels, the rule's, annotations rendered.
    let alert = |name: &str, series: &BTreeMap<String, String>| -> Value {
        let mut labels = series.clone();
        labels.insert("instance".into(), "node-1".into());
        labels.insert("severity".into(), severity(name));
        let annotations: BTreeMap<String, String> = template(name)
            .into_iter()
            .map(|(k, mut text)| {
                for (label, value) in &labels {
                    text = text.replace(&format!("{{{{ $labels.{label} }}}}"), value);
                }
                assert!(
                    !text.contains("{{"),
                    "{name}: a template this test cannot render: {text}"
                );
                (k, text)
            })
            .collect();
        json!({"exp_labels": labels, "exp_annotations": annotations})
    };
    let tmp = common::tempdir().unwrap();
    let mut tests = Vec::new();
    let mut configuration_faults = 0;
    for fixture in common::fixtures() {
        let name = common::name_of(&fixture);
        let snapshots = repo.join("tests/snapshots");
        let prom = std::fs::read_to_string(snapshots.join(format!("{name}.prom"))).unwrap();
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(snapshots.join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        let samples = samples(&prom);
        let find = |metric: &str, want: &[(&str, &str)]| -> BTreeMap<String, String> {
            let found: Vec<_> = samples
                .iter()
                .filter(|(n, l, _)| {
                    n == metric
                        && want
                            .iter()
                            .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
                })
                .collect();
            assert_eq!(found.len(), 1, "{name}: {metric} {want:?}");
            found[0].1.clone()
        };
        let mut series: Vec<Value> = samples
            .iter()
            .map(|(metric, labels, value)| {
                assert!(labels.values().all(|v| !v.contains('\\')), "{name}: escapes");
                let mut labels = labels.clone();
                labels.insert("instance".into(), "node-1".into());
                let selector: Vec<String> =
                    labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
                json!({"series": format!("{metric}{{{}}}", selector.join(",")), "values": format!("{value}x25")})
            })
            .collect();
        series.push(json!({
            "series": "node_textfile_mtime_seconds{instance=\"node-1\",file=\"/var/lib/node_exporter/textfile_collector/gpudoctor.prom\"}",
            "values": "0+300x25"
        }));
        // The node as kube-state-metrics sees it: a GPU node, and it has a report.
        let node = find("gpudoctor_info", &[])["node"].clone();
        assert!(!node.is_empty(), "{name}: gpudoctor_info names no node");
        series.push(json!({
            "series": format!("kube_node_status_capacity{{instance=\"ksm\",node=\"{node}\",resource=\"nvidia_com_gpu\",unit=\"integer\"}}"),
            "values": "8x25"
        }));
        let checks: Vec<(String, String, Value)> = report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| {
                l["checks"].as_array().unwrap().iter().map(move |c| {
                    (
                        l["id"].as_str().unwrap_or_default().to_string(),
                        c["code"].as_str().unwrap().to_string(),
                        c.clone(),
                    )
                })
            })
            .collect();
        let figures = |figure: &str| -> Vec<(BTreeMap<String, String>, f64)> {
            checks
                .iter()
                .flat_map(|(_, _, c)| c["figures"].as_array().cloned().unwrap_or_default())
                .filter(|f| f["name"] == figure)
                .map(|f| {
                    let labels = serde_json::from_value(f["labels"].clone()).unwrap_or_default();
                    (labels, f["value"].as_f64().unwrap())
                })
                .collect()
        };
        let mut expected: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        let exit = report["exit_code"].as_i64().unwrap();
        if exit == 1 {
            let first = &report["first_failure"];
            if first.is_object() {
                let labels = find(
                    "gpudoctor_first_failure_info",
                    &[("check", first["code"].as_str().unwrap())],
                );
                expected
                    .entry("GPUNodeLayerFailed")
                    .or_default()
                    .push(alert("GPUNodeLayerFailed", &labels));
            }
        }
        let mut hardware = false;
        for (_, code, check) in &checks {
            let action = check["action"].as_str().unwrap_or_default();
            if check["status"] == "fail"
                && HARDWARE_ACTIONS.contains(&action)
                && !NOT_A_BROKEN_PART.contains(&code.as_str())
            {
                hardware = true;
                let labels = find("gpudoctor_failure_info", &[("check", code)]);
                assert_eq!(labels["class"], "gpu-hardware", "{name}: {code}");
                expected
                    .entry("GPUNodeHardwareFault")
                    .or_default()
                    .push(alert("GPUNodeHardwareFault", &labels));
            }
        }
        if exit == 3 {
            expected
                .entry("GPUDoctorInconclusive")
                .or_default()
                .push(alert("GPUDoctorInconclusive", &BTreeMap::new()));
        }
        for (_, code, check) in &checks {
            if matches!(check["status"].as_str(), Some("warn" | "error")) {
                let labels = find("gpudoctor_check_status", &[("check", code)]);
                expected
                    .entry("GPUNodeCheckDegraded")
                    .or_default()
                    .push(alert("GPUNodeCheckDegraded", &labels));
            }
        }
        for (labels, value) in figures("xid_events") {
            if labels["severity"] == "fatal" && labels["state"] == "live" && value > 0.0 {
                let want: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let series = find("gpudoctor_xid_events", &want);
                expected
                    .entry("GPUFatalXid")
                    .or_default()
                    .push(alert("GPUFatalXid", &series));
            }
        }
        let rails: Vec<_> = samples
            .iter()
            .filter(|(n, l, _)| {
                n == "gpudoctor_rdma_port_rate_bytes_per_second"
                    && l.get("rail").map(String::as_str) == Some("true")
            })
            .collect();
        let fastest = rails.iter().map(|(_, _, v)| *v).fold(0.0, f64::max);
        for (_, labels, value) in &rails {
            if *value < fastest {
                expected
                    .entry("GPURdmaPortSlow")
                    .or_default()
                    .push(alert("GPURdmaPortSlow", labels));
            }
        }
        let alerts = [
            "GPUNodeHardwareFault",
            "GPUNodeLayerFailed",
            "GPUNodeCheckDegraded",
            "GPUFatalXid",
            "GPURdmaPortSlow",
            "GPUDoctorInconclusive",
            "GPUDoctorNotRunning",
            "GPUNodeNoReport",
        ];
        let in_rules: BTreeSet<&str> = rules
            .groups
            .iter()
            .flat_map(|g| &g.rules)
            .filter_map(|r| r.alert.as_deref())
            .collect();
        assert_eq!(
            in_rules,
            alerts.into(),
            "every alert is tested on every fixture"
        );
        // Only a broken part pages (issue 43): a fixture whose failures are all configuration
        // (a containerd without the nvidia runtime, a device plugin not registered, a subnet
        // manager missing) expects no page at all.
        let pages: Vec<&str> = expected
            .iter()
            .filter(|(a, v)| !v.is_empty() && severity(a) == "page")
            .map(|(a, _)| *a)
            .collect();
        if !hardware {
            assert!(
                pages.is_empty(),
                "{name}: a configuration fault pages: {pages:?}"
            );
            if exit == 1 {
                configuration_faults += 1;
            }
        }
        let mut cases: Vec<Value> = alerts
            .iter()
            .map(|a| json!({"eval_time": "2h", "alertname": a, "exp_alerts": expected.remove(a).unwrap_or_default()}))
            .collect();
        // One scrape pages nothing: every paging rule waits (`for:`).
        for a in ["GPUNodeHardwareFault", "GPUNodeLayerFailed", "GPUFatalXid"] {
            cases.push(json!({"eval_time": "0m", "alertname": a, "exp_alerts": []}));
        }
        assert!(expected.is_empty(), "{name}: {expected:?}");
        tests.push(json!({"name": name, "interval": "5m", "input_series": series, "alert_rule_test": cases}));
    }
    assert!(
        configuration_faults >= 10,
        "{configuration_faults} configuration-fault fixtures page nothing"
    );
    tests.push(no_report_case());
    let file = tmp.path().join("alerts_test.yaml");
    let document = json!({
        "rule_files": [repo.join("docs/alerts.yaml")],
        "evaluation_interval": "5m",
        "tests": tests,
    });
    std::fs::write(&file, serde_json::to_string_pretty(&document).unwrap()).unwrap();
    let out = std::process::Command::new(&promtool)
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// GPUNodeNoReport (issue 43) as `promtool test rules` runs it: three nodes as
/// kube-state-metrics sees them — gpu-a with a gpudoctor report, gpu-b a GPU node without one,
/// cpu-c with no GPU capacity — alert on gpu-b only, and only after 30 minutes; gpu-a's report
/// stops being scraped and it alerts too.
fn no_report_case() -> serde_json::Value {
    use serde_json::json;
    let capacity = |node: &str, gpus: u32| {
        json!({
            "series": format!("kube_node_status_capacity{{instance=\"ksm:8080\",job=\"kube-state-metrics\",node=\"{node}\",resource=\"nvidia_com_gpu\",unit=\"integer\"}}"),
            "values": format!("{gpus}x30")
        })
    };
    let cpu = json!({
        "series": "kube_node_status_capacity{instance=\"ksm:8080\",job=\"kube-state-metrics\",node=\"cpu-c\",resource=\"cpu\",unit=\"core\"}",
        "values": "64x30"
    });
    let report = |node: &str, values: &str| {
        json!({
            "series": format!("gpudoctor_info{{instance=\"{node}:9100\",job=\"node\",node=\"{node}\",version=\"0.1.0\",schema_version=\"2\",kernel=\"\",driver_version=\"\",profile=\"\",source=\"live\"}}"),
            "values": values
        })
    };
    let alert = |node: &str| {
        json!({
            "exp_labels": {"node": node, "severity": "warning"},
            "exp_annotations": {
                "summary": format!("{node}: GPU node without a gpudoctor report for 30 minutes"),
                "description": format!("is a gpudoctor Pod on the node (`kubectl -n gpudoctor get pods -o wide --field-selector spec.nodeName={node}`)? does its DaemonSet's nodeSelector match the node (deploy/overlays/<platform>)? does node_exporter collect /var/lib/node_exporter/textfile_collector?")
            }
        })
    };
    json!({
        "name": "a GPU node without a report",
        "interval": "5m",
        "input_series": [
            capacity("gpu-a", 8),
            capacity("gpu-b", 8),
            capacity("cpu-c", 0),
            cpu,
            // gpu-a reports for 60 minutes, then its series go stale.
            report("gpu-a", "1x12"),
        ],
        "alert_rule_test": [
            {"eval_time": "25m", "alertname": "GPUNodeNoReport", "exp_alerts": []},
            {"eval_time": "35m", "alertname": "GPUNodeNoReport", "exp_alerts": [alert("gpu-b")]},
            {"eval_time": "2h", "alertname": "GPUNodeNoReport", "exp_alerts": [alert("gpu-a"), alert("gpu-b")]},
        ]
    })
}
