//! Missing is not absent (DESIGN.md "Report, statuses, exit codes"; issue 14). Per layer, a copy
//! of a healthy fixture loses each input the layer reads, one at a time — every file it reads or
//! looks at (a device node, a socket) and every directory it lists, found by a traced replay of
//! that layer alone, as tests/bad_input_corpus.rs finds them — and the layer is replayed without
//! it. An input several layers read is removed once, and every layer of the fixture is replayed
//! in that run ([`sweep`]; each layer judged alone gave the same findings for all 4 499
//! layer-input pairs when this was changed).
//!
//! What must hold: a removed input the kernel always provides (anything under `sys/` or `proc/`,
//! and the probe answers a capture records in `.gpudoctor/`) never turns a check `fail` or `warn`.
//! The check that needed it says it could not judge (`error`, naming the path) or judges without
//! it. A `fail` for absence stands only where absence is the fault ([`ABSENCE_IS_THE_FAULT`]):
//! a device node, a configuration file the toolkit or the kubelet writes, a kernel object (a
//! module, a device) that is not there — each listed with the checks that may fail and why.
//!
//! `GPUDOCTOR_MISSING_LAYER=rdma` runs one layer only.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::report::{Layer, Report, Status};
use gpudoctor::source::ReplaySource;
use gpudoctor::source::rooted::{Trace, Visited};

/// The healthy fixture whose inputs each layer loses: the H100 node for most layers; the layers
/// that skip there (no SR-IOV, no NCCL log) use the healthy fixture that has them.
fn fixture_for(layer: Layer) -> &'static str {
    match layer {
        Layer::Sriov => "h100-sriov-healthy",
        Layer::Nccl => "h100-nccl-healthy",
        _ => "hgx-h100-healthy",
    }
}

/// Where an input is, in a root-relative path.
#[derive(Debug, Clone, Copy)]
enum At {
    /// The path itself.
    Is(&'static str),
    /// A path ending so (`.../0000:dc:00.1/infiniband`).
    EndsWith(&'static str),
    /// A path starting so (`dev/nvidia`: every NVIDIA device node).
    StartsWith(&'static str),
}

/// Inputs whose absence is itself the fault, with the checks that may then fail and why.
/// Nothing under `sys/` or `proc/` that the kernel always provides is here, and no probe answer.
/// Everything else removed must give no `fail` and no `warn`.
const ABSENCE_IS_THE_FAULT: &[(At, &[&str], &str)] = &[
    (
        At::StartsWith("dev/nvidia"),
        &["driver.device_nodes"],
        "device nodes: every CUDA process opens them, the toolkit passes them into Pods (DESIGN.md: no device node is a fail)",
    ),
    (
        At::Is("usr/bin/nvidia-container-runtime"),
        &["toolkit.container_runtime"],
        "the binary the runtime's `nvidia` handler runs: without it every GPU Pod fails to start",
    ),
    (
        At::Is("dev/infiniband"),
        &["rdma.verbs"],
        "device nodes: without /dev/infiniband/uverbs* no process can open a verbs device",
    ),
    (
        At::Is("sys/class/infiniband"),
        &["rdma.devices"],
        "the class exists once the RDMA core registers a device: without it no ConnectX function has an RDMA device (mlx5_ib not loaded), the fault named",
    ),
    (
        At::EndsWith("/infiniband"),
        &["sriov.vf_binding"],
        "a VF's infiniband/ exists only when mlx5_ib bound it: without it the VF has no RDMA device, the fault named",
    ),
    (
        At::Is("etc/containerd/config.toml"),
        &["toolkit.container_runtime"],
        "a configuration file the NVIDIA toolkit writes: without it containerd runs on defaults, without the nvidia runtime",
    ),
    (
        At::Is("etc/cni/net.d"),
        &["sriov.multus"],
        "the CNI configuration Multus writes: without it pods cannot attach a secondary network",
    ),
    (
        At::StartsWith("etc/cni/net.d/"),
        &["sriov.multus"],
        "each CNI config: without Multus's the default network is not Multus; without the network Multus delegates to, pods get no primary interface",
    ),
    (
        At::StartsWith("dev/char"),
        &["toolkit.dev_char_links"],
        "the /dev/char links systemd resolves device rules through: a missing one is the fault (containers lose the GPU on daemon-reload)",
    ),
    (
        At::Is("var/lib/kubelet/device-plugins"),
        &["device_plugin.registered"],
        "the kubelet's registration directory: without it no device plugin can register",
    ),
];

fn allowed(path: &str, code: &str) -> bool {
    ABSENCE_IS_THE_FAULT.iter().any(|(at, codes, _)| {
        let here = match at {
            At::Is(p) => path == *p,
            At::EndsWith(p) => path.ends_with(p),
            At::StartsWith(p) => path.starts_with(p),
        };
        here && codes.contains(&code)
    })
}

/// The list above stays honest: every entry names a file or directory a healthy fixture has,
/// outside the kernel's always-present `sys/` attributes unless it is a kernel object itself.
#[test]
fn absence_is_the_fault_only_outside_kernel_attributes() {
    for (at, codes, why) in ABSENCE_IS_THE_FAULT {
        assert!(!codes.is_empty() && !why.is_empty(), "{at:?}");
        if let At::Is(path) = at {
            assert!(!path.starts_with("proc/"), "{path}: /proc is always there");
            assert!(
                ["hgx-h100-healthy", "h100-sriov-healthy"]
                    .iter()
                    .any(|f| common::repo().join("fixtures").join(f).join(path).exists()),
                "{path} is in no healthy fixture"
            );
        }
    }
}

fn run(root: &Path, layers: &[Layer], trace: Option<Arc<Mutex<Trace>>>) -> Report {
    let mut source = ReplaySource::new(root);
    if let Some(trace) = trace {
        source = source.with_trace(trace);
    }
    engine::run(
        &source,
        &RunOptions {
            keep_going: true,
            only: layers.to_vec(),
            ..RunOptions::default()
        },
    )
}

/// The files a replay of `layer` alone reads and the directories it lists, root-relative with
/// every link resolved; the manifest (what makes the tree a capture) is not an input of any
/// layer.
fn inputs(root: &Path, layer: Layer) -> Vec<String> {
    let trace = Arc::new(Mutex::new(Trace::default()));
    let _ = run(root, &[layer], Some(trace.clone()));
    let trace = trace.lock().unwrap();
    let mut all: BTreeSet<String> = trace.contents.keys().cloned().collect();
    all.extend(trace.listings.keys().filter(|k| !k.is_empty()).cloned());
    // Files looked at without being read (`exists`: device nodes, sockets, markers).
    all.extend(
        trace
            .visited
            .iter()
            .filter(|(_, kind)| matches!(kind, Visited::File | Visited::Special))
            .map(|(path, _)| path.clone()),
    );
    all.remove(".gpudoctor/manifest.json");
    all.remove(".gpudoctor");
    all.into_iter().collect()
}

/// (code, status, summary) of every `fail` or `warn` of the layer.
fn findings(report: &Report, layer: Layer) -> Vec<(String, Status, String)> {
    report
        .layer(layer)
        .map(|l| {
            l.checks
                .iter()
                .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
                .map(|c| (c.code.clone(), c.status, c.summary.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// One fixture's sweep, for every layer it stands in for: each layer's inputs (a traced replay
/// of that layer alone), the healthy replay, and the findings of every layer with each input
/// of any of them removed.
struct Sweep {
    layers: Vec<Layer>,
    inputs: BTreeMap<Layer, Vec<String>>,
    healthy: Report,
    without: BTreeMap<String, Report>,
}

/// The layers whose inputs are removed from `fixture`'s copy (`GPUDOCTOR_MISSING_LAYER` keeps
/// one).
fn layers_of(fixture: &str) -> Vec<Layer> {
    let only = std::env::var("GPUDOCTOR_MISSING_LAYER").ok();
    Layer::ALL
        .iter()
        .copied()
        .filter(|l| fixture_for(*l) == fixture)
        .filter(|l| only.as_deref().is_none_or(|o| o == l.id()))
        .collect()
}

/// A layer's checks judge the facts its own inputs give, whichever other layers run beside
/// it, so an input is removed once per fixture and every layer that reads it is judged in
/// that one run (`keep_going`): the layers of the H100 fixture read mostly the same PCI,
/// NVML and InfiniBand files, and removing each once per layer replayed the same tree four
/// times over (issue 41: the suite's three minutes).
fn sweep(fixture: &'static str) -> Arc<Sweep> {
    type Cell = Arc<OnceLock<Arc<Sweep>>>;
    static SWEEPS: Mutex<BTreeMap<&str, Cell>> = Mutex::new(BTreeMap::new());
    let cell = SWEEPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(fixture)
        .or_default()
        .clone();
    cell.get_or_init(|| Arc::new(sweep_now(fixture))).clone()
}

fn sweep_now(fixture: &str) -> Sweep {
    let layers = layers_of(fixture);
    let source = common::repo().join("fixtures").join(fixture);
    let scratch = common::tempdir().unwrap();
    let root = scratch.path().join("node");
    // Inputs are moved aside and back, never written: hard links to the fixture's files do.
    common::link_tree(&source, &root);
    let healthy = run(&root, &layers, None);
    let inputs: BTreeMap<Layer, Vec<String>> =
        layers.iter().map(|l| (*l, inputs(&root, *l))).collect();
    let every: Vec<&String> = inputs
        .values()
        .flatten()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Each thread removes its share of the inputs from a tree of its own.
    let workers = common::parallel::workers();
    let shares: Vec<Vec<&String>> = (0..workers)
        .map(|w| every.iter().skip(w).step_by(workers).copied().collect())
        .collect();
    let without = common::parallel::map(&shares, |share| {
        let scratch = common::tempdir().unwrap();
        let root = scratch.path().join("node");
        common::link_tree(&source, &root);
        let aside = scratch.path().join("aside");
        let mut reports = Vec::new();
        for input in share {
            let path = root.join(input);
            fs::rename(&path, &aside).unwrap();
            let report = run(&root, &layers, None);
            fs::rename(&aside, &path).unwrap();
            reports.push(((*input).clone(), report));
        }
        reports
    })
    .into_iter()
    .flatten()
    .collect();
    Sweep {
        layers,
        inputs,
        healthy,
        without,
    }
}

fn layer_loses_each_input(layer: Layer) -> Vec<String> {
    let sweep = sweep(fixture_for(layer));
    assert!(sweep.layers.contains(&layer));
    let healthy = findings(&sweep.healthy, layer);
    assert!(
        healthy.is_empty(),
        "{layer}: the healthy fixture has findings: {healthy:?}"
    );
    assert_ne!(
        sweep.healthy.layer(layer).map(|l| l.status),
        Some(Status::Skip),
        "{layer}: the layer must run on {}",
        fixture_for(layer)
    );
    let inputs = &sweep.inputs[&layer];
    assert!(!inputs.is_empty(), "{layer}: reads nothing?");
    let mut problems = Vec::new();
    for input in inputs {
        for (code, status, summary) in findings(&sweep.without[input], layer) {
            if !allowed(input, &code) {
                problems.push(format!(
                    "{layer}: without {input}: {code} {status:?}: {summary}"
                ));
            }
        }
    }
    eprintln!(
        "{layer}: {} inputs removed one at a time, {} problem(s)",
        inputs.len(),
        problems.len()
    );
    problems
}

fn layer_test(layer: Layer) {
    if let Ok(only) = std::env::var("GPUDOCTOR_MISSING_LAYER")
        && only != layer.id()
    {
        return;
    }
    let problems = layer_loses_each_input(layer);
    assert!(
        problems.is_empty(),
        "{} removed input(s) turned a check fail or warn:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn driver_layer_missing_inputs() {
    layer_test(Layer::Driver);
}

#[test]
fn toolkit_layer_missing_inputs() {
    layer_test(Layer::Toolkit);
}

#[test]
fn device_plugin_layer_missing_inputs() {
    layer_test(Layer::DevicePlugin);
}

#[test]
fn topology_layer_missing_inputs() {
    layer_test(Layer::Topology);
}

#[test]
fn rdma_layer_missing_inputs() {
    layer_test(Layer::Rdma);
}

#[test]
fn sriov_layer_missing_inputs() {
    layer_test(Layer::Sriov);
}

#[test]
fn nvlink_layer_missing_inputs() {
    layer_test(Layer::Nvlink);
}

#[test]
fn nccl_layer_missing_inputs() {
    layer_test(Layer::Nccl);
}
