//! `record --out` writes a capture that is complete or absent, never through a symlink and
//! never over something that is not a capture (issue 13, items 3, 7 and 8; src/record/out.rs):
//! a symlink planted at `--out` after the check, a read-only and a full `--out` (tmpfs in a
//! mount namespace where the test can make one), concurrent records to one `--out`, a signal
//! in the middle; and a root holding `.gpudoctor/` without a valid manifest is refused, not
//! judged as a live node.

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The healthy fixture as a live root: a copy without its `.gpudoctor/` (a capture would be
/// re-recorded, and refuse `--nvml-lib`), made once per test binary and kept while it runs.
fn fixture() -> PathBuf {
    common::live_root(&common::repo().join("fixtures/hgx-h100-healthy"))
}

/// `gpudoctor record` of the healthy fixture as a live root, NVML absent.
fn record_command(out: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
    command
        .args([
            "record",
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
            "--root",
        ])
        .arg(fixture())
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Names in `dir` starting with a dot: the temporaries a record may leave behind.
fn hidden(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// Wait until a temporary sibling of `out` exists (the record is past its checks and waiting
/// on the kernel-log FIFO).
fn wait_for_temporary(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while hidden(dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "record never created its temporary"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Let a record waiting on the kernel-log FIFO go on.
fn release(fifo: &Path) {
    let mut writer = fs::OpenOptions::new().write(true).open(fifo).unwrap();
    writer
        .write_all(b"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
        .unwrap();
}

/// Issue 13, item 3: root overwrote another file because `record --out` followed a symlink
/// planted after its existence check (sticky /tmp, the README's own example path). The check
/// is passed, then the link is planted while the record waits on its kernel log.
#[test]
fn a_symlink_planted_at_out_after_the_check_is_never_written_through() {
    for name in ["cap", "cap.tar.gz"] {
        let tmp = common::tempdir().unwrap();
        let fifo = tmp.path().join("kmsg");
        common::make_fifo(&fifo);
        let victim_dir = tmp.path().join("victim");
        fs::create_dir(&victim_dir).unwrap();
        fs::write(victim_dir.join("keep"), "precious").unwrap();
        let victim_file = tmp.path().join("victim.tar.gz");
        fs::write(&victim_file, "precious").unwrap();
        let out = tmp.path().join(name);
        let child = record_command(
            &out,
            &["--kernel-log", fifo.to_str().unwrap(), "--timeout", "60"],
        )
        .spawn()
        .unwrap();
        wait_for_temporary(tmp.path());
        let victim = if name.ends_with(".tar.gz") {
            &victim_file
        } else {
            &victim_dir
        };
        symlink(victim, &out).unwrap();
        release(&fifo);
        let result = child.wait_with_output().unwrap();
        assert_eq!(result.status.code(), Some(2), "{name}: {}", stderr(&result));
        assert!(
            stderr(&result).contains("changed while recording"),
            "{}",
            stderr(&result)
        );
        assert_eq!(fs::read_to_string(&victim_file).unwrap(), "precious");
        let victim_names: Vec<_> = fs::read_dir(&victim_dir).unwrap().collect();
        assert_eq!(
            victim_names.len(),
            1,
            "{name}: the victim directory was written into"
        );
        assert!(fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        assert!(hidden(tmp.path()).is_empty(), "{:?}", hidden(tmp.path()));
    }
}

/// The same plant before the run: a symlink at `--out` is refused at once, `--force` or not.
#[test]
fn a_symlink_at_out_is_refused_before_the_run() {
    let tmp = common::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    fs::create_dir(&victim).unwrap();
    let out = tmp.path().join("cap");
    symlink(&victim, &out).unwrap();
    for extra in [&[][..], &["--force"][..]] {
        let result = record_command(&out, extra).output().unwrap();
        assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
        assert!(
            stderr(&result).contains("is a symlink"),
            "{}",
            stderr(&result)
        );
        assert_eq!(fs::read_dir(&victim).unwrap().count(), 0);
    }
}

/// Issue 13, items 7 and 8: concurrent records to one `--out` corrupted it. Now one wins and
/// the others fail cleanly (exit 2), leaving the winner's capture whole and no temporaries.
#[test]
fn concurrent_records_to_one_out_leave_one_whole_capture() {
    for name in ["cap", "cap.tar.gz"] {
        let tmp = common::tempdir().unwrap();
        let out = tmp.path().join(name);
        let children: Vec<_> = (0..3)
            .map(|_| record_command(&out, &[]).spawn().unwrap())
            .collect();
        let results: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let codes: Vec<Option<i32>> = results.iter().map(|r| r.status.code()).collect();
        assert_eq!(
            codes.iter().filter(|c| **c == Some(0)).count(),
            1,
            "{name}: {codes:?}"
        );
        assert!(
            codes.iter().all(|c| matches!(c, Some(0 | 2))),
            "{name}: {codes:?}"
        );
        for r in results.iter().filter(|r| r.status.code() == Some(2)) {
            let err = stderr(r);
            assert!(
                err.contains("changed while recording") || err.contains("earlier capture"),
                "{err}"
            );
        }
        let check =
            common::gpudoctor(&["check", "--root", out.to_str().unwrap(), "--format", "json"]);
        assert!(
            matches!(check.status.code(), Some(0 | 1 | 3)),
            "{name}: the capture does not replay: {}",
            stderr(&check)
        );
        assert!(hidden(tmp.path()).is_empty(), "{:?}", hidden(tmp.path()));
    }
}

/// SIGTERM while recording: the temporary capture is removed, nothing appears at `--out`, and
/// gpudoctor dies of the signal.
#[test]
fn a_signal_while_recording_leaves_nothing() {
    for name in ["cap", "cap.tar.gz"] {
        let tmp = common::tempdir().unwrap();
        let fifo = tmp.path().join("kmsg");
        common::make_fifo(&fifo);
        let out = tmp.path().join(name);
        let child = record_command(
            &out,
            &["--kernel-log", fifo.to_str().unwrap(), "--timeout", "60"],
        )
        .spawn()
        .unwrap();
        wait_for_temporary(tmp.path());
        // SAFETY: kill only sends a signal to the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let result = child.wait_with_output().unwrap();
        assert_eq!(
            result.status.signal(),
            Some(libc::SIGTERM),
            "{}",
            stderr(&result)
        );
        assert!(!out.exists(), "{name}");
        assert!(hidden(tmp.path()).is_empty(), "{:?}", hidden(tmp.path()));
    }
}

/// Run `gpudoctor ARGS` with `dir` a fresh 1 MiB tmpfs (mounted with `opts`, after `prepare`
/// ran in it) in a private mount namespace; returns its output and what was left in `dir`.
/// `None`, with a notice, where this machine does not let the test make one.
fn in_small_tmpfs(
    dir: &Path,
    opts: &str,
    prepare: &str,
    args: &[&str],
) -> Option<(Output, String)> {
    let probe = Command::new("unshare").args(["-rm", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("notice: cannot make a mount namespace here (unshare -rm); tmpfs test skipped");
        return None;
    }
    let script = format!(
        "mount -t tmpfs -o {opts},size=1m none \"$1\" || exit 99\ncd \"$1\" && {prepare}\ncd /\nshift\n\"$@\"\nrc=$?\necho LEFT:\nls -A \"$D\"\nexit $rc"
    );
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script, "sh"])
        .arg(dir)
        .arg(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(args)
        .env("D", dir)
        .current_dir(common::repo())
        .output()
        .unwrap();
    if out.status.code() == Some(99) {
        eprintln!("notice: cannot mount a tmpfs in a mount namespace here; tmpfs test skipped");
        return None;
    }
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let left = stdout
        .split_once("LEFT:\n")
        .map(|(_, l)| l.to_string())
        .unwrap_or_default();
    Some((out, left))
}

/// A kernel log of `bytes` NVIDIA lines (all kept by a capture).
fn big_kernel_log(dir: &Path, bytes: usize) -> PathBuf {
    let path = dir.join("kmsg.txt");
    let mut text = String::new();
    let mut i = 0u64;
    while text.len() < bytes {
        // Not compressible to nothing: a packed capture is large too.
        let noise = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        text.push_str(&format!(
            "NVRM: GPU at PCI:0000:{:02x}:00: GPU-{noise:016x} {}\n",
            i % 256,
            noise.rotate_left(17)
        ));
        i += 1;
    }
    fs::write(&path, text).unwrap();
    path
}

/// Issue 13, item 7: a read-only or full `--out` was found only after the whole run and
/// reported as an internal error (exit 4), twice. Now: exit 2, said once, and nothing left —
/// before the run when `--out` cannot take a byte, at the write when the capture does not fit.
#[test]
fn a_read_only_or_full_out_is_a_usage_error_said_once_and_leaves_nothing() {
    let tmp = common::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let log = big_kernel_log(tmp.path(), 2 << 20);
    let root = fixture();
    let root = root.to_str().unwrap();
    let base = [
        "record",
        "--nvml-lib",
        "/nonexistent/libnvidia-ml.so.1",
        "--root",
        root,
    ];
    let cases: [(&str, &str, &str, &[&str]); 4] = [
        ("read-only", "ro", "true", &[]),
        (
            "full before the run",
            "rw",
            "dd if=/dev/zero of=fill bs=4096 2>/dev/null; true",
            &[],
        ),
        ("full while writing", "rw", "true", &["--kernel-log"]),
        (
            "full while writing, packed",
            "rw",
            "true",
            &["--kernel-log"],
        ),
    ];
    for (what, opts, prepare, extra) in cases {
        let out = if what.ends_with("packed") {
            mnt.join("cap.tar.gz")
        } else {
            mnt.join("cap")
        };
        let mut args: Vec<&str> = base.to_vec();
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend(extra);
        if !extra.is_empty() {
            args.push(log.to_str().unwrap());
        }
        let started = Instant::now();
        let Some((result, left)) = in_small_tmpfs(&mnt, opts, prepare, &args) else {
            return;
        };
        let err = stderr(&result);
        assert_eq!(result.status.code(), Some(2), "{what}: {err}");
        assert_eq!(
            err.matches("gpudoctor: cannot write the capture").count(),
            1,
            "{what}: said once: {err}"
        );
        assert!(!err.contains("internal error"), "{what}: {err}");
        let expected_left = if what == "full before the run" {
            "fill\n"
        } else {
            ""
        };
        assert_eq!(left, expected_left, "{what}: left behind");
        if what != "full while writing" && what != "full while writing, packed" {
            // Said before the run: no layer was probed.
            assert!(started.elapsed() < Duration::from_secs(30), "{what}");
            assert!(!err.contains("wrote"), "{what}: {err}");
        }
    }
}

/// Issue 13, items 6 and 8: a capture cut short (no manifest) replayed as a *live* node, and a
/// `.tar.gz` without a manifest was judged with this machine's NVML. Both are refused now.
#[test]
fn a_root_holding_gpudoctor_without_a_valid_manifest_is_refused() {
    let tmp = common::tempdir().unwrap();
    let cases = [
        ("no manifest", None),
        (
            "manifest that does not parse",
            Some("{\"format_version\": "),
        ),
        ("manifest without a format", Some("{}")),
        ("manifest from the future", Some("{\"format_version\": 99}")),
    ];
    for (what, manifest) in cases {
        let root = tmp.path().join(what.replace(' ', "-"));
        fs::create_dir_all(root.join(".gpudoctor")).unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        if let Some(text) = manifest {
            fs::write(root.join(".gpudoctor/manifest.json"), text).unwrap();
        }
        for command in ["check", "topo"] {
            let out = common::gpudoctor(&[
                command,
                "--root",
                root.to_str().unwrap(),
                "--nvml-lib",
                "/nonexistent/libnvidia-ml.so.1",
            ]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{what}, {command}: {err}");
            assert!(err.contains("is not a complete capture"), "{what}: {err}");
            assert!(out.stdout.is_empty(), "{what}: judged anyway");
        }
    }
    // The same tree packed: refused too, and its unpacked copy removed.
    let packed = tmp.path().join("cut.tar.gz");
    let file = fs::File::create(&packed).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    tar.append_dir_all(".", tmp.path().join("no-manifest"))
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let scratch = common::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(["check", "--root", packed.to_str().unwrap()])
        .env("TMPDIR", scratch.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("--root {}", packed.display())));
    assert_eq!(fs::read_dir(scratch.path()).unwrap().count(), 0);
}

/// `renameat2(a, b, RENAME_EXCHANGE)`: both names stay, their inodes swap atomically.
fn exchange(a: &std::ffi::CStr, b: &std::ffi::CStr) {
    // SAFETY: two NUL-terminated paths; the call only renames.
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        );
    }
}

/// Issue 30, item 1: while `record` walked a live tree that changed under it (a directory
/// swapped for a file or a symlink of the same name), it built the capture with a file where a
/// directory was needed and failed with "cannot write the capture at --out: File exists",
/// blaming `--out` (25 of 80 runs). And a directory swapped for a symlink was recreated in the
/// capture as that symlink, through which the entries under it were then written: outside the
/// capture when the link climbed out of it.
///
/// Here a thread swaps the healthy fixture's `sys/bus/pci/devices` with a regular file, or with
/// a symlink that leaves the tree (`../../../../escape`, the same depth from the root and from
/// the capture), while records run one after another. No run may blame `--out`; each must
/// succeed and replay, listing what changed under it among its unreadable paths, or fail naming
/// the node's path; nothing may appear beside the root or the capture; and some run must have
/// seen the change, or the test did not race.
#[test]
fn a_tree_changing_while_recorded_never_blames_out_nor_writes_outside_the_capture() {
    use std::os::unix::ffi::OsStrExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("live/node");
    common::copy_tree(&fixture(), &root);
    let outs = tmp.path().join("outs");
    fs::create_dir(&outs).unwrap();
    let pci = root.join("sys/bus/pci");
    fs::write(pci.join("swap-file"), "not a directory\n").unwrap();
    symlink("../../../../escape", pci.join("swap-link")).unwrap();
    let mut seen_changed = 0;
    let mut runs = 0;
    for (round, other) in ["swap-file", "swap-link"].into_iter().enumerate() {
        let stop = Arc::new(AtomicBool::new(false));
        let a = std::ffi::CString::new(pci.join("devices").as_os_str().as_bytes()).unwrap();
        let b = std::ffi::CString::new(pci.join(other).as_os_str().as_bytes()).unwrap();
        let flag = stop.clone();
        let swapper = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !flag.load(Ordering::Relaxed) {
                exchange(&a, &b);
                swaps += 1;
            }
            if swaps % 2 == 1 {
                exchange(&a, &b);
            }
            swaps
        });
        for run in 0..40 {
            runs += 1;
            let out = outs.join(format!("cap-{round}-{run}"));
            let result = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
                .args(["record", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"])
                .arg("--root")
                .arg(&root)
                .arg("--out")
                .arg(&out)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = stderr(&result);
            assert!(
                !err.contains("--out") && !err.contains("File exists"),
                "{other}, run {run} blamed --out: {err}"
            );
            if result.status.success() {
                let manifest = fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap();
                // Seen by the walk (a path seen as two kinds of entry, `tree.rs`) or by the
                // looks before and after it (`node_changed`, `changes.rs`): a traced walk
                // resolves each directory once and reads through its descriptor, so the
                // looks are what usually catch a swap.
                if manifest.contains("the node changed during recording")
                    || manifest.contains("\"node_changed\"")
                {
                    seen_changed += 1;
                }
                let replay = common::gpudoctor(&["check", "--root", out.to_str().unwrap()]);
                assert!(
                    matches!(replay.status.code(), Some(0 | 1 | 3)),
                    "{other}, run {run}: the capture does not replay: {}",
                    stderr(&replay)
                );
            } else {
                assert!(
                    err.contains("changed during recording") && err.contains("sys/bus/pci"),
                    "{other}, run {run} failed without naming the changed path: {err}"
                );
                seen_changed += 1;
            }
            for outside in [tmp.path().join("live/escape"), outs.join("escape")] {
                assert!(
                    !outside.exists(),
                    "{other}, run {run} wrote {}",
                    outside.display()
                );
            }
            if seen_changed >= 3 && run >= 10 {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(swapper.join().unwrap() > 100, "the swapper hardly ran");
    }
    assert!(seen_changed > 0, "no run of {runs} saw the tree change");
}

/// Issue 41, item 3: `record` of a root whose PCI devices came and went while it was walked
/// produced captures holding 1 to 5 of the node's 67 PCI devices, saying nothing. Here a thread
/// takes the healthy fixture's 67 `sys/bus/pci/devices` entries away one by one and puts them
/// back (a hot-unplug and a rescan, over and over) while records run. Each capture either
/// holds all 67 with their attributes, or its manifest says `node_changed` and its replay says
/// so (on `driver.gpu_on_pci`); some capture must be a partial one, or the test did not race.
#[test]
fn a_capture_of_a_node_whose_devices_came_and_went_says_so() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("live/node");
    common::copy_tree(&fixture(), &root);
    let devices = root.join("sys/bus/pci/devices");
    let away = root.join("sys/bus/pci/away");
    fs::create_dir(&away).unwrap();
    let names: Vec<std::ffi::OsString> = fs::read_dir(&devices)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 67);
    let outs = tmp.path().join("outs");
    fs::create_dir(&outs).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let mover = {
        let (stop, cycles, devices, away, names) = (
            stop.clone(),
            cycles.clone(),
            devices.clone(),
            away.clone(),
            names.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for (from, to) in [(&devices, &away), (&away, &devices)] {
                    for name in &names {
                        // Gone only when the test ended (its directory removed).
                        if fs::rename(from.join(name), to.join(name)).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
                cycles.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let (mut partial, mut noted, mut runs) = (0, 0, 0);
    for run in 0..12 {
        runs += 1;
        let out = outs.join(format!("cap-{run}"));
        let result = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
            .args(["record", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"])
            .arg("--root")
            .arg(&root)
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(result.status.success(), "run {run}: {}", stderr(&result));
        let held: Vec<std::path::PathBuf> = fs::read_dir(out.join("sys/bus/pci/devices"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        let whole = held.len() == 67 && held.iter().all(|d| d.join("class").is_file());
        let manifest: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(out.join(".gpudoctor/manifest.json")).unwrap(),
        )
        .unwrap();
        let changed = manifest.get("node_changed").is_some_and(|v| !v.is_null());
        if !whole {
            partial += 1;
            assert!(
                changed,
                "run {run}: the capture holds {} of 67 pci devices (or some without their attributes) and its manifest does not say the node changed: {}",
                held.len(),
                manifest["unreadable"]
            );
        }
        if changed {
            noted += 1;
            assert!(
                stderr(&result).contains("the node changed while it was recorded"),
                "run {run}: record did not say so: {}",
                stderr(&result)
            );
            let replay =
                common::gpudoctor(&["check", "--root", out.to_str().unwrap(), "--format", "json"]);
            let report: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
            let gpu_on_pci = report["layers"][0]["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["code"] == "driver.gpu_on_pci")
                .unwrap()
                .to_string();
            assert!(
                gpu_on_pci.contains("the node changed while it was recorded"),
                "run {run}: the replay does not say the capture is inconsistent: {gpu_on_pci}"
            );
        }
        if partial >= 2 && run >= 3 {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    mover.join().unwrap();
    assert!(
        cycles.load(Ordering::Relaxed) > 0,
        "the mover never finished a cycle"
    );
    assert!(
        partial > 0,
        "no capture of {runs} was partial ({noted} noted): the test did not race"
    );
}
