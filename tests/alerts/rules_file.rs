//! docs/alerts.yaml read here, without promtool: the shape `promtool check rules` checks, the
//! series and labels its expressions select among what gpudoctor writes, and the rate and XID
//! alerts' selections computed by hand over every fixture's Prometheus output.

use super::*;

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
