//! `gpudoctor fleet --prometheus` against a real Prometheus server (Debian's `prometheus`, as
//! `.ci/run` installs it) on loopback: each fixture's report, given a node name of its own, is
//! served as its Prometheus text (`gpudoctor render --format prometheus`, what the DaemonSet
//! writes for node-exporter) by a small HTTP server on loopback, one scrape target per node;
//! Prometheus scrapes them every second; and `fleet --prometheus` must name the same nodes,
//! verdicts, causes and actions as `fleet DIR` over the saved reports. A node whose target
//! stops answering is unreachable. Without `prometheus` on PATH the test says so and passes,
//! and fails under `CI=true`.

mod common;
common::tests_mostly_wait!();

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Fixtures whose reports make the fleet: healthy, failing for several causes, a consequence.
const FIXTURES: &[&str] = &[
    "hgx-h100-healthy",
    "h100-xid48-dbe",
    "h100-pcie-x8",
    "h100-gpu-missing-from-nvml",
    "h100-sriov-vf-wrong-socket",
    "h100-nccl-healthy",
];

/// Serves `text` to every HTTP request on a loopback port until `stop` is set.
fn serve(text: String, stop: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    conn.set_nonblocking(false).unwrap();
                    conn.set_read_timeout(Some(Duration::from_secs(2))).ok();
                    let mut buf = [0u8; 4096];
                    let _ = conn.read(&mut buf);
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    port
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fleet(args: &[&str]) -> Value {
    let out = common::gpudoctor(&[&["fleet"], args, &["--format", "json"]].concat());
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "fleet {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What both sources must agree on, per node: verdict, cause (layer, code, status, action) and
/// every layer's status.
fn comparable(summary: &Value) -> Vec<Value> {
    let layers = |node: &str| {
        summary["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == node)
            .map(|n| n["layers"].clone())
    };
    summary["triage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let cause = &t["cause"];
            json!({
                "node": t["node"],
                "verdict": t["verdict"],
                "cause": [cause["layer"], cause["code"], cause["status"], cause["action"]],
                "layers": layers(t["node"].as_str().unwrap()),
            })
        })
        .collect()
}

fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn fleet_from_prometheus_names_what_fleet_from_reports_names() {
    let Some(prometheus) = common::tool_on_path("prometheus") else {
        return;
    };
    let scratch = common::tempdir().unwrap();
    let reports = scratch.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let stops: Vec<Arc<AtomicBool>> = FIXTURES
        .iter()
        .map(|_| Arc::new(AtomicBool::new(false)))
        .collect();
    let mut targets = Vec::new();
    for (i, fixture) in FIXTURES.iter().enumerate() {
        let root = common::repo().join("fixtures").join(fixture);
        let out = common::gpudoctor(&[
            "check",
            "--root",
            root.to_str().unwrap(),
            "--keep-going",
            "--format",
            "json",
        ]);
        let mut report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["node"]["hostname"] = json!(format!("gpu-{i:02}"));
        let file = reports.join(format!("gpu-{i:02}.json"));
        std::fs::write(&file, serde_json::to_string(&report).unwrap()).unwrap();
        let text = common::gpudoctor(&["render", file.to_str().unwrap(), "--format", "prometheus"]);
        assert!(text.status.success(), "render {fixture}");
        targets.push(serve(
            String::from_utf8(text.stdout).unwrap(),
            stops[i].clone(),
        ));
    }
    // The last node will stop answering: unreachable, not in the saved reports compared.
    let gone = FIXTURES.len() - 1;
    let config = scratch.path().join("prometheus.yml");
    let list: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: node-exporter\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        ),
    )
    .unwrap();
    let port = free_port();
    let _server = Server(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                scratch.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    let count = |query: &str| -> usize {
        let server = gpudoctor::fleet::prometheus::http::Server::parse(&url).unwrap();
        gpudoctor::fleet::prometheus::count(&server, query, Duration::from_secs(2)).unwrap_or(0)
    };
    wait_for("every target scraped", Duration::from_secs(60), || {
        count("gpudoctor_info") == FIXTURES.len()
    });

    // Every node reachable: the same nodes, verdicts and causes as the saved reports.
    let from_reports = fleet(&[reports.to_str().unwrap()]);
    let from_prometheus = fleet(&["--prometheus", &url]);
    assert_eq!(
        comparable(&from_prometheus),
        comparable(&from_reports),
        "fleet --prometheus vs fleet DIR"
    );
    assert_eq!(from_prometheus["counts"], from_reports["counts"]);
    // The checks that do not pass, fleet-wide or node faults, with the nodes that ran them:
    // passes are counted by one query, not read node by node, and must count the same.
    assert_eq!(
        from_prometheus["checks"], from_reports["checks"],
        "fleet --prometheus vs fleet DIR: {:#}",
        from_prometheus["checks"]
    );
    assert!(
        from_reports["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["evaluated"].as_u64() > Some(1)),
        "{:#}",
        from_reports["checks"]
    );
    assert_eq!(from_prometheus["outliers"], from_reports["outliers"]);
    assert_eq!(
        from_prometheus["counts"]["failing"],
        json!(4),
        "{from_prometheus:#}"
    );
    // A consequence is counted once, under its cause: the lost GPU's other findings are not
    // node faults of their own.
    let lost = from_prometheus["triage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["node"] == "gpu-03")
        .unwrap();
    // Its cause is the XID 79 its GPU logged (fallen off the bus), the lost GPU folded under it.
    assert_eq!(lost["cause"]["code"], "driver.xid_events", "{lost:#}");
    assert_eq!(
        from_prometheus["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["code"] == "driver.gpu_count")
            .count(),
        0,
        "the lost GPU is a consequence, not a fault of its own: {:#}",
        from_prometheus["checks"]
    );

    // One node stops answering: its series go stale, and it is unreachable, not healthy.
    stops[gone].store(true, Ordering::Relaxed);
    wait_for(
        "the stopped target's series gone",
        Duration::from_secs(30),
        || count("gpudoctor_info") == FIXTURES.len() - 1,
    );
    std::fs::remove_file(reports.join(format!("gpu-{gone:02}.json"))).unwrap();
    let from_prometheus = fleet(&["--prometheus", &url]);
    let from_reports = fleet(&[reports.to_str().unwrap()]);
    assert_eq!(comparable(&from_prometheus), comparable(&from_reports));
    assert_eq!(
        from_prometheus["unreachable"][0]["name"],
        json!(format!("gpu-{gone:02}")),
        "{from_prometheus:#}"
    );
    assert_eq!(from_prometheus["counts"]["unreachable"], json!(1));
    let table = common::gpudoctor(&["fleet", "--prometheus", &url]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("1 unreachable"), "{text}");
    assert!(text.contains("gpu-01"), "{text}");
}

#[test]
fn a_prometheus_that_is_not_there_or_not_prometheus_is_named() {
    let port = free_port();
    let out = common::gpudoctor(&["fleet", "--prometheus", &format!("http://127.0.0.1:{port}")]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("cannot connect"),
        "{err}"
    );

    // Something that answers, but not Prometheus' API.
    let stop = Arc::new(AtomicBool::new(false));
    let port = serve("<html>hello</html>".into(), stop.clone());
    let out = common::gpudoctor(&["fleet", "--prometheus", &format!("http://127.0.0.1:{port}")]);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a Prometheus API answer"), "{err}");

    for (args, says) in [
        (
            vec!["fleet", "--prometheus", "https://p:9090"],
            "https is not supported",
        ),
        (vec!["fleet"], "required"),
        (
            vec!["fleet", "x", "--prometheus", "http://p"],
            "cannot be used with",
        ),
        (vec!["fleet", "x", "--stale", "5 weeks"], "unit"),
    ] {
        let out = common::gpudoctor(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(2 | 3)), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Issue 41: the URL's path went into the request line as written, so a CR/LF in it (raw, or
/// `%0d%0a`) reached the server as a header and a second request. A URL with a control
/// character is a usage error, said before any connection.
#[test]
fn a_url_with_a_control_character_is_refused_before_any_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    for url in [
        "http://127.0.0.1:1/a%0d%0aX".to_string(),
        format!("http://127.0.0.1:{port}/a%0d%0aX-Injected:%201"),
        format!("http://127.0.0.1:{port}/a\r\nX-Injected: 1\r\n\r\nGET /b"),
        format!("http://127.0.0.1:{port}/a\nb"),
        format!("http://127.0.0.1:{port}/\u{85}"),
        format!("http://127.0.0.1:{port}/a b"),
    ] {
        let out = common::gpudoctor(&["fleet", "--prometheus", &url]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url:?}: {err}");
        assert!(
            err.contains("cannot stand in a URL") || err.contains("encoded control character"),
            "{url:?}: {err}"
        );
        assert!(!err.contains(['\r', '\u{85}']), "{err:?}");
        assert_eq!(err.lines().count(), 1, "{err:?}");
        assert!(out.stdout.is_empty());
    }
    assert!(
        listener.accept().is_err(),
        "a refused URL's server was connected to"
    );
}

/// A Prometheus API answer holding `series`: (labels, value as Prometheus writes it).
fn api_answer(series: &[(Value, &str)]) -> String {
    let result: Vec<Value> = series
        .iter()
        .map(|(metric, value)| json!({"metric": metric, "value": [1_772_359_200.0, value]}))
        .collect();
    json!({"status": "success", "data": {"resultType": "vector", "result": result}}).to_string()
}

/// Issue 41: a gauge's value can be anything Prometheus holds — `NaN`, `+Inf`, `1e308`, a
/// string of hundreds of digits — and was printed with Rust's `{}`/`{:.1}`, 309 digits for
/// `1e308`. Every output shows it bounded.
#[test]
fn absurd_sample_values_are_shown_bounded() {
    let mut series = Vec::new();
    let huge = format!("1{}", "0".repeat(300));
    for (i, busbw) in ["4.8e11", "4.81e11", "1e308"].iter().enumerate() {
        let target = |mut labels: Value| {
            labels["job"] = json!("node-exporter");
            labels["instance"] = json!(format!("10.0.0.{i}:9100"));
            labels
        };
        series.push((
            target(json!({"__name__": "gpudoctor_info", "node": format!("gpu-{i}"),
                "version": "0.1.0", "schema_version": "3", "profile": "hgx-h100", "source": "live"})),
            "1",
        ));
        series.push((target(json!({"__name__": "gpudoctor_exit_code"})), "0"));
        series.push((
            target(
                json!({"__name__": "gpudoctor_nccl_busbw_peak_bytes_per_second",
                "test": "all_reduce", "nodes": "1", "ranks": "8"}),
            ),
            busbw,
        ));
        if i == 2 {
            for (layer, value) in [
                ("driver", "1e308"),
                ("rdma", "NaN"),
                ("nvlink", huge.as_str()),
            ] {
                series.push((
                    target(json!({"__name__": "gpudoctor_layer_status", "layer": layer})),
                    value,
                ));
            }
            series.push((
                target(
                    json!({"__name__": "gpudoctor_check_status", "layer": "driver",
                    "check": "driver.xid_events"}),
                ),
                "+Inf",
            ));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let port = serve(api_answer(&series), stop.clone());
    let url = format!("http://127.0.0.1:{port}");
    for format in ["table", "markdown", "json"] {
        let out = common::gpudoctor(&["fleet", "--prometheus", &url, "--all", "--format", format]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let longest = text
            .split(|c: char| !c.is_ascii_digit())
            .map(str::len)
            .max()
            .unwrap_or(0);
        assert!(longest <= 20, "{format}: a {longest}-digit number:\n{text}");
        assert!(text.contains("gpu-2"), "{format}:\n{text}");
        if format == "table" {
            assert!(text.contains("unknown (1e308)"), "{text}");
            assert!(text.contains("1e299 GB/s"), "{text}");
        }
    }
    stop.store(true, Ordering::Relaxed);
}
