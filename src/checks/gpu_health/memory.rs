//! Memory health: driver.ecc_errors, driver.retired_pages and driver.row_remap. Uncorrectable
//! ECC errors, retired pages and row remapping are one story (gpu-health.md §4): the same
//! memory faults seen through the counters of two GPU generations, with the same remedies.

use super::*;

/// DCGM fails at 63 retired pages (single + double bit), `nvvs/plugin_src/software/Software.cpp`.
const RETIRED_PAGES_FAIL: u32 = 63;

pub(super) fn ecc_errors(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (window, broken) = window(ctx);
    let mut notes = Vec::new();
    let mut figures = Vec::new();
    let mut acc = PerGpu::new();
    for d in &devices {
        if let Some(mode) = acc.read(d, "ecc_mode", &d.ecc_mode) {
            if mode.current != mode.pending {
                acc.warn_on(
                    d,
                    format!("{} ecc mode change pending (reset needed)", gpu_label(d)),
                );
                acc.evidence.push(
                    Evidence::new(
                        field(d, "ecc_mode"),
                        format!("current {}, pending {}", mode.current, mode.pending),
                    )
                    .expected("current = pending"),
                );
            }
            if !mode.current {
                continue;
            }
        }
        let Some(counts) = acc.read(d, "ecc_errors", &d.ecc_errors) else {
            continue;
        };
        acc.judged += 1;
        if let Window::Sample(b) = &window {
            let before = d.pci_bus_id.as_ref().and_then(|bus| b.gpus.get(bus));
            let was = |k: &str| before.and_then(|m| m.get(k)).copied();
            let unc = change(
                was("ecc_volatile_uncorrected"),
                Some(counts.volatile_uncorrected),
                b.window_s,
                None,
            );
            if let Some(Change::Rising { per_s, .. }) = change(
                was("ecc_volatile_corrected"),
                Some(counts.volatile_corrected),
                b.window_s,
                None,
            ) {
                figures.push(rate_figure(
                    "driver.ecc_errors",
                    d.pci_bus_id.as_deref().unwrap_or_default(),
                    "ecc_volatile_corrected",
                    per_s,
                    &window,
                ));
                notes.push(format!(
                    "gpu {} corrected ecc rising {} (not judged: nvidia's catalogue ignores corrected errors)",
                    d.index,
                    rate(per_s)
                ));
            }
            let observed = format!(
                "volatile uncorrected {} ({}), volatile corrected {}",
                counts.volatile_uncorrected,
                unc.map(|c| c.text()).unwrap_or_default(),
                counts.volatile_corrected
            );
            match unc {
                Some(c @ Change::Rising { .. }) => {
                    acc.fail_on(
                        d,
                        format!(
                            "{} uncorrected ecc errors rising {}: {}",
                            gpu_label(d),
                            window.text(),
                            c.text()
                        ),
                    );
                    acc.evidence.push(
                        Evidence::new(field(d, "ecc_errors"), observed)
                            .expected(format!("no increase {}", window.text())),
                    );
                }
                Some(Change::Unmoved) if counts.volatile_uncorrected > 0 => {
                    acc.warn_on(d, format!(
                        "{} has {} uncorrected ecc error(s) since the driver loaded, none {} (history)",
                        gpu_label(d),
                        counts.volatile_uncorrected,
                        window.text()
                    ));
                    acc.evidence.push(
                        Evidence::new(field(d, "ecc_errors"), observed)
                            .expected("volatile uncorrected 0"),
                    );
                }
                Some(c @ (Change::Backwards { .. } | Change::Vanished { .. })) => {
                    acc.warn_on(
                        d,
                        format!("{} uncorrected ecc counter {}", gpu_label(d), c.text()),
                    );
                }
                _ => {}
            }
            continue;
        }
        if counts.volatile_uncorrected > 0 {
            acc.fail_on(
                d,
                format!(
                    "{} has {} uncorrected ecc error(s) since the driver loaded",
                    gpu_label(d),
                    counts.volatile_uncorrected
                ),
            );
            acc.evidence.push(
                Evidence::new(
                    field(d, "ecc_errors"),
                    format!(
                        "volatile uncorrected {}, aggregate uncorrected {}, volatile corrected {}",
                        counts.volatile_uncorrected,
                        counts.aggregate_uncorrected,
                        counts.volatile_corrected
                    ),
                )
                .expected("volatile uncorrected 0"),
            );
        }
    }
    let noted = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    let ok = match &window {
        Window::Sample(_) => format!(
            "no uncorrected ecc errors on {} gpu(s), none {}{noted}",
            devices.len(),
            window.text()
        ),
        Window::Totals { .. } => {
            format!(
                "no uncorrected ecc errors on {} gpu(s){noted}",
                devices.len()
            )
        }
    };
    let hint = acc.reset_hint(
        " (on Ampere and later the reset also applies a pending row remap, driver.row_remap); uncorrected errors that return after it mean hardware inspection",
    );
    let mut outcome = acc.finish_with(
        ok,
        "ecc not enabled or not reported",
        hint,
        Action::ResetGpu,
    );
    if matches!(window, Window::Totals { .. })
        && matches!(outcome.status, crate::report::Status::Fail)
    {
        outcome.summary.push_str(&format!("; {SAMPLE_MORE}"));
    }
    let outcome = outcome.figures(figures);
    match broken {
        Some(err) => outcome.with_unread([err]),
        None => outcome,
    }
}

pub(super) fn retired_pages(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut acc = PerGpu::new();
    for d in &devices {
        let Some(pages) = acc.read(d, "retired_pages", &d.retired_pages) else {
            continue;
        };
        acc.judged += 1;
        let total = pages.single_bit + pages.double_bit;
        let observed = format!(
            "{} single-bit, {} double-bit retired, pending {}",
            pages.single_bit, pages.double_bit, pages.pending
        );
        if total >= RETIRED_PAGES_FAIL {
            acc.fails.push(format!(
                "{} has {total} retired pages (limit {RETIRED_PAGES_FAIL})",
                gpu_label(d)
            ));
            acc.evidence.push(
                Evidence::new(field(d, "retired_pages"), observed)
                    .expected(format!("< {RETIRED_PAGES_FAIL} retired")),
            );
        } else if pages.pending {
            acc.fails.push(format!(
                "{} has a page retirement pending (reset needed)",
                gpu_label(d)
            ));
            acc.evidence
                .push(Evidence::new(field(d, "retired_pages"), observed).expected("pending false"));
        }
    }
    acc.finish(
        "no page retirement pending".into(),
        "page retirement not reported (ampere and later use row remapping)",
        "drain and reset the gpu or reboot to apply the retirement; at 63 or more retired pages replace the gpu",
        Action::ResetGpu,
    )
}

pub(super) fn row_remap(ctx: &Context<'_>) -> Outcome {
    let devices = match usable_devices(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut acc = PerGpu::new();
    let mut any_failure = false;
    // nvml.h: nvmlDeviceGetRemappedRows is NOT_SUPPORTED while MIG is on, and the probe's
    // field-value fallback may not answer either (gpu-health.md §4): said plainly, not skipped
    // as "pre-ampere".
    let mut under_mig: Vec<u32> = Vec::new();
    for d in &devices {
        if d.remapped_rows == Reading::NotSupported && d.mig_on() {
            under_mig.push(d.index);
            continue;
        }
        let Some(rows) = acc.read(d, "remapped_rows", &d.remapped_rows) else {
            continue;
        };
        acc.judged += 1;
        let observed = format!(
            "correctable {}, uncorrectable {}, pending {}, failure {}",
            rows.correctable, rows.uncorrectable, rows.pending, rows.failure
        );
        if rows.failure {
            any_failure = true;
            acc.fail_on(d, format!("{} row remapping failed", gpu_label(d)));
            acc.evidence
                .push(Evidence::new(field(d, "remapped_rows"), observed).expected("failure false"));
        } else if rows.pending {
            acc.fail_on(
                d,
                format!("{} has a row remap pending (reset needed)", gpu_label(d)),
            );
            acc.evidence
                .push(Evidence::new(field(d, "remapped_rows"), observed).expected("pending false"));
        }
    }
    let (hint, action) = if any_failure {
        (
            "take the gpu out of service (cordon, or `nvidia-smi drain`) and send it for hardware inspection / RMA; a failed remap does not heal".to_string(),
            Action::HardwareInspection,
        )
    } else {
        (
            acc.reset_hint(" (the reset applies the pending remap)"),
            Action::ResetGpu,
        )
    };
    let mig_text = (!under_mig.is_empty()).then(|| {
        format!(
            "row remapping cannot be read while mig is on (gpu {}): nvml answers not supported; xid 63/64 in the kernel log (driver.xid_events) still report remaps, `nvidia-smi -q -d ROW_REMAPPER` after disabling mig shows the state",
            under_mig.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        )
    });
    let judged = acc.judged;
    let mut outcome = acc.finish_with(
        format!("no row remap pending or failed on {judged} gpu(s)"),
        mig_text
            .as_deref()
            .unwrap_or("row remapping not reported (pre-ampere gpu)"),
        hint,
        action,
    );
    if let Some(text) = mig_text
        && judged > 0
        && outcome.status != crate::report::Status::Skip
    {
        outcome.summary.push_str(&format!("; {text}"));
    }
    outcome
}
