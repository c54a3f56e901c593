//! The host's own name, as the host sees it. `proc/sys/kernel/hostname` answers in the UTS
//! namespace of the process that reads it, whatever `/proc` it is read through: in a Pod it is
//! the Pod's name even under `--root /host`. The host's init process (pid 1 of the host's `/proc`
//! under the root) lives in the host's UTS namespace; a thread of ours that joins it
//! (`setns(2)` with `CLONE_NEWUTS`, which moves only the calling thread) and asks `uname(2)` gets
//! the node's name. It needs CAP_SYS_ADMIN (the privileged DaemonSet has it); without it, or
//! without the host's `/proc` under the root, there is no answer and the caller falls back to
//! the files. Only a live source asks; a capture keeps `NODE_NAME` in `env.json` instead.

use std::os::fd::AsRawFd;
use std::path::Path;

/// The node name of the UTS namespace whose nsfs file is `uts` in `ns_dir` (pid 1's `ns`
/// directory, resolved inside the root by the caller). `None` when it cannot be had (no such
/// file, no privilege, an empty name).
pub fn host_nodename(ns_dir: &Path) -> Option<String> {
    // The namespace file is a magic link into nsfs: opened as a namespace, never read.
    let ns = std::fs::File::open(ns_dir.join("uts")).ok()?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: a valid descriptor of an nsfs file; only this short-lived thread moves.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWUTS) } != 0 {
                    return None;
                }
                nodename()
            })
            .join()
            .ok()
            .flatten()
    })
}

/// `uname(2)`'s node name for the calling thread's UTS namespace.
fn nodename() -> Option<String> {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return None;
    }
    let bytes: Vec<u8> = uts
        .nodename
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let name = String::from_utf8_lossy(&bytes).trim().to_string();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proc_under_the_root_is_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(host_nodename(&dir.path().join("proc/1/ns")), None);
    }

    #[test]
    fn the_own_namespace_answers_its_own_name() {
        // Joining our own UTS namespace changes nothing: the name is ours (where setns is
        // refused, as without CAP_SYS_ADMIN, there is no answer at all).
        if let Some(name) = host_nodename(Path::new("/proc/self/ns")) {
            assert_eq!(Some(name), nodename());
        }
    }
}
