//! The Node Problem Detector plugin config: it fits NPD's rules and gpudoctor's conditions,
//! and the NPD DaemonSet's ConfigMap carries it verbatim.

use super::*;

/// NPD's custom plugin config (reference/kubernetes.md §9), as far as the test reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PluginMonitor {
    plugin: String,
    plugin_config: PluginConfig,
    source: String,
    metrics_reporting: bool,
    conditions: Vec<Condition>,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginConfig {
    invoke_interval: String,
    timeout: String,
    max_output_length: usize,
    concurrency: u32,
    enable_message_change_based_condition_update: bool,
    skip_initial_status: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    reason: String,
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(rename = "type")]
    kind: String,
    condition: String,
    reason: String,
    path: String,
    args: Vec<String>,
    timeout: String,
}

fn seconds(duration: &str) -> u64 {
    duration
        .strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{duration}: write NPD durations in seconds (`300s`)"))
}

#[test]
fn the_npd_plugin_config_fits_npd_and_gpudoctor() {
    let path = common::repo().join("deploy/npd/gpudoctor-plugin-monitor.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let monitor: PluginMonitor = serde_json::from_str(&text).unwrap();
    assert_eq!(monitor.plugin, "custom");
    assert!(!monitor.source.is_empty() && monitor.metrics_reporting);
    let config = &monitor.plugin_config;
    assert!(config.concurrency >= 1 && !config.skip_initial_status);
    // NPD's custom plugin monitor docs: "Flag controls whether message change should result
    // in a condition update". gpudoctor's message names the failing layer and check: when the
    // cause changes while the node stays unhealthy, the condition must say the new one.
    assert!(config.enable_message_change_based_condition_update);
    // gpudoctor's line is cut to NPD's limit, never by NPD.
    assert!(config.max_output_length >= gpudoctor::render::npd::MAX_MESSAGE_BYTES);
    let global = seconds(&config.timeout);
    assert!(
        seconds(&config.invoke_interval) >= global,
        "runs would overlap"
    );
    for rule in &monitor.rules {
        // NPD refuses to start when a rule's timeout exceeds the global one.
        assert!(
            seconds(&rule.timeout) <= global,
            "rule timeout above the global one"
        );
        assert!(matches!(rule.kind.as_str(), "permanent" | "temporary"));
        if rule.kind == "permanent" {
            assert!(
                monitor.conditions.iter().any(|c| c.kind == rule.condition),
                "permanent rule for an undeclared condition {}",
                rule.condition
            );
        }
        assert!(!rule.reason.is_empty());
        assert_eq!(rule.path, "/opt/gpudoctor/bin/gpudoctor-node");
    }
    for condition in &monitor.conditions {
        assert!(!condition.reason.is_empty() && !condition.message.is_empty());
    }
    // One condition per cause class, in gpudoctor's order, each set by one rule with the
    // class's reason (issue 26). The first rule runs the check and saves the report; NPD runs
    // rules one after another in their order under `concurrency: 1` (its plugin's semaphore),
    // so the others answer from this interval's report.
    assert_eq!(
        config.concurrency, 1,
        "the npd-saved rules read the npd rule's report"
    );
    let classes = gpudoctor::render::npd_conditions::Condition::ALL;
    assert_eq!(monitor.conditions.len(), classes.len());
    assert_eq!(monitor.rules.len(), classes.len());
    for (i, class) in classes.iter().enumerate() {
        let (condition, rule) = (&monitor.conditions[i], &monitor.rules[i]);
        assert_eq!(condition.kind, class.type_name());
        assert_eq!(
            condition.message,
            format!("gpudoctor: no {} problem", class.id()),
            "the message gpudoctor prints when it is false"
        );
        assert_eq!(rule.kind, "permanent");
        assert_eq!(rule.condition, class.type_name());
        assert_eq!(rule.reason, class.reason());
        let mode = if i == 0 { "npd" } else { "npd-saved" };
        assert_eq!(rule.args, [mode, class.id()]);
    }

    // The NPD DaemonSet's ConfigMap carries this file verbatim.
    let npd = documents(&common::repo().join("deploy/npd/node-problem-detector.yaml"));
    let configmap = npd
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    assert_eq!(
        configmap["data"]["gpudoctor-plugin-monitor.json"]
            .as_str()
            .unwrap(),
        text,
        "deploy/npd/node-problem-detector.yaml must embed deploy/npd/gpudoctor-plugin-monitor.json as it is"
    );
}
