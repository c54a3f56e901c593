//! Series back into reports: each series split into its family's own labels and the labels
//! naming its target, series grouped by target, and each target's series made into the report
//! they were written from (render/prometheus.rs writes them; docs/formats.md lists them).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::answer::Sample;
use crate::fleet::{NodeReport, Skipped};
use crate::report::{FigureName, Layer, Status};
use crate::saved::{
    SavedCheck, SavedFigure, SavedFirstFailure, SavedLayer, SavedNode, SavedReport, SavedSource,
};

/// 9999-12-31T23:59:59Z: the latest run time read from a series.
const LATEST_RUN_TIME: f64 = 253_402_300_799.0;

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
pub(super) fn own_labels(family: &str) -> Option<&'static [&'static str]> {
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
pub(super) fn figure_check<'a>(name: FigureName, own: &Own<'a>) -> Option<&'a str> {
    Some(match name {
        FigureName::XidEvents => "driver.xid_events",
        FigureName::NvmlProbeSeconds => "driver.nvml_init",
        FigureName::NcclBusbwPeakBytesPerSecond
        | FigureName::NcclBusbwPeakSizeBytes
        | FigureName::NcclBusbwAverageBytesPerSecond => "nccl.bus_bandwidth",
        FigureName::RdmaPortRateBytesPerSecond => "rdma.port_rate",
        FigureName::SxidEvents => "nvlink.sxid_events",
        FigureName::PcieAerEvents => "topology.aer_errors",
        FigureName::ErrorRatePerSecond => return own.get("check"),
        FigureName::HostGpuCopyBytesPerSecond => "topology.host_bandwidth",
        FigureName::GpuPeerCopyBytesPerSecond => "nvlink.p2p_bandwidth",
        FigureName::GpudirectRdmaBytesPerSecond => "rdma.gpudirect_bandwidth",
    })
}

/// The layer a check code belongs to: its prefix (`device_plugin.x` is `device-plugin`'s).
fn layer_of(code: &str) -> String {
    let prefix = code.split('.').next().unwrap_or(code);
    Layer::ALL
        .iter()
        .map(|l| l.id())
        .find(|id| id.replace('-', "_") == prefix)
        .unwrap_or(prefix)
        .to_string()
}

/// A family's own label values, in the family's order.
#[derive(Debug, Default)]
pub(super) struct Own<'a>(Vec<(&'static str, &'a str)>);

impl<'a> Own<'a> {
    pub(super) fn get(&self, name: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
    fn owned(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_string)
    }
}

/// A series: its family, own labels and value.
#[derive(Debug)]
pub(super) struct Split<'a> {
    pub family: &'a str,
    pub own: Own<'a>,
    pub value: f64,
}

/// Split `sample` as a series of `family` (a function such as `last_over_time` answers
/// without the metric name, so the caller may say which), writing its target's labels into
/// `target` as one key, `instance="…",job="…"` (sorted, as the labels are). `None` for a
/// family this version does not write, or a value that is not a number.
pub(super) fn split_as<'a>(
    sample: &'a Sample<'a>,
    family: &'a str,
    target: &mut String,
) -> Option<Split<'a>> {
    let own_names = own_labels(family)?;
    let is_own = |name: &str| own_names.iter().copied().find(|o| *o == name);
    let value = sample.value.1.parse().ok()?;
    let mut own = Own(Vec::with_capacity(own_names.len()));
    target.clear();
    for (k, v) in &sample.metric {
        let (k, v): (&str, &str) = (k, v);
        if k == "__name__" {
            continue;
        }
        if let Some(name) = k.strip_prefix("exported_").and_then(is_own) {
            own.0.push((name, v));
            continue;
        }
        // Ours unless Prometheus renamed ours to exported_<name> (then this is the target's).
        if let Some(name) = is_own(k)
            && !sample
                .metric
                .iter()
                .any(|(e, _)| e.strip_prefix("exported_") == Some(k))
        {
            own.0.push((name, v));
            continue;
        }
        if !target.is_empty() {
            target.push(',');
        }
        target.push_str(k);
        target.push_str("=\"");
        target.push_str(v);
        target.push('"');
    }
    Some(Split { family, own, value })
}

/// [`split_as`] by the series' own name.
pub(super) fn split<'a>(sample: &'a Sample<'a>, target: &mut String) -> Option<Split<'a>> {
    let family = sample.label("__name__")?.strip_prefix("gpudoctor_")?;
    split_as(sample, family, target)
}

/// One scrape target's series.
#[derive(Debug)]
pub(super) struct Target<'a> {
    /// Its labels, `instance="…",job="…"`.
    pub key: String,
    pub instance: Option<&'a str>,
    pub series: Vec<Split<'a>>,
}

/// Series grouped by target, in the order targets first appear.
#[derive(Debug, Default)]
pub(super) struct Targets<'a> {
    index: HashMap<String, usize>,
    pub groups: Vec<Target<'a>>,
    key: String,
}

impl<'a> Targets<'a> {
    pub(super) fn add(&mut self, sample: &'a Sample<'a>) {
        if let Some(series) = split(sample, &mut self.key) {
            let i = match self.index.get(self.key.as_str()) {
                Some(i) => *i,
                None => {
                    self.index.insert(self.key.clone(), self.groups.len());
                    self.groups.push(Target {
                        key: self.key.clone(),
                        instance: sample.label("instance"),
                        series: Vec::new(),
                    });
                    self.groups.len() - 1
                }
            };
            self.groups[i].series.push(series);
        }
    }

    pub(super) fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }
}

/// A status from its gauge value, as the node's schema numbers them (render/prometheus.rs
/// `status_value`; schema 1 numbered them otherwise).
pub(super) fn status_of(value: f64, schema: u32) -> String {
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
        // Any value can arrive (`1e308`, `NaN`): shown bounded, never in 309 digits.
        return format!("unknown ({})", crate::text::number::short(value));
    }
    order[i].as_str().to_string()
}

/// Each target's series as the node's report, sorted by target; targets without
/// `gpudoctor_info` skipped.
pub(super) fn nodes(targets: &Targets<'_>, server: &str) -> (Vec<NodeReport>, Vec<Skipped>) {
    let mut groups: Vec<&Target<'_>> = targets.groups.iter().collect();
    groups.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let mut nodes = Vec::new();
    let mut skipped = Vec::new();
    for target in groups {
        let file = format!("{server} {{{}}}", target.key);
        match report_of(&target.series) {
            Some(report) => {
                let name = report
                    .node
                    .hostname
                    .clone()
                    .filter(|h| !h.trim().is_empty())
                    .or_else(|| target.instance.map(str::to_string))
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

/// The report one target's series were written from. Checks that passed are not asked for one
/// by one (`super::CHECKS_QUERY`): a check is listed when it did not pass, when it is the XID
/// check, or, as passed, when it carries a figure.
fn report_of(series: &[Split<'_>]) -> Option<SavedReport> {
    let info = series.iter().find(|s| s.family == "info")?;
    let own = |k: &str| info.own.owned(k).filter(|v| !v.is_empty());
    let schema_version: u32 = own("schema_version")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let of = |family: &'static str| series.iter().filter(move |s| s.family == family);
    let mut layers: BTreeMap<String, SavedLayer> = BTreeMap::new();
    for s in of("layer_status") {
        let id = s.own.owned("layer").unwrap_or_default();
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
        .filter_map(|s| Some((s.own.get("check")?, s.own.get("cause")?)))
        .collect();
    let first = of("first_failure_info").next();
    let add_check =
        |layers: &mut BTreeMap<String, SavedLayer>, layer: String, check: SavedCheck| {
            layers
                .entry(layer.clone())
                .or_insert_with(|| SavedLayer {
                    id: layer,
                    status: "absent".into(),
                    ..SavedLayer::default()
                })
                .checks
                .push(check);
        };
    for s in of("check_status") {
        let code = s.own.owned("check").unwrap_or_default();
        let action = first
            .filter(|f| f.own.get("check") == Some(code.as_str()))
            .and_then(|f| f.own.owned("action"));
        let check = SavedCheck {
            explained_by: causes.get(code.as_str()).map(|c| c.to_string()),
            status: status_of(s.value, schema_version),
            code,
            action,
            ..SavedCheck::default()
        };
        add_check(&mut layers, s.own.owned("layer").unwrap_or_default(), check);
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
            .0
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let figure = SavedFigure {
            name: name.id().to_string(),
            value: s.value,
            labels,
            // The metrics carry values, not the profile's floors: outliers from Prometheus are
            // judged by the median alone (docs/triage.md).
            floor: None,
        };
        match layers
            .values_mut()
            .flat_map(|l| l.checks.iter_mut())
            .find(|c| c.code == owner)
        {
            Some(check) => check.figures.push(figure),
            // A check with figures and no status series of its own passed.
            None => add_check(
                &mut layers,
                layer_of(owner),
                SavedCheck {
                    code: owner.to_string(),
                    status: Status::Pass.as_str().to_string(),
                    figures: vec![figure],
                    ..SavedCheck::default()
                },
            ),
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
            layer: f.own.owned("layer").unwrap_or_default(),
            code: f.own.owned("check").unwrap_or_default(),
            summary: String::new(),
            action: f.own.owned("action").filter(|a| !a.is_empty()),
        }),
        exit_code: value("exit_code").map_or(0, |v| v as i32),
    })
}
