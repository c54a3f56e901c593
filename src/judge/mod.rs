//! `gpudoctor judge FILE…`: what people paste into a ticket — a kernel log, an NCCL log, a
//! perftest output, `nvidia-smi topo -m`, a kubelet, containerd, CRI-O or CDI config — judged
//! with no node behind it. Each file's kind is told from its content (`kind.rs`); it is judged by
//! the same checks `check` runs on that input, through a source that answers only with the file
//! (`source.rs`); the checks of every file make one report, in `check`'s schema, whose layers
//! with nothing pasted for them are `skip` ("needs the node"). Evidence names the file and, for
//! a line quoted from it, the line number (`lines.rs`).
//!
//! Must not: read anything of the machine it runs on (NVML, /dev/kmsg, the kubelet) — a
//! ticket's verdict is about the pasted files alone.

mod kind;
mod lines;
mod source;

use std::path::PathBuf;

pub use kind::{Kind, detect};

use crate::checks::{self, CheckDef};
use crate::engine::{self, RunOptions};
use crate::report::{
    CheckResult, LayerReport, NodeInfo, Report, SCHEMA_VERSION, SourceInfo, SourceKind, Status,
};
use source::{Answers, FilesSource};

/// One pasted file: the name it is shown by (its path, or `-` for standard input) and its text.
#[derive(Debug, Clone)]
pub struct Pasted {
    pub name: String,
    pub text: String,
}

/// Why a list of files cannot be judged (a usage error, exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unjudgeable(pub String);

/// The check codes that judge each kind, in `check`'s walk order (the checks themselves are
/// `check`'s: one registry).
fn codes(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::KernelLog => &[
            "driver.xid_events",
            "driver.recurring_faults",
            "nvlink.sxid_events",
            "rdma.nic_events",
            "rdma.peermem_events",
            "topology.aer_errors",
            "nccl.kernel_crashes",
        ],
        Kind::Nccl => &[
            "nccl.test_errors",
            "nccl.run_completed",
            "nccl.wrong_results",
            "nccl.socket_fallback",
            "nccl.gpudirect_rdma",
            "nccl.p2p_transport",
            "nccl.nvls",
            "nccl.bus_bandwidth",
            "nccl.bandwidth_collapse",
        ],
        Kind::Perftest => &["rdma.perftest_log"],
        Kind::SmiTopo => &[],
        Kind::KubeletConfig => &[
            "topology.kubelet_topology_manager",
            "topology.kubelet_managers",
        ],
        Kind::RuntimeConfig => &["toolkit.container_runtime"],
        Kind::CdiSpec => &[],
    }
}

/// The checks for `kind`: `check`'s own; for a topology matrix, the checks that judge
/// nvidia-smi's matrix under the topology and NVLink layers' codes; for a CDI spec, what the
/// spec alone shows under `toolkit.cdi_specs`.
fn registry(kind: Kind) -> Vec<CheckDef> {
    if kind == Kind::SmiTopo {
        return checks::topology::smi_matrix::checks();
    }
    if kind == Kind::CdiSpec {
        return checks::cdi_spec::checks();
    }
    let wanted = codes(kind);
    checks::registry()
        .into_iter()
        .filter(|c| wanted.contains(&c.code))
        .collect()
}

/// Where a pasted config goes in the private root, so the node's own readers find it where the
/// node keeps it (`facts/kubelet_locate.rs` KNOWN, `facts/toolkit.rs`, `facts/cdi.rs`).
fn config_path(kind: Kind, text: &str) -> Option<&'static str> {
    match kind {
        Kind::KubeletConfig => Some("var/lib/kubelet/config.yaml"),
        Kind::RuntimeConfig if text.lines().any(|l| l.trim_start().starts_with("[crio")) => {
            Some(crate::facts::toolkit::CRIO_CONFIG)
        }
        Kind::RuntimeConfig => Some("etc/containerd/config.toml"),
        Kind::CdiSpec if text.trim_start().starts_with('{') => Some("etc/cdi/pasted.json"),
        Kind::CdiSpec => Some("etc/cdi/pasted.yaml"),
        _ => None,
    }
}

/// Judge one file: its kind's checks, every layer walked.
fn judge_one(file: &Pasted, kind: Kind, strict: bool) -> Result<Report, Unjudgeable> {
    let dir = tempfile::Builder::new()
        .prefix("gpudoctor-judge-")
        .tempdir()
        .map_err(|e| Unjudgeable(format!("cannot make a private directory: {e}")))?;
    let mut answers = Answers::default();
    let mut origin_rel = None;
    match kind {
        Kind::KernelLog => answers.kernel_log = Some((file.text.clone(), file.name.clone())),
        Kind::Nccl => answers.nccl = Some(crate::source::nccl::read_text(&file.text, &file.name)),
        Kind::Perftest => {
            answers.perftest = vec![(PathBuf::from(&file.name), Ok(file.text.clone()))];
        }
        Kind::SmiTopo => answers.smi_topo = Some((file.text.clone(), file.name.clone())),
        _ => {
            if let Some(rel) = config_path(kind, &file.text) {
                let path = dir.path().join(rel);
                let placed = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&path, &file.text));
                placed.map_err(|e| Unjudgeable(format!("cannot place {}: {e}", file.name)))?;
                origin_rel = Some(rel);
            }
        }
    }
    let source = FilesSource::new(dir.path().to_path_buf(), answers);
    let options = RunOptions {
        keep_going: true,
        strict,
        ..RunOptions::default()
    };
    let mut report = engine::run_with(&source, &registry(kind), &options);
    for check in report.layers.iter_mut().flat_map(|l| l.checks.iter_mut()) {
        lines::locate(check, file, origin_rel);
        needs_node(check, &file.name);
    }
    for layer in &mut report.layers {
        if !layer.checks.is_empty() {
            layer.status = engine::summarize(&layer.checks);
        }
    }
    Ok(report)
}

/// A check that could not be evaluated for want of the node (its inputs are node files, not
/// the pasted one) is `skip`, saying so: the file cannot be blamed for the node's absence.
fn needs_node(check: &mut CheckResult, name: &str) {
    let about_file = check
        .evidence
        .iter()
        .any(|e| e.source == name || e.source.starts_with(&format!("{name}:")));
    if check.status == Status::Error && !about_file {
        check.status = Status::Skip;
        check.summary = format!("needs the node: {}", check.summary);
        check.hint = None;
        check.action = crate::report::Action::None;
    }
}

/// Judge every file into one report. A file whose kind is unknown makes the whole list a
/// usage error naming the kinds known (judging the rest would hide what was not read).
pub fn judge(files: &[Pasted], strict: bool) -> Result<Report, Unjudgeable> {
    let mut kinds = Vec::new();
    for file in files {
        match detect(&file.text) {
            Some(kind) => kinds.push(kind),
            None => {
                return Err(Unjudgeable(format!(
                    "{}: not a kind judge knows; it reads: {}",
                    file.name,
                    Kind::known()
                )));
            }
        }
    }
    let started = std::time::Instant::now();
    let mut reports = Vec::new();
    for (file, kind) in files.iter().zip(&kinds) {
        reports.push(judge_one(file, *kind, strict)?);
    }
    let read: Vec<String> = files
        .iter()
        .zip(&kinds)
        .map(|(f, k)| format!("{} ({k})", f.name))
        .collect();
    let mut layers = merge(reports);
    let (first_failure, exit_code) = engine::conclude(&mut layers, strict);
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        gpudoctor_version: env!("CARGO_PKG_VERSION").to_string(),
        source: SourceInfo {
            kind: SourceKind::Files,
            root: read.join(", "),
            captured_at: None,
        },
        node: NodeInfo::default(),
        profile: None,
        generated_at: Some(crate::time::rfc3339(std::time::SystemTime::now())),
        layers,
        first_failure,
        exit_code,
        duration_ms: started.elapsed().as_millis() as u64,
        facts: None,
    })
}

/// The layers of every file's report as one: each layer holds the checks every file ran in it,
/// in file order; a layer no file's kind reads is `skip`, needing the node.
fn merge(reports: Vec<Report>) -> Vec<LayerReport> {
    let mut merged: Vec<LayerReport> = crate::report::Layer::ALL
        .iter()
        .map(|&layer| LayerReport {
            id: layer,
            title: layer.title().to_string(),
            status: Status::Skip,
            reason: Some(NEEDS_NODE.to_string()),
            duration_ms: 0,
            checks: Vec::new(),
        })
        .collect();
    let mut reasons: Vec<Vec<String>> = vec![Vec::new(); merged.len()];
    for report in reports {
        for (i, layer) in report.layers.into_iter().enumerate() {
            let Some(into) = merged.get_mut(i) else {
                continue;
            };
            into.duration_ms += layer.duration_ms;
            if !layer.checks.is_empty() {
                if let Some(reason) = layer.reason {
                    reasons[i].push(reason);
                }
                into.checks.extend(layer.checks);
            }
        }
    }
    for (layer, reasons) in merged.iter_mut().zip(reasons) {
        if layer.checks.is_empty() {
            continue;
        }
        layer.status = engine::summarize(&layer.checks);
        layer.reason = (layer.status == Status::Skip).then(|| {
            let mut said: Vec<String> = Vec::new();
            for r in reasons {
                if !said.contains(&r) {
                    said.push(r);
                }
            }
            if said.is_empty() {
                "nothing in the pasted files to judge".to_string()
            } else {
                said.join("; ")
            }
        });
    }
    merged
}

/// Why a layer no pasted file speaks to was not judged.
pub const NEEDS_NODE: &str = "needs the node: none of the pasted files holds what this layer reads (run `gpudoctor check` on the node)";
