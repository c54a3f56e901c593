//! GSP firmware that stopped answering, printed without an `Xid` line, read as XID 119 (GSP RPC
//! timeout): the same fault the catalogue's 119 names, so the same check reports it.
//!
//! The open kernel modules' `kernel_gsp.c` (open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/
//! gsp/kernel_gsp.c) prints these before, or instead of, `Xid ... 119`:
//! - `_kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs … timeout 5200` and
//!   `_kgspRpcRecvPoll: GSP RM heartbeat timed out` (the GSP's heartbeat counter stopped);
//! - the `GSP Timeout` banner of `_kgspLogRpcTimeout` (595 and later) or `_kgspLogXid119`
//!   (before), whose Xid line may never come (open-gpu-kernel-modules#1230: the log ends in the
//!   RPC history tables) or is rate-limited away;
//! - the tables `kgspLogRpcDebugInfo` prints for an RPC that failed (`GPU6 GSP RPC buffer
//!   contains function …`, `GPU6 RPC history (CPU -> GSP):`, `GPU6 RPC event history (CPU <-
//!   GSP):`), logged under the error's Xid number (`NV_ERROR_LOG_DATA(pGpu, errorNum, …)`):
//!   without an open Xid record before them (a continuation of one otherwise, `lines.rs`), its
//!   Xid line was cut from the paste.
//!
//! Each names the GPU by the driver's instance (`NVRM: GPU6 …`), not its bus id, so the event
//! has no bus id. One event per GPU instance and boot (the lines come in pairs and repeat), and
//! none where the log holds an explicit Xid 119 or 120 for that instance (its message names
//! `GPU<n>`: `… RPC response from GPU4 GSP!`, the `GPU4 RPC history` table after it), or for
//! any GPU when the line names no instance.

use super::{Stamp, XidEvent};

/// The XID 119 event of a timeout line: `text` after `NVRM:`, `message` from `NVRM:` on, `at`
/// its printed timestamp, line number, stamp and boot.
pub(super) fn event(
    text: &str,
    message: &str,
    at: (Option<String>, usize, Option<Stamp>, u32),
) -> XidEvent {
    let (timestamp, line_number, stamp, boot) = at;
    XidEvent {
        xid: 119,
        pci_bus_id: None,
        pid: None,
        process: None,
        detail: format!("{text} (no Xid line)"),
        timestamp,
        message: message.to_string(),
        line_number,
        stamp,
        boot,
    }
}

/// The GPU instance (`"GPU6"`, or `""` when the line names none) of a GSP heartbeat or RPC
/// timeout line; `text` is the message after `NVRM:`.
pub(super) fn timeout_instance(text: &str) -> Option<&str> {
    let instance = match super::lines::strip_gpu_instance(text) {
        Some(rest) => text[..text.len() - rest.len()].trim_end(),
        None => "",
    };
    let heartbeat = text.contains("eartbeat timed out");
    let banner = (text.contains("_kgspLogRpcTimeout") || text.contains("_kgspLogXid119"))
        && text.contains("GSP Timeout");
    let body = &text[instance.len()..];
    let tables = !instance.is_empty()
        && [
            " GSP RPC buffer contains function",
            " RPC history (CPU -> GSP):",
            " RPC event history (CPU <- GSP):",
        ]
        .iter()
        .any(|t| body.starts_with(t));
    (heartbeat || banner || tables).then_some(instance)
}

/// Add the GSP timeouts no explicit Xid already reports to `xids`.
pub(super) fn merge(xids: &mut Vec<XidEvent>, timeouts: Vec<(String, XidEvent)>) {
    let explicit: Vec<&str> = xids
        .iter()
        .filter(|e| matches!(e.xid, 119 | 120))
        .map(|e| e.message.as_str())
        .collect();
    let reported = |instance: &str| {
        explicit.iter().any(|m| {
            instance.is_empty()
                || m.contains(&format!("{instance} "))
                || m.contains(&format!("{instance}:"))
        })
    };
    let mut kept: Vec<(String, u32)> = Vec::new();
    let mut add = Vec::new();
    for (instance, event) in timeouts {
        let key = (instance.clone(), event.boot);
        if reported(&instance) || kept.contains(&key) {
            continue;
        }
        kept.push(key);
        add.push(event);
    }
    xids.extend(add);
}

#[cfg(test)]
mod tests {
    use super::super::parse_kernel_log;
    use super::*;

    #[test]
    fn heartbeat_and_banner_lines_name_their_instance() {
        assert_eq!(
            timeout_instance("GPU0 _kgspRpcRecvPoll: GSP RM heartbeat timed out"),
            Some("GPU0")
        );
        assert_eq!(
            timeout_instance("_kgspRpcRecvPoll: GSP RM heartbeat timed out"),
            Some("")
        );
        assert_eq!(
            timeout_instance(
                "GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************"
            ),
            Some("GPU6")
        );
        assert_eq!(
            timeout_instance("GPU6 RPC event history (CPU <- GSP):"),
            Some("GPU6")
        );
        assert_eq!(
            timeout_instance("GPU6 RPC history (CPU -> GSP):"),
            Some("GPU6")
        );
        // The assert printed during bootup is not a timeout.
        assert_eq!(
            timeout_instance("GPU0 nvAssertFailedNoLog: Assertion failed: 0 @ kernel_gsp.c:1446"),
            None
        );
    }

    #[test]
    fn one_event_per_instance_and_none_beside_an_explicit_xid() {
        let heartbeat = "[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200";
        let log = parse_kernel_log(&format!("{heartbeat}\n{heartbeat}\n"));
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].xid, 119);
        assert_eq!(log.xids[0].pci_bus_id, None);
        assert_eq!(log.xids[0].line_number, 1);
        let xid = "[   25.0] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU6 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).";
        let log = parse_kernel_log(&format!("{heartbeat}\n{xid}\n"));
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].pci_bus_id.as_deref(), Some("0000:9b:00.0"));
        // Another instance's explicit Xid does not hide this one.
        let log = parse_kernel_log(&format!("{heartbeat}\n{}\n", xid.replace("GPU6", "GPU2")));
        assert_eq!(log.xids.len(), 2);
    }
}
