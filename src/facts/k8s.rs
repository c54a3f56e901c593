//! What the kubelet says about GPUs: the pod-resources API answers (one serde type shared by the
//! live gRPC probe and replay's `.gpudoctor/pod-resources.json`), the device-plugin socket
//! directory, the device manager's checkpoint, and device-id parsing. No policy here.
//!
//! Sources: reference/kubernetes.md §1 (pod-resources v1 messages and semantics), §2 (what
//! NVIDIA's device plugin advertises: resource names, `GPU-<uuid>`, `MIG-<uuid>`,
//! `<id>::<replica>` ids), §3 (socket directory and `kubelet_internal_checkpoint`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

/// The kubelet's state directory (kubeadm and most distributions).
pub const KUBELET_DIR: &str = "var/lib/kubelet";
/// `DevicePluginPath` (kubernetes.md §3).
pub const DEVICE_PLUGIN_DIR: &str = "var/lib/kubelet/device-plugins";
/// The kubelet's own registration socket in [`DEVICE_PLUGIN_DIR`].
pub const KUBELET_REGISTRATION_SOCKET: &str = "kubelet.sock";
/// The device manager's checkpoint in [`DEVICE_PLUGIN_DIR`].
pub const CHECKPOINT: &str = "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";

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
    /// GKE's device plugin (GoogleCloudPlatform/container-engine-accelerators,
    /// pkg/gpu/nvidia/manager.go `discoverGPUs`): the GPU's device file name `nvidia<N>`
    /// (`nvidiaDeviceRE = ^nvidia[0-9]*$` over /dev), N being the driver's minor number.
    DevNode(u32),
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
    } else if let Some(minor) = base
        .strip_prefix("nvidia")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse::<u32>().ok())
    {
        DeviceRef::DevNode(minor)
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
    /// The kubelet config found (`facts/kubelet_locate.rs`): the file to name, and how it was
    /// found (`EKS nodeadm's path`, `the kubelet's command line (pid 812)`).
    pub config: Option<(String, String)>,
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
    let config = super::kubelet_locate::locate(source).map(|l| {
        let shown = l.shown().unwrap_or("its command line").to_string();
        (shown, l.found_by)
    });
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
        pod_resources_socket: source.exists(crate::answers::pod_resources::POD_RESOURCES_SOCKET),
    }
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
        // GKE's plugin: the /dev file name (manager.go `setDevice(f.Name(), ...)`).
        assert_eq!(parse_device_id("nvidia7").device, DeviceRef::DevNode(7));
        for not_a_gpu in ["nvidiactl", "nvidia-uvm", "nvidia", "nvidia-caps"] {
            assert!(matches!(
                parse_device_id(not_a_gpu).device,
                DeviceRef::Other(_)
            ));
        }
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
}
