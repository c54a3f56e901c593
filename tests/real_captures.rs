//! The topology facts over real machine captures: hwloc's recorded `/sys` trees in
//! `../shared/real-captures/` (next to the repository in CI). Each tarball is unpacked into a
//! temporary directory with the system `tar` and read with the live source rooted there, and
//! the values its README lists are asserted: NUMA placement of the InfiniBand HCA, the PCIe
//! switch hierarchy, old-kernel link-speed strings, the x1 NIC below its max speed, dangling
//! `driver` links and `subsystem` loops. Without the folder (or `tar`) the tests say so and pass
//! locally; under `CI=true` they fail naming the path (tests/common `real_captures_dir`).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::facts::topology::{self, DeviceKind, Link, Matrix, NumaSource, Topology};
use gpudoctor::report::{Layer, Status};
use gpudoctor::source::{HostSource, Source, SourceOptions};

fn captures_dir() -> Option<PathBuf> {
    // Missing under CI=true fails naming the path (tests/common); locally a notice and a skip.
    let dir = common::real_captures_dir()?;
    if Command::new("tar").arg("--version").output().is_err() {
        assert!(
            !common::on_ci(),
            "CI=true needs `tar` for the real-capture tests"
        );
        eprintln!("note: no `tar` on this machine; real-capture tests skipped");
        return None;
    }
    Some(dir)
}

/// Unpack `<name>.tar.bz2` (one top directory) once into Cargo's per-target test scratch
/// directory and reuse it while the tarball is unchanged (unpacking ~9000 entries is slow on
/// some filesystems). A stamp file records which tarball (size, mtime) the tree came from.
fn unpack(dir: &Path, name: &str) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tarball = dir.join(name);
    let meta = fs::metadata(common::shared_data(&tarball)?).unwrap();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let identity = format!("{name} {} {mtime}\n", meta.len());
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("real-captures")
        .join(name.trim_end_matches(".tar.bz2"));
    let stamp = out.join(".unpacked-from");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(identity.as_str()) {
        return Some(out);
    }
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out).unwrap();
    let status = Command::new("tar")
        .arg("xjf")
        .arg(&tarball)
        .arg("--strip-components=1")
        .arg("-C")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "tar xjf {}: {}",
        tarball.display(),
        String::from_utf8_lossy(&status.stderr)
    );
    fs::write(&stamp, identity).unwrap();
    Some(out)
}

fn gather(root: &Path) -> (HostSource, Topology) {
    // The live source, rooted at the capture; NVML pointed at a library that does not exist so
    // the machine running the test never answers for the capture.
    let options = SourceOptions {
        nvml_lib: Some(root.join("no-such-libnvidia-ml.so")),
        ..SourceOptions::default()
    };
    let source = HostSource::new(root, options);
    let topo = topology::gather(&source).expect("the pci tree is readable");
    (source, topo)
}

fn cpus(t: &Topology) -> Vec<(u32, String)> {
    t.numa
        .nodes
        .iter()
        .map(|n| (n.id, n.cpus.to_string()))
        .collect()
}

fn topology_only(source: &dyn Source) -> gpudoctor::report::Report {
    engine::run(
        source,
        &RunOptions {
            only: vec![Layer::Topology],
            ..RunOptions::default()
        },
    )
}

#[test]
fn two_socket_xeon_with_connectx3() {
    let Some(dir) = captures_dir() else { return };
    let Some(root) = unpack(&dir, "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2") else {
        return;
    };
    let (source, t) = gather(&root);

    // 2 NUMA nodes, cpulists 0-7 / 8-15, distances 10 21 / 21 10.
    assert_eq!(cpus(&t), vec![(0, "0-7".into()), (1, "8-15".into())]);
    assert_eq!(t.numa.nodes[0].distances, vec![10, 21]);
    assert_eq!(t.numa.nodes[1].distances, vec![21, 10]);
    assert_eq!(t.devices.len(), 137, "137 pci functions");

    // The ConnectX-3: class 0x028000 ("other network controller") with mlx4_0 → an RDMA NIC,
    // numa_node 1 and local_cpulist 8-15, under root port 0000:80:02.2.
    let hca = t.device("0000:82:00.0").expect("the hca");
    assert_eq!(
        (hca.vendor, hca.device, hca.class),
        (Some(0x15b3), Some(0x1003), Some(0x028000))
    );
    assert_eq!(hca.kind, DeviceKind::RdmaNic);
    assert_eq!(hca.rdma_devices, ["mlx4_0"]);
    assert!(hca.netdevs.iter().any(|n| n == "ib0"));
    assert_eq!((hca.numa, hca.numa_source), (Some(1), NumaSource::NumaNode));
    assert_eq!(hca.cpulist_node, Some(1));
    assert_eq!(
        hca.local_cpus.as_ref().map(ToString::to_string).as_deref(),
        Some("8-15")
    );
    assert!(hca.host_bridge.ends_with("pci0000:80"));
    assert_eq!(hca.chain, ["0000:80:02.2", "0000:82:00.0"]);
    assert_eq!(
        t.device("0000:80:02.2").map(|d| d.kind),
        Some(DeviceKind::RootPort)
    );
    // Old kernel: no PCIe link files at all.
    assert!(hca.link.is_empty());

    // scif0 points at an uncaptured devices/scif_dma_0: noted, skipped, no panic.
    assert!(
        t.problems
            .iter()
            .any(|p| p.path.ends_with("infiniband/scif0")),
        "{:?}",
        t.problems
    );

    let m = Matrix::build(&t, None);
    assert!(m.gpus.is_empty());
    assert_eq!(m.nics.len(), 1);
    assert_eq!(m.nics[0].name, "mlx4_0");
    assert_eq!(m.cells(), Some(vec![vec![Link::X]]));

    // The checks run over it without panicking; numa_node is set everywhere that matters.
    let report = topology_only(&source);
    let layer = report.layer(Layer::Topology).unwrap();
    assert!(
        layer.checks.iter().all(|c| c.status != Status::Error),
        "{layer:#?}"
    );
}

#[test]
fn supermicro_gpu_server_shape_with_plx_switches() {
    let Some(dir) = captures_dir() else { return };
    let Some(root) = unpack(&dir, "32intel64-2p8co2t+8ve.tar.bz2") else {
        return;
    };
    let (source, t) = gather(&root);

    assert_eq!(
        cpus(&t),
        vec![(0, "0-7,16-23".into()), (1, "8-15,24-31".into())]
    );
    // Every captured device reports numa_node 0; gpudoctor reads it for every function it
    // judges (bridges, the ConnectX-4s) and skips the rest, which it says it did not read
    // rather than calling them unknown (the Vector Engines are class 0x12, nothing it judges).
    let mut skipped = Vec::new();
    for d in &t.devices {
        let expected = if d.kind == DeviceKind::Other {
            skipped.push(d.bdf.as_str());
            (None, NumaSource::NotRead)
        } else {
            (Some(0), NumaSource::NumaNode)
        };
        assert_eq!((d.numa, d.numa_source), expected, "{}", d.bdf);
    }
    assert!(skipped.contains(&"0000:1b:00.0"), "{skipped:?}");
    assert!(
        t.devices
            .iter()
            .filter(|d| d.kind != DeviceKind::Other)
            .count()
            >= 14,
        "the bridges and HCAs are judged"
    );

    // Root port 0000:17:00.0 → PLX 10b5:9797 upstream 0000:18:00.0 → five downstream ports →
    // ConnectX-4 0000:1a:00.0 and the Vector Engines; the same under 0000:3a:00.0.
    for (rp, up, down, hca) in [
        ("0000:17:00.0", "0000:18:00.0", "0000:19", "0000:1a:00.0"),
        ("0000:3a:00.0", "0000:3b:00.0", "0000:3c", "0000:3e:00.0"),
    ] {
        assert_eq!(t.device(rp).unwrap().kind, DeviceKind::RootPort);
        let usp = t.device(up).unwrap();
        assert_eq!(usp.kind, DeviceKind::SwitchUpstream);
        assert_eq!((usp.vendor, usp.device), (Some(0x10b5), Some(0x9797)));
        let downstream: Vec<&str> = t
            .of_kind(DeviceKind::SwitchDownstream)
            .filter(|d| t.parent(d).is_some_and(|p| p.bdf == up))
            .map(|d| d.bdf.as_str())
            .collect();
        let want: Vec<String> = ["04", "08", "0c", "10", "14"]
            .iter()
            .map(|dev| format!("{down}:{dev}.0"))
            .collect();
        assert_eq!(downstream, want);
        let nic = t.device(hca).unwrap();
        assert_eq!(
            (nic.vendor, nic.device, nic.class),
            (Some(0x15b3), Some(0x1013), Some(0x020700))
        );
        assert_eq!(nic.kind, DeviceKind::RdmaNic);
        // "NIC present, RDMA missing": no /sys/class/infiniband entry in this capture.
        assert!(nic.rdma_devices.is_empty());
        // The driver link dangles (bus/pci/drivers was not captured) yet names the driver.
        assert_eq!(nic.driver.as_deref(), Some("mlx5_core"));
        assert!(!source.exists(&format!("sys/bus/pci/devices/{hca}/driver")));
        // Old-kernel spelling `8 GT/s`, x16: hwloc's link=15.75GB/s.
        let speed = nic.link.current_speed.unwrap();
        assert_eq!((speed.deci_gts, speed.generation()), (80, Some(3)));
        assert_eq!(nic.link.current_width, Some(16));
        let gbps = gpudoctor::facts::pci::link_gb_per_s(speed, 16);
        assert_eq!(format!("{gbps:.2}"), "15.75");
    }
    assert_eq!(
        t.device("0000:1a:00.0").unwrap().chain,
        [
            "0000:17:00.0",
            "0000:18:00.0",
            "0000:19:04.0",
            "0000:1a:00.0"
        ]
    );
    let class = |a: &str, b: &str| t.pcie_class(t.device(a).unwrap(), t.device(b).unwrap());
    // NIC and accelerator behind one switch: PIX. The two trees: different host bridges, one
    // NUMA node: NODE.
    assert_eq!(class("0000:1a:00.0", "0000:1b:00.0"), Link::Pix);
    assert_eq!(class("0000:1a:00.0", "0000:3e:00.0"), Link::Node);

    // Intel X722 x1 at 2.5 GT/s of 8 GT/s (hwloc: link=0.25GB/s), functions .0/.1 of one card.
    for f in ["0000:60:00.0", "0000:60:00.1"] {
        let x722 = t.device(f).unwrap();
        assert_eq!(x722.kind, DeviceKind::Nic);
        assert_eq!(x722.driver.as_deref(), Some("i40e"));
        let (cur, max) = (
            x722.link.current_speed.unwrap(),
            x722.link.max_speed.unwrap(),
        );
        assert_eq!((cur.deci_gts, max.deci_gts), (25, 80));
        assert_eq!(
            (x722.link.current_width, x722.link.max_width),
            (Some(1), Some(1))
        );
        assert_eq!(
            format!("{:.2}", gpudoctor::facts::pci::link_gb_per_s(cur, 1)),
            "0.25"
        );
        // 0000:5f:03.0 appears in the path but has no directory of its own.
        assert_eq!(
            x722.chain,
            ["0000:5d:02.0", "0000:5e:00.0", "0000:5f:03.0", f]
        );
    }
    assert!(t.device("0000:5f:03.0").is_none());
    assert_eq!(class("0000:60:00.0", "0000:60:00.1"), Link::Pix);
    let netdevs: Vec<&str> = ["0000:60:00.0", "0000:60:00.1"]
        .iter()
        .flat_map(|f| t.device(f).unwrap().netdevs.iter().map(String::as_str))
        .collect();
    assert_eq!(netdevs, ["enp96s0f0", "enp96s0f1"]);

    // `subsystem` links loop (device → bus/pci → devices → device …): the reader stays bounded
    // and the walk above finished.
    assert!(source.exists(
        "sys/bus/pci/devices/0000:17:00.0/subsystem/devices/0000:17:00.0/subsystem/devices/0000:18:00.0/vendor"
    ));

    // The topology checks: the X722's speed below max is reported (a NIC, so it warns), nothing
    // panics, and the HCAs' links pass.
    let report = topology_only(&source);
    let layer = report.layer(Layer::Topology).unwrap();
    let link = layer
        .checks
        .iter()
        .find(|c| c.code == "topology.pcie_link")
        .unwrap();
    assert_eq!(link.status, Status::Warn, "{link:#?}");
    assert!(link.summary.contains("0000:60:00.0"), "{}", link.summary);
    assert!(
        link.summary.contains("2.5 GT/s of 8 GT/s"),
        "{}",
        link.summary
    );
    // The unprivileged capture holds 64-byte config files: ACS is reported unknown, not guessed.
    let acs = layer
        .checks
        .iter()
        .find(|c| c.code == "topology.acs")
        .unwrap();
    assert_eq!(acs.status, Status::Skip, "{acs:#?}");
    assert!(acs.summary.contains("64 bytes"), "{}", acs.summary);
}

#[test]
fn topo_command_prints_and_parses_over_every_capture() {
    let Some(dir) = captures_dir() else { return };
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".tar.bz2") {
            continue;
        }
        let Some(root) = unpack(&dir, &name) else {
            continue;
        };
        let root_arg = root.to_str().unwrap();
        let table = common::gpudoctor(&["topo", "--root", root_arg, "--no-nvml"]);
        assert_eq!(
            table.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&table.stderr)
        );
        let json =
            common::gpudoctor(&["topo", "--root", root_arg, "--no-nvml", "--format", "json"]);
        assert_eq!(json.status.code(), Some(0), "{name}");
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert!(doc["matrix"]["cells"].is_array(), "{name}");
        assert!(!doc["numa_nodes"].as_array().unwrap().is_empty(), "{name}");
        // The full check walks every layer over the capture without an internal error.
        let no_nvml = root.join("no-such-libnvidia-ml.so");
        let check = common::gpudoctor(&[
            "check",
            "--root",
            root_arg,
            "--keep-going",
            "--format",
            "json",
            "--nvml-lib",
            no_nvml.to_str().unwrap(),
        ]);
        assert_ne!(
            check.status.code(),
            Some(4),
            "{name}: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        seen += 1;
    }
    assert!(seen >= 2, "expected both captures, saw {seen}");
}

#[test]
fn a_missing_shared_folder_fails_under_ci_and_is_a_notice_locally() {
    let missing = common::repo().join("../shared/no-such-real-captures");
    // Locally: a notice on stderr and a skip.
    assert_eq!(common::shared_data_in(&missing, false), None);
    // CI=true: the test fails, naming the path.
    let failed = std::panic::catch_unwind(|| common::shared_data_in(&missing, true))
        .expect_err("a missing shared folder must fail under CI=true");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("no-such-real-captures") && message.contains("CI=true"),
        "{message}"
    );
    // And what is there is handed back as it is.
    let here = common::repo();
    assert_eq!(common::shared_data_in(&here, true), Some(here.clone()));
}

#[test]
fn a_real_xeon_cpuinfo_is_read_through_procfs_core() {
    // hwloc's 32intel64-2p8co2t+8ve: /proc/cpuinfo of a two-socket Xeon Silver 4108, bare metal.
    let Some(dir) = captures_dir() else { return };
    let Some(root) = unpack(&dir, "32intel64-2p8co2t+8ve.tar.bz2") else {
        return;
    };
    let source = HostSource::new(&root, SourceOptions::default());
    assert_eq!(topology::hypervisor(&source), Some(false));
    // The same file with `hypervisor` among the first CPU's flags reads as a VM.
    let text = fs::read_to_string(root.join("proc/cpuinfo")).unwrap();
    let vm = text.replacen("flags\t\t: fpu ", "flags\t\t: hypervisor fpu ", 1);
    assert_ne!(vm, text);
    assert_eq!(topology::parse_hypervisor_flag(&vm), Some(true));
}
