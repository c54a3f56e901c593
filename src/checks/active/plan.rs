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

/// One loopback per RDMA device port that is ACTIVE, with the GPU nearest to the device.
pub fn gdr_targets(ctx: &Context<'_>) -> Vec<GdrTarget> {
    let Ok(rdma) = ctx.rdma() else {
        return Vec::new();
    };
    let topo = ctx.topology().as_ref().ok();
    let nvml = ctx.nvml();
    let mut gpu_order: Vec<String> = nvml
        .devices
        .iter()
        .filter_map(|d| d.pci_bus_id.clone())
        .collect();
    gpu_order.sort();
    let mut targets = Vec::new();
    for dev in &rdma.devices {
        let nic = topo.and_then(|t| {
            t.devices
                .iter()
                .find(|d| d.rdma_devices.contains(&dev.name) || Some(&d.bdf) == dev.pci.as_ref())
        });
        let nearest = match (topo, nic) {
            (Some(t), Some(n)) => nearest_gpu(t, n),
            _ => None,
        };
        for port in &dev.ports {
            if port.state.as_ref().map(|(n, _)| *n) != Some(PORT_ACTIVE) {
                continue;
            }
            let gpu = nearest.as_ref().map(|(g, _)| g.bdf.clone());
            let uuid = gpu.as_ref().and_then(|b| {
                nvml.devices
                    .iter()
                    .find(|d| d.pci_bus_id.as_ref() == Some(b))
                    .and_then(|d| d.uuid.clone())
            });
            let ordinal = gpu
                .as_ref()
                .and_then(|b| gpu_order.iter().position(|x| x == b))
                .map(|i| i as u32);
            targets.push(GdrTarget {
                device: dev.name.clone(),
                port: port.port,
                gpu,
                gpu_uuid: uuid,
                gpu_ordinal: ordinal,
                path: nearest.as_ref().map(|(_, l)| l.clone()),
            });
        }
    }
    targets
}
