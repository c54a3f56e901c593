//! Each file under the root is opened at most once per `check` run (issue 41: `numa_node` was
//! opened 127 times and every `driver` link read twice for the H100 fixture's 67 PCI functions):
//! the fact families and checks that read a file share the run's one reading
//! (`source/rooted/memo.rs`). Every real open under the root — a file read, a directory listed, a
//! link read — is counted by its resolved path (`RootedFs::count_opens`) over a whole
//! `check --keep-going --with-facts`: every fixture replayed, and one as a live root.

mod common;

use std::path::Path;
use std::time::Duration;

use gpudoctor::checks;
use gpudoctor::engine::{self, RunOptions};
use gpudoctor::source::{self, HostSource, Source, SourceOptions};

/// Locations a run opens more than once on purpose (`read <path>`, `list <path>`, `link
/// <path>`, by suffix): none. A `--sample` window reads its counters twice, but its first
/// reading goes through a source of its own, before the run (sample/mod.rs).
const OPENED_TWICE_ON_PURPOSE: &[&str] = &[];

/// What `check --keep-going --with-facts` opens more than once through `source`.
fn opened_twice(source: &dyn Source) -> Vec<(String, u32)> {
    let counts = source.fs().count_opens();
    let options = RunOptions {
        keep_going: true,
        ..RunOptions::default()
    };
    let ctx = engine::context(source, &options);
    let report = engine::run_in(&ctx, &checks::registry(), &options);
    let _facts = gpudoctor::snapshot::take(&ctx);
    drop(ctx);
    assert!(!report.layers.is_empty());
    assert!(
        !counts.is_empty(),
        "nothing was counted: is the hook wired?"
    );
    counts
        .repeated()
        .into_iter()
        .filter(|(path, _)| !OPENED_TWICE_ON_PURPOSE.iter().any(|p| path.ends_with(p)))
        .collect()
}

fn replay(fixture: &Path) -> Box<dyn Source> {
    source::open(fixture, SourceOptions::default()).expect("a complete capture")
}

#[test]
fn the_h100_replay_opens_each_file_once() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let twice = opened_twice(replay(&fixture).as_ref());
    assert!(twice.is_empty(), "opened more than once: {twice:#?}");
}

#[test]
fn every_fixture_replay_opens_each_file_once() {
    let mut failures = Vec::new();
    for fixture in common::fixtures() {
        let twice = opened_twice(replay(&fixture).as_ref());
        if !twice.is_empty() {
            failures.push((fixture.file_name().map(|n| n.to_owned()), twice));
        }
    }
    assert!(failures.is_empty(), "opened more than once: {failures:#?}");
}

/// Nothing is asked where the kernel never puts it (issue 41: every lookup under a real /sys is
/// a path walk): `aer_rootport_total_err_*` only on root ports (drivers/pci/pcie/aer.c
/// `aer_stats_attrs_are_visible`), `net/` only under network functions, `sriov_totalvfs` never
/// on a bridge (no SR-IOV capability in a type 1 header). The H100 fixture has 16 root ports,
/// PLX switch ports below them, GPUs, NVSwitches and NICs.
#[test]
fn the_h100_replay_asks_only_where_the_kernel_puts_a_file() {
    let fixture = common::repo().join("fixtures/hgx-h100-healthy");
    let source = replay(&fixture);
    let counts = source.fs().count_opens();
    let options = RunOptions {
        keep_going: true,
        ..RunOptions::default()
    };
    let ctx = engine::context(source.as_ref(), &options);
    let _report = engine::run_in(&ctx, &checks::registry(), &options);
    drop(ctx);
    let locations = counts.locations();
    let bdf = |part: &str| part.len() == 12 && part.as_bytes()[4] == b':';
    let wrong: Vec<&String> = locations
        .iter()
        .filter(|l| {
            let parts: Vec<&str> = l.split('/').collect();
            let Some(last) = parts.last() else {
                return false;
            };
            // The function's place: how many functions deep below its host bridge.
            let depth = parts.iter().filter(|p| bdf(p)).count();
            last.starts_with("aer_rootport_total_err") && depth != 1
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "asked where the kernel never puts it: {wrong:#?}"
    );
    // The root ports' counters are still read, and the NICs' netdevs still listed.
    assert!(
        locations
            .iter()
            .any(|l| l.ends_with("aer_rootport_total_err_cor"))
    );
    assert!(
        locations
            .iter()
            .any(|l| l.starts_with("list ") && l.ends_with("/net"))
    );
    let asked = |suffix: &str| locations.iter().filter(|l| l.ends_with(suffix)).count();
    assert!(
        asked("/net") < 32 && asked("sriov_totalvfs") < 40,
        "net/ asked {} times, sriov_totalvfs {} times for 67 functions",
        asked("/net"),
        asked("sriov_totalvfs")
    );
}

/// The same reader serves a live root: the H100 fixture's tree without its answers, NVML not
/// there (its files are what is counted; live NVML is not a file).
#[test]
fn a_live_run_opens_each_file_once() {
    let root = common::live_root(&common::repo().join("fixtures/hgx-h100-healthy"));
    let options = SourceOptions {
        nvml_lib: Some("/nonexistent/libnvidia-ml.so.1".into()),
        probe_timeout: Duration::from_secs(5),
        kubelet_timeout: Duration::from_secs(1),
        ..SourceOptions::default()
    };
    let source = HostSource::new(&root, options);
    let twice = opened_twice(&source);
    assert!(twice.is_empty(), "opened more than once: {twice:#?}");
}

/// Outside a run nothing is remembered: a file changed between two runs reads as changed.
#[test]
fn a_new_run_reads_again() {
    let dir = common::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sys")).unwrap();
    std::fs::write(dir.path().join("sys/value"), "1\n").unwrap();
    let source = HostSource::new(dir.path(), SourceOptions::default());
    let first = {
        let _run = source.fs().remember_reads();
        let first = source.read_to_string("sys/value").unwrap();
        std::fs::write(dir.path().join("sys/value"), "2\n").unwrap();
        // Within the run, the run's reading stands.
        assert_eq!(source.read_to_string("sys/value").unwrap(), first);
        first
    };
    assert_eq!(first, "1\n");
    let _run = source.fs().remember_reads();
    assert_eq!(source.read_to_string("sys/value").unwrap(), "2\n");
}
