//! Tests of what the parser reads besides XIDs: timestamps and boots, the recovery markers, and
//! PCIe AER reports. Real kernel-log lines are copied byte for byte from the public reports
//! named above each constant (trailing spaces included where the report has them); synthetic
//! variations are built from them.

use super::stamp::{Clock, When, when};
use super::*;

/// rwth-i6/returnn#1500 (`dmesg -H`, relative stamps only): a fatal Surprise Down on the root
/// port above an NVIDIA GPU that cannot recover.
const RETURNN_1500: &str = "\
[  +0.000844] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)
[  +0.000001] snd_hda_intel 0000:03:00.1: AER: can't recover (no error_detected callback)
[  +0.000008] pcieport 0000:00:03.0: AER: device recovery failed
[  +0.000001] pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0
[  +0.000004] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)
[  +0.000898] pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00004020/00000000
[  +0.000889] pcieport 0000:00:03.0:    [ 5] SDES                  
[  +0.000894] pcieport 0000:00:03.0:    [14] CmpltTO                (First)
[  +0.000921] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)
[  +0.000002] snd_hda_intel 0000:03:00.1: AER: can't recover (no error_detected callback)
[  +1.050439] pcieport 0000:00:03.0: AER: Root Port link has been reset (0)
[  +0.000041] pcieport 0000:00:03.0: AER: device recovery failed
";

/// wilicc/gpu-burn#1 (`dmesg`, kernel of the `id=` era): a corrected replay timeout, then a fatal
/// Surprise Down on the root port above GPU 0000:02:00.0, which falls off the bus (XID 79).
const GPU_BURN_1: &str = "\
[74785.660366] pcieport 0000:00:02.0: AER: Corrected error received: id=0010
[74785.660380] pcieport 0000:00:02.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=0010(Transmitter ID)
[74785.660496] pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00001000/00002000
[74785.660559] pcieport 0000:00:02.0:    [12] Replay Timer Timeout  
[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010
[74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)
[74889.542125] pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00000020/00000000
[74889.542184] pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)
[74889.542234] pcieport 0000:00:02.0: broadcast error_detected message
[74889.542239] nvidia 0000:02:00.0: device has no AER-aware driver
[74889.644112] NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df
[74889.644132] NVRM: GPU Board Serial Number: 0322716036227
[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.
";

/// pop-os/pop#3363 (syslog with the kernel's stamp, kernel 6.x wording `Correctable`).
const POP_3363: &str = "\
Sep 19 16:18:02 bubz kernel: [68183.615790] pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0
Sep 19 16:18:02 bubz kernel: [68183.615810] pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)
Sep 19 16:18:02 bubz kernel: [68183.615818] pcieport 0000:00:03.1:   device [1022:1453] error status/mask=00001000/00006000
Sep 19 16:18:02 bubz kernel: [68183.615826] pcieport 0000:00:03.1:    [12] Timeout               
";

/// hirschmann/nbfc#181 (journalctl with a localised month, no kernel stamp, `id=` form).
const NBFC_181: &str = "\
jan. 29 20:50:17 kevin kernel: pcieport 0000:00:1c.5: AER: Corrected error received: id=00e5
jan. 29 20:50:17 kevin kernel: pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=00e5(Receiver ID)
jan. 29 20:50:17 kevin kernel: pcieport 0000:00:1c.5:   device [8086:9d15] error status/mask=00000001/00002000
jan. 29 20:50:17 kevin kernel: pcieport 0000:00:1c.5:    [ 0] Receiver Error 
";

/// NVIDIA/NVSentinel#155: a GPU falling off the bus without an XID, then the driver loading.
const NVSENTINEL_155: &str = "\
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025
";

/// NVIDIA/nvidia-docker#895: the PCI core enumerating functions at boot.
const PCI_ENUM_895: &str = "\
[    0.110779] pci 0000:00:1f.0: [8086:9cc3] type 00 class 0x060100
[    0.110974] pci 0000:00:1f.2: [8086:9c83] type 00 class 0x010601
[    0.110989] pci 0000:00:1f.2: reg 0x10: [io  0xf0b0-0xf0b7]
";

/// scitix/sichek#51 (`dmesg -T`): the driver refusing work until the GPU is reset.
const SICHEK_51: &str = "[Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874 ";

/// reference/gpu-health.md §8 (NVIDIA/nccl#2241 and open-gpu-kernel-modules#1134 quote them).
const XID_154_DRAIN: &str = "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)";
const SXID_FATAL: &str =
    "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up";

#[test]
fn fatal_surprise_down_that_cannot_recover() {
    let log = parse_kernel_log(RETURNN_1500);
    assert_eq!(log.aer.len(), 1, "{:#?}", log.aer);
    let e = &log.aer[0];
    assert_eq!(e.device, "0000:00:03.0");
    assert_eq!(e.driver, "pcieport");
    assert_eq!(e.severity, AerSeverity::Fatal);
    assert_eq!(e.layer.as_deref(), Some("Transaction Layer"));
    assert_eq!(e.received_by.as_deref(), Some("0000:00:03.0"));
    assert!(e.multiple);
    assert_eq!(e.errors, ["SDES", "CmpltTO"]);
    assert_eq!(e.first.as_deref(), Some("CmpltTO"));
    assert!(e.errors.iter().any(|n| events::is_surprise_down(n)));
    let failed: Vec<&str> = log
        .markers
        .iter()
        .filter(|m| m.kind == MarkerKind::AerFailed)
        .filter_map(|m| m.device.as_deref())
        .collect();
    assert_eq!(
        failed,
        [
            "0000:03:00.0",
            "0000:03:00.1",
            "0000:00:03.0",
            "0000:03:00.0",
            "0000:03:00.1",
            "0000:00:03.0"
        ]
    );
    // Deltas without an absolute stamp before them give no time.
    assert_eq!(log.stamped_lines, 0);
    assert!(e.stamp.is_none());
    assert_eq!(log.boots, 1);
}

#[test]
fn surprise_down_above_a_gpu_then_xid_79() {
    let log = parse_kernel_log(GPU_BURN_1);
    assert_eq!(log.aer.len(), 2, "{:#?}", log.aer);
    let (cor, fatal) = (&log.aer[0], &log.aer[1]);
    assert_eq!(cor.severity, AerSeverity::Corrected);
    assert_eq!(cor.errors, ["Replay Timer Timeout"]);
    // `id=0010` is bus 0, device 2, function 0: the port itself.
    assert_eq!(cor.received_by.as_deref(), Some("0000:00:02.0"));
    assert_eq!(fatal.severity, AerSeverity::Fatal);
    assert_eq!(fatal.first.as_deref(), Some("Surprise Down Error"));
    assert_eq!(fatal.stamp, Some(Stamp::SinceBoot(74889.542044)));
    assert_eq!(log.xids.len(), 1);
    assert_eq!(log.xids[0].stamp, Some(Stamp::SinceBoot(74889.644138)));
    assert_eq!(
        log.uuids.get("0000:02:00.0").map(String::as_str),
        Some("GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df")
    );
}

#[test]
fn correctable_in_new_and_old_wording() {
    let log = parse_kernel_log(POP_3363);
    assert_eq!(log.aer.len(), 1);
    assert_eq!(log.aer[0].severity, AerSeverity::Corrected);
    assert_eq!(log.aer[0].received_by.as_deref(), Some("0000:00:03.1"));
    assert_eq!(log.aer[0].errors, ["Timeout"]);
    // The kernel's stamp inside the syslog line wins over the syslog date.
    assert_eq!(log.aer[0].stamp, Some(Stamp::SinceBoot(68183.61581)));

    let log = parse_kernel_log(NBFC_181);
    assert_eq!(log.aer.len(), 1);
    assert_eq!(log.aer[0].device, "0000:00:1c.5");
    assert_eq!(log.aer[0].received_by.as_deref(), Some("0000:00:1c.5"));
    assert_eq!(log.aer[0].layer.as_deref(), Some("Physical Layer"));
    assert!(matches!(log.aer[0].stamp, Some(Stamp::Wall(w)) if w.month == 1 && w.day == 29));
}

#[test]
fn a_received_line_without_its_report_is_its_own_event() {
    let log = parse_kernel_log(
        "[ 5.0] pcieport 0000:17:01.0: AER: Uncorrected (Fatal) error received: 0000:18:00.0\n\
         [ 6.0] usb 1-1: new high-speed USB device\n\
         [ 7.0] pcieport 0000:17:01.0: AER: Corrected error received: 0000:17:01.0\n",
    );
    assert_eq!(log.aer.len(), 2, "{:#?}", log.aer);
    assert_eq!(log.aer[0].device, "0000:18:00.0");
    assert_eq!(log.aer[0].severity, AerSeverity::Fatal);
    assert_eq!(log.aer[0].received_by.as_deref(), Some("0000:17:01.0"));
    assert_eq!(log.aer[1].device, "0000:17:01.0");
}

#[test]
fn markers_from_real_lines() {
    let log = parse_kernel_log(NVSENTINEL_155);
    assert_eq!(log.xids.len(), 1);
    assert_eq!(log.xids[0].xid, 79);
    let load: Vec<&Marker> = log
        .markers
        .iter()
        .filter(|m| m.kind == MarkerKind::DriverLoad)
        .collect();
    assert_eq!(load.len(), 1);
    assert!(load[0].line_number > log.xids[0].line_number);

    let log = parse_kernel_log(PCI_ENUM_895);
    let enumerated: Vec<&str> = log
        .markers
        .iter()
        .filter(|m| m.kind == MarkerKind::PciEnumerated)
        .filter_map(|m| m.device.as_deref())
        .collect();
    assert_eq!(enumerated, ["0000:00:1f.0", "0000:00:1f.2"]);

    // Kernel 6.x adds the port type; NVSentinel's reset note; the NVSwitch driver's probe.
    let log = parse_kernel_log(
        "[ 1.0] pci 0000:2b:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint\n\
         Nov 30 07:01:02 node logger: GPU reset executed: GPU-455d8f70-2051-db6c-0430-ffc457bff834, success: true\n\
         Nov 30 07:01:03 node logger: GPU reset executed: GPU-455d8f70-2051-db6c-0430-ffc457bff834, success: false\n\
         [ 14.513008] nvidia-nvswitch: Probing device 0000:05:00.0, Vendor Id = 0x10de, Device Id = 0x22a3, Class = 0x68000\n",
    );
    let kinds: Vec<(MarkerKind, Option<&str>)> = log
        .markers
        .iter()
        .map(|m| (m.kind, m.device.as_deref().or(m.uuid.as_deref())))
        .collect();
    assert_eq!(
        kinds,
        [
            (MarkerKind::PciEnumerated, Some("0000:2b:00.0")),
            (
                MarkerKind::ResetExecuted,
                Some("GPU-455d8f70-2051-db6c-0430-ffc457bff834")
            ),
            (MarkerKind::NvswitchProbe, Some("0000:05:00.0")),
        ]
    );
}

#[test]
fn boots_split_the_log() {
    let text = "\
[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 (Ubuntu 5.15.0-105.115-generic 5.15.131)
[ 5000.000000] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007)
[   20.000000] NVRM: Xid (PCI:0000:2b:00): 13, pid=1, name=x, Graphics Exception
[    3.000000] usb 1-1: a line stamped back in time without a reboot
";
    let log = parse_kernel_log(text);
    assert_eq!(log.boots, 2);
    assert_eq!(log.xids[0].boot, 0);
    assert_eq!(log.xids[1].boot, 1);
    assert_eq!(log.out_of_order, 1);
    let clock = Clock {
        uptime_s: Some(100.0),
        boot_unix: None,
        now_unix: None,
    };
    let x = &log.xids;
    assert_eq!(
        when(x[0].stamp.as_ref(), x[0].boot, log.boots, &clock),
        When::EarlierBoot
    );
    assert_eq!(
        when(x[1].stamp.as_ref(), x[1].boot, log.boots, &clock).secs(),
        Some(80.0)
    );
    // Stamps that start over without a banner (two dmesg dumps pasted together) are a boot.
    let log = parse_kernel_log(
        "[ 900.0] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n[ 2.0] usb 1-1: x\n",
    );
    assert_eq!(log.boots, 2);
    // The journal's separator.
    let log = parse_kernel_log(
        "Nov 30 07:01:02 n kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n-- Boot 6c4e0a0f8b2b4b9e --\nNov 30 08:01:02 n kernel: Linux version 5.15.0\n",
    );
    assert_eq!(log.boots, 2);
    assert_eq!(log.markers.len(), 2);
}

#[test]
fn dmesg_h_deltas_add_up_from_the_minute_line() {
    let log = parse_kernel_log(
        "[Nov30 07:01] usb 1-1: x\n[  +2.500000] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n[  +1.000000] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up\n",
    );
    let Some(Stamp::Wall(w)) = log.xids[0].stamp else {
        panic!("{:?}", log.xids[0].stamp)
    };
    assert_eq!(
        (w.month, w.day, w.hour, w.minute, w.plus),
        (11, 30, 7, 1, 2.5)
    );
    let Some(Stamp::Wall(w)) = log.sxids[0].stamp else {
        panic!()
    };
    assert_eq!(w.plus, 3.5);
    assert_eq!(log.sxids[0].link, Some(48));
}

#[test]
fn every_real_line_gets_its_time() {
    let log = parse_kernel_log(SICHEK_51);
    assert_eq!(log.stamped_lines, 1);
    let log = parse_kernel_log(&format!(
        "[  123.4] {XID_154_DRAIN}\n[  124.5] {SXID_FATAL}\n"
    ));
    assert_eq!(log.xids[0].stamp, Some(Stamp::SinceBoot(123.4)));
    assert_eq!(
        log.xids[0].recovery_action().map(|(t, _)| t),
        Some("0x4 (Drain and Reset)")
    );
    assert_eq!(log.sxids[0].stamp, Some(Stamp::SinceBoot(124.5)));
    assert_eq!(log.sxids[0].timestamp.as_deref(), Some("[  124.5]"));
    assert!(log.sxids[0].is_fatal());
}

#[test]
fn junk_around_aer_lines_never_panics_or_invents() {
    for line in [
        "pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received:",
        "pcieport 0000:00:03.0: AER: Strange error received: 0000:00:03.0",
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Bogus, type=Transaction Layer",
        "pcieport 0000:00:03.0:    [xx] SDES",
        "pcieport 0000:00:03.0:    [ 5]",
        "pcieport zz: AER: Corrected error received: 0000:00:03.0",
        "pci 0000:2b:00.0: [10de:23] type 00 class 0x030200",
        "GPU reset executed: GPU-",
        "[ +x] nvidia 0000:03:00.0: AER: can't recover",
        "pcieport 0000:00:03.0: AER: Corrected error received: id=zzzz",
    ] {
        let log = parse_kernel_log(line);
        assert!(
            log.aer.iter().all(|e| e.device.len() == 12),
            "{line}: {log:?}"
        );
        assert!(log.markers.len() <= 1, "{line}");
    }
    // A bit line of another device never attaches to the open report.
    let log = parse_kernel_log(
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)\nnvme 0000:05:00.0:    [ 5] SDES\n",
    );
    assert!(log.aer[0].errors.is_empty());
}
