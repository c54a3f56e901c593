//! RDMA layer: is the network between nodes RDMA-fast? Ports up at the expected rate and link
//! layer, RoCE configured for v2, error counters quiet, the verbs modules and device nodes a Pod
//! needs, and GPUDirect RDMA (nvidia_peermem or dma-buf) on GPU nodes.
//!
//! Sources: reference/sysfs.md §8 (class files, states, rates), §9 (netdevs), §10 (modules and
//! NCCL's GPUDirect probe), §12 (device nodes); profiles.md for expected ports and rates. A node
//! without RDMA devices whose profile expects none makes the layer `skip`.

use std::collections::BTreeMap;

use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::nvidia;
use crate::facts::rdma::{self, RdmaDevice, RdmaFacts, RdmaPort};
use crate::report::{Action, Evidence, Figure, FigureName, Layer};

// GPUDirect and RoCE each read files no other check of the layer reads; the port walk and
// the unread bookkeeping they share stay here.
mod counters;
pub(crate) mod gpudirect;
mod nic_events;
mod peermem_events;
mod perftest_log;
mod roce;
use gpudirect::gpudirect;
use roce::roce_config;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "rdma.devices",
            layer: Layer::Rdma,
            title: "the expected RDMA devices are present",
            explain: Explain {
                reads: "/sys/class/infiniband/*, Mellanox/NVIDIA network functions in /sys/bus/pci/devices; the profile's RDMA port count and link layer",
                expects: "at least the profile's number of ports with its link layer (HGX H100: 8 InfiniBand), and an RDMA device for every ConnectX network function (VFs are sriov.vf_binding's, counted there once)",
                why: "a missing HCA, or one flipped to Ethernet mode, leaves a GPU without its NIC: multi-node collectives fall back to slower paths or fail to start",
                fix: "`ibdev2netdev` / `ibstat` to compare; an HCA bound to mlx5_core without an RDMA device needs mlx5_ib loaded, one without a driver whose probe failed in the kernel log follows rdma.nic_events; a port in the wrong link layer is set with `mlxconfig -d <dev> set LINK_TYPE_P1=1` (IB) and a reboot",
            },
            run: |ctx| devices(ctx).with_unread(unread(ctx, OWN_FILES[0])),
        },
        CheckDef {
            code: "rdma.port_state",
            layer: Layer::Rdma,
            title: "every RDMA port is ACTIVE and LinkUp",
            explain: Explain {
                reads: "/sys/class/infiniband/*/ports/*/{state,phys_state}",
                expects: "state `4: ACTIVE` and phys_state `5: LinkUp`",
                why: "a port that is not up carries no traffic; NCCL either skips the NIC (slower) or fails",
                fix: "Polling: no peer — check the cable, transceiver and switch port; Disabled: enable it (`ibportstate`, or the switch); INIT: no subnet manager has configured it (check opensm/UFM); LinkErrorRecovery or training: a marginal link — reseat or replace the cable",
            },
            run: |ctx| port_state(ctx).with_unread(unread(ctx, &["state", "phys_state"])),
        },
        CheckDef {
            code: "rdma.port_rate",
            layer: Layer::Rdma,
            title: "RDMA ports run at the expected rate",
            explain: Explain {
                reads: "/sys/class/infiniband/*/ports/*/rate; the profile's RDMA rate",
                expects: "the profile's rate (HGX H100: 400 Gb/s NDR), or without a profile the fastest rate among ports of the same link layer",
                why: "a link that trained at HDR instead of NDR halves that NIC's bandwidth; in a ring the slowest link sets everyone's speed",
                fix: "check the cable and transceiver type (NDR needs NDR optics), the switch port speed, and `mlxlink -d <dev>`; reseat or replace the cable",
            },
            run: |ctx| port_rate(ctx).with_unread(unread(ctx, &["rate"])),
        },
        CheckDef {
            code: "rdma.roce_config",
            layer: Layer::Rdma,
            title: "RoCE ports have a RoCE v2 GID and an up netdev",
            explain: Explain {
                reads: "/sys/class/infiniband/*/ports/*/gid_attrs/{types,ndevs}/*, /sys/class/net/<netdev>/{operstate,mtu}",
                expects: "a `RoCE v2` GID on every Ethernet-link-layer port, its netdev `up`, one MTU across the RDMA netdevs of a link layer",
                why: "without a RoCE v2 GID (no IP on the interface) NCCL cannot route RDMA over Ethernet; a down netdev means no link; mismatched MTUs fragment or drop",
                fix: "assign the interface its IP address (the GID table is built from it), `ip link set <if> up`, and set one MTU on all RDMA interfaces (`ip link set <if> mtu 9000`)",
            },
            run: |ctx| {
                roce_config(ctx).with_unread(unread(
                    ctx,
                    &["link_layer", "mtu", "operstate", "types", "ndevs"],
                ))
            },
        },
        CheckDef {
            code: "rdma.error_counters",
            layer: Layer::Rdma,
            title: "RDMA port error counters are not rising",
            explain: Explain {
                reads: "/sys/class/infiniband/*/ports/*/counters/{symbol_error,link_downed,link_error_recovery,port_rcv_errors,excessive_buffer_overrun_errors,local_link_integrity_errors}; with --sample also hw_counters/{out_of_buffer,out_of_sequence,packet_seq_err,local_ack_timeout_err,rnr_nak_retry_err,roce_adp_retrans,roce_slow_restart}; both readings with --sample (the first in .gpudoctor/sample.json of a capture); /proc/uptime",
                expects: "live: with --sample, no counter rising during the window (link_downed or link_error_recovery rising fails: the link dropped or retrained while watched; others warn with their rate); without it, fewer than 1 error per hour of uptime since boot. History: a counter that did not move during the window, or totals below that rate, are reported with their total and not judged. A counter that went back (cleared), vanished, or sits at its saturation maximum is said plainly, never given a negative rate",
                why: "symbol errors and link recoveries are a marginal cable or optic; every retransmission costs bandwidth and latency. A port that had 14 errors months ago is not failing now: only a rate tells a bad link from an old burst",
                fix: "watch the counters with `gpudoctor check --sample 60` or `perfquery` for a few minutes; rising counters mean a cable or transceiver to replace; clear them with `perfquery -x -R` after the fix",
            },
            run: |ctx| {
                counters::error_counters(ctx)
                    .with_unread(unread(ctx, rdma::ERROR_COUNTERS))
                    .noting_unread(&ctx.boot().problems)
            },
        },
        CheckDef {
            code: "rdma.verbs",
            layer: Layer::Rdma,
            title: "verbs modules loaded and device nodes present",
            explain: Explain {
                reads: "/proc/modules (ib_core, ib_uverbs, mlx5_ib), /dev/infiniband/uverbs*",
                expects: "ib_core and ib_uverbs loaded (mlx5_ib for mlx5 devices), one /dev/infiniband/uverbsN per RDMA device",
                why: "libibverbs opens /dev/infiniband/uverbsN: without the node (or the module) a Pod sees no RDMA device and NCCL falls back to TCP sockets",
                fix: "`modprobe ib_uverbs mlx5_ib`; in Pods mount /dev/infiniband (the RDMA shared device plugin or SR-IOV device plugin does this)",
            },
            run: verbs,
        },
        CheckDef {
            code: "rdma.gpudirect",
            layer: Layer::Rdma,
            title: "GPUDirect RDMA is available",
            explain: Explain {
                reads: "/proc/modules (nvidia_peermem, nv_peer_mem), /sys/kernel/mm/memory_peers/nv_mem*/version, /proc/sys/kernel/osrelease, /proc/driver/nvidia/version",
                expects: "on a node with GPUs and RDMA NICs: nvidia_peermem (or legacy nv_peer_mem) loaded, or the dma-buf path (Linux ≥ 5.12 with the open NVIDIA kernel module ≥ 515)",
                why: "without GPUDirect RDMA every inter-node transfer is staged through host memory: NCCL logs `GDRDMA` off and bandwidth drops",
                fix: "`modprobe nvidia_peermem` (make it persistent in /etc/modules-load.d; the GPU Operator sets driver.rdma.enabled=true); dma-buf needs the open kernel module and NCCL ≥ 2.13",
            },
            run: gpudirect,
        },
        CheckDef {
            code: "rdma.firmware",
            layer: Layer::Rdma,
            title: "HCAs of one model run one firmware version",
            explain: Explain {
                reads: "/sys/class/infiniband/*/{hca_type,fw_ver}",
                expects: "one fw_ver per hca_type",
                why: "mixed firmware on identical HCAs is a half-finished update: behaviour and performance differ port by port",
                fix: "update all HCAs of the model to the same firmware (`mlxfwmanager --online -u`), then reset them (`mlxfwreset`) or reboot",
            },
            run: |ctx| firmware(ctx).with_unread(unread(ctx, &["fw_ver"])),
        },
        CheckDef {
            code: "rdma.nic_events",
            layer: Layer::Rdma,
            title: "no NIC probe failure, firmware fault, hot module or flapping port in the kernel log",
            explain: Explain {
                reads: "the kernel log (/dev/kmsg, a capture's kmsg.txt or --kernel-log): mlx5_core/mlx4_core `probe of <bdf> failed with error`, `mlx5_load_one`/`mlx5_init_one failed with error code`, `device's health compromised`, `Health issue observed, firmware internal error`, `Port module event[error]: ... High Temperature`, `Detected insufficient power on the PCIe slot`, `<netdev>: Link down`/`Link up`",
                expects: "no live probe failure or firmware health fault (fail), no live hot module or slot-power warning (warn), fewer than 3 link-downs per port this boot (warn); events before a reboot or before the function was enumerated again are history (warn)",
                why: "a NIC that failed to probe has no RDMA device, so every sysfs check is silent about it while its rail is missing; a firmware fault takes the port away until a reset; a hot module or a flapping link turns into NCCL timeouts and IB errors on the jobs that use the rail",
                fix: "probe or firmware fault: read `dmesg | grep mlx5`, check the firmware (`mlxfwmanager --query`) and the card's seating, reload mlx5_core or reboot, replace the card if it returns; hot module or flaps: reseat or replace the cable or transceiver and check the switch port; slot power: a slot or riser that supplies the card's power",
            },
            run: nic_events::nic_events,
        },
        CheckDef {
            code: "rdma.peermem_events",
            layer: Layer::Rdma,
            title: "the GPUDirect RDMA peer memory client logs no error to act on",
            explain: Explain {
                reads: "the kernel log: nvidia-peermem/nv_mem `nv_get_p2p_free_callback` lines (`ERROR detected invalid context, skipping further processing`, `-- invalid page_table`, `-- invalid dma_mapping`); the nvidia module's version (/sys/module/nvidia/version)",
                expects: "no live `invalid page_table`/`invalid dma_mapping` (warn); `invalid context` only on drivers before R560, where NVIDIA calls it harmless (noted); on R560 or later it warns; lines before a reboot or a driver reload are history (noted)",
                why: "peer memory is how the NIC reaches GPU memory for GPUDirect RDMA; NVIDIA's maintainers say `invalid context` is the print of a mitigation that R560 makes unnecessary, while `invalid page_table` is a driver bug in memory-region clean-up — so one is noise on older drivers and the other a reason to upgrade",
                fix: "upgrade the GPU driver (R560 or later) and nvidia-peermem with it, or use dma-buf for GPUDirect RDMA (open kernel modules, kernel ≥ 5.12); with CUDA errors in the jobs, `nvidia-bug-report.sh` to NVIDIA",
            },
            run: peermem_events::peermem_events,
        },
        CheckDef {
            code: "rdma.perftest_log",
            layer: Layer::Rdma,
            title: "a saved perftest output finished at its port's rate (--perftest-log)",
            explain: Explain {
                reads: "each --perftest-log FILE (a saved ib_write_bw, ib_read_bw or ib_send_bw output: its error lines, result header and rows, ` Device : mlx5_N`); the named device's active port and its rate in /sys/class/infiniband/*/ports/*/rate",
                expects: "no `Couldn't`/`Failed to`/`Unable to` line, whole result rows, and the largest message's BW average ≥ 90 % of the port's rate (the GPUDirect loopback's bar); a server's output without rows warns (one-sided tests print results on the client), a device this node lacks warns (bandwidth not judged)",
                why: "the two-node ib_write_bw everyone runs by hand is the plainest proof that a link carries its rate; read by eye, a 200 Gb/s result on a 400 Gb/s port or a run that died at connect is easy to miss in a ticket",
                fix: "an error line names the step (connect: the server is not listening or a firewall drops the port; modify QP: wrong port or GID index, `-x` for RoCE); a slow run: compare both nodes' port rates and error counters, then each HCA's PCIe link",
            },
            run: perftest_log::perftest_log,
        },
    ]
}

/// Files of one check only; a problem with any other file (a class entry that does not resolve)
/// belongs to `rdma.devices`.
const OWN_FILES: &[&[&str]] = &[
    &["link_layer", "hca_type", "node_guid", "ports"],
    &["state", "phys_state"],
    &["rate"],
    &["mtu", "operstate", "types", "ndevs"],
    rdma::ERROR_COUNTERS,
    &["fw_ver"],
];

/// The RDMA facts' read problems (device-level and per port) about one of `files`; with the
/// devices' own files, also those about no check's file.
fn unread<'c>(ctx: &'c Context<'_>, files: &[&str]) -> Vec<&'c crate::answers::FactError> {
    let Ok(facts) = ctx.rdma() else {
        return Vec::new();
    };
    let generic = files == OWN_FILES[0];
    facts
        .problems
        .iter()
        .chain(ports(facts).flat_map(|(_, p)| p.problems.iter()))
        .filter(|p| {
            let file = p.path.rsplit('/').next().unwrap_or_default();
            files.contains(&file) || (generic && !OWN_FILES.iter().any(|f| f.contains(&file)))
        })
        .collect()
}

/// The RDMA facts, or the finished outcome when none apply.
pub(super) fn rdma_devices<'c>(ctx: &'c Context<'_>) -> Result<&'c RdmaFacts, Outcome> {
    match ctx.rdma() {
        Ok(facts) if facts.devices.is_empty() => Err(Outcome::skip("no rdma devices on this node")),
        Ok(facts) => Ok(facts),
        Err(err) => Err(Outcome::unreadable(err)),
    }
}

/// Was `file` of this port (or a file under it, `gid_attrs/types`) not there, or unreadable?
/// Then what it would say is unknown: the port is not judged on it (the check names the file
/// through its unread list), never judged as if the hardware lacked it.
fn not_read(p: &RdmaPort, file: &str) -> bool {
    p.problems
        .iter()
        .any(|e| e.path.ends_with(&format!("/{file}")))
}

pub(super) fn ports(facts: &RdmaFacts) -> impl Iterator<Item = (&RdmaDevice, &RdmaPort)> {
    facts
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
}

pub(super) fn port_path(d: &RdmaDevice, p: &RdmaPort, file: &str) -> String {
    format!(
        "{}/{}/ports/{}/{file}",
        rdma::CLASS_INFINIBAND,
        d.name,
        p.port
    )
}

pub(super) fn port_label(d: &RdmaDevice, p: &RdmaPort) -> String {
    let netdev = p
        .netdev
        .as_ref()
        .map(|n| format!(", {}", n.name))
        .unwrap_or_default();
    format!(
        "{} port {} ({}{netdev})",
        d.name,
        p.port,
        d.pci.as_deref().unwrap_or("no pci")
    )
}

/// `0000:69:00.1` → `0000:69:00`: the card's slot, without the function number.
fn pci_slot(bdf: &str) -> &str {
    bdf.rsplit_once('.').map_or(bdf, |(slot, _)| slot)
}

/// ConnectX functions that are NICs (vendor 0x15b3, network class 0x02xx) — each should have an
/// RDMA device; the "NIC present, RDMA missing" case of sysfs.md §13.8.
fn mellanox_nics(ctx: &Context<'_>) -> Vec<String> {
    match ctx.pci() {
        Ok(facts) => facts
            .functions
            .iter()
            .filter(|f| f.vendor == 0x15b3 && f.class >> 16 == 0x02)
            .map(|f| f.bdf.clone())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn devices(ctx: &Context<'_>) -> Outcome {
    let profile = ctx.profile();
    let expected = profile.and_then(|p| {
        p.rdma_ports
            .map(|n| (n, p.rdma_link_layer.clone(), p.name.clone()))
    });
    let facts = match ctx.rdma() {
        Ok(f) => f,
        Err(err) => return Outcome::unreadable(err),
    };
    let with_rdma: Vec<&str> = facts
        .devices
        .iter()
        .filter_map(|d| d.pci.as_deref())
        .collect();
    // A RoCE LAG is one RDMA device, `mlx5_bond_N`, under the card's first PF: the other PFs of
    // that card (same slot; mlx5 bonds only the ports of one card) have none of their own.
    let bonded_slots: Vec<&str> = facts
        .devices
        .iter()
        .filter(|d| d.name.contains("_bond"))
        .filter_map(|d| d.pci.as_deref())
        .map(pci_slot)
        .collect();
    // VFs are sriov.vf_binding's (bound, with their RDMA device): an unbound VF counted once.
    let vfs: Vec<&str> = ctx.sriov().vfs().map(|(_, vf)| vf.bdf.as_str()).collect();
    let orphans: Vec<String> = mellanox_nics(ctx)
        .into_iter()
        .filter(|b| !with_rdma.contains(&b.as_str()) && !bonded_slots.contains(&pci_slot(b)))
        .filter(|b| !vfs.contains(&b.as_str()))
        .collect();
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    let mut shortfall = 0;
    if !orphans.is_empty() {
        fails.push(format!(
            "{} connectx function(s) without an rdma device: {}",
            orphans.len(),
            orphans.join(" ")
        ));
        evidence.push(
            Evidence::new(
                rdma::CLASS_INFINIBAND,
                format!("no device for {}", orphans.join(" ")),
            )
            .expected("one rdma device per connectx network function"),
        );
    }
    let mut by_layer: BTreeMap<String, usize> = BTreeMap::new();
    for (_, p) in ports(facts) {
        *by_layer
            .entry(p.link_layer.clone().unwrap_or_else(|| "Unknown".into()))
            .or_default() += 1;
    }
    let layers_text = if by_layer.is_empty() {
        "no ports".to_string()
    } else {
        by_layer
            .iter()
            .map(|(l, n)| format!("{n} {l}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some((want, layer, name)) = &expected {
        // Only the GPU fabric's devices count when the profile names them (`rdma_devices`): a
        // front-end NIC of the same link layer is not a missing or extra compute port.
        let fabric = |d: &RdmaDevice| profile.is_none_or(|p| p.is_fabric_device(&d.name));
        let have = ports(facts)
            .filter(|(d, _)| fabric(d))
            .filter(|(_, p)| {
                layer.is_none()
                    || p.link_layer.as_deref().unwrap_or("Unknown")
                        == layer.as_deref().unwrap_or("")
            })
            .count() as u32;
        // Ports whose link layer was not read, and devices whose ports/ was not listed, may be
        // the ones missing: a shortfall they could explain is not claimed.
        let unread_ports = ports(facts)
            .filter(|(_, p)| p.link_layer.is_none() && not_read(p, "link_layer"))
            .count() as u32;
        let unlisted = facts.problems.iter().any(|p| p.path.ends_with("/ports"));
        if have < *want && !unlisted && have + unread_ports < *want {
            shortfall = (want - have) as usize;
            let what = layer.as_deref().unwrap_or("rdma");
            // Ports of the same link layer the profile's device list leaves out: on a RoCE node
            // a rail that trained down is among them (it no longer runs at the rails' rate, so
            // it was not counted a rail), next to the front-end ports. Named with their rates.
            let left_out: Vec<String> = ports(facts)
                .filter(|(d, _)| !fabric(d))
                .filter(|(_, p)| layer.is_none() || p.link_layer == *layer)
                .map(|(d, p)| match p.rate_gbps {
                    Some(r) => format!("{} port {} at {r} Gb/s", d.name, p.port),
                    None => format!("{} port {}", d.name, p.port),
                })
                .collect();
            let left_out = if left_out.is_empty() {
                String::new()
            } else {
                format!(
                    " (not counted, slower than the rails or not named by the profile: {})",
                    left_out.join(", ")
                )
            };
            fails.push(format!(
                "{have} {what} port(s), profile {name} expects {want}{left_out}"
            ));
            evidence.push(
                Evidence::new(rdma::CLASS_INFINIBAND, layers_text.clone())
                    .expected(format!("{want} {what} ports (profile {name})")),
            );
        }
    }
    if !fails.is_empty() {
        // A fabric of the other kind is a profile that does not fit, not a broken node: say
        // which profile judged and how to pick the right one.
        let profile_hint = ctx
            .profile()
            .map(|p| {
                format!(
                    "; profile {} judged these ports (`gpudoctor profiles` lists the others): if the node's gpu fabric is {} by design, pass `--profile <name>` (e.g. hgx-h100-roce for a RoCE fabric) or a profile file (in deploy/, add it to GPUDOCTOR_ARGS)",
                    p.name,
                    if p.rdma_link_layer.as_deref() == Some("InfiniBand") {
                        "ethernet (RoCE)"
                    } else {
                        "another"
                    }
                )
            })
            .unwrap_or_default();
        // Every function without RDMA device has no driver and failed to probe, and they
        // account for any missing ports (one port per ConnectX function): the kernel log's
        // probe failure is the cause, and mlx5_ib has nothing to bind (checks/causes.rs).
        let unbound = |b: &String| {
            ctx.pci().as_ref().is_ok_and(|p| {
                p.functions
                    .iter()
                    .any(|f| &f.bdf == b && f.driver.is_none())
            })
        };
        let failed: Vec<&str> = orphans
            .iter()
            .filter(|b| unbound(b) && nic_events::probe_failed(ctx, b))
            .map(String::as_str)
            .collect();
        if !orphans.is_empty() && failed.len() == orphans.len() && shortfall <= failed.len() {
            let list = failed.join(" ");
            return Outcome::fail(format!("{}; mlx5_core failed to probe {list}, which has no driver", fails.join("; ")))
                .evidence_all(evidence)
                .hint(format!("not a missing mlx5_ib: {list} has no driver because mlx5_core failed to probe it (rdma.nic_events): read `dmesg | grep mlx5` for the first error, check the firmware (`flint -d {} q`) and the card's seating, then reload mlx5_core or reboot", failed[0]))
                .action(Action::HardwareInspection)
                .follows_from("rdma.nic_events");
        }
        return Outcome::fail(fails.join("; "))
            .evidence_all(evidence)
            .hint(format!("compare `ibdev2netdev` and `lspci -d 15b3:`; load mlx5_ib for an hca without rdma device; a port in the wrong link layer: `mlxconfig -d <dev> query | grep LINK_TYPE`{profile_hint}"))
            .action(Action::FixConfig);
    }
    if facts.devices.is_empty() {
        return Outcome::skip(match &expected {
            Some((0, _, name)) => format!("no rdma devices, none expected (profile {name})"),
            _ => "no rdma devices on this node".to_string(),
        });
    }
    Outcome::pass(format!(
        "{} rdma device(s): {layers_text} port(s)",
        facts.devices.len()
    ))
    .evidence(Evidence::new(
        rdma::CLASS_INFINIBAND,
        facts
            .devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    ))
}

/// What a physical state means for the operator (sysfs.md §8).
fn phys_meaning(phys: Option<&(u32, String)>) -> &'static str {
    match phys.map(|(n, _)| *n) {
        Some(1) => "sleep",
        Some(2) => "polling: no peer — check the cable, transceiver and switch port",
        Some(3) => "disabled: administratively down",
        Some(4) => "link training in progress",
        Some(5) => "link up but not configured by a subnet manager",
        Some(6) => "link error recovery: a marginal link",
        Some(7) => "phy test mode",
        _ => "unknown physical state",
    }
}

fn port_state(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let mut down = Vec::new();
    let mut evidence = Vec::new();
    let mut total = 0;
    // Ports whose physical link is up (phys_state 5: LinkUp) but whose logical state waits for
    // a subnet manager: 2 INIT (no SM has swept the port) or 3 ARMED (configured, not yet
    // activated). The kernel's state names: drivers/infiniband/core/sysfs.c `state_show`; the
    // states: IBTA spec vol 1 §7.2 (PortState). The cable and the HCA work: it is the fabric's
    // management (opensm/UFM), a network fault, never a part to pull.
    let mut waiting_for_sm = 0;
    for (d, p) in ports(facts) {
        total += 1;
        if p.is_up()
            || (p.state.is_none() && not_read(p, "state"))
            || (p.phys_state.is_none() && not_read(p, "phys_state"))
        {
            continue;
        }
        if p.state.as_ref().is_some_and(|(n, _)| matches!(n, 2 | 3))
            && p.phys_state.as_ref().is_some_and(|(n, _)| *n == 5)
        {
            waiting_for_sm += 1;
        }
        let show = |s: &Option<(u32, String)>| {
            s.as_ref()
                .map(|(n, t)| format!("{n}: {t}"))
                .unwrap_or_else(|| "unreadable".into())
        };
        down.push(format!(
            "{} is {} / {} ({})",
            port_label(d, p),
            show(&p.state),
            show(&p.phys_state),
            phys_meaning(p.phys_state.as_ref())
        ));
        evidence.push(
            Evidence::new(
                port_path(d, p, "phys_state"),
                format!(
                    "state {}, phys_state {}",
                    show(&p.state),
                    show(&p.phys_state)
                ),
            )
            .expected("4: ACTIVE, 5: LinkUp"),
        );
    }
    if down.is_empty() {
        return Outcome::pass(format!("{total} rdma port(s) active and linkup"));
    }
    if waiting_for_sm == down.len() {
        return Outcome::fail(down.join("; "))
            .evidence_all(evidence)
            .hint("the link is up but no subnet manager has activated the port: check that opensm (or UFM, or the switch's SM) runs and sees this port (`sminfo`, `ibstat`; `systemctl status opensm`)")
            .action(Action::RestartComponent);
    }
    Outcome::fail(down.join("; "))
        .evidence_all(evidence)
        .hint("polling: check the cable, transceiver and switch port (`ibstat`, `mlxlink -d <dev>`); disabled: enable the port; init: check the subnet manager (opensm/UFM)")
        .action(Action::HardwareInspection)
}

fn port_rate(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let profile = ctx.profile();
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    // The fastest rate per link layer is the reference when no profile says otherwise, among
    // the GPU fabric's devices and among the others apart (`rdma_devices`: a 100 GbE front-end
    // port is not a 400 GbE fabric port trained down).
    let fabric = |d: &RdmaDevice| profile.is_none_or(|p| p.is_fabric_device(&d.name));
    let mut fastest: BTreeMap<(bool, String), f64> = BTreeMap::new();
    for (d, p) in ports(facts).filter(|(_, p)| p.is_up()) {
        if let (Some(rate), Some(layer)) = (p.rate_gbps, &p.link_layer) {
            let e = fastest.entry((fabric(d), layer.clone())).or_insert(0.0);
            *e = e.max(rate);
        }
    }
    let mut judged = 0;
    for (d, p) in ports(facts).filter(|(_, p)| p.is_up()) {
        let (Some(rate), Some(layer)) = (p.rate_gbps, p.link_layer.as_deref()) else {
            continue;
        };
        judged += 1;
        let from_profile = profile.and_then(|pr| {
            let applies = pr.rdma_link_layer.as_deref().is_none_or(|l| l == layer) && fabric(d);
            pr.rdma_rate_gbps
                .filter(|_| applies)
                .map(|r| (f64::from(r), format!("profile {}", pr.name)))
        });
        let (want, from) = match from_profile {
            Some(x) => x,
            None => (
                fastest
                    .get(&(fabric(d), layer.to_string()))
                    .copied()
                    .unwrap_or(rate),
                format!("the fastest {layer} port"),
            ),
        };
        if rate < want {
            let text = p.rate_text.clone().unwrap_or_default();
            fails.push(format!(
                "{} at {rate} Gb/s, {from} runs {want} Gb/s",
                port_label(d, p)
            ));
            evidence.push(
                Evidence::new(port_path(d, p, "rate"), text)
                    .expected(format!("{want} Gb/sec ({from})")),
            );
        }
    }
    // Every port's rate as a figure (bytes per second), for dashboards: a port that trained
    // low shows up there even between runs of this check. `rail`: whether the profile in force
    // counts the port as the GPU fabric's (its device and link layer), so an alert compares
    // rails with rails, never a 200 GbE front-end port with the 400 G rails ("unknown" without
    // a profile).
    let rail = |d: &RdmaDevice, p: &crate::facts::rdma::RdmaPort| match profile {
        None => "unknown",
        Some(pr) => {
            let layer_fits = pr
                .rdma_link_layer
                .as_deref()
                .is_none_or(|l| p.link_layer.as_deref() == Some(l));
            if layer_fits && pr.is_fabric_device(&d.name) {
                "true"
            } else {
                "false"
            }
        }
    };
    let figures: Vec<Figure> = ports(facts)
        .filter_map(|(d, p)| {
            let rate = p.rate_gbps?;
            Some(
                Figure::new(FigureName::RdmaPortRateBytesPerSecond, rate * 1e9 / 8.0)
                    .label("device", d.name.as_str())
                    .label("port", p.port.to_string())
                    .label("link_layer", p.link_layer.as_deref().unwrap_or("Unknown"))
                    .label("rail", rail(d, p)),
            )
        })
        .collect();
    if judged == 0 {
        return Outcome::skip("no active port reports a rate").figures(figures);
    }
    if fails.is_empty() {
        let rates: Vec<String> = fastest
            .iter()
            .filter(|((f, _), _)| *f)
            .map(|((_, l), r)| format!("{l} {r} Gb/s"))
            .chain(
                fastest
                    .iter()
                    .filter(|((f, _), _)| !*f)
                    .map(|((_, l), r)| format!("{l} {r} Gb/s outside the gpu fabric")),
            )
            .collect();
        return Outcome::pass(format!(
            "{judged} port(s) at the expected rate ({})",
            rates.join(", ")
        ))
        .figures(figures);
    }
    Outcome::fail(fails.join("; "))
        .evidence_all(evidence)
        .hint("check the cable and transceiver type, the switch port speed and `mlxlink -d <dev> -p <port>`; reseat or replace the cable")
        .action(Action::HardwareInspection)
        .figures(figures)
}

fn verbs(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let modules = match ctx.modules() {
        Ok(m) => m,
        Err(err) => return Outcome::unreadable(err),
    };
    let mut wanted = vec!["ib_core", "ib_uverbs"];
    if facts.devices.iter().any(|d| d.name.starts_with("mlx5")) {
        wanted.push("mlx5_ib");
    }
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|m| modules.get(m).is_none())
        .collect();
    let nodes = ctx
        .source()
        .list_dir("dev/infiniband", &|n| n.starts_with("uverbs"))
        .unwrap_or_default();
    let mut fails = Vec::new();
    let mut evidence = Vec::new();
    if !missing.is_empty() {
        fails.push(format!("module(s) not loaded: {}", missing.join(", ")));
        evidence.push(
            Evidence::new(
                modules.from.as_str(),
                format!("missing {}", missing.join(" ")),
            )
            .expected(wanted.join(" ")),
        );
    }
    if nodes.len() < facts.devices.len() {
        fails.push(format!(
            "{} /dev/infiniband/uverbs node(s) for {} rdma device(s)",
            nodes.len(),
            facts.devices.len()
        ));
        evidence.push(
            Evidence::new(
                "dev/infiniband",
                if nodes.is_empty() {
                    "no uverbs nodes".to_string()
                } else {
                    nodes.join(" ")
                },
            )
            .expected(format!("{} uverbs nodes", facts.devices.len())),
        );
    }
    if fails.is_empty() {
        return Outcome::pass(format!(
            "{} loaded, {} uverbs node(s)",
            wanted.join(", "),
            nodes.len()
        ));
    }
    Outcome::fail(fails.join("; "))
        .evidence_all(evidence)
        .hint("`modprobe ib_uverbs mlx5_ib` (udev then creates /dev/infiniband/uverbs*); pods need /dev/infiniband mounted by the rdma or sr-iov device plugin")
        .action(Action::ReloadDriver)
}

fn firmware(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let mut by_model: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for d in &facts.devices {
        if let (Some(model), Some(fw)) = (d.hca_type.as_deref(), d.fw_ver.as_deref()) {
            by_model
                .entry(model)
                .or_default()
                .entry(fw)
                .or_default()
                .push(d.name.as_str());
        }
    }
    if by_model.is_empty() {
        return Outcome::skip("no firmware versions reported");
    }
    let mixed: Vec<String> = by_model
        .iter()
        .filter(|(_, versions)| versions.len() > 1)
        .map(|(model, versions)| {
            let list: Vec<String> = versions
                .iter()
                .map(|(fw, devs)| format!("{fw} on {}", devs.join(" ")))
                .collect();
            format!("{model}: {}", list.join("; "))
        })
        .collect();
    if mixed.is_empty() {
        let list: Vec<String> = by_model
            .iter()
            .map(|(m, v)| format!("{m} {}", v.keys().copied().collect::<Vec<_>>().join("")))
            .collect();
        return Outcome::pass(format!("one firmware per hca model ({})", list.join(", ")));
    }
    Outcome::warn(format!("mixed firmware on identical hcas: {}", mixed.join(" | ")))
        .evidence_all(mixed.iter().map(|m| Evidence::new(format!("{}/*/fw_ver", rdma::CLASS_INFINIBAND), m.as_str()).expected("one version per model")))
        .hint("update every hca of the model to one firmware (`mlxfwmanager --online -u`), then `mlxfwreset` or reboot")
        .action(Action::FixConfig)
}

#[cfg(test)]
mod tests;
