//! Tests of the kernel-log parser and the XID catalogue, on the literal lines of
//! reference/gpu-health.md §8 and variations of them.

use super::*;
use crate::report::Action;

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
        for (prefix, timestamp) in STYLES {
            let input = format!("{prefix}{line}");
            let log = parse_kernel_log(&input);
            assert_eq!(log.skipped_lines, 0, "{input}");
            assert!(log.xids.is_empty(), "{input}");
            assert_eq!(log.sxids.len(), 1, "{input}");
            let got = &log.sxids[0];
            let want = SxidEvent {
                sxid: *sxid,
                pci_bus_id: Some(bus.to_string()),
                switch: Some(switch.to_string()),
                fatal: *fatal,
                link: detail
                    .strip_prefix("Link ")
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse().ok()),
                detail: detail.to_string(),
                line_number: 1,
                timestamp: timestamp.map(str::to_string),
                stamp: got.stamp,
                boot: 0,
            };
            assert_eq!(got, &want, "{input}");
            assert_eq!(got.stamp.is_some(), timestamp.is_some(), "{input}");
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
    // A GSP timeout's banner or RPC table with no Xid line in the log is the timeout itself
    // (gsp.rs): XID 119 without a bus id, never a skipped line.
    for line in [
        "NVRM: _kgspLogXid119: ********************************* GSP Timeout ****",
        "NVRM: GPU4 RPC history (CPU -> GSP):",
    ] {
        let log = parse_kernel_log(line);
        assert_eq!(log.xids.len(), 1, "{line}");
        assert_eq!(
            (log.xids[0].xid, log.xids[0].pci_bus_id.as_deref()),
            (119, None)
        );
        assert_eq!(log.skipped_lines, 0);
    }
    let not_counted = [
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
        assert!(found_nothing(&log), "{line:?}: {log:?}");
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
            XidSeverity::Application if xid == 45 => {
                assert_eq!(i.action, Action::RestartComponent)
            }
            XidSeverity::Application => assert_eq!(i.action, Action::CheckWorkload),
            XidSeverity::Informational => assert_eq!(i.action, Action::None),
            XidSeverity::Unknown => unreachable!(),
        }
    }
    // NVIDIA's immediate buckets: RESTART_APP (13, 31, 94), WORKFLOW_XID_45, IGNORE (43).
    for xid in [13, 31, 45, 68, 94, 109] {
        assert_eq!(xid_info(xid).severity, XidSeverity::Application, "{xid}");
    }
    assert_eq!(xid_info(43).severity, XidSeverity::Informational);
    for xid in [48, 74, 79, 95, 119, 120] {
        assert_eq!(xid_info(xid).severity, XidSeverity::Fatal, "{xid}");
    }
    assert_eq!(xid_info(95).action, Action::ResetGpu);
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

/// No event, marker, mapping or skipped line (the line counters may move).
fn found_nothing(log: &KernelLog) -> bool {
    log.xids.is_empty()
        && log.sxids.is_empty()
        && log.aer.is_empty()
        && log.markers.is_empty()
        && log.uuids.is_empty()
        && log.skipped_lines == 0
}
