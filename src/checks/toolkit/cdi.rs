//! toolkit.cdi_specs: the CDI specs of kind `nvidia.com/gpu` name exactly the GPUs NVML sees
//! (by uuid and, when the spec uses them, by index) and mount the loaded driver's libraries
//! (reference/kubernetes.md §6). Names of a GPU NVML lost while it stays on PCI are the lost
//! GPU's, not a stale spec (checks/causes.rs).

use super::*;
use crate::checks::off_nvml;
fn gpu_label(d: &NvmlDevice) -> String {
    format!(
        "gpu {} ({}, {})",
        d.index,
        d.pci_bus_id.as_deref().unwrap_or("?"),
        d.uuid.as_deref().unwrap_or("no uuid")
    )
}

/// Is a CDI device name one of the full-GPU forms for this device?
pub(super) fn names_gpu(name: &str, d: &NvmlDevice) -> bool {
    d.uuid.as_deref() == Some(name)
        || name == d.index.to_string()
        || name.strip_prefix("gpu") == Some(&d.index.to_string())
}

pub(super) fn cdi_specs(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_applicable(ctx) {
        return skip;
    }
    let facts = ctx.cdi();
    let dirs = facts.dirs.join(", ");
    if let Some(err) = facts.problems.first() {
        if err.message.starts_with("line ") || err.message.starts_with("not a cdi spec") {
            return Outcome::fail(format!("cdi spec {} does not parse: {}", err.path, err.message))
                .evidence_all(facts.problems.iter().map(|p| Evidence::new(&p.path, &p.message).expected("a valid cdi spec")))
                .hint("regenerate it: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` (or delete a stray file); the runtime refuses every cdi device while a spec is broken")
                .action(Action::FixConfig);
        }
        return Outcome::unreadable(err);
    }
    let specs: Vec<_> = facts.of_kind(NVIDIA_GPU_KIND).collect();
    let cdi_only = matches!(ctx.runtime(), Ok(Some(rt)) if rt.settings.nvidia_handlers.is_empty() && rt.settings.cdi_on(rt.kind));
    if specs.is_empty() {
        if cdi_only {
            return Outcome::fail(format!("the runtime relies on cdi but no {NVIDIA_GPU_KIND} spec exists"))
                .evidence(Evidence::new(&dirs, "no spec of kind nvidia.com/gpu").expected("a spec naming every gpu"))
                .hint("`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` (toolkit ≥ 1.18: `systemctl enable --now nvidia-cdi-refresh`)")
                .action(Action::FixConfig);
        }
        return Outcome::skip(format!(
            "no {NVIDIA_GPU_KIND} cdi spec in {dirs} (the runtime uses the nvidia runtime handler)"
        ));
    }
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Outcome::skip("nvml unavailable (see driver.nvml_init)");
    }
    let gpus: Vec<&NvmlDevice> = nvml.devices.iter().filter(|d| d.error.is_none()).collect();
    // GPUs NVML counts but could not open (a handle refused by the device cgroup, not answered,
    // lost): their index still names them, and a uuid nothing else matches may be theirs.
    let unopened: Vec<&NvmlDevice> = nvml.devices.iter().filter(|d| d.error.is_some()).collect();
    let names: Vec<(&str, &str)> = specs
        .iter()
        .flat_map(|s| s.devices.iter().map(move |n| (n.as_str(), s.path.as_str())))
        .collect();
    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    // Names nvml does not know, by spec file: one sentence per file.
    let mut unknown: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, path) in &names {
        if *name == "all" || name.contains(':') {
            continue; // `all`, and MIG devices `<gpu>:<mig>`
        }
        let full_gpu = name.starts_with("GPU-")
            || name.parse::<u32>().is_ok()
            || name
                .strip_prefix("gpu")
                .is_some_and(|n| n.parse::<u32>().is_ok());
        let maybe_unopened = unopened.iter().any(|d| names_gpu(name, d))
            || (name.starts_with("GPU-") && !unopened.is_empty());
        if full_gpu && !gpus.iter().any(|d| names_gpu(name, d)) && !maybe_unopened {
            match unknown.iter_mut().find(|(p, _)| p == path) {
                Some((_, list)) => list.push(name),
                None => unknown.push((path, vec![name])),
            }
            evidence.push(
                Evidence::new(*path, format!("device {name:?}"))
                    .expected("a gpu nvml sees (uuid or index)"),
            );
        }
    }
    for (path, list) in &unknown {
        problems.push(format!(
            "{path} names {}, which nvml does not know",
            list.join(", ")
        ));
    }
    // Each naming style a spec uses (`nvidia-ctk --device-name-strategy=index,uuid`) must
    // cover every GPU: a device plugin asking for `nvidia.com/gpu=GPU-<uuid>` fails otherwise.
    let by_uuid = names.iter().any(|(n, _)| n.starts_with("GPU-"));
    let by_index = names.iter().any(|(n, _)| {
        n.parse::<u32>().is_ok()
            || n.strip_prefix("gpu")
                .is_some_and(|i| i.parse::<u32>().is_ok())
    });
    for d in &gpus {
        let uuid_named = names.iter().any(|(n, _)| d.uuid.as_deref() == Some(*n));
        let index_named = names
            .iter()
            .any(|(n, _)| names_gpu(n, d) && d.uuid.as_deref() != Some(*n));
        let missing = if by_uuid && !uuid_named {
            Some("by uuid")
        } else if by_index && !index_named {
            Some("by index")
        } else if !by_uuid && !by_index {
            Some("at all")
        } else {
            None
        };
        if let Some(how) = missing {
            problems.push(format!("no spec names {} {how}", gpu_label(d)));
            evidence.push(
                Evidence::new(&dirs, format!("no device for {} {how}", gpu_label(d)))
                    .expected("a device named by its uuid (and index, when the spec uses indexes)"),
            );
        }
    }
    let driver = match ctx.module_version() {
        Ok(Some((v, _))) => Some(v.clone()),
        _ => nvml.driver_version.clone(),
    };
    if let Some(driver) = &driver {
        for spec in &specs {
            let others: Vec<&String> = spec
                .driver_versions
                .iter()
                .filter(|v| *v != driver)
                .collect();
            if !others.is_empty() {
                let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
                problems.push(format!(
                    "{} mounts driver {} libraries, driver {driver} is loaded",
                    spec.path,
                    list.join(", ")
                ));
                evidence.push(
                    Evidence::new(
                        &spec.path,
                        format!("libraries of driver {}", list.join(", ")),
                    )
                    .expected(format!("driver {driver}")),
                );
            }
        }
    }
    let files: Vec<&str> = specs.iter().map(|s| s.path.as_str()).collect();
    // Names only the GPUs NVML lost while they stay on PCI can account for: the spec is right
    // about the node's hardware, and regenerating it would hide the loss (checks/causes.rs).
    let off = off_nvml::off_nvml(ctx);
    let unknown_names: Vec<&str> = unknown
        .iter()
        .flat_map(|(_, l)| l.iter().copied())
        .collect();
    if !off.is_empty()
        && !unknown_names.is_empty()
        && problems.len() == unknown.len()
        && unknown_names
            .iter()
            .all(|n| off_nvml::accounts_for(&off, nvml.devices.len(), n))
    {
        let lost: Vec<String> = off.iter().map(|g| g.bdf.clone()).collect();
        return Outcome::fail(format!(
            "cdi spec names {}: gpu {}, which nvml lost (on pci, gone from nvml), not a stale spec",
            unknown_names.join(", "),
            lost.join(", ")
        ))
        .evidence_all(evidence)
        .hint(format!(
            "do not regenerate the spec: that would drop gpu {} while the node still has it; bring the gpu back first (driver.gpu_count), then `nvidia-ctk cdi list` names it again",
            lost.join(", ")
        ))
        .action(Action::RebootNode)
        .about_gpus(lost)
        .follows_from("driver.gpu_count");
    }
    if !problems.is_empty() {
        return Outcome::fail(format!("stale cdi spec: {}", problems.join("; ")))
            .evidence_all(evidence)
            .hint(format!(
                "regenerate the spec after gpu or driver changes: `nvidia-ctk cdi generate --output=/{}` (toolkit ≥ 1.18: `systemctl restart nvidia-cdi-refresh`); check with `nvidia-ctk cdi list`",
                files.first().copied().unwrap_or("var/run/cdi/nvidia.yaml")
            ))
            .action(Action::FixConfig);
    }
    Outcome::pass(format!(
        "cdi specs name all {} gpu(s) ({})",
        gpus.len(),
        files.join(", ")
    ))
    .evidence(Evidence::new(
        files.join(", "),
        format!("{} device name(s) of kind {NVIDIA_GPU_KIND}", names.len()),
    ))
}
