//! The live pod-resources probe: a gRPC client (tonic) for the kubelet's `v1.PodResourcesLister`
//! over its unix socket (reference/kubernetes.md §1). It asks `GetAllocatableResources` and
//! `List` and returns what came back as [`PodResourcesFacts`], the same type replay reads from
//! `.gpudoctor/pod-resources.json`. It never judges.
//!
//! Bounds: the whole probe (connect and both calls) shares one deadline, so a kubelet that
//! accepts and never answers costs at most the timeout; answers larger than
//! [`MAX_MESSAGE_BYTES`] or that do not decode are an `invalid_response` error, never a panic.
//! The tokio runtime is local to one probe (current-thread, dropped at the end): the rest of
//! gpudoctor stays synchronous.
//!
//! The message and client code in `v1.rs` is generated from `api.proto` and committed, so a
//! build needs no `protoc` (see `regen.md`).

#[allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    unused_qualifications,
    rustdoc::all
)]
/// Generated from `api.proto` by tonic-prost-build (messages and client only).
pub mod v1 {
    include!("v1.rs");
}

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::time::Instant;
use tonic::transport::{Endpoint, Uri};

use crate::answers::pod_resources::{
    AllocatableResources, ClaimResource, ContainerDevices, ContainerMemory, ContainerResources,
    DynamicResource, NumaNode, PodResources, PodResourcesFacts, RpcAnswer, RpcError, RpcErrorKind,
    TopologyInfo,
};

/// Largest answer accepted. The kubelet's own sample clients (and the topology-aware scheduler)
/// use 16 MiB for `List` on busy nodes; tonic's default is 4 MiB.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Ask the kubelet at `socket` (a real path on this machine; `shown` is how reports name it).
pub fn probe(socket: &Path, shown: &str, timeout: Duration) -> PodResourcesFacts {
    match std::fs::metadata(socket) {
        Ok(meta) if meta.file_type().is_socket() => {}
        Ok(meta) => {
            let what = if meta.is_dir() {
                "a directory"
            } else if meta.is_file() {
                "a regular file"
            } else {
                "not a socket"
            };
            return PodResourcesFacts::failed(
                shown,
                RpcErrorKind::NotASocket,
                format!("{shown}: {what}, not a socket"),
            );
        }
        Err(err) => {
            let (kind, why) = match err.kind() {
                io::ErrorKind::NotFound => (RpcErrorKind::NoSocket, "no such socket".to_string()),
                io::ErrorKind::PermissionDenied => (
                    RpcErrorKind::PermissionDenied,
                    "permission denied".to_string(),
                ),
                _ => (RpcErrorKind::Other, err.to_string()),
            };
            return PodResourcesFacts::failed(shown, kind, format!("{shown}: {why}"));
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            return PodResourcesFacts::failed(
                shown,
                RpcErrorKind::Other,
                format!("could not start the grpc runtime: {err}"),
            );
        }
    };
    let facts = runtime.block_on(ask(socket.to_path_buf(), shown.to_string(), timeout));
    // Whatever the hung connection task still waits on is dropped, not waited for.
    runtime.shutdown_background();
    facts
}

fn seconds(timeout: Duration) -> String {
    let ms = timeout.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

async fn ask(socket: PathBuf, shown: String, timeout: Duration) -> PodResourcesFacts {
    let deadline = Instant::now() + timeout;
    // The URI is never resolved: the connector below opens the unix socket instead (tonic's
    // documented way to speak gRPC over a unix socket).
    let endpoint = Endpoint::from_static("http://kubelet.invalid")
        .connect_timeout(timeout)
        .timeout(timeout);
    let path = socket.clone();
    let connector = tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
    });
    let channel =
        match tokio::time::timeout_at(deadline, endpoint.connect_with_connector(connector)).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(err)) => {
                let (kind, message) = connect_error(&err);
                return PodResourcesFacts::failed(&shown, kind, format!("{shown}: {message}"));
            }
            Err(_) => {
                return PodResourcesFacts::failed(
                    &shown,
                    RpcErrorKind::Timeout,
                    format!("{shown}: no connection within {}", seconds(timeout)),
                );
            }
        };
    let mut client = v1::pod_resources_lister_client::PodResourcesListerClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);

    let allocatable = match tokio::time::timeout_at(
        deadline,
        client.get_allocatable_resources(v1::AllocatableResourcesRequest {}),
    )
    .await
    {
        Ok(Ok(answer)) => RpcAnswer::Value(allocatable_from_wire(answer.into_inner())),
        Ok(Err(status)) => RpcAnswer::Error(status_error("GetAllocatableResources", &status)),
        Err(_) => RpcAnswer::Error(RpcError {
            kind: RpcErrorKind::Timeout,
            message: format!(
                "GetAllocatableResources: no answer within {}",
                seconds(timeout)
            ),
        }),
    };
    // A kubelet that did not answer in time will not answer the next call either, and the
    // deadline is spent: say so instead of waiting again.
    let list = if allocatable
        .error()
        .is_some_and(|e| e.kind == RpcErrorKind::Timeout)
    {
        RpcAnswer::Error(RpcError {
            kind: RpcErrorKind::Timeout,
            message: "List: not asked, GetAllocatableResources timed out".to_string(),
        })
    } else {
        match tokio::time::timeout_at(deadline, client.list(v1::ListPodResourcesRequest {})).await {
            Ok(Ok(answer)) => RpcAnswer::Value(
                answer
                    .into_inner()
                    .pod_resources
                    .into_iter()
                    .map(pod_from_wire)
                    .collect(),
            ),
            Ok(Err(status)) => RpcAnswer::Error(status_error("List", &status)),
            Err(_) => RpcAnswer::Error(RpcError {
                kind: RpcErrorKind::Timeout,
                message: format!("List: no answer within {}", seconds(timeout)),
            }),
        }
    };
    PodResourcesFacts {
        socket: shown,
        error: None,
        allocatable: Some(allocatable),
        list: Some(list),
    }
}

/// The io error under a tonic transport error, if any.
fn io_cause<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a io::Error> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return Some(io);
        }
        current = e.source();
    }
    None
}

fn connect_error(err: &tonic::transport::Error) -> (RpcErrorKind, String) {
    match io_cause(err) {
        Some(io) => {
            let kind = match io.kind() {
                io::ErrorKind::PermissionDenied => RpcErrorKind::PermissionDenied,
                io::ErrorKind::NotFound => RpcErrorKind::NoSocket,
                _ => RpcErrorKind::ConnectFailed,
            };
            (kind, format!("connect: {io}"))
        }
        None => (RpcErrorKind::ConnectFailed, format!("connect: {err}")),
    }
}

/// A gRPC status as an error kind (kubernetes.md §1: `Unimplemented` from old kubelets,
/// `ResourceExhausted` from the rate limiter).
fn status_error(call: &str, status: &tonic::Status) -> RpcError {
    use tonic::Code;
    let kind = match status.code() {
        Code::Unimplemented => RpcErrorKind::Unimplemented,
        Code::DeadlineExceeded | Code::Cancelled => RpcErrorKind::Timeout,
        Code::Unavailable => RpcErrorKind::Unavailable,
        Code::ResourceExhausted => RpcErrorKind::ResourceExhausted,
        Code::PermissionDenied | Code::Unauthenticated => RpcErrorKind::PermissionDenied,
        Code::Internal | Code::OutOfRange | Code::DataLoss => RpcErrorKind::InvalidResponse,
        _ => RpcErrorKind::Other,
    };
    let mut message = status.message().trim().to_string();
    if message.chars().count() > 300 {
        message = message.chars().take(300).collect::<String>() + "…";
    }
    RpcError {
        kind,
        message: format!("{call}: {:?}: {message}", status.code()),
    }
}

// ---------------------------------------------------------------------------------------------
// Wire <-> facts. Both directions are public: the other one serves fake kubelets in tests.

fn topology_from_wire(t: Option<v1::TopologyInfo>) -> Option<TopologyInfo> {
    t.map(|t| TopologyInfo {
        nodes: t.nodes.into_iter().map(|n| NumaNode { id: n.id }).collect(),
    })
}

fn topology_to_wire(t: &Option<TopologyInfo>) -> Option<v1::TopologyInfo> {
    t.as_ref().map(|t| v1::TopologyInfo {
        nodes: t.nodes.iter().map(|n| v1::NumaNode { id: n.id }).collect(),
    })
}

fn devices_from_wire(d: v1::ContainerDevices) -> ContainerDevices {
    ContainerDevices {
        resource_name: d.resource_name,
        device_ids: d.device_ids,
        topology: topology_from_wire(d.topology),
    }
}

fn devices_to_wire(d: &ContainerDevices) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: d.resource_name.clone(),
        device_ids: d.device_ids.clone(),
        topology: topology_to_wire(&d.topology),
    }
}

fn memory_from_wire(m: v1::ContainerMemory) -> ContainerMemory {
    ContainerMemory {
        memory_type: m.memory_type,
        size: m.size,
        topology: topology_from_wire(m.topology),
    }
}

fn memory_to_wire(m: &ContainerMemory) -> v1::ContainerMemory {
    v1::ContainerMemory {
        memory_type: m.memory_type.clone(),
        size: m.size,
        topology: topology_to_wire(&m.topology),
    }
}

pub fn allocatable_from_wire(a: v1::AllocatableResourcesResponse) -> AllocatableResources {
    AllocatableResources {
        devices: a.devices.into_iter().map(devices_from_wire).collect(),
        cpu_ids: a.cpu_ids,
        memory: a.memory.into_iter().map(memory_from_wire).collect(),
    }
}

pub fn allocatable_to_wire(a: &AllocatableResources) -> v1::AllocatableResourcesResponse {
    v1::AllocatableResourcesResponse {
        devices: a.devices.iter().map(devices_to_wire).collect(),
        cpu_ids: a.cpu_ids.clone(),
        memory: a.memory.iter().map(memory_to_wire).collect(),
    }
}

pub fn pod_from_wire(p: v1::PodResources) -> PodResources {
    PodResources {
        name: p.name,
        namespace: p.namespace,
        containers: p
            .containers
            .into_iter()
            .map(|c| ContainerResources {
                name: c.name,
                devices: c.devices.into_iter().map(devices_from_wire).collect(),
                cpu_ids: c.cpu_ids,
                memory: c.memory.into_iter().map(memory_from_wire).collect(),
                dynamic_resources: c
                    .dynamic_resources
                    .into_iter()
                    .map(|d| DynamicResource {
                        claim_name: d.claim_name,
                        claim_namespace: d.claim_namespace,
                        claim_resources: d
                            .claim_resources
                            .into_iter()
                            .map(|r| ClaimResource {
                                cdi_devices: r.cdi_devices.into_iter().map(|c| c.name).collect(),
                                driver_name: r.driver_name,
                                pool_name: r.pool_name,
                                device_name: r.device_name,
                                share_id: r.share_id,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
        cpu_ids: p.cpu_ids,
        memory: p.memory.into_iter().map(memory_from_wire).collect(),
    }
}

pub fn pod_to_wire(p: &PodResources) -> v1::PodResources {
    v1::PodResources {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        containers: p
            .containers
            .iter()
            .map(|c| v1::ContainerResources {
                name: c.name.clone(),
                devices: c.devices.iter().map(devices_to_wire).collect(),
                cpu_ids: c.cpu_ids.clone(),
                memory: c.memory.iter().map(memory_to_wire).collect(),
                dynamic_resources: c
                    .dynamic_resources
                    .iter()
                    .map(|d| v1::DynamicResource {
                        claim_name: d.claim_name.clone(),
                        claim_namespace: d.claim_namespace.clone(),
                        claim_resources: d
                            .claim_resources
                            .iter()
                            .map(|r| v1::ClaimResource {
                                cdi_devices: r
                                    .cdi_devices
                                    .iter()
                                    .map(|n| v1::CdiDevice { name: n.clone() })
                                    .collect(),
                                driver_name: r.driver_name.clone(),
                                pool_name: r.pool_name.clone(),
                                device_name: r.device_name.clone(),
                                share_id: r.share_id.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
        cpu_ids: p.cpu_ids.clone(),
        memory: p.memory.iter().map(memory_to_wire).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_non_socket_paths_answer_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let none = probe(
            &dir.path().join("kubelet.sock"),
            "k.sock",
            Duration::from_secs(5),
        );
        assert_eq!(none.error.unwrap().kind, RpcErrorKind::NoSocket);
        let file = dir.path().join("file.sock");
        std::fs::write(&file, "").unwrap();
        let not = probe(&file, "file.sock", Duration::from_secs(5));
        let err = not.error.unwrap();
        assert_eq!(err.kind, RpcErrorKind::NotASocket);
        assert!(err.message.contains("a regular file"), "{}", err.message);
    }

    #[test]
    fn a_socket_nobody_listens_on_is_connect_failed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stale.sock");
        // Bind, then close: the file stays, nobody accepts (a kubelet that stopped).
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let facts = probe(&path, "stale.sock", Duration::from_secs(5));
        assert_eq!(facts.error.unwrap().kind, RpcErrorKind::ConnectFailed);
    }

    #[test]
    fn wire_conversion_round_trips() {
        let pod = PodResources {
            name: "p".into(),
            namespace: "ns".into(),
            containers: vec![ContainerResources {
                name: "c".into(),
                devices: vec![ContainerDevices {
                    resource_name: "nvidia.com/gpu".into(),
                    device_ids: vec!["GPU-a::1".into()],
                    topology: Some(TopologyInfo {
                        nodes: vec![NumaNode { id: 1 }],
                    }),
                }],
                cpu_ids: vec![4, 5],
                memory: vec![ContainerMemory {
                    memory_type: "memory".into(),
                    size: 1 << 30,
                    topology: None,
                }],
                dynamic_resources: vec![DynamicResource {
                    claim_name: "gpu-claim".into(),
                    claim_namespace: "ns".into(),
                    claim_resources: vec![ClaimResource {
                        cdi_devices: vec!["nvidia.com/gpu=0".into()],
                        driver_name: "gpu.nvidia.com".into(),
                        pool_name: "node-1".into(),
                        device_name: "gpu-0".into(),
                        share_id: Some("s".into()),
                    }],
                }],
            }],
            cpu_ids: vec![],
            memory: vec![],
        };
        assert_eq!(pod_from_wire(pod_to_wire(&pod)), pod);
    }
}
