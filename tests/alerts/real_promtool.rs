//! The real promtool (`check rules`, `check metrics`, `test rules`) on docs/alerts.yaml and every
//! fixture's Prometheus output: each alert fires where the fixture's report names its fault.

use super::*;

use gpudoctor::render::npd_conditions::NOT_A_BROKEN_PART;

/// The actions that say the part itself is broken, and so page (docs/alerts.yaml), less the
/// checks whose drastic action mends no broken part (`NOT_A_BROKEN_PART`): written out here,
/// not read from the code that classes them, so a change there shows up as a failing test.
const HARDWARE_ACTIONS: [&str; 3] = ["hardware_inspection", "reset_gpu", "reboot_node"];

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
