//! Platform profiles as an operator meets them: `gpudoctor profiles`, `check --profile NAME|FILE`,
//! and the errors a hand-edited profile file gets (file, key, line).

mod common;

use std::io::Write as _;
use std::process::Output;

use common::gpudoctor;
use gpudoctor::profile;

const HEALTHY: &str = "fixtures/hgx-h100-healthy";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A profile file in a temporary directory; the directory lives as long as the returned guard.
fn profile_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = common::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    (dir, path.to_string_lossy().into_owned())
}

#[test]
fn profiles_lists_every_builtin_with_its_sources() {
    let out = gpudoctor(&["profiles"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for p in profile::builtins() {
        assert!(
            text.contains(&p.name),
            "`profiles` lacks {}:\n{text}",
            p.name
        );
        for source in &p.sources {
            assert!(
                text.contains(source.as_str()),
                "`profiles` lacks source {source}"
            );
        }
    }
    for name in [
        "hgx-a100-40gb",
        "hgx-a100-80gb",
        "hgx-h100",
        "hgx-h200",
        "hgx-b200",
        "pcie-h100-nvl",
        "generic-pcie-gpu",
    ] {
        assert!(text.contains(name), "`profiles` lacks {name}");
    }
}

#[test]
fn profiles_json_parses_and_has_every_builtin() {
    let out = gpudoctor(&["profiles", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let builtins: Vec<String> = profile::builtins().into_iter().map(|p| p.name).collect();
    assert_eq!(names, builtins);
    let h100 = rows.iter().find(|r| r["name"] == "hgx-h100").unwrap();
    assert_eq!(h100["gpu_count"], 8);
    assert_eq!(h100["nvlinks_per_gpu"], 18);
    // Unit-explicit keys (docs/profiles.md): Gb/s for link rates, GB/s for bus bandwidth.
    assert_eq!(h100["rdma_rate_gbit_per_s"], 400);
    assert_eq!(h100["nccl_busbw_fail_gbyte_per_s"], 460.0);
    assert!(h100.get("rdma_rate_gbps").is_none());
    assert!(!h100["sources"].as_array().unwrap().is_empty());
}

#[test]
fn check_with_a_builtin_profile_runs() {
    let out = gpudoctor(&["check", "--root", HEALTHY, "--profile", "hgx-h100"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn unknown_profile_name_is_a_usage_error_naming_the_valid_ones() {
    let out = gpudoctor(&["check", "--root", HEALTHY, "--profile", "nonexistent"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no report on a usage error");
    let err = stderr(&out);
    assert!(err.contains("nonexistent"), "{err}");
    for p in profile::builtins() {
        assert!(
            err.contains(&p.name),
            "stderr does not name {}: {err}",
            p.name
        );
    }
}

#[test]
fn file_with_base_loads_and_overrides() {
    let (_dir, path) = profile_file("base = \"hgx-h100\"\ngpu_count = 4\n");
    let p = profile::load(&path).unwrap();
    let h100 = profile::load("hgx-h100").unwrap();
    assert_eq!(p.gpu_count, Some(4));
    assert_eq!(p.name, "node");
    assert_eq!(p.nvlinks_per_gpu, h100.nvlinks_per_gpu);
    assert_eq!(p.rdma_ports, h100.rdma_ports);
    assert_eq!(p.gpu_names, h100.gpu_names);
}

#[test]
fn check_accepts_a_profile_file() {
    let (_dir, path) = profile_file("base = \"hgx-h100\"\nname = \"lab-h100\"\n");
    let out = gpudoctor(&["check", "--root", HEALTHY, "--profile", &path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn unknown_key_is_a_usage_error_naming_key_and_line() {
    let (_dir, path) = profile_file("# lab node\nbase = \"hgx-h100\"\ngpu_cout = 4\n");
    let out = gpudoctor(&["check", "--root", HEALTHY, "--profile", &path]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("gpu_cout"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains(&path), "{err}");
}

#[test]
fn wrong_type_is_a_usage_error_naming_key_and_line() {
    let (_dir, path) = profile_file("name = \"lab\"\ngpu_count = \"eight\"\n");
    let out = gpudoctor(&["check", "--root", HEALTHY, "--profile", &path]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("gpu_count"), "{err}");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains(&path), "{err}");
}

#[test]
fn the_example_in_the_docs_loads() {
    let doc = std::fs::read_to_string(common::repo().join("docs/profiles.md")).unwrap();
    let start = doc
        .find("```toml\n")
        .expect("docs/profiles.md has a toml example");
    let body = &doc[start + "```toml\n".len()..];
    let end = body.find("```").unwrap();
    let (_dir, path) = profile_file(&body[..end]);
    let p = profile::load(&path).unwrap_or_else(|e| panic!("docs example: {e}"));
    assert!(!p.name.is_empty());
}

#[test]
fn docs_list_every_builtin() {
    let doc = std::fs::read_to_string(common::repo().join("docs/profiles.md")).unwrap();
    for p in profile::builtins() {
        assert!(
            doc.contains(&format!("`{}`", p.name)),
            "docs/profiles.md lacks {}",
            p.name
        );
    }
    for key in profile::FILE_KEYS {
        assert!(
            doc.contains(&format!("`{key}`")),
            "docs/profiles.md lacks key {key}"
        );
    }
}

#[test]
fn sriov_vfs_in_a_file_judges_the_sriov_layer() {
    // 8 VFs enabled (one per HCA): a profile expecting 16 fails sriov.vfs_enabled, 8 passes.
    let (_dir, path) = profile_file("base = \"hgx-h100\"\nname = \"lab-sriov\"\nsriov_vfs = 16\n");
    assert_eq!(profile::load(&path).unwrap().sriov_vfs, Some(16));
    let out = gpudoctor(&[
        "check",
        "--root",
        "fixtures/h100-sriov-healthy",
        "--only",
        "sriov",
        "--format",
        "json",
        "--profile",
        &path,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["first_failure"]["code"], "sriov.vfs_enabled");
    assert!(
        report["first_failure"]["summary"]
            .as_str()
            .unwrap()
            .contains("8 network VF(s) enabled, profile lab-sriov expects 16"),
        "{report:#}"
    );

    let (_dir, path) = profile_file("base = \"hgx-h100\"\nsriov_vfs = 8\n");
    let out = gpudoctor(&[
        "check",
        "--root",
        "fixtures/h100-sriov-healthy",
        "--profile",
        &path,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn sriov_vfs_of_the_wrong_type_is_a_usage_error_naming_key_and_line() {
    let (_dir, path) = profile_file("base = \"hgx-h100\"\n\nsriov_vfs = \"eight\"\n");
    let out = gpudoctor(&["check", "--root", HEALTHY, "--profile", &path]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("`sriov_vfs`") && err.contains("line 3"),
        "{err}"
    );
    // Built-ins state no SR-IOV expectation: a deployment choice, not the platform's.
    for p in profile::builtins() {
        assert_eq!(p.sriov_vfs, None, "{}", p.name);
    }
}

/// The rdma layer's verdict and stderr for the healthy H100 node under a profile file. Its
/// eight compute HCAs are 400 Gb/s InfiniBand; mlx5_8 and mlx5_9 are a 200 GbE front-end NIC.
fn rdma_under(text: &str) -> (String, String) {
    let (_dir, path) = profile_file(text);
    let out = gpudoctor(&[
        "check",
        "--root",
        HEALTHY,
        "--profile",
        &path,
        "--only",
        "rdma",
        "--format",
        "json",
    ]);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    let rate = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == "rdma.port_rate")
        .expect("rdma.port_rate ran")
        .clone();
    (rate["status"].as_str().unwrap().to_string(), stderr(&out))
}

#[test]
fn rdma_devices_leave_a_front_end_nic_out_of_the_fabric() {
    // Every device held to 400 Gb/s, whatever its link layer: the front-end fails.
    let all = "name = \"any-layer\"\nrdma_ports = 8\nrdma_rate_gbit_per_s = 400\n";
    let (status, err) = rdma_under(all);
    assert_eq!(status, "fail", "{err}");
    // The fabric named: the front-end is compared only with itself.
    let fabric = format!(
        "{all}rdma_devices = [\"mlx5_0\", \"mlx5_1\", \"mlx5_2\", \"mlx5_3\", \"mlx5_4\", \"mlx5_5\", \"mlx5_6\", \"mlx5_7\"]\n"
    );
    let (status, err) = rdma_under(&fabric);
    assert_eq!(status, "pass", "{err}");
    assert!(!err.contains("deprecated"), "{err}");
}

#[test]
fn old_gbps_keys_still_read_with_a_deprecation_note() {
    let (status, err) = rdma_under("name = \"old\"\nrdma_ports = 8\nrdma_rate_gbps = 400\n");
    assert_eq!(status, "fail", "the old key still sets the rate: {err}");
    assert!(
        err.contains("`rdma_rate_gbps` is deprecated") && err.contains("`rdma_rate_gbit_per_s`"),
        "{err}"
    );
    let (_dir, path) = profile_file("base = \"hgx-h100\"\nnccl_busbw_fail_gbps = 400.0\n");
    assert_eq!(
        profile::load(&path).unwrap().nccl_busbw_fail_gbps,
        Some(400.0)
    );
    // Both names of one key: refused, naming the line.
    let (_dir, path) =
        profile_file("name = \"x\"\nrdma_rate_gbps = 400\nrdma_rate_gbit_per_s = 200\n");
    let err = profile::load(&path).unwrap_err().to_string();
    assert!(err.contains("set twice") && err.contains("line 2"), "{err}");
}

#[test]
fn the_roce_h100_profile_expects_ethernet_and_is_never_automatic() {
    let roce = profile::builtin("hgx-h100-roce").unwrap();
    let ib = profile::builtin("hgx-h100").unwrap();
    assert_eq!(roce.rdma_link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(roce.rdma_ports, Some(8));
    assert_eq!(roce.rdma_rate_gbps, Some(400));
    assert_eq!(roce.gpu_count, ib.gpu_count);
    assert_eq!(roce.nccl_busbw_fail_gbps, ib.nccl_busbw_fail_gbps);
    let names = ["NVIDIA H100 80GB HBM3"; 8];
    assert_eq!(profile::select_auto(&names).unwrap().name, "hgx-h100");
    // The healthy node's fabric is InfiniBand: under the RoCE profile its eight compute ports
    // are not there.
    let out = gpudoctor(&[
        "check",
        "--root",
        HEALTHY,
        "--profile",
        "hgx-h100-roce",
        "--only",
        "rdma",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("profile hgx-h100-roce expects 8"),
        "{}",
        stdout(&out)
    );
}
