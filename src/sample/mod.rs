//! `--sample SECS`: read every error counter twice and judge the increase, not the total since
//! boot (DESIGN "Time matters": rates over a sampling window beat totals since boot).
//!
//! The first reading is a [`Baseline`]: the counters the checks judge, taken before the window
//! through a source of its own (so a recording captures only the second reading as files); the
//! checks' ordinary reading after the window is the second. `record --sample` stores the
//! baseline in the capture as `.gpudoctor/sample.json`, so a replay judges the same window.
//!
//! Counters read: InfiniBand PMA `counters/` and driver `hw_counters/` per port, the AER totals
//! (`aer_dev_{fatal,nonfatal,correctable}`) of the GPUs, NICs and ports above them, and per GPU
//! NVML's PCIe replay counter, volatile ECC counts, clock-event reasons and NVLink error
//! counters, and the EDAC memory controllers' `ce_count`/`ue_count`. A counter can rise, stay, go back (cleared during the window), vanish (its device
//! went away), appear, or sit at its maximum (IB PMA counters saturate): each says so, and no
//! rate is ever negative.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::answers::baseline::Baseline;
use crate::answers::nvml::{NvmlDevice, NvmlFacts};
use crate::facts::rdma::{RdmaDevice, RdmaPort};
use crate::facts::topology::PciDevice;
use crate::source::{HostSource, Source, SourceOptions};

/// Longest `--sample` window.
pub const MAX_WINDOW_S: u64 = 3_600;

/// `mlx5_0/1`.
pub fn port_key(d: &RdmaDevice, p: &RdmaPort) -> String {
    format!("{}/{}", d.name, p.port)
}

/// A port's counters as the baseline keys them.
pub fn rdma_counters(p: &RdmaPort) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = p.counters.clone();
    for (k, v) in &p.hw_counters {
        out.insert(format!("hw_counters/{k}"), *v);
    }
    out
}

/// A function's AER totals as the baseline keys them.
pub fn aer_totals(d: &PciDevice) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (name, counts) in [
        ("fatal", &d.aer.fatal),
        ("nonfatal", &d.aer.nonfatal),
        ("correctable", &d.aer.correctable),
    ] {
        if let Some(c) = counts {
            out.insert(name.to_string(), c.total);
        }
    }
    out
}

/// A GPU's counters as the baseline keys them.
pub fn gpu_counters(d: &NvmlDevice) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Some(v) = d.pcie_replay_counter.value() {
        out.insert("pcie_replay".to_string(), *v);
    }
    if let Some(e) = d.ecc_errors.value() {
        out.insert("ecc_volatile_corrected".to_string(), e.volatile_corrected);
        out.insert(
            "ecc_volatile_uncorrected".to_string(),
            e.volatile_uncorrected,
        );
    }
    if let Some(v) = d.clock_event_reasons.value() {
        out.insert("clock_event_reasons".to_string(), *v);
    }
    // Not a counter: the first reading of --sample, so driver.power can tell a draw over the
    // limit in both readings (sustained) from one (a moment).
    if let Some(v) = d.power_usage_mw.value() {
        out.insert("power_usage_mw".to_string(), u64::from(*v));
    }
    if let Some(links) = d.nvlinks.value() {
        for link in links.iter().filter(|l| l.active) {
            for (name, reading) in link.error_counters() {
                if let Some(v) = reading.value() {
                    out.insert(format!("nvlink{}/{name}", link.link), *v);
                }
            }
        }
    }
    out
}

/// Read every judged counter once through `source`.
pub fn take(source: &dyn Source) -> Baseline {
    let mut b = Baseline::default();
    if let Ok(rdma) = crate::facts::rdma::gather_with(source, true) {
        for d in &rdma.devices {
            for p in &d.ports {
                b.rdma.insert(port_key(d, p), rdma_counters(p));
            }
        }
    }
    if let Ok(t) = crate::facts::topology::gather_with(source, None) {
        for d in &t.devices {
            let totals = aer_totals(d);
            if !totals.is_empty() {
                b.aer.insert(d.bdf.clone(), totals);
            }
        }
    }
    add_gpus(&mut b, &source.nvml());
    if let Ok(Some((controllers, _))) = crate::facts::mce::gather_edac(source) {
        for mc in controllers {
            b.edac.insert(
                mc.name,
                BTreeMap::from([
                    ("ce_count".to_string(), mc.ce_count),
                    ("ue_count".to_string(), mc.ue_count),
                ]),
            );
        }
    }
    b
}

fn add_gpus(b: &mut Baseline, nvml: &NvmlFacts) {
    for d in &nvml.devices {
        if let Some(bus) = &d.pci_bus_id {
            b.gpus.insert(bus.clone(), gpu_counters(d));
        }
    }
}

/// The first reading of a live node at `root`, then the window slept with a progress line on
/// stderr. The reading goes through a source of its own, never the (recording) source the
/// checks use, so a capture holds the second reading as files and this one as
/// [`SAMPLE_JSON`].
pub fn first_reading(root: &Path, options: &SourceOptions, secs: u64) -> Baseline {
    let started = Instant::now();
    let source = HostSource::new(root, options.clone());
    let mut baseline = take(&source);
    wait(Duration::from_secs(secs));
    baseline.window_s = started.elapsed().as_secs_f64();
    baseline
}

/// Sleep `window`, saying so on stderr: a countdown on a terminal, one line otherwise.
fn wait(window: Duration) {
    let mut err = std::io::stderr();
    let tty = err.is_terminal();
    let total = window.as_secs();
    let _ = writeln!(
        err,
        "gpudoctor: first counter reading done; reading again in {total} s (--sample)"
    );
    let end = Instant::now() + window;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if tty {
            let _ = write!(
                err,
                "\rgpudoctor: sampling counters, {:>4} s left ",
                left.as_secs()
            );
            let _ = err.flush();
        }
        std::thread::sleep(left.min(Duration::from_secs(1)));
    }
    if tty {
        let _ = writeln!(err, "\rgpudoctor: sampling counters, done        ");
    }
}

/// What a counter did between the two readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Rose by `delta`, `per_s` over the window.
    Rising {
        delta: u64,
        per_s: f64,
    },
    Unmoved,
    /// Lower than before: cleared or reset during the window; no rate.
    Backwards {
        before: u64,
        after: u64,
    },
    /// Read before and not after: the counter or its device went away.
    Vanished {
        before: u64,
    },
    /// Not read before, read after: no rate.
    Appeared,
    /// At the maximum of a saturating counter: it no longer counts.
    Saturated {
        max: u64,
    },
}

/// Compare two readings of a counter over `window_s`; `max` is the value a saturating counter
/// stops at. `None` when neither reading has it.
pub fn change(
    before: Option<u64>,
    after: Option<u64>,
    window_s: f64,
    max: Option<u64>,
) -> Option<Change> {
    let saturated = |v: u64| {
        max.filter(|m| v >= *m)
            .map(|m| Change::Saturated { max: m })
    };
    match (before, after) {
        (None, None) => None,
        (Some(b), None) => Some(Change::Vanished { before: b }),
        (None, Some(a)) => Some(saturated(a).unwrap_or(Change::Appeared)),
        (Some(b), Some(a)) => Some(if let Some(s) = saturated(a) {
            s
        } else if a < b {
            Change::Backwards {
                before: b,
                after: a,
            }
        } else if a == b {
            Change::Unmoved
        } else {
            let delta = a - b;
            Change::Rising {
                delta,
                per_s: delta as f64 / window_s.max(0.001),
            }
        }),
    }
}

impl Change {
    /// "+12 (0.4/s)", "unmoved", "went back from 14 to 0 (cleared during the window)".
    pub fn text(&self) -> String {
        match self {
            Change::Rising { delta, per_s } => format!("+{delta} ({})", rate(*per_s)),
            Change::Unmoved => "unmoved".to_string(),
            Change::Backwards { before, after } => format!(
                "went back from {before} to {after} (cleared or reset during the window: no rate)"
            ),
            Change::Vanished { before } => {
                format!("was {before}, then could not be read (the device or counter went away)")
            }
            Change::Appeared => "not in the first reading (no rate)".to_string(),
            Change::Saturated { max } => {
                format!("at its maximum {max} (saturated: it no longer counts)")
            }
        }
    }
}

/// A rate in the largest unit that keeps it readable: "3.2/s", "12/min", "0.5/h".
pub fn rate(per_s: f64) -> String {
    let per_s = if per_s.is_finite() && per_s > 0.0 {
        per_s
    } else {
        0.0
    };
    if per_s >= 1.0 {
        format!("{per_s:.1}/s")
    } else if per_s * 60.0 >= 1.0 {
        format!("{:.1}/min", per_s * 60.0)
    } else {
        format!("{:.2}/h", per_s * 3_600.0)
    }
}

/// A total since boot as a rate per second over `uptime_s` (when the node has been up a
/// minute at least; counters may have been cleared since, so this is a lower bound).
pub fn over_uptime(total: u64, uptime_s: Option<f64>) -> Option<f64> {
    let up = uptime_s.filter(|u| u.is_finite() && *u >= 60.0)?;
    Some(total as f64 / up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_change() {
        assert_eq!(change(None, None, 10.0, None), None);
        assert_eq!(
            change(Some(4), Some(14), 10.0, None),
            Some(Change::Rising {
                delta: 10,
                per_s: 1.0
            })
        );
        assert_eq!(change(Some(4), Some(4), 10.0, None), Some(Change::Unmoved));
        assert_eq!(
            change(Some(14), Some(0), 10.0, None),
            Some(Change::Backwards {
                before: 14,
                after: 0
            })
        );
        assert_eq!(
            change(Some(14), None, 10.0, None),
            Some(Change::Vanished { before: 14 })
        );
        assert_eq!(change(None, Some(3), 10.0, None), Some(Change::Appeared));
        assert_eq!(
            change(Some(65_000), Some(65_535), 10.0, Some(65_535)),
            Some(Change::Saturated { max: 65_535 })
        );
        // u64 extremes: no overflow, no negative rate; a zero window is not a division by zero.
        assert_eq!(
            change(Some(u64::MAX), Some(0), 10.0, None),
            Some(Change::Backwards {
                before: u64::MAX,
                after: 0
            })
        );
        let Some(Change::Rising { per_s, .. }) = change(Some(0), Some(u64::MAX), 0.0, None) else {
            panic!()
        };
        assert!(per_s.is_finite() && per_s > 0.0);
    }

    #[test]
    fn rates_read_well() {
        assert_eq!(rate(3.24), "3.2/s");
        assert_eq!(rate(0.2), "12.0/min");
        assert_eq!(rate(1.0 / 7_200.0), "0.50/h");
        assert_eq!(rate(-1.0), "0.00/h");
        assert_eq!(over_uptime(3_600, Some(7_200.0)), Some(0.5));
        assert_eq!(over_uptime(1, Some(10.0)), None);
        assert_eq!(over_uptime(1, None), None);
    }

    #[test]
    fn baseline_round_trips_and_tolerates_old_shapes() {
        let mut b = Baseline {
            window_s: 10.5,
            ..Baseline::default()
        };
        b.rdma
            .entry("mlx5_0/1".into())
            .or_default()
            .insert("symbol_error".into(), 3);
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<Baseline>(&text).unwrap(), b);
        let minimal: Baseline = serde_json::from_str(r#"{"window_s": 5}"#).unwrap();
        assert_eq!(minimal.window_s, 5.0);
        assert!(serde_json::from_str::<Baseline>(r#"{"rdma": 3}"#).is_err());
    }
}
