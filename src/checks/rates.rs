//! How counter checks see time: over a `--sample` window (the increase between two readings,
//! sample/mod.rs) or, without one, as totals since boot judged against the node's uptime
//! (errors per hour of uptime), saying that `--sample` would tell more. Shared by the checks
//! that judge error counters (rdma, nvlink, pcie replays, aer, ecc, clock events).

use super::Context;
use crate::answers::FactError;
use crate::answers::baseline::Baseline;
use crate::report::{Figure, FigureName};

/// What a counter check compares against.
pub(crate) enum Window<'a> {
    /// Two readings `window_s` apart: judge the increase.
    Sample(&'a Baseline),
    /// One reading: totals since boot over this uptime (`None`: not known).
    Totals { uptime_s: Option<f64> },
}

/// Said with every judgment of totals: the window would tell live from history.
pub(crate) const SAMPLE_MORE: &str =
    "judged on one reading (`--sample 60` reads twice and tells whether it still rises)";

/// The window for this run, and the first reading's problem if it could not be read (the
/// check then judges totals and says why with `with_unread`).
pub(crate) fn window<'c>(ctx: &'c Context<'_>) -> (Window<'c>, Option<&'c FactError>) {
    match ctx.sample() {
        Ok(Some(b)) => (Window::Sample(b), None),
        Ok(None) => (
            Window::Totals {
                uptime_s: ctx.boot().uptime_s,
            },
            None,
        ),
        Err(err) => (
            Window::Totals {
                uptime_s: ctx.boot().uptime_s,
            },
            Some(err),
        ),
    }
}

impl Window<'_> {
    /// "over a 60 s window" / "over 3 days of uptime" / "since boot (uptime unknown)".
    pub fn text(&self) -> String {
        match self {
            Window::Sample(b) => format!("over a {} window", crate::time::span(b.window_s)),
            Window::Totals { uptime_s: Some(up) } => {
                format!("over {} of uptime", crate::time::span(*up))
            }
            Window::Totals { uptime_s: None } => "since boot (uptime unknown)".to_string(),
        }
    }

    /// The label a rate figure carries: `sample` or `uptime`.
    pub fn label(&self) -> &'static str {
        match self {
            Window::Sample(_) => "sample",
            Window::Totals { .. } => "uptime",
        }
    }
}

/// An `error_rate_per_second` figure.
pub(crate) fn rate_figure(
    check: &str,
    device: &str,
    counter: &str,
    per_s: f64,
    window: &Window<'_>,
) -> Figure {
    Figure::new(FigureName::ErrorRatePerSecond, per_s)
        .label("check", check)
        .label("device", device)
        .label("counter", counter)
        .label("window", window.label())
}
