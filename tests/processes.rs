//! Nothing gpudoctor starts outlives it (issue 13, item 1; src/process/): a fake nccl-tests
//! binary that ignores SIGTERM and forks grandchildren — one in its process group, one that
//! leaves it with `setsid`, and two orphans (their parent exits at once, so they are
//! re-parented: to gpudoctor, the child subreaper, not to init) — is run when the benchmark
//! exits normally, when it hangs past `--nccl-timeout`, and when gpudoctor itself gets
//! SIGTERM, SIGINT or SIGHUP. Afterwards no process the script started may be alive (read from
//! `/proc`), and a normal or timed-out run names what was killed in its evidence.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How many processes the script records in `pids` (itself and four descendants).
const PROCS: usize = 5;

/// A directory with an executable `all_reduce_perf` that ignores SIGTERM (so do its children:
/// an ignored signal stays ignored across fork and exec), starts the descendants, writes
/// `ready`, then runs `tail` (`exec sleep 1000` keeps the leader's pid: five processes).
fn fake_benchmark(tail: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        r#"#!/bin/sh
HERE=$(dirname "$0")
trap '' TERM
echo $$ >> "$HERE/pids"
sleep 1000 & echo $! >> "$HERE/pids"
setsid sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$HERE" &
( sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$HERE" & )
( setsid sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$HERE" & )
while [ "$(wc -l < "$HERE/pids")" -lt {PROCS} ]; do sleep 0.05; done
echo ready > "$HERE/ready"
{tail}
"#
    );
    let path = dir.path().join("all_reduce_perf");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn healthy_log() -> String {
    common::repo()
        .join("fixtures/h100-nccl-healthy/.gpudoctor/nccl/all_reduce_perf.log")
        .display()
        .to_string()
}

/// `gpudoctor check --only nccl` running the fake benchmark, started (not waited for).
fn start(dir: &Path, extra: &[&str]) -> std::process::Child {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args([
            "check",
            "--only",
            "nccl",
            "--format",
            "json",
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
            "--nccl-quick",
            "--nccl-gpus",
            "8",
            "--profile",
            "hgx-h100",
            "--nccl-tests-dir",
        ])
        .arg(dir)
        .arg("--root")
        .arg(&root)
        .args(extra)
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpudoctor starts")
}

/// Wait for `child` at most `limit`; kill it and fail past that.
fn wait_within(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "gpudoctor still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids the script wrote, once all are there.
fn pids(dir: &Path) -> Vec<i32> {
    let text = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
    text.split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// No process of the script is alive: gone from `/proc`, or a zombie (already dead, waiting
/// for whoever inherited it after gpudoctor exited).
fn assert_all_gone(dir: &Path, what: &str) {
    let pids = pids(dir);
    assert_eq!(
        pids.len(),
        PROCS,
        "{what}: the script did not start all: {pids:?}"
    );
    let mut alive = Vec::new();
    for pid in &pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if !stat.is_empty() && state != Some('Z') && state != Some('X') {
            alive.push(stat);
        }
    }
    // Clean up whatever survived before failing, so the machine is not left with it.
    for stat in &alive {
        if let Some(pid) = stat.split_whitespace().next().and_then(|p| p.parse().ok()) {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    assert!(
        alive.is_empty(),
        "{what}: still alive after gpudoctor: {alive:#?}"
    );
}

fn run_completed(report: &Value) -> Value {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap().iter())
        .find(|c| c["code"] == "nccl.run_completed")
        .cloned()
        .unwrap_or_else(|| panic!("no nccl.run_completed in {report:#}"))
}

/// The "process killed by gpudoctor" evidence lines.
fn killed_evidence(check: &Value) -> Vec<String> {
    check["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "process killed by gpudoctor")
        .map(|e| e["observed"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn leftovers_of_a_benchmark_that_exits_normally_are_killed_and_reported() {
    let dir = fake_benchmark(&format!("cat '{}'\nexit 0", healthy_log()));
    let out = wait_within(start(dir.path(), &[]), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_all_gone(dir.path(), "normal exit");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = run_completed(&report);
    assert_eq!(check["status"], "pass", "{check:#}");
    let killed = killed_evidence(&check);
    // The four descendants (the leader exited by itself), each needing SIGKILL.
    assert_eq!(killed.len(), PROCS - 1, "{killed:#?}");
    assert!(killed.iter().all(|k| k.contains("SIGKILL")), "{killed:#?}");
    assert!(
        killed
            .iter()
            .any(|k| k.contains("outside the process group")),
        "{killed:#?}"
    );
    assert!(
        killed.iter().all(|k| k.contains("sleep 1000")),
        "{killed:#?}"
    );
    assert!(stderr.contains("killed what the run left"), "{stderr}");
}

#[test]
fn a_benchmark_past_its_timeout_is_killed_with_all_it_started() {
    let dir = fake_benchmark("exec sleep 1000");
    let child = start(dir.path(), &["--nccl-timeout", "3"]);
    // 3 s timeout + 3 s grace after SIGTERM + slack for a loaded machine.
    let out = wait_within(child, Duration::from_secs(40));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_all_gone(dir.path(), "timeout");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = run_completed(&report);
    assert_eq!(check["status"], "fail");
    assert!(
        check["summary"]
            .to_string()
            .contains("killed by gpudoctor after 3 s")
    );
    let killed = killed_evidence(&check);
    // The leader too, this time: it was still running at the timeout.
    assert_eq!(killed.len(), PROCS, "{killed:#?}");
}

/// gpudoctor gets `signal` while the benchmark runs: it stops the benchmark and all it
/// started, then dies of the same signal.
fn interrupted_by(signal: libc::c_int) {
    let dir = fake_benchmark("exec sleep 1000");
    let child = start(dir.path(), &["--nccl-timeout", "600"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.path().join("ready").exists() {
        assert!(
            Instant::now() < deadline,
            "the fake benchmark never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    let out = wait_within(child, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(signal),
        "{:?}: {stderr}",
        out.status
    );
    assert_all_gone(dir.path(), &format!("signal {signal}"));
    assert!(stderr.contains("stopping what it started"), "{stderr}");
    assert!(out.stdout.is_empty(), "no report after a signal");
}

#[test]
fn sigterm_to_gpudoctor_stops_the_benchmark_and_everything_it_started() {
    interrupted_by(libc::SIGTERM);
}

#[test]
fn sigint_to_gpudoctor_stops_the_benchmark_and_everything_it_started() {
    interrupted_by(libc::SIGINT);
}

#[test]
fn sighup_to_gpudoctor_stops_the_benchmark_and_everything_it_started() {
    interrupted_by(libc::SIGHUP);
}
