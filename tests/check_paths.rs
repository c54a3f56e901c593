//! Check paths no fixture reaches. Each test copies a healthy fixture (`hgx-h100-healthy`, or
//! the one named) into a temporary directory, edits the one thing the case is about — a field of
//! `.gpudoctor/nvml.json`, `pod-resources.json` or `env.json`, a sysfs file, a runtime config —
//! replays it with every layer (`--keep-going`), and asserts the named check's status and the
//! part of its summary or evidence that carries the diagnosis. Each case is paired with its
//! near miss where the threshold matters (at the slowdown temperature fails, one degree below
//! passes), so a check whose logic broke in either direction fails here.
//!
//! What the copy is edited from: the healthy HGX H100 node (8 × H100 SXM5 on the `hgx-h100`
//! profile, a GPUDirect RDMA platform; containerd with the `nvidia` handler as default and CDI
//! on; a kubelet with 8 allocatable GPUs, 6 held by two pods). GPUs are renamed to a model no
//! built-in profile knows where a case needs "no profile".
//!
//! Tests by area, in tests/check_paths/: healthy_copy, device_plugin_allocations, mig_devices,
//! gpu_health, nvlink, topology, container_toolkit, real_gpu_nvml_cases.

mod common;

use common::node::{HEALTHY, NVML_JSON, Node, assert_check, assert_evidence, check, layer};
use gpudoctor::engine::RunOptions;
use gpudoctor::report::{Layer, Report, Status};
use serde_json::{Value, json};

const POD_RESOURCES: &str = ".gpudoctor/pod-resources.json";

fn set_gpu(node: &Node, index: u64, field: &str, value: Value) {
    node.edit_gpus(|d| {
        if d["index"] == index {
            d[field] = value.clone();
        }
    });
}

/// `nvml.json` as a failed `nvmlInit` leaves it.
fn init_error(node: &Node, kind: &str, message: &str) {
    node.write(
        NVML_JSON,
        &json!({"init_error": {"kind": kind, "message": message}, "device_count": 0, "devices": []})
            .to_string(),
    );
}

#[path = "check_paths/healthy_copy.rs"]
mod healthy_copy;

#[path = "check_paths/device_plugin_allocations.rs"]
mod device_plugin_allocations;

#[path = "check_paths/mig_devices.rs"]
mod mig_devices;

#[path = "check_paths/gpu_health.rs"]
mod gpu_health;

#[path = "check_paths/nvlink.rs"]
mod nvlink;

#[path = "check_paths/topology.rs"]
mod topology;

#[path = "check_paths/container_toolkit.rs"]
mod container_toolkit;

#[path = "check_paths/real_gpu_nvml_cases.rs"]
mod real_gpu_nvml_cases;
