//! `nvlink.p2p_bandwidth`: GPU→GPU peer copies (`--bandwidth`, `cuMemcpyPeer` of 256 MiB
//! between every ordered pair of working GPUs that CUDA says can access each other), judged
//! per kind of path: pairs NVML shows NVLinks between (direct, or through NVSwitches) against
//! the profile's floor and against the other NVLink pairs; PCIe pairs against the other PCIe
//! pairs. A pair with NVLinks that CUDA will not let talk directly fails: its traffic takes
//! the host bridge (ACS redirect, an IOMMU, a fabric manager that is not running). Each pair's
//! copy of a pattern is read back once: bytes that differ fail it (silent P2P corruption,
//! which a bandwidth figure never shows).
//!
//! Thresholds: the profile's `p2p_copy_fail_gbyte_per_s` (AzNHC's D2D floors: 335 GB/s on H100/H200,
//! 235 on A100, reference/profiles.md §4, §7); without one, a pair below [`PAIR_FAIL`] of the
//! median of its kind is an outlier (one GPU's links degraded, or one NVSwitch port).

use std::collections::BTreeMap;

use crate::answers::cuda::CudaFacts;
use crate::checks::{CheckDef, Context, Explain, Outcome};
use crate::facts::topology::{Link, NvlinkView};
use crate::report::{Action, Evidence, Figure, FigureName, Layer, Status};

use super::{Held, bandwidth_facts, gbs, gpu_label, held_by, inconclusive, median, range};

/// Below this share of the median of the same kind of pair fails.
pub const PAIR_FAIL: f64 = 0.70;

pub const DEF: CheckDef = CheckDef {
    code: "nvlink.p2p_bandwidth",
    layer: Layer::Nvlink,
    title: "GPU-to-GPU peer copies run alike on every pair (--bandwidth)",
    explain: Explain {
        reads: "the CUDA probe's peer copies (`--bandwidth`): cuDeviceCanAccessPeer and 5 timed 256 MiB cuMemcpyPeer per ordered pair of GPUs; NVML's active NVLinks (direct or to NVSwitches) and the PCIe topology for each pair's path; the profile's p2p_copy_fail_gbyte_per_s",
        expects: "every pair's verifying copy (a 1 MiB pattern copied and read back) unchanged; every NVLink pair able to access its peer and at least the profile's floor (335 GB/s on HGX H100) and 70 % of the median NVLink pair; PCIe pairs within 70 % of the median PCIe pair",
        why: "one GPU with degraded links, or one bad NVSwitch port, slows every collective that GPU joins to its speed, and the NCCL all-reduce average hides which pair it is",
        fix: "compare both GPUs' links (`nvidia-smi nvlink -s -i <index>`, `nvidia-smi nvlink -e -i <index>` error counters) and the fabric state; a pair that cannot access its peer points at ACS or the IOMMU (topology.acs_redirect) or the fabric manager; confirm with `nvbandwidth -t device_to_device_memcpy_read_ce` or `dcgmi diag -r 3`",
    },
    run,
};

struct Pair<'a> {
    from: &'a str,
    to: &'a str,
    link: Link,
    gbps: Option<f64>,
}

fn run(ctx: &Context<'_>) -> Outcome {
    let facts = match bandwidth_facts(ctx) {
        Ok(f) => f,
        Err(out) => return out,
    };
    judge(ctx, facts)
}

fn is_nvlink(link: Link) -> bool {
    matches!(link, Link::Nv(_))
}

fn judge(ctx: &Context<'_>, facts: &CudaFacts) -> Outcome {
    let working = facts.devices.iter().filter(|d| d.works()).count();
    if working < 2 || facts.peers.is_empty() {
        return Outcome::skip(format!(
            "{working} gpu(s) answered cuda: no pair to measure"
        ));
    }
    let topo = ctx.topology().as_ref().ok();
    let view = topo.and_then(|t| NvlinkView::from_nvml(ctx.nvml(), t));
    let link_of = |a: &str, b: &str| -> Link {
        if let Some(n) = view.as_ref().and_then(|v| v.between(a, b)) {
            return Link::Nv(n);
        }
        match topo.and_then(|t| Some((t.device(a)?, t.device(b)?, t))) {
            Some((x, y, t)) => t.pcie_class(x, y),
            None => Link::Unknown,
        }
    };
    let floor = ctx
        .profile()
        .filter(|p| !p.provisional)
        .and_then(|p| p.p2p_copy_fail_gbps.map(|f| (f, p.name.clone())));
    let mut figures = Vec::new();
    let mut problems: Vec<(Status, String, Evidence)> = Vec::new();
    let mut pairs: Vec<Pair> = Vec::new();
    // The GPUs of the slow pairs: one GPU in all of them is the one to look at.
    let mut slow: Vec<(&str, &str)> = Vec::new();
    let mut no_access_pcie = 0usize;
    // A pair whose copy came back different: silent corruption outranks any figure.
    let mut corrupt = false;
    // Pairs with a GPU another process held, by that GPU: what they measured, not judged.
    let mut held_pairs: BTreeMap<&str, (Vec<f64>, Vec<String>)> = BTreeMap::new();
    for p in &facts.peers {
        let link = link_of(&p.from, &p.to);
        let holder = [&p.from, &p.to]
            .into_iter()
            .find(|g| held_by(ctx, g).is_some());
        if let Some(gpu) = holder {
            let entry = held_pairs.entry(gpu.as_str()).or_default();
            match (p.timed_out, &p.error, p.gbps) {
                (true, _, _) => entry.1.push(format!("{} -> {} timed out", p.from, p.to)),
                (false, Some(e), _) => {
                    entry
                        .1
                        .push(format!("{} -> {} {}", p.from, p.to, e.describe()))
                }
                (false, None, Some(g)) => entry.0.push(g),
                (false, None, None) => {}
            }
            if let Some(g) = p.gbps {
                figures.push(
                    Figure::new(FigureName::GpuPeerCopyBytesPerSecond, g * 1e9)
                        .label("gpu", &p.from)
                        .label("peer", &p.to)
                        .label("link", link.to_string()),
                );
            }
            continue;
        }
        let names = format!("{} -> {}", gpu_label(ctx, &p.from), gpu_label(ctx, &p.to));
        let source = format!("cuda.peers[{} -> {}]", p.from, p.to);
        if p.timed_out {
            problems.push((
                Status::Fail,
                format!("peer copy {names} ({link}) did not return within the timeout"),
                Evidence::new(source, "timed out"),
            ));
            continue;
        }
        if let Some(e) = &p.error {
            problems.push((
                Status::Fail,
                format!("peer copy {names} ({link}) failed: {}", e.describe()),
                Evidence::new(source, e.describe()),
            ));
            continue;
        }
        if let Some(wrong) = p.mismatched_bytes.filter(|n| *n > 0) {
            corrupt = true;
            problems.push((
                Status::Fail,
                format!(
                    "peer copy {names} ({link}) returned {wrong} wrong byte(s): data is corrupted on the way between the gpus"
                ),
                Evidence::new(source, format!("{wrong} byte(s) differ after a copy and read back"))
                    .expected("the pattern written"),
            ));
            continue;
        }
        if p.access == Some(false) {
            if is_nvlink(link) {
                problems.push((
                    Status::Fail,
                    format!("{names}: no peer access although nvml shows {link} between them"),
                    Evidence::new(source, "cuDeviceCanAccessPeer = 0").expected("1 over NVLink"),
                ));
            } else {
                no_access_pcie += 1;
            }
            continue;
        }
        if let Some(g) = p.gbps {
            figures.push(
                Figure::new(FigureName::GpuPeerCopyBytesPerSecond, g * 1e9)
                    .label("gpu", &p.from)
                    .label("peer", &p.to)
                    .label("link", link.to_string())
                    // The floor holds NVLink pairs only, as the verdict below does.
                    .floor(
                        floor
                            .as_ref()
                            .filter(|_| is_nvlink(link))
                            .map(|(f, _)| f * 1e9),
                    ),
            );
        }
        pairs.push(Pair {
            from: &p.from,
            to: &p.to,
            link,
            gbps: p.gbps,
        });
    }
    // Medians per kind of path: NVLink (any count) or the PCIe class.
    let kind = |l: Link| {
        if is_nvlink(l) {
            "nvlink".to_string()
        } else {
            l.to_string()
        }
    };
    let mut by_kind: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for p in &pairs {
        if let Some(g) = p.gbps {
            by_kind.entry(kind(p.link)).or_default().push(g);
        }
    }
    for p in &pairs {
        let Some(g) = p.gbps else { continue };
        let names = format!("{} -> {}", gpu_label(ctx, p.from), gpu_label(ctx, p.to));
        let source = format!("cuda.peers[{} -> {}]", p.from, p.to);
        let others = &by_kind[&kind(p.link)];
        let mut reasons = Vec::new();
        if others.len() >= 2
            && let Some(m) = median(others)
            && g < PAIR_FAIL * m
        {
            reasons.push(format!(
                "{:.2}x the median {} pair ({})",
                g / m,
                kind(p.link),
                gbs(m)
            ));
        }
        if is_nvlink(p.link)
            && let Some((f, name)) = &floor
            && g < *f
        {
            reasons.push(format!("below the {name} floor of {}", gbs(*f)));
        }
        if !reasons.is_empty() {
            slow.push((p.from, p.to));
            problems.push((
                Status::Fail,
                format!(
                    "peer copy {names} over {}: {} ({})",
                    p.link,
                    gbs(g),
                    reasons.join(", ")
                ),
                Evidence::new(source, format!("{} over {}", gbs(g), p.link)).expected(
                    floor
                        .as_ref()
                        .filter(|_| is_nvlink(p.link))
                        .map(|(f, _)| format!("≥ {}", gbs(*f)))
                        .unwrap_or_else(|| "close to the other pairs".into()),
                ),
            ));
        }
    }
    let overview: Vec<String> = by_kind
        .iter()
        .map(|(k, v)| format!("{} over {k} on {} pair(s)", range(v, "GB/s"), v.len()))
        .collect();
    let mut overview = overview.join(", ");
    if no_access_pcie > 0 {
        overview.push_str(&format!(
            "; {no_access_pcie} pcie pair(s) without peer access (not judged: p2p across host bridges is often unsupported)"
        ));
    }
    let held: Vec<Held> = held_pairs
        .into_iter()
        .map(|(bus, (figures, failed))| {
            let mut measured = vec![format!(
                "{} pair(s) with it: {}",
                figures.len() + failed.len(),
                range(&figures, "GB/s")
            )];
            measured.extend(failed);
            Held {
                bus: bus.to_string(),
                label: gpu_label(ctx, bus),
                who: held_by(ctx, bus).unwrap_or_default(),
                measured: measured.join(", "),
            }
        })
        .collect();
    if problems.is_empty() && !held.is_empty() {
        let rest = if pairs.is_empty() {
            "no other pair was measured".to_string()
        } else {
            format!("the other pairs: {overview}")
        };
        return inconclusive(&held, &rest).figures(figures);
    }
    if problems.is_empty() {
        if pairs.is_empty() {
            return Outcome::skip(format!(
                "no pair of gpus can access each other ({overview})"
            ));
        }
        return Outcome::pass(format!("peer copies: {overview}"))
            .evidence(Evidence::new("cuda.peers", &overview))
            .figures(figures);
    }
    let count = problems.len();
    let (_, first, _) = &problems[0];
    let common = common_gpu(&slow)
        .map(|g| {
            format!(
                "; {} is in all {} slow pair(s)",
                gpu_label(ctx, g),
                slow.len()
            )
        })
        .unwrap_or_default();
    let summary = if count > 1 {
        format!("{first} (and {} more){common}; all: {overview}", count - 1)
    } else {
        format!("{first}{common}; all: {overview}")
    };
    let no_access = problems
        .iter()
        .any(|(_, s, _)| s.contains("no peer access"));
    let outcome = Outcome::fail(summary)
        .evidence_all(problems.into_iter().map(|(_, _, e)| e))
        .evidence_all(held.iter().map(Held::evidence));
    if corrupt {
        return outcome
            .hint("drain the node: a peer copy that changes data corrupts training silently. P2P through a PCIe switch with ACS redirect or a translating IOMMU is the usual cause on PCIe pairs (topology.acs_redirect; disable ACS for GPU traffic or boot with iommu=pt); over NVLink, or if it persists, run `dcgmi diag -r 3` and have the gpus and baseboard inspected")
            .action(Action::HardwareInspection)
            .figures(figures);
    }
    outcome
        .hint(if no_access {
            "a pair with NVLinks but no peer access routes through the host: check ACS on the switches (topology.acs_redirect), the IOMMU, and the fabric manager (`nvidia-smi -q | grep -A2 Fabric`)"
        } else {
            "compare both gpus' links (`nvidia-smi nvlink -s -i <index>`, error counters `nvidia-smi nvlink -e -i <index>`) and the fabric state; the gpu common to the slow pairs is the one to inspect; confirm with `nvbandwidth -t device_to_device_memcpy_read_ce` or `dcgmi diag -r 3`"
        })
        .action(if no_access {
            Action::FixConfig
        } else {
            Action::HardwareInspection
        })
        .figures(figures)
}

/// The one GPU every slow pair has in common, when there are several pairs and exactly one
/// such GPU.
fn common_gpu<'a>(slow: &[(&'a str, &'a str)]) -> Option<&'a str> {
    if slow.len() < 2 {
        return None;
    }
    let (a, b) = slow[0];
    let mut found = [a, b]
        .into_iter()
        .filter(|g| slow.iter().all(|(x, y)| x == g || y == g));
    let one = found.next()?;
    found.next().is_none().then_some(one)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_common_to_every_slow_pair_is_named() {
        let slow = [("a", "x"), ("x", "b"), ("c", "x")];
        assert_eq!(common_gpu(&slow), Some("x"));
        assert_eq!(common_gpu(&[("a", "x")]), None);
        assert_eq!(common_gpu(&[("a", "x"), ("b", "c")]), None);
        // Both directions of one pair: either gpu could be it.
        assert_eq!(common_gpu(&[("a", "x"), ("x", "a")]), None);
    }
}
