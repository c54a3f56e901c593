//! The network between nodes: every RDMA device (HCA firmware and type) and port (state, rate,
//! link layer, GID types, netdev), and every SR-IOV physical function's VF counts. Error
//! counters are left out: they grow on healthy links and belong to the checks' verdicts.

use super::{Facts, list, unreadable};
use crate::checks::Context;

pub(super) fn rdma(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "rdma";
    let rdma = match ctx.rdma() {
        Ok(r) => r,
        Err(err) => {
            facts.put(s, "rdma devices", "class", unreadable(err));
            return;
        }
    };
    if !rdma.class_present {
        facts.put(s, "rdma devices", "class", "absent (no rdma core loaded)");
        return;
    }
    for problem in &rdma.problems {
        facts.put(
            s,
            &format!("rdma file {}", problem.path),
            "read",
            unreadable(problem),
        );
    }
    for d in &rdma.devices {
        let subject = format!("hca {}", d.name);
        let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        facts.put(
            s,
            &subject,
            "pci",
            d.pci.clone().unwrap_or_else(|| "virtual".into()),
        );
        facts.put(s, &subject, "hca type", or_unknown(&d.hca_type));
        facts.put(s, &subject, "firmware", or_unknown(&d.fw_ver));
        if let Some(guid) = &d.node_guid {
            facts.put(s, &subject, "node guid", guid.as_str());
        }
        for p in &d.ports {
            let subject = format!("port {}/{}", d.name, p.port);
            let numbered = |v: &Option<(u32, String)>| {
                v.as_ref()
                    .map(|(n, name)| format!("{n}: {name}"))
                    .unwrap_or_else(|| "unknown".into())
            };
            facts.put(s, &subject, "state", numbered(&p.state));
            facts.put(s, &subject, "phys state", numbered(&p.phys_state));
            facts.put(s, &subject, "rate", or_unknown(&p.rate_text));
            facts.put(s, &subject, "link layer", or_unknown(&p.link_layer));
            if p.is_roce() {
                facts.put(s, &subject, "gid types", list(&p.gid_types));
            }
            if let Some(netdev) = &p.netdev {
                facts.put(s, &subject, "netdev", netdev.name.as_str());
                facts.put(s, &subject, "netdev state", or_unknown(&netdev.operstate));
                if let Some(mtu) = netdev.mtu {
                    facts.put(s, &subject, "mtu", mtu.to_string());
                }
            }
            for problem in &p.problems {
                facts.put(
                    s,
                    &subject,
                    &format!("file {}", problem.path),
                    unreadable(problem),
                );
            }
        }
    }
}

pub(super) fn sriov(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "sriov";
    let sriov = ctx.sriov();
    for pf in &sriov.pfs {
        let subject = format!("pf {}", pf.bdf);
        facts.put(s, &subject, "total vfs", pf.total_vfs.to_string());
        facts.put(s, &subject, "num vfs", pf.num_vfs.to_string());
        facts.put(s, &subject, "vfs present", pf.vfs.len().to_string());
        if pf.rdma {
            let with_rdma = pf.vfs.iter().filter(|vf| vf.rdma_device.is_some()).count();
            facts.put(s, &subject, "vfs with rdma", with_rdma.to_string());
        }
        let drivers: std::collections::BTreeSet<&str> = pf
            .vfs
            .iter()
            .map(|vf| vf.driver.as_deref().unwrap_or("none"))
            .collect();
        if !drivers.is_empty() {
            facts.put(s, &subject, "vf drivers", list(drivers));
        }
    }
    for problem in &sriov.problems {
        facts.put(
            s,
            &format!("sriov file {}", problem.path),
            "read",
            unreadable(problem),
        );
    }
}
