//! toolkit.disk_space, toolkit.disk_inodes: the filesystems under the container runtime's root,
//! the kubelet's root and /var/log (facts in `facts/disk.rs`) have room and inodes left. A full
//! one stops Pods before any GPU is touched: the runtime cannot unpack an image, the kubelet
//! evicts Pods and refuses new ones (node condition DiskPressure), logs stop.
//!
//! Thresholds are the kubelet's hard eviction signals (Kubernetes docs, "Node-pressure
//! Eviction", "Hard eviction thresholds": Linux defaults `nodefs.available<10%`,
//! `nodefs.inodesFree<5%`, `imagefs.available<15%`, `imagefs.inodesFree<5%`; "If you change the
//! value of any parameter, then the values of other parameters will not be inherited as the
//! default values and will be set to zero"), read from the node's kubelet config
//! (`evictionHard`) when it sets them. At or below the threshold fails (the kubelet is
//! evicting); below twice it warns (gpudoctor's margin, in the manner of LBNL NHC's
//! `check_fs_free`/`check_fs_inodes`, which fail below a stated free share). A filesystem that
//! holds more than one watched directory is judged once, by the strictest of their signals.

use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::fs_stat::FsStat;
use crate::facts::disk::{Filesystem, Role};
use crate::report::{Action, Evidence, Layer, Status};

const SPACE_EXPLAIN: Explain = Explain {
    reads: "the container runtime's root (containerd `root` in its config, default /var/lib/containerd; CRI-O `[crio] root`, default /var/lib/containers/storage), the kubelet's --root-dir (default /var/lib/kubelet) and /var/log: statvfs(3) of each, live or from a capture's .gpudoctor/statvfs.json; the kubelet config's evictionHard",
    expects: "available space (f_bavail over f_blocks, as cAdvisor and the kubelet compute it) above twice the kubelet's hard eviction threshold: nodefs.available 10% (kubelet root, /var/log), imagefs.available 15% (runtime root) unless evictionHard sets others; at or below the threshold fails, below twice it warns",
    why: "at the threshold the kubelet reports DiskPressure, evicts Pods and admits no new ones, and the runtime cannot unpack images: GPU Pods stay Pending or are killed whatever the GPUs' state",
    fix: "free space on the filesystem named: `crictl rmi --prune` (unused images), `journalctl --vacuum-size=1G`, remove old logs under /var/log; `du -xh --max-depth=2 <dir> | sort -h` shows what fills it; or move the runtime's root to a larger disk",
};

const INODES_EXPLAIN: Explain = Explain {
    reads: "the same directories as toolkit.disk_space: statvfs(3) f_ffree and f_files of each filesystem; the kubelet config's evictionHard",
    expects: "free inodes above twice the kubelet's hard eviction threshold (nodefs.inodesFree and imagefs.inodesFree 5% unless evictionHard sets others); at or below it fails, below twice it warns; a filesystem without an inode count (btrfs reports 0) is not judged",
    why: "a filesystem out of inodes refuses new files with space left: image layers do not unpack, containers do not start, the kubelet evicts Pods on inodesFree",
    fix: "find the directory with the most files (`du --inodes -x --max-depth=3 <dir> | sort -n | tail`), usually leftover container layers or logs: `crictl rmi --prune`, `crictl rm` of exited containers, remove old logs",
};

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "toolkit.disk_space",
            layer: Layer::Toolkit,
            title: "the runtime's, the kubelet's and the log filesystems have space left",
            explain: SPACE_EXPLAIN,
            run: disk_space,
        },
        CheckDef {
            code: "toolkit.disk_inodes",
            layer: Layer::Toolkit,
            title: "the runtime's, the kubelet's and the log filesystems have inodes left",
            explain: INODES_EXPLAIN,
            run: disk_inodes,
        },
    ]
}

/// Space or inodes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resource {
    Space,
    Inodes,
}

impl Resource {
    fn signal(self, role: Role) -> String {
        match self {
            Resource::Space => format!("{}.available", role.signal_fs()),
            Resource::Inodes => format!("{}.inodesFree", role.signal_fs()),
        }
    }
    /// The kubelet's default hard threshold, as a share.
    fn default_share(self, role: Role) -> f64 {
        match (self, role) {
            (Resource::Space, Role::Images) => 0.15,
            (Resource::Space, _) => 0.10,
            (Resource::Inodes, _) => 0.05,
        }
    }
    fn share(self, stat: &FsStat) -> Option<f64> {
        match self {
            Resource::Space => stat.available_ratio(),
            Resource::Inodes => stat.inodes_free_ratio(),
        }
    }
    fn noun(self) -> &'static str {
        match self {
            Resource::Space => "space",
            Resource::Inodes => "inodes",
        }
    }
}

/// One signal's hard threshold as a share of the filesystem, and where it came from.
#[derive(Debug, Clone, PartialEq)]
struct Threshold {
    share: f64,
    said: String,
}

/// The threshold of `signal` on a filesystem of `stat`: the kubelet config's `evictionHard`
/// (a percentage, or a quantity of bytes or inodes) when it has one, zero when it sets others
/// but not this one, the kubelet's default when it sets none.
fn threshold(
    eviction: Option<&std::collections::BTreeMap<String, String>>,
    resource: Resource,
    role: Role,
    stat: &FsStat,
) -> Threshold {
    let signal = resource.signal(role);
    let Some(map) = eviction else {
        let share = resource.default_share(role);
        return Threshold {
            share,
            said: format!("{signal}<{}% (kubelet default)", pct(share)),
        };
    };
    let Some(value) = map.get(&signal) else {
        return Threshold {
            share: 0.0,
            said: format!("{signal} not in evictionHard (the kubelet sets it to 0)"),
        };
    };
    let total = match resource {
        Resource::Space => stat.size_bytes() as f64,
        Resource::Inodes => stat.files as f64,
    };
    let share = match value.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok().map(|p| p / 100.0),
        None => crate::facts::kubelet::quantity(value)
            .filter(|_| total > 0.0)
            .map(|q| q / total),
    };
    match share {
        Some(share) if share.is_finite() && share >= 0.0 => Threshold {
            share: share.min(1.0),
            said: format!("{signal}<{value} (evictionHard)"),
        },
        _ => {
            let share = resource.default_share(role);
            Threshold {
                share,
                said: format!(
                    "{signal}<{}% (kubelet default; evictionHard {value:?} not understood)",
                    pct(share)
                ),
            }
        }
    }
}

fn pct(share: f64) -> String {
    let p = share * 100.0;
    if (p - p.round()).abs() < 0.05 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1024.0 * 1024.0 * 1024.0))
}

fn disk_space(ctx: &Context<'_>) -> Outcome {
    judge(ctx, Resource::Space)
}

fn disk_inodes(ctx: &Context<'_>) -> Outcome {
    judge(ctx, Resource::Inodes)
}

/// The directories of a filesystem as `/var/lib/containerd (container runtime root)`.
fn dirs_of(fs: &Filesystem) -> String {
    fs.dirs
        .iter()
        .map(|d| format!("/{}", d.path))
        .collect::<Vec<_>>()
        .join(", ")
}

fn observed(resource: Resource, stat: &FsStat, share: f64) -> String {
    match resource {
        Resource::Space => format!(
            "{}% available ({} of {})",
            pct(share),
            gib(stat.available_bytes()),
            gib(stat.size_bytes())
        ),
        Resource::Inodes => format!(
            "{}% inodes free ({} of {})",
            pct(share),
            stat.files_free,
            stat.files
        ),
    }
}

fn judge(ctx: &Context<'_>, resource: Resource) -> Outcome {
    if let Some(skip) = super::toolkit::not_applicable(ctx) {
        return skip;
    }
    let facts = ctx.disk();
    if facts.is_empty() {
        return Outcome::skip(
            "no container runtime root, kubelet root or /var/log under the root to look at",
        );
    }
    if facts.filesystems.is_empty() && facts.failed.is_empty() {
        let dirs: Vec<String> = facts
            .not_recorded
            .iter()
            .map(|d| format!("/{}", d.path))
            .collect();
        return Outcome::skip(format!(
            "no statvfs figures for {}: a capture recorded before gpudoctor kept .gpudoctor/statvfs.json (re-record it), or a live root that is neither / nor a mount point (a copy of a node's files sits on another disk)",
            dirs.join(", ")
        ));
    }
    let eviction = match ctx.kubelet_config() {
        Ok(Some((config, _))) => config.eviction_hard.as_ref(),
        _ => None,
    };
    let mut status = Status::Pass;
    let mut evidence = Vec::new();
    let mut bad: Vec<String> = Vec::new();
    let mut judged = Vec::new();
    let mut unjudged = Vec::new();
    for fs in &facts.filesystems {
        let Some(share) = resource.share(&fs.stat) else {
            unjudged.push(dirs_of(fs));
            continue;
        };
        // The strictest signal among the directories on it.
        let limit = fs
            .dirs
            .iter()
            .map(|d| threshold(eviction, resource, d.role, &fs.stat))
            .fold(None::<Threshold>, |best, t| match best {
                Some(b) if b.share >= t.share => Some(b),
                _ => Some(t),
            })
            .unwrap_or(Threshold {
                share: 0.0,
                said: String::new(),
            });
        let roles: Vec<&str> = fs.dirs.iter().map(|d| d.role.name()).collect();
        let verdict = if share <= limit.share {
            Status::Fail
        } else if share < 2.0 * limit.share {
            Status::Warn
        } else {
            Status::Pass
        };
        judged.push(format!("{} {}%", dirs_of(fs), pct(share)));
        if verdict != Status::Pass {
            if verdict == Status::Fail || status == Status::Pass {
                status = verdict;
            }
            bad.push(format!(
                "{} ({}) {}% {} free",
                dirs_of(fs),
                roles.join(", "),
                pct(share),
                resource.noun()
            ));
            let expected = match verdict {
                Status::Fail => format!("above {} (the kubelet evicts at or below it)", limit.said),
                _ => format!(
                    "at least {}%, twice {} (gpudoctor's margin before eviction)",
                    pct(2.0 * limit.share),
                    limit.said
                ),
            };
            let found_by: Vec<String> = fs
                .dirs
                .iter()
                .map(|d| format!("/{} ({})", d.path, d.found_by))
                .collect();
            evidence.push(
                Evidence::new(
                    format!("statvfs {}", found_by.join(", ")),
                    observed(resource, &fs.stat, share),
                )
                .expected(expected),
            );
        }
    }
    let failed_evidence: Vec<Evidence> = facts
        .failed
        .iter()
        .map(|(d, err)| Evidence::new(format!("statvfs /{}", d.path), err.clone()))
        .collect();
    let mut notes = Vec::new();
    if !unjudged.is_empty() {
        notes.push(format!(
            "no inode count on {} (not judged)",
            unjudged.join(", ")
        ));
    }
    if !facts.not_recorded.is_empty() {
        let dirs: Vec<String> = facts
            .not_recorded
            .iter()
            .map(|d| format!("/{}", d.path))
            .collect();
        notes.push(format!("not recorded: {}", dirs.join(", ")));
    }
    let noted = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    if status == Status::Pass {
        if !facts.failed.is_empty() {
            let (d, err) = &facts.failed[0];
            let mut out = Outcome::error(format!(
                "statvfs of {} director{} failed (first /{}: {err}){noted}",
                facts.failed.len(),
                if facts.failed.len() == 1 { "y" } else { "ies" },
                d.path
            ))
            .hint("check that gpudoctor runs as root and that --root points at the node's root (a DaemonSet mounts it at /host)");
            for e in failed_evidence {
                out = out.evidence(e);
            }
            return out;
        }
        return Outcome::pass(format!(
            "{} free on {} filesystem(s): {}{noted}",
            resource.noun(),
            judged.len(),
            judged.join(", ")
        ));
    }
    let what = match resource {
        Resource::Space => "low on space",
        Resource::Inodes => "low on inodes",
    };
    let summary = format!("{what}: {}{noted}", bad.join("; "));
    let mut out = if status == Status::Fail {
        Outcome::fail(summary)
    } else {
        Outcome::warn(summary)
    };
    for e in evidence.into_iter().chain(failed_evidence) {
        out = out.evidence(e);
    }
    let hint = match resource {
        Resource::Space => {
            "free space there: `crictl rmi --prune` removes unused images, `journalctl --vacuum-size=1G` trims the journal; `du -xh --max-depth=2 <dir> | sort -h` shows what fills it"
        }
        Resource::Inodes => {
            "find what holds the files: `du --inodes -x --max-depth=3 <dir> | sort -n | tail`; `crictl rmi --prune` and `crictl rm` of exited containers free layers"
        }
    };
    out.hint(hint).action(Action::FixConfig)
}

#[cfg(test)]
mod tests;
