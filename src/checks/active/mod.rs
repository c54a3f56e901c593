//! The active probes' checks: they judge what the probes measured (`--cuda`, `--bandwidth`),
//! each in the layer the fault belongs to (docs/checks.md "Active probes"):
//! - `driver.cuda`: does CUDA work on every GPU NVML lists (a context and a round trip);
//! - `topology.host_bandwidth`: host↔GPU copies against the GPU's PCIe path and its siblings;
//! - `nvlink.p2p_bandwidth`: GPU↔GPU peer copies against the profile and the other pairs;
//! - `rdma.gpudirect_bandwidth`: each HCA's GPUDirect RDMA loopback against its port rate.
//!
//! Without the flags they skip (the probes occupy the GPUs and NICs); a capture holding the
//! probes' answers is judged the same way without them.

mod bandwidth;
mod cuda;
mod gpudirect;
mod peer;
mod plan;

/// The share of a port's rate an RDMA bandwidth run must reach (the loopbacks and `--perftest-log`).
pub use gpudirect::{NoGpuMemory, RATE_FAIL, no_gpu_memory};
pub use plan::{GdrPlan, LeftOut, cuda_plan, gdr_plan, gdr_targets, nearest_gpu, placements_for};

use crate::answers::cuda::CudaFacts;
use crate::answers::cuda::CudaProbe;
use crate::checks::{CheckDef, Context, Outcome};
use crate::report::{Action, Evidence};

/// The "Active probes" section of docs/checks.md (generated with the catalogue): where each
/// probe's check sits in the walk and why, what it expects and from where, what it costs.
pub const CATALOGUE_SECTION: &str = r#"
## Active probes (`--cuda`, `--bandwidth`)

Four checks judge what gpudoctor measures instead of reads. They occupy every GPU and NIC for
seconds, so they run only when asked; without the flags they `skip`, and a capture recorded with
them (`gpudoctor record --bandwidth`) is judged the same way without the flags (with a capture
the flags are a usage error: it runs nothing). Asked for, they are required: a `--cuda` whose
driver library does not load fails `driver.cuda`, naming where it looked.

| check | layer | why there | expects (sources) | cost on 8 GPUs / 10 ports (worked out from the work done, not measured) |
|---|---|---|---|---|
| `driver.cuda` | driver | the probe runs the host driver's own `libcuda.so.1` against the kernel module on the host, before any container is involved; every cause it names (exclusive-process mode, a pending ECC error, nvidia_uvm, the fabric manager, a libcuda from another driver) is fixed on the host, and a GPU that cannot hold a context blocks every layer above it, as the GPU Operator's `cuda-ready` validation blocks the device plugin | every GPU NVML lists (outside MIG) enumerated by CUDA with the same bus id, a primary context, a 1 MiB round trip unchanged | 1-3 s (the first context on each GPU costs tens of ms, 0.5 s or more without persistence mode); a hung step costs `--cuda-timeout` (30 s) |
| `topology.host_bandwidth` | topology | host↔GPU copies cross exactly the PCIe path and NUMA placement the topology layer reads; a GPU whose link trained at full width can still move data at a third of the speed | ≥ 70 % of the narrowest link's payload rate (Gen5 x16 63.0, Gen4 x16 31.5 GB/s; 80 %+ is usual: H100 53-55, A100 25.9 — IBM autopilot, superbench baseline), ≥ 70 % of the median of GPUs on the same path, ≥ the profile's `host_copy_fail_gbyte_per_s` (AzNHC: 48 on H100/H200, 21 on A100) | 8 GPUs × 2 placements × 2 directions × 6 copies of 256 MiB ≈ 1 s at Gen5 |
| `nvlink.p2p_bandwidth` | nvlink | peer copies measure the GPU-to-GPU fabric the nvlink layer reads link by link; one degraded GPU or switch port slows every pair it is in | ≥ the profile's `p2p_copy_fail_gbyte_per_s` over NVLink (AzNHC D2D: 335 on H100/H200, 235 on A100), ≥ 70 % of the median pair of the same kind; NVLink pairs able to access each other | 56 ordered pairs × 6 copies of 256 MiB ≈ 0.3 s at ~370 GB/s |
| `rdma.gpudirect_bandwidth` | rdma | the loopback runs through one HCA into the GPU nearest to it: the rail each GPU's inter-node traffic takes | `ib_write_bw --use_cuda` loopback (`--use_cuda_dmabuf` on a dma-buf node) with 8 MiB messages ≥ the profile's `gpudirect_fail_gbit_per_s` on its compute rails (AzNHC: 380 Gb/s on H100, 360 on H200, 180 on A100), else ≥ 90 % of the port's rate; skipped naming the package when perftest is not installed; `--perftest-dir` naming a directory without it fails (asked for, so required) | 3-5 s per HCA (start-up, CUDA context, 5000 × 8 MiB), one after the other: 30-50 s for 10 ports; `--cuda-timeout` per HCA at most |

A GPU another process holds while it is measured (NVML's compute processes, which
`driver.gpu_processes` reports earlier in the walk and stderr names before the probe starts)
gives figures of the sharing, not of the hardware: `topology.host_bandwidth`, the peer pairs
it is in (`nvlink.p2p_bandwidth`) and the GPUDirect loopback into it (`rdma.gpudirect_bandwidth`)
report that GPU inconclusive (`error`, exit 3), naming the process, and judge the others without
it (a real fault elsewhere still fails); an nccl-tests run gpudoctor made (`--nccl`) below its
expected bus bandwidth while a GPU was held is inconclusive in `nccl.bus_bandwidth` the same way
(a `--nccl-log` from another time is judged as it is).

The CUDA probe runs in a helper process (`gpudoctor __cuda-probe`) that is killed with everything
it started when a step is silent for `--cuda-timeout` seconds; a stall on one GPU restarts it
without that GPU (at most three times), so a wedged GPU is named and the others still answer.
Copies are timed with CUDA events on the GPU (as NVIDIA's bandwidthTest and nvbandwidth do).
docs/performance.md has the time budget.
"#;

pub fn checks() -> Vec<CheckDef> {
    vec![cuda::DEF, bandwidth::DEF, peer::DEF, gpudirect::DEF]
}

/// One of the active probes' checks (they run only when asked).
pub fn is_active(code: &str) -> bool {
    [cuda::DEF, bandwidth::DEF, peer::DEF, gpudirect::DEF]
        .iter()
        .any(|d| d.code == code)
}

/// The CUDA probe's facts with bandwidth figures, or the outcome to give instead: skip when
/// nothing (or no bandwidth) was asked, error when the probe could not run or read.
fn bandwidth_facts<'c>(ctx: &'c Context<'_>) -> Result<&'c CudaFacts, Outcome> {
    match ctx.cuda() {
        CudaProbe::NotRequested { .. } => Err(Outcome::skip(crate::answers::cuda::NO_BANDWIDTH)),
        CudaProbe::Unavailable { origin, message } => Err(unavailable(origin, message)),
        CudaProbe::Ran(facts) if !facts.bandwidth => {
            Err(Outcome::skip(crate::answers::cuda::NO_BANDWIDTH))
        }
        CudaProbe::Ran(facts) => match killed_before_done(facts) {
            Some(out) => Err(out),
            None => Ok(facts),
        },
    }
}

/// What `--bandwidth` needs of gpudoctor's Pod, for the hint: 256 MiB pinned per copy series,
/// the CUDA contexts of every GPU in the helper, the helper itself.
pub const BANDWIDTH_MEMORY_HINT: &str = "`--bandwidth` pins 256 MiB of host memory for each copy series, and the CUDA contexts of eight GPUs take several hundred MiB more in the helper: give gpudoctor's Pod a memory limit of at least 2 GiB for the active probes (deploy/job.yaml has it; the DaemonSet's 256 MiB is for the passive checks), or run the probe on the node outside a Pod";

/// The helper died of SIGKILL or the OOM killer before it finished: what it measured is
/// incomplete and says nothing about the GPUs. An `error` naming the signal and the memory
/// limit, never a verdict on the node (nor "no gpu answered").
pub fn killed_before_done(facts: &CudaFacts) -> Option<Outcome> {
    if facts.completed {
        return None;
    }
    let run = facts.runs.last()?;
    let signal = run.signalled()?;
    if signal != 9 && run.oom_killed != Some(true) {
        return None;
    }
    let text = run.signal_text()?;
    let answered = facts.devices.len();
    Some(
        Outcome::error(format!(
            "the cuda helper was {text}, after {answered} gpu(s) answered: its measurements are incomplete and not judged"
        ))
        .evidence(Evidence::new("cuda.runs[-1].exit", &text).expected("exit 0 after every step"))
        .hint(BANDWIDTH_MEMORY_HINT),
    )
}

/// The probe could not run (the helper would not start) or its capture file is unreadable.
fn unavailable(origin: &str, message: &str) -> Outcome {
    Outcome::error(format!("the cuda probe could not run: {origin}: {message}"))
        .evidence(Evidence::new(origin, message))
        .hint("run `gpudoctor check --cuda` again on the node; a capture's .gpudoctor/cuda.json must be the file `gpudoctor record --cuda` wrote")
}

/// The processes NVML listed on this GPU before the probes ran (`driver.gpu_processes`), as
/// `pid 60321 (python3)`: a figure measured there is shared with them, so it says nothing about
/// the hardware. `None` when NVML listed none (or could not say).
fn held_by(ctx: &Context<'_>, bus: &str) -> Option<String> {
    let holders = ctx.nvml().holders_of(bus);
    (!holders.is_empty()).then(|| {
        holders
            .iter()
            .map(|p| p.describe())
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// A GPU another process held while a probe measured it.
struct Held {
    bus: String,
    /// `gpu 2 (0000:3a:00.0)`.
    label: String,
    /// [`held_by`]'s words.
    who: String,
    /// What was measured there (not judged).
    measured: String,
}

impl Held {
    fn evidence(&self) -> Evidence {
        Evidence::new(
            format!("nvml.compute_processes[{}]", self.bus),
            format!("held by {}; {} (not judged)", self.who, self.measured),
        )
        .expected("measured on a gpu no other process holds")
    }
}

/// The outcome of a probe whose only findings are GPUs another process held: `error`
/// (inconclusive, exit 3), never a verdict on the hardware.
fn inconclusive(held: &[Held], rest: &str) -> Outcome {
    let named: Vec<String> = held
        .iter()
        .map(|h| format!("{} inconclusive because {} held it", h.label, h.who))
        .collect();
    Outcome::error(format!("{}; {rest}", named.join("; ")))
        .evidence_all(held.iter().map(Held::evidence))
        .hint("another process shared the gpu while it was measured (driver.gpu_processes names it): stop it or wait for it (`nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv`), then run the probe again")
        .action(Action::CheckWorkload)
        .about_gpus(held.iter().map(|h| h.bus.clone()))
}

/// `0000:18:00.0` → `gpu 0 (0000:18:00.0)` with NVML's index when known.
fn gpu_label(ctx: &Context<'_>, bus: &str) -> String {
    match ctx
        .nvml()
        .devices
        .iter()
        .find(|d| d.pci_bus_id.as_deref() == Some(bus))
    {
        Some(d) => format!("gpu {} ({bus})", d.index),
        None => format!("gpu {bus}"),
    }
}

/// `53.2` → `53.2 GB/s`, one decimal.
fn gbs(v: f64) -> String {
    format!("{v:.1} GB/s")
}

/// A range `a-b` of values, or one value when they are all alike (to one decimal).
fn range(values: &[f64], unit: &str) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return format!("no {unit}");
    }
    if format!("{lo:.1}") == format!("{hi:.1}") {
        format!("{lo:.1} {unit}")
    } else {
        format!("{lo:.1}-{hi:.1} {unit}")
    }
}

/// The median of some values (`None` for none).
fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_medians() {
        assert_eq!(range(&[53.21, 53.24], "GB/s"), "53.2 GB/s");
        assert_eq!(range(&[17.9, 53.2, 54.0], "GB/s"), "17.9-54.0 GB/s");
        assert_eq!(range(&[], "GB/s"), "no GB/s");
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[1.0, 4.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
