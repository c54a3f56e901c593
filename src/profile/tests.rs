//! Tests of profile selection, the built-in catalogue and profile files (parsing, keys, errors).

use super::*;

fn select(names: &[&str]) -> Option<String> {
    select_auto(names).map(|p| p.name)
}

#[test]
fn h100_x8_selects_hgx_h100() {
    let names = ["NVIDIA H100 80GB HBM3"; 8];
    assert_eq!(select(&names).as_deref(), Some("hgx-h100"));
}

#[test]
fn h100_node_that_lost_a_gpu_keeps_its_platform_profile() {
    let names = ["NVIDIA H100 80GB HBM3"; 7];
    assert_eq!(select(&names).as_deref(), Some("hgx-h100"));
}

#[test]
fn half_an_hgx_board_is_not_the_platform() {
    assert_eq!(select(&["NVIDIA H100 80GB HBM3"; 4]), None);
    assert_eq!(select(&["NVIDIA H100 80GB HBM3"; 9]), None);
    assert_eq!(
        select(&["NVIDIA H100 80GB HBM3"]).as_deref(),
        Some(GENERIC_PCIE_GPU)
    );
}

#[test]
fn h200_nvl_is_a_pcie_card_not_hgx_h200() {
    assert_eq!(
        select(&["NVIDIA H200 NVL"]).as_deref(),
        Some(GENERIC_PCIE_GPU)
    );
    assert_eq!(select(&["NVIDIA H200 NVL"; 8]), None);
    assert_eq!(select(&["NVIDIA H200"; 8]).as_deref(), Some("hgx-h200"));
}

#[test]
fn gh200_is_not_h200() {
    assert_eq!(select(&["NVIDIA GH200 480GB"; 8]), None);
    let h200 = builtin("hgx-h200").unwrap();
    assert!(!h200.matches_gpu_name("NVIDIA GH200 480GB"));
    assert!(!h200.matches_gpu_name("NVIDIA H200 NVL"));
    assert!(h200.matches_gpu_name("NVIDIA H200"));
    assert!(h200.matches_gpu_name("H200"));
}

#[test]
fn a100_names_select_by_memory() {
    assert_eq!(
        select(&["NVIDIA A100-SXM4-80GB"; 8]).as_deref(),
        Some("hgx-a100-80gb")
    );
    assert_eq!(
        select(&["NVIDIA A100-SXM-80GB"; 8]).as_deref(),
        Some("hgx-a100-80gb")
    );
    assert_eq!(
        select(&["NVIDIA A100-SXM4-40GB"; 8]).as_deref(),
        Some("hgx-a100-40gb")
    );
    // Older drivers omit the `NVIDIA ` prefix.
    assert_eq!(
        select(&["A100-SXM4-80GB"; 8]).as_deref(),
        Some("hgx-a100-80gb")
    );
}

#[test]
fn b200_and_unknown_platforms() {
    assert_eq!(select(&["NVIDIA B200"; 8]).as_deref(), Some("hgx-b200"));
    assert_eq!(select(&["NVIDIA GB200"; 4]), None);
    assert_eq!(select(&["NVIDIA L4"; 4]), None);
    assert_eq!(select(&["NVIDIA L4"]).as_deref(), Some(GENERIC_PCIE_GPU));
    assert_eq!(select(&[]), None);
}

#[test]
fn mixed_models_select_nothing() {
    let mut names = vec!["NVIDIA H100 80GB HBM3"; 7];
    names.push("NVIDIA H200");
    assert_eq!(select(&names), None);
}

#[test]
fn at_most_one_platform_profile_claims_each_known_name() {
    for name in [
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100-SXM-80GB",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H200",
        "NVIDIA H200 NVL",
        "NVIDIA GH200 480GB",
        "NVIDIA B200",
    ] {
        let claims = builtins()
            .iter()
            .filter(|p| !p.gpu_names.is_empty() && p.matches_gpu_name(name))
            .count();
        assert!(claims <= 1, "{name} is claimed by {claims} profiles");
    }
}

#[test]
fn builtins_are_well_formed() {
    let all = builtins();
    let mut names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate built-in names");
    for p in &all {
        assert!(!p.sources.is_empty(), "{} has no sources", p.name);
        assert!(!p.description.is_empty(), "{} has no description", p.name);
        if let (Some(w), Some(f)) = (p.nccl_busbw_warn_gbps, p.nccl_busbw_fail_gbps) {
            assert!(f <= w, "{}: fail threshold above warn", p.name);
        }
        if p.provisional {
            assert!(p.nccl_busbw_fail_gbps.is_none(), "{} provisional", p.name);
        }
    }
}

#[test]
fn file_keys_are_the_profile_fields_plus_base() {
    // Every field written out (no `..`), so a new field fails to compile here until it
    // is added to the literal, and then fails this test until it is in FILE_KEYS.
    let full = Profile {
        name: String::new(),
        description: String::new(),
        gpu_names: vec![String::new()],
        gpu_names_exclude: vec![String::new()],
        gpu_count: Some(0),
        gpu_pcie_gen: Some(0),
        gpu_pcie_width: Some(0),
        nvlinks_per_gpu: Some(0),
        nvswitch: Some(false),
        nvswitch_pci_functions: Some(0),
        rdma_ports: Some(0),
        rdma_rate_gbps: Some(0),
        rdma_link_layer: Some(String::new()),
        rdma_devices: vec![String::new()],
        gpudirect_rdma: Some(false),
        sriov_vfs: Some(0),
        vbios_version: Some(String::new()),
        nccl_busbw_warn_gbps: Some(0.0),
        nccl_busbw_fail_gbps: Some(0.0),
        nccl_nvls: Some(false),
        nccl_ring_busbw_warn_gbps: Some(0.0),
        nccl_ring_busbw_fail_gbps: Some(0.0),
        nccl_multinode_busbw_warn_gbps: Some(0.0),
        nccl_multinode_busbw_fail_gbps: Some(0.0),
        host_copy_fail_gbps: Some(0.0),
        p2p_copy_fail_gbps: Some(0.0),
        gpudirect_fail_gbits: Some(0.0),
        provisional: false,
        sources: vec![String::new()],
    };
    let table = toml::Table::try_from(&full).unwrap();
    let mut fields: Vec<&str> = table.keys().map(String::as_str).collect();
    fields.push("base");
    fields.sort();
    let mut keys = FILE_KEYS.to_vec();
    keys.sort();
    assert_eq!(fields, keys);
}

#[test]
fn builtin_survives_a_round_trip_through_the_file_format() {
    for p in builtins() {
        let text = toml::to_string(&p).unwrap();
        let back = parse_file(Path::new("x.toml"), &text).unwrap();
        assert_eq!(back, p);
    }
}

#[test]
fn file_with_base_overrides_only_what_it_sets() {
    let text = "# four of eight\nbase = \"hgx-h100\"\nname = \"h100-half\"\ngpu_count = 4\n";
    let p = parse_file(Path::new("half.toml"), text).unwrap();
    let h100 = builtin("hgx-h100").unwrap();
    assert_eq!(p.name, "h100-half");
    assert_eq!(p.gpu_count, Some(4));
    assert_eq!(p.nvlinks_per_gpu, h100.nvlinks_per_gpu);
    assert_eq!(p.nccl_busbw_fail_gbps, h100.nccl_busbw_fail_gbps);
    assert_eq!(p.sources, h100.sources);
}

#[test]
fn a_file_that_changes_the_nics_does_not_inherit_the_multi_node_figure() {
    let file = |text: &str| parse_file(Path::new("p.toml"), text).unwrap();
    let kept = file("base = \"hgx-a100-80gb\"\ngpu_count = 8\n");
    assert_eq!(kept.nccl_multinode_busbw_warn_gbps, Some(192.0));
    let four_nics = file("base = \"hgx-a100-80gb\"\nrdma_ports = 4\n");
    assert_eq!(four_nics.nccl_multinode_busbw_warn_gbps, None);
    assert_eq!(four_nics.nccl_multinode_busbw_fail_gbps, None);
    let restated = file(
        "base = \"hgx-a100-80gb\"\nrdma_rate_gbps = 400\nnccl_multinode_busbw_warn_gbps = 370.0\n",
    );
    assert_eq!(restated.nccl_multinode_busbw_warn_gbps, Some(370.0));
    assert_eq!(restated.nccl_multinode_busbw_fail_gbps, None);
}

#[test]
fn sriov_vfs_is_read_and_checked_like_the_other_counts() {
    let p = parse_file(Path::new("p.toml"), "base = \"hgx-h100\"\nsriov_vfs = 8\n").unwrap();
    assert_eq!(p.sriov_vfs, Some(8));
    assert_eq!(p.rdma_ports, Some(8));
    let msg = parse_file(Path::new("p.toml"), "sriov_vfs = -1\n")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("`sriov_vfs`") && msg.contains("line 1"),
        "{msg}"
    );
}

#[test]
fn file_without_name_is_named_after_the_file() {
    let p = parse_file(Path::new("/etc/gpudoctor/lab-node.toml"), "gpu_count = 2\n").unwrap();
    assert_eq!(p.name, "lab-node");
    assert_eq!(p.gpu_count, Some(2));
    assert_eq!(p.nvlinks_per_gpu, None);
}

#[test]
fn unknown_key_names_key_and_line() {
    let text = "base = \"hgx-h100\"\n\ngpu_cout = 4\n";
    let err = parse_file(Path::new("p.toml"), text).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, ProfileError::UnknownKey { line: 3, .. }),
        "{msg}"
    );
    assert!(
        msg.contains("`gpu_cout`") && msg.contains("line 3"),
        "{msg}"
    );
    assert!(msg.contains("p.toml") && msg.contains("gpu_count"), "{msg}");
}

#[test]
fn wrong_type_names_key_and_line() {
    let text = "name = \"x\"\ngpu_count = \"eight\"\n";
    let err = parse_file(Path::new("p.toml"), text).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, ProfileError::BadValue { line: 2, .. }),
        "{msg}"
    );
    assert!(
        msg.contains("`gpu_count`") && msg.contains("line 2"),
        "{msg}"
    );

    let text = "nvswitch = 1\n";
    let msg = parse_file(Path::new("p.toml"), text)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("`nvswitch`") && msg.contains("line 1"),
        "{msg}"
    );

    let text = "gpu_count = -8\n";
    let msg = parse_file(Path::new("p.toml"), text)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("`gpu_count`") && msg.contains("line 1"),
        "{msg}"
    );
}

#[test]
fn first_error_in_file_order_is_reported() {
    let text = "zzz = 1\naaa = 2\n";
    let msg = parse_file(Path::new("p.toml"), text)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("`zzz`") && msg.contains("line 1"), "{msg}");
}

#[test]
fn bad_base_and_bad_syntax_name_the_line() {
    let msg = parse_file(Path::new("p.toml"), "\nbase = \"hgx-h900\"\n")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("line 2") && msg.contains("hgx-h100"), "{msg}");

    let msg = parse_file(Path::new("p.toml"), "gpu_count = 8\ngpu_count = [\n")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("p.toml") && msg.contains("line 2"), "{msg}");
}

#[test]
fn load_resolves_names_and_rejects_unknown_ones() {
    assert_eq!(load("hgx-h100").unwrap().name, "hgx-h100");
    let msg = load("hgx-h900").unwrap_err().to_string();
    for p in builtins() {
        assert!(msg.contains(&p.name), "{msg}");
    }
}

#[test]
fn line_of_counts_newlines_before_the_offset() {
    let text = "a\nb\nc";
    assert_eq!(line_of(text, 0), 1);
    assert_eq!(line_of(text, 2), 2);
    assert_eq!(line_of(text, 4), 3);
    assert_eq!(line_of(text, 99), 3);
}

#[test]
fn listings_name_every_builtin() {
    let table = list_table();
    let json: serde_json::Value = serde_json::from_str(&list_json()).unwrap();
    assert_eq!(json.as_array().unwrap().len(), builtins().len());
    for p in builtins() {
        assert!(table.contains(&p.name), "table lacks {}", p.name);
    }
}

#[test]
fn ethernet_gpu_rails_choose_the_roce_variant() {
    const NAMES: [&str; 10] = [
        "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8",
        "mlx5_9",
    ];
    let hgx = builtin("hgx-h100").unwrap();
    let node = |layer: &'static str, rate: f64| -> Vec<FabricPort<'static>> {
        let mut ports: Vec<FabricPort<'static>> =
            NAMES[..8].iter().map(|n| (*n, layer, Some(rate))).collect();
        ports.extend(NAMES[8..].iter().map(|n| (*n, "Ethernet", Some(200.0))));
        ports
    };
    // Eight NDR InfiniBand rails and two 200 GbE front-end ports: InfiniBand.
    assert_eq!(
        by_fabric(hgx.clone(), &node("InfiniBand", 400.0)).name,
        "hgx-h100"
    );
    // Eight 400 GbE RoCE rails: the RoCE variant, with the rails named (not the front end).
    let roce = by_fabric(hgx.clone(), &node("Ethernet", 400.0));
    assert_eq!(roce.name, "hgx-h100-roce");
    assert_eq!(roce.rdma_devices, NAMES[..8].to_vec());
    // Ethernet ports too slow to be the rails, or too few: not RoCE rails.
    assert_eq!(
        by_fabric(hgx.clone(), &node("Ethernet", 200.0)).name,
        "hgx-h100"
    );
    assert_eq!(
        by_fabric(hgx.clone(), &node("Ethernet", 400.0)[..4]).name,
        "hgx-h100"
    );
    // One rail trained down to 200 GbE: still RoCE (the other seven rails named), never the
    // InfiniBand profile with "0 InfiniBand ports".
    let mut one_down = node("Ethernet", 400.0);
    one_down[3].2 = Some(200.0);
    let roce = by_fabric(hgx.clone(), &one_down);
    assert_eq!(roce.name, "hgx-h100-roce");
    assert_eq!(roce.rdma_devices.len(), 7);
    assert!(!roce.rdma_devices.contains(&"mlx5_3".to_string()));
    // `--profile hgx-h100-roce` judges the rails only, not the 200 GbE front end.
    let forced = with_rails(builtin("hgx-h100-roce").unwrap(), &node("Ethernet", 400.0));
    assert_eq!(forced.rdma_devices, NAMES[..8].to_vec());
    // An InfiniBand profile, or one naming its devices, is left alone.
    assert!(
        with_rails(hgx.clone(), &node("Ethernet", 400.0))
            .rdma_devices
            .is_empty()
    );
    // A platform without a RoCE variant keeps its profile.
    let a100 = builtin("hgx-a100-80gb").unwrap();
    assert_eq!(
        by_fabric(a100, &node("Ethernet", 400.0)).name,
        "hgx-a100-80gb"
    );
}
