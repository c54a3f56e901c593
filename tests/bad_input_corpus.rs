//! The bad-input corpus (issue 10): every healthy fixture, damaged one file at a time in the ways
//! a sick node or a broken capture damages files, must still give a report — never a crash, a
//! hang, or a silent pass over a file that could not be read.
//!
//! How the corpus is made: each fixture whose manifest expects exit code 0 is copied to a temporary
//! directory; a traced replay ([`ReplaySource::with_trace`]) lists the files a `check
//! --keep-going` reads there (sysfs attributes, configs, the probe answers in `.gpudoctor/`); a
//! sample of them, spread over the file families (see [`sample`]), gets each [`Mutation`] in turn,
//! one file per run, and is restored before the next.
//!
//! What every run must do: `gpudoctor check --keep-going --format json` exits 0, 1 or 3 (never 4,
//! never a signal), prints one JSON report, and finishes within [`RUN_LIMIT`]. Each run checks
//! the layers that read the damaged file (`--only`, from a traced replay of each layer alone:
//! [`files_read_by_layer`]); a file only the report's header reads is checked with every layer.
//!
//! What must be named, by some result's summary or evidence (the path as the checks asked for it,
//! or any path that resolves to it: `sys/bus/pci/devices/0000:18:00.0/vendor` names the file under
//! `sys/devices/...`):
//! - damage that makes the file unreadable: binary (NUL bytes, invalid UTF-8), huge (over the read
//!   cap), a link to itself (a loop), a directory, mode 000. A check that can do without the file
//!   still names it (`judged without it`); one that cannot turns `error`.
//!
//! What may go unnoticed: damage that leaves something readable — truncated to half, emptied, a
//! dangling link (which reads as "absent", like a file that is not there). The file may still
//! parse (half a config, an empty kernel log, an optional file), or parse to a plausible other
//! value that changes a verdict without being wrong about what the node says (a `class` cut to
//! `0x03` is no longer a GPU: "7 gpus on pci"). For these only one thing is required: a check that
//! turned `error` names the file — a check that gives up says on what.
//!
//! Two exceptions: RoCE GID table slots (`gid_attrs/types/N`, `ndevs/N`) answer EINVAL while
//! unused, so their readers take an unreadable slot as empty ([`tolerated`]); files read only for
//! the report header (host name, kernel release, [`NOT_JUDGED`]) may change no verdict at all.
//!
//! Mode 000 denies nothing to root (CI runs the tests as root: `CAP_DAC_OVERRIDE`). As root the
//! mode-000 runs go as `nobody` (uid 65534), judged against a healthy run as `nobody`; where that
//! cannot work (`nobody` cannot execute the binary or read the copy), they run as root and the
//! verdicts must equal the healthy ones.
//!
//! Budget: `GPUDOCTOR_CORPUS_FILES` files per fixture and mutation (default [`DEFAULT_FILES`]:
//! 64 runs per complete healthy fixture; an overlay's only over the files it brings itself,
//! the base's being damaged in the base's corpus), fixtures
//! spread over worker threads. To dig: `GPUDOCTOR_CORPUS_FIXTURE=hgx-h100-healthy`,
//! `GPUDOCTOR_CORPUS_MUTATION=Loop` (a [`Mutation`] name), and `GPUDOCTOR_CORPUS_FILES=100000` for
//! every file the checks read (about 1050 per mutation on the H100 fixture, a minute each).

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::report::Layer;
use gpudoctor::source::rooted::{DEFAULT_READ_CAP, Trace};
use gpudoctor::source::{ReplaySource, RootedFs};
use serde_json::Value;

/// Files damaged per fixture and mutation when `GPUDOCTOR_CORPUS_FILES` is not set.
const DEFAULT_FILES: usize = 8;
/// Longest one `check` of a damaged node may take (debug build, two busy cores).
const RUN_LIMIT: Duration = Duration::from_secs(30);
/// Files a healthy node itself may fail to read, so their readers take an unreadable one as
/// empty: RoCE GID table slots answer EINVAL while unused (reference/sysfs.md §8). For these only
/// a changed verdict must name them.
fn tolerated(rel: &str) -> bool {
    rel.contains("/gid_attrs/types/") || rel.contains("/gid_attrs/ndevs/")
}

/// Read only for the report header (host name, kernel release); no check judges them.
const NOT_JUDGED: &[&str] = &[
    "proc/sys/kernel/hostname",
    "etc/hostname",
    "proc/sys/kernel/osrelease",
    "proc/version",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mutation {
    /// The first half of the bytes.
    Truncate,
    /// Zero bytes.
    Empty,
    /// NUL bytes and invalid UTF-8.
    Binary,
    /// One byte over the read cap (sparse).
    Huge,
    /// Mode 000.
    Unreadable,
    /// A symlink to nothing.
    Dangling,
    /// A symlink to itself.
    Loop,
    /// A directory.
    Directory,
}

const MUTATIONS: [Mutation; 8] = [
    Mutation::Truncate,
    Mutation::Empty,
    Mutation::Binary,
    Mutation::Huge,
    Mutation::Unreadable,
    Mutation::Dangling,
    Mutation::Loop,
    Mutation::Directory,
];

impl Mutation {
    /// The damage makes the file unreadable, so the run must name it.
    fn makes_unreadable(self) -> bool {
        matches!(
            self,
            Mutation::Binary
                | Mutation::Huge
                | Mutation::Unreadable
                | Mutation::Loop
                | Mutation::Directory
        )
    }
}

fn files_per_fixture() -> usize {
    std::env::var("GPUDOCTOR_CORPUS_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_FILES)
}

/// Fixtures whose manifest expects exit code 0 (`GPUDOCTOR_CORPUS_FIXTURE=NAME`: only that one).
fn healthy_fixtures() -> Vec<PathBuf> {
    let only = std::env::var("GPUDOCTOR_CORPUS_FIXTURE").ok();
    common::fixtures()
        .into_iter()
        .filter(|dir| only.as_ref().is_none_or(|n| common::name_of(dir) == *n))
        .filter(|dir| {
            let text = fs::read_to_string(dir.join(".gpudoctor/manifest.json")).unwrap();
            let manifest: Value = serde_json::from_str(&text).unwrap();
            manifest["expect"]["exit_code"] == 0
        })
        .collect()
}

/// A fixture whose manifest names a base (docs/fixtures.md "Overlays").
fn is_overlay(fixture: &Path) -> bool {
    let text = fs::read_to_string(fixture.join(".gpudoctor/manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["base"].is_string()
}

/// The files a `check --keep-going` of `root` reads, root-relative with every link resolved.
fn files_read(root: &Path) -> Vec<String> {
    let trace = Arc::new(Mutex::new(Trace::default()));
    let source = ReplaySource::new(root).with_trace(trace.clone());
    let options = RunOptions {
        keep_going: true,
        ..RunOptions::default()
    };
    let _ = engine::run(&source, &options);
    let trace = trace.lock().unwrap();
    trace
        .contents
        .keys()
        .filter(|rel| rel.as_str() != ".gpudoctor/manifest.json")
        .cloned()
        .collect()
}

/// The files a replay of each layer alone reads: a damaged file is checked with the layers
/// that read it (`--only`), which are the ones it can change. A layer's checks judge the facts
/// its own inputs give whichever layers run beside it (tests/missing_inputs.rs compares the
/// two for every input of the H100 fixtures); the others would replay the node for nothing.
fn files_read_by_layer(root: &Path) -> BTreeMap<Layer, BTreeSet<String>> {
    Layer::ALL
        .iter()
        .map(|layer| {
            let trace = Arc::new(Mutex::new(Trace::default()));
            let source = ReplaySource::new(root).with_trace(trace.clone());
            let options = RunOptions {
                keep_going: true,
                only: vec![*layer],
                ..RunOptions::default()
            };
            let _ = engine::run(&source, &options);
            let files = trace.lock().unwrap().contents.keys().cloned().collect();
            (*layer, files)
        })
        .collect()
}

/// FNV-1a: a stable order that does not depend on the platform's hasher.
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The files in a stable shuffled order that visits every family (the first two path components:
/// `sys/devices`, `sys/class`, `proc/driver`, `etc/containerd`, `.gpudoctor/nvml.json`, ...)
/// before the second file of any.
fn sample(fixture: &str, files: &[String]) -> Vec<String> {
    let mut families: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for f in files {
        let family: Vec<&str> = f.splitn(3, '/').take(2).collect();
        families.entry(family.join("/")).or_default().push(f);
    }
    let mut queues: Vec<Vec<&String>> = families
        .into_values()
        .map(|mut v| {
            v.sort_by_key(|f| hash(&format!("{fixture}/{f}")));
            v.reverse();
            v
        })
        .collect();
    queues.sort_by_key(|q| hash(&format!("{fixture}:{}", q[0])));
    let mut out = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        for q in &mut queues {
            if let Some(f) = q.pop() {
                out.push(f.clone());
            }
        }
    }
    out
}

/// What was at a path before the damage, to put it back.
struct Saved {
    bytes: Vec<u8>,
    mode: u32,
}

fn damage(path: &Path, mutation: Mutation) -> Saved {
    let bytes = fs::read(path).unwrap();
    let mode = fs::metadata(path).unwrap().permissions().mode();
    let saved = Saved { bytes, mode };
    // The scratch tree's files are hard links to the fixture's (`common::link_tree`): the
    // damage goes to a file of its own, put in place of the link, never through it.
    restore(path, &saved);
    match mutation {
        Mutation::Truncate => {
            File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(saved.bytes.len() as u64 / 2)
                .unwrap();
        }
        Mutation::Empty => fs::write(path, b"").unwrap(),
        Mutation::Binary => {
            let mut garbage = b"\x00\xff\xfe\x80gpudoctor\x00".to_vec();
            let mut x = hash(&path.display().to_string());
            while garbage.len() < saved.bytes.len().max(64) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                garbage.push(x as u8);
            }
            fs::write(path, garbage).unwrap();
        }
        Mutation::Huge => {
            File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(DEFAULT_READ_CAP + 1)
                .unwrap();
        }
        Mutation::Unreadable => {
            fs::set_permissions(path, fs::Permissions::from_mode(0o000)).unwrap();
        }
        Mutation::Dangling => {
            fs::remove_file(path).unwrap();
            symlink("gpudoctor-corpus-no-such-file", path).unwrap();
        }
        Mutation::Loop => {
            fs::remove_file(path).unwrap();
            symlink(path.file_name().unwrap(), path).unwrap();
        }
        Mutation::Directory => {
            fs::remove_file(path).unwrap();
            fs::create_dir(path).unwrap();
            fs::write(path.join("inside"), b"1\n").unwrap();
        }
    }
    saved
}

fn restore(path: &Path, saved: &Saved) {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path).unwrap(),
        Ok(_) => fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
    fs::write(path, &saved.bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(saved.mode)).unwrap();
}

/// One `gpudoctor check`, killed at [`RUN_LIMIT`]. Output goes to files: a report larger than a
/// pipe buffer must not block the child while we wait.
struct Run {
    code: Option<i32>,
    report: Result<Value, String>,
    stderr: String,
    took: Duration,
}

fn check(root: &Path, scratch: &Path, layers: &[Layer]) -> Run {
    check_as(root, scratch, None, layers).unwrap()
}

/// [`check`] as user `uid` (and its group) when given; `None` when it cannot start that way.
/// Only `layers` when any are named (`--only`), else every layer.
fn check_as(root: &Path, scratch: &Path, uid: Option<u32>, layers: &[Layer]) -> Option<Run> {
    let out_path = scratch.join("stdout.json");
    let err_path = scratch.join("stderr.txt");
    let started = Instant::now();
    let mut command = common::scratch::gpudoctor_command();
    command
        .args(["check", "--keep-going", "--format", "json", "--root"])
        .arg(root)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap());
    if !layers.is_empty() {
        let ids: Vec<&str> = layers.iter().map(|l| l.id()).collect();
        command.arg("--only").arg(ids.join(","));
    }
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    let mut child = command.spawn().ok()?;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = started.elapsed();
    let stdout = fs::read_to_string(&out_path).unwrap_or_default();
    Some(Run {
        code: status.and_then(|s| s.code()),
        report: serde_json::from_str(&stdout).map_err(|e| e.to_string()),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
        took,
    })
}

/// `nobody`: who the mode-000 runs read as when the test runs as root.
const NOBODY: u32 = 65534;

/// When this test runs as root (CI), mode 000 denies root nothing; the mode-000 runs then go as
/// `nobody`, judged against a healthy run as `nobody`. `None` when that is not possible here
/// (not root, or `nobody` cannot execute the binary or read the copy): those runs go as we are.
fn nobody_baseline(root: &Path, scratch: &Path) -> Option<Value> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    fs::set_permissions(scratch, fs::Permissions::from_mode(0o755)).ok()?;
    let run = check_as(root, scratch, Some(NOBODY), &[])?;
    if run.code != Some(0) {
        return None;
    }
    run.report.ok()
}

/// Check code -> status, for comparing a damaged run with the healthy one: of `layers` when
/// any are named, else of every layer.
fn verdicts(report: &Value, layers: &[Layer]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let wanted = |layer: &Value| {
        layers.is_empty() || layers.iter().any(|l| layer["id"].as_str() == Some(l.id()))
    };
    for layer in report["layers"].as_array().into_iter().flatten() {
        if !wanted(layer) {
            continue;
        }
        for check in layer["checks"].as_array().into_iter().flatten() {
            out.insert(
                check["code"].as_str().unwrap_or_default().to_string(),
                check["status"].as_str().unwrap_or_default().to_string(),
            );
        }
    }
    out
}

/// Every string a result shows an operator: summary, hint, evidence source and observed.
fn result_texts(check: &Value) -> Vec<&str> {
    let mut texts: Vec<&str> = ["summary", "hint"]
        .iter()
        .filter_map(|k| check[k].as_str())
        .collect();
    for e in check["evidence"].as_array().into_iter().flatten() {
        texts.extend(["source", "observed"].iter().filter_map(|k| e[k].as_str()));
    }
    texts
}

/// Path-shaped words of a text (`sys/bus/pci/devices/0000:18:00.0/vendor:` -> without the colon).
fn path_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "()[],;\"'`=<>".contains(c))
        .map(|w| w.trim_end_matches([':', '.']).trim_start_matches('/'))
        .filter(|w| w.contains('/'))
}

/// Does any of `texts` name `damaged` (a root-relative path with every link resolved), directly
/// or through a path that resolves to it in the undamaged fixture?
fn names(
    texts: &[&str],
    damaged: &str,
    pristine: &RootedFs,
    memo: &mut HashMap<String, Option<String>>,
) -> bool {
    texts.iter().flat_map(|t| path_words(t)).any(|word| {
        if word == damaged {
            return true;
        }
        let canonical = memo
            .entry(word.to_string())
            .or_insert_with(|| pristine.canonical(word).ok());
        canonical.as_deref() == Some(damaged)
    })
}

#[derive(Debug)]
struct Outcome {
    fixture: String,
    file: String,
    mutation: Mutation,
    problem: Option<String>,
    took: Duration,
}

fn corpus_of(fixture: &Path, per_mutation: usize) -> Vec<Outcome> {
    let name = common::name_of(fixture);
    let scratch = common::tempdir().unwrap();
    let root = scratch.path().join("node");
    common::link_tree(fixture, &root);
    // Paths resolve as in the undamaged node: an overlay fixture as its composed tree.
    let pristine = RootedFs::new(common::complete(fixture));
    let mut memo = HashMap::new();

    let baseline = check(&root, scratch.path(), &[]);
    let healthy = baseline.report.expect("the healthy fixture reports");
    let as_nobody = nobody_baseline(&root, scratch.path());
    let by_layer = files_read_by_layer(&root);
    // The layers that read `file`; none (every layer) for one only the report's header reads.
    let layers_reading = |file: &str| -> Vec<Layer> {
        let layers: Vec<Layer> = Layer::ALL
            .into_iter()
            .filter(|l| by_layer[l].contains(file))
            .collect();
        if NOT_JUDGED.contains(&file) {
            Vec::new()
        } else {
            layers
        }
    };
    eprintln!(
        "{name}: mode-000 runs {}",
        if as_nobody.is_some() {
            "as nobody (denied)"
        } else {
            "as this user (root reads them anyway: verdicts must not change)"
        }
    );
    // An overlay's corpus is the files it brings (its kubelet or runtime config, its probe
    // answers): the base's own files are damaged in the base's corpus, and damaging them again
    // under every platform's name finds nothing new at the price of a run each.
    let own = |rel: &String| !is_overlay(fixture) || fixture.join(rel).exists();
    let files = sample(
        &name,
        &files_read(&root)
            .into_iter()
            .filter(own)
            .collect::<Vec<_>>(),
    );
    let mut outcomes = Vec::new();
    let mut next = 0usize;
    let only = std::env::var("GPUDOCTOR_CORPUS_MUTATION").ok();
    for mutation in MUTATIONS {
        if only.as_ref().is_some_and(|m| *m != format!("{mutation:?}")) {
            continue;
        }
        for _ in 0..per_mutation.min(files.len()) {
            let file = files[next % files.len()].clone();
            next += 1;
            let path = root.join(&file);
            let layers = layers_reading(&file);
            let saved = damage(&path, mutation);
            let (run, denied, baseline) = match (&as_nobody, mutation) {
                (Some(nobody), Mutation::Unreadable) => {
                    let run = check_as(&root, scratch.path(), Some(NOBODY), &layers);
                    (run.unwrap(), true, nobody)
                }
                // Mode 000 keeps nothing from root (CAP_DAC_OVERRIDE): then nothing may change.
                _ => (
                    check(&root, scratch.path(), &layers),
                    mutation != Mutation::Unreadable || File::open(&path).is_err(),
                    &healthy,
                ),
            };
            restore(&path, &saved);
            let baseline = verdicts(baseline, &layers);
            let problem = judge(
                &run, &file, mutation, denied, &baseline, &layers, &pristine, &mut memo,
            );
            outcomes.push(Outcome {
                fixture: name.clone(),
                file,
                mutation,
                problem,
                took: run.took,
            });
        }
    }
    outcomes
}

#[allow(clippy::too_many_arguments)]
fn judge(
    run: &Run,
    file: &str,
    mutation: Mutation,
    denied: bool,
    healthy: &BTreeMap<String, String>,
    layers: &[Layer],
    pristine: &RootedFs,
    memo: &mut HashMap<String, Option<String>>,
) -> Option<String> {
    let tail = |s: &str| s.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
    if run.took > RUN_LIMIT {
        return Some(format!("still running after {RUN_LIMIT:?}; killed"));
    }
    if !matches!(run.code, Some(0 | 1 | 3)) {
        return Some(format!("exit {:?}: {}", run.code, tail(&run.stderr)));
    }
    let report = match &run.report {
        Ok(report) => report,
        Err(e) => return Some(format!("stdout is not one JSON report: {e}")),
    };
    let now = verdicts(report, layers);
    if !denied {
        // Root read it anyway: nothing may change.
        return (now != *healthy)
            .then(|| "mode 000 denied nothing, yet the verdicts changed".to_string());
    }
    let checks: Vec<&Value> = report["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["checks"].as_array().into_iter().flatten())
        .collect();
    let changed: Vec<&Value> = checks
        .iter()
        .copied()
        .filter(|c| {
            healthy
                .get(c["code"].as_str().unwrap_or_default())
                .map(String::as_str)
                != c["status"].as_str()
        })
        .collect();
    let named_by = |set: &[&Value], memo: &mut HashMap<String, Option<String>>| {
        let texts: Vec<&str> = set.iter().flat_map(|c| result_texts(c)).collect();
        names(&texts, file, pristine, memo)
    };
    if NOT_JUDGED.contains(&file) {
        // Read for its first line alone, it may change a verdict only where a check judges it
        // and says so: the kernel release decides the dma-buf path of `rdma.gpudirect` on a
        // node without peer memory (h100-gdr-dmabuf-healthy), and its result names the file.
        return (!changed.is_empty() && !named_by(&changed, memo))
            .then(|| format!("a header-only file changed verdicts: {changed:?}"));
    }
    if mutation.makes_unreadable() && !tolerated(file) && !named_by(&checks, memo) {
        return Some(format!(
            "unreadable, but no result names it (changed: {:?})",
            changed
                .iter()
                .map(|c| c["code"].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
        ));
    }
    // A check that gave up must say on what, whatever the damage.
    let new_errors: Vec<&Value> = changed
        .iter()
        .copied()
        .filter(|c| c["status"] == "error")
        .collect();
    if !new_errors.is_empty() && !named_by(&new_errors, memo) {
        return Some(format!(
            "new errors do not name it: {:?}",
            new_errors
                .iter()
                .map(|c| format!(
                    "{}: {}",
                    c["code"].as_str().unwrap_or_default(),
                    c["summary"].as_str().unwrap_or_default()
                ))
                .collect::<Vec<_>>()
        ));
    }
    None
}

#[test]
fn every_damaged_healthy_fixture_reports_and_names_the_damage() {
    let fixtures = healthy_fixtures();
    assert!(!fixtures.is_empty());
    let per_mutation = files_per_fixture();
    let started = Instant::now();
    let outcomes: Vec<Outcome> =
        common::parallel::map(&fixtures, |fixture| corpus_of(fixture, per_mutation))
            .into_iter()
            .flatten()
            .collect();

    let slowest = outcomes.iter().map(|o| o.took).max().unwrap_or_default();
    let kinds: BTreeSet<Mutation> = outcomes.iter().map(|o| o.mutation).collect();
    eprintln!(
        "{} damaged runs ({} mutations) in {:?}, slowest {slowest:?}",
        outcomes.len(),
        kinds.len(),
        started.elapsed()
    );
    let problems: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.problem
                .as_ref()
                .map(|p| format!("{} {} {:?}: {p}", o.fixture, o.file, o.mutation))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "{} of {} damaged runs failed:\n{}",
        problems.len(),
        outcomes.len(),
        problems.join("\n")
    );
}
