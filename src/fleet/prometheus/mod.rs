//! `gpudoctor fleet --prometheus URL`: the fleet read from the `gpudoctor_*` series Prometheus
//! already holds (the DaemonSet writes them for node-exporter's textfile collector,
//! docs/formats.md), so the fleet view needs nothing but the monitoring stack the cluster runs.
//!
//! Four instant queries (`/api/v1/query`): every `gpudoctor_*` series now but the checks'
//! statuses ([`SERIES_QUERY`]); the checks that did not pass, and the XID check
//! ([`CHECKS_QUERY`]); how many nodes passed each check ([`PASSED_QUERY`]) — two thirds of a
//! node's series are checks that passed, which the fleet view needs counted, not listed; and
//! `last_over_time(gpudoctor_info[1d])`, the nodes that wrote in the last day. Series are
//! grouped into nodes by their **target labels** — every label but the family's own (`layer`,
//! `check`, a figure's catalogue labels, ...), usually `job` and `instance` plus whatever the
//! scrape configuration adds. A target label that clashes with one of ours makes Prometheus
//! keep ours as `exported_<name>` (`honor_labels: false`, the default): `exported_node` is then
//! the report's node name and `node` the target's. Each node becomes the report it was written
//! from, as far as the series carry it: versions, profile, exit code, run time, layer and check
//! statuses, the first failure with its action, which finding explains which
//! (`gpudoctor_consequence_info`), and every figure. Summaries and evidence are not series: the
//! fleet view names causes by check code and action.
//!
//! A node that wrote within the day but has no series now (its scrape fails, or its file
//! went) is **unreachable**: Prometheus marks such series stale and an instant query no longer
//! returns them.

pub mod answer;
pub mod http;
mod series;

use std::collections::BTreeMap;
use std::time::Duration;

pub use answer::{Sample, Text, parse_answer};

use super::{Loaded, Unreachable};
use series::Targets;

/// Every series gpudoctor writes but the checks' statuses (asked for apart) and the run and
/// layer durations, which the fleet view does not read.
pub const SERIES_QUERY: &str = r#"{__name__=~"gpudoctor_.+",__name__!~"gpudoctor_(run|layer)_duration_seconds|gpudoctor_check_status"}"#;
/// The checks that did not pass (pass is 0 in every schema), and the XID check whatever its
/// status: a node whose XID check ran and found nothing counts 0 XIDs among its siblings
/// (`summary::node_figures`). A passing check that carries figures is known by its figures.
pub const CHECKS_QUERY: &str =
    r#"gpudoctor_check_status != 0 or gpudoctor_check_status{check="driver.xid_events"}"#;
/// How many nodes passed each check: a check failing on most of the nodes that ran it is
/// fleet-wide (`summary::spreads`). `exported_*` in case the target has labels of those names.
pub const PASSED_QUERY: &str =
    "count by (layer, check, exported_layer, exported_check) (gpudoctor_check_status == 0)";
/// The nodes that wrote within the last day: those missing from [`SERIES_QUERY`] now are
/// unreachable.
pub const RECENT_QUERY: &str = "last_over_time(gpudoctor_info[1d])";

/// Run an instant query; the answer's body, for [`parse_answer`].
pub fn fetch(server: &http::Server, expr: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    http::get(
        server,
        &format!("/api/v1/query?query={}", http::encode(expr)),
        timeout,
    )
}

/// How many series an instant query answers.
pub fn count(server: &http::Server, expr: &str, timeout: Duration) -> Result<usize, String> {
    let body = fetch(server, expr, timeout)?;
    parse_answer(&body)
        .map(|v| v.len())
        .map_err(|e| format!("{}: `{expr}`: {e}", server.url()))
}

/// Check code → how many nodes passed it, from [`PASSED_QUERY`]'s answer.
fn passes(samples: &[Sample<'_>]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for s in samples {
        let code = s.label("exported_check").or_else(|| s.label("check"));
        if let (Some(code), Ok(n)) = (code, s.value.1.parse::<f64>())
            && n.is_finite()
            && n >= 0.0
        {
            *out.entry(code.to_string()).or_insert(0) += n as usize;
        }
    }
    out
}

/// An answer's samples, or an error naming the server and the query.
fn parsed<'b>(url: &str, expr: &str, body: &'b [u8]) -> Result<Vec<Sample<'b>>, String> {
    parse_answer(body).map_err(|e| format!("{url}: `{expr}`: {e}"))
}

/// `fleet --prometheus URL`: the URL checked, then the server read. `Err` carries the exit code
/// and why: a URL that is not one (a control character in it, https) is a usage error before
/// any connection; a server that cannot be read, inconclusive.
pub fn load_url(url: &str, timeout: Duration) -> Result<Loaded, (i32, String)> {
    use crate::report::exit;
    let server = http::Server::parse(url).map_err(|why| (exit::USAGE, why))?;
    load(&server, timeout).map_err(|why| (exit::INCONCLUSIVE, why))
}

/// Read the fleet from the Prometheus server at `server` (`http::Server::parse` of the URL
/// given: a usage error before this when it is not one).
pub fn load(server: &http::Server, timeout: Duration) -> Result<Loaded, String> {
    let url = server.url();
    let ask = |expr: &'static str| fetch(server, expr, timeout);
    let bodies = [
        ask(SERIES_QUERY)?,
        ask(CHECKS_QUERY)?,
        ask(PASSED_QUERY)?,
        ask(RECENT_QUERY)?,
    ];
    let now = parsed(&url, SERIES_QUERY, &bodies[0])?;
    let checks = parsed(&url, CHECKS_QUERY, &bodies[1])?;
    let passed = parsed(&url, PASSED_QUERY, &bodies[2])?;
    let recent = parsed(&url, RECENT_QUERY, &bodies[3])?;
    let mut targets = Targets::default();
    for sample in now.iter().chain(&checks) {
        targets.add(sample);
    }
    let (nodes, mut skipped) = series::nodes(&targets, &url);
    let mut key = String::new();
    let mut unreachable: Vec<Unreachable> = recent
        .iter()
        .filter_map(|s| {
            let info = series::split_as(s, "info", &mut key)?;
            (!targets.contains(&key)).then(|| Unreachable {
                name: info
                    .own
                    .get("node")
                    .filter(|n| !n.is_empty())
                    .or_else(|| s.label("instance"))
                    .unwrap_or(&key)
                    .to_string(),
                target: key.clone(),
            })
        })
        .collect();
    unreachable.sort_by(|a, b| a.name.cmp(&b.name));
    unreachable.dedup();
    let (nodes, duplicates) = super::pick::one_per_node(nodes);
    skipped.extend(duplicates);
    Ok(Loaded {
        nodes,
        skipped,
        unreachable,
        passes: Some(passes(&passed)),
    })
}

#[cfg(test)]
mod tests;
