//! The node around the GPUs: host and kernel (release, command line, loaded modules), the
//! container stack (toolkit config, containerd/CRI-O, CDI specs, GPU Operator validations), the
//! kubelet's device plugins and allocatable resources, and its resource-manager policies.

use std::collections::BTreeMap;

use super::{Facts, POD_RESOURCES_ALLOCATABLE, list, unreadable};
use crate::checks::Context;
use crate::facts::node;

pub(super) fn node(ctx: &Context<'_>, facts: &mut Facts) {
    let identity = node::gather(ctx.source());
    let s = "node";
    facts.put(s, "node", "hostname", or_unknown(identity.hostname));
    facts.put(s, "node", "kernel", or_unknown(identity.kernel));
    facts.put(
        s,
        "node",
        "profile",
        ctx.profile()
            .map(|p| p.name.clone())
            .unwrap_or_else(|| "none".into()),
    );
    match node::gather_cmdline(ctx.source()) {
        Ok(Some(text)) => {
            let subject = crate::report::facts::KERNEL_COMMAND_LINE;
            facts.touch(s, subject);
            // A parameter given twice: the kernel applies both in order, the last one wins for
            // most; keep every value so a repeated parameter reads as such.
            let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (key, value) in node::parse_cmdline_params(&text) {
                seen.entry(key)
                    .or_default()
                    .push(value.unwrap_or_else(|| "(set)".into()));
            }
            for (key, values) in seen {
                let key = if key == "--" {
                    "-- (init arguments)".into()
                } else {
                    key
                };
                facts.put(s, subject, &key, values.join(" then "));
            }
        }
        Ok(None) => facts.put(s, "kernel command line", "(file)", "not recorded"),
        Err(err) => facts.put(s, "kernel command line", "(file)", unreadable(&err)),
    }
    match ctx.modules() {
        Ok(loaded) => {
            facts.touch(s, "kernel modules");
            for (name, module) in &loaded.modules {
                facts.put(s, "kernel modules", name, module.state.to_ascii_lowercase());
            }
        }
        Err(err) => facts.put(s, "kernel modules", "(list)", unreadable(err)),
    }
}

fn or_unknown(value: Option<String>) -> String {
    value.unwrap_or_else(|| "unknown".into())
}

pub(super) fn toolkit(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "toolkit";
    let toolkit = ctx.toolkit();
    match &toolkit.config {
        None => facts.put(s, "toolkit", "config", "absent"),
        Some((path, Ok(config))) => {
            facts.put(s, "toolkit", "config file", path.as_str());
            facts.put(
                s,
                "toolkit",
                "mode",
                config
                    .mode
                    .clone()
                    .unwrap_or_else(|| "auto (default)".into()),
            );
            facts.put(s, "toolkit", "cdi spec dirs", list(&config.cdi_spec_dirs));
        }
        Some((path, Err(err))) => {
            facts.put(s, "toolkit", "config file", path.as_str());
            facts.put(s, "toolkit", "config", unreadable(err));
        }
    }
    facts.put(s, "toolkit", "binaries", list(&toolkit.binaries));

    let subject = "container runtime";
    match ctx.runtime() {
        Ok(None) => facts.put(s, subject, "kind", "none found"),
        Err(err) => facts.put(s, subject, "kind", unreadable(err)),
        Ok(Some(runtime)) => {
            let settings = &runtime.settings;
            facts.put(s, subject, "kind", runtime.kind.name());
            if let Some(v) = settings.version {
                facts.put(s, subject, "config version", v.to_string());
            }
            facts.put(s, subject, "default runtime", settings.effective_default());
            facts.put(
                s,
                subject,
                "nvidia runtimes",
                list(settings.nvidia_handlers.iter().map(|h| match &h.binary {
                    Some(b) => format!("{} ({b})", h.name),
                    None => h.name.clone(),
                })),
            );
            facts.put(
                s,
                subject,
                "cdi",
                if settings.cdi_on(runtime.kind) {
                    "on"
                } else {
                    "off"
                },
            );
        }
    }

    let cdi = ctx.cdi();
    for spec in &cdi.specs {
        let subject = format!("cdi spec {}", spec.path);
        facts.put(s, &subject, "kind", spec.kind.as_str());
        facts.put(s, &subject, "devices", spec.devices.len().to_string());
        facts.put(s, &subject, "cdi devices", list(&spec.devices));
        facts.put(s, &subject, "driver versions", list(&spec.driver_versions));
    }
    for problem in &cdi.problems {
        facts.put(
            s,
            &format!("cdi spec {}", problem.path),
            "kind",
            unreadable(problem),
        );
    }

    match ctx.validations() {
        Ok(None) => facts.put(s, "gpu operator", "validations", "not an operator node"),
        Ok(Some(markers)) => facts.put(s, "gpu operator", "validations", list(markers)),
        Err(err) => facts.put(s, "gpu operator", "validations", unreadable(err)),
    }
}

pub(super) fn device_plugin(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "device-plugin";
    let kubelet = ctx.kubelet();
    facts.put(
        s,
        "kubelet",
        "present",
        if kubelet.present() { "yes" } else { "no" },
    );
    if !kubelet.present() {
        return;
    }
    facts.put(
        s,
        "kubelet",
        "pod-resources socket",
        if kubelet.pod_resources_socket {
            "present"
        } else {
            "absent"
        },
    );
    facts.put(
        s,
        "kubelet",
        "plugin sockets",
        match &kubelet.plugin_dir {
            None => "no device-plugin directory".to_string(),
            Some(entries) => list(entries.iter().filter(|n| n.ends_with(".sock"))),
        },
    );
    match &kubelet.checkpoint {
        Ok(None) => facts.put(s, "checkpoint", "(file)", "absent"),
        Err(err) => facts.put(s, "checkpoint", "(file)", unreadable(err)),
        Ok(Some(checkpoint)) => {
            facts.touch(s, "checkpoint");
            for (resource, ids) in &checkpoint.registered {
                facts.put(
                    s,
                    "checkpoint",
                    &format!("{resource} registered"),
                    ids.len().to_string(),
                );
            }
        }
    }

    let answers = ctx.pod_resources();
    // The kind is the fact; its wording (the OS's, the kubelet's) is shown apart as `message`.
    let allocatable = match (&answers.error, &answers.allocatable) {
        (Some(err), _) => Err((err.kind.describe(), err.message.clone())),
        (None, Some(crate::answers::pod_resources::RpcAnswer::Error(err))) => {
            Err((err.kind.describe(), err.message.clone()))
        }
        (None, None) => Err(("not asked", String::new())),
        (None, Some(crate::answers::pod_resources::RpcAnswer::Value(value))) => Ok(value),
    };
    match allocatable {
        Ok(value) => {
            facts.put(s, "pod-resources", "answer", "ok");
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for device in &value.devices {
                *counts.entry(device.resource_name.as_str()).or_default() +=
                    device.device_ids.len();
            }
            facts.touch(s, POD_RESOURCES_ALLOCATABLE);
            for (resource, n) in counts {
                facts.put(s, POD_RESOURCES_ALLOCATABLE, resource, n.to_string());
            }
        }
        Err((kind, message)) => {
            facts.put(s, "pod-resources", "answer", kind);
            if !message.is_empty() {
                facts.put(s, "pod-resources", "message", message.as_str());
            }
            facts.unavailable.insert(
                POD_RESOURCES_ALLOCATABLE.to_string(),
                format!("{kind}: {message}"),
            );
        }
    }
}

pub(super) fn kubelet_policies(ctx: &Context<'_>, facts: &mut Facts) {
    let s = "topology";
    match ctx.kubelet_config() {
        Ok(None) => {}
        Err(err) => facts.put(s, "kubelet config", "policies", unreadable(err)),
        Ok(Some((config, path))) => {
            let subject = "kubelet config";
            facts.put(s, subject, "config file", path.as_str());
            let or_default = |v: &Option<String>, default: &str| {
                v.clone().unwrap_or_else(|| format!("{default} (default)"))
            };
            facts.put(
                s,
                subject,
                "topology manager policy",
                or_default(&config.topology_manager_policy, "none"),
            );
            facts.put(
                s,
                subject,
                "topology manager scope",
                or_default(&config.topology_manager_scope, "container"),
            );
            facts.put(
                s,
                subject,
                "cpu manager policy",
                or_default(&config.cpu_manager_policy, "none"),
            );
            facts.put(
                s,
                subject,
                "memory manager policy",
                or_default(&config.memory_manager_policy, "None"),
            );
            // The reservations the static managers need (topology.kubelet_managers).
            let cpu: Vec<String> = [
                ("kube", &config.kube_reserved),
                ("system", &config.system_reserved),
            ]
            .iter()
            .filter_map(|(who, m)| m.get("cpu").map(|q| format!("{who} {q}")))
            .collect();
            let reserved_cpus = match (&config.reserved_system_cpus, cpu.is_empty()) {
                (Some(list), _) => list.clone(),
                (None, false) => cpu.join(", "),
                (None, true) => "none".to_string(),
            };
            facts.put(s, subject, "reserved cpus", reserved_cpus);
            let memory: Vec<String> = config
                .reserved_memory
                .iter()
                .map(|r| {
                    format!(
                        "numa {}: {}",
                        r.numa_node
                            .map(|n| n.to_string())
                            .unwrap_or_else(|| "?".into()),
                        r.memory.as_deref().unwrap_or("?")
                    )
                })
                .collect();
            facts.put(
                s,
                subject,
                "reserved memory",
                if memory.is_empty() {
                    "none".to_string()
                } else {
                    memory.join(", ")
                },
            );
        }
    }
}
