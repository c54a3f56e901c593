//! The per-platform overlays under `deploy/overlays/` (issue 43), rendered by a real kustomize
//! (`kubectl kustomize`: Debian's `kubernetes-client` 1.20 carries kustomize v2.0.3, newer
//! kubectls v5; the overlays use only what both read) and every rendered object validated
//! against the Kubernetes API schemas of two versions by PyPI's `kubernetes-validate` (it
//! bundles the OpenAPI-derived JSON schemas, offline). `.ci/run` installs both; without them a
//! test says so and passes, but fails under `CI=true`.
//!
//! Then what each platform needs, on the rendered objects: node selection that works without
//! GPU Feature Discovery where the platform has none, the GKE driver directory and kubelet
//! config mounted and the ResourceQuota that admits the priority class, OpenShift's SCC granted
//! to the ServiceAccount, the k3s/RKE2 containerd directory, the GPU Operator's driver root,
//! and each overlay's `images:` entry in every container.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The platforms issue 43 names, each an overlay directory.
const PLATFORMS: [&str; 6] = ["gke", "eks", "aks", "openshift", "k3s-rke2", "gpu-operator"];

/// Two supported Kubernetes minor versions the rendered objects must both be valid in (the
/// oldest and a recent one of those kubernetes-validate bundles).
const VERSIONS: [&str; 2] = ["1.29", "1.34"];

fn deploy() -> PathBuf {
    common::repo().join("deploy")
}

/// kubectl on PATH, whose `kustomize` subcommand renders a kustomization.
fn kubectl() -> Option<PathBuf> {
    let found = common::tool_on_path("kubectl");
    if found.is_none() {
        eprintln!("kubectl: .ci/run installs Debian's kubernetes-client");
    }
    found
}

/// `kubernetes-validate`: in the virtual environment `.ci/run` makes under target/, else on
/// PATH. Missing: `None` with a notice, a failure under `CI=true`.
fn kubernetes_validate() -> Option<PathBuf> {
    let venv = common::repo().join("target/kubernetes-validate/bin/kubernetes-validate");
    if venv.is_file() {
        return Some(venv);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("kubernetes-validate"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !common::on_ci(),
            "kubernetes-validate is missing: .ci/run installs it (pip, PyPI) into target/kubernetes-validate"
        );
        eprintln!(
            "kubernetes-validate is missing: `python3 -m venv target/kubernetes-validate && target/kubernetes-validate/bin/pip install kubernetes-validate` to run this test"
        );
    }
    found
}

/// `kubectl kustomize DIR`: the rendered YAML stream (stderr carries kustomize's deprecation
/// notes for `bases`/`patchesStrategicMerge`, which the old kustomize needs).
fn render(kubectl: &Path, dir: &Path) -> String {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize {}:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn overlays() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(deploy().join("overlays"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}

/// Every overlay rendered: name → its objects.
fn rendered(kubectl: &Path) -> BTreeMap<String, Vec<Value>> {
    overlays()
        .into_iter()
        .map(|name| {
            let text = render(kubectl, &deploy().join("overlays").join(&name));
            (name, documents(&text))
        })
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn daemonset(docs: &[Value]) -> &Value {
    let found = find(docs, "DaemonSet");
    assert_eq!(found.len(), 1);
    found[0]
}

/// (host path, mount path, read-only, propagation) of the gpudoctor container's host mounts.
fn host_mounts(ds: &Value) -> Vec<(String, String, bool, String)> {
    let spec = &ds["spec"]["template"]["spec"];
    let volumes: BTreeMap<&str, &str> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?, v["hostPath"]["path"].as_str()?)))
        .collect();
    spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            let host = volumes.get(m["name"].as_str()?)?;
            Some((
                host.to_string(),
                m["mountPath"].as_str()?.to_string(),
                m["readOnly"] == true,
                m["mountPropagation"].as_str().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

/// The node-affinity terms (ORed), each as `key operator values`, plus the nodeSelector's
/// `key=value` pairs.
fn node_selection(ds: &Value) -> (Vec<String>, Vec<String>) {
    let spec = &ds["spec"]["template"]["spec"];
    let selector: Vec<String> = spec["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let affinity = terms
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["matchExpressions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|e| {
            format!(
                "{} {} {}",
                e["key"].as_str().unwrap_or(""),
                e["operator"].as_str().unwrap_or(""),
                e["values"]
                    .as_array()
                    .map(|v| v
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(","))
                    .unwrap_or_default()
            )
        })
        .collect();
    (selector, affinity)
}

/// OpenShift's `security.openshift.io/v1` SecurityContextConstraints as openshift/api
/// (security/v1/types.go) defines the fields the overlay writes; any other field fails.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Scc {
    api_version: String,
    kind: String,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    allow_privileged_container: bool,
    allow_privilege_escalation: Option<bool>,
    allow_host_dir_volume_plugin: bool,
    #[serde(rename = "allowHostIPC")]
    allow_host_ipc: bool,
    allow_host_network: bool,
    #[serde(rename = "allowHostPID")]
    allow_host_pid: bool,
    allow_host_ports: bool,
    read_only_root_filesystem: bool,
    run_as_user: Strategy,
    #[serde(rename = "seLinuxContext")]
    se_linux_context: Strategy,
    fs_group: Strategy,
    supplemental_groups: Strategy,
    volumes: Vec<String>,
    users: Vec<String>,
    groups: Vec<String>,
    priority: Option<i32>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Strategy {
    #[serde(rename = "type")]
    type_: String,
}

/// Every overlay renders with the kubectl here, and every object validates against the API
/// schemas of two Kubernetes versions (strict: an unknown field fails). The SCC, a CRD-like
/// OpenShift kind the bundled schemas lack, is checked against its openshift/api fields.
#[test]
fn every_overlay_renders_and_validates_against_two_kubernetes_versions() {
    let (Some(kubectl), Some(validate)) = (kubectl(), kubernetes_validate()) else {
        return;
    };
    for platform in PLATFORMS {
        assert!(
            deploy()
                .join("overlays")
                .join(platform)
                .join("kustomization.yaml")
                .is_file(),
            "no overlay for {platform}"
        );
    }
    let tmp = common::tempdir().unwrap();
    let mut dirs: Vec<(String, PathBuf)> = overlays()
        .into_iter()
        .map(|n| (n.clone(), deploy().join("overlays").join(n)))
        .collect();
    dirs.push(("deploy".into(), deploy()));
    // node-problem-detector: its base and each platform's variant.
    dirs.push(("npd".into(), deploy().join("npd")));
    for platform in overlays() {
        let npd = deploy().join("overlays").join(&platform).join("npd");
        if npd.is_dir() {
            dirs.push((format!("{platform}-npd"), npd));
        }
    }
    // The manifests applied on their own, as they are: the node Job and the validation Job.
    let files = ["job.yaml", "validate.yaml"].map(|f| (f.to_string(), deploy().join(f)));
    for (name, dir) in dirs.into_iter().chain(files) {
        let text = if dir.is_dir() {
            render(&kubectl, &dir)
        } else {
            // kubernetes-validate keys objects by metadata.name and stops at a Job that has
            // only generateName (which the API server turns into a name): give it the name
            // the API server would start from.
            std::fs::read_to_string(&dir)
                .unwrap()
                .replace("  generateName: ", "  name: ")
        };
        let docs = documents(&text);
        assert!(!docs.is_empty(), "{name} renders nothing");
        let file = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(&file, &text).unwrap();
        let unknown: Vec<&Value> = docs
            .iter()
            .filter(|d| d["apiVersion"] == "security.openshift.io/v1")
            .collect();
        for scc in &unknown {
            let typed: Scc = serde_json::from_value((*scc).clone())
                .unwrap_or_else(|e| panic!("{name}: SecurityContextConstraints: {e}"));
            assert_eq!(typed.kind, "SecurityContextConstraints");
            assert!(
                scc["metadata"]["namespace"].is_null(),
                "{name}: an SCC is cluster-scoped"
            );
        }
        for version in VERSIONS {
            let out = Command::new(&validate)
                .args(["--strict", "-k", version])
                .arg(&file)
                .output()
                .unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{name} against {version}:\n{said}");
            let passed = said
                .lines()
                .filter(|l| l.contains(" passed for resource "))
                .count();
            assert_eq!(
                passed,
                docs.len() - unknown.len(),
                "{name} against {version}: every object but the SCC validated:\n{said}"
            );
        }
    }
}

/// The validator is real: a misspelt field and a wrong type fail it.
#[test]
fn kubernetes_validate_refuses_what_the_api_refuses() {
    let Some(validate) = kubernetes_validate() else {
        return;
    };
    let tmp = common::tempdir().unwrap();
    for (what, text) in [
        (
            "unknown field",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: b\ndatta: {}\n",
        ),
        (
            "wrong type",
            "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: a\nspec:\n  scopeSelector: []\n",
        ),
    ] {
        let file = tmp.path().join("bad.yaml");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(&validate)
            .args(["--strict", "-k", VERSIONS[0]])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what} passed");
    }
}

/// node-problem-detector runs gpudoctor on the same nodes with the same host paths as the
/// platform's gpudoctor DaemonSet: its overlay (`overlays/<platform>/npd`) selects nodes as the
/// platform's DaemonSet does and mounts what it adds; a platform without one adds nothing NPD's
/// base lacks (the GPU Operator's /run/nvidia/driver is under NPD's /run, propagated).
#[test]
fn npd_runs_where_and_with_what_each_platforms_daemonset_does() {
    let Some(kubectl) = kubectl() else {
        return;
    };
    let base = documents(&render(&kubectl, &deploy().join("base")));
    let base_mounts = host_mounts(daemonset(&base));
    let npd_base = documents(&render(&kubectl, &deploy().join("npd")));
    for (name, docs) in rendered(&kubectl) {
        let ds = daemonset(&docs);
        let dir = deploy().join("overlays").join(&name).join("npd");
        let npd_docs = if dir.is_dir() {
            documents(&render(&kubectl, &dir))
        } else {
            npd_base.clone()
        };
        let npd = daemonset(&npd_docs);
        assert_eq!(npd["metadata"]["name"], "gpudoctor-npd");
        let (selector, affinity) = node_selection(ds);
        let (npd_selector, npd_affinity) = node_selection(npd);
        assert_eq!(
            (npd_selector, npd_affinity),
            (selector, affinity),
            "{name}: NPD selects other nodes than the platform's DaemonSet"
        );
        let npd_mounts = host_mounts(npd);
        for (host, mount, _, propagation) in host_mounts(ds) {
            if base_mounts.iter().any(|(h, ..)| *h == host) {
                continue;
            }
            let covered = npd_mounts.iter().any(|(h, m, _, p)| {
                (*h == host && *m == mount)
                    || (host.starts_with(&format!("{h}/"))
                        && mount == format!("{m}{}", &host[h.len()..])
                        && (propagation.is_empty() || *p == propagation))
            });
            assert!(
                covered,
                "{name}: NPD lacks the host mount {host} at {mount}"
            );
        }
    }
}

/// What each platform needs, on the objects kustomize renders.
#[test]
fn each_overlay_carries_what_its_platform_needs() {
    let Some(kubectl) = kubectl() else {
        return;
    };
    let all = rendered(&kubectl);
    for (name, docs) in &all {
        let ds = daemonset(docs);
        // Every read-only host mount is the host's path under /host, where --root /host finds it.
        for (host, mount, read_only, _) in host_mounts(ds) {
            if read_only {
                assert_eq!(
                    mount,
                    format!("/host{host}"),
                    "{name}: {host} mounted at {mount}"
                );
            }
        }
        // The overlay's images: entry is what every container runs.
        let kustomization = std::fs::read_to_string(
            deploy()
                .join("overlays")
                .join(name)
                .join("kustomization.yaml"),
        )
        .unwrap();
        let k: Value = serde_yaml_ng::from_str(&kustomization).unwrap();
        let image = k["images"]
            .as_array()
            .and_then(|i| i.iter().find(|i| i["name"] == "gpudoctor"))
            .unwrap_or_else(|| panic!("{name}: no images: entry for gpudoctor"));
        let want = format!(
            "{}:{}",
            image["newName"].as_str().unwrap(),
            image["newTag"].as_str().unwrap()
        );
        for c in ds["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
        {
            assert_eq!(c["image"].as_str(), Some(want.as_str()), "{name}");
        }
    }

    let selection = |name: &str| node_selection(daemonset(&all[name]));
    let mounts = |name: &str| host_mounts(daemonset(&all[name]));

    // GKE: no GFD, so no nvidia.com/gpu.present; its own accelerator label instead.
    let (selector, affinity) = selection("gke");
    assert!(selector.is_empty(), "gke: {selector:?}");
    assert_eq!(affinity, ["cloud.google.com/gke-accelerator Exists "]);
    let gke = mounts("gke");
    for path in [
        "/home/kubernetes/bin/nvidia",
        "/home/kubernetes/kubelet-config.yaml",
    ] {
        assert!(
            gke.iter().any(|(h, _, ro, _)| h == path && *ro),
            "gke mounts no {path}: {gke:?}"
        );
    }
    let ds = daemonset(&all["gke"]);
    let priority = ds["spec"]["template"]["spec"]["priorityClassName"]
        .as_str()
        .unwrap();
    let quotas = find(&all["gke"], "ResourceQuota");
    assert_eq!(quotas.len(), 1, "gke: the quota for the priority class");
    let quota = quotas[0];
    assert_eq!(quota["metadata"]["namespace"], ds["metadata"]["namespace"]);
    let scope = &quota["spec"]["scopeSelector"]["matchExpressions"][0];
    assert_eq!(scope["scopeName"], "PriorityClass");
    assert_eq!(scope["operator"], "In");
    assert!(
        scope["values"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == priority),
        "gke: the quota admits {priority}"
    );

    // EKS and AKS: their provisioners' GPU labels; GFD's label only as one alternative.
    for (name, label) in [
        (
            "eks",
            "eks.amazonaws.com/instance-gpu-manufacturer In nvidia",
        ),
        (
            "eks",
            "karpenter.k8s.aws/instance-gpu-manufacturer In nvidia",
        ),
        ("aks", "kubernetes.azure.com/accelerator In nvidia"),
    ] {
        let (selector, affinity) = selection(name);
        assert!(selector.is_empty(), "{name}: {selector:?}");
        assert!(affinity.iter().any(|a| a == label), "{name}: {affinity:?}");
    }

    // OpenShift: an SCC that admits the Pod, granted to its ServiceAccount only.
    let os = &all["openshift"];
    let scc = find(os, "SecurityContextConstraints");
    assert_eq!(scc.len(), 1);
    let scc: Scc = serde_json::from_value(scc[0].clone()).unwrap();
    assert!(scc.allow_privileged_container && scc.allow_host_dir_volume_plugin);
    assert!(scc.volumes.iter().any(|v| v == "hostPath"));
    let ds = daemonset(os);
    let sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    let namespace = ds["metadata"]["namespace"].as_str().unwrap();
    let role = find(os, "ClusterRole")[0];
    let rule = &role["rules"][0];
    assert_eq!(rule["verbs"], serde_json::json!(["use"]));
    assert_eq!(
        rule["resources"],
        serde_json::json!(["securitycontextconstraints"])
    );
    assert_eq!(
        rule["resourceNames"][0].as_str(),
        scc.metadata.name.as_deref()
    );
    let binding = find(os, "RoleBinding")[0];
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], sa);
    assert_eq!(binding["subjects"][0]["namespace"], namespace);
    assert_eq!(binding["metadata"]["namespace"], namespace);
    // CRI-O's socket and config are under the base's /run and /etc mounts.
    let os_mounts = mounts("openshift");
    for host in ["/run", "/etc"] {
        assert!(os_mounts.iter().any(|(h, _, _, _)| h == host), "{host}");
    }

    // k3s / RKE2: containerd's generated config under /var/lib/rancher.
    assert!(
        mounts("k3s-rke2")
            .iter()
            .any(|(h, _, ro, _)| h == "/var/lib/rancher" && *ro),
        "k3s-rke2 mounts /var/lib/rancher"
    );

    // GPU Operator: the driver root, following mounts the operator makes later.
    assert!(
        mounts("gpu-operator")
            .iter()
            .any(|(h, _, ro, p)| h == "/run/nvidia/driver" && *ro && p == "HostToContainer"),
        "gpu-operator mounts /run/nvidia/driver with HostToContainer"
    );
}
