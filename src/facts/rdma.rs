//! RDMA devices from `/sys/class/infiniband/<dev>` and the netdevs behind their ports
//! (reference/sysfs.md §8–§9): PCI function, firmware, node GUID, and per port the state,
//! physical state, rate, link layer, error counters, RoCE GID types and netdevs.
//!
//! Values a port cannot give (an `EINVAL` GID slot, a counter the driver hides) are `None`, never
//! zero; one unreadable port never hides the others.

use std::collections::BTreeMap;

use super::pci::{is_bdf, short};
use super::{join, trimmed};
use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const CLASS_INFINIBAND: &str = "sys/class/infiniband";
pub const CLASS_NET: &str = "sys/class/net";

/// The PMA error counters gpudoctor judges (sysfs.md §8 `counters/`).
pub const ERROR_COUNTERS: &[&str] = &[
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "excessive_buffer_overrun_errors",
    "local_link_integrity_errors",
];

/// Width in bits of each PMA error counter: the kernel reads them from PortCounters, where they
/// saturate instead of wrapping (`drivers/infiniband/core/sysfs.c` `PORT_PMA_ATTR`, IBTA
/// PortCounters). A counter at its maximum has stopped counting.
pub const ERROR_COUNTER_BITS: &[(&str, u32)] = &[
    ("symbol_error", 16),
    ("link_downed", 8),
    ("link_error_recovery", 8),
    ("port_rcv_errors", 16),
    ("excessive_buffer_overrun_errors", 4),
    ("local_link_integrity_errors", 4),
];

/// Driver counters under `ports/<n>/hw_counters/` that count trouble (mlx5 names, sysfs.md
/// §8): drops for lack of receive buffers, out-of-order and sequence errors, retransmission
/// timeouts and RNR retries, RoCE adaptive retransmission and slow restarts. They rise a little
/// under load, so they are read only for a `--sample` window (and judged by their rate); on some
/// restricted PFs reading them floods dmesg (leptonai/gpud#1164), another reason not to read
/// them on every run.
pub const HW_ERROR_COUNTERS: &[&str] = &[
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "roce_adp_retrans",
    "roce_slow_restart",
];

#[derive(Debug, Clone, PartialEq)]
pub struct RdmaDevice {
    /// `mlx5_0`, `mlx5_bond_0`, `mlx5_ib0`.
    pub name: String,
    /// The PCI function the device hangs under; `None` for virtual devices (rxe, siw).
    pub pci: Option<String>,
    pub fw_ver: Option<String>,
    pub node_guid: Option<String>,
    pub hca_type: Option<String>,
    pub ports: Vec<RdmaPort>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RdmaPort {
    pub port: u32,
    /// `ports/<n>/state`: (number, name), e.g. (4, "ACTIVE").
    pub state: Option<(u32, String)>,
    pub phys_state: Option<(u32, String)>,
    /// Rate in Gb/s (`400 Gb/sec (4X NDR)` → 400.0) and the text as read.
    pub rate_gbps: Option<f64>,
    pub rate_text: Option<String>,
    /// `InfiniBand`, `Ethernet` (RoCE) or `Unknown`.
    pub link_layer: Option<String>,
    /// Error counters that could be read, by name.
    pub counters: BTreeMap<String, u64>,
    /// [`HW_ERROR_COUNTERS`] that could be read (only when asked for: a `--sample` run).
    pub hw_counters: BTreeMap<String, u64>,
    /// RoCE GID types present (`RoCE v2`, `IB/RoCE v1`) for Ethernet ports.
    pub gid_types: Vec<String>,
    /// The netdev behind the port: RoCE `gid_attrs/ndevs/*`, or IPoIB under the PCI function.
    pub netdev: Option<Netdev>,
    /// Files of this port that exist but could not be read or parsed.
    pub problems: Vec<FactError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netdev {
    pub name: String,
    pub operstate: Option<String>,
    pub mtu: Option<u32>,
}

impl RdmaPort {
    /// Healthy link: `4: ACTIVE` and `5: LinkUp` (sysfs.md §8).
    pub fn is_up(&self) -> bool {
        self.state.as_ref().is_some_and(|(n, _)| *n == 4)
            && self.phys_state.as_ref().is_some_and(|(n, _)| *n == 5)
    }

    pub fn is_roce(&self) -> bool {
        self.link_layer.as_deref() == Some("Ethernet")
    }
}

/// All RDMA devices plus what could not be read at the device level.
#[derive(Debug, Clone, Default)]
pub struct RdmaFacts {
    pub devices: Vec<RdmaDevice>,
    pub problems: Vec<FactError>,
    /// `/sys/class/infiniband` exists at all (the RDMA core is loaded).
    pub class_present: bool,
}

/// `4: ACTIVE` → (4, "ACTIVE"); `5: LinkUp`; unknown names are kept as printed.
pub fn parse_numbered(text: &str) -> Result<(u32, String), ParseError> {
    let t = trimmed(text);
    let (num, name) = t
        .split_once(':')
        .ok_or_else(|| ParseError::new(format!("expected `<n>: <name>`, got {:?}", short(t))))?;
    let num = num
        .trim()
        .parse()
        .map_err(|_| ParseError::new(format!("not a number before `:` in {:?}", short(t))))?;
    Ok((num, name.trim().to_string()))
}

/// `400 Gb/sec (4X NDR)`, `2.5 Gb/sec (1X SDR)`, `56 Gb/sec (4X FDR)` → Gb/s. Compared
/// numerically: an exact string match would also fail faster links (sysfs.md §8, LBNL NHC).
pub fn parse_rate(text: &str) -> Result<f64, ParseError> {
    let t = trimmed(text);
    let number = t.split_whitespace().next().unwrap_or_default();
    let value: f64 = number
        .parse()
        .map_err(|_| ParseError::new(format!("no leading rate number in {:?}", short(t))))?;
    if !value.is_finite() || value < 0.0 || !t.contains("Gb/sec") {
        return Err(ParseError::new(format!(
            "not a `<n> Gb/sec` rate: {:?}",
            short(t)
        )));
    }
    Ok(value)
}

/// A counter: decimal `u64`. Values past `u64` (a wrapped 64-bit read) are errors, not zero.
pub fn parse_counter(text: &str) -> Result<u64, ParseError> {
    let t = trimmed(text);
    t.parse()
        .map_err(|_| ParseError::new(format!("not a 64-bit counter: {:?}", short(t))))
}

/// The IB core's port attributes (`state`, `phys_state`, `rate`) and the device's `ports/`
/// are as old as its sysfs (Linux 2.6.11, `drivers/infiniband/core/sysfs.c`).
pub const KERNEL_IB_SYSFS: &str = "2.6.11";
/// `ports/<n>/link_layer` came with RoCE (IBoE) in Linux 2.6.37.
pub const KERNEL_LINK_LAYER: &str = "2.6.37";
/// `ports/<n>/gid_attrs/{types,ndevs}` came with RoCE v2 GID attributes in Linux 4.5.
pub const KERNEL_GID_ATTRS: &str = "4.5";
/// A netdev's `operstate` (RFC 2863 state) exists since Linux 2.6.17.
pub const KERNEL_OPERSTATE: &str = "2.6.17";

/// A file every supported kernel provides: absent, it is not read ([`FactError::missing`],
/// DESIGN.md "Missing is not absent"), a problem the checks name instead of judging the port
/// as if the hardware lacked it.
fn read_required(
    source: &dyn Source,
    path: &str,
    since: &str,
    problems: &mut Vec<FactError>,
) -> Option<String> {
    match source.read_to_string(path) {
        Ok(text) => Some(trimmed(&text).to_string()),
        Err(err) if err.is_missing() => {
            problems.push(FactError::missing(path, since));
            None
        }
        Err(err) => {
            problems.push(err.into());
            None
        }
    }
}

fn parse_required<T>(
    source: &dyn Source,
    path: &str,
    since: &str,
    parse: fn(&str) -> Result<T, ParseError>,
    problems: &mut Vec<FactError>,
) -> Option<T> {
    let text = read_required(source, path, since, problems)?;
    match parse(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(FactError::parse(path, e));
            None
        }
    }
}

fn read_opt(source: &dyn Source, path: &str, problems: &mut Vec<FactError>) -> Option<String> {
    match source.read_to_string(path) {
        Ok(text) => Some(trimmed(&text).to_string()),
        Err(err) if err.is_missing() => None,
        Err(err) => {
            problems.push(err.into());
            None
        }
    }
}

fn parse_opt<T>(
    source: &dyn Source,
    path: &str,
    parse: fn(&str) -> Result<T, ParseError>,
    problems: &mut Vec<FactError>,
) -> Option<T> {
    let text = read_opt(source, path, problems)?;
    match parse(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(FactError::parse(path, e));
            None
        }
    }
}

fn netdev(source: &dyn Source, name: &str, problems: &mut Vec<FactError>) -> Netdev {
    let dir = join(CLASS_NET, name);
    Netdev {
        name: name.to_string(),
        operstate: read_required(source, &join(&dir, "operstate"), KERNEL_OPERSTATE, problems),
        mtu: parse_opt(
            source,
            &join(&dir, "mtu"),
            |t| {
                t.parse::<u32>()
                    .map_err(|_| ParseError::new("mtu is not a number"))
            },
            problems,
        ),
    }
}

fn read_port(
    source: &dyn Source,
    dev_dir: &str,
    pci: Option<&str>,
    port: u32,
    hw: bool,
) -> RdmaPort {
    let dir = format!("{dev_dir}/ports/{port}");
    let mut problems = Vec::new();
    let state = parse_required(
        source,
        &join(&dir, "state"),
        KERNEL_IB_SYSFS,
        parse_numbered,
        &mut problems,
    );
    let phys_state = parse_required(
        source,
        &join(&dir, "phys_state"),
        KERNEL_IB_SYSFS,
        parse_numbered,
        &mut problems,
    );
    let rate_text = read_required(source, &join(&dir, "rate"), KERNEL_IB_SYSFS, &mut problems);
    let rate_gbps = rate_text.as_deref().and_then(|t| match parse_rate(t) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(FactError::parse(&join(&dir, "rate"), e));
            None
        }
    });
    let link_layer = read_required(
        source,
        &join(&dir, "link_layer"),
        KERNEL_LINK_LAYER,
        &mut problems,
    );
    let mut counters = BTreeMap::new();
    for name in ERROR_COUNTERS {
        if let Some(v) = parse_opt(
            source,
            &format!("{dir}/counters/{name}"),
            parse_counter,
            &mut problems,
        ) {
            counters.insert(name.to_string(), v);
        }
    }
    let mut hw_counters = BTreeMap::new();
    if hw {
        for name in HW_ERROR_COUNTERS {
            if let Some(v) = parse_opt(
                source,
                &format!("{dir}/hw_counters/{name}"),
                parse_counter,
                &mut problems,
            ) {
                hw_counters.insert(name.to_string(), v);
            }
        }
    }
    // RoCE: GID types and netdevs per GID index. Empty slots read EINVAL by design (sysfs.md
    // §8): an unreadable slot is simply empty, not a problem.
    let mut gid_types = Vec::new();
    let mut roce_netdev = None;
    if link_layer.as_deref() == Some("Ethernet") {
        let types_dir = format!("{dir}/gid_attrs/types");
        let indexes = match source.list_dir(&types_dir, &|n| n.parse::<u32>().is_ok()) {
            Ok(indexes) => indexes,
            // Without the GID table nothing says which GIDs or netdev the port has: not read,
            // never "no RoCE v2 GID" (an H100 tree without gid_attrs/ was failed for that).
            Err(err) if err.is_missing() => {
                problems.push(FactError::missing(&types_dir, KERNEL_GID_ATTRS));
                Vec::new()
            }
            Err(err) => {
                problems.push(err.into());
                Vec::new()
            }
        };
        let ndevs_dir = format!("{dir}/gid_attrs/ndevs");
        if !indexes.is_empty() && !source.exists(&ndevs_dir) {
            problems.push(FactError::missing(&ndevs_dir, KERNEL_GID_ATTRS));
        }
        for index in indexes {
            if let Ok(t) = source.read_to_string(&join(&types_dir, &index)) {
                let t = trimmed(&t).to_string();
                if !t.is_empty() && !gid_types.contains(&t) {
                    gid_types.push(t);
                }
            }
            let ndev_path = format!("{dir}/gid_attrs/ndevs/{index}");
            if roce_netdev.is_none()
                && let Ok(nd) = source.read_to_string(&ndev_path)
            {
                let nd = trimmed(&nd).to_string();
                if nd.is_empty() {
                } else if source.exists(&join(CLASS_NET, &nd)) {
                    roce_netdev = Some(nd);
                } else {
                    // A name the kernel printed is a netdev that exists; one that does not is
                    // a damaged read (or a rename in between), named where it was read.
                    problems.push(FactError {
                        path: ndev_path,
                        message: format!("names netdev {nd:?}, which is not in {CLASS_NET}"),
                    });
                }
            }
        }
    }
    // IPoIB (and RoCE without gid_attrs on old kernels): the netdev under the PCI function.
    let name = roce_netdev.or_else(|| {
        let pci = pci?;
        let devices = format!("sys/bus/pci/devices/{pci}/net");
        source.read_dir(&devices).ok()?.into_iter().next()
    });
    let netdev = name.map(|n| netdev(source, &n, &mut problems));
    RdmaPort {
        port,
        state,
        phys_state,
        rate_gbps,
        rate_text,
        link_layer,
        counters,
        hw_counters,
        gid_types,
        netdev,
        problems,
    }
}

/// Every RDMA device under `/sys/class/infiniband`. A missing class directory is an empty set
/// (no RDMA core loaded), not an error.
pub fn gather(source: &dyn Source) -> Result<RdmaFacts, FactError> {
    gather_with(source, false)
}

/// [`gather`], also reading each port's [`HW_ERROR_COUNTERS`] when `hw` (a `--sample` run).
pub fn gather_with(source: &dyn Source, hw: bool) -> Result<RdmaFacts, FactError> {
    let names = match source.read_dir(CLASS_INFINIBAND) {
        Ok(names) => names,
        Err(err) if err.is_missing() => return Ok(RdmaFacts::default()),
        Err(err) => return Err(err.into()),
    };
    let mut facts = RdmaFacts {
        class_present: true,
        ..RdmaFacts::default()
    };
    for name in names {
        let dir = join(CLASS_INFINIBAND, &name);
        // The class entry resolves into `…/<bdf>/infiniband/<name>`; the BDF is the component
        // before `infiniband` (sysfs.md §6). Virtual devices have none.
        let pci = match source.canonical(&dir) {
            Ok(path) => {
                let parts: Vec<&str> = path.split('/').collect();
                parts
                    .iter()
                    .rposition(|p| *p == "infiniband")
                    .and_then(|i| i.checked_sub(1))
                    .map(|i| parts[i])
                    .filter(|p| is_bdf(p))
                    .map(str::to_string)
            }
            Err(err) => {
                facts.problems.push(err.into());
                continue;
            }
        };
        let mut problems = Vec::new();
        let ports_dir = join(&dir, "ports");
        let ports_list = match source.list_dir(&ports_dir, &|n| n.parse::<u32>().is_ok()) {
            Ok(list) => list,
            Err(err) if err.is_missing() => {
                problems.push(FactError::missing(&ports_dir, KERNEL_IB_SYSFS));
                Vec::new()
            }
            Err(err) => {
                problems.push(err.into());
                Vec::new()
            }
        };
        let mut port_numbers: Vec<u32> = ports_list.iter().filter_map(|p| p.parse().ok()).collect();
        port_numbers.sort_unstable();
        let device = RdmaDevice {
            name: name.clone(),
            pci: pci.clone(),
            fw_ver: read_opt(source, &join(&dir, "fw_ver"), &mut problems),
            node_guid: read_opt(source, &join(&dir, "node_guid"), &mut problems),
            hca_type: read_opt(source, &join(&dir, "hca_type"), &mut problems),
            ports: port_numbers
                .into_iter()
                .map(|p| read_port(source, &dir, pci.as_deref(), p, hw))
                .collect(),
        };
        facts.problems.extend(problems);
        facts.devices.push(device);
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_and_rate_strings() {
        assert_eq!(parse_numbered("4: ACTIVE\n").unwrap(), (4, "ACTIVE".into()));
        assert_eq!(parse_numbered("5: LinkUp\n").unwrap(), (5, "LinkUp".into()));
        assert_eq!(parse_numbered("2: Polling").unwrap(), (2, "Polling".into()));
        assert_eq!(
            parse_numbered("9: SomethingNew").unwrap(),
            (9, "SomethingNew".into())
        );
        assert!(parse_numbered("ACTIVE").is_err());
        assert!(parse_numbered("x: ACTIVE").is_err());
        assert_eq!(parse_rate("400 Gb/sec (4X NDR)\n").unwrap(), 400.0);
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)").unwrap(), 2.5);
        assert_eq!(parse_rate("56 Gb/sec (4X FDR)").unwrap(), 56.0);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("400 Mb/sec").is_err());
        assert!(parse_rate("NaN Gb/sec").is_err());
    }

    #[test]
    fn counters_do_not_wrap_silently() {
        assert_eq!(parse_counter("0\n").unwrap(), 0);
        assert_eq!(parse_counter("18446744073709551615").unwrap(), u64::MAX);
        assert!(parse_counter("18446744073709551616").is_err());
        assert!(parse_counter("-1").is_err());
    }
}
