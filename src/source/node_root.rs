//! Whether a live root is a node's own root: `/`, or a mount point (the DaemonSet's hostPath
//! mount at `/host`). Only then do `statvfs` figures under it describe the node's disks: a copy
//! of a node's files in an ordinary directory sits on whatever disk holds the copy, and judging
//! that disk as the node's would be a made-up finding (`checks/disk.rs`).
//!
//! A bind mount has the same `st_dev` as the filesystem it shows, so the mount is asked of the
//! kernel: statx(2) `STATX_ATTR_MOUNT_ROOT` (Linux 5.8); on older kernels, which leave the
//! attribute out of `stx_attributes_mask`, a root whose `st_dev` differs from its parent's.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Is `root` `/` or the root of a mount?
pub fn is_node_root(root: &Path) -> bool {
    let Ok(canonical) = root.canonicalize() else {
        return false;
    };
    if canonical == Path::new("/") {
        return true;
    }
    if let Some(on) = mount_root_attribute(&canonical) {
        return on;
    }
    match (
        std::fs::metadata(&canonical),
        canonical.parent().map(std::fs::metadata),
    ) {
        (Ok(me), Some(Ok(parent))) => {
            use std::os::unix::fs::MetadataExt;
            me.dev() != parent.dev()
        }
        _ => false,
    }
}

/// statx's `STATX_ATTR_MOUNT_ROOT`, when the kernel reports it.
fn mount_root_attribute(path: &Path) -> Option<bool> {
    let name = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statx` is a valid value for the kernel to overwrite.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out pointer.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS,
            &mut st,
        )
    };
    let mount_root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if rc != 0 || st.stx_attributes_mask & mount_root == 0 {
        return None;
    }
    Some(st.stx_attributes & mount_root != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_is_a_node_root_and_a_plain_directory_is_not() {
        assert!(is_node_root(Path::new("/")));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("copy")).unwrap();
        assert!(!is_node_root(&dir.path().join("copy")));
        assert!(!is_node_root(&dir.path().join("missing")));
        // /proc is a mount of its own wherever the tests run.
        assert!(is_node_root(Path::new("/proc")));
    }
}
