//! The node's own name in every output (issue 26): `NODE_NAME` (the downward API's
//! `spec.nodeName`, which every manifest sets) when present, else the host's hostname as the host
//! sees it — never the Pod's, which is what `proc/sys/kernel/hostname` answers inside a Pod.

mod common;

use std::process::Command;

use serde_json::Value;

fn healthy() -> String {
    common::repo()
        .join("fixtures/hgx-h100-healthy")
        .display()
        .to_string()
}

fn run(args: &[&str], node_name: Option<&str>) -> std::process::Output {
    let mut cmd = common::scratch::gpudoctor_command();
    cmd.args(args).env_remove("NODE_NAME").env("NO_COLOR", "1");
    if let Some(name) = node_name {
        cmd.env("NODE_NAME", name);
    }
    cmd.output().expect("gpudoctor runs")
}

#[test]
fn node_name_names_the_node_in_json_markdown_and_prometheus() {
    let root = healthy();
    let out = run(
        &["check", "--root", &root, "--format", "json"],
        Some("gpu-node-17"),
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["node"]["hostname"], "gpu-node-17",
        "{}",
        report["node"]
    );

    let out = run(
        &["check", "--root", &root, "--format", "markdown"],
        Some("gpu-node-17"),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("## gpudoctor: gpu-node-17"), "{text}");
    assert!(!text.contains("hgx-h100-01"), "{text}");

    let out = run(
        &["check", "--root", &root, "--format", "prometheus"],
        Some("gpu-node-17"),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("node=\"gpu-node-17\""), "{text}");
    assert!(!text.contains("node=\"hgx-h100-01\""), "{text}");

    // Without it, the capture's own name.
    let out = run(&["check", "--root", &root, "--format", "json"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["node"]["hostname"], "hgx-h100-01");
    assert!(report["node"].get("pod").is_none(), "{}", report["node"]);
}

/// `record` keeps NODE_NAME (in `env.json`), so the capture replays under the node's name.
#[test]
fn a_recording_keeps_the_node_name() {
    let tmp = common::tempdir().unwrap();
    let capture = tmp.path().join("cap");
    // A live root (the fixture's tree): a capture given as --root keeps its own answers.
    let live = common::live_root(&common::repo().join("fixtures/hgx-h100-healthy"));
    let out = run(
        &[
            "record",
            "--root",
            live.to_str().unwrap(),
            "--no-redact",
            "--out",
            capture.to_str().unwrap(),
        ],
        Some("gpu-node-17"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(
        &[
            "check",
            "--root",
            capture.to_str().unwrap(),
            "--format",
            "json",
        ],
        None,
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["node"]["hostname"], "gpu-node-17");
}

/// In a UTS namespace of its own (what a Pod is) with a hostname of its own, gpudoctor still
/// names the host — through the UTS namespace of the host's pid 1 where it may join it (a
/// privileged Pod), else the host's `etc/hostname` — and keeps the Pod's name apart. `unshare -u`
/// needs CAP_SYS_ADMIN; where it is refused the test cannot run, which under CI=true is a
/// failure.
#[test]
fn in_a_uts_namespace_of_its_own_the_host_is_named_not_the_process() {
    let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let probe = Command::new("unshare")
        .args(["-u", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !probe {
        assert!(
            !common::on_ci(),
            "unshare -u is refused here: this test needs CAP_SYS_ADMIN"
        );
        eprintln!("skipped: unshare -u is refused here");
        return;
    }
    let script = format!(
        "hostname gpudoctor-7xk9p && exec {} check --root / --only driver --keep-going --format json",
        env!("CARGO_BIN_EXE_gpudoctor")
    );
    let out = Command::new("unshare")
        .args(["-u", "sh", "-c", &script])
        .env_remove("NODE_NAME")
        .env("KUBERNETES_SERVICE_HOST", "10.96.0.1")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        report["node"]["hostname"],
        host.as_str(),
        "{}",
        report["node"]
    );
    assert_eq!(
        report["node"]["pod"], "gpudoctor-7xk9p",
        "{}",
        report["node"]
    );
}
