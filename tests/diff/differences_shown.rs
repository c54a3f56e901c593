//! What counts as a difference and how `diff` shows it: the text and Markdown example, JSON,
//! measurements beyond the tolerance, identifiers (not counted, listed with `--all`), `--keep-going`.

use super::*;

#[test]
fn the_done_when_example_prints_the_link_change_and_the_verdict_only() {
    let out = common::gpudoctor(&["diff", "fixtures/hgx-h100-healthy", "fixtures/h100-pcie-x8"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    common::assert_snapshot("diff-h100-pcie-x8.txt", &text);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert_eq!(
        lines,
        [
            "verdict driver.pcie_link: pass → fail — GPU 3 (0000:5d:00.0) PCIe link at x8, capable of x16",
            "gpu 0000:5d:00.0 pcie link width: x16 → x8",
        ]
    );
    let md = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        "fixtures/h100-pcie-x8",
        "--format",
        "markdown",
    ]);
    common::assert_snapshot(
        "diff-h100-pcie-x8.md",
        &String::from_utf8(md.stdout).unwrap(),
    );
}

#[test]
fn measurements_differ_beyond_the_tolerance() {
    let d = run(
        &fixture("h100-nccl-healthy"),
        &fixture("h100-nccl-low-bandwidth"),
    );
    let m: Vec<_> = d
        .differences
        .iter()
        .filter(|x| x.kind == Kind::Measurement)
        .collect();
    // The sweep's peak and its average (issue 15: both always figures); the size at the peak
    // (8 GiB on both) is the same.
    assert_eq!(m.len(), 2, "{:?}", d.differences);
    let peak = m
        .iter()
        .find(|x| x.subject.starts_with("nccl_busbw_peak_bytes_per_second"))
        .unwrap();
    assert_eq!(
        (peak.a.as_str(), peak.b.as_str(), peak.detail.as_deref()),
        ("482.6 GB/s", "401.5 GB/s", Some("-16.8%"))
    );
    assert!(
        m.iter()
            .any(|x| x.subject.starts_with("nccl_busbw_average_bytes_per_second")),
        "{m:?}"
    );
}

#[test]
fn keep_going_compares_the_layers_after_a_failure() {
    let options = DiffOptions {
        keep_going: true,
        ..DiffOptions::default()
    };
    let a = diff::open(&fixture("hgx-h100-healthy"), &options).unwrap();
    let b = diff::open(&fixture("h100-pcie-x8"), &options).unwrap();
    let d = diff::compare::compare(&a, &b);
    let verdicts: Vec<&str> = d
        .differences
        .iter()
        .filter(|x| x.kind == Kind::Verdict)
        .map(|x| x.subject.as_str())
        .collect();
    // The topology layer judges the same link from sysfs once it runs.
    assert_eq!(verdicts, ["driver.pcie_link", "topology.pcie_link"]);
    assert!(d.b.blocked_by.is_none());
}

#[test]
fn identifiers_do_not_count_and_all_lists_them() {
    let scratch = common::tempdir().unwrap();
    let other = scratch.path().join("other-node");
    common::copy_tree(&fixture("hgx-h100-healthy"), &other);
    // Another host, with control characters a capture could carry into a terminal.
    std::fs::write(
        other.join("proc/sys/kernel/hostname"),
        "gpu-node-7\x1b]0;pwned\x07\n",
    )
    .unwrap();
    std::fs::write(other.join("etc/hostname"), "gpu-node-7\n").unwrap();
    let other = other.to_str().unwrap();
    let out = common::gpudoctor(&["diff", "fixtures/hgx-h100-healthy", other]);
    assert_eq!(out.status.code(), Some(0), "a host name does not count");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
    assert!(text.contains("gpu-node-7\\x1b]0;pwned\\x07"), "{text}");
    assert!(text.contains("no difference that matters"), "{text}");
    let all = common::gpudoctor(&["diff", "fixtures/hgx-h100-healthy", other, "--all"]);
    let text = String::from_utf8(all.stdout).unwrap();
    assert!(
        text.contains("(not counted) node hostname: hgx-h100-01 → gpu-node-7\\x1b]0;pwned\\x07"),
        "{text}"
    );
    // The stale CDI spec's UUID is an identifier, listed with --all.
    let out = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        "fixtures/h100-cdi-spec-stale",
        "--all",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&Value> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "informational")
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0]["b"].as_str().unwrap().contains("GPU-27b04e8b"));
}

#[test]
fn json_is_the_same_diff() {
    let out = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        "fixtures/h100-ib-port-hdr",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["counted"], 2);
    assert_eq!(v["a"]["kind"], "capture");
    let d = &v["differences"];
    assert_eq!(d[0]["kind"], "verdict");
    assert_eq!(d[0]["subject"], "rdma.port_rate");
    assert_eq!(d[1]["subject"], "port mlx5_5/1");
    assert_eq!(d[1]["attribute"], "rate");
    assert_eq!(d[1]["b"], "200 Gb/sec (4X HDR)");
}
