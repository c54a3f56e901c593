//! What the deployment relies on beyond the schema: node checks take no GPU, one namespace,
//! scratch space for `record`, node Pods admitted, kept and named, the Job's placeholder.

use super::*;

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
