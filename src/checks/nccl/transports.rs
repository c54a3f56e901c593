//! The transports NCCL chose, from its `NCCL_DEBUG=INFO` lines (reference/nccl.md §9, §10),
//! against what the node has: `nccl.socket_fallback`, `nccl.gpudirect_rdma`,
//! `nccl.p2p_transport`, `nccl.nvls`. The same lines come from nccl-tests and from any NCCL
//! application, so these checks judge both.

use super::{collective_name, each_run, env_setting, judging_profile, needs_info, quote};
use crate::answers::nccl::NcclRun;
use crate::answers::nccl::{LogKind, NcclLog};
use crate::answers::nvml::Reading;
use crate::checks::{Context, Outcome};
use crate::report::{Action, Evidence};

/// The node has (or should have) RDMA: devices in sysfs (the rdma layer's facts), or the
/// profile expects ports.
pub(super) fn rdma_expected(ctx: &Context<'_>, run: &NcclRun) -> (bool, Option<Evidence>) {
    if let Ok(facts) = ctx.rdma()
        && !facts.devices.is_empty()
    {
        let devices = &facts.devices;
        // `4: ACTIVE` (sysfs.md §8).
        let active = devices
            .iter()
            .filter(|d| {
                d.ports
                    .iter()
                    .any(|p| p.state.as_ref().is_some_and(|(n, _)| *n == 4))
            })
            .count();
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).take(4).collect();
        return (
            true,
            Some(Evidence::new(
                "sys/class/infiniband",
                format!(
                    "{} rdma device(s) ({}{}), {active} with an active port",
                    devices.len(),
                    names.join(", "),
                    if devices.len() > 4 { ", ..." } else { "" }
                ),
            )),
        );
    }
    match judging_profile(ctx, run).and_then(|p| p.rdma_ports.map(|n| (n, p.name))) {
        Some((n, name)) if n > 0 => (
            true,
            Some(Evidence::new(
                "profile",
                format!("profile {name} expects {n} rdma port(s)"),
            )),
        ),
        _ => (false, None),
    }
}

/// Why NCCL used sockets, from its own lines (§10, §13).
fn socket_cause(run: &NcclRun) -> (String, String, Vec<Evidence>) {
    let log = &run.log;
    let t = &log.transports;
    if let Some(q) = &log.ibverbs_missing {
        return (
            "libibverbs is missing where nccl runs".to_string(),
            "install rdma-core (libibverbs1, libmlx5) in the container image".to_string(),
            vec![quote(run, q)],
        );
    }
    if let Some(v) = env_setting(run, "NCCL_IB_DISABLE").filter(|v| v.ends_with("=1")) {
        return (
            format!("{v} is set"),
            "unset NCCL_IB_DISABLE".to_string(),
            vec![Evidence::new("environment", v)],
        );
    }
    if let Some(q) = &t.ib_no_device {
        // NCCL tries the net plugin, then NET/IB, then sockets (src/net.cc `ncclNetInit`): a
        // plugin that was not found or refused, then no HCA, leaves TCP.
        let plugin = if t.plugin_absent {
            "no net plugin (libnccl-net.so), then "
        } else {
            ""
        };
        return (
            format!("{plugin}nccl found no usable hca"),
            "mount /dev/infiniband into the container (rdma device plugin, or privileged) and check `ibstat` for an ACTIVE port; check NCCL_IB_HCA names a real device".to_string(),
            vec![quote(run, q)],
        );
    }
    (
        "no NET/IB line explains it".to_string(),
        "check that /dev/infiniband is in the container, rdma-core is installed and a port is ACTIVE (`ibstat`); rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET".to_string(),
        Vec::new(),
    )
}

pub(super) fn socket_fallback(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        if let Some(o) = needs_info(log) {
            return o;
        }
        let t = &log.transports;
        let (rdma, rdma_ev) = rdma_expected(ctx, run);
        let socket = t.net.get("Socket").map_or(0, |n| n.channels);
        let total = t.net_channels();
        let plugin = match &t.plugin {
            Some((name, _)) => format!("net plugin {name}"),
            None => "internal net".to_string(),
        };
        let chosen = t.network.as_ref().map(|(n, _)| n.as_str());
        // NCCL before 2.6 prints no `Using network` line: `NET/IB : No device found.` and then
        // `NET/Socket : Using …` (the socket transport initialised) say the same.
        let socket_chosen = chosen == Some("Socket")
            || (chosen.is_none() && t.ib_no_device.is_some() && t.socket_interfaces.is_some());
        if socket > 0 || (total == 0 && socket_chosen) {
            let (cause, hint, mut evidence) = socket_cause(run);
            if let Some(q) = t.net.get("Socket").and_then(|n| n.example.as_ref()) {
                evidence.insert(0, quote(run, q));
            } else if let Some((_, q)) = &t.network {
                evidence.insert(0, quote(run, q));
            }
            if let Some(q) = &t.socket_interfaces {
                evidence.push(quote(run, q));
            }
            if ctx.source().kind() == crate::report::SourceKind::Files {
                // `gpudoctor judge`: no node to say whether RDMA was there to use. NCCL fell
                // back to sockets (the plugin refused or found no device, then NET/IB found no
                // HCA): on a GPU cluster that is the fallback to act on, said as such.
                return Outcome::warn(format!(
                    "socket fallback: network traffic over tcp (NET/Socket) because {cause}; the pasted files do not say whether the node has rdma devices"
                ))
                .evidence_all(evidence)
                .hint(hint)
                .action(Action::FixConfig);
            }
            if !rdma {
                return Outcome::pass(format!(
                    "network traffic over tcp (NET/Socket): this node has no rdma device ({cause})"
                ));
            }
            evidence.extend(rdma_ev);
            if socket > 0 {
                return Outcome::fail(format!(
                    "{socket} of {total} network channel(s) over tcp sockets (NET/Socket) on a node with rdma: {cause}"
                ))
                .evidence_all(evidence)
                .hint(hint)
                .action(Action::FixConfig);
            }
            return Outcome::warn(format!(
                "nccl chose NET/Socket on a node with rdma ({cause}): multi-node jobs here would run over tcp"
            ))
            .evidence_all(evidence)
            .hint(hint)
            .action(Action::FixConfig);
        }
        if total > 0 {
            let nets: Vec<String> = t
                .net
                .iter()
                .map(|(name, n)| format!("NET/{name} ({} channel(s))", n.channels))
                .collect();
            return Outcome::pass(format!(
                "network traffic over {} via {plugin}",
                nets.join(", ")
            ));
        }
        match chosen {
            Some(net) => Outcome::pass(format!(
                "no network traffic in this run ({} node(s)); nccl's network is {net} via {plugin}",
                log.nodes().max(1)
            )),
            None => Outcome::skip("no network traffic and no `Using network` line in this run"),
        }
    })
}

fn peermem_loaded(ctx: &Context<'_>) -> Option<&'static str> {
    let modules = ctx.modules().as_ref().ok()?;
    ["nvidia_peermem", "nv_peer_mem"]
        .into_iter()
        .find(|m| modules.get(m).is_some_and(|m| m.is_live()))
}

pub(super) fn gpudirect_rdma(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        if let Some(o) = needs_info(log) {
            return o;
        }
        let t = &log.transports;
        let rdma_nets: Vec<(&String, &crate::answers::nccl::NetUse)> = t
            .net
            .iter()
            .filter(|(name, _)| name.as_str() != "Socket")
            .collect();
        let channels: u64 = rdma_nets.iter().map(|(_, n)| n.channels).sum();
        let gdr: u64 = rdma_nets.iter().map(|(_, n)| n.gdr_channels).sum();
        if channels == 0 {
            return Outcome::skip("no rdma network traffic in this run");
        }
        if gdr == channels {
            return Outcome::pass(format!(
                "gpudirect rdma on all {channels} rdma network channel(s)"
            ));
        }
        let peermem = peermem_loaded(ctx);
        let platform = judging_profile(ctx, run)
            .filter(|p| p.rdma_ports.is_some_and(|n| n > 0))
            .map(|p| p.name);
        let should =
            peermem.is_some() || t.dmabuf_available || t.gdr_enabled_hcas > 0 || platform.is_some();
        let missing = channels - gdr;
        let mut evidence: Vec<Evidence> = rdma_nets
            .iter()
            .filter_map(|(_, n)| n.example_without_gdr.as_ref())
            .take(2)
            .map(|q| quote(run, q).expected("…/GDRDMA"))
            .collect();
        if !should {
            return Outcome::pass(format!(
                "{missing} of {channels} rdma channel(s) without gpudirect rdma: no nvidia_peermem, no dma-buf, no platform expectation"
            ));
        }
        let gdr_vars: Vec<String> = ["NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ"]
            .iter()
            .filter_map(|v| env_setting(run, v))
            .collect();
        let (cause, hint) = if !gdr_vars.is_empty() {
            (
                format!("{} overrides nccl's choice", gdr_vars.join(" ")),
                format!(
                    "unset {}",
                    gdr_vars
                        .iter()
                        .map(|v| v.split('=').next().unwrap_or(v))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )
        } else if t.gdr_disabled_hcas > 0 {
            if let Some(q) = &t.gdr_disabled_example {
                evidence.push(quote(run, q));
            }
            (
                "nccl says gpu direct rdma is disabled for the hca (no peer-memory module, no dma-buf)".to_string(),
                "load nvidia_peermem (`modprobe nvidia_peermem`; GPU Operator: driver.rdma.enabled=true) or use a dma-buf capable kernel with the open driver".to_string(),
            )
        } else {
            (
                "the gpu↔nic distance is beyond NCCL_NET_GDR_LEVEL (default PXB)".to_string(),
                "check each gpu's nearest nic (`gpudoctor topo`, topology layer); keep gpu and nic under one pcie switch".to_string(),
            )
        };
        match (peermem, t.dmabuf_available, &platform) {
            (Some(m), _, _) => evidence.push(Evidence::new("proc/modules", format!("{m} loaded"))),
            (None, true, _) => {}
            (None, false, Some(name)) => evidence.push(
                Evidence::new("proc/modules", "no nvidia_peermem")
                    .expected(format!("gpudirect rdma on profile {name}")),
            ),
            (None, false, None) => {}
        }
        Outcome::warn(format!(
            "{missing} of {channels} rdma network channel(s) without gpudirect rdma: data staged through host memory ({cause})"
        ))
        .evidence_all(evidence)
        .hint(hint)
        .action(Action::FixConfig)
    })
}

/// GPUs here have NVLink: NVML reports active links, or the profile expects them.
fn nvlink_present(ctx: &Context<'_>, run: &NcclRun) -> Option<String> {
    let nvml = ctx.nvml();
    let active = nvml
        .devices
        .iter()
        .filter(|d| matches!(&d.nvlinks, Reading::Value(links) if links.iter().any(|l| l.active)))
        .count();
    if active > 0 {
        return Some(format!("nvml: {active} gpu(s) with active nvlinks"));
    }
    judging_profile(ctx, run)
        .and_then(|p| p.nvlinks_per_gpu.filter(|n| *n > 0).map(|n| (n, p.name)))
        .map(|(n, name)| format!("profile {name}: {n} nvlinks per gpu"))
}

pub(super) fn p2p_transport(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        if let Some(o) = needs_info(log) {
            return o;
        }
        let t = &log.transports;
        let nodes = log.nodes().max(1);
        let intra_net = if nodes == 1 { t.net_channels() } else { 0 };
        let p2p = t.p2p.channels;
        let shm = t.shm.channels;
        if p2p + shm + intra_net == 0 {
            return Outcome::skip("no intra-node channel in this run (one gpu per node?)");
        }
        let flavours: Vec<String> = t.p2p_kinds.keys().cloned().collect();
        let Some(nvlink) = nvlink_present(ctx, run) else {
            return Outcome::pass(format!(
                "intra-node: {p2p} p2p, {shm} shm channel(s); no nvlink on this node"
            ));
        };
        if shm == 0 && intra_net == 0 {
            return Outcome::pass(format!(
                "all {p2p} intra-node channel(s) over p2p ({})",
                flavours.join(", ")
            ));
        }
        let vars: Vec<String> = ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"]
            .iter()
            .filter_map(|v| env_setting(run, v))
            .collect();
        let mut evidence = Vec::new();
        if let Some(q) = &t.shm.example {
            evidence.push(quote(run, q).expected("via P2P/…"));
        }
        if intra_net > 0
            && let Some(q) = t.net.values().find_map(|n| n.example.as_ref())
        {
            evidence.push(quote(run, q).expected("via P2P/…"));
        }
        evidence.push(Evidence::new("nvlink", nvlink));
        let what = if intra_net > 0 {
            format!("{intra_net} intra-node channel(s) through the network")
        } else {
            format!("{shm} intra-node channel(s) through host shared memory (SHM)")
        };
        let (cause, hint, action) = if vars.is_empty() {
            (
                "p2p unavailable".to_string(),
                "check `gpudoctor check --only nvlink` (links, fabric manager) and ACS on the pcie switches (topology layer)".to_string(),
                Action::RestartComponent,
            )
        } else {
            (
                format!("{} set", vars.join(" ")),
                format!(
                    "unset {} unless the run means to bypass nvlink",
                    vars.iter()
                        .map(|v| v.split('=').next().unwrap_or(v))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                Action::FixConfig,
            )
        };
        Outcome::warn(format!(
            "{what}, not p2p/nvlink ({p2p} p2p channel(s)); {cause}"
        ))
        .evidence_all(evidence)
        .hint(hint)
        .action(action)
    })
}

/// NVLS use from the log: `Some(true)` channels > 0, `Some(false)` said absent, `None` silent.
pub(super) fn nvls_used(log: &NcclLog) -> Option<bool> {
    let t = &log.transports;
    match (&t.nvls_channels, &t.nvls_support) {
        (Some((n, _)), _) => Some(*n > 0),
        (None, Some((false, _))) => Some(false),
        (None, Some((true, _))) => None,
        (None, None) => None,
    }
}

pub(super) fn nvls(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |ctx, run| {
        let log = &run.log;
        let Some(profile) = judging_profile(ctx, run) else {
            return Outcome::skip("no platform profile: no nvls expectation");
        };
        if profile.nccl_nvls != Some(true) {
            return Outcome::skip(format!("profile {} expects no nvls", profile.name));
        }
        if run.meta.is_none() && log.kind() == LogKind::Application {
            return Outcome::skip(
                "not an nccl-tests log: nvls is judged on an all_reduce benchmark, an application's collectives are unknown",
            );
        }
        match collective_name(run).as_str() {
            "all_reduce" => {}
            "unknown" => {
                return Outcome::skip(
                    "nvls is judged on all_reduce runs; this log does not say which collective it ran",
                );
            }
            other => {
                return Outcome::skip(format!(
                    "nvls is judged on all_reduce runs, this is {other}"
                ));
            }
        }
        if let Some(o) = needs_info(log) {
            return o;
        }
        let per_node = log.ranks() / log.nodes().max(1);
        if per_node < 2 {
            return Outcome::skip("one gpu per node: nothing for nvls to reduce");
        }
        let t = &log.transports;
        match nvls_used(log) {
            Some(true) => Outcome::pass(format!(
                "nvls in use: {} nvls channel(s)",
                t.nvls_channels.as_ref().map_or(0, |(n, _)| *n)
            )),
            None => Outcome::skip("nccl did not say whether it used nvls (older than 2.17?)"),
            Some(false) => {
                let mut evidence = Vec::new();
                if let Some((_, q)) = &t.nvls_support {
                    evidence.push(quote(run, q).expected("NVLS multicast support is available"));
                }
                if let Some((_, q)) = &t.nvls_channels {
                    evidence.push(quote(run, q).expected("nvls channels > 0"));
                }
                if let Some(q) = &log.nvls_bind_failure {
                    evidence.push(quote(run, q));
                }
                let disabled = env_setting(run, "NCCL_NVLS_ENABLE").filter(|v| v.ends_with("=0"));
                let (cause, hint, action) = match disabled {
                    Some(v) => (
                        format!("{v} set"),
                        "unset NCCL_NVLS_ENABLE".to_string(),
                        Action::FixConfig,
                    ),
                    None => (
                        "nvlink sharp unavailable".to_string(),
                        "check `gpudoctor check --only nvlink` (fabric manager running, fabric trained) and that NCCL ≥ 2.17, CUDA ≥ 12.1 and driver ≥ 530 are in use".to_string(),
                        Action::RestartComponent,
                    ),
                };
                Outcome::warn(format!(
                    "nvls (nvlink sharp) not used, profile {} expects it ({cause}): bandwidth judged against the ring figure",
                    profile.name
                ))
                .evidence_all(evidence)
                .hint(hint)
                .action(action)
            }
        }
    })
}
