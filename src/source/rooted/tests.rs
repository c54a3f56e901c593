//! Unit tests of the rooted reader: answers, errors, the memo, and confinement.

use super::*;
use std::fs;
use std::os::unix::fs::symlink;

fn tree() -> (tempfile::TempDir, RootedFs) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:01.0")).unwrap();
    fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
    fs::write(
        root.join("sys/devices/pci0000:00/0000:00:01.0/vendor"),
        "0x10de\n",
    )
    .unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        root.join("sys/bus/pci/devices/0000:00:01.0"),
    )
    .unwrap();
    symlink(
        "../../../bus/pci",
        root.join("sys/devices/pci0000:00/0000:00:01.0/subsystem"),
    )
    .unwrap();
    let fs = RootedFs::new(root);
    (dir, fs)
}

#[test]
fn follows_relative_links_inside_the_root() {
    let (_d, fs) = tree();
    assert_eq!(
        fs.read_to_string("sys/bus/pci/devices/0000:00:01.0/vendor")
            .unwrap(),
        "0x10de\n"
    );
    assert_eq!(
        fs.canonical("/sys/bus/pci/devices/0000:00:01.0").unwrap(),
        "sys/devices/pci0000:00/0000:00:01.0"
    );
    // Through the subsystem loop and back again: still resolves, bounded.
    assert!(fs.exists("sys/bus/pci/devices/0000:00:01.0/subsystem/devices/0000:00:01.0/vendor"));
}

#[test]
fn refuses_absolute_and_escaping_links() {
    let (dir, fs) = tree();
    symlink("/etc/hostname", dir.path().join("abs")).unwrap();
    symlink(
        "../../../../../../../../etc/hostname",
        dir.path().join("sys/up"),
    )
    .unwrap();
    assert!(matches!(
        fs.read_to_string("abs"),
        Err(FsError::EscapesRoot { .. })
    ));
    assert!(matches!(
        fs.read_to_string("sys/up"),
        Err(FsError::EscapesRoot { .. })
    ));
    assert!(matches!(
        fs.read_to_string("../etc/hostname"),
        Err(FsError::EscapesRoot { .. })
    ));
}

#[test]
fn loops_and_dangling_links_are_errors() {
    let (dir, fs) = tree();
    symlink("b", dir.path().join("a")).unwrap();
    symlink("a", dir.path().join("b")).unwrap();
    symlink("nowhere", dir.path().join("dangling")).unwrap();
    assert!(matches!(fs.read_to_string("a"), Err(FsError::Loop { .. })));
    let err = fs.read_to_string("dangling").unwrap_err();
    assert!(matches!(err, FsError::Dangling { .. }), "{err}");
    assert_eq!(fs.read_link("dangling").unwrap(), "nowhere");
}

#[test]
fn caps_and_rejects_non_text() {
    let (dir, mut fs) = tree();
    fs.read_cap = 4;
    fs::write(dir.path().join("big"), "12345").unwrap();
    fs::write(dir.path().join("bin"), [0u8, 1, 2]).unwrap();
    assert!(matches!(
        fs.read_to_string("big"),
        Err(FsError::TooLarge { .. })
    ));
    fs.read_cap = 100;
    assert!(matches!(
        fs.read_to_string("bin"),
        Err(FsError::NotText { .. })
    ));
    assert!(matches!(
        fs.read_to_string("sys"),
        Err(FsError::NotAFile { .. })
    ));
}

#[test]
fn the_directory_memo_changes_no_answer() {
    let (dir, _) = tree();
    let root = dir.path();
    symlink("b", root.join("a")).unwrap();
    symlink("a", root.join("b")).unwrap();
    symlink("nowhere", root.join("sys/bus/pci/devices/0000:00:02.0")).unwrap();
    symlink("/etc", root.join("sys/abs")).unwrap();
    fs::write(root.join("sys/file"), "x").unwrap();
    let paths = [
        "sys/bus/pci/devices/0000:00:01.0/vendor",
        "sys/bus/pci/devices/0000:00:01.0/missing",
        "sys/bus/pci/devices/0000:00:01.0/subsystem/devices/0000:00:01.0/vendor",
        "sys/devices/pci0000:00/0000:00:01.0/vendor",
        "sys/bus/pci/devices/0000:00:02.0/vendor",
        "sys/bus/pci/devices/0000:00:02.0",
        "sys/abs/hostname",
        "sys/file/below",
        "a/x",
        "sys/../sys/file",
        "nope/x",
    ];
    // Tracing turns the memo off: the plain walk, fresh for every path.
    let plain = |p: &str| {
        let fs = RootedFs::new(root).with_trace(Arc::default());
        (fs.resolve(p, true), fs.read_to_string(p), fs.read_link(p))
    };
    let memo = RootedFs::new(root);
    for round in 0..2 {
        for p in paths.iter().chain(paths.iter().rev()) {
            let got = (
                memo.resolve(p, true),
                memo.read_to_string(p),
                memo.read_link(p),
            );
            assert_eq!(got, plain(p), "{p} (round {round})");
        }
    }
}

/// The `openat2` path and the component walk that replaces it on older kernels give the same
/// answers and errors (the static switch is process-wide; both settings are correct answers
/// for any other test running meanwhile).
#[test]
fn openat2_and_the_fallback_walk_agree() {
    let (dir, _) = tree();
    let root = dir.path();
    symlink("b", root.join("a")).unwrap();
    symlink("a", root.join("b")).unwrap();
    symlink("/etc", root.join("sys/abs")).unwrap();
    symlink("../..", root.join("sys/bus/up")).unwrap();
    fs::write(root.join("sys/file"), "x").unwrap();
    let paths = [
        "sys/bus/pci/devices/0000:00:01.0/vendor",
        "sys/bus/pci/devices/0000:00:01.0/subsystem/devices",
        "sys/bus/up/sys/file",
        "sys/bus/up/../etc",
        "sys/abs/hostname",
        "sys/file/below",
        "a/x",
        "nope",
        "sys",
    ];
    let answers = |on: bool| {
        fd::use_openat2(on);
        let fs = RootedFs::new(root);
        paths
            .iter()
            .map(|p| {
                (
                    fs.resolve(p, true),
                    fs.read_to_string(p),
                    fs.read_dir(p),
                    fs.read_link(p),
                    fs.entry_kind(p),
                )
            })
            .collect::<Vec<_>>()
    };
    let with = answers(true);
    let without = answers(false);
    fd::use_openat2(true);
    assert_eq!(with, without);
}

#[test]
fn the_kubelet_socket_is_connected_through_its_descriptor() {
    let (dir, fs) = tree();
    let sock = dir.path().join("sys/kubelet.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    symlink("sys", dir.path().join("linked")).unwrap();
    let path = fs.host_path("linked/kubelet.sock").unwrap();
    assert!(
        path.path().starts_with("/proc/self/fd/"),
        "{:?}",
        path.path()
    );
    std::os::unix::net::UnixStream::connect(path.path()).unwrap();
    symlink("/etc", dir.path().join("out")).unwrap();
    assert!(matches!(
        fs.host_path("out/x.sock"),
        Err(FsError::EscapesRoot { .. })
    ));
}

#[test]
fn fifo_is_refused_without_blocking() {
    let (dir, fs) = tree();
    let path = std::ffi::CString::new(dir.path().join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: plain libc call with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    assert!(matches!(
        fs.read_to_string("fifo"),
        Err(FsError::NotAFile { .. })
    ));
}

/// Two directories whose names differ only in invalid UTF-8 (both spelt `\u{fffd}` lossily) are
/// two directories: the descriptor cache keys on the bytes.
#[test]
fn non_utf8_directory_names_are_not_confused() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    for (byte, text) in [(0xffu8, "ff"), (0xfe, "fe")] {
        let bytes = [byte];
        let name = std::ffi::OsStr::from_bytes(&bytes);
        fs::create_dir_all(dir.path().join("d").join(name).join("e")).unwrap();
        fs::write(dir.path().join("d").join(name).join("e/x"), text).unwrap();
        symlink(
            std::path::Path::new(name).join("e"),
            dir.path().join("d").join(format!("to-{text}")),
        )
        .unwrap();
    }
    let fs = RootedFs::new(dir.path());
    for _ in 0..2 {
        assert_eq!(fs.read_to_string("d/to-ff/x").unwrap(), "ff");
        assert_eq!(fs.read_to_string("d/to-fe/x").unwrap(), "fe");
    }
}

#[test]
fn read_tail_keeps_the_newest_whole_lines_and_traces_them() {
    let (dir, fs) = tree();
    let log: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
    fs::create_dir_all(dir.path().join("var/log")).unwrap();
    fs::write(dir.path().join("var/log/fm.log"), &log).unwrap();
    let trace = Arc::new(Mutex::new(Trace::default()));
    let fs = fs.with_trace(trace.clone());
    // Whole file when it fits.
    assert_eq!(fs.read_tail("var/log/fm.log", 10_000).unwrap(), log);
    // 25 bytes from the end: the partial line is dropped, whole lines kept.
    let tail = fs.read_tail("var/log/fm.log", 25).unwrap();
    assert_eq!(tail, "line 098\nline 099\n");
    assert_eq!(
        trace
            .lock()
            .unwrap()
            .contents
            .get("var/log/fm.log")
            .map(Vec::as_slice),
        Some(tail.as_bytes())
    );
    // Not a file, and missing: errors, never a panic.
    assert!(fs.read_tail("var/log", 10).is_err());
    assert!(fs.read_tail("var/log/none", 10).unwrap_err().is_missing());
    // A line longer than the window gives nothing rather than half a line.
    fs::write(dir.path().join("var/log/long.log"), "x".repeat(100)).unwrap();
    assert_eq!(fs.read_tail("var/log/long.log", 10).unwrap(), "");
}
