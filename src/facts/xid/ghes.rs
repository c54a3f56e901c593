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
    /// that completes nothing. `Some(Some(event))`: a PCIe section named its device.
    pub fn line(
        &mut self,
        message: &str,
        line_number: usize,
        boot: u32,
        stamp: Option<Stamp>,
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
        if let Some(rest) = t.strip_prefix("event severity:") {
            self.event = cper_severity(rest);
        } else if let Some((_, kind)) = t.strip_prefix("Error ").and_then(|r| r.split_once("type:"))
        {
            self.section = cper_severity(kind);
            self.pcie = false;
        } else if let Some(kind) = t.strip_prefix("section_type:") {
            self.pcie = kind.trim() == "PCIe error";
        } else if let Some(rest) = t.strip_prefix("device_id:")
            && self.pcie
            && let Some((bdf, _)) = take_bdf(rest.trim())
            && bdf.contains('.')
        {
            let severity = self.section.or(self.event)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<AerEvent> {
        let mut r = GhesReader::default();
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let (_, message) = super::super::split_line(line);
            if let Some(Some(e)) = r.line(message, i + 1, 0, None) {
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
