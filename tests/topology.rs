//! `gpudoctor topo` and the topology facts end to end: the healthy HGX H100 matrix (8 GPUs,
//! 10 NICs, the classes and NUMA affinities topology.md §7 describes), the matrix without a
//! driver, half-captured, broken trees that must give results — `?` where a class cannot be
//! computed — never a panic, and a node with hundreds of GPUs, where a bounded summary replaces
//! the matrix (issue 30).

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use gpudoctor::answers::nvml::NvmlFacts;
use gpudoctor::engine::{self, RunOptions};
use gpudoctor::facts::topology::{
    self, DeviceKind, Link, Matrix, NumaSource, NvlinkView, PciDevice,
};
use gpudoctor::report::{Layer, Status};
use gpudoctor::source::{HostSource, SourceOptions};
use serde_json::Value;

fn topo_json(root: &str) -> Value {
    let out = common::gpudoctor(&["topo", "--root", root, "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("topo --format json parses")
}

fn cell(doc: &Value, row: usize, col: usize) -> String {
    doc["matrix"]["cells"][row][col]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn healthy_h100_matrix() {
    let doc = topo_json("fixtures/hgx-h100-healthy");
    let gpus = doc["matrix"]["gpus"].as_array().unwrap();
    let nics = doc["matrix"]["nics"].as_array().unwrap();
    assert_eq!((gpus.len(), nics.len()), (8, 10));
    assert_eq!(doc["labels"].as_array().unwrap().len(), 18);
    assert_eq!(doc["matrix"]["nvlink"], "nvml");
    for (i, gpu) in gpus.iter().enumerate() {
        assert_eq!(cell(&doc, i, i), "X");
        // Every GPU pair: NV18 through the NVSwitches (topology.md §7).
        for j in (0..8).filter(|j| *j != i) {
            assert_eq!(cell(&doc, i, j), "NV18", "GPU{i}/GPU{j}");
        }
        // One NIC per GPU behind the same switch: PIX; NICs of the same socket NODE, the other
        // socket SYS.
        assert_eq!(cell(&doc, i, 8 + i), "PIX", "GPU{i}/NIC{i}");
        let socket = |k: usize| usize::from(k >= 4);
        for k in (0..8).filter(|k| *k != i) {
            let want = if socket(k) == socket(i) {
                "NODE"
            } else {
                "SYS"
            };
            assert_eq!(cell(&doc, i, 8 + k), want, "GPU{i}/NIC{k}");
        }
        // The dual-port Ethernet card (mlx5_8/9, RoCE) sits on socket 0.
        let eth = if i < 4 { "NODE" } else { "SYS" };
        assert_eq!(
            (cell(&doc, i, 16), cell(&doc, i, 17)),
            (eth.into(), eth.into())
        );
        assert_eq!(gpu["numa_node"], Value::from(u32::from(i >= 4)));
        assert_eq!(gpu["numa_source"], "numa_node");
        let cpus = if i < 4 {
            "0-55,112-167"
        } else {
            "56-111,168-223"
        };
        assert_eq!(gpu["cpu_affinity"], cpus);
    }
    // Two functions of one card: PIX; symmetric matrix.
    assert_eq!(cell(&doc, 16, 17), "PIX");
    for i in 0..18 {
        for j in 0..18 {
            assert_eq!(cell(&doc, i, j), cell(&doc, j, i));
        }
    }
    let names: Vec<&str> = nics.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7",
            "mlx5_8", "mlx5_9"
        ]
    );
    assert_eq!(doc["numa_nodes"].as_array().unwrap().len(), 2);
    assert_eq!(doc["switches"].as_array().unwrap().len(), 8);
    assert_eq!(doc["switches"][0]["vendor_device"], "1000:c030");
    assert_eq!(
        doc["switches"][0]["downstream"].as_array().unwrap().len(),
        2
    );

    // The table: nvidia-smi's shape, plain when piped.
    let out = common::gpudoctor(&["topo", "--root", "fixtures/hgx-h100-healthy"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "no colour when piped");
    let header = text.lines().next().unwrap();
    assert!(header.trim_start().starts_with("GPU0"), "{header}");
    assert!(
        header.ends_with("CPU Affinity    NUMA Affinity"),
        "{header}"
    );
    let gpu0: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(gpu0[..3], ["GPU0", "X", "NV18"]);
    assert_eq!(gpu0[gpu0.len() - 2..], ["0-55,112-167", "0"]);
    assert!(text.contains("\nLegend:\n"));
    assert!(text.contains("  PIX  = Connection traversing at most a single PCIe bridge\n"));
    assert!(text.contains("\nNIC Legend:\n"));
    assert!(text.contains("  NIC0: mlx5_0 (0000:19:00.0)\n"));
}

#[test]
fn matrix_without_a_driver() {
    let doc = topo_json("fixtures/h100-driver-not-loaded");
    assert_eq!(doc["matrix"]["gpus"].as_array().unwrap().len(), 8);
    assert!(
        doc["matrix"]["nvlink"]
            .as_str()
            .unwrap()
            .starts_with("unavailable"),
        "{}",
        doc["matrix"]["nvlink"]
    );
    // PCIe classes only: GPUs of one socket meet at NODE, across sockets SYS.
    assert_eq!(cell(&doc, 0, 1), "NODE");
    assert_eq!(cell(&doc, 0, 4), "SYS");
    assert_eq!(cell(&doc, 0, 8), "PIX");
    let out = common::gpudoctor(&[
        "topo",
        "--root",
        "fixtures/h100-driver-not-loaded",
        "--no-nvml",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("NVLink not asked: PCIe classes only"),
        "{text}"
    );
}

#[test]
fn firmware_without_numa_shows_question_marks() {
    let doc = topo_json("fixtures/h100-numa-node-unknown");
    // Same switch: still PIX; different host bridges with no NUMA node: `?`.
    assert_eq!(cell(&doc, 0, 8), "PIX");
    assert_eq!(cell(&doc, 0, 9), "?");
    assert_eq!(doc["matrix"]["gpus"][0]["numa_node"], Value::Null);
    assert_eq!(doc["matrix"]["gpus"][0]["numa_source"], "unknown");
}

#[test]
fn bad_root_is_a_usage_error() {
    let out = common::gpudoctor(&["topo", "--root", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

/// A tree with every kind of damage the issue names.
fn broken_tree(root: &Path) {
    let node = "sys/devices/system/node";
    write(root, &format!("{node}/node0/cpulist"), "0-3\n");
    write(root, &format!("{node}/node0/distance"), "10 21\n");
    write(root, &format!("{node}/node1/cpulist"), "4-7\n");
    write(root, &format!("{node}/node1/distance"), "21 10\n");
    write(root, &format!("{node}/node1/meminfo"), "garbage\n");
    let rp = "sys/devices/pci0000:00/0000:00:01.0";
    write(root, &format!("{rp}/vendor"), "0x8086\n");
    write(root, &format!("{rp}/class"), "0x060400\n");
    // A GPU with only `class` and a short mask (POWER9-style trimmed capture): vendor and
    // numa_node missing, local_cpus in hex → node 0 by its CPUs.
    let gpu = format!("{rp}/0000:01:00.0");
    write(root, &format!("{gpu}/class"), "0x030200\n");
    write(root, &format!("{gpu}/local_cpus"), "f\n");
    write(root, &format!("{gpu}/current_link_speed"), "fast\n");
    write(root, &format!("{gpu}/max_link_speed"), "Unknown speed\n");
    write(root, &format!("{gpu}/current_link_width"), "x16\n");
    write(
        root,
        &format!("{gpu}/aer_dev_fatal"),
        "TOTAL_ERR_FATAL lots\n",
    );
    // A function with no class at all.
    let odd = format!("{rp}/0000:01:00.1");
    write(root, &format!("{odd}/vendor"), "0x10de\n");
    // A NIC in a 32-bit PCI domain (VM), numa_node -1 and all CPUs: no NUMA node.
    let vm = "sys/devices/pci10000:00/10000:00:04.0";
    write(root, &format!("{vm}/vendor"), "0x15b3\n");
    write(root, &format!("{vm}/class"), "0x020700\n");
    write(root, &format!("{vm}/numa_node"), "-1\n");
    write(root, &format!("{vm}/local_cpulist"), "0-7\n");
    write(root, &format!("{vm}/config"), "\0\0");
    let bus = "sys/bus/pci/devices";
    link(
        root,
        &format!("{bus}/0000:00:01.0"),
        "../../../devices/pci0000:00/0000:00:01.0",
    );
    link(
        root,
        &format!("{bus}/0000:01:00.0"),
        "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
    );
    link(
        root,
        &format!("{bus}/0000:01:00.1"),
        "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.1",
    );
    link(
        root,
        &format!("{bus}/10000:00:04.0"),
        "../../../devices/pci10000:00/10000:00:04.0",
    );
    // Dangling, looping and escaping links.
    link(
        root,
        &format!("{bus}/0000:00:09.0"),
        "../../../devices/pci0000:00/0000:00:09.0",
    );
    link(root, &format!("{bus}/0000:00:0a.0"), "0000:00:0a.0");
    link(
        root,
        &format!("{bus}/0000:00:0b.0"),
        "/sys/devices/pci0000:00/0000:00:0b.0",
    );
    link(root, &format!("{gpu}/subsystem"), "../../../../bus/pci");
    link(
        root,
        &format!("{gpu}/driver"),
        "../../../../bus/pci/drivers/nvidia",
    );
    link(
        root,
        "sys/class/infiniband/mlx5_0",
        "../../devices/pci10000:00/10000:00:04.0/infiniband/mlx5_0",
    );
    write(
        root,
        "sys/devices/pci10000:00/10000:00:04.0/infiniband/mlx5_0/node_type",
        "1: CA\n",
    );
    link(
        root,
        "sys/class/infiniband/scif0",
        "../../devices/scif_dma_0/infiniband/scif0",
    );
}

#[test]
fn broken_trees_give_results_not_panics() {
    let dir = common::tempdir().unwrap();
    broken_tree(dir.path());
    let options = SourceOptions {
        nvml_lib: Some(dir.path().join("no-such-libnvidia-ml.so")),
        ..SourceOptions::default()
    };
    let source = HostSource::new(dir.path(), options);
    let t = topology::gather(&source).unwrap();

    let bdfs: Vec<&str> = t.devices.iter().map(|d| d.bdf.as_str()).collect();
    // Sorted numerically: the 32-bit domain last; dangling, looping and escaping links skipped.
    assert_eq!(
        bdfs,
        [
            "0000:00:01.0",
            "0000:01:00.0",
            "0000:01:00.1",
            "10000:00:04.0"
        ]
    );
    for bad in ["0000:00:09.0", "0000:00:0a.0", "0000:00:0b.0"] {
        assert!(
            t.problems.iter().any(|p| p.path.contains(bad)),
            "{bad} not noted: {:?}",
            t.problems
        );
    }
    let gpu = t.device("0000:01:00.0").unwrap();
    assert_eq!(gpu.kind, DeviceKind::Gpu);
    assert_eq!(gpu.vendor, None);
    assert_eq!(
        (gpu.numa, gpu.numa_source),
        (Some(0), NumaSource::LocalCpulist)
    );
    assert_eq!(
        gpu.driver.as_deref(),
        Some("nvidia"),
        "dangling driver link read, not followed"
    );
    // `fast` is noted and unknown; `Unknown speed` is simply unknown; `x16` is noted.
    assert_eq!((gpu.link.current_speed, gpu.link.max_speed), (None, None));
    assert_eq!(gpu.link.current_width, None);
    assert!(
        t.problems
            .iter()
            .any(|p| p.path.ends_with("current_link_speed"))
    );
    assert!(
        !t.problems
            .iter()
            .any(|p| p.path.ends_with("max_link_speed"))
    );
    assert!(t.problems.iter().any(|p| p.path.ends_with("aer_dev_fatal")));
    assert_eq!(t.device("0000:01:00.1").unwrap().kind, DeviceKind::Other);
    let nic = t.device("10000:00:04.0").unwrap();
    assert_eq!(nic.kind, DeviceKind::RdmaNic);
    assert_eq!(nic.rdma_devices, ["mlx5_0"]);
    assert_eq!((nic.numa, nic.numa_source), (None, NumaSource::Unknown));
    assert_eq!(nic.address.map(|a| a.domain), Some(0x10000));
    assert!(t.numa.problems.iter().any(|p| p.path.ends_with("meminfo")));

    // Different host bridges, one side's NUMA node unknown: `?`.
    let m = Matrix::build(&t, None);
    assert_eq!(
        m.cells(),
        Some(vec![
            vec![Link::X, Link::Unknown],
            vec![Link::Unknown, Link::X]
        ])
    );
    let text = gpudoctor::render::topo::render_table(&t, &m, false);
    assert!(text.contains("?"), "{text}");

    // Every topology check returns a result on it.
    let report = engine::run(
        &source,
        &RunOptions {
            only: vec![Layer::Topology],
            ..RunOptions::default()
        },
    );
    let layer = report.layer(Layer::Topology).unwrap();
    let registered = gpudoctor::checks::registry()
        .iter()
        .filter(|d| d.layer == Layer::Topology)
        .count();
    assert_eq!(layer.checks.len(), registered);
    assert_eq!(
        registered, 9,
        "eight passive checks and topology.host_bandwidth"
    );
    let numa = layer
        .checks
        .iter()
        .find(|c| c.code == "topology.numa_affinity")
        .unwrap();
    assert_eq!(numa.status, Status::Warn, "{numa:#?}");
    let locality = layer
        .checks
        .iter()
        .find(|c| c.code == "topology.gpu_nic_locality")
        .unwrap();
    // The GPU's vendor and a bridge's device file are missing (issue 14, missing is not
    // absent): the placement verdict they could change is held back, naming them.
    assert_eq!(locality.status, Status::Error, "{locality:#?}");
    assert!(
        locality.summary.starts_with("not read: ")
            && locality
                .summary
                .contains("missing — partial capture or kernel older than 2.6")
            && locality
                .summary
                .contains("judged without it: GPU 0000:01:00.0 nearest RDMA NIC"),
        "{}",
        locality.summary
    );
    let acs = layer
        .checks
        .iter()
        .find(|c| c.code == "topology.acs")
        .unwrap();
    // A device that could not be placed might be a switch port: not judged, and said so.
    assert_eq!(acs.status, Status::Error, "{acs:#?}");
    assert!(
        // The dangling device link, and (issue 14) the identity files that are missing.
        acs.summary.starts_with(
            "could not read 8 input files (first sys/devices/pci0000:00/0000:00:01.0/device: missing"
        ) && acs
            .evidence
            .iter()
            .any(|e| e.source == "sys/bus/pci/devices/0000:00:09.0"
                && e.observed.contains("dangling symlink"))
            && acs
            .summary
            .ends_with("judged without: no PCIe switch above the GPUs and RDMA NICs"),
        "{}",
        acs.summary
    );
    let kubelet = layer
        .checks
        .iter()
        .find(|c| c.code == "topology.kubelet_topology_manager")
        .unwrap();
    assert_eq!(kubelet.status, Status::Skip);
}

#[test]
fn topo_and_check_over_the_broken_tree_from_the_cli() {
    let dir = common::tempdir().unwrap();
    broken_tree(dir.path());
    let root = dir.path().to_str().unwrap();
    let out = common::gpudoctor(&["topo", "--root", root, "--no-nvml", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["matrix"]["cells"][0][1], "?");
    assert!(!doc["problems"].as_array().unwrap().is_empty());
    // No /sys/bus/pci/devices at all: inconclusive, said on stderr.
    let empty = common::tempdir().unwrap();
    let out = common::gpudoctor(&[
        "topo",
        "--root",
        empty.path().to_str().unwrap(),
        "--no-nvml",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sys/bus/pci/devices"));
}

/// A function of a class nothing judges (an NVMe drive) costs one read: its damaged vendor,
/// device and numa_node files are never opened, so they are no problem, and its NUMA node says
/// "not read" — while the same damage on a GPU is noted. A check that silently skipped the GPU's
/// files too would pass the first half and fail the second.
#[test]
fn functions_nothing_judges_are_read_by_class_only() {
    let dir = common::tempdir().unwrap();
    let root = dir.path();
    write(root, "sys/devices/system/node/node0/cpulist", "0-3\n");
    let bus = "sys/bus/pci/devices";
    for (bdf, class) in [
        ("0000:02:00.0", "0x010802\n"),
        ("0000:03:00.0", "0x030200\n"),
    ] {
        let dev = format!("sys/devices/pci0000:00/{bdf}");
        write(root, &format!("{dev}/class"), class);
        write(root, &format!("{dev}/vendor"), "\u{0}\u{ff}binary");
        write(root, &format!("{dev}/device"), "0x1234\n");
        write(root, &format!("{dev}/numa_node"), "zero\n");
        link(
            root,
            &format!("{bus}/{bdf}"),
            &format!("../../../devices/pci0000:00/{bdf}"),
        );
    }
    let source = HostSource::new(root, SourceOptions::default());

    let pci = gpudoctor::facts::pci::gather(&source).unwrap();
    let unjudged: Vec<(&str, u32)> = pci
        .unjudged
        .iter()
        .map(|f| (f.bdf.as_str(), f.class))
        .collect();
    assert_eq!(unjudged, [("0000:02:00.0", 0x010802)]);
    assert_eq!(
        pci.count(),
        1,
        "the GPU with a binary vendor is a problem, not a function"
    );
    let problems: Vec<&str> = pci.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        problems,
        ["sys/bus/pci/devices/0000:03:00.0/vendor"],
        "only the GPU's damage is noted"
    );

    for t in [
        topology::gather(&source).unwrap(),
        topology::gather_with(&source, Some(&pci)).unwrap(),
    ] {
        let nvme = t.device("0000:02:00.0").unwrap();
        assert_eq!(nvme.kind, DeviceKind::Other);
        assert_eq!((nvme.vendor, nvme.numa_source), (None, NumaSource::NotRead));
        assert!(
            t.problems.iter().all(|p| !p.path.contains("0000:02:00.0")),
            "{:?}",
            t.problems
        );
        assert!(
            t.problems
                .iter()
                .any(|p| p.path.contains("0000:03:00.0") && p.path.ends_with("numa_node")),
            "{:?}",
            t.problems
        );
    }
}

/// The matrix as it was computed before issue 30 (every cell owned, `NvlinkView::between` by
/// address, then the PCIe/NUMA rules spelled out on the BDF strings), kept as the oracle for
/// the cells now computed on demand.
fn old_cells(t: &topology::Topology, nvml: Option<&NvmlFacts>) -> Vec<Vec<Link>> {
    fn pcie_class(a: &PciDevice, b: &PciDevice) -> Link {
        if a.bdf == b.bdf {
            return Link::X;
        }
        if a.chain.is_empty() || b.chain.is_empty() {
            return Link::Unknown;
        }
        if a.host_bridge != b.host_bridge {
            return match (a.numa, b.numa) {
                (Some(x), Some(y)) if x == y => Link::Node,
                (Some(_), Some(_)) => Link::Sys,
                _ => Link::Unknown,
            };
        }
        let k = a
            .chain
            .iter()
            .zip(&b.chain)
            .take_while(|(x, y)| x == y)
            .count();
        if k == 0 {
            return Link::Phb;
        }
        let below_a = a.chain.len().saturating_sub(k + 1);
        let below_b = b.chain.len().saturating_sub(k + 1);
        if below_a <= 1 && below_b <= 1 {
            Link::Pix
        } else {
            Link::Pxb
        }
    }
    let view = nvml.and_then(|n| NvlinkView::from_nvml(n, t));
    let all: Vec<&PciDevice> = t.gpus().chain(t.rdma_nics()).collect();
    all.iter()
        .map(|a| {
            all.iter()
                .map(|b| {
                    let nv =
                        (a.kind == DeviceKind::Gpu && b.kind == DeviceKind::Gpu && a.bdf != b.bdf)
                            .then(|| view.as_ref().and_then(|v| v.between(&a.bdf, &b.bdf)))
                            .flatten();
                    match nv {
                        Some(n) => Link::Nv(n),
                        None => pcie_class(a, b),
                    }
                })
                .collect()
        })
        .collect()
}

/// Every fixture, with its NVML answer and without: the cells computed on demand are the cells
/// the old matrix held, and the `--format json` document carries the same rows.
#[test]
fn cells_on_demand_equal_the_old_matrix_on_every_fixture() {
    let mut with_nvlink = 0;
    for root in common::fixtures() {
        let source = gpudoctor::source::open(&root, SourceOptions::default()).unwrap();
        // A fixture without a pci tree has no matrix to compare.
        let Ok(t) = topology::gather(source.as_ref()) else {
            continue;
        };
        let nvml = source.nvml();
        for nvml in [Some(&nvml), None] {
            let m = Matrix::build(&t, nvml);
            let old = old_cells(&t, nvml);
            assert!(old.len() <= topology::MATRIX_CAP, "{}", root.display());
            assert_eq!(m.cells().as_ref(), Some(&old), "{}", root.display());
            with_nvlink += usize::from(old.iter().flatten().any(|l| matches!(l, Link::Nv(_))));
            let doc = serde_json::to_value(&m).unwrap();
            let want: Vec<Vec<String>> = old
                .iter()
                .map(|row| row.iter().map(ToString::to_string).collect())
                .collect();
            assert_eq!(doc["cells"], serde_json::json!(want), "{}", root.display());
            assert!(doc.get("omitted").is_none(), "{}", root.display());
        }
    }
    // The oracle saw NVLink classes, not only PCIe ones.
    assert!(with_nvlink > 0);
}

/// A node with `gpus` NVIDIA GPUs (class 0x030200) 256 to a bus behind a PCIe switch, one host
/// bridge per 100 GPUs alternating between two NUMA nodes, and a ConnectX RDMA NIC beside each
/// switch's GPUs — the shape `benches/topo.py` generates by the thousand — plus the capture
/// manifest so it replays.
fn many_gpus(root: &Path, gpus: usize) {
    let node = "sys/devices/system/node";
    write(root, &format!("{node}/node0/cpulist"), "0-31\n");
    write(root, &format!("{node}/node0/distance"), "10 21\n");
    write(root, &format!("{node}/node1/cpulist"), "32-63\n");
    write(root, &format!("{node}/node1/distance"), "21 10\n");
    let function = |path: &str, vendor: &str, class: &str, numa: usize| {
        let bdf = path.rsplit('/').next().unwrap();
        write(root, &format!("{path}/vendor"), vendor);
        write(root, &format!("{path}/device"), "0x2330\n");
        write(root, &format!("{path}/class"), class);
        write(root, &format!("{path}/numa_node"), &format!("{numa}\n"));
        let target = path.trim_start_matches("sys/");
        link(
            root,
            &format!("sys/bus/pci/devices/{bdf}"),
            &format!("../../../{target}"),
        );
    };
    for domain in 0..gpus.div_ceil(100) {
        let numa = domain % 2;
        let up =
            format!("sys/devices/pci{domain:04x}:00/{domain:04x}:00:01.0/{domain:04x}:01:00.0");
        function(
            &format!("sys/devices/pci{domain:04x}:00/{domain:04x}:00:01.0"),
            "0x8086\n",
            "0x060400\n",
            numa,
        );
        function(&up, "0x1000\n", "0x060400\n", numa);
        let down = format!("{up}/{domain:04x}:02:00.0");
        function(&down, "0x1000\n", "0x060400\n", numa);
        for k in 0..(gpus - domain * 100).min(100) {
            let bdf = format!("{domain:04x}:03:{:02x}.{}", k / 8, k % 8);
            function(&format!("{down}/{bdf}"), "0x10de\n", "0x030200\n", numa);
        }
        let nic = format!("{up}/{domain:04x}:02:01.0");
        function(&nic, "0x1000\n", "0x060400\n", numa);
        function(
            &format!("{nic}/{domain:04x}:04:00.0"),
            "0x15b3\n",
            "0x020700\n",
            numa,
        );
    }
    write(root, ".gpudoctor/manifest.json", r#"{"format_version": 1}"#);
}

/// Past the cap (`MATRIX_CAP` devices) `topo` prints a summary whose size does not grow with
/// the pairs: the counts add up to every pair, the NUMA nodes to every device, and each device
/// is listed once. The same node as JSON says the matrix was left out and why, without cells.
#[test]
fn hundreds_of_gpus_get_a_bounded_summary_instead_of_a_matrix() {
    let dir = common::tempdir().unwrap();
    many_gpus(dir.path(), 300);
    let root = dir.path().to_str().unwrap();
    let out = common::gpudoctor(&["topo", "--root", root]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // 303 devices: a matrix would be 303 lines of 303 cells (~500 KiB); the summary lists them.
    assert!(text.len() < 64 << 10, "{} bytes:\n{text}", text.len());
    assert!(
        text.starts_with(
            "matrix left out: 303 devices (300 gpus, 3 rdma nics) is more than the 128 a matrix is printed for"
        ),
        "{text}"
    );
    assert!(
        text.contains("`gpudoctor topo --format json` lists every device"),
        "{text}"
    );
    assert!(!text.contains("GPU0 "), "no matrix header:\n{text}");
    // Pairs: GPUs behind one switch are PIX; across host bridges NODE (same socket) or SYS.
    assert!(
        text.contains("  gpu-gpu: PIX 14850, NODE 10000, SYS 20000\n"),
        "{text}"
    );
    assert!(
        text.contains("  gpu-nic: PIX 300, NODE 200, SYS 400\n"),
        "{text}"
    );
    assert!(text.contains("  nic-nic: NODE 1, SYS 2\n"), "{text}");
    assert!(text.contains("  node0: 200 gpus, 2 rdma nics\n"), "{text}");
    assert!(text.contains("  node1: 100 gpus, 1 rdma nics\n"), "{text}");
    assert!(text.contains("GPU299=0002:03:0c.3"), "{text}");
    assert_eq!(text.matches("GPU0=").count(), 1, "{text}");
    assert!(text.contains("NIC2: 0002:04:00.0 (0002:04:00.0)"), "{text}");

    let out = common::gpudoctor(&["topo", "--root", root, "--format", "json", "--no-nvml"]);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let matrix = &doc["matrix"];
    assert!(matrix.get("cells").is_none(), "{matrix}");
    assert_eq!(matrix["omitted"]["devices"], 303);
    assert_eq!(matrix["omitted"]["limit"], 128);
    assert!(
        matrix["omitted"]["reason"]
            .as_str()
            .unwrap()
            .contains("more than the 128")
    );
    assert_eq!(matrix["summary"]["pairs"]["gpu_gpu"]["PIX"], 14850);
    assert_eq!(matrix["summary"]["numa"][1]["gpus"], 100);
    assert_eq!(doc["labels"].as_array().unwrap().len(), 303);
    // Linear in the devices: each is listed with what was read about it (about 1.1 KiB); the
    // cells alone would add 303 × 303 quoted classes (over 1.5 MiB pretty-printed).
    assert!(out.stdout.len() < 303 * 2048, "{} bytes", out.stdout.len());
}
