//! A pasted `nvidia-smi topo -m` matrix judged (`gpudoctor judge`), under the codes of the
//! checks that judge the same thing on a node: a GPU whose nearest NIC is far while others
//! have theirs close (`topology.gpu_nic_locality`), a GPU without the NVLinks its peers have
//! (`nvlink.links_active`), GPU pairs that cross PCIe on an NVSwitch platform
//! (`nvlink.fabric_state`). These rows are not in the registry (their codes are the node
//! checks'); `judge` runs them when a matrix is pasted. The matrix comes from the source
//! (`Source::smi_topo`), parsed by `facts/smi_topo.rs`.
//!
//! Without a profile the platform is read from the matrix itself: a node where some GPU has a
//! NIC at PIX/PXB was built for GPUDirect RDMA (NCCL's default `NCCL_NET_GDR_LEVEL` is PXB,
//! NCCL `src/transport/net.cc`), so there a GPU whose nearest NIC is PHB/NODE warns and SYS
//! fails, as `topology.gpu_nic_locality` judges a GPUDirect platform; on a node where no GPU
//! has, SYS warns. An NVSwitch platform shows one `NV#` of 12 or more between every GPU pair
//! (NV12 on HGX A100, NV18 on HGX H100: twelve and eighteen links through the switches).

use std::collections::BTreeMap;

use super::super::{CheckDef, Context, Explain, Outcome};
use crate::facts::smi_topo::{self, Link, SmiMatrix};
use crate::report::{Action, Evidence, Layer};

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "topology.gpu_nic_locality",
            layer: Layer::Topology,
            title: "each GPU has an RDMA NIC close by (PIX/PXB)",
            explain: Explain {
                reads: "a pasted `nvidia-smi topo -m` matrix: each GPU row's NIC cells",
                expects: "where some GPU has a NIC at PIX or PXB (a GPUDirect RDMA build), every GPU has one; PHB/NODE warn, SYS fails; elsewhere SYS warns",
                why: "NCCL uses GPUDirect RDMA only up to PXB by default (NCCL_NET_GDR_LEVEL): a GPU whose nearest NIC is further sends its inter-node traffic through host memory",
                fix: "put a compute NIC under each GPU's PCIe switch (check the server's slot map), or re-cable",
            },
            run: gpu_nic_locality,
        },
        CheckDef {
            code: "nvlink.links_active",
            layer: Layer::Nvlink,
            title: "every expected NVLink is active",
            explain: Explain {
                reads: "a pasted `nvidia-smi topo -m` matrix: the GPU-to-GPU cells",
                expects: "where GPUs have NVLink (`NV#`), every GPU has as many as its peers",
                why: "a GPU with fewer NVLinks than its peers carries its share of every collective at a fraction of their bandwidth, or over PCIe",
                fix: "reset the GPU or reboot the node; if the links stay down, send the baseboard for inspection (`nvidia-smi nvlink -s` on the node)",
            },
            run: links_active,
        },
        CheckDef {
            code: "nvlink.fabric_state",
            layer: Layer::Nvlink,
            title: "the NVSwitch fabric is trained",
            explain: Explain {
                reads: "a pasted `nvidia-smi topo -m` matrix: the GPU-to-GPU cells",
                expects: "on an NVSwitch platform (one NV12 or wider between most GPU pairs), every pair over NVLink",
                why: "a pair at SYS/NODE/PHB on an NVSwitch platform is not in the fabric: its traffic crosses PCIe and the CPUs",
                fix: "check the fabric manager and the NVSwitches on the node (`systemctl status nvidia-fabricmanager`, `nvidia-smi -q | grep -A2 Fabric`)",
            },
            run: fabric_state,
        },
    ]
}

/// The pasted matrix and its name, or the outcome that says why there is none to judge.
fn matrix(ctx: &Context<'_>) -> Result<(SmiMatrix, String), Outcome> {
    let Some((text, name)) = ctx.source().smi_topo() else {
        return Err(Outcome::skip("no `nvidia-smi topo -m` matrix pasted"));
    };
    match smi_topo::parse(&text) {
        Ok(m) => Ok((m, name)),
        Err(err) => Err(Outcome::error(format!("{name}: {err}"))),
    }
}

fn at(name: &str, line: Option<usize>) -> String {
    match line {
        Some(n) => format!("{name}:{n}"),
        None => name.to_string(),
    }
}

fn gpu_nic_locality(ctx: &Context<'_>) -> Outcome {
    let (m, name) = match matrix(ctx) {
        Ok(pair) => pair,
        Err(o) => return o,
    };
    let nics: Vec<usize> = m.nics().collect();
    let gpus: Vec<usize> = m.gpus().collect();
    if gpus.is_empty() {
        return Outcome::skip("no GPU in the pasted matrix");
    }
    if nics.is_empty() {
        return Outcome::skip("no NIC in the pasted matrix");
    }
    // Each GPU's nearest NIC, for the rows the paste has.
    let nearest: Vec<(usize, usize, Link)> = gpus
        .iter()
        .filter_map(|&g| {
            nics.iter()
                .filter_map(|&n| m.link(g, n).map(|l| (g, n, l)))
                .min_by_key(|(_, n, l)| (l.rank(), *n))
        })
        .collect();
    if nearest.is_empty() {
        return Outcome::skip("the pasted matrix has no GPU-to-NIC cell");
    }
    let listing = listing(&m, &name);
    let gdr = nearest
        .iter()
        .any(|(_, _, l)| matches!(l, Link::Pix | Link::Pxb));
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut evidence = Vec::new();
    let mut close: BTreeMap<String, usize> = BTreeMap::new();
    for &(g, n, link) in &nearest {
        let far = match link {
            Link::Pix | Link::Pxb | Link::X | Link::Nv(_) => None,
            Link::Phb | Link::Node => gdr.then_some(false),
            Link::Sys | Link::Unknown => Some(gdr),
        };
        let gpu = &m.devices[g];
        let nic = &m.devices[n];
        let Some(fail) = far else {
            *close.entry(link.to_string()).or_default() += 1;
            continue;
        };
        let line = format!("{} nearest NIC is {} at {link}", gpu.name, nic.shown());
        evidence.push(
            Evidence::new(at(&name, gpu.line), line.clone())
                .expected("a NIC at PIX or PXB (behind the same PCIe switch)"),
        );
        if fail {
            fails.push(line)
        } else {
            warns.push(line)
        }
    }
    let platform = if gdr {
        "other GPUs have a NIC at PIX/PXB: a GPUDirect RDMA build"
    } else {
        "no GPU has a NIC at PIX/PXB"
    };
    let hint = "give each GPU a compute NIC behind its own PCIe switch (check the server's slot map for NICs moved to other risers or sockets); until then NCCL sends that GPU's inter-node traffic through host memory (NCCL_NET_GDR_LEVEL defaults to PXB)";
    let mut all = fails.clone();
    all.extend(warns.iter().cloned());
    if !fails.is_empty() {
        return Outcome::fail(format!("{} [{platform}]", all.join("; ")))
            .evidence_all(evidence)
            .evidence_all(listing)
            .hint(hint)
            .action(Action::HardwareInspection);
    }
    if !warns.is_empty() {
        return Outcome::warn(format!("{} [{platform}]", all.join("; ")))
            .evidence_all(evidence)
            .evidence_all(listing)
            .hint(hint)
            .action(Action::HardwareInspection);
    }
    let classes: Vec<String> = close.iter().map(|(c, n)| format!("{n} at {c}")).collect();
    Outcome::pass(format!(
        "every GPU has a NIC close by: {} of {} GPUs ({}); {} NIC(s)",
        nearest.len(),
        gpus.len(),
        classes.join(", "),
        nics.len()
    ))
    .evidence_all(listing)
}

/// Every device of the matrix with its links, one evidence line a row: what was read.
fn listing(m: &SmiMatrix, name: &str) -> Vec<Evidence> {
    (0..m.devices.len())
        .map(|r| {
            let d = &m.devices[r];
            let links: Vec<String> = (0..m.devices.len())
                .filter(|&c| c != r)
                .map(|c| {
                    let link = m.link(r, c).map_or("?".to_string(), |l| l.to_string());
                    format!("{} {link}", m.devices[c].name)
                })
                .collect();
            let numa = d
                .numa
                .as_deref()
                .map(|n| format!(", NUMA {n}"))
                .unwrap_or_default();
            Evidence::new(
                at(name, d.line),
                format!("{}{numa}: {}", d.shown(), links.join(", ")),
            )
        })
        .collect()
}

/// Each GPU's NVLink cells: the widest bond to any peer, and how many peers it reaches over
/// NVLink.
fn nvlinks(m: &SmiMatrix, g: usize) -> (u32, usize) {
    let mut widest = 0;
    let mut peers = 0;
    for p in m.gpus().filter(|&p| p != g) {
        if let Some(Link::Nv(n)) = m.link(g, p) {
            widest = widest.max(n);
            peers += 1;
        }
    }
    (widest, peers)
}

fn links_active(ctx: &Context<'_>) -> Outcome {
    let (m, name) = match matrix(ctx) {
        Ok(pair) => pair,
        Err(o) => return o,
    };
    let gpus: Vec<usize> = m.gpus().collect();
    if gpus.len() < 2 {
        return Outcome::skip("fewer than two GPUs in the pasted matrix");
    }
    let seen: Vec<(usize, (u32, usize))> = gpus.iter().map(|&g| (g, nvlinks(&m, g))).collect();
    let most_peers = seen.iter().map(|(_, (_, p))| *p).max().unwrap_or(0);
    if most_peers == 0 {
        return Outcome::skip("no NVLink between the GPUs of the pasted matrix (PCIe only)");
    }
    let mut without = Vec::new();
    let mut evidence = Vec::new();
    for &(g, (_, peers)) in &seen {
        if peers == 0 {
            let gpu = &m.devices[g];
            without.push(gpu.name.clone());
            evidence.push(
                Evidence::new(
                    at(&name, gpu.line),
                    format!("{}: no NV# cell to any GPU", gpu.name),
                )
                .expected(format!(
                    "NVLink to {most_peers} peer(s), as other GPUs have"
                )),
            );
        }
    }
    if !without.is_empty() {
        return Outcome::fail(format!(
            "{} without NVLink while other GPUs reach {most_peers} peer(s) over NVLink",
            without.join(", ")
        ))
        .evidence_all(evidence)
        .hint("reset the GPU or reboot the node; if its links stay down, send the baseboard for inspection (`nvidia-smi nvlink -s -i N` on the node)")
        .action(Action::HardwareInspection);
    }
    let widths: BTreeMap<u32, usize> = seen.iter().fold(BTreeMap::new(), |mut acc, (_, (w, _))| {
        *acc.entry(*w).or_default() += 1;
        acc
    });
    let shown: Vec<String> = widths
        .iter()
        .map(|(w, n)| format!("{n} at NV{w}"))
        .collect();
    Outcome::pass(format!(
        "every GPU has NVLink: {} GPUs ({})",
        gpus.len(),
        shown.join(", ")
    ))
}

fn fabric_state(ctx: &Context<'_>) -> Outcome {
    let (m, name) = match matrix(ctx) {
        Ok(pair) => pair,
        Err(o) => return o,
    };
    let gpus: Vec<usize> = m.gpus().collect();
    let mut pairs = Vec::new();
    for (i, &a) in gpus.iter().enumerate() {
        for &b in &gpus[i + 1..] {
            if let Some(link) = m.link(a, b) {
                pairs.push((a, b, link));
            }
        }
    }
    let mut widths: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, _, l) in &pairs {
        if let Link::Nv(n) = l {
            *widths.entry(*n).or_default() += 1;
        }
    }
    let switch_width = widths
        .iter()
        .max_by_key(|(_, n)| **n)
        .filter(|(w, n)| **w >= 12 && **n * 2 > pairs.len())
        .map(|(w, _)| *w);
    let Some(width) = switch_width else {
        return Outcome::skip(
            "not an NVSwitch platform by the pasted matrix (no NV12 or wider between most GPU pairs)",
        );
    };
    let off: Vec<&(usize, usize, Link)> = pairs
        .iter()
        .filter(|(_, _, l)| !matches!(l, Link::Nv(_)))
        .collect();
    if off.is_empty() {
        return Outcome::pass(format!(
            "every pair of the {} GPUs over NVLink (NV{width}: NVSwitch)",
            gpus.len()
        ));
    }
    let shown: Vec<String> = off
        .iter()
        .map(|(a, b, l)| format!("{}-{} at {l}", m.devices[*a].name, m.devices[*b].name))
        .collect();
    let evidence = off.iter().map(|(a, b, l)| {
        Evidence::new(
            at(&name, m.devices[*a].line),
            format!("{} to {}: {l}", m.devices[*a].name, m.devices[*b].name),
        )
        .expected(format!("NV{width}, as the other pairs"))
    });
    Outcome::fail(format!(
        "{} GPU pair(s) outside the NVSwitch fabric (NV{width} elsewhere): {}",
        off.len(),
        shown.join(", ")
    ))
    .evidence_all(evidence)
    .hint("check the fabric manager and the NVSwitches on the node (`systemctl status nvidia-fabricmanager`; `nvidia-smi -q | grep -A3 Fabric`); a GPU outside the fabric needs a reset or the node a reboot")
    .action(Action::RestartComponent)
}
