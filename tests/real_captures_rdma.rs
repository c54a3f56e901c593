//! The RDMA and SR-IOV facts and checks over real machine captures (hwloc's test suite, in
//! `../shared/real-captures/`), asserting what their README states. Skipped, with a note, when
//! that folder is not next to the repository; under `CI=true` that fails, naming the path.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use gpudoctor::facts::{pci, rdma, sriov};
use gpudoctor::source::{HostSource, SourceOptions};
use serde_json::Value;

fn capture(name: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    // Missing under CI=true fails naming the path (tests/common); locally a notice and a skip.
    let tarball = common::shared_data(&common::real_captures_dir()?.join(name))?;
    let dir = common::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("xjf")
        .arg(&tarball)
        .arg("--strip-components=1")
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("tar runs");
    assert!(status.success(), "extracting {name}");
    let root = dir.path().to_path_buf();
    Some((dir, root))
}

fn source(root: &Path) -> HostSource {
    HostSource::new(root, SourceOptions::default())
}

fn check(root: &Path, layers: &str) -> Value {
    let out = common::gpudoctor(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--only",
        layers,
        "--format",
        "json",
        "--keep-going",
    ]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

fn result<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in the report"))
}

#[test]
fn connectx3_fdr_port_is_active_on_numa_1() {
    let Some((_dir, root)) = capture("32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2") else {
        return;
    };
    let src = source(&root);
    let facts = rdma::gather(&src).unwrap();
    let mlx4 = facts
        .devices
        .iter()
        .find(|d| d.name == "mlx4_0")
        .expect("mlx4_0");
    assert_eq!(mlx4.pci.as_deref(), Some("0000:82:00.0"));
    assert_eq!(mlx4.fw_ver.as_deref(), Some("2.11.500"));
    assert_eq!(mlx4.hca_type.as_deref(), Some("MT4099"));
    let port = &mlx4.ports[0];
    assert!(port.is_up(), "{port:?}");
    assert_eq!(port.rate_gbps, Some(56.0));
    assert_eq!(port.link_layer.as_deref(), Some("InfiniBand"));
    assert!(port.gid_types.is_empty(), "old kernel: no gid_attrs");
    // The dangling scif0 link is reported, not fatal.
    assert!(facts.devices.iter().all(|d| d.name != "scif0"));
    assert!(
        facts.problems.iter().any(|p| p.path.contains("scif0")),
        "{:?}",
        facts.problems
    );
    // NUMA placement from sysfs.
    let pci = pci::gather(&src).unwrap();
    let hca = pci
        .functions
        .iter()
        .find(|f| f.bdf == "0000:82:00.0")
        .unwrap();
    assert_eq!(hca.numa_node, Some(1));

    let report = check(&root, "rdma");
    assert_eq!(result(&report, "rdma.port_state")["status"], "pass");
    assert_eq!(result(&report, "rdma.port_rate")["status"], "pass");
    assert!(
        result(&report, "rdma.port_rate")["summary"]
            .as_str()
            .unwrap()
            .contains("56")
    );
}

#[test]
fn connectx4_without_rdma_device_and_x722_without_vfs() {
    let Some((_dir, root)) = capture("32intel64-2p8co2t+8ve.tar.bz2") else {
        return;
    };
    let src = source(&root);
    let facts = rdma::gather(&src).unwrap();
    assert!(
        facts.devices.is_empty(),
        "no RDMA device in this capture: {:?}",
        facts.devices
    );

    let report = check(&root, "rdma,sriov");
    let devices = result(&report, "rdma.devices");
    assert_eq!(devices["status"], "fail", "{devices}");
    let text = devices.to_string();
    assert!(
        text.contains("0000:1a:00.0") && text.contains("0000:3e:00.0"),
        "{text}"
    );

    let pci = pci::gather(&src).unwrap();
    let functions: Vec<(String, Option<u32>)> = pci
        .functions
        .iter()
        .map(|f| (f.bdf.clone(), f.numa_node))
        .collect();
    let sriov = sriov::gather(&src, &functions);
    let x722 = sriov
        .pfs
        .iter()
        .find(|pf| pf.bdf == "0000:60:00.0")
        .expect("X722 PF");
    assert_eq!((x722.total_vfs, x722.num_vfs), (64, 0));
    assert!(x722.vfs.is_empty());
    // Capable but nothing enabled or advertised: the layer does not apply.
    assert_eq!(result(&report, "sriov.vfs_enabled")["status"], "skip");
}
