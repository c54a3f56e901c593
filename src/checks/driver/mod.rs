//! Driver layer: does the host see healthy GPUs? Everything CUDA needs before a container is
//! involved: GPUs on PCI, the kernel modules (and no nouveau), the device nodes, NVML, and that
//! NVML and the kernel agree on which GPUs exist and which driver runs them.
//!
//! Sources: reference/sysfs.md §2, §10–12 and reference/gpu-health.md §1.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckDef, Context, Explain, Outcome, gpu_health};
use crate::answers::FactError;
use crate::answers::nvml::{NvmlErrorKind, NvmlFacts};
use crate::facts::nvidia::{self, PROC_DRIVER_GPUS};
use crate::facts::pci::{PCI_DEVICES, PciFunction};
use crate::report::{Action, Evidence, Figure, FigureName, Layer, Status};

// driver.gpu_count and the helpers only it uses live apart; the module, device-node, NVML and
// version checks stay here.
mod gpu_count;
use gpu_count::gpu_count;

pub fn checks() -> Vec<CheckDef> {
    vec![
        CheckDef {
            code: "driver.gpu_on_pci",
            layer: Layer::Driver,
            title: "NVIDIA GPUs are present on the PCI bus",
            explain: Explain {
                reads: "/sys/bus/pci/devices/*/{vendor,device,class,driver}",
                expects: "at least one function with vendor 0x10de and class 0x0300xx (VGA) or 0x0302xx (3D controller)",
                why: "a GPU the PCI bus does not enumerate cannot be driven by anything above it; no driver or toolkit fix helps",
                fix: "run `lspci -d 10de:`; if it lists nothing, check the BIOS (PCIe slots enabled, Above 4G Decoding on), the risers or baseboard power, and `dmesg | grep -i pci` for link training errors",
            },
            run: |ctx| noting_node_changed(ctx, gpu_on_pci(ctx)),
        },
        CheckDef {
            code: "driver.nvidia_module",
            layer: Layer::Driver,
            title: "the nvidia kernel module is loaded",
            explain: Explain {
                reads: "/proc/modules (or /sys/module/nvidia/initstate), /sys/module/nvidia/version, /proc/driver/nvidia/version",
                expects: "an `nvidia` line in state Live, and the module's version",
                why: "without the kernel module there are no /dev/nvidia* nodes and NVML, CUDA and the device plugin all fail",
                fix: "`modprobe nvidia`; if it fails read `dmesg | grep -i nvrm` (unsigned module with Secure Boot, module built for another kernel after a kernel update: reinstall the driver or rebuild DKMS); on GPU Operator nodes read the nvidia-driver-daemonset pod's logs",
            },
            run: nvidia_module,
        },
        CheckDef {
            code: "driver.nvidia_uvm_module",
            layer: Layer::Driver,
            title: "the nvidia_uvm kernel module is loaded",
            explain: Explain {
                reads: "/proc/modules (or /sys/module/nvidia_uvm/initstate)",
                expects: "an `nvidia_uvm` line in state Live",
                why: "CUDA's unified memory needs nvidia_uvm: without it cuInit fails (CUDA_ERROR_UNKNOWN) even though nvidia-smi works",
                fix: "`nvidia-modprobe -u -c=0` (loads the module and creates /dev/nvidia-uvm) or `modprobe nvidia_uvm`; make it persistent with the nvidia-persistenced service or /etc/modules-load.d",
            },
            run: nvidia_uvm_module,
        },
        CheckDef {
            code: "driver.nouveau_absent",
            layer: Layer::Driver,
            title: "the nouveau driver is not loaded",
            explain: Explain {
                reads: "/proc/modules, /sys/bus/pci/devices/*/driver",
                expects: "no `nouveau` module",
                why: "nouveau claims the GPUs first and the nvidia module then cannot bind them (DCGM's denylist check fails on it too)",
                fix: "blacklist it: write `blacklist nouveau` and `options nouveau modeset=0` to /etc/modprobe.d/blacklist-nouveau.conf, rebuild the initramfs (`update-initramfs -u` or `dracut -f`) and reboot",
            },
            run: nouveau_absent,
        },
        CheckDef {
            code: "driver.device_nodes",
            layer: Layer::Driver,
            title: "the NVIDIA device nodes exist",
            explain: Explain {
                reads: "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia<N>; /proc/driver/nvidia/gpus/*/information (Device Minor)",
                expects: "/dev/nvidiactl, /dev/nvidia-uvm and one /dev/nvidia<minor> per GPU (minor from the driver, not the NVML index)",
                why: "every CUDA process opens these nodes; the container toolkit and device plugin pass them into Pods",
                fix: "`nvidia-modprobe -u -c=<minor>` creates them (the driver does not always); run nvidia-persistenced so they stay; on GPU Operator nodes the driver container creates them",
            },
            run: device_nodes,
        },
        CheckDef {
            code: "driver.nvml_init",
            layer: Layer::Driver,
            title: "NVML loads and initialises",
            explain: Explain {
                reads: "NVML (libnvidia-ml.so.1 through nvml-wrapper: --nvml-lib, else the host's under --root — the GPU Operator's driver root, /home/kubernetes/bin/nvidia/lib64 on GKE Container-Optimized OS, the distribution's directories, the host's ld.so.cache — else the loader's), opened once per run; .gpudoctor/nvml.json in a capture",
                expects: "nvmlInit succeeds and reports the driver version and device count; live, the evidence says how long nvmlInit and each GPU's handle took (seconds per GPU, one after another, without persistence mode)",
                why: "NVML is what nvidia-smi, the device plugin, DCGM and gpudoctor's own GPU checks use; if it fails, Kubernetes sees no healthy GPU",
                fix: "library not found: install the driver's user-space libraries or pass --nvml-lib; driver not loaded: load the nvidia module; version mismatch: the driver was upgraded without a reboot, so drain and reboot (a reload without reboot: see driver.driver_version_match); no permission: run as root",
            },
            run: nvml_init,
        },
        CheckDef {
            code: "driver.gpu_count",
            layer: Layer::Driver,
            title: "every GPU on PCI is known to NVML",
            explain: Explain {
                reads: "/sys/bus/pci/devices (NVIDIA display functions), NVML device list, per-device handle errors and every reading's error kind, /proc/driver/nvidia/gpus/*/information (GPU Excluded), the kernel log",
                expects: "the same set of PCI addresses on both sides, no device NVML reports lost or needing a reset (GPU_IS_LOST, RESET_REQUIRED, at its handle or any reading), every handle opened and answered in time: handles --timeout after the last one that came (GPUs attach one after another without persistence mode), readings --timeout after the GPU's handle; a GPU that stopped answering is named with the call it stopped in and the siblings that waited behind it",
                why: "a GPU on the bus that NVML cannot use has usually fallen off the bus (XID 79) or needs a reset; the device plugin then advertises fewer GPUs and 8-GPU jobs never schedule",
                fix: "read `dmesg | grep -iE 'xid|fallen off'`, then drain and reboot the node: a GPU that fell off the bus does not come back with a reset, and NVML indexes shift while it is gone, so name it by PCI bus id; a GPU that falls off again after the reboot needs a reseat or RMA. A refused handle is not a fault: run gpudoctor outside the job's device cgroup (as root, or as the privileged DaemonSet); a GPU that does not answer in time is wedged or initialising without persistence mode",
            },
            run: gpu_count,
        },
        CheckDef {
            code: "driver.driver_version_match",
            layer: Layer::Driver,
            title: "NVML and the kernel module run the same driver version",
            explain: Explain {
                reads: "/sys/module/nvidia/version or /proc/driver/nvidia/version; NVML's driver version; libnvidia-ml.so.<version> files in the library directories",
                expects: "one version everywhere",
                why: "a user-space library newer than the loaded module (an upgrade without reboot) makes NVML fail with LIB_RM_VERSION_MISMATCH and CUDA fail to initialise",
                fix: "drain and reboot the node, so the module matches the installed libraries. A reload without reboot first stops everything that holds /dev/nvidia* (`lsof /dev/nvidia*`: device plugin and dcgm-exporter pods, nv-hostengine/DCGM, nvidia-persistenced, nvidia-fabricmanager on HGX/NVSwitch nodes), then `modprobe -r nvidia_peermem nvidia_drm nvidia_modeset nvidia_uvm nvidia` and `modprobe nvidia nvidia_uvm`, and starts the fabric manager and persistenced again before any workload",
            },
            run: driver_version_match,
        },
        CheckDef {
            code: "driver.persistence_mode",
            layer: Layer::Driver,
            title: "persistence mode is on for server GPUs",
            explain: Explain {
                reads: "NVML nvmlDeviceGetPersistenceMode per GPU",
                expects: "Enabled on data-centre GPUs",
                why: "without persistence the driver tears GPU state down when the last client exits: the next job pays seconds of initialisation per GPU, one GPU after another, and NVML queries can time out (DCGM warns, DCGM_FR_PERSISTENCE_MODE); live, the warning says what it cost this run",
                fix: "enable the nvidia-persistenced service (`systemctl enable --now nvidia-persistenced`), or `nvidia-smi -pm 1` until the next reboot",
            },
            run: persistence_mode,
        },
    ]
}

/// Bringing the loaded module in line with newer user-space libraries. A reboot is the safe way;
/// a reload without one must first stop everything that holds the driver, or `rmmod` fails with
/// "Module nvidia is in use" halfway (NVIDIA driver README, "Installing the NVIDIA Driver"; the
/// Fabric Manager user guide: on NVSwitch systems the fabric manager is stopped before the driver
/// unloads and started after it loads, before any CUDA work; nvidia_peermem depends on nvidia and
/// goes first).
/// What to do about GPUs NVML lost or never listed. A GPU that fell off the bus (XID 79) does
/// not come back with a reset and NVML indexes shift while it is missing, so the action is a
/// reboot and the GPU is named by its PCI bus id (nvidia-smi(1), `-i`: "use either UUID or PCI
/// bus ID, since device enumeration ordering is not guaranteed to be consistent").
fn lost_gpu_hint(lost: &[String]) -> String {
    let named = if lost.is_empty() {
        "by its pci bus id".to_string()
    } else {
        format!("by pci bus id ({})", lost.join(", "))
    };
    format!(
        "read the kernel log (`dmesg | grep -iE 'xid|fallen off'`), then drain and reboot the node: a gpu that fell off the bus does not come back with a reset, and nvml indexes shift while it is gone, so name it {named}; one that falls off again after the reboot needs a reseat or RMA"
    )
}

const RELOAD_AFTER_UPGRADE: &str = "the driver was upgraded without a reboot: drain the node and reboot it. To reload instead, on the drained node stop what holds /dev/nvidia* (`lsof /dev/nvidia*` lists it: the device plugin and dcgm-exporter pods, nv-hostengine/DCGM, nvidia-persistenced, and on HGX/NVSwitch nodes nvidia-fabricmanager), then `modprobe -r nvidia_peermem nvidia_drm nvidia_modeset nvidia_uvm nvidia`, `modprobe nvidia nvidia_uvm`, and start the fabric manager and persistenced again before the pods";

fn pci_evidence_source() -> String {
    PCI_DEVICES.to_string()
}

fn gpu_on_pci(ctx: &Context<'_>) -> Outcome {
    let facts = match ctx.pci() {
        Ok(facts) => facts,
        Err(err) => return Outcome::unreadable(err),
    };
    let gpus: Vec<&PciFunction> = facts.nvidia_gpus().collect();
    let problems: Vec<Evidence> = facts
        .problems
        .iter()
        .map(|p| Evidence::new(&p.path, &p.message).expected("a readable attribute"))
        .collect();
    if gpus.is_empty() {
        if !problems.is_empty() {
            return Outcome::error(format!(
                "no nvidia gpu found on pci, but {} function(s) could not be read",
                problems.len()
            ))
            .evidence_all(problems)
            .hint("fix read access to /sys/bus/pci (run as root, mount /sys into the container) and run again");
        }
        return Outcome::fail(format!(
            "no nvidia gpu on the pci bus ({} functions looked at)",
            facts.count()
        ))
        .evidence(
            Evidence::new(
                pci_evidence_source(),
                format!("{} functions, none with vendor 0x10de and a display class", facts.count()),
            )
            .expected("at least one 0x10de function of class 0x0300xx or 0x0302xx"),
        )
        .hint("run `lspci -d 10de:`; if it lists nothing, check BIOS PCIe settings (slots enabled, Above 4G Decoding), risers and GPU baseboard power, and `dmesg | grep -i pci`")
        .action(Action::HardwareInspection);
    }
    let mut models: BTreeMap<u16, usize> = BTreeMap::new();
    for gpu in &gpus {
        *models.entry(gpu.device).or_default() += 1;
    }
    let model_text: Vec<String> = models
        .iter()
        .map(|(device, n)| format!("10de:{device:04x} ×{n}"))
        .collect();
    let summary = format!(
        "{} nvidia gpu(s) on pci ({})",
        gpus.len(),
        model_text.join(", ")
    );
    let evidence = Evidence::new(
        pci_evidence_source(),
        gpus.iter()
            .map(|g| g.bdf.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    );
    // A function that could not be read may be a GPU: not judged (`error`, naming it), never a
    // warning about the node (DESIGN.md "Missing is not absent").
    Outcome::pass(summary)
        .evidence(evidence)
        .with_unread(&facts.problems)
}

/// A capture of a node that changed while it was recorded (its manifest's `node_changed`,
/// record/changes.rs) may hold part of the PCI tree, or parts from different moments: said on
/// this first check of the walk, which reads that tree, a pass becoming a warning so that
/// whoever replays the capture sees it.
fn noting_node_changed(ctx: &Context<'_>, mut outcome: Outcome) -> Outcome {
    let Some(reason) = ctx.source().node_changed() else {
        return outcome;
    };
    outcome.summary = format!(
        "{}; the node changed while it was recorded ({reason}): this capture may hold only part of it",
        outcome.summary
    );
    outcome.evidence.push(
        Evidence::new(crate::source::MANIFEST, format!("node_changed: {reason}"))
            .expected("a capture of a node that stayed still while it was recorded"),
    );
    if outcome.status == Status::Pass {
        outcome.status = Status::Warn;
        outcome.hint = Some(
            "record the node again once it is settled (no GPU being reset, no device removed or rescanned)".to_string(),
        );
    }
    outcome
}

/// Look up a module; `Err` is the finished outcome when modules cannot be read.
fn loaded<'c>(
    ctx: &'c Context<'_>,
    name: &str,
) -> Result<(Option<&'c crate::facts::modules::Module>, &'c str), Outcome> {
    match ctx.modules() {
        Ok(mods) => Ok((mods.get(name), mods.from.as_str())),
        Err(err) => Err(Outcome::unreadable(err)),
    }
}

fn nvidia_module(ctx: &Context<'_>) -> Outcome {
    let (module, from) = match loaded(ctx, "nvidia") {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    let Some(module) = module else {
        let mut outcome = Outcome::fail("nvidia kernel module is not loaded")
            .evidence(Evidence::new(from, "no `nvidia` module").expected("nvidia loaded (Live)"))
            .hint("run `modprobe nvidia` and read `dmesg | grep -i nvrm` if it fails (Secure Boot signing, module built for another kernel: reinstall the driver or rebuild DKMS); on GPU Operator nodes read the nvidia-driver-daemonset logs")
            .action(Action::ReloadDriver);
        if let Ok(pci) = ctx.pci() {
            let other: Vec<String> = pci
                .nvidia_gpus()
                .filter_map(|g| g.driver.as_ref().map(|d| format!("{} bound to {d}", g.bdf)))
                .collect();
            if !other.is_empty() {
                outcome = outcome.evidence(Evidence::new(
                    format!("{PCI_DEVICES}/*/driver"),
                    other.join(", "),
                ));
            }
        }
        return outcome;
    };
    if !module.is_live() {
        return Outcome::fail(format!("nvidia kernel module is in state {}", module.state))
            .evidence(Evidence::new(from, format!("nvidia {}", module.state)).expected("Live"))
            .hint("the module is still loading or unloading: wait a minute and run again; if it stays, read `dmesg | grep -i nvrm` and reboot")
            .action(Action::ReloadDriver);
    }
    match ctx.module_version() {
        Ok(Some((version, version_from))) => {
            Outcome::pass(format!("nvidia module {version} loaded"))
                .evidence(Evidence::new(from, "nvidia Live"))
                .evidence(Evidence::new(*version_from, version.as_str()))
        }
        Ok(None) => Outcome::pass("nvidia module loaded (version unknown)")
            .evidence(Evidence::new(from, "nvidia Live")),
        Err(err) => Outcome::warn(format!(
            "nvidia module loaded but its version is unreadable: {err}"
        ))
        .evidence(Evidence::new(&err.path, &err.message))
        .hint("compare with `cat /proc/driver/nvidia/version`"),
    }
}

fn nvidia_uvm_module(ctx: &Context<'_>) -> Outcome {
    let (module, from) = match loaded(ctx, "nvidia_uvm") {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    match module {
        Some(m) if m.is_live() => Outcome::pass("nvidia_uvm module loaded").evidence(Evidence::new(from, "nvidia_uvm Live")),
        Some(m) => Outcome::fail(format!("nvidia_uvm module is in state {}", m.state))
            .evidence(Evidence::new(from, format!("nvidia_uvm {}", m.state)).expected("Live"))
            .hint("wait and run again; if it stays, reload it: `modprobe -r nvidia_uvm && modprobe nvidia_uvm`")
            .action(Action::ReloadDriver),
        None => Outcome::fail("nvidia_uvm module is not loaded: cuda cannot initialise")
            .evidence(Evidence::new(from, "no `nvidia_uvm` module").expected("nvidia_uvm loaded (Live)"))
            .hint("run `nvidia-modprobe -u -c=0` (or `modprobe nvidia_uvm`) and make it persistent via nvidia-persistenced or /etc/modules-load.d")
            .action(Action::ReloadDriver),
    }
}

fn nouveau_absent(ctx: &Context<'_>) -> Outcome {
    let (module, from) = match loaded(ctx, "nouveau") {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    if module.is_none() {
        return Outcome::pass("nouveau is not loaded");
    }
    let mut outcome = Outcome::fail("nouveau driver is loaded and conflicts with the nvidia driver")
        .evidence(Evidence::new(from, "nouveau loaded").expected("no nouveau"))
        .hint("blacklist nouveau: `printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > /etc/modprobe.d/blacklist-nouveau.conf`, then `update-initramfs -u` (or `dracut -f`) and reboot")
        .action(Action::FixConfig);
    if let Ok(pci) = ctx.pci() {
        let bound: Vec<&str> = pci
            .nvidia_gpus()
            .filter(|g| g.driver.as_deref() == Some("nouveau"))
            .map(|g| g.bdf.as_str())
            .collect();
        if !bound.is_empty() {
            outcome = outcome.evidence(
                Evidence::new(
                    format!("{PCI_DEVICES}/*/driver"),
                    format!("nouveau bound to {}", bound.join(" ")),
                )
                .expected("nvidia"),
            );
        }
    }
    outcome
}

/// `/dev/nvidia<minor>` names expected for the GPUs: the driver's `Device Minor` per GPU, else
/// NVML's minor numbers, else 0..n (minor ≠ NVML index, sysfs.md §12).
/// Information files that exist but could not be read go to `unread`.
fn expected_gpu_minors(ctx: &Context<'_>, unread: &mut Vec<FactError>) -> (Vec<u32>, &'static str) {
    let gpus: Vec<String> = match ctx.pci() {
        Ok(pci) => pci.nvidia_gpus().map(|g| g.bdf.clone()).collect(),
        Err(_) => Vec::new(),
    };
    let from_proc: Vec<u32> = gpus
        .iter()
        .filter_map(|bdf| {
            let text = information(ctx, bdf, unread)?;
            nvidia::parse_information(&text)
                .get("Device Minor")?
                .parse()
                .ok()
        })
        .collect();
    if !gpus.is_empty() && from_proc.len() == gpus.len() {
        return (from_proc, "proc/driver/nvidia/gpus/*/information");
    }
    let nvml = ctx.nvml();
    let from_nvml: Vec<u32> = nvml
        .devices
        .iter()
        .filter_map(|d| d.minor_number.value().copied())
        .collect();
    if nvml.init_error.is_none() && !from_nvml.is_empty() && from_nvml.len() >= gpus.len() {
        return (from_nvml, "nvml minor numbers");
    }
    ((0..gpus.len() as u32).collect(), "gpu count on pci")
}

/// A GPU's `information` file; absent is `None`, unreadable is `None` noted in `unread`.
fn information(ctx: &Context<'_>, bdf: &str, unread: &mut Vec<FactError>) -> Option<String> {
    match ctx
        .source()
        .read_to_string(&format!("{PROC_DRIVER_GPUS}/{bdf}/information"))
    {
        Ok(text) => Some(text),
        Err(err) if err.is_missing() => None,
        Err(err) => {
            unread.push(err.into());
            None
        }
    }
}

fn device_nodes(ctx: &Context<'_>) -> Outcome {
    let mut unread = Vec::new();
    let outcome = device_nodes_judged(ctx, &mut unread);
    outcome.noting_unread(&unread)
}

fn device_nodes_judged(ctx: &Context<'_>, unread: &mut Vec<FactError>) -> Outcome {
    let (minors, minors_from) = expected_gpu_minors(ctx, unread);
    let mut wanted: Vec<String> = vec!["dev/nvidiactl".into(), "dev/nvidia-uvm".into()];
    wanted.extend(minors.iter().map(|m| format!("dev/nvidia{m}")));
    let missing: Vec<&String> = wanted.iter().filter(|p| !ctx.source().exists(p)).collect();
    if missing.is_empty() {
        return Outcome::pass(format!("{} nvidia device nodes present", wanted.len()))
            .evidence(Evidence::new("dev", wanted.join(" ")));
    }
    let names: Vec<String> = missing.iter().map(|p| format!("/{p}")).collect();
    // Only the UVM node, and no live nvidia_uvm: nothing made the node (nvidia-modprobe's
    // `nvidia_uvm_mknod` runs after it loads the module), one cause with
    // driver.nvidia_uvm_module (checks/causes.rs).
    let uvm_down =
        matches!(loaded(ctx, "nvidia_uvm"), Ok((m, _)) if !m.is_some_and(|m| m.is_live()));
    if uvm_down && missing.iter().all(|p| p.as_str() == "dev/nvidia-uvm") {
        return Outcome::fail("/dev/nvidia-uvm missing: the nvidia_uvm module that creates it is not loaded")
            .evidence(Evidence::new("dev/nvidia-uvm", "missing").expected("present once nvidia_uvm is loaded"))
            .hint("load nvidia_uvm with `nvidia-modprobe -u -c=0`, which creates the node too (driver.nvidia_uvm_module)")
            .action(Action::ReloadDriver)
            .follows_from("driver.nvidia_uvm_module");
    }
    Outcome::fail(format!("{} of {} nvidia device nodes missing: {}", missing.len(), wanted.len(), names.join(" ")))
        .evidence(Evidence::new("dev", format!("missing {}", names.join(" "))).expected(format!("present (gpu minors from {minors_from})")))
        .hint("load the driver, then `nvidia-modprobe -u -c=<minor>` for each missing node; nvidia-persistenced keeps them; on GPU Operator nodes the driver container creates them")
        .action(Action::ReloadDriver)
}

fn nvml_init(ctx: &Context<'_>) -> Outcome {
    let nvml = ctx.nvml();
    let Some(err) = &nvml.init_error else {
        let version = nvml.driver_version.as_deref().unwrap_or("unknown");
        // NVML time per GPU, measured by the live probe (absent from hand-built captures).
        let figures = nvml.devices.iter().filter_map(|d| {
            let ms = d.probe_ms?;
            Some(
                Figure::new(FigureName::NvmlProbeSeconds, ms as f64 / 1000.0)
                    .label(
                        "gpu",
                        d.pci_bus_id.clone().unwrap_or_else(|| "unknown".into()),
                    )
                    .label("index", d.index.to_string()),
            )
        });
        // Reported apart from the readings: seconds here are the driver attaching GPUs
        // (persistence mode off), not a GPU that is slow to answer.
        let handles = nvml
            .handles_ms
            .filter(|ms| *ms >= 1000)
            .map(|ms| format!("; gpu handles took {:.1} s", ms as f64 / 1000.0))
            .unwrap_or_default();
        let mut out = Outcome::pass(format!(
            "nvml {} initialised: driver {version}, {} device(s){handles}",
            nvml.nvml_version.as_deref().unwrap_or("?"),
            nvml.device_count
        ))
        .evidence(Evidence::new(
            "nvml.device_count",
            nvml.device_count.to_string(),
        ))
        .figures(figures);
        if let Some(timing) = live_timing(nvml) {
            out = out.evidence(Evidence::new("nvml timing (this run)", timing));
        }
        return out;
    };
    let evidence = Evidence::new("nvml.init", format!("{}: {}", err.kind.name(), err.message))
        .expected("success");
    let outcome = |o: Outcome| o.evidence(evidence.clone());
    match err.kind {
        NvmlErrorKind::LibraryNotFound => outcome(Outcome::fail(format!("nvml library not found ({})", err.message)))
            .hint("install the NVIDIA driver's user-space libraries (libnvidia-ml.so.1, e.g. package libnvidia-compute-<version>) or point --nvml-lib at it; inside a container run with the NVIDIA runtime")
            .action(Action::FixConfig),
        NvmlErrorKind::DriverNotLoaded => outcome(Outcome::fail("nvml cannot initialise: the nvidia driver is not loaded"))
            .hint("load the driver (`modprobe nvidia`) and read `dmesg | grep -i nvrm` if that fails")
            .action(Action::ReloadDriver),
        NvmlErrorKind::LibRmVersionMismatch => outcome(Outcome::fail("nvml library and nvidia kernel module versions differ (driver upgraded without reboot?)"))
            .hint(RELOAD_AFTER_UPGRADE)
            .action(Action::RebootNode),
        NvmlErrorKind::NoPermission | NvmlErrorKind::OperatingSystem => outcome(Outcome::error(format!("nvml: no permission to open the gpus ({})", err.kind.describe())))
            .hint("run gpudoctor as root (or in a privileged pod with /dev mounted)"),
        NvmlErrorKind::GpuIsLost => outcome(Outcome::fail("nvml cannot initialise: a gpu is lost (fallen off the bus)"))
            .hint("read `dmesg | grep -iE 'xid|fallen off'`; drain and reboot; a recurrence needs a reseat or RMA")
            .action(Action::RebootNode),
        NvmlErrorKind::ResetRequired => outcome(Outcome::fail("nvml cannot initialise: gpu reset required"))
            .hint("drain the node, then `nvidia-smi -r` on the idle gpus or reboot")
            .action(Action::ResetGpu),
        NvmlErrorKind::InsufficientPower | NvmlErrorKind::CorruptedInforom | NvmlErrorKind::IrqIssue => {
            outcome(Outcome::fail(format!("nvml cannot initialise: {}", err.kind.describe())))
                .hint("check the gpu's power cables and the baseboard; a corrupted inforom needs an RMA")
                .action(Action::HardwareInspection)
        }
        NvmlErrorKind::Timeout => outcome(Outcome::error(format!("nvml did not answer: {}", err.message)))
            .hint("a hung nvml usually means a wedged gpu: read `dmesg | grep -i xid`; raise --timeout if the node is only slow"),
        _ => {
            outcome(Outcome::error(format!("nvml answer unavailable: {}", err.message)))
                .hint("run `nvidia-smi` on the node to see the error directly; record the node again if this is a capture")
        }
    }
}

/// The library under the GPU Operator's driver root differs from the loaded module.
const OPERATOR_DRIVER_ROOT_STALE: &str = "the GPU Operator's driver container root (/run/nvidia/driver) holds another driver's user space than the loaded module: a driver upgrade is half done. Read the driver pod on this node (`kubectl -n gpu-operator get pods -l app=nvidia-driver-daemonset -o wide`, its logs) and the upgrade state (`kubectl get node <node> -o jsonpath='{.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state}'`); deleting the driver pod (node drained) makes it reload the module and rewrite the root";

fn driver_version_match(ctx: &Context<'_>) -> Outcome {
    let nvml: &NvmlFacts = ctx.nvml();
    let module = match ctx.module_version() {
        Ok(v) => v.clone(),
        Err(err) => return Outcome::unreadable(err),
    };
    let libraries = nvidia::gather_nvml_library_versions(ctx.source());
    let library_evidence = || {
        libraries.iter().map(|(version, path)| {
            Evidence::new(path.as_str(), format!("user-space nvml {version}"))
        })
    };
    match (&nvml.init_error, &module) {
        (Some(err), Some((module_version, from)))
            if err.kind == NvmlErrorKind::LibRmVersionMismatch =>
        {
            let others: Vec<&str> = libraries
                .iter()
                .map(|(v, _)| v.as_str())
                .filter(|v| v != module_version)
                .collect();
            let summary = if others.is_empty() {
                format!("kernel module is {module_version} but nvml reports a version mismatch")
            } else {
                format!(
                    "kernel module is {module_version}, user-space nvml is {}",
                    others.join(", ")
                )
            };
            let outcome = Outcome::fail(summary)
                .evidence(
                    Evidence::new(*from, module_version.as_str())
                        .expected("the user-space library's version"),
                )
                .evidence_all(library_evidence());
            // The GPU Operator's driver container owns both halves: its pod, not a reboot by
            // hand, puts them back in step.
            if libraries
                .iter()
                .any(|(v, path)| v != module_version && path.starts_with("run/nvidia/driver/"))
            {
                return outcome
                    .hint(OPERATOR_DRIVER_ROOT_STALE)
                    .action(Action::RestartComponent);
            }
            outcome
                .hint(RELOAD_AFTER_UPGRADE)
                .action(Action::RebootNode)
        }
        (Some(_), _) => Outcome::skip("nvml unavailable (see driver.nvml_init)"),
        (None, None) => Outcome::skip("kernel module version unknown (see driver.nvidia_module)"),
        (None, Some((module_version, from))) => match nvml.driver_version.as_deref() {
            None => Outcome::skip("nvml did not report a driver version"),
            Some(v) if v == module_version => {
                Outcome::pass(format!("driver {v} in kernel and nvml"))
                    .evidence(Evidence::new(*from, module_version.as_str()))
                    .evidence(Evidence::new("nvml.driver_version", v))
            }
            Some(v) => Outcome::fail(format!(
                "kernel module is {module_version}, nvml reports driver {v}"
            ))
            .evidence(Evidence::new(*from, module_version.as_str()).expected(v))
            .evidence(Evidence::new("nvml.driver_version", v))
            .evidence_all(library_evidence())
            .hint(RELOAD_AFTER_UPGRADE)
            .action(Action::RebootNode),
        },
    }
}

/// What the live probe measured, for whoever reads the evidence on a first GPU node:
/// `nvmlInit 0.05 s; handles at 0.41 0.82 ... s (gpu 0 1 ...); all answered in 3.4 s`. `None`
/// in replay (a capture keeps no timings).
fn live_timing(nvml: &crate::answers::nvml::NvmlFacts) -> Option<String> {
    let secs = |ms: u64| format!("{:.2}", ms as f64 / 1000.0);
    let mut parts = Vec::new();
    if let Some(ms) = nvml.init_ms {
        parts.push(format!("nvmlInit {} s", secs(ms)));
    }
    let handles: Vec<(u32, u64)> = nvml
        .devices
        .iter()
        .filter_map(|d| Some((d.index, d.handle_ms?)))
        .collect();
    if !handles.is_empty() {
        let at: Vec<String> = handles.iter().map(|(_, ms)| secs(*ms)).collect();
        let gpus: Vec<String> = handles.iter().map(|(i, _)| i.to_string()).collect();
        parts.push(format!(
            "handles at {} s (gpu {})",
            at.join(" "),
            gpus.join(" ")
        ));
    }
    if let Some(ms) = nvml.devices.iter().filter_map(|d| d.probe_ms).max() {
        parts.push(format!("every gpu answered within {} s", secs(ms)));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Consumer boards do not support persistence the same way; only server GPUs are judged.
fn persistence_mode(ctx: &Context<'_>) -> Outcome {
    let nvml = ctx.nvml();
    if nvml.init_error.is_some() {
        return Outcome::skip("nvml unavailable (see driver.nvml_init)");
    }
    let mut off = Vec::new();
    let mut on = 0usize;
    for device in nvml
        .devices
        .iter()
        .filter(|d| d.error.is_none() && gpu_health::is_server_gpu(d.name.as_deref()))
    {
        match device.persistence_mode.value() {
            Some(true) => on += 1,
            Some(false) => off.push(device),
            None => {}
        }
    }
    if off.is_empty() {
        if on == 0 {
            return Outcome::skip("persistence mode not reported for any server gpu");
        }
        return Outcome::pass(format!("persistence mode on for {on} gpu(s)"));
    }
    let list: Vec<String> = off
        .iter()
        .map(|d| format!("{} ({})", d.index, d.pci_bus_id.as_deref().unwrap_or("?")))
        .collect();
    // Measured by the live probe only: the cost this run paid for it.
    let paid = nvml
        .handles_ms
        .filter(|ms| *ms >= 1000)
        .map(|ms| {
            format!(
                "; initialising without persistence mode took {:.1} s of this run (gpus attach one after another)",
                ms as f64 / 1000.0
            )
        })
        .unwrap_or_default();
    Outcome::warn(format!(
        "persistence mode off on {} gpu(s): {}{paid}",
        off.len(),
        list.join(", ")
    ))
    .evidence_all(off.iter().map(|d| {
        Evidence::new(
            format!("nvml.devices[{}].persistence_mode", d.index),
            "disabled",
        )
        .expected("enabled")
    }))
    .hint("`systemctl enable --now nvidia-persistenced` (or `nvidia-smi -pm 1` until reboot)")
    .action(Action::FixConfig)
}
