//! Where this node's kubelet keeps its configuration, recognised from what the node shows, never
//! from a flag: first the running kubelet's own command line (`/proc/<pid>/cmdline` of the
//! process whose `comm` is `kubelet`, found by a bounded scan of `/proc`), which names its
//! `--config` file and `--config-dir` drop-ins and may set resource-manager flags; else the
//! paths the installers write (the table [`KNOWN`], each row citing its installer's source).
//! Facts only: the files' contents are parsed in `facts/kubelet.rs`.
//!
//! Sources:
//! - the kubelet's flags `--config`, `--config-dir` and that a flag set on the command line wins
//!   over the file (Kubernetes docs, "Set Kubelet Parameters Via A Configuration File":
//!   "kubelet-config.d", drop-ins `*.conf` applied in name order over `--config`);
//! - kubeadm writes `/var/lib/kubelet/config.yaml` (kubeadm `kubeletConfigurationFileName`);
//! - EKS nodeadm (awslabs/amazon-eks-ami, nodeadm/internal/kubelet/config.go:
//!   `kubeletConfigRoot = "/etc/kubernetes/kubelet"`, `config.json`, drop-ins in
//!   `config.json.d`, the user's as `40-nodeadm.conf`); the AL2 AMI before nodeadm wrote
//!   `/etc/kubernetes/kubelet/kubelet-config.json`;
//! - GKE (kubernetes cluster/gce/gci/configure-helper.sh: `KUBELET_CONFIG_FILE`,
//!   `/home/kubernetes/kubelet-config.yaml`);
//! - AKS (Azure/AgentBaker `cse_config.sh`: `KUBELET_CONFIG_JSON_PATH="/etc/default/kubeletconfig.json"`,
//!   named by the kubelet unit's drop-in `10-componentconfig.conf` as `--config <path>`);
//! - OpenShift's Machine Config Operator (`/etc/kubernetes/kubelet.conf`, the kubelet unit's
//!   `--config=/etc/kubernetes/kubelet.conf`);
//! - k3s and RKE2 run the kubelet with `--config-dir` pointing at
//!   `/var/lib/rancher/{k3s,rke2}/agent/etc/kubelet.conf.d` (k3s docs, "Kubelet Configuration
//!   Files": `00-k3s-defaults.conf`), other settings as `--kubelet-arg` flags.

use std::collections::BTreeMap;

use crate::source::Source;

/// At most this many `/proc` entries are looked at for the kubelet (a node runs thousands of
/// processes at most; a damaged or hostile `/proc` never costs more than this).
pub const PROC_SCAN_LIMIT: usize = 32_768;
/// A kubelet command line is a few kilobytes; anything longer is cut here.
const CMDLINE_CAP: usize = 256 * 1024;

/// One installer's kubelet config: the file, its drop-in directory, and who writes them.
pub struct Known {
    pub file: Option<&'static str>,
    pub drop_ins: Option<&'static str>,
    pub installer: &'static str,
}

/// The installers' paths, root-relative, tried in this order when no kubelet process names one.
pub const KNOWN: &[Known] = &[
    Known {
        file: Some("var/lib/kubelet/config.yaml"),
        drop_ins: None,
        installer: "kubeadm",
    },
    Known {
        file: Some("etc/kubernetes/kubelet/config.json"),
        drop_ins: Some("etc/kubernetes/kubelet/config.json.d"),
        installer: "EKS nodeadm",
    },
    Known {
        file: Some("etc/kubernetes/kubelet/kubelet-config.json"),
        drop_ins: None,
        installer: "the EKS AL2 AMI",
    },
    Known {
        file: Some("home/kubernetes/kubelet-config.yaml"),
        drop_ins: None,
        installer: "GKE",
    },
    Known {
        file: Some("etc/default/kubeletconfig.json"),
        drop_ins: None,
        installer: "AKS (AgentBaker)",
    },
    Known {
        file: Some("etc/kubernetes/kubelet.conf"),
        drop_ins: None,
        installer: "OpenShift's Machine Config Operator",
    },
    Known {
        file: Some("etc/kubernetes/kubelet-config.yaml"),
        drop_ins: None,
        installer: "a kubelet-config.yaml installer",
    },
    Known {
        file: None,
        drop_ins: Some("var/lib/rancher/k3s/agent/etc/kubelet.conf.d"),
        installer: "k3s",
    },
    Known {
        file: None,
        drop_ins: Some("var/lib/rancher/rke2/agent/etc/kubelet.conf.d"),
        installer: "RKE2",
    },
];

/// Resource-manager flags the kubelet takes on its command line, and the config key each sets.
pub const FLAG_KEYS: &[(&str, &str)] = &[
    ("topology-manager-policy", "topologyManagerPolicy"),
    ("topology-manager-scope", "topologyManagerScope"),
    ("cpu-manager-policy", "cpuManagerPolicy"),
    ("memory-manager-policy", "memoryManagerPolicy"),
    ("reserved-cpus", "reservedSystemCPUs"),
    ("cgroup-driver", "cgroupDriver"),
];

/// What the running kubelet's command line says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletCmdline {
    /// `--config`, root-relative.
    pub config: Option<String>,
    /// `--config-dir`, root-relative.
    pub config_dir: Option<String>,
    /// `--root-dir` (the kubelet's own files and Pods' volumes; default `/var/lib/kubelet`,
    /// kubelet `options.go` `defaultRootDir`), root-relative.
    pub root_dir: Option<String>,
    /// Flags of [`FLAG_KEYS`]: config key -> value.
    pub settings: BTreeMap<String, String>,
}

/// Where the config was found: the files to merge in order, the flags over them, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Located {
    /// The main file, root-relative (`None` for a drop-in directory alone, as on k3s).
    pub file: Option<String>,
    /// Drop-in files, root-relative, in the order the kubelet applies them.
    pub drop_ins: Vec<String>,
    /// Settings from the command line, applied last.
    pub settings: BTreeMap<String, String>,
    /// How it was found: `the kubelet's command line (pid 812)` or `EKS nodeadm's path`.
    pub found_by: String,
}

impl Located {
    /// The first file to name in messages: the main file, else the last drop-in.
    pub fn shown(&self) -> Option<&str> {
        self.file
            .as_deref()
            .or(self.drop_ins.last().map(String::as_str))
    }
}

/// `/proc/<pid>/cmdline` (NUL-separated) read as the kubelet's flags. Both `--flag=value` and
/// `--flag value` (pflag accepts either); absolute paths made root-relative.
pub fn parse_cmdline(bytes: &[u8]) -> KubeletCmdline {
    let args: Vec<String> = bytes
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut out = KubeletCmdline::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let wants_value = name == "config"
            || name == "config-dir"
            || name == "root-dir"
            || FLAG_KEYS.iter().any(|(f, _)| *f == name);
        if !wants_value {
            continue;
        }
        let value = match value {
            Some(v) => v,
            None if i < args.len() && !args[i].starts_with('-') => {
                i += 1;
                args[i - 1].clone()
            }
            None => continue,
        };
        let value = value.trim().to_string();
        if value.is_empty() {
            continue;
        }
        match name {
            "config" => out.config = Some(root_relative(&value)),
            "config-dir" => out.config_dir = Some(root_relative(&value)),
            "root-dir" => out.root_dir = Some(root_relative(&value)),
            _ => {
                if let Some((_, key)) = FLAG_KEYS.iter().find(|(f, _)| *f == name) {
                    out.settings.insert((*key).to_string(), value);
                }
            }
        }
    }
    out
}

fn root_relative(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

/// The running kubelet: the lowest pid whose `comm` is `kubelet` among the first
/// [`PROC_SCAN_LIMIT`] numeric `/proc` entries, and its parsed command line; beside it, each
/// `comm` that was there but could not be read (a process that exited meanwhile is simply
/// gone), so a damaged one is named rather than passed over (DESIGN.md "Missing is not absent").
pub fn running_kubelet(source: &dyn Source) -> (Option<(u32, KubeletCmdline)>, Vec<String>) {
    let mut unreadable = Vec::new();
    let Ok(pids) = source.list_dir("proc", &|n| {
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
    }) else {
        return (None, unreadable);
    };
    let mut pids: Vec<u32> = pids
        .iter()
        .take(PROC_SCAN_LIMIT)
        .filter_map(|p| p.parse().ok())
        .collect();
    pids.sort_unstable();
    let found = pids.into_iter().find_map(|pid| {
        let comm = match source.read_to_string(&format!("proc/{pid}/comm")) {
            Ok(comm) => comm,
            Err(err) if err.is_missing() => return None,
            Err(err) => {
                unreadable.push(err.to_string());
                return None;
            }
        };
        if comm.trim_end() != "kubelet" {
            return None;
        }
        let path = format!("proc/{pid}/cmdline");
        let mut bytes = match source.read_bytes(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.is_missing() => return None,
            Err(err) => {
                unreadable.push(err.to_string());
                return None;
            }
        };
        bytes.truncate(CMDLINE_CAP);
        // Arguments are NUL-separated text; bytes that are not UTF-8 are a damaged read, not
        // flags to guess at.
        if bytes
            .split(|b| *b == 0)
            .any(|arg| std::str::from_utf8(arg).is_err())
        {
            unreadable.push(format!("{path}: not text (invalid UTF-8)"));
            return None;
        }
        Some((pid, parse_cmdline(&bytes)))
    });
    (found, unreadable)
}

/// The `*.conf` files of a drop-in directory in name order (the kubelet's rule); `None` when the
/// directory is absent.
fn drop_in_files(source: &dyn Source, dir: &str) -> Option<Vec<String>> {
    let names = source.list_dir(dir, &|n| n.ends_with(".conf")).ok()?;
    Some(names.into_iter().map(|n| format!("{dir}/{n}")).collect())
}

/// Whether `rel` is there to be read: present, or present but unreadable (a link loop, no
/// permission) so that reading it names the damage; a dangling link or nothing is absent.
fn present(source: &dyn Source, rel: &str) -> bool {
    source.exists(rel) || matches!(source.fs().identity(rel), Err(err) if !err.is_missing())
}

/// Where the kubelet config is: the running kubelet's command line first, then [`KNOWN`].
/// `None` when neither names anything present.
pub fn locate(source: &dyn Source) -> Option<Located> {
    let (running, unreadable) = running_kubelet(source);
    // Said with whatever was found: the kubelet may be the process whose `comm` was unreadable.
    let unread = if unreadable.is_empty() {
        String::new()
    } else {
        format!(
            "; the kubelet's process could not be told: {}",
            unreadable.join("; ")
        )
    };
    if let Some((pid, cmd)) = running
        && (cmd.config.is_some() || cmd.config_dir.is_some() || !cmd.settings.is_empty())
    {
        let file = cmd.config.filter(|f| present(source, f));
        let drop_ins = cmd
            .config_dir
            .as_deref()
            .and_then(|d| drop_in_files(source, d))
            .unwrap_or_default();
        if file.is_some() || !drop_ins.is_empty() || !cmd.settings.is_empty() {
            return Some(Located {
                file,
                drop_ins,
                settings: cmd.settings,
                found_by: format!("the kubelet's command line (pid {pid}){unread}"),
            });
        }
    }
    KNOWN.iter().find_map(|k| {
        let file = k.file.filter(|f| present(source, f)).map(str::to_string);
        let drop_ins = k
            .drop_ins
            .and_then(|d| drop_in_files(source, d))
            .unwrap_or_default();
        (file.is_some() || !drop_ins.is_empty()).then(|| Located {
            file,
            drop_ins,
            settings: BTreeMap::new(),
            found_by: format!("{}'s path{unread}", k.installer),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubelet command line shaped as RKE2 starts one (synthetic: `--config-dir` under the
    /// distribution's tree, policies passed through `--kubelet-arg`), both flag spellings.
    #[test]
    fn reads_config_and_flags_both_ways() {
        let cmdline = b"kubelet\0--volume-plugin-dir=/var/lib/kubelet/volumeplugins\0--file-check-frequency=5s\0--sync-frequency=30s\0--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d\0--containerd=/run/k3s/containerd/containerd.sock\0--topology-manager-policy\0single-numa-node\0--cpu-manager-policy=static\0--reserved-cpus=0-1\0--v\0\0";
        let c = parse_cmdline(cmdline);
        assert_eq!(
            c.config_dir.as_deref(),
            Some("var/lib/rancher/rke2/agent/etc/kubelet.conf.d")
        );
        assert_eq!(c.config, None);
        assert_eq!(c.settings["topologyManagerPolicy"], "single-numa-node");
        assert_eq!(c.settings["cpuManagerPolicy"], "static");
        assert_eq!(c.settings["reservedSystemCPUs"], "0-1");
        // EKS nodeadm's kubelet unit: `--config=/etc/kubernetes/kubelet/config.json`.
        let c = parse_cmdline(b"/usr/bin/kubelet\0--config=/etc/kubernetes/kubelet/config.json\0--kubeconfig=/var/lib/kubelet/kubeconfig\0--config-dir=/etc/kubernetes/kubelet/config.json.d\0");
        assert_eq!(
            c.config.as_deref(),
            Some("etc/kubernetes/kubelet/config.json")
        );
        assert_eq!(
            c.config_dir.as_deref(),
            Some("etc/kubernetes/kubelet/config.json.d")
        );
        // Garbage never panics: a flag without its value, bytes that are not UTF-8.
        let c = parse_cmdline(b"kubelet\0--config\0--config-dir=\0\xff\xfe\0");
        assert_eq!(c, KubeletCmdline::default());
        assert_eq!(parse_cmdline(b""), KubeletCmdline::default());
    }
}
