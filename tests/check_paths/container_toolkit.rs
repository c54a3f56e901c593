//! The container toolkit and runtimes: the toolkit absent, a non-default or CDI-only containerd,
//! CRI-O drop-ins, k3s and RKE2 configs, container GPUs judged only inside a Pod, and a node
//! without Kubernetes or a runtime.

use super::*;

const CONTAINERD: &str = "etc/containerd/config.toml";

const TOOLKIT_FILES: &[&str] = &[
    "usr/bin/nvidia-container-toolkit",
    "usr/bin/nvidia-container-runtime",
    "usr/bin/nvidia-container-runtime-hook",
    "usr/bin/nvidia-cdi-hook",
    "usr/bin/nvidia-ctk",
];

#[test]
fn toolkit_installed_fails_when_absent() {
    let node = Node::healthy();
    for rel in TOOLKIT_FILES {
        node.remove(rel);
    }
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.installed",
        Status::Warn,
        &["config present, but no toolkit binary found"],
    );
    node.remove("etc/nvidia-container-runtime");
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.installed",
        Status::Fail,
        &["nvidia container toolkit not installed"],
    );
    assert_evidence(
        &report,
        "toolkit.installed",
        &["no nvidia-container-runtime, nvidia-ctk or nvidia-container-runtime-hook"],
    );
    // The containerd handler still names the binary that is gone.
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Fail,
        &["runs /usr/bin/nvidia-container-runtime, which does not exist"],
    );
}

#[test]
fn a_non_default_nvidia_handler_needs_a_runtime_class() {
    let node = Node::healthy();
    let config = node.read(CONTAINERD).replace(
        "default_runtime_name = \"nvidia\"",
        "default_runtime_name = \"runc\"",
    );
    node.write(CONTAINERD, &config);
    assert_check(
        &node.run_all(),
        "toolkit.container_runtime",
        Status::Pass,
        &[
            "containerd: runtime handler `nvidia` (/usr/bin/nvidia-container-runtime), not the default (`runc`): GPU pods need `runtimeClassName: nvidia`; CDI on",
        ],
    );
}

/// containerd with no NVIDIA handler: CDI carries the GPUs, or nothing does.
#[test]
fn cdi_only_runtime_passes_and_without_cdi_fails() {
    let node = Node::healthy();
    // containerd 1.7's config (version 2), runc only.
    let without_handler = |cdi: &str| {
        format!(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n{cdi}\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"runc\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n"
        )
    };
    node.write(CONTAINERD, &without_handler("enable_cdi = true"));
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Pass,
        &["containerd: no nvidia runtime handler, CDI on: GPUs reach containers through CDI specs"],
    );
    // CDI is all there is, so the spec is judged and must name every GPU.
    assert_check(
        &report,
        "toolkit.cdi_specs",
        Status::Pass,
        &["CDI specs name all 8 GPU(s)"],
    );
    node.remove("var/run/cdi/nvidia.yaml");
    assert_check(
        &node.run_all(),
        "toolkit.cdi_specs",
        Status::Fail,
        &["the runtime relies on CDI but no nvidia.com/gpu spec exists"],
    );

    // containerd 1.7 (config version 2) has CDI off unless enabled.
    node.write(CONTAINERD, &without_handler(""));
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Fail,
        &["containerd has no nvidia runtime handler and CDI is off"],
    );
    assert_evidence(
        &report,
        "toolkit.container_runtime",
        &["handlers: runc; default: runc; CDI: off"],
    );
    // containerd 2.x (config version 3) has it on by default.
    node.write(
        CONTAINERD,
        "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n",
    );
    assert_check(
        &node.run_all(),
        "toolkit.container_runtime",
        Status::Pass,
        &["no nvidia runtime handler, CDI on"],
    );
}

#[test]
fn a_crio_node_is_read_from_its_drop_ins() {
    let node = Node::healthy();
    node.remove("etc/containerd");
    node.write(
        "etc/crio/crio.conf",
        "[crio.runtime]\ndefault_runtime = \"runc\"\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n",
    );
    node.write(
        "etc/crio/crio.conf.d/99-nvidia.toml",
        "[crio.runtime]\ndefault_runtime = \"nvidia\"\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\nruntime_type = \"OCI\"\n",
    );
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_runtime",
        Status::Pass,
        &[
            "CRI-O: runtime handler `nvidia` (/usr/bin/nvidia-container-runtime) is the default runtime; CDI on",
        ],
    );
    assert_evidence(
        &report,
        "toolkit.container_runtime",
        &[
            "etc/crio/crio.conf, etc/crio/crio.conf.d/99-nvidia.toml: handlers: runc, nvidia; default: nvidia",
        ],
    );
    // Without the drop-in, runc is the default and there is no NVIDIA handler; CRI-O has CDI
    // on by default.
    node.remove("etc/crio/crio.conf.d/99-nvidia.toml");
    assert_check(
        &node.run_all(),
        "toolkit.container_runtime",
        Status::Pass,
        &["CRI-O: no nvidia runtime handler, CDI on"],
    );
}

/// k3s and RKE2 run their own containerd: their generated config is read before (and instead
/// of) /etc/containerd/config.toml.
#[test]
fn k3s_and_rke2_containerd_configs_are_read() {
    for (dist, path) in [
        (
            "k3s",
            "var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        ),
        (
            "rke2",
            "var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        ),
    ] {
        let node = Node::healthy();
        // The distribution's config has the nvidia handler, but not as the default; the stock
        // /etc/containerd one (ignored by k3s/RKE2) has none at all.
        node.write(
            path,
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"runc\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"]\nruntime_type = \"io.containerd.runc.v2\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\".options]\nBinaryName = \"/usr/bin/nvidia-container-runtime\"\n",
        );
        node.write(CONTAINERD, "version = 2\n");
        let report = node.run_all();
        assert_check(
            &report,
            "toolkit.container_runtime",
            Status::Pass,
            &[
                "runtime handler `nvidia`",
                "GPU pods need `runtimeClassName: nvidia`",
            ],
        );
        let c = check(&report, "toolkit.container_runtime");
        assert_eq!(
            c.evidence[0].source, path,
            "{dist}: only its own config is read"
        );
        assert!(
            c.evidence[0]
                .observed
                .starts_with("version 2; handlers: nvidia")
        );
    }
}

fn in_pod(node: &Node, env: Value) {
    node.write(".gpudoctor/env.json", &env.to_string());
}

#[test]
fn container_gpus_judges_only_inside_a_pod() {
    let node = Node::healthy();
    let host = "10.96.0.1";
    in_pod(
        &node,
        json!({"KUBERNETES_SERVICE_HOST": host, "NVIDIA_VISIBLE_DEVICES": "all"}),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Pass,
        &[
            "container can access 8 GPU(s) 0000:18:00.0 ",
            " 0000:db:00.0: NVIDIA_VISIBLE_DEVICES=all, 8 /dev/nvidia<N> node(s)",
        ],
    );

    // Two GPUs given, eight seen: not what the runtime was asked for.
    let gpu0 = node.nvml_gpu(0)["uuid"].as_str().unwrap().to_string();
    let gpu1 = node.nvml_gpu(1)["uuid"].as_str().unwrap().to_string();
    in_pod(
        &node,
        json!({"KUBERNETES_SERVICE_HOST": host, "NVIDIA_VISIBLE_DEVICES": format!("{gpu0},{gpu1}")}),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Fail,
        &["container was given 2 GPU(s)", "but NVML sees 8"],
    );

    // Given GPUs, but the runtime injected none (no nvidia handler ran): NVML sees nothing.
    in_pod(
        &node,
        json!({"KUBERNETES_SERVICE_HOST": host, "NVIDIA_VISIBLE_DEVICES": "all"}),
    );
    init_error(&node, "library_not_found", "libnvidia-ml.so.1: cannot open");
    let report = node.run_all();
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Fail,
        &["container was given all GPUs (NVIDIA_VISIBLE_DEVICES=all) but NVML sees 0"],
    );
    assert!(
        check(&report, "toolkit.container_gpus")
            .hint
            .as_deref()
            .unwrap()
            .contains("runtimeClassName: nvidia")
    );

    // A Pod told by its service-account mount alone, given no GPUs: nothing to judge.
    let node = Node::healthy();
    node.write(
        "var/run/secrets/kubernetes.io/serviceaccount/namespace",
        "default\n",
    );
    assert_check(
        &node.run_all(),
        "toolkit.container_gpus",
        Status::Skip,
        &["running in a pod that was given no GPUs (NVIDIA_VISIBLE_DEVICES unset)"],
    );
    in_pod(&node, json!({"NVIDIA_VISIBLE_DEVICES": "void"}));
    assert_check(
        &node.run_all(),
        "toolkit.container_gpus",
        Status::Skip,
        &["NVIDIA_VISIBLE_DEVICES=\"void\""],
    );
}

#[test]
fn a_node_without_kubernetes_or_a_runtime_skips_toolkit_and_device_plugin() {
    let node = Node::healthy();
    for rel in TOOLKIT_FILES {
        node.remove(rel);
    }
    for rel in [
        "etc/nvidia-container-runtime",
        "etc/containerd",
        "var/lib/kubelet",
        "var/run/cdi",
        POD_RESOURCES,
    ] {
        node.remove(rel);
    }
    let report = node.run_all();
    for id in [Layer::Toolkit, Layer::DevicePlugin] {
        let l = layer(&report, id);
        assert_eq!(l.status, Status::Skip, "{l:#?}");
    }
    // Every device-plugin check skips for the one reason, which the layer then carries.
    assert_eq!(
        layer(&report, Layer::DevicePlugin).reason.as_deref(),
        Some("not a kubernetes node (no var/lib/kubelet)")
    );
    for code in [
        "toolkit.installed",
        "toolkit.container_runtime",
        "toolkit.cdi_specs",
        "toolkit.operator_validations",
    ] {
        assert_check(
            &report,
            code,
            Status::Skip,
            &["not a kubernetes node and no container runtime or nvidia toolkit configured"],
        );
    }
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Skip,
        &["not running inside a pod"],
    );
    assert_eq!(report.exit_code, 0, "{:?}", report.first_failure);
}
