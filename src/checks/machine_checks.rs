//! driver.machine_checks: the host under the GPUs reports no uncorrected machine check or
//! memory error, and its corrected memory errors do not come fast (facts in `facts/mce.rs`:
//! the kernel log's `mce:`/`EDAC MCn:` lines and the EDAC counters in sysfs). LBNL NHC checks
//! the same (`check_hw_mcelog`); a GPU job on a node whose DIMM is failing dies or, worse,
//! computes on corrupted host memory.
//!
//! Verdicts: an uncorrected error (EDAC `ue_count` > 0, an `EDAC MCn: N UE` line or a CPU bank
//! with MCi_STATUS.UC in this boot's log) fails with hardware inspection; one only in an earlier
//! boot's log warns (history). Corrected errors warn above mcelog's default DIMM trigger,
//! `ce-error-threshold = 10 / 24h` (andikleen/mcelog `mcelog.conf`, `[dimm]`): measured over the
//! `--sample` window when there is one, else as the total since the EDAC driver loaded over the
//! node's uptime (`checks/rates.rs`).

use super::rates::{self, Window};
use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::mce::{self, EDAC_MC, MceKind, MemoryController};
use crate::report::{Action, Evidence, Layer};

/// mcelog's default corrected-error trigger: 10 per 24 hours, per second.
const CE_PER_S: f64 = 10.0 / 86_400.0;
const CODE: &str = "driver.machine_checks";

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: CODE,
        layer: Layer::Driver,
        title: "no uncorrected machine check or memory error; corrected ones not rising fast",
        explain: Explain {
            reads: "/sys/devices/system/edac/mc/mc*/{ce_count,ue_count,mc_name} (and their first reading under --sample); the kernel log's `mce: [Hardware Error]:` lines (`Machine check events logged`, `CPU N: Machine Check: ... Bank B: <MCi_STATUS>`) and `EDAC MCn: <count> CE|UE ...` lines",
            expects: "ue_count 0 on every memory controller and no uncorrected error in this boot's log (MCi_STATUS bit 61 UC clear); corrected errors at most 10 per 24 h (mcelog's default `ce-error-threshold`), over the --sample window or since boot",
            why: "an uncorrected memory or CPU error kills the process that touched it (or the node) and can corrupt a job's host buffers, pinned memory included; corrected errors that keep coming are a DIMM on its way to failing, and a row of them slows every access that hits it",
            fix: "uncorrected: take the node out of service and replace the DIMM or CPU the line names (`ras-mc-ctl --errors`, `edac-util -v`, the BMC's event log); corrected above the threshold: schedule the DIMM's replacement, find it with `ras-mc-ctl --error-count` or the `EDAC MCn: ... on <label>` lines",
        },
        run: machine_checks,
    }]
}

fn controller_name(mc: &MemoryController) -> String {
    match &mc.model {
        Some(model) => format!("{} ({model})", mc.name),
        None => mc.name.clone(),
    }
}

fn machine_checks(ctx: &Context<'_>) -> Outcome {
    let edac = match mce::gather_edac(ctx.source()) {
        Ok(edac) => edac,
        Err(err) => return Outcome::unreadable(&err),
    };
    let (log, log_error) = match ctx.kernel_log() {
        Ok(Some((text, _))) => (Some(mce::parse(text)), None),
        Ok(None) => (None, None),
        Err(err) => (None, Some(err)),
    };
    if edac.is_none() && log.is_none() {
        return match log_error {
            Some(err) => Outcome::error(format!(
                "no EDAC memory controller in sysfs and the kernel log could not be read: {err}"
            ))
            .evidence(Evidence::new(err.path(), err.to_string()))
            .hint("run as root (reading /dev/kmsg needs CAP_SYSLOG when dmesg_restrict=1), or pass --kernel-log with `dmesg` output"),
            None => Outcome::skip("no EDAC memory controller in sysfs and no kernel log to read"),
        };
    }
    let origin = ctx.kernel_log_origin();
    let (window, window_error) = rates::window(ctx);
    let mut evidence = Vec::new();
    let mut figures = Vec::new();
    let mut failures = Vec::new();
    let mut warnings = Vec::new();
    let mut passes = Vec::new();
    let (controllers, problems) = edac.clone().unwrap_or_default();

    for mc in &controllers {
        let name = controller_name(mc);
        if mc.ue_count > 0 {
            failures.push(format!(
                "{name} {} uncorrected memory error(s)",
                mc.ue_count
            ));
            evidence.push(
                Evidence::new(
                    format!("/{EDAC_MC}/{}/ue_count", mc.name),
                    mc.ue_count.to_string(),
                )
                .expected("0"),
            );
        }
        // Corrected: over the window when there is one, else since boot over the uptime.
        let (rose, per_s) = match &window {
            Window::Sample(b) => {
                let before = b.edac.get(&mc.name).and_then(|c| c.get("ce_count"));
                // A counter that went back was reset during the window: all it holds is new.
                let rose = match before {
                    Some(&before) if before <= mc.ce_count => mc.ce_count - before,
                    _ => mc.ce_count,
                };
                (rose, Some(rose as f64 / b.window_s.max(1.0)))
            }
            Window::Totals { uptime_s } => (
                mc.ce_count,
                uptime_s
                    .filter(|up| *up > 0.0)
                    .map(|up| mc.ce_count as f64 / up),
            ),
        };
        if let Some(per_s) = per_s {
            figures.push(rates::rate_figure(
                CODE, &mc.name, "ce_count", per_s, &window,
            ));
        }
        match per_s {
            Some(per_s) if per_s > CE_PER_S && rose > 0 => {
                warnings.push(format!(
                    "{name} {rose} corrected memory error(s) {} ({:.1} per 24 h)",
                    window.text(),
                    per_s * 86_400.0
                ));
                evidence.push(
                    Evidence::new(
                        format!("/{EDAC_MC}/{}/ce_count", mc.name),
                        format!("{} ({rose} {})", mc.ce_count, window.text()),
                    )
                    .expected("at most 10 per 24 h (mcelog ce-error-threshold)"),
                );
            }
            _ => passes.push(format!("{} ce {} ue {}", mc.name, mc.ce_count, mc.ue_count)),
        }
    }

    if let Some(log) = &log {
        let current = |k: MceKind| log.current.get(&k).copied().unwrap_or(0);
        let earlier = |k: MceKind| log.earlier.get(&k).copied().unwrap_or(0);
        let lines = |pick: &dyn Fn(&mce::MceEvent) -> bool| -> Vec<Evidence> {
            log.events
                .iter()
                .filter(|e| pick(e))
                .take(4)
                .map(|e| {
                    let at = e
                        .stamp
                        .as_deref()
                        .map(|s| format!(" {s}"))
                        .unwrap_or_default();
                    Evidence::new(format!("{origin} line {}{at}", e.line_number), &e.message)
                })
                .collect()
        };
        let last = log.boots.saturating_sub(1);
        // The log's uncorrected lines in this boot, unless sysfs already said so per controller.
        let mem_ue = current(MceKind::MemoryUncorrected);
        let cpu_ue = current(MceKind::CpuUncorrected);
        if cpu_ue > 0 || (mem_ue > 0 && controllers.iter().all(|mc| mc.ue_count == 0)) {
            let mut what = Vec::new();
            if mem_ue > 0 {
                what.push(format!("{mem_ue} uncorrected memory error(s)"));
            }
            if cpu_ue > 0 {
                what.push(format!("{cpu_ue} uncorrected cpu machine check(s)"));
            }
            failures.push(format!("{} in the kernel log", what.join(" and ")));
            evidence.extend(lines(&|e| e.boot == last && e.kind.uncorrected()));
        }
        let old_ue = earlier(MceKind::MemoryUncorrected) + earlier(MceKind::CpuUncorrected);
        if old_ue > 0 {
            warnings.push(format!(
                "{old_ue} uncorrected error(s) in the kernel log before the last boot (history)"
            ));
            evidence.extend(lines(&|e| e.boot < last && e.kind.uncorrected()));
        }
        // Without EDAC counters the log's corrected errors are all there is: over the uptime.
        let ce = current(MceKind::MemoryCorrected);
        if edac.is_none() && ce > 0 {
            let per_s = ctx
                .boot()
                .uptime_s
                .filter(|up| *up > 0.0)
                .map(|up| ce as f64 / up);
            if per_s.is_none_or(|r| r > CE_PER_S) {
                warnings.push(format!(
                    "{ce} corrected memory error(s) in the kernel log this boot{}",
                    per_s
                        .map(|r| format!(" ({:.1} per 24 h of uptime)", r * 86_400.0))
                        .unwrap_or_default()
                ));
                evidence.extend(lines(&|e| {
                    e.boot == last && e.kind == MceKind::MemoryCorrected
                }));
            }
        }
    }

    let noted = if edac.is_none() {
        "; no EDAC memory controller in sysfs (no EDAC driver for this memory): judged from the kernel log alone"
    } else {
        ""
    };
    let out = if !failures.is_empty() {
        let mut all = failures;
        all.extend(warnings);
        Outcome::fail(all.join("; "))
            .hint("take the node out of service and replace the part the evidence names (`ras-mc-ctl --errors`, `edac-util -v`, the BMC's event log show which DIMM or CPU)")
            .action(Action::HardwareInspection)
    } else if !warnings.is_empty() {
        Outcome::warn(format!("{}{noted}", warnings.join("; ")))
            .hint("find the DIMM with `ras-mc-ctl --error-count` or the `EDAC MCn: ... on <label>` lines and schedule its replacement; `--sample 300` shows whether the errors still come")
            .action(Action::HardwareInspection)
    } else {
        let judged = if controllers.is_empty() {
            "no machine check or EDAC error in the kernel log".to_string()
        } else {
            format!(
                "{} memory controller(s) without uncorrected errors, corrected ones {} at most 10 per 24 h: {}",
                controllers.len(),
                window.text(),
                passes.join(", ")
            )
        };
        let out = Outcome::pass(format!("{judged}{noted}"));
        if edac.is_none() { out.log_only() } else { out }
    };
    let out = out.evidence_all(evidence).figures(figures);
    let out = match window_error {
        Some(err) => out.with_unread(std::iter::once(err)),
        None => out,
    };
    out.with_unread(problems.iter())
}

#[cfg(test)]
mod tests;

/// A figure for a test to look at.
#[cfg(test)]
fn ce_rate(out: &Outcome, mc: &str) -> Option<f64> {
    out.figures
        .iter()
        .find(|f: &&crate::report::Figure| f.labels.get("device").map(String::as_str) == Some(mc))
        .map(|f| f.value)
}
