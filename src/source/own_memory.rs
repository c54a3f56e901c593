//! This process's own memory cgroup: its limit and how many times the kernel's OOM killer has
//! struck in it. Read around a helper run (the CUDA probe), so a helper that dies of SIGKILL is
//! told apart: the OOM killer (the cgroup's `oom_kill` count rose) against the Pod's memory limit,
//! or something else. These are gpudoctor's own files (`/proc/self/cgroup`, `/sys/fs/cgroup`),
//! not the node's under `--root`: in a Pod they are the container's.
//!
//! Formats (kernel Documentation/admin-guide/cgroup-v2.rst): `/proc/self/cgroup` is
//! `0::/path` on cgroup v2 (`N:memory:/path` on v1); v2 keeps `memory.max` ("max" or bytes) and
//! `memory.events` (`oom_kill N`); v1 keeps `memory.limit_in_bytes` (a huge number when unset)
//! and `memory.oom_control` (`oom_kill N`, kernel 4.13 and later). With a cgroup namespace the
//! path is `/` and the files are at the mount's top.

use std::path::{Path, PathBuf};

/// The memory cgroup as seen once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryState {
    /// Bytes; `None` when unlimited or unreadable.
    pub limit_bytes: Option<u64>,
    /// OOM kills in the cgroup so far; `None` when unreadable.
    pub oom_kills: Option<u64>,
}

/// A v1 limit at or above this is "unlimited" (the kernel reports PAGE_COUNTER_MAX pages).
const V1_UNLIMITED: u64 = 1 << 62;

/// This process's memory cgroup now.
pub fn now() -> MemoryState {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    read(&cgroup, Path::new("/sys/fs/cgroup"))
}

/// `cgroup` is `/proc/self/cgroup`'s text, `mount` where the hierarchy is mounted.
pub fn read(cgroup: &str, mount: &Path) -> MemoryState {
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            let dir = dir_of(mount, path, "memory.max");
            return MemoryState {
                limit_bytes: read_file(&dir, "memory.max").and_then(|t| t.trim().parse().ok()),
                oom_kills: read_file(&dir, "memory.events").and_then(|t| oom_kill(&t)),
            };
        }
        if controllers.split(',').any(|c| c == "memory") {
            let v1 = mount.join("memory");
            let dir = dir_of(&v1, path, "memory.limit_in_bytes");
            return MemoryState {
                limit_bytes: read_file(&dir, "memory.limit_in_bytes")
                    .and_then(|t| t.trim().parse().ok())
                    .filter(|b| *b < V1_UNLIMITED),
                oom_kills: read_file(&dir, "memory.oom_control").and_then(|t| oom_kill(&t)),
            };
        }
    }
    MemoryState::default()
}

/// The cgroup's directory: `mount/path`, or the mount's top when the path is not there (a
/// cgroup namespace shows `/`, or a path from the host's view).
fn dir_of(mount: &Path, path: &str, probe: &str) -> PathBuf {
    let nested = mount.join(path.trim_start_matches('/'));
    if nested.join(probe).is_file() {
        nested
    } else {
        mount.to_path_buf()
    }
}

fn read_file(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

fn oom_kill(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn cgroup_v2_nested_and_namespaced() {
        let mount = tempfile::tempdir().unwrap();
        let dir = mount.path().join("kubepods.slice/pod1/cri-abc");
        put(&dir, "memory.max", "268435456\n");
        // memory.events as the kernel writes it (cgroup-v2.rst).
        put(
            &dir,
            "memory.events",
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
        );
        let state = read("0::/kubepods.slice/pod1/cri-abc\n", mount.path());
        assert_eq!(state.limit_bytes, Some(256 << 20));
        assert_eq!(state.oom_kills, Some(1));
        // A cgroup namespace: the path is `/`, the files at the top.
        let top = tempfile::tempdir().unwrap();
        put(top.path(), "memory.max", "max\n");
        put(top.path(), "memory.events", "oom_kill 0\n");
        let state = read("0::/\n", top.path());
        assert_eq!(state.limit_bytes, None);
        assert_eq!(state.oom_kills, Some(0));
    }

    #[test]
    fn cgroup_v1_and_nothing() {
        let mount = tempfile::tempdir().unwrap();
        let dir = mount.path().join("memory/docker/abc");
        put(&dir, "memory.limit_in_bytes", "1073741824\n");
        put(
            &dir,
            "memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        );
        let state = read("12:pids:/docker/abc\n4:memory:/docker/abc\n", mount.path());
        assert_eq!(state.limit_bytes, Some(1 << 30));
        assert_eq!(state.oom_kills, Some(3));
        put(&dir, "memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(
            read("4:memory:/docker/abc\n", mount.path()).limit_bytes,
            None
        );
        assert_eq!(read("", mount.path()), MemoryState::default());
    }
}
