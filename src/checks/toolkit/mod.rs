//! Toolkit layer: can a container reach the GPUs? The NVIDIA container toolkit is installed and
//! configured, the container runtime (containerd or CRI-O) uses it through a runtime handler or
//! CDI, the CDI specs name exactly the GPUs NVML sees, the GPU Operator's validation chain got
//! past the toolkit, and — when gpudoctor itself runs in a Pod — the container got its GPUs.
//! A node that is neither a Kubernetes node nor has a container runtime is `skip`.
//!
//! Sources: reference/kubernetes.md §5 (toolkit, containerd, CRI-O), §6 (CDI), §7 (operator
//! validator markers).

use std::collections::BTreeSet;

use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::FactError;
use crate::answers::nvml::NvmlDevice;
use crate::facts::cdi::NVIDIA_GPU_KIND;
use crate::facts::toolkit::{
    self, CONTAINERD_CONFIGS, CRIO_DROPINS, GKE_DRIVER_DIR, GKE_DRIVER_LIBS, RuntimeFacts,
    TOOLKIT_BINARIES, VALIDATION_STAGES, VALIDATIONS_DIR,
};
use crate::report::{Action, Evidence, Layer};

mod cdi;
use cdi::{cdi_specs, names_gpu};

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "toolkit.installed",
            layer: Layer::Toolkit,
            title: "the NVIDIA container toolkit is installed and its config parses",
            explain: Explain {
                reads: "/etc/nvidia-container-runtime/config.toml (or the GPU Operator's copy under /usr/local/nvidia/toolkit/.config), nvidia-container-runtime / nvidia-ctk / nvidia-container-runtime-hook in /usr/bin, /usr/local/bin, /usr/local/nvidia/toolkit; on GKE, the driver installer's /home/kubernetes/bin/nvidia/lib64",
                expects: "a toolkit binary on a usual path and, when present, a config.toml that parses (its `mode` is reported); on GKE no toolkit but the installer's libnvidia-ml.so.1 and libcuda.so.1 (GKE's device plugin mounts that directory into GPU containers instead)",
                why: "the toolkit's runtime or hook is what puts /dev/nvidia* and the driver libraries into a container; without it a Pod that was given a GPU sees none",
                fix: "install the toolkit (`apt-get install nvidia-container-toolkit` or `dnf install nvidia-container-toolkit`) or deploy the GPU Operator; regenerate a broken config with `nvidia-ctk config default --output=/etc/nvidia-container-runtime/config.toml`",
            },
            run: installed,
        },
        CheckDef {
            code: "toolkit.container_runtime",
            layer: Layer::Toolkit,
            title: "the container runtime uses the NVIDIA runtime or CDI",
            explain: Explain {
                reads: "containerd: /etc/containerd/config.toml and the files its `imports` name (k3s/RKE2: /var/lib/rancher/{k3s,rke2}/agent/etc/containerd/config.toml); CRI-O: /etc/crio/crio.conf and /etc/crio/crio.conf.d/*",
                expects: "a runtime handler whose binary is nvidia-container-runtime (reported with whether it is the default, else Pods need `runtimeClassName: nvidia`), or CDI injection on (`enable_cdi = true`; default on containerd 2.x and CRI-O); on GKE (its driver installer's layout present, no toolkit) plain runc, since GKE's device plugin injects devices and libraries itself",
                why: "kubelet starts GPU Pods through the container runtime; if the runtime neither calls the NVIDIA runtime nor injects CDI devices, containers start without GPUs (gpud judges this broken too)",
                fix: "`nvidia-ctk runtime configure --runtime=containerd` (add `--set-as-default` to avoid RuntimeClasses; `--runtime=crio` for CRI-O) and restart the runtime; k3s and RKE2 add the `nvidia` handler themselves when the toolkit is installed before they start",
            },
            run: container_runtime,
        },
        CheckDef {
            code: "toolkit.cdi_specs",
            layer: Layer::Toolkit,
            title: "CDI specs parse and name every GPU NVML sees",
            explain: Explain {
                reads: "/etc/cdi/*.{yaml,json} and /var/run/cdi/*.{yaml,json} (plus spec dirs named in the toolkit or runtime config); NVML GPU UUIDs and indexes; the loaded driver version",
                expects: "every nvidia.com/gpu spec parses; together they name each NVML GPU by UUID or index (`0`, `gpu0`, `GPU-…`), no GPU that no longer exists, and libraries of the loaded driver version",
                why: "a runtime resolving CDI names fails container creation on an unknown device (`unresolvable CDI devices`), and a spec made for replaced GPUs or another driver version hands containers the wrong devices or libraries",
                fix: "regenerate the spec after any GPU or driver change: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` (toolkit ≥ 1.18: `systemctl restart nvidia-cdi-refresh`); list what resolves with `nvidia-ctk cdi list`",
            },
            run: cdi_specs,
        },
        CheckDef {
            code: "toolkit.operator_validations",
            layer: Layer::Toolkit,
            title: "the GPU Operator's validations have all passed",
            explain: Explain {
                reads: "/run/nvidia/validations/{driver,toolkit,cuda,plugin,mofed,nvidia-peermem,gdrcopy,nvidia-fs}-ready and driver-ready's IS_HOST_DRIVER; the profile's gpudirect_rdma, Mellanox (15b3) RDMA devices, and /proc/modules (nvidia_peermem, gdrdrv, nvidia_fs)",
                expects: "on GPU Operator nodes (the directory exists) the four markers driver → toolkit → cuda → plugin, and every optional one the node should have: mofed-ready and nvidia-peermem-ready on a GPUDirect RDMA platform (the profile says so and Mellanox NICs are present) whose RDMA the operator manages (it runs the driver, IS_HOST_DRIVER=false, or wrote either marker); nvidia-peermem-ready, gdrcopy-ready and nvidia-fs-ready when the operator runs the driver and nvidia_peermem, gdrdrv or nvidia_fs is loaded. The markers describe now (the validator's preStop removes them), there is no history to them",
                why: "the operator's validator writes each marker only after that stage worked end to end (toolkit: nvidia-smi inside a container; nvidia-peermem: the module loaded for GPUDirect RDMA); the first missing one names the stage that is broken, and without the peermem validation NCCL moves inter-node traffic through host memory (NVIDIA GPU Operator's nvidia-validator, https://github.com/NVIDIA/gpu-operator/tree/main/cmd/nvidia-validator)",
                fix: "read the validator's log for the missing stage: `kubectl -n gpu-operator logs -l app=nvidia-operator-validator -c <stage>-validation`; then the logs of that component on this node (nvidia-peermem: the nvidia-peermem-ctr container of the driver DaemonSet, enabled by driver.rdma.enabled=true; mofed: the network operator's driver pod)",
            },
            run: operator_validations,
        },
        CheckDef {
            code: "toolkit.container_gpus",
            layer: Layer::Toolkit,
            title: "inside a Pod: the container can access the GPUs it was given",
            explain: Explain {
                reads: "KUBERNETES_SERVICE_HOST and NVIDIA_VISIBLE_DEVICES from gpudoctor's own environment (.gpudoctor/env.json in a capture), the service-account mount, /dev/nvidia<N>, NVML's devices and bus ids; with --cuda the CUDA probe's answer (.gpudoctor/cuda.json in a capture)",
                expects: "when run in a Pod that was given GPUs: as many GPUs in NVML and /dev/nvidia<N> nodes as NVIDIA_VISIBLE_DEVICES names, each GPU it names one NVML opens; with --cuda a context and a whole 1 MiB round trip on each (deploy/validate.yaml runs it so)",
                why: "a Pod whose NVIDIA_VISIBLE_DEVICES is set but that sees no GPU was started by a runtime that ignored it (no nvidia runtime handler, wrong RuntimeClass)",
                fix: "give the Pod `runtimeClassName: nvidia` (or make nvidia the runtime's default), and check `kubectl describe pod` for the resource request `nvidia.com/gpu`",
            },
            run: container_gpus,
        },
    ]
}

/// `Some(skip)` when the layer does not apply: no kubelet, no runtime config, no toolkit.
pub(crate) fn not_applicable(ctx: &Context<'_>) -> Option<Outcome> {
    let kubelet = ctx.kubelet().present();
    let runtime = !matches!(ctx.runtime(), Ok(None));
    let toolkit = ctx.toolkit().config.is_some() || !ctx.toolkit().binaries.is_empty();
    (!kubelet && !runtime && !toolkit).then(|| {
        Outcome::skip("not a kubernetes node and no container runtime or nvidia toolkit configured")
    })
}

fn is_syntax(err: &FactError) -> bool {
    err.message.starts_with("syntax error")
}

/// A config that does not parse: fail naming the file and line.
fn syntax_failure(err: &FactError, fix: &str) -> Outcome {
    Outcome::fail(format!("{} does not parse: {}", err.path, err.message))
        .evidence(Evidence::new(&err.path, &err.message).expected("valid toml"))
        .hint(format!("fix {} at the line shown; {fix}", err.path))
        .action(Action::FixConfig)
}

fn installed(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_applicable(ctx) {
        return skip;
    }
    let facts = ctx.toolkit();
    let mut evidence = Vec::new();
    let mut mode = String::new();
    match &facts.config {
        Some((_, Err(err))) if is_syntax(err) => {
            return syntax_failure(
                err,
                "or regenerate it: `nvidia-ctk config default --output=/etc/nvidia-container-runtime/config.toml`",
            );
        }
        Some((_, Err(err))) => return Outcome::unreadable(err),
        Some((path, Ok(config))) => {
            let m = config.mode.as_deref().unwrap_or("auto");
            mode = format!(", mode {m}");
            evidence.push(Evidence::new(path.as_str(), format!("mode = {m:?}")));
        }
        None => {}
    }
    if facts.binaries.is_empty() && facts.config.is_none() && facts.gke_installer() {
        return gke_installer_pass(facts, "no nvidia container toolkit, as on every gke node");
    }
    if facts.binaries.is_empty() {
        if let Some(libs) = facts.gke_driver.as_ref().filter(|_| facts.config.is_none()) {
            return gke_installer_incomplete(libs);
        }
        let searched: BTreeSet<&str> = TOOLKIT_BINARIES
            .iter()
            .filter_map(|p| p.rsplit_once('/').map(|(d, _)| d))
            .collect();
        let outcome = if facts.config.is_some() {
            Outcome::warn("nvidia container toolkit config present, but no toolkit binary found")
        } else {
            Outcome::fail("nvidia container toolkit not installed")
        };
        return outcome
            .evidence_all(evidence)
            .evidence(
                Evidence::new(
                    searched.into_iter().collect::<Vec<_>>().join(", "),
                    "no nvidia-container-runtime, nvidia-ctk or nvidia-container-runtime-hook",
                )
                .expected("the toolkit's binaries"),
            )
            .hint("install it: `apt-get install nvidia-container-toolkit` (or `dnf install nvidia-container-toolkit`), or deploy the gpu operator, which installs it under /usr/local/nvidia/toolkit")
            .action(Action::FixConfig);
    }
    let names: Vec<&str> = facts
        .binaries
        .iter()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let config_note = if facts.config.is_none() {
        " (no config.toml: built-in defaults)"
    } else {
        ""
    };
    Outcome::pass(format!(
        "nvidia container toolkit installed: {}{mode}{config_note}",
        names.join(", ")
    ))
    .evidence(Evidence::new("toolkit binaries", facts.binaries.join(" ")))
    .evidence_all(evidence)
}

/// GKE's driver installer in the toolkit's place (`facts/toolkit.rs`, `GKE_DRIVER_DIR`).
fn gke_installer_pass(facts: &toolkit::ToolkitFacts, what: &str) -> Outcome {
    Outcome::pass(format!(
        "{what}: gke's driver installer put the driver in /{GKE_DRIVER_DIR}, which gke's device plugin mounts into gpu containers at /usr/local/nvidia with their /dev/nvidia* nodes"
    ))
    .evidence(Evidence::new(
        GKE_DRIVER_DIR,
        facts.gke_driver.as_deref().unwrap_or_default().join(" "),
    ))
}

/// GKE's installer directory without the driver libraries: the installer has not finished (or
/// failed), and GKE's device plugin has nothing to mount into GPU containers.
fn gke_installer_incomplete(libs: &[String]) -> Outcome {
    let missing: Vec<&str> = GKE_DRIVER_LIBS
        .iter()
        .copied()
        .filter(|l| !libs.iter().any(|p| p == l))
        .collect();
    Outcome::fail(format!(
        "gke's driver installer directory /{GKE_DRIVER_DIR} lacks {}: the installer has not finished, so gpu containers get no driver libraries",
        missing.join(", ")
    ))
    .evidence(
        Evidence::new(GKE_DRIVER_DIR, if libs.is_empty() { "no driver library".to_string() } else { libs.join(" ") })
            .expected(GKE_DRIVER_LIBS.join(" ")),
    )
    .hint("look at the nvidia-driver-installer pod on this node (`kubectl -n kube-system logs -l k8s-app=nvidia-driver-installer -c nvidia-driver-installer`); on GKE check the node pool's `gpu-driver-version` setting")
    .action(Action::FixConfig)
}

/// The `nvidia` handler to report: the default one if any, else the first.
fn chosen_handler(rt: &RuntimeFacts) -> Option<&toolkit::Handler> {
    let s = &rt.settings;
    s.nvidia_handlers
        .iter()
        .find(|h| Some(h.name.as_str()) == s.default_runtime.as_deref())
        .or_else(|| s.nvidia_handlers.first())
}

fn container_runtime(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_applicable(ctx) {
        return skip;
    }
    let rt = match ctx.runtime() {
        Ok(Some(rt)) => rt,
        Ok(None) => {
            if !ctx.kubelet().present() {
                return Outcome::skip(
                    "no container runtime config (containerd or cri-o) on this node",
                );
            }
            return Outcome::fail("kubernetes node without a containerd or cri-o config: the runtime runs on defaults, without the nvidia runtime")
                .evidence(Evidence::new(
                    format!("{}, etc/crio/crio.conf, {CRIO_DROPINS}", CONTAINERD_CONFIGS.join(", ")),
                    "none present",
                ).expected("a runtime config with an nvidia runtime handler or cdi on"))
                .hint("`nvidia-ctk runtime configure --runtime=containerd --set-as-default` (or `--runtime=crio`), then restart the runtime")
                .action(Action::FixConfig);
        }
        Err(err) if is_syntax(err) => {
            return syntax_failure(
                err,
                "the runtime refuses to start with it or ignores the file",
            );
        }
        Err(err) => return Outcome::unreadable(err),
    };
    let s = &rt.settings;
    let runtime = rt.kind.name();
    let cdi = s.cdi_on(rt.kind);
    let files = Evidence::new(rt.files.join(", "), {
        let version = s
            .version
            .map(|v| format!("version {v}; "))
            .unwrap_or_default();
        format!(
            "{version}handlers: {}; default: {}; cdi: {}",
            if s.handlers.is_empty() {
                "none declared".to_string()
            } else {
                s.handlers.join(", ")
            },
            s.effective_default(),
            if cdi { "on" } else { "off" }
        )
    });
    let cdi_note = if cdi { "; cdi on" } else { "" };
    if let Some(handler) = chosen_handler(rt) {
        let binary = handler
            .binary
            .as_deref()
            .unwrap_or("nvidia-container-runtime on PATH");
        if let Some(abs) = handler.binary.as_deref().filter(|b| b.starts_with('/'))
            && !ctx.source().exists(abs)
        {
            return Outcome::fail(format!(
                "{runtime} runtime handler `{}` runs {abs}, which does not exist",
                handler.name
            ))
            .evidence(files)
            .evidence(Evidence::new(&handler.file, format!("BinaryName = {abs:?}")).expected("an existing nvidia-container-runtime"))
            .hint("install the toolkit at that path, or rerun `nvidia-ctk runtime configure` so the handler names the installed binary, then restart the runtime")
            .action(Action::FixConfig);
        }
        let default = s.default_runtime.as_deref() == Some(handler.name.as_str());
        let summary = if default {
            format!(
                "{runtime}: runtime handler `{}` ({binary}) is the default runtime{cdi_note}",
                handler.name
            )
        } else {
            format!(
                "{runtime}: runtime handler `{}` ({binary}), not the default (`{}`): gpu pods need `runtimeClassName: {}`{cdi_note}",
                handler.name,
                s.effective_default(),
                handler.name
            )
        };
        return Outcome::pass(summary).evidence(files);
    }
    if cdi {
        return Outcome::pass(format!(
            "{runtime}: no nvidia runtime handler, cdi on: gpus reach containers through cdi specs"
        ))
        .evidence(files);
    }
    if rt.kind == toolkit::RuntimeKind::Containerd
        && ctx.toolkit().gke_installer()
        && ctx.toolkit().binaries.is_empty()
    {
        return gke_installer_pass(
            ctx.toolkit(),
            &format!(
                "{runtime}: no nvidia runtime handler and cdi off, as gke configures it (default `{}`)",
                s.effective_default()
            ),
        )
        .evidence(files);
    }
    Outcome::fail(format!(
        "{runtime} has no nvidia runtime handler and cdi is off: containers cannot get gpus"
    ))
    .evidence(files.expected("a handler running nvidia-container-runtime, or enable_cdi = true"))
    .hint(match rt.kind {
        toolkit::RuntimeKind::Containerd => "`nvidia-ctk runtime configure --runtime=containerd --set-as-default` (or set `enable_cdi = true`), then `systemctl restart containerd`; on k3s/RKE2 install the toolkit and restart the k3s/rke2 service",
        toolkit::RuntimeKind::Crio => "`nvidia-ctk runtime configure --runtime=crio --set-as-default`, then `systemctl restart crio`",
    })
    .action(Action::FixConfig)
}

/// What `driver-ready` says of who runs the driver: `IS_HOST_DRIVER=false` is the operator's
/// driver container (kubernetes.md §7).
fn operator_runs_driver(ctx: &Context<'_>) -> bool {
    ctx.source()
        .read_to_string(&format!("{VALIDATIONS_DIR}/driver-ready"))
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "IS_HOST_DRIVER=false"))
}

/// A GPUDirect RDMA platform: the profile expects it and Mellanox RDMA NICs are present.
fn gpudirect_platform(ctx: &Context<'_>) -> Option<String> {
    let profile = ctx.profile().filter(|p| p.gpudirect_rdma == Some(true))?;
    let mellanox: Vec<String> = match (ctx.rdma(), ctx.pci()) {
        (Ok(rdma), Ok(pci)) => rdma
            .devices
            .iter()
            .filter(|d| {
                d.pci.as_deref().is_some_and(|bdf| {
                    pci.functions
                        .iter()
                        .any(|f| f.bdf == bdf && f.vendor == crate::facts::pci::VENDOR_MELLANOX)
                })
            })
            .map(|d| d.name.clone())
            .collect(),
        _ => Vec::new(),
    };
    (!mellanox.is_empty()).then(|| {
        format!(
            "gpudirect rdma platform: profile {} and {} mellanox rdma device(s)",
            profile.name,
            mellanox.len()
        )
    })
}

/// The optional markers this node should have, each with why (see the check's explain).
fn optional_stages(
    ctx: &Context<'_>,
    names: &[String],
) -> (Vec<(&'static str, String)>, Option<String>) {
    let has = |m: &str| names.iter().any(|n| n == m);
    let operator_driver = operator_runs_driver(ctx);
    let loaded = |m: &str| {
        ctx.modules()
            .as_ref()
            .is_ok_and(|mods| mods.get(m).is_some())
    };
    let mut expected: Vec<(&'static str, String)> = Vec::new();
    let mut note = None;
    match gpudirect_platform(ctx) {
        Some(why) if operator_driver || has("mofed-ready") || has("nvidia-peermem-ready") => {
            expected.push(("mofed", why.clone()));
            expected.push(("nvidia-peermem", why));
        }
        Some(why) => {
            note = Some(format!(
                "{why}, but the operator does not manage its rdma (host driver, no mofed-ready or nvidia-peermem-ready): rdma.gpudirect judges peermem"
            ));
        }
        None => {}
    }
    if operator_driver {
        for (stage, module) in [
            ("nvidia-peermem", "nvidia_peermem"),
            ("gdrcopy", "gdrdrv"),
            ("nvidia-fs", "nvidia_fs"),
        ] {
            if loaded(module) && !expected.iter().any(|(s, _)| *s == stage) {
                expected.push((
                    stage,
                    format!("the operator runs the driver and {module} is loaded"),
                ));
            }
        }
    }
    (expected, note)
}

fn operator_validations(ctx: &Context<'_>) -> Outcome {
    // driver-ready there but unreadable: judged as a host driver, and said.
    let unread: Option<FactError> = ctx
        .source()
        .read_to_string(&format!("{VALIDATIONS_DIR}/driver-ready"))
        .err()
        .filter(|err| !err.is_missing())
        .map(FactError::from);
    operator_validations_judged(ctx).noting_unread(unread.iter())
}

fn operator_validations_judged(ctx: &Context<'_>) -> Outcome {
    if let Some(skip) = not_applicable(ctx) {
        return skip;
    }
    let names = match ctx.validations() {
        Ok(Some(names)) => names,
        Ok(None) => {
            return Outcome::skip(format!("not a gpu operator node (no {VALIDATIONS_DIR})"));
        }
        Err(err) => return Outcome::unreadable(err),
    };
    let (optional, note) = optional_stages(ctx, names);
    let mut stages: Vec<(&str, Option<&str>)> =
        VALIDATION_STAGES.iter().map(|s| (*s, None)).collect();
    stages.extend(optional.iter().map(|(s, why)| (*s, Some(why.as_str()))));
    let missing: Vec<(&str, Option<&str>)> = stages
        .iter()
        .copied()
        .filter(|(stage, _)| !names.iter().any(|n| *n == format!("{stage}-ready")))
        .collect();
    let present: Vec<&str> = names
        .iter()
        .filter(|n| n.ends_with("-ready"))
        .map(String::as_str)
        .collect();
    let observed = if present.is_empty() {
        "no markers".to_string()
    } else {
        present.join(" ")
    };
    let wanted: Vec<String> = stages.iter().map(|(s, _)| format!("{s}-ready")).collect();
    let note_text = note.map(|n| format!("; {n}")).unwrap_or_default();
    let Some((first, why)) = missing.first().copied() else {
        return Outcome::pass(format!(
            "gpu operator validations passed: {}{note_text}",
            stages
                .iter()
                .map(|(s, _)| *s)
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .evidence(Evidence::new(VALIDATIONS_DIR, observed));
    };
    let files: Vec<String> = missing.iter().map(|(s, _)| format!("{s}-ready")).collect();
    let because = why
        .map(|w| format!(", expected because: {w}"))
        .unwrap_or_default();
    let hint = match first {
        "nvidia-peermem" => "the nvidia-peermem validation waits for the nvidia_peermem module: read the driver DaemonSet's nvidia-peermem-ctr container on this node (`kubectl -n gpu-operator logs <driver-pod> -c nvidia-peermem-ctr`) and the validator's `nvidia-peermem-validation`; GPUDirect RDMA needs driver.rdma.enabled=true (and MOFED or the inbox mlx5 driver)".to_string(),
        "mofed" => "the mofed validation waits for the Mellanox driver: check the network operator's mofed driver pod on this node (or `lsmod | grep mlx5_core` with host MOFED, driver.rdma.useHostMofed=true)".to_string(),
        _ => format!(
            "read the validator: `kubectl -n gpu-operator logs -l app=nvidia-operator-validator -c {first}-validation --all-containers=false` on this node's pod, then the logs of the {first} component's daemonset; later stages wait for this one"
        ),
    };
    Outcome::fail(format!(
        "gpu operator {first} validation has not passed ({} missing{because}){note_text}",
        files.join(", ")
    ))
    .evidence(Evidence::new(VALIDATIONS_DIR, observed).expected(wanted.join(" ")))
    .hint(hint)
    .action(Action::RestartComponent)
}

fn container_gpus(ctx: &Context<'_>) -> Outcome {
    let visible = match super::container::given_gpus(ctx) {
        Ok(visible) => visible,
        Err(skip) => return skip,
    };
    let nvml = ctx.nvml();
    let devices: Vec<&NvmlDevice> = if nvml.init_error.is_none() {
        nvml.devices.iter().filter(|d| d.error.is_none()).collect()
    } else {
        Vec::new()
    };
    let seen = devices.len();
    // The GPUs the container was given, by PCI bus id: what the validation Pod
    // (deploy/validate.yaml) reports as its allocation, the ids a ticket names.
    let bus_ids: Vec<&str> = devices
        .iter()
        .map(|d| d.pci_bus_id.as_deref().unwrap_or("?"))
        .collect();
    // Each GPU the device plugin named (a UUID with its default envvar strategy, or an
    // index) must be one the container can open; MIG or CDI names are not GPU names.
    let unmatched: Vec<&str> = visible
        .split(',')
        .map(str::trim)
        .filter(|n| {
            (n.starts_with("GPU-") || n.bytes().all(|b| b.is_ascii_digit())) && !n.is_empty()
        })
        .filter(|n| !devices.iter().any(|d| names_gpu(n, d)))
        .collect();
    let nodes = ctx
        .source()
        .list_dir("dev", &|n| {
            n.strip_prefix("nvidia")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|v| v.len())
        .unwrap_or(0);
    let wanted = if visible == "all" {
        None
    } else {
        Some(visible.split(',').filter(|s| !s.trim().is_empty()).count())
    };
    let evidence = vec![
        Evidence::new("env NVIDIA_VISIBLE_DEVICES", visible.as_str()),
        Evidence::new("dev/nvidia<N>", format!("{nodes} node(s)")),
        Evidence::new("nvml.device_count", seen.to_string()),
    ];
    let evidence: Vec<Evidence> = evidence
        .into_iter()
        .chain(std::iter::once(Evidence::new(
            "nvml pci_bus_id",
            bus_ids.join(" "),
        )))
        .collect();
    let enough = seen > 0 && nodes >= seen && wanted.is_none_or(|w| w == seen);
    if enough && unmatched.is_empty() {
        let cuda = match super::container::cuda_on_given(ctx, &bus_ids) {
            Ok(note) => note,
            Err(failed) => return failed.evidence_all(evidence),
        };
        return Outcome::pass(format!(
            "container can access {seen} gpu(s) {}: NVIDIA_VISIBLE_DEVICES={visible}, {nodes} /dev/nvidia<N> node(s){cuda}",
            bus_ids.join(" ")
        ))
        .evidence_all(evidence);
    }
    if enough {
        return Outcome::fail(format!(
            "container was given {} which nvml does not see; it sees {}",
            unmatched.join(" "),
            bus_ids.join(" ")
        ))
        .evidence_all(evidence)
        .hint("the runtime injected other gpus than the device plugin allocated: compare `kubectl describe pod` with the device plugin's log and the runtime's CDI/`NVIDIA_VISIBLE_DEVICES` handling")
        .action(Action::FixConfig);
    }
    let want_text = wanted.map_or("all gpus".to_string(), |w| format!("{w} gpu(s)"));
    Outcome::fail(format!(
        "container was given {want_text} (NVIDIA_VISIBLE_DEVICES={visible}) but nvml sees {seen} and {nodes} /dev/nvidia<N> node(s) exist"
    ))
    .evidence_all(evidence)
    .hint("the runtime did not inject the gpus: give the pod `runtimeClassName: nvidia` (or make nvidia the runtime's default) and check `kubectl describe pod` for the nvidia.com/gpu request")
    .action(Action::FixConfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(index: u32, uuid: &str) -> NvmlDevice {
        NvmlDevice {
            index,
            uuid: Some(uuid.to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn cdi_names_match_by_uuid_index_and_old_style() {
        let d = device(3, "GPU-0d3c9a3e-5a57-2b8e-1c1f-8a2c3f7e6b11");
        assert!(names_gpu("GPU-0d3c9a3e-5a57-2b8e-1c1f-8a2c3f7e6b11", &d));
        assert!(names_gpu("3", &d));
        assert!(names_gpu("gpu3", &d));
        assert!(!names_gpu("30", &d));
        assert!(!names_gpu("3:0", &d));
    }
}
