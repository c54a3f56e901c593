//! The active probes (`--cuda`, `--bandwidth`, issue 18) run live against stand-ins: the CUDA
//! driver library built from tests/fake-cuda (answering from a fixture's `cuda.json`) and the
//! stand-in `ib_write_bw` of tests/fake-perftest (printing the fixture's loopback outputs, or
//! hanging, crashing, printing garbage; its server listens on its TCP port and block-buffers its
//! banner as perftest's does). What is checked:
//! - each active-probe fixture's verdict comes out of a live run too, and the four active checks
//!   say the same live as in replay;
//! - a hang (cuInit, one GPU's context, one HCA's loopback) costs at most the timeout, names
//!   what hung, keeps the other GPUs' or HCAs' answers, and leaves no process behind;
//! - progress goes to stderr; a crash, garbage and a missing library are findings, not crashes;
//! - `record --bandwidth` keeps the answers, and the capture replays to the same verdict;
//! - perftest's real outputs (tests/data/perftest/) parse as they read.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

const ACTIVE: &[&str] = &[
    "driver.cuda",
    "topology.host_bandwidth",
    "nvlink.p2p_bandwidth",
    "rdma.gpudirect_bandwidth",
];

/// Slack on a loaded two-core CI machine on top of every bound.
const SLACK: Duration = Duration::from_secs(15);

/// A fixture turned into a live root: its tree without `.gpudoctor/`, and beside it what the
/// stand-ins answer from.
struct Live {
    _dir: tempfile::TempDir,
    root: PathBuf,
    nvml: PathBuf,
    cuda: PathBuf,
    perftest: PathBuf,
    kmsg: Option<PathBuf>,
    fixture: PathBuf,
}

fn live_from(name: &str) -> Live {
    let fixture = common::repo().join("fixtures").join(name);
    let dir = tempfile::tempdir().unwrap();
    let root = common::live_root(&fixture);
    let capture = common::complete(&fixture).join(".gpudoctor");
    let nvml = dir.path().join("nvml.json");
    std::fs::copy(capture.join("nvml.json"), &nvml).unwrap();
    let cuda = dir.path().join("cuda.json");
    if capture.join("cuda.json").is_file() {
        std::fs::copy(capture.join("cuda.json"), &cuda).unwrap();
    }
    let kmsg = capture.join("kmsg.txt").is_file().then(|| {
        let k = dir.path().join("kmsg.txt");
        std::fs::copy(capture.join("kmsg.txt"), &k).unwrap();
        k
    });
    let perftest = dir.path().join("perftest");
    std::fs::create_dir(&perftest).unwrap();
    if let Ok(entries) = std::fs::read_dir(capture.join("gpudirect")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(hca) = name
                .strip_suffix(".log")
                .filter(|n| !n.ends_with(".server"))
            {
                std::fs::copy(e.path(), perftest.join(format!("{hca}.out"))).unwrap();
            }
        }
    }
    Live {
        _dir: dir,
        root,
        nvml,
        cuda,
        perftest,
        kmsg,
        fixture,
    }
}

impl Live {
    fn command(&self, args: &[&str]) -> Command {
        self.command_with_lib(args, common::fake_cuda_lib())
    }

    fn command_with_lib(&self, args: &[&str], cuda_lib: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
        cmd.arg("check")
            .arg("--root")
            .arg(&self.root)
            .arg("--nvml-lib")
            .arg(common::fake_nvml_lib())
            .arg("--cuda-lib")
            .arg(cuda_lib)
            .args(["--format", "json", "--skip", "device-plugin"])
            .args(args)
            .env(common::FAKE_NVML_JSON, &self.nvml)
            .env(common::FAKE_CUDA_JSON, &self.cuda)
            .env("GPUDOCTOR_FAKE_PERFTEST", &self.perftest)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    common::fake_perftest_dir().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("NO_COLOR");
        if let Some(k) = &self.kmsg {
            cmd.arg("--kernel-log").arg(k);
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> (Output, Value, Duration) {
        let started = Instant::now();
        let out = self.command(args).output().expect("gpudoctor runs");
        let elapsed = started.elapsed();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a report ({e}); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out, report, elapsed)
    }

    /// No process of this run left: nothing whose environment names this run's directory.
    fn assert_nothing_left(&self) {
        let mark = self.perftest.display().to_string();
        // Group::finish reaps before gpudoctor exits; allow the kernel a moment to clean up.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = processes_with_env(&mark);
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "processes left behind: {left:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Pids (and command lines) of the processes whose environment contains `mark`.
fn processes_with_env(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if String::from_utf8_lossy(&env).contains(mark) {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{name}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    found
}

fn check<'a>(report: &'a Value, code: &str) -> &'a Value {
    find_check(report, code).unwrap_or_else(|| panic!("no {code} in the report"))
}

fn find_check<'a>(report: &'a Value, code: &str) -> Option<&'a Value> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == code)
}

fn findings(report: &Value) -> Vec<String> {
    let mut codes: Vec<String> = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .filter(|c| matches!(c["status"].as_str(), Some("warn" | "fail" | "error")))
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect();
    codes.sort();
    codes
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The replayed report of a fixture, skipping what the live runs skip.
fn replay(fixture: &Path) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        fixture.to_str().unwrap(),
        "--format",
        "json",
        "--skip",
        "device-plugin",
    ]);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A check's result as compared live vs replay: status, summary and figures (the evidence
/// names where things were read, which differs by design: a live run's output vs the file in
/// the capture).
fn comparable(c: &Value) -> Value {
    serde_json::json!({
        "status": c["status"],
        "summary": c["summary"],
        "figures": c.get("figures").cloned().unwrap_or(Value::Null),
    })
}

#[test]
fn live_probes_give_each_fixtures_verdict_and_match_the_replay() {
    let fixtures = [
        "h100-bandwidth-healthy",
        "h100-h2d-third",
        "h100-cuda-exclusive-busy",
        "h100-gdr-slow-hca",
    ];
    for name in fixtures {
        let live = live_from(name);
        let cuda: Value =
            serde_json::from_str(&std::fs::read_to_string(&live.cuda).unwrap()).unwrap();
        let flag = if cuda["bandwidth"] == true {
            "--bandwidth"
        } else {
            "--cuda"
        };
        let (out, report, _) = live.run(&[flag, "--cuda-timeout", "20"]);
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(live.fixture.join(".gpudoctor/manifest.json")).unwrap(),
        )
        .unwrap();
        let expect = &manifest["expect"];
        assert_eq!(
            out.status.code(),
            expect["exit_code"].as_i64().map(|c| c as i32),
            "{name}: exit code; stderr:\n{}",
            stderr(&out)
        );
        let first = report["first_failure"]["layer"].clone();
        assert_eq!(
            first, expect["first_failing_layer"],
            "{name}: first failing layer"
        );
        let mut want: Vec<String> = expect["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        want.sort();
        assert_eq!(findings(&report), want, "{name}: findings");

        // Progress on stderr, per GPU, and per HCA with --bandwidth.
        let err = stderr(&out);
        assert!(
            err.contains("gpudoctor: cuda: 8 device(s)"),
            "{name}:\n{err}"
        );
        assert!(
            err.contains("gpudoctor: cuda: gpu 0000:18:00.0"),
            "{name}:\n{err}"
        );
        // The loopbacks run in the rdma layer: not when an earlier layer failed the walk.
        let rdma_ran = report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["id"] == "rdma" && l["status"] != "not_run");
        if flag == "--bandwidth" && rdma_ran {
            assert!(
                err.contains("gpudoctor: gpudirect: mlx5_0 port 1 with gpu 0000:18:00.0 (PIX)"),
                "{name}:\n{err}"
            );
        }

        // The same judgment live and in replay.
        let replayed = replay(&live.fixture);
        for code in ACTIVE {
            // Only what was judged in both walks (a layer after a failure is not run, and its
            // checks are not listed).
            let (l, r) = match (find_check(&report, code), find_check(&replayed, code)) {
                (Some(l), Some(r)) => (l, r),
                (None, None) => continue,
                (l, r) => panic!("{name}: {code} live {l:?} vs replay {r:?}"),
            };
            if l["status"] == "not_run" || r["status"] == "not_run" {
                continue;
            }
            assert_eq!(
                comparable(l),
                comparable(r),
                "{name}: {code} live vs replay"
            );
        }
        live.assert_nothing_left();
    }
}

#[test]
fn a_hung_cuinit_costs_the_timeout_and_leaves_no_process() {
    let live = live_from("h100-cuda-exclusive-busy");
    let mut cmd = live.command(&["--cuda", "--cuda-timeout", "2", "--only", "driver"]);
    cmd.env("GPUDOCTOR_FAKE_CUDA_HANG", "init");
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let elapsed = started.elapsed();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // 2 s of silence, then SIGTERM and up to 3 s of grace before SIGKILL.
    assert!(elapsed < Duration::from_secs(2 + 6) + SLACK, "{elapsed:?}");
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail", "{cuda}");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(
        summary.contains("`init` did not return within 2 s"),
        "{summary}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("stopped: no answer for 2 s in `init`"),
        "{}",
        stderr(&out)
    );
    live.assert_nothing_left();
}

#[test]
fn a_gpu_whose_context_hangs_is_named_and_the_others_still_answer() {
    let live = live_from("h100-bandwidth-healthy");
    let mut cmd = live.command(&["--cuda", "--cuda-timeout", "2", "--only", "driver"]);
    cmd.env("GPUDOCTOR_FAKE_CUDA_HANG", "context:0000:2a:00.0");
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail", "{cuda}");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(
        summary.contains("gpu 1 (0000:2a:00.0): `context` did not return within 2 s"),
        "{summary}"
    );
    // The helper was restarted without that GPU; the seven others answered.
    assert!(summary.contains("(the helper was killed)"), "{summary}");
    let err = stderr(&out);
    assert!(
        err.contains("restarting the helper without gpu 0000:2a:00.0"),
        "{err}"
    );
    assert_eq!(
        err.matches("context and round trip ok").count(),
        7 + 1,
        "gpu 0 answered in the first run and again after the restart, the six after it once:\n{err}"
    );
    live.assert_nothing_left();
}

#[test]
fn a_crash_garbage_and_a_missing_library_are_findings() {
    let live = live_from("h100-bandwidth-healthy");

    let mut crash = live.command(&["--cuda", "--only", "driver"]);
    crash.env("GPUDOCTOR_FAKE_CUDA_CRASH", "init");
    let out = crash.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail", "{cuda}");
    assert!(
        cuda["summary"]
            .as_str()
            .unwrap()
            .contains("the cuda helper killed by signal 6 before cuInit answered"),
        "{cuda}"
    );

    let mut garbage = live.command(&["--cuda", "--only", "driver"]);
    garbage.env("GPUDOCTOR_FAKE_CUDA_GARBAGE", "1");
    let out = garbage.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        check(&report, "driver.cuda")["status"],
        "pass",
        "{}",
        stderr(&out)
    );

    let mut missing = live.command_with_lib(
        &["--cuda", "--only", "driver"],
        Path::new("/nonexistent/libcuda.so.1"),
    );
    let out = missing.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    // Asked means required: --cuda that cannot load its library fails, naming where it looked.
    assert_eq!(cuda["status"], "fail", "{cuda}");
    assert!(
        cuda["summary"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/libcuda.so.1")
    );
    assert_eq!(out.status.code(), Some(1));
    live.assert_nothing_left();
}

#[test]
fn cuda_errors_map_to_their_causes() {
    // CUDA_ERROR_NO_DEVICE from cuInit while NVML sees 8 GPUs, with CUDA_VISIBLE_DEVICES set.
    let live = live_from("h100-bandwidth-healthy");
    let mut facts: Value =
        serde_json::from_str(&std::fs::read_to_string(&live.cuda).unwrap()).unwrap();
    facts["init"] = 100.into();
    std::fs::write(&live.cuda, facts.to_string()).unwrap();
    let mut cmd = live.command(&["--cuda", "--only", "driver"]);
    cmd.env("CUDA_VISIBLE_DEVICES", "");
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail");
    assert_eq!(cuda["action"], "fix_config", "{cuda}");
    assert!(
        cuda["summary"].as_str().unwrap().contains(
            "CUDA_ERROR_NO_DEVICE although nvml lists 8 gpu(s): CUDA_VISIBLE_DEVICES= hides them"
        ),
        "{cuda}"
    );

    // Fabric manager not running: CUDA_ERROR_SYSTEM_NOT_READY.
    facts["init"] = 802.into();
    std::fs::write(&live.cuda, facts.to_string()).unwrap();
    let (_, report, _) = live.run(&["--cuda", "--only", "driver"]);
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["action"], "restart_component", "{cuda}");
    assert!(
        cuda["hint"]
            .as_str()
            .unwrap()
            .contains("nvidia-fabricmanager")
    );

    // An uncorrectable ECC error pending on one GPU, and one round trip that came back wrong.
    facts["init"] = 0.into();
    facts["devices"][3]["error"] = serde_json::json!({"step": "context", "code": 214});
    facts["devices"][6]["mismatched_bytes"] = 12.into();
    std::fs::write(&live.cuda, facts.to_string()).unwrap();
    let (_, report, _) = live.run(&["--cuda", "--only", "driver"]);
    let cuda = check(&report, "driver.cuda");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(summary.contains("gpu 3 (0000:5d:00.0)"), "{summary}");
    assert!(
        summary.contains("an uncorrectable ECC error is pending"),
        "{summary}"
    );
    assert!(
        summary.contains("and 1 more gpu problem(s), 6 of 8 gpus work"),
        "{summary}"
    );
    let evidence = cuda["evidence"].to_string();
    assert!(evidence.contains("12 wrong byte(s)"), "{evidence}");
    live.assert_nothing_left();
}

#[test]
fn loopbacks_that_hang_crash_or_print_garbage_are_named_within_the_timeout() {
    let live = live_from("h100-bandwidth-healthy");
    for (hca, mode) in [
        ("mlx5_1", "hang"),
        ("mlx5_2", "crash"),
        ("mlx5_3", "garbage"),
        ("mlx5_4", "fail"),
        ("mlx5_5", "server-hang"),
    ] {
        std::fs::write(live.perftest.join(format!("{hca}.mode")), mode).unwrap();
    }
    let (out, report, elapsed) =
        live.run(&["--bandwidth", "--cuda-timeout", "3", "--only", "rdma"]);
    // Two loopbacks stopped at 3 s each (plus grace), eight quick ones.
    assert!(
        elapsed < Duration::from_secs(2 * (3 + 6) + 8 * 2) + SLACK,
        "{elapsed:?}"
    );
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "fail", "{gdr}");
    let evidence = gdr["evidence"].to_string();
    for (hca, what) in [
        ("mlx5_1", "did not finish within 3 s"),
        ("mlx5_2", "printed no result (killed by signal 11)"),
        (
            "mlx5_3",
            "printed no result (exited 0): cut row `65536 oops nan`",
        ),
        ("mlx5_4", "failed: Couldn't connect to localhost"),
        ("mlx5_5", "never said it was listening within 3 s"),
    ] {
        assert!(
            evidence.contains(hca) && evidence.contains(what),
            "{hca}: `{what}` not in {evidence}"
        );
    }
    // The healthy HCAs kept their figures.
    let figures = gdr["figures"].as_array().unwrap();
    assert_eq!(figures.len(), 5, "{figures:?}");
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    let client = calls
        .lines()
        .find(|l| l.starts_with("client mlx5_0 1 "))
        .unwrap_or_else(|| panic!("no client on mlx5_0:\n{calls}"));
    assert!(
        client.contains(" GPU-263526ca-0ed0-753b-08aa-4ed33dd41658 PCI_BUS_ID "),
        "the loopback must use the nearest GPU, by UUID:\n{calls}"
    );
    assert!(
        stderr(&out)
            .contains("gpudoctor: gpudirect: mlx5_1: no result row (stopped at the timeout)")
    );
    live.assert_nothing_left();
}

#[test]
fn without_perftest_the_loopbacks_skip_and_a_named_dir_without_it_fails() {
    let live = live_from("h100-bandwidth-healthy");
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = live.command(&["--bandwidth", "--only", "rdma"]);
    cmd.env("PATH", empty.path());
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    let installed = gpudoctor::source::gpudirect::COMMON_DIRS
        .iter()
        .any(|d| Path::new(d).join("ib_write_bw").exists());
    if installed {
        // This machine has perftest in a standard place: it is used.
        assert_ne!(gdr["status"], "skip", "{gdr}");
    } else {
        assert_eq!(gdr["status"], "skip", "{gdr}");
        assert!(
            gdr["summary"]
                .as_str()
                .unwrap()
                .contains("install the perftest package")
        );
    }
    let (out, report, _) = live.run(&[
        "--bandwidth",
        "--only",
        "rdma",
        "--perftest-dir",
        empty.path().to_str().unwrap(),
    ]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    // Asked means required: the directory named holds no ib_write_bw, the layer fails.
    assert_eq!(gdr["status"], "fail", "{gdr}");
    let summary = gdr["summary"].as_str().unwrap();
    assert!(summary.contains("--perftest-dir was given"), "{summary}");
    assert!(
        summary.contains(empty.path().to_str().unwrap()),
        "{summary}"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// `gpudoctor record` of a live fixture root into `capture`, with the stand-ins.
fn record_command(live: &Live, capture: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
    cmd.arg("record")
        .arg("--root")
        .arg(&live.root)
        .arg("--out")
        .arg(capture)
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib())
        .arg("--cuda-lib")
        .arg(common::fake_cuda_lib())
        .env(common::FAKE_NVML_JSON, &live.nvml)
        .env(common::FAKE_CUDA_JSON, &live.cuda)
        .env("GPUDOCTOR_FAKE_PERFTEST", &live.perftest)
        .env(
            "PATH",
            format!(
                "{}:{}",
                common::fake_perftest_dir().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env_remove("CUDA_VISIBLE_DEVICES");
    cmd
}

/// `check --format json --keep-going` of a capture.
fn replay_all(capture: &Path) -> Value {
    let replayed = common::gpudoctor(&[
        "check",
        "--root",
        capture.to_str().unwrap(),
        "--format",
        "json",
        "--keep-going",
    ]);
    serde_json::from_slice(&replayed.stdout).unwrap()
}

#[test]
fn a_perftest_dir_without_ib_write_bw_is_recorded_and_fails_the_replay_too() {
    let live = live_from("h100-bandwidth-healthy");
    let out_dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let capture = out_dir.path().join("cap");
    let mut cmd = record_command(&live, &capture);
    cmd.arg("--bandwidth")
        .arg("--perftest-dir")
        .arg(empty.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let not_found = capture.join(".gpudoctor/gpudirect/not-found.json");
    assert!(not_found.is_file(), "{}", stderr(&out));
    let report = replay_all(&capture);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "fail", "{gdr}");
    assert!(
        gdr["summary"]
            .as_str()
            .unwrap()
            .contains("--perftest-dir was given")
    );
    // Not asked for: the replay skips as the live run did, naming the package.
    std::fs::write(
        &not_found,
        r#"{"searched": ["PATH (/usr/bin)"], "asked": false}"#,
    )
    .unwrap();
    let gdr = check(&replay_all(&capture), "rdma.gpudirect_bandwidth").clone();
    assert_eq!(gdr["status"], "skip", "{gdr}");
    assert!(
        gdr["summary"]
            .as_str()
            .unwrap()
            .contains("install the perftest package")
    );
    live.assert_nothing_left();
}

#[test]
fn record_keeps_the_probes_answers_and_the_capture_replays_the_same() {
    let live = live_from("h100-gdr-slow-hca");
    let out_dir = tempfile::tempdir().unwrap();
    let capture = out_dir.path().join("cap");
    let mut cmd = record_command(&live, &capture);
    cmd.arg("--bandwidth");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let cuda = std::fs::read_to_string(capture.join(".gpudoctor/cuda.json")).unwrap();
    let facts = gpudoctor::answers::cuda::parse_cuda_json(&cuda).unwrap();
    assert!(facts.bandwidth);
    assert_eq!(facts.devices.len(), 8);
    let log = std::fs::read_to_string(capture.join(".gpudoctor/gpudirect/mlx5_3.log")).unwrap();
    assert!(log.contains("212.40"), "{log}");
    assert!(
        capture
            .join(".gpudoctor/gpudirect/mlx5_3.server.log")
            .is_file()
    );
    assert!(capture.join(".gpudoctor/gpudirect/mlx5_3.json").is_file());
    // The replay judges what was recorded.
    let report = replay_all(&capture);
    assert_eq!(check(&report, "rdma.gpudirect_bandwidth")["status"], "fail");
    assert_eq!(check(&report, "topology.host_bandwidth")["status"], "pass");
    assert_eq!(check(&report, "driver.cuda")["status"], "pass");
    live.assert_nothing_left();
}

#[test]
fn gid_lines_are_masked_in_a_capture() {
    // RoCE GIDs spell IP addresses (perftest#234's `...:255:255:10:255:255:05`).
    let text = std::fs::read_to_string(
        common::repo().join("tests/data/perftest/perftest-234-mb-cut-after-iterations.txt"),
    )
    .unwrap();
    let masked = gpudoctor::answers::perftest::mask_gids(&text);
    assert!(!masked.contains("255:255:10"), "{masked}");
    assert_eq!(masked.matches(" GID: <gid>").count(), 2);
    assert_eq!(masked.lines().count(), text.lines().count());
}

#[test]
fn every_real_perftest_output_parses_as_it_reads() {
    use gpudoctor::answers::perftest::{BwUnit, parse};
    let read = |name: &str| {
        std::fs::read_to_string(common::repo().join("tests/data/perftest").join(name)).unwrap()
    };
    // NDR, --report_gbits, a CPU frequency warning between header and row.
    let ndr = parse(&read("ndr-cx7-write-gbits-cpu-freq-warning.txt"));
    assert_eq!(ndr.unit, Some(BwUnit::GigabitsPerSec));
    assert_eq!(ndr.rows.len(), 1);
    assert_eq!(ndr.rows[0].bytes, 65536);
    assert_eq!(ndr.rows[0].average_gbits, 392.34);
    assert_eq!(ndr.rows[0].peak_gbits, 392.38);
    assert_eq!(ndr.device.as_deref(), Some("mlx5_0"));
    assert_eq!(ndr.link_type.as_deref(), Some("IB"));
    assert!(ndr.errors.is_empty(), "{:?}", ndr.errors);
    // MiB/sec: 46557.03 MiB/s = 390.55 Gb/s.
    let mib = parse(&read("ndr-cx7-send-mib-cpu-freq-warning.txt"));
    assert_eq!(mib.unit, Some(BwUnit::MebibytesPerSec));
    assert!(
        (mib.rows[0].average_gbits - 390.55).abs() < 0.01,
        "{:?}",
        mib.rows
    );
    // -D: no peak, tabs in the row.
    let duration = parse(&read("perftest-273-gbits-post-list.txt"));
    assert_eq!(duration.rows[0].peak_gbits, 0.0);
    assert_eq!(duration.rows[0].average_gbits, 0.48);
    assert_eq!(duration.rows[0].iterations, 224958464);
    // Cut inside the row: no figure, the cut row kept for the evidence.
    let cut = parse(&read("perftest-234-mb-cut-after-iterations.txt"));
    assert!(cut.rows.is_empty());
    assert_eq!(cut.malformed_rows, vec!["65536      664644"]);
    assert_eq!(cut.unit, Some(BwUnit::MebibytesPerSec));
    // A CUDA server cut in its parameter block: the GPU named, no table.
    let server = parse(&read("perftest-241-cuda-server-cut.txt"));
    assert!(server.rows.is_empty() && server.unit.is_none());
    assert_eq!(server.gpu_name.as_deref(), Some("NVIDIA A30"));
    assert!(server.gpu_memory);
    // A loopback sweep, indented: 23 sizes, the 8 MiB row read.
    let sweep = parse(&read("rocm-loopback-bidirectional-gbits-sweep.txt"));
    assert_eq!(sweep.rows.len(), 23);
    assert_eq!(sweep.rows[0].peak_gbits, 0.142947);
    assert_eq!(sweep.at_size(8 << 20).unwrap().average_gbits, 204.59);
    assert_eq!(
        sweep.test.as_deref(),
        Some("RDMA_Write Bidirectional BW Test")
    );
}

/// scripts/gpu-node-probe.sh, the script a reviewer runs on a real GPU node, run here against
/// the stand-ins: it must print versions, every verdict and figure of the active probes, the
/// time each run took, and leave a capture that replays to the same verdicts.
#[test]
fn the_gpu_node_script_prints_versions_figures_and_verdicts() {
    let live = live_from("h100-gdr-slow-hca");
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("probe");
    let mut cmd = Command::new("bash");
    cmd.arg(common::repo().join("scripts/gpu-node-probe.sh"))
        .arg("--gpudoctor")
        .arg(env!("CARGO_BIN_EXE_gpudoctor"))
        .arg("--out")
        .arg(&out_dir)
        .args(["--cuda-timeout", "20", "--"])
        .arg("--root")
        .arg(&live.root)
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib())
        .arg("--cuda-lib")
        .arg(common::fake_cuda_lib())
        .env(common::FAKE_NVML_JSON, &live.nvml)
        .env(common::FAKE_CUDA_JSON, &live.cuda)
        .env("GPUDOCTOR_FAKE_PERFTEST", &live.perftest)
        .env(
            "PATH",
            format!(
                "{}:{}",
                common::fake_perftest_dir().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env_remove("CUDA_VISIBLE_DEVICES");
    if let Some(k) = &live.kmsg {
        cmd.arg("--kernel-log").arg(k);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The fixture's slow HCA fails the rdma layer: the script exits with gpudoctor's status.
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    for want in [
        "== versions ==",
        "gpudoctor:      gpudoctor ",
        "ib_write_bw:    Version: 6.22 (",
        "driver.cuda: pass",
        "topology.host_bandwidth: pass",
        "nvlink.p2p_bandwidth: pass",
        "rdma.gpudirect_bandwidth: fail",
        "host_gpu_copy_bytes_per_second{direction=h2d,gpu=0000:18:00.0,numa=local} = ",
        "gpu_peer_copy_bytes_per_second{",
        "gpudirect_rdma_bytes_per_second{device=mlx5_3,",
        "mlx5_3",
        "took ",
        "exit status 1, first failure rdma (rdma.gpudirect_bandwidth)",
    ] {
        assert!(text.contains(want), "no `{want}` in:\n{text}");
    }
    let capture = out_dir.join("capture.tar.gz");
    assert!(capture.is_file(), "{text}");
    let replayed = common::gpudoctor(&[
        "check",
        "--root",
        capture.to_str().unwrap(),
        "--format",
        "json",
        "--keep-going",
    ]);
    let report: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(check(&report, "rdma.gpudirect_bandwidth")["status"], "fail");
    assert_eq!(check(&report, "topology.host_bandwidth")["status"], "pass");
    live.assert_nothing_left();
}

/// The GDR failure a missing peer-memory module gives (`nvidia_peermem`, or dma-buf not used):
/// perftest allocates the GPU buffer and cannot register it with the HCA. Real outputs from
/// perftest#31 (an old perftest) and perftest#346 (25.x), tests/data/perftest/README.md.
#[test]
fn a_gpu_buffer_the_hca_cannot_register_fails_naming_the_hca_and_the_error() {
    use gpudoctor::answers::perftest::parse;
    let sample = |name: &str| common::repo().join("tests/data/perftest").join(name);
    for (name, first) in [
        ("perftest-31-cuda-mr-fail.txt", "Couldn't allocate MR"),
        (
            "perftest-346-cuda-mr-error-14.txt",
            "Couldn't allocate MR with error=14",
        ),
    ] {
        let out = parse(&std::fs::read_to_string(sample(name)).unwrap());
        assert!(
            out.rows.is_empty() && out.malformed_rows.is_empty(),
            "{name}"
        );
        assert_eq!(
            out.errors.first().map(String::as_str),
            Some(first),
            "{name}"
        );
        assert!(
            out.errors
                .iter()
                .any(|e| e.contains("Couldn't create IB resources")),
            "{name}: {:?}",
            out.errors
        );
        assert!(out.gpu_memory, "{name}: the buffer was in GPU memory");
    }
    // Through a loopback: mlx5_3's client prints perftest#346's output.
    let live = live_from("h100-bandwidth-healthy");
    std::fs::copy(
        sample("perftest-346-cuda-mr-error-14.txt"),
        live.perftest.join("mlx5_3.out"),
    )
    .unwrap();
    let (out, report, _) = live.run(&["--bandwidth", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "fail", "{gdr}");
    let summary = gdr["summary"].as_str().unwrap();
    assert!(
        summary.contains("mlx5_3") && summary.contains("Couldn't allocate MR with error=14"),
        "{summary}"
    );
    assert!(
        gdr["hint"].as_str().unwrap().contains("nvidia_peermem"),
        "{gdr}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    live.assert_nothing_left();
}

/// A perftest built without CUDA (what `apt install perftest` gives) refuses `--use_cuda` on the
/// server, which ends before it listens: no client starts, and the verdict is the build's —
/// an `error` with the install hint — never a hardware one. The same from the capture.
#[test]
fn a_perftest_without_cuda_is_not_a_hardware_verdict() {
    let live = live_from("h100-bandwidth-healthy");
    for entry in std::fs::read_dir(&live.perftest).unwrap() {
        let path = entry.unwrap().path();
        if let Some(hca) = path.file_stem().and_then(|s| s.to_str()) {
            std::fs::write(live.perftest.join(format!("{hca}.mode")), "no-cuda").unwrap();
        }
    }
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "error", "{gdr}\n{}", stderr(&out));
    let summary = gdr["summary"].as_str().unwrap();
    assert!(
        summary.contains("cannot use gpu memory")
            && summary.contains("server: ib_write_bw: unrecognized option '--use_cuda=0'"),
        "{summary}"
    );
    assert!(
        gdr["hint"].as_str().unwrap().contains("built without it"),
        "{gdr}"
    );
    assert_ne!(gdr["action"], "hardware_inspection", "{gdr}");
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    assert!(!calls.contains("client "), "no client starts:\n{calls}");

    // Recorded and replayed: the same verdict from the kept server output.
    let capture = live._dir.path().join("capture");
    let mut cmd = record_command(&live, &capture);
    cmd.args(["--bandwidth", "--cuda-timeout", "10"]);
    assert!(cmd.output().unwrap().status.success());
    let replayed = common::gpudoctor(&[
        "check",
        "--root",
        capture.to_str().unwrap(),
        "--only",
        "rdma",
        "--format",
        "json",
    ]);
    let replayed: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(
        check(&replayed, "rdma.gpudirect_bandwidth")["summary"],
        gdr["summary"]
    );
    live.assert_nothing_left();
}
