//! `gpudoctor record`: capture a live node into a replayable fixture — exactly the files the
//! checks read (under the same root-relative paths, symlinks kept as relative links, the
//! directories they need to resolve) and the probe answers (NVML, the NVIDIA lines of the kernel
//! log) — nothing else. Then replay the capture and store its report beside it.
//!
//! How it knows what the checks read: the host source runs with a [`Trace`] that the rooted
//! reader fills with every path component it visits and every byte it reads, so each new layer
//! is captured without touching this module. Redaction (on by default) is `redact.rs`.
//!
//! Where it writes: `out.rs` (a temporary sibling of `--out`, renamed into place when complete,
//! never through a symlink, `--force` only over an earlier capture). Reading a packed capture
//! back: `unpack.rs` (bounded).
//!
//! Re-recording: when `--root` is itself a capture (a directory, or a `.tar.gz` the caller
//! unpacked), the walk replays it and the probe answers are the capture's own (NVML,
//! pod-resources, environment, kernel log, NCCL logs with their run records, perftest outputs,
//! state), carried over unless `--kernel-log`/`--nccl-log`/`--perftest-log`/`--state-dir` replace
//! them, as `check` would judge it; redaction is
//! applied again, and the manifest says it was re-recorded and from what.

mod changes;
mod kmsg;
mod out;
mod recording;
mod redaction;
mod tree;
use recording::RecordingSource;
pub mod unpack;

pub use kmsg::nvidia_kernel_lines;

pub use out::is_packed;
pub use unpack::{UnpackError, UnpackLimits, Unpacked, unpack};

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::RwLockReadGuard;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use serde_json::json;
use thiserror::Error;

use crate::answers::nccl::NcclProbe;
use crate::engine::{self, RunOptions};
use crate::facts::node;
use crate::process::signals::{self, Interrupted};
use crate::redact::Redactor;
use crate::report::Report;
use crate::source::nccl::NCCL_DIR;
use crate::source::rooted::Trace;
use crate::source::{
    self, CAPTURE_DIR, DEV_KMSG, ENV_JSON, HostSource, KMSG_TXT, MANIFEST, NVML_JSON,
    POD_RESOURCES_JSON, ReplaySource, RootedFs, Source, SourceOptions,
};

/// Where the replayed report of a capture is stored.
pub const REPORT_JSON: &str = ".gpudoctor/report.json";

/// Capture format written into `manifest.json`.
pub const FORMAT_VERSION: u32 = source::CAPTURE_FORMAT_VERSION;

#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The live node's root (`/`, or a host mount), or a capture directory to re-record.
    pub root: PathBuf,
    /// `--root` as the user gave it, when it differs from `root` (a `.tar.gz` unpacked into a
    /// temporary directory): what the manifest says the capture was re-recorded from.
    pub root_given: Option<PathBuf>,
    /// A directory, or a file ending in `.tar.gz` / `.tgz`.
    pub out: PathBuf,
    pub redact: bool,
    /// `--redact-hostname-anyway`: replace a host name redaction would refuse (shorter than 4
    /// characters, a common word), accepting that equal words elsewhere are replaced too.
    pub redact_hostname_anyway: bool,
    /// Replace an earlier capture at `out` (never anything else).
    pub force: bool,
    pub source: SourceOptions,
    /// The command line, for the manifest.
    pub command_line: Vec<String>,
    /// `--sample SECS`: read the counters twice and keep the first reading in the capture.
    pub sample: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct RecordSummary {
    pub out: PathBuf,
    pub files: usize,
    pub links: usize,
    pub dirs: usize,
    pub bytes: u64,
    pub unreadable: usize,
    pub redacted: BTreeMap<&'static str, usize>,
    /// What redaction kept or changed on purpose (a refused host name, a re-encoded checkpoint
    /// answer), as the manifest's `redaction.notes` says it.
    pub redaction_notes: Vec<String>,
    /// The replayed capture's report.
    pub report: Report,
    /// `--root` was a capture: its recorded answers were carried over.
    pub rerecorded: bool,
    /// Why the capture may not be one view of the node (the manifest's `node_changed`): it
    /// changed while it was walked (`changes.rs`), or the capture re-recorded said so.
    pub node_changed: Option<String>,
}

/// Why a record did not produce a capture. Every variant but [`RecordError::Io`] is the
/// user's to fix (exit 2); in every case nothing is left at `--out` or beside it.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("--root {0} is not a directory")]
    RootNotDirectory(PathBuf),
    #[error(
        "--root holds {CAPTURE_DIR}/ but is not a complete capture: {0}; re-record from the node, or remove {CAPTURE_DIR}/ to record the directory as a live root"
    )]
    RootNotACapture(String),
    #[error("--out {0} is an earlier capture; pass --force to replace it")]
    OutputExists(PathBuf),
    #[error("--out {}: {why}", path.display())]
    OutputNotACapture { path: PathBuf, why: String },
    #[error("--out {0} would overwrite the root being recorded; choose another path")]
    OutputIsRoot(PathBuf),
    #[error("cannot write the capture at --out {}: {source}; nothing was written", path.display())]
    Output { path: PathBuf, source: io::Error },
    #[error(
        "--out {0} changed while recording (another record, or something created there); nothing was written, the other is left as it is"
    )]
    OutputChanged(PathBuf),
    #[error(
        "{0}; nothing was written (a capture without the run asked for would replay as \"not requested\"): fix it, or record without --nccl/--nccl-quick/--nccl-log"
    )]
    NcclNotHad(String),
    #[error("{0}")]
    Interrupted(#[from] Interrupted),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl RecordError {
    /// A usage error (exit 2): said once, nothing left behind.
    pub fn is_usage(&self) -> bool {
        !matches!(self, RecordError::Io { .. })
    }
}

/// A write into the capture being built: a failure is the output's (full, read-only).
fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Output {
        path: path.to_path_buf(),
        source,
    }
}

/// Held while writing one entry of the capture: a signal stops further writes before the
/// temporary tree is removed (process/signals.rs).
fn hold() -> Result<RwLockReadGuard<'static, bool>, RecordError> {
    Ok(signals::hold_writes()?)
}

pub fn record(options: &RecordOptions) -> Result<RecordSummary, RecordError> {
    let mut tree = None;
    record_into(options, &mut tree).map_err(|err| match (err, tree) {
        // A write into the temporary capture failed: say it about --out, where it was asked.
        (RecordError::Output { path, source }, Some(tree)) if path.starts_with(&tree) => {
            let inner = path
                .strip_prefix(&tree)
                .unwrap_or(&path)
                .display()
                .to_string();
            RecordError::Output {
                path: options.out.clone(),
                source: io::Error::new(source.kind(), format!("{source} (writing {inner})")),
            }
        }
        (err, _) => err,
    })
}

fn record_into(
    options: &RecordOptions,
    tree: &mut Option<PathBuf>,
) -> Result<RecordSummary, RecordError> {
    if !options.root.is_dir() {
        return Err(RecordError::RootNotDirectory(options.root.clone()));
    }
    out::check_output(options)?;
    // Before the run: --out is looked at and its temporary sibling created, so that an
    // unwritable --out is said now (out.rs).
    let output = out::Output::prepare(&options.out, options.force)?;
    *tree = Some(output.tree().to_path_buf());

    // 1. Run every layer against the node, tracing what the checks read: the live host, or the
    // capture being re-recorded, replayed with the probe options `check` would honour. A live
    // --sample window's first counter reading is taken before, untraced: the capture's files are
    // the second (main.rs refuses --sample for a capture, which carries its own window over).
    let baseline = options
        .sample
        .map(|secs| crate::sample::first_reading(&options.root, &options.source, secs));
    let trace = Arc::new(Mutex::new(Trace::default()));
    let earlier = rerecorded_manifest(&options.root)?;
    let inner: Box<dyn Source> = if earlier.is_some() {
        Box::new(
            ReplaySource::open(&options.root)
                .map_err(|err| RecordError::RootNotACapture(err.why))?
                .with_kernel_log(
                    options.source.kernel_log.clone(),
                    options.source.probe_timeout,
                )
                .with_nccl_logs(options.source.nccl.logs.clone())
                // Every input `check` would take with a capture, as `source::open` gives it.
                .with_perftest_logs(
                    options.source.perftest_logs.clone(),
                    options.source.probe_timeout,
                )
                .with_state_dir(options.source.state_dir.clone())
                .with_trace(trace.clone()),
        )
    } else {
        Box::new(HostSource::new(&options.root, options.source.clone()).with_trace(trace.clone()))
    };
    // The node as it is before the walk, to tell whether it changed during it (changes.rs).
    let before = changes::census(inner.fs().root(), inner.fs());
    let recording = RecordingSource {
        inner,
        nvml: OnceLock::new(),
        kernel_log: OnceLock::new(),
        pod_resources: OnceLock::new(),
        env_vars: OnceLock::new(),
        nccl: OnceLock::new(),
        baseline,
        fs_stats: std::sync::Mutex::default(),
        cuda: OnceLock::new(),
        gpudirect: OnceLock::new(),
    };
    let _live = engine::run(
        &recording,
        &RunOptions {
            keep_going: true,
            ..RunOptions::default()
        },
    );
    // Asked means required: an NCCL run or log asked for that could not be had leaves no
    // capture, rather than one that replays as if nothing had been asked.
    match recording.nccl() {
        NcclProbe::BinaryMissing { binary, searched } => {
            return Err(RecordError::NcclNotHad(format!(
                "--nccl asked for a run, but {binary} was not found in {}",
                searched.join(", ")
            )));
        }
        NcclProbe::Unavailable {
            origin,
            message,
            requested: true,
        } => {
            return Err(RecordError::NcclNotHad(format!(
                "the nccl run or log asked for could not be run or read: {origin}: {message}"
            )));
        }
        _ => {}
    }
    let identity = node::gather(&recording);
    let nvml = recording.nvml();
    let kernel_log = recording.kernel_log();
    // What reading it repaired or skipped: kept in the manifest, so the replay says it too
    // (kmsg.txt holds the repaired text).
    let kernel_log_notes = recording.kernel_log_notes();
    let trace = trace.lock().map(|t| t.clone()).unwrap_or_default();

    // 2. What to redact: values known from the facts, plus shapes found in any text.
    let mut redactor = if options.redact {
        redaction::plan(&redaction::Known {
            hostname: identity.hostname.as_deref(),
            anyway: options.redact_hostname_anyway,
            nvml: &nvml,
            trace: &trace,
            nccl: &recording.nccl(),
            pods: &recording.pod_resources(),
            kernel_log: &kernel_log,
        })
    } else {
        Redactor::new()
    };

    // 3. Write the tree into the temporary sibling.
    let capture: PathBuf = output.tree().to_path_buf();
    // Entries only listed are looked at where the source read: for an overlay fixture, its
    // composed tree with its grafts (source/overlay.rs), so the capture is complete. Untraced:
    // this look is not part of what the checks read.
    let read_fs = RootedFs::new(recording.inner.fs().root()).with_grafts_of(recording.inner.fs());
    let tree::Materialized {
        mut counts,
        changed,
        vanished,
    } = tree::materialize(
        &trace,
        &read_fs,
        &capture,
        options.redact.then_some(&mut redactor),
    )?;
    // What the capture re-recorded said stays said; then what changed under this walk.
    let mut node_changed: Vec<String> = earlier
        .as_ref()
        .and_then(|m| m["node_changed"]["reason"].as_str())
        .map(str::to_string)
        .into_iter()
        .collect();
    node_changed.extend(changes::reasons(
        &before,
        &changes::census(recording.inner.fs().root(), recording.inner.fs()),
        &trace,
        &vanished,
        &changed.iter().map(|c| c.path.clone()).collect::<Vec<_>>(),
    ));

    // 4. Probe answers.
    let mut unreadable: Vec<serde_json::Value> = trace
        .failures
        .iter()
        .filter(|(path, _)| path.as_str() != DEV_KMSG && !excluded(path))
        .map(|(path, error)| json!({"path": path, "error": error}))
        .collect();
    // Entries left out because the node changed while it was walked (tree.rs).
    unreadable.extend(
        changed
            .iter()
            .map(|c| json!({"path": c.path, "error": c.to_string()})),
    );
    // What the node the capture came from could not give stays said.
    if let Some(earlier) = &earlier
        && let Some(list) = earlier["unreadable"].as_array()
    {
        for entry in list {
            if !unreadable.contains(entry) {
                unreadable.push(entry.clone());
            }
        }
    }
    if let Some(err) = &nvml.init_error {
        unreadable.push(
            json!({"path": "nvml", "error": format!("{}: {}", err.kind.name(), err.message)}),
        );
    }
    let nvml = redaction::process_names(nvml, options.redact);
    let nvml_text = serde_json::to_string_pretty(&nvml).unwrap_or_else(|_| "{}".into());
    write_text(
        &capture,
        NVML_JSON,
        &nvml_text,
        &mut counts,
        options.redact.then_some(&mut redactor),
    )?;
    match &kernel_log {
        Ok(Some((text, origin))) => {
            // A capture's own kernel log was filtered when it was recorded (or made by hand):
            // carried over whole. A live or --kernel-log one keeps only the NVIDIA lines.
            let kept = if earlier.is_some() && origin == KMSG_TXT {
                text.clone()
            } else {
                nvidia_kernel_lines(text)
            };
            write_text(
                &capture,
                KMSG_TXT,
                &kept,
                &mut counts,
                options.redact.then_some(&mut redactor),
            )?;
        }
        Ok(None) => {}
        Err(err) => unreadable.push(json!({"path": err.path(), "error": err.to_string()})),
    }
    // The kubelet's answers (or why there were none), and the environment the in-Pod checks read.
    // Stored under the kubelet's usual socket path: a --kubelet-socket given at record time
    // means nothing where the capture is replayed.
    let mut pods = recording.pod_resources();
    pods.socket = crate::answers::pod_resources::POD_RESOURCES_SOCKET.to_string();
    // The kubelet says which strings are pod names: those go whatever they look like.
    if options.redact
        && let Some(crate::answers::pod_resources::RpcAnswer::Value(list)) = &mut pods.list
    {
        for pod in list {
            pod.name = redactor.pod_name(&pod.name);
        }
    }
    if let Some(err) = &pods.error {
        unreadable.push(json!({"path": pods.socket, "error": err.message}));
    }
    let pods_text = serde_json::to_string_pretty(&pods).unwrap_or_else(|_| "{}".into());
    write_text(
        &capture,
        POD_RESOURCES_JSON,
        &pods_text,
        &mut counts,
        options.redact.then_some(&mut redactor),
    )?;
    let env = recording.env_vars();
    if !env.is_empty() {
        let env_text = serde_json::to_string_pretty(&env).unwrap_or_else(|_| "{}".into());
        write_text(
            &capture,
            ENV_JSON,
            &env_text,
            &mut counts,
            options.redact.then_some(&mut redactor),
        )?;
    }
    // What statvfs said of the directories the disk checks looked at (answers/fs_stat.rs).
    let stats = recording
        .fs_stats
        .lock()
        .map(|kept| kept.clone())
        .unwrap_or_default();
    if !stats.is_empty() {
        let text = serde_json::to_string_pretty(&stats).unwrap_or_else(|_| "{}".into());
        write_text(
            &capture,
            crate::answers::fs_stat::STATVFS_JSON,
            &text,
            &mut counts,
            options.redact.then_some(&mut redactor),
        )?;
    }
    // The first reading of a --sample window, replayed as the baseline of the same window; a
    // re-recorded capture's window is carried over (a damaged one byte for byte, so the replay
    // still names it).
    let sample_text = match recording.baseline() {
        Ok(Some(b)) => Some(serde_json::to_string_pretty(&b).unwrap_or_else(|_| "{}".into())),
        Ok(None) => None,
        Err(_) => recording
            .fs()
            .read_to_string(crate::answers::baseline::SAMPLE_JSON)
            .ok(),
    };
    if let Some(text) = &sample_text {
        write_text(
            &capture,
            crate::answers::baseline::SAMPLE_JSON,
            text,
            &mut counts,
            options.redact.then_some(&mut redactor),
        )?;
    }
    // NCCL runs (`--nccl`, `--nccl-log`): the output as `.gpudoctor/nccl/<name>.log` and what
    // only the runner knew (command, exit, timeout) beside it as `<name>.json`.
    if let NcclProbe::Runs(runs) = recording.nccl() {
        let mut used = std::collections::BTreeSet::new();
        for run in &runs {
            let Some(text) = &run.transcript else {
                continue;
            };
            let mut name = run.name.clone();
            let mut n = 1;
            while !used.insert(name.clone()) {
                n += 1;
                name = format!("{}-{n}", run.name);
            }
            write_text(
                &capture,
                &format!("{NCCL_DIR}/{name}.log"),
                text,
                &mut counts,
                options.redact.then_some(&mut redactor),
            )?;
            if let Some(meta) = &run.meta {
                let meta_text = serde_json::to_string_pretty(meta).unwrap_or_else(|_| "{}".into());
                write_text(
                    &capture,
                    &format!("{NCCL_DIR}/{name}.json"),
                    &meta_text,
                    &mut counts,
                    options.redact.then_some(&mut redactor),
                )?;
            }
        }
    }

    // The active probes (`--cuda`, `--bandwidth`): what the CUDA helper found, and each
    // GPUDirect loopback's client and server output with the runner's record beside them.
    if let Some(crate::answers::cuda::CudaProbe::Ran(facts)) = recording.cuda.get() {
        let text = serde_json::to_string_pretty(facts).unwrap_or_else(|_| "{}".into());
        write_text(
            &capture,
            source::cuda::CUDA_JSON,
            &text,
            &mut counts,
            options.redact.then_some(&mut redactor),
        )?;
    }
    // The --state-dir history the walk judged driver.recurring_faults on, so a replay of the
    // capture judges it the same (read-only there, source/state_dir.rs).
    if let Some((_, _, Ok(history))) = recording.history() {
        let text = serde_json::to_string_pretty(&history).unwrap_or_else(|_| "{}".into());
        write_text(
            &capture,
            source::state_dir::IN_CAPTURE,
            &text,
            &mut counts,
            None,
        )?;
    }
    // ib_write_bw not found: where it was looked for, so that the replay skips (or fails, when
    // --perftest-dir was given) as the live run did.
    if let Some(crate::answers::gpudirect::GdrProbe::BinaryMissing { searched, asked }) =
        recording.gpudirect.get()
    {
        let not_found = source::gpudirect::NotFound {
            searched: searched.clone(),
            asked: *asked,
        };
        let text = serde_json::to_string_pretty(&not_found).unwrap_or_else(|_| "{}".into());
        write_text(
            &capture,
            source::gpudirect::NOT_FOUND_JSON,
            &text,
            &mut counts,
            options.redact.then_some(&mut redactor),
        )?;
    }
    // `--perftest-log` outputs (readable ones), GID lines masked: a replay of the capture
    // judges them again without the originals. An unreadable one stays in the report only.
    let mut taken = std::collections::BTreeSet::new();
    for (path, text) in recording.perftest_logs() {
        let Ok(text) = text else { continue };
        let name = source::perftest_log::capture_name(&path, &mut taken);
        write_text(
            &capture,
            &format!("{}/{name}", source::perftest_log::PERFTEST_DIR),
            &crate::answers::perftest::mask_gids(&text),
            &mut counts,
            options.redact.then_some(&mut redactor),
        )?;
    }
    if let Some(crate::answers::gpudirect::GdrProbe::Runs(runs)) = recording.gpudirect.get() {
        let dir = source::gpudirect::GPUDIRECT_DIR;
        for run in runs {
            // Device names are kernel names (`mlx5_0`); anything else is not a file name.
            let safe = run
                .device
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                && !run.device.starts_with('.');
            if !safe {
                continue;
            }
            let name = if run.port == 1 {
                run.device.clone()
            } else {
                format!("{}-port{}", run.device, run.port)
            };
            if let Some((client, server)) = &run.transcript {
                for (suffix, text) in [("log", client), ("server.log", server)] {
                    write_text(
                        &capture,
                        &format!("{dir}/{name}.{suffix}"),
                        &crate::answers::perftest::mask_gids(text),
                        &mut counts,
                        options.redact.then_some(&mut redactor),
                    )?;
                }
            }
            if let Some(meta) = &run.meta {
                let text = serde_json::to_string_pretty(meta).unwrap_or_else(|_| "{}".into());
                write_text(
                    &capture,
                    &format!("{dir}/{name}.json"),
                    &text,
                    &mut counts,
                    options.redact.then_some(&mut redactor),
                )?;
            }
        }
    }

    // 5. Manifest, then replay the capture and keep its report and verdict. The command line
    // (`--out /tmp/$(hostname)-gpudoctor.tar.gz`) and the error texts name the node too.
    let mut command_line = json!(options.command_line);
    let mut unreadable = serde_json::Value::Array(unreadable);
    if options.redact {
        redactor.redact_value(&mut command_line);
        redactor.redact_value(&mut unreadable);
    }
    let by = format!("gpudoctor {}", env!("CARGO_PKG_VERSION"));
    let (description, made) = match &earlier {
        None => (
            "recorded by gpudoctor record".to_string(),
            json!({"how": "recorded", "from": null, "edit": null, "by": by}),
        ),
        Some(earlier) => {
            let from = options
                .root_given
                .as_deref()
                .unwrap_or(&options.root)
                .display()
                .to_string();
            let mut from = json!(from);
            let mut original = json!({
                "made": earlier["made"],
                "time": earlier["time"],
                "description": earlier["description"],
            });
            if options.redact {
                redactor.redact_value(&mut from);
                redactor.redact_value(&mut original);
            }
            (
                "re-recorded by gpudoctor record from a capture (its recorded probe answers carried over)".to_string(),
                json!({"how": "re-recorded", "from": from, "edit": null, "by": by, "original": original}),
            )
        }
    };
    let mut node_changed =
        (!node_changed.is_empty()).then(|| json!({ "reason": node_changed.join("; ") }));
    if options.redact
        && let Some(value) = &mut node_changed
    {
        redactor.redact_value(value);
    }
    let mut manifest = json!({
        "format_version": FORMAT_VERSION,
        "node": identity.hostname.as_deref().map(|h| if options.redact { redactor.redact(h) } else { h.to_string() }),
        "description": description,
        "made": made,
        "gpudoctor_version": env!("CARGO_PKG_VERSION"),
        "time": rfc3339(SystemTime::now()),
        "kernel": identity.kernel,
        "driver": nvml.driver_version,
        "command_line": command_line,
        "unreadable": unreadable,
        "redaction": {
            "enabled": options.redact,
            "replaced": if options.redact { json!(redactor.counts()) } else { json!({}) },
            "notes": redactor.notes(),
        },
    });
    if let Some(value) = &node_changed {
        // Said before the replay below, which says it on `driver.gpu_on_pci`.
        manifest["node_changed"] = value.clone();
    }
    if !kernel_log_notes.is_empty() {
        manifest["kernel_log"] = json!({ "notes": kernel_log_notes });
    }
    let manifest_path = capture.join(MANIFEST);
    write_json(&manifest_path, &manifest)?;
    let mut replayed = replay(&capture)?;
    // Replayed in the temporary sibling; the capture will be at --out.
    replayed.source.root = options.out.display().to_string();
    manifest["expect"] = json!({
        "exit_code": replayed.exit_code,
        "first_failing_layer": replayed.first_failure.as_ref().map(|f| f.layer.id()),
        "codes": replayed.findings().map(|(_, c)| c.code.clone()).collect::<std::collections::BTreeSet<_>>(),
    });
    // The replayed report names the capture's own path (`source.root`), often after the node.
    let mut report_value = serde_json::to_value(&replayed).unwrap_or_default();
    if options.redact {
        redactor.redact_value(&mut report_value);
        manifest["redaction"]["replaced"] = json!(redactor.counts());
        manifest["redaction"]["notes"] = json!(redactor.notes());
    }
    write_json(&capture.join(REPORT_JSON), &report_value)?;
    // The manifest last: it is what makes the tree a capture.
    write_json(&manifest_path, &manifest)?;
    output.publish()?;
    Ok(RecordSummary {
        out: options.out.clone(),
        files: counts.files,
        links: counts.links,
        dirs: counts.dirs,
        bytes: counts.bytes,
        unreadable: manifest["unreadable"].as_array().map_or(0, Vec::len),
        redacted: redactor.counts(),
        redaction_notes: redactor.notes(),
        report: replayed,
        rerecorded: earlier.is_some(),
        node_changed: node_changed.and_then(|v| v["reason"].as_str().map(str::to_string)),
    })
}

/// The manifest of the capture at `root`, when `root` is one (it holds `.gpudoctor/`): then
/// `record` re-records it. A root holding `.gpudoctor/` that is not a complete capture is
/// refused, as `check` refuses it, never recorded as a live node.
fn rerecorded_manifest(root: &Path) -> Result<Option<serde_json::Value>, RecordError> {
    let fs = RootedFs::new(root);
    if let Err(err) = fs.entry_kind(CAPTURE_DIR)
        && err.is_missing()
    {
        return Ok(None);
    }
    source::capture_manifest(&fs)
        .map(Some)
        .map_err(RecordError::RootNotACapture)
}

/// Replay a capture directory with default options, every layer.
fn replay(capture: &Path) -> Result<Report, RecordError> {
    let source =
        source::open(capture, SourceOptions::default()).map_err(|err| RecordError::Io {
            path: capture.to_path_buf(),
            source: io::Error::other(err.to_string()),
        })?;
    Ok(engine::run(
        source.as_ref(),
        &RunOptions {
            keep_going: false,
            ..RunOptions::default()
        },
    ))
}

/// Paths the trace may visit that must not become part of a capture.
fn excluded(path: &str) -> bool {
    path == DEV_KMSG || path == CAPTURE_DIR || path.starts_with(".gpudoctor/")
}

fn write_text(
    capture: &Path,
    rel: &str,
    text: &str,
    counts: &mut tree::Counts,
    redactor: Option<&mut Redactor>,
) -> Result<(), RecordError> {
    let text = match redactor {
        Some(r) => r.redact(text),
        None => text.to_string(),
    };
    let target = capture.join(rel);
    let _writing = hold()?;
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    fs::write(&target, text.as_bytes()).map_err(io_err(&target))?;
    counts.files += 1;
    counts.bytes += text.len() as u64;
    Ok(())
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), RecordError> {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    let _writing = hold()?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    fs::write(path, text).map_err(io_err(path))
}

/// Pack a capture directory into a `.tar.gz` (written to `file`) whose entries are
/// root-relative.
fn pack(capture: &Path, file: &mut fs::File) -> io::Result<()> {
    let _writing = signals::hold_writes().map_err(io::Error::other)?;
    let encoder = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut builder = tar::Builder::new(encoder);
    // Store links as links; never follow them while packing.
    builder.follow_symlinks(false);
    builder.append_dir_all(".", capture)?;
    let encoder = builder.into_inner()?;
    encoder.finish()?;
    Ok(())
}

/// Kept for callers of `record::rfc3339`; the helper lives in [`crate::time`] now.
pub use crate::time::rfc3339;
