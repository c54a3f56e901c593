//! The schema and the API server: every manifest round-trips through its API types and passes
//! [`api_server_rules`], with pinned images and read-only host mounts; the checks catch what
//! they should.

use super::*;

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
