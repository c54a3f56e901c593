//! What the walk tells the active probes before they run (live only; a replay ignores it): the
//! GPUs CUDA should not be asked about, where each GPU's NUMA node and CPUs are, and which GPU
//! each HCA's GPUDirect loopback should use. Built from facts other layers read anyway (NVML,
//! the topology, the RDMA devices); nothing here judges.

use std::collections::BTreeMap;

use crate::answers::cuda::Placement;
use crate::answers::cuda::{CudaPlan, PlacementPlan};
use crate::answers::gpudirect::GdrTarget;
use crate::checks::Context;
use crate::facts::numa::NumaFacts;
use crate::facts::topology::{PciDevice, Topology};

/// The RDMA port state the kernel prints for a usable port (`4: ACTIVE`, sysfs.md §8).
const PORT_ACTIVE: u32 = 4;

/// GPUs in MIG mode are not probed as GPUs (CUDA reaches their MIG devices, by MIG UUID, not
/// the GPU); every other GPU gets its own NUMA node and the nearest other one.
pub fn cuda_plan(ctx: &Context<'_>) -> CudaPlan {
    let nvml = ctx.nvml();
    let exclude: Vec<String> = nvml
        .devices
        .iter()
        .filter(|d| d.error.is_none() && d.mig_possible())
        .filter_map(|d| d.pci_bus_id.clone())
        .collect();
    let mut placements = BTreeMap::new();
    if let Ok(topo) = ctx.topology() {
        for gpu in topo.gpus() {
            let plans = placements_for(gpu, &topo.numa);
            if !plans.is_empty() {
                placements.insert(gpu.bdf.clone(), plans);
            }
        }
    }
    CudaPlan {
        exclude,
        placements,
        gpus: nvml.device_count,
    }
}

/// The GPU's own node (its `local_cpulist`, else the node's CPUs), then the nearest other node
/// with CPUs by SLIT distance.
pub fn placements_for(gpu: &PciDevice, numa: &NumaFacts) -> Vec<PlacementPlan> {
    let Some(local) = gpu.numa else {
        return Vec::new();
    };
    let Some(node) = numa.nodes.iter().find(|n| n.id == local) else {
        return Vec::new();
    };
    let cpus: Vec<u32> = match &gpu.local_cpus {
        Some(set) if !set.is_empty() => set.iter().collect(),
        _ => node.cpus.iter().collect(),
    };
    let mut plans = vec![PlacementPlan {
        placement: Placement::Local,
        node: Some(local),
        cpus,
    }];
    let remote = numa
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.id != local && !n.cpus.is_empty())
        .min_by_key(|(i, n)| (node.distances.get(*i).copied().unwrap_or(u32::MAX), n.id));
    if let Some((_, r)) = remote {
        plans.push(PlacementPlan {
            placement: Placement::Remote,
            node: Some(r.id),
            cpus: r.cpus.iter().collect(),
        });
    }
    plans
}

/// The GPU nearest to a NIC (PIX before PXB before PHB ...; then the lowest bus id), and the
/// path class between them.
pub fn nearest_gpu<'t>(topo: &'t Topology, nic: &PciDevice) -> Option<(&'t PciDevice, String)> {
    topo.gpus()
        .map(|g| (g, topo.pcie_class(nic, g)))
        .min_by(|(a, la), (b, lb)| (la.rank(), &a.bdf).cmp(&(lb.rank(), &b.bdf)))
        .map(|(g, link)| (g, link.to_string()))
}

/// An RDMA device the loopbacks leave out, and why (said in the check's evidence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub device: String,
    pub reason: String,
}

/// The loopbacks to run and the devices left out. Built from the facts alone, so a replay
/// judges a capture with the plan the live run had.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GdrPlan {
    pub targets: Vec<GdrTarget>,
    pub left_out: Vec<LeftOut>,
}

/// One loopback per ACTIVE port of each GPU rail: an RDMA device whose nearest GPU is at PIX or
/// PXB (NCCL uses GPUDirect RDMA up to PXB by default, `NCCL_NET_GDR_LEVEL`), or one the
/// profile names in `rdma_devices`. Left out: SR-IOV VFs (they belong to Pods, and share
/// their PF's port), front-end and storage NICs (nearest GPU at PHB, NODE or SYS, or not in the
/// profile's list), HCAs whose GPU is in MIG mode (CUDA sees a MIG GPU only through its MIG
/// devices, never by the GPU's UUID) or in a compute mode that refuses the loopback's two
/// contexts (`Exclusive_Process` lets one process in, `Prohibited` none; nvml.h).
pub fn gdr_plan(ctx: &Context<'_>) -> GdrPlan {
    let mut plan = GdrPlan::default();
    let Ok(rdma) = ctx.rdma() else {
        return plan;
    };
    let topo = ctx.topology().as_ref().ok();
    let nvml = ctx.nvml();
    let sriov = ctx.sriov();
    let rails = ctx.profile().filter(|p| !p.rdma_devices.is_empty());
    let mut gpu_order: Vec<String> = nvml
        .devices
        .iter()
        .filter_map(|d| d.pci_bus_id.clone())
        .collect();
    gpu_order.sort();
    // The same decision `rdma.gpudirect` makes: no peer-memory client but dma-buf means the
    // loopback registers its GPU buffer through dma-buf, as NCCL would on this node.
    let dmabuf = crate::checks::rdma::gpudirect::memory_path(ctx)
        == Some(crate::checks::rdma::gpudirect::MemoryPath::DmaBuf);
    for dev in &rdma.devices {
        let active: Vec<u32> = dev
            .ports
            .iter()
            .filter(|p| p.state.as_ref().map(|(n, _)| *n) == Some(PORT_ACTIVE))
            .map(|p| p.port)
            .collect();
        if active.is_empty() {
            continue;
        }
        let mut leave = |reason: String| {
            plan.left_out.push(LeftOut {
                device: dev.name.clone(),
                reason,
            })
        };
        let vf = sriov.vfs().find(|(_, vf)| {
            vf.rdma_device.as_deref() == Some(dev.name.as_str())
                || (dev.pci.is_some() && dev.pci.as_deref() == Some(vf.bdf.as_str()))
        });
        if let Some((pf, vf)) = vf {
            leave(format!(
                "an SR-IOV VF ({} of PF {}): VFs are for Pods and share the PF's port",
                vf.bdf, pf.bdf
            ));
            continue;
        }
        let nic = topo.and_then(|t| {
            t.devices
                .iter()
                .find(|d| d.rdma_devices.contains(&dev.name) || Some(&d.bdf) == dev.pci.as_ref())
        });
        let nearest = match (topo, nic) {
            (Some(t), Some(n)) => nearest_gpu(t, n),
            _ => None,
        };
        let path = nearest.as_ref().map(|(_, l)| l.clone());
        match rails {
            Some(profile) if !profile.is_fabric_device(&dev.name) => {
                leave(format!(
                    "not one of the {} profile's rdma_devices ({}): a front-end or storage NIC",
                    profile.name,
                    profile.rdma_devices.join(", ")
                ));
                continue;
            }
            Some(_) => {}
            None => {
                if let Some(p) = path.as_deref().filter(|p| !matches!(*p, "PIX" | "PXB")) {
                    leave(format!(
                        "nearest gpu at {p}: not a gpu rail (gpudirect rdma is used up to PXB), a front-end or storage NIC; name the rails in a profile's rdma_devices to loop it back"
                    ));
                    continue;
                }
            }
        }
        let gpu = nearest.as_ref().map(|(g, _)| g.bdf.clone());
        let nvml_gpu = gpu.as_ref().and_then(|b| {
            nvml.devices
                .iter()
                .find(|d| d.pci_bus_id.as_ref() == Some(b))
        });
        if let Some(d) = nvml_gpu {
            if d.error.is_none() && d.mig_possible() {
                leave(format!(
                    "its gpu {} is in MIG mode: CUDA reaches it only through its MIG devices",
                    gpu.as_deref().unwrap_or("?")
                ));
                continue;
            }
            use crate::answers::nvml::ComputeMode;
            if let Some(mode @ (ComputeMode::ExclusiveProcess | ComputeMode::Prohibited)) =
                d.compute_mode.value().copied()
            {
                leave(format!(
                    "its gpu {} is in compute mode {}: the loopback's server and client each need a context on it",
                    gpu.as_deref().unwrap_or("?"),
                    mode.label()
                ));
                continue;
            }
        }
        let uuid = nvml_gpu.and_then(|d| d.uuid.clone());
        let ordinal = gpu
            .as_ref()
            .and_then(|b| gpu_order.iter().position(|x| x == b))
            .map(|i| i as u32);
        for port in active {
            plan.targets.push(GdrTarget {
                device: dev.name.clone(),
                port,
                gpu: gpu.clone(),
                gpu_uuid: uuid.clone(),
                gpu_ordinal: ordinal,
                path: path.clone(),
                dmabuf,
            });
        }
    }
    plan
}

/// The loopbacks to run (the probe asks for these on a live run).
pub fn gdr_targets(ctx: &Context<'_>) -> Vec<GdrTarget> {
    gdr_plan(ctx).targets
}
