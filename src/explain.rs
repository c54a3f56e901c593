//! `list-checks` and `explain CODE`: the registry as text, and the nearest codes for a typo.

use std::fmt::Write;

use crate::checks::missing::missing_input;
use crate::checks::{CheckDef, registry};

pub fn list_table() -> String {
    let rows: Vec<Vec<String>> = registry()
        .iter()
        .map(|c| {
            vec![
                c.code.to_string(),
                c.layer.id().to_string(),
                c.title.to_string(),
            ]
        })
        .collect();
    crate::text::grid::text(&["CODE".into(), "LAYER".into(), "TITLE".into()], &rows)
}

pub fn list_json() -> String {
    let rows: Vec<serde_json::Value> = registry()
        .iter()
        .map(|c| {
            serde_json::json!({
                "code": c.code, "layer": c.layer.id(), "title": c.title,
                "reads": c.explain.reads, "expects": c.explain.expects,
                "why": c.explain.why, "fix": c.explain.fix,
                "missing_input": missing_input(c.code),
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&rows).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

/// docs/checks.md: every check by layer (a test keeps the file equal to this output).
pub fn list_markdown() -> String {
    let mut out = String::from(
        "# Checks catalogue\n\nEvery registered check, by layer, as `gpudoctor explain CODE` prints it. This page is\ngenerated: `gpudoctor list-checks --format markdown > docs/checks.md` (a test fails when it is\nstale).\n\n**Missing input** says what the check gives when an input it reads is not there. Missing is\nnot absent: a file or directory every supported kernel provides (under /sys, /proc) or a probe\nanswer a capture records, when missing, gives `error` (\"not read: <path> missing — partial\ncapture or kernel older than N\"), is judged without, or skips — never a `fail` or `warn` about\nthe hardware (tests/missing_inputs.rs removes each input of every layer in turn). `fail` for\nabsence stays where absence is the fault: a module, a device node, a configuration file.\n",
    );
    let checks = registry();
    for layer in crate::report::Layer::ALL {
        let _ = write!(out, "\n## `{}` — {}\n", layer.id(), layer.title());
        let in_layer: Vec<&CheckDef> = checks.iter().filter(|c| c.layer == layer).collect();
        if in_layer.is_empty() {
            out.push_str("\nNo checks yet: the layer reports `skip` with the reason \"not implemented yet\".\n");
        }
        for c in in_layer {
            let _ = write!(
                out,
                "\n### `{}` — {}\n\n- **Reads**: {}\n- **Expects**: {}\n- **Why**: {}\n- **Fix**: {}\n- **Missing input**: {}\n",
                c.code,
                c.title,
                c.explain.reads,
                c.explain.expects,
                c.explain.why,
                c.explain.fix,
                missing_input(c.code).unwrap_or("not stated")
            );
            if let Some(policy) = crate::checks::nvml_errors::policy(c.code) {
                let _ = writeln!(out, "- **NVML errors**: {policy}");
            }
            if let Some(causes) = crate::checks::causes::describe(c.code, c.layer) {
                let _ = writeln!(out, "- **Cause first**: {causes}");
            }
        }
    }
    out.push_str(crate::checks::active::CATALOGUE_SECTION);
    out
}

pub fn explain(check: &CheckDef) -> String {
    let mut text = format!(
        "{code} ({layer} layer)\n  {title}\n\nReads:    {reads}\nExpects:  {expects}\nWhy:      {why}\nFix:      {fix}\nMissing:  {missing}\n",
        code = check.code,
        layer = check.layer.id(),
        title = check.title,
        reads = check.explain.reads,
        expects = check.explain.expects,
        why = check.explain.why,
        fix = check.explain.fix,
        missing = missing_input(check.code).unwrap_or("not stated"),
    );
    if let Some(policy) = crate::checks::nvml_errors::policy(check.code) {
        let _ = writeln!(text, "NVML:     {policy}");
    }
    if let Some(causes) = crate::checks::causes::describe(check.code, check.layer) {
        let _ = writeln!(text, "Causes:   {causes}");
    }
    text
}

/// Up to three registered codes closest to `code`: substring matches first, then by edit distance.
pub fn nearest_codes(code: &str) -> Vec<&'static str> {
    let wanted = code.to_ascii_lowercase();
    let mut scored: Vec<(usize, &'static str)> = registry()
        .iter()
        .map(|c| {
            let bare = c.code.split_once('.').map(|(_, b)| b).unwrap_or(c.code);
            let score = if c.code.contains(&wanted) || (!wanted.is_empty() && wanted.contains(bare))
            {
                0
            } else {
                levenshtein(&wanted, c.code).min(levenshtein(&wanted, bare))
            };
            (score, c.code)
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_code_a_typo_meant() {
        assert_eq!(nearest_codes("driver.gpu_cont")[0], "driver.gpu_count");
        assert_eq!(nearest_codes("nvml_init")[0], "driver.nvml_init");
        assert_eq!(levenshtein("kitten", "sitting"), 3);
    }
}
