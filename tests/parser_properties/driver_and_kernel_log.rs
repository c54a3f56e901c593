//! The driver (modules, NVRM version, per-GPU information, NVML answers) and the kernel log
//! (its XID lines read back their number and GPU).

use super::*;

// ---------------------------------------------------------------------------------------------
// Driver: modules, NVRM version, per-GPU information, NVML answers

const MODULE_TOKENS: &[&str] = &[
    "nvidia ",
    "nvidia_uvm ",
    "54165504 ",
    "270 ",
    "- ",
    "nvidia_modeset,nvidia_uvm,",
    "Live ",
    "Loading ",
    "Unloading ",
    "0x0000000000000000",
    " (POE)",
    " (OE)",
    "(",
    ")",
    "\n",
];

#[test]
fn modules_and_driver_files_never_panic() {
    let mut samples = vec![
        healthy("proc/modules"),
        healthy("proc/driver/nvidia/version"),
        healthy("sys/module/nvidia/version"),
        healthy("proc/driver/nvidia/gpus/0000:18:00.0/information"),
    ];
    samples.push("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n".into());
    property(
        "modules",
        {
            let samples = samples.clone();
            move || inputs(MODULE_TOKENS, samples)
        },
        |t| {
            if let Ok(modules) = modules::parse_proc_modules(t) {
                for m in &modules {
                    let _ = m.is_live();
                }
            }
        },
    );
    property(
        "nvidia",
        move || {
            inputs(
                &[
                    "NVRM version:",
                    "Module",
                    " 550.54.15 ",
                    "550.54",
                    "1.2.3.4",
                    "Model:",
                    "\t",
                    ": ",
                ],
                samples,
            )
        },
        |t| {
            let _ = nvidia::is_driver_version(t);
            let _ = nvidia::parse_proc_driver_version(t);
            let _ = nvidia::parse_module_version(t);
            let _ = nvidia::parse_information(t);
            let _ = cdi::driver_version_in_path(t);
        },
    );
}

#[test]
fn nvml_json_never_panics() {
    let samples = capture_files("nvml.json");
    property(
        "nvml.json",
        move || {
            inputs(
                &[
                    "{",
                    "}",
                    "\"value\":",
                    "\"not_supported\"",
                    "null",
                    "[",
                    "]",
                    ",",
                ],
                samples,
            )
        },
        |t| {
            if let Ok(facts) = nvml::parse_nvml_json(t) {
                // What the checks do with it first: serialise into the report.
                let _ = serde_json::to_string(&facts).unwrap();
            }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Kernel log

const KMSG_TOKENS: &[&str] = &[
    "NVRM: Xid (PCI:0000:18:00): ",
    "NVRM: Xid (",
    "PCI:",
    "0000:2b:00",
    "10000:2B:00",
    "79, ",
    "48, ",
    "13, ",
    "119, ",
    "4294967296, ",
    "pid=",
    "1234, ",
    "name=python, ",
    "Ch 00000010",
    "GPU has fallen off the bus.",
    "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): ",
    "12028, ",
    "Non-fatal, Link 32 ",
    "NVRM: GPU at PCI:0000:2b:00: GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b",
    "NVRM: The NVIDIA GPU 0000:18:00.0\n",
    "NVRM: fallen off the bus and is not responding to commands.\n",
    "NVRM:     entry function",
    "NVRM: GPU4 RPC history (CPU -> GSP):",
    "NVRM: _kgspLogXid119: ****",
    "[  123.456789] ",
    "[Mon Nov 30 07:01:02 2026] ",
    "<4>[ 12.3] ",
    "Nov 30 07:01:02 gpu-node-7 kernel: ",
    "6,1234,5678,-;",
    "4,99,18446744073709551616,c;",
    " SUBSYSTEM=pci",
    " DEVICE=+pci:0000:2b:00.0",
    "\n",
    "\n",
    "\n ",
];

#[test]
fn kernel_logs_never_panic() {
    let mut samples = capture_files("kmsg.txt");
    samples.push(
        "[38889.018120] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)\n\
         [ 5.1] NVRM: The NVIDIA GPU 0000:18:00.0\n\
         [ 5.1] NVRM: fallen off the bus and is not responding to commands.\n"
            .into(),
    );
    property(
        "kernel log",
        move || inputs(KMSG_TOKENS, samples),
        |t| {
            let log = xid::parse_kernel_log(t);
            for event in &log.xids {
                let _ = event.info();
                let _ = event.recovery_action();
            }
            assert!(log.xids.len() + log.sxids.len() <= t.lines().count());
        },
    );
}

#[test]
fn xid_lines_read_back_their_number_and_gpu() {
    property(
        "xid round trip",
        move || {
            (
                any::<u32>(),
                any::<u8>(),
                prop::sample::select(&["", "[ 12.345678] ", "6,1234,5678,-;", "<4>[ 1.0] "][..]),
            )
        },
        |&(number, bus, prefix)| {
            let line = format!(
                "{prefix}NVRM: Xid (PCI:0000:{bus:02x}:00): {number}, pid=1, name=x, detail\n"
            );
            let log = xid::parse_kernel_log(&line);
            assert_eq!(log.xids.len(), 1, "{line}");
            assert_eq!(log.xids[0].xid, number);
            assert_eq!(
                log.xids[0].pci_bus_id.as_deref(),
                Some(format!("0000:{bus:02x}:00.0").as_str())
            );
        },
    );
}
