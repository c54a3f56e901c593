//! A writable copy of a fixture, edited one thing at a time and replayed: the shape of the
//! check-path tests (`tests/check_paths.rs`, `tests/rdma_paths.rs`). Edits go through symlinks
//! as sysfs paths do; the copy keeps the fixture's links relative, as on a real node.
//!
//! The copy's files are hard links to the fixture's (a real copy of a 2,300-file tree cost a
//! second of system time per test): every edit goes through [`Node::write`], which puts a new
//! file in place of the link. Never write into `node.path(..)` with `fs` directly.

use std::fs;
use std::path::{Path, PathBuf};

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::profile::Profile;
use gpudoctor::report::{CheckResult, Layer, LayerReport, Report, Status};
use gpudoctor::source::{self, SourceOptions};
use serde_json::Value;

/// The fixture most cases start from: 8 × H100 SXM5 on `hgx-h100`, InfiniBand and RoCE, a
/// kubelet with 8 allocatable GPUs.
pub const HEALTHY: &str = "hgx-h100-healthy";
pub const NVML_JSON: &str = ".gpudoctor/nvml.json";

pub struct Node {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Node {
    pub fn copy(fixture: &str) -> Node {
        let dir = super::tempdir().unwrap();
        let root = dir.path().join("node");
        super::link_tree(&super::repo().join("fixtures").join(fixture), &root);
        Node { _dir: dir, root }
    }

    pub fn healthy() -> Node {
        Node::copy(HEALTHY)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// Write a file (through any symlink on the way), creating directories. The file is a new
    /// one in place of what was there: what was there may be a hard link to the fixture's.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        let parent = path.parent().unwrap();
        fs::create_dir_all(parent).unwrap();
        let mut real = fs::canonicalize(parent)
            .unwrap()
            .join(path.file_name().unwrap());
        if let Ok(target) = fs::canonicalize(&real) {
            real = target;
        }
        if fs::symlink_metadata(&real).is_ok_and(|m| m.is_file()) {
            fs::remove_file(&real).unwrap();
        }
        fs::write(real, text).unwrap();
    }

    /// Rewrite a file; an edit that changes nothing is a broken test, not a passing one.
    pub fn edit(&self, rel: &str, change: impl Fn(&str) -> String) {
        let text = self.read(rel);
        let changed = change(&text);
        assert_ne!(text, changed, "{rel}: the edit changed nothing");
        self.write(rel, &changed);
    }

    /// Drop the lines of `rel` that start with `prefix` (a module from /proc/modules).
    pub fn drop_lines(&self, rel: &str, prefix: &str) {
        self.edit(rel, |t| {
            t.lines()
                .filter(|l| !l.starts_with(prefix))
                .map(|l| format!("{l}\n"))
                .collect()
        });
    }

    pub fn edit_json(&self, rel: &str, edit: impl FnOnce(&mut Value)) {
        let mut doc: Value = serde_json::from_str(&self.read(rel)).unwrap();
        edit(&mut doc);
        self.write(rel, &serde_json::to_string_pretty(&doc).unwrap());
    }

    pub fn edit_nvml(&self, edit: impl FnOnce(&mut Value)) {
        self.edit_json(NVML_JSON, edit);
    }

    /// Edit every NVML device.
    pub fn edit_gpus(&self, mut edit: impl FnMut(&mut Value)) {
        self.edit_nvml(|doc| {
            for d in doc["devices"].as_array_mut().unwrap() {
                edit(d);
            }
        });
    }

    /// Rename every GPU to a model no built-in profile knows: consistency checks only.
    pub fn without_profile(&self, name: &str) {
        self.edit_gpus(|d| d["name"] = Value::from(name));
    }

    /// NVML's answer for one GPU, as the copy holds it now.
    pub fn nvml_gpu(&self, index: usize) -> Value {
        let doc: Value = serde_json::from_str(&self.read(NVML_JSON)).unwrap();
        doc["devices"][index].clone()
    }

    /// Remove a file, a link or a whole directory.
    pub fn remove(&self, rel: &str) {
        let path = self.path(rel);
        let meta = fs::symlink_metadata(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        if meta.is_dir() {
            fs::remove_dir_all(path).unwrap();
        } else {
            fs::remove_file(path).unwrap();
        }
    }

    pub fn link(&self, rel: &str, target: impl AsRef<Path>) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// The directory an RDMA device's class link points at, root-relative.
    pub fn ib_dir(&self, dev: &str) -> String {
        let link = format!("sys/class/infiniband/{dev}");
        let target = fs::read_link(self.path(&link)).unwrap();
        let rel = target.to_string_lossy().replace("../../", "sys/");
        assert!(self.path(&rel).is_dir(), "{rel}");
        rel
    }

    /// Replay the copy with every layer run (`--keep-going`) and `options` otherwise.
    pub fn run_with(&self, options: RunOptions) -> Report {
        let source = source::open(&self.root, SourceOptions::default()).expect("a readable root");
        assert_eq!(source.kind(), gpudoctor::report::SourceKind::Replay);
        engine::run(
            source.as_ref(),
            &RunOptions {
                keep_going: true,
                ..options
            },
        )
    }

    pub fn run_all(&self) -> Report {
        self.run_with(RunOptions::default())
    }

    /// One layer, with this profile (or the one the GPUs match when `None`).
    pub fn run_layer(&self, layer: Layer, profile: Option<Profile>) -> Report {
        self.run_with(RunOptions {
            only: vec![layer],
            profile,
            ..RunOptions::default()
        })
    }
}

pub fn check<'r>(report: &'r Report, code: &str) -> &'r CheckResult {
    report
        .layers
        .iter()
        .flat_map(|l| &l.checks)
        .find(|c| c.code == code)
        .unwrap_or_else(|| panic!("{code} did not run"))
}

pub fn layer(report: &Report, id: Layer) -> &LayerReport {
    report.layers.iter().find(|l| l.id == id).unwrap()
}

/// All evidence of a check as `source: observed (expected ...)` lines, for `contains` asserts.
pub fn evidence(c: &CheckResult) -> String {
    c.evidence
        .iter()
        .map(|e| {
            format!(
                "{}: {} (expected {})\n",
                e.source,
                e.observed,
                e.expected.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

/// Assert status and that the summary holds every `parts`; show the whole result otherwise.
#[track_caller]
pub fn assert_check(report: &Report, code: &str, status: Status, parts: &[&str]) {
    let c = check(report, code);
    let show = || format!("{code}: {:?} {:?}\n{}", c.status, c.summary, evidence(c));
    assert_eq!(c.status, status, "{}", show());
    for part in parts {
        assert!(
            c.summary.contains(part),
            "summary lacks {part:?}\n{}",
            show()
        );
    }
}

#[track_caller]
pub fn assert_evidence(report: &Report, code: &str, parts: &[&str]) {
    let c = check(report, code);
    let all = evidence(c);
    for part in parts {
        assert!(all.contains(part), "{code} evidence lacks {part:?}:\n{all}");
    }
}
