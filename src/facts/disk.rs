//! The filesystems Pods need before any GPU matters: where the container runtime keeps images
//! and container layers, where the kubelet keeps Pods' volumes and its own state, and where
//! logs go (LBNL NHC `check_fs_free`/`check_fs_inodes` watch the same kind of mounts). Finds
//! the directories, asks the source for `statvfs` of each (live, or a capture's
//! `.gpudoctor/statvfs.json`) and puts the directories that share a filesystem together (same
//! `st_dev`). Facts only: `checks/disk.rs` judges them against the kubelet's eviction
//! thresholds.
//!
//! Where each directory is:
//! - containerd's `root` from its config (containerd `cmd/containerd/server/config/config.go`
//!   `Root`, default `/var/lib/containerd`, `defaults.DefaultRootDir`);
//! - CRI-O's `[crio] root` (crio.conf(5): "root: Path to the 'root directory'... default
//!   /var/lib/containers/storage");
//! - the kubelet's `--root-dir` from its command line (kubelet `cmd/kubelet/app/options`
//!   `defaultRootDir = "/var/lib/kubelet"`);
//! - `/var/log` (container logs under `/var/log/pods`, the kubelet's `podLogsRootDirectory`).

use crate::answers::fs_stat::{FsStat, StatAnswer};
use crate::facts::kubelet_locate;
use crate::facts::toolkit::{RuntimeFacts, RuntimeKind};
use crate::source::Source;

/// containerd's default `root`.
pub const CONTAINERD_ROOT: &str = "var/lib/containerd";
/// CRI-O's (containers/storage's) default `root`.
pub const CRIO_ROOT: &str = "var/lib/containers/storage";
/// The kubelet's default `--root-dir`.
pub const KUBELET_ROOT: &str = "var/lib/kubelet";
/// Where the kubelet and the runtime write container logs.
pub const LOG_DIR: &str = "var/log";

/// What a directory holds, which names the kubelet's eviction signal that watches it
/// (Kubernetes docs, "Node-pressure Eviction": `imagefs` is the runtime's images and writable
/// layers, `nodefs` the kubelet's root, volumes and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The container runtime's root: `imagefs`.
    Images,
    /// The kubelet's root: `nodefs`.
    Kubelet,
    /// `/var/log`: `nodefs` (the kubelet counts Pods' logs there).
    Logs,
}

impl Role {
    /// The eviction signals' filesystem name.
    pub fn signal_fs(self) -> &'static str {
        match self {
            Role::Images => "imagefs",
            Role::Kubelet | Role::Logs => "nodefs",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Role::Images => "container runtime root",
            Role::Kubelet => "kubelet root",
            Role::Logs => "logs",
        }
    }
}

/// One directory watched: root-relative path, what it holds, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub path: String,
    pub role: Role,
    pub found_by: String,
}

/// One filesystem and the watched directories on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filesystem {
    pub dirs: Vec<Watched>,
    pub stat: FsStat,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskFacts {
    /// Filesystems with figures, in the order their first directory was found.
    pub filesystems: Vec<Filesystem>,
    /// Directories whose `statvfs` failed, with why.
    pub failed: Vec<(Watched, String)>,
    /// Directories the source had no figures for (a capture recorded before it kept them).
    pub not_recorded: Vec<Watched>,
}

impl DiskFacts {
    /// Nothing to judge: no runtime root, kubelet root or `/var/log` under the root.
    pub fn is_empty(&self) -> bool {
        self.filesystems.is_empty() && self.failed.is_empty() && self.not_recorded.is_empty()
    }
}

/// An absolute path as written in a config, root-relative; `None` for a relative one (neither
/// containerd nor CRI-O accepts it) or an empty one.
fn relative(path: &str) -> Option<String> {
    let rel = path.strip_prefix('/')?.trim_matches('/');
    (!rel.is_empty() && !rel.split('/').any(|c| c == "..")).then(|| rel.to_string())
}

/// The directories to watch, each once (whether each is there is asked with its figures).
pub fn watched(source: &dyn Source, runtime: Option<&RuntimeFacts>) -> Vec<Watched> {
    let mut out: Vec<Watched> = Vec::new();
    let mut add = |path: String, role: Role, found_by: String| {
        if !out.iter().any(|w| w.path == path) {
            out.push(Watched {
                path,
                role,
                found_by,
            });
        }
    };
    match runtime {
        Some(rt) => {
            let file = rt.files.first().cloned().unwrap_or_default();
            let (default, key) = match rt.kind {
                RuntimeKind::Containerd => (CONTAINERD_ROOT, "root"),
                RuntimeKind::Crio => (CRIO_ROOT, "[crio] root"),
            };
            match rt.settings.root.as_deref().and_then(relative) {
                Some(path) => add(path, Role::Images, format!("{key} in /{file}")),
                None => add(
                    default.to_string(),
                    Role::Images,
                    format!("{}'s default (no {key} in /{file})", rt.kind.name()),
                ),
            }
        }
        None => {
            for (path, who) in [(CONTAINERD_ROOT, "containerd"), (CRIO_ROOT, "CRI-O")] {
                add(
                    path.to_string(),
                    Role::Images,
                    format!("{who}'s default root (no runtime config found)"),
                );
            }
        }
    }
    let (kubelet, _) = kubelet_locate::running_kubelet(source);
    match kubelet.and_then(|(pid, cmd)| cmd.root_dir.map(|dir| (pid, dir))) {
        Some((pid, dir)) => add(
            dir,
            Role::Kubelet,
            format!("--root-dir of the kubelet (pid {pid})"),
        ),
        None => add(
            KUBELET_ROOT.to_string(),
            Role::Kubelet,
            "the kubelet's default --root-dir".to_string(),
        ),
    }
    add(
        LOG_DIR.to_string(),
        Role::Logs,
        "container logs".to_string(),
    );
    out
}

/// Ask `statvfs` of each watched directory and group them by filesystem.
pub fn gather(source: &dyn Source, runtime: Option<&RuntimeFacts>) -> DiskFacts {
    let mut facts = DiskFacts::default();
    for dir in watched(source, runtime) {
        match source.fs_stat(&dir.path) {
            None => facts.not_recorded.push(dir),
            Some(StatAnswer::Missing { .. }) => {}
            Some(StatAnswer::Failed { error }) => facts.failed.push((dir, error)),
            Some(StatAnswer::Stat(stat)) => match facts
                .filesystems
                .iter_mut()
                .find(|fs| fs.stat.dev == stat.dev)
            {
                Some(fs) => fs.dirs.push(dir),
                None => facts.filesystems.push(Filesystem {
                    dirs: vec![dir],
                    stat,
                }),
            },
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_paths_become_root_relative() {
        assert_eq!(relative("/data/containerd"), Some("data/containerd".into()));
        assert_eq!(
            relative("/var/lib/containerd/"),
            Some("var/lib/containerd".into())
        );
        assert_eq!(relative("data"), None);
        assert_eq!(relative("/"), None);
        assert_eq!(relative(""), None);
        assert_eq!(relative("/a/../etc"), None);
    }
}
