//! `--format json`: one pretty-printed document, the contract in `report.rs`. Strings keep
//! JSON's own escaping, and C1, bidi and line-separator characters are escaped too
//! (`sanitize::json`), so `cat report.json` cannot drive a terminal either.

use crate::report::Report;

pub fn render(report: &Report) -> String {
    // Serialising plain data with string keys cannot fail; fall back to a minimal document
    // rather than panic if it ever does.
    let mut text = serde_json::to_string_pretty(report)
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialise the report: {e}\"}}"));
    text.push('\n');
    crate::text::sanitize::json(text)
}
