//! Replays every fixture under `fixtures/` and checks its manifest's `expect` block, plus a
//! snapshot of every output format — JSON, table, Markdown, Prometheus and the NPD message line
//! (durations zeroed, the timestamp fixed).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::render::table::Style;
use gpudoctor::report::{Layer, Report, Status};
use gpudoctor::{render, source};
use serde_json::Value;

/// The run time every snapshot shows (2026-01-01, a fixed point so snapshots stay put).
const SNAPSHOT_TIME: &str = "2026-01-01T00:00:00Z";

fn replay(dir: &Path, options: &RunOptions) -> Report {
    let rel = dir.strip_prefix(common::repo()).unwrap();
    // Relative root, so snapshots do not depend on where the repo is checked out.
    std::env::set_current_dir(common::repo()).unwrap();
    let source = source::open(rel, source::SourceOptions::default()).expect("a complete capture");
    assert_eq!(
        source.kind(),
        gpudoctor::report::SourceKind::Replay,
        "{} must replay",
        rel.display()
    );
    let mut report = engine::run(source.as_ref(), options);
    report.generated_at = Some(SNAPSHOT_TIME.to_string());
    report.duration_ms = 0;
    for layer in &mut report.layers {
        layer.duration_ms = 0;
    }
    report
}

fn expect_block(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join(".gpudoctor/manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    for key in ["format_version", "node", "description", "made", "expect"] {
        assert!(
            manifest.get(key).is_some(),
            "{}: manifest lacks `{key}`",
            dir.display()
        );
    }
    manifest["expect"].clone()
}

#[test]
fn there_are_fixtures_and_one_is_healthy() {
    let fixtures = common::fixtures();
    assert!(
        fixtures.len() >= 6,
        "expected the healthy node and five failure fixtures"
    );
    assert!(fixtures.iter().any(|d| expect_block(d)["exit_code"] == 0));
}

#[test]
fn every_fixture_meets_its_expect_block() {
    common::parallel::for_each(&common::fixtures(), |dir| {
        let name = common::name_of(dir);
        let expect = expect_block(dir);
        let report = replay(dir, &RunOptions::default());

        assert_eq!(
            Value::from(report.exit_code),
            expect["exit_code"],
            "{name}: exit code"
        );
        let first = report
            .first_failure
            .as_ref()
            .map(|f| f.layer.id().to_string());
        assert_eq!(
            first.map(Value::from).unwrap_or(Value::Null),
            expect["first_failing_layer"],
            "{name}: first failing layer"
        );
        // Cause first: where the manifest names the cause, first_failure is it, never one of
        // its consequences, and every consequence points at a finding that is not one.
        if let Some(cause) = expect.get("first_failure_code") {
            assert_eq!(
                report
                    .first_failure
                    .as_ref()
                    .map(|f| Value::from(f.code.clone())),
                Some(cause.clone()),
                "{name}: first failure's cause"
            );
        }
        for (_, check) in report.findings() {
            if let Some(cause) = &check.explained_by {
                let root = common::node::check(&report, cause);
                assert!(
                    root.status.is_finding(),
                    "{name}: {cause} explains but passed"
                );
                assert!(root.explained_by.is_none(), "{name}: {cause} is not a root");
            }
        }
        let codes: BTreeSet<String> = report.findings().map(|(_, c)| c.code.clone()).collect();
        let wanted: BTreeSet<String> = expect["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        assert_eq!(codes, wanted, "{name}: finding codes");

        // Layers run in order; after a failure every later layer is not_run, naming the blocker.
        let ids: Vec<Layer> = report.layers.iter().map(|l| l.id).collect();
        assert_eq!(ids, Layer::ALL.to_vec(), "{name}: layer order");
        if let Some(failure) = &report.first_failure {
            for layer in report.layers.iter().filter(|l| l.id > failure.layer) {
                assert_eq!(
                    layer.status,
                    Status::NotRun,
                    "{name}: {} after the failure",
                    layer.id
                );
                assert_eq!(
                    layer.reason.as_deref(),
                    Some(format!("blocked by {}", failure.layer).as_str())
                );
            }
            // --keep-going runs them.
            let all = replay(
                dir,
                &RunOptions {
                    keep_going: true,
                    ..Default::default()
                },
            );
            assert!(
                all.layers.iter().all(|l| l.status != Status::NotRun),
                "{name}: keep-going"
            );
        }

        common::assert_snapshot(&format!("{name}.json"), &render::json::render(&report));
        common::assert_snapshot(
            &format!("{name}.txt"),
            &render::table::render(&report, Style::PLAIN),
        );
        common::assert_snapshot(&format!("{name}.md"), &render::markdown::render(&report));
        common::assert_snapshot(
            &format!("{name}.prom"),
            &render::prometheus::render(&report),
        );
        common::assert_snapshot(
            &format!("{name}.npd"),
            &format!(
                "exit {}\n{}\n",
                render::npd::exit_code(report.exit_code),
                render::npd::message(&report)
            ),
        );
    });
}

#[test]
fn layers_not_built_yet_say_so_and_never_pass() {
    let healthy = common::repo().join("fixtures/hgx-h100-healthy");
    let report = replay(&healthy, &RunOptions::default());
    assert!(report.first_failure.is_none());
    for layer in &report.layers {
        if layer.checks.is_empty() {
            assert_eq!(layer.status, Status::Skip, "{}", layer.id);
            assert_eq!(
                layer.reason.as_deref(),
                Some("not implemented yet"),
                "{}",
                layer.id
            );
        }
    }
    let driver = report.layer(Layer::Driver).unwrap();
    assert_eq!(driver.status, Status::Pass);
    let findings: Vec<_> = driver
        .checks
        .iter()
        .filter(|c| c.status.is_finding())
        .collect();
    assert!(
        findings.is_empty(),
        "healthy fixtures have no findings: {findings:?}"
    );
    assert!(
        driver
            .checks
            .iter()
            .filter(|c| c.status == Status::Pass)
            .count()
            >= 10
    );
}

/// A consequence names its cause instead of a fix of its own (issue 46, "Why" 3): a lost GPU's
/// CDI names and allocatable id, the UVM node of a module never loaded, the RDMA device of a
/// NIC whose probe failed; and an unbound VF is one finding, not two.
#[test]
fn consequences_name_their_cause() {
    let keep_going = |name: &str| {
        replay(
            &common::repo().join("fixtures").join(name),
            &RunOptions {
                keep_going: true,
                ..Default::default()
            },
        )
    };
    let by = |report: &gpudoctor::report::Report, code: &str| {
        common::node::check(report, code).explained_by.clone()
    };
    let lost = keep_going("h100-gpu-missing-from-nvml");
    for code in ["toolkit.cdi_specs", "device_plugin.allocatable"] {
        let check = common::node::check(&lost, code);
        assert!(check.status.is_finding(), "{code}: {}", check.summary);
        assert_eq!(
            by(&lost, code).as_deref(),
            Some("driver.xid_events"),
            "{code}"
        );
        assert_eq!(check.gpus, ["0000:ba:00.0"], "{code}");
        let hint = check.hint.as_deref().unwrap_or_default();
        assert!(!hint.starts_with("regenerate"), "{code}: {hint}");
        assert!(hint.contains("0000:ba:00.0"), "{code}: {hint}");
    }
    let uvm = keep_going("h100-uvm-not-loaded");
    assert_eq!(
        by(&uvm, "driver.device_nodes").as_deref(),
        Some("driver.nvidia_uvm_module")
    );
    let nic = keep_going("h100-nic-probe-failed");
    let devices = common::node::check(&nic, "rdma.devices");
    assert_eq!(devices.explained_by.as_deref(), Some("rdma.nic_events"));
    assert!(
        devices
            .hint
            .as_deref()
            .unwrap_or_default()
            .starts_with("not a missing mlx5_ib"),
        "{:?}",
        devices.hint
    );
    assert_eq!(nic.first_failure.as_ref().unwrap().code, "rdma.nic_events");
    let vf = keep_going("h100-sriov-vf-unbound");
    let findings: Vec<&str> = vf.findings().map(|(_, c)| c.code.as_str()).collect();
    assert_eq!(findings, ["sriov.vf_binding"]);
}

/// One GPU fault is one cause with one action: the XID the driver logged explains what NVML
/// shows of the same fault on the same GPU (issue 27).
#[test]
fn a_gpu_fault_is_one_cause_with_one_action() {
    let fixture = |name: &str| {
        replay(
            &common::repo().join("fixtures").join(name),
            &RunOptions {
                keep_going: true,
                ..Default::default()
            },
        )
    };
    // A double-bit ECC error: XID 48, the uncorrected ECC count and the pending row remap.
    let dbe = fixture("h100-xid48-dbe");
    let causes: Vec<&str> = dbe
        .findings()
        .filter(|(_, c)| c.explained_by.is_none())
        .map(|(_, c)| c.code.as_str())
        .collect();
    assert_eq!(causes, ["driver.xid_events"]);
    for code in ["driver.ecc_errors", "driver.row_remap"] {
        let check = common::node::check(&dbe, code);
        assert_eq!(
            check.explained_by.as_deref(),
            Some("driver.xid_events"),
            "{code}"
        );
        assert_eq!(check.gpus, ["0000:3a:00.0"], "{code}");
    }
    let first = dbe.first_failure.as_ref().unwrap();
    assert_eq!(first.code, "driver.xid_events");
    assert_eq!(
        first.action,
        Some(common::node::check(&dbe, "driver.xid_events").action)
    );
    // A GPU that fell off the bus again after a reset: routed by its XID finding (hardware
    // inspection), the lost GPU folded under it.
    let recurring = fixture("h100-xid79-after-reset");
    let first = recurring.first_failure.as_ref().unwrap();
    assert_eq!(first.code, "driver.xid_events");
    assert_eq!(
        first.action,
        Some(gpudoctor::report::Action::HardwareInspection)
    );
    assert_eq!(
        common::node::check(&recurring, "driver.gpu_count")
            .explained_by
            .as_deref(),
        Some("driver.xid_events")
    );
}
