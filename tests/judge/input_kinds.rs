//! What a pasted file is taken for: each kind told from its content, from a file and from
//! standard input; a mixed list is one report; an unknown kind is a usage error.

use super::*;

#[test]
fn each_kind_is_told_from_its_content_from_a_file_and_from_stdin() {
    let cases = [
        (
            format!("{DATA}/dmesg-T_nv_peer_mem_unknown-symbol-err0_rhel7_nv_peer_memory-84.log"),
            "kernel-log",
            "driver.xid_events",
        ),
        (
            format!(
                "{DATA}/journalctl-k_nvrm_gsp_heartbeat-timed-out_no-xid_indented_bazzite-4449.log"
            ),
            "kernel-log",
            "driver.xid_events",
        ),
        (
            format!(
                "{DATA}/nccl-tests_ompi-tag-output_efa-p3dn_peak-busbw-below-1GiB_eks-blueprints.log"
            ),
            "nccl",
            "nccl.run_completed",
        ),
        (
            format!(
                "{DATA}/nccl-tests_old-format_error-column_0e+00_no-redop-col_rows-only_nccl-644.log"
            ),
            "nccl",
            "nccl.run_completed",
        ),
        (
            format!("{DATA}/perftest_ib_write_bw_a_sweep_healthy_cloud-native-stack.txt"),
            "perftest",
            "rdma.perftest_log",
        ),
        (
            format!(
                "{DATA}/perftest_ib_write_bw_ngc_rdma_test-harness-INFO-lines_bidir_json-out_ngc_multinode_perf-108.log"
            ),
            "perftest",
            "rdma.perftest_log",
        ),
        (
            format!("{TOPO}/h100-8gpu-8nic-nv18-spaces-sglang-30401.txt"),
            "topo-matrix",
            "topology.gpu_nic_locality",
        ),
        (
            format!("{TOPO}/old-format-mlx5-cols-2gpu-slurm-slice-jdh4-della.txt"),
            "topo-matrix",
            "topology.gpu_nic_locality",
        ),
    ];
    for (path, kind, code) in cases {
        for (report, exit) in [judge_json(&[&path]), stdin_json(&path)] {
            assert!([0, 1, 3].contains(&exit), "{path}: exit {exit}");
            let root = report["source"]["root"].as_str().unwrap();
            assert!(
                root.ends_with(&format!("({kind})")),
                "{path}: read as {root}"
            );
            assert_eq!(report["source"]["kind"], "files", "{path}");
            assert_eq!(status_of(&report, code).len(), 1, "{path}: {code} ran once");
            // Nothing of this machine is read: every layer this kind does not speak to is
            // skip, needing the node, and no check is `error` for want of the node.
            for layer in report["layers"].as_array().unwrap() {
                if layer["checks"].as_array().unwrap().is_empty() {
                    assert_eq!(layer["status"], "skip", "{path}: {}", layer["id"]);
                    assert!(
                        layer["reason"]
                            .as_str()
                            .unwrap()
                            .starts_with("needs the node")
                    );
                }
            }
            for (code, status) in statuses(&report) {
                assert_ne!(status, "error", "{path}: {code} errored");
            }
        }
    }
}

#[test]
fn a_mixed_list_gives_one_report() {
    let files = [
        format!("{DATA}/dmesg_mlx5_cmd_check_RTR2RTS_QP_bad-parameter_user-process_charm-2532.log"),
        format!(
            "{DATA}/nccl_socket-fallback_eth0_libibverbs-missing_using-network-Socket_nccl-2.10.3_nccl-857.log"
        ),
        format!("{DATA}/perftest_ib_write_bw_a_sweep_healthy_cloud-native-stack.txt"),
        format!("{TOPO}/synthetic-h100-8gpu-8nic-gpu3-nearest-nic-sys.txt"),
    ];
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    let out = gpudoctor(&[&["judge", "--format", "json"], refs.as_slice()].concat());
    let report: Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON document");
    let root = report["source"]["root"].as_str().unwrap();
    for (file, kind) in files
        .iter()
        .zip(["kernel-log", "nccl", "perftest", "topo-matrix"])
    {
        assert!(root.contains(&format!("{file} ({kind})")), "{root}");
    }
    let codes: Vec<String> = statuses(&report).into_iter().map(|(c, _)| c).collect();
    for code in [
        "driver.xid_events",
        "nccl.run_completed",
        "rdma.perftest_log",
        "topology.gpu_nic_locality",
    ] {
        assert!(codes.iter().any(|c| c == code), "{code} in {codes:?}");
    }
    // The topology finding fails the report: exit 1, and it is the first failure.
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["exit_code"], 1);
    assert_eq!(report["first_failure"]["code"], "topology.gpu_nic_locality");
    // Every format renders the one report.
    for format in ["table", "markdown", "prometheus"] {
        let out = gpudoctor(&[&["judge", "--format", format], refs.as_slice()].concat());
        assert_eq!(out.status.code(), Some(1), "{format}");
        assert!(!out.stdout.is_empty(), "{format}");
    }
}

#[test]
fn an_unknown_kind_is_a_usage_error_naming_the_kinds() {
    let out = gpudoctor(&["judge", "LICENSE"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("LICENSE: not a kind judge knows"), "{err}");
    for kind in [
        "kernel log",
        "NCCL",
        "perftest",
        "nvidia-smi topo -m",
        "kubelet config",
        "containerd",
        "CDI",
    ] {
        assert!(err.contains(kind), "{kind} in {err}");
    }
    // Missing file, a directory, two stdins: usage errors too.
    for args in [
        vec!["judge", "no/such/file"],
        vec!["judge", "tests"],
        vec!["judge", "-", "-"],
        vec!["judge"],
    ] {
        assert_eq!(gpudoctor(&args).status.code(), Some(2), "{args:?}");
    }
}
