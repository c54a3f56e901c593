//! `driver.cuda`: CUDA works on every GPU NVML lists — the library loads, `cuInit` succeeds,
//! CUDA enumerates the same GPUs, and each takes a primary context and returns a 1 MiB round
//! trip unchanged. It sits in the driver layer: the probe runs against the host driver
//! (`libcuda.so.1` and the kernel module), on the host, before any container is involved, and
//! every failure it names (exclusive-process mode, a pending ECC error, nvidia_uvm, the fabric
//! manager, a driver mismatch) is fixed on the host; a GPU that cannot hold a context blocks
//! everything above it, as the GPU Operator's `cuda-ready` validation blocks the device plugin
//! (reference/kubernetes.md §4).

use crate::answers::cuda::CudaProbe;
use crate::answers::cuda::{CudaDevice, CudaFacts, code, code_name, version_text};
use crate::answers::nvml::{ComputeMode, NvmlDevice, Reading};
use crate::checks::{CheckDef, Context, Explain, Outcome};
use crate::report::{Action, Evidence, Layer, Status};

use super::{gpu_label, unavailable};

pub const DEF: CheckDef = CheckDef {
    code: "driver.cuda",
    layer: Layer::Driver,
    title: "CUDA creates a context and copies memory on every GPU (--cuda)",
    explain: Explain {
        reads: "a run of the CUDA driver API (`--cuda` or `--bandwidth`, libcuda.so.1 or --cuda-lib) in a helper process: cuInit, cuDeviceGetCount, per GPU cuDevicePrimaryCtxRetain, cuMemAlloc, cuMemcpyHtoD/DtoH of 1 MiB, compared; or a capture's .gpudoctor/cuda.json. NVML's compute mode and compute processes, ECC and row-remap state for the hints; CUDA_VISIBLE_DEVICES",
        expects: "every GPU NVML lists (except GPUs in MIG mode) enumerated by CUDA with the same PCI bus id, a context on each, the round trip returned unchanged, each step within --cuda-timeout (cuInit one --cuda-timeout more per 8 GPUs: it attaches every GPU without persistence mode). A helper killed by SIGKILL or the OOM killer is an error naming the signal and gpudoctor's memory limit (--bandwidth needs about 2 GiB: deploy/job.yaml), not a verdict on the GPUs",
        why: "NVML answering proves the driver loaded, not that a job can run: a GPU held in exclusive-process mode, an uncorrectable ECC error waiting for a reset, a missing nvidia_uvm, a fabric manager that is not running or a libcuda from another driver all let nvidia-smi work while every CUDA job fails",
        fix: "follow the hint of the GPU named: wait for or stop the process holding an exclusive GPU (`nvidia-smi -i N -c DEFAULT` to share it), reset a GPU with a pending ECC error (`nvidia-smi -r -i N`), `modprobe nvidia-uvm`, `systemctl start nvidia-fabricmanager`, unset CUDA_VISIBLE_DEVICES, or reboot after a driver upgrade",
    },
    run,
};

/// One thing wrong, to be folded into the outcome.
struct Problem {
    status: Status,
    summary: String,
    evidence: Vec<Evidence>,
    hint: String,
    action: Action,
}

impl Problem {
    fn new(status: Status, summary: String, hint: &str, action: Action) -> Self {
        Problem {
            status,
            summary,
            evidence: Vec::new(),
            hint: hint.to_string(),
            action,
        }
    }

    fn evidence(mut self, e: Evidence) -> Self {
        self.evidence.push(e);
        self
    }
}

fn run(ctx: &Context<'_>) -> Outcome {
    let facts = match ctx.cuda() {
        CudaProbe::NotRequested { why } => return not_requested(ctx, why),
        CudaProbe::Unavailable { origin, message } => return unavailable(origin, message),
        CudaProbe::Ran(facts) => facts,
    };
    judge(ctx, facts)
}

/// Without the probe: only what NVML already says can stop CUDA everywhere.
fn not_requested(ctx: &Context<'_>, why: &str) -> Outcome {
    let prohibited: Vec<&NvmlDevice> = ctx
        .nvml()
        .devices
        .iter()
        .filter(|d| d.compute_mode.value() == Some(&ComputeMode::Prohibited))
        .collect();
    if prohibited.is_empty() {
        return Outcome::skip(why);
    }
    let names: Vec<String> = prohibited.iter().map(|d| nvml_label(d)).collect();
    Outcome::warn(format!(
        "{} in compute mode Prohibited: no process can create a cuda context there (not probed: pass --cuda)",
        names.join(", ")
    ))
    .evidence_all(prohibited.iter().map(|d| {
        Evidence::new(format!("nvml.devices[{}].compute_mode", d.index), "Prohibited")
            .expected("Default (or Exclusive_Process)")
    }))
    .hint("set the mode back with `nvidia-smi -i <index> -c DEFAULT` and find what sets it (a DCGM policy, a boot script)")
    .action(Action::FixConfig)
}

fn nvml_label(d: &NvmlDevice) -> String {
    match &d.pci_bus_id {
        Some(bus) => format!("gpu {} ({bus})", d.index),
        None => format!("gpu {}", d.index),
    }
}

fn timeout_s(facts: &CudaFacts) -> String {
    facts
        .runs
        .iter()
        .find_map(|r| r.stalled.as_ref())
        .map(|s| format!("{} s", s.after_ms / 1000))
        .unwrap_or_else(|| "the timeout".into())
}

fn judge(ctx: &Context<'_>, facts: &CudaFacts) -> Outcome {
    let nvml = ctx.nvml();
    let library = facts
        .library
        .clone()
        .unwrap_or_else(|| crate::answers::cuda::DEFAULT_LIBRARY.to_string());
    // Asked means required (issue 19): --cuda that cannot run fails, saying where it looked;
    // libcuda.so.1 ships with every driver, so a node without it cannot run any CUDA job.
    if let Some(err) = &facts.load_error {
        let looked = if library.contains('/') {
            library.clone()
        } else {
            format!(
                "{library} through the dynamic loader (LD_LIBRARY_PATH, /etc/ld.so.cache, /lib, /usr/lib)"
            )
        };
        return Outcome::fail(format!(
            "cuda was asked for but its driver library could not be loaded from {looked}: {err}"
        ))
        .evidence(
            Evidence::new("cuda.library", format!("{looked}: {err}"))
                .expected("libcuda.so.1 of the loaded driver"),
        )
        .hint("libcuda.so.1 is the user-space half of the nvidia driver: check `ldconfig -p | grep libcuda`; in a pod NVIDIA_DRIVER_CAPABILITIES must include `compute` (or `all`); or pass --cuda-lib PATH")
        .action(Action::FixConfig);
    }
    if let Some(out) = super::killed_before_done(facts) {
        return out;
    }
    let stalled = facts.runs.iter().find_map(|r| r.stalled.as_ref());
    if facts.init.is_none() {
        let last = facts.runs.last();
        let how = match (stalled, last) {
            (Some(s), _) => format!("`{}` did not return within {}", s.step, timeout_s(facts)),
            (None, Some(run)) => format!(
                "the cuda helper {} before cuInit answered",
                run.signal_text()
                    .unwrap_or_else(|| crate::process::describe_exit(run.exit))
            ),
            (None, None) => "no answer was recorded".into(),
        };
        let mut out = Outcome::fail(format!("cuda could not be initialised: {how}"))
            .evidence(Evidence::new("cuda.init", &how).expected("CUDA_SUCCESS"))
            .hint("a cuInit that hangs or crashes points at the driver itself: look for XIDs and NVRM errors (`dmesg | grep -iE 'xid|nvrm'`), then reset the GPUs or reboot the node")
            .action(Action::RebootNode);
        if let Some(run) = last
            && !run.stderr_tail.trim().is_empty()
        {
            out = out.evidence(Evidence::new("cuda.helper stderr", run.stderr_tail.trim()));
        }
        return out;
    }
    let nvml_count = nvml.devices.len();
    if let Some(init) = facts.init.filter(|c| *c != code::SUCCESS) {
        return init_failure(ctx, facts, init, nvml_count);
    }

    let expected: Vec<&NvmlDevice> = nvml
        .devices
        .iter()
        .filter(|d| d.error.is_none() && !d.mig_possible())
        .collect();
    let mig: Vec<&NvmlDevice> = nvml
        .devices
        .iter()
        .filter(|d| d.error.is_none() && d.mig_possible())
        .collect();
    let mut problems: Vec<Problem> = Vec::new();
    let mut ok = 0usize;
    let mut missing = Vec::new();
    for d in &expected {
        let Some(bus) = d.pci_bus_id.as_deref() else {
            continue;
        };
        match facts.device(bus) {
            None => missing.push(*d),
            Some(dev) if dev.works() => ok += 1,
            Some(dev) => problems.push(device_problem(ctx, facts, d, dev)),
        }
    }
    if !missing.is_empty() {
        problems.insert(0, missing_problem(facts, &missing, expected.len()));
    }
    // CUDA devices NVML did not list (a GPU NVML lost, or NVML could not be read).
    if nvml.init_error.is_some() && !facts.devices.is_empty() {
        let broken: Vec<&CudaDevice> = facts.devices.iter().filter(|d| !d.works()).collect();
        ok = facts.devices.len() - broken.len();
        for dev in broken {
            problems.push(Problem::new(
                Status::Fail,
                format!(
                    "cuda device {} ({}): {}",
                    dev.ordinal,
                    dev.bus_id.as_deref().unwrap_or("?"),
                    device_error_text(dev, facts)
                ),
                "look for an XID for this gpu (`dmesg | grep -i xid`) and reset it (`nvidia-smi -r`)",
                Action::ResetGpu,
            ));
        }
    }

    let version = facts
        .driver_version
        .map(|v| format!("cuda {} driver api", version_text(v)))
        .unwrap_or_else(|| "driver api version unknown".into());
    let mut notes = Vec::new();
    if !mig.is_empty() {
        notes.push(format!(
            "{} in MIG mode not probed: cuda reaches their MIG devices, not the gpu",
            mig.iter()
                .map(|d| nvml_label(d))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Said once: a problem of GPUs CUDA does not see already names the variable.
    if let Some(v) = facts.env.get("CUDA_VISIBLE_DEVICES")
        && missing.is_empty()
    {
        notes.push(format!("CUDA_VISIBLE_DEVICES={v}"));
    }
    let noted = |text: String| {
        if notes.is_empty() {
            text
        } else {
            format!("{text} ({})", notes.join("; "))
        }
    };
    let total = if nvml.init_error.is_some() {
        facts.devices.len()
    } else {
        expected.len()
    };
    if problems.is_empty() {
        let times: Vec<f64> = facts
            .devices
            .iter()
            .filter_map(|d| d.round_trip_us)
            .map(|us| us as f64 / 1000.0)
            .collect();
        // Measured live only: a cuInit of seconds is GPUs attaching without persistence mode.
        let init = facts
            .init_us
            .filter(|us| *us >= 1_000_000)
            .map(|us| format!("; cuInit took {:.1} s", us as f64 / 1e6))
            .unwrap_or_default();
        let mut out = Outcome::pass(noted(format!(
            "cuda works on {ok} of {total} gpus: a context and a 1 MiB round trip each ({version}){init}"
        )))
        .evidence(Evidence::new("cuda.library", &library))
        .evidence(Evidence::new(
            "cuda.devices",
            format!(
                "{} device(s), context and round trip in {}",
                facts.device_count.unwrap_or(0),
                super::range(&times, "ms")
            ),
        ));
        if total == 0 {
            out = Outcome::skip(noted(
                "no gpu to probe: nvml lists none outside MIG mode".into(),
            ));
        }
        return out;
    }
    problems.sort_by_key(|p| std::cmp::Reverse(p.status.severity()));
    let worst = problems[0].status;
    let first = &problems[0];
    let summary = if problems.len() == 1 {
        first.summary.clone()
    } else {
        format!(
            "{}; and {} more gpu problem(s), {ok} of {total} gpus work",
            first.summary,
            problems.len() - 1
        )
    };
    let mut out = match worst {
        Status::Fail => Outcome::fail(noted(summary)),
        _ => Outcome::warn(noted(summary)),
    }
    .hint(first.hint.clone())
    .action(first.action)
    .evidence(Evidence::new(
        "cuda.library",
        format!("{library} ({version})"),
    ));
    for p in &problems {
        out = out.evidence_all(p.evidence.clone());
    }
    out
}

/// `cuInit` failed: what the code means on this node.
fn init_failure(ctx: &Context<'_>, facts: &CudaFacts, init: i32, nvml_count: usize) -> Outcome {
    let name = code_name(init);
    let evidence = Evidence::new("cuda.init", format!("{name} ({init})")).expected("CUDA_SUCCESS");
    let visible = facts.env.get("CUDA_VISIBLE_DEVICES");
    // Which driver each half comes from: the library's file name (`libcuda.so.550.54.15`, as
    // mapped into the helper) against the kernel module's version (/proc/driver/nvidia/version
    // or sys/module/nvidia/version). Not NVML's CUDA version: NVML reads it from libcuda
    // itself, so the two always agree.
    let module = match ctx.module_version() {
        Ok(Some((v, _))) => Some(v.clone()),
        _ => None,
    };
    let api = facts
        .driver_version
        .map(|v| format!(" (cuda {})", version_text(v)))
        .unwrap_or_default();
    let versions = match (&facts.library_version, &module) {
        (Some(lib), Some(kernel)) => Some(format!(
            "libcuda is driver {lib}{api}, the loaded kernel module {kernel}"
        )),
        (None, Some(kernel)) => Some(format!(
            "the loaded kernel module is {kernel}; libcuda's file names no version{api}"
        )),
        (Some(lib), None) => Some(format!("libcuda is driver {lib}{api}")),
        (None, None) => None,
    };
    let out = match init {
        code::NO_DEVICE => {
            // "although" only where NVML saw GPUs: with none (no driver, NVML not started) both
            // agree, and the driver layer says why.
            let base = if nvml_count == 0 {
                format!("cuInit: {name}, and nvml lists no gpu either")
            } else {
                format!("cuInit: {name} although nvml lists {nvml_count} gpu(s)")
            };
            if let Some(v) = visible {
                Outcome::fail(format!("{base}: CUDA_VISIBLE_DEVICES={v} hides them"))
                    .evidence(Evidence::new("env CUDA_VISIBLE_DEVICES", v).expected("unset, or the gpus to use"))
                    .hint("unset CUDA_VISIBLE_DEVICES (or list valid indexes or GPU-UUIDs) where gpudoctor and the workload run")
                    .action(Action::FixConfig)
            } else if !uvm_loaded(ctx) {
                Outcome::fail(format!("{base}: nvidia_uvm is not loaded"))
                    .hint("load it with `modprobe nvidia-uvm` (or `nvidia-modprobe -u -c=0`) and check /dev/nvidia-uvm exists; the driver container or the nvidia-persistenced unit normally does this")
                    .action(Action::ReloadDriver)
            } else {
                Outcome::fail(base)
                    .hint("check that /dev/nvidia0.. /dev/nvidiactl and /dev/nvidia-uvm exist and are readable by this process (in a pod the device plugin mounts them; the cgroup device allowlist must allow them)")
                    .action(Action::FixConfig)
            }
        }
        code::SYSTEM_NOT_READY => Outcome::fail(format!(
            "cuInit: {name}: the nvswitch fabric is not ready (the fabric manager has not trained it)"
        ))
        .hint("start the fabric manager (`systemctl start nvidia-fabricmanager`, the same version as the driver) and check `nvidia-smi -q | grep -A2 Fabric`")
        .action(Action::RestartComponent),
        code::SYSTEM_DRIVER_MISMATCH => Outcome::fail(format!(
            "cuInit: {name}: libcuda and the loaded kernel module come from different drivers{}",
            versions.as_ref().map(|v| format!(" ({v})")).unwrap_or_default()
        ))
        .hint("after a driver upgrade, reboot (or unload and reload the nvidia modules); in a container the injected libcuda must be the host driver's (the toolkit mounts it) and no cuda-compat package may shadow it")
        .action(Action::RebootNode),
        code::COMPAT_NOT_SUPPORTED_ON_DEVICE => Outcome::fail(format!(
            "cuInit: {name}: a forward-compatibility libcuda (cuda-compat) on a gpu that does not support it{}",
            versions.as_ref().map(|v| format!(" ({v})")).unwrap_or_default()
        ))
        .hint("remove the cuda-compat directory from LD_LIBRARY_PATH (or the image), or upgrade the host driver to one that supports the workload's cuda version")
        .action(Action::FixConfig),
        code::STUB_LIBRARY => Outcome::fail(format!(
            "cuInit: {name}: the cuda toolkit's stub libcuda was loaded instead of the driver's"
        ))
        .hint("remove `.../cuda/lib64/stubs` from LD_LIBRARY_PATH (stubs are for linking only), or pass --cuda-lib /usr/lib/x86_64-linux-gnu/libcuda.so.1")
        .action(Action::FixConfig),
        // docs/checks.md driver.nvidia_uvm_module: without nvidia_uvm cuInit fails with
        // CUDA_ERROR_UNKNOWN while nvidia-smi works.
        _ if !uvm_loaded(ctx) => Outcome::fail(format!(
            "cuInit failed: {name} ({init}): nvidia_uvm is not loaded"
        ))
        .hint("load it with `modprobe nvidia-uvm` (or `nvidia-modprobe -u -c=0`) and check /dev/nvidia-uvm exists")
        .action(Action::ReloadDriver),
        _ => Outcome::fail(format!("cuInit failed: {name} ({init})"))
            .hint("look for XIDs and NVRM errors (`dmesg | grep -iE 'xid|nvrm'`); reload the driver or reboot the node")
            .action(Action::ReloadDriver),
    };
    let mut out = out
        .evidence(evidence)
        .evidence(Evidence::new("nvml.device_count", nvml_count.to_string()));
    if let Some(v) = versions {
        out = out.evidence(Evidence::new("cuda.driver_version", v));
    }
    out
}

fn uvm_loaded(ctx: &Context<'_>) -> bool {
    match ctx.modules() {
        Ok(m) => m.get("nvidia_uvm").is_some(),
        // Unreadable: do not blame the module.
        Err(_) => true,
    }
}

/// GPUs NVML lists that CUDA did not enumerate.
fn missing_problem(facts: &CudaFacts, missing: &[&NvmlDevice], expected: usize) -> Problem {
    let names: Vec<String> = missing.iter().map(|d| nvml_label(d)).collect();
    let seen = facts.devices.len();
    let summary = format!(
        "cuda enumerates {seen} gpu(s), nvml {expected}: {} not seen by cuda",
        names.join(", ")
    );
    let mut p = match facts.env.get("CUDA_VISIBLE_DEVICES") {
        Some(v) => Problem::new(
            Status::Fail,
            format!("{summary} (CUDA_VISIBLE_DEVICES={v})"),
            "unset CUDA_VISIBLE_DEVICES where gpudoctor runs to probe every gpu; if the workload sets it on purpose, this is expected",
            Action::FixConfig,
        ),
        None => Problem::new(
            Status::Fail,
            summary,
            "a gpu nvml sees but cuda does not is usually broken in the driver: look for an XID for it (`dmesg | grep -i xid`), then reset it (`nvidia-smi -r -i <index>`) or reboot",
            Action::ResetGpu,
        ),
    };
    for d in missing {
        p = p.evidence(
            Evidence::new(
                format!("nvml.devices[{}]", d.index),
                d.pci_bus_id.clone().unwrap_or_default(),
            )
            .expected("a cuda device with this pci bus id"),
        );
    }
    p
}

fn device_error_text(dev: &CudaDevice, facts: &CudaFacts) -> String {
    if let Some(step) = &dev.timed_out {
        return format!("`{step}` did not return within {}", timeout_s(facts));
    }
    if let Some(e) = &dev.error {
        return e.describe();
    }
    match dev.mismatched_bytes {
        Some(n) if n > 0 => format!(
            "the {} KiB round trip came back with {n} wrong byte(s)",
            dev.round_trip_bytes / 1024
        ),
        _ => "the round trip did not finish".into(),
    }
}

/// One GPU whose round trip failed, with what NVML says about it.
fn device_problem(
    ctx: &Context<'_>,
    facts: &CudaFacts,
    nvml: &NvmlDevice,
    dev: &CudaDevice,
) -> Problem {
    let label = gpu_label(ctx, dev.bus_id.as_deref().unwrap_or("?"));
    let what = device_error_text(dev, facts);
    let source = format!("cuda.devices[{}]", dev.bus_id.as_deref().unwrap_or("?"));
    let observed = Evidence::new(&source, &what).expected("a context and an unchanged round trip");
    if dev.timed_out.is_some() {
        return Problem::new(
            Status::Fail,
            format!("{label}: {what} (the helper was killed)"),
            "a cuda call that never returns points at a wedged gpu: look for XIDs (`dmesg | grep -i xid`), then drain the node and reset the gpu (`nvidia-smi -r -i <index>`) or reboot",
            Action::ResetGpu,
        )
        .evidence(observed);
    }
    if let Some(n) = dev.mismatched_bytes.filter(|n| *n > 0) {
        return Problem::new(
            Status::Fail,
            format!("{label}: {what}: data corruption on the way to or from the gpu"),
            "drain the node: a gpu that returns different data is unsafe for jobs; run `dcgmi diag -r 3 -i <index>`, check ECC counters and XIDs, and have the gpu inspected",
            Action::HardwareInspection,
        )
        .evidence(observed.expected(format!("0 of {} bytes changed (got {n})", dev.round_trip_bytes)));
    }
    let code = dev.error.as_ref().map(|e| e.code).unwrap_or(code::UNKNOWN);
    let mode = nvml.compute_mode.value().copied();
    let processes: Vec<String> = nvml
        .compute_processes
        .value()
        .map(|ps| ps.iter().map(|p| p.describe()).collect())
        .unwrap_or_default();
    let mode_evidence = Evidence::new(
        format!("nvml.devices[{}].compute_mode", nvml.index),
        match &nvml.compute_mode {
            Reading::Value(m) => m.label().to_string(),
            Reading::NotSupported => "not supported".into(),
            Reading::Error(e) => e.to_string(),
        },
    );
    let holders = Evidence::new(
        format!("nvml.devices[{}].compute_processes", nvml.index),
        if processes.is_empty() {
            match &nvml.compute_processes {
                Reading::Value(_) => "none".to_string(),
                Reading::NotSupported => "not supported".into(),
                Reading::Error(e) => e.to_string(),
            }
        } else {
            processes.join(", ")
        },
    );
    let busy = code == code::DEVICE_UNAVAILABLE
        || (matches!(
            mode,
            Some(ComputeMode::ExclusiveProcess | ComputeMode::ExclusiveThread)
        ) && matches!(code, code::INVALID_DEVICE | 216));
    if busy || mode == Some(ComputeMode::Prohibited) {
        return match mode {
            Some(ComputeMode::Prohibited) => Problem::new(
                Status::Fail,
                format!("{label}: {what}: compute mode Prohibited lets no process create a context"),
                "set the mode back with `nvidia-smi -i <index> -c DEFAULT` and find what sets it (a DCGM policy, a boot script)",
                Action::FixConfig,
            ),
            Some(ComputeMode::ExclusiveProcess | ComputeMode::ExclusiveThread)
                if !processes.is_empty() =>
            {
                Problem::new(
                    Status::Warn,
                    format!(
                        "{label} busy: exclusive-process mode, held by {}; cuda could not be probed there ({what})",
                        processes.join(", ")
                    ),
                    "the gpu runs one process at a time by design: wait for the holder or stop it (`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv -i <index>`); to share the gpu, `nvidia-smi -i <index> -c DEFAULT`",
                    Action::CheckWorkload,
                )
            }
            Some(ComputeMode::ExclusiveProcess | ComputeMode::ExclusiveThread) => Problem::new(
                Status::Fail,
                format!(
                    "{label}: {what} in exclusive-process mode, yet nvml lists no process holding it: a context left by a process that is gone"
                ),
                "find what holds the device files (`fuser -v /dev/nvidia*`), stop it, or reset the gpu (`nvidia-smi -r -i <index>`)",
                Action::ResetGpu,
            ),
            _ => Problem::new(
                Status::Fail,
                format!("{label}: {what}: unavailable although its compute mode is not exclusive"),
                "check for an MPS server that is full or broken (`echo get_server_list | nvidia-cuda-mps-control`) and for XIDs; reset the gpu if nothing holds it",
                Action::ResetGpu,
            ),
        }
        .evidence(observed)
        .evidence(mode_evidence)
        .evidence(holders);
    }
    match code {
        code::ECC_UNCORRECTABLE => {
            let mut p = Problem::new(
                Status::Fail,
                format!("{label}: {what}: an uncorrectable ECC error is pending"),
                "drain the node and reset the gpu (`nvidia-smi -r -i <index>`) so the pending row remap or page retirement takes effect; if it recurs, the gpu needs replacing",
                Action::ResetGpu,
            )
            .evidence(observed);
            if let Some(rows) = nvml.remapped_rows.value() {
                p = p.evidence(Evidence::new(
                    format!("nvml.devices[{}].remapped_rows", nvml.index),
                    format!(
                        "uncorrectable {}, pending {}, failure {}",
                        rows.uncorrectable, rows.pending, rows.failure
                    ),
                ));
            }
            if let Some(ecc) = nvml.ecc_errors.value() {
                p = p.evidence(Evidence::new(
                    format!("nvml.devices[{}].ecc_errors", nvml.index),
                    format!("volatile uncorrected {}", ecc.volatile_uncorrected),
                ));
            }
            p
        }
        code::OUT_OF_MEMORY => Problem::new(
            Status::Warn,
            format!(
                "{label}: {what}: no memory left for 1 MiB{}",
                if processes.is_empty() {
                    String::new()
                } else {
                    format!(" (held by {})", processes.join(", "))
                }
            ),
            "a job holds all of the gpu's memory: check what runs there (`nvidia-smi -i <index>`); a process that is gone but still holds memory needs a gpu reset",
            Action::CheckWorkload,
        )
        .evidence(observed)
        .evidence(holders),
        code::SYSTEM_NOT_READY => Problem::new(
            Status::Fail,
            format!("{label}: {what}: the nvswitch fabric is not ready"),
            "start the fabric manager (`systemctl start nvidia-fabricmanager`) and check `nvidia-smi -q | grep -A2 Fabric`",
            Action::RestartComponent,
        )
        .evidence(observed),
        _ => Problem::new(
            Status::Fail,
            format!("{label}: {what}"),
            "look for an XID for this gpu (`dmesg | grep -i xid`) and at `nvidia-smi -q -i <index>`; drain the node and reset the gpu (`nvidia-smi -r -i <index>`), reboot if it stays",
            Action::ResetGpu,
        )
        .evidence(observed)
        .evidence(mode_evidence),
    }
}
