//! Where the tests' scratch trees go: a RAM file system when this machine has a roomy one.
//!
//! The suite makes and removes hundreds of thousands of files (composed fixtures, captures,
//! unpacked archives). On ext4 without a journal (the 2-core machines this project is built on)
//! every new inode is looked for past the inodes deleted in the last minutes
//! (`recently_deleted()`, fs/ext4/ialloc.c), so creating a file costs more the more the suite
//! has removed: that was most of the suite's system time. On tmpfs it is a memory allocation.
//!
//! `GPUDOCTOR_TEST_TMPDIR` names the directory; else `/dev/shm` when it is a tmpfs with at least
//! [`ROOM`] free; else the system's temporary directory. Nothing about gpudoctor depends on
//! the file system: tests of file-system limits mount their own (tests/record_safety.rs).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Free space `/dev/shm` must have to be used: a few dozen scratch trees of 11 MB at once.
const ROOM: u64 = 2 << 30;

/// The directory scratch directories are made in (also `TMPDIR` for the gpudoctor processes
/// the tests start, which unpack `.tar.gz` captures there).
pub fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        if let Some(dir) = std::env::var_os("GPUDOCTOR_TEST_TMPDIR") {
            return PathBuf::from(dir);
        }
        let shm = Path::new("/dev/shm");
        if is_roomy_tmpfs(shm) {
            return shm.to_path_buf();
        }
        std::env::temp_dir()
    })
}

/// A fresh scratch directory under [`base`], removed when dropped (`tempfile::tempdir` there).
pub fn tempdir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("gpudoctor-test")
        .tempdir_in(base())
}

fn is_roomy_tmpfs(dir: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let tmpfs = mounts.lines().any(|l| {
        let mut f = l.split_whitespace();
        f.next().is_some() && f.next() == dir.to_str() && f.next() == Some("tmpfs")
    });
    tmpfs && free_bytes(dir).is_some_and(|free| free >= ROOM) && writable(dir)
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills.
    (unsafe { libc::statvfs(path.as_ptr(), &mut stat) } == 0)
        .then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}

fn writable(dir: &Path) -> bool {
    tempfile::Builder::new().tempdir_in(dir).is_ok()
}

/// `gpudoctor` with `TMPDIR` at [`base`]: where it unpacks a `.tar.gz` capture.
pub fn gpudoctor_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
    cmd.env("TMPDIR", base());
    cmd
}

/// Make a FIFO at `path` (mode 0600) for a test of a reader that must never wait on one: a
/// FIFO nobody writes blocks a plain `open` for reading until a writer comes (fifo(7)).
pub fn make_fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .unwrap_or_else(|_| panic!("{}: a NUL in the path", path.display()));
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(
        made,
        0,
        "mkfifo {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}
