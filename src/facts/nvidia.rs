//! The NVIDIA driver as the host shows it without NVML: the kernel module's version
//! (`/sys/module/nvidia/version`, `/proc/driver/nvidia/version`), the per-GPU `information` files,
//! the `/dev/nvidia*` nodes and the user-space `libnvidia-ml.so.<version>` files
//! (reference/sysfs.md §10–12).

use std::collections::BTreeMap;

use super::trimmed;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const SYS_MODULE_NVIDIA_VERSION: &str = "sys/module/nvidia/version";
pub const PROC_DRIVER_VERSION: &str = "proc/driver/nvidia/version";
pub const PROC_DRIVER_GPUS: &str = "proc/driver/nvidia/gpus";

/// Where user-space NVML lives on the distributions GPU nodes run (Debian/Ubuntu multiarch,
/// RHEL lib64, aarch64, and the GPU Operator's driver container root).
pub const NVML_LIBRARY_DIRS: &[&str] = &[
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "run/nvidia/driver/usr/lib/x86_64-linux-gnu",
    "run/nvidia/driver/usr/lib64",
    // GKE Container-Optimized OS: the driver installer's directory.
    "home/kubernetes/bin/nvidia/lib64",
];

pub use crate::text::is_driver_version;

/// `/proc/driver/nvidia/version`, first line e.g.
/// `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (...)`:
/// the first version-shaped token after `Module` (sysfs.md §11).
pub fn parse_proc_driver_version(text: &str) -> Result<String, ParseError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("NVRM version:"))
        .ok_or_else(|| ParseError::new("no `NVRM version:` line"))?;
    let after = line
        .split_once("Module")
        .map(|(_, rest)| rest)
        .ok_or_else(|| ParseError::new("no `Module` in the NVRM version line"))?;
    after
        .split_whitespace()
        .find(|t| is_driver_version(t))
        .map(str::to_string)
        .ok_or_else(|| ParseError::new("no version number in the NVRM version line"))
}

/// `/sys/module/nvidia/version`: the bare version.
pub fn parse_module_version(text: &str) -> Result<String, ParseError> {
    let t = trimmed(text);
    if is_driver_version(t) {
        Ok(t.to_string())
    } else {
        Err(ParseError::new(format!(
            "not a driver version: {:?}",
            super::pci::short(t)
        )))
    }
}

/// `proc/driver/nvidia/gpus/<bdf>/information`: `Key:   value` lines, split on the first `:`.
pub fn parse_information(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// The loaded module's version and the file it came from; `Ok(None)` when neither file exists
/// (module not loaded).
pub fn gather_module_version(
    source: &dyn Source,
) -> Result<Option<(String, &'static str)>, FactError> {
    match source.read_to_string(SYS_MODULE_NVIDIA_VERSION) {
        Ok(text) => {
            return parse_module_version(&text)
                .map(|v| Some((v, SYS_MODULE_NVIDIA_VERSION)))
                .map_err(|e| FactError::parse(SYS_MODULE_NVIDIA_VERSION, e));
        }
        Err(err) if !err.is_missing() => return Err(err.into()),
        Err(_) => {}
    }
    match source.read_to_string(PROC_DRIVER_VERSION) {
        Ok(text) => parse_proc_driver_version(&text)
            .map(|v| Some((v, PROC_DRIVER_VERSION)))
            .map_err(|e| FactError::parse(PROC_DRIVER_VERSION, e)),
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// A GPU's `proc/driver/nvidia/gpus/<bdf>/information` as key → value (`Video BIOS` →
/// `96.00.99.00.01`); `Ok(None)` when the file is not there (driver not loaded, partial capture).
pub fn gather_information(
    source: &dyn Source,
    bdf: &str,
) -> Result<Option<BTreeMap<String, String>>, FactError> {
    match source.read_to_string(&format!("{PROC_DRIVER_GPUS}/{bdf}/information")) {
        Ok(text) => Ok(Some(parse_information(&text))),
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Versions of the user-space NVML libraries installed (`libnvidia-ml.so.550.90.07`), with the
/// path of each, sorted and de-duplicated by version.
pub fn gather_nvml_library_versions(source: &dyn Source) -> Vec<(String, String)> {
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for dir in NVML_LIBRARY_DIRS {
        let Ok(names) = source.read_dir(dir) else {
            continue;
        };
        for name in names {
            if let Some(version) = name
                .strip_prefix("libnvidia-ml.so.")
                .filter(|v| is_driver_version(v))
            {
                found
                    .entry(version.to_string())
                    .or_insert_with(|| format!("{dir}/{name}"));
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_real_nvrm_version_line() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.216.03  Thu Apr  3 01:14:19 UTC 2025\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Feb 22 01:25:25 UTC 2024\n";
        let arm = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build  (x)  Mon\n";
        let jetson = "NVRM version: NVIDIA UNIX Kernel Module for aarch64  34.1.1  Release Build  (buildbrain@mobile)\n";
        assert_eq!(
            parse_proc_driver_version(proprietary).unwrap(),
            "535.216.03"
        );
        assert_eq!(parse_proc_driver_version(open).unwrap(), "550.54.14");
        assert_eq!(parse_proc_driver_version(arm).unwrap(), "580.65.06");
        assert_eq!(parse_proc_driver_version(jetson).unwrap(), "34.1.1");
        assert!(parse_proc_driver_version("NVRM version: garbage\n").is_err());
        assert!(parse_proc_driver_version("").is_err());
    }

    #[test]
    fn parses_module_version_and_information() {
        assert_eq!(parse_module_version("550.54.15\n").unwrap(), "550.54.15");
        assert!(parse_module_version("\u{1}\u{2}").is_err());
        let info = parse_information(
            "Model:           NVIDIA H100 80GB HBM3\nIRQ:             10\nGPU UUID:        GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b\nBus Location:    0000:62:00.0\nDevice Minor:    5\n",
        );
        assert_eq!(info["Device Minor"], "5");
        assert_eq!(info["Bus Location"], "0000:62:00.0");
        assert_eq!(info["GPU UUID"], "GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b");
    }

    #[test]
    fn reads_the_video_bios_of_real_information_files() {
        // DataDog/datadog-agent, pkg/gpu/safenvml tests: `sampleGPUInformation` (an AWS A10G).
        let a10g = "Model: \t\t NVIDIA A10G\nIRQ:   \t\t 42\nGPU UUID: \t GPU-82523fd8-3897-f599-d088-ccd04ae45ec1\nVideo BIOS: \t 94.04.42.00.01\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t 0000:00:1e.0\nDevice Minor: \t 3\nGPU Excluded: \t No\n";
        let info = parse_information(a10g);
        assert_eq!(info["Video BIOS"], "94.04.42.00.01");
        assert_eq!(info["Model"], "NVIDIA A10G");
        // An nvnews.net forum post: a card whose VBIOS the driver could not read prints `??`.
        let unread = "Model: \t\t GeForce 8600M GS\nIRQ:   \t\t 16\nVideo BIOS: \t ??.??.??.??.??\nCard Type: \t PCI-E\n";
        assert_eq!(parse_information(unread)["Video BIOS"], "??.??.??.??.??");
    }
}
