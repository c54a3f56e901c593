//! Tests of the topology layer's checks on built topologies: link width and speed, NUMA
//! placement, GPU↔NIC locality, ACS, IOMMU and the kubelet's Topology Manager.

use super::*;
use crate::facts::numa::{NumaFacts, NumaNode, parse_cpulist};
use crate::facts::pci::{AerCounts, PcieLink, parse_link_speed};
use crate::facts::topology::{Aer, split_device_path};

fn speed(s: &str) -> Option<LinkSpeed> {
    parse_link_speed(s).unwrap()
}

fn dev(bdf: &str, path: &str, kind: DeviceKind, numa: Option<u32>) -> PciDevice {
    let (host_bridge, chain) = split_device_path(path).unwrap();
    PciDevice {
        bdf: bdf.into(),
        address: crate::facts::pci::parse_bdf(bdf).ok(),
        path: path.into(),
        host_bridge,
        chain,
        vendor: None,
        device: None,
        class: None,
        kind,
        driver: None,
        numa_node_file: Some(numa.map_or(-1, i64::from)),
        numa,
        numa_source: if numa.is_some() {
            NumaSource::NumaNode
        } else {
            NumaSource::Unknown
        },
        cpulist_node: None,
        local_cpus: None,
        link: PcieLink {
            current_speed: speed("32.0 GT/s PCIe"),
            max_speed: speed("32.0 GT/s PCIe"),
            current_width: Some(16),
            max_width: Some(16),
        },
        aer: Aer::default(),
        rdma_devices: vec![],
        netdevs: vec![],
    }
}

/// Two sockets: socket 0 has a switch with a GPU and a NIC, socket 1 a switch with a GPU only.
fn two_socket() -> Topology {
    let node = |id, cpus: &str| NumaNode {
        id,
        cpus: parse_cpulist(cpus).unwrap(),
        mem_total_kb: None,
        distances: vec![],
    };
    let mut nic = dev(
        "0000:19:00.0",
        "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0",
        DeviceKind::RdmaNic,
        Some(0),
    );
    nic.rdma_devices = vec!["mlx5_0".into()];
    Topology {
        devices: vec![
            dev(
                "0000:15:01.0",
                "sys/devices/pci0000:15/0000:15:01.0",
                DeviceKind::RootPort,
                Some(0),
            ),
            dev(
                "0000:16:00.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0",
                DeviceKind::SwitchUpstream,
                Some(0),
            ),
            dev(
                "0000:17:00.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0",
                DeviceKind::SwitchDownstream,
                Some(0),
            ),
            dev(
                "0000:17:01.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0",
                DeviceKind::SwitchDownstream,
                Some(0),
            ),
            dev(
                "0000:18:00.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0",
                DeviceKind::Gpu,
                Some(0),
            ),
            nic,
            dev(
                "0000:9a:00.0",
                "sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0/0000:9a:00.0",
                DeviceKind::Gpu,
                Some(1),
            ),
        ],
        numa: NumaFacts {
            nodes: vec![node(0, "0-55,112-167"), node(1, "56-111,168-223")],
            problems: vec![],
        },
        problems: vec![],
    }
}

#[test]
fn scope_is_gpus_nics_and_their_ports() {
    let t = two_socket();
    let scope: Vec<&str> = in_scope(&t).iter().map(|d| d.bdf.as_str()).collect();
    assert_eq!(
        scope,
        [
            "0000:15:01.0",
            "0000:16:00.0",
            "0000:17:00.0",
            "0000:17:01.0",
            "0000:18:00.0",
            "0000:19:00.0",
            "0000:9a:00.0"
        ]
    );
}

#[test]
fn the_far_gpu_is_sys_from_the_only_nic() {
    let t = two_socket();
    let nic = t.device("0000:19:00.0").unwrap();
    assert_eq!(
        t.pcie_class(t.device("0000:18:00.0").unwrap(), nic),
        Link::Pix
    );
    assert_eq!(
        t.pcie_class(t.device("0000:9a:00.0").unwrap(), nic),
        Link::Sys
    );
}

#[test]
fn min_of_device_and_port() {
    assert_eq!(min_opt(Some(16), Some(8)), Some(8));
    assert_eq!(min_opt(None, Some(8)), Some(8));
    assert_eq!(min_opt::<u32>(None, None), None);
    // AerCounts is what the check reads.
    let c = AerCounts {
        total: 3,
        nonzero: vec![("DLP".into(), 2), ("MalfTLP".into(), 1)],
    };
    assert_eq!(c.nonzero.len(), 2);
}
