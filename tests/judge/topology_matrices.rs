//! `nvidia-smi topo -m` pastes: every GPU, NIC and link listed, a GPU whose nearest NIC is SYS
//! a finding at `file:line`, matrices judged right, and `topo --matrix` beside the node's own.

use super::*;

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
