//! A `.tar.gz` given as `--root` is unpacked within limits checked while streaming (issue 13,
//! item 6: a 4 MB archive wrote 4 GB to `$TMPDIR`, a 2 MB one created 300 000 files). Each bomb
//! here is generated small and refused with exit 2, naming the limit and the flag that raises
//! it, with nothing left in `$TMPDIR`; raised limits let the same archive through. The limits
//! are lowered by flags so that the bombs stay cheap to make; the defaults are checked apart.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gpudoctor::record::unpack::DEFAULT_LIMITS;

/// Endless zeros.
struct Zeros;

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(0);
        Ok(buf.len())
    }
}

/// A tar.gz at `path` built by `fill`, with a valid capture manifest first.
fn archive(path: &Path, fill: impl FnOnce(&mut tar::Builder<flate2::write::GzEncoder<fs::File>>)) {
    let file = fs::File::create(path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    let manifest = br#"{"format_version": 1}"#;
    let mut header = tar::Header::new_gnu();
    header.set_size(manifest.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "./.gpudoctor/manifest.json", &manifest[..])
        .unwrap();
    fill(&mut tar);
    tar.into_inner().unwrap().finish().unwrap();
}

fn file_of(size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    header
}

/// `gpudoctor check --root ARCHIVE ARGS` with a private `$TMPDIR`; returns the output and the
/// names left in that `$TMPDIR`.
fn check(archive: &Path, args: &[&str]) -> (Output, Vec<String>) {
    let tmp = common::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(["check", "--format", "json", "--root"])
        .arg(archive)
        .args(args)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let left = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    (out, left)
}

fn refused(archive: &Path, args: &[&str], says: &[&str]) {
    let (out, left) = check(archive, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{args:?}: `{s}` not in: {err}");
    }
    assert!(out.stdout.is_empty(), "judged anyway");
    assert!(left.is_empty(), "{args:?}: left in $TMPDIR: {left:?}");
}

fn accepted(archive: &Path, args: &[&str]) {
    let (out, left) = check(archive, args);
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(left.is_empty(), "{args:?}: left in $TMPDIR: {left:?}");
}

#[test]
fn a_small_archive_of_huge_content_is_refused_while_streaming() {
    let tmp = common::tempdir().unwrap();
    let bomb = tmp.path().join("bomb.tar.gz");
    // 48 MiB of zeros: about 50 KiB compressed.
    archive(&bomb, |tar| {
        tar.append_data(&mut file_of(48 << 20), "./var/zeros", Zeros.take(48 << 20))
            .unwrap();
    });
    assert!(fs::metadata(&bomb).unwrap().len() < 1 << 20);
    refused(
        &bomb,
        &["--unpack-max-bytes", "8M"],
        &["more than 8388608 bytes", "--unpack-max-bytes"],
    );
    refused(
        &bomb,
        &["--unpack-max-file-bytes", "1M"],
        &["var/zeros", "50331648 bytes", "--unpack-max-file-bytes"],
    );
    accepted(&bomb, &["--unpack-max-bytes", "64M"]);
}

#[test]
fn a_file_declared_huge_is_refused_before_any_of_it_is_read() {
    let tmp = common::tempdir().unwrap();
    let bomb = tmp.path().join("declared.tar.gz");
    // A header claiming 100 GiB, and no data at all: the size is judged from the header.
    archive(&bomb, |tar| {
        let header = file_of(100 << 30);
        let mut raw = header.as_bytes().to_vec();
        raw[..10].copy_from_slice(b"./var/huge");
        let mut fixed = tar::Header::new_gnu();
        fixed.as_mut_bytes().copy_from_slice(&raw);
        fixed.set_cksum();
        tar.get_mut().write_all(fixed.as_bytes()).unwrap();
    });
    let started = Instant::now();
    refused(
        &bomb,
        &[],
        &["var/huge", "107374182400 bytes", "--unpack-max-file-bytes"],
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn an_archive_of_many_entries_is_refused_at_the_limit() {
    let tmp = common::tempdir().unwrap();
    let bomb = tmp.path().join("many.tar.gz");
    archive(&bomb, |tar| {
        for i in 0..3000 {
            tar.append_data(&mut file_of(0), format!("./sys/f{i}"), &[][..])
                .unwrap();
        }
    });
    refused(
        &bomb,
        &["--unpack-max-entries", "1000"],
        &["more than 1000 entries", "--unpack-max-entries"],
    );
    accepted(&bomb, &[]);
}

#[test]
fn entries_a_capture_never_holds_are_refused() {
    let tmp = common::tempdir().unwrap();
    // A hard link, a FIFO, a path climbing out, and 2 MiB of GNU long-name header.
    let link = tmp.path().join("link.tar.gz");
    archive(&link, |tar| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Link);
        h.set_size(0);
        h.set_cksum();
        tar.append_link(&mut h, "./etc/passwd", "/etc/shadow")
            .unwrap();
    });
    refused(&link, &[], &["etc/passwd", "hard link"]);

    let fifo = tmp.path().join("fifo.tar.gz");
    archive(&fifo, |tar| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Fifo);
        h.set_size(0);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, "./dev/kmsg", &[][..]).unwrap();
    });
    refused(&fifo, &[], &["dev/kmsg", "fifo"]);

    let climb = tmp.path().join("climb.tar.gz");
    archive(&climb, |tar| {
        let mut h = file_of(4);
        h.as_old_mut().name[..12].copy_from_slice(b"../escape.tx");
        h.set_cksum();
        tar.get_mut().write_all(h.as_bytes()).unwrap();
        tar.get_mut().write_all(&[b'x'; 512]).unwrap();
    });
    refused(&climb, &[], &["escape", "leaves the capture"]);

    let longname = tmp.path().join("longname.tar.gz");
    archive(&longname, |tar| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_size(2 << 20);
        h.set_cksum();
        tar.get_mut().write_all(h.as_bytes()).unwrap();
        tar.get_mut().write_all(&vec![b'a'; 2 << 20]).unwrap();
        let mut f = file_of(0);
        f.set_cksum();
        tar.get_mut().write_all(f.as_bytes()).unwrap();
    });
    refused(&longname, &[], &["extension headers"]);
}

/// SIGTERM while a capture is unpacked (the check then waits on a `--profile` FIFO): the
/// unpacked directory is removed and gpudoctor dies of the signal.
#[test]
fn a_signal_after_unpacking_removes_the_unpacked_directory() {
    let tmp = common::tempdir().unwrap();
    let packed = tmp.path().join("cap.tar.gz");
    archive(&packed, |tar| {
        tar.append_data(&mut file_of(3), "./proc/modules", &b"x\n\n"[..])
            .unwrap();
    });
    let profile = tmp.path().join("lab.toml");
    common::make_fifo(&profile);
    let scratch = common::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(["check", "--root"])
        .arg(&packed)
        .arg("--profile")
        .arg(&profile)
        .env("TMPDIR", scratch.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::read_dir(scratch.path()).unwrap().count() == 0 {
        assert!(Instant::now() < deadline, "never unpacked");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGTERM),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_dir(scratch.path()).unwrap().count(), 0);
}

/// The defaults, as documented (docs/security.md) and as the flags default to.
#[test]
fn the_default_limits_are_the_documented_ones() {
    use clap::Parser;
    assert_eq!(DEFAULT_LIMITS.max_bytes, 1 << 30);
    assert_eq!(DEFAULT_LIMITS.max_entries, 200_000);
    assert_eq!(DEFAULT_LIMITS.max_file_bytes, 64 << 20);
    for command in ["check", "topo"] {
        let cli = gpudoctor::cli::Cli::try_parse_from(["gpudoctor", command]).unwrap();
        let limits = match cli.command {
            gpudoctor::cli::Command::Check(args) => args.unpack.limits(),
            gpudoctor::cli::Command::Topo(args) => args.unpack.limits(),
            _ => unreachable!(),
        };
        assert_eq!(limits, DEFAULT_LIMITS, "{command}");
    }
    let doc = fs::read_to_string(common::repo().join("docs/security.md")).unwrap();
    for text in ["1 GiB", "200 000 entries", "64 MiB"] {
        assert!(doc.contains(text), "docs/security.md does not say {text}");
    }
}

// ---- An archive is a capture or nothing (issue 30, finding 1) ----

/// A shared library whose constructor writes `CTOR_MARKER`'s path when it is loaded: the proof
/// that an archive's code runs (or not) inside gpudoctor. Built with the C compiler every
/// machine of this project has (`cc`); without one the test says so, and fails under CI.
fn constructor_library(dir: &Path) -> Option<std::path::PathBuf> {
    let source = dir.join("ctor.c");
    fs::write(
        &source,
        r#"#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void ran(void) {
    const char *marker = getenv("CTOR_MARKER");
    if (marker) { FILE *f = fopen(marker, "w"); if (f) { fputs("ran\n", f); fclose(f); } }
}
int nvmlInit_v2(void) { return 0; }
"#,
    )
    .unwrap();
    let lib = dir.join("libnvidia-ml.so.1");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&source)
        .status();
    match built {
        Ok(status) if status.success() => Some(lib),
        other => {
            assert!(
                !common::on_ci(),
                "cannot build the test library with cc: {other:?}"
            );
            eprintln!("note: no working `cc` ({other:?}); test skipped (it fails under CI=true)");
            None
        }
    }
}

/// A tar.gz of `files` (path, bytes), with no manifest unless one is among them.
fn plain_archive(path: &Path, files: &[(&str, &[u8])]) {
    let file = fs::File::create(path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    for (name, bytes) in files {
        let mut header = file_of(bytes.len() as u64);
        header.set_mode(0o755);
        header.set_cksum();
        tar.append_data(&mut header, name, *bytes).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

/// gpudoctor with a private `$TMPDIR` and the constructor's marker path set.
fn run_marked(args: &[&std::ffi::OsStr], marker: &Path) -> (Output, Vec<String>) {
    let tmp = common::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(args)
        .env("TMPDIR", tmp.path())
        .env("CTOR_MARKER", marker)
        .output()
        .unwrap();
    let left = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    (out, left)
}

/// The reviewer's archive: a 15 KB `usr/lib64/libnvidia-ml.so.1` and no manifest. Before,
/// `check`, `check --npd` and `diff` judged it as a live node and loaded the library (its
/// constructor ran, as root); now every command refuses it with exit 2 and nothing of it runs.
#[test]
fn an_archive_that_is_not_a_capture_is_refused_and_its_library_never_runs() {
    let tmp = common::tempdir().unwrap();
    let Some(lib) = constructor_library(tmp.path()) else {
        return;
    };
    let bytes = fs::read(&lib).unwrap();
    let evil = tmp.path().join("node.tar.gz");
    plain_archive(
        &evil,
        &[
            ("./usr/lib64/libnvidia-ml.so.1", &bytes),
            ("./run/nvidia/driver/usr/lib64/libnvidia-ml.so.1", &bytes),
            ("./proc/modules", b"nvidia 1 0 - Live 0x0\n"),
        ],
    );
    // The library really is loadable and its constructor really writes the marker: the test
    // can see a load if one happens.
    let probe = tmp.path().join("probe.marker");
    let loaded = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args([
            "check",
            "--only",
            "driver",
            "--format",
            "json",
            "--nvml-lib",
        ])
        .arg(&lib)
        .arg("--root")
        .arg(tmp.path())
        .env("CTOR_MARKER", &probe)
        .output()
        .unwrap();
    assert!(
        probe.exists(),
        "the constructor did not run when named with --nvml-lib: {}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    let healthy = common::repo().join("fixtures/hgx-h100-healthy");
    let out_dir = tmp.path().join("re-recorded");
    let commands: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["check".as_ref(), "--root".as_ref(), evil.as_os_str()],
        vec![
            "check".as_ref(),
            "--npd".as_ref(),
            "--root".as_ref(),
            evil.as_os_str(),
        ],
        vec!["topo".as_ref(), "--root".as_ref(), evil.as_os_str()],
        vec!["diff".as_ref(), evil.as_os_str(), healthy.as_os_str()],
        vec!["diff".as_ref(), healthy.as_os_str(), evil.as_os_str()],
        vec![
            "record".as_ref(),
            "--root".as_ref(),
            evil.as_os_str(),
            "--out".as_ref(),
            out_dir.as_os_str(),
        ],
    ];
    for args in commands {
        let marker = tmp.path().join("ctor.marker");
        let (out, left) = run_marked(&args, &marker);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            !marker.exists(),
            "{args:?}: the archive's library was loaded"
        );
        assert!(err.contains("is not a capture"), "{args:?}: {err}");
        assert!(err.contains(".gpudoctor/manifest.json"), "{args:?}: {err}");
        // NPD reads one line on stdout whatever happens: it says "usage error".
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.is_empty() || stdout.starts_with("gpudoctor: usage error"),
            "{args:?}: judged anyway: {stdout}"
        );
        assert!(left.is_empty(), "{args:?}: left in $TMPDIR: {left:?}");
        assert!(!out_dir.exists(), "{args:?}: recorded anyway");
    }
}

/// An empty archive, and a real capture packed one level down (`tar czf cap.tgz cap/`): exit 2,
/// saying what the archive holds and how to pack it.
#[test]
fn empty_and_one_level_down_archives_say_what_to_do() {
    let tmp = common::tempdir().unwrap();
    let empty = tmp.path().join("empty.tar.gz");
    plain_archive(&empty, &[]);
    refused(&empty, &[], &["is not a capture", "the archive is empty"]);

    let nested = tmp.path().join("cap.tgz");
    let file = fs::File::create(&nested).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    tar.follow_symlinks(false);
    tar.append_dir_all("cap", common::repo().join("fixtures/hgx-h100-healthy"))
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    refused(
        &nested,
        &[],
        &[
            "packed one level down, under cap/",
            "tar czf NAME.tar.gz -C cap .",
        ],
    );
}

/// gzip(1) reads concatenated members as one stream (RFC 1952 §2.2: "a gzip file consists of a
/// series of members"); pigz and a resumed upload write them. The capture split across two
/// members replays to the same verdict as the directory (before: cut after the first member,
/// judged with false failures).
#[test]
fn a_multi_member_gzip_is_read_to_the_end() {
    let tmp = common::tempdir().unwrap();
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let mut tar_bytes = Vec::new();
    {
        let mut tar = tar::Builder::new(&mut tar_bytes);
        tar.follow_symlinks(false);
        tar.append_dir_all(".", &fixture).unwrap();
        tar.finish().unwrap();
    }
    let (first, second) = tar_bytes.split_at(tar_bytes.len() / 2);
    let mut packed = Vec::new();
    for half in [first, second] {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(half).unwrap();
        packed.extend(gz.finish().unwrap());
    }
    let path = tmp.path().join("two-members.tar.gz");
    fs::write(&path, packed).unwrap();
    let verdict = |root: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
            .args(["check", "--keep-going", "--format", "json", "--root"])
            .arg(root)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let statuses: Vec<(String, String)> = report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| l["checks"].as_array().unwrap().clone())
            .map(|c| (c["code"].to_string(), c["status"].to_string()))
            .collect();
        (out.status.code(), statuses)
    };
    assert_eq!(verdict(&path), verdict(&fixture));
}

/// An archive's modes are not the capture's: the unpacked directory and everything in it is its
/// owner's alone (0700 directories, 0600 files), whatever the archive says — a `./` entry of
/// 0755, a 0777 directory, a 0666 file, a 0000 directory with a file in it.
#[test]
fn unpacked_modes_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = common::tempdir().unwrap();
    let path = tmp.path().join("modes.tar.gz");
    archive(&path, |tar| {
        let dir = |mode: u32| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            h.set_mode(mode);
            h.set_cksum();
            h
        };
        tar.append_data(&mut dir(0o755), "./", &[][..]).unwrap();
        tar.append_data(&mut dir(0o777), "./open", &[][..]).unwrap();
        tar.append_data(&mut dir(0o000), "./shut", &[][..]).unwrap();
        let mut f = file_of(2);
        f.set_mode(0o666);
        f.set_cksum();
        tar.append_data(&mut f, "./open/file", &b"x\n"[..]).unwrap();
        tar.append_data(&mut file_of(2), "./shut/file", &b"y\n"[..])
            .unwrap();
    });
    let unpacked = gpudoctor::record::unpack::unpack_capture(&path, &DEFAULT_LIMITS).unwrap();
    let mode = |rel: &str| {
        fs::symlink_metadata(unpacked.path().join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode(""), 0o700);
    for dir in ["open", "shut", ".gpudoctor"] {
        assert_eq!(mode(dir), 0o700, "{dir}");
    }
    for file in ["open/file", "shut/file", ".gpudoctor/manifest.json"] {
        assert_eq!(mode(file), 0o600, "{file}");
    }
}

/// Run as a user other than root (here `nobody`, through the test's own root), a 0000 directory
/// in an archive stopped the unpacking and the directory it had made could not be removed:
/// `.gpudoctor-unpack-*` was left in `$TMPDIR`. Now nothing is left, and the capture replays.
#[test]
fn a_non_root_run_leaves_nothing_behind() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "note: needs root to run gpudoctor as another user; checked by the unit modes test"
        );
        return;
    }
    let tmp = common::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    let path = tmp.path().join("shut.tar.gz");
    archive(&path, |tar| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        h.set_mode(0o000);
        h.set_cksum();
        tar.append_data(&mut h, "./proc", &[][..]).unwrap();
        tar.append_data(&mut file_of(3), "./proc/modules", &b"x\n\n"[..])
            .unwrap();
    });
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let scratch = tmp.path().join("scratch");
    fs::create_dir(&scratch).unwrap();
    fs::set_permissions(&scratch, fs::Permissions::from_mode(0o1777)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(["check", "--format", "json", "--root"])
        .arg(&path)
        .env("TMPDIR", &scratch)
        .uid(65534)
        .gid(65534)
        .output();
    // A checkout under a directory only root may enter (`mktemp -d` makes them 0700): `nobody`
    // cannot execute the binary there, so the run cannot be made as another user at all.
    let out = match out {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!(
                "note: `nobody` cannot execute {} ({e}): a directory above it is closed to \
                 other users; checked by the unit modes test",
                env!("CARGO_BIN_EXE_gpudoctor")
            );
            return;
        }
        other => other.unwrap(),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1 | 3)), "{err}");
    let left: Vec<_> = fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in $TMPDIR: {left:?}");
}
