//! The `nccl` layer end to end with fake nccl-tests binaries: shell scripts written into a
//! temporary directory that print real-format output (the fixture logs, which follow
//! reference/nccl.md line by line), hang until killed, crash midway, print hundreds of
//! megabytes or garbage. The runner's argument choice, environment, progress lines, timeout and
//! process-group kill are checked through the `gpudoctor` binary, as an operator runs it.
//!
//! Every run uses `--root <empty dir>`, `--only nccl` and an NVML library that does not exist,
//! so nothing depends on this machine's /sys or GPUs (on a GPU host NVML would pick another
//! profile); the profile comes from `--profile` or from the log's own device lines.

mod common;
common::tests_mostly_wait!();

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn fixture_log(name: &str) -> PathBuf {
    common::repo()
        .join("fixtures")
        .join(name)
        .join(".gpudoctor/nccl/all_reduce_perf.log")
}

/// A directory holding an executable `all_reduce_perf` with this shell body. The script
/// records its arguments and environment next to itself.
fn fake_tests(body: &str) -> tempfile::TempDir {
    let dir = common::tempdir().unwrap();
    let script = format!(
        "#!/bin/sh\nHERE=$(dirname \"$0\")\necho \"$@\" > \"$HERE/args\"\nenv > \"$HERE/env\"\n{body}\n"
    );
    let path = dir.path().join("all_reduce_perf");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Like [`fake_tests`], for another collective's binary (`all_gather_perf`).
fn fake_named(binary: &str, body: &str) -> tempfile::TempDir {
    let dir = common::tempdir().unwrap();
    let script =
        format!("#!/bin/sh\nHERE=$(dirname \"$0\")\necho \"$@\" > \"$HERE/args\"\n{body}\n");
    let path = dir.path().join(binary);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn cat(name: &str) -> String {
    format!("cat '{}'", fixture_log(name).display())
}

/// Never load this machine's NVML (see the module doc).
const NO_NVML: &str = "/nonexistent/libnvidia-ml.so.1";

/// `gpudoctor check --only nccl --root <empty> --format json ARGS` with a clean NCCL env.
fn check(args: &[&str], env: &[(&str, &str)]) -> (Output, Value, Duration) {
    let root = common::tempdir().unwrap();
    let mut command = common::scratch::gpudoctor_command();
    command.args(["check", "--only", "nccl", "--format", "json"]);
    // No NVML unless the test names one (the stand-in).
    if !args.contains(&"--nvml-lib") {
        command.args(["--nvml-lib", NO_NVML]);
    }
    command
        .arg("--root")
        .arg(root.path())
        .args(args)
        .current_dir(common::repo())
        // No NCCL_* of the machine running the tests, and no binary found by accident.
        .env("PATH", "/usr/bin:/bin");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("NCCL_")) {
        command.env_remove(k);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let out = command.output().expect("gpudoctor runs");
    let took = started.elapsed();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not json ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report, took)
}

fn nccl_layer(report: &Value) -> &Value {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "nccl")
        .unwrap()
}

fn result<'a>(report: &'a Value, code: &str) -> &'a Value {
    nccl_layer(report)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {report:#}"))
}

fn findings(report: &Value) -> Vec<String> {
    nccl_layer(report)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| ["warn", "fail", "error"].contains(&c["status"].as_str().unwrap()))
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn run_args(dir: &Path) -> Vec<String> {
    [
        "--nccl-quick",
        "--nccl-gpus",
        "8",
        "--profile",
        "hgx-h100",
        "--nccl-tests-dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.display().to_string()])
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn healthy_run_passes_with_the_chosen_arguments_and_environment() {
    let dir = fake_tests(&cat("h100-nccl-healthy"));
    let args = run_args(dir.path());
    let (out, report, _) = check(
        &strs(&args),
        &[
            ("NCCL_DEBUG", "WARN"),
            ("NCCL_DEBUG_FILE", "/tmp/nccl.%h.%p"),
            ("NCCL_IB_HCA", "mlx5_0,mlx5_1"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(nccl_layer(&report)["status"], "pass");
    assert!(findings(&report).is_empty());
    let seen_args = std::fs::read_to_string(dir.path().join("args")).unwrap();
    assert_eq!(seen_args.trim(), "-b 1G -e 8G -f 2 -g 8 -c 1");
    let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
    assert!(env.lines().any(|l| l == "NCCL_DEBUG=INFO"), "{env}");
    assert!(env.lines().any(|l| l == "NCCL_IB_HCA=mlx5_0,mlx5_1"));
    assert!(!env.contains("NCCL_DEBUG_FILE"));
    // The user's NCCL_* settings and what gpudoctor changed are reported.
    let completed = result(&report, "nccl.run_completed");
    let evidence = completed["evidence"].to_string();
    assert!(
        evidence.contains("inherited NCCL_IB_HCA=mlx5_0,mlx5_1"),
        "{evidence}"
    );
    assert!(
        evidence.contains("NCCL_DEBUG=INFO (was WARN)"),
        "{evidence}"
    );
    assert!(evidence.contains("NCCL_DEBUG_FILE removed"), "{evidence}");
    let err = stderr(&out);
    assert!(err.contains("gpudoctor: nccl: running `"), "{err}");
    assert!(
        err.contains("your NCCL_* settings: NCCL_IB_HCA=mlx5_0,mlx5_1"),
        "{err}"
    );
    assert!(err.contains("exited 0"), "{err}");
    let bw = result(&report, "nccl.bus_bandwidth");
    assert!(
        bw["summary"]
            .as_str()
            .unwrap()
            .contains("482.6 GB/s at 8 GiB"),
        "{bw}"
    );
}

#[test]
fn slow_run_fails_the_bandwidth_check_with_both_numbers() {
    let dir = fake_tests(&cat("h100-nccl-low-bandwidth"));
    let (out, report, _) = check(&strs(&run_args(dir.path())), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(findings(&report), vec!["nccl.bus_bandwidth"]);
    let summary = result(&report, "nccl.bus_bandwidth")["summary"].to_string();
    assert!(
        summary.contains("401.5") && summary.contains("460"),
        "{summary}"
    );
    assert_eq!(report["first_failure"]["code"], "nccl.bus_bandwidth");
}

/// The same slow run while NVML lists another process on one GPU: what it measured is the
/// sharing, so the bandwidth check is inconclusive (exit 3), never a slow node; stderr names the
/// holder before the run starts.
#[test]
fn a_slow_run_beside_another_process_is_inconclusive() {
    let dir = fake_tests(&cat("h100-nccl-low-bandwidth"));
    let scratch = common::tempdir().unwrap();
    let mut nvml: Value = serde_json::from_str(
        &std::fs::read_to_string(
            common::repo().join("fixtures/hgx-h100-healthy/.gpudoctor/nvml.json"),
        )
        .unwrap(),
    )
    .unwrap();
    nvml["devices"][2]["compute_processes"] =
        serde_json::json!({"value": [{"pid": 60321, "used_memory_mib": 10240}]});
    let nvml_json = scratch.path().join("nvml.json");
    std::fs::write(&nvml_json, nvml.to_string()).unwrap();
    let mut args = run_args(dir.path());
    args.extend([
        "--nvml-lib".to_string(),
        common::fake_nvml_lib().display().to_string(),
    ]);
    let (out, report, _) = check(
        &strs(&args),
        &[(common::FAKE_NVML_JSON, nvml_json.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let bw = result(&report, "nccl.bus_bandwidth");
    assert_eq!(bw["status"], "error", "{bw}");
    let summary = bw["summary"].as_str().unwrap();
    assert!(
        summary.contains("401.5")
            && summary
                .contains("is inconclusive because GPU 2 (0000:3a:00.0) was held by pid 60321"),
        "{summary}"
    );
    assert!(
        stderr(&out).contains("gpudoctor: nccl: gpu 0000:3a:00.0 is held by pid 60321"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn wrong_values_fail_even_when_the_exit_status_says_why() {
    let dir = fake_tests(&format!("{}\nexit 7", cat("h100-nccl-wrong-values")));
    let (out, report, _) = check(&strs(&run_args(dir.path())), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(findings(&report), vec!["nccl.wrong_results"]);
    assert_eq!(result(&report, "nccl.run_completed")["status"], "pass");
}

#[test]
fn a_failing_run_names_the_nccl_error_and_the_layer_behind_it() {
    let dir = fake_tests(&format!("{}\nexit 3", cat("h100-nccl-ib-system-error")));
    let (out, report, _) = check(&strs(&run_args(dir.path())), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(findings(&report), vec!["nccl.test_errors"]);
    let summary = result(&report, "nccl.test_errors")["summary"].to_string();
    assert!(summary.contains("unhandled system error"), "{summary}");
    assert!(summary.contains("RDMA layer"), "{summary}");
    assert!(stderr(&out).contains("exited 3"));
}

#[test]
fn a_hang_is_killed_with_its_whole_process_group_and_the_output_so_far_is_judged() {
    // The script and its children ignore SIGTERM, so only the SIGKILL escalation ends them.
    let dir = fake_tests(&format!(
        "trap '' TERM\n{}\nsleep 1000 & echo $! > \"$HERE/pids\"\nsh -c 'sleep 1000' & echo $! >> \"$HERE/pids\"\necho $$ >> \"$HERE/pids\"\nwait",
        cat("h100-nccl-hang")
    ));
    let mut args = run_args(dir.path());
    args.extend(["--nccl-timeout".to_string(), "3".to_string()]);
    // The pids the script prints are looked up in /proc below: they are this machine's pids
    // only without a PID namespace (tests/processes.rs holds the namespace's promise).
    let (out, report, took) = check(&strs(&args), &[("GPUDOCTOR_CONTAINMENT", "group")]);
    // 3 s timeout + 3 s SIGTERM grace + slack for a loaded machine.
    assert!(took < Duration::from_secs(17), "took {took:?}");
    assert!(took >= Duration::from_secs(3), "took {took:?}");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(findings(&report), vec!["nccl.run_completed"]);
    let summary = result(&report, "nccl.run_completed")["summary"].to_string();
    assert!(
        summary.contains("killed by gpudoctor after 3 s") && summary.contains("128 MiB"),
        "{summary}"
    );
    // Progress: elapsed time and the last size done.
    let err = stderr(&out);
    assert!(err.contains("s elapsed, last size 128 MiB"), "{err}");
    assert!(err.contains("killed at the timeout"), "{err}");
    // Every process of the group is gone (or a zombie waiting for init to reap it).
    let pids = std::fs::read_to_string(dir.path().join("pids")).unwrap();
    for pid in pids.split_whitespace() {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            if stat.is_empty() || state == Some('Z') {
                break;
            }
            assert!(Instant::now() < deadline, "process {pid} survived: {stat}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_crash_midway_is_reported_with_its_last_lines() {
    let dir = fake_tests(&format!(
        "{} | head -n 100\nkill -SEGV $$",
        cat("h100-nccl-healthy")
    ));
    let (out, report, _) = check(&strs(&run_args(dir.path())), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(findings(&report).contains(&"nccl.run_completed".to_string()));
    let completed = result(&report, "nccl.run_completed");
    let summary = completed["summary"].to_string();
    assert!(summary.contains("killed by signal 11"), "{summary}");
    assert!(!completed["evidence"].as_array().unwrap().is_empty());
}

/// Peak resident memory of a running process, sampled until it exits.
fn run_sampling_rss(mut command: Command) -> (Output, u64) {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0u64;
        loop {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                return peak;
            };
            let rss = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok());
            match rss {
                Some(kb) => peak = peak.max(kb * 1024),
                None => return peak,
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let out = child.wait_with_output().unwrap();
    (out, sampler.join().unwrap())
}

#[test]
fn garbage_and_a_huge_output_are_skipped_in_bounded_memory() {
    // 1 MB of random bytes, a 200 MB line, 500k lines of noise, then a healthy run.
    let dir = fake_tests(&format!(
        "head -c 1000000 /dev/urandom\nprintf '\\n'\nhead -c 200000000 /dev/zero | tr '\\0' 7\nprintf '\\n'\nyes 'Authorization required, but no authorization protocol specified' | head -n 500000\n{}",
        cat("h100-nccl-healthy")
    ));
    let root = common::tempdir().unwrap();
    let mut command = common::scratch::gpudoctor_command();
    command
        .args([
            "check",
            "--only",
            "nccl",
            "--format",
            "json",
            "--nvml-lib",
            NO_NVML,
        ])
        .arg("--root")
        .arg(root.path())
        .args(run_args(dir.path()))
        .env("PATH", "/usr/bin:/bin");
    let (out, peak) = run_sampling_rss(command);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = result(&report, "nccl.run_completed")["summary"].to_string();
    assert!(summary.contains("unreadable line(s)"), "{summary}");
    assert_eq!(result(&report, "nccl.bus_bandwidth")["status"], "pass");
    // The 200 MB line and 40 MB of noise never sit in memory (head and tail of the output are
    // kept, 4 MiB each, for `gpudoctor record`).
    assert!(
        peak > 0 && peak < 120 * 1024 * 1024,
        "peak rss {peak} bytes"
    );
}

/// Asked means required (issue 19): `--nccl-quick` with a missing nccl-tests directory fails the
/// layer (exit 1), naming where it looked and how to install, instead of passing as `skip`.
#[test]
fn a_requested_run_without_binaries_fails_saying_where_it_looked_and_how_to_install() {
    let empty = common::tempdir().unwrap();
    let missing = empty.path().join("nccl-tests");
    for quick in [true, false] {
        let mut args = run_args(&missing);
        if !quick {
            args[0] = "--nccl".to_string();
        }
        let (out, report, _) = check(&strs(&args), &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let layer = nccl_layer(&report);
        assert_eq!(layer["status"], "fail");
        assert_eq!(report["first_failure"]["code"], "nccl.run_completed");
        let check = result(&report, "nccl.run_completed");
        assert_eq!(check["status"], "fail");
        assert_eq!(check["action"], "fix_config");
        let summary = check["summary"].as_str().unwrap();
        assert!(
            summary.contains("all_reduce_perf was not found"),
            "{summary}"
        );
        assert!(!summary.contains("not requested"), "{summary}");
        let looked = check["evidence"][0]["observed"].as_str().unwrap();
        // Only the directory given (and its build/): a wrong --nccl-tests-dir never falls back
        // to another build on PATH.
        assert_eq!(
            looked,
            format!("{0}, {0}/build", missing.display()),
            "{looked}"
        );
        let hint = check["hint"].as_str().unwrap();
        assert!(hint.contains("github.com/NVIDIA/nccl-tests"), "{hint}");
        // The checks that judge results have nothing to judge and say where to look.
        let bw = result(&report, "nccl.bus_bandwidth");
        assert_eq!(bw["status"], "skip");
        assert!(
            bw["summary"]
                .as_str()
                .unwrap()
                .contains("nccl.run_completed")
        );
    }
}

/// A `--nccl-log` that cannot be read was asked for too: the layer fails naming the file.
#[test]
fn a_requested_log_that_cannot_be_read_fails_naming_it() {
    let dir = common::tempdir().unwrap();
    let missing = dir.path().join("all_reduce.log");
    let (out, report, _) = check(&["--nccl-log", missing.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let check = result(&report, "nccl.run_completed");
    assert_eq!(check["status"], "fail");
    let summary = check["summary"].as_str().unwrap();
    assert!(
        summary.contains(&missing.display().to_string()),
        "{summary}"
    );
}

/// Without --nccl-tests-dir the search covers PATH and the usual install directories, and a
/// requested run that finds nothing there fails all the same.
#[test]
fn a_requested_run_searches_path_and_the_usual_directories() {
    let (out, report, _) = check(&["--nccl-quick", "--nccl-gpus", "8"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let looked = result(&report, "nccl.run_completed")["evidence"][0]["observed"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(looked.contains("PATH=/usr/bin:/bin"), "{looked}");
    assert!(looked.contains("/opt/nccl-tests/build"), "{looked}");
}

#[test]
fn without_a_request_the_layer_skips_and_says_how_to_ask() {
    let (out, report, _) = check(&[], &[]);
    assert_eq!(out.status.code(), Some(0));
    let layer = nccl_layer(&report);
    assert_eq!(layer["status"], "skip");
    let reason = layer["reason"].as_str().unwrap();
    assert!(
        reason.contains("--nccl") && reason.contains("--nccl-log"),
        "{reason}"
    );
    assert!(stderr(&out).is_empty() || !stderr(&out).contains("running"));
}

#[test]
fn the_launcher_is_passed_through_unchanged() {
    let dir = fake_tests(&cat("h100-nccl-socket-fallback"));
    // A stand-in for mpirun: records its argv, then runs everything from the test binary on.
    let launcher = dir.path().join("fake-mpirun");
    std::fs::write(
        &launcher,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$(dirname \"$0\")/launcher-args\"\nwhile [ $# -gt 0 ]; do case \"$1\" in */all_reduce_perf) exec \"$@\";; esac; shift; done\nexit 99\n",
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let line = format!(
        "{} -np 16 -H a:8,b:8 -x NCCL_IB_HCA='mlx5_0 mlx5_1' --tag-output",
        launcher.display()
    );
    let args = [
        "--nccl-quick",
        "--profile",
        "hgx-h100",
        "--nccl-launcher",
        &line,
        "--nccl-tests-dir",
        &dir.path().display().to_string(),
    ]
    .map(str::to_string);
    let (out, report, _) = check(&strs(&args), &[]);
    let recorded = std::fs::read_to_string(dir.path().join("launcher-args")).unwrap();
    let binary = dir.path().join("all_reduce_perf").display().to_string();
    let expected = format!(
        "-np\n16\n-H\na:8,b:8\n-x\nNCCL_IB_HCA=mlx5_0 mlx5_1\n--tag-output\n{binary}\n-b\n1G\n-e\n8G\n-f\n2\n-g\n1\n-c\n1\n"
    );
    assert_eq!(recorded, expected);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["first_failure"]["code"], "nccl.socket_fallback");
}

/// "Done when": `gpudoctor check --only nccl --nccl-log <file>` gives each fixture log the
/// verdict its fixture expects, judged off-node (empty root, profile from the log).
#[test]
fn every_fixture_log_gets_its_verdict_from_nccl_log() {
    let mut seen = 0;
    for dir in common::fixtures() {
        // The fixture's one log: nccl-tests output, or an application's (`train.log`).
        let logs: Vec<PathBuf> = std::fs::read_dir(dir.join(".gpudoctor/nccl"))
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        let [log] = logs.as_slice() else {
            assert!(
                logs.is_empty(),
                "{}: one log per NCCL fixture",
                dir.display()
            );
            continue;
        };
        seen += 1;
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(".gpudoctor/manifest.json")).unwrap(),
        )
        .unwrap();
        let expect = &manifest["expect"];
        let log = log.display().to_string();
        let (out, report, _) = check(&["--nccl-log", &log], &[]);
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            Value::from(out.status.code().unwrap()),
            expect["exit_code"],
            "{name}: {report:#}"
        );
        let mut wanted: Vec<String> = expect["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .filter(|c| c.starts_with("nccl."))
            .collect();
        wanted.sort();
        let mut got = findings(&report);
        got.sort();
        assert_eq!(got, wanted, "{name}");
    }
    assert!(seen >= 12, "expected the twelve NCCL fixtures, saw {seen}");
}

#[test]
fn record_keeps_the_run_and_its_replay_gives_the_same_verdict() {
    let tests = fake_tests(&format!("{}\nexit 7", cat("h100-nccl-wrong-values")));
    let root = common::tempdir().unwrap();
    let out_dir = common::tempdir().unwrap();
    let capture = out_dir.path().join("cap");
    let out = common::scratch::gpudoctor_command()
        .args(["record", "--no-redact", "--nvml-lib", NO_NVML, "--root"])
        .arg(root.path())
        .arg("--out")
        .arg(&capture)
        .args(["--nccl-quick", "--nccl-gpus", "8", "--nccl-tests-dir"])
        .arg(tests.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::read_to_string(capture.join(".gpudoctor/nccl/all_reduce_perf.log")).unwrap();
    assert_eq!(
        log,
        std::fs::read_to_string(fixture_log("h100-nccl-wrong-values")).unwrap()
    );
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(capture.join(".gpudoctor/nccl/all_reduce_perf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["exit"]["code"], 7);
    assert_eq!(meta["command"][1], "-b");
    // A capture answers NVML from its nvml.json: --nvml-lib would be a usage error (issue 14).
    let replayed = common::gpudoctor(&[
        "check",
        "--only",
        "nccl",
        "--format",
        "json",
        "--profile",
        "hgx-h100",
        "--root",
        &capture.display().to_string(),
    ]);
    let report: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(findings(&report), vec!["nccl.wrong_results"]);
}

#[test]
fn another_collective_runs_its_own_binary_and_is_not_judged_by_all_reduce_figures() {
    // all_gather_perf prints the same table; its reduction column reads `none`.
    let dir = fake_named(
        "all_gather_perf",
        &format!(
            "sed -e 's/all_reduce_perf/all_gather_perf/' -e 's/ sum / none /' '{}'",
            fixture_log("h100-nccl-healthy").display()
        ),
    );
    let mut args = run_args(dir.path());
    args.extend(["--nccl-test".to_string(), "all_gather".to_string()]);
    let (out, report, _) = check(&strs(&args), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen_args = std::fs::read_to_string(dir.path().join("args")).unwrap();
    assert_eq!(seen_args.trim(), "-b 1G -e 8G -f 2 -g 8 -c 1");
    assert!(stderr(&out).contains("all_gather_perf"), "{}", stderr(&out));
    let completed = result(&report, "nccl.run_completed")["summary"].to_string();
    assert!(
        completed.contains("all_gather ran to its footer"),
        "{completed}"
    );
    // The profile's figures are for all_reduce: the peak is reported, not judged against them.
    let bw = result(&report, "nccl.bus_bandwidth");
    assert_eq!(bw["status"], "pass", "{bw}");
    assert!(
        bw["summary"]
            .as_str()
            .unwrap()
            .contains("profile hgx-h100 states all_reduce figures only, not all_gather"),
        "{bw}"
    );
    assert_eq!(bw["figures"][0]["labels"]["test"], "all_gather", "{bw}");

    // Asked for all_gather where only all_reduce_perf exists: a failure naming the binary it
    // wanted (asked means required), never all_reduce in its place.
    let only_reduce = fake_tests(&cat("h100-nccl-healthy"));
    let mut args = run_args(only_reduce.path());
    args.extend(["--nccl-test".to_string(), "all_gather".to_string()]);
    let (out, report, _) = check(&strs(&args), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let summary = result(&report, "nccl.run_completed")["summary"].to_string();
    assert!(
        summary.contains("all_gather_perf was not found"),
        "{summary}"
    );
}

/// `check --only nccl --nccl-quick` on a live root (no manifest) with this NVML library and
/// `nvml.json`, without --nccl-gpus; returns the `-g` the fake binary was given.
fn gpus_chosen(root: &Path, nvml_lib: &Path, nvml_json: Option<&Path>) -> String {
    let dir = fake_tests(&cat("h100-nccl-healthy"));
    let mut command = common::scratch::gpudoctor_command();
    command
        .args([
            "check",
            "--only",
            "nccl",
            "--format",
            "json",
            "--nccl-quick",
        ])
        .args(["--profile", "hgx-h100", "--nvml-lib"])
        .arg(nvml_lib)
        .arg("--root")
        .arg(root)
        .arg("--nccl-tests-dir")
        .arg(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove(common::FAKE_NVML_JSON);
    if let Some(json) = nvml_json {
        command.env(common::FAKE_NVML_JSON, json);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.code() == Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
    let words: Vec<&str> = args.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "-g").unwrap();
    words[at + 1].to_string()
}

#[test]
fn without_nccl_gpus_the_gpu_count_comes_from_nvml_then_the_driver() {
    // NVML (the stand-in library answering from the healthy node's nvml.json) sees 8 GPUs.
    let root = common::tempdir().unwrap();
    let nvml_json = common::repo().join("fixtures/hgx-h100-healthy/.gpudoctor/nvml.json");
    assert_eq!(
        gpus_chosen(root.path(), common::fake_nvml_lib(), Some(&nvml_json)),
        "8"
    );
    // No NVML: the driver's own list of GPUs (/proc/driver/nvidia/gpus/<bdf>).
    for bdf in ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"] {
        std::fs::create_dir_all(root.path().join("proc/driver/nvidia/gpus").join(bdf)).unwrap();
    }
    assert_eq!(gpus_chosen(root.path(), Path::new(NO_NVML), None), "3");
    // Neither: one GPU, the least that can run.
    let empty = common::tempdir().unwrap();
    assert_eq!(gpus_chosen(empty.path(), Path::new(NO_NVML), None), "1");
}
