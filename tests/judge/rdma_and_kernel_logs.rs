//! perftest output behind a harness tag, and kernel logs: mlx5 command timeouts vs refused
//! commands, peer-memory load failures, GSP timeouts (XID 119) and GHES AER records.

use super::*;

#[test]
fn perftest_behind_a_harness_tag_and_a_cut_sweep() {
    // avocado-misc-tests#1196: every line behind `… DEBUG| [stdout] `: a result, not "no table".
    let (report, exit) = judge_json(&[&format!(
        "{DATA}/perftest_ib_send_bw_avocado-harness-prefix-every-line_multicast_avocado-misc-tests-1196.log"
    )]);
    assert_eq!(exit, 0, "{report}");
    let c = status_of(&report, "rdma.perftest_log")[0];
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("finished at 12.4 Gb/s"),
        "{c}"
    );
    // The healthy sweep is read to its 8 MiB row (no node: the port rate is not known).
    let sweep = format!("{DATA}/perftest_ib_write_bw_a_sweep_healthy_cloud-native-stack.txt");
    let (report, exit) = judge_json(&[&sweep]);
    assert_eq!(exit, 0);
    let c = status_of(&report, "rdma.perftest_log")[0];
    assert_eq!(c["status"], "pass");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("finished at 52.5 Gb/s"),
        "{c}"
    );
    // The same sweep cut after its first rows (a paste cut short): not judged slow on 64 B.
    let text = std::fs::read_to_string(common::repo().join(&sweep)).unwrap();
    let cut: String = text.lines().take(28).map(|l| format!("{l}\n")).collect();
    let (report, exit) = judge_text("cut.txt", &cut);
    assert_eq!(exit, 0, "{report}");
    let c = status_of(&report, "rdma.perftest_log")[0];
    assert_eq!(c["status"], "warn");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("sweep cut after 6 row(s), at 64 bytes"),
        "{c}"
    );
}

#[test]
fn mlx5_command_timeouts_are_a_device_fault_and_refused_commands_are_not() {
    // ucx#7738: `pdsh`-style host prefix, CREATE_DCT timeouts (`No done completion`, `timeout.
    // Will cause a leak of a command resource`): the firmware stopped answering.
    let (report, exit) = judge_json(&[&format!(
        "{DATA}/dmesg_mlx5_cmd-timeout_CREATE_DCT_no-done-completion_leak_host-prefixed_ucx-7738.log"
    )]);
    assert_eq!(exit, 1);
    let c = status_of(&report, "rdma.nic_events")[0];
    assert_eq!(c["status"], "fail");
    assert!(
        c["summary"].as_str().unwrap().starts_with(
            "NIC 0000:61:00.0: firmware command timeouts (CREATE_DCT command timed out) ×8"
        ),
        "{c}"
    );
    // A command the firmware answered with an error for a user process (bad parameter, limits
    // exceeded) is the caller's request refused: silent.
    for file in [
        "dmesg_mlx5_cmd_check_RTR2RTS_QP_bad-parameter_user-process_charm-2532.log",
        "dmesg_mlx5_cmd_check_create_mkey_bad-parameter_nvme-rdma_ucx-9488.log",
        "dmesg_mlx5_cmd_out_err_CREATE_MKEY_limits-exceeded_callbacks-suppressed_ucx-6264.log",
    ] {
        let (report, exit) = judge_json(&[&format!("{DATA}/{file}")]);
        assert_eq!(exit, 0, "{file}: {report}");
        assert_eq!(
            status_of(&report, "rdma.nic_events")[0]["status"],
            "pass",
            "{file}"
        );
    }
}

#[test]
fn a_peer_memory_module_that_failed_to_load_turns_gpudirect_rdma_off() {
    for file in [
        "dmesg-T_nv_peer_mem_unknown-symbol-err0_rhel7_nv_peer_memory-84.log",
        "dmesg-T_nvidia_peermem_disagrees-about-version_gb300_gpu-operator-2868.log",
        "dmesg_nv_peer_mem_disagrees_nvidia_p2p-and-ib-symbols_interleaved_nv_peer_memory-8.log",
        "dmesg_nv_peer_mem_disagrees_ubuntu14.04-kernel-upgrade_nv_peer_memory-39.log",
    ] {
        let (report, _) = judge_json(&[&format!("{DATA}/{file}")]);
        let c = status_of(&report, "rdma.peermem_events")[0];
        assert_eq!(c["status"], "warn", "{file}: {c}");
        assert!(
            c["summary"].as_str().unwrap().contains("failed to load"),
            "{c}"
        );
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .contains("GPUDirect RDMA is off"),
            "{c}"
        );
        assert!(
            c["evidence"][0]["source"]
                .as_str()
                .unwrap()
                .contains(&format!("{file}:")),
            "{c}"
        );
    }
    // A healthy counterpart: the mitigation's print of an old driver is noted, not a finding.
    let (report, _) =
        judge_json(&["tests/data/kernel/peermem-invalid-context-nv-peer-memory-120.txt"]);
    assert_eq!(
        status_of(&report, "rdma.peermem_events")[0]["status"],
        "pass"
    );
}

#[test]
fn gsp_timeouts_without_an_xid_line_are_xid_119() {
    // open-gpu-kernel-modules#1230 (a heartbeat timeout, then the `GSP Timeout` banner; and a
    // later fragment holding only the RPC history tables) and bazzite#4449 (journalctl -k,
    // indented): no `Xid` line in any of them.
    for (file, gpu) in [
        (
            "dmesg_nvrm_gh100_gpu6_gsp-heartbeat-then-kgspLogRpcTimeout_595.71_open-gpu-kernel-modules-1230.log",
            "GPU6",
        ),
        (
            "dmesg_nvrm_gpu6_rpc-history-tables_no-xid-token_open-gpu-kernel-modules-1230.log",
            "GPU6",
        ),
        (
            "journalctl-k_nvrm_gsp_heartbeat-timed-out_no-xid_indented_bazzite-4449.log",
            "GPU0",
        ),
    ] {
        let path = format!("{DATA}/{file}");
        let (report, exit) = judge_json(&[&path]);
        assert_eq!(exit, 1, "{file}: {report}");
        let c = status_of(&report, "driver.xid_events")[0];
        assert_eq!(c["status"], "fail", "{file}: {c}");
        let summary = c["summary"].as_str().unwrap();
        assert!(
            summary.contains("XID 119 ×1 (GSP rpc timeout)"),
            "{file}: {summary}"
        );
        // The GPU is named as the log names it, the driver's instance, not "unknown".
        assert!(
            summary.starts_with(&format!(
                "the driver's {gpu} (its bus id is not in the log)"
            )),
            "{file}: {summary}"
        );
        let e = &c["evidence"][0];
        assert!(
            e["observed"]
                .as_str()
                .unwrap()
                .starts_with(&format!("NVRM: {gpu} ")),
            "{file}: {e}"
        );
        // The line it quotes, by number.
        let source = e["source"].as_str().unwrap();
        let n: usize = source
            .strip_prefix(&format!("{path}:"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{file}: {source}"));
        let text = std::fs::read_to_string(common::repo().join(&path)).unwrap();
        assert!(
            text.lines().nth(n - 1).unwrap().contains(gpu),
            "{file}: line {n}"
        );
    }
    // The healthy counterpart: the same boot's other GSP lines (bazzite#4449: an RPC event
    // during bootup, an assertion) without the heartbeat lines, and the driver's load line.
    let text = std::fs::read_to_string(common::repo().join(format!(
        "{DATA}/journalctl-k_nvrm_gsp_heartbeat-timed-out_no-xid_indented_bazzite-4449.log"
    )))
    .unwrap();
    let calm: String = text
        .lines()
        .filter(|l| !l.contains("eartbeat"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(calm.contains("_kgspProcessRpcEvent"));
    let (report, exit) = judge_text("calm.log", &calm);
    assert_eq!(exit, 0, "{report}");
    assert_eq!(status_of(&report, "driver.xid_events")[0]["status"], "pass");
    // An explicit Xid 119 for the GPU is reported once, by its bus id, with or without the
    // heartbeat lines before it.
    let xid = "[   84.300500] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU6 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).\n";
    let before = std::fs::read_to_string(common::repo().join(format!(
        "{DATA}/dmesg_nvrm_gh100_gpu6_gsp-heartbeat-then-kgspLogRpcTimeout_595.71_open-gpu-kernel-modules-1230.log"
    )))
    .unwrap();
    let (report, _) = judge_text("with-xid.log", &format!("{before}{xid}"));
    let summary = status_of(&report, "driver.xid_events")[0]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.starts_with("GPU 0000:9b:00.0 XID 119 ×1 (GSP rpc timeout)"),
        "{summary}"
    );
    assert_eq!(summary.matches("XID 119").count(), 1, "{summary}");
    assert!(!summary.contains("unknown gpu"), "{summary}");
}

#[test]
fn ghes_records_say_their_aer_status_bits() {
    // netdev, tg3 at reboot (Dell R640, 2025): a fatal firmware-first record whose
    // `aer_uncor_status: 0x00100000` (mask 0x00010000) is Unsupported Request; its correctable
    // register is not read for a fatal record (the kernel's cper_print_aer).
    let (report, _) = judge_json(&[&format!(
        "{DATA}/dmesg_ghes_pcie-error_fatal_aer_cor_status+aer_uncor_status_tg3_dell-r640_lore-tg3-aer.log"
    )]);
    let c = status_of(&report, "topology.aer_errors")[0];
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("0000:01:00.1 uncorrected fatal: UnsupReq"),
        "{summary}"
    );
    assert!(!summary.contains("no detail"), "{summary}");
    // Records cut before their registers say so; a corrected record of a root port on an AMD
    // desktop stays silent.
    for file in [
        "dmesg_ghes_pcie-error_recoverable_interleaved-mce-edac_nvme_ovro-lwa-117.log",
        "syslog-kernel-prefix_ghes_pcie-error_corrected_root-port_ghes-seq-359_rocm-2927.log",
    ] {
        let (report, exit) = judge_json(&[&format!("{DATA}/{file}")]);
        assert_eq!(exit, 0, "{file}");
        let c = status_of(&report, "topology.aer_errors")[0];
        assert_eq!(c["status"], "skip", "{file}: {c}");
        assert!(
            c["summary"].as_str().unwrap().contains(": no detail)"),
            "{c}"
        );
    }
}
