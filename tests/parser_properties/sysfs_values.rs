//! sysfs and procfs values: PCI attributes, addresses and ids, CPU lists, masks and NUMA files,
//! RDMA values, PCI config space, and the topology helpers.

use super::*;

const GPU: &str = "sys/bus/pci/devices/0000:18:00.0";

const SYSFS_TOKENS: &[&str] = &[
    "0x10de",
    "0x2330",
    "0x030200",
    "0x",
    "10de",
    "2.5 GT/s",
    "5.0 GT/s",
    "8.0 GT/s",
    "16.0 GT/s",
    "32.0 GT/s",
    "64.0 GT/s",
    " PCIe",
    "Unknown",
    "GT/s",
    "2.5",
    "16",
    "x16",
    "0000:18:00.0",
    "10000:00:04.0",
    "ERR_COR ",
    "TOTAL_ERR_COR ",
    "RxErr ",
    "BadTLP ",
    "0000:",
    ":00.",
    "4: ACTIVE",
    "1: DOWN",
    "5: LinkUp",
    "400 Gb/sec (4X NDR)",
    "Gb/sec",
    " (4X NDR)",
    "2.5 Gb/sec",
];

#[test]
fn pci_values_never_panic() {
    let samples = vec![
        healthy(&format!("{GPU}/vendor")),
        healthy(&format!("{GPU}/class")),
        healthy(&format!("{GPU}/numa_node")),
        healthy(&format!("{GPU}/current_link_speed")),
        healthy(&format!("{GPU}/max_link_width")),
        healthy(&format!("{GPU}/aer_dev_correctable")),
        healthy(&format!("{GPU}/aer_dev_fatal")),
        "0000:18:00.0\n".into(),
        "8.0 GT/s PCIe\n".into(),
        "TOTAL_ERR_FATAL 3\nUndefined 0\n".into(),
    ];
    property(
        "pci",
        move || inputs(SYSFS_TOKENS, samples),
        |t| {
            let _ = pci::parse_hex(t);
            let _ = pci::parse_numa_node(t);
            let _ = pci::is_bdf(t);
            let _ = pci::parse_bdf(t);
            if let Ok(Some(speed)) = pci::parse_link_speed(t) {
                let _ = speed.generation();
                let _ = speed.lane_gb_per_s();
                let width = pci::parse_link_width(t).ok();
                let _ = pci::describe_link(Some(speed), width);
                let _ = pci::link_gb_per_s(speed, width.unwrap_or(u32::MAX));
            }
            let _ = pci::parse_link_width(t);
            let _ = pci::parse_aer(t);
            let _ = sriov::parse_count(t);
            let _ = topology::split_device_path(t);
            let _ = nvml::normalize_bus_id(t);
        },
    );
}

const CPU_TOKENS: &[&str] = &[
    "0",
    "7",
    "0-7",
    "16-23",
    "0-55",
    "112-167",
    "65535",
    "65536",
    "0-65535",
    "00000000",
    "0000ff00",
    "ffffffff",
    "00ff00ff",
    "10 21",
    "21 10",
    "Node 0 MemTotal:",
    "15728640 kB",
    "MemTotal:",
    "kB",
    "Node 0 MemFree:",
    "4294967295",
];

#[test]
fn cpu_lists_masks_and_numa_files_never_panic() {
    let samples = vec![
        healthy(&format!("{GPU}/local_cpulist")),
        healthy(&format!("{GPU}/local_cpus")),
        healthy("sys/devices/system/node/node0/cpulist"),
        healthy("sys/devices/system/node/node0/cpumap"),
        healthy("sys/devices/system/node/node0/distance"),
        healthy("sys/devices/system/node/node0/meminfo"),
        "0000,00000000,00000000,00ff00ff\n".into(),
        "\n".into(),
    ];
    property(
        "numa",
        move || inputs(CPU_TOKENS, samples),
        |t| {
            if let Ok(set) = numa::parse_cpulist(t) {
                // What it prints reads back the same.
                assert_eq!(numa::parse_cpulist(&set.to_string()).unwrap(), set);
            }
            if let Ok(set) = numa::parse_cpumask(t) {
                assert_eq!(numa::parse_cpulist(&set.to_string()).unwrap(), set);
            }
            let _ = numa::parse_distance(t);
            let _ = numa::parse_meminfo_total(t);
        },
    );
}

#[test]
fn cpu_lists_and_masks_read_back_what_was_written() {
    property(
        "cpulist round trip",
        move || prop::collection::btree_set(0u32..4096, 0..200),
        |cpus| {
            let list = cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let set = numa::parse_cpulist(&format!("{list}\n")).unwrap();
            assert_eq!(
                set.iter().collect::<Vec<_>>(),
                cpus.iter().copied().collect::<Vec<_>>()
            );
            // The kernel's mask: 32-bit words, most significant first.
            let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
            let mask = (0..words)
                .rev()
                .map(|w| {
                    let bits = cpus
                        .iter()
                        .filter(|c| **c / 32 == w)
                        .fold(0u32, |acc, c| acc | 1 << (c % 32));
                    format!("{bits:08x}")
                })
                .collect::<Vec<_>>()
                .join(",");
            assert_eq!(numa::parse_cpumask(&mask).unwrap(), set, "{mask}");
        },
    );
}

#[test]
fn pci_addresses_and_ids_read_back_what_was_written() {
    property(
        "bdf round trip",
        move || (any::<u32>(), any::<u8>(), 0u8..32, 0u8..8, any::<u16>()),
        |&(domain, bus, device, function, id)| {
            let text = if domain <= 0xffff {
                format!("{domain:04x}:{bus:02x}:{device:02x}.{function}")
            } else {
                format!("{domain:x}:{bus:02x}:{device:02x}.{function}")
            };
            assert!(pci::is_bdf(&text), "{text}");
            let bdf = pci::parse_bdf(&format!("{text}\n")).unwrap();
            assert_eq!(
                (bdf.domain, bdf.bus, bdf.device, bdf.function),
                (domain, bus, device, function)
            );
            assert_eq!(
                pci::parse_hex(&format!("{id:#06x}\n")).unwrap(),
                u32::from(id)
            );
        },
    );
}

const RDMA_TOKENS: &[&str] = &[
    "4: ACTIVE",
    "1: DOWN",
    "5: LinkUp",
    "3: Disabled",
    "400 Gb/sec (4X NDR)",
    "200 Gb/sec",
    "Gb/sec",
    "(4X NDR)",
    "2.5",
    "1e400",
    "-0",
    "InfiniBand",
    "Ethernet",
    ": ",
];

#[test]
fn rdma_values_never_panic() {
    let port = "sys/class/infiniband/mlx5_0/ports/1";
    let samples = vec![
        healthy(&format!("{port}/state")),
        healthy(&format!("{port}/rate")),
        healthy(&format!("{port}/phys_state")),
        healthy(&format!("{port}/counters/link_downed")),
        "18446744073709551615\n".into(),
    ];
    property(
        "rdma",
        move || inputs(RDMA_TOKENS, samples),
        |t| {
            let _ = rdma::parse_numbered(t);
            if let Ok(rate) = rdma::parse_rate(t) {
                assert!(rate.is_finite() && rate >= 0.0, "{rate}");
            }
            let _ = rdma::parse_counter(t);
        },
    );
}

#[test]
fn pci_config_space_never_panics_or_loops() {
    let real: Vec<Vec<u8>> = [
        "sys/devices/pci0000:b7/0000:b7:01.0/0000:b8:00.0/config",
        "sys/devices/pci0000:b7/0000:b7:01.0/0000:b8:00.0/0000:b9:01.0/config",
    ]
    .iter()
    .map(|rel| std::fs::read(repo().join("fixtures/hgx-h100-healthy").join(rel)).unwrap())
    .collect();
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..4200),
        // Real config spaces with bytes overwritten (capability pointers pointing anywhere).
        (
            prop::sample::select(real),
            prop::collection::vec((0usize..4096, any::<u8>()), 0..64),
            any::<usize>(),
        )
            .prop_map(|(mut b, writes, cut)| {
                for (at, v) in writes {
                    if at < b.len() {
                        b[at] = v;
                    }
                }
                if cut % 4 == 0 {
                    b.truncate(cut % (b.len() + 1));
                }
                b
            }),
        // A capability list that points back at itself.
        (0x100usize..0xffc, any::<u16>()).prop_map(|(next, id)| {
            let mut b = vec![0u8; 4096];
            for at in (0x100..0x1000).step_by(4) {
                let header = u32::from(id) | ((next as u32 & !3) << 20);
                b[at..at + 4].copy_from_slice(&header.to_le_bytes());
            }
            b
        }),
    ];
    property(
        "pcicfg",
        move || bytes,
        |b| {
            let _ = pcicfg::parse_acs(b);
        },
    );
    property("acs flags", any::<u16>, |bits| {
        let _ = pcicfg::acs_flags(*bits);
    });
}

#[test]
fn topology_helpers_never_panic() {
    let samples = vec![
        "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0".to_string(),
        "sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/47505500-0001-0000-3130-444531303244/pci0001:00/0001:00:00.0".to_string(),
        "processor\t: 0\nflags\t\t: fpu vme de pse hypervisor lahf_lm\n".to_string(),
    ];
    property(
        "topology",
        move || {
            inputs(
                &[
                    "/",
                    "0000:18:00.0",
                    "pci0000:17",
                    "flags",
                    ":",
                    "hypervisor",
                    " ",
                ],
                samples,
            )
        },
        |t| {
            if let Some((host, chain)) = topology::split_device_path(t) {
                assert!(
                    !chain.is_empty() && chain.iter().all(|c| pci::is_bdf(c)),
                    "{host}"
                );
            }
            let _ = topology::parse_hypervisor_flag(t);
        },
    );
    property(
        "kind_of",
        move || (any::<Option<u16>>(), any::<Option<u32>>(), any::<bool>()),
        |&(vendor, class, rdma)| {
            let _ = topology::kind_of(vendor, class, rdma).label();
        },
    );
}
