//! `rdma.gpudirect_bandwidth`: each HCA's GPUDirect RDMA loopback (`--bandwidth`, `ib_write_bw
//! --use_cuda` through the HCA with both buffers in its nearest GPU's memory, source/
//! gpudirect.rs) against the port's rate. Thresholds: the profile's `gpudirect_fail_gbit_per_s`
//! (AzNHC's GDR floors: 380 Gb/s on H100, 360 on H200, 180 on A100, reference/profiles.md §4,
//! §5, §7), else [`RATE_FAIL`] of the port's rate (those floors are 90-95 % of 400 and 200).

use crate::answers::gpudirect::GdrProbe;
use crate::answers::gpudirect::{BINARY, DMABUF_OPTION, GdrRun, INSTALL_HINT, MESSAGE_BYTES};
use crate::answers::perftest::BwRow;
use crate::checks::rdma::gpudirect::{MemoryPath, memory_path};
use crate::checks::{CheckDef, Context, Explain, Outcome};
use crate::report::{Action, Evidence, Figure, FigureName, Layer, Status};

/// Below this share of the port's rate fails (kept beside `rdma.gpudirect`, which both this
/// check and `rdma.perftest_log` read from).
pub use crate::checks::rdma::gpudirect::RATE_FAIL;

pub const DEF: CheckDef = CheckDef {
    code: "rdma.gpudirect_bandwidth",
    layer: Layer::Rdma,
    title: "GPUDirect RDMA through each HCA runs at its port rate (--bandwidth)",
    explain: Explain {
        reads: "an `ib_write_bw` loopback per active port of each GPU rail (`--bandwidth`; perftest built with CUDA, found on PATH or --perftest-dir): the RDMA devices whose nearest GPU is at PIX or PXB, or the profile's rdma_devices — never an SR-IOV VF, a front-end or storage NIC, or an HCA whose GPU is in MIG mode or in Exclusive_Process/Prohibited compute mode (named as left out); server and client on the same HCA, `--use_cuda` on the GPU nearest to it (with `--use_cuda_dmabuf` on a node that reaches GPU memory through dma-buf, rdma.gpudirect's decision; the host driver's library directory first on perftest's LD_LIBRARY_PATH), 8 MiB messages, `--report_gbits`, the client's BW average; or a capture's .gpudoctor/gpudirect/*.log; the port's rate from /sys/class/infiniband/*/ports/*/rate; the profile's gpudirect_fail_gbit_per_s",
        expects: "each HCA's loopback finishes within --cuda-timeout and reaches the profile's floor (380 Gb/s on HGX H100), or 90 % of its port rate without one; a perftest that cannot use GPU memory (built without CUDA or dma-buf, `Unsupported memory type`, libcuda not found: `Failed to load CUDA library dynamically` or the loader's exit 127, `Couldn't allocate MR` without nvidia_peermem) is an error naming the cause, the fix and every rail it came from, never a hardware verdict and never a pass",
        why: "GPUDirect RDMA is how every inter-node collective reaches GPU memory: one HCA whose path into its GPU is slow (a missing nvidia_peermem, ACS redirecting peer traffic through the root complex, a degraded switch port) slows every job that uses that rail, and the NCCL average over eight rails hides it",
        fix: "for the HCA named: check nvidia_peermem is loaded (`lsmod | grep peermem`), ACS on the switch between HCA and GPU (topology.acs_redirect), the HCA's and GPU's PCIe links; rerun `ib_write_bw` without --use_cuda to tell the NIC from the GPU path",
    },
    run,
};

fn rate_of(ctx: &Context<'_>, device: &str, port: u32) -> Option<f64> {
    let rdma = ctx.rdma().as_ref().ok()?;
    rdma.devices
        .iter()
        .find(|d| d.name == device)?
        .ports
        .iter()
        .find(|p| p.port == port)?
        .rate_gbps
}

/// The devices left out, as one line of evidence (`mlx5_8: nearest gpu at NODE ...; ...`).
fn left_out_evidence(left_out: &[super::LeftOut]) -> Option<Evidence> {
    // Devices with the same reason share it (two front-end ports, eight MIG GPUs' rails).
    let mut grouped: Vec<(Vec<&str>, &str)> = Vec::new();
    for l in left_out {
        match grouped.iter_mut().find(|(_, r)| *r == l.reason) {
            Some((devices, _)) => devices.push(&l.device),
            None => grouped.push((vec![&l.device], &l.reason)),
        }
    }
    (!grouped.is_empty()).then(|| {
        let text: Vec<String> = grouped
            .iter()
            .map(|(devices, reason)| format!("{}: {reason}", devices.join(", ")))
            .collect();
        Evidence::new("left out", text.join("; "))
    })
}

fn run(ctx: &Context<'_>) -> Outcome {
    let plan = super::gdr_plan(ctx);
    let left_out = left_out_evidence(&plan.left_out);
    let runs = match ctx.gpudirect() {
        GdrProbe::NotRequested { why } => return Outcome::skip(why),
        GdrProbe::NoTargets => {
            let why = if plan.left_out.is_empty() {
                "no rdma device with an active port: no gpudirect loopback to run".to_string()
            } else {
                format!(
                    "no gpu rail to loop back: {} rdma device(s) with an active port left out",
                    plan.left_out.len()
                )
            };
            return Outcome::skip(why).evidence_all(left_out);
        }
        GdrProbe::BinaryMissing { searched, asked } => {
            let text = format!("{BINARY} (perftest) not found in {}", searched.join(", "));
            // Asked means required (issue 19): a --perftest-dir that holds no ib_write_bw
            // fails; without it the loopbacks are an extra of --bandwidth for nodes that have
            // perftest (issue 18), skipped naming the package.
            return if *asked {
                Outcome::fail(format!(
                    "{text}: --perftest-dir was given but holds no {BINARY}"
                ))
                .evidence(Evidence::new("--perftest-dir", searched.join(", ")))
                .hint(INSTALL_HINT)
                .action(Action::FixConfig)
            } else {
                Outcome::skip(format!(
                    "{text}: install the perftest package to measure gpudirect rdma"
                ))
                .hint(INSTALL_HINT)
            };
        }
        GdrProbe::Unavailable { origin, message } => {
            return Outcome::error(format!("the gpudirect loopback could not run: {origin}: {message}"))
                .evidence(Evidence::new(origin, message))
                .hint("check that ib_write_bw starts by hand (`ib_write_bw -h`); a capture's .gpudoctor/gpudirect/ holds the files `gpudoctor record --bandwidth` wrote");
        }
        GdrProbe::Runs(runs) => runs,
    };
    // The profile's floor is for its compute rails (ports of its `rdma_devices`, at its
    // `rdma_rate_gbit_per_s`); a storage or management NIC is held to its own rate.
    let profile = ctx.profile().filter(|p| !p.provisional);
    let floor_for = |device: &str, rate: Option<f64>| {
        let p = profile?;
        let f = p.gpudirect_fail_gbits?;
        if !p.is_fabric_device(device) {
            return None;
        }
        match (p.rdma_rate_gbps, rate) {
            (Some(want), Some(have)) if (f64::from(want) - have).abs() > 0.5 => None,
            _ => Some((f, p.name.clone())),
        }
    };
    let mut figures = Vec::new();
    let mut problems: Vec<Problem> = Vec::new();
    let mut rails: Vec<f64> = Vec::new();
    let mut others: Vec<f64> = Vec::new();
    // Rails whose perftest could not use GPU memory at all: the setup, never the rail.
    let mut unbuilt: Vec<Unbuilt> = Vec::new();
    // Loopbacks into a GPU another process held: what they measured, not judged.
    let mut held: Vec<super::Held> = Vec::new();
    let node_path = memory_path(ctx);
    // A capture made before the plan left these out (or by hand) may hold their loopbacks:
    // they are not judged against a rail's floor, as a live run would not have run them.
    let runs = runs
        .iter()
        .filter(|r| !plan.left_out.iter().any(|l| l.device == r.device));
    for run in runs {
        let gpu = run
            .meta
            .as_ref()
            .and_then(|m| m.gpu.clone())
            .unwrap_or_else(|| "?".into());
        let path = run
            .meta
            .as_ref()
            .and_then(|m| m.path.clone())
            .map(|p| format!(", {p}"))
            .unwrap_or_default();
        let who = format!("{} port {} (gpu {gpu}{path})", run.device, run.port);
        let size = run
            .meta
            .as_ref()
            .map(|m| m.message_bytes)
            .filter(|b| *b > 0)
            .unwrap_or(MESSAGE_BYTES);
        if let Some(holders) = super::held_by(ctx, &gpu) {
            let row = run.output.at_size(size);
            if let Some(row) = row {
                figures.push(
                    Figure::new(
                        FigureName::GpudirectRdmaBytesPerSecond,
                        row.average_gbits * 1e9 / 8.0,
                    )
                    .label("device", &run.device)
                    .label("port", run.port.to_string())
                    .label("gpu", &gpu),
                );
            }
            held.push(super::Held {
                label: super::gpu_label(ctx, &gpu),
                bus: gpu.clone(),
                who: holders,
                measured: match row {
                    Some(row) => format!(
                        "{} port {} loopback {:.1} Gb/s",
                        run.device, run.port, row.average_gbits
                    ),
                    None => format!("{} port {} loopback without a figure", run.device, run.port),
                },
            });
            continue;
        }
        let Some(row) = run.output.at_size(size) else {
            match no_gpu_memory(run, node_path) {
                Some((cause, said)) => unbuilt.push(Unbuilt {
                    port: format!("{} port {}", run.device, run.port),
                    cause,
                    said,
                    library_path: run.meta.as_ref().and_then(|m| m.library_path.clone()),
                }),
                None => problems.push(no_row(run, &who)),
            }
            continue;
        };
        let rate = rate_of(ctx, &run.device, run.port);
        let floor = floor_for(&run.device, rate);
        // A compute rail, held to the profile's floor, or another port held to its own rate:
        // each range says what its ports were judged against.
        if floor.is_some() {
            rails.push(row.average_gbits);
        } else {
            others.push(row.average_gbits);
        }
        figures.push(
            Figure::new(
                FigureName::GpudirectRdmaBytesPerSecond,
                row.average_gbits * 1e9 / 8.0,
            )
            .label("device", &run.device)
            .label("port", run.port.to_string())
            .label("gpu", &gpu)
            .floor(floor.as_ref().map(|(f, _)| f * 1e9 / 8.0)),
        );
        if let Some(p) = judge_row(row, rate, floor.as_ref(), &who, run) {
            problems.push(p);
        }
    }
    let measured = rails.len() + others.len();
    if unbuilt.is_empty() && measured == 0 && problems.is_empty() {
        if !held.is_empty() {
            return super::inconclusive(&held, "no other loopback was measured")
                .evidence_all(left_out)
                .figures(figures);
        }
        return Outcome::skip("no gpudirect loopback of a gpu rail to judge")
            .evidence_all(left_out);
    }
    let overview = overview(
        &rails,
        &others,
        profile.and_then(|p| p.gpudirect_fail_gbits.map(|f| (f, p.name.as_str()))),
    );
    // Every rail whose perftest could not use GPU memory is named, with its cause, whatever the
    // others measured: such a rail was not measured, so the check cannot pass (issue 42).
    let setup = (!unbuilt.is_empty()).then(|| setup_finding(&unbuilt));
    if problems.is_empty() && unbuilt.is_empty() && !held.is_empty() {
        return super::inconclusive(&held, &format!("the others: {overview}"))
            .evidence(Evidence::new("gpudirect", &overview))
            .evidence_all(left_out)
            .figures(figures);
    }
    if problems.is_empty() && unbuilt.is_empty() {
        return Outcome::pass(format!("gpudirect rdma loopbacks: {overview}"))
            .evidence(Evidence::new("gpudirect", &overview))
            .evidence_all(left_out)
            .figures(figures);
    }
    if problems.is_empty()
        && let Some((text, evidence, hint)) = setup
    {
        let summary = if measured > 0 {
            format!("{BINARY} cannot use gpu memory: {text}; measured: {overview}")
        } else {
            format!("{BINARY} cannot use gpu memory: {text}")
        };
        return Outcome::error(summary)
            .evidence_all(evidence)
            .evidence_all(left_out)
            .hint(hint)
            .action(Action::FixConfig)
            .figures(figures);
    }
    problems.sort_by_key(|p| std::cmp::Reverse(p.0.severity()));
    let count = problems.len();
    let mut summary = if count > 1 {
        // Every failed rail is named, not counted (issue 42).
        let rest: Vec<&str> = problems[1..].iter().map(|p| p.3.as_str()).collect();
        format!(
            "{} (and {} more: {}); all: {overview}",
            problems[0].1,
            count - 1,
            rest.join(", ")
        )
    } else {
        format!("{}; all: {overview}", problems[0].1)
    };
    let mut setup_evidence = Vec::new();
    if let Some((text, evidence, _)) = setup {
        summary.push_str(&format!("; {BINARY} cannot use gpu memory: {text}"));
        setup_evidence = evidence;
    }
    Outcome::fail(summary)
        .evidence_all(problems.into_iter().flat_map(|p| p.2))
        .evidence_all(setup_evidence)
        .evidence_all(held.iter().map(super::Held::evidence))
        .evidence_all(left_out)
        .hint("for the hca named: check nvidia_peermem is loaded (`lsmod | grep peermem`), ACS on the switch between the hca and its gpu, and both pcie links (`lspci -vv -s <bdf>`); run `ib_write_bw -d <hca> --report_gbits` without --use_cuda to tell the nic from the gpu path")
        .action(Action::HardwareInspection)
        .figures(figures)
}

/// The loopbacks measured, one range per yardstick: the profile's compute rails against its
/// floor, other ports (or every port, without a profile floor) against their own rate.
fn overview(rails: &[f64], others: &[f64], floor: Option<(f64, &str)>) -> String {
    let mut parts = Vec::new();
    if let (false, Some((f, name))) = (rails.is_empty(), floor) {
        parts.push(format!(
            "{} on {} compute rail port(s) ({name} floor {f:.0} Gb/s)",
            super::range(rails, "Gb/s"),
            rails.len()
        ));
    }
    if !others.is_empty() {
        let which = if parts.is_empty() { "hca" } else { "other hca" };
        parts.push(format!(
            "{} on {} {which} port(s) (floor {:.0} % of each port's rate)",
            super::range(others, "Gb/s"),
            others.len(),
            RATE_FAIL * 100.0
        ));
    }
    parts.join(", ")
}

/// A problem: its status, summary line, evidence and the port it is about.
type Problem = (Status, String, Vec<Evidence>, String);

/// A run without a result row whose perftest could use GPU memory: why, as a problem.
fn no_row(run: &GdrRun, who: &str) -> Problem {
    let meta = run.meta.as_ref();
    let detail = run
        .output
        .errors
        .first()
        .cloned()
        .or_else(|| {
            run.output
                .malformed_rows
                .first()
                .map(|r| format!("cut row `{r}`"))
        })
        .unwrap_or_else(|| format!("no result row in {} line(s)", run.output.lines));
    let what = match meta {
        Some(m) if m.timed_out && m.server_not_ready => format!(
            "the {BINARY} server on {who} never said it was listening within {} s",
            m.timeout_s.unwrap_or(0)
        ),
        Some(m) if m.timed_out => format!(
            "the loopback on {who} did not finish within {} s",
            m.timeout_s.unwrap_or(0)
        ),
        _ => match run.output.errors.first() {
            Some(e) => format!("the loopback on {who} failed: {e}"),
            None => format!(
                "the loopback on {who} printed no result ({})",
                crate::process::describe_exit(meta.and_then(|m| m.exit))
            ),
        },
    };
    let mut evidence = vec![
        Evidence::new(&run.origin, format!("{what}: {detail}"))
            .expected("a result row for 8 MiB messages"),
    ];
    if let Some(m) = meta
        && !m.killed.is_empty()
    {
        let killed: Vec<String> = m.killed.iter().map(|k| k.describe()).collect();
        evidence.push(Evidence::new("killed", killed.join("; ")));
    }
    (
        Status::Fail,
        what,
        evidence,
        format!("{} port {}", run.device, run.port),
    )
}

fn judge_row(
    row: &BwRow,
    rate: Option<f64>,
    floor: Option<&(f64, String)>,
    who: &str,
    run: &GdrRun,
) -> Option<Problem> {
    let g = row.average_gbits;
    let mut reasons = Vec::new();
    let expected = match (floor, rate) {
        (Some((f, name)), _) => {
            if g < *f {
                reasons.push(format!("below the {name} floor of {f:.0} Gb/s"));
            }
            format!("≥ {f:.0} Gb/s ({name})")
        }
        (None, Some(r)) => {
            if g < RATE_FAIL * r {
                reasons.push(format!("{:.0} % of its {r:.0} Gb/s port", g / r * 100.0));
            }
            format!(
                "≥ {:.0} Gb/s ({:.0} % of the port)",
                RATE_FAIL * r,
                RATE_FAIL * 100.0
            )
        }
        (None, None) => return None,
    };
    if let (Some(r), Some(_)) = (rate, floor)
        && !reasons.is_empty()
    {
        reasons.push(format!("{:.0} % of its {r:.0} Gb/s port", g / r * 100.0));
    }
    if reasons.is_empty() {
        return None;
    }
    let mut evidence = vec![
        Evidence::new(
            &run.origin,
            format!("BW average {g:.2} Gb/s at {} bytes", row.bytes),
        )
        .expected(expected),
    ];
    if !run.output.gpu_memory {
        evidence.push(Evidence::new(
            &run.origin,
            "perftest did not say it used gpu memory (no `allocated GPU buffer` line)",
        ));
    }
    Some((
        Status::Fail,
        format!(
            "{who}: gpudirect loopback {g:.1} Gb/s, {}",
            reasons.join(", ")
        ),
        evidence,
        format!("{} port {}", run.device, run.port),
    ))
}

/// How perftest says it cannot use GPU memory: the build, its libcuda or the node's path into
/// GPU memory — a setup to fix, never the rail's hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoGpuMemory {
    /// Built without CUDA: getopt's `unrecognized option '--use_cuda=0'`, `option '--use_cuda'
    /// doesn't allow an argument` (before 4.4-0.29), or ` Unsupported memory type`
    /// (perftest_parameters.c, memory types compiled out).
    CudaLeftOut,
    /// Asked for dma-buf by a build or GPU without it: an unknown `--use_cuda_dmabuf`,
    /// ` Unsupported memory type` with it (built against a cuda.h before 11.7), `DMA-BUF is not
    /// supported on this GPU` (cuda_memory.c).
    DmabufLeftOut,
    /// perftest ≥ 25.07 `dlopen`s `libcuda.so` (src/cuda_loader.c): `dlerror: ...`,
    /// `Failed to load CUDA library dynamically`, exit 1.
    LibcudaNotOpened,
    /// A perftest linked to `libcuda.so.1` that the loader did not find: `error while loading
    /// shared libraries: libcuda.so.1`, exit 127.
    LibcudaNotLoaded,
    /// `Couldn't allocate MR` with plain `--use_cuda` on a node without a peer-memory client:
    /// the HCA cannot register GPU memory that way (perftest README: "If GPUDirect is not
    /// working, (e.g. you see "Couldn't allocate MR" ...)").
    PeerMemoryAbsent,
}

impl NoGpuMemory {
    fn cause(self) -> &'static str {
        match self {
            NoGpuMemory::CudaLeftOut => "perftest was built without cuda",
            NoGpuMemory::DmabufLeftOut => {
                "this node reaches gpu memory through dma-buf, which this perftest (or the gpu) does not support"
            }
            NoGpuMemory::LibcudaNotOpened => {
                "perftest could not open libcuda.so (perftest 25.07 and later load the unversioned name at run time)"
            }
            NoGpuMemory::LibcudaNotLoaded => {
                "perftest is linked to libcuda.so.1 and the loader found none"
            }
            NoGpuMemory::PeerMemoryAbsent => {
                "the hca cannot register gpu memory: no nvidia_peermem on this node and the loopback did not use dma-buf"
            }
        }
    }

    fn fix(self, library_path: Option<&str>) -> String {
        let dir = library_path
            .map(|d| format!("gpudoctor put {d} first on its LD_LIBRARY_PATH"))
            .unwrap_or_else(|| "gpudoctor found no driver directory to give it (root /)".into());
        match self {
            NoGpuMemory::CudaLeftOut => INSTALL_HINT.to_string(),
            NoGpuMemory::DmabufLeftOut => format!(
                "build perftest against cuda ≥ 11.7 (`./configure CUDA_H_PATH=/usr/local/cuda/include/cuda.h`, which enables {DMABUF_OPTION}), or load nvidia_peermem (`modprobe nvidia_peermem`) so plain --use_cuda registers gpu memory"
            ),
            NoGpuMemory::LibcudaNotOpened => format!(
                "{dir}; that directory needs the unversioned link `libcuda.so -> libcuda.so.1` (the driver installer makes it; a distribution's libcuda1 package may not): create it on the host, or run where the driver's libraries are (--root /host with the host's /usr/lib mounted, or --cuda-lib PATH)"
            ),
            NoGpuMemory::LibcudaNotLoaded => format!(
                "{dir}; mount the host's driver libraries into gpudoctor's pod (--root /host, or the toolkit's NVIDIA_DRIVER_CAPABILITIES=compute), or pass --cuda-lib PATH"
            ),
            NoGpuMemory::PeerMemoryAbsent => "load nvidia_peermem (`modprobe nvidia_peermem`; GPU Operator: driver.rdma.enabled=true) or use the dma-buf path (open kernel module ≥ 515 on linux ≥ 5.12), which gpudoctor then passes to perftest as --use_cuda_dmabuf".to_string(),
        }
    }
}

/// Did this run's perftest say it cannot use GPU memory, and how? With what it said.
pub fn no_gpu_memory(run: &GdrRun, node: Option<MemoryPath>) -> Option<(NoGpuMemory, String)> {
    let dmabuf = run
        .meta
        .as_ref()
        .is_some_and(|m| m.command.iter().any(|a| a == DMABUF_OPTION));
    let lines: Vec<&String> = run
        .output
        .errors
        .iter()
        .chain(&run.output.malformed_rows)
        .collect();
    let said = |needle: &str| {
        lines
            .iter()
            .find(|l| l.to_ascii_lowercase().contains(needle))
            .map(|l| l.to_string())
    };
    let cause = if let Some(l) =
        said("failed to load cuda library dynamically").or_else(|| said("dlerror: libcuda"))
    {
        (NoGpuMemory::LibcudaNotOpened, l)
    } else if let Some(l) = lines
        .iter()
        .find(|l| l.contains("error while loading shared libraries") && l.contains("libcuda"))
    {
        (NoGpuMemory::LibcudaNotLoaded, l.to_string())
    } else if let Some(l) =
        said("unrecognized option '--use_cuda_dmabuf").or_else(|| said("dma-buf is not supported"))
    {
        (NoGpuMemory::DmabufLeftOut, l)
    } else if let Some(l) = said("unrecognized option '--use_cuda")
        .or_else(|| said("option '--use_cuda' doesn't allow an argument"))
    {
        (NoGpuMemory::CudaLeftOut, l)
    } else if let Some(l) = said("unsupported memory type") {
        let cause = if dmabuf {
            NoGpuMemory::DmabufLeftOut
        } else {
            NoGpuMemory::CudaLeftOut
        };
        (cause, l)
    } else if let Some(l) = said("couldn't allocate mr")
        && !dmabuf
        && node.is_some_and(|p| p != MemoryPath::PeerMemory)
    {
        (NoGpuMemory::PeerMemoryAbsent, l)
    } else {
        return None;
    };
    Some(cause)
}

/// A rail whose perftest could not use GPU memory.
struct Unbuilt {
    port: String,
    cause: NoGpuMemory,
    said: String,
    library_path: Option<String>,
}

/// The setup finding for the rails that could not use GPU memory: one line per cause with the
/// ports it came from, evidence per port, and the fixes.
fn setup_finding(unbuilt: &[Unbuilt]) -> (String, Vec<Evidence>, String) {
    let mut by_cause: Vec<(&Unbuilt, Vec<&str>)> = Vec::new();
    for u in unbuilt {
        match by_cause
            .iter_mut()
            .find(|(first, _)| first.cause == u.cause)
        {
            Some((_, ports)) => ports.push(&u.port),
            None => by_cause.push((u, vec![&u.port])),
        }
    }
    let text: Vec<String> = by_cause
        .iter()
        .map(|(u, ports)| format!("{} (`{}` on {})", u.cause.cause(), u.said, ports.join(", ")))
        .collect();
    let evidence = unbuilt
        .iter()
        .map(
            |Unbuilt {
                 port, cause, said, ..
             }| {
                Evidence::new(format!("{BINARY} on {port}"), said).expected(match cause {
                    NoGpuMemory::CudaLeftOut => "a perftest built with CUDA",
                    NoGpuMemory::DmabufLeftOut => "a perftest and gpu with dma-buf support",
                    NoGpuMemory::LibcudaNotOpened | NoGpuMemory::LibcudaNotLoaded => {
                        "perftest loads the host driver's libcuda"
                    }
                    NoGpuMemory::PeerMemoryAbsent => "nvidia_peermem loaded, or --use_cuda_dmabuf",
                })
            },
        )
        .collect();
    (
        text.join("; "),
        evidence,
        by_cause
            .iter()
            .map(|(u, _)| u.cause.fix(u.library_path.as_deref()))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

#[cfg(test)]
mod tests {
    use super::overview;

    #[test]
    fn each_range_covers_the_ports_judged_against_one_yardstick() {
        // Compute rails against the profile's floor, a storage NIC against its own rate: one
        // range of both would read as a rail at 190 Gb/s.
        let both = overview(&[391.1, 390.8], &[190.2], Some((380.0, "hgx-h100")));
        assert_eq!(
            both,
            "390.8-391.1 Gb/s on 2 compute rail port(s) (hgx-h100 floor 380 Gb/s), 190.2 Gb/s on 1 other hca port(s) (floor 90 % of each port's rate)"
        );
        let rails = overview(&[391.1, 390.8], &[], Some((380.0, "hgx-h100")));
        assert!(!rails.contains("each port's rate"), "{rails}");
        let no_profile = overview(&[], &[190.2, 391.0], None);
        assert!(
            no_profile.starts_with("190.2-391.0 Gb/s on 2 hca port(s)"),
            "{no_profile}"
        );
    }

    use super::{MemoryPath, NoGpuMemory, no_gpu_memory};
    use crate::answers::gpudirect::{GdrMeta, GdrRun};

    fn run(said: &str, dmabuf: bool) -> GdrRun {
        let mut command = vec![
            "/opt/perftest/bin/ib_write_bw".to_string(),
            "--use_cuda=0".into(),
        ];
        if dmabuf {
            command.push("--use_cuda_dmabuf".into());
        }
        GdrRun {
            device: "mlx5_0".into(),
            port: 1,
            meta: Some(GdrMeta {
                command,
                ..Default::default()
            }),
            output: crate::answers::perftest::parse(said),
            origin: "mlx5_0.log".into(),
            transcript: None,
        }
    }

    /// Each way perftest says it cannot use GPU memory, from its real words (tests/data/
    /// perftest/: Debian's build, perftest#346) and its sources' (cuda_loader.c,
    /// cuda_memory.c, perftest_parameters.c, glibc's loader).
    #[test]
    fn every_way_perftest_cannot_use_gpu_memory_is_told_apart() {
        let cause = |said: &str, dmabuf: bool, node: Option<MemoryPath>| {
            no_gpu_memory(&run(said, dmabuf), node).map(|(c, _)| c)
        };
        let debian = include_str!("../../../tests/data/perftest/debian-4.5-0.17-use-cuda.stderr");
        let mr = include_str!("../../../tests/data/perftest/perftest-346-cuda-mr-error-14.txt");
        let peer = Some(MemoryPath::PeerMemory);
        assert_eq!(cause(debian, false, peer), Some(NoGpuMemory::CudaLeftOut));
        assert_eq!(
            cause(" Unsupported memory type\n", false, peer),
            Some(NoGpuMemory::CudaLeftOut)
        );
        assert_eq!(
            cause(" Unsupported memory type\n", true, peer),
            Some(NoGpuMemory::DmabufLeftOut)
        );
        assert_eq!(
            cause("DMA-BUF is not supported on this GPU\n", true, peer),
            Some(NoGpuMemory::DmabufLeftOut)
        );
        assert_eq!(
            cause(
                "dlerror: libcuda.so: cannot open shared object file: No such file or directory\nFailed to load CUDA library dynamically\n",
                false,
                peer
            ),
            Some(NoGpuMemory::LibcudaNotOpened)
        );
        assert_eq!(
            cause(
                "/opt/perftest/bin/ib_write_bw: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory\n",
                false,
                peer
            ),
            Some(NoGpuMemory::LibcudaNotLoaded)
        );
        // Couldn't allocate MR: the setup's only without a peer-memory client and without
        // dma-buf asked; with nvidia_peermem loaded it is the rail's (judged as a failure).
        assert_eq!(
            cause(mr, false, Some(MemoryPath::None)),
            Some(NoGpuMemory::PeerMemoryAbsent)
        );
        assert_eq!(
            cause(mr, false, Some(MemoryPath::DmaBuf)),
            Some(NoGpuMemory::PeerMemoryAbsent)
        );
        assert_eq!(cause(mr, false, peer), None);
        assert_eq!(cause(mr, true, Some(MemoryPath::DmaBuf)), None);
        assert_eq!(
            cause(" Couldn't connect to localhost:18615\n", false, None),
            None
        );
    }
}
