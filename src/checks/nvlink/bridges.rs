//! PCIe GPUs joined by NVLink bridges (A100/H100 PCIe, H100 NVL, H200 NVL): no NVSwitch, so
//! each active link names the GPU at its other end (`nvmlDeviceGetNvLinkRemotePciInfo_v2`).
//! Bridges come as pairs (three bridges, 12 links each way on H100 NVL: `NV12`, nccl-tests#178)
//! or 4-way groups (`NV6` between every pair of 4 H100s, NVIDIA/nccl#1617). Judged per group:
//! both ends of a pair see the same number of links, every pair carries as many links as the
//! node's fullest bridge, and every GPU of a group reaches every other. Links a bridge leaves
//! unused are down by design and not counted.

use std::collections::{BTreeMap, BTreeSet};

use super::super::gpu_health::{PerGpu, field, gpu_label};
use super::links_of;
use crate::answers::nvml::NvmlDevice;
use crate::checks::Outcome;
use crate::report::{Action, Evidence};

/// One GPU's active links: to each bridged peer (by NVML index), and to ends it cannot name.
#[derive(Default)]
struct Ends {
    peers: BTreeMap<u32, u32>,
    unnamed: u32,
    active: u32,
}

pub(super) fn judge(devices: &[&NvmlDevice], mut acc: PerGpu) -> Outcome {
    let by_bus: BTreeMap<&str, &NvmlDevice> = devices
        .iter()
        .filter_map(|d| d.pci_bus_id.as_deref().map(|b| (b, *d)))
        .collect();
    let by_index: BTreeMap<u32, &NvmlDevice> = devices.iter().map(|d| (d.index, *d)).collect();
    let mut ends: BTreeMap<u32, Ends> = BTreeMap::new();
    for d in devices {
        let entry = ends.entry(d.index).or_default();
        for link in links_of(d).into_iter().flatten().filter(|l| l.active) {
            entry.active += 1;
            let peer = link
                .remote_pci_bus_id
                .as_deref()
                .and_then(|b| by_bus.get(b))
                .filter(|p| p.index != d.index);
            match peer {
                Some(p) => *entry.peers.entry(p.index).or_default() += 1,
                None => entry.unnamed += 1,
            }
        }
    }
    let label = |i: u32| {
        by_index
            .get(&i)
            .map(|d| gpu_label(d))
            .unwrap_or_else(|| format!("gpu {i}"))
    };
    let short = |i: u32| format!("gpu {i}");

    // Pairs, each once (a < b), with the count seen from each end.
    let mut pairs: BTreeMap<(u32, u32), (u32, u32)> = BTreeMap::new();
    for (a, e) in &ends {
        for (b, n) in &e.peers {
            let key = if a < b { (*a, *b) } else { (*b, *a) };
            let slot = pairs.entry(key).or_insert((0, 0));
            if a < b {
                slot.0 = *n;
            } else {
                slot.1 = *n;
            }
        }
    }
    let fullest = pairs.values().map(|(x, y)| *x.max(y)).max().unwrap_or(0);
    for ((a, b), (ab, ba)) in &pairs {
        let observed = format!("{ab} active to {}, {ba} back", short(*b));
        if ab != ba {
            acc.fails.push(format!(
                "{} has {ab} active nvlink(s) to {}, which has {ba} back",
                label(*a),
                short(*b)
            ));
        } else if *ab < fullest {
            acc.fails.push(format!(
                "{} and {} share {ab} active nvlink(s), other bridges carry {fullest} (a bridge missing or loose)",
                label(*a),
                short(*b)
            ));
        } else {
            continue;
        }
        if let Some(d) = by_index.get(a) {
            acc.evidence.push(
                Evidence::new(field(d, "nvlinks"), observed)
                    .expected(format!("{fullest} active each way, as on every bridge")),
            );
        }
    }

    // Groups: GPUs joined by any bridge; in a group of more than two every GPU reaches every other.
    let mut group_of: BTreeMap<u32, u32> = BTreeMap::new();
    for (a, b) in pairs.keys() {
        let ga = *group_of.get(a).unwrap_or(a);
        let gb = *group_of.get(b).unwrap_or(b);
        let (keep, drop) = (ga.min(gb), ga.max(gb));
        for g in group_of.values_mut() {
            if *g == drop {
                *g = keep;
            }
        }
        group_of.insert(*a, keep);
        group_of.insert(*b, keep);
    }
    let mut groups: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (gpu, group) in &group_of {
        groups.entry(*group).or_default().insert(*gpu);
    }
    for members in groups.values().filter(|m| m.len() > 2) {
        let list: Vec<String> = members.iter().map(|m| m.to_string()).collect();
        for a in members {
            for b in members.iter().filter(|b| *b > a) {
                if !pairs.contains_key(&(*a, *b)) {
                    acc.fails.push(format!(
                        "{} has no active nvlink to {} though both are bridged in group gpu {}",
                        label(*a),
                        short(*b),
                        list.join(", ")
                    ));
                }
            }
        }
    }

    for (i, e) in &ends {
        if e.unnamed > 0 {
            acc.warns.push(format!(
                "{} has {} active nvlink(s) to an end nvml does not name as a gpu here",
                label(*i),
                e.unnamed
            ));
            if let Some(d) = by_index.get(i) {
                acc.evidence.push(
                    Evidence::new(
                        field(d, "nvlinks"),
                        format!("{} link(s) without a known remote gpu", e.unnamed),
                    )
                    .expected("the remote bus id of a gpu on this node"),
                );
            }
        }
    }
    let bridged: Vec<u32> = group_of.keys().copied().collect();
    let lonely: Vec<u32> = ends
        .iter()
        .filter(|(i, e)| e.active == 0 && !group_of.contains_key(i))
        .map(|(i, _)| *i)
        .collect();
    if !bridged.is_empty() && !lonely.is_empty() {
        acc.warns.push(format!(
            "gpu(s) {} have no active nvlink while {} gpu(s) are bridged (bridge missing or unseated, or deliberately unbridged)",
            lonely.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            bridged.len()
        ));
    }
    acc.judged = ends.values().filter(|e| e.active > 0).count();
    let sizes: Vec<String> = groups
        .values()
        .map(|m| {
            m.iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    acc.finish(
        format!(
            "nvlink bridges whole: gpu {} with {fullest} active nvlinks between bridged gpus (pcie gpus, no nvswitch; links a bridge does not use stay down by design)",
            sizes.join(", gpu ")
        ),
        "no nvlink on these gpus",
        "reseat the nvlink bridges of the gpus named (power off first) and confirm with `nvidia-smi nvlink -s` and `nvidia-smi topo -m` (NV<n> between bridged gpus); a link that stays down on a seated bridge needs the bridge or card replaced",
        Action::HardwareInspection,
    )
}
