//! SR-IOV layer: do secondary (Multus/SR-IOV) networks line up? Every VF resource the kubelet
//! advertises has VFs behind it, VFs are bound and carry an RDMA device when their PF does, GPUs
//! have VFs on their own socket, and Multus is configured to attach them.
//!
//! Sources: reference/sysfs.md §4 (PF/VF files), kubernetes.md §1 and §3 (allocatable resources,
//! the device-plugin checkpoint). A node without SR-IOV VFs and without VF resources is `skip`.
//!
//! Which kubelet resources are SR-IOV: the SR-IOV network device plugin advertises VFs by PCI
//! address, so a resource whose device ids are PCI addresses is one; a registered resource with
//! no devices at all counts when its name says so (`sriov`, `_vf`, `vf_`), since an empty list
//! carries no ids to recognise.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::pci::is_bdf;
use crate::facts::sriov::SriovFacts;
use crate::report::{Action, Evidence, Layer};

// Multus reads the CNI directory, not sysfs: its own file.
mod multus;
use multus::multus;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "sriov.vfs_enabled",
            layer: Layer::Sriov,
            title: "advertised VF resources have VFs behind them",
            explain: Explain {
                reads: "/sys/bus/pci/devices/*/sriov_{totalvfs,numvfs}, virtfn* links; kubelet pod-resources allocatable and the device-plugin checkpoint; the profile's sriov_vfs",
                expects: "at least the profile's sriov_vfs VFs enabled in total on network PFs (when it sets one; GPU and storage VFs do not count); every SR-IOV resource the kubelet advertises names VFs that exist; no VF resource registered with zero devices",
                why: "a resource with no VFs behind it (the PF was never configured: sriov_numvfs 0) leaves Pods that request it Pending, or scheduled without their secondary network",
                fix: "enable the VFs (`echo N > /sys/bus/pci/devices/<pf>/sriov_numvfs`, or the SriovNetworkNodePolicy of the sriov-network-operator) and restart the sriov device plugin pod",
            },
            // The VF counts and virtfn links it could not read (the other checks judge the VFs
            // this one found).
            run: |ctx| {
                let mut unread = Vec::new();
                vfs_enabled(ctx, &mut unread)
                    .with_unread(ctx.sriov().problems.iter().chain(&unread))
            },
        },
        CheckDef {
            code: "sriov.vf_binding",
            layer: Layer::Sriov,
            title: "VFs are bound and have their RDMA device",
            explain: Explain {
                reads: "/sys/bus/pci/devices/<vf>/{driver,infiniband,net}",
                expects: "every VF bound to a driver; a VF of an RDMA PF has an RDMA device",
                why: "an unbound VF cannot be handed to a Pod; a VF without its RDMA device gives the Pod a plain netdev and NCCL falls back to TCP",
                fix: "bind the VF (`echo <vf> > /sys/bus/pci/drivers/mlx5_core/bind`, or vfio-pci for VMs) and load mlx5_ib; check the SriovNetworkNodePolicy's isRdma",
            },
            run: vf_binding,
        },
        CheckDef {
            code: "sriov.vf_locality",
            layer: Layer::Sriov,
            title: "GPUs have VFs on their own socket",
            explain: Explain {
                reads: "GPU and PF numa_node (a VF inherits its PF's), VFs per PF",
                expects: "on every NUMA node with GPUs, VFs from a PF on that node",
                why: "a Pod's GPU and its secondary-network VF on different sockets send every RDMA transfer across the inter-socket link (SYS), halving GPUDirect bandwidth",
                fix: "enable VFs on the PF local to each GPU socket (SriovNetworkNodePolicy per NIC), and let the Topology Manager align them (single-numa-node)",
            },
            run: vf_locality,
        },
        CheckDef {
            code: "sriov.pod_interface",
            layer: Layer::Sriov,
            title: "inside a Pod: the secondary interface is a VF with an RDMA device",
            explain: Explain {
                reads: "the Pod's /sys/class/net/net<N> (Multus names secondary interfaces net1, net2, ...; --pod-interface names others), their device link, the VF's physfn link and infiniband/ directory; KUBERNETES_SERVICE_HOST or the service-account mount to know it runs in a Pod",
                expects: "every net<N> interface (or each one --pod-interface names, which must exist) backed by an SR-IOV VF that has an RDMA device",
                why: "a secondary interface that is a plain veth or a VF without its RDMA device gives NCCL a TCP path only: the job runs, at a fraction of the speed",
                fix: "check the Pod's k8s.v1.cni.cncf.io/networks annotation and its NetworkAttachmentDefinition (sriov CNI, not macvlan/ipvlan), request the VF resource in the Pod spec, and set isRdma: true in the SriovNetworkNodePolicy",
            },
            run: pod_interface,
        },
        CheckDef {
            code: "sriov.multus",
            layer: Layer::Sriov,
            title: "Multus is configured for secondary networks",
            explain: Explain {
                reads: "/etc/cni/net.d/*.{conf,conflist,json} in the order containerd reads them (sorted by name; the first that loads is the default network)",
                expects: "when the node has SR-IOV VFs or VF resources: the default network (the first config file by name) loads and is Multus (`multus` or `multus-shim`), and a `clusterNetwork` path resolves (a file, or a directory with a .conf/.conflist; a network name is a NetworkAttachmentDefinition the node cannot see); a Multus config that sorts after another network's (shadowed), is not valid JSON, or names a clusterNetwork path that does not resolve fails",
                why: "without Multus the Pod gets only its primary interface: the VF resource is allocated but never attached; the runtime uses only the first config by name, so a Multus file behind `00-calico.conflist` is never called, and a file that does not load before the first good one stops containerd from setting up any pod network",
                fix: "install Multus (the thick-plugin DaemonSet writes 00-multus.conf into /etc/cni/net.d) and create the NetworkAttachmentDefinition the Pods reference",
            },
            run: multus,
        },
    ]
}

/// SR-IOV resources the kubelet knows: name → (device ids, where it was learnt).
fn advertised(ctx: &Context<'_>) -> BTreeMap<String, (BTreeSet<String>, &'static str)> {
    let mut out: BTreeMap<String, (BTreeSet<String>, &'static str)> = BTreeMap::new();
    if let Some(alloc) = ctx.pod_resources().allocatable_value() {
        for dev in &alloc.devices {
            if !dev.device_ids.is_empty() && dev.device_ids.iter().all(|id| is_bdf(id)) {
                let entry = out
                    .entry(dev.resource_name.clone())
                    .or_insert_with(|| (BTreeSet::new(), "pod-resources allocatable"));
                entry.0.extend(dev.device_ids.iter().cloned());
            }
        }
    }
    if let Ok(Some(checkpoint)) = &ctx.kubelet().checkpoint {
        for (name, ids) in &checkpoint.registered {
            let by_ids = !ids.is_empty() && ids.iter().all(|id| is_bdf(id));
            let lower = name.to_ascii_lowercase();
            let by_name = ids.is_empty()
                && (lower.contains("sriov") || lower.contains("_vf") || lower.contains("vf_"));
            if (by_ids || by_name) && !out.contains_key(name) {
                out.insert(
                    name.clone(),
                    (ids.iter().cloned().collect(), "device-plugin checkpoint"),
                );
            }
        }
    }
    out
}

/// Does SR-IOV apply here? `Err` is the finished skip.
fn applies(
    facts: &SriovFacts,
    advertised: &BTreeMap<String, (BTreeSet<String>, &'static str)>,
) -> Result<(), Outcome> {
    let enabled = facts.pfs.iter().any(|pf| pf.num_vfs > 0);
    if !enabled && advertised.is_empty() {
        let capable = facts.pfs.len();
        return Err(Outcome::skip(if capable == 0 {
            "no sr-iov capable functions and no vf resources".to_string()
        } else {
            format!("{capable} sr-iov capable function(s), no vfs enabled and none advertised")
        }));
    }
    Ok(())
}

/// `unread`: advertised VFs that are on the PCI bus but were not read (their PF could not be:
/// a partial capture), which are not "VFs that do not exist".
fn vfs_enabled(ctx: &Context<'_>, unread: &mut Vec<crate::answers::FactError>) -> Outcome {
    // Without the PCI bus's listing no VF is known to exist or not.
    if let Err(err) = ctx.pci() {
        return Outcome::unreadable(err);
    }
    let facts = ctx.sriov();
    let adv = advertised(ctx);
    // The profile's `sriov_vfs`: a node meant to have VFs is judged even when none are enabled
    // and nothing is advertised (the PF was never configured and the plugin found nothing).
    let expected = ctx
        .profile()
        .and_then(|p| p.sriov_vfs.filter(|n| *n > 0).map(|n| (n, p.name.as_str())));
    if expected.is_none()
        && let Err(skip) = applies(facts, &adv)
    {
        return skip;
    }
    let existing: BTreeSet<&str> = facts.vfs().map(|(_, vf)| vf.bdf.as_str()).collect();
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    // `sriov_vfs` counts network VFs (a SriovNetworkNodePolicy's numVfs): a vGPU host's GPU
    // VFs or an NVMe drive's must not make up for missing NIC VFs.
    let network: BTreeSet<&str> = match ctx.pci() {
        Ok(pci) => pci
            .functions
            .iter()
            .filter(|f| f.class >> 16 == 0x02)
            .map(|f| f.bdf.as_str())
            .collect(),
        Err(_) => BTreeSet::new(),
    };
    let network_pfs: Vec<_> = facts
        .pfs
        .iter()
        .filter(|pf| network.contains(pf.bdf.as_str()))
        .collect();
    let enabled: u32 = network_pfs.iter().map(|pf| pf.num_vfs).sum();
    if let Some((want, name)) = expected
        && enabled < want
    {
        let per_pf: Vec<String> = network_pfs
            .iter()
            .map(|pf| format!("{} {}/{}", pf.bdf, pf.num_vfs, pf.total_vfs))
            .collect();
        fails.push(format!(
            "{enabled} network vf(s) enabled, profile {name} expects {want} ({})",
            if per_pf.is_empty() {
                "no sr-iov capable network function".to_string()
            } else {
                format!("sriov_numvfs/totalvfs {}", per_pf.join(", "))
            }
        ));
        evidence.push(
            Evidence::new(
                "sys/bus/pci/devices/*/sriov_numvfs",
                if per_pf.is_empty() {
                    "no sr-iov pf".to_string()
                } else {
                    per_pf.join(", ")
                },
            )
            .expected(format!("{want} vfs in total (profile {name} sriov_vfs)")),
        );
    }
    for (name, (ids, from)) in &adv {
        if ids.is_empty() {
            let numvfs: Vec<String> = facts
                .pfs
                .iter()
                .map(|pf| format!("{} {}", pf.bdf, pf.num_vfs))
                .collect();
            fails.push(format!(
                "{name} is advertised with no vfs behind it ({} sr-iov pf(s), sriov_numvfs {})",
                facts.pfs.len(),
                if numvfs.is_empty() {
                    "—".to_string()
                } else {
                    facts
                        .pfs
                        .iter()
                        .map(|p| p.num_vfs.to_string())
                        .collect::<Vec<_>>()
                        .join("/")
                }
            ));
            evidence.push(
                Evidence::new(*from, format!("{name}: no devices")).expected("the vfs of its pfs"),
            );
            evidence.push(
                Evidence::new(
                    "sys/bus/pci/devices/*/sriov_numvfs",
                    if numvfs.is_empty() {
                        "no sr-iov pf".to_string()
                    } else {
                        numvfs.join(", ")
                    },
                )
                .expected("> 0"),
            );
            continue;
        }
        let mut missing: Vec<&String> = ids
            .iter()
            .filter(|id| !existing.contains(id.as_str()))
            .collect();
        // On the bus, but its PF was not read (a partial capture lacks the PF's files or the
        // PF itself): not judged, named — only a VF its read PF does not list is missing.
        missing.retain(|id| {
            let physfn = format!("{}/{id}/physfn", crate::facts::pci::PCI_DEVICES);
            if !ctx
                .source()
                .exists(&format!("{}/{id}", crate::facts::pci::PCI_DEVICES))
            {
                return true;
            }
            let pf = ctx
                .source()
                .canonical(&physfn)
                .ok()
                .and_then(|p| p.rsplit('/').next().map(str::to_string));
            let why = match pf {
                Some(pf) if facts.pfs.iter().any(|p| p.bdf == pf) => return true,
                Some(pf) => {
                    // Name the PF's SR-IOV files that are not there: what made it no PF.
                    let gone: Vec<String> = ["sriov_totalvfs", "sriov_numvfs"]
                        .iter()
                        .map(|f| format!("{}/{pf}/{f}", crate::facts::pci::PCI_DEVICES))
                        .filter(|p| !ctx.source().exists(p))
                        .collect();
                    if gone.is_empty() {
                        format!("present, but its pf {pf} could not be read")
                    } else {
                        format!(
                            "present, but its pf {pf} could not be read ({} missing)",
                            gone.join(", ")
                        )
                    }
                }
                None => "present, but its physfn link does not resolve".to_string(),
            };
            unread.push(crate::answers::FactError {
                path: physfn,
                message: why,
            });
            false
        });
        if !missing.is_empty() {
            let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            fails.push(format!(
                "{name} names {} vf(s) that do not exist: {}",
                missing.len(),
                list.join(" ")
            ));
            evidence.push(
                Evidence::new(*from, format!("{name}: {}", list.join(" ")))
                    .expected("vfs present under their pf's virtfn links"),
            );
        }
    }
    if !fails.is_empty() {
        return Outcome::fail(fails.join("; "))
            .evidence_all(evidence)
            .hint("enable the vfs (`echo <n> > /sys/bus/pci/devices/<pf>/sriov_numvfs` or the SriovNetworkNodePolicy), then restart the sriov-network-device-plugin pod so it re-advertises them")
            .action(Action::FixConfig);
    }
    let vfs = existing.len();
    let names: Vec<&str> = adv.keys().map(String::as_str).collect();
    Outcome::pass(format!(
        "{vfs} vf(s) on {} pf(s){}{}",
        facts.pfs.iter().filter(|p| p.num_vfs > 0).count(),
        if names.is_empty() {
            String::new()
        } else {
            format!(", advertised as {}", names.join(", "))
        },
        match expected {
            Some((want, name)) => format!(", profile {name} expects {want}"),
            None => String::new(),
        }
    ))
}

fn vf_binding(ctx: &Context<'_>) -> Outcome {
    let facts = ctx.sriov();
    let adv = advertised(ctx);
    if let Err(skip) = applies(facts, &adv) {
        return skip;
    }
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    let mut count = 0;
    for (pf, vf) in facts.vfs() {
        count += 1;
        if vf.driver.is_none() {
            fails.push(format!(
                "vf {} of {} is not bound to a driver",
                vf.bdf, pf.bdf
            ));
            evidence.push(
                Evidence::new(format!("sys/bus/pci/devices/{}/driver", vf.bdf), "absent")
                    .expected("mlx5_core (or vfio-pci)"),
            );
        } else if pf.rdma && vf.rdma_device.is_none() && vf.driver.as_deref() != Some("vfio-pci") {
            fails.push(format!(
                "vf {} of rdma pf {} has no rdma device",
                vf.bdf, pf.bdf
            ));
            evidence.push(
                Evidence::new(
                    format!("sys/bus/pci/devices/{}/infiniband", vf.bdf),
                    "absent",
                )
                .expected("an rdma device"),
            );
        }
    }
    if count == 0 {
        return Outcome::skip("no vfs enabled");
    }
    if fails.is_empty() {
        return Outcome::pass(format!(
            "{count} vf(s) bound, rdma devices present where their pf has one"
        ));
    }
    Outcome::fail(fails.join("; "))
        .evidence_all(evidence)
        .hint("bind the vf (`echo <vf> > /sys/bus/pci/drivers/mlx5_core/bind`), load mlx5_ib, and set isRdma: true in the SriovNetworkNodePolicy")
        .action(Action::FixConfig)
}

fn vf_locality(ctx: &Context<'_>) -> Outcome {
    let facts = ctx.sriov();
    let adv = advertised(ctx);
    if let Err(skip) = applies(facts, &adv) {
        return skip;
    }
    let gpus: Vec<(String, Option<u32>)> = match ctx.pci() {
        Ok(pci) => pci
            .nvidia_gpus()
            .map(|g| (g.bdf.clone(), g.numa_node))
            .collect(),
        Err(err) => return Outcome::unreadable(err),
    };
    if gpus.is_empty() {
        return Outcome::skip("no gpus on this node");
    }
    // VFs per NUMA node (a VF lives on its PF's node).
    let mut vfs_on: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for pf in facts.pfs.iter().filter(|pf| !pf.vfs.is_empty()) {
        if let Some(node) = pf.numa_node {
            vfs_on.entry(node).or_default().push(pf.bdf.as_str());
        }
    }
    if vfs_on.is_empty() {
        return Outcome::skip("no vf with a known numa node");
    }
    let mut gpu_nodes: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (bdf, node) in &gpus {
        if let Some(node) = node {
            gpu_nodes.entry(*node).or_default().push(bdf.as_str());
        }
    }
    if gpu_nodes.is_empty() {
        return Outcome::skip("gpu numa nodes unknown (numa_node -1; see topology.numa_affinity)");
    }
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    for (node, gpus_here) in &gpu_nodes {
        if vfs_on.contains_key(node) {
            continue;
        }
        let elsewhere: Vec<String> = vfs_on
            .iter()
            .map(|(n, pfs)| format!("numa {n} (pf {})", pfs.join(" ")))
            .collect();
        fails.push(format!(
            "gpu(s) {} on numa {node} have no local vf; vfs only on {}",
            gpus_here.join(" "),
            elsewhere.join(", ")
        ));
        evidence.push(
            Evidence::new(
                "sys/bus/pci/devices/*/numa_node",
                format!(
                    "gpus on numa {node}, vfs on {}",
                    vfs_on
                        .keys()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .expected(format!("vfs on numa {node}")),
        );
    }
    if fails.is_empty() {
        return Outcome::pass(format!(
            "vfs on every gpu numa node ({})",
            gpu_nodes
                .keys()
                .map(|n| format!("numa {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Outcome::fail(fails.join("; "))
        .evidence_all(evidence)
        .hint("enable vfs on the pf local to each gpu socket (a SriovNetworkNodePolicy per nic) and set the kubelet's topologyManagerPolicy to single-numa-node so pods get aligned gpu and vf")
        .action(Action::FixConfig)
}

/// Multus names the interfaces it attaches `net1`, `net2`, ... unless the network selection
/// names one (`--pod-interface` then says which).
fn is_secondary_interface(name: &str) -> bool {
    name.strip_prefix("net")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

fn pod_interface(ctx: &Context<'_>) -> Outcome {
    let pod = crate::facts::toolkit::gather_pod_context(ctx.source(), ctx.env());
    if !pod.in_pod() {
        return Outcome::skip("not running inside a pod");
    }
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    let mut good = Vec::new();
    // `--pod-interface NAME`: the interfaces the NetworkAttachmentDefinition names
    // (`sriov-net@ib0`); each must exist. Without it, Multus's default names.
    let named = ctx.pod_interfaces();
    let names: Vec<String> = if named.is_empty() {
        let names = match ctx
            .source()
            .list_dir("sys/class/net", &is_secondary_interface)
        {
            Ok(names) => names,
            Err(err) if err.is_missing() => Vec::new(),
            Err(err) => return Outcome::unreadable(&err.into()),
        };
        if names.is_empty() {
            return Outcome::skip(
                "no secondary interface (net1, net2, ...) in this pod; name others with --pod-interface",
            );
        }
        names
    } else {
        let mut present = Vec::new();
        for name in named {
            let path = format!("sys/class/net/{name}");
            if name.is_empty() || name.contains('/') || !ctx.source().exists(&path) {
                fails.push(format!("{name} is not an interface in this pod"));
                evidence.push(
                    Evidence::new(path, "absent")
                        .expected("the secondary interface named by --pod-interface"),
                );
            } else {
                present.push(name.clone());
            }
        }
        present
    };
    for name in &names {
        let device = format!("sys/class/net/{name}/device");
        let bdf = ctx
            .source()
            .canonical(&device)
            .ok()
            .and_then(|p| p.rsplit('/').next().map(str::to_string))
            .filter(|b| is_bdf(b));
        let Some(bdf) = bdf else {
            fails.push(format!(
                "{name} is not backed by a pci function (a veth or macvlan, not an sr-iov vf)"
            ));
            evidence.push(Evidence::new(device, "no pci device").expected("an sr-iov vf"));
            continue;
        };
        let dir = format!("sys/bus/pci/devices/{bdf}");
        if !ctx.source().exists(&format!("{dir}/physfn")) {
            fails.push(format!("{name} is backed by {bdf}, which is not a vf"));
            evidence.push(
                Evidence::new(format!("{dir}/physfn"), "absent").expected("a vf (physfn link)"),
            );
            continue;
        }
        let rdma = ctx
            .source()
            .read_dir(&format!("{dir}/infiniband"))
            .unwrap_or_default();
        match rdma.first() {
            Some(dev) => good.push(format!("{name} = vf {bdf} with {dev}")),
            None => {
                fails.push(format!("{name} (vf {bdf}) has no rdma device"));
                evidence.push(
                    Evidence::new(format!("{dir}/infiniband"), "absent").expected("an rdma device"),
                );
            }
        }
    }
    if fails.is_empty() {
        return Outcome::pass(good.join("; "));
    }
    Outcome::fail(fails.join("; "))
        .evidence_all(evidence)
        .hint("check the pod's k8s.v1.cni.cncf.io/networks annotation and its NetworkAttachmentDefinition (sriov cni), request the vf resource in the pod spec, and set isRdma: true in the SriovNetworkNodePolicy")
        .action(Action::FixConfig)
}
