//! `gpudoctor fleet`: a fleet of reports generated from the fixtures, plus synthetic variations
//! (one node with low NCCL bus bandwidth, a fleet-wide failing check, a port trained low, a
//! newer version's report, a duplicate, files that are not reports), names exactly the right
//! nodes and checks; of two reports of one host, the worse verdict is kept whatever either
//! file's times say. Speed is benches/fleet.py's job, not a test's.

mod common;

use std::path::Path;

use serde_json::{Value, json};

/// `check --keep-going --format json` of a fixture, as a DaemonSet would save it.
fn report(fixture: &str) -> Value {
    let root = format!("fixtures/{fixture}");
    let out = common::gpudoctor(&["check", "--root", &root, "--keep-going", "--format", "json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn layer_mut<'a>(r: &'a mut Value, id: &str) -> &'a mut Value {
    r["layers"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|l| l["id"] == id)
        .unwrap()
}

fn layer(r: &Value, id: &str) -> Value {
    r["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .unwrap()
        .clone()
}

/// Scale the peak-busbw figure of a report's NCCL layer.
fn scale_busbw(r: &mut Value, factor: f64) {
    for check in layer_mut(r, "nccl")["checks"].as_array_mut().unwrap() {
        if let Some(figures) = check.get_mut("figures").and_then(Value::as_array_mut) {
            for f in figures {
                if f["name"] == "nccl_busbw_peak_bytes_per_second" {
                    let v = f["value"].as_f64().unwrap();
                    f["value"] = json!(v * factor);
                }
            }
        }
    }
}

fn write(dir: &Path, name: &str, value: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// Twelve H100 nodes that each ran a healthy NCCL test, with bus bandwidth spread by under a
/// percent (as repeated runs are), and on top:
/// - node-01 … node-09: a containerd config without the NVIDIA runtime (a bad rollout): the
///   toolkit layer of the `h100-containerd-no-nvidia-runtime` fixture's report;
/// - node-07: the NCCL layer of `h100-nccl-low-bandwidth` (401 GB/s where the rest run 482);
/// - node-11: the RDMA layer of `h100-ib-port-hdr` (one port at 200 Gb/s among 400);
/// - node-12: a report of a later gpudoctor (an unknown field, an unknown figure);
/// - an older report of node-03, a file that is not JSON, JSON that is not a report.
fn build_fleet(dir: &Path) {
    let healthy = report("h100-nccl-healthy");
    let rollout = layer(&report("h100-containerd-no-nvidia-runtime"), "toolkit");
    let slow = layer(&report("h100-nccl-low-bandwidth"), "nccl");
    let hdr = layer(&report("h100-ib-port-hdr"), "rdma");
    for i in 1..=12 {
        let node = format!("node-{i:02}");
        let mut r = healthy.clone();
        r["node"]["hostname"] = json!(node);
        r["generated_at"] = json!("2026-03-01T10:00:00Z");
        // ±0.4 %: run-to-run spread.
        scale_busbw(&mut r, 1.0 + (i as f64 - 6.5) * 0.0007);
        if i <= 9 {
            *layer_mut(&mut r, "toolkit") = rollout.clone();
            r["exit_code"] = json!(1);
        }
        if i == 7 {
            *layer_mut(&mut r, "nccl") = slow.clone();
            r["exit_code"] = json!(1);
        }
        if i == 11 {
            *layer_mut(&mut r, "rdma") = hdr.clone();
            r["exit_code"] = json!(1);
        }
        if i == 12 {
            r["gpudoctor_version"] = json!("9.9.0");
            r["schema_version"] = json!(2);
            r["a_field_from_the_future"] = json!({"x": [1, 2]});
            let nccl = layer_mut(&mut r, "nccl");
            nccl["checks"][0]["figures"] =
                json!([{"name": "nvlink_bandwidth_bytes_per_second", "value": 4.5e11}]);
        }
        let sub = dir
            .join(if i % 2 == 0 { "rack-a" } else { "rack-b" })
            .join(&node);
        write(&sub, "last.json", &r);
        if i == 3 {
            let mut old = r.clone();
            old["generated_at"] = json!("2026-02-01T10:00:00Z");
            *layer_mut(&mut old, "driver") = json!({"id": "driver", "title": "", "status": "fail", "duration_ms": 0,
                "checks": [{"code": "driver.nvml_init", "title": "", "status": "fail", "summary": "old", "evidence": [], "action": "none"}]});
            write(&sub, "last-week.json", &old);
            // Both fail: the file modified last is kept (src/fleet/pick.rs).
            set_modified(&sub.join("last-week.json"), 7 * 24 * 3600);
        }
    }
    std::fs::write(
        dir.join("truncated.json"),
        b"{\"schema_version\": 1, \"layers\": [",
    )
    .unwrap();
    write(dir, "inventory.json", &json!({"nodes": 12}));
    std::fs::write(dir.join("README.txt"), "not json, not read").unwrap();
}

/// Set a file's modification time `ago` seconds into the past.
fn set_modified(file: &Path, ago: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(ago);
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

fn summary(dir: &Path) -> (Value, String, i32) {
    let out = common::gpudoctor(&["fleet", dir.to_str().unwrap(), "--format", "json"]);
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap(),
    )
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn names_the_fleet_wide_check_the_node_faults_and_the_outliers() {
    let scratch = common::tempdir().unwrap();
    build_fleet(scratch.path());
    let (s, stderr, code) = summary(scratch.path());
    assert_eq!(code, 1);
    assert_eq!(s["reports"], 12);

    // Fleet-wide: exactly the rollout's check, on exactly nodes 1-9.
    let checks = s["checks"].as_array().unwrap();
    let fleet: Vec<&Value> = checks
        .iter()
        .filter(|c| c["scope"] == "fleet_wide")
        .collect();
    assert_eq!(fleet.len(), 1, "{fleet:#?}");
    assert_eq!(fleet[0]["code"], "toolkit.container_runtime");
    assert_eq!(fleet[0]["status"], "fail");
    assert_eq!(fleet[0]["evaluated"], 12);
    let nine: Vec<String> = (1..=9).map(|i| format!("node-{i:02}")).collect();
    assert_eq!(strings(&fleet[0]["nodes"]), nine);

    // Node faults: the slow node's bandwidth verdict and the HDR port, nothing else.
    let node: Vec<(String, String, Vec<String>)> = checks
        .iter()
        .filter(|c| c["scope"] == "node")
        .map(|c| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                strings(&c["nodes"]),
            )
        })
        .collect();
    assert_eq!(
        node,
        [
            (
                "rdma.port_rate".into(),
                "fail".into(),
                vec!["node-11".to_string()]
            ),
            (
                "nccl.bus_bandwidth".into(),
                "fail".into(),
                vec!["node-07".to_string()]
            ),
        ]
    );

    // Outliers: node-07 on bus bandwidth, node-11 on mlx5_5's rate; the ±0.4 % spread and the
    // newer report's lone figure are not.
    let outliers: Vec<(String, String, String)> = s["outliers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["node"].as_str().unwrap().to_string(),
                o["figure"].as_str().unwrap().to_string(),
                o["direction"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        outliers,
        [
            // The sweep average, a figure since issue 15, falls with the peak.
            (
                "node-07".to_string(),
                "nccl_busbw_average_bytes_per_second{nodes=1,ranks=8,test=all_reduce}".to_string(),
                "low".to_string()
            ),
            (
                "node-07".to_string(),
                "nccl_busbw_peak_bytes_per_second{nodes=1,ranks=8,test=all_reduce}".to_string(),
                "low".to_string()
            ),
            (
                "node-11".to_string(),
                "rdma_port_rate_bytes_per_second{device=mlx5_5,link_layer=InfiniBand,port=1,rail=true}"
                    .to_string(),
                "low".to_string()
            ),
        ]
    );
    let busbw = &s["outliers"][1];
    assert_eq!(busbw["shown"], "401.5 GB/s");
    assert!(busbw["z"].as_f64().unwrap() < -3.5, "{busbw}");
    assert_eq!(busbw["group"], 12);

    // Skipped, each named on stderr: the older node-03, the two files that are not reports.
    let skipped: Vec<String> = s["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            Path::new(k["file"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut sorted = skipped.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["inventory.json", "last-week.json", "truncated.json"]
    );
    for name in &sorted {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("warning: skipped") && l.contains(name.as_str())),
            "{stderr}"
        );
    }
    // The table row of every node, and its layers.
    let rows = s["nodes"].as_array().unwrap();
    assert_eq!(rows.len(), 12);
    assert_eq!(rows[6]["node"], "node-07");
    assert_eq!(rows[6]["layers"]["nccl"], "fail");
    assert_eq!(
        rows[2]["layers"]["driver"], "pass",
        "node-03: the newer report kept"
    );
}

#[test]
fn the_table_and_markdown_name_the_same_things() {
    let scratch = common::tempdir().unwrap();
    build_fleet(scratch.path());
    let dir = scratch.path().to_str().unwrap();
    for format in ["table", "markdown"] {
        // The first screen: counts, the fleet-wide fault, the node fault with its node.
        let out = common::gpudoctor(&["fleet", dir, "--format", format]);
        assert_eq!(out.status.code(), Some(1));
        let first = String::from_utf8(out.stdout).unwrap();
        for needle in [
            "12 node(s) at ",
            "failing",
            "toolkit.container_runtime",
            "on 9 of 12 node(s)",
            "nccl.bus_bandwidth",
            "node-07 (",
        ] {
            let needle = if format == "markdown" && needle == "node-07 (" {
                "`node-07` ("
            } else {
                needle
            };
            assert!(
                first.contains(needle),
                "{format} first screen: {needle}\n{first}"
            );
        }
        assert!(
            !first.contains("| node"),
            "no node table without --all:\n{first}"
        );
        // --all: every node's layers and every check after it.
        let out = common::gpudoctor(&["fleet", dir, "--format", format, "--all"]);
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8(out.stdout).unwrap();
        let needles: &[&str] = if format == "table" {
            &[
                "toolkit.container_runtime fail on 9 of 12 node(s)",
                "nccl.bus_bandwidth fail on 1 of 12 node(s) that ran it: node-07",
                "node-07 nccl_busbw_peak_bytes_per_second",
                "401.5 GB/s low (median 482.",
                "node-11 rdma_port_rate_bytes_per_second",
                "200 Gb/s low (median 400 Gb/s of 12 node(s)",
            ]
        } else {
            &[
                "`toolkit.container_runtime` fail on 9 of 12 node(s)",
                "`nccl.bus_bandwidth` fail on 1 of 12 node(s) that ran it: `node-07`",
                "`node-07` `nccl_busbw_peak_bytes_per_second",
                "401.5 GB/s low (median 482.",
                "`node-11` `rdma_port_rate_bytes_per_second",
                "200 Gb/s low (median 400 Gb/s of 12 node(s)",
                "| `node-07` | `hgx-h100` | ok | **FAIL** |",
            ]
        };
        for needle in needles {
            assert!(text.contains(needle), "{format}: {needle}\n{text}");
        }
    }
}

#[test]
fn hundreds_of_reports_of_mixed_versions() {
    let scratch = common::tempdir().unwrap();
    let base = report("hgx-h100-healthy");
    for i in 0..300 {
        let mut r = base.clone();
        r["node"]["hostname"] = json!(format!("gpu-{i:03}"));
        match i % 3 {
            // An older report: no generated_at, no figures, no profile.
            0 => {
                r.as_object_mut().unwrap().remove("generated_at");
                r["profile"] = Value::Null;
                for l in r["layers"].as_array_mut().unwrap() {
                    for c in l["checks"].as_array_mut().unwrap() {
                        c.as_object_mut().unwrap().remove("figures");
                    }
                }
            }
            // A newer one: a layer and a status this version does not know.
            1 => r["layers"].as_array_mut().unwrap().push(json!({
                "id": "storage", "status": "degraded",
                "checks": [{"code": "storage.nvme", "status": "degraded", "summary": "x"}]})),
            _ => {}
        }
        write(scratch.path(), &format!("gpu-{i:03}.json"), &r);
    }
    let (s, _, code) = summary(scratch.path());
    assert_eq!(s["reports"], 300);
    assert_eq!(s["nodes"].as_array().unwrap().len(), 300);
    assert!(strings(&s["columns"]).contains(&"storage".to_string()));
    // The unknown status is listed (not understood, so not hidden) as a fleet-wide status on
    // the 100 nodes that report it.
    let storage: Vec<&Value> = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["code"] == "storage.nvme")
        .collect();
    assert_eq!(storage.len(), 1);
    assert_eq!(storage[0]["nodes"].as_array().unwrap().len(), 100);
    assert_eq!(storage[0]["scope"], "fleet_wide");
    assert!(
        s["outliers"].as_array().unwrap().is_empty(),
        "{}",
        s["outliers"]
    );
    assert_eq!(code, 0, "nothing fails, no outlier");
}

#[test]
fn no_readable_report_is_a_usage_error_and_a_fifo_is_skipped_not_waited_on() {
    let scratch = common::tempdir().unwrap();
    std::fs::write(scratch.path().join("a.json"), "[]").unwrap();
    let fifo = scratch.path().join("stuck.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let started = std::time::Instant::now();
    let out = common::gpudoctor(&["fleet", scratch.path().to_str().unwrap()]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stuck.json: not a regular file"), "{err}");
    assert!(err.contains("a.json: not a gpudoctor JSON report"), "{err}");
    assert!(err.contains("no readable report"), "{err}");
    let out = common::gpudoctor(&["fleet", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn of_two_reports_of_one_host_the_worse_is_kept_and_both_are_named() {
    // Issue 30: a report's own timestamp is data from whoever wrote the file. A passing report
    // stamped later (and written later) must not hide a failing one of the same host.
    let scratch = common::tempdir().unwrap();
    let mut failing = report("h100-ib-port-hdr");
    failing["node"]["hostname"] = json!("gpu-7");
    failing["generated_at"] = json!("2020-01-01T00:00:00Z");
    let mut passing = report("h100-nccl-healthy");
    passing["node"]["hostname"] = json!("gpu-7");
    passing["generated_at"] = json!("2030-01-01T00:00:00Z");
    assert_eq!(passing["exit_code"], 0);
    write(scratch.path(), "failing.json", &failing);
    write(scratch.path(), "passing.json", &passing);
    set_modified(&scratch.path().join("failing.json"), 3600);
    let (s, stderr, code) = summary(scratch.path());
    assert_eq!(code, 1, "the failure is not hidden");
    assert_eq!(s["reports"], 1);
    assert_eq!(s["nodes"][0]["node"], "gpu-7");
    assert!(
        s["nodes"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("failing.json"),
        "{s}"
    );
    assert_eq!(s["nodes"][0]["layers"]["rdma"], "fail");
    let skipped = &s["skipped"][0];
    assert!(skipped["file"].as_str().unwrap().ends_with("passing.json"));
    let why = skipped["why"].as_str().unwrap();
    assert!(
        why.starts_with("gpu-7 holds 2 reports; kept ")
            && why.contains("failing.json (fail (exit 1), modified ")
            && why.contains("over this one (pass (exit 0), modified ")
            && why.contains("because its verdict is worse"),
        "{why}"
    );
    // Said on stderr and in the table, both files named.
    for text in [
        stderr,
        String::from_utf8_lossy(
            &common::gpudoctor(&["fleet", scratch.path().to_str().unwrap(), "--all"]).stdout,
        )
        .into_owned(),
    ] {
        assert!(
            text.lines().any(|l| l.contains("passing.json")
                && l.contains("failing.json")
                && l.contains("holds 2 reports")),
            "{text}"
        );
    }

    // Equal verdicts: the file modified last wins, not the later stamp inside a file.
    let mut stale = failing.clone();
    stale["generated_at"] = json!("2030-01-01T00:00:00Z");
    write(scratch.path(), "passing.json", &stale);
    set_modified(&scratch.path().join("passing.json"), 7200);
    let (s, _, code) = summary(scratch.path());
    assert_eq!(code, 1);
    assert!(
        s["nodes"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("failing.json"),
        "{s}"
    );
    let why = s["skipped"][0]["why"].as_str().unwrap();
    assert!(why.contains("because same verdict, modified last"), "{why}");
}

/// Issue 46: eight H100 nodes whose NCCL all_reduce peak sits 2 % over the profile's expectation
/// (the floor each report's figure carries), and one 4 % below them, under it: within the 5 %
/// a rate may stray from the median, yet the one node that misses what the profile asks, so an
/// outlier that says the floor.
#[test]
fn a_node_four_percent_below_its_siblings_under_the_floor_is_an_outlier() {
    let scratch = common::tempdir().unwrap();
    let healthy = report("h100-nccl-healthy");
    let peak = |r: &Value| -> Value {
        layer(r, "nccl")["checks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["figures"].as_array().cloned().unwrap_or_default())
            .find(|f| {
                f["name"] == "nccl_busbw_peak_bytes_per_second"
                    && f["labels"]["test"] == "all_reduce"
            })
            .unwrap()
    };
    let floor = peak(&healthy)["floor"]
        .as_f64()
        .expect("the all_reduce peak carries the profile's expectation");
    for i in 0..9 {
        let mut r = healthy.clone();
        r["node"]["hostname"] = json!(format!("node-{i:02}"));
        let value = if i == 4 {
            floor * 0.98
        } else {
            floor * (1.02 + i as f64 * 0.0005)
        };
        let current = peak(&r)["value"].as_f64().unwrap();
        scale_busbw(&mut r, value / current);
        write(scratch.path(), &format!("node-{i:02}.json"), &r);
    }
    let dir = scratch.path().to_str().unwrap();
    let out = common::gpudoctor(&["fleet", dir]);
    let text = String::from_utf8(out.stdout).unwrap();
    // The outlier's line with the lines it wraps onto.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("node-04 "))
        .unwrap_or_else(|| panic!("node-04 is no outlier:\n{text}"));
    let line = std::iter::once(lines[at])
        .chain(
            lines[at + 1..]
                .iter()
                .copied()
                .take_while(|l| l.starts_with("      ")),
        )
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(line.contains("low"), "{line}");
    assert!(line.contains("under the profile's floor of"), "{line}");
    assert!(!text.contains("node-03 "), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    let out = common::gpudoctor(&["fleet", dir, "--format", "json"]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let outliers = summary["outliers"].as_array().unwrap();
    let all_reduce: Vec<&Value> = outliers
        .iter()
        .filter(|o| o["figure"].as_str().unwrap().contains("all_reduce"))
        .collect();
    assert_eq!(all_reduce.len(), 1, "{outliers:?}");
    assert_eq!(all_reduce[0]["node"], "node-04");
    assert_eq!(all_reduce[0]["floor"].as_f64(), Some(floor));
}

/// Ten distinct faults on a fleet of 300 (issue 46): each sick node, its cause and the cause's
/// action are on the first screen, within 40 lines of 80 columns, whatever the node names'
/// length; a cause on one node says what its report says on the node's own line.
#[test]
fn three_hundred_nodes_with_ten_faults_name_every_node_cause_and_action_in_forty_lines() {
    let scratch = common::tempdir().unwrap();
    let healthy = report("hgx-h100-healthy");
    let faults = [
        "h100-xid48-dbe",
        "h100-pcie-x8",
        "h100-sriov-vf-wrong-socket",
        "no-gpu-on-pci",
        "h100-nvlink-links-down",
        "h100-disk-full",
        "h100-edac-uncorrected",
        "h100-uvm-not-loaded",
        "h100-nouveau-loaded",
        "h100-nic-aer-fatal",
    ];
    let sick: Vec<Value> = faults.iter().map(|f| report(f)).collect();
    let causes: Vec<(String, String)> = sick
        .iter()
        .map(|r| {
            let first = &r["first_failure"];
            (
                first["code"].as_str().unwrap().to_string(),
                first["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = causes.iter().map(|(c, _)| c).collect();
    assert_eq!(distinct.len(), 10, "{causes:?}");
    // Fault k on 1, 2 or 3 nodes (19 in all), spread over the fleet; two stale healthy nodes.
    let mut failing: Vec<(String, usize)> = Vec::new();
    let mut next = 11;
    for (k, _) in faults.iter().enumerate() {
        for _ in 0..(k % 3 + 1) {
            failing.push((format!("gpu-rack{:02}-node-{next:03}", next / 16), k));
            next += 15;
        }
    }
    assert_eq!(failing.len(), 19);
    for i in 0..300 {
        let node = format!("gpu-rack{:02}-node-{i:03}", i / 16);
        let mut r = match failing.iter().find(|(n, _)| *n == node) {
            Some((_, k)) => sick[*k].clone(),
            None => healthy.clone(),
        };
        r["node"]["hostname"] = json!(node);
        if [50, 250].contains(&i) && !failing.iter().any(|(n, _)| *n == node) {
            r["generated_at"] = json!("2026-01-01T00:00:00Z");
        }
        write(scratch.path(), &format!("{node}.json"), &r);
    }
    let out = common::gpudoctor(&["fleet", scratch.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 40, "{} lines:\n{text}", lines.len());
    for line in &lines {
        assert!(
            line.chars().count() <= 80,
            "over 80 columns: {line}\n{text}"
        );
    }
    assert!(text.contains("300 node(s)"), "{text}");
    assert!(text.contains("281 healthy, 19 failing"), "{text}");
    for (k, (code, action)) in causes.iter().enumerate() {
        let header = lines
            .iter()
            .position(|l| l.contains(&format!(" {code} -> {action}:")))
            .unwrap_or_else(|| panic!("{code} -> {action} not on the screen:\n{text}"));
        let nodes: Vec<&String> = failing
            .iter()
            .filter(|(_, f)| *f == k)
            .map(|(n, _)| n)
            .collect();
        assert!(
            lines[header].ends_with(&format!("{} node(s)", nodes.len())),
            "{}\n{text}",
            lines[header]
        );
        // Every node of the cause is named under its header, before the next cause.
        let under: String = lines[header + 1..]
            .iter()
            .take_while(|l| l.starts_with("    "))
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        for node in &nodes {
            assert!(
                under.contains(node.as_str()),
                "{node} not under {code}:\n{text}"
            );
        }
        // One node: what its report says follows its name on the same line.
        if let [one] = nodes.as_slice() {
            let said = sick[k]["first_failure"]["summary"].as_str().unwrap();
            let start: String = said.chars().take(20).collect();
            assert!(
                under.starts_with(&format!("    {one} (")) && under.contains(&start),
                "{one}: {said}\n{text}"
            );
        }
    }
    for stale in ["gpu-rack03-node-050", "gpu-rack15-node-250"] {
        assert!(text.contains(stale), "{stale} not flagged:\n{text}");
    }
}

/// The 2 a.m. screen over 500 nodes (issue 27): 470 healthy, a dozen failing for four causes —
/// one of them a node without GPUs, whose report holds five consequences of that one cause —
/// three stale reports (eleven days old) and nothing else. The first screen fits 40 lines of 80
/// columns, names every failing node under its cause with the action, flags the stale nodes,
/// and counts the GPU-less node once, under its cause.
#[test]
fn five_hundred_nodes_fit_one_screen_that_names_every_sick_node() {
    let scratch = common::tempdir().unwrap();
    let healthy = report("hgx-h100-healthy");
    let sick_reports: Vec<Value> = [
        "h100-xid48-dbe",
        "h100-pcie-x8",
        "h100-sriov-vf-wrong-socket",
        "no-gpu-on-pci",
    ]
    .iter()
    .map(|f| report(f))
    .collect();
    // Each one's cause and action, as its report's first failure says.
    let sick: Vec<(String, String)> = sick_reports
        .iter()
        .map(|r| {
            let first = &r["first_failure"];
            (
                first["code"].as_str().unwrap().to_string(),
                first["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(sick[3].0, "driver.gpu_on_pci");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = |secs_ago: u64| {
        gpudoctor::time::rfc3339(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(now - secs_ago),
        )
    };
    // Every 41st node from the 8th is sick: thirteen nodes, the four causes in turn.
    let mut failing: Vec<(String, usize)> = Vec::new();
    for i in 0..500 {
        let node = format!("gpu-{i:03}");
        let mut r = if i % 41 == 7 {
            let which = failing.len() % sick.len();
            failing.push((node.clone(), which));
            sick_reports[which].clone()
        } else {
            healthy.clone()
        };
        r["node"]["hostname"] = json!(node);
        // Three stale reports, eleven days old; the rest from the last five minutes.
        let age = if [100, 200, 300].contains(&i) {
            11 * 86_400
        } else {
            60 + i % 240
        };
        r["generated_at"] = json!(at(age));
        write(scratch.path(), &format!("{node}.json"), &r);
    }
    assert_eq!(failing.len(), 13);
    let dir = scratch.path().to_str().unwrap();
    let out = common::gpudoctor(&["fleet", dir]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 40, "{} lines:\n{text}", lines.len());
    for line in &lines {
        assert!(
            line.chars().count() <= 80,
            "over 80 columns: {line}\n{text}"
        );
    }
    assert!(text.contains("500 node(s)"), "{text}");
    assert!(text.contains("487 healthy, 13 failing"), "{text}");
    assert!(text.contains("3 stale"), "{text}");
    for (node, which) in &failing {
        let (code, action) = &sick[*which];
        assert!(
            text.contains(&format!("{node} (")),
            "{node} not named:\n{text}"
        );
        // Its cause's line says the code and the action.
        let header = lines
            .iter()
            .position(|l| l.contains(code.as_str()))
            .unwrap_or_else(|| panic!("{code} not on the screen:\n{text}"));
        assert!(
            lines[header].contains(action.as_str()),
            "{code}: {action}\n{text}"
        );
    }
    for stale in ["gpu-100", "gpu-200", "gpu-300"] {
        assert!(
            text.contains(&format!("{stale} (11 days, stale)")),
            "{stale} not flagged:\n{text}"
        );
    }
    // The GPU-less nodes: one cause each, their consequences no fault of their own.
    let out = common::gpudoctor(&["fleet", dir, "--format", "json"]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu_less: Vec<&String> = failing
        .iter()
        .filter(|(_, w)| *w == 3)
        .map(|(n, _)| n)
        .collect();
    assert!(!gpu_less.is_empty());
    for node in gpu_less {
        let codes: Vec<&str> = summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == node.as_str())
            })
            .map(|c| c["code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, vec!["driver.gpu_on_pci"], "{node}: {codes:?}");
    }
}

/// `check --keep-going --strict --format json` of a fixture.
fn strict_report(fixture: &str) -> Value {
    let root = format!("fixtures/{fixture}");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        &root,
        "--keep-going",
        "--strict",
        "--format",
        "json",
    ]);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issue 41: `check --strict` made a node's warning its failure (exit 1, and its NPD condition
/// says problem). The fleet counted that node failing and still exited 0: the count and the
/// exit code now say the same — the node's own verdict (docs/triage.md).
#[test]
fn a_warning_under_strict_fails_the_fleet_as_it_failed_the_node() {
    let scratch = common::tempdir().unwrap();
    let mut warned = strict_report("h100-kubelet-managers-misaligned");
    assert_eq!(warned["exit_code"], 1);
    assert!(warned["first_failure"].is_null(), "{warned:#}");
    warned["node"]["hostname"] = json!("gpu-strict");
    write(scratch.path(), "gpu-strict.json", &warned);
    for i in 1..=3 {
        let mut r = report("hgx-h100-healthy");
        r["node"]["hostname"] = json!(format!("gpu-{i}"));
        write(scratch.path(), &format!("gpu-{i}.json"), &r);
    }
    let (s, _, code) = summary(scratch.path());
    assert_eq!(s["counts"]["failing"], 1, "{:#}", s["counts"]);
    assert_eq!(
        code, 1,
        "counted failing, so the fleet fails: {:#}",
        s["counts"]
    );
    assert_eq!(s["exit_code"], 1);
    // The same report without --strict warns: counted as a warning, the fleet exits 0.
    let mut lenient = report("h100-kubelet-managers-misaligned");
    lenient["node"]["hostname"] = json!("gpu-strict");
    write(scratch.path(), "gpu-strict.json", &lenient);
    let (s, _, code) = summary(scratch.path());
    assert_eq!((s["counts"]["failing"].clone(), code), (json!(0), 0));
    assert_eq!(s["counts"]["warning"], 1);
}

/// Issue 41: a report dated in the future (its node's clock set wrong, or the file edited) has
/// no age; beyond a small clock skew it is stale, saying why — in `fleet` and in `render
/// --max-age` — never current until the date comes (a 2099 report was current for 73 years).
#[test]
fn a_report_dated_in_the_future_is_stale_saying_why() {
    let scratch = common::tempdir().unwrap();
    let now = std::time::SystemTime::now();
    let at = |ahead: u64| gpudoctor::time::rfc3339(now + std::time::Duration::from_secs(ahead));
    for (node, generated_at) in [
        ("gpu-now", at(0)),
        ("gpu-skewed", at(120)),
        ("gpu-2099", "2099-01-01T00:00:00Z".to_string()),
    ] {
        let mut r = report("hgx-h100-healthy");
        r["node"]["hostname"] = json!(node);
        r["generated_at"] = json!(generated_at);
        write(scratch.path(), &format!("{node}.json"), &r);
    }
    let (s, _, _) = summary(scratch.path());
    let triage = |node: &str| {
        s["triage"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["node"] == node)
            .unwrap()
            .clone()
    };
    assert_eq!(triage("gpu-now")["stale"], false);
    // Two minutes ahead: clocks differ that much without NTP; made now.
    assert_eq!(triage("gpu-skewed")["stale"], false, "{s:#}");
    let future = triage("gpu-2099");
    assert_eq!(future["stale"], true, "{future:#}");
    assert!(
        future["ahead_seconds"].as_u64() > Some(365 * 86_400),
        "{future:#}"
    );
    assert!(future["age_seconds"].is_null(), "{future:#}");
    assert_eq!(s["counts"]["stale"], 1);
    let out = common::gpudoctor(&["fleet", scratch.path().to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("gpu-2099 (dated ") && text.contains(" in the future, stale: clock skew?)"),
        "{text}"
    );

    // `render --npd-condition --max-age`: unknown (exit 2), saying why, not the node's state.
    let file = scratch.path().join("gpu-2099.json");
    let out = common::gpudoctor(&[
        "render",
        file.to_str().unwrap(),
        "--npd-condition",
        "gpu-hardware",
        "--max-age",
        "900",
    ]);
    let line = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{line}");
    assert!(
        line.starts_with("gpudoctor: report dated ")
            && line.contains(" days in the future; clock skew? (--max-age 900)"),
        "{line}"
    );
    let now_file = scratch.path().join("gpu-skewed.json");
    let out = common::gpudoctor(&[
        "render",
        now_file.to_str().unwrap(),
        "--npd-condition",
        "gpu-hardware",
        "--max-age",
        "900",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", out);
}
