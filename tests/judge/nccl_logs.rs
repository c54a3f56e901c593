//! NCCL logs: launcher and collector prefixes, Docker json-file lines and Open MPI timestamps on
//! healthy runs, socket fallback, and the bus-bandwidth sweep peak and old error columns.

use super::*;

#[test]
fn launcher_and_collector_prefixes_on_a_healthy_nccl_tests_log() {
    // A real healthy run (tests/data/nccl/README.md), every line given each prefix as the
    // launcher or collector writes it. No public NCCL log with these prefixes was found
    // (tests/data/judge/SOURCES.md, "Not found"), so the prefixes are put on here: torchrun's
    // `--tee` role and rank (torch/distributed/elastic/multiprocessing/api.py), and the
    // kubelet's CRI container log line, in the shape CRI-O wrote it in cri-o#3181
    // (tests/data/judge/cri-o_container-log-file_CRI-format_offset-timezone_stderr-F_cri-o-3181.log).
    let log = std::fs::read_to_string(
        common::repo().join("tests/data/nccl/real/nccl-tests-290-h100-single-node.log"),
    )
    .unwrap();
    let (plain, exit) = judge_text("plain.log", &log);
    assert_eq!(exit, 0, "{plain}");
    for (name, prefix) in [
        ("torchrun.log", "[default0]:"),
        ("cri.log", "2026-01-06T10:00:00.123456789Z stdout F "),
        (
            "cri-offset.log",
            "2020-01-26T03:17:29.346494690+00:00 stdout F ",
        ),
    ] {
        let text: String = log.lines().map(|l| format!("{prefix}{l}\n")).collect();
        let (report, exit) = judge_text(name, &text);
        assert_eq!(exit, 0, "{name}: {report}");
        assert_eq!(statuses(&report), statuses(&plain), "{name}");
    }
}

#[test]
fn socket_fallback_after_the_plugin_and_no_hca() {
    for file in [
        "nccl_socket-fallback_no-plugin_ib-no-device_using-network-Socket_trailing-space-padded_nccl-1126.log",
        "nccl-tests_socket-fallback_lo_nccl-2.4.8_no-plugin_ib-no-device_nccl-352.log",
    ] {
        let (report, _) = judge_json(&[&format!("{DATA}/{file}")]);
        let c = status_of(&report, "nccl.socket_fallback")[0];
        assert_eq!(c["status"], "warn", "{file}: {c}");
        let summary = c["summary"].as_str().unwrap();
        assert!(summary.starts_with("socket fallback:"), "{summary}");
        assert!(
            summary.contains("no net plugin (libnccl-net.so), then NCCL found no usable HCA"),
            "{summary}"
        );
    }
    // The other causes are named too; a run over RDMA stays silent.
    let (report, _) = judge_json(&[&format!(
        "{DATA}/nccl_socket-fallback_eth0_libibverbs-missing_using-network-Socket_nccl-2.10.3_nccl-857.log"
    )]);
    let c = status_of(&report, "nccl.socket_fallback")[0];
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("libibverbs is missing"),
        "{c}"
    );
    let (report, _) = judge_json(&["tests/data/nccl/real/aws-ofi-nccl-65-p4d-dip.log"]);
    for c in status_of(&report, "nccl.socket_fallback") {
        assert_ne!(c["status"], "warn", "{c}");
    }
}

/// Every check's code, status and summary: what a reader of the report is told.
fn verdicts(report: &Value) -> Vec<(String, String, String)> {
    checks(report)
        .into_iter()
        .map(|(_, c)| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["summary"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A line as Docker's json-file driver writes it (moby daemon/logger/jsonfilelog/jsonlog/
/// jsonlogbytes.go, `MarshalJSONBuf` and `ffjsonWriteJSONBytesAsString`: `\\`, `"`, `\n`, `\r`
/// escaped by letter, other bytes below 0x20 and `<`, `>`, `&` as `\u00XX`).
fn docker_entry(log: &str, stream: &str) -> String {
    let mut s = String::from("{\"log\":\"");
    for c in log.chars() {
        match c {
            '\\' | '"' => {
                s.push('\\');
                s.push(c);
            }
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&') => {
                s.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => s.push(c),
        }
    }
    s.push_str(&format!(
        "\",\"stream\":\"{stream}\",\"time\":\"2026-01-06T10:00:00.123456789Z\"}}\n"
    ));
    s
}

#[test]
fn docker_json_file_lines_and_open_mpi_timestamps_read_healthy() {
    // Real healthy runs (tests/data/nccl/real/), with NCCL INFO lines and without.
    for real in [
        "gcp-h200-two-node-all-gather",
        "nccl-tests-290-h100-single-node",
        "eks-efa-t4-two-node-tag-output",
    ] {
        let log = std::fs::read_to_string(
            common::repo().join(format!("tests/data/nccl/real/{real}.log")),
        )
        .unwrap();
        let (plain, exit) = judge_text("plain.log", &log);
        assert_eq!(exit, 0, "{real}: {plain}");
        assert_eq!(
            status_of(&plain, "nccl.run_completed")[0]["status"],
            "pass",
            "{real}"
        );
        // Every line a json-file entry; a long line cut into two entries, the first without
        // its newline (moby daemon/logger/copier.go: a message over the 16 KiB buffer is
        // written in parts, joined again by `docker logs`; parts of two streams interleaved
        // are container_log.rs's unit tests).
        let mut json = String::new();
        for line in log.lines() {
            let stream = if line.contains("NCCL INFO") {
                "stderr"
            } else {
                "stdout"
            };
            if line.starts_with("# nThread") {
                let cut = line.len() / 2;
                json.push_str(&docker_entry(&line[..cut], stream));
                json.push_str(&docker_entry(&format!("{}\n", &line[cut..]), stream));
            } else {
                json.push_str(&docker_entry(&format!("{line}\n"), stream));
            }
        }
        let (report, exit) = judge_text("container-json.log", &json);
        assert_eq!(exit, 0, "{real} json-file: {report}");
        assert!(
            report["source"]["root"]
                .as_str()
                .unwrap()
                .ends_with("(nccl)")
        );
        assert_eq!(verdicts(&report), verdicts(&plain), "{real} json-file");
        // The same in the CRI format of /var/log/pods (the kubelet's `parseCRILog`): the
        // `# nThread` line and every result row cut into a `P` part and the `F` line that ends
        // it (read line by line, each part was a line of its own: rows without their figures).
        let mut cri = String::new();
        for (n, line) in log.lines().enumerate() {
            let stream = if line.contains("NCCL INFO") {
                "stderr"
            } else {
                "stdout"
            };
            let at = format!("2026-01-06T10:00:{:02}.{n:09}Z {stream}", n % 60);
            let row = line.trim_start().starts_with(|c: char| c.is_ascii_digit());
            if line.starts_with("# nThread") || row {
                let cut = line.len() / 2;
                cri.push_str(&format!("{at} P {}\n", &line[..cut]));
                cri.push_str(&format!("{at} F {}\n", &line[cut..]));
            } else {
                cri.push_str(&format!("{at} F {line}\n"));
            }
        }
        let (report, exit) = judge_text("0.log", &cri);
        assert_eq!(exit, 0, "{real} cri: {report}");
        assert_eq!(verdicts(&report), verdicts(&plain), "{real} cri");
        // Every row cut in two lines (a copy whose parts were not joined): the footer is there
        // but no row reads, so the run is inconclusive, never "ran to its footer".
        let cut: String = log
            .lines()
            .map(|l| {
                if l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                    format!("{}\n{}\n", &l[..l.len() / 2], &l[l.len() / 2..])
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let (report, exit) = judge_text("cut.log", &cut);
        if cut.lines().count() == log.lines().count() {
            // Rows behind `--tag-output` tags: none cut (the prefixed rows are the test above).
            assert!(real.starts_with("eks-efa"), "{real}: no row cut");
            continue;
        }
        let c = status_of(&report, "nccl.run_completed")[0];
        assert_eq!(c["status"], "error", "{real} cut: {c}");
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .contains("none of its result rows could be read"),
            "{c}"
        );
        assert_eq!(exit, 3, "{real} cut: {report}");
        if real.starts_with("eks-efa") {
            // Already behind `--tag-output`: not run through `--timestamp-output` too.
            continue;
        }
        // Open MPI 4.1.4 `mpirun --timestamp-output --tag-output` around the same log, as
        // the real mpirun wrote it (tests/data/judge/SOURCES.md).
        let path = format!("{DATA}/ompi-4.1.4_timestamp-output_tag-output_{real}.log");
        let (report, exit) = judge_json(&[&path]);
        assert_eq!(exit, 0, "{path}: {report}");
        assert_eq!(verdicts(&report), verdicts(&plain), "{path}");
        // Without --tag-output the stamp comes before a bare `<stdout>:`.
        let untagged = std::fs::read_to_string(common::repo().join(&path))
            .unwrap()
            .replace("[1,0]<stdout>:", "<stdout>:");
        let (report, exit) = judge_text("stamped.log", &untagged);
        assert_eq!(exit, 0, "{real} untagged: {report}");
        assert_eq!(verdicts(&report), verdicts(&plain), "{real} untagged");
    }
}

#[test]
fn sweep_peak_beside_the_verdict_and_old_error_columns_judged_by_their_footer() {
    // eks-blueprints (EFA, p3dn): the peak, 3.15 GB/s, is below 1 GiB and ties between the
    // in-place 128 MiB and out-of-place 256 MiB figures; the verdict's 1 GiB figure is lower.
    let (report, _) = judge_json(&[&format!(
        "{DATA}/nccl-tests_ompi-tag-output_efa-p3dn_peak-busbw-below-1GiB_eks-blueprints.log"
    )]);
    let c = status_of(&report, "nccl.bus_bandwidth")[0];
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "peak busbw 3.12 GB/s at 1 GiB (sweep peak 3.15 GB/s at 128 MiB, in-place)"
        ),
        "{summary}"
    );
    // aws-efa-eks: an old build's `error` column (2e-07, 5e-07) under its own footer `Out of
    // bounds values : 0 OK`: no wrong results.
    let path = format!("{DATA}/nccl-tests_ompi-tag-output_old-error-column_aws-efa-eks.log");
    let (report, _) = judge_json(&[&path]);
    assert_eq!(
        status_of(&report, "nccl.wrong_results")[0]["status"],
        "pass"
    );
    // The same run with deviations past the float tolerance gpudoctor knows (1e-05), which
    // that build allowed on 16 ranks (`DeltaMaxValue(type)*(nranks - 1)`, nccl-tests before
    // 2022-08): its footer still says 0 OK, so it is the test's verdict that counts.
    let text = std::fs::read_to_string(common::repo().join(&path)).unwrap();
    let deviated = text.replace("  5e-07", "  3e-05");
    assert_ne!(deviated, text);
    let (report, exit) = judge_text("deviated.log", &deviated);
    let c = status_of(&report, "nccl.wrong_results")[0];
    assert_eq!(c["status"], "pass", "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("deviations (up to 3e-05) are within the test's own bounds"),
        "{c}"
    );
    assert_ne!(exit, 3);
    // Where the footer counted values out of bounds, the rows are wrong results.
    let failed = deviated.replace(
        "Out of bounds values : 0 OK",
        "Out of bounds values : 4 FAILED",
    );
    assert_ne!(failed, deviated);
    let (report, exit) = judge_text("failed.log", &failed);
    assert_eq!(exit, 1);
    let c = status_of(&report, "nccl.wrong_results")[0];
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .starts_with("wrong results at"),
        "{c}"
    );
}
