//! Driver layer, GPU counters judged as rates (checks/rates.rs): NVML's PCIe replay counter.
//! A replay is the link layer resending a TLP after a CRC or sequence error: a few are normal,
//! a steady stream is a marginal link (riser, slot, retimer) that costs bandwidth and can end in
//! XID 79. DCGM warns above 8 replays per minute (`DCGM_FR_PCI_REPLAY_RATE`,
//! `NVIDIA/DCGM` `common/DcgmGPUHardwareLimits.h`, gpu-health.md §10).

use super::gpu_health::{PerGpu, field, gpu_label, usable_devices};
use super::rates::{SAMPLE_MORE, Window, rate_figure, window};
use super::{CheckDef, Context, Explain, Outcome};
use crate::report::{Action, Evidence, Layer};
use crate::sample::{Change, change, over_uptime, rate};

/// DCGM's replay-rate limit, per minute.
pub const PCIE_REPLAYS_WARN_PER_MIN: f64 = 8.0;

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "driver.pcie_replays",
        layer: Layer::Driver,
        title: "GPU PCIe replays below DCGM's rate limit",
        explain: Explain {
            reads: "NVML nvmlDeviceGetPcieReplayCounter per GPU; with --sample a first reading before the window (.gpudoctor/sample.json in a capture); /proc/uptime",
            expects: "live: with --sample, fewer than 8 replays per minute during the window (DCGM's DCGM_FR_PCI_REPLAY_RATE limit); without it, the total since boot below 8 per minute of uptime. History: replays that did not rise during the window, or a total below the limit, are reported and not judged; a counter that went back (driver reloaded) or vanished is said, never a negative rate",
            why: "replays are the PCIe link resending corrupted packets: a steady stream is a marginal riser, slot or retimer that cuts host-GPU bandwidth and ends in XID 79 when the link drops",
            fix: "watch it with `gpudoctor check --sample 60` or `nvidia-smi -q -d PCIE | grep -i replay`; if it keeps rising, reseat the GPU or its riser, check `lspci -vv -s <bdf>` for a downtrained link, and send the board for inspection if it follows the GPU",
        },
        run: |ctx| pcie_replays(ctx).noting_unread(&ctx.boot().problems),
    }]
}

fn pcie_replays(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (window, broken) = window(ctx);
    let mut acc = PerGpu::new();
    let mut notes = Vec::new();
    let mut figures = Vec::new();
    let mut unaged = Vec::new();
    for d in &devices {
        let Some(&now) = acc.read(d, "pcie_replay_counter", &d.pcie_replay_counter) else {
            continue;
        };
        acc.judged += 1;
        let bus = d.pci_bus_id.clone().unwrap_or_default();
        let per_s = match &window {
            Window::Sample(b) => {
                let was = b.gpus.get(&bus).and_then(|m| m.get("pcie_replay")).copied();
                match change(was, Some(now), b.window_s, None) {
                    Some(Change::Rising { per_s, .. }) => Some(per_s),
                    Some(Change::Unmoved) => {
                        if now > 0 {
                            notes.push(format!("gpu {} {now} (history: not rising)", d.index));
                        }
                        None
                    }
                    Some(c @ (Change::Backwards { .. } | Change::Vanished { .. })) => {
                        acc.warns
                            .push(format!("{}: replay counter {}", gpu_label(d), c.text()));
                        None
                    }
                    _ => None,
                }
            }
            Window::Totals { uptime_s } => over_uptime(now, *uptime_s),
        };
        let Some(per_s) = per_s else {
            // A total with no uptime to divide it by cannot be judged: said, never a pass.
            if now > 0 && matches!(window, Window::Totals { uptime_s: None }) {
                unaged.push(format!("gpu {} {now}", d.index));
            }
            continue;
        };
        if now == 0 && matches!(window, Window::Totals { .. }) {
            continue;
        }
        figures.push(rate_figure(
            "driver.pcie_replays",
            &bus,
            "pcie_replay",
            per_s,
            &window,
        ));
        let per_min = per_s * 60.0;
        let text = format!(
            "{}: {now} pcie replays, {} {}",
            gpu_label(d),
            rate(per_s),
            window.text()
        );
        if per_min > PCIE_REPLAYS_WARN_PER_MIN {
            acc.warns.push(text);
            acc.evidence.push(
                Evidence::new(
                    field(d, "pcie_replay_counter"),
                    format!("{now} ({})", rate(per_s)),
                )
                .expected(format!("≤ {PCIE_REPLAYS_WARN_PER_MIN} per minute (dcgm)")),
            );
        } else if now > 0 {
            notes.push(format!("gpu {} {now} ({})", d.index, rate(per_s)));
        }
    }
    let more = match &window {
        Window::Totals { .. } => format!("; {SAMPLE_MORE}"),
        Window::Sample(_) => String::new(),
    };
    let noted = if notes.is_empty() {
        String::new()
    } else {
        format!("; below the limit: {}", notes.join(", "))
    };
    let judged = acc.judged;
    let mut outcome = acc.finish(
        format!(
            "pcie replays below {PCIE_REPLAYS_WARN_PER_MIN}/min {} on {judged} gpu(s){noted}{more}",
            window.text()
        ),
        "pcie replay counter not reported",
        "a steady replay stream is a marginal link: reseat the gpu or its riser, check `lspci -vv -s <bdf> | grep -E 'LnkSta|CESta'` and the slot; if the replays follow the gpu to another slot, send it for inspection",
        Action::HardwareInspection,
    );
    if outcome.status == crate::report::Status::Warn {
        outcome.summary.push_str(&more);
    }
    let outcome = outcome.figures(figures);
    let no_uptime = (!unaged.is_empty()).then(|| crate::answers::FactError {
        path: crate::facts::boot::PROC_UPTIME.to_string(),
        message: format!(
            "not read, so the totals since boot ({}) could not be turned into a rate",
            unaged.join(", ")
        ),
    });
    outcome.with_unread(broken.into_iter().chain(no_uptime.as_ref()))
}
