//! driver.gpu_processes: which processes hold a CUDA context on each GPU (NVML's compute
//! process list, `nvmlDeviceGetComputeRunningProcesses`), and which variables in gpudoctor's
//! own environment change what CUDA and NCCL see (`source::CUDA_ENV_VARS`,
//! `CUDA_VISIBLE_DEVICES`, `NCCL_*`). It always runs, before the active probes, so a report of
//! `--cuda`/`--bandwidth`/`--nccl` shows first who else was on the GPUs they measured.
//!
//! The peers: DCGM's software plugin warns on a graphics process (`checkForGraphicsProcesses`)
//! and on each of its bad CUDA variables (`checkForBadEnvVaribles`, NVIDIA/DCGM
//! `nvvs/plugin_src/software/Software.cpp`), as does gpud's `accelerator-nvidia-bad-envs`.
//! Both warn, never fail: a process on a GPU is what a node handed to a job shows; it matters
//! on a node meant to be idle or drained, and to any measurement made while it runs. This
//! check judges nothing about the hardware and never reads other variables (they may hold
//! secrets).

use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::nvml::Reading;
use crate::report::{Action, Evidence, Layer};
use crate::source::{CUDA_ENV_VARS, NCCL_ENV_PREFIX};

const CODE: &str = "driver.gpu_processes";
/// Longest value shown of a variable (a path can be long).
const MAX_VALUE: usize = 120;

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: CODE,
        layer: Layer::Driver,
        title: "no process outside this run holds a GPU; no variable changes what CUDA sees",
        explain: Explain {
            reads: "NVML's compute processes per GPU (`nvmlDeviceGetComputeRunningProcesses_v3`: pid, used GPU memory; the name from the host's /proc/<pid>/cmdline under --root, else `nvmlSystemGetProcessName`; .gpudoctor/nvml.json in a capture); gpudoctor's own environment (.gpudoctor/env.json in a capture): CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, NCCL_*, and DCGM's bad CUDA variables (NSIGHT_CUDA_DEBUGGER, CUDA_INJECTION32_PATH, CUDA_INJECTION64_PATH, CUDA_AUTO_BOOST, CUDA_ENABLE_COREDUMP_ON_EXCEPTION, CUDA_COREDUMP_FILE, CUDA_DEVICE_WAITS_ON_EXCEPTION, CUDA_PROFILE, COMPUTE_PROFILE, OPENCL_PROFILE). NVIDIA_VISIBLE_DEVICES is not judged here: only the container runtime reads it, when it makes a container (toolkit.container_gpus judges a Pod's view)",
            expects: "no compute process on any GPU of a node that is idle, drained or about to be probed, and none of those variables set; a capture made before gpudoctor recorded the process list says so and is not judged on it",
            why: "a process left on a GPU (a job that did not exit, a stuck notebook) holds its memory and shares its engines: the next job runs out of memory or runs slow, and every --cuda, --bandwidth or --nccl figure taken beside it measures the sharing, not the hardware (those probes report such a GPU inconclusive). A variable in the probe's environment changes what it measures: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER hide or renumber GPUs, NCCL_* override NCCL's own choice of transport, interface and algorithm, and the debugger, injection, profiler and core-dump switches slow every kernel (DCGM's DCGM_FR_BAD_CUDA_ENV)",
            fix: "on a node handed to a job the processes are expected: leave them, and probe when the job is done; on an idle or drained node find them with `nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv`, stop them (or the Pod that runs them), then probe again; unset the variables named for gpudoctor's run (`env -u NAME gpudoctor ...`, or remove them from its Pod spec) unless you meant them",
        },
        run,
    }]
}

/// A value cut to [`MAX_VALUE`] characters.
fn shown(value: &str) -> String {
    if value.chars().count() <= MAX_VALUE {
        return value.to_string();
    }
    let cut: String = value.chars().take(MAX_VALUE).collect();
    format!("{cut}…")
}

/// The variables of `env` that change what CUDA or NCCL see, as `NAME=value`.
fn cuda_changing(env: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| {
            k.as_str() == "CUDA_VISIBLE_DEVICES"
                || CUDA_ENV_VARS.contains(&k.as_str())
                || k.starts_with(NCCL_ENV_PREFIX)
        })
        .map(|(k, v)| (k.clone(), shown(v)))
        .collect()
}

fn run(ctx: &Context<'_>) -> Outcome {
    let nvml = ctx.nvml();
    let vars = cuda_changing(ctx.env());
    let mut warnings = Vec::new();
    let mut evidence = Vec::new();
    let mut gpus = Vec::new();
    let mut hints = Vec::new();

    // The process part.
    let mut listed = 0;
    let mut not_recorded = 0;
    let mut unreadable = Vec::new();
    if nvml.init_error.is_none() {
        for d in &nvml.devices {
            let bus = d.pci_bus_id.clone().unwrap_or_else(|| "?".to_string());
            let label = format!("gpu {} ({bus})", d.index);
            let source = format!("nvml.devices[{}].compute_processes", d.index);
            match &d.compute_processes {
                Reading::Value(list) if list.is_empty() => listed += 1,
                Reading::Value(list) => {
                    listed += 1;
                    let who: Vec<String> = list.iter().map(|p| p.describe_with_memory()).collect();
                    warnings.push(format!("{label} held by {}", who.join(", ")));
                    evidence.push(Evidence::new(source, who.join(", ")).expected("no process"));
                    gpus.push(bus);
                }
                Reading::NotSupported => not_recorded += 1,
                // A failed reading is reported with every other (driver.nvml_errors): here it
                // only means this GPU's holders are unknown.
                Reading::Error(e) => {
                    unreadable.push(format!("{label}: {e}"));
                    evidence.push(Evidence::new(source, e.to_string()));
                }
            }
        }
        if !gpus.is_empty() {
            hints.push("a node handed to a job is expected to show its processes: probe it when the job is done; on an idle or drained node, find and stop them (`nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv`, or the Pod that runs them); --cuda, --bandwidth and --nccl figures on a held gpu are inconclusive".to_string());
        }
    }

    // The environment part. A capture whose env.json cannot be read says nothing of it.
    let env_error = ctx.source().env_error();
    if let Some(err) = &env_error {
        evidence.push(Evidence::new(crate::source::ENV_JSON, err));
    }
    for (name, value) in &vars {
        warnings.push(format!("{name}={value} in gpudoctor's environment"));
        evidence
            .push(Evidence::new(format!("env {name}"), value).expected("not set for the probes"));
    }
    if !vars.is_empty() {
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        hints.push(format!(
            "unset {} for gpudoctor unless you meant it (`env -u {} gpudoctor ...`, or remove it from the Pod spec): it changes which gpus cuda shows or how cuda and nccl run",
            names.join(", "),
            names[0]
        ));
    }

    if let Some(err) = env_error {
        let mut summary = format!("the recorded environment could not be read: {err}");
        if !warnings.is_empty() {
            summary.push_str(&format!("; {}", warnings.join("; ")));
        }
        hints.push("re-record the node with `gpudoctor record` (env.json is an object of variable names and values)".to_string());
        return Outcome::error(summary)
            .evidence_all(evidence)
            .hint(hints.join("; "))
            .about_gpus(gpus);
    }
    if !warnings.is_empty() {
        return Outcome::warn(warnings.join("; "))
            .evidence_all(evidence)
            .hint(hints.join("; "))
            .action(Action::CheckWorkload)
            .about_gpus(gpus);
    }
    // Not supported: a driver that cannot list them, or a capture made before gpudoctor read
    // them; either way unknown, and not judged.
    const NOT_READ: &str =
        "not read (not supported, or a capture made before gpudoctor recorded them)";
    let mut parts = Vec::new();
    if let Some(e) = &nvml.init_error {
        parts.push(format!("compute processes unknown (nvml: {e})"));
    } else if listed > 0 {
        parts.push(format!("no compute process on {listed} gpu(s)"));
    } else if not_recorded == 0 && unreadable.is_empty() {
        parts.push("no gpu listed by nvml".to_string());
    }
    if !unreadable.is_empty() {
        parts.push(format!(
            "compute processes unknown on {}",
            unreadable.join(", ")
        ));
    }
    if not_recorded > 0 {
        parts.push(format!(
            "compute processes of {not_recorded} gpu(s) {NOT_READ}"
        ));
    }
    let processes = parts.join(", ");
    Outcome::pass(format!(
        "{processes}; no variable that changes what cuda or nccl see"
    ))
    .evidence_all(evidence)
}

#[cfg(test)]
#[path = "gpu_processes/tests.rs"]
mod tests;
