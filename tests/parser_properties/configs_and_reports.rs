//! Configs and saved files: kubelet and pod-resources files, the container stack (toolkit,
//! containerd, CRI-O, CDI), kernel command lines, saved reports and profile files.

use super::*;

// ---------------------------------------------------------------------------------------------
// Kubernetes: kubelet config, pod-resources answers, checkpoint, device ids

#[test]
fn kubelet_files_never_panic() {
    let configs = vec![
        healthy("var/lib/kubelet/config.yaml"),
        "{\"kind\":\"KubeletConfiguration\",\"topologyManagerPolicy\":\"single-numa-node\"}".into(),
        "---\nkind: KubeletConfiguration # c\ncpuManagerPolicy: 'static'\nmemoryManagerPolicy: ~\n"
            .into(),
    ];
    property(
        "kubelet config",
        move || {
            inputs(
                &[
                    "kind", ":", " ", "\"", "'", "#", "---", "...", "{", "- ", "~", "null",
                ],
                configs,
            )
        },
        |t| {
            let _ = kubelet::parse_kubelet_config(t);
        },
    );
    let mut answers = capture_files("pod-resources.json");
    answers.push(healthy(
        "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
    ));
    property(
        "pod resources",
        move || {
            inputs(
                &[
                    "{",
                    "}",
                    "[",
                    "]",
                    "\"Data\":",
                    "\"PodDeviceEntries\":",
                    "\"GPU-",
                    "::",
                    "null",
                    ",",
                ],
                answers,
            )
        },
        |t| {
            let _ = gpudoctor::answers::pod_resources::parse_pod_resources_json(t);
            let _ = k8s::parse_checkpoint(t);
        },
    );
    property(
        "device ids",
        move || {
            inputs(
                &[
                    "GPU-",
                    "MIG-",
                    "::",
                    "0",
                    "1",
                    "4294967296",
                    "nvidia.com/gpu",
                    "/",
                    ".",
                ],
                strings(&[
                    "GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b::3",
                    "nvidia.com/mig-1g.10gb",
                ]),
            )
        },
        |t| {
            let _ = k8s::parse_device_id(t);
            let _ = k8s::is_nvidia_resource(t);
            let _ = Layer::from_str(t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Container stack: toolkit, containerd, CRI-O, CDI

const TOML_TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "plugins.",
    "\"io.containerd.grpc.v1.cri\"",
    ".containerd",
    " = ",
    "\"nvidia\"",
    "true",
    "false",
    "imports",
    "version = 2",
    "\n",
    "'",
    "\"\"\"",
    "{",
    "}",
    ",",
    "default_runtime_name",
    "runtimes.nvidia",
    "[crio.runtime]",
    "runtime_path",
    "enable_cdi",
];

#[test]
fn container_configs_never_panic() {
    let samples = vec![
        healthy("etc/containerd/config.toml"),
        healthy("etc/nvidia-container-runtime/config.toml"),
        "[crio]\n  [crio.runtime]\n    default_runtime = \"nvidia\"\n    [crio.runtime.runtimes]\n      [crio.runtime.runtimes.nvidia]\n        runtime_path = \"/usr/bin/nvidia-container-runtime\"\n        runtime_type = \"oci\"\n".into(),
        "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n".into(),
    ];
    property(
        "toml configs",
        move || inputs(TOML_TOKENS, samples),
        |t| {
            let _ = toolkit::parse_toolkit_config(t);
            let _ = toolkit::parse_containerd(t, "etc/containerd/config.toml");
            let _ = toolkit::parse_crio(t, "etc/crio/crio.conf");
            let _ = toolkit::line_column(t, t.len() / 2);
            let _ = toolkit::line_column(t, usize::MAX);
        },
    );
    let specs = vec![
        healthy("var/run/cdi/nvidia.yaml"),
        "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":\"0\"}]}"
            .into(),
    ];
    property(
        "cdi",
        move || {
            inputs(
                &[
                    "kind: ",
                    "nvidia.com/gpu",
                    "devices:",
                    "- name: ",
                    "&a ",
                    "*a",
                    "!!str ",
                    "{",
                    "[",
                    "\n  ",
                ],
                specs,
            )
        },
        |t| {
            let _ = cdi::parse_cdi_spec(t, "etc/cdi/nvidia.yaml");
        },
    );
}

#[test]
fn kernel_command_lines_never_panic() {
    property(
        "cmdline",
        move || {
            inputs(
                &[
                    "iommu=",
                    "pt",
                    "intel_iommu=",
                    "on",
                    "off",
                    "amd_iommu=",
                    "\"",
                    " ",
                    "=",
                    "BOOT_IMAGE=",
                    "--",
                ],
                vec![healthy("proc/cmdline")],
            )
        },
        |t| {
            let _ = iommu::parse_cmdline(t).asks_passthrough();
            let _ = gpudoctor::facts::node::parse_cmdline_params(t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Saved reports (`diff`, `fleet`): any JSON, any version

#[test]
fn saved_reports_never_panic() {
    let mut samples = Vec::new();
    for name in ["hgx-h100-healthy.json", "h100-nccl-low-bandwidth.json"] {
        let path = repo().join("tests/snapshots").join(name);
        samples.push(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    property(
        "saved report",
        move || {
            inputs(
                &[
                    "{\"schema_version\": 1, \"layers\": [",
                    "{\"id\": \"driver\", \"status\": \"pass\", \"checks\": [",
                    "{\"code\": \"x.y\", \"status\": \"fail\", \"figures\": [",
                    "{\"name\": \"n\", \"value\": ",
                    "\"facts\": {\"version\": 1, \"sections\": {",
                    "]}",
                    "}",
                    ",",
                    "null",
                ],
                samples,
            )
        },
        |t| {
            let _ = gpudoctor::saved::parse(t);
            let _ = gpudoctor::saved::parse_facts(t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Profile files

#[test]
fn profile_files_never_panic() {
    let samples = strings(&[
        "# /etc/gpudoctor/lab-h100.toml\nbase = \"hgx-h100-80gb\"\nname = \"lab-h100\"\nrdma_ports = 4\nrdma_rate_gbps = 400\n",
        "name = \"x\"\ngpu_count = 8\ngpu_model = \"H100\"\npcie_gen = 5\npcie_width = 16\nnvlinks_per_gpu = 18\n",
        "gpu_count = \"eight\"\n",
        "gpu_cout = 8\n",
    ]);
    property(
        "profile",
        move || {
            inputs(
                &[
                    "base = ",
                    "\"hgx-h100-80gb\"",
                    "name = ",
                    "gpu_count = ",
                    "8",
                    "-1",
                    "[x]",
                    "\n",
                    "nccl_busbw_gbps = ",
                    "1e400",
                ],
                samples,
            )
        },
        |t| {
            let _ = profile::parse_file(Path::new("lab.toml"), t);
        },
    );
}
