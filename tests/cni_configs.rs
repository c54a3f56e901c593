//! `sriov.multus` on the CNI directory as containerd reads it (`facts/cni.rs`): the real configs
//! in tests/data/cni (README there names their sources) placed under their on-node names on the
//! healthy SR-IOV node. Multus must be the first config by name and load; one shadowed by an
//! earlier file, one that is not JSON, a first file that does not load, a `clusterNetwork` that
//! names a missing file, and no Multus at all are each named.

mod common;

use common::node::{Node, assert_check, assert_evidence};
use gpudoctor::report::Status;

const DIR: &str = "etc/cni/net.d";

fn data(name: &str) -> String {
    std::fs::read_to_string(common::repo().join("tests/data/cni").join(name)).unwrap()
}

fn sriov_node() -> Node {
    Node::copy("h100-sriov-healthy")
}

#[test]
fn multus_first_by_name_passes_and_names_its_default_network() {
    let node = sriov_node();
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Pass,
        &[
            "Multus is the default network (etc/cni/net.d/00-multus.conf, `multus`; default network k8s-pod-network)",
        ],
    );
    // Multus's own generated file, and the config its old image shipped, pass the same way.
    node.write(
        &format!("{DIR}/00-multus.conf"),
        &data("multus-thin-entrypoint-00-multus.conf"),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Pass,
        &["default network test1"],
    );
    node.write(
        &format!("{DIR}/00-multus.conf"),
        &data("multus-images-70-multus.conf"),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Pass,
        &["default network default-cni-network"],
    );
    // Files the runtime does not read are not configs.
    node.write(&format!("{DIR}/00-aaa.conf.bak"), "not json");
    assert_check(&node.run_all(), "sriov.multus", Status::Pass, &[]);
}

#[test]
fn a_multus_config_shadowed_by_an_earlier_file_fails() {
    let node = sriov_node();
    node.write(
        &format!("{DIR}/00-calico.conflist"),
        &data("calico-10-calico.conflist"),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["Multus config etc/cni/net.d/00-multus.conf is shadowed by 00-calico.conflist"],
    );
    // flannel's 10-flannel.conflist after Multus does not shadow it.
    node.remove(&format!("{DIR}/00-calico.conflist"));
    node.write(
        &format!("{DIR}/10-flannel.conflist"),
        &data("kube-flannel-10-flannel.conflist"),
    );
    assert_check(&node.run_all(), "sriov.multus", Status::Pass, &[]);
}

#[test]
fn a_multus_config_that_is_not_json_stops_containerd() {
    let node = sriov_node();
    node.remove(&format!("{DIR}/00-multus.conf"));
    node.write(
        &format!("{DIR}/multus.conf"),
        &data("multus-examples-ptp-portmap-not-json.conf"),
    );
    // 10-calico.conflist sorts before multus.conf: Multus is both broken and shadowed.
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["shadowed by 10-calico.conflist and does not load (not json"],
    );
    // First by name and broken: containerd stops there; CRI-O would read on.
    node.remove(&format!("{DIR}/multus.conf"));
    node.write(
        &format!("{DIR}/00-multus.conf"),
        &data("multus-examples-ptp-portmap-not-json.conf"),
    );
    let report = node.run_all();
    assert_check(
        &report,
        "sriov.multus",
        Status::Fail,
        &[
            "the Multus config etc/cni/net.d/00-multus.conf does not load",
            "CRI-O skips it and takes 10-calico.conflist",
        ],
    );
    assert_evidence(&report, "sriov.multus", &["line 4 column 5"]);
}

#[test]
fn a_conflist_saved_as_conf_and_an_empty_plugin_list_do_not_load() {
    let node = sriov_node();
    node.write(
        &format!("{DIR}/00-flannel.conf"),
        &data("kube-flannel-10-flannel.conflist"),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["the first CNI config etc/cni/net.d/00-flannel.conf does not load (no `type`"],
    );
    node.write(&format!("{DIR}/00-flannel.conf"), "");
    node.remove(&format!("{DIR}/00-flannel.conf"));
    node.write(
        &format!("{DIR}/00-empty.conflist"),
        "{\"name\":\"x\",\"plugins\":[]}",
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["no `plugins` list"],
    );
}

#[test]
fn the_thick_shim_must_name_a_network_that_exists() {
    let node = sriov_node();
    let shim = |target: &str| {
        format!(
            "{{\n  \"cniVersion\": \"0.3.1\",\n  \"name\": \"multus-cni-network\",\n  \"type\": \"multus-shim\",\n  \"clusterNetwork\": \"/host/etc/cni/net.d/{target}\"\n}}\n"
        )
    };
    node.write(
        &format!("{DIR}/00-multus.conf"),
        &shim("10-calico.conflist"),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Pass,
        &["`multus-shim`"],
    );
    node.write(
        &format!("{DIR}/00-multus.conf"),
        &shim("10-flannel.conflist"),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["hands pods to /host/etc/cni/net.d/10-flannel.conflist, which does not exist"],
    );
    // A directory: Multus loads its first .conf/.conflist (getNetDelegate, option 3).
    node.write(&format!("{DIR}/default/README"), "not a config\n");
    node.write(&format!("{DIR}/00-multus.conf"), &shim("default"));
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["is a directory without a .conf or .conflist file"],
    );
    node.write(
        &format!("{DIR}/default/10-calico.conflist"),
        &std::fs::read_to_string(common::repo().join("tests/data/cni/calico-10-calico.conflist"))
            .unwrap(),
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Pass,
        &["`multus-shim`"],
    );
    // A network name is a NetworkAttachmentDefinition the node cannot see: not judged.
    node.write(
        &format!("{DIR}/00-multus.conf"),
        "{\"cniVersion\":\"0.3.1\",\"name\":\"multus-cni-network\",\"type\":\"multus-shim\",\"clusterNetwork\":\"k8s-pod-network\"}",
    );
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Pass,
        &["`multus-shim`"],
    );
}

#[test]
fn no_multus_or_no_config_at_all_fails() {
    let node = sriov_node();
    node.remove(&format!("{DIR}/00-multus.conf"));
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &[
            "Multus is not configured (the default network is 10-calico.conflist, `calico+portmap+bandwidth`)",
        ],
    );
    node.remove(DIR);
    assert_check(
        &node.run_all(),
        "sriov.multus",
        Status::Fail,
        &["no CNI config exists"],
    );
}
