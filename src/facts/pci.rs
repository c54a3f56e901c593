//! PCI functions from `/sys/bus/pci/devices/<DDDD:BB:DD.F>/` (reference/sysfs.md §2).
//!
//! Only the attributes the checks need today; the topology layer extends this. An unreadable
//! attribute of one function is recorded as a problem and the walk goes on: one damaged function
//! must not hide the other 300.

use serde::Serialize;

use super::{FactError, ParseError, trimmed};
use crate::source::Source;

pub const PCI_DEVICES: &str = "sys/bus/pci/devices";

/// NVIDIA's PCI vendor id.
pub const VENDOR_NVIDIA: u16 = 0x10de;

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

/// All PCI functions, plus the attributes that could not be read.
#[derive(Debug, Clone, Default)]
pub struct PciFacts {
    pub functions: Vec<PciFunction>,
    pub problems: Vec<FactError>,
}

impl PciFacts {
    pub fn nvidia_gpus(&self) -> impl Iterator<Item = &PciFunction> {
        self.functions.iter().filter(|f| f.is_nvidia_gpu())
    }
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
        let dir = format!("{PCI_DEVICES}/{name}");
        match read_function(source, &dir, &name) {
            Ok(function) => facts.functions.push(function),
            Err(problem) => facts.problems.push(problem),
        }
    }
    Ok(facts)
}

fn read_function(source: &dyn Source, dir: &str, bdf: &str) -> Result<PciFunction, FactError> {
    let read = |attr: &str| -> Result<String, FactError> {
        let path = format!("{dir}/{attr}");
        source.read_to_string(&path).map_err(FactError::from)
    };
    let parse_with = |attr: &str, text: String, f: fn(&str) -> Result<u32, ParseError>| {
        f(&text).map_err(|e| FactError::parse(&format!("{dir}/{attr}"), e))
    };
    let vendor = parse_hex_u16(&read("vendor")?)
        .map_err(|e| FactError::parse(&format!("{dir}/vendor"), e))?;
    let device = parse_hex_u16(&read("device")?)
        .map_err(|e| FactError::parse(&format!("{dir}/device"), e))?;
    let class = parse_with("class", read("class")?, parse_hex)?;
    // numa_node is absent on some kernels/captures (POWER9 trees keep only class + local_cpus).
    let numa_node = match source.read_to_string(&format!("{dir}/numa_node")) {
        Ok(text) => {
            parse_numa_node(&text).map_err(|e| FactError::parse(&format!("{dir}/numa_node"), e))?
        }
        Err(err) if err.is_missing() => None,
        Err(err) => return Err(err.into()),
    };
    let driver = source
        .read_link(&format!("{dir}/driver"))
        .ok()
        .and_then(|target| target.rsplit('/').next().map(str::to_string))
        .filter(|name| !name.is_empty());
    Ok(PciFunction {
        bdf: bdf.to_string(),
        vendor,
        device,
        class,
        numa_node,
        driver,
    })
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
