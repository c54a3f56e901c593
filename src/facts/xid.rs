//! NVIDIA XID (GPU) and SXID (NVSwitch) events read from kernel-log text, and the catalogue that
//! says what each XID means and what to do about it. Pure: text in, facts out; no I/O, and no
//! judgment beyond the catalogue lookup (the check decides pass/warn/fail).
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
//!   following `[ 12.3] `), or no prefix at all.
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

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::report::Action;

/// Only the last this-many lines of the input are read; earlier lines are ignored.
pub const MAX_LINES: usize = 200_000;
/// Longer lines are cut here (kernel messages are at most about 1 KiB; longer is junk).
pub const MAX_LINE_BYTES: usize = 8 * 1024;

/// One `NVRM: Xid` record (or a fallen-off-the-bus line read as XID 79).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

/// One `nvidia-nvswitchN: SXid` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    pub line_number: usize,
}

/// Everything XID-related found in one kernel log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KernelLog {
    /// In log order.
    pub xids: Vec<XidEvent>,
    /// In log order.
    pub sxids: Vec<SxidEvent>,
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

/// How much an XID says about the GPU on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum XidSeverity {
    /// The GPU (or node) needs the catalogue's action before it can be trusted again.
    Fatal,
    /// Most often the workload's own fault (the device plugin ignores these); check the workload.
    Application,
    /// No action of its own: another fact decides (63: NVML remapped rows; 92: ECC counters;
    /// 137 and non-fatal NVLink5 events: NVLink counters; 154: reports the recovery action for
    /// another XID).
    Informational,
    /// Not in the catalogue (reference/gpu-health.md §9), e.g. 999 from device-plugin logs.
    Unknown,
}

/// One catalogue row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct XidInfo {
    pub xid: u32,
    /// Short lowercase meaning: "gpu has fallen off the bus".
    pub name: &'static str,
    pub severity: XidSeverity,
    pub action: Action,
    /// NVIDIA's immediate / investigatory resolution buckets: "RESTART_BM / CONTACT_SUPPORT".
    pub nvidia_resolution: &'static str,
}

/// Every XID the catalogue knows (the rows of reference/gpu-health.md §9).
pub const CATALOGUED_XIDS: &[u32] = &[
    8, 13, 31, 32, 38, 43, 44, 45, 46, 48, 54, 56, 57, 58, 61, 62, 63, 64, 65, 68, 69, 73, 74, 79,
    80, 81, 92, 94, 95, 109, 110, 119, 120, 121, 136, 137, 140, 143, 144, 145, 146, 147, 148, 149,
    150, 151, 154, 155, 156, 158, 171, 172,
];

/// What an XID means and what to do (reference/gpu-health.md §9).
///
/// How the columns of §9 became one severity and one action:
/// - **Application**: the device plugin's ignore list (13, 31, 43, 45, 68, 109; gcm warns on all
///   of them) plus 8 (NVIDIA `RESTART_APP`, gpud Warning) -> [`Action::CheckWorkload`].
/// - **Informational**: 63 (NVIDIA `IGNORE / IGNORE`: the remap is the fix; NVML's remapped-rows
///   state decides pending/failure), 92 (`IGNORE`; the ECC counters decide), 137 (`IGNORE`), 154
///   (reports the recovery for another XID) -> [`Action::None`].
/// - **Fatal**: everything else in §9 (gpud Fatal, or NVIDIA's immediate bucket is a hardware
///   step). Action: NVIDIA's immediate bucket when it is one (`RESTART_BM` ->
///   [`Action::RebootNode`], `RESTART_VM` -> the node is the VM -> [`Action::RebootNode`],
///   `RESET_GPU` -> [`Action::ResetGpu`], `CONTACT_SUPPORT` / `CHECK_MECHANICALS` ->
///   [`Action::HardwareInspection`]); otherwise (`RESTART_APP`, `IGNORE`, `WORKFLOW_*`) gpud's
///   first repair step, which is reboot (its recurrence rule then escalates to inspection).
///
/// Unknown XIDs: [`XidSeverity::Unknown`], name "unknown xid", [`Action::None`].
pub fn xid_info(xid: u32) -> XidInfo {
    use XidSeverity::{Application, Fatal, Informational};
    let (name, severity, action, nvidia_resolution) = match xid {
        8 => (
            "gpu stopped processing (idle timeout)",
            Application,
            Action::CheckWorkload,
            "RESTART_APP / CONTACT_SUPPORT",
        ),
        13 => (
            "graphics engine exception",
            Application,
            Action::CheckWorkload,
            "RESTART_APP / WORKFLOW_XID_13",
        ),
        31 => (
            "gpu memory page fault (mmu fault)",
            Application,
            Action::CheckWorkload,
            "RESTART_APP / WORKFLOW_XID_31",
        ),
        32 => (
            "pbdma error (invalid or corrupted push buffer stream)",
            Fatal,
            Action::RebootNode,
            "RESTART_APP / CHECK_APP/CUDA",
        ),
        38 => (
            "driver firmware error (fecs watchdog timeout)",
            Fatal,
            Action::RebootNode,
            "IGNORE / CONTACT_SUPPORT",
        ),
        43 => (
            "gpu stopped processing (channel reset)",
            Application,
            Action::CheckWorkload,
            "IGNORE / CONTACT_SUPPORT",
        ),
        44 => (
            "graphics engine fault during context switch",
            Fatal,
            Action::RebootNode,
            "IGNORE / CONTACT_SUPPORT",
        ),
        45 => (
            "preemptive cleanup after earlier errors",
            Application,
            Action::CheckWorkload,
            "WORKFLOW_XID_45 (alone: RESTART_FM; with other xids: follow them)",
        ),
        46 => (
            "gpu timeout (gpu stopped processing)",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / CONTACT_SUPPORT",
        ),
        48 => (
            "double-bit ecc error",
            Fatal,
            Action::RebootNode,
            "WORKFLOW_XID_48 / WORKFLOW_XID_48",
        ),
        54 => (
            "auxiliary power not connected to the gpu board",
            Fatal,
            Action::HardwareInspection,
            "CHECK_MECHANICALS / CONTACT_SUPPORT",
        ),
        56 => (
            "display channel exception (catalog: unused)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        57 => (
            "fb link training failure (catalog: unused)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        58 => (
            "fb memory error (catalog: unused)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        61 => (
            "pmu breakpoint (catalog: unused)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        62 => (
            "internal micro-controller halt",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / CONTACT_SUPPORT",
        ),
        63 => (
            "row remap (page retirement) event",
            Informational,
            Action::None,
            "IGNORE / IGNORE",
        ),
        64 => (
            "row remap (page retirement) failure",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / CONTACT_SUPPORT (AWS: isolate and RMA)",
        ),
        65 => (
            "nvenc1 error (catalog: unused; gpud: row-remap related)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        68 => (
            "nvdec0 exception",
            Application,
            Action::CheckWorkload,
            "RESTART_APP / CONTACT_SUPPORT",
        ),
        69 => (
            "graphics engine class error",
            Fatal,
            Action::RebootNode,
            "RESTART_APP / CHECK_APP/CUDA",
        ),
        73 => (
            "nvenc2 error (catalog: unused)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        74 => (
            "nvlink error",
            Fatal,
            Action::RebootNode,
            "WORKFLOW_NVLINK_ERR / CONTACT_SUPPORT",
        ),
        79 => (
            "gpu has fallen off the bus",
            Fatal,
            Action::RebootNode,
            "RESTART_BM / CONTACT_SUPPORT",
        ),
        80 => (
            "corrupted data sent to gpu",
            Fatal,
            Action::RebootNode,
            "RESTART_APP / CHECK_APP/CUDA",
        ),
        81 => (
            "vga subsystem error (catalog: unused)",
            Fatal,
            Action::HardwareInspection,
            "CONTACT_SUPPORT",
        ),
        92 => (
            "high single-bit ecc error rate",
            Informational,
            Action::None,
            "IGNORE / CONTACT_SUPPORT",
        ),
        94 => (
            "contained memory error",
            Fatal,
            Action::RebootNode,
            "RESTART_APP / IGNORE (sympathetic)",
        ),
        95 => (
            "uncontained memory error",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / IGNORE (sympathetic)",
        ),
        109 => (
            "context switch timeout",
            Application,
            Action::CheckWorkload,
            "RESET_GPU / CONTACT_SUPPORT",
        ),
        110 => (
            "security fault",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / INVESTIGATE_SW",
        ),
        119 => (
            "gsp rpc timeout",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / INVESTIGATE_SW",
        ),
        120 => (
            "gsp error",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / INVESTIGATE_SW",
        ),
        121 => (
            "c2c link error",
            Fatal,
            Action::RebootNode,
            "IGNORE / CONTACT_SUPPORT",
        ),
        136 => (
            "nvlink training failed",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / INVESTIGATE_LINK_SI",
        ),
        137 => (
            "nvlink privilege error",
            Informational,
            Action::None,
            "IGNORE / XID_137_FLOW",
        ),
        140 => (
            "unrecovered ecc escape",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / CONTACT_SUPPORT",
        ),
        143 => (
            "gpu initialization error",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU / CONTACT_SUPPORT",
        ),
        144 => nvlink5("nvlink5 saw error"),
        145 => nvlink5("nvlink5 rlw error"),
        146 => nvlink5("nvlink5 tlw error"),
        147 => nvlink5("nvlink5 trex error"),
        148 => nvlink5("nvlink5 nvlpw_ctrl error"),
        149 => nvlink5("nvlink5 netir error"),
        150 => nvlink5("nvlink5 mse error"),
        151 => (
            "key rotation error (confidential computing)",
            Fatal,
            Action::RebootNode,
            "RESTART_VM / CONTACT_SUPPORT",
        ),
        154 => (
            "gpu recovery action changed",
            Informational,
            Action::None,
            "XID_154: the driver's recommended recovery for an earlier xid: 0x0 (None), \
             0x1 (GPU Reset Required), 0x4 (Drain and Reset), Node Reboot Required",
        ),
        155 => (
            "nvlink software error",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU",
        ),
        156 => (
            "resource retirement event",
            Fatal,
            Action::ResetGpu,
            "RESET_GPU",
        ),
        158 => ("gpu fatal timeout", Fatal, Action::ResetGpu, "RESET_GPU"),
        171 => (
            "uncorrectable dram error (detail for xid 48)",
            Fatal,
            Action::RebootNode,
            "(blank; follow WORKFLOW_XID_48)",
        ),
        172 => (
            "uncorrectable sram error (detail for xid 48)",
            Fatal,
            Action::RebootNode,
            "(blank; follow WORKFLOW_XID_48)",
        ),
        _ => ("unknown xid", XidSeverity::Unknown, Action::None, ""),
    };
    XidInfo {
        xid,
        name,
        severity,
        action,
        nvidia_resolution,
    }
}

/// XIDs 144–150: NVLink5 unit errors. Fatal sub-codes need a drain and GPU reset (the driver
/// follows them with XID 154 "Drain and Reset"); see [`XidEvent::info`] for non-fatal ones.
fn nvlink5(name: &'static str) -> (&'static str, XidSeverity, Action, &'static str) {
    (
        name,
        XidSeverity::Fatal,
        Action::ResetGpu,
        "WORKFLOW_NVLINK5_ERR (per sub-code)",
    )
}

impl XidEvent {
    /// The catalogue row, refined by what the line itself says: an NVLink5 XID (144–150) whose
    /// second word is `Nonfatal` is [`XidSeverity::Informational`] (the NVLink error counters
    /// decide), not fatal.
    pub fn info(&self) -> XidInfo {
        let mut info = xid_info(self.xid);
        if (144..=150).contains(&self.xid)
            && self
                .detail
                .split_whitespace()
                .nth(1)
                .is_some_and(|w| w.eq_ignore_ascii_case("nonfatal"))
        {
            info.severity = XidSeverity::Informational;
            info.action = Action::None;
        }
        info
    }

    /// For XID 154 (`GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)`): the
    /// new recovery action as printed ("0x4 (Drain and Reset)") and what it asks for. `None` for
    /// other XIDs or when the line does not say.
    pub fn recovery_action(&self) -> Option<(&str, Action)> {
        if self.xid != 154 {
            return None;
        }
        let (_, to) = self.detail.rsplit_once(" to ")?;
        let to = to.trim().trim_end_matches('.');
        if to.is_empty() {
            return None;
        }
        let lower = to.to_ascii_lowercase();
        let action = if lower.contains("reboot") {
            Action::RebootNode
        } else if lower.contains("reset") {
            Action::ResetGpu
        } else {
            Action::None
        };
        Some((to, action))
    }
}

// ---------------------------------------------------------------------------------------------
// The line parser.

/// A "The NVIDIA GPU <bdf>" line waiting for its "fallen off the bus" line.
struct PendingFallen {
    bus_id: String,
    timestamp: Option<String>,
    message: String,
    line_number: usize,
    lines_left: u8,
}

#[derive(Default)]
struct Parser {
    log: KernelLog,
    /// Fallen-off-the-bus events, merged (deduplicated) in `finish`.
    companions: Vec<XidEvent>,
    /// Index into `log.xids` of the record continuation lines attach to.
    open_xid: Option<usize>,
    /// Index into `log.sxids` of the record `Severity`/`Data` lines attach to.
    open_sxid: Option<usize>,
    pending_fallen: Option<PendingFallen>,
}

impl Parser {
    fn line(&mut self, line_number: usize, raw: &str) {
        let raw = clip(raw, MAX_LINE_BYTES).trim_end();
        if raw.trim_start().is_empty() || is_kmsg_dictionary(raw) {
            return;
        }
        let (kmsg_usec, body) = match split_kmsg(raw) {
            Some((usec, text)) => (Some(usec), text),
            None => (None, raw.trim_start()),
        };
        let timestamp = |prefix: &str| {
            kmsg_usec
                .map(str::to_string)
                .or_else(|| prefix_timestamp(prefix))
        };

        if let Some(pos) = body.find("SXid (") {
            self.open_xid = None;
            self.pending_fallen = None;
            self.sxid_line(line_number, body, pos);
            return;
        }
        self.open_sxid = None;

        let Some(nvrm) = body.find("NVRM:") else {
            self.close();
            self.skip_if_mentions_xid(body);
            return;
        };

        if let Some(pos) = body.find("NVRM: Xid (") {
            self.close();
            match parse_xid(&body[pos..], timestamp(&body[..pos]), line_number) {
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
            });
            return;
        }
        if let Some(rest) = text.strip_prefix("The NVIDIA GPU ") {
            if let Some((bus_id, _)) = take_bdf(rest) {
                self.open_xid = None;
                self.pending_fallen = Some(PendingFallen {
                    bus_id,
                    timestamp: timestamp(&body[..nvrm]),
                    message: message.to_string(),
                    line_number,
                    lines_left: 2,
                });
                return;
            }
        }
        if let Some((bus_id, uuid)) = parse_uuid_line(text) {
            self.open_xid = None;
            self.log.uuids.insert(bus_id, uuid);
            return;
        }
        if let Some(index) = self.open_xid {
            if is_continuation(after) {
                if let Some(event) = self.log.xids.get_mut(index) {
                    event.message.push('\n');
                    event.message.push_str(message);
                }
                return;
            }
        }
        self.open_xid = None;
        self.skip_if_mentions_xid(body);
    }

    fn sxid_line(&mut self, line_number: usize, body: &str, pos: usize) {
        let Some(event) = parse_sxid(body, pos, line_number) else {
            self.open_sxid = None;
            self.log.skipped_lines += 1;
            return;
        };
        let follow_up = event.fatal.is_none()
            && (event.detail.starts_with("Severity ") || event.detail.starts_with("Data "));
        if follow_up {
            if let Some(prev) = self.open_sxid.and_then(|i| self.log.sxids.get_mut(i)) {
                if prev.sxid == event.sxid && prev.pci_bus_id == event.pci_bus_id {
                    prev.detail.push('\n');
                    prev.detail.push_str(&event.detail);
                    return;
                }
            }
        }
        self.log.sxids.push(event);
        self.open_sxid = Some(self.log.sxids.len() - 1);
    }

    fn close(&mut self) {
        self.open_xid = None;
        self.pending_fallen = None;
    }

    fn skip_if_mentions_xid(&mut self, text: &str) {
        if mentions_xid(text) {
            self.log.skipped_lines += 1;
        }
    }

    fn finish(mut self) -> KernelLog {
        // Prefer the explicit `Xid ...: 79` line; keep one companion-derived event per bus id
        // only where the log has none.
        let explicit: BTreeSet<String> = self
            .log
            .xids
            .iter()
            .filter(|e| e.xid == 79)
            .filter_map(|e| e.pci_bus_id.clone())
            .collect();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for event in self.companions {
            let Some(bus_id) = event.pci_bus_id.clone() else {
                continue;
            };
            if explicit.contains(&bus_id) || !seen.insert(bus_id) {
                continue;
            }
            self.log.xids.push(event);
        }
        self.log.xids.sort_by_key(|e| e.line_number);
        self.log
    }
}

/// `<xid-part>` starts at `NVRM: Xid (`.
fn parse_xid(text: &str, timestamp: Option<String>, line_number: usize) -> Option<XidEvent> {
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
        detail: detail.to_string(),
        line_number,
    })
}

/// The `(PCI:0000:2b:00)` field, from just after `(` through `)`. A field that is not an address
/// but looks like a field (short, no spaces or parentheses) gives `None` for the bus id; anything
/// else is not a record.
fn take_bus_field(text: &str) -> Option<(Option<String>, &str)> {
    let close = text.find(')')?;
    let field = &text[..close];
    if field.is_empty()
        || field.len() > 32
        || field.contains(|c: char| c.is_whitespace() || c == '(')
    {
        return None;
    }
    let bus_id = take_bdf(field).and_then(|(b, rest)| rest.is_empty().then_some(b));
    Some((bus_id, &text[close + 1..]))
}

/// A PCI address at the start of `text` (optional `PCI:`; `dddd:bb:dd[.f]` or `bb:dd[.f]`),
/// normalised to "0000:2b:00.0", and the text after it (a trailing `:` is left in the rest).
fn take_bdf(text: &str) -> Option<(String, &str)> {
    let text = text
        .strip_prefix("PCI:")
        .or_else(|| text.strip_prefix("pci:"))
        .unwrap_or(text);
    let end = text
        .find(|c: char| !(c.is_ascii_hexdigit() || c == ':' || c == '.'))
        .unwrap_or(text.len());
    let (mut token, mut rest) = text.split_at(end);
    if let Some(t) = token.strip_suffix(':') {
        token = t;
        rest = &text[end - 1..];
    }
    if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return None;
    }
    normalize_bdf(token).map(|b| (b, rest))
}

fn normalize_bdf(token: &str) -> Option<String> {
    let hex = |s: &str, max: usize| -> Option<u32> {
        if s.is_empty() || s.len() > max || !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    };
    let (head, function) = match token.split_once('.') {
        Some((head, f)) if f.len() == 1 => (head, f.parse::<u8>().ok().filter(|f| *f <= 7)?),
        Some(_) => return None,
        None => (token, 0),
    };
    let parts: Vec<&str> = head.split(':').collect();
    let (domain, bus, device) = match parts.as_slice() {
        [d, b, v] if d.len() >= 4 => (hex(d, 8)?, hex(b, 2)?, hex(v, 2)?),
        [b, v] => (0, hex(b, 2)?, hex(v, 2)?),
        _ => return None,
    };
    if device > 0x1f {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function}"))
}

/// Leading decimal digits (at most 10) as a `u32`, and the rest.
fn take_number(text: &str) -> Option<(u32, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    if end == 0 || end > 10 {
        return None;
    }
    let value = text[..end].parse().ok()?;
    Some((value, &text[end..]))
}

/// `key=value, rest` at the start of `text`: the value (single quotes removed; `None` when
/// absent or empty) and the rest.
fn take_field<'a>(text: &'a str, key: &str) -> (Option<String>, &'a str) {
    let Some(after) = text.strip_prefix(key) else {
        return (None, text);
    };
    let (value, rest) = match after.split_once(", ") {
        Some((v, r)) => (v, r.trim_start()),
        None => (after.trim_end().trim_end_matches(','), ""),
    };
    let value = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(value)
        .trim();
    ((!value.is_empty()).then(|| value.to_string()), rest)
}

/// `GPU 0000:2b:00.0: GPU has fallen off the bus.`, `GPU at 0000:01:00.0 has fallen off the
/// bus.`, or the three-line `The NVIDIA GPU <bdf> ... fallen off the bus` form when the record
/// arrives as one line (`/dev/kmsg` escapes the embedded newlines as `\x0a`).
fn fallen_off_bus_id(text: &str) -> Option<String> {
    if !text.contains("fallen off the bus") {
        return None;
    }
    let rest = text
        .strip_prefix("GPU at ")
        .or_else(|| text.strip_prefix("GPU "))
        .or_else(|| text.strip_prefix("The NVIDIA GPU "))?;
    take_bdf(rest).map(|(bus_id, _)| bus_id)
}

/// `GPU at PCI:0000:2b:00: GPU-<uuid>` -> ("0000:2b:00.0", "GPU-<uuid>").
fn parse_uuid_line(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix("GPU at ")?;
    let (bus_id, rest) = take_bdf(rest)?;
    let uuid = rest.strip_prefix(':')?.split_whitespace().next()?;
    let id = uuid.strip_prefix("GPU-")?;
    let valid = !id.is_empty()
        && id.contains(|c: char| c.is_ascii_hexdigit())
        && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    valid.then(|| (bus_id, uuid.to_string()))
}

/// Whether an `NVRM:` line (text after `NVRM:`) continues the previous XID record: the rows of
/// the GSP RPC history table (indented), its `GPU<n> ... RPC ...` headers, and the closing
/// all-asterisk banner.
fn is_continuation(after: &str) -> bool {
    let body = after.strip_prefix(' ').unwrap_or(after);
    if body.starts_with(char::is_whitespace) && !body.trim().is_empty() {
        return true;
    }
    let text = after.trim();
    let (instance, text) = match strip_gpu_instance(text) {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if instance && text.contains("RPC") {
        return true;
    }
    let banner = match text.split_once(": ") {
        Some((ident, rest))
            if !ident.is_empty()
                && ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            rest.trim()
        }
        _ => text,
    };
    !banner.is_empty() && banner.chars().all(|c| c == '*')
}

/// `GPU4 rest` -> `rest` (the driver's GPU instance prefix; `GPU 0000:..` does not match).
fn strip_gpu_instance(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("GPU")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    rest[digits..].strip_prefix(' ')
}

/// A raw `/dev/kmsg` record `<prio>,<seq>,<usec>,<flags>[,...];<text>` -> (usec, text).
fn split_kmsg(line: &str) -> Option<(&str, &str)> {
    let semi = line.find(';')?;
    let head = &line[..semi];
    if head.len() > 128 || head.contains(char::is_whitespace) {
        return None;
    }
    let mut fields = head.split(',');
    let prio = fields.next()?;
    let seq = fields.next()?;
    let usec = fields.next()?;
    fields.next()?;
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    (digits(prio) && digits(seq) && digits(usec)).then(|| (usec, &line[semi + 1..]))
}

/// A kmsg dictionary continuation line: ` KEY=value` (leading space, upper-case key).
fn is_kmsg_dictionary(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(' ') else {
        return false;
    };
    let rest = rest.trim_start();
    match rest.split_once('=') {
        Some((key, _)) => {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        }
        None => false,
    }
}

/// The timestamp in the text before the message: the first `[...]` (dmesg, dmesg -T, or the
/// kernel's own stamp inside syslog), else the syslog date before `<host> kernel:`.
fn prefix_timestamp(prefix: &str) -> Option<String> {
    if let Some(open) = prefix.find('[') {
        if let Some(len) = prefix[open..].find(']') {
            return Some(prefix[open..=open + len].to_string());
        }
    }
    let (head, _) = prefix.split_once(" kernel:")?;
    let (date, _host) = head.trim().rsplit_once(' ')?;
    let date = date.trim();
    (!date.is_empty()).then(|| date.to_string())
}

/// `Xid` or `SXid` as a word (not `_kgspLogXid119`, not `Xidfoo`).
fn mentions_xid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let boundary =
        |i: usize| i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|t| t.find("Xid")) {
        let at = from + found;
        let word_end = bytes.get(at + 3).is_none_or(|c| !c.is_ascii_alphabetic());
        if word_end && (boundary(at) || (bytes[at - 1] == b'S' && boundary(at - 1))) {
            return true;
        }
        from = at + 3;
    }
    false
}

/// `text` cut to at most `max` bytes on a char boundary.
fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every literal line of reference/gpu-health.md §8, exactly as printed there.
    const XID_79: &str = "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.";
    const FALLEN_GPU: &str = "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.";
    const FALLEN_GPU_AT: &str = "NVRM: GPU at 0000:01:00.0 has fallen off the bus.";
    const XID_13: &str = "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter";
    const XID_109: &str = "NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005";
    const XID_31: &str = "NVRM: Xid (PCI:0000:08:00): 31, pid=169800, name=chrome, Ch 00000023, intr 00000000. MMU Fault: ENGINE CE0 HUBCLIENT_HSCE0 faulted @ 0x0_0abe0000. Fault is of type FAULT_PTE ACCESS_TYPE_VIRT_READ";
    const XID_45: &str = "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149";
    const XID_119: &str = "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).";
    const XID_149: &str = "NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)";
    const XID_154: &str = "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)";
    const XID_145_PLACEHOLDER: &str =
        "NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)";
    const XID_14_OLD: &str = "NVRM: Xid (0000:03:00): 14, Channel 00000001";
    const XID_63: &str = "NVRM: Xid (PCI:0000:2b:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.";
    const GPU_AT_UUID_PLACEHOLDER: &str = "NVRM: GPU at PCI:0000:2b:00: GPU-<uuid>";
    const BOARD_SERIAL: &str = "NVRM: GPU Board Serial Number: <n>";
    const SXID_NONFATAL: &str = "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)";
    const SXID_FATAL: &str =
        "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up";
    const SXID_SEVERITY: &str = "nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00";

    /// (prefix, expected timestamp): raw line, dmesg, dmesg -T, dmesg -r, syslog, syslog with
    /// the kernel stamp, journal short-iso, raw /dev/kmsg records (with and without caller).
    const STYLES: &[(&str, Option<&str>)] = &[
        ("", None),
        ("[  123.456789] ", Some("[  123.456789]")),
        (
            "[Mon Nov 30 07:01:02 2026] ",
            Some("[Mon Nov 30 07:01:02 2026]"),
        ),
        ("<4>[  123.456789] ", Some("[  123.456789]")),
        (
            "Nov 30 07:01:02 gpu-node-7 kernel: ",
            Some("Nov 30 07:01:02"),
        ),
        (
            "Nov 30 07:01:02 gpu-node-7 kernel: [ 12.345678] ",
            Some("[ 12.345678]"),
        ),
        (
            "2026-11-30T07:01:02+0000 gpu-node-7 kernel: ",
            Some("2026-11-30T07:01:02+0000"),
        ),
        ("3,1234,123456789,-;", Some("123456789")),
        ("4,1235,123456790,-,caller=T1797828;", Some("123456790")),
    ];

    struct Want {
        line: &'static str,
        xid: u32,
        bus: Option<&'static str>,
        pid: Option<&'static str>,
        process: Option<&'static str>,
        detail: &'static str,
    }

    fn xid_wants() -> Vec<Want> {
        vec![
            Want {
                line: XID_79,
                xid: 79,
                bus: Some("0000:2b:00.0"),
                pid: None,
                process: None,
                detail: "GPU has fallen off the bus.",
            },
            Want {
                line: FALLEN_GPU,
                xid: 79,
                bus: Some("0000:2b:00.0"),
                pid: None,
                process: None,
                detail: "GPU 0000:2b:00.0: GPU has fallen off the bus.",
            },
            Want {
                line: FALLEN_GPU_AT,
                xid: 79,
                bus: Some("0000:01:00.0"),
                pid: None,
                process: None,
                detail: "GPU at 0000:01:00.0 has fallen off the bus.",
            },
            Want {
                line: XID_13,
                xid: 13,
                bus: Some("0000:cb:00.0"),
                pid: Some("<unknown>"),
                process: Some("<unknown>"),
                detail: "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
            },
            Want {
                line: XID_109,
                xid: 109,
                bus: Some("0000:cb:00.0"),
                pid: Some("1797828"),
                process: Some("pt_main_thread"),
                detail: "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
            },
            Want {
                line: XID_31,
                xid: 31,
                bus: Some("0000:08:00.0"),
                pid: Some("169800"),
                process: Some("chrome"),
                detail: "Ch 00000023, intr 00000000. MMU Fault: ENGINE CE0 HUBCLIENT_HSCE0 faulted @ 0x0_0abe0000. Fault is of type FAULT_PTE ACCESS_TYPE_VIRT_READ",
            },
            Want {
                line: XID_45,
                xid: 45,
                bus: Some("0000:dc:00.0"),
                pid: Some("1818990"),
                process: Some("python3"),
                detail: "Ch 00000001 caused by previous Xid 149",
            },
            Want {
                line: XID_119,
                xid: 119,
                bus: Some("0000:9b:00.0"),
                pid: Some("2024380"),
                process: Some("nvidia-smi"),
                detail: "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
            },
            Want {
                line: XID_149,
                xid: 149,
                bus: Some("0009:01:00.0"),
                pid: None,
                process: None,
                detail: "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
            },
            Want {
                line: XID_154,
                xid: 154,
                bus: Some("0009:01:00.0"),
                pid: None,
                process: None,
                detail: "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
            },
            Want {
                line: XID_145_PLACEHOLDER,
                xid: 145,
                bus: None,
                pid: None,
                process: None,
                detail: "RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)",
            },
            Want {
                line: XID_14_OLD,
                xid: 14,
                bus: Some("0000:03:00.0"),
                pid: None,
                process: None,
                detail: "Channel 00000001",
            },
            Want {
                line: XID_63,
                xid: 63,
                bus: Some("0000:2b:00.0"),
                pid: Some("1896"),
                process: None,
                detail: "Row Remapper: New row marked for remapping, reset gpu to activate.",
            },
        ]
    }

    #[test]
    fn every_reference_xid_line_in_every_prefix_style() {
        for want in xid_wants() {
            for (prefix, ts) in STYLES {
                let input = format!("{prefix}{}", want.line);
                let log = parse_kernel_log(&input);
                assert_eq!(log.skipped_lines, 0, "{input}");
                assert_eq!(log.xids.len(), 1, "{input}");
                let e = &log.xids[0];
                assert_eq!(e.xid, want.xid, "{input}");
                assert_eq!(e.pci_bus_id.as_deref(), want.bus, "{input}");
                assert_eq!(e.pid.as_deref(), want.pid, "{input}");
                assert_eq!(e.process.as_deref(), want.process, "{input}");
                assert_eq!(e.detail, want.detail, "{input}");
                assert_eq!(e.timestamp.as_deref(), *ts, "{input}");
                assert_eq!(e.message, want.line, "{input}");
                assert_eq!(e.line_number, 1, "{input}");
            }
        }
    }

    /// (line, sxid, bus id, switch, fatal, detail)
    type SxidWant = (
        &'static str,
        u32,
        &'static str,
        &'static str,
        Option<bool>,
        &'static str,
    );

    #[test]
    fn every_reference_sxid_line_in_every_prefix_style() {
        let wants: &[SxidWant] = &[
            (
                SXID_NONFATAL,
                12028,
                "0000:05:00.0",
                "nvidia-nvswitch3",
                Some(false),
                "Link 32 egress non-posted PRIV error (First)",
            ),
            (
                SXID_FATAL,
                20034,
                "0000:06:00.0",
                "nvidia-nvswitch1",
                Some(true),
                "Link 48 LTSSM Fault Up",
            ),
            (
                SXID_SEVERITY,
                24007,
                "0000:aa:00.0",
                "nvidia-nvswitch1",
                None,
                "Severity 1 Engine instance 12 Sub-engine instance 00",
            ),
        ];
        for (line, sxid, bus, switch, fatal, detail) in wants {
            for (prefix, _) in STYLES {
                let input = format!("{prefix}{line}");
                let log = parse_kernel_log(&input);
                assert_eq!(log.skipped_lines, 0, "{input}");
                assert!(log.xids.is_empty(), "{input}");
                assert_eq!(
                    log.sxids,
                    vec![SxidEvent {
                        sxid: *sxid,
                        pci_bus_id: Some(bus.to_string()),
                        switch: Some(switch.to_string()),
                        fatal: *fatal,
                        detail: detail.to_string(),
                        line_number: 1,
                    }],
                    "{input}"
                );
            }
        }
    }

    #[test]
    fn companion_lines_fill_uuids_and_are_not_events() {
        let uuid = "GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b";
        for (prefix, _) in STYLES {
            let input = format!(
                "{prefix}{GPU_AT_UUID_PLACEHOLDER}\n{prefix}{BOARD_SERIAL}\n{prefix}NVRM: GPU at PCI:0000:2B:00: {uuid}\n"
            );
            let log = parse_kernel_log(&input);
            assert!(log.xids.is_empty(), "{input}");
            assert_eq!(log.skipped_lines, 0, "{input}");
            assert_eq!(log.uuids.len(), 1, "{input}");
            assert_eq!(
                log.uuids.get("0000:2b:00.0").map(String::as_str),
                Some(uuid)
            );
        }
    }

    #[test]
    fn fallen_off_companion_is_deduplicated_against_explicit_xid_79() {
        let log = parse_kernel_log(
            "[   10.100000] NVRM: GPU at PCI:0000:2b:00: GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b\n\
             [   10.200000] NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.\n\
             [   10.300000] NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\
             [   10.400000] NVRM: GPU at 0000:2b:00.0 has fallen off the bus.\n\
             [   11.000000] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n\
             [   11.100000] NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n",
        );
        let got: Vec<(u32, Option<&str>, usize)> = log
            .xids
            .iter()
            .map(|e| (e.xid, e.pci_bus_id.as_deref(), e.line_number))
            .collect();
        assert_eq!(
            got,
            vec![(79, Some("0000:2b:00.0"), 3), (79, Some("0000:01:00.0"), 5)]
        );
        assert_eq!(log.xids[0].pid.as_deref(), Some("<unknown>"));
        assert_eq!(log.xids[1].message, FALLEN_GPU_AT);
        assert_eq!(log.xids[1].timestamp.as_deref(), Some("[   11.000000]"));
        assert_eq!(log.skipped_lines, 0);
    }

    #[test]
    fn three_line_fallen_off_form_is_xid_79() {
        // nv.c prints this as one printk with embedded newlines (gpud kmsg_test.go).
        let dmesg = "[ 5.1] NVRM: The NVIDIA GPU 0000:18:00.0\n\
                     [ 5.1] NVRM: (PCI ID: 10de:2901) installed in this system has\n\
                     [ 5.1] NVRM: fallen off the bus and is not responding to commands.\n";
        let log = parse_kernel_log(dmesg);
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].xid, 79);
        assert_eq!(log.xids[0].pci_bus_id.as_deref(), Some("0000:18:00.0"));
        assert_eq!(log.xids[0].line_number, 1);
        assert_eq!(log.xids[0].message.lines().count(), 2);

        // /dev/kmsg escapes the newlines: one record.
        let kmsg = "3,77,5100000,-;NVRM: The NVIDIA GPU 0000:18:00.0\\x0aNVRM: (PCI ID: 10de:2901) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.\\x0a";
        let log = parse_kernel_log(kmsg);
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].pci_bus_id.as_deref(), Some("0000:18:00.0"));

        // Never completed: no event.
        let log = parse_kernel_log("NVRM: The NVIDIA GPU 0000:18:00.0\nNVRM: unrelated\nNVRM: x\n");
        assert!(log.xids.is_empty());
    }

    #[test]
    fn domainless_fallen_off_form_gets_domain_zero() {
        let log = parse_kernel_log("NVRM: GPU 18:00.0: GPU has fallen off the bus.");
        assert_eq!(log.xids[0].pci_bus_id.as_deref(), Some("0000:18:00.0"));
    }

    const GSP_TABLE: &[&str] = &[
        "NVRM: GPU4 GSP RPC buffer contains function 103 (GSP_RM_ALLOC) and data 0x0000000000002081 0x0000000000000004.",
        "NVRM: GPU4 RPC history (CPU -> GSP):",
        "NVRM:     entry function                   data0              data1              ts_start           ts_end             duration actively_polling",
        "NVRM:      0    103 GSP_RM_ALLOC          0x0000000000002081 0x0000000000000004 0x00062b6b1e3c2f33 0x0000000000000000          y",
        "NVRM:     -1     76 GSP_RM_CONTROL        0x0000000020800a4c 0x0000000000000004 0x00062b6b1e3c1a11 0x00062b6b1e3c1b2f    286us",
        "NVRM: GPU4 RPC event history (CPU <- GSP):",
        "NVRM:     entry function                   data0              data1              ts_start           ts_end             duration during_incomplete_rpc",
        "NVRM:      0   4128 GSP_POST_NOCAT_RECORD 0x0000000000000002 0x0000000000000027 0x00062b6b1e3c0c4e 0x00062b6b1e3c0c4f      1us",
        "NVRM: _kgspLogXid119: ********************************************************************************",
    ];

    fn xid_119_log(prefix: &str, dictionary: bool) -> String {
        let mut lines = vec![
            format!(
                "{prefix}NVRM: _kgspLogXid119: ********************************* GSP Timeout **********************************"
            ),
            format!("{prefix}NVRM: _kgspLogXid119: Note: Please also check logs above."),
            format!("{prefix}{XID_119}"),
        ];
        if dictionary {
            lines.push(" SUBSYSTEM=pci".to_string());
            lines.push(" DEVICE=+pci:0000:9b:00.0".to_string());
        }
        for row in GSP_TABLE {
            lines.push(format!("{prefix}{row}"));
        }
        lines.push(format!(
            "{prefix}CPU: 36 PID: 2024380 Comm: nvidia-smi Tainted: P           OE     5.15.0-105-generic #115-Ubuntu"
        ));
        lines.push(format!("{prefix}NVRM: GPU4 RPC history (CPU -> GSP):"));
        lines.push(format!("{prefix}{}", XID_119.replace("2024380", "2024381")));
        lines.join("\n")
    }

    #[test]
    fn xid_119_history_table_is_part_of_the_record() {
        for (prefix, dictionary) in [
            ("[ 1000.000001] ", false),
            ("[Mon Nov 30 07:01:02 2026] ", false),
            ("Nov 30 07:01:02 gpu-node-7 kernel: ", false),
            ("", false),
            ("3,1234,1000000001,-;", true),
        ] {
            let log = parse_kernel_log(&xid_119_log(prefix, dictionary));
            assert_eq!(log.skipped_lines, 0, "{prefix}");
            assert_eq!(log.xids.len(), 2, "{prefix}");
            let first = &log.xids[0];
            assert_eq!(first.line_number, 3, "{prefix}");
            let expected: Vec<&str> = std::iter::once(XID_119)
                .chain(GSP_TABLE.iter().copied())
                .collect();
            assert_eq!(first.message, expected.join("\n"), "{prefix}");
            // The second record starts after a non-NVRM line and a stray header: it is alone.
            assert_eq!(log.xids[1].pid.as_deref(), Some("2024381"));
            assert_eq!(log.xids[1].message.lines().count(), 1, "{prefix}");
        }
    }

    #[test]
    fn nvswitch_follow_up_lines_merge_into_their_sxid() {
        let log = parse_kernel_log(
            "[38889.018120] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)\n\
             [38889.018125] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Severity 0 Engine instance 32 Sub-engine instance 00\n\
             [38889.018130] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Data {0x00000001, 0x00000001, 0x00000000}\n\
             [38889.018135] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12033, Severity 1 Engine instance 00 Sub-engine instance 00\n",
        );
        assert_eq!(log.sxids.len(), 2);
        assert_eq!(
            log.sxids[0].detail,
            "Link 32 egress non-posted PRIV error (First)\n\
             Severity 0 Engine instance 32 Sub-engine instance 00\n\
             Data {0x00000001, 0x00000001, 0x00000000}"
        );
        assert_eq!(log.sxids[1].sxid, 12033);
        assert_eq!(log.sxids[1].fatal, None);
        assert_eq!(log.sxids[1].line_number, 4);
    }

    #[test]
    fn mixed_log_keeps_order_line_numbers_and_uuids() {
        let log = parse_kernel_log(
            "[    1.000000] Linux version 6.8.0\n\
             [   10.000000] NVRM: GPU at PCI:0000:2b:00: GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b\n\
             [   10.000001] NVRM: GPU Board Serial Number: 1654922000123\n\
             [   20.000000] NVRM: Xid (PCI:0000:2b:00): 48, pid=4242, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.\n\
             [   20.000001] NVRM: Xid (PCI:0000:2b:00): 63, pid=4242, name=python3, Row Remapper: New row (0x0000000000a61fe8) is marked for remapping, reset gpu to activate.\n\
             [   30.000000] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up\n\
             [   30.000001] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n",
        );
        let got: Vec<(u32, usize)> = log.xids.iter().map(|e| (e.xid, e.line_number)).collect();
        assert_eq!(got, vec![(48, 4), (63, 5), (79, 7)]);
        assert_eq!(log.sxids.len(), 1);
        assert_eq!(log.sxids[0].line_number, 6);
        assert_eq!(log.uuids.len(), 1);
        assert_eq!(log.skipped_lines, 0);
    }

    #[test]
    fn garbage_truncated_and_binary_lines_are_skipped() {
        let counted = [
            "NVRM: Xid (PCI:0000:2b",
            "NVRM: Xid (PCI:zz:00): x,",
            "NVRM: Xid (PCI:0000:2b:00): 79",
            "NVRM: Xid (PCI:0000:2b:00): 4294967296, too big",
            "NVRM: Xid (PCI:0000:2b:00): , empty",
            "NVRM: Xid (PCI:0000:2b:0[ 12.3] interleaved): 79, x",
            "NVRM: Xid error: xyz, invalid data",
            "[ 1.0] NVRM: Xid (",
            "nvidia-nvswitch3: SXid (PCI:0000:05:00.0",
            "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): Non-fatal",
            "éé NVRM: Xid (PCI:é): é",
        ];
        for line in counted {
            let log = parse_kernel_log(line);
            assert!(log.xids.is_empty(), "{line}");
            assert!(log.sxids.is_empty(), "{line}");
            assert_eq!(log.skipped_lines, 1, "{line}");
        }
        let not_counted = [
            "NVRM: _kgspLogXid119: ********************************* GSP Timeout ****",
            "NVRM: GPU4 RPC history (CPU -> GSP):",
            "NVRM:      0    103 GSP_RM_ALLOC",
            "NVRM: GPU 0000:2b:00.0: GPU serial number is 0.",
            "NVRM: GPU at PCI:0000:9b:00 (printing 1 of every 30).",
            "Xidfoo",
            "",
            "   ",
            " SUBSYSTEM=pci",
            "3,1,2,-;",
        ];
        for line in not_counted {
            let log = parse_kernel_log(line);
            assert_eq!(log, KernelLog::default(), "{line:?}");
        }

        let binary = String::from_utf8_lossy(&[
            0xff, 0xfe, b'X', b'i', b'd', b' ', b'(', 0x00, 0x9f, 0x92, 0x96, b')', b':', 0xc3,
        ])
        .into_owned();
        let log = parse_kernel_log(&binary);
        assert!(log.xids.is_empty());
        assert_eq!(log.skipped_lines, 1);

        // Pseudo-random bytes (fixed LCG), lossily decoded.
        let mut state: u32 = 0x2545_f491;
        let bytes: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect();
        let log = parse_kernel_log(&String::from_utf8_lossy(&bytes));
        assert!(log.xids.is_empty());
        assert!(log.sxids.is_empty());
    }

    #[test]
    fn interleaved_line_keeps_the_first_record() {
        let log = parse_kernel_log(
            "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fNVRM: Xid (PCI:0000:2c:00): 13, pid=1, name=a, x",
        );
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].xid, 79);
        assert_eq!(log.xids[0].pci_bus_id.as_deref(), Some("0000:2b:00.0"));
    }

    #[test]
    fn truncated_fields_do_not_invent_values() {
        let log = parse_kernel_log("NVRM: Xid (PCI:0000:2b:00): 13, pid=");
        assert_eq!(log.xids[0].xid, 13);
        assert_eq!(log.xids[0].pid, None);
        assert_eq!(log.xids[0].detail, "");
        let log = parse_kernel_log("NVRM: Xid (PCI:10000:2B:00): 999, pid=7, name=x, y");
        assert_eq!(log.xids[0].pci_bus_id.as_deref(), Some("10000:2b:00.0"));
        assert_eq!(log.xids[0].xid, 999);
    }

    #[test]
    fn five_megabytes_of_junk_returns() {
        let mut junk = String::with_capacity(5 * 1024 * 1024 + 256);
        let pieces = [
            "NVRM: Xid (PCI:0000:2b",
            "\u{fffd}\u{fffd}Xid (((((((",
            "SXid (PCI:",
            "NVRM:     entry",
            "3,1,2,-;NVRM: Xid (PCI:0000:2b:00): x",
            " KEY=value",
            "[ 1.0] kernel: random text without anything",
        ];
        let mut i = 0;
        while junk.len() < 5 * 1024 * 1024 {
            junk.push_str(pieces[i % pieces.len()]);
            junk.push('\n');
            i += 1;
        }
        let log = parse_kernel_log(&junk);
        assert!(log.xids.is_empty());
        assert!(log.skipped_lines > 0);

        // One 5 MB line with no newline.
        let one_line = "NVRM: Xid (".repeat(5 * 1024 * 1024 / 11);
        let log = parse_kernel_log(&one_line);
        assert!(log.xids.is_empty());
        assert_eq!(log.skipped_lines, 1);
    }

    #[test]
    fn only_the_last_max_lines_are_read() {
        let mut text = String::from("NVRM: Xid (PCI:0000:2b:00): 13, old\n");
        text.push_str(&"x\n".repeat(MAX_LINES));
        text.push_str(XID_79);
        let log = parse_kernel_log(&text);
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].xid, 79);
        assert_eq!(log.xids[0].line_number, MAX_LINES + 2);
    }

    #[test]
    fn catalogue_spot_checks() {
        let i = xid_info(79);
        assert_eq!(
            (i.severity, i.action),
            (XidSeverity::Fatal, Action::RebootNode)
        );
        assert_eq!(i.nvidia_resolution, "RESTART_BM / CONTACT_SUPPORT");
        let i = xid_info(13);
        assert_eq!(
            (i.severity, i.action),
            (XidSeverity::Application, Action::CheckWorkload)
        );
        assert_eq!(xid_info(48).severity, XidSeverity::Fatal);
        let i = xid_info(63);
        assert_eq!(
            (i.severity, i.action),
            (XidSeverity::Informational, Action::None)
        );
        let i = xid_info(154);
        assert_eq!(i.severity, XidSeverity::Informational);
        assert!(i.nvidia_resolution.contains("Drain and Reset"));
        assert_eq!(xid_info(119).action, Action::ResetGpu);
    }

    #[test]
    fn unknown_xid_is_unknown() {
        let i = xid_info(999);
        assert_eq!(i.xid, 999);
        assert_eq!(i.severity, XidSeverity::Unknown);
        assert_eq!(i.action, Action::None);
        assert_eq!(i.name, "unknown xid");
        assert_eq!(xid_info(0).severity, XidSeverity::Unknown);
    }

    #[test]
    fn catalogue_covers_every_reference_row_consistently() {
        for &xid in CATALOGUED_XIDS {
            let i = xid_info(xid);
            assert_eq!(i.xid, xid);
            assert_ne!(i.severity, XidSeverity::Unknown, "xid {xid}");
            assert!(!i.nvidia_resolution.is_empty(), "xid {xid}");
            assert_eq!(i.name, i.name.to_lowercase(), "xid {xid}");
            match i.severity {
                XidSeverity::Fatal => assert!(
                    matches!(
                        i.action,
                        Action::RebootNode | Action::ResetGpu | Action::HardwareInspection
                    ),
                    "xid {xid}"
                ),
                XidSeverity::Application => assert_eq!(i.action, Action::CheckWorkload),
                XidSeverity::Informational => assert_eq!(i.action, Action::None),
                XidSeverity::Unknown => unreachable!(),
            }
        }
        for xid in [13, 31, 43, 45, 68, 109] {
            assert_eq!(xid_info(xid).severity, XidSeverity::Application, "{xid}");
        }
        for xid in [48, 74, 79, 94, 95, 119, 120] {
            assert_eq!(xid_info(xid).severity, XidSeverity::Fatal, "{xid}");
        }
    }

    #[test]
    fn event_info_reads_nvlink5_severity_and_154_recovery() {
        let fatal = parse_kernel_log(XID_149);
        assert_eq!(fatal.xids[0].info().severity, XidSeverity::Fatal);
        let nonfatal = parse_kernel_log(XID_145_PLACEHOLDER);
        let info = nonfatal.xids[0].info();
        assert_eq!(
            (info.severity, info.action),
            (XidSeverity::Informational, Action::None)
        );
        let log = parse_kernel_log(XID_154);
        assert_eq!(
            log.xids[0].recovery_action(),
            Some(("0x4 (Drain and Reset)", Action::ResetGpu))
        );
        let log = parse_kernel_log(
            "NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)",
        );
        assert_eq!(
            log.xids[0].recovery_action(),
            Some(("0x1 (GPU Reset Required)", Action::ResetGpu))
        );
        let log = parse_kernel_log(
            "NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
        );
        assert_eq!(
            log.xids[0].recovery_action().map(|r| r.1),
            Some(Action::RebootNode)
        );
        assert_eq!(parse_kernel_log(XID_79).xids[0].recovery_action(), None);
    }
}
