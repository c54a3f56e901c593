//! NVIDIA XID (GPU) and SXID (NVSwitch) events read from kernel-log text, the PCIe AER reports and
//! the recovery lines around them (`events.rs`), each line's time and boot (`stamp.rs`), and the
//! catalogues that say what each XID (`catalogue.rs`) and SXID (`sxid.rs`) means. Pure: text in,
//! facts out; no I/O, and no judgment beyond the catalogue lookup (the checks decide).
//!
//! Line formats follow reference/gpu-health.md §8; the catalogue encodes §9 (thresholds in §10
//! are the check's business). Sources:
//! - gpud's matcher, regex `NVRM: Xid \(((?:PCI:)?[0-9a-fA-F:]+)\).*?: (\d+),`
//!   (`leptonai/gpud` `components/accelerator/nvidia/xid/kmsg.go`) and its fallen-off-the-bus
//!   fallbacks (`kmsg_test.go`); this parser is hand-written with `str` methods (no regex crate);
//! - NVIDIA's XID catalogue, <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>
//!   (immediate / investigatory "resolution buckets");
//! - `/dev/kmsg` record format, `Documentation/ABI/testing/dev-kmsg` in the Linux tree;
//! - the XID 119 history table printed by `kgspLogRpcDebugInfo` (open-gpu-kernel-modules
//!   `kernel_gsp.c`).
//!
//! Accepted input, one kernel message per line, in any mix of:
//! - raw `/dev/kmsg` records `<prio>,<seq>,<usec>,<flags>[,...];<text>` (the timestamp kept is
//!   `<usec>`); the record's continuation lines start with a space and carry `KEY=value`
//!   dictionary entries (` SUBSYSTEM=pci`, ` DEVICE=+pci:0000:2b:00.0`): they are ignored;
//! - `dmesg` (`[  123.456789] `), `dmesg -T` (`[Mon Nov 30 07:01:02 2026] `), `dmesg -r`
//!   (`<4>[ 12.3] `), syslog / journal (`Nov 30 07:01:02 host kernel: ` with or without a
//!   following `[ 12.3] `), `dmesg -H` (`[Nov30 07:01] ` then `[  +0.000844] `), or no
//!   prefix at all.
//!
//! Choices worth knowing:
//! - **Continuation lines.** XID 119 (and other GSP errors) are followed by a GSP RPC history
//!   table that is not a new record. A following `NVRM:` line is appended (with `\n`) to the
//!   previous XID's `message` when its text is indented (`NVRM:     entry function ...`), is a
//!   `GPU<n> ... RPC ...` line (`NVRM: GPU4 RPC history (CPU -> GSP):`), or is an all-asterisk
//!   banner (`NVRM: _kgspLogXid119: ****`). Any other line (a new record, a non-NVRM line such
//!   as `CPU: 36 PID: ...`) ends the record. The banner and note printed *before* the Xid line
//!   (`... GSP Timeout ...`) are not attached to anything.
//! - **Fallen off the bus without an Xid tag** (`NVRM: GPU 0000:2b:00.0: GPU has fallen off the
//!   bus.`, `NVRM: GPU at 0000:01:00.0 has fallen off the bus.`, and the three-line
//!   `NVRM: The NVIDIA GPU <bdf>` ... `fallen off the bus and is not responding to commands.`)
//!   become XID 79 only when the log holds no explicit `Xid ...: 79` for that bus id, and at
//!   most once per bus id, so one fall is never counted twice.
//! - **GSP timeouts without an Xid** are XID 119 where no explicit 119/120 names them (`gsp.rs`).
//! - **Unreadable bus id.** An Xid line whose bus-id field is present but not an address
//!   (`NVRM: Xid (PCI:...): 145, ...`) is kept with `pci_bus_id: None`: the XID number is what
//!   matters. The field must be short and free of spaces and parentheses, or the line is junk.
//! - **SXID triplets.** The NVSwitch driver follows an SXID line with `Severity N Engine
//!   instance ...` and `Data {...}` lines for the same SXID and bus id; those are appended (with
//!   `\n`) to the previous event's `detail` instead of counted again. A `Severity` line with no
//!   such predecessor is its own event (`fatal: None`).
//! - **Damage.** A line that mentions `Xid`/`SXid` as a word but does not parse counts in
//!   `skipped_lines`; nothing panics, and work is linear in the input. Lines are cut at
//!   [`MAX_LINE_BYTES`] and only the last [`MAX_LINES`] lines are read (the newest messages
//!   matter most; a kernel ring buffer holds far fewer). `line_number` stays the line's number
//!   in the whole input.
//! - **Time.** Every line's stamp is read (`stamp.rs`), deltas added to the last absolute
//!   stamp, and boots counted (`Linux version`, journal `-- Boot` separators, since-boot stamps
//!   that start over); events carry their stamp and boot, and a step back in time within a boot
//!   is counted in `out_of_order`, never reordered.

mod catalogue;
pub mod events;
mod ghes;
mod gsp;
mod lines;
mod nic;
mod software;
pub mod stamp;
pub mod sxid;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_events;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use catalogue::{CATALOGUED_XIDS, XidInfo, XidSeverity, xid_info};
pub use events::{AerEvent, AerNamed, AerSeverity, Marker, MarkerKind};
use events::{AerLine, aer_line, device_prefix};
use lines::{
    clip, fallen_off_bus_id, is_continuation, is_kmsg_dictionary, mentions_xid, parse_uuid_line,
    prefix_timestamp, split_kmsg, split_prefix, take_bdf, take_bus_field, take_field, take_number,
};
pub use nic::{NicEvent, NicEventKind};
pub use software::{MAX_SOFTWARE_EVENTS, SoftwareEvent, SoftwareEventKind};
use stamp::RawStamp;
pub use stamp::{Clock, Stamp, When};

/// Only the last this-many lines of the input are read; earlier lines are ignored.
pub const MAX_LINES: usize = 200_000;
/// NIC events kept (a flapping port prints two lines per flap; the newest matter, but a log
/// holding more than this is judged on the first ones and says so by the count).
pub const MAX_NIC_EVENTS: usize = 4096;
/// Longer lines are cut here (kernel messages are at most about 1 KiB; longer is junk).
pub const MAX_LINE_BYTES: usize = 8 * 1024;

/// One `NVRM: Xid` record (or a fallen-off-the-bus line read as XID 79).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XidEvent {
    pub xid: u32,
    /// sysfs form with function digit: "0000:2b:00.0" (XID lines print `PCI:0000:2b:00` without
    /// the function, read as `.0`); lower case; `None` when the field is unreadable.
    pub pci_bus_id: Option<String>,
    /// `pid=` as printed, quotes removed: "1797828", "<unknown>"; `None` when absent.
    pub pid: Option<String>,
    /// `name=` as printed: "pt_main_thread", "<unknown>"; `None` when absent.
    pub process: Option<String>,
    /// The text after the pid/name fields (or after "<xid>, ").
    pub detail: String,
    /// As printed: "[  123.456789]", "[Mon Nov 30 07:01:02 2026]", "Nov 30 07:01:02" (syslog),
    /// or the kmsg `<usec>` field "1234567".
    pub timestamp: Option<String>,
    /// The message from `NVRM:` on, without kmsg/dmesg/syslog prefixes; continuation lines
    /// appended with "\n".
    pub message: String,
    /// 1-based line of the record start.
    pub line_number: usize,
    /// The time the line's prefix gives (see [`stamp`]); `None` without one.
    pub stamp: Option<Stamp>,
    /// Which boot of the log wrote it: 0 for the first, counting `Linux version` lines, journal
    /// boot separators and since-boot stamps that start over.
    pub boot: u32,
}

/// One `nvidia-nvswitchN: SXid` record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SxidEvent {
    pub sxid: u32,
    /// sysfs form "0000:05:00.0" (SXID lines print the function digit); `None` when unreadable.
    pub pci_bus_id: Option<String>,
    /// The reporting driver instance, "nvidia-nvswitch3".
    pub switch: Option<String>,
    /// `Fatal` -> true, `Non-fatal` -> false, anything else (`Severity 1 ...`) -> `None`.
    pub fatal: Option<bool>,
    /// Text after the fatal/non-fatal word; `Severity`/`Data` follow-up lines appended with "\n".
    pub detail: String,
    /// The NVLink port the detail names (`Link 48 LTSSM Fault Up`), when it names one.
    pub link: Option<u32>,
    pub line_number: usize,
    /// As printed (see [`XidEvent::timestamp`]).
    pub timestamp: Option<String>,
    pub stamp: Option<Stamp>,
    pub boot: u32,
}

/// Everything XID-related found in one kernel log, and the PCIe AER reports and recovery
/// lines around it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelLog {
    /// In log order.
    pub xids: Vec<XidEvent>,
    /// In log order.
    pub sxids: Vec<SxidEvent>,
    /// PCIe AER reports, in log order.
    pub aer: Vec<AerEvent>,
    /// Boots, driver loads, re-enumerations and recoveries, in log order.
    pub markers: Vec<Marker>,
    /// GPUs and NICs an AER burst names by their driver's own line (`nvidia 0000:03:00.0: AER:
    /// can't recover ...`, `nvidia 0000:02:00.0: device has no AER-aware driver`): who a report
    /// from a port no longer in sysfs was about.
    pub aer_named: Vec<AerNamed>,
    /// ConnectX NIC events (`nic.rs`): probe failures, firmware health, hot modules, slot
    /// power, link state changes; in log order, at most [`MAX_NIC_EVENTS`].
    pub nic_events: Vec<NicEvent>,
    /// Peer-memory errors and crashes inside NCCL (`software.rs`), at most
    /// [`MAX_SOFTWARE_EVENTS`]; `software_dropped` counts those past it.
    pub software_events: Vec<SoftwareEvent>,
    pub software_dropped: usize,
    /// Boots the log spans (1 for a log of one boot; the last is the current one when the log
    /// is the node's own).
    pub boots: u32,
    /// Lines whose since-boot stamp went back in time without a new boot (out of order).
    pub out_of_order: usize,
    /// Lines read, and how many of them carried a timestamp.
    pub lines: usize,
    pub stamped_lines: usize,
    /// Bus id ("0000:2b:00.0") -> "GPU-<uuid>", from `NVRM: GPU at PCI:0000:2b:00: GPU-<uuid>`.
    pub uuids: BTreeMap<String, String>,
    /// Lines that mention `Xid`/`SXid` but could not be read (truncated, interleaved, damaged).
    pub skipped_lines: usize,
}

/// Parse kernel-log text (raw `/dev/kmsg`, `dmesg`, `dmesg -T`, syslog/journal, or a mix).
/// Never fails: what cannot be read is counted in `skipped_lines` (when it mentions an XID) or
/// ignored. Reads only the last [`MAX_LINES`] lines, each cut at [`MAX_LINE_BYTES`].
pub fn parse_kernel_log(text: &str) -> KernelLog {
    let total = text.lines().count();
    let first = total.saturating_sub(MAX_LINES);
    let mut parser = Parser::default();
    for (index, line) in text.lines().enumerate().skip(first) {
        parser.line(index + 1, line);
    }
    parser.finish()
}

/// The stamp text and the message of one kernel-log line, every prefix removed (kmsg, `<n>`
/// priorities, dmesg stamps, syslog and journal heads).
pub fn split_line(line: &str) -> (Option<&str>, &str) {
    split_prefix(line)
}

/// Whether the parser reads a message (prefix removed) that carries no NVIDIA keyword: a PCIe AER
/// report line, the PCI core enumerating a function, a ConnectX event, a firmware-first
/// (`[Hardware Error]`) record line, a peer-memory error or a crash line (what a capture keeps).
pub fn is_read_without_keyword(message: &str) -> bool {
    events::pci_enumerated(message).is_some()
        || device_prefix(message).is_some_and(|(_, bdf, rest)| aer_line(rest, &bdf).is_some())
        || nic::nic_event(message).is_some()
        || message.contains("[Hardware Error]")
        || software::is_software_line(message)
}

// ---------------------------------------------------------------------------------------------
// The line parser.

/// A "The NVIDIA GPU <bdf>" line waiting for its "fallen off the bus" line.
struct PendingFallen {
    bus_id: String,
    timestamp: Option<String>,
    stamp: Option<Stamp>,
    message: String,
    line_number: usize,
    lines_left: u8,
}

/// A root port's `AER: ... error received` line waiting for the `PCIe Bus Error` report it
/// announces.
struct PendingReceived {
    port: String,
    source: Option<String>,
    severity: AerSeverity,
    multiple: bool,
    line_number: usize,
    stamp: Option<Stamp>,
    message: String,
}

#[derive(Default)]
struct Parser {
    log: KernelLog,
    /// Fallen-off-the-bus events, merged (deduplicated) in `finish`.
    companions: Vec<XidEvent>,
    /// GSP timeouts without an Xid line and their GPU instance (`gsp.rs`), merged in `finish`.
    gsp_timeouts: Vec<(String, XidEvent)>,
    /// Index into `log.xids` of the record continuation lines attach to.
    open_xid: Option<usize>,
    /// Index into `log.sxids` of the record `Severity`/`Data` lines attach to.
    open_sxid: Option<usize>,
    pending_fallen: Option<PendingFallen>,
    /// Index into `log.aer` of the report its error-bit lines attach to.
    open_aer: Option<usize>,
    pending_received: Option<PendingReceived>,
    /// A firmware-first (APEI GHES) error record being read (`ghes.rs`).
    ghes: ghes::GhesReader,
    software: software::SoftwareReader,
    // The log's clock as read so far.
    boot: u32,
    lines_in_boot: usize,
    last_since_boot: Option<f64>,
    /// The last absolute stamp, for `dmesg -H` deltas.
    anchor: Option<Stamp>,
}

impl Parser {
    fn line(&mut self, line_number: usize, raw: &str) {
        let raw = clip(raw, MAX_LINE_BYTES).trim_end();
        if raw.trim_start().is_empty() || is_kmsg_dictionary(raw) {
            return;
        }
        let (stamp_text, message_text) = split_prefix(raw);
        let stamp = self.track_time(line_number, stamp_text, message_text, raw);
        let (kmsg_usec, body) = match split_kmsg(raw) {
            Some((usec, text)) => (Some(usec), text),
            None => (None, raw.trim_start()),
        };
        let timestamp = |prefix: &str| {
            kmsg_usec
                .map(str::to_string)
                .or_else(|| prefix_timestamp(prefix))
        };
        if events::is_driver_load(message_text) {
            self.marker(
                MarkerKind::DriverLoad,
                None,
                line_number,
                stamp,
                message_text,
            );
        }

        if let Some(pos) = body.find("SXid (") {
            self.open_xid = None;
            self.pending_fallen = None;
            self.sxid_line(line_number, body, pos, stamp_text, stamp);
            return;
        }
        self.open_sxid = None;

        let Some(nvrm) = body.find("NVRM:") else {
            self.close();
            if !self.other_line(line_number, message_text, raw, stamp) {
                self.skip_if_mentions_xid(body);
            }
            return;
        };

        if let Some(pos) = body.find("NVRM: Xid (") {
            self.close();
            let at = (stamp, self.boot);
            match parse_xid(&body[pos..], timestamp(&body[..pos]), line_number, at) {
                Some(event) => {
                    self.log.xids.push(event);
                    self.open_xid = Some(self.log.xids.len() - 1);
                }
                None => self.log.skipped_lines += 1,
            }
            return;
        }

        let message = body[nvrm..].trim_end();
        let after = &body[nvrm + "NVRM:".len()..];
        let text = after.trim();

        if let Some(mut pending) = self.pending_fallen.take() {
            if text.contains("fallen off the bus") {
                self.open_xid = None;
                self.companions.push(XidEvent {
                    xid: 79,
                    pci_bus_id: Some(pending.bus_id),
                    pid: None,
                    process: None,
                    detail: text.to_string(),
                    timestamp: pending.timestamp,
                    message: format!("{}\n{}", pending.message, message),
                    line_number: pending.line_number,
                    stamp: pending.stamp,
                    boot: self.boot,
                });
                return;
            }
            pending.lines_left = pending.lines_left.saturating_sub(1);
            if pending.lines_left > 0 {
                self.pending_fallen = Some(pending);
            }
        }

        if let Some(bus_id) = fallen_off_bus_id(text) {
            self.open_xid = None;
            self.companions.push(XidEvent {
                xid: 79,
                pci_bus_id: Some(bus_id),
                pid: None,
                process: None,
                detail: text.to_string(),
                timestamp: timestamp(&body[..nvrm]),
                message: message.to_string(),
                line_number,
                stamp,
                boot: self.boot,
            });
            return;
        }
        if let Some(rest) = text.strip_prefix("The NVIDIA GPU ")
            && let Some((bus_id, _)) = take_bdf(rest)
        {
            self.open_xid = None;
            self.pending_fallen = Some(PendingFallen {
                bus_id,
                timestamp: timestamp(&body[..nvrm]),
                stamp,
                message: message.to_string(),
                line_number,
                lines_left: 2,
            });
            return;
        }
        if let Some((bus_id, uuid)) = parse_uuid_line(text) {
            self.open_xid = None;
            self.log.uuids.insert(bus_id, uuid);
            return;
        }
        if let Some(index) = self.open_xid
            && is_continuation(after)
        {
            if let Some(event) = self.log.xids.get_mut(index) {
                event.message.push('\n');
                event.message.push_str(message);
            }
            return;
        }
        self.open_xid = None;
        if let Some(instance) = gsp::timeout_instance(text) {
            let at = (timestamp(&body[..nvrm]), line_number, stamp, self.boot);
            let event = gsp::event(text, message, at);
            self.gsp_timeouts.push((instance.to_string(), event));
            return;
        }
        self.skip_if_mentions_xid(body);
    }

    /// Resolve the line's stamp (adding `dmesg -H` deltas to the last absolute one) and follow
    /// the boots: a `Linux version` line or journal separator starts one, and so does a
    /// since-boot stamp that starts over (below 10 s after one more than a minute later); any other
    /// step back in time is counted as out of order.
    fn track_time(
        &mut self,
        line_number: usize,
        stamp_text: Option<&str>,
        message: &str,
        raw: &str,
    ) -> Option<Stamp> {
        self.log.lines += 1;
        let stamp = match stamp_text.and_then(stamp::parse_stamp) {
            Some(RawStamp::Absolute(s)) => Some(s),
            Some(RawStamp::Delta(d)) => self.anchor.map(|a| a.plus(d)),
            None => None,
        };
        if stamp.is_some() {
            self.log.stamped_lines += 1;
            self.anchor = stamp;
        }
        let boot_line = events::is_boot(message, raw);
        let mut new_boot = boot_line;
        if let Some(Stamp::SinceBoot(t)) = stamp {
            match self.last_since_boot {
                Some(last) if t + 1.0 < last => {
                    if t < 10.0 && last > t + 60.0 {
                        new_boot = true;
                    } else {
                        self.log.out_of_order += 1;
                    }
                }
                _ => {}
            }
        }
        if new_boot && self.lines_in_boot > 0 {
            self.boot += 1;
            self.lines_in_boot = 0;
            self.last_since_boot = None;
            self.open_aer = None;
            self.pending_received = None;
        }
        if let Some(Stamp::SinceBoot(t)) = stamp {
            self.last_since_boot = Some(self.last_since_boot.map_or(t, |l| l.max(t)));
        }
        if boot_line {
            self.marker(MarkerKind::Boot, None, line_number, stamp, message);
        } else {
            self.lines_in_boot += 1;
        }
        stamp
    }

    fn marker(
        &mut self,
        kind: MarkerKind,
        device: Option<String>,
        line_number: usize,
        stamp: Option<Stamp>,
        message: &str,
    ) {
        self.log.markers.push(Marker {
            kind,
            device,
            uuid: None,
            line_number,
            boot: self.boot,
            stamp,
            message: message.trim().to_string(),
        });
    }

    /// A line that is neither NVRM nor SXid: a re-enumeration, an NVSwitch probe, a reset
    /// note, or a PCIe AER report. `true` when it was one of them.
    fn other_line(
        &mut self,
        line_number: usize,
        message: &str,
        raw: &str,
        stamp: Option<Stamp>,
    ) -> bool {
        if events::is_boot(message, raw) {
            return true;
        }
        if self.software.line(message, line_number, self.boot, stamp) {
            return true;
        }
        if let Some((kind, device, detail)) = nic::nic_event(message) {
            if self.log.nic_events.len() < MAX_NIC_EVENTS {
                self.log.nic_events.push(NicEvent {
                    kind,
                    device,
                    detail,
                    line_number,
                    boot: self.boot,
                    stamp,
                    message: message.trim().to_string(),
                });
            }
            return true;
        }
        let at = (line_number, self.boot, stamp);
        let open = self.open_aer.and_then(|i| self.log.aer.get_mut(i));
        if let Some(found) = self.ghes.line(message, at, open) {
            if let Some(event) = found {
                self.flush_received();
                self.log.aer.push(event);
                self.open_aer = Some(self.log.aer.len() - 1);
            }
            return true;
        }
        if let Some(bdf) = events::pci_enumerated(message) {
            self.marker(
                MarkerKind::PciEnumerated,
                Some(bdf),
                line_number,
                stamp,
                message,
            );
            return true;
        }
        if let Some(bdf) = events::nvswitch_probe(message) {
            self.marker(
                MarkerKind::NvswitchProbe,
                Some(bdf),
                line_number,
                stamp,
                message,
            );
            return true;
        }
        if let Some((uuid, success)) = events::reset_executed(message) {
            if success {
                self.marker(MarkerKind::ResetExecuted, None, line_number, stamp, message);
                if let Some(m) = self.log.markers.last_mut() {
                    m.uuid = Some(uuid);
                }
            }
            return true;
        }
        let Some((driver, bdf, rest)) = device_prefix(message) else {
            return false;
        };
        let line = aer_line(rest, &bdf);
        if events::is_end_driver(driver)
            && (line.is_some() || events::names_aer_burst(rest))
            && self.log.aer_named.len() < 4096
        {
            self.log.aer_named.push(AerNamed {
                device: bdf.clone(),
                driver: driver.to_string(),
                line_number,
                boot: self.boot,
            });
        }
        let Some(line) = line else {
            return events::names_aer_burst(rest);
        };
        match line {
            AerLine::Received {
                severity,
                source,
                multiple,
            } => {
                self.flush_received();
                self.pending_received = Some(PendingReceived {
                    port: bdf,
                    source,
                    severity,
                    multiple,
                    line_number,
                    stamp,
                    message: message.trim().to_string(),
                });
            }
            AerLine::BusError { severity, layer } => {
                // The report the pending `received` line announced: printed by its source (or
                // by the port itself when the source is the port).
                let announced = self.pending_received.take();
                let (received_by, multiple) = match announced {
                    Some(p) if p.source.as_deref().is_none_or(|s| s == bdf) || p.port == bdf => {
                        (Some(p.port), p.multiple)
                    }
                    Some(p) => {
                        self.pending_received = Some(p);
                        self.flush_received();
                        (None, false)
                    }
                    None => (None, false),
                };
                self.log.aer.push(AerEvent {
                    device: bdf,
                    driver: driver.to_string(),
                    severity,
                    layer,
                    received_by,
                    errors: Vec::new(),
                    first: None,
                    multiple,
                    line_number,
                    boot: self.boot,
                    stamp,
                    message: message.trim().to_string(),
                });
                self.open_aer = Some(self.log.aer.len() - 1);
            }
            AerLine::Status => {}
            AerLine::Bit { name, first } => {
                if let Some(event) = self.open_aer.and_then(|i| self.log.aer.get_mut(i))
                    && event.device == bdf
                    && event.errors.len() < 32
                {
                    if first {
                        event.first = Some(name.clone());
                    }
                    event.errors.push(name);
                }
            }
            AerLine::Recovered => self.marker(
                MarkerKind::AerRecovered,
                Some(bdf),
                line_number,
                stamp,
                message,
            ),
            AerLine::Failed => self.marker(
                MarkerKind::AerFailed,
                Some(bdf),
                line_number,
                stamp,
                message,
            ),
        }
        true
    }

    /// A `received` line no report followed (the kernel rate-limits the details): its own event,
    /// on the source it names (else the port).
    fn flush_received(&mut self) {
        let Some(p) = self.pending_received.take() else {
            return;
        };
        self.log.aer.push(AerEvent {
            device: p.source.clone().unwrap_or_else(|| p.port.clone()),
            driver: String::new(),
            severity: p.severity,
            layer: None,
            received_by: Some(p.port),
            errors: Vec::new(),
            first: None,
            multiple: p.multiple,
            line_number: p.line_number,
            boot: self.boot,
            stamp: p.stamp,
            message: p.message,
        });
        self.open_aer = None;
    }

    fn sxid_line(
        &mut self,
        line_number: usize,
        body: &str,
        pos: usize,
        stamp_text: Option<&str>,
        stamp: Option<Stamp>,
    ) {
        let Some(mut event) = parse_sxid(body, pos, line_number) else {
            self.open_sxid = None;
            self.log.skipped_lines += 1;
            return;
        };
        let follow_up = event.fatal.is_none()
            && (event.detail.starts_with("Severity ") || event.detail.starts_with("Data "));
        if follow_up
            && let Some(prev) = self.open_sxid.and_then(|i| self.log.sxids.get_mut(i))
            && prev.sxid == event.sxid
            && prev.pci_bus_id == event.pci_bus_id
        {
            prev.detail.push('\n');
            prev.detail.push_str(&event.detail);
            return;
        }
        event.timestamp = stamp_text.map(str::to_string);
        event.stamp = stamp;
        event.boot = self.boot;
        self.log.sxids.push(event);
        self.open_sxid = Some(self.log.sxids.len() - 1);
    }

    fn close(&mut self) {
        (self.open_xid, self.pending_fallen) = (None, None);
    }

    fn skip_if_mentions_xid(&mut self, text: &str) {
        self.log.skipped_lines += usize::from(mentions_xid(text));
    }

    fn finish(mut self) -> KernelLog {
        self.flush_received();
        self.log.boots = self.boot + 1;
        // Prefer the explicit `Xid ...: 79` line; keep one companion-derived event per bus id
        // only where the log has none.
        let explicit: BTreeSet<String> = (self.log.xids.iter())
            .filter(|e| e.xid == 79)
            .filter_map(|e| e.pci_bus_id.clone())
            .collect();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for event in self.companions {
            if let Some(bus_id) = event.pci_bus_id.clone()
                && !explicit.contains(&bus_id)
                && seen.insert(bus_id)
            {
                self.log.xids.push(event);
            }
        }
        gsp::merge(&mut self.log.xids, self.gsp_timeouts);
        self.log.xids.sort_by_key(|e| e.line_number);
        self.log.software_events = self.software.events;
        self.log.software_dropped = self.software.dropped;
        self.log
    }
}

/// `<xid-part>` starts at `NVRM: Xid (`.
fn parse_xid(
    text: &str,
    timestamp: Option<String>,
    line_number: usize,
    (stamp, boot): (Option<Stamp>, u32),
) -> Option<XidEvent> {
    let message = text.trim_end();
    let rest = text.get("NVRM: Xid (".len()..)?;
    let (pci_bus_id, rest) = take_bus_field(rest)?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let (xid, rest) = take_number(rest)?;
    let rest = rest.strip_prefix(',')?.trim_start();
    let (pid, rest) = take_field(rest, "pid=");
    let (process, rest) = take_field(rest, "name=");
    Some(XidEvent {
        xid,
        pci_bus_id,
        pid,
        process,
        detail: rest.trim().to_string(),
        timestamp,
        message: message.to_string(),
        line_number,
        stamp,
        boot,
    })
}

/// `body[pos..]` starts with `SXid (`; the switch name is the word before it.
fn parse_sxid(body: &str, pos: usize, line_number: usize) -> Option<SxidEvent> {
    let prefix = body[..pos].trim_end();
    let prefix = prefix.strip_suffix(':').unwrap_or(prefix);
    let switch = prefix
        .rsplit(|c: char| c.is_whitespace() || c == ']')
        .next()
        .filter(|w| w.contains("nvswitch"))
        .map(str::to_string);
    let rest = body.get(pos + "SXid (".len()..)?;
    let (pci_bus_id, rest) = take_bus_field(rest)?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let (sxid, rest) = take_number(rest)?;
    let rest = rest.strip_prefix(',')?.trim();
    let (word, after) = match rest.split_once(',') {
        Some((w, a)) => (w.trim(), a.trim()),
        None => (rest, ""),
    };
    let (fatal, detail) =
        if word.eq_ignore_ascii_case("non-fatal") || word.eq_ignore_ascii_case("nonfatal") {
            (Some(false), after)
        } else if word.eq_ignore_ascii_case("fatal") {
            (Some(true), after)
        } else {
            (None, rest)
        };
    Some(SxidEvent {
        sxid,
        pci_bus_id,
        switch,
        fatal,
        link: link_number(detail),
        detail: detail.to_string(),
        line_number,
        timestamp: None,
        stamp: None,
        boot: 0,
    })
}

/// `Link 48 LTSSM Fault Up` -> 48: the NVLink port an SXID names.
fn link_number(detail: &str) -> Option<u32> {
    let rest = detail.split("Link ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    digits.parse().ok()
}
