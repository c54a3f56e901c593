//! The kubelet's resource-manager settings from its config file (reference/kubernetes.md §4):
//! Topology Manager, CPU Manager and Memory Manager policies and the reservations the static
//! policies need. Facts only; `topology.kubelet_topology_manager` judges them against the GPUs'
//! NUMA placement and `topology.kubelet_managers` judges the managers together.
//! (Which kubelet files exist at all, sockets and checkpoints, is `facts/k8s.rs`.)
//!
//! A `KubeletConfiguration` is YAML or JSON (which is YAML too), read through the guarded parser
//! (`facts/yaml.rs`): nested maps (`kubeReserved`, `evictionHard`) and the `reservedMemory` list
//! are needed, so a `key: value` line scan no longer does.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_yaml_ng::Value;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

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
    /// `reservedSystemCPUs`: an explicit CPU list (`0,1,112,113`) kept off the shared pool.
    pub reserved_system_cpus: Option<String>,
    /// `kubeReserved` and `systemReserved`: resource name -> quantity (`cpu: 500m`).
    pub kube_reserved: BTreeMap<String, String>,
    pub system_reserved: BTreeMap<String, String>,
    /// `evictionHard`; `None` when the key is absent (the kubelet's defaults then apply,
    /// `memory.available: 100Mi` among them).
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// `reservedMemory`: what the Memory Manager keeps per NUMA node.
    pub reserved_memory: Vec<ReservedMemory>,
    /// `cgroupDriver`: `systemd` (kubeadm's since 1.22) or `cgroupfs` (the kubelet's default).
    pub cgroup_driver: Option<String>,
    /// How the config was found (`EKS nodeadm's path`, `the kubelet's command line (pid 812)`)
    /// and the files merged, in order (`facts/kubelet_locate.rs`); empty when parsed alone.
    pub found_by: String,
    pub files: Vec<String>,
    /// For each top-level key, where its value came from when that is not the file shown for
    /// the config: the drop-in that set it last, or `the kubelet's command line`.
    pub origins: BTreeMap<String, String>,
}

impl KubeletConfig {
    /// Evidence source for `key`: `<file that set it>: key` (a drop-in wins over the main
    /// file, a flag over both), else `<shown>: key`; an engineer edits the file named.
    pub fn source_of(&self, key: &str, shown: &str) -> String {
        format!("{}: {key}", self.file_of(key, shown))
    }

    /// The file (or `the kubelet's command line`) that sets `key`, `shown` by default.
    pub fn file_of<'a>(&'a self, key: &str, shown: &'a str) -> &'a str {
        self.origins.get(key).map_or(shown, String::as_str)
    }

    /// Where to change `keys`: the one place that sets them all, or `shown` with a pointer to
    /// the evidence when they come from several.
    pub fn where_to_edit(&self, keys: &[&str], shown: &str) -> String {
        let mut places: Vec<&str> = keys.iter().map(|k| self.file_of(k, shown)).collect();
        places.sort_unstable();
        places.dedup();
        match places.as_slice() {
            [one] => (*one).to_string(),
            _ => format!(
                "{} (each setting where its evidence names it)",
                places.join(", ")
            ),
        }
    }
}

/// One `reservedMemory` entry: `- numaNode: 0` with `limits: {memory: 1124Mi}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReservedMemory {
    pub numa_node: Option<i64>,
    /// `limits.memory` as written (a Kubernetes quantity).
    pub memory: Option<String>,
}

/// A scalar as text: YAML reads `cpu: 1` as a number and `memoryManagerPolicy: Static` as a
/// string; both are settings. Empty, `~` and `null` are absent.
fn scalar(v: &Value) -> Option<String> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Tagged(t) => return scalar(&t.value),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(Value::Mapping(map)) = v {
        for (k, v) in map {
            if let (Some(k), Some(v)) = (scalar(k), scalar(v)) {
                out.insert(k, v);
            }
        }
    }
    out
}

/// Parse a `KubeletConfiguration` (YAML or JSON). Keys other than the ones above are ignored;
/// text that is not a mapping gives an error.
pub fn parse_kubelet_config(text: &str) -> Result<KubeletConfig, ParseError> {
    from_value(parse_value(text)?)
}

fn parse_value(text: &str) -> Result<Value, ParseError> {
    let text = text.trim_start_matches('\u{feff}');
    let value = super::yaml::parse_guarded(text, "kubelet config")?;
    match value {
        Value::Mapping(_) => Ok(unwrap_config(value)),
        Value::Null => Ok(value),
        _ => Err(ParseError::new(
            "not a kubelet config: not a `key: value` mapping",
        )),
    }
}

/// The `KubeletConfiguration` inside the two wrappers people copy it in: the kubelet's
/// `/configz` answer, `{"kubeletconfig": {…}}` (kubernetes pkg/kubelet/server/server.go,
/// `configz.InstallHandler`; the key is the component name registered in
/// cmd/kubelet/app/server.go, `configz.New("kubeletconfig")`), and OpenShift's `KubeletConfig`
/// resource, whose `spec.kubeletConfig` is merged into the node's config by the Machine Config
/// Operator (openshift/api machineconfiguration/v1 `KubeletConfigSpec.KubeletConfig`). A
/// config that is neither is itself.
fn unwrap_config(value: Value) -> Value {
    let Value::Mapping(map) = &value else {
        return value;
    };
    if map.len() == 1
        && let Some(inner @ Value::Mapping(_)) = map.get("kubeletconfig")
    {
        return inner.clone();
    }
    if map.get("kind").and_then(scalar).as_deref() == Some("KubeletConfig")
        && let Some(Value::Mapping(spec)) = map.get("spec")
        && let Some(inner @ Value::Mapping(_)) = spec.get("kubeletConfig")
    {
        return inner.clone();
    }
    value
}

/// A drop-in over what came before, as the kubelet merges them: maps merge key by key, anything
/// else is replaced (Kubernetes docs, "kubelet-config.d": later files override earlier ones).
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(base), Value::Mapping(over)) => {
            for (k, v) in over {
                match base.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        base.insert(k, v);
                    }
                }
            }
        }
        (base, over) if !over.is_null() => *base = over,
        _ => {}
    }
}

fn from_value(value: Value) -> Result<KubeletConfig, ParseError> {
    let map = match value {
        Value::Null => return Ok(KubeletConfig::default()),
        Value::Mapping(map) => map,
        _ => {
            return Err(ParseError::new(
                "not a kubelet config: not a `key: value` mapping",
            ));
        }
    };
    let get = |key: &str| map.get(key);
    let text_of = |key: &str| get(key).and_then(scalar);
    let reserved_memory = match get("reservedMemory") {
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| ReservedMemory {
                numa_node: item.get("numaNode").and_then(Value::as_i64),
                memory: item
                    .get("limits")
                    .and_then(|l| l.get("memory"))
                    .and_then(scalar),
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(KubeletConfig {
        kind: text_of("kind"),
        topology_manager_policy: text_of("topologyManagerPolicy"),
        topology_manager_scope: text_of("topologyManagerScope"),
        cpu_manager_policy: text_of("cpuManagerPolicy"),
        memory_manager_policy: text_of("memoryManagerPolicy"),
        reserved_system_cpus: text_of("reservedSystemCPUs"),
        kube_reserved: string_map(get("kubeReserved")),
        system_reserved: string_map(get("systemReserved")),
        eviction_hard: get("evictionHard").map(|v| string_map(Some(v))),
        reserved_memory,
        cgroup_driver: text_of("cgroupDriver"),
        found_by: String::new(),
        files: Vec::new(),
        origins: BTreeMap::new(),
    })
}

/// A Kubernetes resource quantity (`1100Mi`, `1Gi`, `500m`, `2`, `1.5G`, `1e3`) as a number in
/// base units (bytes, cores); `None` for anything else (apimachinery `resource.ParseQuantity`:
/// binary suffixes Ki..Ei, decimal n u m k M G T P E, or an `e`/`E` exponent).
pub fn quantity(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let n: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    let v = n * factor;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// The kubelet config and the file to name for it (the main file, else the last drop-in, else
/// `the kubelet's command line`); `Ok(None)` when none is found (`kubelet_locate::locate`).
/// Drop-ins merge over the main file and command-line flags over both, as the kubelet does.
pub fn gather(source: &dyn Source) -> Result<Option<(KubeletConfig, String)>, FactError> {
    let Some(located) = super::kubelet_locate::locate(source) else {
        return Ok(None);
    };
    let mut merged = Value::Null;
    let mut files = Vec::new();
    // Which file (or the command line) set each top-level key last.
    let mut set_by: BTreeMap<String, String> = BTreeMap::new();
    let mut note = |value: &Value, from: &str| {
        if let Value::Mapping(map) = value {
            for k in map.keys().filter_map(Value::as_str) {
                set_by.insert(k.to_string(), from.to_string());
            }
        }
    };
    for path in located.file.iter().chain(&located.drop_ins) {
        match source.read_to_string(path) {
            Ok(text) => {
                let value = parse_value(&text).map_err(|e| FactError::parse(path, e))?;
                note(&value, path);
                if merged.is_null() {
                    merged = value;
                } else {
                    merge(&mut merged, value);
                }
                files.push(path.clone());
            }
            Err(err) if err.is_missing() => continue,
            Err(err) => return Err(err.into()),
        }
    }
    if !located.settings.is_empty() {
        let mut flags = serde_yaml_ng::Mapping::new();
        for (k, v) in &located.settings {
            flags.insert(Value::String(k.clone()), Value::String(v.clone()));
        }
        note(&Value::Mapping(flags.clone()), "the kubelet's command line");
        if merged.is_null() {
            merged = Value::Mapping(flags);
        } else {
            merge(&mut merged, Value::Mapping(flags));
        }
    }
    let shown = located
        .shown()
        .map(str::to_string)
        .unwrap_or_else(|| located.found_by.clone());
    let mut config = from_value(merged).map_err(|e| FactError::parse(&shown, e))?;
    config.found_by = located.found_by;
    config.files = files;
    config.origins = set_by.into_iter().filter(|(_, f)| *f != shown).collect();
    Ok(Some((config, shown)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kubelet's `/configz` answer (EKS 1.30, `kubectl get --raw …/configz | jq`) and an
    /// OpenShift `KubeletConfig` (`oc get kubeletconfig -o yaml`): tests/data/judge/SOURCES.md.
    #[test]
    fn configz_and_openshift_kubeletconfig_are_unwrapped() {
        let configz = include_str!(
            "../../tests/data/judge/kubelet_configz_jq_eks-1.30_cpumanager-static_topology-single-numa-node.json"
        );
        let c = parse_kubelet_config(configz).unwrap();
        assert_eq!(c.cpu_manager_policy.as_deref(), Some("static"));
        assert_eq!(
            c.topology_manager_policy.as_deref(),
            Some("single-numa-node")
        );
        let cr = include_str!(
            "../../tests/data/judge/openshift_kubeletconfig_oc-get-yaml_cpumanager-static_andreaskaris-blog.yaml"
        );
        let c = parse_kubelet_config(cr).unwrap();
        assert_eq!(c.cpu_manager_policy.as_deref(), Some("static"));
        // A plain config with a key named like the wrapper's is itself.
        let plain = parse_kubelet_config("cpuManagerPolicy: none\nkubeletconfig: {}\n").unwrap();
        assert_eq!(plain.cpu_manager_policy.as_deref(), Some("none"));
    }

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
        let c = parse_kubelet_config(
            "kind: KubeletConfiguration\ncpuManagerPolicy: ''\nmemoryManagerPolicy: ~\n",
        )
        .unwrap();
        assert_eq!(c.cpu_manager_policy, None);
        assert_eq!(c.memory_manager_policy, None);
    }

    /// The Kubernetes docs' Memory Manager example ("Utilizing the NUMA-aware Memory Manager",
    /// reserved memory flag) as a config file: two NUMA nodes, kube and system reservations.
    #[test]
    fn reads_reservations_and_reserved_memory() {
        let text = "kind: KubeletConfiguration\n\
memoryManagerPolicy: Static\n\
kubeReserved:\n  cpu: 4\n  memory: 4Gi\n\
systemReserved:\n  cpu: \"1\"\n  memory: 1Gi\n\
evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\n\
reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 3Gi\n- numaNode: 1\n  limits:\n    memory: 2148Mi\n";
        let c = parse_kubelet_config(text).unwrap();
        assert_eq!(c.kube_reserved.get("cpu").map(String::as_str), Some("4"));
        assert_eq!(
            c.system_reserved.get("memory").map(String::as_str),
            Some("1Gi")
        );
        let eviction = c.eviction_hard.unwrap();
        assert_eq!(
            eviction.get("memory.available").map(String::as_str),
            Some("100Mi")
        );
        assert_eq!(
            c.reserved_memory,
            vec![
                ReservedMemory {
                    numa_node: Some(0),
                    memory: Some("3Gi".into())
                },
                ReservedMemory {
                    numa_node: Some(1),
                    memory: Some("2148Mi".into())
                },
            ]
        );
        let c = parse_kubelet_config("kind: KubeletConfiguration\n").unwrap();
        assert_eq!(c.eviction_hard, None);
        assert!(parse_kubelet_config("- a list\n- not a config\n").is_err());
    }

    #[test]
    fn quantities_in_base_units() {
        assert_eq!(quantity("1100Mi"), Some(1100.0 * 1024.0 * 1024.0));
        assert_eq!(quantity("1Gi"), Some(1024.0 * 1024.0 * 1024.0));
        assert_eq!(quantity("500m"), Some(0.5));
        assert_eq!(quantity("2"), Some(2.0));
        assert_eq!(quantity("1.5G"), Some(1.5e9));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("10%"), None);
        assert_eq!(quantity("lots"), None);
        assert_eq!(quantity("-1Gi"), None);
    }
}
