//! The kernel-log lines around the XIDs that say what happened to a device since: PCIe AER
//! reports, and the lines after which an earlier fault no longer describes the device (a boot,
//! the NVIDIA driver loading, the device enumerated again, a recovery). Recognisers only: each
//! takes the message text (prefix removed) and returns what it says, or `None`.
//!
//! Line shapes and where they come from (kernel and driver sources, real logs):
//! - `Linux version 5.15.0-105-generic (buildd@...) ...`: the first line of every boot
//!   (`init/version.c` `linux_banner`); `journalctl` prints `-- Boot <id> --` between boots.
//! - `NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build ...`:
//!   printed once per load of `nvidia.ko` (open-gpu-kernel-modules `kernel-open/nvidia/nv.c`,
//!   `nv_printf(NV_DBG_ERRORS, "NVRM: loading %s\n", pNVRM_ID)`); every GPU is initialised
//!   afresh after it (NVIDIA/NVSentinel#155 shows it after a GPU fell off the bus).
//! - `pci 0000:2b:00.0: [10de:2330] type 00 class 0x030200`: the PCI core enumerating a function
//!   (`drivers/pci/probe.c` `pci_setup_device`; at boot, and again after a remove/rescan or a
//!   hot reset that re-probes the slot; kernel 6.x appends ` PCIe Endpoint`), as in
//!   `[    0.110779] pci 0000:00:1f.0: [8086:9cc3] type 00 class 0x060100` (NVIDIA/nvidia-docker#895).
//! - `nvidia-nvswitch: Probing device 0000:05:00.0, Vendor Id = 0x10de, ...`: the NVSwitch driver
//!   taking a switch (again, after a reset).
//! - `GPU reset executed: GPU-<uuid>, success: true`: what NVSentinel's GPU-reset workflow
//!   writes to syslog after `nvidia-smi -r` (its `gpu-reset` script; the NVIDIA driver itself
//!   prints nothing on a reset the kernel log could show).
//! - PCIe AER (`drivers/pci/pcie/aer.c`, `err.c`; Documentation/PCI/pcieaer-howto.rst): the root
//!   port says it received a message (`AER: Uncorrected (Fatal) error received: 0000:00:03.0`,
//!   older kernels `... error received: id=0010`, 6.x `AER: Correctable error message received
//!   from 0000:00:00.0`), the erring device (or the port itself) prints `PCIe Bus Error:
//!   severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)`, its `device
//!   [8086:6f08] error status/mask=00004020/00000000` and one `[ 5] SDES` line per error bit
//!   (`(First)` marks the first); then `AER: can't recover (no error_detected callback)` /
//!   `AER: device recovery failed` or `AER: device recovery successful`. Real logs:
//!   rwth-i6/returnn#1500 (dmesg -H, kernel 5.x), wilicc/gpu-burn#1 (id= form, Surprise Down
//!   above an NVIDIA GPU), pop-os/pop#3363 (6.x Correctable), hirschmann/nbfc#181.

use serde::Serialize;

use super::lines::take_bdf;
use super::stamp::Stamp;

/// How bad an AER error is (the `severity=` word, old and new spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AerSeverity {
    /// `Corrected` / `Correctable`: the link retried and recovered by itself.
    Corrected,
    /// `Uncorrected (Non-Fatal)` / `Uncorrectable (Non-Fatal)`: a transaction was lost.
    NonFatal,
    /// `Uncorrected (Fatal)` / `Uncorrectable (Fatal)`: the link is unreliable; reset needed.
    Fatal,
}

impl AerSeverity {
    pub fn name(self) -> &'static str {
        match self {
            AerSeverity::Corrected => "corrected",
            AerSeverity::NonFatal => "uncorrected non-fatal",
            AerSeverity::Fatal => "uncorrected fatal",
        }
    }
}

/// One AER report: a `PCIe Bus Error` line with the status and error-bit lines after it, or a
/// lone `error received` line (the kernel rate-limits the detail lines).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AerEvent {
    /// The function that printed the report (the erring device, or the port that saw it):
    /// "0000:2a:00.0".
    pub device: String,
    /// The driver name in the line's prefix: "pcieport", "nvidia", "mlx5_core".
    pub driver: String,
    pub severity: AerSeverity,
    /// `type=`: "Physical Layer", "Data Link Layer", "Transaction Layer", "Inaccessible".
    pub layer: Option<String>,
    /// The root port that received the message (`pcieport 0000:00:03.0: AER: ... received`).
    pub received_by: Option<String>,
    /// Error-bit names as printed (`SDES`, `Surprise Down Error`, `CmpltTO`, `Receiver Error`).
    pub errors: Vec<String>,
    /// The bit marked `(First)`.
    pub first: Option<String>,
    /// `Multiple ... error received`: more errors arrived than were logged.
    pub multiple: bool,
    pub line_number: usize,
    pub boot: u32,
    pub stamp: Option<Stamp>,
    /// The report's first line, prefix removed.
    pub message: String,
}

/// A GPU or NIC named by its own driver's line inside an AER burst.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AerNamed {
    pub device: String,
    /// `nvidia`, `mlx5_core`.
    pub driver: String,
    pub line_number: usize,
    pub boot: u32,
}

/// Drivers whose devices are the GPUs and NICs the AER check judges.
pub(super) fn is_end_driver(driver: &str) -> bool {
    matches!(
        driver,
        "nvidia" | "mlx5_core" | "mlx4_core" | "bnxt_en" | "ice"
    )
}

/// The PCI core's lines about a device during AER recovery that are not AER reports themselves
/// (`drivers/pci/pcie/err.c`: `device has %s`, as in `nvidia 0000:02:00.0: device has no
/// AER-aware driver`, wilicc/gpu-burn#1).
pub(super) fn names_aer_burst(rest: &str) -> bool {
    let t = rest.trim_start();
    t.starts_with("device has no AER-aware driver") || t.starts_with("AER:")
}

/// A line after which earlier faults may no longer describe a device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Marker {
    pub kind: MarkerKind,
    /// The function it concerns; `None` for every device (a boot, the driver loading).
    pub device: Option<String>,
    /// For [`MarkerKind::ResetExecuted`]: the GPU's UUID as the line names it.
    pub uuid: Option<String>,
    pub line_number: usize,
    pub boot: u32,
    pub stamp: Option<Stamp>,
    /// The line, prefix removed.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerKind {
    /// `Linux version ...` or a journal boot separator.
    Boot,
    /// `NVRM: loading NVIDIA ...`: every GPU and NVSwitch initialised again.
    DriverLoad,
    /// `pci <bdf>: [vvvv:dddd] type ..`: the function enumerated again.
    PciEnumerated,
    /// `nvidia-nvswitch: Probing device <bdf>`.
    NvswitchProbe,
    /// `GPU reset executed: GPU-<uuid>, success: true` (NVSentinel).
    ResetExecuted,
    /// `AER: device recovery successful` from a port: it and the devices below recovered.
    AerRecovered,
    /// `AER: can't recover ...` / `AER: device recovery failed`: they did not.
    AerFailed,
}

/// `Linux version ` at the start of a message, or a journal boot separator line.
pub(super) fn is_boot(body: &str, raw: &str) -> bool {
    let raw = raw.trim_start();
    body.starts_with("Linux version ")
        || raw.starts_with("-- Boot ")
        || raw.starts_with("-- Reboot --")
}

/// `NVRM: loading NVIDIA UNIX ...` (both the open and the proprietary module).
pub(super) fn is_driver_load(body: &str) -> bool {
    body.contains("NVRM: loading NVIDIA")
}

/// `pci 0000:2b:00.0: [10de:2330] type 00 class 0x030200` -> "0000:2b:00.0".
pub(super) fn pci_enumerated(body: &str) -> Option<String> {
    let rest = body.strip_prefix("pci ")?;
    let (bdf, rest) = take_bdf(rest)?;
    let rest = rest.strip_prefix(": [")?;
    let (ids, rest) = rest.split_once(']')?;
    let (vendor, device) = ids.split_once(':')?;
    let hex4 = |s: &str| s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex4(vendor) && hex4(device) && rest.starts_with(" type ")).then_some(bdf)
}

/// `nvidia-nvswitch: Probing device 0000:05:00.0, ...` -> "0000:05:00.0".
pub(super) fn nvswitch_probe(body: &str) -> Option<String> {
    let at = body.find("nvidia-nvswitch: Probing device ")?;
    let rest = &body[at + "nvidia-nvswitch: Probing device ".len()..];
    take_bdf(rest).map(|(bdf, _)| bdf)
}

/// `GPU reset executed: GPU-<uuid>[, success: true|false]` -> (uuid, success). A line without
/// the success field (older NVSentinel) is a success.
pub(super) fn reset_executed(body: &str) -> Option<(String, bool)> {
    let at = body.find("GPU reset executed: ")?;
    let rest = &body[at + "GPU reset executed: ".len()..];
    let uuid: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if !uuid.starts_with("GPU-") || uuid.len() <= 4 {
        return None;
    }
    let success = !rest.contains("success: false");
    Some((uuid, success))
}

/// `<driver> <bdf>: <rest>`: the device prefix `dev_printk` puts on a line.
pub(super) fn device_prefix(body: &str) -> Option<(&str, String, &str)> {
    let (driver, rest) = body.split_once(' ')?;
    if driver.is_empty()
        || driver.len() > 32
        || !driver
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return None;
    }
    let (bdf, rest) = take_bdf(rest)?;
    // A full address with a function digit, as dev_printk prints it.
    if !bdf.contains('.') {
        return None;
    }
    let rest = rest.strip_prefix(':')?;
    Some((driver, bdf, rest))
}

/// What one AER line (after the device prefix) says.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AerLine {
    /// `AER: [Multiple ]<Severity> error received: <bdf>|id=<hex>` (and 6.x `... error message
    /// received from <bdf>`): the source, when the line names one.
    Received {
        severity: AerSeverity,
        source: Option<String>,
        multiple: bool,
    },
    /// `[AER: ]PCIe Bus Error: severity=..., type=..., (...)`.
    BusError {
        severity: AerSeverity,
        layer: Option<String>,
    },
    /// `  device [8086:6f08] error status/mask=00004020/00000000`.
    Status,
    /// `   [ 5] SDES                   (First)`.
    Bit { name: String, first: bool },
    /// `AER: device recovery successful`.
    Recovered,
    /// `AER: can't recover (...)` / `AER: device recovery failed`.
    Failed,
}

fn severity(text: &str) -> Option<AerSeverity> {
    let t = text.trim();
    if t.starts_with("Corrected") || t.starts_with("Correctable") {
        Some(AerSeverity::Corrected)
    } else if t.starts_with("Uncorrected (Fatal)") || t.starts_with("Uncorrectable (Fatal)") {
        Some(AerSeverity::Fatal)
    } else if t.starts_with("Uncorrected (Non-Fatal)") || t.starts_with("Uncorrectable (Non-Fatal)")
    {
        Some(AerSeverity::NonFatal)
    } else {
        None
    }
}

/// The requester id of old kernels' `id=0010` (bus 0x00, device 2, function 0), in the
/// domain of the port that printed it.
fn requester_id(hex: &str, domain_of: &str) -> Option<String> {
    let digits: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    let id = u32::from_str_radix(&digits, 16).ok()?;
    let domain = domain_of.split(':').next()?;
    Some(format!(
        "{domain}:{:02x}:{:02x}.{}",
        id >> 8,
        (id >> 3) & 0x1f,
        id & 7
    ))
}

/// Read the part of an AER line after `<driver> <bdf>:`; `printer` is that bdf.
pub(super) fn aer_line(rest: &str, printer: &str) -> Option<AerLine> {
    let text = rest.trim_start();
    let text_no_tag = text
        .strip_prefix("AER:")
        .map(str::trim_start)
        .unwrap_or(text);
    if text_no_tag.starts_with("device recovery successful") {
        return Some(AerLine::Recovered);
    }
    if text_no_tag.starts_with("can't recover") || text_no_tag.starts_with("device recovery failed")
    {
        return Some(AerLine::Failed);
    }
    if let Some(at) = text_no_tag.find("PCIe Bus Error: severity=") {
        let after = &text_no_tag[at + "PCIe Bus Error: severity=".len()..];
        let severity = severity(after)?;
        let layer = after
            .split_once("type=")
            .map(|(_, t)| t.split(',').next().unwrap_or_default().trim().to_string());
        return Some(AerLine::BusError {
            severity,
            layer: layer.filter(|l| !l.is_empty()),
        });
    }
    if let Some((head, tail)) = text_no_tag
        .split_once(" error received")
        .or_else(|| text_no_tag.split_once(" error message received"))
    {
        let (multiple, head) = match head.strip_prefix("Multiple ") {
            Some(h) => (true, h),
            None => (false, head),
        };
        let severity = severity(head)?;
        let tail = tail.trim_start_matches(':').trim_start();
        let tail = tail.strip_prefix("from ").unwrap_or(tail).trim_start();
        let source = match tail.strip_prefix("id=") {
            Some(hex) => requester_id(hex, printer),
            None => take_bdf(tail).map(|(b, _)| b),
        };
        return Some(AerLine::Received {
            severity,
            source,
            multiple,
        });
    }
    if text_no_tag.starts_with("device [") && text_no_tag.contains("error status/mask=") {
        return Some(AerLine::Status);
    }
    if let Some(inner) = text_no_tag.strip_prefix('[') {
        let (num, name) = inner.split_once(']')?;
        if num.trim().is_empty() || !num.trim().bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let first = name.contains("(First)");
        let name = name.replace("(First)", "");
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        return Some(AerLine::Bit {
            name: name.to_string(),
            first,
        });
    }
    None
}

/// Error-bit names the kernel prints for a link that went down under the device (short and
/// long forms: `SDES`, `Surprise Down Error`).
pub fn is_surprise_down(name: &str) -> bool {
    name == "SDES" || name.eq_ignore_ascii_case("Surprise Down Error")
}
