//! rdma.roce_config: on Ethernet-link-layer (RoCE) ports, a RoCE v2 GID, an up netdev and one
//! MTU per link layer. The checks every port gets stay in the parent; this one reads the
//! RoCE-only files (GID table, netdevs).

use super::*;

pub(super) fn roce_config(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut evidence = Vec::new();
    let mut roce = 0;
    for (d, p) in ports(facts).filter(|(_, p)| p.is_roce()) {
        roce += 1;
        let gid_table_unread = not_read(p, "gid_attrs/types")
            || not_read(p, "gid_attrs/ndevs")
            || p.problems
                .iter()
                .any(|e| e.path.contains("/gid_attrs/ndevs/"));
        if !p.gid_types.iter().any(|t| t == "RoCE v2") && !not_read(p, "gid_attrs/types") {
            fails.push(format!("{} has no roce v2 gid", port_label(d, p)));
            evidence.push(
                Evidence::new(
                    port_path(d, p, "gid_attrs/types"),
                    if p.gid_types.is_empty() {
                        "no gid".to_string()
                    } else {
                        p.gid_types.join(", ")
                    },
                )
                .expected("RoCE v2"),
            );
        }
        match &p.netdev {
            Some(nd) if nd.operstate.is_none() && not_read(p, "operstate") => {}
            Some(nd) if nd.operstate.as_deref() != Some("up") => {
                fails.push(format!(
                    "{} netdev {} is {}",
                    port_label(d, p),
                    nd.name,
                    nd.operstate.as_deref().unwrap_or("unknown")
                ));
                evidence.push(
                    Evidence::new(
                        format!("{}/{}/operstate", rdma::CLASS_NET, nd.name),
                        nd.operstate.clone().unwrap_or_default(),
                    )
                    .expected("up"),
                );
            }
            None if gid_table_unread => {}
            None => {
                fails.push(format!("{} has no netdev", port_label(d, p)));
                evidence.push(
                    Evidence::new(port_path(d, p, "gid_attrs/ndevs"), "none")
                        .expected("the port's netdev"),
                );
            }
            _ => {}
        }
    }
    // One MTU per link layer across the RDMA netdevs (IPoIB 4092 and Ethernet 9000 differ by design).
    let mut mtus: BTreeMap<(String, u32), Vec<String>> = BTreeMap::new();
    for (_, p) in ports(facts) {
        if let (Some(nd), Some(layer)) = (&p.netdev, &p.link_layer)
            && let Some(mtu) = nd.mtu
        {
            mtus.entry((layer.clone(), mtu))
                .or_default()
                .push(nd.name.clone());
        }
    }
    let mut per_layer: BTreeMap<&str, Vec<(u32, &Vec<String>)>> = BTreeMap::new();
    for ((layer, mtu), names) in &mtus {
        per_layer
            .entry(layer.as_str())
            .or_default()
            .push((*mtu, names));
    }
    for (layer, variants) in per_layer.iter().filter(|(_, v)| v.len() > 1) {
        let text: Vec<String> = variants
            .iter()
            .map(|(m, n)| format!("mtu {m} on {}", n.join(" ")))
            .collect();
        warns.push(format!(
            "{layer} rdma netdevs use different mtus: {}",
            text.join("; ")
        ));
        evidence.push(Evidence::new(rdma::CLASS_NET, text.join("; ")).expected("one mtu"));
    }
    if roce == 0 && warns.is_empty() {
        return Outcome::skip("no roce ports");
    }
    let hint = "give the interface its ip address (gids come from it) and `ip link set <if> up`; set one mtu on all rdma interfaces (`ip link set <if> mtu 9000`)";
    if !fails.is_empty() {
        fails.extend(warns);
        return Outcome::fail(fails.join("; "))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::FixConfig);
    }
    if !warns.is_empty() {
        return Outcome::warn(warns.join("; "))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::FixConfig);
    }
    Outcome::pass(format!(
        "{roce} roce port(s) with a roce v2 gid and an up netdev"
    ))
}
