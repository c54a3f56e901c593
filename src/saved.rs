//! Saved JSON reports (`check --format json`, `--save-report`) read leniently, for `diff` and
//! `fleet`, which meet reports of other gpudoctor versions: a layer, status or figure name this
//! version does not know is kept as text instead of refusing the file, and fields a version did
//! not write read as absent. Only `schema_version` and `layers` are required — what makes a JSON
//! document a gpudoctor report.
//!
//! Reading never hangs and never reads without bound: files are opened non-blocking (a FIFO
//! named `*.json` is an error after the wait, not a hang) and read up to [`MAX_REPORT_BYTES`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::report::facts::Facts;
use crate::report::{Report, Status};
use crate::source::rooted;

/// Longest report read: far above any real one (a few hundred KiB with facts).
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// How long a file that turns out to be a pipe may take to deliver.
pub const READ_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedReport {
    pub schema_version: u32,
    #[serde(default)]
    pub gpudoctor_version: String,
    #[serde(default)]
    pub source: SavedSource,
    #[serde(default)]
    pub node: SavedNode,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub generated_at: Option<String>,
    pub layers: Vec<SavedLayer>,
    #[serde(default)]
    pub first_failure: Option<SavedFirstFailure>,
    #[serde(default)]
    pub exit_code: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedSource {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub root: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedNode {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub driver_version: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedLayer {
    pub id: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub checks: Vec<SavedCheck>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedCheck {
    pub code: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub figures: Vec<SavedFigure>,
    /// What the check asks for (`reboot_node`, ...); absent before report schema 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The finding this one follows from: a consequence, counted under its cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_by: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedFigure {
    pub name: String,
    pub value: f64,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The profile's floor the node judged it against (report `Figure::floor`).
    #[serde(default)]
    pub floor: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SavedFirstFailure {
    #[serde(default)]
    pub layer: String,
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub summary: String,
    /// What it asks for; absent before report schema 2 (the check result has it then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// A status by its JSON name; `None` for one this version does not know.
pub fn status(name: &str) -> Option<Status> {
    [
        Status::Pass,
        Status::Warn,
        Status::Fail,
        Status::Skip,
        Status::Error,
        Status::NotRun,
    ]
    .into_iter()
    .find(|s| s.as_str() == name)
}

impl SavedLayer {
    /// The layer's checks ran (it was neither blocked, deselected nor absent).
    pub fn evaluated(&self) -> bool {
        !self.checks.is_empty() && self.status != Status::NotRun.as_str()
    }
}

impl SavedReport {
    /// A report made by this version, in the lenient view (through its JSON, so both views are
    /// the same by construction).
    pub fn from_report(report: &Report) -> Self {
        serde_json::to_value(report)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    pub fn layer(&self, id: &str) -> Option<&SavedLayer> {
        self.layers.iter().find(|l| l.id == id)
    }
}

/// Why a file is not a report this version can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Could not be read at all (missing, permission, a directory, too large, a pipe that
    /// never delivered).
    Unreadable(String),
    /// Read, but not a gpudoctor JSON report.
    NotAReport(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Unreadable(why) => write!(f, "cannot read it: {why}"),
            ReadError::NotAReport(why) => write!(f, "not a gpudoctor JSON report: {why}"),
        }
    }
}

/// An error's text, which may name the file or quote a value from it (serde: `invalid type:
/// string "..."`), shown escaped like every string from a report (`render::sanitize`).
fn shown(err: impl std::fmt::Display) -> String {
    crate::text::sanitize::text(&err.to_string()).into_owned()
}

/// Read a file's text, bounded in size and time.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let shown_path = path.display().to_string();
    rooted::read_named_file(path, &shown_path, MAX_REPORT_BYTES, READ_WAIT)
        .map_err(|e| ReadError::Unreadable(shown(e)))
}

/// How far ahead of this machine's clock a report's time may be and still count as made now:
/// the nodes' clocks and this one's differ by seconds under NTP, by minutes without it. Beyond
/// this, the report's age is unknown — its node's clock is wrong, or the file was edited — and
/// it is stale, never "current" for as long as the wrong date lies ahead (a report dated 2099
/// would otherwise stay fresh for seventy years).
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// How a report's `generated_at` stands against a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Age {
    /// No time, or one that is not RFC 3339.
    Unknown,
    /// This old; a time up to [`CLOCK_SKEW`] ahead counts as made now (zero).
    Old(Duration),
    /// Dated this far ahead of the clock, more than [`CLOCK_SKEW`]: its age is unknown.
    Ahead(Duration),
}

impl Age {
    /// The age of a report made at `generated_at`, at `now`.
    pub fn of(generated_at: Option<&str>, now: std::time::SystemTime) -> Age {
        let Some(made) = generated_at.and_then(crate::time::unix_seconds) else {
            return Age::Unknown;
        };
        let now = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match made.checked_sub(now) {
            Some(ahead) if ahead > CLOCK_SKEW.as_secs() => Age::Ahead(Duration::from_secs(ahead)),
            Some(_) => Age::Old(Duration::ZERO),
            None => Age::Old(Duration::from_secs(now - made)),
        }
    }

    /// Why a report of this age is stale against `limit`, or `None` when it is not: older than
    /// the limit (`7200 s old`), dated in the future (`dated 3 days in the future; clock
    /// skew?`), or of no time at all when `unknown_is_stale`.
    pub fn stale(self, limit: Duration, unknown_is_stale: bool) -> Option<String> {
        match self {
            Age::Old(age) if age > limit => Some(format!("{} s old", age.as_secs())),
            Age::Old(_) => None,
            Age::Ahead(ahead) => Some(format!(
                "dated {} in the future; clock skew?",
                crate::time::span(ahead.as_secs_f64())
            )),
            Age::Unknown => unknown_is_stale.then(|| "of unknown age".to_string()),
        }
    }
}

/// Parse a report's text leniently.
pub fn parse(text: &str) -> Result<SavedReport, ReadError> {
    serde_json::from_str(text).map_err(|e| ReadError::NotAReport(shown(e)))
}

/// The `facts` of a report's text (`check --with-facts`): `Ok(None)` when it has none, `Err`
/// when it has some this version cannot read (a newer vocabulary).
pub fn parse_facts(text: &str) -> Result<Option<Facts>, String> {
    #[derive(Deserialize)]
    struct Only {
        #[serde(default)]
        facts: Option<serde_json::Value>,
    }
    let only: Only = serde_json::from_str(text).map_err(shown)?;
    match only.facts {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value).map(Some).map_err(shown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_other_versions_write() {
        // A report of a later version: a layer, status and figure name this one does not know.
        let newer = r#"{"schema_version": 9, "layers": [
            {"id": "storage", "status": "degraded", "checks": [
                {"code": "storage.nvme", "status": "degraded", "summary": "s",
                 "figures": [{"name": "nvme_bytes_per_second", "value": 3, "labels": {"d": "0"}}]}]},
            {"id": "driver", "status": "pass", "checks": []}],
            "future_field": {"x": 1}}"#;
        let r = parse(newer).unwrap();
        assert_eq!(r.schema_version, 9);
        assert_eq!(r.layers[0].checks[0].figures[0].value, 3.0);
        assert_eq!(status(&r.layers[0].status), None);
        assert_eq!(status("not_run"), Some(Status::NotRun));
        assert!(r.node.hostname.is_none());
        // Not a report: valid JSON of another shape, or not JSON.
        assert!(matches!(
            parse(r#"{"name": "x"}"#),
            Err(ReadError::NotAReport(_))
        ));
        assert!(matches!(parse("\u{0}\u{1}"), Err(ReadError::NotAReport(_))));
        assert!(matches!(parse(""), Err(ReadError::NotAReport(_))));
    }

    #[test]
    fn errors_name_the_file_and_quote_it_escaped() {
        // A file name is whatever the collected directory holds; the error naming it is printed
        // on stderr and in fleet's output.
        let dir = tempfile::tempdir().unwrap();
        let hostile = dir.path().join("r\x1b]0;t\x07\u{9b}\u{202e}\u{2028}.json");
        std::fs::create_dir(&hostile).unwrap();
        let Err(err) = read_text(&hostile) else {
            panic!("a directory is not a report")
        };
        let text = err.to_string();
        assert!(
            text.contains("r\\x1b]0;t\\x07\\u{9b}\\u{202e}\\u{2028}.json"),
            "{text}"
        );
        // serde quotes a refused value (with Debug escapes today; whatever it does, the
        // message carries no raw control).
        let bad = r#"{"schema_version": "\u001b]0;t\u0007\u009b\u202e\u2028", "layers": []}"#;
        let Err(err) = parse(bad) else {
            panic!("a string schema_version is not a report")
        };
        let text = err.to_string();
        for c in ['\x1b', '\x07', '\u{9b}', '\u{202e}', '\u{2028}'] {
            assert!(!text.contains(c), "{text}");
        }
    }

    #[test]
    fn a_report_from_the_future_is_stale_beyond_the_clock_skew() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_772_359_200); // 2026-03-01T10:00:00Z
        let of = |t: &str| Age::of(Some(t), now);
        let hour = Duration::from_secs(3600);
        assert_eq!(of("2026-03-01T09:00:00Z"), Age::Old(hour));
        assert_eq!(of("2026-03-01T09:00:00Z").stale(hour, true), None);
        assert_eq!(
            of("2026-03-01T08:00:00Z").stale(hour, true).as_deref(),
            Some("7200 s old")
        );
        // Within the skew: made now.
        assert_eq!(of("2026-03-01T10:04:00Z"), Age::Old(Duration::ZERO));
        assert_eq!(of("2026-03-01T10:04:00Z").stale(hour, true), None);
        // Beyond it: stale whatever the limit, saying why (issue 41: a 2099 report was current).
        assert_eq!(
            of("2026-03-01T10:06:00Z"),
            Age::Ahead(Duration::from_secs(360))
        );
        let why = of("2099-01-01T00:00:00Z").stale(hour, false).unwrap();
        assert!(
            why.starts_with("dated ") && why.ends_with(" in the future; clock skew?"),
            "{why}"
        );
        assert_eq!(Age::of(None, now), Age::Unknown);
        assert_eq!(Age::of(Some("yesterday"), now).stale(hour, false), None);
        assert_eq!(
            Age::of(None, now).stale(hour, true).as_deref(),
            Some("of unknown age")
        );
    }

    #[test]
    fn facts_are_optional_and_a_newer_vocabulary_is_an_error() {
        assert_eq!(parse_facts(r#"{"layers": []}"#), Ok(None));
        assert_eq!(parse_facts(r#"{"facts": null}"#), Ok(None));
        let f = parse_facts(
            r#"{"facts": {"version": 1, "sections": {"node": {"node": {"kernel": "6.8"}}}}}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(f.get("node", "node", "kernel"), Some("6.8"));
        assert!(parse_facts(r#"{"facts": {"version": 2, "sections": [1, 2]}}"#).is_err());
    }
}
