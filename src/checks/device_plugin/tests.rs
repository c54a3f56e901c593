//! Tests of how the device-plugin layer resolves device ids to NVML GPUs and MIG devices (the
//! checks themselves are exercised end to end in tests/pod_resources.rs and tests/check_paths.rs).

use super::*;
use crate::answers::nvml::{CurrentPending, Reading};

#[test]
fn ids_resolve_to_gpus_by_uuid_index_and_replica() {
    let a = NvmlDevice {
        index: 0,
        uuid: Some("GPU-a".into()),
        ..Default::default()
    };
    let b = NvmlDevice {
        index: 1,
        uuid: Some("GPU-b".into()),
        ..Default::default()
    };
    let gpus = vec![&a, &b];
    assert_eq!(resolve("GPU-b::3", &gpus), Target::Gpu(1));
    assert_eq!(resolve("1", &gpus), Target::Gpu(1));
    assert_eq!(resolve("GPU-c", &gpus), Target::Unknown);
    // No GPU in MIG mode: a MIG id is unknown.
    assert_eq!(resolve("MIG-x", &gpus), Target::Unknown);
}

/// GKE's device plugin names GPUs by their /dev file (`nvidia<minor>`); the minor number is
/// not the NVML index (NVML orders by bus id, the driver numbers minors as it probes).
#[test]
fn gke_ids_resolve_by_the_device_minor_not_the_index() {
    let a = NvmlDevice {
        index: 0,
        minor_number: Reading::Value(3),
        ..Default::default()
    };
    let b = NvmlDevice {
        index: 1,
        minor_number: Reading::Value(0),
        ..Default::default()
    };
    let c = NvmlDevice {
        index: 2,
        ..Default::default()
    };
    let gpus = vec![&a, &b, &c];
    assert_eq!(resolve("nvidia3", &gpus), Target::Gpu(0));
    assert_eq!(resolve("nvidia0", &gpus), Target::Gpu(1));
    // A GPU whose minor NVML did not answer is never guessed.
    assert_eq!(resolve("nvidia2", &gpus), Target::Unknown);
    assert_eq!(resolve("nvidiactl", &gpus), Target::Unknown);
}

#[test]
fn mig_ids_resolve_to_their_gpu_when_enumerated() {
    let on = Reading::Value(CurrentPending {
        current: true,
        pending: true,
    });
    let mig = |index: u32, uuid: &str| MigDevice {
        index,
        uuid: Some(uuid.into()),
        name: Some("NVIDIA H100 80GB HBM3 MIG 1g.10gb".into()),
        ..Default::default()
    };
    let a = NvmlDevice {
        index: 0,
        uuid: Some("GPU-a".into()),
        ..Default::default()
    };
    let b = NvmlDevice {
        index: 1,
        uuid: Some("GPU-b".into()),
        mig_mode: on.clone(),
        mig_devices: Reading::Value(vec![mig(0, "MIG-b0"), mig(2, "MIG-b2")]),
        ..Default::default()
    };
    let gpus = vec![&a, &b];
    assert_eq!(resolve("MIG-b2", &gpus), Target::Mig(1, 1));
    assert_eq!(resolve("MIG-b2::1", &gpus), Target::Mig(1, 1));
    assert_eq!(resolve("MIG-gone", &gpus), Target::Unknown);
    assert_eq!(
        mig_label(&b, mig_at(&b, 1).unwrap()),
        "gpu 1 (?) mig 2 (1g.10gb)"
    );
    // MIG on but not enumerated (an older capture): a MIG id cannot be placed, nor called
    // unknown.
    let c = NvmlDevice {
        index: 2,
        mig_mode: on,
        ..Default::default()
    };
    let gpus = vec![&a, &b, &c];
    assert_eq!(resolve("MIG-b0", &gpus), Target::Mig(1, 0));
    assert_eq!(resolve("MIG-gone", &gpus), Target::MigUnattributed);
}
