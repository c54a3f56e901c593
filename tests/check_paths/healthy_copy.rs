//! The unedited copy of the healthy fixture: every check the other files break passes, and its
//! terminal output under `NO_COLOR` carries no colour escapes.

use super::*;

#[test]
fn the_unedited_copy_is_healthy() {
    let report = Node::healthy().run_all();
    assert_eq!(report.exit_code, 0, "{:?}", report.first_failure);
    for code in [
        "device_plugin.allocations",
        "device_plugin.numa_topology",
        "driver.thermal",
        "driver.persistence_mode",
        "driver.gpu_count",
        "nvlink.links_active",
        "nvlink.error_counters",
        "topology.iommu",
        "toolkit.installed",
        "toolkit.container_runtime",
    ] {
        assert_check(&report, code, Status::Pass, &[]);
    }
    assert_check(&report, "driver.retired_pages", Status::Skip, &[]);
    assert_check(
        &report,
        "toolkit.container_gpus",
        Status::Skip,
        &["not running inside a pod"],
    );
}

#[test]
fn no_color_output_has_no_escapes() {
    let out = common::scratch::gpudoctor_command()
        .args([
            "check",
            "--root",
            &format!("fixtures/{HEALTHY}"),
            "--keep-going",
        ])
        .current_dir(common::repo())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[ ok ]"), "{text}");
    assert!(!text.contains('\x1b'), "{text}");
}
