//! Every Kubernetes manifest under `deploy/` is valid against the Kubernetes API: each document
//! is decoded into the API types k8s-openapi generates from the Kubernetes OpenAPI spec
//! (required fields, types, enums-as-strings) and encoded again — a field the API does not have
//! (a typo, a wrong level of indentation) does not survive the round trip and fails the test.
//! The MPIJob (a CRD, not in the spec) is checked the same way against the MPI Operator's
//! v2beta1 types written out in `tests/deploy/mpijob.rs`, its pod templates against the core API.
//! Each pod spec then passes the rules the API server adds to the types ([`api_server_rules`]:
//! enum values such as `restartPolicy` and `hostPath.type`, DNS-1123 names, quantities, absolute
//! paths, mounts of declared volumes).
//!
//! Beyond the schema, the properties the deployment relies on: host mounts are read-only except
//! the two output directories, the NPD plugin config fits NPD's rules and gpudoctor's message
//! limit, and the ConfigMap carries the JSON file verbatim.
//!
//! Submodules: `mpijob` (the MPIJob's API types), `api_validation` (the schema and the API
//! server's rules), `manifest_properties`, `npd_plugin`, `command_lines` (the entry script and
//! the MPIJob launchers) and `documentation` (docs/deploy.md and the textfile path).

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
#[path = "deploy/mpijob.rs"]
mod mpijob;

#[path = "deploy/api_validation.rs"]
mod api_validation;
#[path = "deploy/command_lines.rs"]
mod command_lines;
#[path = "deploy/documentation.rs"]
mod documentation;
#[path = "deploy/manifest_properties.rs"]
mod manifest_properties;
#[path = "deploy/npd_plugin.rs"]
mod npd_plugin;

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
