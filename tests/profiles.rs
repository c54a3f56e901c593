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
    let dir = tempfile::tempdir().unwrap();
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
    assert_eq!(h100["rdma_rate_gbps"], 400);
    assert_eq!(h100["nccl_busbw_fail_gbps"], 460.0);
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
            .contains("8 network vf(s) enabled, profile lab-sriov expects 16"),
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
