//! `gpudoctor fleet --prometheus URL`: the fleet read from the `gpudoctor_*` series Prometheus
//! already holds (the DaemonSet writes them for node-exporter's textfile collector,
//! docs/formats.md), so the fleet view needs nothing but the monitoring stack the cluster runs.
//!
//! Two instant queries (`/api/v1/query`): every `gpudoctor_*` series now, and
//! `last_over_time(gpudoctor_info[1d])`, the nodes that wrote in the last day. Series are
//! grouped into nodes by their **target labels** — every label but the family's own (`layer`,
//! `check`, a figure's catalogue labels, ...), usually `job` and `instance` plus whatever the
//! scrape configuration adds. A target label that clashes with one of ours makes Prometheus
//! keep ours as `exported_<name>` (`honor_labels: false`, the default): `exported_node` is then
//! the report's node name and `node` the target's. Each node becomes the report it was written
//! from, as far as the series carry it: versions, profile, exit code, run time, layer and check
//! statuses, the first failure with its action, which finding explains which
//! (`gpudoctor_consequence_info`), and every figure. Summaries and evidence are not series: the
//! fleet view names causes by check code and action.
//!
//! A node that wrote within the day but has no series now (its scrape fails, or its file
//! went) is **unreachable**: Prometheus marks such series stale and an instant query no longer
//! returns them.

pub mod http;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::{Loaded, NodeReport, Skipped, Unreachable};
use crate::report::{FigureName, Layer, Status};
use crate::saved::{
    SavedCheck, SavedFigure, SavedFirstFailure, SavedLayer, SavedNode, SavedReport, SavedSource,
};

/// 9999-12-31T23:59:59Z: the latest run time read from a series.
const LATEST_RUN_TIME: f64 = 253_402_300_799.0;

/// Every series gpudoctor writes but the run and layer durations, which the fleet view does
/// not read (a tenth of the answer).
pub const SERIES_QUERY: &str =
    r#"{__name__=~"gpudoctor_.+",__name__!~"gpudoctor_(run|layer)_duration_seconds"}"#;
/// The nodes that wrote within the last day: those missing from [`SERIES_QUERY`] now are
/// unreachable.
pub const RECENT_QUERY: &str = "last_over_time(gpudoctor_info[1d])";

const INFO_LABELS: &[&str] = &[
    "version",
    "schema_version",
    "node",
    "kernel",
    "driver_version",
    "profile",
    "source",
];

/// The labels a family writes itself (render/prometheus.rs); `None` for a family this version
/// does not write (a newer gpudoctor's): left out.
fn own_labels(family: &str) -> Option<&'static [&'static str]> {
    Some(match family {
        "info" => INFO_LABELS,
        "exit_code" | "last_run_timestamp_seconds" | "run_duration_seconds" => &[],
        "layer_status" | "layer_duration_seconds" => &["layer"],
        "check_status" => &["layer", "check"],
        "first_failure_info" => &["layer", "check", "action"],
        "consequence_info" => &["layer", "check", "cause"],
        other => FigureName::ALL
            .iter()
            .find(|f| f.id() == other)
            .map(|f| f.labels())?,
    })
}

/// The check a figure's series belongs to (its catalogue entry says; `error_rate_per_second`
/// carries it as a label).
fn figure_check(name: FigureName, labels: &BTreeMap<&str, String>) -> Option<String> {
    Some(
        match name {
            FigureName::XidEvents => "driver.xid_events",
            FigureName::NvmlProbeSeconds => "driver.nvml_init",
            FigureName::NcclBusbwPeakBytesPerSecond
            | FigureName::NcclBusbwPeakSizeBytes
            | FigureName::NcclBusbwAverageBytesPerSecond => "nccl.bus_bandwidth",
            FigureName::RdmaPortRateBytesPerSecond => "rdma.port_rate",
            FigureName::SxidEvents => "nvlink.sxid_events",
            FigureName::PcieAerEvents => "topology.aer_errors",
            FigureName::ErrorRatePerSecond => return labels.get("check").cloned(),
            FigureName::HostGpuCopyBytesPerSecond => "topology.host_bandwidth",
            FigureName::GpuPeerCopyBytesPerSecond => "nvlink.p2p_bandwidth",
            FigureName::GpudirectRdmaBytesPerSecond => "rdma.gpudirect_bandwidth",
        }
        .to_string(),
    )
}

#[derive(Debug, Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
}

#[derive(Debug, Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType", borrow)]
    result_type: Cow<'a, str>,
    #[serde(default, borrow)]
    result: Vec<Sample<'a>>,
}

/// One series of an instant vector: its labels and `[time, "value"]`, borrowed from the answer
/// where no escape forces a copy (10,000 nodes are some 800,000 series).
#[derive(Debug, Clone, Deserialize)]
pub struct Sample<'a> {
    #[serde(borrow)]
    pub metric: BTreeMap<Text<'a>, Text<'a>>,
    #[serde(borrow)]
    pub value: (f64, Text<'a>),
}

/// A JSON string borrowed from the answer, or copied when it held an escape. (serde's own
/// `Cow<str>` is always copied inside a map.)
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Text<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// Run an instant query; the answer's body, for [`parse_answer`].
pub fn fetch(server: &http::Server, expr: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    http::get(
        server,
        &format!("/api/v1/query?query={}", http::encode(expr)),
        timeout,
    )
}

/// How many series an instant query answers.
pub fn count(server: &http::Server, expr: &str, timeout: Duration) -> Result<usize, String> {
    let body = fetch(server, expr, timeout)?;
    parse_answer(&body)
        .map(|v| v.len())
        .map_err(|e| format!("{}: `{expr}`: {e}", server.url()))
}

/// The samples of an API answer, or the error it states.
pub fn parse_answer(body: &[u8]) -> Result<Vec<Sample<'_>>, String> {
    let answer: Answer<'_> =
        serde_json::from_slice(body).map_err(|e| format!("not a Prometheus API answer ({e})"))?;
    if answer.status != "success" {
        return Err(format!(
            "the server says: {}",
            answer.error.unwrap_or_else(|| answer.status.into_owned())
        ));
    }
    let data = answer.data.ok_or("an answer without data")?;
    if data.result_type != "vector" {
        return Err(format!(
            "a {} where a vector was asked for",
            data.result_type
        ));
    }
    Ok(data.result)
}

/// A series split into the family's own label values and the labels naming its target.
struct Split<'a> {
    family: &'a str,
    own: BTreeMap<&'static str, String>,
    /// The target's labels as one key, `job="…",instance="…"` (sorted, as the answer's map is).
    target: String,
    instance: Option<&'a str>,
    value: f64,
}

fn split<'a>(sample: &'a Sample<'a>) -> Option<Split<'a>> {
    let family = sample.metric.get("__name__")?.strip_prefix("gpudoctor_")?;
    split_as(sample, family)
}

/// [`split`] for a series of `family` whatever its name says (a function such as
/// `last_over_time` answers without the metric name).
fn split_as<'a>(sample: &'a Sample<'a>, family: &'a str) -> Option<Split<'a>> {
    let own_names = own_labels(family)?;
    let exported = |name: &str| {
        name.strip_prefix("exported_")
            .and_then(|n| own_names.iter().find(|o| **o == n))
    };
    let mut own = BTreeMap::new();
    let mut target = String::new();
    let mut instance = None;
    for (k, v) in &sample.metric {
        let k: &str = k;
        if k == "__name__" {
            continue;
        }
        if let Some(name) = exported(k) {
            own.insert(*name, v.to_string());
            continue;
        }
        // Ours unless Prometheus renamed ours to exported_<name> (then this is the target's).
        if let Some(name) = own_names.iter().find(|o| **o == k)
            && !sample.metric.contains_key(format!("exported_{k}").as_str())
        {
            own.insert(*name, v.to_string());
            continue;
        }
        if k == "instance" {
            instance = Some(v.as_ref());
        }
        if !target.is_empty() {
            target.push(',');
        }
        target.push_str(k);
        target.push_str("=\"");
        target.push_str(&v.0);
        target.push('"');
    }
    Some(Split {
        family,
        own,
        target,
        instance,
        value: sample.value.1.parse().ok()?,
    })
}

/// A status from its gauge value, as the node's schema numbers them (render/prometheus.rs
/// `status_value`; schema 1 numbered them otherwise).
fn status_of(value: f64, schema: u32) -> String {
    let order: [Status; 6] = if schema <= 1 {
        [
            Status::Pass,
            Status::Warn,
            Status::Fail,
            Status::Error,
            Status::Skip,
            Status::NotRun,
        ]
    } else {
        [
            Status::Pass,
            Status::Skip,
            Status::NotRun,
            Status::Warn,
            Status::Error,
            Status::Fail,
        ]
    };
    let i = value as usize;
    if value.fract() != 0.0 || value < 0.0 || i >= order.len() {
        return format!("unknown ({value})");
    }
    order[i].as_str().to_string()
}

/// The nodes Prometheus holds series of, as reports; targets without `gpudoctor_info` skipped.
pub fn nodes(samples: &[Sample<'_>], server: &str) -> (Vec<NodeReport>, Vec<Skipped>) {
    let splits: Vec<Split<'_>> = samples.iter().filter_map(split).collect();
    let mut by_target: BTreeMap<&str, Vec<&Split<'_>>> = BTreeMap::new();
    for s in &splits {
        by_target.entry(s.target.as_str()).or_default().push(s);
    }
    let mut nodes = Vec::new();
    let mut skipped = Vec::new();
    for (target, series) in by_target {
        let file = format!("{server} {{{target}}}");
        let instance = series.iter().find_map(|s| s.instance);
        match report_of(&series) {
            Some(report) => {
                let name = report
                    .node
                    .hostname
                    .clone()
                    .filter(|h| !h.trim().is_empty())
                    .or_else(|| instance.map(str::to_string))
                    .unwrap_or_else(|| file.clone());
                nodes.push(NodeReport {
                    name,
                    file,
                    modified: None,
                    report,
                });
            }
            None => skipped.push(Skipped {
                file,
                why: "gpudoctor series without gpudoctor_info: written by something else, or cut short".into(),
            }),
        }
    }
    (nodes, skipped)
}

fn report_of(series: &[&Split<'_>]) -> Option<SavedReport> {
    let info = series.iter().find(|s| s.family == "info")?;
    let own = |k: &str| info.own.get(k).cloned().filter(|v| !v.is_empty());
    let schema_version: u32 = own("schema_version")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let of = |family: &'static str| series.iter().filter(move |s| s.family == family);
    let mut layers: BTreeMap<String, SavedLayer> = BTreeMap::new();
    for s in of("layer_status") {
        let id = s.own.get("layer").cloned().unwrap_or_default();
        layers.insert(
            id.clone(),
            SavedLayer {
                id,
                status: status_of(s.value, schema_version),
                ..SavedLayer::default()
            },
        );
    }
    let causes: BTreeMap<&str, &str> = of("consequence_info")
        .filter_map(|s| Some((s.own.get("check")?.as_str(), s.own.get("cause")?.as_str())))
        .collect();
    let first = of("first_failure_info").next();
    for s in of("check_status") {
        let code = s.own.get("check").cloned().unwrap_or_default();
        let layer = s.own.get("layer").cloned().unwrap_or_default();
        let action = first
            .filter(|f| f.own.get("check") == Some(&code))
            .and_then(|f| f.own.get("action").cloned());
        let check = SavedCheck {
            explained_by: causes.get(code.as_str()).map(|c| c.to_string()),
            status: status_of(s.value, schema_version),
            code,
            action,
            ..SavedCheck::default()
        };
        layers
            .entry(layer.clone())
            .or_insert_with(|| SavedLayer {
                id: layer,
                status: "absent".into(),
                ..SavedLayer::default()
            })
            .checks
            .push(check);
    }
    for s in series {
        let Some(name) = FigureName::ALL.iter().find(|f| f.id() == s.family) else {
            continue;
        };
        let Some(owner) = figure_check(*name, &s.own) else {
            continue;
        };
        let labels: BTreeMap<String, String> = s
            .own
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        if let Some(check) = layers
            .values_mut()
            .flat_map(|l| l.checks.iter_mut())
            .find(|c| c.code == owner)
        {
            check.figures.push(SavedFigure {
                name: name.id().to_string(),
                value: s.value,
                labels,
            });
        }
    }
    // Layers in walk order, then any a newer version added.
    let mut ordered: Vec<SavedLayer> = Layer::ALL
        .iter()
        .filter_map(|l| layers.remove(l.id()))
        .collect();
    ordered.extend(layers.into_values());
    let value = |family: &'static str| of(family).next().map(|s| s.value);
    Some(SavedReport {
        schema_version,
        gpudoctor_version: own("version").unwrap_or_default(),
        source: SavedSource {
            kind: own("source").unwrap_or_default(),
            root: String::new(),
        },
        node: SavedNode {
            hostname: own("node"),
            kernel: own("kernel"),
            driver_version: own("driver_version"),
        },
        profile: own("profile"),
        // Any gauge value can arrive: past year 9999 is no run time (and adding it to the
        // epoch would overflow `SystemTime`).
        generated_at: value("last_run_timestamp_seconds")
            .filter(|t| t.is_finite() && (0.0..=LATEST_RUN_TIME).contains(t))
            .map(|t| crate::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(t as u64))),
        layers: ordered,
        first_failure: first.map(|f| SavedFirstFailure {
            layer: f.own.get("layer").cloned().unwrap_or_default(),
            code: f.own.get("check").cloned().unwrap_or_default(),
            summary: String::new(),
            action: f.own.get("action").cloned().filter(|a| !a.is_empty()),
        }),
        exit_code: value("exit_code").map_or(0, |v| v as i32),
    })
}

/// Read the fleet from the Prometheus server at `url`.
pub fn load(url: &str, timeout: Duration) -> Result<Loaded, String> {
    let server = http::Server::parse(url)?;
    let url = server.url();
    let said = |expr: &'static str| {
        let url = url.clone();
        move |e: String| format!("{url}: `{expr}`: {e}")
    };
    let now_body = fetch(&server, SERIES_QUERY, timeout)?;
    let now = parse_answer(&now_body).map_err(said(SERIES_QUERY))?;
    let recent_body = fetch(&server, RECENT_QUERY, timeout)?;
    let recent = parse_answer(&recent_body).map_err(said(RECENT_QUERY))?;
    let (nodes, skipped) = nodes(&now, &server.url());
    let present: BTreeSet<String> = now.iter().filter_map(split).map(|s| s.target).collect();
    let mut unreachable: Vec<Unreachable> = recent
        .iter()
        .filter_map(|s| split_as(s, "info"))
        .filter(|s| !present.contains(&s.target))
        .map(|s| Unreachable {
            name: s
                .own
                .get("node")
                .cloned()
                .filter(|n| !n.is_empty())
                .or_else(|| s.instance.map(str::to_string))
                .unwrap_or_else(|| s.target.clone()),
            target: s.target.clone(),
        })
        .collect();
    unreachable.sort_by(|a, b| a.name.cmp(&b.name));
    unreachable.dedup();
    let (nodes, duplicates) = super::pick::one_per_node(nodes);
    let mut skipped = skipped;
    skipped.extend(duplicates);
    Ok(Loaded {
        nodes,
        skipped,
        unreachable,
    })
}

#[cfg(test)]
mod tests;
