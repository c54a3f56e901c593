//! The CNI configs in /etc/cni/net.d as the container runtime reads them: which file is the
//! default network, whether it is Multus, and what Multus delegates to. A Multus config that the
//! runtime never picks attaches nothing, however well it is written.
//!
//! The order is containerd's (`containerd/go-cni` `opts.go` `loadFromConfDir`): the files ending
//! `.conf`, `.conflist` or `.json` (libcni `ConfFiles`), sorted by name; the first that loads is
//! the default network. A `.conflist` needs a non-empty `plugins` list, any other file a `type`
//! (libcni `ConfFromFile`, "network type not found"). A file that does not load *before* the
//! first good one fails the whole directory in containerd ("failed to load CNI config file");
//! CRI-O skips it (ocicni logs it and reads on). Facts only; `sriov.multus` judges them.

use serde::Serialize;
use serde_json::Value;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

/// Where the runtimes look (containerd's `conf_dir`, CRI-O's `network_dir` defaults).
pub const CNI_CONF_DIR: &str = "etc/cni/net.d";

/// The extensions libcni reads, as go-cni passes them.
const EXTENSIONS: &[&str] = &[".conf", ".conflist", ".json"];

/// The plugin types that are Multus: the thin plugin and the thick plugin's shim.
const MULTUS_TYPES: &[&str] = &["multus", "multus-shim"];

/// One loadable network config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkConfig {
    /// The network's `name`.
    pub name: Option<String>,
    /// The plugin types in order: one for a `.conf`, each of `plugins` for a `.conflist`.
    pub types: Vec<String>,
    /// Multus only: what it attaches every pod to first. The thin plugin inlines configs
    /// (`delegates`: their names, or their first plugin's type), the thick shim names one
    /// (`clusterNetwork`: a name or a path as the Multus pod sees it, `/host/etc/cni/net.d/...`).
    pub delegates: Vec<String>,
}

impl NetworkConfig {
    /// Whether the first plugin is Multus (a conflist with Multus later is chaining, not Multus).
    pub fn is_multus(&self) -> bool {
        self.types
            .first()
            .is_some_and(|t| MULTUS_TYPES.contains(&t.as_str()))
    }
}

/// One file of the directory, in the runtime's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CniFile {
    pub name: String,
    /// The config, or why the runtime would not load it.
    pub config: Result<NetworkConfig, String>,
}

/// The directory as the runtime sees it; `files` sorted as go-cni sorts them, up to the first
/// when that one is a loadable Multus config (the runtime reads no further).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CniDir {
    pub files: Vec<CniFile>,
    /// Names in the directory that the runtime does not read (another extension).
    pub ignored: Vec<String>,
}

impl CniDir {
    /// The file containerd takes as the default network: the first one, if it loads. `Err`
    /// names the file that stops containerd before any good one (CRI-O would skip it).
    pub fn default_network(&self) -> Option<Result<&CniFile, &CniFile>> {
        let first = self.files.first()?;
        Some(if first.config.is_ok() {
            Ok(first)
        } else {
            Err(first)
        })
    }

    /// The first file that loads (CRI-O's pick when earlier ones do not).
    pub fn first_loadable(&self) -> Option<&CniFile> {
        self.files.iter().find(|f| f.config.is_ok())
    }

    /// Files that are, or try to be, Multus: a loadable config whose first plugin is Multus, or
    /// a file that does not load but says `multus` (a broken Multus config is still one).
    pub fn multus_files(&self) -> Vec<&CniFile> {
        self.files
            .iter()
            .filter(|f| match &f.config {
                Ok(c) => c.is_multus(),
                Err(_) => f.name.to_ascii_lowercase().contains("multus"),
            })
            .collect()
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Parse one file as libcni would: `conflist` says which of the two shapes is expected.
pub fn parse_network_config(text_in: &str, conflist: bool) -> Result<NetworkConfig, ParseError> {
    let value: Value =
        serde_json::from_str(text_in).map_err(|e| ParseError::new(format!("not json: {e}")))?;
    if !value.is_object() {
        return Err(ParseError::new("not a json object"));
    }
    let types: Vec<String> = if conflist {
        let plugins = value
            .get("plugins")
            .and_then(Value::as_array)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| ParseError::new("no `plugins` list: a conflist needs at least one"))?;
        plugins
            .iter()
            .map(|p| text(p, "type").unwrap_or_default())
            .collect()
    } else {
        vec![text(&value, "type").ok_or_else(|| {
            ParseError::new("no `type`: network type not found (a conflist saved as .conf?)")
        })?]
    };
    // Multus's settings live on its own entry: the config itself (.conf) or its plugin.
    let multus = if conflist {
        value
            .get("plugins")
            .and_then(Value::as_array)
            .and_then(|p| p.first())
            .cloned()
            .unwrap_or(Value::Null)
    } else {
        value.clone()
    };
    let mut delegates = Vec::new();
    if let Some(list) = multus.get("delegates").and_then(Value::as_array) {
        for d in list {
            let plugin_type = d
                .get("plugins")
                .and_then(Value::as_array)
                .and_then(|p| p.first())
                .and_then(|p| text(p, "type"))
                .or_else(|| text(d, "type"));
            delegates.push(
                text(d, "name")
                    .or(plugin_type)
                    .unwrap_or_else(|| "(unnamed)".to_string()),
            );
        }
    }
    if let Some(cluster) = text(&multus, "clusterNetwork") {
        delegates.push(cluster);
    }
    Ok(NetworkConfig {
        name: text(&value, "name"),
        types,
        delegates,
    })
}

/// Read /etc/cni/net.d; `Ok(None)` when the directory does not exist.
pub fn gather(source: &dyn Source) -> Result<Option<CniDir>, FactError> {
    let mut names = match source.read_dir(CNI_CONF_DIR) {
        Ok(names) => names,
        Err(err) if err.is_missing() => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    // go-cni: sort.Strings, byte order.
    names.sort();
    let mut dir = CniDir::default();
    for name in names {
        if !EXTENSIONS.iter().any(|ext| name.ends_with(ext)) {
            dir.ignored.push(name);
            continue;
        }
        let path = format!("{CNI_CONF_DIR}/{name}");
        let config = match source.read_to_string(&path) {
            Ok(body) => {
                parse_network_config(&body, name.ends_with(".conflist")).map_err(|e| e.to_string())
            }
            // A directory or an unreadable file: libcni fails on it the same way.
            Err(err) => Err(err.to_string()),
        };
        let multus_default = dir.files.is_empty() && config.as_ref().is_ok_and(|c| c.is_multus());
        dir.files.push(CniFile { name, config });
        // containerd reads no further once the default network loads; when that is Multus
        // nothing after it matters. Otherwise the rest is read: a Multus config behind it is
        // the shadowed one `sriov.multus` names.
        if multus_default {
            break;
        }
    }
    Ok(Some(dir))
}

/// The file a Multus `clusterNetwork` path names, relative to the root: the thick plugin sees
/// the host's /etc/cni/net.d under /host. `None` for a network name (no `/`).
pub fn cluster_network_path(delegate: &str) -> Option<String> {
    if !delegate.contains('/') {
        return None;
    }
    let on_host = delegate.strip_prefix("/host").unwrap_or(delegate);
    Some(on_host.trim_start_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/data/cni/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn real_multus_configs() {
        let thin =
            parse_network_config(&data("multus-thin-entrypoint-00-multus.conf"), false).unwrap();
        assert!(thin.is_multus());
        assert_eq!(thin.name.as_deref(), Some("multus-cni-network"));
        assert_eq!(thin.delegates, vec!["test1"]);
        let image = parse_network_config(&data("multus-images-70-multus.conf"), false).unwrap();
        assert!(image.is_multus());
        assert_eq!(image.delegates, vec!["default-cni-network"]);
        let broken =
            parse_network_config(&data("multus-examples-ptp-portmap-not-json.conf"), false)
                .unwrap_err();
        assert!(broken.to_string().contains("not json"), "{broken}");
        assert!(broken.to_string().contains("line 4"), "{broken}");
    }

    #[test]
    fn real_flannel_conflist_and_the_shapes_libcni_refuses() {
        let flannel =
            parse_network_config(&data("kube-flannel-10-flannel.conflist"), true).unwrap();
        assert!(!flannel.is_multus());
        assert_eq!(flannel.types, vec!["flannel", "portmap"]);
        // The same file saved as .conf: libcni finds no `type`.
        assert!(
            parse_network_config(&data("kube-flannel-10-flannel.conflist"), false)
                .unwrap_err()
                .to_string()
                .contains("no `type`")
        );
        assert!(parse_network_config("{\"name\":\"x\",\"plugins\":[]}", true).is_err());
        assert!(parse_network_config("[1,2]", false).is_err());
        assert!(parse_network_config("", false).is_err());
    }

    /// The thick plugin's shape (`multus-cni` `pkg/server/config/generator.go`): the shim with
    /// `clusterNetwork` naming the default network's file as the Multus pod sees it.
    #[test]
    fn thick_shim_names_its_cluster_network() {
        let thick = parse_network_config(
            "{\"cniVersion\":\"0.3.1\",\"name\":\"multus-cni-network\",\"type\":\"multus-shim\",\"clusterNetwork\":\"/host/etc/cni/net.d/10-calico.conflist\"}",
            false,
        )
        .unwrap();
        assert!(thick.is_multus());
        assert_eq!(
            thick.delegates,
            vec!["/host/etc/cni/net.d/10-calico.conflist"]
        );
        assert_eq!(
            cluster_network_path(&thick.delegates[0]).as_deref(),
            Some("etc/cni/net.d/10-calico.conflist")
        );
        assert_eq!(cluster_network_path("k8s-pod-network"), None);
        // The same shape as a node wrote it (tests/data/cni/README.md).
        let real = parse_network_config(&data("multus-thick-00-multus.conf"), false).unwrap();
        assert!(real.is_multus());
        assert_eq!(real.types, vec!["multus-shim"]);
        assert_eq!(real.delegates, thick.delegates);
    }
}
