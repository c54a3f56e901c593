//! driver.power: a GPU's power draw held by its limit, and the limit not cut below the board's
//! default. A capped GPU runs every kernel slower and, in a data-parallel job, sets the pace of
//! every rank; a draw the limit does not hold points at the power controller or its sensor.
//!
//! NVML (nvml.h): `nvmlDeviceGetPowerUsage` is a 1 s average on Ampere (except GA100) and later,
//! an instantaneous reading before (gpu-health.md, "power"); `nvmlDeviceGetEnforcedPowerLimit`
//! is the lowest of every limit in force (the one `nvidia-smi -pl` sets, an out-of-band cap from
//! the BMC); `nvmlDeviceGetPowerManagementDefaultLimit` is the limit out of the box. DCGM's
//! diagnostic refuses to judge power on a GPU whose enforced limit is below what the test needs
//! (`DCGM_FR_ENFORCED_POWER_LIMIT`), and gpud reports draw against the enforced limit.

use super::*;

/// Draw this far above the enforced limit counts as "over": the reading is an average the
/// capping controller holds at the limit, so a few percent over is the controller settling.
pub const OVER_LIMIT_MARGIN: f64 = 1.05;

/// An enforced limit below this share of the default is a cap; 1 % absorbs the rounding of
/// limits set in whole watts (`nvidia-smi -pl 699.5` is not possible).
const CAPPED_BELOW: f64 = 0.99;

fn watts(mw: u32) -> String {
    let w = f64::from(mw) / 1000.0;
    if w.fract() == 0.0 {
        format!("{w:.0} W")
    } else {
        format!("{w:.1} W")
    }
}

pub(super) fn power(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (window, _) = window(ctx);
    let mut acc = PerGpu::new();
    let mut capped = Vec::new();
    let mut over: Vec<String> = Vec::new();
    let mut highest_share = 0.0f64;
    let mut defaults_known = 0usize;
    for d in &devices {
        let limit = acc.read(d, "power_limit_mw", &d.power_limit_mw).copied();
        let usage = acc.read(d, "power_usage_mw", &d.power_usage_mw).copied();
        let default = acc
            .read(d, "power_default_limit_mw", &d.power_default_limit_mw)
            .copied();
        let Some(limit) = limit.filter(|l| *l > 0) else {
            continue;
        };
        acc.judged += 1;
        let default = default.filter(|d| *d > 0);
        defaults_known += usize::from(default.is_some());
        if let Some(default) = default
            && f64::from(limit) < f64::from(default) * CAPPED_BELOW
        {
            let share = 100.0 * f64::from(limit) / f64::from(default);
            acc.warn_on(
                d,
                format!(
                    "{} capped at {} of its default {} ({share:.0}%)",
                    gpu_label(d),
                    watts(limit),
                    watts(default)
                ),
            );
            acc.evidence.push(
                Evidence::new(field(d, "power_limit_mw"), watts(limit))
                    .expected(format!("{} (the default limit)", watts(default))),
            );
            capped.push(d.pci_bus_id.clone().unwrap_or_else(|| d.index.to_string()));
        }
        let Some(usage) = usage else { continue };
        highest_share = highest_share.max(f64::from(usage) / f64::from(limit));
        if f64::from(usage) <= f64::from(limit) * OVER_LIMIT_MARGIN {
            continue;
        }
        over.push(d.pci_bus_id.clone().unwrap_or_else(|| d.index.to_string()));
        let before = match &window {
            Window::Sample(b) => d
                .pci_bus_id
                .as_ref()
                .and_then(|bus| b.gpus.get(bus))
                .and_then(|m| m.get("power_usage_mw"))
                .copied(),
            Window::Totals { .. } => None,
        };
        let line = format!(
            "{} draws {} over its enforced limit {}",
            gpu_label(d),
            watts(usage),
            watts(limit)
        );
        acc.evidence.push(
            Evidence::new(field(d, "power_usage_mw"), watts(usage)).expected(format!(
                "≤ {} (enforced limit {} + 5%)",
                watts((f64::from(limit) * OVER_LIMIT_MARGIN) as u32),
                watts(limit)
            )),
        );
        match before {
            Some(was) if was as f64 > f64::from(limit) * OVER_LIMIT_MARGIN => acc.fail_on(
                d,
                format!(
                    "{line} in both readings {} ({} before): the limit does not hold",
                    window.text(),
                    watts(was as u32)
                ),
            ),
            _ => acc.warn_on(d, line),
        }
    }
    let hint = if let Some(bus) = over.first() {
        format!(
            "a draw the enforced limit does not hold: watch `nvidia-smi -q -d POWER -i {bus}` for a minute (or run gpudoctor with --sample); if it stays over, the power controller or its sensor is faulty: drain the gpu and have it inspected"
        )
    } else {
        format!(
            "the enforced limit is the lowest limit in force: `nvidia-smi -q -d POWER -i {}` shows the requested (`-pl`) and default limits; a requested limit below the default was set on the node (a tuning script, a dcgm config group, an operator setting) and `nvidia-smi -i <pci bus id> -pl <default watts>` restores it; a requested limit at the default with a lower enforced one is an out-of-band cap from the bmc or the rack's power budget: ask the datacenter team",
            capped.first().map(String::as_str).unwrap_or("<pci bus id>")
        )
    };
    let action = if !over.is_empty() {
        Action::HardwareInspection
    } else {
        Action::FixConfig
    };
    let judged = acc.judged;
    let caps = if defaults_known == judged {
        "none capped below its default limit".to_string()
    } else {
        format!(
            "default limit not reported for {} of them: caps not judged there",
            judged - defaults_known
        )
    };
    acc.finish_with(
        format!(
            "{} gpu(s) drawing at most {:.0}% of their enforced power limit; {caps}",
            judged,
            100.0 * highest_share
        ),
        "power draw and limits not reported",
        hint,
        action,
    )
}

#[cfg(test)]
mod tests {
    use super::watts;

    #[test]
    fn watts_are_whole_unless_the_limit_is_not() {
        assert_eq!(watts(700_000), "700 W");
        assert_eq!(watts(181_500), "181.5 W");
        assert_eq!(watts(0), "0 W");
    }
}
