//! `--perftest-log`: saved `ib_*_bw` outputs judged on the healthy HGX H100 node (eight 400 Gb/s
//! NDR ports, mlx5_0..mlx5_7). The outputs are the real ones in tests/data/perftest (README
//! there names their sources) and variations made from them: a finished NDR run passes, an
//! error line or a row cut mid-run fails, a slow run fails against its port, a server's output
//! and a device this node lacks warn, an unreadable file fails naming it.

mod common;

use serde_json::Value;

fn data(name: &str) -> String {
    common::repo()
        .join("tests/data/perftest")
        .join(name)
        .display()
        .to_string()
}

/// `check --only rdma --perftest-log FILE...` on the healthy node: the check's JSON and the exit.
fn judge(files: &[&str]) -> (Value, i32) {
    let root = common::repo().join("fixtures/hgx-h100-healthy");
    let mut args = vec![
        "check",
        "--root",
        root.to_str().unwrap(),
        "--only",
        "rdma",
        "--format",
        "json",
    ];
    for f in files {
        args.push("--perftest-log");
        args.push(f);
    }
    let out = common::gpudoctor(&args);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let check = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().iter())
        .find(|c| c["code"] == "rdma.perftest_log")
        .cloned()
        .expect("rdma.perftest_log in the report");
    (check, out.status.code().unwrap_or(-1))
}

fn status_summary(c: &Value) -> (String, String) {
    (
        c["status"].as_str().unwrap().to_string(),
        c["summary"].as_str().unwrap().to_string(),
    )
}

#[test]
fn finished_ndr_runs_pass_against_their_400_gbit_port() {
    for (file, figure) in [
        (
            "ndr-cx7-write-gbits-cpu-freq-warning.txt",
            "392.3 Gb/s (98 % of 400 Gb/s)",
        ),
        (
            "ndr-cx7-send-mib-cpu-freq-warning.txt",
            "390.5 Gb/s (98 % of 400 Gb/s)",
        ),
    ] {
        let (c, code) = judge(&[&data(file)]);
        let (status, summary) = status_summary(&c);
        assert_eq!(status, "pass", "{file}: {summary}");
        assert!(summary.contains("on mlx5_0 port 1"), "{summary}");
        assert!(summary.contains(figure), "{summary}");
        assert_eq!(code, 0);
    }
}

#[test]
fn failures_name_the_line_that_says_so() {
    // No peer memory: perftest cannot register the GPU buffer (perftest#31, #346).
    for file in [
        "perftest-31-cuda-mr-fail.txt",
        "perftest-346-cuda-mr-error-14.txt",
    ] {
        let (c, code) = judge(&[&data(file)]);
        let (status, summary) = status_summary(&c);
        assert_eq!(status, "fail", "{file}: {summary}");
        assert!(
            summary.contains("failed: Couldn't allocate MR"),
            "{summary}"
        );
        assert_eq!(code, 1);
    }
    // Killed inside its row (perftest#234).
    let (c, _) = judge(&[&data("perftest-234-mb-cut-after-iterations.txt")]);
    let (status, summary) = status_summary(&c);
    assert_eq!(status, "fail");
    assert!(summary.contains("stopped inside a result row"), "{summary}");
    // A server cut in its parameter block: nothing measured.
    let (c, _) = judge(&[&data("perftest-241-cuda-server-cut.txt")]);
    let (status, summary) = status_summary(&c);
    assert_eq!(status, "fail");
    assert!(summary.contains("no result table"), "{summary}");
}

#[test]
fn a_slow_run_fails_against_its_port_and_a_foreign_device_is_not_judged() {
    let scratch = common::tempdir().unwrap();
    // The real NDR output at half its rate: the same lines, the row's figures halved.
    let slow = scratch.path().join("slow.txt");
    let text = std::fs::read_to_string(data("ndr-cx7-write-gbits-cpu-freq-warning.txt")).unwrap();
    std::fs::write(
        &slow,
        text.replace("392.38             392.34", "196.19             196.17"),
    )
    .unwrap();
    let (c, code) = judge(&[slow.to_str().unwrap()]);
    let (status, summary) = status_summary(&c);
    assert_eq!(status, "fail", "{summary}");
    assert!(
        summary.contains("reached 196.2 Gb/s, 49 % of its 400 Gb/s port"),
        "{summary}"
    );
    assert_eq!(code, 1);
    // perftest#273 ran on a device named ib0, which this node does not have.
    let (c, _) = judge(&[&data("perftest-273-gbits-post-list.txt")]);
    let (status, summary) = status_summary(&c);
    assert_eq!(status, "warn", "{summary}");
    assert!(
        summary.contains("ib0 has no port rate on this node"),
        "{summary}"
    );
}

#[test]
fn a_server_output_warns_and_the_worst_of_several_is_the_verdict() {
    let scratch = common::tempdir().unwrap();
    // The client's output with the server's banner and no row: what ib_write_bw's server prints.
    let text = std::fs::read_to_string(data("ndr-cx7-write-gbits-cpu-freq-warning.txt")).unwrap();
    let server: String = "************************************\n* Waiting for client to connect... *\n************************************\n".to_string()
        + &text
            .lines()
            .filter(|l| !l.trim_start().starts_with("65536"))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
    let path = scratch.path().join("server.txt");
    std::fs::write(&path, server).unwrap();
    let (c, _) = judge(&[path.to_str().unwrap()]);
    let (status, summary) = status_summary(&c);
    assert_eq!(status, "warn", "{summary}");
    assert!(summary.contains("a server's output"), "{summary}");
    // Several files: the worst decides, and the missing one is named.
    let missing = scratch.path().join("nope.txt");
    let (c, _) = judge(&[
        &data("ndr-cx7-write-gbits-cpu-freq-warning.txt"),
        missing.to_str().unwrap(),
    ]);
    let (status, summary) = status_summary(&c);
    assert_eq!(status, "fail", "{summary}");
    assert!(summary.contains("nope.txt: cannot be read"), "{summary}");
}

#[test]
fn without_the_option_the_check_skips() {
    let (c, _) = judge(&[]);
    assert_eq!(c["status"], "skip");
}
