//! topology.kubelet_topology_manager: does the kubelet align GPUs with CPUs and memory when
//! the GPUs span NUMA nodes? Reads the kubelet config (`facts/kubelet.rs`) and the GPUs' NUMA
//! nodes; the hint names the policy that still admits this node's largest GPU request.

use super::*;

/// What to set when GPUs span NUMA nodes and nothing aligns them, for this node: the policy
/// that still admits the largest GPU request it can serve, and the kubelet's prerequisites for
/// the CPU and memory managers that make alignment mean anything (Kubernetes docs: "Control
/// Topology Management Policies on a node", "Control CPU Management Policies on the Node" —
/// static needs a CPU reservation, `reservedSystemCPUs` or kube/system-reserved cpu — and
/// "Utilizing the NUMA-aware Memory Manager" — Static needs `reservedMemory`, per NUMA node,
/// summing to kube-reserved + system-reserved + the hard eviction threshold, or the kubelet
/// does not start).
fn topology_policy_hint(path: &str, most_on_one: usize, total: usize) -> String {
    format!(
        "set `topologyManagerPolicy: restricted` in {path}: it aligns gpus, cpus and memory on one numa node when the request fits one and still admits requests that need both (up to all {total} gpus; `best-effort` never rejects); `single-numa-node` would reject every pod asking for more than {most_on_one} gpus (TopologyAffinityError), so use it only if no pod here needs more. Alignment needs `cpuManagerPolicy: static`, which requires a cpu reservation (`reservedSystemCPUs`, e.g. the first core of each socket, or kubeReserved/systemReserved cpu), and `memoryManagerPolicy: Static`, which requires `reservedMemory` per numa node summing to kubeReserved + systemReserved + evictionHard memory; without them the kubelet does not start. Apply on a drained node: stop the kubelet, remove /var/lib/kubelet/cpu_manager_state and memory_manager_state, start it"
    )
}

pub(super) fn kubelet_topology_manager(ctx: &Context<'_>) -> Outcome {
    let (config, path) = match ctx.kubelet_config() {
        Ok(Some((c, p))) => (c, p.as_str()),
        Ok(None) => {
            return Outcome::skip(
                "no kubelet config (var/lib/kubelet/config.yaml or another installer's path): not a kubelet node, or the kubelet's --config names another file",
            );
        }
        Err(err) => return Outcome::unreadable(err),
    };
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let shown = |v: &Option<String>, default: &str| match v {
        Some(v) => v.clone(),
        None => format!("{default} (default, not set)"),
    };
    let policy = config.topology_manager_policy.as_deref().unwrap_or("none");
    let evidence = vec![
        Evidence::new(
            config.source_of("topologyManagerPolicy", path),
            shown(&config.topology_manager_policy, "none"),
        )
        .expected("single-numa-node, restricted or best-effort when gpus span numa nodes"),
        Evidence::new(
            config.source_of("topologyManagerScope", path),
            shown(&config.topology_manager_scope, "container"),
        ),
        Evidence::new(
            config.source_of("cpuManagerPolicy", path),
            shown(&config.cpu_manager_policy, "none"),
        ),
        Evidence::new(
            config.source_of("memoryManagerPolicy", path),
            shown(&config.memory_manager_policy, "None"),
        ),
    ];
    let gpus: Vec<&PciDevice> = t.gpus().collect();
    if gpus.is_empty() {
        return Outcome::skip("no gpu on pci").evidence_all(evidence);
    }
    let nodes: BTreeSet<u32> = gpus.iter().filter_map(|g| g.numa).collect();
    let unknown = gpus.iter().filter(|g| g.numa.is_none()).count();
    let managers = format!(
        "cpu manager {}, memory manager {}",
        config.cpu_manager_policy.as_deref().unwrap_or("none"),
        config.memory_manager_policy.as_deref().unwrap_or("None")
    );
    let node_list = nodes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // The largest GPU request one NUMA node can serve: single-numa-node admits a pod only if
    // its GPUs fit one node, so a full-node request on a multi-socket node never fits
    // (Kubernetes "Control Topology Management Policies on a node": single-numa-node).
    let most_on_one = nodes
        .iter()
        .map(|n| gpus.iter().filter(|g| g.numa == Some(*n)).count())
        .max()
        .unwrap_or(0);
    let total = gpus.len();
    if nodes.len() > 1 && policy.eq_ignore_ascii_case("none") {
        return Outcome::warn(format!(
            "gpus on numa nodes {node_list} but topology manager policy is {policy}: pods can get gpus from one socket and cpus and memory from the other ({managers})"
        ))
        .evidence_all(evidence)
        .hint(topology_policy_hint(config.file_of("topologyManagerPolicy", path), most_on_one, total))
        .action(Action::FixConfig);
    }
    let placement = if nodes.len() > 1 && policy.eq_ignore_ascii_case("single-numa-node") {
        format!(
            "gpus on numa nodes {node_list}, at most {most_on_one} on one: single-numa-node rejects pods asking for more than {most_on_one} of the {total} gpus (TopologyAffinityError); `restricted` admits them"
        )
    } else if nodes.len() > 1 {
        format!("gpus on numa nodes {node_list}")
    } else if unknown > 0 {
        format!(
            "numa node of {unknown} gpu(s) unknown (see topology.numa_affinity): the topology manager has no hint for them"
        )
    } else {
        format!("gpus all on numa node {node_list}: no cross-node alignment needed")
    };
    Outcome::pass(format!(
        "topology manager {policy} ({managers}); {placement}"
    ))
    .evidence_all(evidence)
}
