//! RDMA layer, port error counters, judged by time (checks/rates.rs): over a `--sample` window
//! the increase of each PMA counter (`counters/`) and driver counter (`hw_counters/`); without
//! one, the totals since boot against the node's uptime.
//!
//! Thresholds: a link that went down or retrained during the window (`link_downed`,
//! `link_error_recovery` rising) is failing now; any other PMA error counter rising warns with
//! its rate (a marginal cable or optic: NVIDIA's cable troubleshooting and LBNL NHC both say
//! "watch perfquery for rising counters"); driver counters rising warn (drops, retransmission
//! timeouts). Without a window, totals of at least [`ERRORS_PER_HOUR_WARN`] per hour of uptime
//! warn; fewer are history (an old burst), reported with their total. PMA counters saturate
//! (4, 8 or 16 bits, facts/rdma.rs): one at its maximum no longer counts, which is said.

use super::{port_label, port_path, ports, rdma_devices};
use crate::checks::rates::{SAMPLE_MORE, Window, rate_figure, window};
use crate::checks::{Context, Outcome};
use crate::facts::rdma::{ERROR_COUNTER_BITS, ERROR_COUNTERS, HW_ERROR_COUNTERS};
use crate::report::{Action, Evidence};
use crate::sample::{Change, change, over_uptime, port_key, rate, rdma_counters};

/// Errors per hour of uptime from which totals since boot warn (one an hour: well above an
/// old burst spread over weeks, well below a bad cable's thousands).
pub const ERRORS_PER_HOUR_WARN: f64 = 1.0;

/// Counters whose rise means the link went down or retrained during the window.
const FLAPPING: &[&str] = &["link_downed", "link_error_recovery"];

/// The value a saturating PMA counter stops at.
fn saturation(name: &str) -> Option<u64> {
    ERROR_COUNTER_BITS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bits)| (1u64 << bits) - 1)
}

pub(super) fn error_counters(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let (window, broken) = window(ctx);
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    let mut history = Vec::new();
    let mut evidence = Vec::new();
    let mut figures = Vec::new();
    let mut judged = 0;
    for (d, p) in ports(facts) {
        let now = rdma_counters(p);
        if now.is_empty() {
            continue;
        }
        judged += 1;
        let label = port_label(d, p);
        let key = port_key(d, p);
        match &window {
            Window::Sample(b) => {
                let before = b.rdma.get(&key);
                // The counters this gpudoctor reads; a first reading may hold others (another
                // version's), which are no concern of this window.
                let judged_name = |k: &str| {
                    ERROR_COUNTERS.contains(&k)
                        || k.strip_prefix("hw_counters/")
                            .is_some_and(|h| HW_ERROR_COUNTERS.contains(&h))
                };
                let mut names: Vec<&String> = now.keys().collect();
                if let Some(before) = before {
                    names.extend(
                        before
                            .keys()
                            .filter(|k| !now.contains_key(*k) && judged_name(k)),
                    );
                }
                let mut rising = Vec::new();
                let mut odd = Vec::new();
                let mut flapping = false;
                for name in names {
                    let was = before.and_then(|m| m.get(name)).copied();
                    let is = now.get(name).copied();
                    let Some(c) = change(was, is, b.window_s, saturation(name)) else {
                        continue;
                    };
                    match c {
                        Change::Rising { per_s, .. } => {
                            figures.push(rate_figure(
                                "rdma.error_counters",
                                &key,
                                name,
                                per_s,
                                &window,
                            ));
                            flapping |= FLAPPING.contains(&name.as_str());
                            rising.push(format!("{name} {}", c.text()));
                        }
                        Change::Unmoved => {
                            if let Some(v) = is.filter(|v| *v > 0) {
                                history.push(format!("{label} {name} {v}"));
                            }
                        }
                        Change::Appeared => {}
                        _ => odd.push(format!("{name} {}", c.text())),
                    }
                }
                if !rising.is_empty() {
                    let line = format!("{label}: rising {}: {}", window.text(), rising.join(", "));
                    evidence.push(
                        Evidence::new(port_path(d, p, "counters"), rising.join(", "))
                            .expected(format!("no increase {}", window.text())),
                    );
                    if flapping {
                        fails.push(line);
                    } else {
                        warns.push(line);
                    }
                }
                if !odd.is_empty() {
                    warns.push(format!("{label}: {}", odd.join(", ")));
                    evidence.push(
                        Evidence::new(port_path(d, p, "counters"), odd.join(", "))
                            .expected("two readings of a counting counter"),
                    );
                }
                if before.is_none() {
                    warns.push(format!(
                        "{label}: not in the first reading (the port appeared during the window)"
                    ));
                }
            }
            Window::Totals { uptime_s } => {
                let mut noisy = Vec::new();
                let mut quiet = Vec::new();
                for (name, v) in p.counters.iter().filter(|(_, v)| **v > 0) {
                    if saturation(name).is_some_and(|m| *v >= m) {
                        noisy.push(format!("{name} {v} (saturated: it no longer counts)"));
                        continue;
                    }
                    match over_uptime(*v, *uptime_s) {
                        Some(per_s) => {
                            figures.push(rate_figure(
                                "rdma.error_counters",
                                &key,
                                name,
                                per_s,
                                &window,
                            ));
                            let text = format!("{name} {v} ({})", rate(per_s));
                            if per_s * 3_600.0 >= ERRORS_PER_HOUR_WARN {
                                noisy.push(text);
                            } else {
                                quiet.push(text);
                            }
                        }
                        // No uptime: a total cannot be aged; it warns as before.
                        None => noisy.push(format!("{name} {v}")),
                    }
                }
                if !noisy.is_empty() {
                    warns.push(format!("{label}: {} {}", noisy.join(", "), window.text()));
                    evidence.push(
                        Evidence::new(port_path(d, p, "counters"), noisy.join(", ")).expected(
                            format!("below {ERRORS_PER_HOUR_WARN} error(s) per hour of uptime"),
                        ),
                    );
                }
                if !quiet.is_empty() {
                    history.push(format!("{label} {}", quiet.join(", ")));
                }
            }
        }
    }
    if judged == 0 {
        return Outcome::skip("no port error counters readable");
    }
    let history_text = if history.is_empty() {
        String::new()
    } else {
        match &window {
            Window::Sample(_) => format!(
                "; history (did not move {}): {}",
                window.text(),
                history.join("; ")
            ),
            Window::Totals { .. } => format!(
                "; history (below {ERRORS_PER_HOUR_WARN}/h {}): {}",
                window.text(),
                history.join("; ")
            ),
        }
    };
    let more = match &window {
        Window::Totals { .. } if !warns.is_empty() || !history.is_empty() => {
            format!("; {SAMPLE_MORE}")
        }
        _ => String::new(),
    };
    let outcome = if !fails.is_empty() {
        fails.extend(warns);
        Outcome::fail(format!("{}{history_text}", fails.join("; ")))
            .evidence_all(evidence)
            .hint("the link went down or retrained while gpudoctor watched: reseat or replace the cable or transceiver of that port (check the switch side too: `mlxlink -d <dev> -m`), then clear the counters (`perfquery -x -R`) and sample again")
            .action(Action::HardwareInspection)
    } else if !warns.is_empty() {
        Outcome::warn(format!("{}{history_text}{more}", warns.join("; ")))
            .evidence_all(evidence)
            .hint("rising counters mean a marginal cable or optic: watch them with `perfquery -x <lid> <port>` (or `gpudoctor check --sample 60`), replace the cable or transceiver if they keep rising, then clear them with `perfquery -x -R`; counters that went back were cleared during the window")
            .action(Action::HardwareInspection)
    } else {
        Outcome::pass(format!(
            "error counters quiet {} on {judged} port(s){history_text}{more}",
            window.text()
        ))
    };
    let outcome = outcome.figures(figures);
    match broken {
        Some(err) => outcome.with_unread([err]),
        None => outcome,
    }
}
