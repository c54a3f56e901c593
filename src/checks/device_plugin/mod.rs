//! Device-plugin layer: does Kubernetes see and account the GPUs? The kubelet is there, NVIDIA's
//! device plugin registered with it, the kubelet's pod-resources API answers, every GPU NVML
//! sees is allocatable (healthy) with the NUMA node sysfs gives it, and no GPU is handed to two
//! containers without a sharing mode. A node without a kubelet is `skip`.
//!
//! Device ids are matched to NVML: `GPU-<uuid>` and indexes to GPUs, `::<n>` replicas stripped,
//! `MIG-<uuid>` to the GPU whose enumerated MIG devices hold it. A MIG device NVML has and
//! allocatable lacks fails like a GPU (the plugin drops an unhealthy MIG device as it drops a
//! GPU, and the capacity shrinks the same way); a MIG id NVML does not know warns like an
//! unknown GPU id. Without enumeration (captures older than `mig_devices`) MIG ids stay
//! unattributed and a GPU in MIG mode counts as allocatable when any MIG id is.
//!
//! Sources: reference/kubernetes.md §1 (pod-resources semantics: allocatable = healthy), §2
//! (NVIDIA resource names and device ids, plugin health marking by XID), §3 (plugin sockets and
//! the checkpoint, used only as a fallback and said so).

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::k8s::{
    CHECKPOINT, DEVICE_PLUGIN_DIR, DeviceRef, KUBELET_DIR, KUBELET_REGISTRATION_SOCKET,
    PodResourcesFacts, RpcError, RpcErrorKind, TopologyInfo, is_nvidia_resource, parse_device_id,
};
use crate::facts::nvml::{MigDevice, NvmlDevice};
use crate::facts::xid;
use crate::report::{Action, Evidence, Layer};

/// XIDs the device plugin does not mark a GPU unhealthy for (kubernetes.md §2).
const PLUGIN_IGNORED_XIDS: &[u32] = &[13, 31, 43, 45, 68, 109];
/// Most holder lines shown as evidence.
const MAX_HOLDER_LINES: usize = 24;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "device_plugin.kubelet",
            layer: Layer::DevicePlugin,
            title: "the kubelet is present",
            explain: Explain {
                reads: "/var/lib/kubelet, the kubelet config (/var/lib/kubelet/config.yaml and the k3s/RKE2 locations)",
                expects: "the kubelet's state directory; without it the node is not a Kubernetes node and the layer is skipped",
                why: "everything in this layer is the kubelet's view of the GPUs",
                fix: "on a Kubernetes node run gpudoctor with the host's / as --root (a DaemonSet mounts it at /host)",
            },
            run: kubelet,
        },
        CheckDef {
            code: "device_plugin.registered",
            layer: Layer::DevicePlugin,
            title: "NVIDIA's device plugin is registered with the kubelet",
            explain: Explain {
                reads: "/var/lib/kubelet/device-plugins/ (nvidia-*.sock, kubelet.sock), /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint (RegisteredDevices)",
                expects: "an nvidia-gpu.sock (or nvidia-<mig profile>.sock) next to the kubelet's kubelet.sock, and the checkpoint listing nvidia.com/gpu (or the MIG resources) with devices",
                why: "without a registered plugin the node advertises no nvidia.com/gpu and GPU Pods stay Pending",
                fix: "check the device plugin DaemonSet's pod on this node (`kubectl get pods -A -o wide | grep nvidia-device-plugin`) and its log; on GPU Operator nodes the node needs `nvidia.com/gpu.deploy.device-plugin=true`",
            },
            run: registered,
        },
        CheckDef {
            code: "device_plugin.pod_resources",
            layer: Layer::DevicePlugin,
            title: "the kubelet's pod-resources API answers",
            explain: Explain {
                reads: "gRPC v1.PodResourcesLister GetAllocatableResources and List on /var/lib/kubelet/pod-resources/kubelet.sock (--kubelet-socket; .gpudoctor/pod-resources.json in a capture), bounded by --timeout (5 s by default)",
                expects: "both calls answer; a kubelet without GetAllocatableResources (before 1.21) warns and the checkpoint stands in",
                why: "the pod-resources API is the node-local truth about what the kubelet can allocate and who holds which GPU",
                fix: "socket missing or refusing: the kubelet is not running (`systemctl status kubelet`); in a Pod mount the directory /var/lib/kubelet/pod-resources (not the socket) and run as root; timeouts: the kubelet is overloaded or hung",
            },
            run: pod_resources,
        },
        CheckDef {
            code: "device_plugin.allocatable",
            layer: Layer::DevicePlugin,
            title: "every GPU NVML sees is allocatable",
            explain: Explain {
                reads: "pod-resources GetAllocatableResources (fallback: the checkpoint's RegisteredDevices), NVML UUIDs and indexes and each MIG-mode GPU's MIG devices, the kernel log's XIDs, pod-resources List",
                expects: "each NVML GPU's UUID (or index) among the allocatable nvidia.com/* device ids, time-slicing replicas `GPU-…::<n>` counted per GPU; on a GPU in MIG mode each MIG device NVML enumerates (`MIG-…`, under nvidia.com/mig-<profile> or nvidia.com/gpu) allocatable, and every allocatable MIG id one NVML enumerates (a capture without MIG enumeration: the GPU counts when any MIG id is allocatable)",
                why: "the kubelet lists only healthy devices: a GPU or MIG device NVML sees but Kubernetes cannot allocate was marked unhealthy by the device plugin, usually after an XID, and the node's GPU capacity silently shrinks; MIG ids NVML does not know mean the MIG layout changed after the plugin started, and Pods scheduled onto them fail to start",
                fix: "read the XID that caused it (driver.xid_events, `dmesg | grep -i xid`), reset or repair the GPU (a reset ends every MIG device on it), then restart the device plugin pod on this node (its unhealthy marks are sticky until it restarts); after a MIG re-layout restart the plugin; MIG mode without instances: create them (`nvidia-smi mig -cgi ... -C` or the GPU Operator's nvidia.com/mig.config label)",
            },
            run: allocatable,
        },
        CheckDef {
            code: "device_plugin.numa_topology",
            layer: Layer::DevicePlugin,
            title: "allocatable GPUs carry the NUMA node sysfs gives them",
            explain: Explain {
                reads: "pod-resources GetAllocatableResources topology per device, /sys/bus/pci/devices/<gpu>/numa_node",
                expects: "each allocatable GPU's NUMA node equal to its sysfs numa_node (no topology when sysfs says -1)",
                why: "the topology manager aligns CPUs and memory with the GPU's NUMA node from this hint; a wrong or missing hint places workloads across sockets",
                fix: "restart the device plugin so it rereads numa_node; if sysfs says -1 on a multi-socket server, enable the NUMA/ACPI SRAT proximity setting in the BIOS",
            },
            run: |ctx| {
                let mut unread = Vec::new();
                numa_topology(ctx, &mut unread).with_unread(&unread)
            },
        },
        CheckDef {
            code: "device_plugin.allocations",
            layer: Layer::DevicePlugin,
            title: "no GPU is handed to two containers without a sharing mode",
            explain: Explain {
                reads: "pod-resources List (fallback: the checkpoint's PodDeviceEntries)",
                expects: "each device id held by at most one container; containers share a GPU only through distinct replica ids (`GPU-…::<n>`, time-slicing or MPS)",
                why: "two containers given the same GPU without sharing contend for its memory and fail with out-of-memory or wrong results; it means the kubelet's accounting is corrupt",
                fix: "delete one of the Pods and restart the kubelet (`systemctl restart kubelet`); if it recurs, remove the checkpoint /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint with the node drained",
            },
            run: allocations,
        },
    ]
}

/// `Some(skip)` on a node without a kubelet.
fn not_kubernetes(ctx: &Context<'_>) -> Option<Outcome> {
    (!ctx.kubelet().present())
        .then(|| Outcome::skip(format!("not a kubernetes node (no {KUBELET_DIR})")))
}

fn kubelet(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let facts = ctx.kubelet();
    match &facts.config {
        Some(config) => Outcome::pass(format!("kubelet present (config {config})"))
            .evidence(Evidence::new(config.as_str(), "present")),
        None => Outcome::pass(format!(
            "kubelet present ({KUBELET_DIR}; config not in a usual place)"
        ))
        .evidence(Evidence::new(KUBELET_DIR, "present")),
    }
}

fn registered(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let facts = ctx.kubelet();
    let Some(entries) = &facts.plugin_dir else {
        return Outcome::fail(format!(
            "no device-plugin directory {DEVICE_PLUGIN_DIR}: no device plugin can register"
        ))
        .evidence(Evidence::new(DEVICE_PLUGIN_DIR, "absent").expected("the kubelet's device-plugin directory"))
        .hint("the kubelet creates it at start: `systemctl status kubelet`; in a Pod, mount /var/lib/kubelet under --root")
        .action(Action::RestartComponent);
    };
    let sockets = facts.nvidia_plugin_sockets();
    let listing = if entries.is_empty() {
        "empty".to_string()
    } else {
        entries.join(" ")
    };
    let checkpoint_resources: Option<Vec<String>> = match &facts.checkpoint {
        Ok(Some(cp)) => Some(
            cp.registered
                .iter()
                .filter(|(r, _)| is_nvidia_resource(r))
                .map(|(r, ids)| format!("{r}: {} device(s)", ids.len()))
                .collect(),
        ),
        _ => None,
    };
    let checkpoint_evidence = match (&facts.checkpoint, &checkpoint_resources) {
        (Ok(Some(_)), Some(list)) if list.is_empty() => {
            Evidence::new(CHECKPOINT, "RegisteredDevices: no nvidia resource")
        }
        (Ok(Some(_)), Some(list)) => Evidence::new(
            CHECKPOINT,
            format!("RegisteredDevices: {}", list.join(", ")),
        ),
        (Ok(_), _) => Evidence::new(CHECKPOINT, "absent"),
        (Err(err), _) => Evidence::new(&err.path, &err.message),
    };
    if sockets.is_empty() {
        return Outcome::fail(format!(
            "nvidia device plugin not registered: no nvidia-*.sock in {DEVICE_PLUGIN_DIR}"
        ))
        .evidence(Evidence::new(DEVICE_PLUGIN_DIR, listing).expected("nvidia-gpu.sock (or nvidia-<mig profile>.sock)"))
        .evidence(checkpoint_evidence)
        .hint("is the nvidia device plugin pod running on this node? `kubectl get pods -A -o wide --field-selector spec.nodeName=$(hostname) | grep -i nvidia`; read its log; on gpu operator nodes check the label nvidia.com/gpu.deploy.device-plugin")
        .action(Action::RestartComponent);
    }
    let mut problems = Vec::new();
    if !entries.iter().any(|e| e == KUBELET_REGISTRATION_SOCKET) {
        problems.push(format!(
            "the kubelet's registration socket {KUBELET_REGISTRATION_SOCKET} is missing"
        ));
    }
    match &checkpoint_resources {
        Some(list) if list.is_empty() => {
            problems.push("the kubelet checkpoint lists no nvidia resource".to_string())
        }
        None if facts.checkpoint.is_err() => {
            problems.push("the kubelet checkpoint is unreadable".to_string())
        }
        _ => {}
    }
    let resources = checkpoint_resources
        .filter(|l| !l.is_empty())
        .map(|l| format!("; checkpoint: {}", l.join(", ")))
        .unwrap_or_default();
    let evidence = [
        Evidence::new(DEVICE_PLUGIN_DIR, listing),
        checkpoint_evidence,
    ];
    if !problems.is_empty() {
        return Outcome::warn(format!(
            "nvidia device plugin socket {} present, but {}",
            sockets.join(", "),
            problems.join("; ")
        ))
        .evidence_all(evidence)
        .hint("restart the device plugin pod so it registers again; if the kubelet's socket is gone, restart the kubelet")
        .action(Action::RestartComponent);
    }
    Outcome::pass(format!(
        "nvidia device plugin registered ({}){resources}",
        sockets.join(", ")
    ))
    .evidence_all(evidence)
}

fn rpc_error_outcome(socket: &str, what: &str, err: &RpcError) -> Outcome {
    let (summary, hint) = match err.kind {
        RpcErrorKind::NoSocket => (
            format!("no kubelet pod-resources socket at {socket}"),
            "is the kubelet running (`systemctl status kubelet`)? in a pod, mount the directory /var/lib/kubelet/pod-resources (not the socket) under --root, or pass --kubelet-socket",
        ),
        RpcErrorKind::NotASocket => (
            format!("{socket} is not a socket"),
            "a stale bind mount of the socket (mount the directory instead) or a wrong --kubelet-socket; restarting the kubelet recreates it",
        ),
        RpcErrorKind::PermissionDenied => (
            format!("permission denied on {socket}"),
            "run gpudoctor as root (the socket is root-only)",
        ),
        RpcErrorKind::OutsideRoot => (
            format!("{socket} leads outside --root; refused"),
            "fix the symlink, or pass the real socket with --kubelet-socket",
        ),
        RpcErrorKind::ConnectFailed => (
            format!("kubelet does not accept connections on {socket}"),
            "a socket left by a stopped kubelet: `systemctl status kubelet` and its journal",
        ),
        RpcErrorKind::Timeout => (
            format!("kubelet did not answer {what} in time on {socket}"),
            "the kubelet is hung or overloaded: read `journalctl -u kubelet`; raise --timeout if the node is only slow",
        ),
        RpcErrorKind::ResourceExhausted => (
            format!("kubelet rate-limited {what}"),
            "another client polls the pod-resources api in a tight loop (limit 100 qps): find it, then run again",
        ),
        RpcErrorKind::InvalidResponse => (
            format!("kubelet's answer to {what} did not decode"),
            "whatever listens on the socket is not a kubelet speaking pod-resources v1, or the answer exceeds 16 MiB",
        ),
        RpcErrorKind::Unimplemented => (
            format!("kubelet does not implement {what}"),
            "upgrade the kubelet (pod-resources v1 List and GetAllocatableResources are GA since 1.28)",
        ),
        RpcErrorKind::Unavailable | RpcErrorKind::Other | RpcErrorKind::NotAvailable => (
            format!(
                "kubelet pod-resources {what} failed: {}",
                err.kind.describe()
            ),
            "read `journalctl -u kubelet` and run again",
        ),
    };
    Outcome::error(summary)
        .evidence(Evidence::new(socket, &err.message).expected("an answer"))
        .hint(hint)
}

fn nvidia_device_count(facts: &PodResourcesFacts) -> usize {
    facts
        .allocatable_value()
        .map(|a| {
            a.devices
                .iter()
                .filter(|d| is_nvidia_resource(&d.resource_name))
                .map(|d| d.device_ids.len())
                .sum()
        })
        .unwrap_or(0)
}

fn pod_resources(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let facts = ctx.pod_resources();
    let socket = facts.socket.as_str();
    if let Some(err) = &facts.error {
        if err.kind == RpcErrorKind::NotAvailable {
            return Outcome::skip(format!("no pod-resources answer: {}", err.message));
        }
        return rpc_error_outcome(socket, "the connection", err);
    }
    let alloc_err = facts.allocatable.as_ref().and_then(|a| a.error());
    let list_err = facts.list.as_ref().and_then(|a| a.error());
    match (alloc_err, list_err) {
        (None, None) => {
            let pods = facts.list_value().map(|l| l.len()).unwrap_or(0);
            Outcome::pass(format!(
                "kubelet pod-resources api answered: {} allocatable nvidia device(s), {pods} pod(s) listed",
                nvidia_device_count(facts)
            ))
            .evidence(Evidence::new(socket, "GetAllocatableResources and List answered"))
        }
        (Some(a), None) if a.kind == RpcErrorKind::Unimplemented => Outcome::warn(
            "kubelet does not implement GetAllocatableResources (before 1.21, or its feature gate off): allocatable read from the kubelet checkpoint instead",
        )
        .evidence(Evidence::new(socket, &a.message).expected("GetAllocatableResources answered"))
        .hint("upgrade the kubelet (GetAllocatableResources is GA since 1.28); the checkpoint is an internal file and may be stale")
        .action(Action::FixConfig),
        (Some(a), _) => rpc_error_outcome(socket, "GetAllocatableResources", a),
        (None, Some(l)) => rpc_error_outcome(socket, "List", l),
    }
}

/// What one allocatable (or held) id maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// An NVML GPU, by its position in `gpus`.
    Gpu(usize),
    /// A MIG device NVML enumerated: its GPU's position in `gpus`, its position in that GPU's
    /// `mig_devices` list.
    Mig(usize, usize),
    /// A MIG UUID while a GPU in MIG mode has MIG devices NVML did not enumerate (a capture made
    /// before gpudoctor walked them, or a MIG handle that failed): not attributable to a GPU.
    MigUnattributed,
    Unknown,
}

/// The answer when allocatable lacks a GPU or MIG device NVML has.
const GPU_UNHEALTHY_HINT: &str = "read the xid for that gpu (`dmesg | grep -i xid`) and follow driver.xid_events; once the gpu is healthy again, restart the device plugin pod on this node: its unhealthy mark is sticky until it restarts";

/// The answer when only MIG devices are missing: the plugin marks one MIG device unhealthy on
/// an XID in its instance (kubernetes.md §2), and a GPU reset would end every MIG device on it.
const MIG_UNHEALTHY_HINT: &str = "read the xid for that gpu (`dmesg | grep -i xid`) and `nvidia-smi -L` for its mig devices; once the workload on the mig device is gone, restart the device plugin pod on this node (its unhealthy mark is sticky until it restarts); reset the gpu only if the xid calls for it: that ends every mig device on it";

fn is_mig_id(id: &str) -> bool {
    matches!(parse_device_id(id).device, DeviceRef::MigUuid(_))
}

/// A GPU in MIG mode (or of unknown mode) whose MIG devices are not all known by UUID.
fn mig_unenumerated(d: &NvmlDevice) -> bool {
    d.mig_possible()
        && d.mig_list()
            .is_none_or(|list| list.iter().any(|m| m.uuid.is_none()))
}

fn resolve(id: &str, gpus: &[&NvmlDevice]) -> Target {
    match parse_device_id(id).device {
        DeviceRef::GpuUuid(uuid) => gpus
            .iter()
            .position(|d| d.uuid.as_deref() == Some(uuid.as_str()))
            .map_or(Target::Unknown, Target::Gpu),
        DeviceRef::Index(i) => gpus
            .iter()
            .position(|d| d.index == i)
            .map_or(Target::Unknown, Target::Gpu),
        DeviceRef::MigUuid(uuid) => gpus
            .iter()
            .enumerate()
            .find_map(|(g, d)| {
                let m = d
                    .mig_list()?
                    .iter()
                    .position(|m| m.uuid.as_deref() == Some(uuid.as_str()))?;
                Some(Target::Mig(g, m))
            })
            .unwrap_or(if gpus.iter().any(|d| mig_unenumerated(d)) {
                Target::MigUnattributed
            } else {
                Target::Unknown
            }),
        DeviceRef::Other(_) => Target::Unknown,
    }
}

fn label(d: &NvmlDevice) -> String {
    format!(
        "gpu {} ({})",
        d.index,
        d.pci_bus_id.as_deref().unwrap_or("?")
    )
}

/// `gpu 1 (0000:2a:00.0) mig 3 (1g.10gb)`: NVML's MIG index under the GPU, and the profile.
fn mig_label(d: &NvmlDevice, m: &MigDevice) -> String {
    let profile = m.profile().map(|p| format!(" ({p})")).unwrap_or_default();
    format!("{} mig {}{profile}", label(d), m.index)
}

/// The MIG device at position `m` of GPU `d`'s list.
fn mig_at(d: &NvmlDevice, m: usize) -> Option<&MigDevice> {
    d.mig_list()?.get(m)
}

/// A container holding a device id: "namespace/pod/container" (or the pod UID from the
/// checkpoint) and the id.
struct Holder {
    who: String,
    id: String,
}

/// Holders of nvidia devices: from List, else from the checkpoint; the string says where from.
fn holders(ctx: &Context<'_>) -> Option<(Vec<Holder>, String)> {
    let facts = ctx.pod_resources();
    if let Some(pods) = facts.list_value() {
        let mut out = Vec::new();
        for pod in pods {
            for c in &pod.containers {
                for d in c
                    .devices
                    .iter()
                    .filter(|d| is_nvidia_resource(&d.resource_name))
                {
                    for id in &d.device_ids {
                        out.push(Holder {
                            who: format!("{}/{}/{}", pod.namespace, pod.name, c.name),
                            id: id.clone(),
                        });
                    }
                }
            }
        }
        return Some((out, "pod-resources.list".to_string()));
    }
    if let Ok(Some(cp)) = &ctx.kubelet().checkpoint {
        let out = cp
            .entries
            .iter()
            .filter(|e| is_nvidia_resource(&e.resource))
            .flat_map(|e| {
                e.device_ids.iter().map(move |id| Holder {
                    who: format!("pod uid {}/{}", e.pod_uid, e.container),
                    id: id.clone(),
                })
            })
            .collect();
        return Some((out, CHECKPOINT.to_string()));
    }
    None
}

fn allocatable(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Outcome::skip("nvml unavailable (see driver.nvml_init)");
    }
    let facts = ctx.pod_resources();
    // (resource, id) pairs and where they came from.
    let (ids, from, fallback): (Vec<(String, String)>, String, Option<String>) = if let Some(a) =
        facts.allocatable_value()
    {
        let ids = a
            .devices
            .iter()
            .filter(|d| is_nvidia_resource(&d.resource_name))
            .flat_map(|d| {
                d.device_ids
                    .iter()
                    .map(|i| (d.resource_name.clone(), i.clone()))
            })
            .collect();
        (ids, "pod-resources.allocatable".to_string(), None)
    } else {
        let why = facts
            .error
            .as_ref()
            .or_else(|| facts.allocatable.as_ref().and_then(|a| a.error()))
            .map(|e| e.kind.describe())
            .unwrap_or("no answer");
        match &ctx.kubelet().checkpoint {
            Ok(Some(cp)) => {
                let ids = cp
                    .registered
                    .iter()
                    .filter(|(r, _)| is_nvidia_resource(r))
                    .flat_map(|(r, ids)| ids.iter().map(move |i| (r.clone(), i.clone())))
                    .collect();
                (
                    ids,
                    CHECKPOINT.to_string(),
                    Some(format!(
                        "from the kubelet checkpoint: pod-resources GetAllocatableResources {why}"
                    )),
                )
            }
            _ if facts
                .error
                .as_ref()
                .is_some_and(|e| e.kind == RpcErrorKind::NotAvailable) =>
            {
                return Outcome::skip(
                    "no pod-resources answer and no kubelet checkpoint in this capture",
                );
            }
            Ok(None) => {
                return Outcome::error(format!(
                        "cannot tell which gpus are allocatable: pod-resources {why} and no kubelet checkpoint"
                    ))
                    .evidence(Evidence::new(CHECKPOINT, "absent"))
                    .hint("see device_plugin.pod_resources; the kubelet must be running for this check");
            }
            Err(err) => return Outcome::unreadable(err),
        }
    };
    let gpus: Vec<&NvmlDevice> = nvml.devices.iter().filter(|d| d.error.is_none()).collect();
    if ids.is_empty() && ctx.kubelet().nvidia_plugin_sockets().is_empty() {
        return Outcome::skip(
            "no nvidia resource allocatable: the device plugin is not registered (see device_plugin.registered)",
        );
    }
    let mut per_gpu: BTreeMap<usize, usize> = BTreeMap::new();
    let mut per_mig: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut mig_ids = 0usize;
    let mut unattributed = 0usize;
    let mut unknown: Vec<&str> = Vec::new();
    let mut unknown_mig: Vec<&str> = Vec::new();
    let mut resources: BTreeSet<&str> = BTreeSet::new();
    for (resource, id) in &ids {
        resources.insert(resource.as_str());
        match resolve(id, &gpus) {
            Target::Gpu(i) => *per_gpu.entry(i).or_default() += 1,
            Target::Mig(g, m) => {
                mig_ids += 1;
                per_mig.insert((g, m));
            }
            Target::MigUnattributed => {
                mig_ids += 1;
                unattributed += 1;
            }
            Target::Unknown if is_mig_id(id) => unknown_mig.push(id.as_str()),
            Target::Unknown => unknown.push(id.as_str()),
        }
    }
    let resource_text = resources.iter().copied().collect::<Vec<_>>().join(", ");
    let resource_text = if resource_text.is_empty() {
        "no nvidia resource".to_string()
    } else {
        resource_text
    };
    // A GPU is allocatable whole (its UUID or index) or through its MIG devices. Enumerated MIG
    // devices are each expected, like GPUs (the plugin drops an unhealthy MIG device from
    // allocatable just as it drops a GPU); without enumeration (an older capture) a GPU in MIG
    // mode counts as allocatable when any MIG id is.
    let mut missing: Vec<(usize, &NvmlDevice)> = Vec::new();
    // (GPU position, position in its MIG list, the MIG device)
    let mut absent_migs: Vec<(usize, usize, &MigDevice)> = Vec::new();
    let mut mig_total = 0usize;
    for (i, d) in gpus.iter().enumerate() {
        if per_gpu.contains_key(&i) {
            continue;
        }
        match d.mig_list() {
            Some(list) => {
                let expected: Vec<(usize, &MigDevice)> = list
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.error.is_none() && m.uuid.is_some())
                    .collect();
                mig_total += expected.len();
                let absent: Vec<(usize, usize, &MigDevice)> = expected
                    .iter()
                    .filter(|(m, _)| !per_mig.contains(&(i, *m)))
                    .map(|(k, m)| (i, *k, *m))
                    .collect();
                // An unattributed MIG id may be one of this GPU's unopened MIG devices.
                let maybe_unopened = unattributed > 0 && list.iter().any(|m| m.uuid.is_none());
                if absent.len() == expected.len() && !maybe_unopened {
                    missing.push((i, *d));
                }
                absent_migs.extend(absent);
            }
            None if d.mig_possible() && unattributed > 0 => {}
            None => missing.push((i, *d)),
        }
    }
    let fallback_note = fallback
        .as_ref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    let mig_resource = |m: &MigDevice| {
        m.profile()
            .map(|p| format!("nvidia.com/mig-{p}"))
            .filter(|r| resources.contains(r.as_str()))
            .unwrap_or_else(|| resource_text.clone())
    };
    if !missing.is_empty() || !absent_migs.is_empty() {
        let is_missing = |i: usize| missing.iter().any(|(j, _)| *j == i);
        let mut parts = Vec::new();
        if !missing.is_empty() {
            let names: Vec<String> = missing
                .iter()
                .map(|(_, d)| {
                    let note = match d.mig_list() {
                        Some([]) => " (mig mode on, no mig device)",
                        Some(_) => " (mig mode, none of its mig devices)",
                        None => "",
                    };
                    format!("{} {}{note}", label(d), d.uuid.as_deref().unwrap_or("?"))
                })
                .collect();
            parts.push(format!(
                "{} of {} gpus allocatable: {} missing",
                gpus.len() - missing.len(),
                gpus.len(),
                names.join(", ")
            ));
        }
        let partial: Vec<String> = absent_migs
            .iter()
            .filter(|(i, _, _)| !is_missing(*i))
            .map(|(i, _, m)| {
                format!(
                    "{} {}",
                    mig_label(gpus[*i], m),
                    m.uuid.as_deref().unwrap_or("?")
                )
            })
            .collect();
        if !partial.is_empty() {
            parts.push(format!(
                "{} of {mig_total} mig devices allocatable: {} missing",
                mig_total - absent_migs.len(),
                partial.join(", ")
            ));
        }
        if !unknown_mig.is_empty() {
            parts.push(format!(
                "{} allocatable mig id(s) unknown to nvml: {}",
                unknown_mig.len(),
                unknown_mig.join(", ")
            ));
        }
        let mut evidence: Vec<Evidence> = Vec::new();
        for (_, d) in &missing {
            match d.mig_list() {
                Some([]) => evidence.push(
                    Evidence::new(
                        format!("nvml.devices[{}].mig_devices", d.index),
                        "mig mode on, no mig device",
                    )
                    .expected("the gpu instances of the node's mig layout"),
                ),
                Some(_) => {} // its MIG devices are named below
                None => evidence.push(
                    Evidence::new(
                        from.as_str(),
                        format!("{} absent", d.uuid.as_deref().unwrap_or("?")),
                    )
                    .expected(format!(
                        "allocatable under {}",
                        if resources.is_empty() {
                            "nvidia.com/gpu"
                        } else {
                            resource_text.as_str()
                        }
                    )),
                ),
            }
        }
        for (i, _, m) in &absent_migs {
            evidence.push(
                Evidence::new(
                    from.as_str(),
                    format!(
                        "{} absent ({})",
                        m.uuid.as_deref().unwrap_or("?"),
                        mig_label(gpus[*i], m)
                    ),
                )
                .expected(format!("allocatable under {}", mig_resource(m))),
            );
        }
        for id in &unknown_mig {
            evidence.push(
                Evidence::new(from.as_str(), *id)
                    .expected("a mig device nvml enumerates (`nvidia-smi -L`)"),
            );
        }
        // The GPUs something is missing from, for their XIDs and holders.
        let mut affected: Vec<usize> = missing.iter().map(|(i, _)| *i).collect();
        affected.extend(absent_migs.iter().map(|(i, _, _)| *i));
        affected.sort_unstable();
        affected.dedup();
        // The XIDs that made the plugin mark it unhealthy (kubernetes.md §2).
        let mut saw_xid = false;
        if let Ok(Some((text, log))) = ctx.kernel_log() {
            let parsed = xid::parse_kernel_log(text);
            for d in affected.iter().map(|i| gpus[*i]) {
                let bus = d.pci_bus_id.as_deref();
                let mut seen: BTreeSet<u32> = BTreeSet::new();
                for event in parsed
                    .xids
                    .iter()
                    .rev()
                    .filter(|e| e.pci_bus_id.as_deref() == bus)
                {
                    if seen.insert(event.xid) {
                        saw_xid = true;
                        let ignored = PLUGIN_IGNORED_XIDS.contains(&event.xid);
                        evidence.push(
                            Evidence::new(
                                log.as_str(),
                                event.message.lines().next().unwrap_or_default(),
                            )
                            .expected(format!(
                                "{}: xid {} ({}){}",
                                label(d),
                                event.xid,
                                event.info().name,
                                if ignored {
                                    ", which the device plugin ignores"
                                } else {
                                    ", which makes the device plugin mark the gpu unhealthy"
                                }
                            )),
                        );
                    }
                }
            }
        }
        // Workloads still holding a GPU or MIG device that is now unhealthy.
        if let Some((held, held_from)) = holders(ctx) {
            for h in &held {
                let what = match resolve(&h.id, &gpus) {
                    Target::Gpu(i) if is_missing(i) => label(gpus[i]),
                    Target::Mig(g, m) => {
                        match absent_migs.iter().find(|(i, k, _)| (*i, *k) == (g, m)) {
                            Some((_, _, mig)) => mig_label(gpus[g], mig),
                            None => continue,
                        }
                    }
                    _ => continue,
                };
                evidence.push(Evidence::new(
                    held_from.as_str(),
                    format!("{} holds {} ({what})", h.who, h.id),
                ));
            }
        }
        let only_empty_mig = absent_migs.is_empty()
            && missing
                .iter()
                .all(|(_, d)| d.mig_list().is_some_and(<[MigDevice]>::is_empty));
        let (cause, hint, action) = if !unknown_mig.is_empty() && !absent_migs.is_empty() {
            (
                "the mig layout changed after the device plugin started: it still advertises the old mig devices",
                "restart the device plugin pod on this node so it advertises the current mig devices (`nvidia-smi -L` lists them); on gpu operator nodes read the mig-manager's log",
                Action::RestartComponent,
            )
        } else if only_empty_mig {
            (
                "mig mode is on but no gpu instance was created",
                "create the gpu and compute instances of the intended layout (`nvidia-smi mig -cgi <profiles> -C`, or the gpu operator's nvidia.com/mig.config node label), then restart the device plugin pod",
                Action::FixConfig,
            )
        } else {
            // Only MIG devices missing: a GPU reset would take every MIG device on it down.
            let hint = if missing.is_empty() {
                MIG_UNHEALTHY_HINT
            } else {
                GPU_UNHEALTHY_HINT
            };
            let cause = if saw_xid {
                "the device plugin marked it unhealthy after an xid (see driver.xid_events)"
            } else {
                "the device plugin marked it unhealthy or does not manage it"
            };
            (cause, hint, Action::RestartComponent)
        };
        return Outcome::fail(format!("{}; {cause}{fallback_note}", parts.join("; ")))
            .evidence_all(evidence)
            .hint(hint)
            .action(action);
    }
    let replicas: BTreeSet<usize> = per_gpu.values().copied().collect();
    let sharing = match (replicas.len(), replicas.iter().next()) {
        (1, Some(&n)) if n > 1 => format!(
            ", {n} replicas each ({} devices, time-slicing or mps)",
            ids.len()
        ),
        (0 | 1, _) => String::new(),
        _ => format!(", uneven replicas per gpu ({} devices)", ids.len()),
    };
    let mig_gpus: BTreeSet<usize> = per_mig.iter().map(|(g, _)| *g).collect();
    let mig_note = match (mig_ids, mig_gpus.len()) {
        (0, _) => String::new(),
        (n, 0) => format!(", {n} mig device(s)"),
        (n, g) => format!(", {n} mig device(s) on {g} gpu(s)"),
    };
    let summary = format!(
        "{} of {} gpus allocatable as {resource_text}{sharing}{mig_note}{fallback_note}",
        gpus.len(),
        gpus.len()
    );
    let evidence = Evidence::new(from.as_str(), format!("{} nvidia device id(s)", ids.len()))
        .expected(format!("the {} nvml gpu(s)", gpus.len()));
    let mut stale = Vec::new();
    let mut hints = Vec::new();
    // GPUs NVML counts but could not open (driver.gpu_count says why) have no uuid to match:
    // as many unknown ids as there are such GPUs may be theirs, so they are not called stale.
    let unopened = ctx
        .nvml()
        .devices
        .iter()
        .filter(|d| d.error.is_some())
        .count();
    let mut summary = summary;
    if !unknown.is_empty() && unknown.len() <= unopened {
        summary.push_str(&format!(
            "; {} id(s) not matched, as many as the gpus nvml could not open (see driver.gpu_count): {}",
            unknown.len(),
            unknown.join(", ")
        ));
        unknown.clear();
    }
    if !unknown.is_empty() {
        stale.push(format!(
            "{} allocatable id(s) unknown to nvml: {}",
            unknown.len(),
            unknown.join(", ")
        ));
        hints.push("the device plugin advertises gpus this node no longer has (a gpu replaced or fallen off the bus): restart the device plugin pod");
    }
    if !unknown_mig.is_empty() {
        stale.push(format!(
            "{} allocatable mig id(s) unknown to nvml: {}",
            unknown_mig.len(),
            unknown_mig.join(", ")
        ));
        hints.push("the device plugin advertises mig devices that no longer exist (the mig layout changed after it started): restart the device plugin pod; `nvidia-smi -L` lists the current ones");
    }
    if !stale.is_empty() {
        return Outcome::warn(format!("{summary}; {}", stale.join("; ")))
            .evidence(evidence)
            .evidence_all(unknown_mig.iter().map(|id| {
                Evidence::new(from.as_str(), *id)
                    .expected("a mig device nvml enumerates (`nvidia-smi -L`)")
            }))
            .hint(hints.join("; "))
            .action(Action::RestartComponent);
    }
    Outcome::pass(summary).evidence(evidence)
}

fn topology_text(t: &Option<TopologyInfo>) -> String {
    match t {
        None => "no topology".to_string(),
        Some(t) if t.nodes.is_empty() => "no numa node".to_string(),
        Some(t) => {
            let ids: Vec<String> = t.nodes.iter().map(|n| n.id.to_string()).collect();
            format!("numa {}", ids.join(","))
        }
    }
}

/// `unread`: GPUs whose `numa_node` is missing (not read, never "no topology").
fn numa_topology(ctx: &Context<'_>, unread: &mut Vec<crate::facts::FactError>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let Some(alloc) = ctx.pod_resources().allocatable_value() else {
        return Outcome::skip(
            "no GetAllocatableResources answer (see device_plugin.pod_resources)",
        );
    };
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Outcome::skip("nvml unavailable (see driver.nvml_init)");
    }
    let pci = match ctx.pci() {
        Ok(pci) => pci,
        Err(err) => return Outcome::unreadable(err),
    };
    let gpus: Vec<&NvmlDevice> = nvml.devices.iter().filter(|d| d.error.is_none()).collect();
    let mut checked: BTreeSet<usize> = BTreeSet::new();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut evidence = Vec::new();
    for entry in alloc
        .devices
        .iter()
        .filter(|d| is_nvidia_resource(&d.resource_name))
    {
        for id in &entry.device_ids {
            let Target::Gpu(i) = resolve(id, &gpus) else {
                continue;
            };
            let d = gpus[i];
            let Some(bus) = d.pci_bus_id.as_deref() else {
                continue;
            };
            let Some(function) = pci.functions.iter().find(|f| f.bdf == bus) else {
                continue;
            };
            let numa_file = format!("{}/{bus}/numa_node", crate::facts::pci::PCI_DEVICES);
            if let Some(missing) = pci.numa_missing.iter().find(|p| p.path == numa_file) {
                if !unread.contains(missing) {
                    unread.push(missing.clone());
                }
                continue;
            }
            let sysfs: Option<i64> = function.numa_node.map(i64::from);
            let plugin: Vec<i64> = entry
                .topology
                .as_ref()
                .map(|t| t.nodes.iter().map(|n| n.id).collect())
                .unwrap_or_default();
            let agrees = match sysfs {
                Some(n) => plugin == [n],
                None => plugin.is_empty(),
            };
            if !agrees {
                if checked.insert(i) {
                    let want = sysfs.map_or("no topology (numa_node -1)".to_string(), |n| {
                        format!("numa {n}")
                    });
                    wrong.push(format!(
                        "{} has {}, sysfs says {want}",
                        label(d),
                        topology_text(&entry.topology)
                    ));
                    evidence.push(
                        Evidence::new(
                            "pod-resources.allocatable",
                            format!("{id}: {}", topology_text(&entry.topology)),
                        )
                        .expected(format!("{want} (sys/bus/pci/devices/{bus}/numa_node)")),
                    );
                }
            } else if checked.insert(i) {
                *per_node.entry(topology_text(&entry.topology)).or_default() += 1;
            }
        }
    }
    if checked.is_empty() {
        return Outcome::skip("no allocatable gpu to compare");
    }
    if !wrong.is_empty() {
        return Outcome::warn(format!(
            "allocatable numa topology disagrees with sysfs: {}",
            wrong.join("; ")
        ))
        .evidence_all(evidence)
        .hint("restart the device plugin pod so it rereads numa_node; the topology manager aligns cpus and memory with this hint")
        .action(Action::RestartComponent);
    }
    let nodes: Vec<String> = per_node.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    Outcome::pass(format!(
        "allocatable numa topology matches sysfs for {} gpu(s) ({})",
        checked.len(),
        nodes.join(", ")
    ))
}

fn allocations(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let Some((held, from)) = holders(ctx) else {
        return Outcome::skip(
            "no List answer and no kubelet checkpoint (see device_plugin.pod_resources)",
        );
    };
    let nvml = ctx.nvml();
    let gpus: Vec<&NvmlDevice> = if nvml.init_error.is_none() {
        nvml.devices.iter().filter(|d| d.error.is_none()).collect()
    } else {
        Vec::new()
    };
    let name = |id: &str| match resolve(id, &gpus) {
        Target::Gpu(i) => format!("{id} ({})", label(gpus[i])),
        Target::Mig(g, m) => match mig_at(gpus[g], m) {
            Some(mig) => format!("{id} ({})", mig_label(gpus[g], mig)),
            None => id.to_string(),
        },
        _ => id.to_string(),
    };
    let mut by_id: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for h in &held {
        by_id.entry(h.id.as_str()).or_default().push(h.who.as_str());
    }
    let doubled: Vec<(&str, &Vec<&str>)> = by_id
        .iter()
        .filter(|(_, who)| who.len() > 1)
        .map(|(id, who)| (*id, who))
        .collect();
    let mut lines: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for h in &held {
        lines.entry(h.who.as_str()).or_default().push(name(&h.id));
    }
    let holder_evidence: Vec<Evidence> = lines
        .iter()
        .take(MAX_HOLDER_LINES)
        .map(|(who, ids)| Evidence::new(from.as_str(), format!("{who}: {}", ids.join(", "))))
        .collect();
    if !doubled.is_empty() {
        let text: Vec<String> = doubled
            .iter()
            .map(|(id, who)| {
                let shared = if parse_device_id(id).replica.is_some() {
                    "the same replica"
                } else {
                    "without a sharing mode"
                };
                format!(
                    "{} held by {} containers {shared}: {}",
                    name(id),
                    who.len(),
                    who.join(", ")
                )
            })
            .collect();
        return Outcome::fail(text.join("; "))
            .evidence_all(doubled.iter().map(|(id, who)| {
                Evidence::new(from.as_str(), format!("{id}: {}", who.join(", ")))
                    .expected("one container per device id")
            }))
            .evidence_all(holder_evidence)
            .hint("the kubelet's device accounting is corrupt: delete one of the pods, then `systemctl restart kubelet`; if it recurs drain the node and remove /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")
            .action(Action::RestartComponent);
    }
    let physical: BTreeSet<String> = held
        .iter()
        .map(|h| match resolve(&h.id, &gpus) {
            // MIG devices of one GPU are one physical GPU.
            Target::Gpu(i) | Target::Mig(i, _) => format!("gpu{i}"),
            _ => match parse_device_id(&h.id).device {
                DeviceRef::GpuUuid(u) | DeviceRef::MigUuid(u) | DeviceRef::Other(u) => u,
                DeviceRef::Index(i) => i.to_string(),
            },
        })
        .collect();
    if held.is_empty() {
        return Outcome::pass("no gpu held by any container");
    }
    let of = if gpus.is_empty() {
        String::new()
    } else {
        format!(" of {}", gpus.len())
    };
    Outcome::pass(format!(
        "{}{of} gpu(s) held by {} container(s), no device handed out twice",
        physical.len(),
        lines.len()
    ))
    .evidence_all(holder_evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::nvml::{CurrentPending, Reading};

    #[test]
    fn ids_resolve_to_gpus_by_uuid_index_and_replica() {
        let a = NvmlDevice {
            index: 0,
            uuid: Some("GPU-a".into()),
            ..Default::default()
        };
        let b = NvmlDevice {
            index: 1,
            uuid: Some("GPU-b".into()),
            ..Default::default()
        };
        let gpus = vec![&a, &b];
        assert_eq!(resolve("GPU-b::3", &gpus), Target::Gpu(1));
        assert_eq!(resolve("1", &gpus), Target::Gpu(1));
        assert_eq!(resolve("GPU-c", &gpus), Target::Unknown);
        // No GPU in MIG mode: a MIG id is unknown.
        assert_eq!(resolve("MIG-x", &gpus), Target::Unknown);
    }

    #[test]
    fn mig_ids_resolve_to_their_gpu_when_enumerated() {
        let on = Reading::Value(CurrentPending {
            current: true,
            pending: true,
        });
        let mig = |index: u32, uuid: &str| MigDevice {
            index,
            uuid: Some(uuid.into()),
            name: Some("NVIDIA H100 80GB HBM3 MIG 1g.10gb".into()),
            ..Default::default()
        };
        let a = NvmlDevice {
            index: 0,
            uuid: Some("GPU-a".into()),
            ..Default::default()
        };
        let b = NvmlDevice {
            index: 1,
            uuid: Some("GPU-b".into()),
            mig_mode: on.clone(),
            mig_devices: Reading::Value(vec![mig(0, "MIG-b0"), mig(2, "MIG-b2")]),
            ..Default::default()
        };
        let gpus = vec![&a, &b];
        assert_eq!(resolve("MIG-b2", &gpus), Target::Mig(1, 1));
        assert_eq!(resolve("MIG-b2::1", &gpus), Target::Mig(1, 1));
        assert_eq!(resolve("MIG-gone", &gpus), Target::Unknown);
        assert_eq!(
            mig_label(&b, mig_at(&b, 1).unwrap()),
            "gpu 1 (?) mig 2 (1g.10gb)"
        );
        // MIG on but not enumerated (an older capture): a MIG id cannot be placed, nor called
        // unknown.
        let c = NvmlDevice {
            index: 2,
            mig_mode: on,
            ..Default::default()
        };
        let gpus = vec![&a, &b, &c];
        assert_eq!(resolve("MIG-b0", &gpus), Target::Mig(1, 0));
        assert_eq!(resolve("MIG-gone", &gpus), Target::MigUnattributed);
    }
}
