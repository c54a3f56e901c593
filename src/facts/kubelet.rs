//! The kubelet's resource-manager settings from its config file (reference/kubernetes.md §4):
//! Topology Manager, CPU Manager and Memory Manager policies. Facts only; the
//! `topology.kubelet_topology_manager` check judges them against the GPUs' NUMA placement.
//! (Which kubelet files exist at all, sockets and checkpoints, is `facts/k8s.rs`.)
//!
//! Only top-level scalar keys are needed, so the YAML is read by hand (a `key: value` line at
//! column 0) rather than with a YAML library; a file that starts with `{` is read as JSON, the
//! other form `KubeletConfiguration` files take.

use serde::Serialize;

use super::pci::short;
use crate::answers::{FactError, ParseError};
use crate::source::Source;

/// Where kubeadm writes the kubelet's `--config` (kubernetes.md §4).
pub const KUBELET_CONFIG: &str = "var/lib/kubelet/config.yaml";

/// Config files looked for, first found wins: kubeadm's, then the names other installers use
/// (the same file list as the device-plugin layer's `facts/k8s.rs`; drop-in directories are not
/// merged here).
pub const KUBELET_CONFIG_FILES: &[&str] = &[
    KUBELET_CONFIG,
    "etc/kubernetes/kubelet-config.yaml",
    "etc/kubernetes/kubelet/kubelet-config.json",
];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KubeletConfig {
    pub kind: Option<String>,
    /// `none` (default), `best-effort`, `restricted`, `single-numa-node`.
    pub topology_manager_policy: Option<String>,
    /// `container` (default) or `pod`.
    pub topology_manager_scope: Option<String>,
    /// `none` (default) or `static`.
    pub cpu_manager_policy: Option<String>,
    /// `None` (default) or `Static` (capitalised in the kubelet, `PolicyTypeStatic`).
    pub memory_manager_policy: Option<String>,
}

/// Parse a `KubeletConfiguration` (YAML or JSON). Keys other than the ones above are ignored;
/// text that is neither gives an error.
pub fn parse_kubelet_config(text: &str) -> Result<KubeletConfig, ParseError> {
    let t = text.trim_start_matches('\u{feff}').trim();
    if t.starts_with('{') {
        let value: serde_json::Value =
            serde_json::from_str(t).map_err(|e| ParseError::new(format!("not json: {e}")))?;
        let get = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_string);
        return Ok(KubeletConfig {
            kind: get("kind"),
            topology_manager_policy: get("topologyManagerPolicy"),
            topology_manager_scope: get("topologyManagerScope"),
            cpu_manager_policy: get("cpuManagerPolicy"),
            memory_manager_policy: get("memoryManagerPolicy"),
        });
    }
    let mut config = KubeletConfig::default();
    let mut keys = 0usize;
    for line in text.lines() {
        if line.starts_with([' ', '\t', '-', '#']) || line.trim().is_empty() {
            continue; // nested, list item, comment or blank
        }
        if line.starts_with("---") || line.starts_with("...") {
            continue; // document markers
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(ParseError::new(format!(
                "not `key: value`: {:?}",
                short(line)
            )));
        };
        keys += 1;
        let value = scalar(value);
        let slot = match key.trim() {
            "kind" => &mut config.kind,
            "topologyManagerPolicy" => &mut config.topology_manager_policy,
            "topologyManagerScope" => &mut config.topology_manager_scope,
            "cpuManagerPolicy" => &mut config.cpu_manager_policy,
            "memoryManagerPolicy" => &mut config.memory_manager_policy,
            _ => continue,
        };
        *slot = value;
    }
    if keys == 0 && !t.is_empty() {
        return Err(ParseError::new("no top-level `key: value` line"));
    }
    Ok(config)
}

/// A YAML scalar after the colon: comment dropped, quotes removed; empty = `None`.
fn scalar(raw: &str) -> Option<String> {
    let mut v = raw.trim();
    if let Some(q) = v.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let inner = &v[1..];
        v = inner.split(q).next().unwrap_or(inner);
    } else if let Some((before, _)) = v.split_once(" #") {
        v = before.trim_end();
    }
    let v = v.trim();
    (!v.is_empty() && v != "~" && v != "null").then(|| v.to_string())
}

/// The kubelet config and the file it came from; `Ok(None)` when there is none.
pub fn gather(source: &dyn Source) -> Result<Option<(KubeletConfig, String)>, FactError> {
    for path in KUBELET_CONFIG_FILES {
        match source.read_to_string(path) {
            Ok(text) => {
                return parse_kubelet_config(&text)
                    .map(|c| Some((c, (*path).to_string())))
                    .map_err(|e| FactError::parse(path, e));
            }
            Err(err) if err.is_missing() => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubeadm_yaml() {
        let text = "apiVersion: kubelet.config.k8s.io/v1beta1\n\
authentication:\n  anonymous:\n    enabled: false\n\
cgroupDriver: systemd\n\
cpuManagerPolicy: static\n\
kind: KubeletConfiguration\n\
memoryManagerPolicy: Static\n\
reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1100Mi\n\
topologyManagerPolicy: \"single-numa-node\"   \n\
topologyManagerScope: pod # align whole pods\n";
        let c = parse_kubelet_config(text).unwrap();
        assert_eq!(c.kind.as_deref(), Some("KubeletConfiguration"));
        assert_eq!(
            c.topology_manager_policy.as_deref(),
            Some("single-numa-node")
        );
        assert_eq!(c.topology_manager_scope.as_deref(), Some("pod"));
        assert_eq!(c.cpu_manager_policy.as_deref(), Some("static"));
        assert_eq!(c.memory_manager_policy.as_deref(), Some("Static"));
    }

    #[test]
    fn absent_keys_are_none_and_json_works() {
        let c = parse_kubelet_config(
            "kind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n",
        )
        .unwrap();
        assert_eq!(c.topology_manager_policy, None);
        let c = parse_kubelet_config(
            "{\"kind\":\"KubeletConfiguration\",\"topologyManagerPolicy\":\"none\",\"cpuManagerPolicy\":\"none\"}",
        )
        .unwrap();
        assert_eq!(c.topology_manager_policy.as_deref(), Some("none"));
        assert_eq!(parse_kubelet_config("").unwrap(), KubeletConfig::default());
        assert!(parse_kubelet_config("just some words\n").is_err());
        assert!(parse_kubelet_config("{not json").is_err());
        assert_eq!(scalar(" ''"), None);
        assert_eq!(scalar(" ~"), None);
    }
}
