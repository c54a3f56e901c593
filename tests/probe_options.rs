//! Every probe option against both kinds of source (issue 14, DESIGN.md "Sources": one behaviour
//! whatever the source). A live root takes them all; a capture — a directory or a `.tar.gz` —
//! takes `--kernel-log` and `--nccl-log`, which replace its recorded answers, and refuses every
//! other probe option as a usage error (exit 2) naming the option and why, for `check`, `record`
//! and `topo` alike. On a live root the options that shape an nccl-tests run need `--nccl` or
//! `--nccl-quick`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A saved kernel log with one XID 79 on the healthy fixture's first GPU (18:00.0): a line as
/// the driver prints it (reference/gpu-health.md §1, the NVRM Xid format).
const XID_LINE: &str =
    "[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n";

fn healthy() -> PathBuf {
    common::repo().join("fixtures/hgx-h100-healthy")
}

/// The three roots: a live one (a copy of the healthy fixture without `.gpudoctor/`), the
/// fixture directory, and the fixture packed as `.tar.gz`.
struct Roots {
    _tmp: tempfile::TempDir,
    live: PathBuf,
    dir: PathBuf,
    packed: PathBuf,
    kernel_log: PathBuf,
    nccl_log: PathBuf,
}

fn roots() -> Roots {
    let tmp = common::tempdir().unwrap();
    let live = common::live_root(&healthy());
    let packed = tmp.path().join("capture.tar.gz");
    pack(&healthy(), &packed);
    let kernel_log = tmp.path().join("dmesg.txt");
    std::fs::write(&kernel_log, XID_LINE).unwrap();
    let nccl_log = tmp.path().join("run.log");
    std::fs::copy(
        common::repo().join("fixtures/h100-nccl-low-bandwidth/.gpudoctor/nccl/all_reduce_perf.log"),
        &nccl_log,
    )
    .unwrap();
    Roots {
        live,
        dir: healthy(),
        packed,
        kernel_log,
        nccl_log,
        _tmp: tmp,
    }
}

/// `tar czf out -C dir .`: a packed capture as `record --out x.tar.gz` writes one.
pub fn pack(dir: &Path, out: &Path) {
    let status = Command::new("tar")
        .arg("czf")
        .arg(out)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .expect("tar runs");
    assert!(status.success(), "tar czf {}", out.display());
}

fn run(args: &[&str]) -> Output {
    common::scratch::gpudoctor_command()
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .expect("gpudoctor runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `check --root ROOT --only driver --format json` plus `extra`.
fn check(root: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "check",
        "--root",
        root.to_str().unwrap(),
        "--only",
        "driver",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// The probe options one at a time: (the arguments, the option a capture refuses, or `None`
/// when a capture takes it too).
fn options<'a>(r: &'a Roots, socket: &'a str) -> Vec<(Vec<&'a str>, Option<&'static str>)> {
    let kernel_log = r.kernel_log.to_str().unwrap();
    let nccl_log = r.nccl_log.to_str().unwrap();
    vec![
        (
            vec!["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"],
            Some("--nvml-lib"),
        ),
        (vec!["--kernel-log", kernel_log], None),
        (vec!["--timeout", "5"], Some("--timeout")),
        (vec!["--timeout", "5", "--kernel-log", kernel_log], None),
        (vec!["--kubelet-socket", socket], Some("--kubelet-socket")),
        (vec!["--nccl"], Some("--nccl")),
        (vec!["--nccl-quick"], Some("--nccl-quick")),
        (vec!["--nccl-log", nccl_log], None),
        (vec!["--nccl", "--nccl-test", "all_gather"], Some("--nccl")),
        (
            vec!["--nccl-quick", "--nccl-tests-dir", "/nonexistent"],
            Some("--nccl-tests-dir"),
        ),
        (
            vec!["--nccl", "--nccl-launcher", "mpirun -np 2"],
            Some("--nccl-launcher"),
        ),
        (vec!["--nccl", "--nccl-gpus", "2"], Some("--nccl-gpus")),
        (
            vec!["--nccl", "--nccl-timeout", "5"],
            Some("--nccl-timeout"),
        ),
        // A capture replays the window it was recorded with (record --sample), if any.
        (vec!["--sample", "1"], Some("--sample")),
        (vec!["--cuda"], Some("--cuda")),
        (vec!["--bandwidth"], Some("--bandwidth")),
        (
            vec!["--cuda", "--cuda-lib", "/nonexistent/libcuda.so.1"],
            Some("--cuda-lib"),
        ),
        (
            vec![
                "--cuda",
                "--cuda-lib",
                "/nonexistent/libcuda.so.1",
                "--cuda-timeout",
                "5",
            ],
            Some("--cuda-timeout"),
        ),
        (
            vec!["--bandwidth", "--perftest-dir", "/nonexistent"],
            Some("--perftest-dir"),
        ),
    ]
}

#[test]
fn every_probe_option_against_a_live_root_and_a_capture_dir_and_tar_gz() {
    let r = roots();
    let socket = r.live.join("var/lib/kubelet/pod-resources/kubelet.sock");
    let socket = socket.to_str().unwrap().to_string();
    common::parallel::for_each(&options(&r, &socket), |(args, refused)| {
        // Live: every option is taken (whatever the verdict, never a usage error).
        let out = check(&r.live, args);
        assert_ne!(
            out.status.code(),
            Some(2),
            "live {args:?} must be taken: {}",
            stderr(&out)
        );
        assert!(
            serde_json::from_slice::<Value>(&out.stdout).is_ok(),
            "live {args:?}: no report"
        );
        for capture in [&r.dir, &r.packed] {
            let out = check(capture, args);
            let err = stderr(&out);
            match refused {
                Some(option) => {
                    assert_eq!(
                        out.status.code(),
                        Some(2),
                        "{} {args:?} must be a usage error: {err}",
                        capture.display()
                    );
                    assert!(
                        out.stdout.is_empty(),
                        "{args:?}: a refused run prints no report"
                    );
                    assert!(
                        err.contains(&format!("gpudoctor: {option} "))
                            && err.contains("is a capture"),
                        "{args:?}: the message names {option} and why: {err}"
                    );
                }
                None => {
                    assert_ne!(out.status.code(), Some(2), "{capture:?} {args:?}: {err}");
                    assert!(
                        serde_json::from_slice::<Value>(&out.stdout).is_ok(),
                        "{err}"
                    );
                }
            }
        }
    });
}

#[test]
fn nccl_run_options_without_a_run_are_usage_errors_on_a_live_root() {
    let r = roots();
    for (option, value) in [
        ("--nccl-test", "all_gather"),
        ("--nccl-tests-dir", "/nonexistent"),
        ("--nccl-launcher", "mpirun -np 2"),
        ("--nccl-gpus", "2"),
        ("--nccl-timeout", "5"),
    ] {
        let out = check(&r.live, &[option, value]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{option}: {err}");
        assert!(
            err.contains(&format!("gpudoctor: {option} shapes an nccl-tests run")),
            "{err}"
        );
        // With a saved log instead of a run, still nothing to shape.
        let log = r.nccl_log.to_str().unwrap();
        let out = check(&r.live, &["--nccl-log", log, option, value]);
        assert_eq!(out.status.code(), Some(2), "{option} with --nccl-log");
    }
}

#[test]
fn active_probe_options_without_their_probe_are_usage_errors_on_a_live_root() {
    let r = roots();
    for (args, option, needs) in [
        (
            vec!["--cuda-lib", "/nonexistent/libcuda.so.1"],
            "--cuda-lib",
            "add --cuda or --bandwidth",
        ),
        (
            vec!["--cuda-timeout", "5"],
            "--cuda-timeout",
            "add --cuda or --bandwidth",
        ),
        (
            vec!["--perftest-dir", "/nonexistent"],
            "--perftest-dir",
            "add --bandwidth",
        ),
        // --cuda runs no loopback: the perftest directory shapes nothing.
        (
            vec![
                "--cuda",
                "--cuda-lib",
                "/nonexistent/libcuda.so.1",
                "--perftest-dir",
                "/nonexistent",
            ],
            "--perftest-dir",
            "add --bandwidth",
        ),
    ] {
        let out = check(&r.live, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: a refused run prints no report"
        );
        assert!(
            err.contains(&format!("gpudoctor: {option} shapes")) && err.contains(needs),
            "{args:?}: {err}"
        );
    }
}

fn xid_check(report: &Value) -> Value {
    report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "driver.xid_events")
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_kernel_log_given_with_a_capture_replaces_its_recorded_one() {
    let r = roots();
    let log = r.kernel_log.to_str().unwrap();
    for capture in [&r.dir, &r.packed] {
        // Without it: the capture's own kernel log (none recorded here): nothing to fail on.
        let out = check(capture, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_ne!(
            xid_check(&report)["status"],
            "fail",
            "{}",
            capture.display()
        );
        // With it: the XID in the given log is reported, and the log named as its source.
        let out = check(capture, &["--kernel-log", log]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let xid = xid_check(&report);
        assert_eq!(xid["status"], "fail", "{xid}");
        let text = xid.to_string();
        assert!(text.contains("79") && text.contains("18:00"), "{text}");
        assert!(
            text.contains("dmesg.txt"),
            "the evidence names the given log: {text}"
        );
    }
}

#[test]
fn record_and_topo_refuse_live_probe_options_with_a_capture() {
    let r = roots();
    let tmp = common::tempdir().unwrap();
    for capture in [&r.dir, &r.packed] {
        for args in [
            vec!["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"],
            vec!["--kubelet-socket", "/nonexistent.sock"],
            vec!["--nccl-quick"],
            vec!["--timeout", "3"],
            vec!["--bandwidth"],
            vec!["--cuda"],
        ] {
            let out_path = tmp.path().join("never");
            let mut full = vec![
                "record",
                "--root",
                capture.to_str().unwrap(),
                "--out",
                out_path.to_str().unwrap(),
            ];
            full.extend_from_slice(&args);
            let out = run(&full);
            assert_eq!(
                out.status.code(),
                Some(2),
                "record {args:?}: {}",
                stderr(&out)
            );
            assert!(stderr(&out).contains(args[0]), "{}", stderr(&out));
            assert!(!out_path.exists(), "a refused record writes nothing");
        }
        let out = run(&[
            "topo",
            "--root",
            capture.to_str().unwrap(),
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
        ]);
        assert_eq!(out.status.code(), Some(2), "topo: {}", stderr(&out));
        assert!(stderr(&out).contains("--nvml-lib"), "{}", stderr(&out));
        // --no-nvml is not a probe of the node: taken.
        let out = run(&["topo", "--root", capture.to_str().unwrap(), "--no-nvml"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    // topo of a live root takes --nvml-lib.
    let out = run(&[
        "topo",
        "--root",
        r.live.to_str().unwrap(),
        "--nvml-lib",
        "/nonexistent/libnvidia-ml.so.1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
