//! `sriov.pod_interface` on the view from inside a Pod: a Multus secondary interface backed by an
//! SR-IOV VF with its RDMA device passes; one without the RDMA device, or a veth, fails; outside a
//! Pod the check does not apply. An interface the network selection names (`sriov-net@ib0`) is
//! judged when `--pod-interface` names it, and a named one that is absent fails. The trees are
//! built the way sysfs lays them out (relative links).

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::Value;

const VF: &str = "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.1";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

/// A Pod's root: `net1` is VF 0000:18:00.1 of PF 0000:18:00.0, optionally with `mlx5_12`.
fn pod(root: &Path, in_pod: bool, rdma: bool) {
    write(root, ".gpudoctor/manifest.json", r#"{"format_version": 1}"#);
    if in_pod {
        write(
            root,
            ".gpudoctor/env.json",
            r#"{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}"#,
        );
    }
    write(
        root,
        "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/vendor",
        "0x15b3\n",
    );
    write(root, &format!("{VF}/vendor"), "0x15b3\n");
    link(root, &format!("{VF}/physfn"), "../0000:18:00.0");
    link(
        root,
        "sys/bus/pci/devices/0000:18:00.1",
        &format!("../../../{}", VF.trim_start_matches("sys/")),
    );
    write(root, &format!("{VF}/net/net1/operstate"), "up\n");
    link(
        root,
        &format!("{VF}/net/net1/device"),
        "../../../0000:18:00.1",
    );
    link(
        root,
        "sys/class/net/net1",
        &format!("../../{}/net/net1", VF.trim_start_matches("sys/")),
    );
    if rdma {
        write(
            root,
            &format!("{VF}/infiniband/mlx5_12/node_type"),
            "1: CA\n",
        );
    }
    write(root, "sys/devices/virtual/net/eth0/operstate", "up\n");
    link(root, "sys/class/net/eth0", "../../devices/virtual/net/eth0");
}

fn pod_interface(root: &Path) -> Value {
    pod_interface_with(root, &[])
}

fn pod_interface_with(root: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "check",
        "--root",
        root.to_str().unwrap(),
        "--only",
        "sriov",
        "--format",
        "json",
    ];
    args.extend(extra);
    let out = common::gpudoctor(&args);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["layers"][5]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "sriov.pod_interface")
        .cloned()
        .unwrap()
}

#[test]
fn a_vf_with_its_rdma_device_passes() {
    let dir = common::tempdir().unwrap();
    pod(dir.path(), true, true);
    let check = pod_interface(dir.path());
    assert_eq!(check["status"], "pass", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("net1 = VF 0000:18:00.1 with mlx5_12")
    );
}

#[test]
fn a_vf_without_rdma_device_fails() {
    let dir = common::tempdir().unwrap();
    pod(dir.path(), true, false);
    let check = pod_interface(dir.path());
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("no RDMA device"),
        "{check}"
    );
}

#[test]
fn a_veth_secondary_interface_fails() {
    let dir = common::tempdir().unwrap();
    pod(dir.path(), true, true);
    fs::remove_file(dir.path().join("sys/class/net/net1")).unwrap();
    write(dir.path(), "sys/devices/virtual/net/net1/operstate", "up\n");
    link(
        dir.path(),
        "sys/class/net/net1",
        "../../devices/virtual/net/net1",
    );
    let check = pod_interface(dir.path());
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("not backed by a PCI function"),
        "{check}"
    );
}

#[test]
fn outside_a_pod_it_does_not_apply() {
    let dir = common::tempdir().unwrap();
    pod(dir.path(), false, false);
    assert_eq!(pod_interface(dir.path())["status"], "skip");
}

/// The pod of [`pod`] with the VF's interface named `ib0` (`sriov-net@ib0` in the Pod's network
/// selection) instead of Multus's default `net1`.
fn pod_with_ib0(root: &Path) {
    pod(root, true, true);
    fs::rename(
        root.join(format!("{VF}/net/net1")),
        root.join(format!("{VF}/net/ib0")),
    )
    .unwrap();
    fs::remove_file(root.join("sys/class/net/net1")).unwrap();
    link(
        root,
        "sys/class/net/ib0",
        &format!("../../{}/net/ib0", VF.trim_start_matches("sys/")),
    );
}

#[test]
fn an_interface_named_in_the_network_selection_is_judged_with_pod_interface() {
    let dir = common::tempdir().unwrap();
    pod_with_ib0(dir.path());
    // Without the flag only net<N> are secondary interfaces: nothing to judge, and the skip says
    // how to name others.
    let check = pod_interface(dir.path());
    assert_eq!(check["status"], "skip", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("--pod-interface"),
        "{check}"
    );
    let check = pod_interface_with(dir.path(), &["--pod-interface", "ib0"]);
    assert_eq!(check["status"], "pass", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("ib0 = VF 0000:18:00.1 with mlx5_12"),
        "{check}"
    );
    // The plain eth0 (a veth) is judged too when named: it is not a VF.
    let check = pod_interface_with(dir.path(), &["--pod-interface", "ib0,eth0"]);
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("eth0 is not backed by a PCI function"),
        "{check}"
    );
}

#[test]
fn a_named_interface_missing_from_the_pod_fails() {
    let dir = common::tempdir().unwrap();
    pod_with_ib0(dir.path());
    let check = pod_interface_with(
        dir.path(),
        &["--pod-interface", "ib0", "--pod-interface", "ib1"],
    );
    assert_eq!(check["status"], "fail", "{check}");
    let summary = check["summary"].as_str().unwrap();
    assert!(
        summary.contains("ib1 is not an interface in this pod"),
        "{summary}"
    );
    assert!(
        check["evidence"].to_string().contains("sys/class/net/ib1"),
        "{check}"
    );
}
