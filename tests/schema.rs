//! `docs/report.schema.json` is the schema generated from the report types, and every report a
//! fixture produces — default walk, `--keep-going`, `--strict`, and the stored JSON snapshots —
//! validates against it with a real JSON Schema (draft 2020-12) validator, formats included.

mod common;

use std::path::Path;

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::{render, report, source};
use serde_json::{Value, json};

const SCHEMA_DOC: &str = "docs/report.schema.json";

fn schema() -> Value {
    serde_json::from_str(&report::json_schema()).expect("the generated schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema())
        .expect("the generated schema is a valid draft 2020-12 schema")
}

fn errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn replay(dir: &Path, options: &RunOptions) -> Value {
    let source = source::open(dir, source::SourceOptions::default()).expect("a complete capture");
    let report = engine::run(source.as_ref(), options);
    serde_json::from_str(&render::json::render(&report)).unwrap()
}

#[test]
fn the_schema_document_is_the_generated_one() {
    let path = common::repo().join(SCHEMA_DOC);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, report::json_schema()).unwrap();
    }
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        doc == report::json_schema(),
        "{SCHEMA_DOC} is stale: run `cargo run -- schema > {SCHEMA_DOC}` (or `UPDATE_SNAPSHOTS=1 cargo test --test schema`) and review the diff"
    );
    // It is a schema by the meta-schema's own rules.
    let value: Value = serde_json::from_str(&doc).unwrap();
    assert!(
        jsonschema::meta::is_valid(&value),
        "{SCHEMA_DOC} is not a valid JSON Schema"
    );
    assert_eq!(
        value["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

#[test]
fn every_fixture_report_validates() {
    let validator = validator();
    let fixtures = common::fixtures();
    assert!(!fixtures.is_empty());
    common::parallel::for_each(&fixtures, |dir| {
        let name = common::name_of(dir);
        for (how, options) in [
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
        ] {
            let report = replay(dir, &options);
            let found = errors(&validator, &report);
            assert!(found.is_empty(), "{name} ({how}): {found:#?}");
        }
    });
}

#[test]
fn every_stored_json_snapshot_validates() {
    let validator = validator();
    let mut seen = 0;
    for entry in std::fs::read_dir(common::repo().join("tests/snapshots")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // Only report snapshots (other JSON documents live there too, e.g. `topo` output).
        if value.get("layers").is_none() {
            continue;
        }
        let found = errors(&validator, &value);
        assert!(found.is_empty(), "{}: {found:#?}", path.display());
        seen += 1;
    }
    assert!(seen > 0, "no report snapshots found");
}

#[test]
fn the_validator_rejects_what_the_contract_forbids() {
    // Proof the validation above has teeth: each of these breaks the contract somewhere.
    let validator = validator();
    let good = replay(
        &common::repo().join("fixtures/hgx-h100-healthy"),
        &RunOptions::default(),
    );
    assert!(errors(&validator, &good).is_empty());
    type Breakage = (&'static str, Box<dyn Fn(&mut Value)>);
    let breakages: Vec<Breakage> = vec![
        (
            "unknown status",
            Box::new(|r| r["layers"][0]["status"] = json!("ok")),
        ),
        (
            "unknown layer",
            Box::new(|r| r["layers"][0]["id"] = json!("gpu")),
        ),
        (
            "unknown action",
            Box::new(|r| r["layers"][0]["checks"][0]["action"] = json!("panic")),
        ),
        (
            "missing summary",
            Box::new(|r| {
                r["layers"][0]["checks"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("summary");
            }),
        ),
        (
            "negative duration",
            Box::new(|r| r["duration_ms"] = json!(-1)),
        ),
        (
            "timestamp not RFC 3339",
            Box::new(|r| r["generated_at"] = json!("yesterday")),
        ),
        (
            "unknown figure name",
            Box::new(|r| {
                r["layers"][0]["checks"][0]["figures"] = json!([{"name": "fan_rpm", "value": 1}])
            }),
        ),
    ];
    for (what, breakage) in breakages {
        let mut bad = good.clone();
        breakage(&mut bad);
        assert!(
            !errors(&validator, &bad).is_empty(),
            "the schema accepted a report with an {what}"
        );
    }
}
