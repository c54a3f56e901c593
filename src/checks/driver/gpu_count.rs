//! driver.gpu_count: does NVML know every NVIDIA GPU on PCI? The layer's longest check: PCI
//! against NVML, lost and refused handles, excluded GPUs, and the kernel-log lines that say why a
//! GPU went missing, with the helpers only it uses (why NVML refuses a GPU inside a Pod).

use super::*;
use crate::answers::nvml::NvmlDevice;

/// `GPU Excluded: Yes` in the driver's information file: told to ignore it (`NVreg_ExcludedGpus`).
/// Information files that exist but could not be read go to `unread`.
fn excluded_gpus(
    ctx: &Context<'_>,
    gpus: &[&PciFunction],
    unread: &mut Vec<FactError>,
) -> BTreeSet<String> {
    gpus.iter()
        .filter(|g| {
            information(ctx, &g.bdf, unread).is_some_and(|t| {
                nvidia::parse_information(&t)
                    .get("GPU Excluded")
                    .is_some_and(|v| v.eq_ignore_ascii_case("yes"))
            })
        })
        .map(|g| g.bdf.clone())
        .collect()
}

/// Kernel-log lines that mention a GPU's bus address (`0000:ba:00` as XID lines print it).
fn kernel_log_mentions(ctx: &Context<'_>, bdf: &str) -> Vec<Evidence> {
    let Ok(Some((text, from))) = ctx.kernel_log() else {
        return Vec::new();
    };
    let short = bdf.rsplit_once('.').map(|(head, _)| head).unwrap_or(bdf);
    text.lines()
        .filter(|l| {
            l.contains("NVRM") && (l.contains(short) || l.contains(&short.to_ascii_uppercase()))
        })
        .rev()
        .take(3)
        .map(|l| {
            Evidence::quoting(
                from.as_str(),
                l.rsplit_once(';').map(|(_, m)| m).unwrap_or(l).trim(),
            )
        })
        .collect()
}

pub(super) fn gpu_count(ctx: &Context<'_>) -> Outcome {
    let mut unread = Vec::new();
    let outcome = gpu_count_judged(ctx, &mut unread);
    outcome.noting_unread(&unread)
}

fn gpu_count_judged(ctx: &Context<'_>, unread: &mut Vec<FactError>) -> Outcome {
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Outcome::skip("nvml unavailable (see driver.nvml_init)");
    }
    let pci = match ctx.pci() {
        Ok(pci) => pci,
        Err(err) => return Outcome::unreadable(err),
    };
    let gpus: Vec<&PciFunction> = pci.nvidia_gpus().collect();
    let on_pci: BTreeSet<String> = gpus.iter().map(|g| g.bdf.clone()).collect();
    let in_nvml: BTreeSet<String> = nvml
        .devices
        .iter()
        .filter_map(|d| d.pci_bus_id.clone())
        .collect();
    let excluded = excluded_gpus(ctx, &gpus, unread);

    let mut fails: Vec<String> = Vec::new();
    // PCI bus ids of the GPUs NVML lost or does not list, for the hint.
    let mut lost: Vec<String> = Vec::new();
    // PCI bus ids of the GPUs that answer RESET_REQUIRED: still on the bus, waiting for a reset.
    let mut needs_reset: Vec<String> = Vec::new();
    let mut evidence: Vec<Evidence> = Vec::new();
    // Handles refused (permission) or not answered (timeout): not faults of the GPU, and their
    // bus ids are unknown, so the PCI addresses NVML lacks may be theirs.
    let mut refused: Vec<u32> = Vec::new();
    let mut timed_out: Vec<u32> = Vec::new();
    let mut unnamed = 0usize;
    for (device, lost_at) in nvml.devices.iter().zip(ctx.gpus_lost()) {
        let field = format!("nvml.devices[{}]", device.index);
        if let Some(err) = &device.error {
            let observed = format!("{}: {}", err.kind.name(), err.message);
            if err.kind.is_permission() {
                refused.push(device.index);
                evidence.push(
                    Evidence::new(field, observed).expected("a handle this process may open"),
                );
            } else if err.kind == NvmlErrorKind::Timeout {
                timed_out.push(device.index);
                evidence.push(
                    Evidence::new(field, observed).expected("an answer within the nvml budget"),
                );
            } else {
                fails.push(format!(
                    "nvml device {}: {}",
                    device.index,
                    err.kind.describe()
                ));
                evidence.push(Evidence::new(field, &err.message).expected("a usable handle"));
                continue;
            }
            unnamed += usize::from(device.pci_bus_id.is_none());
        } else if let Some((at, err)) = lost_at {
            // Lost after its handle was had: every later call answers GPU_IS_LOST (XID 79), or
            // RESET_REQUIRED until the GPU is reset.
            let state = if err.kind == NvmlErrorKind::ResetRequired {
                "needs a reset"
            } else {
                "is lost"
            };
            fails.push(format!(
                "{} {state}: nvml answered {} ({at})",
                gpu_health::gpu_label(device),
                err.kind.name()
            ));
            evidence.push(
                Evidence::new(
                    format!("{field}.{at}"),
                    format!("{}: {}", err.kind.name(), err.message),
                )
                .expected("an answer from the gpu"),
            );
            if let Some(bdf) = &device.pci_bus_id {
                evidence.extend(kernel_log_mentions(ctx, bdf));
                if err.kind == NvmlErrorKind::ResetRequired {
                    needs_reset.push(bdf.clone());
                } else {
                    lost.push(bdf.clone());
                }
            }
        }
    }
    let missing: Vec<&String> = on_pci
        .difference(&in_nvml)
        .filter(|b| !excluded.contains(*b))
        .collect();
    if missing.len() <= unnamed {
        // Each is one of the refused or unanswered handles above.
        for bdf in &missing {
            evidence.push(
                Evidence::new(
                    format!("{PCI_DEVICES}/{bdf}"),
                    "present on pci, no handle from nvml",
                )
                .expected("known to nvml"),
            );
        }
    } else {
        // A device whose handle failed has no bus id; the pci addresses nvml lacks name it.
        for bdf in &missing {
            lost.push((*bdf).clone());
            fails.push(format!("gpu {bdf} is on pci but unknown to nvml"));
            evidence.push(
                Evidence::new(
                    format!("{PCI_DEVICES}/{bdf}"),
                    "present on pci, absent from nvml",
                )
                .expected("known to nvml"),
            );
            evidence.extend(kernel_log_mentions(ctx, bdf));
        }
    }
    // GPUs NVML knows at a PCI address whose function could not be read: not "missing from
    // pci", not read (their class, vendor or device file is not there).
    let unread_functions: Vec<&FactError> = pci
        .problems
        .iter()
        .filter(|p| in_nvml.iter().any(|b| p.path.contains(b.as_str())))
        .collect();
    if let Some(p) = ctx.profile()
        && let Some(want) = p.gpu_count
        && (on_pci.len() as u32) < want
    {
        if !unread_functions.is_empty()
            && on_pci.len() + unread_functions.len() >= want as usize
            && fails.is_empty()
        {
            return Outcome::fail(format!(
                "profile {} expects {want} gpus, {} on pci",
                p.name,
                on_pci.len()
            ))
            .held_back_by(unread_functions);
        }
        fails.push(format!(
            "profile {} expects {want} gpus, {} on pci",
            p.name,
            on_pci.len()
        ));
        evidence.push(
            Evidence::new(PCI_DEVICES, format!("{} nvidia gpus", on_pci.len()))
                .expected(format!("{want} (profile {})", p.name)),
        );
    }
    let count_text = format!("{} on pci, {} in nvml", on_pci.len(), nvml.device_count);
    let mut not_judged = Vec::new();
    if !refused.is_empty() {
        not_judged.push(format!(
            "nvml may not open gpu(s) {}: no_permission ({})",
            join_indexes(&refused),
            permission_cause(ctx)
        ));
    }
    if !timed_out.is_empty() {
        not_judged.push(unanswered_text(&nvml.devices, &timed_out));
    }
    if !fails.is_empty() {
        // Wholly about named GPUs when each failure is a lost, missing or reset-bound GPU with
        // its bus id (not a handle error without one, nor the profile's count).
        let named: Vec<String> =
            if fails.len() == lost.len() + needs_reset.len() && not_judged.is_empty() {
                lost.iter().chain(&needs_reset).cloned().collect()
            } else {
                Vec::new()
            };
        fails.extend(not_judged);
        // Only RESET_REQUIRED: the GPUs are on the bus and a reset is the driver's own ask.
        if lost.is_empty() && !needs_reset.is_empty() && fails.len() == needs_reset.len() {
            return Outcome::fail(format!("{} ({count_text})", fails.join("; ")))
                .about_gpus(named)
                .evidence_all(evidence)
                .hint(format!(
                    "drain the node, stop what holds the gpu (`lsof /dev/nvidia*`: device plugin, dcgm-exporter, nv-hostengine) and reset it by pci bus id: `nvidia-smi -r -i {}`; reboot if the reset is refused, and read the xid that asked for it (`dmesg | grep -i xid`)",
                    needs_reset.join(",")
                ))
                .action(Action::ResetGpu);
        }
        return Outcome::fail(format!(
            "{} ({count_text}); it may have fallen off the bus",
            fails.join("; ")
        ))
        .about_gpus(named)
        .evidence_all(evidence)
        .hint(lost_gpu_hint(&lost))
        .action(Action::RebootNode);
    }
    if !not_judged.is_empty() {
        let mut hints = Vec::new();
        if !refused.is_empty() {
            hints.push(if in_pod(ctx) {
                "inside a pod the container may open only the gpus it was given: run gpudoctor as the privileged DaemonSet (deploy/) with the host's /dev, or compare with `nvidia-smi -L` on the node"
            } else {
                "this process's device cgroup (a Slurm job with ConstrainDevices, a systemd unit's DevicePolicy) or /dev/nvidia* permissions refuse the gpu: run gpudoctor as root outside the job's cgroup and compare with `nvidia-smi -L`"
            });
        }
        if !timed_out.is_empty() {
            hints.push("a gpu that does not answer is wedged or initialising without persistence mode: read `dmesg | grep -i xid`, enable nvidia-persistenced, and raise --timeout if the node is only slow");
        }
        return Outcome::error(format!("{} ({count_text})", not_judged.join("; ")))
            .evidence_all(evidence)
            .hint(hints.join("; "));
    }
    let extra: Vec<&String> = in_nvml.difference(&on_pci).collect();
    if !extra.is_empty() && !unread_functions.is_empty() {
        return Outcome::warn(format!(
            "nvml reports gpu(s) not seen on pci: {} ({count_text})",
            extra
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ))
        .held_back_by(unread_functions);
    }
    let mut outcome = if extra.is_empty() {
        Outcome::pass(format!("all gpus known to nvml ({count_text})"))
    } else {
        Outcome::warn(format!(
            "nvml reports gpu(s) not seen on pci: {} ({count_text})",
            extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
        ))
        .hint("the pci view may be incomplete (restricted /sys in a container?): compare `lspci -d 10de:` with `nvidia-smi -L`")
    };
    if !excluded.is_empty() {
        let list: Vec<&str> = excluded.iter().map(|s| s.as_str()).collect();
        outcome = Outcome::warn(format!(
            "{} excluded by the driver (NVreg_ExcludedGpus): {}",
            list.len(),
            list.join(" ")
        ))
        .evidence(
            Evidence::new(
                format!("{PROC_DRIVER_GPUS}/*/information"),
                "GPU Excluded: Yes",
            )
            .expected("No"),
        )
        .hint(
            "remove the gpu from NVreg_ExcludedGpus (/etc/modprobe.d) if it should serve workloads",
        );
    }
    outcome.evidence(
        Evidence::new("nvml.device_count", nvml.device_count.to_string())
            .expected(on_pci.len().to_string()),
    )
}

fn join_indexes(indexes: &[u32]) -> String {
    indexes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inside a Pod (the kubelet sets `KUBERNETES_SERVICE_HOST` in every container).
fn in_pod(ctx: &Context<'_>) -> bool {
    ctx.env().contains_key("KUBERNETES_SERVICE_HOST")
}

/// Why NVML counts a GPU it then refuses (nvml.h: `nvmlDeviceGetCount_v2` counts devices that
/// `nvmlDeviceGetHandleByIndex_v2` answers with NO_PERMISSION): the device cgroup lets this
/// process open only some /dev/nvidiaN (NVIDIA/nvidia-docker#393: a cgroup denying 2 of 4 GPUs
/// gives "nvml: Insufficient Permissions").
fn permission_cause(ctx: &Context<'_>) -> &'static str {
    if in_pod(ctx) {
        "an unprivileged container sees only the gpus allocated to it"
    } else {
        "the device cgroup or /dev/nvidia* permissions refuse this process"
    }
}

/// What the GPUs that did not answer in time say together: the one that stopped answering first
/// (and where) with the siblings that waited behind it, or the list.
fn unanswered_text(devices: &[NvmlDevice], timed_out: &[u32]) -> String {
    let behind: Vec<u32> = devices
        .iter()
        .filter(|d| timed_out.contains(&d.index) && d.stalled_behind.is_some())
        .map(|d| d.index)
        .collect();
    let first = devices
        .iter()
        .filter_map(|d| d.stalled_behind)
        .next()
        .and_then(|i| devices.iter().find(|d| d.index == i));
    match first {
        Some(first) if !behind.is_empty() => format!(
            "{} stopped answering nvml{}; gpu(s) {} waited behind it (one wedged gpu stalls its siblings)",
            gpu_health::gpu_label(first),
            first
                .stuck_at
                .as_deref()
                .map(|at| format!(" at {at}"))
                .unwrap_or_default(),
            join_indexes(&behind)
        ),
        _ => format!(
            "gpu(s) {} did not answer nvml within its budget",
            join_indexes(timed_out)
        ),
    }
}
