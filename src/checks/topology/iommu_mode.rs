//! topology.iommu: is the IOMMU off or in pass-through for the GPUs and RDMA NICs? A
//! translating IOMMU slows every DMA, and GPUDirect RDMA platforms want `iommu=pt`
//! (reference/topology.md §6). Facts from `facts/iommu.rs`.

use super::*;

pub(super) fn iommu_mode(ctx: &Context<'_>) -> Outcome {
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let ends: Vec<&str> = t
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu || d.kind == DeviceKind::RdmaNic)
        .map(|d| d.bdf.as_str())
        .collect();
    // The IOMMU mode matters to the DMA of GPUs and RDMA NICs (GPUDirect, peer to peer); a
    // node with neither has nothing here to judge.
    if ends.is_empty() {
        return Outcome::skip("no gpu or rdma nic on pci");
    }
    let facts = iommu::gather(ctx.source(), &ends);
    iommu_judged(ctx, &facts).with_unread(&facts.problems)
}

fn iommu_judged(ctx: &Context<'_>, facts: &iommu::IommuFacts) -> Outcome {
    let profile = ctx.profile();
    let gdr = profile.and_then(|p| p.gpudirect_rdma) == Some(true);
    let cmdline = facts.cmdline.clone().unwrap_or_default();
    let mut evidence = Vec::new();
    if let Some(c) = &facts.cmdline {
        let words: Vec<String> = [
            ("intel_iommu", &c.intel_iommu),
            ("amd_iommu", &c.amd_iommu),
            ("iommu", &c.iommu),
            ("iommu.passthrough", &c.passthrough),
        ]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
        .collect();
        evidence.push(Evidence::new(
            iommu::PROC_CMDLINE,
            if words.is_empty() {
                "no iommu parameters".to_string()
            } else {
                words.join(" ")
            },
        ));
    }
    if facts.units.is_empty() && facts.groups.is_empty() {
        return Outcome::pass("no iommu active: dma is not translated").evidence_all(evidence);
    }
    evidence.push(Evidence::new(iommu::CLASS_IOMMU, facts.units.join(" ")));
    let translated: Vec<&iommu::DeviceGroup> = facts
        .groups
        .iter()
        .filter(|g| matches!(g.kind.as_deref(), Some("DMA" | "DMA-FQ")))
        .collect();
    let typed = facts.groups.iter().filter(|g| g.kind.is_some()).count();
    let mode = if !translated.is_empty() {
        let kinds: BTreeSet<&str> = translated
            .iter()
            .filter_map(|g| g.kind.as_deref())
            .collect();
        for g in &translated {
            evidence.push(
                Evidence::new(
                    format!("{}/{}/type", iommu::IOMMU_GROUPS, g.group),
                    format!("{} ({})", g.kind.as_deref().unwrap_or("?"), g.bdf),
                )
                .expected("identity"),
            );
        }
        Some(format!(
            "iommu translates dma for {} of {} gpu(s)/rdma nic(s) (group type {})",
            translated.len(),
            facts.groups.len(),
            kinds.into_iter().collect::<Vec<_>>().join("/")
        ))
    } else if typed > 0 || cmdline.asks_passthrough() {
        None
    } else {
        Some(format!(
            "iommu active ({}) without `iommu=pt` on the kernel command line: dma is most likely translated",
            facts.units.join(" ")
        ))
    };
    let Some(mode) = mode else {
        return Outcome::pass(format!(
            "iommu in pass-through mode ({} unit(s); {})",
            facts.units.len(),
            if typed > 0 {
                "group type identity"
            } else {
                "iommu=pt"
            }
        ))
        .evidence_all(evidence);
    };
    if !gdr {
        let why = match profile {
            Some(p) => format!("profile {} expects no gpudirect rdma", p.name),
            None => "no platform profile".to_string(),
        };
        return Outcome::pass(format!("{mode}; not judged: {why}")).evidence_all(evidence);
    }
    Outcome::warn(format!(
        "{mode} on a gpudirect rdma platform: p2p and rdma dma go through iommu translation"
    ))
    .evidence_all(evidence)
    .hint("add `iommu=pt` to the kernel command line (keep `intel_iommu=on`/`amd_iommu=on` if vfio needs the iommu), e.g. in GRUB_CMDLINE_LINUX, run `update-grub` and reboot the drained node")
    .action(Action::FixConfig)
}
