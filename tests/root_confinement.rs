//! A replay must never read the machine it runs on, and a damaged tree must give results, not a
//! hang or a panic (DESIGN.md: "the worst bug this project can have").

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::Value;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A tree outside the root that looks like a healthy GPU node: if any of it leaks into the
/// report, the reader followed a link out of the root.
fn bait(dir: &Path) {
    write(&dir.join("gpu/vendor"), "0x10de\n");
    write(&dir.join("gpu/device"), "0x2330\n");
    write(&dir.join("gpu/class"), "0x030200\n");
    write(
        &dir.join("modules"),
        "nvidia 54165504 270 - Live 0x0000000000000000 (POE)\n",
    );
}

fn capture(root: &Path) {
    write(
        &root.join(".gpudoctor/manifest.json"),
        r#"{"format_version": 1}"#,
    );
    write(
        &root.join(".gpudoctor/nvml.json"),
        r#"{"init_error": {"kind": "driver_not_loaded", "message": "Driver Not Loaded"}}"#,
    );
    fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
}

fn check(root: &Path) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
        "--keep-going",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn result<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["layers"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == code)
        .unwrap()
}

#[test]
fn absolute_and_escaping_symlinks_never_read_outside_the_root() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("node");
    bait(&outer.path().join("bait"));
    capture(&root);
    let devices = root.join("sys/bus/pci/devices");
    // Absolute target, and a relative one that climbs past the root.
    symlink(outer.path().join("bait/gpu"), devices.join("0000:18:00.0")).unwrap();
    symlink("../../../../../bait/gpu", devices.join("0000:2a:00.0")).unwrap();
    symlink(outer.path().join("bait/modules"), root.join("proc/modules")).unwrap_or_else(|_| {
        fs::create_dir_all(root.join("proc")).unwrap();
        symlink(outer.path().join("bait/modules"), root.join("proc/modules")).unwrap();
    });

    let report = check(&root);
    let gpus = result(&report, "driver.gpu_on_pci");
    assert_ne!(
        gpus["status"], "pass",
        "a gpu outside the root was read: {gpus}"
    );
    let text = gpus.to_string();
    assert!(text.contains("leaves the root"), "{text}");
    assert!(
        text.contains("0000:18:00.0") && text.contains("0000:2a:00.0"),
        "{text}"
    );

    let module = result(&report, "driver.nvidia_module");
    assert_ne!(
        module["status"], "pass",
        "a module list outside the root was read: {module}"
    );
    assert!(module.to_string().contains("proc/modules"), "{module}");
}

#[test]
fn dangling_links_and_loops_give_results() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("node");
    capture(&root);
    let devices = root.join("sys/bus/pci/devices");
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        devices.join("0000:00:01.0"),
    )
    .unwrap();
    symlink("0000:00:03.0", devices.join("0000:00:02.0")).unwrap();
    symlink("0000:00:02.0", devices.join("0000:00:03.0")).unwrap();
    // A real function whose `subsystem` link loops back through the bus, as on real sysfs.
    let function = root.join("sys/devices/pci0000:00/0000:00:04.0");
    write(&function.join("vendor"), "0x8086\n");
    write(&function.join("device"), "0x2030\n");
    write(&function.join("class"), "0x060400\n");
    symlink("../../../bus/pci", function.join("subsystem")).unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:04.0",
        devices.join("0000:00:04.0"),
    )
    .unwrap();
    symlink("loop", root.join("proc")).unwrap();

    let report = check(&root);
    let gpus = result(&report, "driver.gpu_on_pci");
    let text = gpus.to_string();
    assert_eq!(gpus["status"], "error", "{text}");
    assert!(
        text.contains("dangling") && text.contains("0000:00:01.0"),
        "{text}"
    );
    assert!(
        text.contains("too many levels") && text.contains("0000:00:02.0"),
        "{text}"
    );
    let modules = result(&report, "driver.nvidia_module");
    assert!(
        matches!(modules["status"].as_str(), Some("error" | "fail")),
        "{modules}"
    );
}

#[test]
fn bad_nvml_json_and_binary_files_are_named_errors() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("node");
    capture(&root);
    write(&root.join(".gpudoctor/nvml.json"), "{\"devices\": [");
    fs::write(root.join("proc/modules"), [0u8, 159, 146, 150]).unwrap_or_else(|_| {
        fs::create_dir_all(root.join("proc")).unwrap();
        fs::write(root.join("proc/modules"), [0u8, 159, 146, 150]).unwrap();
    });
    let report = check(&root);
    let nvml = result(&report, "driver.nvml_init");
    assert_eq!(nvml["status"], "error");
    assert!(nvml.to_string().contains(".gpudoctor/nvml.json"), "{nvml}");
    let module = result(&report, "driver.nvidia_module");
    assert_eq!(module["status"], "error");
    assert!(
        module.to_string().contains("proc/modules") && module.to_string().contains("not text"),
        "{module}"
    );
}
