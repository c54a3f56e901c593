//! Finding and loading libnvidia-ml: a missing library, `--nvml-lib` from the CLI, the host's
//! library found under the root, and one linked from outside the root refused.

use super::*;

#[test]
fn a_missing_library_is_library_not_found() {
    let _held = nvml_lock();
    let host = HostSource::new(
        "/nonexistent-root",
        SourceOptions {
            nvml_lib: Some(PathBuf::from("/nonexistent.so")),
            ..Default::default()
        },
    );
    let err = host.nvml().init_error.expect("init must fail");
    assert_eq!(err.kind, NvmlErrorKind::LibraryNotFound, "{}", err.message);
}

/// The way docs/testing.md runs it by hand: the binary, `--nvml-lib`, the variable set for the
/// child only.
#[test]
fn the_cli_reads_the_fake_through_nvml_lib() {
    // Spawning copies the environment: not while another test is changing it.
    let _held = nvml_lock();
    let lib = fake_lib();
    let root = common::tempdir().unwrap();
    let json = common::repo()
        .join("fixtures/hgx-h100-healthy")
        .join(NVML_JSON);
    let out = common::scratch::gpudoctor_command()
        .args(["check", "--only", "driver", "--format", "json", "--root"])
        .arg(root.path())
        .arg("--nvml-lib")
        .arg(lib)
        .env(ENV_JSON, &json)
        .output()
        .expect("gpudoctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a json report ({e}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let init = report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "driver.nvml_init")
        .expect("driver.nvml_init ran");
    assert_eq!(init["status"], "pass", "{init}");
    let summary = init["summary"].as_str().unwrap();
    assert!(
        summary.contains("driver 550.54.15, 8 device(s)"),
        "{summary}"
    );
}

/// `check --root` of a copy of the healthy node with the stand-in placed where a host keeps
/// `libnvidia-ml.so.1`, no `--nvml-lib`: the binary finds and loads it (the DaemonSet case,
/// issue 19), and the driver layer judges what it answers.
fn check_with_library_at(place: impl Fn(&Path, &Path)) -> Value {
    let _held = nvml_lock();
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let dir = common::tempdir().unwrap();
    let root = dir.path().join("root");
    common::copy_tree(&fixture, &root);
    let json = dir.path().join("nvml.json");
    std::fs::copy(root.join(NVML_JSON), &json).unwrap();
    std::fs::remove_dir_all(root.join(".gpudoctor")).unwrap();
    place(&root, dir.path());
    let out = common::scratch::gpudoctor_command()
        .args(["check", "--only", "driver", "--format", "json", "--root"])
        .arg(&root)
        .env(ENV_JSON, &json)
        .output()
        .expect("gpudoctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a json report ({e}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "driver.nvml_init")
        .expect("driver.nvml_init ran")
        .clone()
}

fn put(root: &Path, rel: &str, from: &Path) {
    let to = root.join(rel);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

#[test]
fn the_host_library_is_found_under_the_root() {
    use gpudoctor::source::host_lib::{LIB_DIRS, NVML_SONAME};
    // The GPU Operator's driver root, and a distribution path behind a soname link.
    let operator = format!("{}/{NVML_SONAME}", LIB_DIRS[0]);
    let init = check_with_library_at(|root, _| put(root, &operator, fake_lib()));
    assert_eq!(init["status"], "pass", "{init}");
    assert!(
        init["summary"]
            .as_str()
            .unwrap()
            .contains("driver 550.54.15, 8 device(s)"),
        "{init}"
    );
    let init = check_with_library_at(|root, _| {
        let rel = "usr/lib64/libnvidia-ml.so.550.54.15";
        put(root, rel, fake_lib());
        std::os::unix::fs::symlink(
            "libnvidia-ml.so.550.54.15",
            root.join("usr/lib64/libnvidia-ml.so.1"),
        )
        .unwrap();
    });
    assert_eq!(init["status"], "pass", "{init}");
    // GKE Container-Optimized OS: the installer's directory, nothing in /usr/lib*.
    let init = check_with_library_at(|root, _| {
        put(
            root,
            "home/kubernetes/bin/nvidia/lib64/libnvidia-ml.so.1",
            fake_lib(),
        )
    });
    assert_eq!(init["status"], "pass", "{init}");
}

#[test]
fn a_library_outside_the_root_is_not_loaded() {
    // The candidate links to the stand-in by an absolute path outside the root: refused, so no
    // NVML answers (this machine has no libnvidia-ml of its own to fall back to).
    let init = check_with_library_at(|root, scratch| {
        let outside = scratch.join("libnvidia-ml.so.1");
        std::fs::copy(fake_lib(), &outside).unwrap();
        use gpudoctor::source::host_lib::{LIB_DIRS, NVML_SONAME};
        let link = root.join(format!("{}/{NVML_SONAME}", LIB_DIRS[0]));
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&outside, link).unwrap();
    });
    assert_ne!(init["status"], "pass", "{init}");
    assert!(
        !init["summary"]
            .as_str()
            .unwrap()
            .contains("driver 550.54.15, 8 device(s)"),
        "{init}"
    );
}
