//! The node recognises its platform from what it shows (issue 43, item 3): a healthy capture
//! mutated as GKE or EKS lay a node out is judged healthy; a node with neither GPU nor RDMA
//! device skips the `rdma` and `topology` layers with a reason instead of passing on quiet
//! kernel-log checks alone.

mod common;

use std::fs;

use common::node::{HEALTHY, Node, check, layer};
use gpudoctor::report::{Layer, Status};

const PLUGIN_DIR: &str = "var/lib/kubelet/device-plugins";

/// Device ids as GKE's device plugin writes them: the GPU's /dev file name (container-engine-
/// accelerators pkg/gpu/nvidia/manager.go, `discoverGPUs`), `nvidia<minor>` for `GPU-<uuid>`.
fn as_gke_ids(node: &Node) {
    let nvml: serde_json::Value = serde_json::from_str(&node.read(".gpudoctor/nvml.json")).unwrap();
    let mut by_uuid = Vec::new();
    for d in nvml["devices"].as_array().unwrap() {
        let uuid = d["uuid"].as_str().unwrap().to_string();
        let minor = d["minor_number"]["value"].as_u64().unwrap();
        by_uuid.push((uuid, format!("nvidia{minor}")));
    }
    assert_eq!(by_uuid.len(), 8);
    for rel in [
        ".gpudoctor/pod-resources.json",
        "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
    ] {
        node.edit(rel, |text| {
            let mut text = text.to_string();
            for (uuid, id) in &by_uuid {
                text = text.replace(uuid, id);
            }
            text
        });
    }
    node.remove(&format!("{PLUGIN_DIR}/nvidia-gpu.sock"));
    node.write(&format!("{PLUGIN_DIR}/nvidiaGPU-1733472000.sock"), "");
}

fn assert_healthy_k8s_layers(node: &Node) {
    let report = node.run_all();
    for id in [Layer::DevicePlugin, Layer::Topology] {
        let l = layer(&report, id);
        assert_eq!(l.status, Status::Pass, "{l:#?}");
    }
    let allocatable = check(&report, "device_plugin.allocatable");
    assert_eq!(allocatable.status, Status::Pass, "{allocatable:#?}");
    let policy = check(&report, "topology.kubelet_topology_manager");
    assert_eq!(policy.status, Status::Pass, "{policy:#?}");
}

#[test]
fn gke_device_ids_and_gkes_kubelet_config_are_healthy() {
    let node = Node::copy(HEALTHY);
    as_gke_ids(&node);
    let config = node.read("var/lib/kubelet/config.yaml");
    node.remove("var/lib/kubelet/config.yaml");
    node.write("home/kubernetes/kubelet-config.yaml", &config);
    assert_healthy_k8s_layers(&node);
    let report = node.run_all();
    let kubelet = check(&report, "device_plugin.kubelet");
    assert!(
        kubelet
            .summary
            .contains("home/kubernetes/kubelet-config.yaml, found by GKE's path"),
        "{}",
        kubelet.summary
    );
    // One GPU the plugin stopped advertising is named, by its bus id, not "unknown".
    let node2 = Node::copy(HEALTHY);
    as_gke_ids(&node2);
    node2.edit_json(".gpudoctor/pod-resources.json", |v| {
        v["allocatable"]["value"]["devices"]
            .as_array_mut()
            .unwrap()
            .retain(|d| d["device_ids"][0] != "nvidia5");
    });
    let report = node2.run_all();
    let allocatable = check(&report, "device_plugin.allocatable");
    assert_eq!(allocatable.status, Status::Fail, "{allocatable:#?}");
    assert!(
        allocatable.summary.contains("GPU 5 (0000:ab:00.0)"),
        "{}",
        allocatable.summary
    );
}

#[test]
fn eks_nodeadm_config_with_drop_ins_named_on_the_kubelets_command_line() {
    let node = Node::copy(HEALTHY);
    as_gke_ids(&node);
    let config = node.read("var/lib/kubelet/config.yaml");
    node.remove("var/lib/kubelet/config.yaml");
    // nodeadm's base file without the policies, the user's drop-in with them.
    let (base, policies): (Vec<&str>, Vec<&str>) = config
        .lines()
        .partition(|l| !l.starts_with("topologyManager"));
    node.write("etc/kubernetes/kubelet/config.json", &base.join("\n"));
    node.write(
        "etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf",
        &policies.join("\n"),
    );
    node.write("proc/2417/comm", "kubelet\n");
    node.write(
        "proc/2417/cmdline",
        "/usr/bin/kubelet\0--config=/etc/kubernetes/kubelet/config.json\0--kubeconfig=/var/lib/kubelet/kubeconfig\0--config-dir=/etc/kubernetes/kubelet/config.json.d\0",
    );
    assert_healthy_k8s_layers(&node);
    let report = node.run_all();
    let kubelet = check(&report, "device_plugin.kubelet");
    assert!(
        kubelet
            .summary
            .contains("found by the kubelet's command line (pid 2417)"),
        "{}",
        kubelet.summary
    );
    // Evidence names the file that set each value: the drop-in, where an engineer edits it.
    let policy = check(&report, "topology.kubelet_topology_manager");
    let sources: Vec<&str> = policy.evidence.iter().map(|e| e.source.as_str()).collect();
    assert!(
        sources.contains(
            &"etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf: topologyManagerPolicy"
        ),
        "{sources:?}"
    );
    assert!(
        sources.contains(&"etc/kubernetes/kubelet/config.json: cpuManagerPolicy"),
        "{sources:?}"
    );
    // The drop-in's policy wins over the base file's default.
    node.write(
        "etc/kubernetes/kubelet/config.json.d/50-site.conf",
        "topologyManagerPolicy: none\n",
    );
    let report = node.run_all();
    let policy = check(&report, "topology.kubelet_topology_manager");
    assert_eq!(policy.status, Status::Warn, "{policy:#?}");
}

#[test]
fn aks_kubelet_config_found_by_its_path_and_by_a_two_argument_config_flag() {
    // AgentBaker writes /etc/default/kubeletconfig.json; a capture without the kubelet's
    // process still finds it by AKS's path.
    let node = Node::copy(HEALTHY);
    let config = node.read("var/lib/kubelet/config.yaml");
    node.remove("var/lib/kubelet/config.yaml");
    node.write("etc/default/kubeletconfig.json", &config);
    assert_healthy_k8s_layers(&node);
    let report = node.run_all();
    let kubelet = check(&report, "device_plugin.kubelet");
    assert!(
        kubelet
            .summary
            .contains("etc/default/kubeletconfig.json, found by AKS (AgentBaker)'s path"),
        "{}",
        kubelet.summary
    );
    // The kubelet unit passes `--config /etc/default/kubeletconfig.json` as two arguments
    // (AgentBaker's 10-componentconfig.conf); the file elsewhere is found only through it.
    node.remove("etc/default/kubeletconfig.json");
    node.write("etc/aks/kubelet-custom.json", &config);
    node.write("proc/2874/comm", "kubelet\n");
    node.write(
        "proc/2874/cmdline",
        "/usr/local/bin/kubelet\0--enable-server\0--kubeconfig\0/var/lib/kubelet/kubeconfig\0--config\0/etc/aks/kubelet-custom.json\0",
    );
    assert_healthy_k8s_layers(&node);
    let report = node.run_all();
    let kubelet = check(&report, "device_plugin.kubelet");
    assert!(
        kubelet.summary.contains(
            "etc/aks/kubelet-custom.json, found by the kubelet's command line (pid 2874)"
        ),
        "{}",
        kubelet.summary
    );
}

#[test]
fn a_node_without_gpus_and_rdma_devices_skips_rdma_and_topology_with_a_reason() {
    let node = Node::copy("no-gpu-on-pci");
    for dev in fs::read_dir(node.path("sys/class/infiniband")).unwrap() {
        let name = dev.unwrap().file_name().to_string_lossy().into_owned();
        let dir = node.ib_dir(&name);
        let function = dir.split("/infiniband/").next().unwrap().to_string();
        let bdf = function.rsplit('/').next().unwrap().to_string();
        node.remove(&format!("sys/bus/pci/devices/{bdf}"));
        node.remove(&function);
    }
    node.remove("sys/class/infiniband");
    // A kernel log to read (a /dev/kmsg record as `record` keeps it), with nothing in it for
    // either layer.
    node.write(
        ".gpudoctor/kmsg.txt",
        "6,1,0,-;Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 (Ubuntu 5.15.0-105.115-generic 5.15.149)\n",
    );
    let report = node.run_all();
    for id in [Layer::Rdma, Layer::Topology] {
        let l = layer(&report, id);
        let shown: Vec<String> = l
            .checks
            .iter()
            .map(|c| format!("{} {:?} {}", c.code, c.status, c.summary))
            .collect();
        assert_eq!(l.status, Status::Skip, "{shown:#?}");
        assert!(l.reason.as_deref().is_some_and(|r| !r.is_empty()), "{l:#?}");
    }
    // rdma's kernel-log checks read the log and found nothing: the reason says both.
    let rdma = layer(&report, Layer::Rdma)
        .reason
        .clone()
        .unwrap_or_default();
    assert!(
        rdma.contains("no RDMA devices") && rdma.contains("kernel-log check(s) found nothing"),
        "{rdma}"
    );
    // The kernel-log checks still ran and say what they read.
    assert_eq!(check(&report, "rdma.nic_events").status, Status::Pass);
}

#[test]
fn crio_reads_every_drop_in_whatever_its_extension() {
    // crio.conf.d(5): every file of the directory, in name order. A drop-in named without an
    // extension (as `nvidia-ctk runtime configure --runtime=crio --config=...` may be told to
    // write it) is read; a subdirectory is not a file and does not stop the reading.
    let node = Node::healthy();
    node.remove("etc/containerd/config.toml");
    node.write("etc/crio/crio.conf", "[crio]\n[crio.runtime]\n");
    node.write(
        "etc/crio/crio.conf.d/99-nvidia",
        "[crio]\n  [crio.runtime]\n    default_runtime = \"nvidia\"\n    [crio.runtime.runtimes]\n      [crio.runtime.runtimes.nvidia]\n        runtime_path = \"/usr/bin/nvidia-container-runtime\"\n        runtime_type = \"oci\"\n",
    );
    node.write("etc/crio/crio.conf.d/old/10-unused.conf", "not toml [[[");
    let report = node.run_all();
    let runtime = check(&report, "toolkit.container_runtime");
    assert_eq!(runtime.status, Status::Pass, "{runtime:#?}");
    assert!(
        runtime.summary.contains("`nvidia`") && runtime.summary.contains("default"),
        "{}",
        runtime.summary
    );
}
