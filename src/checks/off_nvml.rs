//! GPUs on PCI that NVML does not list: fallen off the bus (XID 79) while the kernel keeps the
//! function, so the driver's `proc/driver/nvidia/gpus/<bdf>/information` still names its uuid.
//! Checks downstream of the driver (CDI specs, the device plugin's allocatable ids) ask this to
//! tell "a name nothing has" from "a name of the GPU NVML lost" (checks/causes.rs); judging the
//! loss itself is `driver.gpu_count`'s. Reads facts only; decides nothing.

use super::Context;
use crate::answers::nvml::normalize_bus_id;
use crate::facts::nvidia;

/// One GPU on PCI that NVML does not list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffNvml {
    /// PCI bus id, `0000:ba:00.0`.
    pub bdf: String,
    /// `GPU UUID` of its `information` file, when the driver still shows it.
    pub uuid: Option<String>,
}

/// The NVIDIA GPUs on PCI that NVML does not list, in PCI order. Empty when NVML did not
/// initialise, PCI could not be read, or NVML has a device without a bus id (any GPU could be
/// that one). GPUs the driver excludes (`GPU Excluded: Yes`, NVreg_ExcludedGpus) are left out:
/// NVML skips them by design.
pub fn off_nvml(ctx: &Context<'_>) -> Vec<OffNvml> {
    let nvml = ctx.nvml();
    let Ok(pci) = ctx.pci() else {
        return Vec::new();
    };
    if nvml.init_error.is_some() || nvml.devices.iter().any(|d| d.pci_bus_id.is_none()) {
        return Vec::new();
    }
    let bus = |b: &str| normalize_bus_id(b).unwrap_or_else(|| b.to_string());
    let listed: Vec<String> = nvml
        .devices
        .iter()
        .filter_map(|d| d.pci_bus_id.as_deref().map(bus))
        .collect();
    pci.nvidia_gpus()
        .filter(|g| !listed.contains(&bus(&g.bdf)))
        .filter_map(|g| {
            let info = nvidia::gather_information(ctx.source(), &g.bdf)
                .ok()
                .flatten();
            let excluded = info
                .as_ref()
                .and_then(|i| i.get("GPU Excluded"))
                .is_some_and(|v| v.eq_ignore_ascii_case("yes"));
            (!excluded).then(|| OffNvml {
                bdf: g.bdf.clone(),
                uuid: info.and_then(|i| i.get("GPU UUID").cloned()),
            })
        })
        .collect()
}

/// Is `name` (a uuid, `3` or `gpu3`) one the GPUs off NVML can account for: the uuid of one of
/// them, or an index at or past NVML's count but below the PCI count (NVML numbers the GPUs it
/// still has from 0, so the highest indexes are the ones that went)? `nvml_count` is the number
/// of devices NVML lists.
pub fn accounts_for(off: &[OffNvml], nvml_count: usize, name: &str) -> bool {
    if off.iter().any(|g| g.uuid.as_deref() == Some(name)) {
        return true;
    }
    let index = name
        .strip_prefix("gpu")
        .unwrap_or(name)
        .parse::<usize>()
        .ok();
    index.is_some_and(|i| i >= nvml_count && i < nvml_count + off.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(uuid: &str) -> OffNvml {
        OffNvml {
            bdf: "0000:ba:00.0".into(),
            uuid: Some(uuid.into()),
        }
    }

    #[test]
    fn a_lost_gpu_accounts_for_its_uuid_and_the_top_index_only() {
        let off = [gone("GPU-4d765193-a0b1-4b07-a7b9-b9db5c4098d2")];
        assert!(accounts_for(
            &off,
            7,
            "GPU-4d765193-a0b1-4b07-a7b9-b9db5c4098d2"
        ));
        assert!(accounts_for(&off, 7, "7"));
        assert!(accounts_for(&off, 7, "gpu7"));
        assert!(!accounts_for(&off, 7, "8"));
        assert!(!accounts_for(&off, 7, "6"));
        assert!(!accounts_for(
            &off,
            7,
            "GPU-00000000-0000-0000-0000-000000000000"
        ));
        assert!(!accounts_for(&[], 7, "7"));
    }
}
