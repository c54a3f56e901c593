//! topology.acs: do PCIe switch ports above the GPUs and RDMA NICs redirect peer-to-peer
//! traffic up to the root complex (ACS, reference/topology.md §6)? Reads each port's ACS
//! capability from its config space (`facts/pcicfg.rs`).

use super::*;

/// `unread_inputs` gets the devices that could not be placed in the tree and the switch ports
/// whose `config` could not be read or parsed.
pub(super) fn acs(ctx: &Context<'_>, unread_inputs: &mut Vec<FactError>) -> Outcome {
    let t = match topo(ctx) {
        Ok(t) => t,
        Err(o) => return o,
    };
    // Inside a VM the hypervisor keeps ACS on for isolation; only bare metal is judged
    // (topology.md §6, like gpud).
    if topology::hypervisor(ctx.source()) == Some(true) {
        return Outcome::skip(
            "virtual machine (cpu flag hypervisor): acs stays on for isolation there",
        );
    }
    unread_inputs.extend(unread(ctx, &[]).into_iter().cloned());
    let mut ports: Vec<&PciDevice> = Vec::new();
    let mut below: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for end in t
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu || d.kind == DeviceKind::RdmaNic)
    {
        for a in t.ancestors(end) {
            if matches!(
                a.kind,
                DeviceKind::SwitchUpstream | DeviceKind::SwitchDownstream
            ) {
                if !below.contains_key(&a.bdf) {
                    ports.push(a);
                }
                below.entry(a.bdf.clone()).or_default().push(label(end));
            }
        }
    }
    if ports.is_empty() {
        return Outcome::skip("no pcie switch above the gpus and rdma nics");
    }
    ports.sort_by(|a, b| (a.address, &a.bdf).cmp(&(b.address, &b.bdf)));
    let mut truncated: Vec<(String, usize)> = Vec::new();
    let mut unreadable = Vec::new();
    let mut enabled = Vec::new();
    let mut evidence = Vec::new();
    let mut judged = 0usize;
    for port in &ports {
        let (path, reading) = topology::read_acs(ctx.source(), port);
        match reading {
            Ok(Some(AcsReading::Truncated { len })) => truncated.push((path, len)),
            Ok(None) => unreadable.push(format!("{path}: absent")),
            Err(err) => {
                unreadable.push(err.to_string());
                unread_inputs.push(err);
            }
            Ok(Some(AcsReading::NoAcs | AcsReading::NoExtendedCapabilities)) => judged += 1,
            Ok(Some(AcsReading::Present(acs))) => {
                judged += 1;
                let redirect = acs.control & (ACS_SV | ACS_RR | ACS_CR | ACS_EC);
                if redirect != 0 {
                    let flags = acs_flags(acs.control).join(" ");
                    let ends = below.get(&port.bdf).cloned().unwrap_or_default();
                    enabled.push(format!(
                        "{} above {}: {flags}",
                        label(port),
                        ends.join(", ")
                    ));
                    evidence.push(
                        Evidence::new(
                            format!("{path} @ {:#x} (ACSCtl)", acs.offset + 6),
                            format!("{:#06x}: {flags}", acs.control),
                        )
                        .expected("0x0000 (SrcValid- ReqRedir- CmpltRedir- EgressCtrl-)"),
                    );
                }
            }
        }
    }
    let not_read = if truncated.is_empty() && unreadable.is_empty() {
        String::new()
    } else {
        let mut parts = Vec::new();
        if !truncated.is_empty() {
            let lens: BTreeSet<usize> = truncated.iter().map(|(_, l)| *l).collect();
            parts.push(format!(
                "{} port(s) whose config space reads only {} bytes (run as root: an unprivileged read stops at 64)",
                truncated.len(),
                lens.iter().map(ToString::to_string).collect::<Vec<_>>().join("/")
            ));
        }
        if !unreadable.is_empty() {
            parts.push(format!(
                "{} port(s) without a readable config file",
                unreadable.len()
            ));
        }
        parts.join(", ")
    };
    if !enabled.is_empty() {
        let mut summary = format!(
            "acs redirect enabled on {} pcie switch port(s): {}",
            enabled.len(),
            enabled.join("; ")
        );
        if !not_read.is_empty() {
            summary.push_str(&format!("; not read: {not_read}"));
        }
        return Outcome::warn(summary)
            .evidence_all(evidence)
            .hint("gpu peer-to-peer and gpudirect rdma are forced through the root complex: disable acs in the bios, boot with `pci=disable_acs_redir=<bdf>[;<bdf>...]`, or until reboot `setpci -s <bdf> ECAP_ACS+0x6.w=0000`; check with `sudo lspci -vvv -s <bdf> | grep ACSCtl`")
            .action(Action::FixConfig);
    }
    if judged == 0 {
        return Outcome::skip(format!("acs state unknown: {not_read}")).evidence_all(
            truncated.iter().map(|(p, l)| {
                Evidence::new(p.clone(), format!("{l} bytes")).expected("4096 bytes (read as root)")
            }),
        );
    }
    let tail = if not_read.is_empty() {
        String::new()
    } else {
        format!("; not read: {not_read}")
    };
    Outcome::pass(format!(
        "no acs redirect on {judged} pcie switch port(s) above the gpus and rdma nics{tail}"
    ))
}
