//! The binary as an operator or a pipeline uses it: exit codes, JSON on stdout, layer selection,
//! usage errors, and the GPU-less machine these tests run on.

mod common;

use std::time::{Duration, Instant};

use common::gpudoctor;
use serde_json::Value;

const HEALTHY: &str = "fixtures/hgx-h100-healthy";
const DRIVER_NOT_LOADED: &str = "fixtures/h100-driver-not-loaded";

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn healthy_fixture_exits_0_with_eight_layers_in_order() {
    let out = gpudoctor(&["check", "--root", HEALTHY, "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    let ids: Vec<&str> = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "driver",
            "toolkit",
            "device-plugin",
            "topology",
            "rdma",
            "sriov",
            "nvlink",
            "nccl"
        ]
    );
    assert!(report["first_failure"].is_null());
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["schema_version"], 2);
    assert_eq!(report["source"]["kind"], "replay");
    assert_eq!(report["node"]["hostname"], "hgx-h100-01");
    assert_eq!(report["node"]["driver_version"], "550.54.15");
}

#[test]
fn failure_fixture_exits_1_and_keep_going_runs_later_layers() {
    let out = gpudoctor(&["check", "--root", DRIVER_NOT_LOADED, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["first_failure"]["layer"], "driver");
    assert_eq!(report["layers"][1]["status"], "not_run");
    assert_eq!(report["layers"][1]["reason"], "blocked by driver");

    let out = gpudoctor(&[
        "check",
        "--root",
        DRIVER_NOT_LOADED,
        "--format",
        "json",
        "--keep-going",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    // The toolkit layer runs (its NVML-dependent checks skip); none is left not_run.
    assert_eq!(report["layers"][1]["id"], "toolkit");
    assert!(
        report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["status"] != "not_run"),
        "{report}"
    );
}

#[test]
fn only_and_skip_select_layers() {
    let out = gpudoctor(&[
        "check",
        "--root",
        DRIVER_NOT_LOADED,
        "--format",
        "json",
        "--skip",
        "driver",
    ]);
    let report = json(&out);
    assert_eq!(report["layers"][0]["status"], "skip");
    assert_eq!(report["layers"][0]["reason"], "skipped by --skip");
    // With the driver layer skipped, the walk goes on: a later layer may fail on its own
    // (no nvidia_peermem without the driver), but never the skipped one.
    assert_ne!(report["first_failure"]["layer"], "driver");
    assert_eq!(
        out.status.code(),
        report["exit_code"].as_i64().map(|c| c as i32)
    );

    let out = gpudoctor(&[
        "check",
        "--root",
        HEALTHY,
        "--format",
        "json",
        "--only",
        "toolkit,nccl",
    ]);
    let report = json(&out);
    assert_eq!(report["layers"][0]["reason"], "not selected by --only");
    assert_eq!(report["layers"][0]["checks"].as_array().unwrap().len(), 0);

    let out = gpudoctor(&["check", "--root", HEALTHY, "--only", "gpu"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("layers are: driver"));
}

#[test]
fn bad_root_is_a_usage_error() {
    for root in ["/nonexistent/gpudoctor-root", "Cargo.toml"] {
        let out = gpudoctor(&["check", "--root", root]);
        assert_eq!(out.status.code(), Some(2), "{root}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(root) && err.contains("--root"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn table_output_is_plain_when_piped() {
    let out = gpudoctor(&["check", "--root", DRIVER_NOT_LOADED]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains('\x1b'),
        "no colour codes when stdout is a pipe"
    );
    assert!(text.contains("[FAIL] driver"));
    assert!(text.contains("hint: "));
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("first failure: driver layer")
    );
}

/// `--verbose` (issue 46): the table lists passing checks with what they measured, the numbers
/// the JSON carries; without it a healthy run prints no passing check.
#[test]
fn verbose_table_shows_passing_figures() {
    let root = common::repo().join("fixtures/h100-nccl-healthy");
    let root = root.to_str().unwrap();
    let plain = gpudoctor(&["check", "--root", root]);
    let plain = String::from_utf8(plain.stdout).unwrap();
    assert!(!plain.contains("measured:"), "{plain}");
    let verbose = gpudoctor(&["check", "--root", root, "--verbose"]);
    assert_eq!(verbose.status.code(), Some(0));
    let text = String::from_utf8(verbose.stdout).unwrap();
    let json = json(&gpudoctor(&["check", "--root", root, "--format", "json"]));
    let peak = json["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .flat_map(|c| c["figures"].as_array().cloned().unwrap_or_default())
        .find(|f| f["name"] == "nccl_busbw_peak_bytes_per_second")
        .expect("the healthy NCCL fixture measures a peak");
    let gbs = format!("{:.1} GB/s", peak["value"].as_f64().unwrap() / 1e9);
    let line = text
        .lines()
        .find(|l| l.contains("measured: nccl_busbw_peak_bytes_per_second"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&gbs), "{line} lacks {gbs}");
    assert!(text.contains("[ ok ] nccl.bus_bandwidth"), "{text}");
}

#[test]
fn list_checks_and_explain_cover_every_check() {
    let out = gpudoctor(&["list-checks", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let rows = json(&out);
    let rows = rows.as_array().unwrap();
    assert!(rows.len() >= 9);
    for row in rows {
        let code = row["code"].as_str().unwrap();
        let out = gpudoctor(&["explain", code]);
        assert_eq!(out.status.code(), Some(0), "{code}");
        let text = String::from_utf8_lossy(&out.stdout);
        for part in ["Reads:", "Expects:", "Why:", "Fix:"] {
            assert!(text.contains(part), "{code} explain lacks {part}");
        }
    }
    let table = String::from_utf8(gpudoctor(&["list-checks"]).stdout).unwrap();
    assert!(table.contains("driver.nvml_init") && table.contains("driver "));
}

#[test]
fn explain_unknown_code_exits_2_with_suggestions() {
    let out = gpudoctor(&["explain", "driver.nvml_int"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean: driver.nvml_init"), "{err}");
}

#[test]
fn help_documents_exit_codes_and_examples() {
    let out = gpudoctor(&["check", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Exit codes:")
            && text.contains("3  inconclusive")
            && text.contains("Examples:")
    );
}

/// These machines have no GPU, driver or NVML: the live check must say so quickly, not hang.
#[test]
fn live_check_on_this_gpu_less_machine_fails_fast_in_the_driver_layer() {
    let started = Instant::now();
    let out = gpudoctor(&["check", "--format", "json"]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    assert_eq!(report["source"]["kind"], "live");
    assert_eq!(report["first_failure"]["layer"], "driver");
    assert!(report["first_failure"]["hint"].as_str().unwrap().len() > 20);
}

#[test]
fn a_closed_pipe_is_not_a_crash() {
    use std::process::Stdio;
    let mut child = common::scratch::gpudoctor_command()
        .args(["list-checks"])
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0)),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_run_in_which_no_layer_ran_is_inconclusive_and_npd_says_unknown() {
    // `--only driver --skip driver` ran nothing; it used to exit 0 and NPD said "all layers pass".
    let select = ["--only", "driver", "--skip", "driver"];
    let mut args = vec!["check", "--root", HEALTHY, "--format", "json"];
    args.extend(select);
    let out = gpudoctor(&args);
    assert_eq!(out.status.code(), Some(3));
    let report = json(&out);
    assert_eq!(report["exit_code"], 3);
    assert!(
        report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["checks"].as_array().unwrap().is_empty())
    );

    let mut args = vec!["check", "--root", HEALTHY];
    args.extend(select);
    let table = gpudoctor(&args);
    assert_eq!(table.status.code(), Some(3));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("inconclusive: no layer ran"), "{text}");

    let mut args = vec!["check", "--root", HEALTHY, "--npd"];
    args.extend(select);
    let npd = gpudoctor(&args);
    assert_eq!(npd.status.code(), Some(2), "NPD's unknown");
    let line = String::from_utf8_lossy(&npd.stdout);
    assert!(
        line.contains("inconclusive") && !line.contains("pass"),
        "{line}"
    );
}

#[test]
fn a_report_that_cannot_be_saved_is_one_exit_code_in_the_json_the_textfile_and_the_process() {
    // /proc is a directory nobody, root included, can create a file in: --save-report passes
    // the up-front check and fails when written. It used to print `"exit_code": 0` and exit 4.
    let tmp = common::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let out = gpudoctor(&[
        "check",
        "--root",
        HEALTHY,
        "--format",
        "json",
        "--textfile-dir",
        dir,
        "--save-report",
        "/proc/gpudoctor-last.json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(
        json(&out)["exit_code"],
        4,
        "the JSON says what the process exits with"
    );
    let prom = std::fs::read_to_string(tmp.path().join("gpudoctor.prom")).unwrap();
    assert!(
        prom.lines().any(|l| l == "gpudoctor_exit_code 4"),
        "the textfile written before the failure was rewritten: {prom}"
    );
    assert_eq!(
        stderr
            .matches("cannot write /proc/gpudoctor-last.json")
            .count(),
        1,
        "said once: {stderr}"
    );
    assert!(!stderr.contains("internal error:"), "{stderr}");

    // Under --npd the node's verdict is what every output carries: healthy, NPD's OK.
    let npd = gpudoctor(&[
        "check",
        "--root",
        HEALTHY,
        "--npd",
        "--textfile-dir",
        dir,
        "--save-report",
        "/proc/gpudoctor-last.json",
    ]);
    assert_eq!(npd.status.code(), Some(0));
    let prom = std::fs::read_to_string(tmp.path().join("gpudoctor.prom")).unwrap();
    assert!(prom.lines().any(|l| l == "gpudoctor_exit_code 0"), "{prom}");
}

#[test]
fn render_of_a_fifo_nobody_writes_ends_at_its_timeout() {
    use std::process::{Command, Stdio};
    let tmp = common::tempdir().unwrap();
    let fifo = tmp.path().join("report.fifo");
    common::make_fifo(&fifo);
    let started = Instant::now();
    let mut child = common::scratch::gpudoctor_command()
        .args(["render", fifo.to_str().unwrap(), "--timeout", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("render still blocked on a fifo after 15 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("report.fifo") && stderr.contains("1 s"),
        "{stderr}"
    );

    // A pipe whose writer finishes is read whole: `render <(cat last.json)`.
    let saved = tmp.path().join("last.json");
    let report = gpudoctor(&["check", "--root", HEALTHY, "--format", "json"]);
    std::fs::write(&saved, &report.stdout).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {} render <(sleep 0.2; cat {}) --format json",
            env!("CARGO_BIN_EXE_gpudoctor"),
            saved.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, report.stdout);
}

/// `check` leaves the run's facts to the process's exit (issue 41), but still drops its source:
/// an overlay fixture's composed tree (source/overlay.rs) is removed, as is an unpacked capture.
#[test]
fn check_of_an_overlay_fixture_leaves_nothing_in_tmpdir() {
    let tmp = tempfile::tempdir().unwrap();
    let overlay = "fixtures/aks-h100-healthy";
    let manifest = common::repo()
        .join(overlay)
        .join(".gpudoctor/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(
        text.contains("\"base\""),
        "{overlay} is no longer an overlay"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args([
            "check",
            "--keep-going",
            "--format",
            "json",
            "--root",
            overlay,
        ])
        .current_dir(common::repo())
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}
