//! The live pod-resources path (src/source/podresources: tonic over a unix socket) against a
//! real gRPC server: a fake kubelet built from the committed server code, serving a fixture's
//! `.gpudoctor/pod-resources.json`. For every fixture whose kubelet answered, the live report
//! must equal the replay; and peers that hang, answer Unimplemented, drop the connection or
//! send garbage must give an `error` (or the documented fallback) within the timeout.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpudoctor::answers::nvml::NvmlFacts;
use gpudoctor::answers::pod_resources::{
    POD_RESOURCES_SOCKET, PodResourcesFacts, RpcErrorKind, parse_pod_resources_json,
};
use gpudoctor::engine::{self, RunOptions};
use gpudoctor::report::{Layer, Report, SourceKind, Status};
use gpudoctor::source::{
    FsError, HostSource, POD_RESOURCES_JSON, ReplaySource, RootedFs, Source, SourceOptions,
};
use serde_json::{Value, json};

use common::kubelet::{Behaviour, serve};

/// A raw peer: accepts and either closes at once or writes `reply` and keeps the line open.
fn raw_peer(dir: &Path, reply: Option<Vec<u8>>) -> PathBuf {
    let path = dir.join("raw.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            if let Some(bytes) = &reply {
                use std::io::Write;
                let _ = stream.write_all(bytes);
                open.push(stream);
            }
        }
    });
    path
}

/// Files and NVML, kernel log, environment and NCCL logs as recorded; pod-resources asked live.
struct LiveKubelet {
    host: HostSource,
    replay: ReplaySource,
}

impl Source for LiveKubelet {
    fn kind(&self) -> SourceKind {
        SourceKind::Live
    }
    fn fs(&self) -> &RootedFs {
        self.host.fs()
    }
    fn nvml(&self) -> NvmlFacts {
        self.replay.nvml()
    }
    fn kernel_log(&self) -> Result<Option<(String, String)>, FsError> {
        self.replay.kernel_log()
    }
    fn pod_resources(&self) -> PodResourcesFacts {
        self.host.pod_resources()
    }
    fn env_vars(&self) -> BTreeMap<String, String> {
        self.replay.env_vars()
    }
    fn nccl(&self) -> gpudoctor::answers::nccl::NcclProbe {
        self.replay.nccl()
    }
}

fn live(root: &Path, socket: &Path, timeout: Duration) -> LiveKubelet {
    LiveKubelet {
        host: HostSource::new(
            root,
            SourceOptions {
                kubelet_socket: Some(socket.to_path_buf()),
                kubelet_timeout: timeout,
                ..SourceOptions::default()
            },
        ),
        replay: ReplaySource::new(root),
    }
}

/// What legitimately differs between the two runs: source, times, the socket's name, the
/// disk checks (`common::without_disk_checks`).
fn comparable(report: &Report, socket: Option<&Path>) -> Value {
    fn walk(v: &mut Value, socket: &str) {
        match v {
            Value::Object(map) => {
                for key in ["duration_ms", "generated_at"] {
                    if map.contains_key(key) {
                        map.insert(key.into(), Value::Null);
                    }
                }
                map.values_mut().for_each(|v| walk(v, socket));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, socket)),
            Value::String(s) if !socket.is_empty() && s.contains(socket) => {
                *s = s.replace(socket, POD_RESOURCES_SOCKET);
            }
            _ => {}
        }
    }
    let mut value = serde_json::to_value(report).unwrap();
    value["source"] = Value::Null;
    let shown = socket.map(|p| p.display().to_string()).unwrap_or_default();
    walk(&mut value, &shown);
    value
}

fn answered(root: &Path) -> Option<PodResourcesFacts> {
    let text = std::fs::read_to_string(root.join(POD_RESOURCES_JSON)).ok()?;
    let facts = parse_pod_resources_json(&text).unwrap();
    (facts.error.is_none() && facts.allocatable_value().is_some() && facts.list_value().is_some())
        .then_some(facts)
}

const ALL: RunOptions = RunOptions {
    keep_going: true,
    only: Vec::new(),
    skip: Vec::new(),
    strict: false,
    profile: None,
    pod_interfaces: Vec::new(),
    sample: None,
};

#[test]
fn every_answered_fixture_reads_the_same_through_a_real_kubelet_socket() {
    let compared = common::parallel::map(&common::fixtures(), |root| {
        if common::has_sample_window(root) {
            return false;
        }
        // Read by path and run live on: an overlay fixture as its composed tree.
        let root = common::complete(root);
        let Some(facts) = answered(&root) else {
            return false;
        };
        let name = common::name_of(&root);
        let dir = common::tempdir().unwrap();
        let socket = serve(dir.path(), Behaviour::Serve(Arc::new(facts.clone())));

        let source = live(&root, &socket, Duration::from_secs(5));
        let mut got = source.pod_resources();
        assert_eq!(got.socket, socket.display().to_string());
        got.socket = facts.socket.clone();
        assert_eq!(got, facts, "{name}: live answers vs {POD_RESOURCES_JSON}");

        // A capture of the active probes (`.gpudoctor/cuda.json`) is judged live only with the
        // stand-in CUDA library and ib_write_bw running: tests/active_probes.rs compares those
        // live runs with their replay. The pod-resources answers above are compared all the same.
        if root.join(".gpudoctor/cuda.json").is_file() {
            return false;
        }
        // A capture's `--state-dir` history: tests/state_dir.rs runs that path.
        if root.join(".gpudoctor/state/history.json").is_file() {
            return false;
        }
        let live_report = engine::run(&source, &ALL);
        let replay_report = engine::run(&ReplaySource::new(&root), &ALL);
        let (mut live, mut replay) = (
            comparable(&live_report, Some(&socket)),
            comparable(&replay_report, None),
        );
        common::without_disk_checks(&mut live, &mut replay);
        assert_eq!(live, replay, "{name}: live report vs replay report");
        true
    })
    .into_iter()
    .filter(|&compared| compared)
    .count();
    assert!(compared >= 3, "only {compared} fixtures compared");
}

fn healthy() -> PathBuf {
    common::repo().join("fixtures/hgx-h100-healthy")
}

fn device_plugin_results(source: &dyn Source) -> BTreeMap<String, (Status, String)> {
    let report = engine::run(
        source,
        &RunOptions {
            only: vec![Layer::DevicePlugin],
            ..Default::default()
        },
    );
    report
        .layer(Layer::DevicePlugin)
        .unwrap()
        .checks
        .iter()
        .map(|c| (c.code.clone(), (c.status, c.summary.clone())))
        .collect()
}

#[test]
fn a_kubelet_that_never_answers_is_an_error_within_the_timeout() {
    let dir = common::tempdir().unwrap();
    let socket = serve(dir.path(), Behaviour::Hang);
    let timeout = Duration::from_secs(1);
    let source = live(&healthy(), &socket, timeout);
    let started = Instant::now();
    let results = device_plugin_results(&source);
    let took = started.elapsed();
    assert!(took < 2 * timeout, "the check took {took:?}");
    let (status, summary) = &results["device_plugin.pod_resources"];
    assert_eq!(*status, Status::Error, "{summary}");
    assert!(summary.contains("did not answer"), "{summary}");
    let facts = source.pod_resources();
    assert_eq!(
        facts.allocatable.unwrap().error().unwrap().kind,
        RpcErrorKind::Timeout
    );
}

#[test]
fn unimplemented_allocatable_falls_back_to_the_checkpoint_and_says_so() {
    let facts = answered(&healthy()).unwrap();
    let dir = common::tempdir().unwrap();
    let socket = serve(dir.path(), Behaviour::NoAllocatable(Arc::new(facts)));
    let source = live(&healthy(), &socket, Duration::from_secs(5));
    let got = source.pod_resources();
    assert_eq!(
        got.allocatable.as_ref().unwrap().error().unwrap().kind,
        RpcErrorKind::Unimplemented
    );
    assert!(got.list_value().is_some());
    let results = device_plugin_results(&source);
    let (status, summary) = &results["device_plugin.pod_resources"];
    assert_eq!(*status, Status::Warn, "{summary}");
    assert!(summary.contains("GetAllocatableResources"), "{summary}");
    let (status, summary) = &results["device_plugin.allocatable"];
    assert_eq!(*status, Status::Pass, "{summary}");
    assert!(summary.contains("from the kubelet checkpoint"), "{summary}");
}

#[test]
fn dropped_connections_and_garbage_are_errors_within_the_timeout() {
    let timeout = Duration::from_secs(2);
    for (what, reply) in [
        ("drop", None),
        (
            "garbage",
            Some(b"HTTP/1.1 200 OK\r\n\r\nthis is not http/2 \x00\x01\x02".repeat(64)),
        ),
    ] {
        let dir = common::tempdir().unwrap();
        let socket = raw_peer(dir.path(), reply);
        let source = live(&healthy(), &socket, timeout);
        let started = Instant::now();
        let facts = source.pod_resources();
        let took = started.elapsed();
        assert!(took < 2 * timeout, "{what}: took {took:?}");
        let err = facts
            .error
            .clone()
            .or_else(|| facts.allocatable.as_ref().and_then(|a| a.error().cloned()))
            .unwrap_or_else(|| panic!("{what}: no error in {facts:?}"));
        assert_ne!(err.kind, RpcErrorKind::NotAvailable, "{what}");
        let results = device_plugin_results(&source);
        assert_eq!(
            results["device_plugin.pod_resources"].0,
            Status::Error,
            "{what}: {:?}",
            results["device_plugin.pod_resources"]
        );
    }
}

#[test]
fn no_socket_and_not_a_socket_are_clear_errors() {
    let dir = common::tempdir().unwrap();
    let file = dir.path().join("file.sock");
    std::fs::write(&file, "").unwrap();
    for (path, kind, words) in [
        (
            dir.path().join("missing.sock"),
            RpcErrorKind::NoSocket,
            "no kubelet pod-resources socket",
        ),
        (file, RpcErrorKind::NotASocket, "is not a socket"),
    ] {
        let source = live(&healthy(), &path, Duration::from_secs(5));
        assert_eq!(source.pod_resources().error.unwrap().kind, kind);
        let results = device_plugin_results(&source);
        let (status, summary) = &results["device_plugin.pod_resources"];
        assert_eq!(*status, Status::Error);
        assert!(summary.contains(words), "{summary}");
    }
}

/// Without `--kubelet-socket` the socket is found under `--root`, through the rooted resolver:
/// a link that leaves the root is refused, never followed.
#[test]
fn the_socket_under_root_is_found_and_links_out_of_the_root_are_refused() {
    let root = common::tempdir().unwrap();
    let sock_dir = root.path().join("var/lib/kubelet/pod-resources");
    std::fs::create_dir_all(&sock_dir).unwrap();
    let facts = answered(&healthy()).unwrap();
    let served = serve(&sock_dir, Behaviour::Serve(Arc::new(facts.clone())));
    assert_eq!(served, root.path().join(POD_RESOURCES_SOCKET));
    let host = HostSource::new(root.path(), SourceOptions::default());
    let got = host.pod_resources();
    assert_eq!(got.socket, POD_RESOURCES_SOCKET);
    assert_eq!(got.allocatable, facts.allocatable);

    let outside = common::tempdir().unwrap();
    let elsewhere = serve(outside.path(), Behaviour::Serve(Arc::new(facts)));
    let escaping = common::tempdir().unwrap();
    let dir = escaping.path().join("var/lib/kubelet/pod-resources");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("kubelet.sock")).unwrap();
    let host = HostSource::new(escaping.path(), SourceOptions::default());
    let err = host.pod_resources().error.unwrap();
    assert_eq!(err.kind, RpcErrorKind::OutsideRoot, "{}", err.message);
}

/// The CLI flag reaches the probe.
#[test]
fn the_cli_asks_the_socket_given_with_kubelet_socket() {
    let dir = common::tempdir().unwrap();
    let missing = dir.path().join("nothing-here.sock");
    let root = common::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("var/lib/kubelet")).unwrap();
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.path().to_str().unwrap(),
        "--only",
        "device-plugin",
        "--format",
        "json",
        "--timeout",
        "2",
        "--kubelet-socket",
        missing.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["layers"][2]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "device_plugin.pod_resources")
        .unwrap()
        .clone();
    assert_eq!(check["status"], json!("error"), "{check}");
    assert!(
        check["evidence"][0]["source"]
            .as_str()
            .unwrap()
            .contains("nothing-here.sock"),
        "{check}"
    );
}
