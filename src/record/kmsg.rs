//! What of a kernel log a capture keeps: the NVIDIA, Xid/SXid, PCIe AER and recovery lines the
//! checks read, with their continuation lines; everything else (USB, file systems, user names)
//! stays out of the capture.

/// The lines of a kernel log the checks read, with what is needed to parse them: NVRM/nvidia/
/// Xid/SXid records, ConnectX events, firmware-first records, crashes in NCCL, PCIe AER reports (`AER:`, `PCIe Bus Error`, the `error status/mask` and
/// error-bit lines), the lines that say a device was brought back (`Linux version`, `pci <bdf>:
/// [vvvv:dddd] type`, `GPU reset executed`, journal boot separators), and the continuation
/// lines that follow them (`/dev/kmsg` continuation lines start with a space; XID 119's GSP
/// history is more NVRM lines). Everything else (USB, filesystems, user names) stays out.
pub fn nvidia_kernel_lines(text: &str) -> String {
    let mut out = String::new();
    let mut keeping = false;
    for line in text.lines() {
        let relevant = [
            "NVRM",
            "nvidia",
            "NVIDIA",
            "Xid",
            "SXid",
            "nvswitch",
            "AER",
            "PCIe Bus Error",
            "error status/mask",
            "Linux version",
            "GPU reset executed",
            "-- Boot ",
            "-- Reboot --",
        ]
        .iter()
        .any(|k| line.contains(k))
            || aer_detail_or_enumeration(line)
            || crate::facts::mce::is_mce_line(crate::facts::xid::split_line(line).1.trim_end());
        let continuation = line.starts_with(' ') || line.starts_with('\t');
        if relevant || (keeping && continuation) {
            out.push_str(line);
            out.push('\n');
            keeping = true;
        } else {
            keeping = false;
        }
    }
    out
}

/// `pcieport 0000:00:03.0:    [ 5] SDES` (an AER error bit), `pci 0000:2b:00.0: [10de:2330]
/// type 00 class ...` (a function enumerated), `mlx5_core ...: Link down`, a GHES record line,
/// a crash line: lines the kernel-log parser reads that carry no keyword of their own.
fn aer_detail_or_enumeration(line: &str) -> bool {
    let (_, message) = crate::facts::xid::split_line(line);
    crate::facts::xid::is_read_without_keyword(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_nvidia_lines_and_their_continuations() {
        let log = "6,1,1,-;usb 1-1: new device\n4,2,2,-;NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:2b:00.0\n6,3,3,-;eth0: link up\n";
        let kept = nvidia_kernel_lines(log);
        assert_eq!(kept.lines().count(), 3, "{kept}");
        assert!(!kept.contains("usb") && !kept.contains("eth0"));
    }

    #[test]
    fn keeps_aer_reports_and_recovery_lines() {
        // wilicc/gpu-burn#1 and NVIDIA/nvidia-docker#895 lines, among lines that must go.
        let log = "[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010\n\
                   [74889.542125] pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00000020/00000000\n\
                   [74889.542184] pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)\n\
                   [    0.110779] pci 0000:00:1f.0: [8086:9cc3] type 00 class 0x060100\n\
                   [    0.110989] pci 0000:00:1f.2: reg 0x10: [io  0xf0b0-0xf0b7]\n\
                   [    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007)\n\
                   [   12.000000] usb 1-1: new high-speed USB device number 2\n";
        let kept = nvidia_kernel_lines(log);
        assert_eq!(kept.lines().count(), 5, "{kept}");
        assert!(!kept.contains("usb") && !kept.contains("reg 0x10"));
    }
}
