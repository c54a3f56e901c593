//! PCI configuration space (`/sys/bus/pci/devices/<bdf>/config`, raw and little-endian): the
//! ACS extended capability, which says whether a switch port forces peer-to-peer traffic up to
//! the root complex (reference/topology.md §6).
//!
//! Pure parsing of bytes; reading the file is `facts/topology.rs`'s job and judging it the
//! `topology.acs` check's. It never guesses: a `config` shorter than the 4096-byte extended space
//! (what an unprivileged reader gets: 64 bytes, `drivers/pci/pci-sysfs.c` `pci_read_config`)
//! is reported as truncated, not as "no ACS".

use serde::Serialize;

use crate::answers::ParseError;

/// Size of PCIe configuration space including the extended region (`PCI_CFG_SPACE_EXP_SIZE`).
pub const FULL_CONFIG_LEN: usize = 4096;
/// Where the extended capability list starts (`PCI_CFG_SPACE_SIZE`).
pub const EXT_CAP_START: usize = 0x100;
/// `PCI_EXT_CAP_ID_ACS` (`include/uapi/linux/pci_regs.h`).
pub const EXT_CAP_ID_ACS: u16 = 0x000d;

/// ACS Capability / Control register bits (`PCI_ACS_SV` … `PCI_ACS_DT`, pci_regs.h), with the
/// names `lspci` prints in `ACSCap:`/`ACSCtl:` (topology.md §6).
pub const ACS_BITS: [(u16, &str); 7] = [
    (0x0001, "SrcValid"),
    (0x0002, "TransBlk"),
    (0x0004, "ReqRedir"),
    (0x0008, "CmpltRedir"),
    (0x0010, "UpstreamFwd"),
    (0x0020, "EgressCtrl"),
    (0x0040, "DirectTrans"),
];
pub const ACS_SV: u16 = 0x0001;
pub const ACS_RR: u16 = 0x0004;
pub const ACS_CR: u16 = 0x0008;
pub const ACS_UF: u16 = 0x0010;
pub const ACS_EC: u16 = 0x0020;

/// The ACS capability of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Acs {
    /// Offset of the capability header in config space.
    pub offset: u16,
    /// ACS Capability register (cap + 0x04): what the port supports.
    pub capability: u16,
    /// ACS Control register (cap + 0x06): what is enabled.
    pub control: u16,
}

/// What a function's `config` file says about ACS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum AcsReading {
    /// Fewer than 4096 bytes: an unprivileged read (64 bytes) or no extended space (256).
    Truncated {
        len: usize,
    },
    /// The extended list is empty (`0x00000000` or `0xffffffff` at 0x100).
    NoExtendedCapabilities,
    /// The list was walked and holds no ACS capability.
    NoAcs,
    Present(Acs),
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *bytes.get(at)?,
        *bytes.get(at + 1)?,
        *bytes.get(at + 2)?,
        *bytes.get(at + 3)?,
    ]))
}

/// Walk the extended capability list from 0x100: each 32-bit header holds the capability id
/// (bits 15:0), version (19:16) and the next offset (31:20, `0` ends the list), as
/// `pci_find_next_ext_capability()` does (`drivers/pci/pci.c`), with the same loop bound
/// (at most (4096 − 256) / 8 headers), so a corrupt list cannot loop.
pub fn parse_acs(bytes: &[u8]) -> Result<AcsReading, ParseError> {
    if bytes.len() < FULL_CONFIG_LEN {
        return Ok(AcsReading::Truncated { len: bytes.len() });
    }
    let mut offset = EXT_CAP_START;
    let first = u32_at(bytes, offset).unwrap_or(0);
    if first == 0 || first == 0xffff_ffff {
        return Ok(AcsReading::NoExtendedCapabilities);
    }
    let mut budget = (FULL_CONFIG_LEN - EXT_CAP_START) / 8;
    while budget > 0 {
        budget -= 1;
        let header = u32_at(bytes, offset).ok_or_else(|| {
            ParseError::new(format!("capability at {offset:#x} runs past the end"))
        })?;
        if header == 0 || header == 0xffff_ffff {
            return Ok(AcsReading::NoAcs);
        }
        let id = (header & 0xffff) as u16;
        if id == EXT_CAP_ID_ACS {
            let capability = u16_at(bytes, offset + 4)
                .ok_or_else(|| ParseError::new("acs capability runs past the end"))?;
            let control = u16_at(bytes, offset + 6)
                .ok_or_else(|| ParseError::new("acs capability runs past the end"))?;
            return Ok(AcsReading::Present(Acs {
                offset: offset as u16,
                capability,
                control,
            }));
        }
        let next = (header >> 20) as usize;
        if next == 0 {
            return Ok(AcsReading::NoAcs);
        }
        if next < EXT_CAP_START || !next.is_multiple_of(4) || next + 4 > bytes.len() {
            return Err(ParseError::new(format!(
                "extended capability at {offset:#x} points at {next:#x}, outside the extended space"
            )));
        }
        offset = next;
    }
    Err(ParseError::new(
        "extended capability list does not end (loop)",
    ))
}

/// `SrcValid+ ReqRedir+ …`: the set bits by lspci name.
pub fn acs_flags(bits: u16) -> Vec<&'static str> {
    ACS_BITS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4096-byte config space with AER at 0x100 → ACS at 0x148 (a PCIe switch downstream
    /// port's usual order), ACS capability 0x005f.
    fn config(control: u16) -> Vec<u8> {
        let mut c = vec![0u8; FULL_CONFIG_LEN];
        c[0..4].copy_from_slice(&0xc030_1000u32.to_le_bytes()); // 1000:c030
        let aer: u32 = 0x0001 | (2 << 16) | (0x148 << 20);
        c[0x100..0x104].copy_from_slice(&aer.to_le_bytes());
        let acs: u32 = 0x000d | (1 << 16);
        c[0x148..0x14c].copy_from_slice(&acs.to_le_bytes());
        c[0x14c..0x14e].copy_from_slice(&0x005fu16.to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&control.to_le_bytes());
        c
    }

    #[test]
    fn finds_acs_and_its_control_bits() {
        let AcsReading::Present(acs) = parse_acs(&config(0)).unwrap() else {
            panic!("no acs")
        };
        assert_eq!((acs.offset, acs.capability, acs.control), (0x148, 0x5f, 0));
        let on = ACS_SV | ACS_RR | ACS_CR | ACS_UF;
        let AcsReading::Present(acs) = parse_acs(&config(on)).unwrap() else {
            panic!("no acs")
        };
        assert_eq!(
            acs_flags(acs.control),
            vec!["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
        );
    }

    #[test]
    fn short_reads_are_truncated_never_guessed() {
        assert_eq!(
            parse_acs(&[0u8; 64]).unwrap(),
            AcsReading::Truncated { len: 64 }
        );
        assert_eq!(
            parse_acs(&config(0)[..256]).unwrap(),
            AcsReading::Truncated { len: 256 }
        );
    }

    #[test]
    fn empty_and_acs_less_lists() {
        let mut c = config(0);
        c[0x100..0x104].copy_from_slice(&[0xff; 4]);
        assert_eq!(parse_acs(&c).unwrap(), AcsReading::NoExtendedCapabilities);
        let mut c = config(0);
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (2 << 16)).to_le_bytes());
        assert_eq!(parse_acs(&c).unwrap(), AcsReading::NoAcs);
    }

    #[test]
    fn corrupt_lists_are_errors_not_loops() {
        let mut c = config(0);
        // AER points at itself.
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100 << 20)).to_le_bytes());
        assert!(parse_acs(&c).is_err());
        let mut c = config(0);
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x40 << 20)).to_le_bytes());
        assert!(parse_acs(&c).is_err());
    }
}
