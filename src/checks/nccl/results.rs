//! `nccl.wrong_results`: do the collectives return correct data? Every row's `#wrong` count, the
//! old `error` column against nccl-tests' own tolerance for the type, and every table's `Out of
//! bounds values` footer (reference/nccl.md §3, §4, §13).

use super::{each_run, naming_nodes, not_tests_log, quote, row_evidence};
use crate::answers::nccl::{Measure, Row, Wrong, deviation_tolerance, format_size};
use crate::checks::{Context, Outcome};
use crate::report::{Action, Evidence};

pub(super) fn wrong_results(ctx: &Context<'_>) -> Outcome {
    each_run(ctx, |_, run| {
        if let Some(skip) = not_tests_log(run) {
            return skip;
        }
        let log = &run.log;
        let footers: Vec<&(u64, crate::answers::nccl::Quoted)> =
            log.out_of_bounds_footers().collect();
        if log.rows.is_empty() && footers.is_empty() {
            return Outcome::skip("no result rows to check");
        }
        let (cleared, wrong): (Vec<&Row>, Vec<&Row>) =
            log.wrong_rows().partition(|r| cleared_by_footer(log, r));
        let oob = footers.iter().copied().find(|(n, _)| *n > 0);
        if wrong.is_empty() && oob.is_none() {
            let checked = log
                .rows
                .iter()
                .filter(|r| r.measures().any(Measure::checked))
                .count();
            if checked == 0 && footers.is_empty() {
                return Outcome::skip("results were not checked (-c 0): #wrong is N/A");
            }
            let mut summary = format!("no wrong values in {} result row(s)", log.rows.len());
            if let Some(max) = cleared
                .iter()
                .filter_map(|r| max_deviation(r))
                .reduce(f64::max)
            {
                summary.push_str(&format!(
                    "; the old error column's deviations (up to {}) are within the test's own bounds: its footer says `Out of bounds values : 0 OK`",
                    printf_e(max)
                ));
            }
            return Outcome::pass(summary);
        }
        let sizes: Vec<String> = wrong
            .iter()
            .take(6)
            .map(|r| format!("{} ({})", format_size(r.size), what_was_wrong(r)))
            .collect();
        let summary = if wrong.is_empty() {
            format!(
                "out of bounds values: {} failed check(s): data corruption",
                oob.map_or(0, |(n, _)| *n)
            )
        } else {
            format!(
                "wrong results at {} size(s): {}{}: data corruption on the gpu, nvlink or pcie path",
                wrong.len(),
                sizes.join(", "),
                if wrong.len() > 6 { ", ..." } else { "" }
            )
        };
        let mut evidence: Vec<Evidence> = wrong
            .iter()
            .take(3)
            .map(|r| row_evidence(run, r).expected("#wrong 0"))
            .collect();
        if let Some((_, q)) = oob.or(footers.first().copied()) {
            evidence.push(quote(run, q).expected("Out of bounds values : 0 OK"));
        }
        let outcome = Outcome::fail(summary)
            .evidence_all(evidence)
            .hint("take the node out of service: check `gpudoctor check --only driver,nvlink` (XIDs, NVLink errors) and ACS on the pcie switches; run `dcgmi diag -r 3`; a gpu that corrupts again goes to hardware inspection")
            .action(Action::HardwareInspection);
        // Which node corrupted is for the operator to find; which nodes to look at is not.
        naming_nodes(outcome, run)
    })
}

/// Whether `row` is wrong only by the old `error` column's deviation, in a table whose own
/// `Out of bounds values` footer counted nothing: that build judged the deviation itself and
/// passed it. Old nccl-tests (before 2022-08, `src/common.cu` `CheckData`) counted a value out
/// of bounds when `maxDelta > DeltaMaxValue(type)*(nranks - 1)` — a tolerance that grows with
/// the ranks, which a pasted row alone cannot know — and printed the deviation rounded to one
/// digit (`%5.0le`); its footer is the test's own verdict.
fn cleared_by_footer(log: &crate::answers::nccl::NcclLog, row: &Row) -> bool {
    let counted = row
        .measures()
        .any(|m| matches!(m.wrong, Wrong::Count(n) if n > 0));
    let footer = log
        .tables
        .get(row.table)
        .and_then(|t| t.out_of_bounds.as_ref());
    let footer = footer.or(if log.tables.len() <= 1 {
        log.out_of_bounds.as_ref()
    } else {
        None
    });
    !counted && footer.is_some_and(|(n, _)| *n == 0)
}

/// The largest old `error` column deviation of `row`.
fn max_deviation(row: &Row) -> Option<f64> {
    row.measures()
        .filter_map(|m| match m.wrong {
            Wrong::Deviation(d) => Some(d.abs()),
            _ => None,
        })
        .reduce(f64::max)
}

/// `24 element(s)`, or for the old `error` column `max error 1e+00 over the 1e-05 float
/// tolerance`.
fn what_was_wrong(row: &Row) -> String {
    match max_deviation(row) {
        Some(d) => format!(
            "max error {} over the {} {} tolerance",
            printf_e(d),
            printf_e(deviation_tolerance(&row.dtype)),
            row.dtype
        ),
        None => format!("{} element(s)", row.wrong_count()),
    }
}

/// A number as nccl-tests prints its error column (C's `%.0e`): `1e+00`, `5e-07`.
fn printf_e(x: f64) -> String {
    let text = format!("{x:.0e}");
    match text.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}
