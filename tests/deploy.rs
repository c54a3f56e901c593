//! Every Kubernetes manifest under `deploy/` is valid against the Kubernetes API: each document
//! is decoded into the API types k8s-openapi generates from the Kubernetes OpenAPI spec
//! (required fields, types, enums-as-strings) and encoded again — a field the API does not have
//! (a typo, a wrong level of indentation) does not survive the round trip and fails the test.
//! The MPIJob (a CRD, not in the spec) is checked the same way against the MPI Operator's
//! v2beta1 types written out below, its pod templates against the core API. Each pod spec then
//! passes the rules the API server adds to the types ([`api_server_rules`]: enum values such as
//! `restartPolicy` and `hostPath.type`, DNS-1123 names, quantities, absolute paths, mounts of
//! declared volumes).
//!
//! Beyond the schema, the properties the deployment relies on: host mounts are read-only except
//! the two output directories, the NPD plugin config fits NPD's rules and gpudoctor's message
//! limit, and the ConfigMap carries the JSON file verbatim.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, PodTemplateSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The MPI Operator's `kubeflow.org/v2beta1` MPIJob, as its API types define it (`MPIJob`,
/// `MPIJobSpec`, `RunPolicy`, `SchedulingPolicy`, `ReplicaSpec`; status left out: not authored).
mod mpijob {
    use super::*;

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct MpiJob {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: MpiJobSpec,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct MpiJobSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub slots_per_worker: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub run_launcher_as_worker: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub run_policy: Option<RunPolicy>,
        pub mpi_replica_specs: BTreeMap<ReplicaType, ReplicaSpec>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ssh_auth_mount_path: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub launcher_creation_policy: Option<LauncherCreationPolicy>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mpi_implementation: Option<MpiImplementation>,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum ReplicaType {
        Launcher,
        Worker,
    }

    #[derive(Debug, Serialize, Deserialize)]
    pub enum LauncherCreationPolicy {
        AtStartup,
        WaitForWorkersReady,
    }

    #[derive(Debug, Serialize, Deserialize)]
    pub enum MpiImplementation {
        OpenMPI,
        Intel,
        #[serde(rename = "MPICH")]
        Mpich,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct RunPolicy {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub clean_pod_policy: Option<CleanPodPolicy>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ttl_seconds_after_finished: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub active_deadline_seconds: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub backoff_limit: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub scheduling_policy: Option<SchedulingPolicy>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub suspend: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub managed_by: Option<String>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    pub enum CleanPodPolicy {
        None,
        Running,
        All,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct SchedulingPolicy {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_available: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub queue: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_resources: Option<BTreeMap<String, String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub priority_class: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub schedule_timeout_seconds: Option<i32>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ReplicaSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub replicas: Option<i32>,
        pub template: PodTemplateSpec,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub restart_policy: Option<RestartPolicy>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    pub enum RestartPolicy {
        Always,
        OnFailure,
        Never,
        ExitCode,
    }
}

/// A manifest file's documents as JSON values (YAML multi-document streams included).
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

fn manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            // The platform overlays hold patches (partial objects) and every kustomization.yaml
            // names files, not objects: both are checked rendered, by a real kustomize
            // (tests/deploy_overlays.rs).
            if path.is_dir() {
                if !path.ends_with("overlays") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml")
                && !path.ends_with("kustomization.yaml")
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&common::repo().join("deploy"), &mut out);
    out.sort();
    out
}

/// Where `a` (as written) and `b` (after the round trip) differ: missing keys are fields the
/// type does not know.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => differences(&format!("{path}.{k}"), v, w, out),
                    None => out.push(format!("{path}.{k}: not a field of this API type")),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("{path}.{k}: added by the round trip"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), v, w, out);
            }
        }
        _ if a == b => {}
        // A quantity written as a number (`nvidia.com/gpu: 8`) comes back as its string.
        (Value::Number(n), Value::String(s)) if n.to_string() == *s => {}
        _ => out.push(format!("{path}: {a} became {b}")),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value, what: &str) -> T {
    let typed: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    let mut diffs = Vec::new();
    differences("", doc, &back, &mut diffs);
    assert!(diffs.is_empty(), "{what}:\n  {}", diffs.join("\n  "));
    typed
}

/// Every pod spec a document holds (DaemonSet, Job, MPIJob replicas).
fn pod_specs(doc: &Value, what: &str) -> Vec<PodSpec> {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    match (api, kind) {
        ("v1", "Namespace") => {
            round_trip::<Namespace>(doc, what);
            vec![]
        }
        ("kustomize.config.k8s.io/v1beta1", "Kustomization") => {
            round_trip::<Kustomization>(doc, what);
            vec![]
        }
        ("v1", "ServiceAccount") => {
            round_trip::<ServiceAccount>(doc, what);
            vec![]
        }
        ("v1", "ConfigMap") => {
            round_trip::<ConfigMap>(doc, what);
            vec![]
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<ClusterRoleBinding>(doc, what);
            vec![]
        }
        ("apps/v1", "DaemonSet") => {
            let ds: DaemonSet = round_trip(doc, what);
            let spec = ds.spec.unwrap();
            // The selector must select the template, or the API server refuses the object.
            let labels = spec.template.metadata.clone().unwrap().labels.unwrap();
            for (k, v) in spec.selector.match_labels.unwrap() {
                assert_eq!(labels.get(&k), Some(&v), "{what}: selector {k}");
            }
            vec![spec.template.spec.unwrap()]
        }
        ("batch/v1", "Job") => {
            let job: Job = round_trip(doc, what);
            vec![job.spec.unwrap().template.spec.unwrap()]
        }
        ("kubeflow.org/v2beta1", "MPIJob") => {
            let job: mpijob::MpiJob = round_trip(doc, what);
            assert!(
                job.spec
                    .mpi_replica_specs
                    .contains_key(&mpijob::ReplicaType::Launcher)
                    && job
                        .spec
                        .mpi_replica_specs
                        .contains_key(&mpijob::ReplicaType::Worker),
                "{what}: an MPIJob needs a Launcher and Workers"
            );
            job.spec
                .mpi_replica_specs
                .into_values()
                .map(|r| r.template.spec.unwrap())
                .collect()
        }
        _ => panic!("{what}: no validator for {api} {kind}; add its API type to tests/deploy.rs"),
    }
}

/// The fields of kustomize's `Kustomization` (kustomize.config.k8s.io/v1beta1) the shipped one
/// uses; any other field fails the round trip.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    resources: Vec<String>,
}

/// What the API server's validation (kubernetes/pkg/apis/core/validation, apps/validation)
/// refuses beyond the OpenAPI types, which k8s-openapi leaves as plain strings: enum values,
/// DNS-1123 names, quantities, absolute mount paths, mounts of volumes the Pod does not declare.
/// Returns the violations, each naming where.
fn api_server_rules(spec: &PodSpec, what: &str) -> Vec<String> {
    fn one_of(out: &mut Vec<String>, at: &str, value: Option<&str>, allowed: &[&str]) {
        if let Some(v) = value
            && !allowed.contains(&v)
        {
            out.push(format!("{at}: {v:?} is not one of {allowed:?}"));
        }
    }
    // RFC 1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric, ≤ 63.
    fn dns_label(name: &str) -> bool {
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        !name.is_empty()
            && name.len() <= 63
            && name.chars().all(|c| ok(c) || c == '-')
            && name.starts_with(ok)
            && name.ends_with(ok)
    }
    let mut out = Vec::new();
    one_of(
        &mut out,
        &format!("{what}: restartPolicy"),
        spec.restart_policy.as_deref(),
        &["Always", "OnFailure", "Never"],
    );
    one_of(
        &mut out,
        &format!("{what}: dnsPolicy"),
        spec.dns_policy.as_deref(),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    let mut volumes = std::collections::BTreeSet::new();
    for v in spec.volumes.iter().flatten() {
        if !dns_label(&v.name) {
            out.push(format!(
                "{what}: volume name {:?} is not a DNS-1123 label",
                v.name
            ));
        }
        volumes.insert(v.name.as_str());
        if let Some(h) = &v.host_path {
            one_of(
                &mut out,
                &format!("{what}: volume {} hostPath.type", v.name),
                h.type_.as_deref(),
                &[
                    "",
                    "DirectoryOrCreate",
                    "Directory",
                    "FileOrCreate",
                    "File",
                    "Socket",
                    "CharDevice",
                    "BlockDevice",
                ],
            );
            if !h.path.starts_with('/') {
                out.push(format!("{what}: hostPath {:?} is not absolute", h.path));
            }
        }
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        let at = format!("{what}: container {}", c.name);
        if !dns_label(&c.name) {
            out.push(format!("{at}: name is not a DNS-1123 label"));
        }
        one_of(
            &mut out,
            &format!("{at} imagePullPolicy"),
            c.image_pull_policy.as_deref(),
            &["Always", "Never", "IfNotPresent"],
        );
        for m in c.volume_mounts.iter().flatten() {
            if !volumes.contains(m.name.as_str()) {
                out.push(format!(
                    "{at}: mounts {:?}, which the Pod does not declare",
                    m.name
                ));
            }
            if !m.mount_path.starts_with('/') {
                out.push(format!(
                    "{at}: mountPath {:?} is not absolute",
                    m.mount_path
                ));
            }
        }
        for p in c.ports.iter().flatten() {
            one_of(
                &mut out,
                &format!("{at} port protocol"),
                p.protocol.as_deref(),
                &["TCP", "UDP", "SCTP"],
            );
        }
        let resources = c.resources.iter();
        let quantities =
            resources.flat_map(|r| r.limits.iter().flatten().chain(r.requests.iter().flatten()));
        for (name, q) in quantities {
            // The quantity grammar: a signed decimal number, then an optional binary or decimal
            // suffix (Ki..Ei, n u m k M G T P E) or exponent.
            let number_end =
                q.0.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
                    .unwrap_or(q.0.len());
            let (number, suffix) = q.0.split_at(number_end);
            let suffix_ok = [
                "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
            ]
            .contains(&suffix)
                || (suffix.starts_with(['e', 'E']) && suffix[1..].parse::<i32>().is_ok());
            if number.parse::<f64>().is_err() || !suffix_ok {
                out.push(format!("{at}: {name} {:?} is not a quantity", q.0));
            }
        }
    }
    out
}

/// Output directories the node-check Pods may write; every other host path is read-only.
const WRITABLE_HOST_PATHS: [&str; 2] = [
    "/var/lib/node_exporter/textfile_collector",
    "/var/lib/gpudoctor",
];

#[test]
fn every_manifest_is_valid_against_the_kubernetes_api() {
    let files = manifests();
    assert!(files.len() >= 4, "deploy/ lacks manifests: {files:?}");
    let mut kinds = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(common::repo())
            .unwrap()
            .display()
            .to_string();
        for (i, doc) in documents(&file).iter().enumerate() {
            let what = format!("{rel} document {}", i + 1);
            kinds.push(doc["kind"].as_str().unwrap_or_default().to_string());
            for spec in pod_specs(doc, &what) {
                let refused = api_server_rules(&spec, &what);
                assert!(refused.is_empty(), "{}", refused.join("\n"));
                let host_paths: BTreeMap<String, String> = spec
                    .volumes
                    .iter()
                    .flatten()
                    .filter_map(|v| {
                        v.host_path
                            .as_ref()
                            .map(|h| (v.name.clone(), h.path.clone()))
                    })
                    .collect();
                let containers = spec
                    .containers
                    .iter()
                    .chain(spec.init_containers.iter().flatten());
                for container in containers {
                    assert!(
                        container
                            .image
                            .as_deref()
                            .is_some_and(|i| !i.ends_with(":latest")),
                        "{what}: container {} needs a pinned image",
                        container.name
                    );
                    for mount in container.volume_mounts.iter().flatten() {
                        let Some(host) = host_paths.get(&mount.name) else {
                            continue;
                        };
                        assert!(
                            mount.read_only == Some(true)
                                || WRITABLE_HOST_PATHS.contains(&host.as_str()),
                            "{what}: host path {host} is mounted writable in {}",
                            container.name
                        );
                    }
                }
            }
        }
    }
    for kind in ["DaemonSet", "Job", "MPIJob", "ConfigMap"] {
        assert!(kinds.iter().any(|k| k == kind), "deploy/ has no {kind}");
    }
}

#[test]
fn node_checks_take_no_gpu_from_the_workloads() {
    // The DaemonSets and the node Job reach the GPUs through privilege and the host's NVML,
    // never through the device plugin: requesting nvidia.com/gpu would take GPUs away.
    fn has_key(v: &Value, key: &str) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, v)| k == key || has_key(v, key)),
            Value::Array(a) => a.iter().any(|v| has_key(v, key)),
            _ => false,
        }
    }
    for file in [
        "deploy/base/daemonset.yaml",
        "deploy/job.yaml",
        "deploy/npd/node-problem-detector.yaml",
    ] {
        for doc in documents(&common::repo().join(file)) {
            assert!(!has_key(&doc, "nvidia.com/gpu"), "{file} requests a GPU");
        }
    }
    // The check is live: the MPIJob's workers do request GPUs.
    let mpijob = documents(&common::repo().join("deploy/mpijob.yaml"));
    assert!(has_key(&mpijob[0], "nvidia.com/gpu"));
}

#[test]
fn the_mpijob_launcher_runs_a_command_line_gpudoctor_accepts() {
    use clap::Parser;
    let docs = documents(&common::repo().join("deploy/mpijob.yaml"));
    let launcher =
        &docs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0];
    let command: Vec<&str> = launcher["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(command[0].ends_with("/gpudoctor"), "{command:?}");
    let cli = gpudoctor::cli::Cli::try_parse_from(&command)
        .unwrap_or_else(|e| panic!("deploy/mpijob.yaml launcher: {e}"));
    match cli.command {
        gpudoctor::cli::Command::Check(args) => {
            assert_eq!(args.only, [gpudoctor::report::Layer::Nccl]);
        }
        other => panic!("the launcher runs {other:?}, not check"),
    }
}

#[test]
fn the_validation_catches_a_misspelt_field() {
    let doc: Value = serde_yaml_ng::from_str(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i, volumeMount: []}]\n",
    )
    .unwrap();
    let caught = std::panic::catch_unwind(|| round_trip::<Job>(&doc, "typo"));
    assert!(caught.is_err(), "volumeMount (for volumeMounts) passed");
    let doc: Value = serde_yaml_ng::from_str(
        "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: x}\nspec:\n  slotPerWorker: 8\n  mpiReplicaSpecs: {}\n",
    )
    .unwrap();
    let caught = std::panic::catch_unwind(|| round_trip::<mpijob::MpiJob>(&doc, "typo"));
    assert!(caught.is_err(), "slotPerWorker (for slotsPerWorker) passed");
}

#[test]
fn the_validation_catches_what_the_api_server_refuses() {
    let job = |spec: &str| -> PodSpec {
        let doc: Value = serde_yaml_ng::from_str(&format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: x}}\nspec:\n  template:\n    spec:\n{spec}"
        ))
        .unwrap();
        round_trip::<Job>(&doc, "case")
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
    };
    let good = "      restartPolicy: Never\n      volumes: [{name: host-sys, hostPath: {path: /sys, type: Directory}}]\n      containers: [{name: c, image: i, volumeMounts: [{name: host-sys, mountPath: /host/sys, readOnly: true}], resources: {limits: {memory: 128Mi, cpu: 500m}}}]\n";
    assert_eq!(api_server_rules(&job(good), "good"), Vec::<String>::new());
    for (bad, expected) in [
        (good.replace("Never", "Sometimes"), "restartPolicy"),
        (
            good.replace("type: Directory", "type: Dir"),
            "hostPath.type",
        ),
        (
            good.replace("name: host-sys, mountPath", "name: host-proc, mountPath"),
            "does not declare",
        ),
        (
            good.replace("mountPath: /host/sys", "mountPath: host/sys"),
            "not absolute",
        ),
        (good.replace("name: c,", "name: Checker_1,"), "DNS-1123"),
        (good.replace("128Mi", "128MB"), "not a quantity"),
    ] {
        let refused = api_server_rules(&job(&bad), "bad");
        assert!(
            refused.iter().any(|r| r.contains(expected)),
            "{expected}: {refused:?}"
        );
    }
}

/// NPD's custom plugin config (reference/kubernetes.md §9), as far as the test reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PluginMonitor {
    plugin: String,
    plugin_config: PluginConfig,
    source: String,
    metrics_reporting: bool,
    conditions: Vec<Condition>,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginConfig {
    invoke_interval: String,
    timeout: String,
    max_output_length: usize,
    concurrency: u32,
    enable_message_change_based_condition_update: bool,
    skip_initial_status: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    reason: String,
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(rename = "type")]
    kind: String,
    condition: String,
    reason: String,
    path: String,
    args: Vec<String>,
    timeout: String,
}

fn seconds(duration: &str) -> u64 {
    duration
        .strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{duration}: write NPD durations in seconds (`300s`)"))
}

#[test]
fn the_npd_plugin_config_fits_npd_and_gpudoctor() {
    let path = common::repo().join("deploy/npd/gpudoctor-plugin-monitor.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let monitor: PluginMonitor = serde_json::from_str(&text).unwrap();
    assert_eq!(monitor.plugin, "custom");
    assert!(!monitor.source.is_empty() && monitor.metrics_reporting);
    let config = &monitor.plugin_config;
    assert!(config.concurrency >= 1 && !config.skip_initial_status);
    // NPD's custom plugin monitor docs: "Flag controls whether message change should result
    // in a condition update". gpudoctor's message names the failing layer and check: when the
    // cause changes while the node stays unhealthy, the condition must say the new one.
    assert!(config.enable_message_change_based_condition_update);
    // gpudoctor's line is cut to NPD's limit, never by NPD.
    assert!(config.max_output_length >= gpudoctor::render::npd::MAX_MESSAGE_BYTES);
    let global = seconds(&config.timeout);
    assert!(
        seconds(&config.invoke_interval) >= global,
        "runs would overlap"
    );
    for rule in &monitor.rules {
        // NPD refuses to start when a rule's timeout exceeds the global one.
        assert!(
            seconds(&rule.timeout) <= global,
            "rule timeout above the global one"
        );
        assert!(matches!(rule.kind.as_str(), "permanent" | "temporary"));
        if rule.kind == "permanent" {
            assert!(
                monitor.conditions.iter().any(|c| c.kind == rule.condition),
                "permanent rule for an undeclared condition {}",
                rule.condition
            );
        }
        assert!(!rule.reason.is_empty());
        assert_eq!(rule.path, "/opt/gpudoctor/bin/gpudoctor-node");
    }
    for condition in &monitor.conditions {
        assert!(!condition.reason.is_empty() && !condition.message.is_empty());
    }
    // One condition per cause class, in gpudoctor's order, each set by one rule with the
    // class's reason (issue 26). The first rule runs the check and saves the report; NPD runs
    // rules one after another in their order under `concurrency: 1` (its plugin's semaphore),
    // so the others answer from this interval's report.
    assert_eq!(
        config.concurrency, 1,
        "the npd-saved rules read the npd rule's report"
    );
    let classes = gpudoctor::render::npd_conditions::Condition::ALL;
    assert_eq!(monitor.conditions.len(), classes.len());
    assert_eq!(monitor.rules.len(), classes.len());
    for (i, class) in classes.iter().enumerate() {
        let (condition, rule) = (&monitor.conditions[i], &monitor.rules[i]);
        assert_eq!(condition.kind, class.type_name());
        assert_eq!(
            condition.message,
            format!("gpudoctor: no {} problem", class.id()),
            "the message gpudoctor prints when it is false"
        );
        assert_eq!(rule.kind, "permanent");
        assert_eq!(rule.condition, class.type_name());
        assert_eq!(rule.reason, class.reason());
        let mode = if i == 0 { "npd" } else { "npd-saved" };
        assert_eq!(rule.args, [mode, class.id()]);
    }

    // The NPD DaemonSet's ConfigMap carries this file verbatim.
    let npd = documents(&common::repo().join("deploy/npd/node-problem-detector.yaml"));
    let configmap = npd
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    assert_eq!(
        configmap["data"]["gpudoctor-plugin-monitor.json"]
            .as_str()
            .unwrap(),
        text,
        "deploy/npd/node-problem-detector.yaml must embed deploy/npd/gpudoctor-plugin-monitor.json as it is"
    );
}

/// A stand-in for the gpudoctor binary in `dir` that prints its arguments, one a line.
fn print_args(dir: &Path) -> PathBuf {
    let echo = dir.join("print-args");
    std::fs::write(
        &echo,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&echo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    echo
}

#[test]
fn the_entry_script_builds_command_lines_gpudoctor_accepts() {
    use clap::Parser;
    let script = common::repo().join("deploy/image/gpudoctor-node.sh");
    let tmp = common::tempdir().unwrap();
    let nvml = "/host/opt/nvidia/lib/libnvidia-ml.so.1";
    let echo = print_args(tmp.path());
    for (mode, extra, env) in [
        ("once", vec!["--keep-going", "--format", "markdown"], vec![]),
        (
            "npd",
            vec![],
            vec![
                ("GPUDOCTOR_ARGS", "--skip nccl"),
                ("GPUDOCTOR_REPORT", "/var/lib/gpudoctor/npd-last.json"),
            ],
        ),
        (
            "once",
            vec![],
            vec![
                (
                    "GPUDOCTOR_ARGS",
                    "--keep-going --skip nccl --state-dir /var/lib/gpudoctor",
                ),
                (
                    "GPUDOCTOR_TEXTFILE_DIR",
                    "/var/lib/node_exporter/textfile_collector",
                ),
                ("GPUDOCTOR_NVML_LIB", nvml),
            ],
        ),
    ] {
        let named = env.iter().any(|(k, _)| *k == "GPUDOCTOR_NVML_LIB");
        let out = std::process::Command::new("sh")
            .arg(&script)
            .arg(mode)
            .args(&extra)
            .env("GPUDOCTOR_ROOT", tmp.path())
            .env("GPUDOCTOR_BIN", &echo)
            .envs(env)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).unwrap();
        let argv: Vec<&str> = printed.lines().collect();
        assert_eq!(argv.first(), Some(&"check"), "{printed}");
        // The binary finds the host's NVML under the root itself; the script passes
        // --nvml-lib only when told where it is.
        assert_eq!(printed.contains("--nvml-lib"), named, "{printed}");
        assert_eq!(printed.contains(nvml), named, "{printed}");
        let mut full = vec!["gpudoctor"];
        full.extend(&argv);
        gpudoctor::cli::Cli::try_parse_from(&full)
            .unwrap_or_else(|e| panic!("{mode}: {full:?}: {e}"));
    }

    // Every NPD rule's arguments: `npd CONDITION` checks and answers for it; `npd-saved
    // CONDITION` renders the report the first rule saved (deploy/npd/gpudoctor-plugin-monitor.json).
    let report = "/var/lib/gpudoctor/npd-last.json";
    for class in gpudoctor::render::npd_conditions::Condition::ALL {
        for mode in ["npd", "npd-saved"] {
            let out = std::process::Command::new("sh")
                .arg(&script)
                .args([mode, class.id()])
                .env("GPUDOCTOR_ROOT", tmp.path())
                .env("GPUDOCTOR_BIN", &echo)
                .env("GPUDOCTOR_REPORT", report)
                .output()
                .unwrap();
            assert!(out.status.success(), "{mode} {}", class.id());
            let printed = String::from_utf8(out.stdout).unwrap();
            let argv: Vec<&str> = printed.lines().collect();
            let want = if mode == "npd" { "check" } else { "render" };
            assert_eq!(argv.first(), Some(&want), "{printed}");
            let at = argv.iter().position(|a| *a == "--npd-condition").unwrap();
            assert_eq!(argv[at + 1], class.id(), "{printed}");
            assert!(argv.contains(&report), "{printed}");
            let mut full = vec!["gpudoctor"];
            full.extend(&argv);
            gpudoctor::cli::Cli::try_parse_from(&full)
                .unwrap_or_else(|e| panic!("{mode}: {full:?}: {e}"));
        }
    }
    // npd-saved without a report to read is NPD's "unknown", with a line saying why.
    let out = std::process::Command::new("sh")
        .arg(&script)
        .args(["npd-saved", "gpu-driver"])
        .env("GPUDOCTOR_BIN", &echo)
        .env_remove("GPUDOCTOR_REPORT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("GPUDOCTOR_REPORT"));
}

/// The namespace every namespaced object lives in, and who creates it: only
/// `deploy/base/namespace.yaml` (a Namespace in two files would make kustomize refuse the pair and
/// `kubectl create -f deploy/job.yaml` fail on it), included first by the kustomization; every
/// manifest the kustomization leaves out says to apply namespace.yaml first.
#[test]
fn every_manifest_has_its_namespace_from_namespace_yaml_or_the_kustomization() {
    let deploy = common::repo().join("deploy");
    let base = deploy.join("base");
    let ns_docs = documents(&base.join("namespace.yaml"));
    assert_eq!(ns_docs.len(), 1);
    assert_eq!(ns_docs[0]["kind"], "Namespace");
    let namespace = ns_docs[0]["metadata"]["name"].as_str().unwrap().to_string();

    let kustomization: Kustomization =
        serde_json::from_value(documents(&base.join("kustomization.yaml")).pop().unwrap()).unwrap();
    assert_eq!(kustomization.namespace.as_deref(), Some(namespace.as_str()));
    assert_eq!(
        kustomization.resources.first().map(String::as_str),
        Some("namespace.yaml"),
        "the namespace first"
    );
    let mut ids = std::collections::BTreeSet::new();
    for resource in &kustomization.resources {
        let path = base.join(resource);
        assert!(path.is_file(), "kustomization names a missing {resource}");
        for doc in documents(&path) {
            // kustomize refuses two resources with one id.
            let id = format!(
                "{} {} {}",
                doc["kind"], doc["metadata"]["namespace"], doc["metadata"]["name"]
            );
            assert!(ids.insert(id.clone()), "{id} twice in the kustomization");
        }
    }

    for file in manifests() {
        let rel = file
            .strip_prefix(&deploy)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in documents(&file) {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if kind == "Namespace" {
                assert_eq!(
                    rel, "base/namespace.yaml",
                    "only namespace.yaml makes a Namespace"
                );
                continue;
            }
            if kind == "ClusterRoleBinding" {
                for subject in doc["subjects"].as_array().into_iter().flatten() {
                    assert_eq!(
                        subject["namespace"].as_str(),
                        Some(namespace.as_str()),
                        "{rel}"
                    );
                }
                continue;
            }
            assert_eq!(
                doc["metadata"]["namespace"].as_str(),
                Some(namespace.as_str()),
                "{rel}: {kind} outside the {namespace} namespace"
            );
        }
        let in_base = rel
            .strip_prefix("base/")
            .is_some_and(|r| kustomization.resources.iter().any(|k| k == r));
        if rel != "base/namespace.yaml" && !in_base {
            assert!(
                text.contains("deploy/base/namespace.yaml"),
                "{rel} is not in the kustomization: its header must say to apply deploy/base/namespace.yaml first"
            );
        }
    }
}

/// `record` has somewhere to write in the DaemonSet: its root filesystem is read-only, so a
/// container that has one mounts an `emptyDir` (the Pod's, never the host's), and the record
/// command docs/deploy.md shows writes under it.
#[test]
fn the_daemonset_has_scratch_space_for_record() {
    let ds = documents(&common::repo().join("deploy/base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "DaemonSet")
        .unwrap();
    let spec = &ds["spec"]["template"]["spec"];
    let empty_dirs: Vec<&str> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v.get("emptyDir").is_some())
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let container = &spec["containers"][0];
    assert_eq!(
        container["securityContext"]["readOnlyRootFilesystem"],
        Value::Bool(true)
    );
    let scratch: Vec<&str> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| empty_dirs.contains(&m["name"].as_str().unwrap()))
        .filter(|m| m.get("readOnly") != Some(&Value::Bool(true)))
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(scratch.len(), 1, "one writable emptyDir: {scratch:?}");
    let doc = std::fs::read_to_string(common::repo().join("docs/deploy.md")).unwrap();
    let record = doc
        .lines()
        .find(|l| l.contains("gpudoctor record --root /host --out "))
        .expect("docs/deploy.md records a node in the Pod");
    let out = record
        .split("--out ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(
        out.starts_with(&format!("{}/", scratch[0])),
        "{out} is not under the scratch mount {}",
        scratch[0]
    );
    // And gpudoctor takes that command line.
    use clap::Parser;
    let args: Vec<&str> = record
        .split(" -- ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    gpudoctor::cli::Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// docs/deploy.md's walk-through names what the manifests ship: the namespace, the DaemonSet,
/// its Pod labels and container, the files it applies, and its YAML excerpts appear in a
/// manifest line for line.
#[test]
fn the_deploy_doc_quotes_the_manifests_as_shipped() {
    let repo = common::repo();
    let doc = std::fs::read_to_string(repo.join("docs/deploy.md")).unwrap();
    let ds = documents(&repo.join("deploy/base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "DaemonSet")
        .unwrap();
    let namespace = ds["metadata"]["namespace"].as_str().unwrap();
    let name = ds["metadata"]["name"].as_str().unwrap();
    let labels = ds["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    let containers: Vec<&str> = ds["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();

    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in doc.lines() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some((lang.to_string(), String::new())),
            }
        } else if let Some((_, text)) = &mut current {
            text.push_str(line);
            text.push('\n');
        }
    }
    let mut kubectl = 0;
    for (lang, text) in &blocks {
        if lang == "yaml" {
            let manifests: Vec<String> = manifests()
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap())
                .collect();
            // The excerpt, de-indented, is a run of lines of some manifest, de-indented alike.
            let lines: Vec<&str> = text.lines().collect();
            let indent = lines
                .iter()
                .map(|l| l.len() - l.trim_start().len())
                .min()
                .unwrap_or(0);
            let excerpt: Vec<&str> = lines.iter().map(|l| &l[indent..]).collect();
            let found = manifests.iter().any(|m| {
                let mlines: Vec<&str> = m.lines().collect();
                mlines.windows(excerpt.len()).any(|w| {
                    let base = w[0].len() - w[0].trim_start().len();
                    w.iter()
                        .zip(&excerpt)
                        .all(|(a, b)| a.len() >= base && a.get(base..) == Some(*b))
                })
            });
            assert!(
                found,
                "docs/deploy.md quotes YAML no manifest holds:\n{text}"
            );
            continue;
        }
        for line in text.lines().map(str::trim) {
            for word in line.split_whitespace() {
                let word = word.trim_matches(|c| c == '`' || c == '"' || c == '\'');
                if let Some(rel) = word.strip_prefix("deploy/") {
                    let path = repo.join("deploy").join(rel.trim_end_matches('/'));
                    assert!(path.exists(), "docs/deploy.md names a missing {word}");
                }
            }
            if !line.starts_with("kubectl") && !line.contains("$(kubectl") {
                continue;
            }
            kubectl += 1;
            let words: Vec<&str> = line.split_whitespace().collect();
            for pair in words.windows(2) {
                match pair[0] {
                    "-n" => assert_eq!(pair[1], namespace, "{line}"),
                    "-c" => assert!(
                        containers.contains(&pair[1]),
                        "{line}: no container {}",
                        pair[1]
                    ),
                    "-l" => {
                        for selector in pair[1].split(',') {
                            let (k, v) = selector.split_once('=').unwrap();
                            assert_eq!(
                                labels.get(k).and_then(Value::as_str),
                                Some(v),
                                "{line}: the DaemonSet's Pods have no label {selector}"
                            );
                        }
                    }
                    _ => {}
                }
            }
            for word in &words {
                if let Some(ds_name) = word.strip_prefix("daemonset/") {
                    assert_eq!(ds_name, name, "{line}");
                }
            }
        }
    }
    assert!(
        kubectl >= 6,
        "the walk-through's kubectl commands: {kubectl}"
    );
    for step in [
        "kubectl apply -k deploy/",
        "gpudoctor record --root /host",
        "kubectl -n gpudoctor cp",
    ] {
        assert!(doc.contains(step), "docs/deploy.md lacks `{step}`");
    }
}

/// One textfile-collector directory everywhere a user reads one (README, docs, `--help`,
/// manifests), and it is the one the DaemonSet mounts (issue 19: the docs named two).
#[test]
fn one_textfile_collector_path_everywhere() {
    let repo = common::repo();
    let ds = documents(&repo.join("deploy/base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "DaemonSet")
        .unwrap();
    let mounted = ds["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "textfile")
        .unwrap()["hostPath"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let mut files = vec![repo.join("README.md"), repo.join("src/cli.rs")];
    for dir in ["docs", "deploy"] {
        let mut stack = vec![repo.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|e| e == "md" || e == "yaml" || e == "json" || e == "sh")
                {
                    files.push(path);
                }
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("/node_exporter/") {
            let start = text[..at]
                .rfind(|c: char| c.is_whitespace() || c == '=' || c == '`' || c == '"')
                .map_or(0, |i| i + 1);
            let path: String = text[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'))
                .collect();
            seen.insert((
                path.trim_end_matches('.').to_string(),
                file.display().to_string(),
            ));
        }
    }
    let paths: std::collections::BTreeSet<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        vec![mounted.as_str()],
        "textfile directories named: {seen:?}"
    );
}

/// Deployed on a real cluster: the namespace admits privileged Pods where the baseline Pod
/// Security Standard is enforced, the node Pods are the last evicted from the node they watch
/// (a diagnostic Pod evicted first from a sick node sees nothing), every Pod names the node by
/// `NODE_NAME` from the downward API, and `/host/run` (where the kubelet's and containerd's
/// sockets appear after the Pod starts) follows the host's mounts. The MPIJob is a workload,
/// not a node Pod: it is left out.
#[test]
fn node_pods_are_admitted_kept_and_named_as_a_cluster_needs() {
    let deploy = common::repo().join("deploy");
    let ns = documents(&deploy.join("base/namespace.yaml"))
        .pop()
        .unwrap();
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged",
        "{ns}"
    );
    let mut node_pods = 0;
    for file in [
        "base/daemonset.yaml",
        "job.yaml",
        "npd/node-problem-detector.yaml",
    ] {
        for (i, doc) in documents(&deploy.join(file)).iter().enumerate() {
            for spec in pod_specs(doc, &format!("{file} document {}", i + 1)) {
                node_pods += 1;
                assert_eq!(
                    spec.priority_class_name.as_deref(),
                    Some("system-node-critical"),
                    "{file}"
                );
                for container in &spec.containers {
                    let env = container.env.clone().unwrap_or_default();
                    let node_name = env.iter().find(|e| e.name == "NODE_NAME");
                    let field = node_name
                        .and_then(|e| e.value_from.as_ref())
                        .and_then(|v| v.field_ref.as_ref())
                        .map(|f| f.field_path.as_str());
                    assert_eq!(field, Some("spec.nodeName"), "{file}: NODE_NAME");
                    for mount in container.volume_mounts.iter().flatten() {
                        if mount.mount_path == "/host/run" {
                            assert_eq!(
                                mount.mount_propagation.as_deref(),
                                Some("HostToContainer"),
                                "{file}: /host/run"
                            );
                        }
                    }
                }
            }
        }
    }
    assert_eq!(node_pods, 3, "the DaemonSet, the Job and NPD");
}

/// The profile comes from one ConfigMap (issue 26): `gpudoctor-profile` in the kustomized
/// daemonset.yaml, empty by default (chosen from the GPUs), mounted read-only and optional by
/// every Pod that runs gpudoctor; the entry script makes `--profile` of it — a profile file
/// first, else a built-in name — and gpudoctor accepts the command line.
#[test]
fn the_profile_comes_from_one_configmap_every_gpudoctor_pod_mounts() {
    let deploy = common::repo().join("deploy");
    let configmap = documents(&deploy.join("base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "gpudoctor-profile")
        .expect("the gpudoctor-profile ConfigMap in daemonset.yaml");
    assert_eq!(
        configmap["data"]["name"], "",
        "chosen from the GPUs by default"
    );
    assert_eq!(configmap["data"]["profile.toml"], "");
    for file in [
        "base/daemonset.yaml",
        "job.yaml",
        "npd/node-problem-detector.yaml",
    ] {
        let docs = documents(&deploy.join(file));
        let spec = docs
            .iter()
            .map(|d| &d["spec"]["template"]["spec"])
            .find(|t| t.is_object())
            .unwrap_or_else(|| panic!("{file}: a Pod template"));
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "profile")
            .unwrap_or_else(|| panic!("{file}: no profile volume"));
        assert_eq!(volume["configMap"]["name"], "gpudoctor-profile", "{file}");
        assert_eq!(volume["configMap"]["optional"], true, "{file}");
        let runs_gpudoctor = spec["containers"].as_array().unwrap().iter().filter(|c| {
            c.to_string().contains("gpudoctor-node")
                || c["volumeMounts"].to_string().contains("/host/sys")
        });
        for container in runs_gpudoctor {
            let mount = container["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "profile")
                .unwrap_or_else(|| {
                    panic!("{file}: {} does not mount the profile", container["name"])
                });
            assert_eq!(mount["mountPath"], "/etc/gpudoctor/profile", "{file}");
            assert_eq!(mount["readOnly"], true, "{file}");
        }
    }

    use clap::Parser;
    let script = deploy.join("image/gpudoctor-node.sh");
    let tmp = common::tempdir().unwrap();
    let echo = print_args(tmp.path());
    let dir = tmp.path().join("profile");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("profile.toml");
    let argv_with = |name: &str, toml: &str| {
        std::fs::write(dir.join("name"), name).unwrap();
        std::fs::write(&file, toml).unwrap();
        let out = std::process::Command::new("sh")
            .arg(&script)
            .arg("once")
            .env("GPUDOCTOR_ROOT", tmp.path())
            .env("GPUDOCTOR_BIN", &echo)
            .env("GPUDOCTOR_PROFILE_DIR", &dir)
            .output()
            .unwrap();
        let argv: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let mut full = vec!["gpudoctor".to_string()];
        full.extend(argv.iter().cloned());
        gpudoctor::cli::Cli::try_parse_from(&full).unwrap_or_else(|e| panic!("{full:?}: {e}"));
        argv.iter()
            .position(|a| a == "--profile")
            .map(|at| argv[at + 1].clone())
    };
    // The ConfigMap as shipped: no --profile, gpudoctor chooses.
    assert_eq!(argv_with("", ""), None);
    assert_eq!(
        argv_with("hgx-h100-roce\n", ""),
        Some("hgx-h100-roce".into())
    );
    let lab = "name = \"lab-node\"\ngpu_count = 8\n";
    assert_eq!(
        argv_with("hgx-h100", lab),
        Some(file.display().to_string()),
        "a profile file wins over a name"
    );
}

/// The DaemonSet's log (issue 26): the first run's report in full, then only what changed
/// between one run and the next (`gpudoctor diff` of the saved reports), and one line per run
/// on stderr — not the same table every five minutes. Runs the real binary through a wrapper
/// that points the root at the healthy fixture twice, then at one with a double-bit ECC XID,
/// then stops the loop.
#[test]
fn the_daemonset_logs_the_first_report_then_only_what_changed() {
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("root");
    let fixtures = common::repo().join("fixtures");
    let wrapper = tmp.path().join("gpudoctor");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = check ]; then\n  n=$(cat {runs} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {runs}\n  case $n in\n    1|2) ln -sfn {healthy} {root} ;;\n    3) ln -sfn {xid} {root} ;;\n    *) kill -TERM $PPID; exit 0 ;;\n  esac\nfi\nexec {real} \"$@\"\n",
            runs = tmp.path().join("runs").display(),
            healthy = fixtures.join("hgx-h100-healthy").display(),
            // An overlay fixture, composed: its base is found beside it, not beside `root`.
            xid = common::complete(&fixtures.join("h100-xid48-dbe")).display(),
            root = root.display(),
            real = env!("CARGO_BIN_EXE_gpudoctor"),
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = std::process::Command::new("sh")
        .arg(common::repo().join("deploy/image/gpudoctor-node.sh"))
        .arg("loop")
        .env("GPUDOCTOR_ROOT", &root)
        .env("GPUDOCTOR_BIN", &wrapper)
        .env("GPUDOCTOR_INTERVAL", "0")
        .env("GPUDOCTOR_REPORT", tmp.path().join("last.json"))
        .env("GPUDOCTOR_PROFILE_DIR", tmp.path().join("no-profile"))
        .env_remove("GPUDOCTOR_TEXTFILE_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the loop ends on SIGTERM");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let runs: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("gpudoctor-node: "))
        .collect();
    assert_eq!(runs.len(), 3, "one line per run:\n{stderr}");
    for (line, code) in runs.iter().zip(["exit 0;", "exit 0;", "exit 1;"]) {
        assert!(
            line.contains(code) && line.contains("next run in 0s"),
            "{line}\n{stderr}"
        );
    }
    // The first report whole (the table names every layer), once.
    assert_eq!(
        stdout.matches("does the host see healthy GPUs?").count(),
        1,
        "{stdout}"
    );
    // The unchanged second run prints nothing; the third, what changed and only that.
    assert_eq!(stdout.matches("gpudoctor diff").count(), 1, "{stdout}");
    let diff = stdout.split("gpudoctor diff").nth(1).unwrap();
    assert!(
        diff.contains("verdict driver.xid_events: skip → fail"),
        "{diff}"
    );
    assert!(!diff.contains("does the host see healthy GPUs?"), "{diff}");
}

/// deploy/mpijob-pairs.yaml: its launcher runs `gpudoctor pairs` with arguments it accepts, and
/// the hostfile the MPI Operator writes (`<job>-worker-N.<job>.<namespace>.svc slots=8`, v2beta1)
/// gives one host per worker.
#[test]
fn the_pairs_mpijob_launcher_runs_pairs_over_the_operators_hostfile() {
    use clap::Parser;
    let docs = documents(&common::repo().join("deploy/mpijob-pairs.yaml"));
    let spec = &docs[0]["spec"];
    let workers = spec["mpiReplicaSpecs"]["Worker"]["replicas"]
        .as_u64()
        .unwrap();
    let slots = spec["slotsPerWorker"].as_u64().unwrap();
    let launcher = &spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = launcher["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let cli = gpudoctor::cli::Cli::try_parse_from(&command)
        .unwrap_or_else(|e| panic!("deploy/mpijob-pairs.yaml launcher: {e}"));
    let gpudoctor::cli::Command::Pairs(mut args) = cli.command else {
        panic!("the launcher does not run pairs: {command:?}");
    };
    assert_eq!(
        args.hostfile.as_deref(),
        Some(Path::new("/etc/mpi/hostfile"))
    );
    assert_eq!(u64::from(args.gpus_per_node.unwrap()), slots);
    let dir = common::tempdir().unwrap();
    let hostfile = dir.path().join("hostfile");
    let lines: String = (0..workers)
        .map(|i| {
            format!("gpudoctor-pairs-worker-{i}.gpudoctor-pairs.gpudoctor.svc slots={slots}\n")
        })
        .collect();
    std::fs::write(&hostfile, lines).unwrap();
    args.hostfile = Some(hostfile);
    args.nccl_tests_dir = None; // the image's path; not on this machine
    let options = args.options(&[]).unwrap();
    assert_eq!(options.hosts.len() as u64, workers);
    let argv = options
        .plan
        .argv(&options.hosts[0], &options.hosts[1])
        .join(" ");
    assert!(
        argv.starts_with(&format!(
            "mpirun -np {} --host gpudoctor-pairs-worker-0.gpudoctor-pairs.gpudoctor.svc:{slots},",
            2 * slots
        )),
        "{argv}"
    );
    assert!(
        argv.contains("--allow-run-as-root") && argv.ends_with("-g 1 -c 1"),
        "{argv}"
    );
}

/// deploy/job.yaml's documented `sed 's/<placeholder>/gpu-node-17/'` (issue 43): the
/// placeholder is `nodeName` and nothing else a manifest means — not an env var's name (it was
/// `NODE_NAME`, so the sed renamed the downward-API variable too) — and after the sed, as its
/// header writes it, the Job names the node and still sets `NODE_NAME` from `spec.nodeName`.
#[test]
fn the_job_placeholder_is_the_node_name_only() {
    let text = std::fs::read_to_string(common::repo().join("deploy/job.yaml")).unwrap();
    let sed = text
        .lines()
        .find_map(|l| l.trim_start_matches('#').trim().strip_prefix("sed 's/"))
        .expect("the header's sed command");
    let (placeholder, rest) = sed.split_once('/').unwrap();
    let node = rest.split_once('/').unwrap().0;
    let before = documents(&common::repo().join("deploy/job.yaml"));
    assert_eq!(
        before[0]["spec"]["template"]["spec"]["nodeName"].as_str(),
        Some(placeholder)
    );
    // sed 's/A/B/': the first match on each line.
    let after: String = text
        .lines()
        .map(|l| format!("{}\n", l.replacen(placeholder, node, 1)))
        .collect();
    let job: Value = serde_yaml_ng::from_str(&after).unwrap();
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["nodeName"].as_str(), Some(node));
    let env = pod["containers"][0]["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "NODE_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"),
        "the sed renamed NODE_NAME: {env:?}"
    );
    for file in manifests() {
        for doc in documents(&file) {
            let text = doc.to_string();
            assert!(
                !text.contains(&format!("\"name\":\"{placeholder}\"")),
                "{}: {placeholder} names something",
                file.display()
            );
        }
    }
}
