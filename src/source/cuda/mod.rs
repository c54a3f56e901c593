//! The CUDA probe (`--cuda`, `--bandwidth`): does CUDA work on every GPU NVML lists, and how
//! fast do host↔GPU and GPU↔GPU copies go. Live, it runs a helper process — gpudoctor itself,
//! `gpudoctor __cuda-probe --request JSON` (`worker.rs`) — and folds the events it prints into
//! [`CudaFacts`]; replay reads `.gpudoctor/cuda.json`. Nothing here judges.
//!
//! Why a process and not a thread: a `cuInit` or a context creation that hangs in the driver (a
//! wedged GSP, a GPU falling off the bus) cannot be interrupted in a thread, and a crash inside
//! the driver library would take gpudoctor with it. The helper is a
//! [`Group`](crate::process::Group): when it prints nothing for `--cuda-timeout` seconds the
//! whole group is stopped (SIGTERM, grace, SIGKILL) and the step it had announced is recorded as
//! timed out. A stall on one GPU restarts the helper without that GPU (at most
//! [`MAX_RESTARTS`] times), so one wedged GPU does not hide the others; a stall in `cuInit` or
//! between GPUs (a peer copy) ends the probe with what it had. Worst case: about
//! `(MAX_RESTARTS + 1) × (timeout + work)`.
//!
//! The helper inherits gpudoctor's environment: `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`
//! are left as the caller set them (they are what a workload started the same way would see) and
//! recorded, so a check can say when they hide GPUs. GPUs are joined to NVML and sysfs by PCI bus
//! id, never by ordinal.

mod ffi;
pub mod numa;
mod pattern;
pub mod worker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::RootedFs;
use super::child::{self, Stream, Tail};
use crate::answers::cuda::{CudaFacts, Event, ProbeRun, Stall, parse_event, step};
use crate::answers::cuda::{CudaPlan, CudaProbe, NOT_REQUESTED, PlacementPlan};
use crate::process::Killed;

/// Where a capture keeps the probe's answer.
pub const CUDA_JSON: &str = ".gpudoctor/cuda.json";
/// The hidden subcommand that runs [`worker::run`].
pub const HELPER_COMMAND: &str = "__cuda-probe";
/// Default longest silence of the helper: a step that takes longer is a hang. `cuInit` on eight
/// GPUs without persistence mode takes seconds (reference/gpu-health.md §1), one bandwidth step
/// (six 256 MiB copies) well under one even at PCIe Gen3 x4.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// GPUs whose attach `cuInit` may take one more step timeout for: without persistence mode it
/// attaches every GPU one after another (`nvidia-smi` ~30 s on 8×A100, Azure aks-gpu#105;
/// reference/gpu-health.md §1), so an 8-GPU node gets twice the default 30 s.
pub const INIT_GPUS_PER_TIMEOUT: u32 = 8;
/// Restarts after a stall on one GPU.
pub const MAX_RESTARTS: usize = 3;
/// Bytes of the round trip (`--cuda`).
pub const ROUND_TRIP_BYTES: u64 = 1 << 20;
/// Bytes per bandwidth copy: large enough that the per-call overhead (~10 µs) is under 0.2 % of
/// a copy even at Gen5 x16 (256 MiB / 53 GB/s ≈ 5 ms).
pub const COPY_BYTES: u64 = 256 << 20;
/// Timed copies per measurement (after one warm-up); the median is kept.
pub const ITERATIONS: u32 = 5;
/// The `CUDA_*` variables recorded with the result.
pub const CUDA_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MPS_PIPE_DIRECTORY",
];
/// `check` options for the CUDA probe.
#[derive(Debug, Clone)]
pub struct CudaOptions {
    /// `--cuda`: the round trip on every GPU.
    pub run: bool,
    /// `--bandwidth`: host↔GPU and peer copies too (implies `run`).
    pub bandwidth: bool,
    /// `--cuda-lib`: load this library instead of `libcuda.so.1`.
    pub library: Option<PathBuf>,
    /// The gpudoctor binary to run as the helper (default: this process's own executable).
    pub helper: Option<PathBuf>,
    /// `--cuda-timeout`: longest silence of the helper.
    pub step_timeout: Duration,
    pub copy_bytes: u64,
    pub iterations: u32,
    /// Print progress lines on stderr.
    pub progress: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            run: false,
            bandwidth: false,
            library: None,
            helper: None,
            step_timeout: DEFAULT_STEP_TIMEOUT,
            copy_bytes: COPY_BYTES,
            iterations: ITERATIONS,
            progress: true,
        }
    }
}

impl CudaOptions {
    pub fn requested(&self) -> bool {
        self.run || self.bandwidth
    }
}

/// What the parent asks the helper (`--request JSON`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The library: a path or soname for the loader, or, with [`Request::root`], a path
    /// relative to that root that the helper opens confined (`host_lib::open_under_root`).
    pub library: String,
    /// The root the library was found under (`--root`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// How messages name the library (`/host/usr/lib64/libcuda.so.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<String>,
    #[serde(default)]
    pub bandwidth: bool,
    #[serde(default)]
    pub round_trip_bytes: u64,
    #[serde(default)]
    pub copy_bytes: u64,
    #[serde(default)]
    pub iterations: u32,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub placements: BTreeMap<String, Vec<PlacementPlan>>,
}

/// The helper's entry point (`main.rs`): parse the request, run, print events on stdout.
pub fn helper_main(request_json: &str) -> i32 {
    use std::io::Write as _;
    let request: Request = match serde_json::from_str(request_json) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpudoctor {HELPER_COMMAND}: bad request: {e}");
            return 2;
        }
    };
    let emit = |event: Event| {
        if let Ok(line) = serde_json::to_string(&event) {
            let mut out = std::io::stdout().lock();
            // A parent that went away: nothing to tell anyone.
            let _ = writeln!(out, "{line}").and_then(|_| out.flush());
        }
    };
    worker::run(&request, &emit)
}

/// Replay: `.gpudoctor/cuda.json`.
pub fn read_capture(fs: &RootedFs) -> CudaProbe {
    match fs.read_to_string(CUDA_JSON) {
        Ok(text) => match crate::answers::cuda::parse_cuda_json(&text) {
            Ok(facts) => CudaProbe::Ran(Box::new(facts)),
            Err(e) => CudaProbe::Unavailable {
                origin: CUDA_JSON.to_string(),
                message: format!("does not parse: {e}"),
            },
        },
        Err(err) if err.is_missing() => CudaProbe::NotRequested {
            why: NOT_REQUESTED.to_string(),
        },
        Err(err) => CudaProbe::Unavailable {
            origin: CUDA_JSON.to_string(),
            message: err.to_string(),
        },
    }
}

/// What one helper run gave.
struct Outcome {
    facts: CudaFacts,
    run: ProbeRun,
    /// The step it stalled in, with the GPU ordinals it named.
    stall: Option<(String, Option<u32>, Option<u32>)>,
}

fn say(progress: bool, text: &str) {
    if progress {
        eprintln!("gpudoctor: cuda: {}", crate::text::sanitize::text(text));
    }
}

/// A progress line for an event worth one.
fn progress_line(facts: &CudaFacts, event: &Event) -> Option<String> {
    match event {
        Event::LoadError { message } => Some(format!("cannot load the library: {message}")),
        Event::Init { code, .. } if *code != 0 => Some(format!(
            "cuInit failed: {} ({code})",
            crate::answers::cuda::code_name(*code)
        )),
        // Seconds here are the driver attaching GPUs (persistence mode off).
        Event::Init {
            micros: Some(us), ..
        } => Some(format!("cuInit took {:.2} s", *us as f64 / 1e6)),
        Event::Count { count, .. } => Some(format!("{count} device(s)")),
        Event::RoundTrip {
            ordinal,
            error,
            mismatched_bytes,
            micros,
            ..
        } => {
            let gpu = facts.bus_of(*ordinal);
            Some(match (error, mismatched_bytes) {
                (Some(e), _) => format!("gpu {gpu}: {}", e.describe()),
                (None, Some(n)) if *n > 0 => {
                    format!("gpu {gpu}: round trip returned {n} wrong byte(s)")
                }
                _ => format!(
                    "gpu {gpu}: context and round trip ok ({:.1} ms)",
                    *micros as f64 / 1000.0
                ),
            })
        }
        Event::Copy { ordinal, copy } => {
            let gpu = facts.bus_of(*ordinal);
            let figure = match (&copy.error, copy.gbps) {
                (Some(e), _) => e.describe(),
                (None, Some(g)) => format!("{g:.1} GB/s"),
                (None, None) => "no figure".into(),
            };
            Some(format!(
                "gpu {gpu}: {} {} {figure}",
                copy.direction.id(),
                copy.placement.id()
            ))
        }
        _ => None,
    }
}

/// How long the helper may stay silent: `timeout` in every step but loading and `cuInit`, which
/// attach the GPUs and get `timeout` more per [`INIT_GPUS_PER_TIMEOUT`] of `gpus`.
#[derive(Debug, Clone, Copy)]
struct Allowance {
    timeout: Duration,
    gpus: u32,
}

impl Allowance {
    fn init(&self) -> Duration {
        let per_gpu = self.timeout / INIT_GPUS_PER_TIMEOUT;
        self.timeout + per_gpu.saturating_mul(self.gpus)
    }

    /// The allowance for the step the helper announced last (`None`: none yet, loading).
    fn for_step(&self, step: Option<&str>) -> Duration {
        match step {
            None => self.init(),
            Some(s) if s == step::LOAD || s == step::INIT => self.init(),
            Some(_) => self.timeout,
        }
    }
}

/// One helper run, stopped after the step's allowance of silence.
fn run_helper(
    helper: &std::path::Path,
    request: &Request,
    allowance: Allowance,
    progress: bool,
) -> std::io::Result<Outcome> {
    let json = serde_json::to_string(request).map_err(std::io::Error::other)?;
    let argv = [
        helper.display().to_string(),
        HELPER_COMMAND.to_string(),
        "--request".to_string(),
        json,
    ];
    let mut command = Command::new(helper);
    command.args(&argv[1..]);
    // The helper shares gpudoctor's cgroup: an OOM kill of it shows in the count.
    let memory_before = super::own_memory::now();
    let mut facts = CudaFacts::default();
    let mut current: Option<(String, Option<u32>, Option<u32>)> = None;
    // When the helper last printed an event: both closures below read or set it, in turn.
    let last = std::cell::Cell::new(Instant::now());
    // The silence allowed in the step announced last.
    let limit = std::cell::Cell::new(allowance.for_step(None));
    let mut stderr = Tail::new(20);
    let mut unparsed = Vec::new();
    let mut peers_done = 0usize;
    let mut last_peer_note = Instant::now();
    let ended = {
        let mut on_line = |stream: Stream, line: &str| match stream {
            Stream::Stderr => stderr.push(line),
            Stream::Stdout => {
                last.set(Instant::now());
                match parse_event(line) {
                    Some(event) => {
                        if let Event::Step {
                            step,
                            ordinal,
                            peer,
                            ..
                        } = &event
                        {
                            current = Some((step.clone(), *ordinal, *peer));
                            limit.set(allowance.for_step(Some(step)));
                        }
                        if let Some(text) = progress_line(&facts, &event) {
                            say(progress, &text);
                        }
                        if matches!(event, Event::Peer { .. }) {
                            peers_done += 1;
                            if last_peer_note.elapsed() >= Duration::from_secs(5) {
                                last_peer_note = Instant::now();
                                say(progress, &format!("{peers_done} peer copies measured"));
                            }
                        }
                        facts.apply(event);
                    }
                    None if line.trim().is_empty() => {}
                    None => {
                        if unparsed.len() < 20 {
                            unparsed.push(line.chars().take(300).collect::<String>());
                        }
                    }
                }
            }
        };
        let mut stop = || last.get().elapsed() >= limit.get();
        child::run_lines(&mut command, &mut on_line, &mut stop)?
    };
    let stall = if ended.stopped { current.clone() } else { None };
    if let Some((step, ordinal, peer)) = &stall {
        facts.mark_stall(step, *ordinal, *peer);
    }
    let run = ProbeRun {
        command: vec![
            argv[0].clone(),
            argv[1].clone(),
            argv[2].clone(),
            "<request>".to_string(),
        ],
        exit: ended.exit,
        stalled: stall.as_ref().map(|(step, ordinal, peer)| Stall {
            step: step.clone(),
            bus_id: ordinal.map(|o| facts.bus_of(o)),
            peer: peer.map(|o| facts.bus_of(o)),
            after_ms: allowance.for_step(Some(step)).as_millis() as u64,
        }),
        elapsed_ms: ended.elapsed.as_millis() as u64,
        killed: ended.killed,
        stderr_tail: stderr.text(),
        unparsed,
        memory_limit_bytes: memory_before.limit_bytes,
        oom_killed: match (memory_before.oom_kills, super::own_memory::now().oom_kills) {
            (Some(before), Some(after)) => Some(after > before),
            _ => None,
        },
    };
    Ok(Outcome { facts, run, stall })
}

/// Which libcuda the helper loads (`HostSource::cuda` chooses, `host_lib.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaLibrary {
    /// `--cuda-lib PATH`, or the loader's search for `libcuda.so.1` (root `/`, or nothing found
    /// under the root: `shown` then says where gpudoctor looked first).
    Loader { name: String, shown: Option<String> },
    /// Found under `--root`: the helper opens it there itself, confined and checked again.
    UnderRoot {
        root: PathBuf,
        relative: String,
        shown: String,
    },
}

impl CudaLibrary {
    /// The directory that holds it, where it has one: `--cuda-lib PATH`'s, or the host driver's
    /// under the root. `None` for the loader's own search (root `/`, nothing under the root).
    /// perftest gets it first on its `LD_LIBRARY_PATH` (source/gpudirect.rs).
    pub fn directory(&self) -> Option<PathBuf> {
        match self {
            CudaLibrary::Loader { name, .. } if name.contains('/') => {
                Path::new(name).parent().map(Path::to_path_buf)
            }
            CudaLibrary::Loader { .. } => None,
            CudaLibrary::UnderRoot { root, relative, .. } => {
                root.join(relative).parent().map(Path::to_path_buf)
            }
        }
    }
}

/// Live: run the helper (again without a GPU it stalled on) and gather what it found.
pub fn probe_live(options: &CudaOptions, library: &CudaLibrary, plan: &CudaPlan) -> CudaProbe {
    if !options.requested() {
        return CudaProbe::NotRequested {
            why: NOT_REQUESTED.to_string(),
        };
    }
    let helper = match options
        .helper
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_exe)
    {
        Ok(h) => h,
        Err(e) => {
            return CudaProbe::Unavailable {
                origin: HELPER_COMMAND.to_string(),
                message: format!("cannot find gpudoctor's own executable: {e}"),
            };
        }
    };
    let (library, root, shown) = match library {
        CudaLibrary::Loader { name, shown } => (name.clone(), None, shown.clone()),
        CudaLibrary::UnderRoot {
            root,
            relative,
            shown,
        } => (
            relative.clone(),
            Some(root.display().to_string()),
            Some(shown.clone()),
        ),
    };
    let mut request = Request {
        library,
        root,
        shown,
        bandwidth: options.bandwidth,
        round_trip_bytes: ROUND_TRIP_BYTES,
        copy_bytes: options.copy_bytes.max(1),
        iterations: options.iterations.max(1),
        exclude: plan.exclude.clone(),
        placements: plan.placements.clone(),
    };
    let allowance = Allowance {
        timeout: options.step_timeout,
        gpus: plan.gpus,
    };
    say(
        options.progress,
        &format!(
            "probing with {} (step timeout {} s, {} s for cuInit on {} gpu(s){})",
            request.shown.as_deref().unwrap_or(&request.library),
            options.step_timeout.as_secs(),
            allowance.init().as_secs(),
            plan.gpus,
            if options.bandwidth {
                format!(
                    ", bandwidth: {} MiB x {} per copy",
                    request.copy_bytes >> 20,
                    request.iterations
                )
            } else {
                String::new()
            }
        ),
    );
    let mut runs = Vec::new();
    let mut stalled_devices = Vec::new();
    let mut latest: Option<CudaFacts> = None;
    for attempt in 0..=MAX_RESTARTS {
        let outcome = match run_helper(&helper, &request, allowance, options.progress) {
            Ok(o) => o,
            Err(e) => {
                return CudaProbe::Unavailable {
                    origin: helper.display().to_string(),
                    message: format!("could not start the cuda helper: {e}"),
                };
            }
        };
        say(
            options.progress,
            &format!(
                "helper {} after {:.1} s{}",
                crate::process::describe_exit(outcome.run.exit),
                outcome.run.elapsed_ms as f64 / 1000.0,
                match &outcome.run.stalled {
                    Some(s) => format!(
                        ", stopped: no answer for {} s in `{}`{}",
                        s.after_ms / 1000,
                        s.step,
                        s.bus_id
                            .as_ref()
                            .map(|b| format!(" on gpu {b}"))
                            .unwrap_or_default()
                    ),
                    None => String::new(),
                }
            ),
        );
        if !outcome.run.killed.is_empty() {
            let killed: Vec<String> = outcome.run.killed.iter().map(Killed::describe).collect();
            say(options.progress, &format!("killed {}", killed.join("; ")));
        }
        runs.push(outcome.run);
        let restart_on = match &outcome.stall {
            Some((s, Some(ordinal), None)) if s != step::LOAD => outcome
                .facts
                .devices
                .iter()
                .find(|d| d.ordinal == *ordinal)
                .and_then(|d| d.bus_id.clone()),
            _ => None,
        };
        let mut facts = outcome.facts;
        if let Some(bus) = restart_on
            && attempt < MAX_RESTARTS
        {
            if let Some(d) = facts
                .devices
                .iter()
                .find(|d| d.bus_id.as_deref() == Some(&bus))
            {
                stalled_devices.push(d.clone());
            }
            request.exclude.push(bus.clone());
            say(
                options.progress,
                &format!("restarting the helper without gpu {bus}"),
            );
            latest = Some(facts);
            continue;
        }
        // The last run's view, with the GPUs earlier runs stalled on.
        for d in stalled_devices.drain(..) {
            facts.devices.retain(|x| x.bus_id != d.bus_id);
            facts.devices.push(d);
        }
        latest = Some(facts);
        break;
    }
    let mut facts = latest.unwrap_or_default();
    facts.bandwidth = options.bandwidth;
    facts.excluded = request.exclude.clone();
    facts.env = CUDA_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    facts.runs = runs;
    facts.sort();
    CudaProbe::Ran(Box::new(facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_without_cuda_json_is_not_requested_and_a_bad_one_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootedFs::new(dir.path());
        assert!(matches!(read_capture(&fs), CudaProbe::NotRequested { .. }));
        std::fs::create_dir_all(dir.path().join(".gpudoctor")).unwrap();
        std::fs::write(dir.path().join(CUDA_JSON), "{not json").unwrap();
        assert!(matches!(
            read_capture(&fs),
            CudaProbe::Unavailable { ref origin, .. } if origin == CUDA_JSON
        ));
        std::fs::write(
            dir.path().join(CUDA_JSON),
            r#"{"bandwidth": true, "init": 0}"#,
        )
        .unwrap();
        let probe = read_capture(&fs);
        assert_eq!(probe.facts().unwrap().init, Some(0));
    }

    #[test]
    fn not_asked_runs_nothing() {
        let probe = probe_live(
            &CudaOptions::default(),
            &CudaLibrary::Loader {
                name: crate::answers::cuda::DEFAULT_LIBRARY.into(),
                shown: None,
            },
            &CudaPlan::default(),
        );
        assert!(matches!(probe, CudaProbe::NotRequested { .. }));
    }
}
