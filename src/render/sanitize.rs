//! The report with every string from the node escaped for a terminal, for the human formats:
//! each string field passes through [`text`] (`text::sanitize`, where what is escaped and why is
//! written down) once, where it enters the renderer.

use std::borrow::Cow;

use crate::report::Report;
use crate::text::sanitize::text;

fn in_place(value: &mut String) {
    if let Cow::Owned(clean) = text(value) {
        *value = clean;
    }
}

fn in_place_opt(value: &mut Option<String>) {
    if let Some(v) = value {
        in_place(v);
    }
}

/// The report with every string in it sanitised, for the human formats. Every string field is
/// listed here; `every_string_field_is_sanitised` below fails when a new one is not.
pub fn report(report: &Report) -> Cow<'_, Report> {
    let mut clean = report.clone();
    in_place(&mut clean.gpudoctor_version);
    in_place(&mut clean.source.root);
    in_place_opt(&mut clean.node.hostname);
    in_place_opt(&mut clean.node.pod);
    in_place_opt(&mut clean.node.kernel);
    in_place_opt(&mut clean.node.driver_version);
    for gpu in &mut clean.node.gpus {
        in_place(&mut gpu.pci_bus_id);
        in_place_opt(&mut gpu.serial);
        in_place_opt(&mut gpu.board_part_number);
    }
    in_place_opt(&mut clean.profile);
    in_place_opt(&mut clean.generated_at);
    in_place_opt(&mut clean.source.captured_at);
    for layer in &mut clean.layers {
        in_place(&mut layer.title);
        in_place_opt(&mut layer.reason);
        for check in &mut layer.checks {
            in_place(&mut check.code);
            in_place(&mut check.title);
            in_place(&mut check.summary);
            in_place_opt(&mut check.hint);
            in_place_opt(&mut check.explained_by);
            for gpu in &mut check.gpus {
                in_place(gpu);
            }
            for e in &mut check.evidence {
                in_place(&mut e.source);
                in_place(&mut e.observed);
                in_place_opt(&mut e.expected);
            }
            for figure in &mut check.figures {
                in_place_opt(&mut figure.first_seen);
                in_place_opt(&mut figure.last_seen);
                let labels = std::mem::take(&mut figure.labels);
                figure.labels = labels
                    .into_iter()
                    .map(|(k, v)| (text(&k).into_owned(), text(&v).into_owned()))
                    .collect();
            }
        }
    }
    if let Some(first) = &mut clean.first_failure {
        in_place(&mut first.code);
        in_place(&mut first.summary);
        in_place_opt(&mut first.hint);
    }
    if let Some(facts) = &mut clean.facts {
        // Not printed by the human formats today; cleaned all the same, so the contract holds
        // for whichever renderer shows them.
        let sections = std::mem::take(&mut facts.sections);
        facts.sections = sections
            .into_iter()
            .map(|(section, subjects)| {
                let subjects = subjects
                    .into_iter()
                    .map(|(subject, attributes)| {
                        let attributes = attributes
                            .into_iter()
                            .map(|(k, v)| (text(&k).into_owned(), text(&v).into_owned()))
                            .collect();
                        (text(&subject).into_owned(), attributes)
                    })
                    .collect();
                (text(&section).into_owned(), subjects)
            })
            .collect();
        let unavailable = std::mem::take(&mut facts.unavailable);
        facts.unavailable = unavailable
            .into_iter()
            .map(|(k, v)| (text(&k).into_owned(), text(&v).into_owned()))
            .collect();
    }
    if &clean == report {
        Cow::Borrowed(report)
    } else {
        Cow::Owned(clean)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_string_field_is_sanitised() {
        use crate::report::*;
        let check = CheckResult {
            code: "driver.x".into(),
            title: "t".into(),
            status: Status::Fail,
            summary: "s".into(),
            evidence: vec![Evidence::new("src", "obs").expected("exp")],
            hint: Some("h".into()),
            action: Action::None,
            figures: vec![
                Figure::new(FigureName::ALL[0], 1.0)
                    .label("gpu", "0")
                    .seen(Some("f".into()), Some("l".into())),
            ],
            gpus: vec!["0000:3a:00.0".into()],
            explained_by: Some("e".into()),
            follows_from: None,
        };
        let report = Report {
            schema_version: SCHEMA_VERSION,
            gpudoctor_version: "v".into(),
            source: SourceInfo {
                kind: crate::report::SourceKind::Replay,
                root: "r".into(),
                captured_at: None,
            },
            node: NodeInfo {
                hostname: Some("h".into()),
                pod: Some("p".into()),
                kernel: Some("k".into()),
                driver_version: Some("d".into()),
                gpus: vec![GpuIdentity {
                    pci_bus_id: "b".into(),
                    serial: Some("s".into()),
                    board_part_number: Some("p".into()),
                    module_id: Some(1),
                }],
            },
            profile: Some("p".into()),
            generated_at: Some("g".into()),
            layers: vec![LayerReport {
                id: Layer::Driver,
                title: "t".into(),
                status: Status::Fail,
                reason: Some("r".into()),
                duration_ms: 0,
                checks: vec![check],
            }],
            first_failure: Some(FirstFailure {
                layer: Layer::Driver,
                code: "c".into(),
                summary: "s".into(),
                hint: Some("h".into()),
                action: None,
            }),
            exit_code: 1,
            duration_ms: 0,
            facts: Some({
                let mut f = crate::report::facts::Facts {
                    version: crate::report::facts::FACTS_VERSION,
                    ..Default::default()
                };
                f.put("driver", "gpu 0000:18:00.0", "vbios", "96.00.99.00.01");
                f.unavailable.insert("nvml ".into(), "why".into());
                f
            }),
        };
        // Every string that can hold a payload and still be a report, one at a time.
        let base = serde_json::to_value(&report).unwrap();
        let payload = "\x1b]0;owned\x07\u{9b}\u{202e}\r\u{200f}\u{2028}";
        let mut paths = Vec::new();
        collect_string_paths(&base, String::new(), &mut paths);
        let mut covered = 0;
        for path in &paths {
            let mut v = base.clone();
            if let Some(serde_json::Value::String(s)) = v.pointer_mut(path) {
                s.push_str(payload);
            }
            let Ok(poisoned) = serde_json::from_value::<Report>(v) else {
                continue; // an enum: cannot hold text
            };
            covered += 1;
            let clean = super::report(&poisoned);
            let out = serde_json::to_string(clean.as_ref()).unwrap();
            for c in [
                '\x1b', '\x07', '\u{9b}', '\u{202e}', '\r', '\u{200f}', '\u{2028}',
            ] {
                assert!(!out.contains(c), "{path}: {c:?} survives: {out}");
            }
        }
        assert!(covered >= 20, "only {covered} string fields found");
        // Figure label names are map keys, not string values: poison one directly.
        let mut keyed = report.clone();
        keyed.layers[0].checks[0].figures[0]
            .labels
            .insert(format!("gpu{payload}"), payload.into());
        let out = serde_json::to_string(super::report(&keyed).as_ref()).unwrap();
        assert!(!out.contains('\x1b') && !out.contains('\u{202e}'), "{out}");
    }

    fn collect_string_paths(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(_) => out.push(at),
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    collect_string_paths(item, format!("{at}/{i}"), out);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, item) in map {
                    collect_string_paths(
                        item,
                        format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                        out,
                    );
                }
            }
            _ => {}
        }
    }
}
