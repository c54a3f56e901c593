//! What the kubelet says about GPUs: the pod-resources API answers (one serde type shared by the
//! live gRPC probe and replay's `.gpudoctor/pod-resources.json`), the device-plugin socket
//! directory, the device manager's checkpoint, and device-id parsing. No policy here.
//!
//! Sources: reference/kubernetes.md §1 (pod-resources v1 messages and semantics), §2 (what
//! NVIDIA's device plugin advertises: resource names, `GPU-<uuid>`, `MIG-<uuid>`,
//! `<id>::<replica>` ids), §3 (socket directory and `kubelet_internal_checkpoint`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{FactError, ParseError};
use crate::source::{FsError, Source};

/// The kubelet's state directory (kubeadm and most distributions).
pub const KUBELET_DIR: &str = "var/lib/kubelet";
/// kubeadm's kubelet config (kubernetes.md §4); other installers name theirs with `--config`.
pub const KUBELET_CONFIGS: &[&str] = &[
    "var/lib/kubelet/config.yaml",
    "etc/kubernetes/kubelet-config.yaml",
    "etc/kubernetes/kubelet/kubelet-config.json",
    "var/lib/rancher/k3s/agent/etc/kubelet.conf.d",
    "var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
];
/// The pod-resources socket, root-relative (kubernetes.md §1).
pub const POD_RESOURCES_SOCKET: &str = "var/lib/kubelet/pod-resources/kubelet.sock";
/// `DevicePluginPath` (kubernetes.md §3).
pub const DEVICE_PLUGIN_DIR: &str = "var/lib/kubelet/device-plugins";
/// The kubelet's own registration socket in [`DEVICE_PLUGIN_DIR`].
pub const KUBELET_REGISTRATION_SOCKET: &str = "kubelet.sock";
/// The device manager's checkpoint in [`DEVICE_PLUGIN_DIR`].
pub const CHECKPOINT: &str = "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";

// ---------------------------------------------------------------------------------------------
// Pod-resources answers (wire names of api.proto, kubernetes.md §1).

/// What the kubelet's pod-resources API answered, or why it could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodResourcesFacts {
    /// The socket asked: root-relative, or the `--kubelet-socket` path as given.
    pub socket: String,
    /// The kubelet could not be reached at all: no RPC below was answered.
    #[serde(default)]
    pub error: Option<RpcError>,
    /// `GetAllocatableResources`: the healthy devices the kubelet can hand out.
    #[serde(default)]
    pub allocatable: Option<RpcAnswer<AllocatableResources>>,
    /// `List`: the pods and what each container holds exclusively.
    #[serde(default)]
    pub list: Option<RpcAnswer<Vec<PodResources>>>,
}

impl PodResourcesFacts {
    /// No answer at all: `kind` says why.
    pub fn failed(
        socket: impl Into<String>,
        kind: RpcErrorKind,
        message: impl Into<String>,
    ) -> Self {
        PodResourcesFacts {
            socket: socket.into(),
            error: Some(RpcError {
                kind,
                message: message.into(),
            }),
            allocatable: None,
            list: None,
        }
    }

    /// The allocatable answer, if the RPC succeeded.
    pub fn allocatable_value(&self) -> Option<&AllocatableResources> {
        match &self.allocatable {
            Some(RpcAnswer::Value(v)) => Some(v),
            _ => None,
        }
    }

    /// The List answer, if the RPC succeeded.
    pub fn list_value(&self) -> Option<&[PodResources]> {
        match &self.list {
            Some(RpcAnswer::Value(v)) => Some(v),
            _ => None,
        }
    }
}

/// One RPC's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RpcAnswer<T> {
    Value(T),
    Error(RpcError),
}

impl<T> RpcAnswer<T> {
    pub fn error(&self) -> Option<&RpcError> {
        match self {
            RpcAnswer::Error(e) => Some(e),
            RpcAnswer::Value(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcError {
    pub kind: RpcErrorKind,
    pub message: String,
}

/// Why a pod-resources answer is missing. The first group is about reaching the socket, the
/// second about one call (gRPC status codes that carry a diagnosis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RpcErrorKind {
    /// A capture without `pod-resources.json`: nothing was recorded.
    NotAvailable,
    /// No socket at the path (kubelet not running, directory not mounted into the Pod).
    NoSocket,
    /// Something other than a socket sits at the path.
    NotASocket,
    /// The socket exists but may not be opened (not root).
    PermissionDenied,
    /// The path resolved outside `--root` and was refused.
    OutsideRoot,
    /// Connecting failed (connection refused: a stale socket left by a stopped kubelet).
    ConnectFailed,
    /// No answer within the time budget.
    Timeout,
    /// `UNIMPLEMENTED`: the kubelet is too old for this RPC (or the feature gate is off).
    Unimplemented,
    /// `UNAVAILABLE`: the connection broke or the server went away.
    Unavailable,
    /// `RESOURCE_EXHAUSTED`: rate-limited (kubernetes.md §1, 100 qps, burst 10).
    ResourceExhausted,
    /// The answer did not decode: garbage, or larger than the message size limit.
    InvalidResponse,
    Other,
}

impl RpcErrorKind {
    pub fn describe(self) -> &'static str {
        match self {
            RpcErrorKind::NotAvailable => "not available on this node",
            RpcErrorKind::NoSocket => "no socket",
            RpcErrorKind::NotASocket => "not a socket",
            RpcErrorKind::PermissionDenied => "permission denied",
            RpcErrorKind::OutsideRoot => "outside the root",
            RpcErrorKind::ConnectFailed => "connection failed",
            RpcErrorKind::Timeout => "no answer in time",
            RpcErrorKind::Unimplemented => "not implemented by this kubelet",
            RpcErrorKind::Unavailable => "connection lost",
            RpcErrorKind::ResourceExhausted => "rate-limited",
            RpcErrorKind::InvalidResponse => "answer did not decode",
            RpcErrorKind::Other => "failed",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatableResources {
    #[serde(default)]
    pub devices: Vec<ContainerDevices>,
    #[serde(default)]
    pub cpu_ids: Vec<i64>,
    #[serde(default)]
    pub memory: Vec<ContainerMemory>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodResources {
    pub name: String,
    pub namespace: String,
    #[serde(default)]
    pub containers: Vec<ContainerResources>,
    #[serde(default)]
    pub cpu_ids: Vec<i64>,
    #[serde(default)]
    pub memory: Vec<ContainerMemory>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerResources {
    pub name: String,
    #[serde(default)]
    pub devices: Vec<ContainerDevices>,
    #[serde(default)]
    pub cpu_ids: Vec<i64>,
    #[serde(default)]
    pub memory: Vec<ContainerMemory>,
    #[serde(default)]
    pub dynamic_resources: Vec<DynamicResource>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDevices {
    pub resource_name: String,
    #[serde(default)]
    pub device_ids: Vec<String>,
    /// Absent when the plugin gave no NUMA node (sysfs `numa_node` < 0, kubernetes.md §2).
    #[serde(default)]
    pub topology: Option<TopologyInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerMemory {
    pub memory_type: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub topology: Option<TopologyInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyInfo {
    #[serde(default)]
    pub nodes: Vec<NumaNode>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    /// Capital `ID` in the proto and its JSON name.
    #[serde(rename = "ID")]
    pub id: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicResource {
    #[serde(default)]
    pub claim_name: String,
    #[serde(default)]
    pub claim_namespace: String,
    #[serde(default)]
    pub claim_resources: Vec<ClaimResource>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimResource {
    /// CDI names, `vendor.com/class=name`.
    #[serde(default)]
    pub cdi_devices: Vec<String>,
    #[serde(default)]
    pub driver_name: String,
    #[serde(default)]
    pub pool_name: String,
    #[serde(default)]
    pub device_name: String,
    #[serde(default)]
    pub share_id: Option<String>,
}

/// Parse `.gpudoctor/pod-resources.json`.
pub fn parse_pod_resources_json(text: &str) -> Result<PodResourcesFacts, ParseError> {
    serde_json::from_str(text).map_err(|e| ParseError::new(e.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Device ids (kubernetes.md §2).

/// Resources NVIDIA's device plugin advertises: `nvidia.com/gpu`, `nvidia.com/gpu.shared`,
/// `nvidia.com/mig-<profile>`.
pub fn is_nvidia_resource(name: &str) -> bool {
    name == "nvidia.com/gpu"
        || name == "nvidia.com/gpu.shared"
        || name.starts_with("nvidia.com/mig-")
}

/// What a device id names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeviceRef {
    /// A full GPU by UUID (`GPU-…`).
    GpuUuid(String),
    /// A MIG device by UUID (`MIG-…`).
    MigUuid(String),
    /// `--device-id-strategy=index`: a GPU by NVML index.
    Index(u32),
    /// Anything else, kept as written.
    Other(String),
}

/// One allocatable id: what it names and its time-slicing / MPS replica, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceId {
    pub device: DeviceRef,
    /// `<id>::<n>` (`NewAnnotatedID`, kubernetes.md §2).
    pub replica: Option<u32>,
}

pub fn parse_device_id(id: &str) -> DeviceId {
    let id = id.trim();
    let (base, replica) = match id.rsplit_once("::") {
        Some((base, n)) => match n.parse::<u32>() {
            Ok(n) => (base, Some(n)),
            Err(_) => (id, None),
        },
        None => (id, None),
    };
    let device = if base.starts_with("GPU-") {
        DeviceRef::GpuUuid(base.to_string())
    } else if base.starts_with("MIG-") {
        DeviceRef::MigUuid(base.to_string())
    } else if let Ok(index) = base.parse::<u32>() {
        DeviceRef::Index(index)
    } else {
        DeviceRef::Other(base.to_string())
    };
    DeviceId { device, replica }
}

// ---------------------------------------------------------------------------------------------
// The device manager checkpoint (kubernetes.md §3).

/// `kubelet_internal_checkpoint`: what the device manager last wrote. An internal file the
/// Kubernetes project may change; used only as a fallback and said so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// `RegisteredDevices`: resource -> the healthy device ids when it was written.
    pub registered: BTreeMap<String, Vec<String>>,
    pub entries: Vec<CheckpointEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointEntry {
    pub pod_uid: String,
    pub container: String,
    pub resource: String,
    /// Device ids, over all NUMA keys (v2 map) or the plain v1 list.
    pub device_ids: Vec<String>,
}

#[derive(Deserialize)]
struct RawCheckpoint {
    #[serde(rename = "Data")]
    data: RawData,
}

#[derive(Deserialize)]
struct RawData {
    #[serde(rename = "PodDeviceEntries", default)]
    entries: Option<Vec<RawEntry>>,
    #[serde(rename = "RegisteredDevices", default)]
    registered: Option<BTreeMap<String, Option<Vec<String>>>>,
}

#[derive(Deserialize)]
struct RawEntry {
    #[serde(rename = "PodUID", default)]
    pod_uid: String,
    #[serde(rename = "ContainerName", default)]
    container: String,
    #[serde(rename = "ResourceName", default)]
    resource: String,
    #[serde(rename = "DeviceIDs", default)]
    device_ids: Option<RawIds>,
}

/// v2 (k8s ≥ 1.20): NUMA node -> ids, `-1` for no topology; v1: a plain list.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawIds {
    ByNuma(BTreeMap<String, Option<Vec<String>>>),
    Flat(Vec<String>),
}

/// Parse the checkpoint JSON. `Checksum` and `BootID` are opaque and not validated (§3).
pub fn parse_checkpoint(text: &str) -> Result<Checkpoint, ParseError> {
    let raw: RawCheckpoint =
        serde_json::from_str(text).map_err(|e| ParseError::new(e.to_string()))?;
    let registered = raw
        .data
        .registered
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or_default()))
        .collect();
    let entries = raw
        .data
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| CheckpointEntry {
            pod_uid: e.pod_uid,
            container: e.container,
            resource: e.resource,
            device_ids: match e.device_ids {
                Some(RawIds::Flat(ids)) => ids,
                Some(RawIds::ByNuma(map)) => map.into_values().flatten().flatten().collect(),
                None => Vec::new(),
            },
        })
        .collect();
    Ok(Checkpoint {
        registered,
        entries,
    })
}

// ---------------------------------------------------------------------------------------------
// Gathering.

/// The kubelet's footprint on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletFacts {
    /// `var/lib/kubelet` exists.
    pub dir: bool,
    /// The first kubelet config found.
    pub config: Option<String>,
    /// Entries of the device-plugin directory (`None` when it is absent).
    pub plugin_dir: Option<Vec<String>>,
    /// The checkpoint: absent (`Ok(None)`), parsed, or unreadable.
    pub checkpoint: Result<Option<Checkpoint>, FactError>,
    /// The pod-resources socket path exists under the root.
    pub pod_resources_socket: bool,
}

impl KubeletFacts {
    /// A Kubernetes node: the kubelet's directory or config is there.
    pub fn present(&self) -> bool {
        self.dir || self.config.is_some()
    }

    /// NVIDIA plugin sockets (`nvidia-gpu.sock`, `nvidia-mig-1g.5gb.sock`, kubernetes.md §2).
    pub fn nvidia_plugin_sockets(&self) -> Vec<&str> {
        self.plugin_dir
            .iter()
            .flatten()
            .map(String::as_str)
            .filter(|n| n.starts_with("nvidia") && n.ends_with(".sock"))
            .collect()
    }
}

pub fn gather(source: &dyn Source) -> KubeletFacts {
    let dir = source.exists(KUBELET_DIR);
    let config = KUBELET_CONFIGS
        .iter()
        .find(|p| source.exists(p))
        .map(|p| p.to_string());
    let plugin_dir = source
        .list_dir(DEVICE_PLUGIN_DIR, &|n| {
            n.ends_with(".sock") || n == "kubelet_internal_checkpoint"
        })
        .ok();
    let checkpoint = match source.read_to_string(CHECKPOINT) {
        Ok(text) => parse_checkpoint(&text)
            .map(Some)
            .map_err(|e| FactError::parse(CHECKPOINT, e)),
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(FactError::from(err)),
    };
    KubeletFacts {
        dir,
        config,
        plugin_dir,
        checkpoint,
        pod_resources_socket: source.exists(POD_RESOURCES_SOCKET),
    }
}

/// Map a root-relative lookup failure of the socket to an answer.
pub fn socket_error(shown: &str, err: &FsError) -> PodResourcesFacts {
    let kind = match err {
        FsError::NotFound { .. } | FsError::Dangling { .. } => RpcErrorKind::NoSocket,
        FsError::PermissionDenied { .. } => RpcErrorKind::PermissionDenied,
        FsError::EscapesRoot { .. } => RpcErrorKind::OutsideRoot,
        _ => RpcErrorKind::Other,
    };
    PodResourcesFacts::failed(shown, kind, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_strip_replicas_and_know_mig_and_index() {
        assert_eq!(
            parse_device_id("GPU-8c6a8b4e-4a8d-5f0b-9d0c-1e2f3a4b5c6d::3"),
            DeviceId {
                device: DeviceRef::GpuUuid("GPU-8c6a8b4e-4a8d-5f0b-9d0c-1e2f3a4b5c6d".into()),
                replica: Some(3)
            }
        );
        assert_eq!(
            parse_device_id("MIG-3d2b6c5e-1a2b-5c3d-8e9f-0a1b2c3d4e5f").device,
            DeviceRef::MigUuid("MIG-3d2b6c5e-1a2b-5c3d-8e9f-0a1b2c3d4e5f".into())
        );
        assert_eq!(parse_device_id("7").device, DeviceRef::Index(7));
        assert_eq!(parse_device_id("3::1").replica, Some(1));
        assert_eq!(
            parse_device_id("weird::x").device,
            DeviceRef::Other("weird::x".into())
        );
        assert!(is_nvidia_resource("nvidia.com/mig-1g.5gb"));
        assert!(is_nvidia_resource("nvidia.com/gpu.shared"));
        assert!(!is_nvidia_resource("amd.com/gpu"));
    }

    #[test]
    fn checkpoint_v2_map_and_v1_list() {
        // v2 shape as the kubelet writes it (kubernetes.md §3), AllocResp shortened.
        let v2 = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"5b1e3c1f-0d5a-4c55-9a34-1c0f6f0e2d11","ContainerName":"cuda","ResourceName":"nvidia.com/gpu","DeviceIDs":{"0":["GPU-a"],"-1":["GPU-b"]},"AllocResp":"CiQKIk5WSURJQV9WSVNJQkxFX0RFVklDRVMSDkdQVS1hLEdQVS1i"}],"RegisteredDevices":{"nvidia.com/gpu":["GPU-a","GPU-b"]}},"Checksum":1234567890,"BootID":"0c8e4b1e-6f1f-4f5b-8f87-3b2a1d0c9e8f"}"#;
        let cp = parse_checkpoint(v2).unwrap();
        assert_eq!(cp.registered["nvidia.com/gpu"], vec!["GPU-a", "GPU-b"]);
        assert_eq!(cp.entries[0].device_ids, vec!["GPU-b", "GPU-a"]);
        assert_eq!(cp.entries[0].container, "cuda");
        let v1 = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"nvidia.com/gpu","DeviceIDs":["GPU-a"],"AllocResp":""}],"RegisteredDevices":{"nvidia.com/gpu":null}},"Checksum":1}"#;
        let cp = parse_checkpoint(v1).unwrap();
        assert_eq!(cp.entries[0].device_ids, vec!["GPU-a"]);
        assert!(cp.registered["nvidia.com/gpu"].is_empty());
        let empty = r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":null},"Checksum":0}"#;
        assert_eq!(parse_checkpoint(empty).unwrap(), Checkpoint::default());
        assert!(parse_checkpoint("{\"Data\":").is_err());
    }

    #[test]
    fn pod_resources_json_round_trips_with_wire_names() {
        let text = r#"{
          "socket": "var/lib/kubelet/pod-resources/kubelet.sock",
          "allocatable": {"value": {"devices": [{"resource_name": "nvidia.com/gpu",
              "device_ids": ["GPU-a"], "topology": {"nodes": [{"ID": 1}]}}], "cpu_ids": [2, 3]}},
          "list": {"error": {"kind": "timeout", "message": "no answer within 5 s"}}
        }"#;
        let facts = parse_pod_resources_json(text).unwrap();
        let alloc = facts.allocatable_value().unwrap();
        assert_eq!(alloc.devices[0].topology.as_ref().unwrap().nodes[0].id, 1);
        assert_eq!(
            facts.list.as_ref().unwrap().error().unwrap().kind,
            RpcErrorKind::Timeout
        );
        let again = serde_json::to_string(&facts).unwrap();
        assert!(again.contains("\"ID\":1"), "{again}");
        assert_eq!(parse_pod_resources_json(&again).unwrap(), facts);
    }
}
