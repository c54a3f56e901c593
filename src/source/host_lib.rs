//! Which driver library a live probe loads: `libnvidia-ml.so.1` for NVML (in this process) and
//! `libcuda.so.1` for the CUDA helper (in its own). Each must be the library of the driver
//! whose kernel module runs (nvml.h: a library/module mismatch fails init with
//! `NVML_ERROR_LIB_RM_VERSION_MISMATCH`; cuda.h: `CUDA_ERROR_SYSTEM_DRIVER_MISMATCH`), so with
//! `--root /host` in a Pod it is the host's, not whatever the container image holds — a Pod
//! that requests no GPU gets no driver library from the toolkit at all (issue 25).
//!
//! Order: the user's `--nvml-lib`/`--cuda-lib` when given, used as named. Else, with a root
//! other than `/`, the first of [`LIB_DIRS`] under the root that holds the library — the GPU
//! Operator's driver root first (its driver container mounts its whole filesystem at
//! /run/nvidia/driver on the host; GPU Operator docs, "Driver container"), GKE
//! Container-Optimized OS's installer directory (`/home/kubernetes/bin/nvidia/lib64`, GKE docs
//! "Installing drivers"), then the distributions' library directories (Debian/Ubuntu multiarch
//! `/usr/lib/<triplet>`, RHEL/SUSE `/usr/lib64`) — then what the host's own loader cache
//! (`etc/ld.so.cache` under the root, `ld_cache.rs`) names, then the dynamic loader's own
//! search (as with root `/`).
//!
//! Confined like every read: each candidate is resolved under the root by `RootedFs` (links
//! followed inside the root only; an absolute link target or a `..` out of it is refused) and
//! must be a regular file. The file is opened there and the loader is handed that descriptor's
//! `/proc/self/fd/N`, so what is loaded is the file that was checked — a link swapped in
//! between cannot send `dlopen` outside the root. The descriptor stays open until the library
//! is loaded ([`HostLibrary`] is moved into the probe; the CUDA helper opens its candidate
//! again itself, [`open_under_root`]). Its code will run, so it must also be owned by root (or
//! by whoever runs gpudoctor) and writable by no one else ([`trusted`]); `--root` should name a
//! host's filesystem, never an untrusted tree.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::rooted::RootedFs;

/// The NVML library's soname.
pub const NVML_SONAME: &str = "libnvidia-ml.so.1";
/// The CUDA driver library's soname (`libcuda.so` is the development symlink only).
pub const CUDA_SONAME: &str = "libcuda.so.1";

/// Where a host keeps the driver's libraries, root-relative, in the order they are tried. Only
/// this machine's architecture's directories (a library of the other one cannot load).
pub const LIB_DIRS: &[&str] = &[
    #[cfg(target_arch = "x86_64")]
    "run/nvidia/driver/usr/lib/x86_64-linux-gnu",
    #[cfg(target_arch = "aarch64")]
    "run/nvidia/driver/usr/lib/aarch64-linux-gnu",
    "run/nvidia/driver/usr/lib64",
    "home/kubernetes/bin/nvidia/lib64",
    #[cfg(target_arch = "x86_64")]
    "usr/lib/x86_64-linux-gnu",
    #[cfg(target_arch = "aarch64")]
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
];

/// Driver roots the host's own loader does not search: the GPU Operator's driver container root
/// and GKE's installer directory. With root `/` (gpudoctor on the host itself, as
/// scripts/gpu-node-probe.sh runs it) these are tried before the loader's search, which on such
/// a node finds no driver library at all (issue 43: NVML and libcuda "not found" on operator
/// hosts).
pub const DRIVER_ROOT_DIRS: &[&str] = &[
    #[cfg(target_arch = "x86_64")]
    "run/nvidia/driver/usr/lib/x86_64-linux-gnu",
    #[cfg(target_arch = "aarch64")]
    "run/nvidia/driver/usr/lib/aarch64-linux-gnu",
    "run/nvidia/driver/usr/lib64",
    "home/kubernetes/bin/nvidia/lib64",
];

/// The host's loader caches, root-relative: the operator driver root's, then the host's.
pub const LD_CACHES: &[&str] = &["run/nvidia/driver/etc/ld.so.cache", "etc/ld.so.cache"];

/// The candidates for `soname` under a root: [`LIB_DIRS`], then what [`LD_CACHES`] name.
pub fn candidates(fs: &RootedFs, soname: &str) -> Vec<String> {
    let mut all: Vec<String> = LIB_DIRS.iter().map(|d| format!("{d}/{soname}")).collect();
    for cache in LD_CACHES {
        // Opened, not read through the traced reads: only a live run searches, and a capture
        // has no use for the host's cache.
        let mut bytes = Vec::new();
        let Ok(file) = fs.open_file(cache) else {
            continue;
        };
        use std::io::Read as _;
        if file
            .take(super::ld_cache::CACHE_CAP)
            .read_to_end(&mut bytes)
            .is_err()
        {
            continue;
        }
        for path in super::ld_cache::paths_for(&bytes, soname) {
            if !all.contains(&path) {
                all.push(path);
            }
        }
    }
    all
}

/// A library to load: the path the loader opens, and what to call it in messages.
#[derive(Debug)]
pub struct HostLibrary {
    path: PathBuf,
    shown: String,
    /// Root-relative, for one found under the root (the CUDA helper opens it again itself).
    relative: Option<String>,
    /// The file the soname link resolves to (`libcuda.so.550.54.15`): its driver version.
    file_name: Option<String>,
    /// Keeps `/proc/self/fd/N` naming the checked file until the library is loaded.
    _file: Option<File>,
}

impl HostLibrary {
    /// `--nvml-lib PATH`: the user's choice, used as given (like `--kernel-log`, a path the
    /// user names outside the root).
    pub fn named(path: &Path) -> Self {
        HostLibrary {
            path: path.to_path_buf(),
            shown: path.display().to_string(),
            relative: None,
            file_name: None,
            _file: None,
        }
    }

    /// What the loader opens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Root-relative, when it was found under the root.
    pub fn relative(&self) -> Option<&str> {
        self.relative.as_deref()
    }

    /// The driver version in the resolved file's name (`libcuda.so.550.54.15` → `550.54.15`).
    pub fn file_version(&self) -> Option<&str> {
        let name = self.file_name.as_deref()?;
        let (_, version) = name.split_once(".so.")?;
        crate::text::is_driver_version(version).then_some(version)
    }

    /// How messages name it: the path given, or `<root>/<candidate>` for one found under the
    /// root (never the `/proc/self/fd` path, which says nothing to a reader).
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// The library `soname` for a live source rooted at `fs`: the one named by the user, else the
/// first candidate under a root other than `/`; with root `/`, the first in a driver root
/// ([`DRIVER_ROOT_DIRS`]); else `None` (the loader's own search).
pub fn choose(fs: &RootedFs, named: Option<&Path>, soname: &str) -> Option<HostLibrary> {
    if let Some(path) = named {
        return Some(HostLibrary::named(path));
    }
    if fs.root() == Path::new("/") {
        return find_in_driver_roots(fs, soname);
    }
    find_under_root(fs, soname)
}

/// The first of [`DRIVER_ROOT_DIRS`] holding `soname` as a loadable library under the root.
pub fn find_in_driver_roots(fs: &RootedFs, soname: &str) -> Option<HostLibrary> {
    DRIVER_ROOT_DIRS
        .iter()
        .find_map(|d| open_under_root(fs, &format!("{d}/{soname}")))
}

/// The first of [`candidates`] that resolves under the root to a regular file that may be
/// loaded ([`open_under_root`]). Candidates that are absent, escape the root, are not regular
/// files or are not ELF (an empty placeholder in a hand-built tree) are passed over.
pub fn find_under_root(fs: &RootedFs, soname: &str) -> Option<HostLibrary> {
    candidates(fs, soname)
        .iter()
        .find_map(|rel| open_under_root(fs, rel))
}

/// One candidate, root-relative: opened confined, owned and writable as [`trusted`] says,
/// starting with the ELF magic; named for the loader by its descriptor.
pub fn open_under_root(fs: &RootedFs, rel: &str) -> Option<HostLibrary> {
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
    // Without /proc the descriptor cannot be named; the resolved path is the fallback (the
    // same one `RootedFs::host_path` makes).
    let resolved = fs.canonical(rel).ok()?;
    let path = if proc_path.exists() {
        proc_path
    } else {
        fs.root().join(&resolved)
    };
    Some(HostLibrary {
        path,
        shown: fs.root().join(rel).display().to_string(),
        relative: Some(rel.to_string()),
        file_name: resolved.rsplit('/').next().map(str::to_string),
        _file: Some(file),
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

    /// The NVML candidate in the `i`th of [`LIB_DIRS`] (negative: from the end).
    fn cand(i: isize) -> String {
        let i = if i < 0 {
            LIB_DIRS.len() as isize + i
        } else {
            i
        } as usize;
        format!("{}/{NVML_SONAME}", LIB_DIRS[i])
    }

    fn found(dir: &tempfile::TempDir) -> Option<String> {
        choose(&RootedFs::new(dir.path()), None, NVML_SONAME).map(|l| {
            l.shown()
                .strip_prefix(&format!("{}/", dir.path().display()))
                .unwrap()
                .to_string()
        })
    }

    #[test]
    fn the_operator_driver_root_comes_before_the_distribution() {
        let (lib, distro) = (&cand(0), &cand(-2));
        let dir = root_with(&[(lib, b"\x7fELFop"), (distro, b"\x7fELFdistro")], &[]);
        assert_eq!(found(&dir).as_deref(), Some(lib.as_str()));
        let dir = root_with(&[(distro, b"\x7fELFdistro")], &[]);
        assert_eq!(found(&dir).as_deref(), Some(distro.as_str()));
        // An empty placeholder (a hand-built tree) is no library.
        let dir = root_with(&[(lib, b""), (distro, b"\x7fELFdistro")], &[]);
        assert_eq!(found(&dir).as_deref(), Some(distro.as_str()));
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
        let lib = choose(&RootedFs::new(dir.path()), None, NVML_SONAME).unwrap();
        assert!(lib.shown().ends_with(rel), "{}", lib.shown());
        assert_eq!(std::fs::read(lib.path()).unwrap(), b"\x7fELFreal");
        assert_eq!(lib.file_version(), Some("550.54.15"));
        assert_eq!(lib.relative(), Some(rel));
    }

    #[test]
    fn nothing_outside_the_root_and_nothing_but_a_regular_file() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("libnvidia-ml.so.1");
        std::fs::write(&target, b"\x7fELFoutside").unwrap();
        // An absolute link, a link climbing out, a directory and a FIFO in the candidates'
        // places: none is taken, and the last candidate (a real file) is.
        let last = &cand(-1);
        let dir = root_with(
            &[(last, b"\x7fELFinside")],
            &[
                (&cand(0), target.to_str().unwrap()),
                (&cand(1), "../../../../../../../../../../../../tmp/x"),
            ],
        );
        std::fs::create_dir_all(dir.path().join(cand(2))).unwrap();
        let fifo = dir.path().join(cand(3));
        std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let lib = choose(&RootedFs::new(dir.path()), None, NVML_SONAME).unwrap();
        assert!(lib.shown().ends_with(last.as_str()), "{}", lib.shown());
        assert_eq!(std::fs::read(lib.path()).unwrap(), b"\x7fELFinside");
    }

    #[test]
    fn a_library_others_could_write_is_not_loaded() {
        use std::os::unix::fs::PermissionsExt;
        let (lib, distro) = (&cand(0), &cand(-1));
        let dir = root_with(&[(lib, b"\x7fELFop"), (distro, b"\x7fELFdistro")], &[]);
        let path = dir.path().join(lib);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(found(&dir).as_deref(), Some(distro.as_str()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(found(&dir).as_deref(), Some(lib.as_str()));
    }

    #[test]
    fn a_named_library_wins_and_root_slash_leaves_it_to_the_loader() {
        let dir = root_with(&[(&cand(0), b"\x7fELFop")], &[]);
        let named = choose(
            &RootedFs::new(dir.path()),
            Some(Path::new("/opt/lib/libnvidia-ml.so.1")),
            NVML_SONAME,
        )
        .unwrap();
        assert_eq!(named.path(), Path::new("/opt/lib/libnvidia-ml.so.1"));
        assert!(choose(&RootedFs::new("/"), None, NVML_SONAME).is_none());
    }

    /// On the host itself (root `/`) the loader knows nothing of the GPU Operator's driver root:
    /// the driver roots are searched first, and only they (a distribution's own directories
    /// stay the loader's business). Tested on a temporary root through the same function.
    #[test]
    fn driver_roots_are_searched_where_the_loader_does_not_look() {
        let dir = root_with(
            &[
                (&cand(0), b"\x7fELFop"),
                ("usr/lib64/libnvidia-ml.so.1", b"\x7fELFdistro"),
            ],
            &[],
        );
        let fs = RootedFs::new(dir.path());
        let found = find_in_driver_roots(&fs, NVML_SONAME).unwrap();
        assert_eq!(found.relative(), Some(cand(0).as_str()));
        let dir = root_with(&[("usr/lib64/libnvidia-ml.so.1", b"\x7fELFdistro")], &[]);
        assert!(find_in_driver_roots(&RootedFs::new(dir.path()), NVML_SONAME).is_none());
    }

    /// GKE Container-Optimized OS keeps the driver where its installer put it; nothing else on
    /// the host holds libcuda or NVML.
    #[test]
    fn gke_cos_keeps_the_driver_in_the_installers_directory() {
        let gke = "home/kubernetes/bin/nvidia/lib64";
        let dir = root_with(
            &[
                (&format!("{gke}/libcuda.so.535.183.01"), b"\x7fELFcuda"),
                (&format!("{gke}/libnvidia-ml.so.535.183.01"), b"\x7fELFnvml"),
            ],
            &[
                (&format!("{gke}/libcuda.so.1"), "libcuda.so.535.183.01"),
                (
                    &format!("{gke}/libnvidia-ml.so.1"),
                    "libnvidia-ml.so.535.183.01",
                ),
            ],
        );
        let fs = RootedFs::new(dir.path());
        let cuda = choose(&fs, None, CUDA_SONAME).unwrap();
        assert_eq!(
            cuda.relative(),
            Some(format!("{gke}/libcuda.so.1").as_str())
        );
        assert_eq!(cuda.file_version(), Some("535.183.01"));
        assert_eq!(std::fs::read(cuda.path()).unwrap(), b"\x7fELFcuda");
        let nvml = choose(&fs, None, NVML_SONAME).unwrap();
        assert_eq!(std::fs::read(nvml.path()).unwrap(), b"\x7fELFnvml");
    }

    /// A driver in a directory no list knows (`/usr/local/nvidia/lib64`) is found through the
    /// host's loader cache, a real one written by glibc's ldconfig (tests/data/ld-so-cache/),
    /// and still only under the root.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_hosts_loader_cache_names_a_driver_elsewhere() {
        let lib = "usr/local/nvidia/lib64";
        for cache in [
            &include_bytes!("../../tests/data/ld-so-cache/glibc-2.36-new.cache")[..],
            &include_bytes!("../../tests/data/ld-so-cache/glibc-2.36-compat.cache")[..],
        ] {
            let dir = root_with(
                &[
                    ("etc/ld.so.cache", cache),
                    (&format!("{lib}/libcuda.so.550.54.15"), b"\x7fELFcuda"),
                ],
                &[(&format!("{lib}/libcuda.so.1"), "libcuda.so.550.54.15")],
            );
            let fs = RootedFs::new(dir.path());
            let cuda = choose(&fs, None, CUDA_SONAME).unwrap();
            assert_eq!(
                cuda.relative(),
                Some(format!("{lib}/libcuda.so.1").as_str())
            );
            assert_eq!(cuda.file_version(), Some("550.54.15"));
            // The cache names NVML there too, but the file is not: nothing is found.
            assert!(choose(&fs, None, NVML_SONAME).is_none());
        }
        // The cache's path is resolved under the root: a link there that leaves it is refused.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("libcuda.so.1"), b"\x7fELFout").unwrap();
        let dir = root_with(
            &[(
                "etc/ld.so.cache",
                include_bytes!("../../tests/data/ld-so-cache/glibc-2.36-new.cache"),
            )],
            &[(
                &format!("{lib}/libcuda.so.1"),
                outside.path().join("libcuda.so.1").to_str().unwrap(),
            )],
        );
        assert!(choose(&RootedFs::new(dir.path()), None, CUDA_SONAME).is_none());
    }
}
