//! topology.kubelet_managers: the kubelet's Topology, CPU and Memory Managers judged together.
//! Each is a setting on its own; only some combinations give a pod GPUs, CPUs and memory from
//! one NUMA node, and some stop the kubelet from starting at all. The rules are the kubelet's:
//!
//! - a topology policy other than `none` aligns only what a hint provider manages: with
//!   `cpuManagerPolicy: none` no CPU is pinned, so a pod's CPUs float over every socket whatever
//!   the policy says (Kubernetes docs, "Control Topology Management Policies on a node": the CPU
//!   Manager and Device Manager are the hint providers; "Control CPU Management Policies on the
//!   Node": only `static` gives exclusive CPUs);
//! - `cpuManagerPolicy: static` needs a CPU reservation greater than zero (`reservedSystemCPUs`,
//!   or `kubeReserved`/`systemReserved` cpu), or the kubelet exits at start ("Control CPU
//!   Management Policies on the Node", static policy);
//! - `memoryManagerPolicy: Static` needs `reservedMemory` whose total equals kubeReserved +
//!   systemReserved + the `memory.available` hard-eviction threshold (100Mi when `evictionHard`
//!   is not set), or the kubelet exits at start ("Utilizing the NUMA-aware Memory Manager",
//!   reserved memory flag).

use super::*;
use crate::facts::kubelet::{KubeletConfig, quantity};

/// The kubelet's default hard-eviction threshold for memory (kubelet config v1beta1 defaults).
const DEFAULT_EVICTION_MEMORY: &str = "100Mi";

/// A finding and how bad it is.
struct Finding {
    fail: bool,
    text: String,
}

fn mib(bytes: f64) -> String {
    let m = bytes / (1024.0 * 1024.0);
    if m.fract() == 0.0 {
        format!("{m:.0}Mi")
    } else {
        format!("{m:.1}Mi")
    }
}

/// The CPU reservation `static` needs: the explicit list, else kube + system reserved cpu.
fn cpu_reservation(c: &KubeletConfig) -> Result<String, String> {
    if let Some(list) = c.reserved_system_cpus.as_deref().filter(|l| !l.is_empty()) {
        return Ok(format!("reservedSystemCPUs {list}"));
    }
    let cores: f64 = [&c.kube_reserved, &c.system_reserved]
        .iter()
        .filter_map(|m| m.get("cpu"))
        .filter_map(|q| quantity(q))
        .sum();
    if cores > 0.0 {
        Ok(format!("kubeReserved + systemReserved cpu {cores}"))
    } else {
        Err("no reservedSystemCPUs and no kubeReserved/systemReserved cpu".to_string())
    }
}

/// Whether `reservedMemory` adds up to what Node Allocatable reserves; `Err` says why not, `Ok`
/// the matching figure (or why it could not be computed: then it is not judged).
fn memory_reservation(c: &KubeletConfig) -> Result<String, String> {
    if c.reserved_memory.is_empty() {
        return Err("no reservedMemory".to_string());
    }
    let mut reserved = 0.0;
    for entry in &c.reserved_memory {
        match entry.memory.as_deref().and_then(quantity) {
            Some(bytes) => reserved += bytes,
            None => {
                return Err(format!(
                    "reservedMemory for numa node {} has no readable limits.memory ({:?})",
                    entry
                        .numa_node
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "?".into()),
                    entry.memory.as_deref().unwrap_or("absent")
                ));
            }
        }
    }
    let eviction = match &c.eviction_hard {
        None => Some(DEFAULT_EVICTION_MEMORY.to_string()),
        Some(map) => map.get("memory.available").cloned(),
    };
    let parts = [
        c.kube_reserved.get("memory").cloned(),
        c.system_reserved.get("memory").cloned(),
        eviction.clone(),
    ];
    let mut want = 0.0;
    for part in parts.iter().flatten() {
        match quantity(part) {
            Some(bytes) => want += bytes,
            // A percentage threshold depends on the node's memory: not judged here.
            None => {
                return Ok(format!(
                    "reservedMemory {} (not compared: {part:?} is not an absolute quantity)",
                    mib(reserved)
                ));
            }
        }
    }
    let formula = format!(
        "kubeReserved {} + systemReserved {} + evictionHard memory.available {}",
        parts[0].as_deref().unwrap_or("0"),
        parts[1].as_deref().unwrap_or("0"),
        eviction.as_deref().unwrap_or("0")
    );
    if (reserved - want).abs() < 1.0 {
        Ok(format!("reservedMemory {} = {formula}", mib(reserved)))
    } else {
        Err(format!(
            "reservedMemory {} where {formula} = {}",
            mib(reserved),
            mib(want)
        ))
    }
}

pub(super) fn kubelet_managers(ctx: &Context<'_>) -> Outcome {
    let (config, path) = match ctx.kubelet_config() {
        Ok(Some((c, p))) => (c, p.as_str()),
        Ok(None) => {
            return Outcome::skip(
                "no kubelet config (var/lib/kubelet/config.yaml or another installer's path): not a kubelet node, or the kubelet's --config names another file",
            );
        }
        Err(err) => return Outcome::unreadable(err),
    };
    // The managers are judged for what they do to GPU Pods' placement (this layer's question):
    // without a GPU on PCI, as `topology.kubelet_topology_manager`, nothing to judge.
    if let Ok(t) = ctx.topology()
        && t.gpus().next().is_none()
    {
        return Outcome::skip("no gpu on pci");
    }
    let topology = config.topology_manager_policy.as_deref().unwrap_or("none");
    let cpu = config.cpu_manager_policy.as_deref().unwrap_or("none");
    let memory = config.memory_manager_policy.as_deref().unwrap_or("None");
    let mut findings = Vec::new();
    let mut evidence = vec![
        Evidence::new(config.source_of("topologyManagerPolicy", path), topology),
        Evidence::new(config.source_of("cpuManagerPolicy", path), cpu),
        Evidence::new(config.source_of("memoryManagerPolicy", path), memory),
    ];
    let mut notes = Vec::new();
    if cpu.eq_ignore_ascii_case("static") {
        match cpu_reservation(config) {
            Ok(text) => notes.push(text),
            Err(why) => {
                findings.push(Finding {
                    fail: true,
                    text: format!(
                        "cpu manager static without a cpu reservation ({why}): the kubelet refuses to start with this config"
                    ),
                });
                evidence.push(
                    Evidence::new(config.source_of("reservedSystemCPUs", path), "not set")
                        .expected("a cpu list, or kubeReserved/systemReserved cpu > 0"),
                );
            }
        }
    } else if !topology.eq_ignore_ascii_case("none") {
        findings.push(Finding {
            fail: false,
            text: format!(
                "topology manager {topology} with cpu manager {cpu}: no cpu is pinned, so pods get their gpus from one numa node and their cpus from every socket"
            ),
        });
    }
    if memory.eq_ignore_ascii_case("static") {
        match memory_reservation(config) {
            Ok(text) => notes.push(text),
            Err(why) => {
                evidence.push(
                    Evidence::new(config.source_of("reservedMemory", path), why.clone()).expected(
                        "per numa node, summing to kubeReserved + systemReserved + evictionHard memory.available",
                    ),
                );
                findings.push(Finding {
                    fail: true,
                    text: format!(
                        "memory manager Static with {why}: the kubelet refuses to start with this config"
                    ),
                });
            }
        }
    }
    let combination =
        format!("topology manager {topology}, cpu manager {cpu}, memory manager {memory}");
    if findings.is_empty() {
        let noted = if notes.is_empty() {
            String::new()
        } else {
            format!("; {}", notes.join("; "))
        };
        return Outcome::pass(format!("{combination}: consistent{noted}")).evidence_all(evidence);
    }
    let text = findings
        .iter()
        .map(|f| f.text.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let outcome = if findings.iter().any(|f| f.fail) {
        Outcome::fail(text)
    } else {
        Outcome::warn(text)
    };
    let edit = config.where_to_edit(
        &[
            "cpuManagerPolicy",
            "reservedSystemCPUs",
            "memoryManagerPolicy",
            "reservedMemory",
        ],
        path,
    );
    outcome
        .evidence_all(evidence)
        .hint(format!(
            "in {edit}: set `cpuManagerPolicy: static` with a cpu reservation (`reservedSystemCPUs`, e.g. the first core and its sibling on each socket), and `memoryManagerPolicy: Static` a `reservedMemory` list whose total equals kubeReserved + systemReserved + evictionHard memory.available (100Mi by default); then, on a drained node, stop the kubelet, remove /var/lib/kubelet/cpu_manager_state and memory_manager_state, and start it (Kubernetes docs: Control CPU Management Policies on the Node; Utilizing the NUMA-aware Memory Manager)"
        ))
        .action(Action::FixConfig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::kubelet::parse_kubelet_config;

    fn config(text: &str) -> KubeletConfig {
        parse_kubelet_config(text).unwrap()
    }

    #[test]
    fn a_static_cpu_manager_needs_a_reservation() {
        assert!(cpu_reservation(&config("cpuManagerPolicy: static\n")).is_err());
        assert!(
            cpu_reservation(&config(
                "cpuManagerPolicy: static\nkubeReserved:\n  cpu: \"0\"\n"
            ))
            .is_err()
        );
        assert_eq!(
            cpu_reservation(&config(
                "cpuManagerPolicy: static\nkubeReserved:\n  cpu: 500m\nsystemReserved:\n  cpu: 1\n"
            )),
            Ok("kubeReserved + systemReserved cpu 1.5".to_string())
        );
        assert_eq!(
            cpu_reservation(&config("reservedSystemCPUs: 0,1\n")),
            Ok("reservedSystemCPUs 0,1".to_string())
        );
    }

    /// The kubelet's sum: the Kubernetes docs' example (kube 4Gi + system 1Gi + 100Mi eviction
    /// = 3Gi + 2148Mi) and the OpenShift low-latency example (512Mi + 512Mi + 100Mi = 1124Mi).
    #[test]
    fn reserved_memory_must_add_up() {
        let docs = "memoryManagerPolicy: Static\nkubeReserved:\n  memory: 4Gi\nsystemReserved:\n  memory: 1Gi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 3Gi\n- numaNode: 1\n  limits:\n    memory: 2148Mi\n";
        assert!(memory_reservation(&config(docs)).is_ok());
        let openshift = "memoryManagerPolicy: Static\nevictionHard:\n  memory.available: \"100Mi\"\nkubeReserved:\n  memory: \"512Mi\"\nsystemReserved:\n  memory: \"512Mi\"\nreservedMemory:\n  - numaNode: 0\n    limits:\n      memory: \"1124Mi\"\n";
        assert!(memory_reservation(&config(openshift)).is_ok());
        // 1Gi + the default 100Mi is 1124Mi, not 1100Mi.
        let short = "memoryManagerPolicy: Static\nsystemReserved:\n  memory: 1Gi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1100Mi\n";
        assert_eq!(
            memory_reservation(&config(short)),
            Err("reservedMemory 1100Mi where kubeReserved 0 + systemReserved 1Gi + evictionHard memory.available 100Mi = 1124Mi".to_string())
        );
        assert_eq!(
            memory_reservation(&config("memoryManagerPolicy: Static\n")),
            Err("no reservedMemory".to_string())
        );
        // evictionHard set without memory.available: no memory threshold at all.
        let no_threshold = "evictionHard:\n  nodefs.available: 10%\nsystemReserved:\n  memory: 1Gi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\n";
        assert!(memory_reservation(&config(no_threshold)).is_ok());
        // A percentage threshold cannot be summed without the node's memory: not judged.
        let percent = "evictionHard:\n  memory.available: 5%\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\n";
        assert!(
            memory_reservation(&config(percent))
                .unwrap()
                .contains("not compared")
        );
    }
}
