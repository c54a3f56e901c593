//! Verdicts over time (issue 16): history vs live for XIDs, SXids and AER reports, and counters
//! judged over a `--sample` window or per hour of uptime, on copies of the healthy fixture with
//! one thing edited. Bad input too: logs without stamps, relative `dmesg -H` stamps, another
//! boot's lines, lines out of order; counters that go back, vanish or saturate; a damaged
//! first reading. Every edit here flips a verdict the old total-since-boot judgment got wrong.

mod common;

use common::node::{Node, assert_check, assert_evidence, check};
use gpudoctor::report::{Action, Status};
use serde_json::Value;

const KMSG: &str = ".gpudoctor/kmsg.txt";
const SAMPLE: &str = ".gpudoctor/sample.json";
/// The healthy fixture's uptime (fixtures/build_fixtures.py UPTIME_S).
const UPTIME: f64 = 1_209_600.52;

/// A raw /dev/kmsg record written `ago` seconds before the capture.
fn rec(seq: u32, ago: f64, text: &str) -> String {
    let usec = ((UPTIME - ago) * 1e6).round() as u64;
    format!("4,{seq},{usec},-;{text}\n")
}

const XID79: &str = "NVRM: Xid (PCI:0000:2a:00): 79, pid=0, name=, GPU has fallen off the bus.";
const LOAD: &str = "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024";

fn with_log(text: &str) -> Node {
    let node = Node::healthy();
    node.write(KMSG, text);
    node
}

#[test]
fn an_xid_before_a_driver_load_is_history_and_after_it_live() {
    let node = with_log(&(rec(1, 7200.0, XID79) + &rec(2, 3600.0, LOAD)));
    let r = node.run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Warn,
        &[
            "XID 79 ×1",
            "2 h ago",
            "history: before the nvidia driver loaded 1 h ago",
        ],
    );
    assert_eq!(check(&r, "driver.xid_events").action, Action::None);
    // The same XID with nothing after it: live, whatever its age.
    let node = with_log(&rec(1, 7200.0, XID79));
    assert_check(
        &node.run_all(),
        "driver.xid_events",
        Status::Fail,
        &["2 h ago (2025-12-31T22:00:00Z): live"],
    );
    // Back after the reload: recurring, the gpu itself is suspect.
    let node = with_log(&(rec(1, 7200.0, XID79) + &rec(2, 3600.0, LOAD) + &rec(3, 60.0, XID79)));
    let r = node.run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Fail,
        &["×2 (1 live, 1 history)", "1 min ago", "recurring"],
    );
    assert_eq!(
        check(&r, "driver.xid_events").action,
        Action::HardwareInspection
    );
}

#[test]
fn xid_154_recovery_actions_and_the_catalogue_actions() {
    let reboot = "NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)";
    let r = with_log(&rec(1, 30.0, reboot)).run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Fail,
        &["to 0x2 (Node Reboot Required)"],
    );
    assert_eq!(check(&r, "driver.xid_events").action, Action::RebootNode);
    // Back to none: the earlier XID is history.
    let none = "NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)";
    let r = with_log(&(rec(1, 600.0, XID79) + &rec(2, 300.0, none))).run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Warn,
        &["recovery action went back to none"],
    );
    // XID 94 (contained): restart the application, never a reboot (NVIDIA RESTART_APP).
    let xid94 = "NVRM: Xid (PCI:0000:2a:00): 94, pid=1234, name=python3, Contained ECC error.";
    let r = with_log(&rec(1, 60.0, xid94)).run_all();
    assert_check(&r, "driver.xid_events", Status::Warn, &["XID 94"]);
    assert_eq!(check(&r, "driver.xid_events").action, Action::CheckWorkload);
    // XID 45 alone: restart the fabric manager (WORKFLOW_XID_45); with an XID 48 it follows it.
    let xid45 = "NVRM: Xid (PCI:0000:2a:00): 45, pid=1818990, name=python3, Ch 00000001";
    let r = with_log(&rec(1, 60.0, xid45)).run_all();
    assert_eq!(
        check(&r, "driver.xid_events").action,
        Action::RestartComponent
    );
    let xid48 = "NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.";
    let r = with_log(&(rec(1, 61.0, xid48) + &rec(2, 60.0, xid45))).run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Fail,
        &["noted: GPU 1 (0000:2a:00.0) XID 45"],
    );
}

#[test]
fn bad_stamps_give_clear_words_never_a_wrong_verdict() {
    // No timestamps at all: still judged, the age is said to be unknown.
    let r = with_log(&format!("{XID79}\n")).run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Fail,
        &["at an unknown time", "no timestamps"],
    );
    // dmesg -H: a minute line, then deltas; a local date is read as UTC and said so.
    let r = with_log(&format!(
        "[Dec31 23:50] usb 1-1: x\n[  +2.000000] {XID79}\n"
    ))
    .run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Fail,
        &["10 min ago (2025-12-31T23:50:02Z) (local time read as UTC)"],
    );
    // Relative stamps with nothing absolute before them: no age, no panic.
    let r = with_log(&format!("[  +0.000844] {XID79}\n")).run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Fail,
        &["at an unknown time"],
    );
    // A saved log of an earlier boot: stamped past the current uptime.
    let r = with_log(&format!("[2000000.000000] {XID79}\n")).run_all();
    assert_check(
        &r,
        "driver.xid_events",
        Status::Warn,
        &["history: before the last reboot"],
    );
    // Lines out of order are counted and said.
    let r = with_log(&(rec(1, 60.0, XID79) + &rec(2, 600.0, "usb 1-1: x"))).run_all();
    assert_check(&r, "driver.xid_events", Status::Fail, &["out of order"]);
    // No /proc/uptime in the capture: since-boot stamps have no age, and it is said.
    let node = with_log(&rec(1, 60.0, XID79));
    node.remove("proc/uptime");
    assert_check(
        &node.run_all(),
        "driver.xid_events",
        Status::Fail,
        &["no /proc/uptime"],
    );
}

#[test]
fn sxids_age_and_a_switch_probe_makes_them_history() {
    let fatal = "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up";
    let probe = "nvidia-nvswitch: Probing device 0000:06:00.0, Vendor Id = 0x10de, Device Id = 0x22a3, Class = 0x68000";
    let r = with_log(&rec(1, 120.0, fatal)).run_all();
    assert_check(
        &r,
        "nvlink.sxid_events",
        Status::Fail,
        &[
            "NVSwitch 0000:06:00.0",
            "link 48",
            "2 min ago (2025-12-31T23:58:00Z): live",
        ],
    );
    let r = with_log(&(rec(1, 120.0, fatal) + &rec(2, 60.0, probe))).run_all();
    assert_check(
        &r,
        "nvlink.sxid_events",
        Status::Warn,
        &["history: before the NVSwitch driver probed 0000:06:00.0 again"],
    );
    // The NVSwitch node with a log free of SXids passes; without a log it skips.
    let r = with_log(&rec(1, 60.0, "usb 1-1: x")).run_all();
    assert_check(&r, "nvlink.sxid_events", Status::Pass, &["no SXID"]);
}

/// The switch port above GPU 0000:5d:00.0 in the healthy fixture.
const PORT: &str = "0000:5c:00.0";

#[test]
fn aer_reports_are_attributed_and_aged() {
    let fatal = format!(
        "pcieport {PORT}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)"
    );
    let sdes = format!("pcieport {PORT}:    [ 5] SDES                   (First)");
    let r = with_log(&(rec(1, 300.0, &fatal) + &rec(2, 300.0, &sdes))).run_all();
    assert_check(
        &r,
        "topology.aer_errors",
        Status::Fail,
        &[
            "GPU 0000:5d:00.0 (reported by 0000:5c:00.0)",
            "[SDES]",
            "5 min ago (2025-12-31T23:55:00Z), live",
        ],
    );
    // The port recovered: history.
    let ok = format!("pcieport {PORT}: AER: device recovery successful");
    let r = with_log(&(rec(1, 300.0, &fatal) + &rec(2, 290.0, &ok))).run_all();
    assert_check(
        &r,
        "topology.aer_errors",
        Status::Warn,
        &["history: before 0000:5c:00.0 reported AER recovery successful"],
    );
    // Corrected errors are counted; a handful in the last hour passes, a storm warns.
    let cor = format!(
        "pcieport {PORT}: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
    );
    let few: String = (0..5).map(|i| rec(i, 100.0 + f64::from(i), &cor)).collect();
    assert_check(
        &with_log(&few).run_all(),
        "topology.aer_errors",
        Status::Pass,
        &[],
    );
    let storm: String = (0..600)
        .map(|i| rec(i, 1000.0 - f64::from(i), &cor))
        .collect();
    assert_check(
        &with_log(&storm).run_all(),
        "topology.aer_errors",
        Status::Warn,
        &["600 in the last hour"],
    );
    // A report about a device no GPU or NIC sits below is not judged.
    let nvme = "nvme 0000:c1:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)";
    let r = with_log(&rec(1, 60.0, nvme)).run_all();
    assert_check(
        &r,
        "topology.aer_errors",
        Status::Pass,
        &["1 AER report(s) about other devices not judged"],
    );
}

const HCA_PORT: &str = "sys/class/infiniband/mlx5_2/ports/1/counters";

/// The old-errors capture: a 60 s window in which nothing moved.
fn sampled() -> Node {
    Node::copy("h100-hca-old-errors")
}

#[test]
fn counters_over_a_window_rise_stay_go_back_vanish_or_saturate() {
    assert_check(
        &sampled().run_all(),
        "rdma.error_counters",
        Status::Pass,
        &[
            "history (did not move over a 1 min window)",
            "symbol_error 1187",
        ],
    );
    // Rising, without a link retrain: warn with the rate.
    let node = sampled();
    node.write(&format!("{HCA_PORT}/symbol_error"), "1247\n");
    assert_check(
        &node.run_all(),
        "rdma.error_counters",
        Status::Warn,
        &["symbol_error +60 (1.0/s)"],
    );
    // Cleared during the window: said, no negative rate.
    let node = sampled();
    node.write(&format!("{HCA_PORT}/symbol_error"), "0\n");
    let r = node.run_all();
    assert_check(
        &r,
        "rdma.error_counters",
        Status::Warn,
        &["went back from 1187 to 0"],
    );
    assert!(!check(&r, "rdma.error_counters").summary.contains("-"));
    // Gone during the window.
    let node = sampled();
    node.remove(&format!("{HCA_PORT}/port_rcv_errors"));
    assert_check(
        &node.run_all(),
        "rdma.error_counters",
        Status::Warn,
        &["was 642, then could not be read"],
    );
    // At its 16-bit maximum: it no longer counts.
    let node = sampled();
    node.write(&format!("{HCA_PORT}/port_rcv_errors"), "65535\n");
    assert_check(
        &node.run_all(),
        "rdma.error_counters",
        Status::Warn,
        &["saturated"],
    );
    // A zero-second window is a finite rate, not a division by zero.
    let node = sampled();
    node.edit_json(SAMPLE, |v| v["window_s"] = 0.into());
    node.write(&format!("{HCA_PORT}/symbol_error"), "1188\n");
    let r = node.run_all();
    assert_eq!(check(&r, "rdma.error_counters").status, Status::Warn);
}

#[test]
fn a_damaged_first_reading_is_named_and_never_a_pass() {
    // Clean counters: nothing to judge them by but totals, and the damage makes it an error.
    let node = Node::healthy();
    node.write(SAMPLE, "{ not json");
    let r = node.run_all();
    let c = check(&r, "rdma.error_counters");
    assert_eq!(c.status, Status::Error, "{}", c.summary);
    assert_evidence(&r, "rdma.error_counters", &[".gpudoctor/sample.json"]);
    // Old errors: judged on their totals per hour of uptime (the window is lost), the damage said.
    let node = sampled();
    node.write(SAMPLE, "{ not json");
    assert_check(
        &node.run_all(),
        "rdma.error_counters",
        Status::Warn,
        &[
            "over 14 days of uptime",
            "could not read .gpudoctor/sample.json",
        ],
    );
}

#[test]
fn totals_are_judged_per_hour_of_uptime() {
    // 14 errors in 14 days: an old burst, history.
    let node = Node::healthy();
    node.write(&format!("{HCA_PORT}/port_rcv_errors"), "14\n");
    assert_check(
        &node.run_all(),
        "rdma.error_counters",
        Status::Pass,
        &[
            "history (below 1/h over 14 days of uptime)",
            "port_rcv_errors 14",
            "--sample 60",
        ],
    );
    // The same 14 after one hour up: a bad link.
    node.write("proc/uptime", "3600.00 7000.00\n");
    assert_check(
        &node.run_all(),
        "rdma.error_counters",
        Status::Warn,
        &["port_rcv_errors 14 (14.00/h)", "--sample 60"],
    );
}

#[test]
fn gpu_counters_over_a_window() {
    // PCIe replays rising faster than DCGM's 8 per minute.
    let node = sampled();
    node.edit_nvml(|n| n["devices"][3]["pcie_replay_counter"] = serde_json::json!({"value": 600}));
    assert_check(
        &node.run_all(),
        "driver.pcie_replays",
        Status::Warn,
        &["GPU 3 (0000:5d:00.0): 600 PCIe replays, 10.0/s over a 1 min window"],
    );
    // Uncorrected ECC: unmoved is history (warn), rising is live (fail).
    let node = sampled();
    node.edit_nvml(|n| {
        n["devices"][2]["ecc_errors"]["value"]["volatile_uncorrected"] = 2.into();
    });
    node.edit_json(SAMPLE, |b| {
        b["gpus"]["0000:3a:00.0"]["ecc_volatile_uncorrected"] = 2.into();
    });
    assert_check(
        &node.run_all(),
        "driver.ecc_errors",
        Status::Warn,
        &["(history)"],
    );
    node.edit_json(SAMPLE, |b| {
        b["gpus"]["0000:3a:00.0"]["ecc_volatile_uncorrected"] = 1.into();
    });
    assert_check(
        &node.run_all(),
        "driver.ecc_errors",
        Status::Fail,
        &["rising"],
    );
    // A lone HW slowdown in both readings is sustained (fail); only in the second, it warns.
    let node = sampled();
    node.edit_nvml(|n| n["devices"][7]["clock_event_reasons"] = serde_json::json!({"value": 8}));
    assert_check(
        &node.run_all(),
        "driver.clock_slowdown",
        Status::Warn,
        &["only in the second reading"],
    );
    node.edit_json(SAMPLE, |b| {
        b["gpus"]["0000:db:00.0"]["clock_event_reasons"] = 8.into()
    });
    assert_check(
        &node.run_all(),
        "driver.clock_slowdown",
        Status::Fail,
        &["sustained"],
    );
}

/// NVLink counters over a window as DCGM judges them (`DcgmHealthWatch.cpp`): one replay or
/// recovery more fails, however slow; CRC errors warn below 100 per second and fail above.
#[test]
fn nvlink_replays_and_recoveries_fail_on_any_increase_crc_by_rate() {
    let link = |n: &mut Value, counter: &str, v: u64| {
        n["devices"][0]["nvlinks"]["value"][0][counter] = serde_json::json!({ "value": v });
    };
    for (counter, value, status, words) in [
        // 1 replay over 60 s: 0.02/s, far below the CRC limit, still a failure.
        (
            "replay_errors",
            1,
            Status::Fail,
            "rising over a 1 min window: replay",
        ),
        ("recovery_errors", 3, Status::Fail, "recovery"),
        // 60 CRC errors in a minute: 1/s, a warning.
        ("crc_flit_errors", 60, Status::Warn, "crc flit"),
        // 12 000 in a minute: 200/s, past DCGM's 100/s.
        ("crc_data_errors", 12_000, Status::Fail, "crc data"),
    ] {
        let node = sampled();
        node.edit_nvml(|n| link(n, counter, value));
        assert_check(&node.run_all(), "nvlink.error_counters", status, &[words]);
    }
}

#[test]
fn a_total_with_no_uptime_is_not_called_below_the_limit() {
    let node = Node::healthy();
    node.edit_nvml(|n| n["devices"][3]["pcie_replay_counter"] = serde_json::json!({"value": 600}));
    node.remove("proc/uptime");
    let r = node.run_all();
    let c = check(&r, "driver.pcie_replays");
    assert_eq!(c.status, Status::Error, "{}", c.summary);
    assert_evidence(&r, "driver.pcie_replays", &["proc/uptime", "GPU 3 600"]);
}

#[test]
fn the_fabric_manager_states() {
    // Running, but its log has an error since it started: warn.
    let node = Node::healthy();
    node.edit("var/log/fabricmanager.log", |t| {
        format!("{t}[Dec 18 2025 00:10:00] [ERROR] [tid 2330] Fabric Manager detected GPU NVL Fatal error on : moduleId 3\n")
    });
    assert_check(
        &node.run_all(),
        "nvlink.fabric_manager",
        Status::Warn,
        &["1 error line(s) since it started"],
    );
    // Not installed at all on an NVSwitch node: fail, install it.
    let node = Node::healthy();
    node.remove("sys/fs/cgroup/system.slice");
    node.remove("proc/2315");
    node.remove("usr/lib/systemd/system/nvidia-fabricmanager.service");
    let r = node.run_all();
    assert_check(
        &r,
        "nvlink.fabric_manager",
        Status::Fail,
        &["not installed"],
    );
    assert_eq!(check(&r, "nvlink.fabric_manager").action, Action::FixConfig);
    // Nothing to look at (a capture without cgroups, /proc, unit or log): cannot tell.
    node.remove("sys/fs/cgroup");
    node.remove("var/log/fabricmanager.log");
    node.remove("proc");
    assert_eq!(
        check(&node.run_all(), "nvlink.fabric_manager").status,
        Status::Error
    );
    // Found by the process list when the unit has no cgroup (GPU Operator driver container).
    let node = Node::healthy();
    node.remove("sys/fs/cgroup/system.slice");
    assert_check(
        &node.run_all(),
        "nvlink.fabric_manager",
        Status::Pass,
        &["found by the process list"],
    );
}

/// A GB200-class compute tray runs no fabric manager (the NVSwitch trays do): its IMEX daemon
/// is judged where installed, and a tray without one passes.
#[test]
fn a_compute_tray_is_judged_by_its_imex_daemon_not_a_fabric_manager() {
    let node = Node::copy("gb200-tray-healthy");
    assert_check(
        &node.run_all(),
        "nvlink.fabric_manager",
        Status::Pass,
        &["NVIDIA GB200 compute tray", "nvidia-imex runs"],
    );
    // Installed, not running: multi-node NVLink memory sharing fails.
    node.remove("sys/fs/cgroup/system.slice/nvidia-imex.service");
    node.remove("proc/2398");
    let r = node.run_all();
    assert_check(
        &r,
        "nvlink.fabric_manager",
        Status::Fail,
        &["nvidia-imex is installed but not running"],
    );
    assert_eq!(
        check(&r, "nvlink.fabric_manager").action,
        Action::RestartComponent
    );
    // Not installed (Kubernetes runs IMEX in the DRA driver's pods): nothing asked of the host.
    node.remove("usr/lib/systemd/system/nvidia-imex.service");
    assert_check(
        &node.run_all(),
        "nvlink.fabric_manager",
        Status::Pass,
        &["no nvidia-imex service on the host"],
    );
    // The same node with B200s is an HGX B200 (its switches managed over NVLink, not PCI): the
    // fabric manager is asked for.
    let node = Node::copy("gb200-tray-healthy");
    node.edit_nvml(|n| {
        for d in n["devices"].as_array_mut().unwrap() {
            d["name"] = serde_json::json!("NVIDIA B200");
        }
    });
    assert_check(
        &node.run_all(),
        "nvlink.fabric_manager",
        Status::Fail,
        &["nvidia-fabricmanager is not installed"],
    );
}

#[test]
fn operator_markers_the_node_should_have() {
    let node = Node::copy("h100-operator-peermem-not-validated");
    // The host runs the driver and the operator wrote no rdma marker: peermem is not its job.
    node.edit("run/nvidia/validations/driver-ready", |t| {
        t.replace("IS_HOST_DRIVER=false", "IS_HOST_DRIVER=true")
    });
    node.remove("run/nvidia/validations/mofed-ready");
    assert_check(
        &node.run_all(),
        "toolkit.operator_validations",
        Status::Pass,
        &["the operator does not manage its RDMA"],
    );
    // The operator's driver with gdrdrv loaded and no gdrcopy-ready.
    let node = Node::copy("h100-operator-peermem-not-validated");
    node.write("run/nvidia/validations/nvidia-peermem-ready", "");
    node.edit("proc/modules", |t| {
        format!("gdrdrv 24576 0 - Live 0x0000000000000000 (OE)\n{t}")
    });
    assert_check(
        &node.run_all(),
        "toolkit.operator_validations",
        Status::Fail,
        &["gdrcopy validation has not passed", "gdrdrv is loaded"],
    );
}

/// driver.power: a limit below the default warns (a capped GPU); a draw over the enforced limit
/// warns in one reading and fails when the first reading of --sample was over too; a GPU whose
/// default limit NVML does not report is judged on its draw only, and says so.
#[test]
fn power_caps_and_draws_over_the_limit() {
    let node = sampled();
    assert_check(
        &node.run_all(),
        "driver.power",
        Status::Pass,
        &["none capped below its default limit"],
    );
    node.edit_nvml(|n| n["devices"][7]["power_limit_mw"] = serde_json::json!({"value": 500000}));
    assert_check(
        &node.run_all(),
        "driver.power",
        Status::Warn,
        &["GPU 7 (0000:db:00.0) capped at 500 W of its default 700 W (71%)"],
    );
    // 699 W of 700: whole-watt rounding, not a cap.
    node.edit_nvml(|n| n["devices"][7]["power_limit_mw"] = serde_json::json!({"value": 699000}));
    assert_check(&node.run_all(), "driver.power", Status::Pass, &[]);

    let node = sampled();
    node.edit_nvml(|n| n["devices"][7]["power_usage_mw"] = serde_json::json!({"value": 760000}));
    assert_check(
        &node.run_all(),
        "driver.power",
        Status::Warn,
        &["GPU 7 (0000:db:00.0) draws 760 W over its enforced limit 700 W"],
    );
    node.edit_json(SAMPLE, |b| {
        b["gpus"]["0000:db:00.0"]["power_usage_mw"] = 751000.into()
    });
    assert_check(
        &node.run_all(),
        "driver.power",
        Status::Fail,
        &["in both readings over a 1 min window (751 W before)"],
    );
    // 5% over is the controller settling, not a fault.
    node.edit_nvml(|n| n["devices"][7]["power_usage_mw"] = serde_json::json!({"value": 735000}));
    assert_check(&node.run_all(), "driver.power", Status::Pass, &[]);

    let node = sampled();
    node.edit_nvml(|n| {
        for d in n["devices"].as_array_mut().unwrap() {
            d.as_object_mut().unwrap().remove("power_default_limit_mw");
        }
    });
    assert_check(
        &node.run_all(),
        "driver.power",
        Status::Pass,
        &["default limit not reported for 8 of them: caps not judged there"],
    );
    node.edit_nvml(|n| {
        n["devices"][2]["power_limit_mw"] =
            serde_json::json!({"error": {"kind": "unknown", "message": "boom"}})
    });
    assert_check(
        &node.run_all(),
        "driver.power",
        Status::Error,
        &["could not read GPU 2"],
    );
}
