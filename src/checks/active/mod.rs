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

pub use plan::{cuda_plan, gdr_targets, nearest_gpu, placements_for};

use crate::checks::{CheckDef, Context, Outcome};
use crate::facts::cuda::CudaFacts;
use crate::report::Evidence;
use crate::source::CudaProbe;

pub fn checks() -> Vec<CheckDef> {
    vec![cuda::DEF, bandwidth::DEF, peer::DEF, gpudirect::DEF]
}

/// The CUDA probe's facts with bandwidth figures, or the outcome to give instead: skip when
/// nothing (or no bandwidth) was asked, error when the probe could not run or read.
fn bandwidth_facts<'c>(ctx: &'c Context<'_>) -> Result<&'c CudaFacts, Outcome> {
    match ctx.cuda() {
        CudaProbe::NotRequested { .. } => Err(Outcome::skip(crate::source::cuda::NO_BANDWIDTH)),
        CudaProbe::Unavailable { origin, message } => Err(unavailable(origin, message)),
        CudaProbe::Ran(facts) if !facts.bandwidth => {
            Err(Outcome::skip(crate::source::cuda::NO_BANDWIDTH))
        }
        CudaProbe::Ran(facts) => Ok(facts),
    }
}

/// The probe could not run (the helper would not start) or its capture file is unreadable.
fn unavailable(origin: &str, message: &str) -> Outcome {
    Outcome::error(format!("the cuda probe could not run: {origin}: {message}"))
        .evidence(Evidence::new(origin, message))
        .hint("run `gpudoctor check --cuda` again on the node; a capture's .gpudoctor/cuda.json must be the file `gpudoctor record --cuda` wrote")
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
