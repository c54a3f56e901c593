//! `gpudoctor diff`: every failure fixture against the healthy node names the difference that
//! was injected (the manifest's `made.edit`) and nothing unrelated; a node against itself, a
//! copy of itself, its packed capture and its own saved report is empty; reports without facts,
//! usage errors, formats and terminal safety.
//! In tests/diff/: failure_fixtures (its table: injected_edits), compared_inputs, differences_shown.

mod common;

use std::path::{Path, PathBuf};

use gpudoctor::diff::{self, Diff, DiffOptions, Kind};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    common::repo().join("fixtures").join(name)
}

fn run(a: &Path, b: &Path) -> Diff {
    let options = DiffOptions::default();
    let a = diff::open(a, &options).unwrap();
    let b = diff::open(b, &options).unwrap();
    diff::compare::compare(&a, &b)
}

#[path = "diff/compared_inputs.rs"]
mod compared_inputs;
#[path = "diff/differences_shown.rs"]
mod differences_shown;
#[path = "diff/failure_fixtures.rs"]
mod failure_fixtures;
#[path = "diff/injected_edits.rs"]
mod injected_edits;
