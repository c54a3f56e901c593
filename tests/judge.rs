//! `gpudoctor judge FILE…` (issue 45): pasted files told apart by their content, judged by
//! `check`'s checks with no node behind them, into one report; findings name file and line.
//! Inputs are real pastes (tests/data/judge/SOURCES.md, tests/data/topo-m/README.md).

mod common;

use std::io::Write as _;
use std::process::Stdio;

use common::gpudoctor;
use serde_json::Value;

const DATA: &str = "tests/data/judge";
const TOPO: &str = "tests/data/topo-m";

fn judge_json(files: &[&str]) -> (Value, i32) {
    let mut args = vec!["judge", "--format", "json"];
    args.extend_from_slice(files);
    let out = gpudoctor(&args);
    let code = out.status.code().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{files:?}: not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, code)
}

fn stdin_json(path: &str) -> (Value, i32) {
    let text = std::fs::read(common::repo().join(path)).unwrap();
    let mut child = common::scratch::gpudoctor_command()
        .args(["judge", "--format", "json", "-"])
        .current_dir(common::repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    let report = serde_json::from_slice(&out.stdout).expect("one JSON report");
    (report, out.status.code().unwrap())
}

/// Every check result of the report, with its layer.
fn checks(report: &Value) -> Vec<(String, Value)> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| {
            let id = l["id"].as_str().unwrap().to_string();
            l["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |c| (id.clone(), c.clone()))
        })
        .collect()
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    checks(report)
        .into_iter()
        .map(|(_, c)| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn status_of<'r>(report: &'r Value, code: &str) -> Vec<&'r Value> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .filter(|c| c["code"] == code)
        .collect()
}

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

#[test]
fn an_8_gpu_8_nic_matrix_lists_every_gpu_and_nic_and_its_links() {
    let path = format!("{TOPO}/h100-8gpu-8nic-nv18-spaces-sglang-30401.txt");
    let (report, exit) = judge_json(&[&path]);
    assert_eq!(exit, 0, "a healthy HGX H100 is silent: {report}");
    let locality = status_of(&report, "topology.gpu_nic_locality")[0];
    assert_eq!(locality["status"], "pass");
    let rows: Vec<&str> = locality["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["observed"].as_str().unwrap())
        .collect();
    assert_eq!(rows.len(), 16, "{rows:#?}");
    for g in 0..8 {
        let row = rows
            .iter()
            .find(|r| r.starts_with(&format!("GPU{g},")))
            .unwrap();
        assert!(row.contains(&format!("NIC{g} PIX")), "{row}");
        assert!(row.contains("NV18"), "{row}");
        let nic = rows
            .iter()
            .find(|r| r.starts_with(&format!("NIC{g} (mlx5_{g})")))
            .unwrap();
        assert!(nic.contains(&format!("GPU{g} PIX")), "{nic}");
    }
    assert_eq!(
        status_of(&report, "nvlink.links_active")[0]["status"],
        "pass"
    );
    assert_eq!(
        status_of(&report, "nvlink.fabric_state")[0]["status"],
        "pass"
    );
}

#[test]
fn a_gpu_whose_nearest_nic_is_sys_is_a_finding_naming_file_and_line() {
    let path = format!("{TOPO}/synthetic-h100-8gpu-8nic-gpu3-nearest-nic-sys.txt");
    let (report, exit) = judge_json(&[&path]);
    assert_eq!(exit, 1);
    let locality = status_of(&report, "topology.gpu_nic_locality")[0];
    assert_eq!(locality["status"], "fail");
    let summary = locality["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("GPU3 nearest NIC is NIC0 (mlx5_0) at SYS"),
        "{summary}"
    );
    assert_eq!(locality["evidence"][0]["source"], format!("{path}:5"));
}

#[test]
fn topology_matrices_judged_right() {
    // Four GPUs of eight reach a NIC only at NODE where the others have PIX ones: warn.
    let (report, exit) = judge_json(&[&format!(
        "{TOPO}/h100-8gpu-6nic-nv18-gpus-without-pix-nic-della-pli.txt"
    )]);
    assert_eq!(exit, 0);
    let locality = status_of(&report, "topology.gpu_nic_locality")[0];
    assert_eq!(locality["status"], "warn");
    for gpu in ["GPU1", "GPU2", "GPU5", "GPU7"] {
        assert!(
            locality["summary"]
                .as_str()
                .unwrap()
                .contains(&format!("{gpu} nearest NIC"))
        );
    }
    // Healthy layouts stay silent: PXB pairs on HGX A100, PCIe-only with PIX NICs, an old
    // 2-GPU slice with no close NIC anywhere, V100 NV3.
    for file in [
        "a100-8gpu-10nic-nv12-pxb-no-gpu-numa-id-mpi-gpu-compress.txt",
        "h100-pcie-8gpu-12nic-no-nvlink-tabs-deepep-397.txt",
        "old-format-mlx5-cols-2gpu-slurm-slice-jdh4-della.txt",
        "old-format-mlx5-cols-v100-4gpu-nv3-jdh4-della.txt",
    ] {
        let (report, exit) = judge_json(&[&format!("{TOPO}/{file}")]);
        assert_eq!(exit, 0, "{file}: {report}");
        for (code, status) in statuses(&report) {
            assert!(
                ["pass", "skip"].contains(&status.as_str()),
                "{file}: {code} {status}"
            );
        }
    }
    // A GPU that lost its NVLinks on an NVSwitch board: no NV# in its row and column.
    let text = std::fs::read_to_string(
        common::repo()
            .join(TOPO)
            .join("h100-8gpu-8nic-nv18-spaces-sglang-30401.txt"),
    )
    .unwrap();
    // Edited through whitespace-split cells, joined by tabs (a tab paste reads the same).
    let edited: String = text
        .lines()
        .map(|l| {
            let mut cells: Vec<&str> = l.split_whitespace().collect();
            if l.starts_with("GPU5") {
                for c in cells.iter_mut().skip(1).take(8) {
                    if c.starts_with("NV") {
                        *c = "SYS";
                    }
                }
            } else if l.starts_with("GPU") && cells.get(6).is_some_and(|c| c.starts_with("NV")) {
                cells[6] = "SYS";
            }
            cells.join("\t") + "\n"
        })
        .collect();
    let dir = common::scratch::tempdir().unwrap();
    let file = dir.path().join("gpu5-no-nvlink.txt");
    std::fs::write(&file, edited).unwrap();
    let (report, exit) = judge_json(&[file.to_str().unwrap()]);
    assert_eq!(exit, 1, "{report}");
    let links = status_of(&report, "nvlink.links_active")[0];
    assert_eq!(links["status"], "fail");
    assert!(
        links["summary"]
            .as_str()
            .unwrap()
            .starts_with("GPU5 without NVLink"),
        "{links}"
    );
    let fabric = status_of(&report, "nvlink.fabric_state")[0];
    assert_eq!(fabric["status"], "fail");
    assert!(
        fabric["summary"]
            .as_str()
            .unwrap()
            .starts_with("7 GPU pair(s) outside the NVSwitch fabric"),
        "{fabric}"
    );
}

#[test]
fn topo_prints_a_pasted_matrix_beside_its_own() {
    let path = format!("{TOPO}/old-format-mlx5-cols-v100-4gpu-nv3-jdh4-della.txt");
    let out = gpudoctor(&[
        "topo",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--matrix",
        &path,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let (own, pasted) = text
        .split_once(&format!("read from {path}:"))
        .expect("both matrices");
    assert!(own.contains("GPU7"), "{own}");
    let row = pasted.lines().find(|l| l.starts_with("GPU2")).unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        [
            "GPU2", "SYS", "SYS", "X", "NV3", "SYS", "SYS", "NODE", "NODE", "64-127", "8"
        ]
    );
    // Not a matrix, or with --format: usage errors.
    let bad = gpudoctor(&[
        "topo",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--matrix",
        "LICENSE",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let json = gpudoctor(&[
        "topo",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--format",
        "json",
        "--matrix",
        &path,
    ]);
    assert_eq!(json.status.code(), Some(2));
}

#[test]
fn configs_as_people_have_them() {
    // The kubelet's /configz answer and OpenShift's KubeletConfig: their policies are read.
    for (file, cpu) in [
        (
            "kubelet_configz_jq_eks-1.30_cpumanager-static_topology-single-numa-node.json",
            "static",
        ),
        (
            "openshift_kubeletconfig_oc-get-yaml_cpumanager-static_andreaskaris-blog.yaml",
            "static",
        ),
        (
            "openshift_node_kubelet.conf_json_cpumanager-static_andreaskaris-blog.json",
            "static",
        ),
    ] {
        let path = format!("{DATA}/{file}");
        let (report, _) = judge_json(&[&path]);
        assert!(
            report["source"]["root"]
                .as_str()
                .unwrap()
                .ends_with("(kubelet-config)")
        );
        let managers = status_of(&report, "topology.kubelet_managers")[0];
        let summary = managers["summary"].as_str().unwrap();
        assert!(
            summary.contains(&format!("CPU manager {cpu}")),
            "{file}: {summary}"
        );
        // Evidence names the pasted file, not where judge placed it.
        for e in managers["evidence"].as_array().unwrap() {
            assert!(e["source"].as_str().unwrap().starts_with(&path), "{e}");
        }
    }
    // A containerd config without the NVIDIA runtime or CDI: the toolkit layer fails.
    let path = "fixtures/h100-toolkit-fault-nvlinks-down/etc/containerd/config.toml";
    let (report, exit) = judge_json(&[path]);
    assert_eq!(exit, 1);
    assert!(
        report["source"]["root"]
            .as_str()
            .unwrap()
            .ends_with("(runtime-config)")
    );
    assert_eq!(
        status_of(&report, "toolkit.container_runtime")[0]["status"],
        "fail"
    );
    // A CDI spec is told apart.
    let (report, _) = judge_json(&["fixtures/hgx-h100-healthy/var/run/cdi/nvidia.yaml"]);
    assert!(
        report["source"]["root"]
            .as_str()
            .unwrap()
            .ends_with("(cdi-spec)")
    );
}

/// Write `text` to a scratch file named `name`; judge it.
fn judge_text(name: &str, text: &str) -> (Value, i32) {
    let dir = common::scratch::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, text).unwrap();
    judge_json(&[file.to_str().unwrap()])
}

#[test]
fn launcher_and_collector_prefixes_on_a_healthy_nccl_tests_log() {
    // A real healthy run (tests/data/nccl/README.md), every line given each prefix as the
    // launcher or collector writes it. No public NCCL log with these prefixes was found
    // (tests/data/judge/SOURCES.md, "Not found"), so the prefixes are put on here: torchrun's
    // `--tee` role and rank (torch/distributed/elastic/multiprocessing/api.py), and the
    // kubelet's CRI container log line, in the shape CRI-O wrote it in cri-o#3181
    // (tests/data/judge/cri-o_container-log-file_CRI-format_offset-timezone_stderr-F_cri-o-3181.log).
    let log = std::fs::read_to_string(
        common::repo().join("tests/data/nccl/real/nccl-tests-290-h100-single-node.log"),
    )
    .unwrap();
    let (plain, exit) = judge_text("plain.log", &log);
    assert_eq!(exit, 0, "{plain}");
    for (name, prefix) in [
        ("torchrun.log", "[default0]:"),
        ("cri.log", "2026-01-06T10:00:00.123456789Z stdout F "),
        (
            "cri-offset.log",
            "2020-01-26T03:17:29.346494690+00:00 stdout F ",
        ),
    ] {
        let text: String = log.lines().map(|l| format!("{prefix}{l}\n")).collect();
        let (report, exit) = judge_text(name, &text);
        assert_eq!(exit, 0, "{name}: {report}");
        assert_eq!(statuses(&report), statuses(&plain), "{name}");
    }
}

#[test]
fn socket_fallback_after_the_plugin_and_no_hca() {
    for file in [
        "nccl_socket-fallback_no-plugin_ib-no-device_using-network-Socket_trailing-space-padded_nccl-1126.log",
        "nccl-tests_socket-fallback_lo_nccl-2.4.8_no-plugin_ib-no-device_nccl-352.log",
    ] {
        let (report, _) = judge_json(&[&format!("{DATA}/{file}")]);
        let c = status_of(&report, "nccl.socket_fallback")[0];
        assert_eq!(c["status"], "warn", "{file}: {c}");
        let summary = c["summary"].as_str().unwrap();
        assert!(summary.starts_with("socket fallback:"), "{summary}");
        assert!(
            summary.contains("no net plugin (libnccl-net.so), then NCCL found no usable HCA"),
            "{summary}"
        );
    }
    // The other causes are named too; a run over RDMA stays silent.
    let (report, _) = judge_json(&[&format!(
        "{DATA}/nccl_socket-fallback_eth0_libibverbs-missing_using-network-Socket_nccl-2.10.3_nccl-857.log"
    )]);
    let c = status_of(&report, "nccl.socket_fallback")[0];
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("libibverbs is missing"),
        "{c}"
    );
    let (report, _) = judge_json(&["tests/data/nccl/real/aws-ofi-nccl-65-p4d-dip.log"]);
    for c in status_of(&report, "nccl.socket_fallback") {
        assert_ne!(c["status"], "warn", "{c}");
    }
}

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

/// Every check's code, status and summary: what a reader of the report is told.
fn verdicts(report: &Value) -> Vec<(String, String, String)> {
    checks(report)
        .into_iter()
        .map(|(_, c)| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["summary"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A line as Docker's json-file driver writes it (moby daemon/logger/jsonfilelog/jsonlog/
/// jsonlogbytes.go, `MarshalJSONBuf` and `ffjsonWriteJSONBytesAsString`: `\\`, `"`, `\n`, `\r`
/// escaped by letter, other bytes below 0x20 and `<`, `>`, `&` as `\u00XX`).
fn docker_entry(log: &str, stream: &str) -> String {
    let mut s = String::from("{\"log\":\"");
    for c in log.chars() {
        match c {
            '\\' | '"' => {
                s.push('\\');
                s.push(c);
            }
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&') => {
                s.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => s.push(c),
        }
    }
    s.push_str(&format!(
        "\",\"stream\":\"{stream}\",\"time\":\"2026-01-06T10:00:00.123456789Z\"}}\n"
    ));
    s
}

#[test]
fn docker_json_file_lines_and_open_mpi_timestamps_read_healthy() {
    // Real healthy runs (tests/data/nccl/real/), with NCCL INFO lines and without.
    for real in [
        "gcp-h200-two-node-all-gather",
        "nccl-tests-290-h100-single-node",
        "eks-efa-t4-two-node-tag-output",
    ] {
        let log = std::fs::read_to_string(
            common::repo().join(format!("tests/data/nccl/real/{real}.log")),
        )
        .unwrap();
        let (plain, exit) = judge_text("plain.log", &log);
        assert_eq!(exit, 0, "{real}: {plain}");
        assert_eq!(
            status_of(&plain, "nccl.run_completed")[0]["status"],
            "pass",
            "{real}"
        );
        // Every line a json-file entry; a long line cut into two entries, the first without
        // its newline (moby daemon/logger/copier.go: a message over the 16 KiB buffer is
        // written in parts, joined again by `docker logs`; parts of two streams interleaved
        // are container_log.rs's unit tests).
        let mut json = String::new();
        for line in log.lines() {
            let stream = if line.contains("NCCL INFO") {
                "stderr"
            } else {
                "stdout"
            };
            if line.starts_with("# nThread") {
                let cut = line.len() / 2;
                json.push_str(&docker_entry(&line[..cut], stream));
                json.push_str(&docker_entry(&format!("{}\n", &line[cut..]), stream));
            } else {
                json.push_str(&docker_entry(&format!("{line}\n"), stream));
            }
        }
        let (report, exit) = judge_text("container-json.log", &json);
        assert_eq!(exit, 0, "{real} json-file: {report}");
        assert!(
            report["source"]["root"]
                .as_str()
                .unwrap()
                .ends_with("(nccl)")
        );
        assert_eq!(verdicts(&report), verdicts(&plain), "{real} json-file");
        // The same in the CRI format of /var/log/pods (the kubelet's `parseCRILog`): the
        // `# nThread` line and every result row cut into a `P` part and the `F` line that ends
        // it (read line by line, each part was a line of its own: rows without their figures).
        let mut cri = String::new();
        for (n, line) in log.lines().enumerate() {
            let stream = if line.contains("NCCL INFO") {
                "stderr"
            } else {
                "stdout"
            };
            let at = format!("2026-01-06T10:00:{:02}.{n:09}Z {stream}", n % 60);
            let row = line.trim_start().starts_with(|c: char| c.is_ascii_digit());
            if line.starts_with("# nThread") || row {
                let cut = line.len() / 2;
                cri.push_str(&format!("{at} P {}\n", &line[..cut]));
                cri.push_str(&format!("{at} F {}\n", &line[cut..]));
            } else {
                cri.push_str(&format!("{at} F {line}\n"));
            }
        }
        let (report, exit) = judge_text("0.log", &cri);
        assert_eq!(exit, 0, "{real} cri: {report}");
        assert_eq!(verdicts(&report), verdicts(&plain), "{real} cri");
        // Every row cut in two lines (a copy whose parts were not joined): the footer is there
        // but no row reads, so the run is inconclusive, never "ran to its footer".
        let cut: String = log
            .lines()
            .map(|l| {
                if l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                    format!("{}\n{}\n", &l[..l.len() / 2], &l[l.len() / 2..])
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let (report, exit) = judge_text("cut.log", &cut);
        if cut.lines().count() == log.lines().count() {
            // Rows behind `--tag-output` tags: none cut (the prefixed rows are the test above).
            assert!(real.starts_with("eks-efa"), "{real}: no row cut");
            continue;
        }
        let c = status_of(&report, "nccl.run_completed")[0];
        assert_eq!(c["status"], "error", "{real} cut: {c}");
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .contains("none of its result rows could be read"),
            "{c}"
        );
        assert_eq!(exit, 3, "{real} cut: {report}");
        if real.starts_with("eks-efa") {
            // Already behind `--tag-output`: not run through `--timestamp-output` too.
            continue;
        }
        // Open MPI 4.1.4 `mpirun --timestamp-output --tag-output` around the same log, as
        // the real mpirun wrote it (tests/data/judge/SOURCES.md).
        let path = format!("{DATA}/ompi-4.1.4_timestamp-output_tag-output_{real}.log");
        let (report, exit) = judge_json(&[&path]);
        assert_eq!(exit, 0, "{path}: {report}");
        assert_eq!(verdicts(&report), verdicts(&plain), "{path}");
        // Without --tag-output the stamp comes before a bare `<stdout>:`.
        let untagged = std::fs::read_to_string(common::repo().join(&path))
            .unwrap()
            .replace("[1,0]<stdout>:", "<stdout>:");
        let (report, exit) = judge_text("stamped.log", &untagged);
        assert_eq!(exit, 0, "{real} untagged: {report}");
        assert_eq!(verdicts(&report), verdicts(&plain), "{real} untagged");
    }
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

#[test]
fn sweep_peak_beside_the_verdict_and_old_error_columns_judged_by_their_footer() {
    // eks-blueprints (EFA, p3dn): the peak, 3.15 GB/s, is below 1 GiB and ties between the
    // in-place 128 MiB and out-of-place 256 MiB figures; the verdict's 1 GiB figure is lower.
    let (report, _) = judge_json(&[&format!(
        "{DATA}/nccl-tests_ompi-tag-output_efa-p3dn_peak-busbw-below-1GiB_eks-blueprints.log"
    )]);
    let c = status_of(&report, "nccl.bus_bandwidth")[0];
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "peak busbw 3.12 GB/s at 1 GiB (sweep peak 3.15 GB/s at 128 MiB, in-place)"
        ),
        "{summary}"
    );
    // aws-efa-eks: an old build's `error` column (2e-07, 5e-07) under its own footer `Out of
    // bounds values : 0 OK`: no wrong results.
    let path = format!("{DATA}/nccl-tests_ompi-tag-output_old-error-column_aws-efa-eks.log");
    let (report, _) = judge_json(&[&path]);
    assert_eq!(
        status_of(&report, "nccl.wrong_results")[0]["status"],
        "pass"
    );
    // The same run with deviations past the float tolerance gpudoctor knows (1e-05), which
    // that build allowed on 16 ranks (`DeltaMaxValue(type)*(nranks - 1)`, nccl-tests before
    // 2022-08): its footer still says 0 OK, so it is the test's verdict that counts.
    let text = std::fs::read_to_string(common::repo().join(&path)).unwrap();
    let deviated = text.replace("  5e-07", "  3e-05");
    assert_ne!(deviated, text);
    let (report, exit) = judge_text("deviated.log", &deviated);
    let c = status_of(&report, "nccl.wrong_results")[0];
    assert_eq!(c["status"], "pass", "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("deviations (up to 3e-05) are within the test's own bounds"),
        "{c}"
    );
    assert_ne!(exit, 3);
    // Where the footer counted values out of bounds, the rows are wrong results.
    let failed = deviated.replace(
        "Out of bounds values : 0 OK",
        "Out of bounds values : 4 FAILED",
    );
    assert_ne!(failed, deviated);
    let (report, exit) = judge_text("failed.log", &failed);
    assert_eq!(exit, 1);
    let c = status_of(&report, "nccl.wrong_results")[0];
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .starts_with("wrong results at"),
        "{c}"
    );
}

#[test]
fn a_cdi_spec_is_judged_on_what_it_alone_shows() {
    // The healthy H100 fixture's spec (nvidia-ctk's shape, cdiVersion 0.5.0, devices `0`..`7`,
    // their UUIDs and `all`): valid; its device nodes are the node's to check.
    let path = "fixtures/hgx-h100-healthy/var/run/cdi/nvidia.yaml";
    let (report, exit) = judge_json(&[path]);
    assert_eq!(exit, 0, "{report}");
    let c = status_of(&report, "toolkit.cdi_specs")[0];
    assert_eq!(c["status"], "pass", "{c}");
    let summary = c["summary"].as_str().unwrap();
    assert!(summary.contains("cdiVersion 0.5.0"), "{summary}");
    assert!(summary.contains("needs the node"), "{summary}");
    // What the CDI library refuses (container-device-interface specs-go/version.go,
    // pkg/parser/parser.go): each a failure naming why.
    let text = std::fs::read_to_string(common::repo().join(path)).unwrap();
    for (edit, why) in [
        (
            text.replace("cdiVersion: 0.5.0", "cdiVersion: 0.3.0"),
            "cdiVersion 0.3.0 is below 0.5.0, which a device name starting with a digit needs",
        ),
        (
            text.replace("cdiVersion: 0.5.0", "cdiVersion: 9.9.9"),
            "cdiVersion \"9.9.9\" is not one the CDI library knows",
        ),
        (
            text.replace("name: \"1\"", "name: \"0\"")
                .replace("name: '1'", "name: '0'"),
            "device \"0\" is defined twice",
        ),
        (
            text.replacen("kind: nvidia.com/gpu", "kind: nvidia", 1),
            "kind \"nvidia\" is not `vendor/class`",
        ),
    ] {
        assert_ne!(edit, text, "{why}");
        let (report, exit) = judge_text("spec.yaml", &edit);
        assert_eq!(exit, 1, "{why}: {report}");
        let c = status_of(&report, "toolkit.cdi_specs")[0];
        assert!(c["summary"].as_str().unwrap().contains(why), "{why}: {c}");
        assert!(
            c["evidence"][0]["source"]
                .as_str()
                .unwrap()
                .ends_with("spec.yaml"),
            "{c}"
        );
    }
    // A spec that does not parse.
    let (report, exit) = judge_text(
        "broken.yaml",
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [\n",
    );
    assert_eq!(exit, 1, "{report}");
    let c = status_of(&report, "toolkit.cdi_specs")[0];
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .starts_with("CDI spec does not parse"),
        "{c}"
    );
}
