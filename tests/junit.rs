//! `--format junit` against the schema CI systems read: the Jenkins xUnit plugin's
//! `junit-10.xsd` (tests/data/junit/junit-10.xsd, byte for byte from jenkinsci/xunit-plugin
//! `src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd`, commit
//! 8c515de2804b3fd591a3b0f1ff8908a1b1a41887), checked by the real `xmllint` (libxml2-utils,
//! which `.ci/run` installs; without it the test says so and passes, but fails under
//! `CI=true`). Every fixture's report (the JSON snapshots tests/fixtures.rs holds equal to the
//! engine's) is rendered and validated, so a new fixture is covered without editing this test.

mod common;

use std::path::PathBuf;

use gpudoctor::render::junit;
use gpudoctor::report::{Report, Status};

fn xmllint() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("xmllint"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !common::on_ci(),
            "xmllint is not on PATH: .ci/run installs Debian's libxml2-utils; install it"
        );
        eprintln!("xmllint is not on PATH: `apt-get install libxml2-utils` to run this test");
    }
    found
}

/// Every fixture's report, from its JSON snapshot.
fn reports() -> Vec<(String, Report)> {
    let mut out = Vec::new();
    for fixture in common::fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let path = common::repo().join(format!("tests/snapshots/{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let report: Report = serde_json::from_str(&text).unwrap();
        out.push((name, report));
    }
    out
}

fn count(xml: &str, what: &str) -> usize {
    xml.matches(what).count()
}

#[test]
fn every_fixtures_junit_validates_against_the_jenkins_schema() {
    let reports = reports();
    assert!(reports.len() >= 50, "{} fixtures", reports.len());
    let dir = common::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, report) in &reports {
        let xml = junit::render(report);
        // One testcase per check, plus one per layer that ran none; the counts say the same
        // as the report.
        let checks: Vec<_> = report.layers.iter().flat_map(|l| &l.checks).collect();
        let empty = report.layers.iter().filter(|l| l.checks.is_empty()).count();
        assert_eq!(count(&xml, "<testcase "), checks.len() + empty, "{name}");
        let fails = checks.iter().filter(|c| c.status == Status::Fail).count();
        let errors = checks.iter().filter(|c| c.status == Status::Error).count();
        assert_eq!(count(&xml, "<failure "), fails, "{name}");
        assert_eq!(count(&xml, "<error "), errors, "{name}");
        assert!(
            xml.contains(&format!(" failures=\"{fails}\" errors=\"{errors}\"")),
            "{name}: {xml}"
        );
        // A failure carries what to do: its hint and action.
        for c in checks.iter().filter(|c| c.status == Status::Fail) {
            if let Some(hint) = &c.hint {
                let start: String = hint.chars().take(20).collect();
                let start = start.replace('&', "&amp;").replace('<', "&lt;");
                let start = start
                    .replace('>', "&gt;")
                    .replace('"', "&quot;")
                    .replace('\'', "&apos;");
                assert!(
                    xml.contains(&format!("hint: {start}")),
                    "{name}: {}",
                    c.code
                );
            }
        }
        let path = dir.path().join(format!("{name}.xml"));
        std::fs::write(&path, xml).unwrap();
        files.push(path);
    }
    let Some(xmllint) = xmllint() else {
        return;
    };
    let schema = common::repo().join("tests/data/junit/junit-10.xsd");
    let out = std::process::Command::new(xmllint)
        .arg("--noout")
        .arg("--schema")
        .arg(&schema)
        .args(&files)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "xmllint --schema junit-10.xsd:\n{said}"
    );
    assert_eq!(said.matches(" validates").count(), files.len(), "{said}");
}

#[test]
fn the_check_command_writes_it_and_node_text_cannot_break_it() {
    let fixture = common::repo().join("fixtures/h100-vbios-mismatch");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        fixture.to_str().unwrap(),
        "--format",
        "junit",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let xml = String::from_utf8(out.stdout).unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites "));
    assert!(xml.contains(
        "<testcase name=\"driver.gpu_firmware\" classname=\"gpudoctor.driver\" time=\"0.000\">"
    ));
    assert!(xml.contains("<system-out>warn: GPU 5 (0000:ab:00.0) VBIOS 96.00.89.00.01"));

    // Under --strict (exit 1, no check failed) the warning fails the testcase, as it fails
    // the exit code.
    let strict = common::gpudoctor(&[
        "check",
        "--root",
        fixture.to_str().unwrap(),
        "--format",
        "junit",
        "--strict",
    ]);
    assert_eq!(strict.status.code(), Some(1));
    let strict = String::from_utf8(strict.stdout).unwrap();
    assert!(strict.contains("<failure type=\"fix_config\" message=\"GPU 5 (0000:ab:00.0) VBIOS"));
    assert!(strict.contains(" failures=\"1\" errors=\"0\""));

    // A report whose node text holds markup and control characters still validates.
    let (_, mut report) = reports()
        .into_iter()
        .find(|(n, _)| n == "h100-xid48-dbe")
        .unwrap();
    report.node.hostname = Some("n<1>&\"'\u{1b}[31m".into());
    for check in report.layers.iter_mut().flat_map(|l| l.checks.iter_mut()) {
        check.summary.push_str(" ]]> <x/> \u{0}\u{7}");
    }
    let xml = junit::render(&report);
    assert!(!xml.contains('\u{1b}') && !xml.contains('\u{0}'));
    let Some(xmllint) = xmllint() else {
        return;
    };
    let dir = common::tempdir().unwrap();
    let path = dir.path().join("hostile.xml");
    std::fs::write(&path, xml).unwrap();
    let out = std::process::Command::new(xmllint)
        .arg("--noout")
        .arg("--schema")
        .arg(common::repo().join("tests/data/junit/junit-10.xsd"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
