//! Unit tests of the topology facts: path splitting, the PCIe/NUMA classes on the reference
//! shapes (topology.md §3), kinds from class codes, the hypervisor flag and NIC name order.

use super::*;

fn dev(bdf: &str, path: &str, kind: DeviceKind, numa: Option<u32>) -> PciDevice {
    let (host_bridge, chain) = split_device_path(path).unwrap();
    PciDevice {
        bdf: bdf.into(),
        address: parse_bdf(bdf).ok(),
        path: path.into(),
        host_bridge,
        chain,
        vendor: None,
        device: None,
        class: None,
        kind,
        driver: None,
        numa_node_file: numa.map(i64::from),
        numa,
        numa_source: NumaSource::NumaNode,
        cpulist_node: None,
        local_cpus: None,
        link: PcieLink::default(),
        aer: Aer::default(),
        rdma_devices: vec![],
        netdevs: vec![],
    }
}

#[test]
fn splits_paths_into_host_bridge_and_chain() {
    let (host, chain) = split_device_path(
        "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:08.0/0000:1a:00.0",
    )
    .unwrap();
    assert_eq!(host, "sys/devices/pci0000:17");
    assert_eq!(
        chain,
        [
            "0000:17:00.0",
            "0000:18:00.0",
            "0000:19:08.0",
            "0000:1a:00.0"
        ]
    );
    // Hyper-V guest: the VMBus prefix is the host bridge.
    let (host, chain) = split_device_path(
        "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:01/47505500-0001-0000-3130-444531454238/pci0001:00/0001:00:00.0",
    )
    .unwrap();
    assert!(host.ends_with("pci0001:00"));
    assert_eq!(chain, ["0001:00:00.0"]);
    assert!(split_device_path("sys/devices/virtual/net/lo").is_none());
}

#[test]
fn classes_follow_the_reference_shapes() {
    let topo = Topology {
        devices: vec![
            // Single switch, GPU and NIC on sibling downstream ports (HGX H100): PIX.
            dev(
                "0000:18:00.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0",
                DeviceKind::Gpu,
                Some(0),
            ),
            dev(
                "0000:19:00.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0",
                DeviceKind::RdmaNic,
                Some(0),
            ),
            // Two-level switch (DGX A100 PEX88096): PXB.
            dev(
                "0000:0c:00.0",
                "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:0b:00.0/0000:0b:01.0/0000:0c:00.0",
                DeviceKind::RdmaNic,
                Some(0),
            ),
            // Another root port of the same host bridge: PHB.
            dev(
                "0000:15:02.0",
                "sys/devices/pci0000:15/0000:15:02.0",
                DeviceKind::RootPort,
                Some(0),
            ),
            dev(
                "0000:30:00.0",
                "sys/devices/pci0000:15/0000:15:02.0/0000:30:00.0",
                DeviceKind::Nic,
                Some(0),
            ),
            // Dual-port NIC: two functions of one card: PIX.
            dev(
                "0000:69:00.0",
                "sys/devices/pci0000:68/0000:68:01.0/0000:69:00.0",
                DeviceKind::RdmaNic,
                Some(0),
            ),
            dev(
                "0000:69:00.1",
                "sys/devices/pci0000:68/0000:68:01.0/0000:69:00.1",
                DeviceKind::RdmaNic,
                Some(0),
            ),
            // Other socket.
            dev(
                "0000:9a:00.0",
                "sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0/0000:9a:00.0",
                DeviceKind::Gpu,
                Some(1),
            ),
            // NUMA unknown.
            dev(
                "0000:aa:00.0",
                "sys/devices/pci0000:a7/0000:a7:01.0/0000:aa:00.0",
                DeviceKind::RdmaNic,
                None,
            ),
        ],
        ..Topology::default()
    };
    let class = |a: &str, b: &str| {
        topo.pcie_class(topo.device(a).unwrap(), topo.device(b).unwrap())
            .to_string()
    };
    assert_eq!(class("0000:18:00.0", "0000:18:00.0"), "X");
    assert_eq!(class("0000:18:00.0", "0000:19:00.0"), "PIX");
    assert_eq!(class("0000:18:00.0", "0000:0c:00.0"), "PXB");
    assert_eq!(class("0000:18:00.0", "0000:30:00.0"), "PHB");
    assert_eq!(class("0000:69:00.0", "0000:69:00.1"), "PIX");
    assert_eq!(class("0000:18:00.0", "0000:69:00.0"), "NODE");
    assert_eq!(class("0000:18:00.0", "0000:9a:00.0"), "SYS");
    assert_eq!(class("0000:18:00.0", "0000:aa:00.0"), "?");
}

/// The PCI facts skip vendor, device and placement of a class `is_judged_class` rejects;
/// that is only sound if no such class can be a kind some layer judges.
#[test]
fn every_judged_kind_has_a_judged_class() {
    for class16 in 0..=0xffffu32 {
        for prog_if in [0x00, 0x01, 0x80] {
            let class = class16 << 8 | prog_if;
            for vendor in [Some(VENDOR_NVIDIA), Some(0x15b3), Some(0x8086), None] {
                for has_rdma in [false, true] {
                    if kind_of(vendor, Some(class), has_rdma) != DeviceKind::Other {
                        assert!(is_judged_class(class), "{class:#08x} {vendor:?}");
                    }
                }
            }
        }
    }
    assert!(!is_judged_class(0x010802), "an NVMe drive is not judged");
    assert!(
        !is_judged_class(0x088000),
        "an uncore system function is not judged"
    );
}

#[test]
fn kinds_from_class_codes() {
    assert_eq!(
        kind_of(Some(0x10de), Some(0x030200), false),
        DeviceKind::Gpu
    );
    assert_eq!(kind_of(None, Some(0x030200), false), DeviceKind::Gpu);
    // The BMC's ASPEED VGA is not a GPU.
    assert_eq!(
        kind_of(Some(0x1a03), Some(0x030000), false),
        DeviceKind::Other
    );
    assert_eq!(
        kind_of(Some(0x10de), Some(0x068000), false),
        DeviceKind::NvSwitch
    );
    assert_eq!(
        kind_of(Some(0x15b3), Some(0x020700), false),
        DeviceKind::RdmaNic
    );
    assert_eq!(
        kind_of(Some(0x15b3), Some(0x020000), true),
        DeviceKind::RdmaNic
    );
    assert_eq!(
        kind_of(Some(0x8086), Some(0x020000), false),
        DeviceKind::Nic
    );
    // ConnectX-3 "other network controller" with mlx4_0.
    assert_eq!(
        kind_of(Some(0x15b3), Some(0x028000), true),
        DeviceKind::RdmaNic
    );
    assert_eq!(
        kind_of(Some(0x1077), Some(0x0c0600), false),
        DeviceKind::RdmaNic
    );
    assert_eq!(
        kind_of(Some(0x10b5), Some(0x060400), false),
        DeviceKind::PciBridge
    );
    assert_eq!(kind_of(None, None, false), DeviceKind::Other);
}

#[test]
fn hypervisor_flag() {
    let vm = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr hypervisor lahf_lm\n";
    assert_eq!(parse_hypervisor_flag(vm), Some(true));
    let metal = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr lahf_lm\n";
    assert_eq!(parse_hypervisor_flag(metal), Some(false));
    assert_eq!(parse_hypervisor_flag("processor : 0\n"), None);
}

#[test]
fn nic_names_sort_naturally() {
    let mut names = vec!["mlx5_10", "mlx5_2", "mlx5_bond_0", "mlx5_0"];
    names.sort_by_key(|n| natural_key(n));
    assert_eq!(names, ["mlx5_0", "mlx5_2", "mlx5_10", "mlx5_bond_0"]);
}
