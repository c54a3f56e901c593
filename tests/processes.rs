//! Nothing gpudoctor starts outlives it (issue 13, item 1; src/process/): a fake nccl-tests
//! binary that ignores SIGTERM and forks grandchildren — one in its process group, one that
//! leaves it with `setsid`, and two orphans (their parent exits at once, so they are
//! re-parented: to gpudoctor, the child subreaper, not to init) — is run when the benchmark
//! exits normally, when it hangs past `--nccl-timeout`, and when gpudoctor itself gets
//! SIGTERM, SIGINT or SIGHUP. Afterwards no process the script started may be alive (read from
//! `/proc`), and a normal or timed-out run names what was killed in its evidence.
//!
//! Issue 30: four fork-and-exit chains (`tests/helpers/fork_chain.c`, compiled with `cc` here:
//! each process forks a child and exits every 2 ms, so the chain is a new pid at every look)
//! must not outlive gpudoctor on the timeout path, on SIGTERM, on SIGKILL of gpudoctor itself
//! (the PID namespace's init dies with it), nor in the fallback without a PID namespace
//! (`GPUDOCTOR_CONTAINMENT=group`: freeze-then-kill rounds). Every process a script starts
//! carries `GPUDOCTOR_TEST_MARKER=<its directory's name>` in its environment; "alive" means a
//! process outside the zombie state with that marker, read from `/proc/<pid>/environ` (pids the
//! script prints are its PID namespace's, not ours).
//!
//! Issue 41: the cleanup after a run waits on the processes it stops, never on a clock: one that
//! waits out the SIGTERM grace for a leftover that ignores SIGTERM costs gpudoctor no CPU (it used
//! to spin a core for the whole grace once the output pipes had closed). With several runs at
//! once (`gpudoctor pairs`) in process-group containment, an orphan that left its group is
//! claimed, killed and reported by its own run, never by another.

mod common;
common::tests_mostly_wait!();

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How many processes the script records in `pids` (itself and four descendants).
const PROCS: usize = 5;

/// The environment variable every process a fake benchmark starts inherits.
const MARKER: &str = "GPUDOCTOR_TEST_MARKER";

/// The marker of the fake benchmark in `dir`: the directory's name, unique per test.
fn mark(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// A directory with an executable `all_reduce_perf` that ignores SIGTERM (so do its children:
/// an ignored signal stays ignored across fork and exec), starts the descendants, writes
/// `ready`, then runs `tail` (`exec sleep 1000` keeps the leader's pid: five processes).
fn fake_benchmark(tail: &str) -> tempfile::TempDir {
    let dir = common::tempdir().unwrap();
    let script = format!(
        r#"#!/bin/sh
HERE=$(dirname "$0")
export {MARKER}={mark}
trap '' TERM
echo $$ >> "$HERE/pids"
sleep 1000 & echo $! >> "$HERE/pids"
setsid sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$HERE" &
( sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$HERE" & )
( setsid sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$HERE" & )
while [ "$(wc -l < "$HERE/pids")" -lt {PROCS} ]; do sleep 0.05; done
echo ready > "$HERE/ready"
{tail}
"#,
        mark = mark(dir.path())
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
    start_with(dir, extra, &[])
}

fn start_with(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    common::scratch::gpudoctor_command()
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
        .envs(env.iter().copied())
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

/// Every process of the script is gone: it wrote all its lines (`pids`), and no process with
/// its marker is alive.
fn assert_all_gone(dir: &Path, what: &str) {
    let text = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
    assert_eq!(
        text.lines().count(),
        PROCS,
        "{what}: the script did not start all: {text:?}"
    );
    assert_none_left(dir, what, Duration::ZERO);
}

/// The live processes (not zombies: already dead, waiting for whoever inherited them) whose
/// environment holds the marker of `dir`, with their `stat` lines.
/// Does the process whose `environ` file this is carry `needle` (`NAME=value`)? A process
/// gone meanwhile carries nothing.
fn carries(environ: impl AsRef<Path>, needle: &[u8]) -> bool {
    let environ = std::fs::read(environ).unwrap_or_default();
    environ.split(|b| *b == 0).any(|v| v == needle)
}

fn marked(dir: &Path) -> Vec<(i32, String)> {
    let needle = format!("{MARKER}={}", mark(dir)).into_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if !carries(format!("/proc/{pid}/environ"), &needle) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if !stat.is_empty() && state != Some('Z') && state != Some('X') {
            found.push((pid, stat));
        }
    }
    found
}

/// Nothing of the script is alive, after at most `settle` (the kernel empties a PID namespace
/// asynchronously once gpudoctor is SIGKILLed). Survivors are killed before failing, so the
/// machine is not left with them: a stopped process cannot fork, so SIGSTOP first.
fn assert_none_left(dir: &Path, what: &str, settle: Duration) {
    let until = Instant::now() + settle;
    let mut alive = marked(dir);
    while !alive.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        alive = marked(dir);
    }
    if !alive.is_empty() {
        for _ in 0..1000 {
            let left = marked(dir);
            if left.is_empty() {
                break;
            }
            for sig in [libc::SIGSTOP, libc::SIGKILL] {
                for (pid, _) in &left {
                    // SAFETY: kill only sends a signal, to a process carrying this test's marker.
                    unsafe { libc::kill(*pid, sig) };
                }
            }
        }
    }
    let alive: Vec<String> = alive.into_iter().map(|(_, stat)| stat).collect();
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

/// A fake nccl-tests that ignores SIGTERM and starts four fork-and-exit chains, two in its
/// process group and two in sessions of their own (`setsid`), then hangs.
fn chain_benchmark() -> tempfile::TempDir {
    let dir = common::tempdir().unwrap();
    let helper = common::repo().join("tests/helpers/fork_chain.c");
    let built = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(dir.path().join("fork_chain"))
        .arg(&helper)
        .output()
        .expect("cc runs (gcc is on every machine of this project)");
    assert!(
        built.status.success(),
        "cc {}: {}",
        helper.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let script = format!(
        r#"#!/bin/sh
HERE=$(dirname "$0")
export {MARKER}={mark}
trap '' TERM
"$HERE/fork_chain" chain-1 &
"$HERE/fork_chain" chain-2 &
setsid "$HERE/fork_chain" chain-3 &
setsid "$HERE/fork_chain" chain-4 &
echo ready > "$HERE/ready"
exec sleep 1000
"#,
        mark = mark(dir.path())
    );
    let path = dir.path().join("all_reduce_perf");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Wait until the script is ready and each of its four chains has been seen running (so a
/// test cannot pass because they never started). Each chain is named by its argument
/// (`chain-N`, kept across its forks), and counted once seen in any look: a chain is a new
/// pid every 2 ms, so one look at /proc under load may find none of them alive, and with
/// `--nccl-timeout 3` the looks have only those seconds before gpudoctor kills them.
fn wait_for_chains(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = std::collections::BTreeSet::new();
    loop {
        seen.extend(chains_running(dir));
        if dir.join("ready").exists() && seen.len() >= 4 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the chains never started (seen: {seen:?})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The `chain-N` arguments of this test's fork-and-exit chains alive now. The command line
/// is read first (one read of a short file), the marker only of the few that match.
fn chains_running(dir: &Path) -> Vec<String> {
    let needle = format!("{MARKER}={}", mark(dir)).into_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let mut args = cmdline.split(|b| *b == 0);
        let is_chain = args.next().is_some_and(|a| a.ends_with(b"/fork_chain"));
        let Some(chain) = args.next().filter(|a| a.starts_with(b"chain-")) else {
            continue;
        };
        if !is_chain {
            continue;
        }
        if carries(entry.path().join("environ"), &needle) {
            found.push(String::from_utf8_lossy(chain).into_owned());
        }
    }
    found
}

/// PID namespaces can be made here (`unshare -p -f true`): root, or CAP_SYS_ADMIN.
fn namespaces_allowed() -> bool {
    Command::new("unshare")
        .args(["-p", "-f", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `--nccl-timeout 3` with the chains running: gpudoctor exits 1 at the timeout, nothing of
/// the chains is alive, and the report names them, says what held them, and that none
/// survived.
fn chains_past_the_timeout(env: &[(&str, &str)], containment: &str) {
    let dir = chain_benchmark();
    let child = start_with(dir.path(), &["--nccl-timeout", "3"], env);
    wait_for_chains(dir.path());
    // 3 s timeout, 3 s grace after SIGTERM, up to 3 s of freeze-then-kill, slack.
    let out = wait_within(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_none_left(dir.path(), "timeout", Duration::ZERO);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = run_completed(&report);
    assert_eq!(check["status"], "fail", "{check:#}");
    let killed = killed_evidence(&check);
    assert!(
        killed.iter().filter(|k| k.contains("fork_chain")).count() >= 4,
        "{killed:#?}"
    );
    assert!(
        killed.iter().all(|k| !k.contains("still not gone")),
        "{killed:#?}"
    );
    let held: Vec<&Value> = check["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "containment")
        .collect();
    assert_eq!(held.len(), 1, "{check:#}");
    assert!(
        held[0]["observed"]
            .as_str()
            .unwrap()
            .starts_with(containment),
        "{check:#}"
    );
}

#[test]
fn fork_and_exit_chains_past_the_timeout_are_all_killed_and_reported() {
    let containment = if namespaces_allowed() {
        "pid namespace"
    } else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI: PID namespaces must be allowed (run as root)"
        );
        "process group"
    };
    chains_past_the_timeout(&[], containment);
}

#[test]
fn without_a_pid_namespace_freeze_then_kill_rounds_still_end_every_chain() {
    chains_past_the_timeout(&[("GPUDOCTOR_CONTAINMENT", "group")], "process group");
}

/// gpudoctor gets `signal` with the chains running; afterwards none of them is alive (after
/// `settle`: a SIGKILLed gpudoctor's namespace is emptied by the kernel, not by gpudoctor).
fn chains_when_gpudoctor_gets(signal: libc::c_int, settle: Duration) {
    let dir = chain_benchmark();
    let child = start(dir.path(), &["--nccl-timeout", "600"]);
    wait_for_chains(dir.path());
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    let out = wait_within(child, Duration::from_secs(40));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(signal),
        "{:?}: {stderr}",
        out.status
    );
    assert_none_left(dir.path(), &format!("signal {signal}"), settle);
}

#[test]
fn sigterm_to_gpudoctor_ends_fork_and_exit_chains() {
    chains_when_gpudoctor_gets(libc::SIGTERM, Duration::ZERO);
}

#[test]
fn sigkill_to_gpudoctor_ends_fork_and_exit_chains() {
    if !namespaces_allowed() {
        // Without a PID namespace only the benchmark itself dies with gpudoctor (PDEATHSIG);
        // docs/security.md says so. A machine that should hold the promise must not skip.
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI: PID namespaces must be allowed (run as root)"
        );
        eprintln!("skipped: PID namespaces are not allowed here (not root?)");
        return;
    }
    chains_when_gpudoctor_gets(libc::SIGKILL, Duration::from_secs(5));
}

/// Wait for `child` at most `limit`, its output read as it comes; its CPU time (user and
/// system, its reaped descendants included: `wait4(2)`) and the wall time from `started`.
fn wait_measured(
    mut child: std::process::Child,
    started: Instant,
    limit: Duration,
) -> (std::process::Output, Duration, Duration) {
    use std::io::Read;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stdout.read_to_end(&mut buf).unwrap();
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stderr.read_to_end(&mut buf).unwrap();
        buf
    });
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid for the kernel to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on the child this test started, with valid out-pointers.
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("gpudoctor still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = started.elapsed();
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = time(usage.ru_utime) + time(usage.ru_stime);
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    (output, cpu, wall)
}

/// A fake benchmark that leaves an orphan ignoring SIGTERM, with the output pipes closed (its
/// stdio on /dev/null), then prints a healthy run and exits 0: the cleanup has only that orphan
/// to wait for, through the whole grace, and nothing to read.
fn orphan_ignoring_sigterm() -> tempfile::TempDir {
    let dir = common::tempdir().unwrap();
    let script = format!(
        r#"#!/bin/sh
export {MARKER}={mark}
trap '' TERM
( setsid sh -c 'exec sleep 1000' </dev/null >/dev/null 2>&1 & )
cat '{log}'
exit 0
"#,
        mark = mark(dir.path()),
        log = healthy_log()
    );
    let path = dir.path().join("all_reduce_perf");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The cleanup waits out the 3 s grace for the orphan, then kills it; gpudoctor's CPU over the
/// whole run stays a small fraction of that wait (it spent 1.5 s of a loaded two-core machine's
/// CPU, 3 s of an idle one's, spinning on the closed pipes).
fn a_cleanup_waits_without_cpu(env: &[(&str, &str)]) {
    let dir = orphan_ignoring_sigterm();
    let started = Instant::now();
    let child = start_with(dir.path(), &[], env);
    let (out, cpu, wall) = wait_measured(child, started, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_none_left(dir.path(), "an orphan ignoring SIGTERM", Duration::ZERO);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let killed = killed_evidence(&run_completed(&report));
    assert!(
        killed.len() == 1 && killed[0].contains("sleep 1000") && killed[0].contains("SIGKILL"),
        "the orphan outlived the grace and was killed: {killed:#?}"
    );
    assert!(
        wall >= Duration::from_secs(3),
        "the grace was waited out: {wall:?}"
    );
    assert!(
        cpu < Duration::from_millis(500),
        "{cpu:?} of CPU for a run of {wall:?} that mostly waited"
    );
}

#[test]
fn a_cleanup_that_waits_out_the_grace_costs_no_cpu() {
    a_cleanup_waits_without_cpu(&[]);
}

#[test]
fn a_cleanup_that_waits_out_the_grace_costs_no_cpu_without_a_pid_namespace() {
    a_cleanup_waits_without_cpu(&[("GPUDOCTOR_CONTAINMENT", "group")]);
}

/// Issue 41: a `check` that has started nothing and made no temporary tree is one thread (glibc
/// then takes its single-thread paths: malloc without arena locks, system calls without the
/// cancellation bookkeeping), and a signal then ends it at once, of that signal: there is
/// nothing to stop or remove, so no watcher thread is needed (src/process/signals.rs).
#[test]
fn a_check_that_started_nothing_is_one_thread_and_dies_of_a_signal_at_once() {
    let dir = common::tempdir().unwrap();
    let fifo = dir.path().join("lab.toml");
    common::make_fifo(&fifo);
    // A plain fixture (not an overlay, which is composed in a temporary tree): the check waits
    // up to five seconds for the profile FIFO's writer.
    let child = common::scratch::gpudoctor_command()
        .args(["check", "--root"])
        .arg(common::repo().join("fixtures/hgx-h100-healthy"))
        .arg("--profile")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let fds = format!("/proc/{}/fd", child.id());
    let deadline = Instant::now() + Duration::from_secs(4);
    let waits_on_the_fifo = || {
        std::fs::read_dir(&fds).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == fifo))
        })
    };
    while !waits_on_the_fifo() {
        assert!(Instant::now() < deadline, "never opened the profile FIFO");
        std::thread::sleep(Duration::from_millis(5));
    }
    let threads = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .unwrap()
        .count();
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = wait_within(child, Duration::from_secs(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(threads, 1, "threads of a check that started nothing");
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{stderr}");
    assert!(out.stdout.is_empty(), "no report after a signal");
}
