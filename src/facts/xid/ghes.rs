//! Firmware-first PCIe errors: on servers whose firmware owns AER (APEI, "firmware first"), the
//! kernel never sees the AER interrupt; the firmware hands it a CPER record through a Generic
//! Hardware Error Source and `ghes` prints it (`drivers/acpi/apei/ghes.c`,
//! `drivers/firmware/efi/cper.c` `cper_print_pcie`), one `{N}[Hardware Error]: ` line per field:
//!
//! ```text
//! {1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1
//! {1}[Hardware Error]: event severity: recoverable|fatal|corrected
//! {1}[Hardware Error]:  Error 0, type: recoverable
//! {1}[Hardware Error]:   section_type: PCIe error
//! {1}[Hardware Error]:   port_type: 4, root port
//! {1}[Hardware Error]:   device_id: 0000:5e:00.0
//! {1}[Hardware Error]:   vendor_id: 0x144d, device_id: 0xa808
//! ```
//!
//! then, on kernels that pass it on to the AER core, the device's own `AER: aer_status: ...` and
//! `[12] Timeout` bit lines (read by the AER parser as the report's bits). Real records:
//! tests/data/kernel/README.md (`ghes-*`). Each PCIe section becomes an [`AerEvent`] from driver
//! `ghes`, so the AER check attributes and ages it like a native report. CPER severities map to
//! AER's: `fatal` is uncorrected fatal, `recoverable` uncorrected non-fatal, `corrected` and
//! `info` corrected.
//!
//! The record's AER registers (`aer_cor_status: 0x00002000, aer_cor_mask: …`,
//! `aer_uncor_status: 0x00100000, aer_uncor_mask: …`) are decoded into the event's error
//! names as the kernel's own `cper_print_aer` does (drivers/pci/pcie/aer.c): a corrected record
//! reads the correctable register, any other the uncorrectable one, and only the bits its mask
//! leaves set; each bit named as `aer.c`'s `aer_correctable_error_string` /
//! `aer_uncorrectable_error_string` print it, per the `PCI_ERR_COR_*` / `PCI_ERR_UNC_*` bits of
//! include/uapi/linux/pci_regs.h.

use super::events::{AerEvent, AerSeverity};
use super::lines::take_bdf;
use super::stamp::Stamp;

/// What a record has said so far.
#[derive(Debug, Default)]
pub(super) struct GhesReader {
    /// Inside a record: its event severity, the open section's type and severity.
    open: bool,
    event: Option<AerSeverity>,
    section: Option<AerSeverity>,
    pcie: bool,
    first_line: String,
    /// The section's registers: (status, mask) of the correctable and uncorrectable ones.
    cor: Option<(u32, u32)>,
    uncor: Option<(u32, u32)>,
    /// This section's event was handed out: its registers now go into the open event.
    emitted: bool,
}

/// `PCI_ERR_COR_*` (include/uapi/linux/pci_regs.h) by bit, named as drivers/pci/pcie/aer.c
/// `aer_correctable_error_string` prints them.
const COR_BITS: [(u32, &str); 8] = [
    (0, "RxErr"),        // PCI_ERR_COR_RCVR 0x00000001
    (6, "BadTLP"),       // PCI_ERR_COR_BAD_TLP 0x00000040
    (7, "BadDLLP"),      // PCI_ERR_COR_BAD_DLLP 0x00000080
    (8, "Rollover"),     // PCI_ERR_COR_REP_ROLL 0x00000100
    (12, "Timeout"),     // PCI_ERR_COR_REP_TIMER 0x00001000
    (13, "NonFatalErr"), // PCI_ERR_COR_ADV_NFAT 0x00002000
    (14, "CorrIntErr"),  // PCI_ERR_COR_INTERNAL 0x00004000
    (15, "HeaderOF"),    // PCI_ERR_COR_LOG_OVER 0x00008000
];

/// `PCI_ERR_UNC_*` by bit, named as `aer_uncorrectable_error_string` prints them.
const UNCOR_BITS: [(u32, &str); 17] = [
    (0, "Undefined"),        // PCI_ERR_UNC_UND 0x00000001
    (4, "DLP"),              // PCI_ERR_UNC_DLP 0x00000010
    (5, "SDES"),             // PCI_ERR_UNC_SURPDN 0x00000020
    (12, "TLP"),             // PCI_ERR_UNC_POISON_TLP 0x00001000
    (13, "FCP"),             // PCI_ERR_UNC_FCP 0x00002000
    (14, "CmpltTO"),         // PCI_ERR_UNC_COMP_TIME 0x00004000
    (15, "CmpltAbrt"),       // PCI_ERR_UNC_COMP_ABORT 0x00008000
    (16, "UnxCmplt"),        // PCI_ERR_UNC_UNX_COMP 0x00010000
    (17, "RxOF"),            // PCI_ERR_UNC_RX_OVER 0x00020000
    (18, "MalfTLP"),         // PCI_ERR_UNC_MALF_TLP 0x00040000
    (19, "ECRC"),            // PCI_ERR_UNC_ECRC 0x00080000
    (20, "UnsupReq"),        // PCI_ERR_UNC_UNSUP 0x00100000
    (21, "ACSViol"),         // PCI_ERR_UNC_ACSV 0x00200000
    (22, "UncorrIntErr"),    // PCI_ERR_UNC_INTN 0x00400000
    (23, "BlockedTLP"),      // PCI_ERR_UNC_MCBTLP 0x00800000
    (24, "AtomicOpBlocked"), // PCI_ERR_UNC_ATOMEG 0x01000000
    (25, "TLPBlockedErr"),   // PCI_ERR_UNC_TLPPRE 0x02000000
];

/// `0x00100000, aer_uncor_mask: 0x00010000` -> (status, mask); a mask not printed is 0.
fn register(rest: &str) -> Option<(u32, u32)> {
    let hex = |s: &str| {
        let s = s.trim();
        let digits = s.strip_prefix("0x").unwrap_or(s);
        u32::from_str_radix(digits, 16).ok()
    };
    let (status, mask) = match rest.split_once(',') {
        Some((status, mask)) => (status, mask.split_once(':').map(|(_, m)| m)),
        None => (rest, None),
    };
    Some((hex(status)?, mask.and_then(hex).unwrap_or(0)))
}

/// The names of the bits `status` holds that `mask` does not, in bit order; an unnamed bit
/// as `bit N`.
fn bit_names(status: u32, mask: u32, table: &[(u32, &str)]) -> Vec<String> {
    let set = status & !mask;
    (0..32)
        .filter(|bit| set & (1 << bit) != 0)
        .map(|bit| match table.iter().find(|(b, _)| *b == bit) {
            Some((_, name)) => (*name).to_string(),
            None => format!("bit {bit}"),
        })
        .collect()
}

fn cper_severity(word: &str) -> Option<AerSeverity> {
    match word.trim().split([',', ' ']).next()? {
        "fatal" => Some(AerSeverity::Fatal),
        "recoverable" => Some(AerSeverity::NonFatal),
        "corrected" | "info" => Some(AerSeverity::Corrected),
        _ => None,
    }
}

/// The field text of a `{N}[Hardware Error]: ` line, `None` for any other line.
fn field(message: &str) -> Option<&str> {
    let at = message.find("[Hardware Error]: ")?;
    let head = message[..at].trim();
    // `{N}` before the tag, or nothing (older kernels print `[Hardware Error]: ` alone).
    let braced = head.is_empty()
        || (head.starts_with('{')
            && head.ends_with('}')
            && head[1..head.len() - 1].bytes().all(|b| b.is_ascii_digit()));
    braced.then(|| &message[at + "[Hardware Error]: ".len()..])
}

impl GhesReader {
    /// Read one message (prefix removed). `None`: not a GHES line. `Some(None)`: a GHES line
    /// that completes nothing. `Some(Some(event))`: a PCIe section named its device. `open` is
    /// the report the log has open, which a register line of the section that made it decodes
    /// into.
    pub fn line(
        &mut self,
        message: &str,
        (line_number, boot, stamp): (usize, u32, Option<Stamp>),
        open: Option<&mut AerEvent>,
    ) -> Option<Option<AerEvent>> {
        let Some(text) = field(message) else {
            if !message.trim_start().starts_with("pcieport") {
                // The record's own follow-on AER lines keep it open; anything else ends it.
                self.open = false;
            }
            return None;
        };
        let t = text.trim();
        if t.starts_with("Hardware error from APEI Generic Hardware Error Source") {
            *self = GhesReader {
                open: true,
                first_line: message.trim().to_string(),
                ..GhesReader::default()
            };
            return Some(None);
        }
        if !self.open {
            return Some(None);
        }
        if let Some(rest) = t.strip_prefix("aer_cor_status:") {
            self.cor = register(rest);
            self.decode(open);
        } else if let Some(rest) = t.strip_prefix("aer_uncor_status:") {
            self.uncor = register(rest);
            self.decode(open);
        } else if let Some(rest) = t.strip_prefix("event severity:") {
            self.event = cper_severity(rest);
        } else if let Some((_, kind)) = t.strip_prefix("Error ").and_then(|r| r.split_once("type:"))
        {
            self.section = cper_severity(kind);
            (self.pcie, self.emitted, self.cor, self.uncor) = (false, false, None, None);
        } else if let Some(kind) = t.strip_prefix("section_type:") {
            self.pcie = kind.trim() == "PCIe error";
        } else if let Some(rest) = t.strip_prefix("device_id:")
            && self.pcie
            && let Some((bdf, _)) = take_bdf(rest.trim())
            && bdf.contains('.')
        {
            let severity = self.section.or(self.event)?;
            self.emitted = true;
            return Some(Some(AerEvent {
                device: bdf,
                driver: "ghes".to_string(),
                severity,
                layer: None,
                received_by: None,
                errors: Vec::new(),
                first: None,
                multiple: false,
                line_number,
                boot,
                stamp,
                message: format!(
                    "{} (PCIe error, device_id {})",
                    self.first_line,
                    rest.trim()
                ),
            }));
        }
        Some(None)
    }

    /// The section's registers as error names in its open event (`cper_print_aer`: the
    /// correctable register for a corrected record, the uncorrectable one otherwise).
    fn decode(&self, open: Option<&mut AerEvent>) {
        let Some(event) = open.filter(|e| self.emitted && self.pcie && e.driver == "ghes") else {
            return;
        };
        let (register, table) = match event.severity {
            AerSeverity::Corrected => (self.cor, &COR_BITS[..]),
            _ => (self.uncor, &UNCOR_BITS[..]),
        };
        if let Some((status, mask)) = register {
            event.errors = bit_names(status, mask, table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<AerEvent> {
        let mut r = GhesReader::default();
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let (_, message) = super::super::split_line(line);
            let open = out.last_mut();
            if let Some(Some(e)) = r.line(message, (i + 1, 0, None), open) {
                out.push(e);
            }
        }
        out
    }

    fn data(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/data/kernel/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn real_records_become_aer_events() {
        let e = read(&data("ghes-pcie-recoverable-ovro-lwa-117.txt"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].device, "0000:5e:00.0");
        assert_eq!(e[0].severity, AerSeverity::NonFatal);
        assert_eq!(e[0].driver, "ghes");
        let e = read(&data("ghes-pcie-corrected-syslog-lkml-2020-06-27.txt"));
        assert_eq!(e.len(), 2);
        assert!(
            e.iter()
                .all(|e| e.device == "0000:60:03.1" && e.severity == AerSeverity::Corrected)
        );
        // Two fatal sections of one record, on a root port; timestamps removed by the poster.
        let e = read(&data("ghes-pcie-fatal-mlx4-reboot-netdev-2019.txt"));
        assert_eq!(e.len(), 2);
        assert!(
            e.iter()
                .all(|e| e.device == "0000:80:03.0" && e.severity == AerSeverity::Fatal)
        );
        // Two records ({1}, {2}) on one root port, each followed by its AER lines.
        let e = read(&data("ghes-pcie-recoverable-root-port-ice-patch.txt"));
        assert_eq!(e.len(), 2);
        assert!(
            e.iter()
                .all(|e| e.device == "0000:c9:02.0" && e.severity == AerSeverity::NonFatal)
        );
    }

    #[test]
    fn registers_are_decoded_as_the_kernel_prints_them() {
        // A fatal record with both registers (netdev, tg3 AER at reboot, 2025): the
        // uncorrectable one is read, its masked bit left out; the correctable one is not.
        let e = read(&std::fs::read_to_string(format!(
            "{}/tests/data/judge/dmesg_ghes_pcie-error_fatal_aer_cor_status+aer_uncor_status_tg3_dell-r640_lore-tg3-aer.log",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].severity, AerSeverity::Fatal);
        assert_eq!(e[0].errors, ["UnsupReq"]);
        assert_eq!(
            register("0x00100000, aer_uncor_mask: 0x00010000"),
            Some((0x0010_0000, 0x0001_0000))
        );
        assert_eq!(register("0x00000041"), Some((0x41, 0)));
        assert_eq!(register("junk"), None);
        assert_eq!(
            bit_names(0x0000_3041, 0x1000, &COR_BITS),
            ["RxErr", "BadTLP", "NonFatalErr"]
        );
        assert_eq!(bit_names(0x8000_0020, 0, &UNCOR_BITS), ["SDES", "bit 31"]);
        // A corrected record reads the correctable register.
        let text = "{4}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1\n\
{4}[Hardware Error]: event severity: corrected\n\
{4}[Hardware Error]:  Error 0, type: corrected\n\
{4}[Hardware Error]:   section_type: PCIe error\n\
{4}[Hardware Error]:   device_id: 0000:01:00.0\n\
{4}[Hardware Error]:   aer_cor_status: 0x00000001, aer_cor_mask: 0x00000000\n\
{4}[Hardware Error]:   aer_uncor_status: 0x00000000, aer_uncor_mask: 0x00000000\n";
        let e = read(text);
        assert_eq!(e[0].errors, ["RxErr"]);
    }

    #[test]
    fn only_pcie_sections_inside_a_record_count() {
        // A memory section's device_id is not a PCI address, and a device_id line outside a
        // record is not read.
        let text = "{3}[Hardware Error]:   device_id: 0000:01:00.0\n\
{4}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1\n\
{4}[Hardware Error]: event severity: corrected\n\
{4}[Hardware Error]:  Error 0, type: corrected\n\
{4}[Hardware Error]:   section_type: memory error\n\
{4}[Hardware Error]:   device_id: 0000:01:00.0\n";
        assert!(read(text).is_empty());
        assert!(field("x[Hardware Error]: y").is_none());
        assert_eq!(field("[Hardware Error]: y"), Some("y"));
    }
}
