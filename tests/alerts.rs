//! docs/alerts.yaml is a Prometheus rules file `promtool check rules` accepts, and it watches
//! series gpudoctor writes. The real promtool checks the rules and every fixture's metrics
//! where it is installed (`.ci/run` installs it); without it, the test still checks what promtool checks
//! (Prometheus `rulefmt`: the fields of a group and a rule, one of `alert`/`record`, a
//! non-empty `expr`, a valid `for` duration, valid label names, no duplicate group names,
//! annotation templates that close), then that every metric an expression names is one the
//! fixtures' Prometheus output holds (or node_exporter's textfile stamp), with every label it
//! matches on, and every `$labels.x` an annotation uses is a label the alert's series carry.
//!
//! Tests, in tests/alerts/: `rules_file` reads the rules alone; `real_promtool` runs promtool.

mod common;

use std::collections::{BTreeMap, BTreeSet};

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

fn rules() -> RuleFile {
    let text = std::fs::read_to_string(common::repo().join("docs/alerts.yaml")).unwrap();
    serde_yaml_ng::from_str(&text).expect("docs/alerts.yaml is a rules file")
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

#[path = "alerts/rules_file.rs"]
mod rules_file;

#[path = "alerts/real_promtool.rs"]
mod real_promtool;
