//! Evidence of a judged file pointed at the file and line: a check quotes the line it judged
//! (`Evidence::quoted`: the line as written, gpudoctor's words after it in parentheses), and
//! the line is found again in the pasted text, so a ticket reader opens the attachment at
//! `dmesg.txt:1234`. A config placed at its node path for the node's reader is named by the
//! pasted file instead of that path.

use crate::report::{CheckResult, Evidence};

use super::Pasted;

/// Name `file` (and the line, when one is quoted) in `check`'s evidence; `placed` is where a
/// config was put for the reader.
pub fn locate(check: &mut CheckResult, file: &Pasted, placed: Option<&str>) {
    for evidence in &mut check.evidence {
        if let Some(rel) = placed
            && evidence.source.contains(rel)
        {
            evidence.source = evidence.source.replace(rel, &file.name);
        }
        if evidence.source != file.name {
            continue;
        }
        if let Some(n) = line_of(evidence, &file.text) {
            evidence.source = format!("{}:{n}", file.name);
        }
    }
}

/// The 1-based number of the line `evidence` quotes: the last line that is the quote, or holds
/// it (a check may quote a line without the collector's prefix), or, failing that, that the
/// quote holds (a line cut by the quote's length).
fn line_of(evidence: &Evidence, text: &str) -> Option<usize> {
    if !evidence.quoted {
        return None;
    }
    let quote = quoted_part(&evidence.observed);
    if quote.len() < 8 {
        return None;
    }
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end()).collect();
    let found = |hit: &dyn Fn(&str) -> bool| {
        lines
            .iter()
            .rposition(|l| !l.trim().is_empty() && hit(l))
            .map(|i| i + 1)
    };
    found(&|l| l == quote)
        .or_else(|| found(&|l| l.contains(quote)))
        .or_else(|| found(&|l| l.trim().len() >= 16 && quote.contains(l.trim())))
        .or_else(|| {
            // A quote cut short (`…`): its beginning.
            let head = quote.trim_end_matches('…');
            (head.len() >= 16 && head.len() < quote.len())
                .then(|| found(&|l| l.contains(head)))
                .flatten()
        })
}

/// The quoted line without gpudoctor's words after it: `… (history: …)`, `… (live, last at
/// an unknown time (no /proc/uptime …))` — the parenthesis that closes the line, matched.
fn quoted_part(observed: &str) -> &str {
    let first = observed.lines().next().unwrap_or_default().trim_end();
    if !first.ends_with(')') {
        return first;
    }
    let mut depth = 0usize;
    for (i, b) in first.bytes().enumerate().rev() {
        match b {
            b')' => depth += 1,
            b'(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return match first[..i].strip_suffix(' ') {
                        Some(head) => head.trim_end(),
                        None => first,
                    };
                }
            }
            _ => {}
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_line_holding_the_quote() {
        let text = "a\n[ 1.0] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\nb\n[ 2.0] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n";
        let e = Evidence::quoting(
            "f",
            "[ 2.0] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus. (live)",
        );
        assert_eq!(line_of(&e, text), Some(4));
        let unquoted = Evidence::new("f", "NVRM: Xid (PCI:0000:01:00): 79");
        assert_eq!(line_of(&unquoted, text), None);
    }

    #[test]
    fn gpudoctors_words_after_the_quote_are_dropped_nested_or_not() {
        assert_eq!(
            quoted_part(
                "NVRM: Xid (PCI:0000:9b:00): 119, x (0x2081 0x4). (live, last at an unknown time (no /proc/uptime to measure it against))"
            ),
            "NVRM: Xid (PCI:0000:9b:00): 119, x (0x2081 0x4)."
        );
        assert_eq!(quoted_part("line (history: reset)"), "line");
        assert_eq!(quoted_part("f(x)"), "f(x)");
        assert_eq!(quoted_part("no words"), "no words");
    }

    #[test]
    fn a_quote_without_the_prefix_is_found_inside_the_line() {
        let text = "host1: [ 3.0] mlx5_core 0000:61:00.0: wait_func: CREATE_DCT(0x710) timeout.\n";
        let e = Evidence::quoting(
            "f",
            "mlx5_core 0000:61:00.0: wait_func: CREATE_DCT(0x710) timeout.",
        );
        assert_eq!(line_of(&e, text), Some(1));
        let nowhere = Evidence::quoting("f", "nothing like this appears in it at all");
        assert_eq!(line_of(&nowhere, text), None);
    }
}
