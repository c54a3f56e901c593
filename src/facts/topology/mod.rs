//! The PCI tree, NUMA placement and the relationship classes `nvidia-smi topo -m` prints, from
//! sysfs alone (reference/topology.md §3, sysfs.md §2, §6, §7), plus `NV#` when NVML answered.
//!
//! What it reads: every `/sys/bus/pci/devices/<bdf>` link resolved into `/sys/devices/pci*`
//! (the path gives host bridge and switch ancestry), each function's `vendor`, `device`,
//! `class`, `numa_node`, `local_cpulist`/`local_cpus`, PCIe link files, AER counters and
//! `driver` link (read, never followed), the RDMA devices in `/sys/class/infiniband`, the netdevs
//! under each NIC, and `/sys/devices/system/node`. It never judges: a missing attribute is
//! `None`, a dangling or looping link is a noted problem, and a relationship that cannot be
//! computed is [`Link::Unknown`] (`?` in the matrix).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use super::numa::{self, CpuSet, NumaFacts, noted, parse_cpulist, parse_cpumask};
use super::pci::{
    AerCounts, Bdf, PCI_DEVICES, PciFacts, PciFunction, PcieLink, VENDOR_NVIDIA, is_bdf,
    is_judged_class, parse_aer, parse_bdf, parse_hex, parse_link_speed, parse_link_width,
    parse_numa_node,
};
use super::pcicfg::{AcsReading, parse_acs};
use super::{join, trimmed};
use crate::answers::{FactError, ParseError};
use crate::source::Source;

mod matrix;
#[cfg(test)]
mod tests;

pub use matrix::{
    LEGEND, Link, MATRIX_CAP, Matrix, MatrixEntry, NumaCount, NvlinkView, Omitted, PairCounts,
    Summary,
};

pub const CLASS_INFINIBAND: &str = "sys/class/infiniband";

/// What a PCI function is, for topology purposes (class codes: sysfs.md §2; NCCL's own table in
/// `src/graph/topo.cc` `kvDictPciClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// NVIDIA VGA (`0x0300`) or 3D controller (`0x0302`); a 3D controller whose `vendor` was not
    /// captured counts too (trimmed POWER9 trees keep only `class`, sysfs.md §13.3).
    Gpu,
    /// NVIDIA "other bridge" `0x0680` (HGX NVSwitch).
    NvSwitch,
    /// InfiniBand controller (`0x0207`, old HCAs `0x0c06`), or any network function with an RDMA
    /// device in `/sys/class/infiniband` (RoCE Ethernet, ConnectX-3's `0x0280`).
    RdmaNic,
    /// Any other network function (class `0x02xxxx`).
    Nic,
    /// First bridge below a host bridge.
    RootPort,
    /// A bridge under a root port or downstream port whose children are bridges: the upstream
    /// port of a PCIe switch.
    SwitchUpstream,
    /// A bridge under a switch upstream port.
    SwitchDownstream,
    /// Any other PCI-to-PCI bridge (a PCIe-to-PCI bridge such as the BMC's ASPEED AST1150).
    PciBridge,
    Other,
}

impl DeviceKind {
    pub fn is_bridge(self) -> bool {
        matches!(
            self,
            DeviceKind::RootPort
                | DeviceKind::SwitchUpstream
                | DeviceKind::SwitchDownstream
                | DeviceKind::PciBridge
        )
    }
    pub fn is_nic(self) -> bool {
        matches!(self, DeviceKind::RdmaNic | DeviceKind::Nic)
    }
    pub fn label(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::NvSwitch => "nvswitch",
            DeviceKind::RdmaNic => "rdma nic",
            DeviceKind::Nic => "nic",
            DeviceKind::RootPort => "root port",
            DeviceKind::SwitchUpstream => "switch upstream port",
            DeviceKind::SwitchDownstream => "switch downstream port",
            DeviceKind::PciBridge => "pci bridge",
            DeviceKind::Other => "device",
        }
    }
}

/// How a device's NUMA node was found (topology.md §3 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NumaSource {
    /// The function's `numa_node` (firmware `_PXM`).
    NumaNode,
    /// `numa_node` was -1 or absent; `local_cpulist` lies within exactly one node's CPUs.
    LocalCpulist,
    /// Neither told, but the machine has a single NUMA node.
    SingleNode,
    Unknown,
    /// Not read: nothing judges this function (neither GPU, NVSwitch, NIC nor bridge), so its
    /// placement files are skipped (docs/performance.md). Never shown as "unknown".
    NotRead,
}

impl NumaSource {
    pub fn describe(self) -> &'static str {
        match self {
            NumaSource::NumaNode => "numa_node",
            NumaSource::LocalCpulist => "local_cpulist",
            NumaSource::SingleNode => "single numa node",
            NumaSource::Unknown => "unknown",
            NumaSource::NotRead => "not read",
        }
    }
}

/// Root-port AER totals (`aer_rootport_total_err_*`): errors reported to the port for the whole
/// hierarchy below it (sysfs.md §5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RootPortAer {
    pub correctable: Option<u64>,
    pub fatal: Option<u64>,
    pub nonfatal: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Aer {
    pub correctable: Option<AerCounts>,
    pub fatal: Option<AerCounts>,
    pub nonfatal: Option<AerCounts>,
    pub rootport: Option<RootPortAer>,
}

/// One PCI function in the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PciDevice {
    /// As named in `/sys/bus/pci/devices` (`0000:18:00.0`).
    pub bdf: String,
    #[serde(skip)]
    pub address: Option<Bdf>,
    /// The resolved directory, root-relative (`sys/devices/pci0000:15/0000:15:01.0/...`).
    pub path: String,
    /// The path up to the host bridge (`sys/devices/pci0000:15`): devices under different host
    /// bridges meet only at the CPU.
    pub host_bridge: String,
    /// BDFs from the root port down to this device, inclusive (topology.md §3 "chain").
    pub chain: Vec<String>,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub class: Option<u32>,
    pub kind: DeviceKind,
    /// Basename of the `driver` link; its target often dangles in captures (sysfs.md §1).
    pub driver: Option<String>,
    /// `numa_node` as written (`-1` = firmware gave none); `None` when absent.
    pub numa_node_file: Option<i64>,
    pub numa: Option<u32>,
    pub numa_source: NumaSource,
    /// The single node `local_cpulist` lies within, when there is one.
    pub cpulist_node: Option<u32>,
    pub local_cpus: Option<CpuSet>,
    pub link: PcieLink,
    pub aer: Aer,
    /// RDMA devices (`/sys/class/infiniband/<name>`) whose `device` is this function.
    pub rdma_devices: Vec<String>,
    /// Network interfaces under this function's `net/`.
    pub netdevs: Vec<String>,
}

impl PciDevice {
    /// `gpu 0000:18:00.0`.
    pub fn label(&self) -> String {
        format!("{} {}", self.kind.label(), self.bdf)
    }

    /// `mlx5_0` / `ib0` / the BDF: how a NIC is named in the matrix legend.
    pub fn nic_name(&self) -> String {
        self.rdma_devices
            .first()
            .or(self.netdevs.first())
            .cloned()
            .unwrap_or_else(|| self.bdf.clone())
    }
}

/// Everything the topology layer knows about the node's PCI tree and NUMA nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Topology {
    /// Sorted by PCI address.
    pub devices: Vec<PciDevice>,
    pub numa: NumaFacts,
    /// What could not be read: dangling links, unreadable or unparsable attributes, RDMA devices
    /// outside the PCI tree. Never fatal.
    #[serde(skip)]
    pub problems: Vec<FactError>,
}

impl Topology {
    /// The device at `bdf`. `devices` is sorted by address ([`gather`]), so this is a binary
    /// search (parents and ancestors are looked up for every GPU/NIC pair: a linear search made
    /// a 20 000-function node quadratic); a hand-built, unsorted list still finds by scanning.
    pub fn device(&self, bdf: &str) -> Option<&PciDevice> {
        let address = parse_bdf(bdf).ok();
        self.devices
            .binary_search_by(|d| (d.address, d.bdf.as_str()).cmp(&(address, bdf)))
            .ok()
            .map(|i| &self.devices[i])
            .or_else(|| self.devices.iter().find(|d| d.bdf == bdf))
    }

    pub fn of_kind(&self, kind: DeviceKind) -> impl Iterator<Item = &PciDevice> {
        self.devices.iter().filter(move |d| d.kind == kind)
    }

    pub fn gpus(&self) -> impl Iterator<Item = &PciDevice> {
        self.of_kind(DeviceKind::Gpu)
    }

    /// RDMA NICs in the order `nvidia-smi` lists them: by RDMA device name (natural order,
    /// `mlx5_2` before `mlx5_10`), then those without an RDMA device by address.
    pub fn rdma_nics(&self) -> Vec<&PciDevice> {
        let mut nics: Vec<&PciDevice> = self.of_kind(DeviceKind::RdmaNic).collect();
        nics.sort_by(|a, b| {
            let key = |d: &PciDevice| {
                (
                    d.rdma_devices.is_empty(),
                    d.rdma_devices.first().map(|n| natural_key(n)),
                    d.address,
                )
            };
            key(a).cmp(&key(b))
        });
        nics
    }

    /// The function directly above `d` (its upstream port), when it was captured.
    pub fn parent(&self, d: &PciDevice) -> Option<&PciDevice> {
        let n = d.chain.len();
        if n < 2 {
            return None;
        }
        self.device(&d.chain[n - 2])
    }

    /// The captured bridges above `d`, nearest first.
    pub fn ancestors(&self, d: &PciDevice) -> Vec<&PciDevice> {
        d.chain
            .iter()
            .rev()
            .skip(1)
            .filter_map(|bdf| self.device(bdf))
            .collect()
    }

    /// More than one NUMA node with CPUs: locality matters.
    pub fn is_multi_numa(&self) -> bool {
        self.numa.cpu_nodes().count() > 1
    }

    /// The PCIe/NUMA class of a pair (topology.md §3, rules 2 and 3). NVLink is added by
    /// [`Matrix::build`].
    pub fn pcie_class(&self, a: &PciDevice, b: &PciDevice) -> Link {
        pcie_rule(
            a.bdf == b.bdf,
            a.host_bridge == b.host_bridge,
            &a.chain,
            &b.chain,
            (a.numa, b.numa),
        )
    }
}

/// The PCIe/NUMA class rules (topology.md §3, rules 2 and 3) over two devices' facts: whether
/// they are the same device, whether they share a host bridge, their chains from the root port
/// down (BDF strings here, interned numbers in [`Matrix`]: one rule, whatever the spelling) and
/// their NUMA nodes.
fn pcie_rule<C: PartialEq>(
    same: bool,
    same_host: bool,
    a: &[C],
    b: &[C],
    numa: (Option<u32>, Option<u32>),
) -> Link {
    if same {
        return Link::X;
    }
    if a.is_empty() || b.is_empty() {
        return Link::Unknown;
    }
    if !same_host {
        return match numa {
            (Some(x), Some(y)) if x == y => Link::Node,
            (Some(_), Some(_)) => Link::Sys,
            _ => Link::Unknown,
        };
    }
    let k = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if k == 0 {
        return Link::Phb;
    }
    // Bridge functions strictly between the common ancestor and each device.
    let below_a = a.len().saturating_sub(k + 1);
    let below_b = b.len().saturating_sub(k + 1);
    if below_a <= 1 && below_b <= 1 {
        Link::Pix
    } else {
        Link::Pxb
    }
}

/// `mlx5_10` → ("mlx5_", 10) so that names sort like `ibv_devices` lists them.
fn natural_key(name: &str) -> (String, u64, String) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = name.split_at(name.len() - digits);
    (
        head.to_string(),
        tail.parse().unwrap_or(0),
        name.to_string(),
    )
}

/// Split a resolved device path into (host bridge path, BDF chain): the chain is the run of
/// BDF components at the end; everything before it is the host bridge (`sys/devices/pci0000:17`,
/// or the whole VMBus prefix of a Hyper-V guest, topology.md §3).
pub fn split_device_path(path: &str) -> Option<(String, Vec<String>)> {
    let parts: Vec<&str> = path.split('/').collect();
    let start = parts.iter().rposition(|p| !is_bdf(p))? + 1;
    if start >= parts.len() {
        return None;
    }
    let host = parts[..start].join("/");
    let chain = parts[start..].iter().map(|s| (*s).to_string()).collect();
    Some((host, chain))
}

/// Kind from class and vendor alone (bridges are refined by their place in the tree).
pub fn kind_of(vendor: Option<u16>, class: Option<u32>, has_rdma: bool) -> DeviceKind {
    let Some(class) = class else {
        return DeviceKind::Other;
    };
    let nvidia = vendor == Some(VENDOR_NVIDIA);
    match class >> 8 {
        0x0300 if nvidia => DeviceKind::Gpu,
        0x0302 if nvidia || vendor.is_none() => DeviceKind::Gpu,
        0x0680 if nvidia => DeviceKind::NvSwitch,
        0x0207 | 0x0c06 => DeviceKind::RdmaNic,
        0x0604 => DeviceKind::PciBridge,
        _ if class >> 16 == 0x02 => {
            if has_rdma {
                DeviceKind::RdmaNic
            } else {
                DeviceKind::Nic
            }
        }
        _ => DeviceKind::Other,
    }
}

/// Read the whole tree. `Err` only when `/sys/bus/pci/devices` itself cannot be listed.
pub fn gather(source: &dyn Source) -> Result<Topology, FactError> {
    gather_with(source, None)
}

/// [`gather`], taking each function's vendor, device, class and driver from PCI facts already
/// read (the driver layer's), so a `check` reads those files once, not twice. Functions the PCI
/// facts lack (unreadable there) are read here as usual.
pub fn gather_with(source: &dyn Source, known: Option<&PciFacts>) -> Result<Topology, FactError> {
    let known: BTreeMap<&str, Known> = known
        .map(|pci| {
            let full = pci
                .functions
                .iter()
                .map(|f| (f.bdf.as_str(), Known::Read(f)));
            let class_only = pci
                .unjudged
                .iter()
                .map(|f| (f.bdf.as_str(), Known::ClassOnly(f.class)));
            full.chain(class_only).collect()
        })
        .unwrap_or_default();
    let names = source.list_dir(PCI_DEVICES, &|n| is_bdf(n))?;
    let mut topo = Topology {
        numa: numa::gather(source),
        ..Topology::default()
    };
    let rdma = rdma_devices_by_function(source, &mut topo.problems);
    for name in names {
        let known = known.get(name.as_str()).copied();
        if let Some(device) = read_device(source, &name, known, &rdma, &mut topo.problems) {
            topo.devices.push(device);
        }
    }
    topo.devices
        .sort_by(|a, b| (a.address, &a.bdf).cmp(&(b.address, &b.bdf)));
    refine_bridges(&mut topo.devices);
    resolve_numa(&mut topo);
    Ok(topo)
}

/// `/sys/class/infiniband/<dev>` → the PCI function it hangs under (`…/<bdf>/infiniband/<dev>`).
/// Devices outside the PCI tree (`scif0 -> devices/scif_dma_0/…`) or whose link dangles are
/// skipped with a note (sysfs.md §6, §13.1).
fn rdma_devices_by_function(
    source: &dyn Source,
    problems: &mut Vec<FactError>,
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let names = match source.list_dir(CLASS_INFINIBAND, &|_| true) {
        Ok(names) => names,
        Err(err) if err.is_missing() => return out,
        Err(err) => {
            problems.push(err.into());
            return out;
        }
    };
    for name in names {
        let link = join(CLASS_INFINIBAND, &name);
        match source.canonical(&link) {
            Ok(path) => {
                let parts: Vec<&str> = path.split('/').collect();
                let function = parts
                    .iter()
                    .rposition(|p| *p == "infiniband")
                    .and_then(|i| i.checked_sub(1))
                    .map(|i| parts[i])
                    .filter(|p| is_bdf(p));
                match function {
                    Some(bdf) => out.entry(bdf.to_string()).or_default().push(name),
                    None => problems.push(FactError {
                        path: link,
                        message: format!("not under a pci function ({path}); skipped"),
                    }),
                }
            }
            Err(err) => problems.push(err.into()),
        }
    }
    for names in out.values_mut() {
        names.sort_by_key(|n| natural_key(n));
    }
    out
}

/// What the PCI facts already say of a function.
#[derive(Clone, Copy)]
enum Known<'a> {
    Read(&'a PciFunction),
    /// A class nothing judges ([`crate::facts::pci::is_judged_class`]): vendor, device and driver
    /// were not read.
    ClassOnly(u32),
}

/// One function, read leniently. `None` (with a note) only when its link cannot be resolved.
fn read_device(
    source: &dyn Source,
    bdf: &str,
    known: Option<Known>,
    rdma: &BTreeMap<String, Vec<String>>,
    problems: &mut Vec<FactError>,
) -> Option<PciDevice> {
    let dir = join(PCI_DEVICES, bdf);
    let path = match source.canonical(&dir) {
        Ok(path) => path,
        Err(err) => {
            problems.push(err.into());
            return None;
        }
    };
    let (host_bridge, chain) = match split_device_path(&path) {
        Some(split) => split,
        None => {
            problems.push(FactError {
                path: dir,
                message: format!("resolves to {path}, not a pci device path"),
            });
            (String::new(), Vec::new())
        }
    };
    let attr = |name: &str, problems: &mut Vec<FactError>| -> Option<(String, String)> {
        let file = join(&path, name);
        match source.read_to_string(&file) {
            Ok(text) => Some((file, text)),
            // EINVAL on `current_link_speed` when the capability cannot be read is "unknown"
            // (sysfs.md §1), like an absent file.
            Err(err) if err.is_missing() => None,
            Err(err) => {
                problems.push(err.into());
                None
            }
        }
    };
    // `class`, `vendor`, `device` exist for every function the kernel lists, and `numa_node`
    // for every one on a NUMA kernel: absent, they are not read (a partial capture), never
    // "not a NIC" or "no proximity" (DESIGN.md "Missing is not absent").
    let required = |name: &str, problems: &mut Vec<FactError>| -> Option<(String, String)> {
        let file = join(&path, name);
        match source.read_to_string(&file) {
            Ok(text) => Some((file, text)),
            Err(err) if err.is_missing() => {
                if !matches!(err, crate::source::FsError::Dangling { .. }) {
                    problems.push(FactError::missing(&file, super::pci::KERNEL_PCI_SYSFS));
                }
                None
            }
            Err(err) => {
                problems.push(err.into());
                None
            }
        }
    };
    let u16_of = |t: Option<(String, String)>, problems: &mut Vec<FactError>| -> Option<u16> {
        let (file, text) = t?;
        let v = noted(&file, parse_hex(&text), problems)?;
        noted(
            &file,
            u16::try_from(v).map_err(|_| ParseError::new(format!("{v:#x} is wider than 16 bits"))),
            problems,
        )
    };
    let (vendor, device, class) = match known {
        Some(Known::Read(f)) => (Some(f.vendor), Some(f.device), Some(f.class)),
        Some(Known::ClassOnly(class)) => (None, None, Some(class)),
        None => {
            // Class first: vendor and device matter only for a class some layer judges.
            let class =
                required("class", problems).and_then(|(f, t)| noted(&f, parse_hex(&t), problems));
            if class.is_some_and(is_judged_class) {
                let vendor_text = required("vendor", problems);
                let vendor = u16_of(vendor_text, problems);
                let device_text = required("device", problems);
                let device = u16_of(device_text, problems);
                (vendor, device, class)
            } else {
                (None, None, class)
            }
        }
    };
    let rdma_devices = rdma.get(bdf).cloned().unwrap_or_default();
    let kind = kind_of(vendor, class, !rdma_devices.is_empty());
    // Nothing judges a function that is neither a GPU, an NVSwitch, a NIC nor a bridge (an NVMe
    // drive, the uncore's hundreds of system functions): its placement, links and counters are
    // not read. On a 2000-function node that is most of the tree (docs/performance.md).
    let judged = kind != DeviceKind::Other;
    let numa_text = if judged {
        required("numa_node", &mut *problems)
    } else {
        None
    };
    let mut read = |name: &str| {
        if judged {
            attr(name, &mut *problems)
        } else {
            None
        }
    };
    let cpulist_text = read("local_cpulist");
    let cpumask_text = if cpulist_text.is_none() {
        read("local_cpus")
    } else {
        None
    };
    let speeds = [read("current_link_speed"), read("max_link_speed")];
    let widths = [read("current_link_width"), read("max_link_width")];
    let aer_files = [
        read("aer_dev_correctable"),
        read("aer_dev_fatal"),
        read("aer_dev_nonfatal"),
    ];
    // The kernel makes `aer_rootport_total_err_*` visible on root ports alone
    // (drivers/pci/pcie/aer.c `aer_stats_attrs_are_visible`: PCI_EXP_TYPE_ROOT_PORT, and RCECs,
    // which are not judged): a bridge on a root bus. Not asked of anything else, where it can
    // only be missing (a lookup each, issue 41).
    let root_port = kind == DeviceKind::PciBridge && chain.len() == 1;
    let rootport_files = if root_port {
        [
            read("aer_rootport_total_err_cor"),
            read("aer_rootport_total_err_fatal"),
            read("aer_rootport_total_err_nonfatal"),
        ]
    } else {
        [None, None, None]
    };

    let numa_node_file = numa_text.and_then(|(f, t)| {
        noted(
            &f,
            trimmed(&t)
                .parse::<i64>()
                .map_err(|_| ParseError::new(format!("not an integer: {:?}", trimmed(&t)))),
            problems,
        )
    });
    let local_cpus = match (cpulist_text, cpumask_text) {
        (Some((f, t)), _) => noted(&f, parse_cpulist(&t), problems),
        (None, Some((f, t))) => noted(&f, parse_cpumask(&t), problems),
        (None, None) => None,
    };
    let [cur_speed, max_speed] = speeds.map(|t| {
        t.and_then(|(f, text)| noted(&f, parse_link_speed(&text), problems))
            .flatten()
    });
    let [cur_width, max_width] =
        widths.map(|t| t.and_then(|(f, text)| noted(&f, parse_link_width(&text), problems)));
    let [correctable, fatal, nonfatal] =
        aer_files.map(|t| t.and_then(|(f, text)| noted(&f, parse_aer(&text), problems)));
    let rootport_values = rootport_files.map(|t| {
        t.and_then(|(f, text)| {
            noted(
                &f,
                trimmed(&text)
                    .parse::<u64>()
                    .map_err(|_| ParseError::new(format!("not a count: {:?}", trimmed(&text)))),
                problems,
            )
        })
    });
    let rootport = rootport_values
        .iter()
        .any(Option::is_some)
        .then_some(RootPortAer {
            correctable: rootport_values[0],
            fatal: rootport_values[1],
            nonfatal: rootport_values[2],
        });
    let driver = match known {
        Some(Known::Read(f)) => f.driver.clone(),
        Some(Known::ClassOnly(_)) => None,
        None if !judged => None,
        None => source
            .read_link(&join(&path, "driver"))
            .ok()
            .and_then(|target| target.rsplit('/').next().map(str::to_string))
            .filter(|name| !name.is_empty()),
    };
    // No `net/` (not a network function, or no netdev bound) is simply none. Only a network
    // function has one (a netdev's parent is its NIC's function): GPUs, NVSwitches and bridges
    // are not asked.
    let netdevs: Vec<String> = if matches!(kind, DeviceKind::Nic | DeviceKind::RdmaNic) {
        source
            .list_dir(&join(&path, "net"), &|_| true)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Some(PciDevice {
        bdf: bdf.to_string(),
        address: parse_bdf(bdf).ok(),
        path,
        host_bridge,
        chain,
        vendor,
        device,
        class,
        kind,
        driver,
        numa_node_file,
        numa: None,
        numa_source: NumaSource::Unknown,
        cpulist_node: None,
        local_cpus,
        link: PcieLink {
            current_speed: cur_speed,
            max_speed,
            current_width: cur_width,
            max_width,
        },
        aer: Aer {
            correctable,
            fatal,
            nonfatal,
            rootport,
        },
        rdma_devices,
        netdevs,
    })
}

/// Name bridges by their place: first in the chain = root port; a bridge under a root port or a
/// downstream port with bridges below it = switch upstream port; a bridge under an upstream
/// port = downstream port (PCIe switches present one upstream and N downstream ports, sysfs.md
/// §6). Anything else stays a plain PCI bridge.
fn refine_bridges(devices: &mut [PciDevice]) {
    let bridges: BTreeSet<String> = devices
        .iter()
        .filter(|d| d.kind == DeviceKind::PciBridge)
        .map(|d| d.bdf.clone())
        .collect();
    let has_bridge_child: BTreeSet<String> = devices
        .iter()
        .filter(|d| bridges.contains(&d.bdf))
        .filter_map(|d| {
            let n = d.chain.len();
            (n >= 2).then(|| d.chain[n - 2].clone())
        })
        .collect();
    // Walk top-down (shorter chains first) so a parent's role is known before its children's.
    let mut order: Vec<usize> = (0..devices.len()).collect();
    order.sort_by_key(|&i| devices[i].chain.len());
    let mut roles: BTreeMap<String, DeviceKind> = BTreeMap::new();
    for i in order {
        let d = &devices[i];
        if d.kind != DeviceKind::PciBridge || d.chain.is_empty() {
            continue;
        }
        let n = d.chain.len();
        let parent_role = (n >= 2)
            .then(|| roles.get(&d.chain[n - 2]).copied())
            .flatten();
        let role = if n == 1 {
            DeviceKind::RootPort
        } else {
            match parent_role {
                Some(DeviceKind::SwitchUpstream) => DeviceKind::SwitchDownstream,
                Some(DeviceKind::RootPort) | Some(DeviceKind::SwitchDownstream) | None
                    if has_bridge_child.contains(&d.bdf) =>
                {
                    DeviceKind::SwitchUpstream
                }
                _ => DeviceKind::PciBridge,
            }
        };
        roles.insert(d.bdf.clone(), role);
    }
    for d in devices.iter_mut() {
        if let Some(role) = roles.get(&d.bdf) {
            d.kind = *role;
        }
    }
}

/// Each device's NUMA node: `numa_node`, else the node `local_cpulist` lies in, else the only
/// node (topology.md §3 step 4).
fn resolve_numa(topo: &mut Topology) {
    let cpu_nodes: Vec<u32> = topo.numa.cpu_nodes().map(|n| n.id).collect();
    for d in &mut topo.devices {
        if d.kind == DeviceKind::Other {
            // read_device skipped its placement files; say so rather than "unknown".
            (d.numa, d.numa_source) = (None, NumaSource::NotRead);
            continue;
        }
        d.cpulist_node = d
            .local_cpus
            .as_ref()
            .and_then(|cpus| topo.numa.node_of_cpus(cpus));
        let from_file = d
            .numa_node_file
            .and_then(|v| parse_numa_node(&v.to_string()).ok().flatten());
        (d.numa, d.numa_source) = if let Some(n) = from_file {
            (Some(n), NumaSource::NumaNode)
        } else if let Some(n) = d.cpulist_node {
            (Some(n), NumaSource::LocalCpulist)
        } else if cpu_nodes.len() == 1 {
            (Some(cpu_nodes[0]), NumaSource::SingleNode)
        } else if topo.numa.nodes.is_empty() {
            // No node directory at all: a kernel without NUMA is one node, node 0.
            (Some(0), NumaSource::SingleNode)
        } else {
            (None, NumaSource::Unknown)
        };
    }
}

/// The function's `config` file (`sys/bus/pci/devices/<bdf>/config`) and what it says about ACS.
/// `Ok(None)` when there is no `config` file (a trimmed capture).
pub fn read_acs(
    source: &dyn Source,
    device: &PciDevice,
) -> (String, Result<Option<AcsReading>, FactError>) {
    let path = format!("{PCI_DEVICES}/{}/config", device.bdf);
    let result = match source.read_bytes(&path) {
        Ok(bytes) => parse_acs(&bytes)
            .map(Some)
            .map_err(|e| FactError::parse(&path, e)),
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(err.into()),
    };
    (path, result)
}

pub const PROC_CPUINFO: &str = "proc/cpuinfo";

/// Whether the CPU flags carry `hypervisor` (x86 `X86_FEATURE_HYPERVISOR`, set when running
/// under a hypervisor, `arch/x86/include/asm/cpufeatures.h`). `None` when `/proc/cpuinfo` is not
/// there (a capture that did not record it) or has no `flags` line (non-x86).
pub fn hypervisor(source: &dyn Source) -> Option<bool> {
    let text = source.read_to_string(PROC_CPUINFO).ok()?;
    parse_hypervisor_flag(&text)
}

/// The first CPU's `flags` in `/proc/cpuinfo`: does it list `hypervisor`? Parsed by
/// procfs-core's `CpuInfo` (`FromBufRead`) from the bytes the rooted reader read.
pub fn parse_hypervisor_flag(text: &str) -> Option<bool> {
    use procfs_core::FromBufRead as _;
    let info = procfs_core::CpuInfo::from_buf_read(text.as_bytes()).ok()?;
    info.get_field(0, "flags")
        .map(|flags| flags.split_ascii_whitespace().any(|f| f == "hypervisor"))
}
