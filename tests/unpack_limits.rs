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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("cap.tar.gz");
    archive(&packed, |tar| {
        tar.append_data(&mut file_of(3), "./proc/modules", &b"x\n\n"[..])
            .unwrap();
    });
    let profile = tmp.path().join("lab.toml");
    let c = std::ffi::CString::new(profile.to_str().unwrap()).unwrap();
    // SAFETY: plain libc call with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let scratch = tempfile::tempdir().unwrap();
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
