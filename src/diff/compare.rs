//! What differs between two sides: the verdict of every check both sides evaluated, every fact
//! (`snapshot`), and the measured figures facts do not cover (NCCL bus bandwidth). Each
//! difference is one line's worth of data. Not counted: identifiers (serials, UUIDs, GUIDs,
//! host names) and provenance (which file answered), in which any two nodes differ, and
//! verdicts that moved between pass and skip. Exit 0 when nothing counted differs, 1 otherwise.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{InputKind, Side};
use crate::report::facts::{Facts, is_informational_fact};
use crate::report::{FigureName, Layer, exit};
use crate::saved::{self, SavedReport};

/// A bandwidth or rate differs when the two values are more than this fraction apart: nccl-tests
/// on one healthy node vary by a few percent from run to run, and a profile's warn band
/// (docs/profiles.md) is wider than this, so a change smaller than 5% is noise, not a finding.
pub const RATE_TOLERANCE: f64 = 0.05;

/// What kind of difference a line is, in the order they are shown within a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A check's status.
    Verdict,
    /// A fact of the node.
    Fact,
    /// A measured figure (outside the tolerance).
    Measurement,
    /// An identifier or provenance: shown, never counted.
    Informational,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// `node` or a layer id.
    pub section: String,
    pub kind: Kind,
    /// The check code, fact subject (`gpu 0000:5d:00.0`) or figure (`name{labels}`).
    pub subject: String,
    /// The fact's attribute (`pcie link width`); absent for verdicts, measurements and a subject
    /// present on one side only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    /// The value on A and on B (`absent` when a side has none).
    pub a: String,
    pub b: String,
    /// For a verdict: the summary of the worse side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Counts towards the exit code.
    pub counted: bool,
}

/// One side as the output names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideSummary {
    pub input: String,
    pub kind: InputKind,
    pub hostname: Option<String>,
    pub profile: Option<String>,
    pub exit_code: i32,
    pub gpudoctor_version: String,
    /// Layers whose checks did not run on this side (blocked, deselected, or absent).
    pub not_evaluated: Vec<String>,
    /// The layer that blocked the rest (stop at the first failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
    pub has_facts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub a: SideSummary,
    pub b: SideSummary,
    pub differences: Vec<Difference>,
    /// Differences that count (everything but identifiers and provenance).
    pub counted: usize,
    /// 0 when nothing counted differs, 1 otherwise.
    pub exit_code: i32,
}

pub const ABSENT: &str = "absent";

/// Section order: `node`, the layers in walk order, then anything a newer version added.
pub fn section_rank(section: &str) -> (usize, String) {
    if section == "node" {
        return (0, String::new());
    }
    match Layer::ALL.iter().position(|l| l.id() == section) {
        Some(i) => (1 + i, String::new()),
        None => (1 + Layer::ALL.len(), section.to_string()),
    }
}

fn summary(side: &Side) -> SideSummary {
    let r = &side.report;
    let not_evaluated: Vec<String> = r
        .layers
        .iter()
        .filter(|l| !l.evaluated())
        .map(|l| l.id.clone())
        .collect();
    SideSummary {
        input: side.name.clone(),
        kind: side.kind,
        hostname: r.node.hostname.clone(),
        profile: r.profile.clone(),
        exit_code: r.exit_code,
        gpudoctor_version: r.gpudoctor_version.clone(),
        not_evaluated,
        blocked_by: r.first_failure.as_ref().and_then(|f| {
            r.layers
                .iter()
                .any(|l| l.status == "not_run")
                .then(|| f.layer.clone())
        }),
        has_facts: side.facts.is_some(),
        note: side.facts_note.clone(),
    }
}

/// Compare two sides.
pub fn compare(a: &Side, b: &Side) -> Diff {
    let mut out = Vec::new();
    verdicts(&a.report, &b.report, &mut out);
    match (&a.facts, &b.facts) {
        (Some(fa), Some(fb)) => facts(fa, fb, &mut out),
        _ => node_info(&a.report, &b.report, &mut out),
    }
    let covered = a.facts.is_some() && b.facts.is_some();
    measurements(&a.report, &b.report, covered, &mut out);
    fold_errors_per_gpu(&mut out);
    // Stable: within a section and kind, lines keep the order they were found in (walk order
    // for verdicts, subject order for facts).
    out.sort_by_key(|d| (section_rank(&d.section), d.kind));
    let counted = out.iter().filter(|d| d.counted).count();
    Diff {
        a: summary(a),
        b: summary(b),
        counted,
        exit_code: if counted == 0 {
            exit::HEALTHY
        } else {
            exit::FAILED
        },
        differences: out,
    }
}

fn severity(status: &str) -> u8 {
    saved::status(status).map_or(0, |s| s.severity())
}

fn is_finding(status: &str) -> bool {
    saved::status(status).is_some_and(|s| s.is_finding())
}

/// A verdict change matters when a side found something (warn, fail, error) or says what this
/// version cannot read; between pass and skip it does not: a check that no longer applies
/// (NVML gone, no NCCL run) follows from a fact that is itself listed.
fn matters(status: &str) -> bool {
    is_finding(status) || saved::status(status).is_none()
}

/// Every check both sides evaluated whose status differs; a check one side evaluated and the
/// other did not know (another version) counts only when its status is a finding.
fn verdicts(a: &SavedReport, b: &SavedReport, out: &mut Vec<Difference>) {
    let mut ids: Vec<&str> = a.layers.iter().map(|l| l.id.as_str()).collect();
    for l in &b.layers {
        if !ids.contains(&l.id.as_str()) {
            ids.push(&l.id);
        }
    }
    for id in ids {
        let (Some(la), Some(lb)) = (a.layer(id), b.layer(id)) else {
            continue;
        };
        if !la.evaluated() || !lb.evaluated() {
            continue;
        }
        let in_b: BTreeMap<&str, &saved::SavedCheck> =
            lb.checks.iter().map(|c| (c.code.as_str(), c)).collect();
        let in_a: BTreeSet<&str> = la.checks.iter().map(|c| c.code.as_str()).collect();
        for ca in &la.checks {
            match in_b.get(ca.code.as_str()) {
                Some(cb) if cb.status != ca.status => {
                    // The summary of the side that found something (the worse one), else B's.
                    let worse =
                        if is_finding(&ca.status) && severity(&ca.status) > severity(&cb.status) {
                            ca
                        } else {
                            cb
                        };
                    out.push(Difference {
                        section: id.to_string(),
                        kind: Kind::Verdict,
                        subject: ca.code.clone(),
                        attribute: None,
                        a: ca.status.clone(),
                        b: cb.status.clone(),
                        detail: Some(worse.summary.clone()),
                        counted: matters(&ca.status) || matters(&cb.status),
                    });
                }
                Some(_) => {}
                None => out.push(Difference {
                    section: id.to_string(),
                    kind: Kind::Verdict,
                    subject: ca.code.clone(),
                    attribute: None,
                    a: ca.status.clone(),
                    b: "not checked".into(),
                    detail: Some(ca.summary.clone()),
                    counted: matters(&ca.status),
                }),
            }
        }
        for cb in lb.checks.iter().filter(|c| !in_a.contains(c.code.as_str())) {
            out.push(Difference {
                section: id.to_string(),
                kind: Kind::Verdict,
                subject: cb.code.clone(),
                attribute: None,
                a: "not checked".into(),
                b: cb.status.clone(),
                detail: Some(cb.summary.clone()),
                counted: matters(&cb.status),
            });
        }
    }
}

fn fact_kind(subject: &str, attribute: &str) -> (Kind, bool) {
    if is_informational_fact(subject, attribute) {
        (Kind::Informational, false)
    } else {
        (Kind::Fact, true)
    }
}

/// Every fact that differs. A subject whose probe did not answer on either side is left to that
/// probe's own line (`nvml init: ok → driver_not_loaded …`); an attribute only one vocabulary
/// knows (facts of two versions) is not compared.
fn facts(fa: &Facts, fb: &Facts, out: &mut Vec<Difference>) {
    let same_version = fa.version == fb.version;
    let empty = BTreeMap::new();
    let sections: BTreeSet<&String> = fa.sections.keys().chain(fb.sections.keys()).collect();
    for section in sections {
        let sa = fa.sections.get(section).unwrap_or(&empty);
        let sb = fb.sections.get(section).unwrap_or(&empty);
        let subjects: BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
        for subject in subjects {
            if fa.unavailable_for(subject).is_some() || fb.unavailable_for(subject).is_some() {
                continue;
            }
            let (aa, ab) = match (sa.get(subject), sb.get(subject)) {
                (Some(aa), Some(ab)) => (aa, ab),
                (one, _) => {
                    let (a, b) = if one.is_some() {
                        ("present", ABSENT)
                    } else {
                        (ABSENT, "present")
                    };
                    out.push(Difference {
                        section: section.clone(),
                        kind: Kind::Fact,
                        subject: subject.clone(),
                        attribute: None,
                        a: a.into(),
                        b: b.into(),
                        detail: None,
                        counted: true,
                    });
                    continue;
                }
            };
            let attributes: BTreeSet<&String> = aa.keys().chain(ab.keys()).collect();
            for attribute in attributes {
                let (va, vb) = (aa.get(attribute), ab.get(attribute));
                if va == vb
                    || (!same_version
                        && (va.is_none()
                            || vb.is_none()
                            || crate::report::facts::REWORDED.contains(&attribute.as_str())
                            || va.zip(vb).is_some_and(|(a, b)| {
                                a.starts_with("error (") && b.starts_with("error (")
                            })))
                {
                    continue;
                }
                let (kind, counted) = fact_kind(subject, attribute);
                out.push(Difference {
                    section: section.clone(),
                    kind,
                    subject: subject.clone(),
                    attribute: Some(attribute.clone()),
                    a: va.cloned().unwrap_or_else(|| ABSENT.into()),
                    b: vb.cloned().unwrap_or_else(|| ABSENT.into()),
                    detail: None,
                    counted,
                });
            }
        }
    }
}

/// Without facts on a side, the report's own node lines: profile, kernel, driver, host name.
fn node_info(a: &SavedReport, b: &SavedReport, out: &mut Vec<Difference>) {
    let or_absent = |v: &Option<String>| v.clone().unwrap_or_else(|| ABSENT.into());
    let rows = [
        ("profile", or_absent(&a.profile), or_absent(&b.profile)),
        (
            "kernel",
            or_absent(&a.node.kernel),
            or_absent(&b.node.kernel),
        ),
        (
            "module version",
            or_absent(&a.node.driver_version),
            or_absent(&b.node.driver_version),
        ),
        (
            "hostname",
            or_absent(&a.node.hostname),
            or_absent(&b.node.hostname),
        ),
    ];
    for (attribute, va, vb) in rows {
        if va != vb {
            let (kind, counted) = fact_kind("node", attribute);
            out.push(Difference {
                section: "node".into(),
                kind,
                subject: "node".into(),
                attribute: Some(attribute.into()),
                a: va,
                b: vb,
                detail: None,
                counted,
            });
        }
    }
}

/// `name{k=v,...}`: one figure's key.
pub fn figure_key(name: &str, labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let mut key = String::with_capacity(name.len() + 2 + labels.len() * 24);
    key.push_str(name);
    key.push('{');
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            key.push(',');
        }
        key.push_str(k);
        key.push('=');
        key.push_str(v);
    }
    key.push('}');
    key
}

/// A figure's value in the unit people read it in.
pub fn show_value(name: &str, value: f64) -> String {
    if name == FigureName::RdmaPortRateBytesPerSecond.id() {
        format!("{} Gb/s", trim(value * 8.0 / 1e9))
    } else if name.ends_with("_bytes_per_second") {
        format!("{} GB/s", trim(value / 1e9))
    } else if value != 0.0 && value.abs() < 0.05 {
        // An error counter's rate over a day's uptime (1 in 86 400 s): one decimal would say 0,
        // which reads as "none" beside a median of 0.
        format!("{value:.1e}")
    } else {
        trim(value)
    }
}

/// One decimal at most, bounded in length (`1e308` is not 309 digits): `text::number::short`.
fn trim(v: f64) -> String {
    crate::text::number::short(v)
}

/// Rates compare with [`RATE_TOLERANCE`]; counts exactly.
fn differs(name: &str, a: f64, b: f64) -> bool {
    if name.ends_with("_per_second") {
        let scale = a.abs().max(b.abs());
        scale > 0.0 && (a - b).abs() / scale > RATE_TOLERANCE
    } else {
        a != b
    }
}

/// Figures both sides measured, by layer. XID counts and port rates are facts already when both
/// sides have facts (`covered`).
fn measurements(a: &SavedReport, b: &SavedReport, covered: bool, out: &mut Vec<Difference>) {
    let figures = |r: &SavedReport| {
        let mut m: BTreeMap<(String, String), (String, f64)> = BTreeMap::new();
        for l in r.layers.iter().filter(|l| l.evaluated()) {
            for f in l.checks.iter().flat_map(|c| &c.figures) {
                let is_fact = f.name == FigureName::XidEvents.id()
                    || f.name == FigureName::RdmaPortRateBytesPerSecond.id();
                if covered && is_fact {
                    continue;
                }
                m.insert(
                    (l.id.clone(), figure_key(&f.name, &f.labels)),
                    (f.name.clone(), f.value),
                );
            }
        }
        m
    };
    let (ma, mb) = (figures(a), figures(b));
    for ((layer, key), (name, va)) in &ma {
        if let Some((_, vb)) = mb.get(&(layer.clone(), key.clone()))
            && differs(name, *va, *vb)
        {
            let change = if *va != 0.0 {
                format!("{:+.1}%", (vb - va) / va.abs() * 100.0)
            } else {
                String::new()
            };
            out.push(Difference {
                section: layer.clone(),
                kind: Kind::Measurement,
                subject: key.clone(),
                attribute: None,
                a: show_value(name, *va),
                b: show_value(name, *vb),
                detail: (!change.is_empty()).then_some(change),
                counted: true,
            });
        }
    }
}

// One line per cause: a GPU that stopped answering NVML (`gpu_is_lost`, `reset_required`) turns
// every reading of it into `error (<kind>)` — its ECC mode, MIG mode, persistence, remapped rows,
// its NVLinks and fabric, even the NVML half of its PCIe link — and a diff that listed each
// reading said the same thing nine times, one of them `x16 → x16`. Fact differences of one GPU
// whose one side holds the same NVML error and whose other side does not are folded into one
// line naming the error and the readings it took.

/// `error (<kind>)` in a fact value: the kind.
fn error_kind(value: &str) -> Option<&str> {
    let at = value.find("error (")?;
    let rest = &value[at + "error (".len()..];
    let end = rest.find(')')?;
    let kind = &rest[..end];
    (!kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')).then_some(kind)
}

/// The PCI address a fact subject names (`nvml gpu 0000:ba:00.0`, `gpu 0000:ba:00.0`).
fn gpu_of(subject: &str) -> Option<&str> {
    let last = subject.rsplit(' ').next()?;
    let pci = last.len() == 12 && last.as_bytes()[4] == b':' && last.as_bytes()[7] == b':';
    (subject.contains("gpu") && pci).then_some(last)
}

/// Fold the fact differences of each (GPU, side, error kind) seen at least twice into one.
fn fold_errors_per_gpu(out: &mut Vec<Difference>) {
    // (gpu, the side with the error: true for B, kind) → indices.
    let mut groups: BTreeMap<(String, bool, String), Vec<usize>> = BTreeMap::new();
    for (i, d) in out.iter().enumerate() {
        if d.kind != Kind::Fact {
            continue;
        }
        let Some(gpu) = gpu_of(&d.subject) else {
            continue;
        };
        let (ea, eb) = (error_kind(&d.a), error_kind(&d.b));
        let key = match (ea, eb) {
            (None, Some(k)) => (gpu.to_string(), true, k.to_string()),
            (Some(k), None) => (gpu.to_string(), false, k.to_string()),
            _ => continue,
        };
        groups.entry(key).or_default().push(i);
    }
    let mut drop = vec![false; out.len()];
    let mut folded = Vec::new();
    for ((gpu, on_b, kind), indices) in groups {
        if indices.len() < 2 {
            continue;
        }
        let readings: Vec<String> = indices
            .iter()
            .map(|&i| {
                out[i]
                    .attribute
                    .clone()
                    .unwrap_or_else(|| out[i].subject.clone())
            })
            .collect();
        let first = &out[indices[0]];
        let error = format!(
            "error ({kind}) on {} readings: {}",
            readings.len(),
            readings.join(", ")
        );
        let answered = "answered".to_string();
        let (a, b) = if on_b {
            (answered, error)
        } else {
            (error, answered)
        };
        folded.push(Difference {
            section: first.section.clone(),
            kind: Kind::Fact,
            subject: format!("nvml gpu {gpu}"),
            attribute: None,
            a,
            b,
            detail: None,
            counted: true,
        });
        for i in indices {
            drop[i] = true;
        }
    }
    let mut i = 0;
    out.retain(|_| {
        i += 1;
        !drop[i - 1]
    });
    out.extend(folded);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::saved::{SavedCheck, SavedFigure, SavedLayer};

    fn side(layers: Vec<SavedLayer>, facts: Option<Facts>) -> Side {
        Side {
            name: "x".into(),
            kind: InputKind::Report,
            report: SavedReport {
                schema_version: 1,
                layers,
                ..SavedReport::default()
            },
            facts,
            facts_note: None,
        }
    }

    fn layer(id: &str, status: &str, checks: &[(&str, &str)]) -> SavedLayer {
        SavedLayer {
            id: id.into(),
            status: status.into(),
            reason: None,
            checks: checks
                .iter()
                .map(|(code, status)| SavedCheck {
                    code: (*code).into(),
                    status: (*status).into(),
                    summary: format!("{code} is {status}"),
                    ..SavedCheck::default()
                })
                .collect(),
        }
    }

    #[test]
    fn compares_verdicts_only_where_both_sides_ran() {
        let a = side(
            vec![
                layer(
                    "driver",
                    "pass",
                    &[("driver.a", "pass"), ("driver.b", "pass")],
                ),
                layer("rdma", "pass", &[("rdma.x", "pass")]),
            ],
            None,
        );
        let b = side(
            vec![
                layer(
                    "driver",
                    "fail",
                    &[("driver.a", "fail"), ("driver.b", "pass")],
                ),
                layer("rdma", "not_run", &[]),
            ],
            None,
        );
        let d = compare(&a, &b);
        assert_eq!(d.differences.len(), 1, "{:?}", d.differences);
        let v = &d.differences[0];
        assert_eq!(
            (v.subject.as_str(), v.a.as_str(), v.b.as_str()),
            ("driver.a", "pass", "fail")
        );
        assert_eq!(v.detail.as_deref(), Some("driver.a is fail"));
        assert_eq!(d.exit_code, 1);
        assert_eq!(d.b.not_evaluated, vec!["rdma"]);
        // A check only one version knows counts only when it found something.
        let newer = side(
            vec![layer(
                "driver",
                "pass",
                &[
                    ("driver.a", "pass"),
                    ("driver.b", "pass"),
                    ("driver.new", "pass"),
                ],
            )],
            None,
        );
        let older = side(
            vec![layer(
                "driver",
                "pass",
                &[("driver.a", "pass"), ("driver.b", "pass")],
            )],
            None,
        );
        let d = compare(&older, &newer);
        assert_eq!(d.differences.len(), 1);
        assert!(!d.differences[0].counted);
        assert_eq!(d.exit_code, 0);
    }

    #[test]
    fn identifiers_show_but_do_not_count_and_versions_compare_on_shared_words() {
        let mut fa = Facts {
            version: 1,
            ..Facts::default()
        };
        fa.put("driver", "nvml gpu 0000:18:00.0", "serial", "1650123");
        fa.put("driver", "nvml gpu 0000:18:00.0", "model", "H100");
        let mut fb = fa.clone();
        fb.put("driver", "nvml gpu 0000:18:00.0", "serial", "1650999");
        let d = compare(
            &side(vec![], Some(fa.clone())),
            &side(vec![], Some(fb.clone())),
        );
        assert_eq!(d.differences.len(), 1);
        assert_eq!(d.differences[0].kind, Kind::Informational);
        assert_eq!(d.exit_code, 0);
        // A newer vocabulary's extra attribute is not a difference; in one vocabulary it is.
        fb.put("driver", "nvml gpu 0000:18:00.0", "new word", "x");
        fb.put("driver", "nvml gpu 0000:18:00.0", "serial", "1650123");
        let mut newer = fb.clone();
        newer.version = 2;
        assert!(
            compare(&side(vec![], Some(fa.clone())), &side(vec![], Some(newer)))
                .differences
                .is_empty()
        );
        let d = compare(&side(vec![], Some(fa)), &side(vec![], Some(fb)));
        assert_eq!(d.differences[0].b, "x");
        assert_eq!(d.differences[0].a, ABSENT);
    }

    #[test]
    fn a_probe_that_did_not_answer_hides_its_subjects() {
        let mut fa = Facts {
            version: 1,
            ..Facts::default()
        };
        fa.put("driver", "nvml", "init", "ok");
        fa.put("driver", "nvml gpu 0000:18:00.0", "model", "H100");
        let mut fb = Facts {
            version: 1,
            ..Facts::default()
        };
        fb.put("driver", "nvml", "init", "driver_not_loaded: x");
        fb.unavailable.insert(
            crate::report::facts::NVML.into(),
            "driver_not_loaded: x".into(),
        );
        let d = compare(&side(vec![], Some(fa)), &side(vec![], Some(fb)));
        assert_eq!(d.differences.len(), 1);
        assert_eq!(d.differences[0].attribute.as_deref(), Some("init"));
    }

    #[test]
    fn rates_compare_with_a_tolerance_counts_exactly() {
        let fig = |name: &str, value: f64| SavedFigure {
            name: name.into(),
            value,
            labels: BTreeMap::from([("test".into(), "all_reduce".into())]),
            floor: None,
        };
        let with = |busbw: f64, xids: f64| {
            let mut l = layer("nccl", "pass", &[("nccl.bus_bandwidth", "pass")]);
            l.checks[0].figures = vec![
                fig("nccl_busbw_peak_bytes_per_second", busbw),
                fig("xid_events", xids),
            ];
            side(vec![l], None)
        };
        assert!(
            compare(&with(482e9, 1.0), &with(470e9, 1.0))
                .differences
                .is_empty()
        );
        let d = compare(&with(482e9, 1.0), &with(401e9, 2.0));
        assert_eq!(d.differences.len(), 2, "{:?}", d.differences);
        let bw = d
            .differences
            .iter()
            .find(|x| x.subject.starts_with("nccl_"))
            .unwrap();
        assert_eq!((bw.a.as_str(), bw.b.as_str()), ("482 GB/s", "401 GB/s"));
        assert_eq!(bw.detail.as_deref(), Some("-16.8%"));
        assert_eq!(
            show_value("rdma_port_rate_bytes_per_second", 5e10),
            "400 Gb/s"
        );
        // A rate of one error a day is not shown as 0.
        assert_eq!(
            show_value("error_rate_per_second", 1.0 / 86_400.0),
            "1.2e-5"
        );
        assert_eq!(show_value("error_rate_per_second", 0.0), "0");
        assert_eq!(show_value("error_rate_per_second", 2.5), "2.5");
    }

    fn fact_difference(
        section: &str,
        subject: &str,
        attribute: &str,
        a: &str,
        b: &str,
    ) -> Difference {
        Difference {
            section: section.into(),
            kind: Kind::Fact,
            subject: subject.into(),
            attribute: Some(attribute.into()),
            a: a.into(),
            b: b.into(),
            detail: None,
            counted: true,
        }
    }

    #[test]
    fn a_lost_gpu_is_one_line_and_other_gpus_stay_apart() {
        let mut out = vec![
            fact_difference(
                "driver",
                "nvml gpu 0000:ba:00.0",
                "ecc mode",
                "enabled",
                "error (gpu_is_lost)",
            ),
            fact_difference(
                "driver",
                "nvml gpu 0000:ba:00.0",
                "mig mode",
                "disabled",
                "error (gpu_is_lost)",
            ),
            fact_difference(
                "topology",
                "gpu 0000:ba:00.0",
                "pcie link width",
                "x16",
                "x16 (nvml: error (gpu_is_lost))",
            ),
            // Another GPU's one changed reading, and a change that is no error.
            fact_difference(
                "driver",
                "nvml gpu 0000:18:00.0",
                "ecc mode",
                "enabled",
                "error (no_permission)",
            ),
            fact_difference("driver", "nvml gpu 0000:ba:00.0", "model", "H100", "H200"),
        ];
        fold_errors_per_gpu(&mut out);
        assert_eq!(out.len(), 3, "{out:#?}");
        let folded = out.last().unwrap();
        assert_eq!(folded.subject, "nvml gpu 0000:ba:00.0");
        assert_eq!(folded.a, "answered");
        assert_eq!(
            folded.b,
            "error (gpu_is_lost) on 3 readings: ecc mode, mig mode, pcie link width"
        );
        assert!(out.iter().all(|d| !d.b.starts_with("x16")));
    }
}
