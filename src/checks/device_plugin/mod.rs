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
use crate::answers::nvml::{MigDevice, NvmlDevice};
use crate::answers::pod_resources::{PodResourcesFacts, RpcError, RpcErrorKind, TopologyInfo};
use crate::facts::k8s::is_nvidia_resource;
use crate::facts::k8s::{
    CHECKPOINT, DEVICE_PLUGIN_DIR, DeviceRef, KUBELET_DIR, KUBELET_REGISTRATION_SOCKET,
    parse_device_id,
};
use crate::facts::xid;
use crate::report::{Action, Evidence, Layer};

// The allocatable check, long and with its own hints, lives apart; the id matching every check
// shares stays here.
mod allocatable;
use allocatable::allocatable;

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
                reads: "/var/lib/kubelet, the kubelet config: the running kubelet's --config/--config-dir (/proc/<pid>/cmdline of the process named kubelet), else the installers' paths (kubeadm, EKS nodeadm, GKE, OpenShift MCO, k3s/RKE2 drop-ins); the summary says which was used",
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
                reads: "/var/lib/kubelet/device-plugins/ (nvidia-*.sock, GKE's nvidiaGPU-*.sock, kubelet.sock), /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint (RegisteredDevices)",
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
        Some((config, found_by)) => Outcome::pass(format!(
            "kubelet present (config {config}, found by {found_by})"
        ))
        .evidence(Evidence::new(
            config.as_str(),
            format!("present, found by {found_by}"),
        )),
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
        // GKE names a GPU by its /dev/nvidia<minor>: NVML's minor number is the same one
        // (nvmlDeviceGetMinorNumber, "the /dev/nvidia<minor> device node").
        DeviceRef::DevNode(minor) => gpus
            .iter()
            .position(|d| d.minor_number.value() == Some(&minor))
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
fn numa_topology(ctx: &Context<'_>, unread: &mut Vec<crate::answers::FactError>) -> Outcome {
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
                DeviceRef::DevNode(n) => format!("nvidia{n}"),
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
mod tests;
