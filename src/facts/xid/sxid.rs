//! NVSwitch SXID catalogue: NVIDIA Fabric Manager User Guide (DU-09883-001 v1.3, October 2023),
//! appendix "NVSwitch SXid Errors": D.4 non-fatal, D.5 fatal, D.6 always fatal, and "other
//! notable" SXIDs, as transcribed number by number in `leptonai/gpud`
//! `components/accelerator/nvidia/sxid/sxid.go` (commit 09b59a5). Data only; the check decides.
//!
//! The guide's recovery per class: non-fatal SXIDs need none (the switch corrects or retries;
//! watch for a fatal one following); a fatal SXID stalls the NVLink traffic through that port
//! (the GPUs behind it see XID 45/74) and needs the GPUs and NVSwitches reset (guide D.9, which
//! on bare metal is a node restart for most operators); an always-fatal SXID breaks the whole
//! fabric and needs the host restarted. The same SXID returning on the same port after that
//! points at the NVSwitch tray or the GPU baseboard.

use serde::Serialize;

/// Which list of the guide an SXID is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SxidClass {
    /// D.4 "Non-Fatal NVSwitch SXid Errors".
    NonFatal,
    /// D.5 "Fatal NVSwitch SXid Errors" (fatal to the ports and partitions using them).
    Fatal,
    /// D.6 "Always Fatal NVSwitch SXid Errors" (fatal to the whole fabric).
    AlwaysFatal,
    /// "Other Notable NVSwitch SXid Errors" (host interface, thermal events).
    Notable,
    /// Not in the guide.
    Unknown,
}

/// One catalogue row: the SXID's name in the guide and its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SxidInfo {
    pub sxid: u32,
    pub name: &'static str,
    pub class: SxidClass,
}

/// The guide's rows, by class.
const NON_FATAL: &[(u32, &str)] = &[
    (11004, "ingress invalid acl"),
    (11012, "single bit ecc error"),
    (11021, "single bit ecc error"),
    (11022, "single bit ecc error"),
    (11023, "single bit ecc error"),
    (12021, "single bit ecc error"),
    (12023, "single bit ecc error"),
    (12028, "egress non-posted priv error"),
    (15008, "single bit ecc error"),
    (15011, "single bit ecc error"),
    (19049, "single bit ecc error"),
    (19055, "single bit ecc error"),
    (19057, "single bit ecc error"),
    (19059, "single bit ecc error"),
    (19062, "single bit ecc error"),
    (19065, "single bit ecc error"),
    (19068, "single bit ecc error"),
    (19071, "single bit ecc error"),
    (19084, "an1 heartbeat timeout error"),
    (20001, "tx replay error"),
    (20009, "rx short error rate"),
    (20012, "broken/inconsistent connection"),
    (22013, "minion link dlreq interrupt"),
    (24001, "single bit ecc error"),
    (24002, "single bit ecc error"),
    (24003, "single bit ecc error"),
];

const FATAL: &[(u32, &str)] = &[
    (11001, "ingress invalid command"),
    (11009, "ingress invalid vcset"),
    (11013, "ingress header dbe"),
    (11018, "ingress rid dbe"),
    (11019, "ingress rlan dbe"),
    (11020, "ingress control parity"),
    (12001, "egress crossbar overflow"),
    (12002, "egress packet route"),
    (12022, "egress input ecc dbe error"),
    (12024, "egress output ecc dbe error"),
    (12025, "egress credit overflow"),
    (12026, "egress destination request id error"),
    (12027, "egress destination response id error"),
    (12030, "egress control parity error"),
    (12031, "egress credit parity error"),
    (12032, "egress flit type mismatch"),
    (14017, "ts ato timeout"),
    (15001, "route buffer over/underflow"),
    (15006, "route transdone over/underflow"),
    (15009, "route glt dbe"),
    (15010, "route parity"),
    (15012, "route incoming dbe"),
    (15013, "route credit parity"),
    (19047, "ncisoc hdr ecc dbe error"),
    (19048, "ncisoc dat ecc dbe error"),
    (19054, "hdr ram ecc dbe error"),
    (19056, "dat0 ram ecc dbe error"),
    (19058, "dat1 ram ecc dbe error"),
    (19060, "creq ram hdr ecc dbe error"),
    (19061, "creq ram dat ecc dbe error"),
    (19063, "response ram hdr ecc dbe error"),
    (19064, "response ram dat ecc dbe error"),
    (19066, "com ram hdr ecc dbe error"),
    (19067, "com ram dat ecc dbe error"),
    (19069, "rsp1 ram hdr ecc dbe error"),
    (19070, "rsp1 ram dat ecc dbe error"),
    (20034, "ltssm fault up (link went down from active)"),
    (22012, "minion link na interrupt"),
    (24004, "sourcetrack tcen0 crumbstore dbe"),
    (24005, "sourcetrack tcen0 td crumbstore dbe"),
    (24006, "sourcetrack tcen1 crumbstore dbe"),
    (24007, "sourcetrack timeout error"),
];

const ALWAYS_FATAL: &[(u32, &str)] = &[
    (12020, "egress sequence id error"),
    (22003, "minion halt"),
    (22011, "minion exterror"),
    (23001, "ingress src-vc buffer overflow"),
    (23002, "ingress src-vc buffer underflow"),
    (23003, "egress dst-vc credit overflow"),
    (23004, "egress dst-vc credit underflow"),
    (23005, "ingress packet burst error"),
    (23006, "ingress packet sticky error"),
    (23007, "possible bubbles at ingress"),
    (23008, "ingress packet invalid dst error"),
    (23009, "ingress packet parity error"),
    (23010, "ingress src-vc buffer overflow"),
    (23011, "ingress src-vc buffer underflow"),
    (23012, "egress dst-vc credit overflow"),
    (23013, "egress dst-vc credit underflow"),
    (23014, "ingress packet burst error"),
    (23015, "ingress packet sticky error"),
    (23016, "possible bubbles at ingress"),
    (23017, "ingress credit parity error"),
];

const NOTABLE: &[(u32, &str)] = &[
    (10001, "host priv error"),
    (10002, "host priv timeout"),
    (
        10003,
        "host unhandled interrupt (fatal to the fabric if it occurs)",
    ),
    (10004, "host thermal event start"),
    (10005, "host thermal event end"),
];

/// The guide's row for `sxid`; an SXID it does not list is [`SxidClass::Unknown`].
pub fn sxid_info(sxid: u32) -> SxidInfo {
    for (class, rows) in [
        (SxidClass::AlwaysFatal, ALWAYS_FATAL),
        (SxidClass::Fatal, FATAL),
        (SxidClass::NonFatal, NON_FATAL),
        (SxidClass::Notable, NOTABLE),
    ] {
        if let Some((_, name)) = rows.iter().find(|(n, _)| *n == sxid) {
            let class = if sxid == 10003 {
                SxidClass::AlwaysFatal
            } else {
                class
            };
            return SxidInfo { sxid, name, class };
        }
    }
    SxidInfo {
        sxid,
        name: "not in the fabric manager guide",
        class: SxidClass::Unknown,
    }
}

impl super::SxidEvent {
    /// Whether this event is fatal: the driver's own word on the line (`Fatal` / `Non-fatal`)
    /// when it printed one, else the guide's class.
    pub fn is_fatal(&self) -> bool {
        match self.fatal {
            Some(fatal) => fatal,
            None => matches!(
                sxid_info(self.sxid).class,
                SxidClass::Fatal | SxidClass::AlwaysFatal
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for (n, _) in NON_FATAL
            .iter()
            .chain(FATAL)
            .chain(ALWAYS_FATAL)
            .chain(NOTABLE)
        {
            assert!(seen.insert(*n), "sxid {n} listed twice");
        }
        assert_eq!(seen.len(), 26 + 42 + 20 + 5);
    }

    #[test]
    fn classes_follow_the_guide() {
        assert_eq!(sxid_info(20034).class, SxidClass::Fatal);
        assert_eq!(sxid_info(12028).class, SxidClass::NonFatal);
        assert_eq!(sxid_info(23001).class, SxidClass::AlwaysFatal);
        assert_eq!(sxid_info(10003).class, SxidClass::AlwaysFatal);
        assert_eq!(sxid_info(10004).class, SxidClass::Notable);
        assert_eq!(sxid_info(24007).name, "sourcetrack timeout error");
        assert_eq!(sxid_info(1).class, SxidClass::Unknown);
    }
}
