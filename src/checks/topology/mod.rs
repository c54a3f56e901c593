//! Topology layer: is the data path local (NUMA / PCIe)? A GPU can be healthy and still crawl
//! when its link trained narrow, its RDMA NIC sits on the other socket, the firmware gives no
//! NUMA locality, ACS forces peer-to-peer traffic up to the root complex, the IOMMU translates
//! every DMA, or the kubelet's Topology Manager is left at `none`.
//!
//! Facts come from `facts/topology.rs` (sysfs only, so the layer works without the driver),
//! `facts/pcicfg.rs` (ACS), `facts/iommu.rs` and `facts/kubelet.rs`; this module only judges.
//! Sources: reference/topology.md §3 (classes), §5 (GPU↔NIC and GPUDirect RDMA), §6 (ACS,
//! IOMMU), §8 (the checks this layer can derive); sysfs.md §3 (link speed), §5 (AER), §7
//! (NUMA); kubernetes.md §4 (kubelet keys).

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::FactError;
use crate::facts::iommu;
use crate::facts::pci::{LinkSpeed, PCI_DEVICES, describe_link, link_gb_per_s};
use crate::facts::pcicfg::{ACS_CR, ACS_EC, ACS_RR, ACS_SV, AcsReading, acs_flags};
use crate::facts::topology::{self, DeviceKind, Link, NumaSource, PciDevice, Topology};
use crate::report::{Action, Evidence, Layer};

// One file per check that stands on its own facts; the link, NUMA and GPU↔NIC checks share the
// tree helpers below and stay here.
mod acs;
mod aer;
mod iommu_mode;
mod kubelet_managers;
pub mod smi_matrix;
mod topology_manager;
use acs::acs;
use iommu_mode::iommu_mode;
use topology_manager::kubelet_topology_manager;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "topology.pcie_link",
            layer: Layer::Topology,
            title: "GPU and NIC PCIe links (and the switch links above them) at full width",
            explain: Explain {
                reads: "/sys/bus/pci/devices/*/{current,max}_link_{speed,width} of the GPUs, NICs and every root/switch port above them; the profile's GPU PCIe generation and width",
                expects: "current width = the link's max width (the smaller of the device's and its upstream port's max, as NCCL computes it) and ≥ the profile's; current speed = max speed for NICs and switch ports (GPUs lower their speed when idle, so that is only noted)",
                why: "a link that trained at x8 halves host↔GPU and GPUDirect RDMA bandwidth while every Kubernetes object says Running; a NIC or switch port below its speed caps the whole subtree",
                fix: "reseat the card, riser or cable of the named link and check the slot's BIOS settings; confirm with `lspci -vv -s <bdf> | grep -E 'LnkCap|LnkSta'` (both ends show the downgrade)",
            },
            run: |ctx| pcie_link(ctx).with_unread(unread(ctx, LINK_FILES)),
        },
        CheckDef {
            code: "topology.aer_errors",
            layer: Layer::Topology,
            title: "no live uncorrectable PCIe (AER) errors on GPUs, NICs and the ports above them",
            explain: Explain {
                reads: "/sys/bus/pci/devices/*/aer_dev_{fatal,nonfatal,correctable} (old long-name and new short-name layouts) and aer_rootport_total_err_* of the GPUs, NICs and the ports above them; the kernel log's AER reports (`AER: ... error received`, `PCIe Bus Error: severity=..., type=...`, the error-bit lines such as `[ 5] SDES`, `AER: can't recover`, `AER: device recovery successful`), each attributed to the device that printed it and to the GPUs and NICs below a port that printed it; with --sample a first reading of the counters; /proc/uptime",
                expects: "no uncorrected fatal AER error on a GPU, a NIC or a port above them (fail while live), no uncorrected non-fatal one (warn), corrected errors at most 8 per minute (DCGM's replay limit; below that counted, not judged). Live: a kernel-log report with no later boot, re-enumeration of the device or `device recovery successful` from its port (a failed recovery stays live); sysfs fatal totals without --sample (they only reset at reboot); counters rising during a --sample window. History: reports followed by recovery, counters that did not move during the window (warn with their totals)",
                why: "uncorrectable PCIe errors reset links, drop the GPU or NIC off the bus (XID 79) and corrupt DMA; a Surprise Down on the port above a GPU is the GPU's link going away, often with no XID at all when the driver never saw it; the counters and reports show a marginal link before the job dies (PCIe AER, Documentation/PCI/pcieaer-howto.rst)",
                fix: "read `dmesg | grep -i aer` for the device and error type; drain and reboot after a fatal error; reseat or replace the card, riser or cable of the link named (either end may count the errors); counters only reset at reboot, so `gpudoctor check --sample 60` tells whether they still rise",
            },
            run: |ctx| {
                aer::aer_errors(ctx)
                    .with_unread(unread(ctx, AER_FILES))
                    .noting_unread(&ctx.boot().problems)
            },
        },
        CheckDef {
            code: "topology.numa_affinity",
            layer: Layer::Topology,
            title: "GPUs and NICs report their NUMA node",
            explain: Explain {
                reads: "/sys/bus/pci/devices/*/{numa_node,local_cpulist,local_cpus} of GPUs and NICs; /sys/devices/system/node/node*/cpulist",
                expects: "on a machine with several NUMA nodes, numa_node ≥ 0 on every GPU and NIC, and local_cpulist inside that node",
                why: "numa_node -1 means the firmware gave no PCIe locality (ACPI _PXM): the device plugin then reports no topology, the kubelet's Topology Manager cannot align GPUs with CPUs and memory, and NCCL guesses",
                fix: "update the BIOS or enable its NUMA / ACPI SRAT option (and on AMD, the NPS / 'ACPI SRAT L3 cache as NUMA' setting the platform guide asks for); in a VM, give the guest a virtual NUMA topology with device affinity",
            },
            run: |ctx| numa_affinity(ctx).with_unread(unread_numa(ctx)),
        },
        CheckDef {
            code: "topology.gpu_nic_locality",
            layer: Layer::Topology,
            title: "each GPU has an RDMA NIC close by (PIX/PXB)",
            explain: Explain {
                reads: "the PCI tree under /sys/devices/pci*, /sys/class/infiniband, NUMA nodes; the profile's gpudirect_rdma",
                expects: "when the node has RDMA NICs, every GPU reaches one at PIX or PXB (behind the same PCIe switch); PHB/NODE warn on GPUDirect RDMA platforms; SYS fails there and warns elsewhere",
                why: "NCCL uses GPUDirect RDMA only up to PXB by default (NCCL_NET_GDR_LEVEL): further away, inter-node traffic bounces through host memory at roughly half the bandwidth, and across the CPU interconnect it also competes with everything else on the socket link",
                fix: "put a compute NIC under each GPU's PCIe switch (check the server's slot map: NICs moved to other risers or sockets), or re-cable; `gpudoctor topo` shows the matrix",
            },
            run: |ctx| {
                gpu_nic_locality(ctx)
                    .held_back_by(unread_identity(ctx))
                    .with_unread(unread_numa(ctx))
            },
        },
        CheckDef {
            code: "topology.acs",
            layer: Layer::Topology,
            title: "ACS does not redirect peer-to-peer traffic on the PCIe switches",
            explain: Explain {
                reads: "/sys/bus/pci/devices/*/config (ACS extended capability, control register at cap+6) of the PCIe switch ports above GPUs and RDMA NICs; /proc/cpuinfo (hypervisor flag)",
                expects: "on bare metal, SrcValid, ReqRedir, CmpltRedir and EgressCtrl off on those ports; a config file shorter than 4096 bytes (not root) is reported, not guessed",
                why: "with ACS redirect on, GPU↔GPU and GPU↔NIC traffic goes up to the root complex instead of across the switch: GPUDirect P2P and RDMA slow down sharply or hang (NCCL troubleshooting guide)",
                fix: "disable ACS in the BIOS, boot with `pci=disable_acs_redir=<bdf>[;<bdf>...]`, or until the next reboot `setpci -s <bdf> ECAP_ACS+0x6.w=0000`; check with `sudo lspci -vvv | grep ACSCtl`",
            },
            run: |ctx| {
                let mut unread_inputs = Vec::new();
                acs(ctx, &mut unread_inputs).with_unread(&unread_inputs)
            },
        },
        CheckDef {
            code: "topology.iommu",
            layer: Layer::Topology,
            title: "the IOMMU does not translate GPU DMA on a GPUDirect platform",
            explain: Explain {
                reads: "/sys/class/iommu, the GPUs' and NICs' iommu_group links and /sys/kernel/iommu_groups/*/type, /proc/cmdline (intel_iommu, amd_iommu, iommu=pt); the profile's gpudirect_rdma",
                expects: "no active IOMMU, or pass-through (group type identity, `iommu=pt`) on GPUDirect RDMA platforms",
                why: "a translating IOMMU (group type DMA / DMA-FQ) puts every GPUDirect and peer-to-peer transfer through address translation and can redirect it via the root complex: large slowdowns or hangs (NCCL troubleshooting guide)",
                fix: "add `iommu=pt` to the kernel command line (keep `intel_iommu=on` / `amd_iommu=on` if VFIO needs the IOMMU), update the bootloader and reboot",
            },
            run: iommu_mode,
        },
        CheckDef {
            code: "topology.kubelet_topology_manager",
            layer: Layer::Topology,
            title: "the kubelet aligns GPUs with CPUs and memory on multi-socket nodes",
            explain: Explain {
                reads: "the kubelet config: the running kubelet's --config, --config-dir drop-ins and manager flags (/proc/<pid>/cmdline), else kubeadm's /var/lib/kubelet/config.yaml, EKS nodeadm's /etc/kubernetes/kubelet/config.json (+ config.json.d), GKE's /home/kubernetes/kubelet-config.yaml, OpenShift's /etc/kubernetes/kubelet.conf, k3s/RKE2 kubelet.conf.d drop-ins: topologyManagerPolicy, topologyManagerScope, cpuManagerPolicy, memoryManagerPolicy; the GPUs' NUMA nodes",
                expects: "when the GPUs sit on more than one NUMA node, topologyManagerPolicy restricted, best-effort or single-numa-node (cpu and memory manager policies are reported; with single-numa-node the summary says the largest GPU request the node still admits)",
                why: "with policy none the kubelet hands a pod GPUs from one socket and CPUs and memory from the other: every host↔GPU copy crosses the CPU interconnect",
                fix: "set `topologyManagerPolicy: restricted` (aligns on one NUMA node when the request fits one, admits requests that need several) or `best-effort` (never rejects); `single-numa-node` rejects every pod asking for more GPUs than one NUMA node holds (on a two-socket 8-GPU node: more than 4, so every full-node job), so use it only on nodes whose pods never need more. Alignment needs `cpuManagerPolicy: static`, which requires a CPU reservation (`reservedSystemCPUs`, or kubeReserved/systemReserved cpu), and `memoryManagerPolicy: Static`, which requires `reservedMemory` per NUMA node summing to kubeReserved + systemReserved + evictionHard memory: without them the kubelet does not start (Kubernetes docs: Control Topology Management Policies on a node; Control CPU Management Policies on the Node; Utilizing the NUMA-aware Memory Manager). Apply on a drained node: stop the kubelet, remove /var/lib/kubelet/cpu_manager_state and memory_manager_state, start it",
            },
            run: kubelet_topology_manager,
        },
        CheckDef {
            code: "topology.kubelet_managers",
            layer: Layer::Topology,
            title: "the kubelet's topology, CPU and memory managers work together",
            explain: Explain {
                reads: "the kubelet config (found as for topology.kubelet_topology_manager; skip without a GPU on PCI): topologyManagerPolicy, cpuManagerPolicy, reservedSystemCPUs, kubeReserved, systemReserved, memoryManagerPolicy, reservedMemory, evictionHard",
                expects: "a topology policy other than none comes with cpuManagerPolicy static (warn otherwise: cpus are not aligned); static has a cpu reservation > 0 (fail otherwise); memoryManagerPolicy Static has reservedMemory totalling kubeReserved + systemReserved + evictionHard memory.available, 100Mi by default (fail otherwise)",
                why: "the topology manager aligns only what a hint provider pins: without the static cpu manager a pod's cpus float over every socket; and a static manager without its reservation stops the kubelet from starting, so the next kubelet restart takes the node out",
                fix: "give the static cpu manager `reservedSystemCPUs` (or kube/system-reserved cpu) and the Static memory manager a `reservedMemory` list that sums to kubeReserved + systemReserved + evictionHard memory.available; apply on a drained node and remove /var/lib/kubelet/cpu_manager_state and memory_manager_state before starting the kubelet",
            },
            run: kubelet_managers::kubelet_managers,
        },
    ]
}

/// Device attributes that concern one check only; a problem with any other file (a device
/// that could not be resolved or identified) concerns every check that walks the devices.
const LINK_FILES: &[&str] = &[
    "current_link_speed",
    "max_link_speed",
    "current_link_width",
    "max_link_width",
];
const AER_FILES: &[&str] = &[
    "aer_dev_correctable",
    "aer_dev_fatal",
    "aer_dev_nonfatal",
    "aer_rootport_total_err_cor",
    "aer_rootport_total_err_fatal",
    "aer_rootport_total_err_nonfatal",
];
const NUMA_FILES: &[&str] = &["numa_node", "local_cpulist", "local_cpus"];

/// The topology facts' read problems a check depends on: those about one of `files`, and those
/// about no check's own attribute.
fn unread<'c>(ctx: &'c Context<'_>, files: &[&str]) -> Vec<&'c FactError> {
    let Ok(t) = ctx.topology() else {
        return Vec::new();
    };
    t.problems
        .iter()
        // RDMA class entries (a dangling link, a software device outside the PCI tree) are the
        // rdma layer's, which reads the same directory.
        .filter(|p| !p.path.starts_with("sys/class/infiniband/"))
        .filter(|p| {
            let file = p.path.rsplit('/').next().unwrap_or_default();
            let own = [LINK_FILES, AER_FILES, NUMA_FILES]
                .iter()
                .any(|set| set.contains(&file));
            files.contains(&file) || !own
        })
        .collect()
}

/// [`unread`] for the NUMA checks: the devices' NUMA files and the NUMA nodes' own.
fn unread_numa<'c>(ctx: &'c Context<'_>) -> Vec<&'c FactError> {
    let mut problems = unread(ctx, NUMA_FILES);
    if let Ok(t) = ctx.topology() {
        problems.extend(&t.numa.problems);
    }
    problems
}

/// Functions whose `class`, `vendor` or `device` is missing: any of them may be the GPU or NIC
/// a placement verdict is about, so such a verdict is held back (`Outcome::held_back_by`).
fn unread_identity<'c>(ctx: &'c Context<'_>) -> Vec<&'c FactError> {
    let Ok(t) = ctx.topology() else {
        return Vec::new();
    };
    t.problems
        .iter()
        .filter(|p| p.is_missing())
        .filter(|p| {
            let file = p.path.rsplit('/').next().unwrap_or_default();
            matches!(file, "class" | "vendor" | "device")
        })
        .collect()
}

pub(super) fn topo<'c>(ctx: &'c Context<'_>) -> Result<&'c Topology, Outcome> {
    ctx.topology().as_ref().map_err(Outcome::unreadable)
}

pub(super) fn attr_path(d: &PciDevice, attr: &str) -> String {
    format!("{PCI_DEVICES}/{}/{attr}", d.bdf)
}

/// `gpu 0000:18:00.0`, `rdma nic 0000:19:00.0 (mlx5_0)`.
pub(super) fn label(d: &PciDevice) -> String {
    match d.kind {
        DeviceKind::RdmaNic | DeviceKind::Nic
            if !d.rdma_devices.is_empty() || !d.netdevs.is_empty() =>
        {
            format!("{} ({})", d.label(), d.nic_name())
        }
        _ => d.label(),
    }
}

/// GPUs and NICs, then every captured bridge above them, each once, in tree order.
pub(super) fn in_scope(t: &Topology) -> Vec<&PciDevice> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let ends: Vec<&PciDevice> = t
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu || d.kind.is_nic())
        .collect();
    for d in &ends {
        for a in t.ancestors(d).into_iter().rev().chain(std::iter::once(*d)) {
            if seen.insert(a.bdf.clone()) {
                out.push(a);
            }
        }
    }
    out.sort_by(|a, b| (a.address, &a.bdf).cmp(&(b.address, &b.bdf)));
    out
}

fn min_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn pcie_link(ctx: &Context<'_>) -> Outcome {
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let profile = ctx.profile();
    let scope = in_scope(t);
    struct Finding<'a> {
        device: &'a PciDevice,
        text: String,
        evidence: Vec<Evidence>,
    }
    let mut width_fails: Vec<Finding> = Vec::new();
    let mut speed_warns: Vec<Finding> = Vec::new();
    let mut profile_fails: Vec<Finding> = Vec::new();
    let mut gpu_idle_notes: Vec<String> = Vec::new();
    let mut judged = 0usize;
    for d in &scope {
        let link = d.link;
        if link.is_empty() {
            continue;
        }
        judged += 1;
        // An endpoint's link is shared with the port above it: the usable maximum is the smaller
        // of the two (NCCL `src/graph/xml.cc`; sysfs.md §3). A bridge's own files describe the
        // link it trains, so its own max is the reference.
        let parent = t.parent(d).filter(|_| !d.kind.is_bridge());
        let cap_width = min_opt(link.max_width, parent.and_then(|p| p.link.max_width));
        let cap_speed = min_opt(link.max_speed, parent.and_then(|p| p.link.max_speed));
        if let (Some(cur), Some(cap)) = (link.current_width, cap_width)
            && cur < cap
        {
            let speed = link.current_speed.or(cap_speed);
            width_fails.push(Finding {
                device: d,
                text: format!(
                    "{} pcie link x{cur} of x{cap}{}",
                    label(d),
                    speed
                        .map(|s| format!(
                            " ({:.2} of {:.2} GB/s)",
                            link_gb_per_s(s, cur),
                            link_gb_per_s(s, cap)
                        ))
                        .unwrap_or_default()
                ),
                evidence: vec![
                    Evidence::new(
                        attr_path(d, "current_link_width"),
                        format!("x{cur}: {}", describe_link(link.current_speed, Some(cur))),
                    )
                    .expected(format!("x{cap}: {}", describe_link(cap_speed, Some(cap)))),
                ],
            });
        }
        if let (Some(cur), Some(cap)) = (link.current_speed, cap_speed)
            && cur < cap
        {
            let width = link.current_width.or(cap_width);
            let ev = Evidence::new(
                attr_path(d, "current_link_speed"),
                describe_link(Some(cur), width),
            )
            .expected(describe_link(Some(cap), width));
            if d.kind == DeviceKind::Gpu {
                gpu_idle_notes.push(format!("{} at {cur} of {cap}", d.bdf));
            } else {
                speed_warns.push(Finding {
                    device: d,
                    text: format!(
                        "{} pcie link at {cur} of {cap}{}",
                        label(d),
                        width
                            .map(|w| format!(
                                " ({:.2} of {:.2} GB/s)",
                                link_gb_per_s(cur, w),
                                link_gb_per_s(cap, w)
                            ))
                            .unwrap_or_default()
                    ),
                    evidence: vec![ev],
                });
            }
        }
        if d.kind == DeviceKind::Gpu
            && let Some(p) = profile
        {
            if let (Some(want), Some(max)) = (p.gpu_pcie_width, cap_width)
                && max < want
            {
                profile_fails.push(Finding {
                    device: d,
                    text: format!(
                        "{} pcie link capable of x{max}, profile {} expects x{want}",
                        label(d),
                        p.name
                    ),
                    evidence: vec![
                        Evidence::new(attr_path(d, "max_link_width"), format!("x{max}"))
                            .expected(format!("x{want} (profile {})", p.name)),
                    ],
                });
            }
            if let (Some(want), Some(generation)) =
                (p.gpu_pcie_gen, cap_speed.and_then(LinkSpeed::generation))
                && generation < want
            {
                profile_fails.push(Finding {
                    device: d,
                    text: format!(
                        "{} pcie link capable of gen{generation}, profile {} expects gen{want}",
                        label(d),
                        p.name
                    ),
                    evidence: vec![
                        Evidence::new(
                            attr_path(d, "max_link_speed"),
                            describe_link(cap_speed, cap_width),
                        )
                        .expected(format!("gen{want} (profile {})", p.name)),
                    ],
                });
            }
        }
    }
    if judged == 0 {
        return Outcome::skip("no pcie link files on the gpus, nics or ports above them");
    }
    // A downgraded link shows on both ends: fold a port into the finding of the device below it.
    let fold = |findings: Vec<Finding>| -> (Vec<String>, Vec<Evidence>) {
        let reported: BTreeSet<&str> = findings.iter().map(|f| f.device.bdf.as_str()).collect();
        let parents_of_reported: BTreeSet<String> = findings
            .iter()
            .filter_map(|f| t.parent(f.device).map(|p| p.bdf.clone()))
            .filter(|p| reported.contains(p.as_str()))
            .collect();
        let mut texts = Vec::new();
        let mut evidence = Vec::new();
        for f in findings {
            if !parents_of_reported.contains(&f.device.bdf) {
                texts.push(f.text);
            }
            evidence.extend(f.evidence);
        }
        (texts, evidence)
    };
    let (mut fails, mut evidence) = fold(width_fails);
    for f in profile_fails {
        fails.push(f.text);
        evidence.extend(f.evidence);
    }
    let (warns, warn_evidence) = fold(speed_warns);
    evidence.extend(warn_evidence);
    let idle = if gpu_idle_notes.is_empty() {
        String::new()
    } else {
        format!(
            "; gpu link speed below max while idle, not judged: {}",
            gpu_idle_notes.join(", ")
        )
    };
    let hint = "reseat the card, riser or cable of the named link and check its slot in the BIOS; confirm with `lspci -vv -s <bdf> | grep -E 'LnkCap|LnkSta'` (a real downgrade shows on both ends of the link)";
    if !fails.is_empty() {
        let mut summary = fails.join("; ");
        if !warns.is_empty() {
            summary.push_str("; ");
            summary.push_str(&warns.join("; "));
        }
        return Outcome::fail(summary + &idle)
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::HardwareInspection);
    }
    if !warns.is_empty() {
        return Outcome::warn(warns.join("; ") + &idle)
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::HardwareInspection);
    }
    Outcome::pass(format!(
        "{judged} pcie link(s) of gpus, nics and the ports above them at full width and speed{idle}"
    ))
}

fn numa_affinity(ctx: &Context<'_>) -> Outcome {
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let nodes: Vec<u32> = t.numa.cpu_nodes().map(|n| n.id).collect();
    if nodes.len() <= 1 {
        return Outcome::skip(format!(
            "{} numa node(s) with cpus: device locality cannot go wrong",
            nodes.len()
        ));
    }
    let node_list = nodes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let devices: Vec<&PciDevice> = t
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu || d.kind.is_nic())
        .collect();
    if devices.is_empty() {
        return Outcome::skip("no gpu or nic on pci");
    }
    let mut missing: BTreeMap<DeviceKind, usize> = BTreeMap::new();
    let mut evidence = Vec::new();
    let mut disagree = Vec::new();
    for d in &devices {
        match d.numa_node_file {
            Some(n) if n >= 0 => {
                if let Some(m) = d.cpulist_node
                    && i64::from(m) != n
                {
                    disagree.push(format!(
                        "{} numa_node {n} but local_cpulist lies in node {m}",
                        label(d)
                    ));
                    evidence.push(
                        Evidence::new(
                            attr_path(d, "local_cpulist"),
                            d.local_cpus
                                .as_ref()
                                .map(ToString::to_string)
                                .unwrap_or_default(),
                        )
                        .expected(format!("cpus of node {n}")),
                    );
                }
            }
            // Not there at all: not read (a problem `with_unread` names), not "-1".
            None if unread_numa(ctx)
                .iter()
                .any(|p| p.is_missing() && p.path.ends_with(&format!("/{}/numa_node", d.bdf))) => {}
            other => {
                *missing.entry(d.kind).or_default() += 1;
                let observed = match other {
                    Some(v) => v.to_string(),
                    None => "absent".to_string(),
                };
                let fallback = match (d.numa, d.numa_source) {
                    (Some(n), NumaSource::LocalCpulist) => {
                        format!("; local_cpulist places it on node {n}")
                    }
                    _ => match &d.local_cpus {
                        Some(c) => format!("; local_cpulist {c} names no single node"),
                        None => String::new(),
                    },
                };
                evidence.push(
                    Evidence::new(attr_path(d, "numa_node"), format!("{observed}{fallback}"))
                        .expected(format!("a node id ({node_list})")),
                );
            }
        }
    }
    let hint = "the firmware reports no pcie locality (acpi _pxm): update the bios or enable its numa / acpi srat option; in a vm give the guest a virtual numa topology with device affinity; until then the device plugin reports no topology and the topology manager cannot align gpus with cpus";
    if !missing.is_empty() {
        let what: Vec<String> = missing
            .iter()
            .map(|(k, n)| format!("{n} {}(s)", k.label()))
            .collect();
        let mut summary = format!(
            "{} report numa_node -1 on a machine with {} numa nodes",
            what.join(" and "),
            nodes.len()
        );
        if !disagree.is_empty() {
            summary.push_str("; ");
            summary.push_str(&disagree.join("; "));
        }
        return Outcome::warn(summary)
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::FixConfig);
    }
    if !disagree.is_empty() {
        return Outcome::warn(disagree.join("; "))
            .evidence_all(evidence)
            .hint("numa_node and local_cpulist disagree (firmware tables, or numa_node overwritten by hand, which taints the kernel): update the bios and reboot")
            .action(Action::FixConfig);
    }
    let mut per_node: BTreeMap<u32, usize> = BTreeMap::new();
    for d in devices.iter().filter(|d| d.kind == DeviceKind::Gpu) {
        if let Some(n) = d.numa {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let gpus = if per_node.is_empty() {
        String::new()
    } else {
        format!(
            "; gpus per node: {}",
            per_node
                .iter()
                .map(|(n, c)| format!("node{n} {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Outcome::pass(format!(
        "{} gpu(s) and nic(s) report their numa node ({} nodes){gpus}",
        devices.len(),
        nodes.len()
    ))
}

fn gpu_nic_locality(ctx: &Context<'_>) -> Outcome {
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let nics = t.rdma_nics();
    if nics.is_empty() {
        return Outcome::skip("no rdma nic on this node");
    }
    let gpus: Vec<&PciDevice> = t.gpus().collect();
    if gpus.is_empty() {
        return Outcome::skip("no gpu on pci");
    }
    let profile = ctx.profile();
    let gdr = profile.and_then(|p| p.gpudirect_rdma) == Some(true);
    let platform = match profile {
        Some(p) if gdr => format!("gpudirect rdma platform {}", p.name),
        Some(p) => format!("profile {} expects no gpudirect rdma", p.name),
        None => "no profile".to_string(),
    };
    // Far GPUs grouped by class, so eight GPUs on the wrong side read as one line.
    let mut far: BTreeMap<Link, Vec<(&PciDevice, &PciDevice)>> = BTreeMap::new();
    let mut evidence = Vec::new();
    let mut close: BTreeMap<String, usize> = BTreeMap::new();
    for gpu in &gpus {
        let Some((class, nic)) = nics
            .iter()
            .map(|n| (t.pcie_class(gpu, n), *n))
            .min_by_key(|(c, n)| (c.rank(), n.address))
        else {
            continue;
        };
        let judged_far = match class {
            Link::Pix | Link::Pxb | Link::X | Link::Nv(_) => false,
            Link::Phb | Link::Node => gdr,
            Link::Sys | Link::Unknown => true,
        };
        if !judged_far {
            *close.entry(class.to_string()).or_default() += 1;
            continue;
        }
        far.entry(class).or_default().push((gpu, nic));
        evidence.push(
            Evidence::new(
                format!("{PCI_DEVICES}/{}", gpu.bdf),
                format!(
                    "numa {}, nearest rdma nic {} ({}, numa {}): {class}",
                    gpu.numa.map_or("?".into(), |n| n.to_string()),
                    nic.nic_name(),
                    nic.bdf,
                    nic.numa.map_or("?".into(), |n| n.to_string()),
                ),
            )
            .expected("an rdma nic at PIX or PXB (behind the same pcie switch)"),
        );
    }
    let line = |class: Link, pairs: &[(&PciDevice, &PciDevice)]| {
        let why = match class {
            Link::Sys => "across the cpu interconnect",
            Link::Unknown => "numa node unknown, see topology.numa_affinity",
            _ => "same numa node, but beyond PXB nccl does not use gpudirect rdma",
        };
        let nic_names: BTreeSet<String> = pairs.iter().map(|(_, n)| n.nic_name()).collect();
        let nic_names = nic_names.into_iter().collect::<Vec<_>>().join(", ");
        match pairs {
            [(gpu, _)] => format!(
                "gpu {} nearest rdma nic is {nic_names} at {class} ({why})",
                gpu.bdf
            ),
            _ => format!(
                "{} gpus ({}) reach an rdma nic only at {class} ({why}; nearest {nic_names})",
                pairs.len(),
                pairs
                    .iter()
                    .map(|(g, _)| g.bdf.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    for (class, pairs) in &far {
        let text = line(*class, pairs);
        if *class == Link::Sys && gdr {
            fails.push(text);
        } else {
            warns.push(text);
        }
    }
    let hint = "give each gpu a compute nic behind its own pcie switch (check the server's slot map for nics moved to other risers or sockets); `gpudoctor topo` shows the whole matrix; until then nccl sends that gpu's inter-node traffic through host memory (NCCL_NET_GDR_LEVEL defaults to PXB)";
    if !fails.is_empty() {
        let mut summary = fails.join("; ");
        if !warns.is_empty() {
            summary.push_str("; ");
            summary.push_str(&warns.join("; "));
        }
        return Outcome::fail(format!("{summary} [{platform}]"))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::HardwareInspection);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{} [{platform}]", warns.join("; ")))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::HardwareInspection);
    }
    let classes: Vec<String> = close.iter().map(|(c, n)| format!("{n} at {c}")).collect();
    Outcome::pass(format!(
        "every gpu has an rdma nic close by: {} of {} gpus ({}); {} rdma nic(s)",
        gpus.len(),
        gpus.len(),
        classes.join(", "),
        nics.len()
    ))
}

#[cfg(test)]
mod tests;
