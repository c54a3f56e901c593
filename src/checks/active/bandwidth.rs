//! `topology.host_bandwidth`: host↔GPU copy bandwidth per GPU (`--bandwidth`), from pinned
//! memory on the GPU's own NUMA node, against what its PCIe path can carry and against its
//! siblings. The same copies from another NUMA node are reported (figures, evidence) but not
//! judged: they show what a job pinned to the wrong socket loses.
//!
//! What the path can carry: the narrowest link between the GPU and its root port (the GPU's own
//! and every switch link above it), each at its maximum speed (a GPU lowers its link speed when
//! idle, so the speed read before the copies says nothing) times its trained width, per
//! direction with 128b/130b encoding (reference/sysfs.md §3: Gen4 x16 31.5, Gen5 x16 63.0 GB/s).
//!
//! Thresholds (reference/profiles.md §10, §4, §7): a healthy GPU copies at 80 % or more of
//! that (IBM autopilot's expectation; H100 ≈ 53-55 of 63, A100 25.9 of 31.5 in superbench's
//! baseline); AzNHC fails H100 below 48 GB/s (76 %) and A100 below 21 (67 %). Without a profile:
//! below [`LINK_WARN`] of the path warns, below [`LINK_FAIL`] fails (under both AzNHC floors, so
//! a pass here is a pass there), and below [`SIBLING_FAIL`] of the median of the GPUs with the
//! same path fails: one GPU of eight at a third of its siblings, its link at full width, is
//! what no file shows. With a profile its `host_copy_fail_gbyte_per_s` floor applies as well.

use crate::answers::cuda::{CudaFacts, Direction, Placement};
use crate::checks::{CheckDef, Context, Explain, Outcome};
use crate::facts::pci::link_gb_per_s;
use crate::facts::topology::Topology;
use crate::report::{Action, Evidence, Figure, FigureName, Layer, Status};

use super::{Held, bandwidth_facts, gbs, gpu_label, held_by, inconclusive, median, range};

/// Below this share of the path's capacity fails.
pub const LINK_FAIL: f64 = 0.60;
/// Below this share warns.
pub const LINK_WARN: f64 = 0.70;
/// Below this share of the median of GPUs on the same path fails.
pub const SIBLING_FAIL: f64 = 0.70;

// The floors sit under AzNHC's (48 of Gen5 x16's 63 GB/s, 21 of Gen4 x16's 31.5): a GPU this
// check fails also fails there.
const _: () = assert!(LINK_FAIL < 48.0 / 63.0 && LINK_FAIL < 21.0 / 31.5 && LINK_WARN > LINK_FAIL);

pub const DEF: CheckDef = CheckDef {
    code: "topology.host_bandwidth",
    layer: Layer::Topology,
    title: "host-GPU copies run at the speed of each GPU's PCIe path (--bandwidth)",
    explain: Explain {
        reads: "the CUDA probe's copies (`--bandwidth`): per GPU, 256 MiB cuMemcpyHtoD and DtoH from pinned memory allocated by a thread bound to the GPU's NUMA node (and to another node, for evidence), median of 5; the PCIe links of the GPU and the ports above it (max speed, current width); the profile's host_copy_fail_gbyte_per_s",
        expects: "each direction at least 70 % of the narrowest link's payload rate (80 % or more is usual: H100 53-55 of 63 GB/s at Gen5 x16), no GPU below 70 % of the median of the GPUs on the same kind of path, and at least the profile's floor",
        why: "a GPU whose link trained at full width can still move data at a third of the speed (a bad riser, a failing switch port, a lane running with errors): every data loader and checkpoint on it is slow, and the NCCL average hides it behind seven healthy GPUs",
        fix: "reseat the GPU or its riser and look at the switch link above it (`lspci -vv -s <bdf>` LnkSta, `nvidia-smi -q -i <index> -d PCIE` replay counters); confirm with `nvbandwidth -t host_to_device_memcpy_ce`; a GPU that stays slow needs hardware inspection",
    },
    run,
};

/// The narrowest link on a GPU's path: (GB/s per direction, description).
pub fn path_capacity(topo: &Topology, bus: &str) -> Option<(f64, String)> {
    let gpu = topo.device(bus)?;
    let mut best: Option<(f64, String)> = None;
    for d in std::iter::once(gpu).chain(topo.ancestors(gpu)) {
        let speed = d.link.max_speed.or(d.link.current_speed);
        let width = d.link.current_width.or(d.link.max_width);
        let (Some(speed), Some(width)) = (speed, width) else {
            continue;
        };
        if width == 0 {
            continue;
        }
        let gbps = link_gb_per_s(speed, width);
        let link = match speed.generation() {
            Some(g) => format!("gen{g} x{width}"),
            None => format!("{speed} x{width}"),
        };
        let text = if d.bdf == gpu.bdf {
            link
        } else {
            format!("{link} at {}", d.bdf)
        };
        if best.as_ref().is_none_or(|(b, _)| gbps < *b) {
            best = Some((gbps, text));
        }
    }
    best
}

/// One local measurement: bus id, direction, GB/s, the path's capacity and description.
type Local = (String, Direction, f64, Option<(f64, String)>);

struct Problem {
    status: Status,
    summary: String,
    evidence: Evidence,
}

fn run(ctx: &Context<'_>) -> Outcome {
    let facts = match bandwidth_facts(ctx) {
        Ok(f) => f,
        Err(out) => return out,
    };
    judge(ctx, facts)
}

fn judge(ctx: &Context<'_>, facts: &CudaFacts) -> Outcome {
    let topo = ctx.topology().as_ref().ok();
    let floor = ctx
        .profile()
        .filter(|p| !p.provisional)
        .and_then(|p| p.host_copy_fail_gbps.map(|f| (f, p.name.clone())));
    let mut figures = Vec::new();
    let mut problems: Vec<Problem> = Vec::new();
    // (bus, direction, gbps, capacity) of the local measurements.
    let mut local: Vec<Local> = Vec::new();
    let mut remote: Vec<f64> = Vec::new();
    let mut binding_notes = Vec::new();
    // GPUs another process held: not judged.
    let mut held: Vec<Held> = Vec::new();
    for dev in facts
        .devices
        .iter()
        .filter(|d| d.works() || !d.copies.is_empty())
    {
        let Some(bus) = dev.bus_id.clone() else {
            continue;
        };
        let label = gpu_label(ctx, &bus);
        let capacity = topo.and_then(|t| path_capacity(t, &bus));
        if let Some(who) = held_by(ctx, &bus) {
            let measured: Vec<String> = dev
                .copies
                .iter()
                .filter(|c| c.placement == Placement::Local)
                .map(|c| match (&c.error, c.gbps) {
                    (Some(e), _) => format!("{} {}", c.direction.id(), e.describe()),
                    (None, Some(g)) => format!("{} {}", c.direction.id(), gbs(g)),
                    (None, None) => format!("{} no figure", c.direction.id()),
                })
                .collect();
            for copy in &dev.copies {
                if let Some(g) = copy.gbps {
                    figures.push(
                        Figure::new(FigureName::HostGpuCopyBytesPerSecond, g * 1e9)
                            .label("gpu", &bus)
                            .label("direction", copy.direction.id())
                            .label("numa", copy.placement.id()),
                    );
                }
            }
            let measured = if dev.timed_out.is_some() {
                "timed out".to_string()
            } else {
                measured.join(", ")
            };
            held.push(Held {
                bus: bus.clone(),
                label,
                who,
                measured,
            });
            continue;
        }
        if let Some(step) = &dev.timed_out {
            problems.push(Problem {
                status: Status::Fail,
                summary: format!("{label}: `{step}` did not return within the timeout"),
                evidence: Evidence::new(
                    format!("cuda.devices[{bus}]"),
                    format!("timed out in {step}"),
                ),
            });
            continue;
        }
        for copy in &dev.copies {
            let source = format!(
                "cuda.devices[{bus}].{} {}",
                copy.direction.id(),
                copy.placement.id()
            );
            if let Some(e) = &copy.error {
                if copy.placement == Placement::Local {
                    problems.push(Problem {
                        status: Status::Fail,
                        summary: format!(
                            "{label}: {} copy failed: {}",
                            copy.direction.id(),
                            e.describe()
                        ),
                        evidence: Evidence::new(source, e.describe()),
                    });
                }
                continue;
            }
            let Some(g) = copy.gbps else { continue };
            figures.push(
                Figure::new(FigureName::HostGpuCopyBytesPerSecond, g * 1e9)
                    .label("gpu", &bus)
                    .label("direction", copy.direction.id())
                    .label("numa", copy.placement.id())
                    // The floor holds copies from the GPU's own socket only.
                    .floor(
                        floor
                            .as_ref()
                            .filter(|_| copy.placement == Placement::Local)
                            .map(|(f, _)| f * 1e9),
                    ),
            );
            if let Some(why) = &copy.binding_error {
                binding_notes.push(format!(
                    "{label} {}: not bound ({why})",
                    copy.placement.id()
                ));
            }
            match copy.placement {
                Placement::Local => local.push((bus.clone(), copy.direction, g, capacity.clone())),
                Placement::Remote => remote.push(g),
            }
        }
    }
    if local.is_empty() && problems.is_empty() {
        if !held.is_empty() {
            return inconclusive(&held, "no other gpu's copies were measured").figures(figures);
        }
        return Outcome::skip("no gpu answered cuda, so no host-gpu copy was measured");
    }
    for (bus, direction, g, capacity) in &local {
        let label = gpu_label(ctx, bus);
        let dir = direction.id();
        let source = format!("cuda.devices[{bus}].{dir} local");
        // Siblings: GPUs whose path has the same capacity, this direction.
        let same: Vec<f64> = local
            .iter()
            .filter(|(b, d, _, c)| {
                d == direction
                    && c.as_ref().map(|x| (x.0 * 10.0).round() as i64)
                        == capacity.as_ref().map(|x| (x.0 * 10.0).round() as i64)
                    && b != bus
            })
            .map(|(_, _, v, _)| *v)
            .collect();
        let sib_median = if same.is_empty() { None } else { median(&same) };
        let mut reasons = Vec::new();
        let mut status = Status::Pass;
        if let Some((cap, text)) = capacity {
            let share = g / cap;
            if share < LINK_FAIL {
                status = Status::Fail;
                reasons.push(format!(
                    "{:.0} % of its {text} path ({})",
                    share * 100.0,
                    gbs(*cap)
                ));
            } else if share < LINK_WARN {
                status = Status::Warn;
                reasons.push(format!(
                    "{:.0} % of its {text} path ({})",
                    share * 100.0,
                    gbs(*cap)
                ));
            }
        }
        if let Some(m) = sib_median
            && *g < SIBLING_FAIL * m
        {
            status = Status::Fail;
            reasons.push(format!("{:.2}x its siblings' median {}", g / m, gbs(m)));
        }
        if let Some((f, name)) = &floor
            && g < f
        {
            status = Status::Fail;
            reasons.push(format!("below the {name} floor of {}", gbs(*f)));
        }
        if status != Status::Pass {
            let expected = match capacity {
                Some((cap, _)) => format!(
                    "≥ {} ({:.0} % of the path){}",
                    gbs(LINK_WARN * cap),
                    LINK_WARN * 100.0,
                    floor
                        .as_ref()
                        .map(|(f, _)| format!(", ≥ {} (profile)", gbs(*f)))
                        .unwrap_or_default()
                ),
                None => "close to the other gpus".to_string(),
            };
            problems.push(Problem {
                status,
                summary: format!("{label} {dir} {}: {}", gbs(*g), reasons.join(", ")),
                evidence: Evidence::new(source, format!("{} ({})", gbs(*g), reasons.join(", ")))
                    .expected(expected),
            });
        }
    }
    let h2d: Vec<f64> = local
        .iter()
        .filter(|l| l.1 == Direction::H2d)
        .map(|l| l.2)
        .collect();
    let d2h: Vec<f64> = local
        .iter()
        .filter(|l| l.1 == Direction::D2h)
        .map(|l| l.2)
        .collect();
    let gpus: std::collections::BTreeSet<&str> = local.iter().map(|l| l.0.as_str()).collect();
    let capacities: std::collections::BTreeSet<String> = local
        .iter()
        .filter_map(|l| l.3.as_ref().map(|c| format!("{} {}", c.1, gbs(c.0))))
        .collect();
    let mut context = vec![format!(
        "path {}",
        if capacities.is_empty() {
            "unknown (pci links not read)".to_string()
        } else {
            capacities.into_iter().collect::<Vec<_>>().join(", ")
        }
    )];
    if !remote.is_empty() {
        context.push(format!("from another numa node {}", range(&remote, "GB/s")));
    }
    let overview = format!(
        "h2d {}, d2h {} on {} gpu(s) ({})",
        range(&h2d, "GB/s"),
        range(&d2h, "GB/s"),
        gpus.len(),
        context.join("; ")
    );
    let mut out = if problems.is_empty() && !held.is_empty() {
        inconclusive(&held, &format!("the others: {overview}"))
            .evidence(Evidence::new("cuda.devices[*] local", &overview))
    } else if problems.is_empty() {
        Outcome::pass(format!("host-gpu copies: {overview}"))
            .evidence(Evidence::new("cuda.devices[*] local", &overview))
    } else {
        problems.sort_by_key(|p| std::cmp::Reverse(p.status.severity()));
        let worst = problems[0].status;
        let more = if problems.len() > 1 {
            format!(" (and {} more)", problems.len() - 1)
        } else {
            String::new()
        };
        let summary = format!("{}{more}; all: {overview}", problems[0].summary);
        let base = if worst == Status::Fail {
            Outcome::fail(summary)
        } else {
            Outcome::warn(summary)
        };
        base.evidence_all(problems.iter().map(|p| p.evidence.clone()))
            .evidence_all(held.iter().map(Held::evidence))
            .hint("reseat the named gpu or its riser and check the switch link above it (`lspci -vv -s <bdf>` LnkSta, `nvidia-smi -q -i <index> -d PCIE` replays); confirm with `nvbandwidth -t host_to_device_memcpy_ce`; if it stays slow, take the gpu out of service")
            .action(Action::HardwareInspection)
    };
    if !binding_notes.is_empty() {
        out = out.evidence(Evidence::new("numa binding", binding_notes.join("; ")));
    }
    out.figures(figures)
}
