//! PCI functions from `/sys/bus/pci/devices/<DDDD:BB:DD.F>/` (reference/sysfs.md §2).
//!
//! Only the attributes the driver checks need are gathered here; the topology layer
//! (`facts/topology.rs`) reads the rest leniently with the parsers below: PCI addresses of any
//! domain width, PCIe link speed and width in old and new kernel spellings (sysfs.md §3) and AER
//! counters in both name layouts (sysfs.md §5). An unreadable attribute of one function is
//! recorded as a problem and the walk goes on: one damaged function must not hide the other 300.

use serde::Serialize;

use super::{join, trimmed};

use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const PCI_DEVICES: &str = "sys/bus/pci/devices";

/// The PCI sysfs attributes read here (`vendor`, `device`, `class`, `numa_node`) are as old as
/// sysfs itself (Linux 2.6, `drivers/pci/pci-sysfs.c`): "older than" this in a missing-input
/// error.
pub const KERNEL_PCI_SYSFS: &str = "2.6";

/// NVIDIA's PCI vendor id.
pub const VENDOR_NVIDIA: u16 = 0x10de;
/// Mellanox / NVIDIA networking (ConnectX, BlueField).
pub const VENDOR_MELLANOX: u16 = 0x15b3;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PciFunction {
    /// `0000:18:00.0`, as named in `/sys/bus/pci/devices`.
    pub bdf: String,
    pub vendor: u16,
    pub device: u16,
    /// 24-bit class code: base class, subclass, prog-if.
    pub class: u32,
    /// `numa_node`; `None` when the file says -1 (no firmware proximity) or is absent.
    pub numa_node: Option<u32>,
    /// Basename of the `driver` link (`nvidia`, `nouveau`, `mlx5_core`), `None` when unbound.
    pub driver: Option<String>,
}

impl PciFunction {
    /// A GPU by class: VGA-compatible (`0x0300`) or 3D controller (`0x0302`) (sysfs.md §2).
    pub fn is_display(&self) -> bool {
        matches!(self.class >> 8, 0x0300 | 0x0302)
    }

    pub fn is_nvidia_gpu(&self) -> bool {
        self.vendor == VENDOR_NVIDIA && self.is_display()
    }
}

/// Whether any layer judges a function of this class: displays and 3D controllers (GPUs),
/// network controllers (NICs, InfiniBand HCAs), bridges (root and switch ports, NVSwitches are
/// `0x0680`) and InfiniBand on the serial-bus class (`0x0c06`). Everything else — NVMe drives,
/// the uncore's hundreds of system functions — is counted, not read (docs/performance.md).
pub fn is_judged_class(class: u32) -> bool {
    matches!(class >> 16, 0x02 | 0x03 | 0x06) || class >> 8 == 0x0c06
}

/// A function of a class nothing judges ([`is_judged_class`]): only its `class` was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnjudgedFunction {
    pub bdf: String,
    pub class: u32,
}

/// All PCI functions, plus the attributes that could not be read.
#[derive(Debug, Clone, Default)]
pub struct PciFacts {
    /// Functions of a judged class, every attribute read.
    pub functions: Vec<PciFunction>,
    /// Functions of other classes, only `class` read.
    pub unjudged: Vec<UnjudgedFunction>,
    pub problems: Vec<FactError>,
    /// Judged functions whose `numa_node` is not there ([`FactError::missing`]): their
    /// `numa_node` is `None` for want of the file, not because the firmware said -1.
    pub numa_missing: Vec<FactError>,
}

impl PciFacts {
    pub fn nvidia_gpus(&self) -> impl Iterator<Item = &PciFunction> {
        self.functions.iter().filter(|f| f.is_nvidia_gpu())
    }

    /// Every function looked at: read in full, or by class only.
    pub fn count(&self) -> usize {
        self.functions.len() + self.unjudged.len()
    }
}

enum Read {
    Judged(PciFunction),
    Unjudged(UnjudgedFunction),
}

/// `0x10de` → 0x10de. Kernel format is `0x%04x` for ids and `0x%06x` for class.
pub fn parse_hex(text: &str) -> Result<u32, ParseError> {
    let t = trimmed(text);
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .ok_or_else(|| ParseError::new(format!("expected 0x-prefixed hex, got {:?}", short(t))))?;
    u32::from_str_radix(digits, 16).map_err(|_| ParseError::new(format!("not hex: {:?}", short(t))))
}

fn parse_hex_u16(text: &str) -> Result<u16, ParseError> {
    let v = parse_hex(text)?;
    u16::try_from(v).map_err(|_| ParseError::new(format!("{v:#x} is wider than 16 bits")))
}

/// `numa_node`: a node id, or `-1` for "firmware gave no proximity" → `None`.
pub fn parse_numa_node(text: &str) -> Result<Option<u32>, ParseError> {
    let t = trimmed(text);
    let v: i64 = t
        .parse()
        .map_err(|_| ParseError::new(format!("not an integer: {:?}", short(t))))?;
    match v {
        -1 => Ok(None),
        0..=65535 => Ok(Some(v as u32)),
        _ => Err(ParseError::new(format!("numa node {v} out of range"))),
    }
}

/// A name is a PCI address when it looks like `DDDD:BB:DD.F` (domain may be wider, sysfs.md §2).
pub fn is_bdf(name: &str) -> bool {
    let Some((head, func)) = name.rsplit_once('.') else {
        return false;
    };
    let parts: Vec<&str> = head.split(':').collect();
    parts.len() == 3
        && func.len() == 1
        && parts
            .iter()
            .chain(std::iter::once(&func))
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A PCI address, ordered numerically. The domain may be wider than 16 bits: a VM capture names
/// `10000:00:04.0` (hwloc `2pa-pcidomain32bits`, sysfs.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Bdf {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

/// `0000:18:00.0` → [`Bdf`]. Domain up to 8 hex digits, bus 2, device 2 (≤ 0x1f), function 1
/// (≤ 7), as `pci_name()` prints them (`drivers/pci/probe.c`, `"%04x:%02x:%02x.%d"`).
pub fn parse_bdf(text: &str) -> Result<Bdf, ParseError> {
    let t = trimmed(text);
    let bad = || ParseError::new(format!("not a pci address: {:?}", short(t)));
    let (head, func) = t.rsplit_once('.').ok_or_else(bad)?;
    let mut parts = head.split(':');
    let (Some(dom), Some(bus), Some(dev), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let hex = |s: &str, max_len: usize| -> Result<u32, ParseError> {
        if s.is_empty() || s.len() > max_len || !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u32::from_str_radix(s, 16).map_err(|_| bad())
    };
    let domain = hex(dom, 8)?;
    let bus = hex(bus, 2)?;
    let device = hex(dev, 2)?;
    let function = hex(func, 1)?;
    if device > 0x1f || function > 7 {
        return Err(bad());
    }
    Ok(Bdf {
        domain,
        bus: bus as u8,
        device: device as u8,
        function: function as u8,
    })
}

/// A PCIe link rate in tenths of GT/s (`25` = 2.5 GT/s, `80` = 8 GT/s, `320` = 32 GT/s), so that
/// rates compare exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkSpeed {
    pub deci_gts: u32,
}

impl LinkSpeed {
    /// PCIe generation of a standard rate (Gen1 2.5 … Gen6 64 GT/s, sysfs.md §3 table).
    pub fn generation(self) -> Option<u32> {
        match self.deci_gts {
            25 => Some(1),
            50 => Some(2),
            80 => Some(3),
            160 => Some(4),
            320 => Some(5),
            640 => Some(6),
            _ => None,
        }
    }

    /// Payload bandwidth of one lane in one direction, GB/s: GT/s × encoding / 8. 8b/10b for
    /// 2.5 and 5 GT/s, 128b/130b for everything faster — hwloc's rule
    /// (`include/private/misc.h`), whose expected outputs are this crate's oracle
    /// (`link=15.75GB/s` for Gen3 x16, `link=0.25GB/s` for Gen1 x1; sysfs.md §3). Gen6 (PAM4,
    /// FLIT) has an implementation-defined efficiency; hwloc's 128/130 is kept for it too.
    pub fn lane_gb_per_s(self) -> f64 {
        let gts = f64::from(self.deci_gts) / 10.0;
        if self.deci_gts <= 50 {
            gts * 8.0 / 10.0 / 8.0
        } else {
            gts * 128.0 / 130.0 / 8.0
        }
    }
}

impl std::fmt::Display for LinkSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, tenth) = (self.deci_gts / 10, self.deci_gts % 10);
        if tenth == 0 {
            write!(f, "{whole} GT/s")
        } else {
            write!(f, "{whole}.{tenth} GT/s")
        }
    }
}

impl Serialize for LinkSpeed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `current_link_speed` / `max_link_speed`: `8.0 GT/s PCIe` (new kernels) or `8 GT/s` (≤ 5.6,
/// RHEL 7), parsed like NCCL's `sscanf("%f GT/s")` into tenths (`drivers/pci/probe.c`
/// `pci_speed_string()`; sysfs.md §3). `Unknown` / `Unknown speed` (link down, no capability) is
/// `Ok(None)`; any other text is an error for the caller to note.
pub fn parse_link_speed(text: &str) -> Result<Option<LinkSpeed>, ParseError> {
    let t = trimmed(text);
    if t.starts_with("Unknown") {
        return Ok(None);
    }
    let bad = || ParseError::new(format!("not a pcie link speed: {:?}", short(t)));
    let number = t
        .split_once("GT/s")
        .map(|(n, _)| n.trim())
        .ok_or_else(bad)?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty()
        || whole.len() > 4
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return Err(bad());
    }
    let whole: u32 = whole.parse().map_err(|_| bad())?;
    let tenth = frac
        .chars()
        .next()
        .and_then(|c| c.to_digit(10))
        .unwrap_or(0);
    let deci_gts = whole * 10 + tenth;
    if deci_gts == 0 {
        return Err(bad());
    }
    Ok(Some(LinkSpeed { deci_gts }))
}

/// `current_link_width` / `max_link_width`: a lane count (`%u`, sysfs.md §3). `0` is a link that
/// is down.
pub fn parse_link_width(text: &str) -> Result<u32, ParseError> {
    let t = trimmed(text);
    let v: u32 = t
        .parse()
        .map_err(|_| ParseError::new(format!("not a lane count: {:?}", short(t))))?;
    if v > 32 {
        return Err(ParseError::new(format!(
            "{v} lanes is more than pcie allows (32)"
        )));
    }
    Ok(v)
}

/// The four PCIe link attributes of one function; each `None` when absent or unreadable
/// (conventional PCI functions and RCiEPs have none, sysfs.md §2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PcieLink {
    pub current_speed: Option<LinkSpeed>,
    pub max_speed: Option<LinkSpeed>,
    pub current_width: Option<u32>,
    pub max_width: Option<u32>,
}

impl PcieLink {
    pub fn is_empty(&self) -> bool {
        self.current_speed.is_none()
            && self.max_speed.is_none()
            && self.current_width.is_none()
            && self.max_width.is_none()
    }
}

/// One-direction bandwidth of `width` lanes at `speed`, GB/s.
pub fn link_gb_per_s(speed: LinkSpeed, width: u32) -> f64 {
    speed.lane_gb_per_s() * f64::from(width)
}

/// `gen5 x16 (32 GT/s, 63.02 GB/s)`; parts that are unknown print `?`.
pub fn describe_link(speed: Option<LinkSpeed>, width: Option<u32>) -> String {
    let generation = speed
        .and_then(LinkSpeed::generation)
        .map(|g| format!("gen{g}"))
        .unwrap_or_else(|| "gen?".into());
    let lanes = width
        .map(|w| format!("x{w}"))
        .unwrap_or_else(|| "x?".into());
    match (speed, width) {
        (Some(s), Some(w)) => format!(
            "{generation} {lanes} ({s}, {:.2} GB/s)",
            link_gb_per_s(s, w)
        ),
        (Some(s), None) => format!("{generation} {lanes} ({s})"),
        _ => format!("{generation} {lanes}"),
    }
}

/// AER counters of one severity (`aer_dev_correctable`, `aer_dev_fatal`, `aer_dev_nonfatal`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AerCounts {
    /// The `TOTAL_ERR_*` line, or the sum of the named lines when a kernel printed none.
    pub total: u64,
    /// Named counters that are not zero, in file order (`BadTLP 3`, `Receiver Error 2`).
    pub nonzero: Vec<(String, u64)>,
}

/// Parse an `aer_dev_*` file: one `<name> <count>` line per error bit, then a
/// `TOTAL_ERR_COR|FATAL|NONFATAL <n>` line. Names have spaces in the 4.19 layout
/// (`Receiver Error 2`, `RELAY_NUM Rollover 0`) and are short in current kernels (`RxErr 2`,
/// `BadTLP 0`); unnamed bits print as `dev_cor_errs_bit[<i>] <n>`
/// (`Documentation/ABI/testing/sysfs-bus-pci-devices-aer`, `drivers/pci/pcie/aer.c`; sysfs.md §5).
pub fn parse_aer(text: &str) -> Result<AerCounts, ParseError> {
    let mut counts = AerCounts::default();
    let mut total: Option<u64> = None;
    let mut sum: u64 = 0;
    let mut lines = 0usize;
    // What the kernel writes is ASCII: its lines are cut and trimmed byte by byte there, the
    // same characters `str::trim` takes (issue 41: a node's 186 files were 4 % of a `check`).
    let ascii = text.is_ascii();
    let trim = |line| trim_kernel_text(line, ascii);
    for line in text.split('\n').map(trim).filter(|l| !l.is_empty()) {
        let cut = if ascii {
            line.bytes().rposition(|b| b.is_ascii_whitespace())
        } else {
            line.rfind(|c: char| c.is_ascii_whitespace())
        };
        let (name, value) = cut
            .map(|at| (&line[..at], &line[at + 1..]))
            .ok_or_else(|| ParseError::new(format!("not `<name> <count>`: {:?}", short(line))))?;
        let value: u64 = value
            .parse()
            .map_err(|_| ParseError::new(format!("not a count: {:?}", short(line))))?;
        let name = trim(name);
        lines += 1;
        if name.starts_with("TOTAL_ERR_") {
            total = Some(value);
        } else {
            sum = sum.saturating_add(value);
            if value > 0 {
                counts.nonzero.push((name.to_string(), value));
            }
        }
    }
    if lines == 0 {
        return Err(ParseError::new("empty aer counter file"));
    }
    counts.total = total.unwrap_or(sum);
    Ok(counts)
}

/// `text` without the white space `str::trim` takes, compared byte by byte when it is ASCII.
fn trim_kernel_text(text: &str, ascii: bool) -> &str {
    if ascii {
        text.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r'))
    } else {
        text.trim()
    }
}

pub(crate) fn short(text: &str) -> String {
    let mut s: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        s.push('…');
    }
    s
}

/// Read every function under `/sys/bus/pci/devices`. `Err` only when the directory itself is
/// unreadable.
pub fn gather(source: &dyn Source) -> Result<PciFacts, FactError> {
    let names = source.read_dir(PCI_DEVICES)?;
    let mut facts = PciFacts::default();
    for name in names.into_iter().filter(|n| is_bdf(n)) {
        let dir = join(PCI_DEVICES, &name);
        match read_function(source, &dir, &name) {
            Ok(Read::Judged(function)) => {
                // numa_node is created with the device whenever the kernel has CONFIG_NUMA (every
                // multi-socket kernel): absent, it is not read, not "no proximity". POWER9
                // trees in hwloc's captures keep only class + local_cpus.
                let numa = join(&dir, "numa_node");
                if function.numa_node.is_none() && !source.exists(&numa) {
                    facts
                        .numa_missing
                        .push(FactError::missing(&numa, KERNEL_PCI_SYSFS));
                }
                facts.functions.push(function);
            }
            Ok(Read::Unjudged(function)) => facts.unjudged.push(function),
            Err(problem) => facts.problems.push(problem),
        }
    }
    Ok(facts)
}

/// `class` first: a function of a class nothing judges costs one read, not five (on a
/// 2000-function node that is most of the tree).
fn read_function(source: &dyn Source, dir: &str, bdf: &str) -> Result<Read, FactError> {
    // vendor, device and class exist for every PCI function the kernel lists: one that lacks
    // them is not read (a partial capture), never "not a GPU".
    let read = |attr: &str| -> Result<String, FactError> {
        let path = join(dir, attr);
        source.read_to_string(&path).map_err(|err| {
            if err.is_missing() && !matches!(err, crate::source::FsError::Dangling { .. }) {
                FactError::missing(&path, KERNEL_PCI_SYSFS)
            } else {
                FactError::from(err)
            }
        })
    };
    let parse_with = |attr: &str, text: String, f: fn(&str) -> Result<u32, ParseError>| {
        f(&text).map_err(|e| FactError::parse(&join(dir, attr), e))
    };
    let class = parse_with("class", read("class")?, parse_hex)?;
    if !is_judged_class(class) {
        return Ok(Read::Unjudged(UnjudgedFunction {
            bdf: bdf.to_string(),
            class,
        }));
    }
    // A judged function's attributes are read next, here and by the topology facts, each
    // looked at by name (`fstatat`) before it is opened: listing the directory first to skip
    // those looks cost more CPU on ext4 than it saved (its `getdents64` hashes every entry into
    // a tree, 3 % of a replayed check; issue 41, docs/performance.md).
    let vendor =
        parse_hex_u16(&read("vendor")?).map_err(|e| FactError::parse(&join(dir, "vendor"), e))?;
    let device =
        parse_hex_u16(&read("device")?).map_err(|e| FactError::parse(&join(dir, "device"), e))?;
    // numa_node is absent on some kernels/captures (POWER9 trees keep only class + local_cpus).
    let numa_node = match source.read_to_string(&join(dir, "numa_node")) {
        Ok(text) => {
            parse_numa_node(&text).map_err(|e| FactError::parse(&join(dir, "numa_node"), e))?
        }
        Err(err) if err.is_missing() => None,
        Err(err) => return Err(err.into()),
    };
    let driver = source
        .read_link(&join(dir, "driver"))
        .ok()
        .and_then(|target| target.rsplit('/').next().map(str::to_string))
        .filter(|name| !name.is_empty());
    Ok(Read::Judged(PciFunction {
        bdf: bdf.to_string(),
        vendor,
        device,
        class,
        numa_node,
        driver,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_formats() {
        assert_eq!(parse_hex("0x10de\n").unwrap(), 0x10de);
        assert_eq!(parse_hex("0x030200\n").unwrap(), 0x030200);
        assert!(parse_hex("10de").is_err());
        assert!(parse_hex("0x").is_err());
        assert!(parse_hex_u16("0x123456").is_err());
        assert_eq!(parse_numa_node("-1\n").unwrap(), None);
        assert_eq!(parse_numa_node("1\n").unwrap(), Some(1));
        assert!(parse_numa_node("").is_err());
    }

    #[test]
    fn parses_addresses_of_any_domain_width() {
        let a = parse_bdf("0000:18:00.0\n").unwrap();
        assert_eq!((a.domain, a.bus, a.device, a.function), (0, 0x18, 0, 0));
        let vm = parse_bdf("10000:00:04.0").unwrap();
        assert_eq!(vm.domain, 0x10000);
        assert!(a < vm);
        assert!(parse_bdf("0000:18:20.0").is_err());
        assert!(parse_bdf("0000:18:00.8").is_err());
        assert!(parse_bdf("pci0000:17").is_err());
        assert!(parse_bdf("0000:18:00").is_err());
        assert!(parse_bdf("123456789:00:00.0").is_err());
    }

    #[test]
    fn parses_link_speeds_in_both_kernel_spellings() {
        // New kernels (`pci_speed_string()`), RHEL 7's 3.10 (`8 GT/s`, hwloc
        // `32intel64-2p8co2t+8ve`), and the X722's `2.5 GT/s` from the same capture.
        for (text, deci, generation) in [
            ("8.0 GT/s PCIe\n", 80, 3),
            ("8 GT/s\n", 80, 3),
            ("2.5 GT/s\n", 25, 1),
            ("2.5 GT/s PCIe\n", 25, 1),
            ("5 GT/s\n", 50, 2),
            ("16.0 GT/s PCIe\n", 160, 4),
            ("32.0 GT/s PCIe\n", 320, 5),
            ("64.0 GT/s PCIe\n", 640, 6),
        ] {
            let s = parse_link_speed(text).unwrap().unwrap();
            assert_eq!(
                (s.deci_gts, s.generation()),
                (deci, Some(generation)),
                "{text}"
            );
        }
        assert_eq!(parse_link_speed("Unknown\n").unwrap(), None);
        assert_eq!(parse_link_speed("Unknown speed\n").unwrap(), None);
        assert!(parse_link_speed("fast\n").is_err());
        assert!(parse_link_speed("0 GT/s\n").is_err());
        assert!(parse_link_speed("-8 GT/s\n").is_err());
        // A rate no generation has still parses; it just has no generation.
        assert_eq!(
            parse_link_speed("20.0 GT/s PCIe")
                .unwrap()
                .unwrap()
                .generation(),
            None
        );
        assert_eq!(parse_link_width("16\n").unwrap(), 16);
        assert!(parse_link_width("x16").is_err());
        assert!(parse_link_width("64").is_err());
    }

    #[test]
    fn bandwidth_matches_hwloc_and_the_kernel() {
        let gbps = |s: &str, w| link_gb_per_s(parse_link_speed(s).unwrap().unwrap(), w);
        // hwloc expected output: Gen3 x16 `link=15.75GB/s`, Gen1 x1 `link=0.25GB/s`.
        assert_eq!(format!("{:.2}", gbps("8 GT/s", 16)), "15.75");
        assert_eq!(format!("{:.2}", gbps("2.5 GT/s", 1)), "0.25");
        // Kernel: "252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link
        // ... (capable of 504.112 Gb/s ...)"; the kernel truncates each lane to whole Mb/s
        // (`PCIE_SPEED2MBS_ENC`), hence the small tolerance.
        assert!((gbps("16.0 GT/s PCIe", 16) * 8.0 - 252.048).abs() < 0.02);
        assert!((gbps("32.0 GT/s PCIe", 16) * 8.0 - 504.112).abs() < 0.02);
        let s = parse_link_speed("32.0 GT/s PCIe").unwrap();
        assert_eq!(describe_link(s, Some(16)), "gen5 x16 (32 GT/s, 63.02 GB/s)");
        assert_eq!(describe_link(None, Some(8)), "gen? x8");
    }

    #[test]
    fn parses_aer_counters_in_both_layouts() {
        // Current kernels: short names (drivers/pci/pcie/aer.c).
        let new = "RxErr 0\nBadTLP 3\nBadDLLP 0\nRollover 0\nTimeout 1\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 4\n";
        let c = parse_aer(new).unwrap();
        assert_eq!(c.total, 4);
        assert_eq!(c.nonzero, vec![("BadTLP".into(), 3), ("Timeout".into(), 1)]);
        // 4.19 ABI sample: long names with spaces.
        let old = "Undefined 0\nData Link Protocol 0\nSurprise Down Error 2\nPoisoned TLP 0\nFlow Control Protocol 0\nCompletion Timeout 0\nCompleter Abort 0\nUnexpected Completion 0\nReceiver Overflow 0\nMalformed TLP 0\nECRC 0\nUnsupported Request 0\nACS Violation 0\nUncorrectable Internal Error 0\nMC Blocked TLP 0\nAtomicOp Egress Blocked 0\nTLP Prefix Blocked Error 0\nTOTAL_ERR_FATAL 2\n";
        let f = parse_aer(old).unwrap();
        assert_eq!(f.total, 2);
        assert_eq!(f.nonzero, vec![("Surprise Down Error".into(), 2)]);
        // Unnamed bits; no total line: the sum stands in.
        let bits = parse_aer("dev_cor_errs_bit[20] 5\n").unwrap();
        assert_eq!(bits.total, 5);
        assert!(parse_aer("").is_err());
        assert!(parse_aer("RxErr many\n").is_err());
    }

    #[test]
    fn recognises_addresses_and_gpus() {
        assert!(is_bdf("0000:18:00.0"));
        assert!(is_bdf("10000:00:04.0"));
        assert!(!is_bdf("pci0000:17"));
        assert!(!is_bdf("0000:18:00"));
        let gpu = PciFunction {
            bdf: "0000:18:00.0".into(),
            vendor: 0x10de,
            device: 0x2330,
            class: 0x030200,
            numa_node: Some(0),
            driver: Some("nvidia".into()),
        };
        assert!(gpu.is_nvidia_gpu());
        let nvswitch = PciFunction {
            class: 0x068000,
            ..gpu.clone()
        };
        assert!(!nvswitch.is_nvidia_gpu());
        let vga = PciFunction {
            class: 0x030000,
            ..gpu
        };
        assert!(vga.is_nvidia_gpu());
    }
}
