//! A replay must never read the machine it runs on, and a damaged tree must give results, not a
//! hang or a panic (DESIGN.md: "the worst bug this project can have").

mod common;

use std::fs;
use std::os::unix::fs::{OpenOptionsExt, symlink};
use std::path::Path;

use serde_json::Value;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A tree outside the root that looks like a healthy GPU node: if any of it leaks into the
/// report, the reader followed a link out of the root.
fn bait(dir: &Path) {
    write(&dir.join("gpu/vendor"), "0x10de\n");
    write(&dir.join("gpu/device"), "0x2330\n");
    write(&dir.join("gpu/class"), "0x030200\n");
    write(
        &dir.join("modules"),
        "nvidia 54165504 270 - Live 0x0000000000000000 (POE)\n",
    );
}

fn capture(root: &Path) {
    write(
        &root.join(".gpudoctor/manifest.json"),
        r#"{"format_version": 1}"#,
    );
    write(
        &root.join(".gpudoctor/nvml.json"),
        r#"{"init_error": {"kind": "driver_not_loaded", "message": "Driver Not Loaded"}}"#,
    );
    fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
}

fn check(root: &Path) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
        "--keep-going",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn result<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == code)
        .unwrap()
}

#[test]
fn absolute_and_escaping_symlinks_never_read_outside_the_root() {
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    bait(&outer.path().join("bait"));
    capture(&root);
    let devices = root.join("sys/bus/pci/devices");
    // Absolute target, and a relative one that climbs past the root.
    symlink(outer.path().join("bait/gpu"), devices.join("0000:18:00.0")).unwrap();
    symlink("../../../../../bait/gpu", devices.join("0000:2a:00.0")).unwrap();
    symlink(outer.path().join("bait/modules"), root.join("proc/modules")).unwrap_or_else(|_| {
        fs::create_dir_all(root.join("proc")).unwrap();
        symlink(outer.path().join("bait/modules"), root.join("proc/modules")).unwrap();
    });

    let report = check(&root);
    let gpus = result(&report, "driver.gpu_on_pci");
    assert_ne!(
        gpus["status"], "pass",
        "a gpu outside the root was read: {gpus}"
    );
    let text = gpus.to_string();
    assert!(text.contains("leaves the root"), "{text}");
    assert!(
        text.contains("0000:18:00.0") && text.contains("0000:2a:00.0"),
        "{text}"
    );

    let module = result(&report, "driver.nvidia_module");
    assert_ne!(
        module["status"], "pass",
        "a module list outside the root was read: {module}"
    );
    assert!(module.to_string().contains("proc/modules"), "{module}");
}

#[test]
fn dangling_links_and_loops_give_results() {
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    capture(&root);
    let devices = root.join("sys/bus/pci/devices");
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        devices.join("0000:00:01.0"),
    )
    .unwrap();
    symlink("0000:00:03.0", devices.join("0000:00:02.0")).unwrap();
    symlink("0000:00:02.0", devices.join("0000:00:03.0")).unwrap();
    // A real function whose `subsystem` link loops back through the bus, as on real sysfs.
    let function = root.join("sys/devices/pci0000:00/0000:00:04.0");
    write(&function.join("vendor"), "0x8086\n");
    write(&function.join("device"), "0x2030\n");
    write(&function.join("class"), "0x060400\n");
    symlink("../../../bus/pci", function.join("subsystem")).unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:04.0",
        devices.join("0000:00:04.0"),
    )
    .unwrap();
    symlink("loop", root.join("proc")).unwrap();

    let report = check(&root);
    let gpus = result(&report, "driver.gpu_on_pci");
    let text = gpus.to_string();
    assert_eq!(gpus["status"], "error", "{text}");
    assert!(
        text.contains("dangling") && text.contains("0000:00:01.0"),
        "{text}"
    );
    assert!(
        text.contains("too many levels") && text.contains("0000:00:02.0"),
        "{text}"
    );
    let modules = result(&report, "driver.nvidia_module");
    assert!(
        matches!(modules["status"].as_str(), Some("error" | "fail")),
        "{modules}"
    );
}

#[test]
fn bad_nvml_json_and_binary_files_are_named_errors() {
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    capture(&root);
    write(&root.join(".gpudoctor/nvml.json"), "{\"devices\": [");
    fs::write(root.join("proc/modules"), [0u8, 159, 146, 150]).unwrap_or_else(|_| {
        fs::create_dir_all(root.join("proc")).unwrap();
        fs::write(root.join("proc/modules"), [0u8, 159, 146, 150]).unwrap();
    });
    let report = check(&root);
    let nvml = result(&report, "driver.nvml_init");
    assert_eq!(nvml["status"], "error");
    assert!(nvml.to_string().contains(".gpudoctor/nvml.json"), "{nvml}");
    let module = result(&report, "driver.nvidia_module");
    assert_eq!(module["status"], "error");
    assert!(
        module.to_string().contains("proc/modules") && module.to_string().contains("not text"),
        "{module}"
    );
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

/// A thread swapping the directory `dir` and the symlink `link` in a loop until dropped.
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(dir: &Path, link: &Path) -> Swapper {
        use std::os::unix::ffi::OsStrExt;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let a = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let b = std::ffi::CString::new(link.as_os_str().as_bytes()).unwrap();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                exchange(&a, &b);
                swaps += 1;
            }
            // Leave the directory where it started.
            if swaps % 2 == 1 {
                exchange(&a, &b);
            }
            swaps
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

const SENTINEL: &str = "SENTINEL-OUTSIDE-THE-ROOT";

/// `outer/secret/` (outside) and `outer/node/sys/dir/` (inside) hold the same names; the
/// outside ones carry the sentinel. `outer/node/sys/swap` is a symlink to the outside.
fn race_tree(outer: &Path, absolute: bool) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = outer.join("node");
    write(&outer.join("secret/data"), &format!("{SENTINEL}\n"));
    write(&outer.join("secret/only-outside"), SENTINEL);
    symlink("/etc/hostname", outer.join("secret/link")).unwrap();
    write(&root.join("sys/dir/data"), "inside\n");
    write(&root.join("sys/dir/only-inside"), "inside\n");
    symlink("data", root.join("sys/dir/link")).unwrap();
    let target = if absolute {
        outer.join("secret")
    } else {
        Path::new("../../secret").to_path_buf()
    };
    symlink(target, root.join("sys/swap")).unwrap();
    (root.clone(), root.join("sys"))
}

/// Issue 13, item 2: a directory swapped for a symlink to outside the root
/// (`renameat2(RENAME_EXCHANGE)` in a loop) between the reader's look and its open made 106 of
/// 252 replays read outside. Many reads race the swapper here, fresh readers (every component
/// walked) and a long-lived one (its directory memo and descriptors); not one may return the
/// sentinel or list the outside directory. Some reads must see the swap (and be refused), or
/// the test did not race at all.
#[test]
fn a_directory_swapped_for_a_symlink_never_leads_a_read_outside() {
    for absolute in [false, true] {
        let outer = common::tempdir().unwrap();
        let (root, sys) = race_tree(outer.path(), absolute);
        let swapper = Swapper::start(&sys.join("dir"), &sys.join("swap"));
        let long_lived = gpudoctor::source::RootedFs::new(&root);
        let (mut inside, mut refused) = (0u32, 0u32);
        let started = std::time::Instant::now();
        let mut rounds = 0u32;
        while started.elapsed() < std::time::Duration::from_secs(2) || rounds < 2000 {
            rounds += 1;
            let fresh = gpudoctor::source::RootedFs::new(&root);
            for fs in [&fresh, &long_lived] {
                match fs.read_to_string("sys/dir/data") {
                    Ok(text) => {
                        assert!(!text.contains(SENTINEL), "read outside the root: {text}");
                        inside += 1;
                    }
                    Err(_) => refused += 1,
                }
                if let Ok(names) = fs.read_dir("sys/dir") {
                    assert!(
                        !names.iter().any(|n| n == "only-outside"),
                        "listed outside the root: {names:?}"
                    );
                }
                if let Ok(target) = fs.read_link("sys/dir/link") {
                    assert_eq!(target, "data", "read a link outside the root");
                }
                if let Ok(bytes) = fs.read_bytes("sys/swap/data") {
                    assert!(!String::from_utf8_lossy(&bytes).contains(SENTINEL));
                }
            }
        }
        let swaps = swapper.stop();
        assert!(swaps > 100, "the swapper hardly ran: {swaps}");
        assert!(
            inside > 0 && refused > 0,
            "no race happened: {inside} reads inside, {refused} refused in {rounds} rounds"
        );
    }
}

/// The same race through the binary, as in the report: replays of a capture whose PCI device
/// directory is swapped with a link to a bait tree outside, with `openat2` and with the
/// component walk that replaces it on kernels before 5.6 (`GPUDOCTOR_NO_OPENAT2=1`).
#[test]
fn replays_racing_a_swapped_directory_never_list_outside_the_root() {
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    capture(&root);
    let devices = root.join("sys/bus/pci/devices");
    let function = devices.join("0000:18:00.0");
    write(&function.join("vendor"), "0x15b3\n");
    write(&function.join("device"), "0x1021\n");
    write(&function.join("class"), "0x020700\n");
    // Outside: the same function as a GPU, and one more under a name the inside lacks. A GPU
    // in the report (`10de:2330`) or the extra name means a read or a listing left the root.
    let bait = outer.path().join("bait-devices");
    for name in ["0000:18:00.0", "0000:99:00.0"] {
        write(&bait.join(name).join("vendor"), "0x10de\n");
        write(&bait.join(name).join("device"), "0x2330\n");
        write(&bait.join(name).join("class"), "0x030200\n");
    }
    symlink("../../../../bait-devices", root.join("sys/bus/pci/swap")).unwrap();
    let swapper = Swapper::start(&devices, &root.join("sys/bus/pci/swap"));
    let mut refused = 0;
    for run in 0..120 {
        let fallback = if run % 2 == 0 { "1" } else { "0" };
        let out = common::scratch::gpudoctor_command()
            .args(["check", "--only", "driver", "--format", "json", "--root"])
            .arg(&root)
            .env("GPUDOCTOR_NO_OPENAT2", fallback)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("0000:99:00.0") && !text.contains("10de:2330"),
            "run {run} (GPUDOCTOR_NO_OPENAT2={fallback}) read outside the root: {text}"
        );
        if text.contains("leaves the root") {
            refused += 1;
        }
    }
    swapper.stop();
    assert!(refused > 0, "no run saw the swap");
}

/// A FIFO planted where a file is expected, with a writer blocked in `open(O_WRONLY)` on it: a
/// FIFO's writer returns from `open` only when a reader opens it (fifo(7)), so the writer
/// waking up before the test releases it means the reader opened the FIFO. Returns whether it
/// woke early; `reads` runs while it waits.
fn fifo_opened_by(fifo: &Path, reads: impl FnOnce()) -> bool {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    common::make_fifo(fifo);
    let released = Arc::new(AtomicBool::new(false));
    let flag = released.clone();
    let path = fifo.to_path_buf();
    let writer = std::thread::spawn(move || {
        let opened = fs::OpenOptions::new().write(true).open(&path);
        // Woken by a reader before the test released it: someone else opened the FIFO.
        (!flag.load(Ordering::SeqCst), opened.is_ok())
    });
    reads();
    released.store(true, Ordering::SeqCst);
    // Release the writer: open for reading ourselves (non-blocking), keep it open until it is
    // through its `open`.
    let reader = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .unwrap();
    let (early, _) = writer.join().unwrap();
    drop(reader);
    early
}

/// Issue 30, item 3: the rooted reader opened a file `O_RDONLY|O_NONBLOCK` and looked at its
/// type only afterwards, so a device node placed in a tree (`/dev/watchdog` arms the watchdog on
/// open) had its driver's `open` run. The type is now looked at through an `O_PATH` descriptor
/// first. A FIFO stands in for the device: every way of reading a file is tried on it, between
/// many reads of a real file (so a wrongly woken writer has time to say so), and its blocked
/// writer must never wake.
#[test]
fn a_fifo_where_a_file_is_expected_is_never_opened() {
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    write(&root.join("sys/ok"), "fine\n");
    let fs_ = gpudoctor::source::RootedFs::new(&root);
    let mut refusals = Vec::new();
    let early = fifo_opened_by(&root.join("sys/fifo"), || {
        for _ in 0..50 {
            for err in [
                fs_.read_to_string("sys/fifo").unwrap_err(),
                fs_.read_bytes("sys/fifo").unwrap_err(),
                fs_.read_tail("sys/fifo", 1024).unwrap_err(),
                fs_.open_file("sys/fifo").unwrap_err(),
            ] {
                refusals.push(err.to_string());
            }
            for _ in 0..20 {
                assert_eq!(fs_.read_to_string("sys/ok").unwrap(), "fine\n");
            }
        }
    });
    assert!(!early, "a read opened the FIFO (its writer woke up)");
    for text in &refusals {
        assert!(
            text.contains("sys/fifo") && text.contains("not a regular file (a FIFO)"),
            "{text}"
        );
    }
}

/// The same through the binary: a live root whose `proc/modules` is a FIFO. `check` reports
/// it as unreadable, names it, and never opens it.
#[test]
fn check_of_a_root_with_a_fifo_for_a_file_never_opens_it() {
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    fs::create_dir_all(root.join("proc")).unwrap();
    let mut stderr = String::new();
    let mut stdout = String::new();
    let early = fifo_opened_by(&root.join("proc/modules"), || {
        let out = common::gpudoctor(&[
            "check",
            "--root",
            root.to_str().unwrap(),
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
            "--format",
            "json",
            "--keep-going",
        ]);
        stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    });
    assert!(!early, "check opened proc/modules, a FIFO: {stderr}");
    assert!(
        stdout.contains("proc/modules: not a regular file (a FIFO)"),
        "{stdout}"
    );
}

/// A character device where a file is expected (the numbers of `/dev/null`, made with
/// mknod(2), which needs root: elsewhere the test says so and checks nothing). Every read
/// refuses it by name as a character device, `dev/kmsg` included unless it has the kernel
/// log's own numbers (1, 11: Documentation/admin-guide/devices.txt).
#[test]
fn a_character_device_where_a_file_is_expected_is_refused_by_name() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("notice: not root, cannot mknod; nothing checked");
        return;
    }
    let outer = common::tempdir().unwrap();
    let root = outer.path().join("node");
    fs::create_dir_all(root.join("dev")).unwrap();
    for name in ["dev/null-copy", "dev/kmsg"] {
        let c = std::ffi::CString::new(root.join(name).to_str().unwrap()).unwrap();
        // SAFETY: plain libc call with a valid NUL-terminated path.
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
        if made != 0 {
            eprintln!(
                "notice: mknod refused here ({}); nothing checked",
                std::io::Error::last_os_error()
            );
            return;
        }
    }
    let fs_ = gpudoctor::source::RootedFs::new(&root);
    for err in [
        fs_.read_to_string("dev/null-copy").unwrap_err(),
        fs_.read_bytes("dev/null-copy").unwrap_err(),
        fs_.read_tail("dev/null-copy", 1024).unwrap_err(),
        fs_.open_file("dev/null-copy").unwrap_err(),
        fs_.read_records_nonblocking("dev/null-copy").unwrap_err(),
        fs_.read_records_nonblocking("dev/kmsg").unwrap_err(),
    ] {
        let text = err.to_string();
        assert!(
            text.contains("dev/") && text.contains("not a regular file (a character device"),
            "{text}"
        );
    }
}
