//! device_plugin.allocatable: is every GPU and MIG device NVML sees allocatable (healthy) in
//! the kubelet's pod-resources answer? The longest check of the layer, with the hints it gives
//! when the device plugin has marked a GPU or MIG device unhealthy (kubernetes.md §1–2). The id
//! matching it shares with the other checks (`resolve`, labels, holders) stays in the parent.

use super::*;
use crate::checks::off_nvml;

/// The answer when allocatable lacks a GPU or MIG device NVML has.
const GPU_UNHEALTHY_HINT: &str = "read the xid for that gpu (`dmesg | grep -i xid`) and follow driver.xid_events; once the gpu is healthy again, restart the device plugin pod on this node: its unhealthy mark is sticky until it restarts";

/// The answer when only MIG devices are missing: the plugin marks one MIG device unhealthy on
/// an XID in its instance (kubernetes.md §2), and a GPU reset would end every MIG device on it.
const MIG_UNHEALTHY_HINT: &str = "read the xid for that gpu (`dmesg | grep -i xid`) and `nvidia-smi -L` for its mig devices; once the workload on the mig device is gone, restart the device plugin pod on this node (its unhealthy mark is sticky until it restarts); reset the gpu only if the xid calls for it: that ends every mig device on it";

pub(super) fn allocatable(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_kubernetes(ctx) {
        return skip;
    }
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Outcome::skip("nvml unavailable (see driver.nvml_init)");
    }
    let facts = ctx.pod_resources();
    // (resource, id) pairs and where they came from.
    let (ids, from, fallback): (Vec<(String, String)>, String, Option<String>) = if let Some(a) =
        facts.allocatable_value()
    {
        let ids = a
            .devices
            .iter()
            .filter(|d| is_nvidia_resource(&d.resource_name))
            .flat_map(|d| {
                d.device_ids
                    .iter()
                    .map(|i| (d.resource_name.clone(), i.clone()))
            })
            .collect();
        (ids, "pod-resources.allocatable".to_string(), None)
    } else {
        let why = facts
            .error
            .as_ref()
            .or_else(|| facts.allocatable.as_ref().and_then(|a| a.error()))
            .map(|e| e.kind.describe())
            .unwrap_or("no answer");
        match &ctx.kubelet().checkpoint {
            Ok(Some(cp)) => {
                let ids = cp
                    .registered
                    .iter()
                    .filter(|(r, _)| is_nvidia_resource(r))
                    .flat_map(|(r, ids)| ids.iter().map(move |i| (r.clone(), i.clone())))
                    .collect();
                (
                    ids,
                    CHECKPOINT.to_string(),
                    Some(format!(
                        "from the kubelet checkpoint: pod-resources GetAllocatableResources {why}"
                    )),
                )
            }
            _ if facts
                .error
                .as_ref()
                .is_some_and(|e| e.kind == RpcErrorKind::NotAvailable) =>
            {
                return Outcome::skip(
                    "no pod-resources answer and no kubelet checkpoint in this capture",
                );
            }
            Ok(None) => {
                return Outcome::error(format!(
                        "cannot tell which gpus are allocatable: pod-resources {why} and no kubelet checkpoint"
                    ))
                    .evidence(Evidence::new(CHECKPOINT, "absent"))
                    .hint("see device_plugin.pod_resources; the kubelet must be running for this check");
            }
            Err(err) => return Outcome::unreadable(err),
        }
    };
    let gpus: Vec<&NvmlDevice> = nvml.devices.iter().filter(|d| d.error.is_none()).collect();
    if ids.is_empty() && ctx.kubelet().nvidia_plugin_sockets().is_empty() {
        return Outcome::skip(
            "no nvidia resource allocatable: the device plugin is not registered (see device_plugin.registered)",
        );
    }
    let mut per_gpu: BTreeMap<usize, usize> = BTreeMap::new();
    let mut per_mig: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut mig_ids = 0usize;
    let mut unattributed = 0usize;
    let mut unknown: Vec<&str> = Vec::new();
    let mut unknown_mig: Vec<&str> = Vec::new();
    let mut resources: BTreeSet<&str> = BTreeSet::new();
    for (resource, id) in &ids {
        resources.insert(resource.as_str());
        match resolve(id, &gpus) {
            Target::Gpu(i) => *per_gpu.entry(i).or_default() += 1,
            Target::Mig(g, m) => {
                mig_ids += 1;
                per_mig.insert((g, m));
            }
            Target::MigUnattributed => {
                mig_ids += 1;
                unattributed += 1;
            }
            Target::Unknown if is_mig_id(id) => unknown_mig.push(id.as_str()),
            Target::Unknown => unknown.push(id.as_str()),
        }
    }
    let resource_text = resources.iter().copied().collect::<Vec<_>>().join(", ");
    let resource_text = if resource_text.is_empty() {
        "no nvidia resource".to_string()
    } else {
        resource_text
    };
    // A GPU is allocatable whole (its UUID or index) or through its MIG devices. Enumerated MIG
    // devices are each expected, like GPUs (the plugin drops an unhealthy MIG device from
    // allocatable just as it drops a GPU); without enumeration (an older capture) a GPU in MIG
    // mode counts as allocatable when any MIG id is.
    let mut missing: Vec<(usize, &NvmlDevice)> = Vec::new();
    // (GPU position, position in its MIG list, the MIG device)
    let mut absent_migs: Vec<(usize, usize, &MigDevice)> = Vec::new();
    let mut mig_total = 0usize;
    for (i, d) in gpus.iter().enumerate() {
        if per_gpu.contains_key(&i) {
            continue;
        }
        match d.mig_list() {
            Some(list) => {
                let expected: Vec<(usize, &MigDevice)> = list
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.error.is_none() && m.uuid.is_some())
                    .collect();
                mig_total += expected.len();
                let absent: Vec<(usize, usize, &MigDevice)> = expected
                    .iter()
                    .filter(|(m, _)| !per_mig.contains(&(i, *m)))
                    .map(|(k, m)| (i, *k, *m))
                    .collect();
                // An unattributed MIG id may be one of this GPU's unopened MIG devices.
                let maybe_unopened = unattributed > 0 && list.iter().any(|m| m.uuid.is_none());
                if absent.len() == expected.len() && !maybe_unopened {
                    missing.push((i, *d));
                }
                absent_migs.extend(absent);
            }
            None if d.mig_possible() && unattributed > 0 => {}
            None => missing.push((i, *d)),
        }
    }
    let fallback_note = fallback
        .as_ref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    let mig_resource = |m: &MigDevice| {
        m.profile()
            .map(|p| format!("nvidia.com/mig-{p}"))
            .filter(|r| resources.contains(r.as_str()))
            .unwrap_or_else(|| resource_text.clone())
    };
    if !missing.is_empty() || !absent_migs.is_empty() {
        let is_missing = |i: usize| missing.iter().any(|(j, _)| *j == i);
        let mut parts = Vec::new();
        if !missing.is_empty() {
            let names: Vec<String> = missing
                .iter()
                .map(|(_, d)| {
                    let note = match d.mig_list() {
                        Some([]) => " (mig mode on, no mig device)",
                        Some(_) => " (mig mode, none of its mig devices)",
                        None => "",
                    };
                    format!("{} {}{note}", label(d), d.uuid.as_deref().unwrap_or("?"))
                })
                .collect();
            parts.push(format!(
                "{} of {} gpus allocatable: {} missing",
                gpus.len() - missing.len(),
                gpus.len(),
                names.join(", ")
            ));
        }
        let partial: Vec<String> = absent_migs
            .iter()
            .filter(|(i, _, _)| !is_missing(*i))
            .map(|(i, _, m)| {
                format!(
                    "{} {}",
                    mig_label(gpus[*i], m),
                    m.uuid.as_deref().unwrap_or("?")
                )
            })
            .collect();
        if !partial.is_empty() {
            parts.push(format!(
                "{} of {mig_total} mig devices allocatable: {} missing",
                mig_total - absent_migs.len(),
                partial.join(", ")
            ));
        }
        if !unknown_mig.is_empty() {
            parts.push(format!(
                "{} allocatable mig id(s) unknown to nvml: {}",
                unknown_mig.len(),
                unknown_mig.join(", ")
            ));
        }
        let mut evidence: Vec<Evidence> = Vec::new();
        for (_, d) in &missing {
            match d.mig_list() {
                Some([]) => evidence.push(
                    Evidence::new(
                        format!("nvml.devices[{}].mig_devices", d.index),
                        "mig mode on, no mig device",
                    )
                    .expected("the gpu instances of the node's mig layout"),
                ),
                Some(_) => {} // its MIG devices are named below
                None => evidence.push(
                    Evidence::new(
                        from.as_str(),
                        format!("{} absent", d.uuid.as_deref().unwrap_or("?")),
                    )
                    .expected(format!(
                        "allocatable under {}",
                        if resources.is_empty() {
                            "nvidia.com/gpu"
                        } else {
                            resource_text.as_str()
                        }
                    )),
                ),
            }
        }
        for (i, _, m) in &absent_migs {
            evidence.push(
                Evidence::new(
                    from.as_str(),
                    format!(
                        "{} absent ({})",
                        m.uuid.as_deref().unwrap_or("?"),
                        mig_label(gpus[*i], m)
                    ),
                )
                .expected(format!("allocatable under {}", mig_resource(m))),
            );
        }
        for id in &unknown_mig {
            evidence.push(
                Evidence::new(from.as_str(), *id)
                    .expected("a mig device nvml enumerates (`nvidia-smi -L`)"),
            );
        }
        // The GPUs something is missing from, for their XIDs and holders.
        let mut affected: Vec<usize> = missing.iter().map(|(i, _)| *i).collect();
        affected.extend(absent_migs.iter().map(|(i, _, _)| *i));
        affected.sort_unstable();
        affected.dedup();
        // The XIDs that made the plugin mark it unhealthy (kubernetes.md §2).
        let mut saw_xid = false;
        if let Ok(Some((text, log))) = ctx.kernel_log() {
            let parsed = xid::parse_kernel_log(text);
            for d in affected.iter().map(|i| gpus[*i]) {
                let bus = d.pci_bus_id.as_deref();
                let mut seen: BTreeSet<u32> = BTreeSet::new();
                for event in parsed
                    .xids
                    .iter()
                    .rev()
                    .filter(|e| e.pci_bus_id.as_deref() == bus)
                {
                    if seen.insert(event.xid) {
                        saw_xid = true;
                        let ignored = PLUGIN_IGNORED_XIDS.contains(&event.xid);
                        evidence.push(
                            Evidence::new(
                                log.as_str(),
                                event.message.lines().next().unwrap_or_default(),
                            )
                            .expected(format!(
                                "{}: xid {} ({}){}",
                                label(d),
                                event.xid,
                                event.info().name,
                                if ignored {
                                    ", which the device plugin ignores"
                                } else {
                                    ", which makes the device plugin mark the gpu unhealthy"
                                }
                            )),
                        );
                    }
                }
            }
        }
        // Workloads still holding a GPU or MIG device that is now unhealthy.
        if let Some((held, held_from)) = holders(ctx) {
            for h in &held {
                let what = match resolve(&h.id, &gpus) {
                    Target::Gpu(i) if is_missing(i) => label(gpus[i]),
                    Target::Mig(g, m) => {
                        match absent_migs.iter().find(|(i, k, _)| (*i, *k) == (g, m)) {
                            Some((_, _, mig)) => mig_label(gpus[g], mig),
                            None => continue,
                        }
                    }
                    _ => continue,
                };
                evidence.push(Evidence::new(
                    held_from.as_str(),
                    format!("{} holds {} ({what})", h.who, h.id),
                ));
            }
        }
        let only_empty_mig = absent_migs.is_empty()
            && missing
                .iter()
                .all(|(_, d)| d.mig_list().is_some_and(<[MigDevice]>::is_empty));
        let (cause, hint, action) = if !unknown_mig.is_empty() && !absent_migs.is_empty() {
            (
                "the mig layout changed after the device plugin started: it still advertises the old mig devices",
                "restart the device plugin pod on this node so it advertises the current mig devices (`nvidia-smi -L` lists them); on gpu operator nodes read the mig-manager's log",
                Action::RestartComponent,
            )
        } else if only_empty_mig {
            (
                "mig mode is on but no gpu instance was created",
                "create the gpu and compute instances of the intended layout (`nvidia-smi mig -cgi <profiles> -C`, or the gpu operator's nvidia.com/mig.config node label), then restart the device plugin pod",
                Action::FixConfig,
            )
        } else {
            // Only MIG devices missing: a GPU reset would take every MIG device on it down.
            let hint = if missing.is_empty() {
                MIG_UNHEALTHY_HINT
            } else {
                GPU_UNHEALTHY_HINT
            };
            let cause = if saw_xid {
                "the device plugin marked it unhealthy after an xid (see driver.xid_events)"
            } else {
                "the device plugin marked it unhealthy or does not manage it"
            };
            (cause, hint, Action::RestartComponent)
        };
        return Outcome::fail(format!("{}; {cause}{fallback_note}", parts.join("; ")))
            .evidence_all(evidence)
            .hint(hint)
            .action(action);
    }
    let replicas: BTreeSet<usize> = per_gpu.values().copied().collect();
    let sharing = match (replicas.len(), replicas.iter().next()) {
        (1, Some(&n)) if n > 1 => format!(
            ", {n} replicas each ({} devices, time-slicing or mps)",
            ids.len()
        ),
        (0 | 1, _) => String::new(),
        _ => format!(", uneven replicas per gpu ({} devices)", ids.len()),
    };
    let mig_gpus: BTreeSet<usize> = per_mig.iter().map(|(g, _)| *g).collect();
    let mig_note = match (mig_ids, mig_gpus.len()) {
        (0, _) => String::new(),
        (n, 0) => format!(", {n} mig device(s)"),
        (n, g) => format!(", {n} mig device(s) on {g} gpu(s)"),
    };
    let summary = format!(
        "{} of {} gpus allocatable as {resource_text}{sharing}{mig_note}{fallback_note}",
        gpus.len(),
        gpus.len()
    );
    let evidence = Evidence::new(from.as_str(), format!("{} nvidia device id(s)", ids.len()))
        .expected(format!("the {} nvml gpu(s)", gpus.len()));
    let mut stale = Vec::new();
    let mut hints = Vec::new();
    // GPUs NVML counts but could not open (driver.gpu_count says why) have no uuid to match:
    // as many unknown ids as there are such GPUs may be theirs, so they are not called stale.
    let unopened = ctx
        .nvml()
        .devices
        .iter()
        .filter(|d| d.error.is_some())
        .count();
    let mut summary = summary;
    if !unknown.is_empty() && unknown.len() <= unopened {
        summary.push_str(&format!(
            "; {} id(s) not matched, as many as the gpus nvml could not open (see driver.gpu_count): {}",
            unknown.len(),
            unknown.join(", ")
        ));
        unknown.clear();
    }
    if !unknown.is_empty() {
        stale.push(format!(
            "{} allocatable id(s) unknown to nvml: {}",
            unknown.len(),
            unknown.join(", ")
        ));
        hints.push("the device plugin advertises gpus this node no longer has (a gpu replaced or fallen off the bus): restart the device plugin pod");
    }
    if !unknown_mig.is_empty() {
        stale.push(format!(
            "{} allocatable mig id(s) unknown to nvml: {}",
            unknown_mig.len(),
            unknown_mig.join(", ")
        ));
        hints.push("the device plugin advertises mig devices that no longer exist (the mig layout changed after it started): restart the device plugin pod; `nvidia-smi -L` lists the current ones");
    }
    // Ids only the GPUs NVML lost while they stay on PCI can account for: the plugin is right
    // about the node's hardware until the lost GPU is dealt with (checks/causes.rs).
    let off = off_nvml::off_nvml(ctx);
    let nvml_count = ctx.nvml().devices.len();
    if !off.is_empty()
        && !unknown.is_empty()
        && unknown_mig.is_empty()
        && unknown
            .iter()
            .all(|id| off_nvml::accounts_for(&off, nvml_count, id))
    {
        let lost: Vec<String> = off.iter().map(|g| g.bdf.clone()).collect();
        return Outcome::warn(format!(
            "{summary}; {} allocatable id(s) of gpu {}, which nvml lost (on pci, gone from nvml): {}",
            unknown.len(),
            lost.join(", "),
            unknown.join(", ")
        ))
        .evidence(evidence)
        .hint(format!(
            "a consequence of the lost gpu {}: deal with it first (driver.gpu_count), then restart the device plugin pod if it still advertises the id",
            lost.join(", ")
        ))
        .action(Action::RebootNode)
        .about_gpus(lost)
        .follows_from("driver.gpu_count");
    }
    if !stale.is_empty() {
        return Outcome::warn(format!("{summary}; {}", stale.join("; ")))
            .evidence(evidence)
            .evidence_all(unknown_mig.iter().map(|id| {
                Evidence::new(from.as_str(), *id)
                    .expected("a mig device nvml enumerates (`nvidia-smi -L`)")
            }))
            .hint(hints.join("; "))
            .action(Action::RestartComponent);
    }
    Outcome::pass(summary).evidence(evidence)
}
