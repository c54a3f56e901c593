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
    // A fresh reader for every path: the plain walk, nothing remembered.
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
    // Traced, the memo notes nothing less: one reader reading every path twice, within a run
    // and with its directories remembered, records what fresh readers of each path record
    // together (a capture holds every component any read walked through).
    let traced = |fs: RootedFs, paths: &[&str]| {
        let trace = Arc::new(Mutex::new(Trace::default()));
        let fs = fs.with_trace(trace.clone());
        let _run = fs.remember_reads();
        for p in paths {
            let _ = (fs.resolve(p, true), fs.read_to_string(p), fs.read_link(p));
        }
        let trace = trace.lock().unwrap();
        (trace.visited.clone(), trace.contents.clone())
    };
    let mut each = (BTreeMap::new(), BTreeMap::new());
    for p in paths {
        let (visited, contents) = traced(RootedFs::new(root), &[p]);
        each.0.extend(visited);
        each.1.extend(contents);
    }
    let twice: Vec<&str> = paths.iter().chain(paths.iter().rev()).copied().collect();
    // A reader whose memo was filled untraced first starts afresh when traced.
    let warm = RootedFs::new(root);
    for p in paths {
        let _ = warm.read_to_string(p);
    }
    assert_eq!(traced(warm, &twice), each);
    assert_eq!(traced(RootedFs::new(root), &twice), each);
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

/// A directory a run listed (`read_dir`) is listed once for the run; reads in it then answer
/// as before, told by the listing: a regular file read, a name the listing lacks missing
/// (named), a link followed, a FIFO the listing shows never opened, and a regular file swapped
/// for a FIFO after the listing refused unread and without blocking (issue 41: a system call
/// fewer per file).
#[test]
fn a_listed_directory_answers_as_a_looked_at_one() {
    let (dir, fs) = tree();
    let device = dir.path().join("sys/devices/pci0000:00/0000:00:01.0");
    fs::write(device.join("class"), "0x030200\n").unwrap();
    fs::write(device.join("later"), "0\n").unwrap();
    symlink("class", device.join("alias")).unwrap();
    let fifo = |path: &std::path::Path| {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    fifo(&device.join("planted"));
    let counts = fs.count_opens();
    let run = fs.remember_reads();
    let rel = "sys/bus/pci/devices/0000:00:01.0";
    fs.read_dir(rel).unwrap();
    fs.read_dir(rel).unwrap();
    // Swapped after the listing: the listing still says "regular file".
    fs::remove_file(device.join("later")).unwrap();
    fifo(&device.join("later"));

    assert_eq!(
        fs.read_to_string(&format!("{rel}/vendor")).unwrap(),
        "0x10de\n"
    );
    assert_eq!(
        fs.read_to_string(&format!("{rel}/class")).unwrap(),
        "0x030200\n"
    );
    let missing = fs.read_to_string(&format!("{rel}/numa_node")).unwrap_err();
    assert!(missing.is_missing(), "{missing}");
    assert!(missing.to_string().contains("numa_node"), "{missing}");
    for name in ["planted", "later"] {
        let refused = fs.read_bytes(&format!("{rel}/{name}")).unwrap_err();
        assert!(
            refused.to_string().contains("not a regular file (a FIFO)"),
            "{name}: {refused}"
        );
    }
    // The listing is the run's: `list_dir` answers from it, listing nothing again.
    let names = fs.read_dir(rel).unwrap();
    assert!(names.contains(&"planted".to_string()) && names.contains(&"vendor".to_string()));
    assert_eq!(counts.repeated(), Vec::<(String, u32)>::new());
    assert!(
        counts
            .locations()
            .contains(&"list sys/devices/pci0000:00/0000:00:01.0".to_string()),
        "{:?}",
        counts.locations()
    );
    // A link in a listed directory is followed as before.
    assert_eq!(
        fs.read_to_string(&format!("{rel}/alias")).unwrap(),
        "0x030200\n"
    );
    drop(run);
    // Outside a run nothing is remembered and reads look at each file.
    fs.read_dir(rel).unwrap();
    assert_eq!(
        fs.read_to_string(&format!("{rel}/vendor")).unwrap(),
        "0x10de\n"
    );
}

#[test]
fn typed_listings_read_back_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let long = "n".repeat(255);
    for name in ["a", "bb", long.as_str(), "ü"] {
        fs::write(dir.path().join(name), "x").unwrap();
    }
    fs::create_dir(dir.path().join("sub")).unwrap();
    let opened = fd::open_root(dir.path()).unwrap();
    let listed = fd::open_one(
        opened.as_fd(),
        std::ffi::OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
    )
    .unwrap();
    let typed = fd::list_typed(&listed).unwrap();
    let mut names: Vec<String> = fd::names(&typed)
        .into_iter()
        .map(|n| n.into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "bb", long.as_str(), "sub", "ü"]);
    assert_eq!(fd::entry_type(&typed, b"bb"), Some(libc::DT_REG));
    assert_eq!(fd::entry_type(&typed, b"sub"), Some(libc::DT_DIR));
    assert_eq!(fd::entry_type(&typed, long.as_bytes()), Some(libc::DT_REG));
    assert_eq!(fd::entry_type(&typed, b"b"), None);
    assert_eq!(fd::entry_type(&typed, b"."), None);
    // Truncated bytes end the walk; they never panic.
    for cut in 0..typed.len() {
        let _ = fd::entry_type(&typed[..cut], b"zz");
        let _ = fd::names(&typed[..cut]);
    }
}

#[test]
fn listings_longer_than_one_answer_and_links_told_by_short_listings() {
    // 1 000 links of 40-byte names: about 56 KiB of `getdents64` records, several answers of
    // the 8 KiB stack buffer.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("devices/d0")).unwrap();
    fs::write(root.join("devices/d0/class"), "0x030200\n").unwrap();
    fs::create_dir_all(root.join("big")).unwrap();
    fs::create_dir_all(root.join("small")).unwrap();
    for i in 0..1000 {
        symlink("../devices/d0", root.join(format!("big/{i:040}"))).unwrap();
    }
    symlink("../devices/d0", root.join("small/d0")).unwrap();
    let fs = RootedFs::new(root);
    let run = fs.remember_reads();
    let big = fs.read_dir("big").unwrap();
    assert_eq!(big.len(), 1000);
    assert_eq!(fs.read_dir("small").unwrap(), ["d0"]);
    // A short listing tells a link and a missing name, searched from its start; a long one
    // the same, through its sorted index.
    let name = |n: &str| std::ffi::OsString::from(n);
    assert_eq!(
        fs.listed_type(&name("small"), &name("d0")),
        Some(Some(libc::DT_LNK))
    );
    assert_eq!(fs.listed_type(&name("small"), &name("d1")), Some(None));
    for n in [&big[0], &big[500], &big[999]] {
        assert_eq!(
            fs.listed_type(&name("big"), &name(n)),
            Some(Some(libc::DT_LNK))
        );
    }
    assert_eq!(fs.listed_type(&name("big"), &name("d1")), Some(None));
    // Either way the files behind the links read the same, and a missing one is not found.
    assert_eq!(fs.read_to_string("small/d0/class").unwrap(), "0x030200\n");
    let through_big = format!("big/{}/class", big[999]);
    assert_eq!(fs.read_to_string(&through_big).unwrap(), "0x030200\n");
    assert!(matches!(
        fs.read_to_string("small/d1/class"),
        Err(FsError::NotFound { .. })
    ));
    drop(run);
    assert!(matches!(
        fs.read_to_string("small/d1/class"),
        Err(FsError::NotFound { .. })
    ));
}

#[test]
fn a_run_remembers_a_missing_directory_and_still_names_each_path() {
    let (dir, fs) = tree();
    symlink("nowhere", dir.path().join("dangling")).unwrap();
    let run = fs.remember_reads();
    for rel in [
        "run/containerd/containerd.sock",
        "run/nvidia/validations/.driver-ctr-ready",
        "run/x",
        "var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        "var/lib/rancher/k3s/x",
    ] {
        let err = fs.read_to_string(rel).unwrap_err();
        assert!(
            matches!(&err, FsError::NotFound { path } if path == rel),
            "{rel}: {err:?}"
        );
        assert!(!fs.exists(rel), "{rel}");
    }
    // Through a dangling link: still the link named, never "not found" from the memo.
    for rel in ["dangling/a/b", "dangling/c"] {
        let err = fs.read_to_string(rel).unwrap_err();
        assert!(
            matches!(&err, FsError::Dangling { path, link, .. } if path == rel && link == "dangling"),
            "{rel}: {err:?}"
        );
    }
    // The run's reading is one consistent reading; the next run looks again.
    drop(run);
    fs::create_dir_all(dir.path().join("run")).unwrap();
    fs::write(dir.path().join("run/x"), "1\n").unwrap();
    let _run = fs.remember_reads();
    assert_eq!(fs.read_to_string("run/x").unwrap(), "1\n");
}

/// A long listing (over 4 KiB of names) answers by its sorted index what a search from its
/// start answers: every entry's type, and no entry for a name it lacks.
#[test]
fn a_long_listing_sorted_answers_as_the_listing_does() {
    use std::os::fd::AsFd as _;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..600 {
        let name = format!("0000:{:02x}:{:02x}.{}", i / 32, i % 32, i % 8);
        if i % 3 == 0 {
            fs::create_dir(dir.path().join(&name)).unwrap();
        } else if i % 3 == 1 {
            symlink("nowhere", dir.path().join(&name)).unwrap();
        } else {
            fs::write(dir.path().join(&name), "x").unwrap();
        }
    }
    let opened = fd::open_one(
        std::fs::File::open(dir.path()).unwrap().as_fd(),
        std::ffi::OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
    )
    .unwrap();
    let typed: std::sync::Arc<[u8]> = fd::list_typed(&opened).unwrap().into();
    assert!(typed.len() > 4096, "{}", typed.len());
    let sorted = fd::SortedListing::of(typed.clone());
    for name in fd::names(&typed) {
        let name = name.as_encoded_bytes();
        assert_eq!(sorted.entry_type(name), fd::entry_type(&typed, name));
        assert!(sorted.entry_type(name).is_some());
    }
    for absent in [&b"0000:ff:00.0"[..], b"", b"0000:00:00.", b"zzz"] {
        assert_eq!(sorted.entry_type(absent), None);
    }
}
