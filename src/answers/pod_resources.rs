//! What the kubelet's pod-resources API answered: the probe's answer type, one serde shape
//! shared by the live gRPC probe (`source/podresources/`) and replay's
//! `.gpudoctor/pod-resources.json`. No I/O and no policy here.
//!
//! Sources: reference/kubernetes.md §1 (pod-resources v1 messages and semantics).

use serde::{Deserialize, Serialize};

use super::ParseError;

/// The pod-resources socket, root-relative (kubernetes.md §1).
pub const POD_RESOURCES_SOCKET: &str = "var/lib/kubelet/pod-resources/kubelet.sock";

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

#[cfg(test)]
mod tests {
    use super::*;

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
