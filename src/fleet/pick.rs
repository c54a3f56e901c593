//! Which report of a node `fleet` summarises when it finds more than one (a collection copied
//! twice, last week's file left beside this week's). A fleet counts nodes, not files, so one is
//! kept and each other is skipped with a warning that names both files, the rule and what to do.
//!
//! The rule (issue 30): **the worst verdict is kept; between equal verdicts, the file modified
//! last** (then the later file name). Neither a report's own `generated_at` nor its file's
//! modification time decides over a failure: both are written by whoever wrote the file (a
//! wrong clock, `touch`, a copy that reset them), so trusting either would let one report
//! silently hide another's failure. A failure that was since repaired stays shown until its
//! stale file is removed, and the warning says so: a false alarm the operator can clear beats
//! a fault nobody sees.

use std::time::SystemTime;

use super::{NodeReport, Skipped};
use crate::saved::{self, SavedReport};

/// How bad a report's verdict is: its worst layer status (a status this version does not know
/// ranks with `error`: not understood, so not taken for healthy), then its exit code (1 a
/// failure, 4 internal error, 3 inconclusive, 0 healthy; another code with internal error).
fn verdict_rank(report: &SavedReport) -> (u8, u8) {
    let error = crate::report::Status::Error.severity();
    let worst = report
        .layers
        .iter()
        .map(|l| saved::status(&l.status).map_or(error, |s| s.severity()))
        .max()
        .unwrap_or(0);
    let exit = match report.exit_code {
        0 => 0,
        3 => 1,
        1 => 3,
        _ => 2,
    };
    (worst, exit)
}

/// `fail (exit 1)`: the worst layer status as written, and the exit code.
fn verdict(report: &SavedReport) -> String {
    let error = crate::report::Status::Error.severity();
    let worst = report
        .layers
        .iter()
        .max_by_key(|l| saved::status(&l.status).map_or(error, |s| s.severity()))
        .map_or("no layers", |l| l.status.as_str());
    format!("{worst} (exit {})", report.exit_code)
}

fn modified(time: Option<SystemTime>) -> String {
    time.map_or_else(
        || "modification time unknown".to_string(),
        |t| format!("modified {}", crate::time::rfc3339(t)),
    )
}

/// Keep one report per node name (the input in any order); the others become [`Skipped`]
/// entries naming the kept file and why.
pub fn one_per_node(mut nodes: Vec<NodeReport>) -> (Vec<NodeReport>, Vec<Skipped>) {
    nodes.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then_with(|| verdict_rank(&b.report).cmp(&verdict_rank(&a.report)))
            .then_with(|| b.modified.cmp(&a.modified))
            .then_with(|| b.file.cmp(&a.file))
    });
    let mut kept: Vec<NodeReport> = Vec::with_capacity(nodes.len());
    let mut skipped = Vec::new();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for n in &nodes {
        *counts.entry(n.name.clone()).or_default() += 1;
    }
    for node in nodes {
        let Some(last) = kept.last().filter(|last| last.name == node.name) else {
            kept.push(node);
            continue;
        };
        let worse = verdict_rank(&last.report) > verdict_rank(&node.report);
        let why = if worse {
            "its verdict is worse: a report never hides another's failure, whatever their times say; remove the stale file once the node is repaired"
        } else {
            "same verdict, modified last: remove the file that is out of date"
        };
        skipped.push(Skipped {
            why: format!(
                "{} holds {} reports; kept {} ({}, {}) over this one ({}, {}) because {why}",
                node.name,
                counts.get(&node.name).copied().unwrap_or(2),
                last.file,
                verdict(&last.report),
                modified(last.modified),
                verdict(&node.report),
                modified(node.modified),
            ),
            file: node.file,
        });
    }
    (kept, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::saved::SavedLayer;
    use std::time::Duration;

    fn node(file: &str, status: &str, exit_code: i32, mtime: u64, stamp: &str) -> NodeReport {
        NodeReport {
            name: "node-03".into(),
            file: file.into(),
            modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(mtime)),
            report: SavedReport {
                exit_code,
                generated_at: Some(stamp.into()),
                layers: vec![SavedLayer {
                    id: "driver".into(),
                    status: status.into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_worst_verdict_is_kept_whatever_the_times_say() {
        // The failing report is older on disk and by its own stamp: still kept.
        let (kept, skipped) = one_per_node(vec![
            node("new.json", "pass", 0, 2_000, "2026-03-01T00:00:00Z"),
            node("old.json", "fail", 1, 1_000, "2026-02-01T00:00:00Z"),
        ]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].file, "old.json");
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].file, "new.json");
        let why = &skipped[0].why;
        assert!(why.starts_with("node-03 holds 2 reports; kept old.json (fail (exit 1), modified 1970-01-01T00:16:40Z) over this one (pass (exit 0), modified 1970-01-01T00:33:20Z) because its verdict is worse"), "{why}");
        // A warning outranks a pass, an unknown status a warning; exit 1 outranks exit 0.
        let (kept, _) = one_per_node(vec![
            node("a.json", "warn", 0, 1, ""),
            node("b.json", "degraded", 0, 0, ""),
            node("c.json", "pass", 0, 9, ""),
        ]);
        assert_eq!(kept[0].file, "b.json");
        let (kept, _) = one_per_node(vec![
            node("a.json", "pass", 1, 0, ""),
            node("b.json", "pass", 0, 9, ""),
        ]);
        assert_eq!(kept[0].file, "a.json");
    }

    #[test]
    fn between_equal_verdicts_the_file_modified_last_is_kept_not_the_newer_stamp() {
        let (kept, skipped) = one_per_node(vec![
            node("touched.json", "fail", 1, 5_000, "2020-01-01T00:00:00Z"),
            node("stamped.json", "fail", 1, 1_000, "2030-01-01T00:00:00Z"),
        ]);
        assert_eq!(kept[0].file, "touched.json");
        assert!(
            skipped[0]
                .why
                .contains("because same verdict, modified last"),
            "{}",
            skipped[0].why
        );
        // Unknown times rank below known ones; then the later file name.
        let mut unknown = node("z.json", "pass", 0, 0, "");
        unknown.modified = None;
        let (kept, skipped) = one_per_node(vec![unknown, node("a.json", "pass", 0, 0, "")]);
        assert_eq!(kept[0].file, "a.json");
        assert!(skipped[0].why.contains("modification time unknown"));
    }
}
