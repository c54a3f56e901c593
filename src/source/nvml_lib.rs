//! Which `libnvidia-ml` the live NVML probe loads. NVML has to be the library of the driver
//! whose kernel module runs (nvml.h: a library/module version mismatch fails init with
//! `NVML_ERROR_LIB_RM_VERSION_MISMATCH`), so with `--root /host` in a Pod it is the host's, not
//! whatever the container image holds: the binary looks for it under the root itself, and the
//! DaemonSet needs no entry script to find it (issue 19).
//!
//! Order: `--nvml-lib` when given, used as named. Else, with a root other than `/`, the first
//! of [`CANDIDATES`] under the root — the GPU Operator's driver root first (its driver
//! container mounts its whole filesystem at /run/nvidia/driver on the host; GPU Operator docs,
//! "Driver container"), then the distributions' library directories (Debian/Ubuntu multiarch
//! `/usr/lib/<triplet>`, RHEL/SUSE `/usr/lib64`) — then the dynamic loader's own search
//! (`libnvidia-ml.so.1`, as with root `/`).
//!
//! Confined like every read: each candidate is resolved under the root by `RootedFs` (links
//! followed inside the root only; an absolute link target or a `..` out of it is refused) and
//! must be a regular file. The file is opened there and the loader is handed that descriptor's
//! `/proc/self/fd/N`, so what is loaded is the file that was checked — a link swapped in
//! between cannot send `dlopen` outside the root. The descriptor stays open until NVML is
//! loaded ([`NvmlLibrary`] is moved into the probe). Its code will run in this process, so it
//! must also be owned by root (or by whoever runs gpudoctor) and writable by no one else
//! ([`trusted`]); `--root` should name a host's filesystem, never an untrusted tree.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::rooted::RootedFs;

/// Where a host keeps `libnvidia-ml.so.1`, root-relative, in the order they are tried. Only
/// this machine's architecture's directories (a library of the other one cannot load).
pub const CANDIDATES: &[&str] = &[
    #[cfg(target_arch = "x86_64")]
    "run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    #[cfg(target_arch = "aarch64")]
    "run/nvidia/driver/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "run/nvidia/driver/usr/lib64/libnvidia-ml.so.1",
    #[cfg(target_arch = "x86_64")]
    "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    #[cfg(target_arch = "aarch64")]
    "usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "usr/lib64/libnvidia-ml.so.1",
    "usr/lib/libnvidia-ml.so.1",
];

/// A library to load: the path the loader opens, and what to call it in messages.
#[derive(Debug)]
pub struct NvmlLibrary {
    path: PathBuf,
    shown: String,
    /// Keeps `/proc/self/fd/N` naming the checked file until the library is loaded.
    _file: Option<File>,
}

impl NvmlLibrary {
    /// `--nvml-lib PATH`: the user's choice, used as given (like `--kernel-log`, a path the
    /// user names outside the root).
    pub fn named(path: &Path) -> Self {
        NvmlLibrary {
            path: path.to_path_buf(),
            shown: path.display().to_string(),
            _file: None,
        }
    }

    /// What the loader opens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How messages name it: the path given, or `<root>/<candidate>` for one found under the
    /// root (never the `/proc/self/fd` path, which says nothing to a reader).
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// The library for a live source rooted at `fs`: `--nvml-lib`, else the first candidate under a
/// root other than `/`, else `None` (the loader's own search).
pub fn choose(fs: &RootedFs, named: Option<&Path>) -> Option<NvmlLibrary> {
    if let Some(path) = named {
        return Some(NvmlLibrary::named(path));
    }
    if fs.root() == Path::new("/") {
        return None;
    }
    find_under_root(fs)
}

/// The first of [`CANDIDATES`] that resolves under the root to a regular file starting with
/// the ELF magic, opened. Candidates that are absent, escape the root, are not regular files
/// or are not ELF (an empty placeholder in a hand-built tree) are passed over.
pub fn find_under_root(fs: &RootedFs) -> Option<NvmlLibrary> {
    CANDIDATES.iter().find_map(|rel| {
        let file = fs.open_file(rel).ok()?;
        if !trusted(&file) {
            return None;
        }
        let mut magic = [0u8; 4];
        file.read_exact_at(&mut magic, 0).ok()?;
        if &magic != b"\x7fELF" {
            return None;
        }
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        // Without /proc the descriptor cannot be named; the resolved path is the fallback
        // (the same one `RootedFs::host_path` makes).
        let path = if proc_path.exists() {
            proc_path
        } else {
            fs.root().join(fs.canonical(rel).ok()?)
        };
        Some(NvmlLibrary {
            path,
            shown: fs.root().join(rel).display().to_string(),
            _file: Some(file),
        })
    })
}

/// Loading a library runs its code in this process (as root in a DaemonSet), so a file found
/// under the root must be one only its owner could have put there, as the dynamic loader's
/// secure mode asks of libraries (ld.so(8)): owned by root or by whoever runs gpudoctor, and
/// writable by neither group nor others. A host's driver libraries are root's, 0644/0755.
fn trusted(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = file.metadata() else {
        return false;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    (meta.uid() == 0 || meta.uid() == me) && meta.mode() & 0o022 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(files: &[(&str, &[u8])], links: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, bytes) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        for (rel, target) in links {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, path).unwrap();
        }
        dir
    }

    fn found(dir: &tempfile::TempDir) -> Option<String> {
        choose(&RootedFs::new(dir.path()), None).map(|l| {
            l.shown()
                .strip_prefix(&format!("{}/", dir.path().display()))
                .unwrap()
                .to_string()
        })
    }

    #[test]
    fn the_operator_driver_root_comes_before_the_distribution() {
        let lib = CANDIDATES[0];
        let distro = CANDIDATES[CANDIDATES.len() - 2];
        let dir = root_with(&[(lib, b"\x7fELFop"), (distro, b"\x7fELFdistro")], &[]);
        assert_eq!(found(&dir).as_deref(), Some(lib));
        let dir = root_with(&[(distro, b"\x7fELFdistro")], &[]);
        assert_eq!(found(&dir).as_deref(), Some(distro));
        // An empty placeholder (a hand-built tree) is no library.
        let dir = root_with(&[(lib, b""), (distro, b"\x7fELFdistro")], &[]);
        assert_eq!(found(&dir).as_deref(), Some(distro));
        let dir = root_with(&[], &[]);
        assert_eq!(found(&dir), None);
    }

    #[test]
    fn the_versioned_file_behind_the_soname_link_is_opened() {
        let rel = "usr/lib64/libnvidia-ml.so.1";
        let dir = root_with(
            &[("usr/lib64/libnvidia-ml.so.550.54.15", b"\x7fELFreal")],
            &[(rel, "libnvidia-ml.so.550.54.15")],
        );
        let lib = choose(&RootedFs::new(dir.path()), None).unwrap();
        assert!(lib.shown().ends_with(rel), "{}", lib.shown());
        assert_eq!(std::fs::read(lib.path()).unwrap(), b"\x7fELFreal");
    }

    #[test]
    fn nothing_outside_the_root_and_nothing_but_a_regular_file() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("libnvidia-ml.so.1");
        std::fs::write(&target, b"\x7fELFoutside").unwrap();
        // An absolute link, a link climbing out, a directory and a FIFO in the candidates'
        // places: none is taken, and the last candidate (a real file) is.
        let last = CANDIDATES[CANDIDATES.len() - 1];
        let dir = root_with(
            &[(last, b"\x7fELFinside")],
            &[
                (CANDIDATES[0], target.to_str().unwrap()),
                (CANDIDATES[1], "../../../../../../../../../../../../tmp/x"),
            ],
        );
        std::fs::create_dir_all(dir.path().join(CANDIDATES[2])).unwrap();
        let fifo = dir.path().join(CANDIDATES[3]);
        std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let lib = choose(&RootedFs::new(dir.path()), None).unwrap();
        assert!(lib.shown().ends_with(last), "{}", lib.shown());
        assert_eq!(std::fs::read(lib.path()).unwrap(), b"\x7fELFinside");
    }

    #[test]
    fn a_library_others_could_write_is_not_loaded() {
        use std::os::unix::fs::PermissionsExt;
        let lib = CANDIDATES[0];
        let distro = CANDIDATES[CANDIDATES.len() - 1];
        let dir = root_with(&[(lib, b"\x7fELFop"), (distro, b"\x7fELFdistro")], &[]);
        let path = dir.path().join(lib);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(found(&dir).as_deref(), Some(distro));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(found(&dir).as_deref(), Some(lib));
    }

    #[test]
    fn a_named_library_wins_and_root_slash_leaves_it_to_the_loader() {
        let dir = root_with(&[(CANDIDATES[0], b"\x7fELFop")], &[]);
        let named = choose(
            &RootedFs::new(dir.path()),
            Some(Path::new("/opt/lib/libnvidia-ml.so.1")),
        )
        .unwrap();
        assert_eq!(named.path(), Path::new("/opt/lib/libnvidia-ml.so.1"));
        assert!(choose(&RootedFs::new("/"), None).is_none());
    }
}
