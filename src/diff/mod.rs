//! `gpudoctor diff A B`: what is different about this node — from its healthy sibling, or
//! from itself last week. A and B are captures (directories or `.tar.gz`), saved JSON reports,
//! or a live root. Captures and live roots are walked by today's checks and their facts taken
//! from the same run (`snapshot`); a report brings the verdicts it holds and, when saved with
//! `check --with-facts`, its facts.
//!
//! This module opens the two sides; [`compare`] finds what differs, [`render`] prints it. It
//! never judges the node itself: verdicts are the checks', and a difference is a difference.

pub mod compare;
pub mod render;

use std::path::Path;

use serde::Serialize;

use crate::engine::{self, RunOptions};
use crate::profile::Profile;
use crate::record;
use crate::report::facts::Facts;
use crate::saved::{self, SavedReport};
use crate::snapshot;
use crate::source::{self, MANIFEST, SourceOptions};

pub use compare::{Diff, Difference, Kind};

/// What kind of input a side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A capture directory (`.gpudoctor/manifest.json`), replayed.
    Capture,
    /// A `.tar.gz` capture, unpacked and replayed.
    PackedCapture,
    /// A live root (`/`, `/host`): walked now.
    Live,
    /// A saved JSON report: its verdicts as they were.
    Report,
}

impl InputKind {
    pub fn describe(self) -> &'static str {
        match self {
            InputKind::Capture => "capture",
            InputKind::PackedCapture => "packed capture",
            InputKind::Live => "live root",
            InputKind::Report => "saved report",
        }
    }

    /// Today's checks ran on it (so `--keep-going` and `--profile` apply).
    pub fn walked(self) -> bool {
        self != InputKind::Report
    }
}

/// One side of the comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// As given on the command line.
    pub name: String,
    pub kind: InputKind,
    pub report: SavedReport,
    /// `None`: a report saved without `--with-facts`.
    pub facts: Option<Facts>,
    /// Why facts are missing or partial (said in the output).
    pub facts_note: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Walk every layer of captures and live roots (as `check --keep-going`).
    pub keep_going: bool,
    /// Judge captures and live roots against this profile.
    pub profile: Option<Profile>,
    /// Probe options for a live root.
    pub source: SourceOptions,
}

/// Why a side cannot be compared: a usage error, said on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError(pub String);

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What `path` is, without reading more than its type and, for a directory, its manifest.
pub fn input_kind(path: &Path) -> Result<InputKind, OpenError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| OpenError(format!("{shown}: {e}")))?;
    if meta.is_dir() {
        return Ok(if path.join(MANIFEST).is_file() {
            InputKind::Capture
        } else {
            InputKind::Live
        });
    }
    if record::is_packed(path) {
        return Ok(InputKind::PackedCapture);
    }
    Ok(InputKind::Report)
}

/// Open one side: walk a capture or live root, or read a saved report.
pub fn open(path: &Path, options: &DiffOptions) -> Result<Side, OpenError> {
    let name = path.display().to_string();
    let kind = input_kind(path)?;
    if !kind.walked() {
        if options.keep_going || options.profile.is_some() {
            return Err(OpenError(format!(
                "{name} is a saved report: its verdicts are as they were saved, so --keep-going and --profile cannot apply to it"
            )));
        }
        return read_report(path, name);
    }
    let unpacked = if kind == InputKind::PackedCapture {
        Some(
            record::unpack::unpack_capture(path, &record::UnpackLimits::default()).map_err(
                |e| match e {
                    record::UnpackError::NotACapture(why) => {
                        OpenError(format!("{name} is not a capture: {why}"))
                    }
                    e => OpenError(format!("{name}: cannot unpack: {e}")),
                },
            )?,
        )
    } else {
        None
    };
    let root = unpacked
        .as_ref()
        .map(|d| d.path().to_path_buf())
        .unwrap_or_else(|| path.to_path_buf());
    // A capture cut short (no valid manifest) is an error, never walked as a live node.
    let source = source::open(&root, options.source.clone()).map_err(|e| {
        OpenError(
            source::NotACapture {
                root: name.clone(),
                why: e.why,
            }
            .to_string(),
        )
    })?;
    let run = RunOptions {
        keep_going: options.keep_going,
        profile: options.profile.clone(),
        ..RunOptions::default()
    };
    let ctx = engine::context(source.as_ref(), &run);
    let mut report = engine::run_in(&ctx, &crate::checks::registry(), &run);
    report.source.root = name.clone();
    let facts = snapshot::take(&ctx);
    Ok(Side {
        name,
        kind,
        report: SavedReport::from_report(&report),
        facts: Some(facts),
        facts_note: None,
    })
}

fn read_report(path: &Path, name: String) -> Result<Side, OpenError> {
    let text = saved::read_text(path).map_err(|e| OpenError(format!("{name}: {e}")))?;
    let report = saved::parse(&text).map_err(|e| {
        OpenError(format!(
            "{name}: {e}; pass a capture (directory or .tar.gz), a live root, or a report saved by `gpudoctor check --format json` or --save-report"
        ))
    })?;
    let (facts, facts_note) = match saved::parse_facts(&text) {
        Ok(Some(facts)) => (Some(facts), None),
        Ok(None) => (
            None,
            Some("saved without --with-facts: only verdicts and measurements compared".to_string()),
        ),
        Err(why) => (
            None,
            Some(format!(
                "its facts are of a vocabulary this version cannot read ({why}): only verdicts and measurements compared"
            )),
        ),
    };
    Ok(Side {
        name,
        kind: InputKind::Report,
        report,
        facts,
        facts_note,
    })
}
