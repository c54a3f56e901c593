//! Kernel-log shapes beyond the XIDs, from real logs (tests/data/kernel/README.md names each
//! source), on the healthy HGX H100 node: a firmware-first (APEI GHES) PCIe record is an AER
//! report like any other, attributed to the GPU below the port it names; a fatal AER from a port
//! sysfs does not hold is reported against the GPU or NIC whose driver the same burst names.

mod common;

use common::node::{Node, assert_check, assert_evidence};
use gpudoctor::report::Status;

const KMSG: &str = ".gpudoctor/kmsg.txt";

fn data(name: &str) -> String {
    std::fs::read_to_string(common::repo().join("tests/data/kernel").join(name)).unwrap()
}

fn with_log(text: &str) -> Node {
    let node = Node::healthy();
    node.write(KMSG, text);
    node
}

/// The real GHES records, their device moved onto this node: GPU 0000:5d:00.0's switch port
/// (0000:5c:00.0) and the GPU itself.
#[test]
fn a_firmware_first_record_is_an_aer_report_on_the_gpu_below_it() {
    let recoverable =
        data("ghes-pcie-recoverable-ovro-lwa-117.txt").replace("0000:5e:00.0", "0000:5d:00.0");
    assert_check(
        &with_log(&recoverable).run_all(),
        "topology.aer_errors",
        Status::Warn,
        &["GPU 0000:5d:00.0: uncorrected non-fatal AER"],
    );
    let fatal =
        data("ghes-pcie-fatal-mlx4-reboot-netdev-2019.txt").replace("0000:80:03.0", "0000:5c:00.0");
    assert_check(
        &with_log(&fatal).run_all(),
        "topology.aer_errors",
        Status::Fail,
        &["GPU 0000:5d:00.0 (reported by 0000:5c:00.0): uncorrected fatal AER"],
    );
    // As printed, they concern devices this node does not have: counted, not judged.
    assert_check(
        &with_log(&data("ghes-pcie-fatal-mlx4-reboot-netdev-2019.txt")).run_all(),
        "topology.aer_errors",
        Status::Pass,
        &["AER report(s) about other devices not judged"],
    );
}

/// rwth-i6/returnn#1500 and wilicc/gpu-burn#1: the root port that reported is not in this
/// node's sysfs, but `nvidia 0000:03:00.0: AER: can't recover` in the same burst names the GPU.
#[test]
fn a_fatal_aer_from_an_unknown_port_is_reported_against_the_gpu_the_burst_names() {
    assert_check(
        &with_log(&data("aer-fatal-nvidia-returnn-1500.txt")).run_all(),
        "topology.aer_errors",
        Status::Fail,
        &[
            "GPU 0000:03:00.0 (nvidia; not on the PCI bus now) (reported by 0000:00:03.0): uncorrected fatal AER",
        ],
    );
    assert_check(
        &with_log(&data("aer-fatal-surprise-down-nvidia-gpu-burn-1.txt")).run_all(),
        "topology.aer_errors",
        Status::Fail,
        &[
            "GPU 0000:02:00.0 (nvidia; not on the PCI bus now)",
            "Surprise Down Error",
        ],
    );
}

/// The real probe failures (tinycore-redpill#9, rp-ext#129): the NIC never registered an RDMA
/// device, so only the log names it.
#[test]
fn a_nic_that_failed_to_probe_fails_with_its_address() {
    let report = with_log(&data("mlx5-probe-fail-tinycore-redpill-9.txt")).run_all();
    assert_check(
        &report,
        "rdma.nic_events",
        Status::Fail,
        &[
            "NIC 0000:03:00.0: failed to come up (probe failed with error -22) ×2",
            "live",
        ],
    );
    // Before a reboot: history, a warning.
    let rebooted = data("mlx5-probe-fail-rp-ext-129.txt")
        + "[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024\n";
    assert_check(
        &with_log(&rebooted).run_all(),
        "rdma.nic_events",
        Status::Warn,
        &[
            "NIC 0000:01:00.0: failed to come up",
            "history: before the last reboot",
        ],
    );
}

/// qemu-devel 2025-03-18: the firmware of a ConnectX-6 Dx stopped (six functions).
#[test]
fn a_firmware_health_fault_fails() {
    assert_check(
        &with_log(&data(
            "mlx5-health-fw-internal-error-qemu-devel-2025-03-18.txt",
        ))
        .run_all(),
        "rdma.nic_events",
        Status::Fail,
        &["NIC 0000:0d:00.0: firmware health compromised"],
    );
}

/// cubecos#733: `eth1: Link up` again and again, each time after the port went down.
#[test]
fn a_flapping_port_warns_and_hot_modules_and_slot_power_warn() {
    assert_check(
        &with_log(&data("mlx5-link-up-repeated-journal-cubecos-733.txt")).run_all(),
        "rdma.nic_events",
        Status::Warn,
        &[
            "NIC 0000:01:00.1 (eth1): link went down",
            "the port is flapping",
        ],
    );
    // The shapes gpud quotes with their prefix elided, behind a whole dmesg prefix.
    let hot = "[ 4512.101234] mlx5_core 0000:5c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 0, Cable error, High Temperature\n\
[ 4512.201234] mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the PCIe slot (27W).\n";
    assert_check(
        &with_log(hot).run_all(),
        "rdma.nic_events",
        Status::Warn,
        &[
            "cable module at high temperature (module 0)",
            "insufficient slot power (slot gives 27W)",
        ],
    );
    // One link-up at boot and cable plug events are not faults.
    let calm = data("mlx5-port-module-cable-unplugged-gpud-pstore.txt");
    assert_check(
        &with_log(&calm).run_all(),
        "rdma.nic_events",
        Status::Pass,
        &[],
    );
    // No kernel log recorded: nothing to read.
    assert_check(
        &Node::healthy().run_all(),
        "rdma.nic_events",
        Status::Skip,
        &["no kernel log"],
    );
}

/// The hot module and the slot without power as people paste them (the address cut): warned
/// about, named as an mlx5 NIC whose line gives no address.
#[test]
fn a_hot_module_and_slot_power_pasted_without_the_address_warn() {
    assert_check(
        &with_log(&data("mlx5-port-module-hot-no-address-gx10-writeup.txt")).run_all(),
        "rdma.nic_events",
        Status::Warn,
        &[
            "an mlx5 NIC (the line gives no PCI address): cable module at high temperature (module 0)",
        ],
    );
    assert_check(
        &with_log(&data(
            "mlx5-slot-power-no-driver-prefix-dgx-spark-notes.txt",
        ))
        .run_all(),
        "rdma.nic_events",
        Status::Warn,
        &["insufficient slot power (slot gives 27W)"],
    );
}

/// Mellanox/nv_peer_memory#120: `detected invalid context` on this node's driver (550, before
/// R560) is NVIDIA's "harmless" print, noted; on R560 or later it should never appear: warn.
#[test]
fn peermem_invalid_context_is_noted_before_r560_and_warns_after() {
    let storm = data("peermem-invalid-context-nv-peer-memory-120.txt");
    assert_check(
        &with_log(&storm).run_all(),
        "rdma.peermem_events",
        Status::Pass,
        &[
            "nvidia-peermem: `detected invalid context` ×8",
            "harmless on driver 550.54.15",
        ],
    );
    let node = with_log(&storm);
    node.write("sys/module/nvidia/version", "560.35.03\n");
    assert_check(
        &node.run_all(),
        "rdma.peermem_events",
        Status::Warn,
        &["should never print it", "560.35.03"],
    );
    // After a reboot the same lines are history, whatever the driver.
    node.write(
        KMSG,
        &(storm + "[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007)\n"),
    );
    assert_check(
        &node.run_all(),
        "rdma.peermem_events",
        Status::Pass,
        &["history: before the last reboot"],
    );
}

/// Mellanox/nv_peer_memory#112: `invalid page_table` is a driver bug, live or not noted.
#[test]
fn peermem_invalid_page_table_warns() {
    assert_check(
        &with_log(&data("peermem-invalid-page-table-nv-peer-memory-112.txt")).run_all(),
        "rdma.peermem_events",
        Status::Warn,
        &[
            "nv_mem: `invalid page_table`/`invalid dma_mapping` ×2",
            "live",
        ],
    );
    assert_check(
        &with_log(&data("mlx5-probe-fail-rp-ext-129.txt")).run_all(),
        "rdma.peermem_events",
        Status::Pass,
        &["no nvidia-peermem error to act on"],
    );
}

/// gpud's dmesg line of a training process killed inside libnccl.so.2: stamped 2024-10-10, so
/// before this node's boot (2025-12-18): history. The same line stamped after the boot warns.
#[test]
fn a_crash_inside_libnccl_this_boot_warns_with_the_process() {
    let line = data("segfault-libnccl-gpud-dmesg.txt");
    // No benchmark or log asked for: a quiet log leaves the layer skipped, saying what it read.
    assert_check(
        &with_log(&line).run_all(),
        "nccl.kernel_crashes",
        Status::Skip,
        &["1 crash(es) inside libnccl.so.2 before the last reboot"],
    );
    // With an NCCL log to judge (the capture's own), the same is a pass.
    let with_run = Node::copy("h100-nccl-healthy");
    with_run.write(KMSG, &line);
    assert_check(
        &with_run.run_all(),
        "nccl.kernel_crashes",
        Status::Pass,
        &[
            "no process crashed inside NCCL this boot",
            "before the last reboot",
        ],
    );
    let this_boot = line.replace("Thu Oct 10 03:06:53 2024", "Wed Dec 24 03:06:53 2025");
    assert_check(
        &with_log(&this_boot).run_all(),
        "nccl.kernel_crashes",
        Status::Warn,
        &["1 crash(es) inside libnccl.so.2 this boot, the last pt_main_thread[2536443]"],
    );
    // Crashes in other libraries, NVIDIA's included (zed#35758), are not NCCL's.
    assert_check(
        &with_log(&data("segfault-6x-libnvidia-glcore-zed-35758.txt")).run_all(),
        "nccl.kernel_crashes",
        Status::Skip,
        &["no process crashed inside NCCL this boot"],
    );
}

/// The 6.x kernel's split crash lines (netdev, xskxceiver): two processes' halves interleaved;
/// the library line belongs to the crash whose instruction lies in its mapping (1440's, not the
/// line just before it). With the library renamed to NCCL's, 1440 is the one named.
#[test]
fn a_split_crash_line_is_matched_to_its_process_by_address() {
    let split = data("segfault-6x-split-lines-netdev-xskxceiver.txt");
    assert_check(
        &with_log(&split).run_all(),
        "nccl.kernel_crashes",
        Status::Skip,
        &["no process crashed inside NCCL"],
    );
    let nccl = split.replace("libc.so.6", "libnccl.so.2.19.3");
    let report = with_log(&nccl).run_all();
    assert_check(
        &report,
        "nccl.kernel_crashes",
        Status::Warn,
        &["1 crash(es) inside libnccl.so.2.19.3 this boot, the last xskxceiver[1440]"],
    );
}

/// A capture keeps every line these checks read, not only the NVIDIA ones: for every real
/// sample, the events parsed from what `record` keeps equal those parsed from the whole log.
#[test]
fn a_capture_keeps_every_kernel_line_the_checks_read() {
    use gpudoctor::facts::xid::parse_kernel_log;
    let dir = common::repo().join("tests/data/kernel");
    let mut samples = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("txt") {
            continue;
        }
        samples += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let whole = parse_kernel_log(&text);
        let kept = parse_kernel_log(&gpudoctor::record::nvidia_kernel_lines(&text));
        let name = path.display();
        let nic = |l: &gpudoctor::facts::xid::KernelLog| {
            l.nic_events
                .iter()
                .map(|e| (e.kind, e.device.clone(), e.detail.clone()))
                .collect::<Vec<_>>()
        };
        let aer = |l: &gpudoctor::facts::xid::KernelLog| {
            l.aer
                .iter()
                .map(|e| format!("{} {:?} {:?}", e.device, e.severity, e.errors))
                .collect::<Vec<_>>()
        };
        let software = |l: &gpudoctor::facts::xid::KernelLog| {
            l.software_events
                .iter()
                .map(|e| {
                    (
                        e.kind,
                        e.source.clone(),
                        e.process.clone(),
                        e.message.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(nic(&kept), nic(&whole), "{name}: NIC events");
        assert_eq!(aer(&kept), aer(&whole), "{name}: AER reports");
        assert_eq!(software(&kept), software(&whole), "{name}: software events");
        assert_eq!(kept.xids.len(), whole.xids.len(), "{name}: XIDs");
        assert_eq!(kept.boots, whole.boots, "{name}: boots");
    }
    assert!(samples >= 15, "only {samples} samples in {}", dir.display());
}

/// The real gpu-burn#1 log (its XID 79 on 0000:02:00) with one byte that is not UTF-8 in its
/// first line and a NUL byte in its sixth, as a disk error or a crash leaves a saved log.
fn damaged_gpu_burn_log() -> Vec<u8> {
    let text = data("aer-fatal-surprise-down-nvidia-gpu-burn-1.txt");
    let mut lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    lines[0].insert(20, 0xff);
    lines[5].insert(15, 0);
    let mut bytes = lines.join(&b'\n');
    bytes.push(b'\n');
    bytes
}

/// `[  100.000000] usb 1-1: ...` lines (no line the checks read) up to `bytes`, stamped from
/// second `at` on (rising, so no line looks like a reboot).
fn filler(bytes: usize, at: u64) -> String {
    let mut text = String::with_capacity(bytes + 100);
    let mut i = 0u64;
    while text.len() < bytes {
        text.push_str(&format!(
            "[{:5}.{:06}] usb 1-1: new high-speed USB device number {} using xhci_hcd\n",
            at + i / 1_000_000,
            i % 1_000_000,
            i % 128
        ));
        i += 1;
    }
    text
}

/// `check --root <healthy> --only driver --kernel-log FILE`: driver.xid_events' status,
/// summary and evidence.
fn xid_events_with_kernel_log(file: &std::path::Path) -> (String, String, String) {
    let root = common::repo().join("fixtures/hgx-h100-healthy");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--only",
        "driver",
        "--keep-going",
        "--format",
        "json",
        "--kernel-log",
        file.to_str().unwrap(),
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let c = report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "driver.xid_events")
        .unwrap()
        .clone();
    (
        c["status"].as_str().unwrap().to_string(),
        c["summary"].as_str().unwrap().to_string(),
        c["evidence"].to_string(),
    )
}

/// Issue 41, item 3: one invalid UTF-8 byte or NUL anywhere in a kernel log made every
/// kernel-log check an error, so the XID 79 in the same file went unreported. The log is
/// decoded lossily, the repair said, and the XID 79 fails — from a capture's kmsg.txt and from
/// `--kernel-log FILE`.
#[test]
fn a_kernel_log_with_invalid_bytes_still_reports_its_xid_79() {
    let damaged = damaged_gpu_burn_log();
    let said = "1 byte(s) of invalid utf-8 replaced with U+FFFD and 1 nul byte(s) taken as line ends on 2 line(s)";
    let node = with_log("");
    std::fs::write(node.path(KMSG), &damaged).unwrap();
    let report = node.run_all();
    assert_check(
        &report,
        "driver.xid_events",
        Status::Fail,
        &["XID 79", "GPU has fallen off the bus", said],
    );
    assert_evidence(
        &report,
        "driver.xid_events",
        &[&format!("{KMSG}: kernel log decoded lossily: {said}")],
    );
    // The AER burst around the damaged lines is read too.
    assert_check(
        &report,
        "topology.aer_errors",
        Status::Fail,
        &["Surprise Down Error"],
    );

    let tmp = common::tempdir().unwrap();
    let file = tmp.path().join("dmesg.txt");
    std::fs::write(&file, &damaged).unwrap();
    let (status, summary, evidence) = xid_events_with_kernel_log(&file);
    assert_eq!(status, "fail", "{summary}");
    assert!(
        summary.contains("XID 79") && summary.contains(said),
        "{summary}"
    );
    assert!(evidence.contains(said), "{evidence}");
}

/// Issue 41, item 3: a kernel log over the 8 MiB read cap was an error; it is read from its
/// tail — the newest events — and the skipped bytes are said. The XID 79 near the end of a
/// 9 MiB log fails, from a capture's kmsg.txt and from `--kernel-log FILE`.
#[test]
fn a_kernel_log_over_the_cap_is_read_from_its_tail() {
    let cap = gpudoctor::source::rooted::DEFAULT_READ_CAP as usize;
    let mut log = filler(cap + (1 << 20), 100);
    log.push_str("[  200.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.\n");
    log.push_str(&filler(4096, 300));
    assert!(log.len() > cap + (1 << 20));
    let node = with_log(&log);
    let report = node.run_all();
    assert_check(
        &report,
        "driver.xid_events",
        Status::Fail,
        &[
            "XID 79",
            "kernel log larger than the 8 MiB read cap: its oldest",
        ],
    );
    assert_evidence(
        &report,
        "driver.xid_events",
        &["byte(s) skipped, the newest events read"],
    );

    let tmp = common::tempdir().unwrap();
    let file = tmp.path().join("dmesg.txt");
    std::fs::write(&file, &log).unwrap();
    let (status, summary, _) = xid_events_with_kernel_log(&file);
    assert_eq!(status, "fail", "{summary}");
    // The bytes skipped: everything before the last 8 MiB, and the line cut there.
    let skipped: usize = summary
        .split("its oldest ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    let first_kept = log.len() - cap;
    let line_end = first_kept + log[first_kept..].find('\n').unwrap() + 1;
    let whole_line = log.as_bytes()[first_kept - 1] == b'\n';
    assert_eq!(
        skipped,
        if whole_line { first_kept } else { line_end },
        "{summary}"
    );
}
