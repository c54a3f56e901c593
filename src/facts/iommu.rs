//! IOMMU state: hardware units in `/sys/class/iommu/`, each device's IOMMU group and its DMA
//! domain type in `/sys/kernel/iommu_groups/<n>/type`, and the kernel command line
//! (reference/topology.md §6). Facts only; the `topology.iommu` check decides what translated
//! mode means for GPUDirect.

use serde::Serialize;

use super::pci::PCI_DEVICES;
use super::trimmed;
use crate::answers::FactError;
use crate::source::Source;

pub const CLASS_IOMMU: &str = "sys/class/iommu";
pub const IOMMU_GROUPS: &str = "sys/kernel/iommu_groups";
/// The kernel command line, which `node` reads and splits; IOMMU settings are read from it.
pub use super::node::PROC_CMDLINE;

/// IOMMU-related kernel parameters (`Documentation/admin-guide/kernel-parameters.txt`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CmdlineIommu {
    /// `intel_iommu=on|off|...` (the whole value).
    pub intel_iommu: Option<String>,
    /// `amd_iommu=...`.
    pub amd_iommu: Option<String>,
    /// `iommu=pt|off|...`.
    pub iommu: Option<String>,
    /// `iommu.passthrough=0|1`.
    pub passthrough: Option<String>,
}

impl CmdlineIommu {
    /// The command line asks for pass-through DMA (`iommu=pt` or `iommu.passthrough=1`).
    pub fn asks_passthrough(&self) -> bool {
        self.iommu
            .as_deref()
            .is_some_and(|v| v.split(',').any(|p| p == "pt"))
            || self.passthrough.as_deref() == Some("1")
    }
}

/// Pick the IOMMU parameters out of `/proc/cmdline`, split as the kernel splits it
/// ([`super::node::parse_cmdline_params`]: quotes kept together; a later word wins, as the
/// kernel's parser applies them in order; nothing after `--`, which is init's).
pub fn parse_cmdline(text: &str) -> CmdlineIommu {
    let mut out = CmdlineIommu::default();
    for (key, value) in super::node::parse_cmdline_params(text) {
        let Some(value) = value else {
            continue;
        };
        let value = Some(value);
        match key.as_str() {
            "intel_iommu" => out.intel_iommu = value,
            "amd_iommu" => out.amd_iommu = value,
            "iommu" => out.iommu = value,
            "iommu.passthrough" => out.passthrough = value,
            _ => {}
        }
    }
    out
}

/// One device's IOMMU group and that group's default domain type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceGroup {
    pub bdf: String,
    pub group: String,
    /// `identity` (pass-through), `DMA` or `DMA-FQ` (translated), `blocked`, `unmanaged`; `None`
    /// before Linux 5.11, where the file does not exist
    /// (`Documentation/ABI/testing/sysfs-kernel-iommu_groups`).
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IommuFacts {
    /// Entries of `/sys/class/iommu` (`dmar0`, `ivhd0`): present when an IOMMU is active.
    pub units: Vec<String>,
    /// Groups of the devices asked about (those that have an `iommu_group` link).
    pub groups: Vec<DeviceGroup>,
    pub cmdline: Option<CmdlineIommu>,
    #[serde(skip)]
    pub problems: Vec<FactError>,
}

/// Read the IOMMU state for `bdfs` (the GPUs and NICs whose DMA matters).
pub fn gather(source: &dyn Source, bdfs: &[&str]) -> IommuFacts {
    let mut facts = IommuFacts::default();
    match source.list_dir(CLASS_IOMMU, &|_| true) {
        Ok(units) => facts.units = units,
        Err(err) if err.is_missing() => {}
        Err(err) => facts.problems.push(err.into()),
    }
    match source.read_to_string(PROC_CMDLINE) {
        Ok(text) => facts.cmdline = Some(parse_cmdline(&text)),
        Err(err) if err.is_missing() => {}
        Err(err) => facts.problems.push(err.into()),
    }
    for bdf in bdfs {
        let link = format!("{PCI_DEVICES}/{bdf}/iommu_group");
        let group = match source.read_link(&link) {
            Ok(target) => target.rsplit('/').next().unwrap_or_default().to_string(),
            Err(err) if err.is_missing() => continue,
            Err(err) => {
                facts.problems.push(err.into());
                continue;
            }
        };
        if group.is_empty() || !group.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let kind = match source.read_to_string(&format!("{IOMMU_GROUPS}/{group}/type")) {
            Ok(text) => Some(trimmed(&text).to_string()).filter(|k| !k.is_empty()),
            Err(err) if err.is_missing() => None,
            Err(err) => {
                facts.problems.push(err.into());
                None
            }
        };
        facts.groups.push(DeviceGroup {
            bdf: (*bdf).to_string(),
            group,
            kind,
        });
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iommu_words_from_the_command_line() {
        let c = parse_cmdline(
            "BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=UUID=3f1c ro intel_iommu=on iommu=pt quiet\n",
        );
        assert_eq!(c.intel_iommu.as_deref(), Some("on"));
        assert!(c.asks_passthrough());
        let c = parse_cmdline("BOOT_IMAGE=/vmlinuz ro amd_iommu=on iommu.passthrough=0\n");
        assert!(!c.asks_passthrough());
        assert_eq!(c.amd_iommu.as_deref(), Some("on"));
        assert!(parse_cmdline("iommu=nopt,pt").asks_passthrough());
        assert_eq!(parse_cmdline(""), CmdlineIommu::default());
        // Split as the kernel splits it: a quoted value is one word, init's part is not ours.
        let q = parse_cmdline("dyndbg=\"file drivers/pci/* +p\" iommu=pt -- iommu=off\n");
        assert_eq!(q.iommu.as_deref(), Some("pt"));
    }
}
