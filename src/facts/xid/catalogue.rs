//! NVIDIA's XID catalogue (reference/gpu-health.md §9): what each XID means and what to do
//! about it, and what one event line adds to its row (NVLink5 severity, XID 154's recovery action).

use serde::Serialize;

use super::XidEvent;
use crate::report::Action;

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
/// - **Application**: the device plugin's ignore list (13, 31, 45, 68, 109; gcm warns on all
///   of them), 8 (NVIDIA `RESTART_APP`, gpud Warning) and 94 (a contained memory error: NVIDIA
///   `RESTART_APP`, the GPU itself stays usable) -> [`Action::CheckWorkload`]; 45 alone is
///   NVIDIA's `WORKFLOW_XID_45` "solo: RESTART_FM" -> [`Action::RestartComponent`] (with other
///   XIDs it follows them: driver.xid_events decides).
/// - **Informational**: 43 (NVIDIA `IGNORE`: sympathetic, the XID before it tells), 63 (`IGNORE
///   / IGNORE`: the remap is the fix; NVML's remapped-rows state decides pending/failure), 92
///   (`IGNORE`; the ECC counters decide), 137 (`IGNORE`), 154 (reports the recovery for another
///   XID; driver.xid_events reads its action) -> [`Action::None`].
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
            Informational,
            Action::None,
            "IGNORE / CONTACT_SUPPORT (sympathetic: follow the xid before it)",
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
            Action::RestartComponent,
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
            Application,
            Action::CheckWorkload,
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
        // NVML's nvmlGpuRecoveryAction_t as the driver prints it: 0x0 None, 0x1 GPU Reset
        // Required (also printed `PF FLR`), 0x2 Node Reboot Required (`OS Reboot`), 0x3 Drain
        // P2P (stop peer-to-peer work; no reset), 0x4 Drain and Reset.
        let lower = to.to_ascii_lowercase();
        let action = if lower.contains("reboot") {
            Action::RebootNode
        } else if lower.contains("drain p2p") {
            Action::CheckWorkload
        } else if lower.contains("reset") || lower.contains("flr") {
            Action::ResetGpu
        } else {
            Action::None
        };
        Some((to, action))
    }
}
