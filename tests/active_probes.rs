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
common::tests_mostly_wait!();

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::live::{
    SLACK, check, edit_json, find_check, findings, live_from, record_command, replay_all, stderr,
};
use serde_json::Value;

const ACTIVE: &[&str] = &[
    "driver.cuda",
    "topology.host_bandwidth",
    "nvlink.p2p_bandwidth",
    "rdma.gpudirect_bandwidth",
];

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
        // The stand-in NVML lists a process on GPU 2, whose copies the stand-in libcuda times
        // at a third of its siblings': inconclusive there, the others judged.
        "h100-bandwidth-gpu-held",
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
        // A held GPU is named before the probe runs (driver.gpu_processes reports it first).
        if name == "h100-bandwidth-gpu-held" {
            assert!(
                err.contains("gpudoctor: cuda: gpu 0000:3a:00.0 is held by pid 60321 (python3): its figures will be inconclusive"),
                "{name}:\n{err}"
            );
            let codes: Vec<&str> = report["layers"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|l| l["checks"].as_array().unwrap())
                .filter_map(|c| c["code"].as_str())
                .collect();
            let at = |code: &str| codes.iter().position(|c| *c == code).unwrap();
            assert!(at("driver.gpu_processes") < at("driver.cuda"), "{codes:?}");
            let bw = find_check(&report, "topology.host_bandwidth").unwrap();
            assert_eq!(bw["status"], "error", "{bw}");
            assert!(
                bw["summary"].as_str().unwrap().starts_with(
                    "GPU 2 (0000:3a:00.0) inconclusive because pid 60321 (python3) held it; the others: h2d 53.6-53.8 GB/s"
                ),
                "{bw}"
            );
        }
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
    // cuInit attaches the GPUs: 2 s of silence and 2 s more for the eight of them, then SIGTERM
    // and up to 3 s of grace before SIGKILL.
    assert!(elapsed < Duration::from_secs(4 + 6) + SLACK, "{elapsed:?}");
    assert!(elapsed >= Duration::from_secs(4), "{elapsed:?}");
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail", "{cuda}");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(
        summary.contains("`init` did not return within 4 s"),
        "{summary}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("stopped: no answer for 4 s in `init`"),
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
        summary.contains("GPU 1 (0000:2a:00.0): `context` did not return within 2 s"),
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
        "GPU 0 answered in the first run and again after the restart, the six after it once:\n{err}"
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
            .contains("the CUDA helper killed by signal 6 (SIGABRT) before cuInit answered"),
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
        Some(Path::new("/nonexistent/libcuda.so.1")),
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
    // CUDA_VISIBLE_DEVICES= hides every GPU: the stand-in's cuInit answers CUDA_ERROR_NO_DEVICE
    // as CUDA does, while NVML sees 8 GPUs.
    let live = live_from("h100-bandwidth-healthy");
    let mut facts: Value =
        serde_json::from_str(&std::fs::read_to_string(&live.cuda).unwrap()).unwrap();
    let mut cmd = live.command(&["--cuda", "--only", "driver"]);
    cmd.env("CUDA_VISIBLE_DEVICES", "");
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail");
    assert_eq!(cuda["action"], "fix_config", "{cuda}");
    assert!(
        cuda["summary"].as_str().unwrap().contains(
            "CUDA_ERROR_NO_DEVICE although NVML lists 8 GPU(s): CUDA_VISIBLE_DEVICES= hides them"
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
    assert!(summary.contains("GPU 3 (0000:5d:00.0)"), "{summary}");
    assert!(
        summary.contains("an uncorrectable ECC error is pending"),
        "{summary}"
    );
    assert!(
        summary.contains("and 1 more GPU problem(s), 6 of 8 GPUs work"),
        "{summary}"
    );
    let evidence = cuda["evidence"].to_string();
    assert!(evidence.contains("12 wrong byte(s)"), "{evidence}");
    live.assert_nothing_left();
}

/// A peer path that changes data (ACS redirect or an IOMMU mangling P2P DMA) keeps its full
/// bandwidth: only the verifying copy read back finds it. The pair fails, named, and the
/// corruption is the finding, ahead of any figure.
#[test]
fn a_peer_copy_that_changes_data_fails_the_pair() {
    let live = live_from("h100-bandwidth-healthy");
    edit_json(&live.cuda, |facts| {
        let peer = facts["peers"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|p| p["from"] == "0000:2a:00.0" && p["to"] == "0000:3a:00.0")
            .unwrap();
        peer["mismatched_bytes"] = 4.into();
    });
    let (_, report, _) = live.run(&["--bandwidth", "--only", "nvlink", "--keep-going"]);
    let p2p = check(&report, "nvlink.p2p_bandwidth");
    assert_eq!(p2p["status"], "fail", "{p2p}");
    let summary = p2p["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("peer copy GPU 1 (0000:2a:00.0) -> GPU 2 (0000:3a:00.0)")
            && summary.contains("returned 4 wrong byte(s)"),
        "{summary}"
    );
    assert_eq!(p2p["action"], "hardware_inspection", "{p2p}");
    // Every other pair's copy came back unchanged: one problem only.
    assert!(!summary.contains("more)"), "{summary}");
    live.assert_nothing_left();
}

/// A helper SIGKILLed in the middle of `--bandwidth` (what the OOM killer does at the Pod's
/// memory limit) is an `error` naming the signal and gpudoctor's memory limit, on every check
/// that reads the probe: never "no gpu answered" (a skip) nor a verdict on the GPUs.
#[test]
fn a_helper_killed_mid_run_is_an_error_naming_the_signal_and_memory() {
    let live = live_from("h100-bandwidth-healthy");
    let mut cmd = live.command(&[
        "--bandwidth",
        "--keep-going",
        "--only",
        "driver,topology,nvlink",
    ]);
    cmd.env("GPUDOCTOR_FAKE_CUDA_KILL", "h2d:0000:5d:00.0");
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for code in [
        "driver.cuda",
        "topology.host_bandwidth",
        "nvlink.p2p_bandwidth",
    ] {
        let c = check(&report, code);
        assert_eq!(c["status"], "error", "{code}: {c}");
        let summary = c["summary"].as_str().unwrap();
        assert!(
            summary.contains("the CUDA helper was killed by signal 9 (SIGKILL)"),
            "{code}: {summary}"
        );
        assert!(summary.contains("memory"), "{code}: {summary}");
        assert!(c["hint"].as_str().unwrap().contains("2 GiB"), "{code}: {c}");
    }
    live.assert_nothing_left();
}

/// CUDA_VISIBLE_DEVICES as CUDA reads it: a GPU UUID, an index, then an entry that names
/// nothing, which ends the list (the `2` after it is not visible). CUDA sees two GPUs; the six
/// NVML lists beyond them are named, with the variable, as hidden by it (fix_config), not as
/// broken GPUs.
#[test]
fn cuda_visible_devices_is_read_as_cuda_reads_it() {
    let live = live_from("h100-bandwidth-healthy");
    edit_json(&live.cuda, |facts| {
        facts["devices"][3]["uuid"] = "GPU-5d3f8a9c-0000-4000-8000-000000000003".into();
    });
    let mut cmd = live.command(&["--cuda", "--only", "driver"]);
    cmd.env("CUDA_VISIBLE_DEVICES", "GPU-5d3f8a9c,7,MIG-nothing,2");
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(
        summary.contains("CUDA enumerates 2 GPU(s), NVML 8")
            && summary.contains("CUDA_VISIBLE_DEVICES=GPU-5d3f8a9c,7,MIG-nothing,2"),
        "{summary}"
    );
    // GPU 2 comes after the entry that names nothing: hidden too.
    assert!(summary.contains("GPU 2 (0000:3a:00.0)"), "{summary}");
    assert!(!summary.contains("GPU 3 (0000:5d:00.0)"), "{summary}");
    assert_eq!(cuda["action"], "fix_config", "{cuda}");
    live.assert_nothing_left();
}

/// Exclusive_Process: while another live process holds GPU 3's context, the probe's context
/// there is refused (CUDA_ERROR_DEVICE_UNAVAILABLE) and driver.cuda names the mode and the
/// holder NVML lists; once the holder is gone the same GPU takes the probe's context.
#[test]
fn a_second_context_on_an_exclusive_process_gpu_is_refused_while_the_first_lives() {
    let live = live_from("h100-bandwidth-healthy");
    let bus = "0000:5d:00.0";
    edit_json(&live.cuda, |cuda| {
        cuda["devices"][3]["exclusive_process"] = true.into()
    });
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    edit_json(&live.nvml, |nvml| {
        nvml["devices"][3]["compute_mode"] = serde_json::json!({"value": "exclusive_process"});
        nvml["devices"][3]["compute_processes"] = serde_json::json!({"value": [
            {"pid": holder.id(), "used_memory_mib": 1024, "name": "sleep"}
        ]});
    });
    let contexts = live.scratch.path().join("contexts");
    std::fs::create_dir(&contexts).unwrap();
    std::fs::write(contexts.join(format!("{bus}.pid")), holder.id().to_string()).unwrap();

    let run = || {
        let mut cmd = live.command(&["--cuda", "--only", "driver"]);
        cmd.env("GPUDOCTOR_FAKE_CUDA_CONTEXTS", &contexts);
        let out = cmd.output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        check(&report, "driver.cuda").clone()
    };
    let held = run();
    let summary = held["summary"].as_str().unwrap();
    assert!(summary.contains(bus), "{held}");
    assert!(summary.to_lowercase().contains("exclusive"), "{held}");
    assert_ne!(held["status"], "pass", "{held}");

    let _ = holder.kill();
    let _ = holder.wait();
    let free = run();
    assert_eq!(free["status"], "pass", "{free}");
    live.assert_nothing_left();
}

#[test]
fn record_keeps_the_probes_answers_and_the_capture_replays_the_same() {
    let live = live_from("h100-gdr-slow-hca");
    let out_dir = common::tempdir().unwrap();
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

/// scripts/gpu-node-probe.sh, the script a reviewer runs on a real GPU node, run here against
/// the stand-ins: it must print versions, every verdict and figure of the active probes, the
/// time each run took, and leave a capture that replays to the same verdicts.
#[test]
fn the_gpu_node_script_prints_versions_figures_and_verdicts() {
    let live = live_from("h100-gdr-slow-hca");
    let tmp = common::tempdir().unwrap();
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
        .arg(common::fake_cuda_lib());
    live.stand_in_env(&mut cmd);
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
        // How long opening the GPUs took, as found: NVML's init and each handle, then cuInit.
        "driver.nvml_init: pass",
        "nvmlInit ",
        "handles at ",
        "(GPU 0 1 2 3 4 5 6 7)",
        "cuInit took ",
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
    // The probes ran once (the recording); the verdicts are its replay: one loopback per rail.
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    let clients = calls.lines().filter(|l| l.starts_with("client ")).count();
    assert_eq!(clients, 8, "one client per GPU rail, once:\n{calls}");
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

/// The script runs on whatever bash a GPU node has (RHEL 7 ships 4.2, Ubuntu 16.04 4.3): none
/// of the constructs newer than bash 4.0, and no array expanded bare where it may be empty
/// (`set -u` calls an empty `"${a[@]}"` unbound before bash 4.4).
#[test]
fn the_gpu_node_script_keeps_to_bash_4_0() {
    let script = std::fs::read_to_string(common::repo().join("scripts/gpu-node-probe.sh")).unwrap();
    for (construct, since) in [
        ("declare -n", "4.3"),
        ("local -n", "4.3"),
        ("mapfile -d", "4.4"),
        ("readarray -d", "4.4"),
        ("EPOCHREALTIME", "5.0"),
        ("EPOCHSECONDS", "5.0"),
        ("@Q}", "4.4"),
        ("wait -n", "4.3"),
        ("printf '%(", "4.2"),
    ] {
        assert!(
            !script.contains(construct),
            "scripts/gpu-node-probe.sh uses `{construct}` (bash {since})"
        );
    }
    // Arrays that can be empty: only as ${a[@]+"${a[@]}"}.
    for name in ["live_args", "replay_args", "nvml_args"] {
        let bare = format!("\"${{{name}[@]}}\"");
        let guarded = format!("${{{name}[@]+\"${{{name}[@]}}\"}}");
        assert_eq!(
            script.matches(&bare).count(),
            script.matches(&guarded).count(),
            "{name} expanded without the empty-array guard"
        );
    }
    let out = Command::new("bash")
        .arg("-n")
        .arg(common::repo().join("scripts/gpu-node-probe.sh"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The multiarch directory of this machine's libraries, as the host's distribution names it.
const TRIPLET_DIR: &str = if cfg!(target_arch = "aarch64") {
    "usr/lib/aarch64-linux-gnu"
} else {
    "usr/lib/x86_64-linux-gnu"
};

/// A Pod that requests no GPU gets no libcuda from the container toolkit: the host's, under
/// `--root`, is loaded (here the stand-in is nowhere but there, as `libcuda.so.550.54.15` behind
/// its soname link), and a driver mismatch names the library's driver and the kernel module's
/// (not libcuda's CUDA version against NVML's, which NVML reads from libcuda itself). With none
/// under the root, the message says where gpudoctor looked before the loader.
#[test]
fn in_a_pod_without_a_gpu_the_hosts_libcuda_under_the_root_is_loaded() {
    let mut live = live_from("h100-bandwidth-healthy");
    live.own_root();
    let dir = live.root.join(TRIPLET_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(common::fake_cuda_lib(), dir.join("libcuda.so.535.54.03")).unwrap();
    std::os::unix::fs::symlink("libcuda.so.535.54.03", dir.join("libcuda.so.1")).unwrap();
    let out = live
        .command_with_lib(&["--cuda", "--only", "driver"], None)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "pass", "{cuda}\n{}", stderr(&out));
    let shown = format!("{}/libcuda.so.1", dir.display());
    assert!(cuda["evidence"].to_string().contains(&shown), "{cuda}");
    assert!(stderr(&out).contains(&format!("probing with {shown}")));

    // The host's libcuda is of another driver than the module that runs (535 vs 550).
    let mut facts: Value =
        serde_json::from_str(&std::fs::read_to_string(&live.cuda).unwrap()).unwrap();
    facts["init"] = 803.into();
    std::fs::write(&live.cuda, facts.to_string()).unwrap();
    let out = live
        .command_with_lib(&["--cuda", "--only", "driver"], None)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(
        summary.contains("libcuda is driver 535.54.03")
            && summary.contains("the loaded kernel module 550.54.15"),
        "{summary}"
    );

    // Nothing under the root: the container's loader is tried, and the failure says so.
    // Hermetic: the machine may have a libcuda.so.1 of its own (a CUDA workstation, Debian's
    // libcuda1), which the loader would find. glibc's loader takes the first file of the name on
    // LD_LIBRARY_PATH and stops at one that is no ELF object (elf/dl-load.c `open_verify`:
    // "file too short"), so a directory holding such a file is a loader with no usable
    // libcuda, whatever the machine has installed.
    std::fs::remove_file(dir.join("libcuda.so.1")).unwrap();
    let no_libcuda = live.scratch.path().join("no-libcuda");
    std::fs::create_dir_all(&no_libcuda).unwrap();
    std::fs::write(no_libcuda.join("libcuda.so.1"), "not a library\n").unwrap();
    let out = live
        .command_with_lib(&["--cuda", "--only", "driver"], None)
        .env("LD_LIBRARY_PATH", &no_libcuda)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = check(&report, "driver.cuda");
    assert_eq!(cuda["status"], "fail", "{cuda}");
    let summary = cuda["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("none being under {}", live.root.display()))
            && summary.contains("/home/kubernetes/bin/nvidia/lib64")
            && summary.contains("no-libcuda/libcuda.so.1: file too short"),
        "{summary}"
    );
    live.assert_nothing_left();
}
