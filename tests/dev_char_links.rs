//! `toolkit.dev_char_links` on the healthy node's tree: every NVIDIA device node needs its
//! `/dev/char/<major>:<minor>` link, with the major from /proc/devices and NVIDIA's minors
//! (`facts/dev_char.rs`). A missing link or one to another node fails under the systemd cgroup
//! driver and warns under cgroupfs; MIG capability nodes are linked through the caps major;
//! a node whose driver has no major is named, not judged; no NVIDIA node at all skips.

mod common;

use common::node::{Node, assert_check, assert_evidence};
use gpudoctor::report::Status;

const CODE: &str = "toolkit.dev_char_links";

#[test]
fn the_healthy_node_has_every_link() {
    let node = Node::healthy();
    assert_check(
        &node.run_all(),
        CODE,
        Status::Pass,
        &["12 NVIDIA device node(s) linked in /dev/char"],
    );
    // nvidia-ctk writes absolute targets; udev relative ones: both are links to the node.
    node.remove("dev/char/195:3");
    node.link("dev/char/195:3", "/dev/nvidia3");
    assert_check(&node.run_all(), CODE, Status::Pass, &[]);
}

#[test]
fn a_missing_or_wrong_link_fails_under_systemd_and_warns_under_cgroupfs() {
    let node = Node::healthy();
    node.remove("dev/char/195:5");
    node.remove("dev/char/195:6");
    node.link("dev/char/195:6", "../nvidia7");
    let report = node.run_all();
    assert_check(
        &report,
        CODE,
        Status::Fail,
        &[
            "2 of 12 NVIDIA device node(s) have no /dev/char link (/dev/nvidia5 /dev/nvidia6)",
            "systemctl daemon-reload",
        ],
    );
    assert_evidence(
        &report,
        CODE,
        &[
            "dev/char/195:5: missing",
            "dev/char/195:6: points to ../nvidia7",
        ],
    );
    node.edit("var/lib/kubelet/config.yaml", |t| {
        t.replace("cgroupDriver: systemd", "cgroupDriver: cgroupfs")
    });
    assert_check(
        &node.run_all(),
        CODE,
        Status::Warn,
        &["harmless with the cgroupfs driver"],
    );
}

#[test]
fn mig_capability_nodes_use_the_caps_major() {
    let node = Node::healthy();
    node.write("dev/nvidia-caps/nvidia-cap1", "");
    node.write("dev/nvidia-caps/nvidia-cap2", "");
    node.link("dev/char/511:1", "../nvidia-caps/nvidia-cap1");
    assert_check(
        &node.run_all(),
        CODE,
        Status::Fail,
        &["1 of 14 NVIDIA device node(s) have no /dev/char link (/dev/nvidia-caps/nvidia-cap2)"],
    );
}

#[test]
fn without_a_major_or_a_node_nothing_is_judged() {
    let node = Node::healthy();
    node.edit("proc/devices", |t| {
        t.lines()
            .filter(|l| !l.contains("nvidia-uvm"))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    assert_check(
        &node.run_all(),
        CODE,
        Status::Pass,
        &[
            "10 NVIDIA device node(s) linked",
            "major unknown for dev/nvidia-uvm dev/nvidia-uvm-tools: not judged",
        ],
    );
    node.remove("proc/devices");
    assert_check(&node.run_all(), CODE, Status::Error, &["proc/devices"]);
    let node = Node::copy("h100-driver-not-loaded");
    assert_check(
        &node.run_all(),
        CODE,
        Status::Skip,
        &["no NVIDIA device node"],
    );
}
