//! Property tests for every parser: arbitrary input must give an answer — `Ok`, `Err` or a
//! partial result — and never a panic, a hang, or time that grows out of proportion with the
//! input (issue 10, "fuzzed parsers"). gpudoctor runs on nodes whose sysfs, kernel log and
//! configs may be damaged, and reads captures attached to tickets; a parser that panics turns a
//! diagnosis into a crash report.
//!
//! Each parser gets three kinds of input:
//! - arbitrary text (`any::<String>()`) and arbitrary bytes read as lossy UTF-8 (what a reader
//!   would hand over after a damaged read); the NCCL log parser, which reads bytes, also gets
//!   raw bytes, cut into chunks at arbitrary offsets (and must give the same log however cut);
//! - a soup of the tokens its format is made of (`0x`, `-`, `,`, `Gb/sec`, `NVRM: Xid (`, ...),
//!   which reaches far deeper into a hand-written parser than random text does;
//! - real-format samples (the healthy fixture's own files, and literal lines from the parsers'
//!   unit tests) with up to eight random edits: bytes deleted, inserted, duplicated, replaced by
//!   the format's structural characters, lines swapped, the text cut short.
//!
//! A few round trips check that the parsers also read what they should (CPU lists and masks, PCI
//! addresses, hex ids, XID lines). `big_inputs_parse_in_bounded_time` feeds each parser inputs of
//! megabytes built to hit its worst case (a CPU list of a million full ranges, nesting thousands
//! deep, a YAML alias bomb, a kernel log that is one 4 MiB line).
//!
//! Budget: `PROPTEST_CASES` cases per property (default [`DEFAULT_CASES`]; the whole file runs in
//! well under a minute on two cores in a debug build). Every case must finish within
//! [`PER_CASE`] (a parse that slow is a failure and proptest shrinks it to a small example) and
//! every property within [`PER_PROPERTY`] (a parser that never returns fails the test instead of
//! hanging CI). Seeds are random per run; a failure prints the minimal input — add it as a
//! regression unit test next to the parser. For a long local soak:
//! `PROPTEST_CASES=20000 cargo test --release --test parser_properties`.
//!
//! cargo-fuzz is not used: it needs a nightly toolchain, which these machines do not have.
//!
//! Submodules, one per kind of input: `sysfs_values`, `driver_and_kernel_log`, `nccl_logs`,
//! `configs_and_reports`, and `big_inputs` (the worst cases).

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use gpudoctor::facts::{
    cdi, iommu, k8s, kubelet, modules, numa, nvidia, pci, pcicfg, rdma, sriov, toolkit, topology,
    xid,
};

use gpudoctor::answers::{nccl, nvml};
use gpudoctor::profile;
use gpudoctor::report::Layer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

#[path = "parser_properties/big_inputs.rs"]
mod big_inputs;
#[path = "parser_properties/configs_and_reports.rs"]
mod configs_and_reports;
#[path = "parser_properties/driver_and_kernel_log.rs"]
mod driver_and_kernel_log;
#[path = "parser_properties/nccl_logs.rs"]
mod nccl_logs;
#[path = "parser_properties/sysfs_values.rs"]
mod sysfs_values;

/// Cases per property when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 256;
/// Longest one parse may take (debug build, shared CI machine).
const PER_CASE: Duration = Duration::from_secs(2);
/// Longest one property may run before it counts as a hang.
const PER_PROPERTY: Duration = Duration::from_secs(120);

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Run `check` on `cases()` inputs from `strategy` on a watchdog thread with the binary's main
/// stack size (the engine parses on the main thread): a panic or a slow case fails and shrinks;
/// a case that never returns fails after [`PER_PROPERTY`].
fn property<S, M>(name: &'static str, make: M, check: fn(&S::Value))
where
    S: Strategy + 'static,
    S::Value: Debug + 'static,
    M: FnOnce() -> S + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name(name.to_string())
        .stack_size(8 << 20)
        .spawn(move || {
            let mut runner = TestRunner::new(Config {
                cases: cases(),
                failure_persistence: None,
                ..Config::default()
            });
            let result = runner.run(&make(), |input| {
                let started = Instant::now();
                check(&input);
                let took = started.elapsed();
                if took > PER_CASE {
                    return Err(TestCaseError::fail(format!("took {took:?}")));
                }
                Ok(())
            });
            let _ = tx.send(result.map_err(|e| e.to_string()));
        })
        .unwrap();
    match rx.recv_timeout(PER_PROPERTY) {
        Ok(Ok(())) => {}
        Ok(Err(failure)) => panic!("{name}: {failure}"),
        Err(_) => panic!("{name}: no answer within {PER_PROPERTY:?}: a parser loops on some input"),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

fn healthy(rel: &str) -> String {
    let path = repo().join("fixtures/hgx-h100-healthy").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.gpudoctor/<name>` of the fixtures (kernel logs, NVML and kubelet answers).
fn capture_files(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("fixtures")).unwrap() {
        let path = entry.unwrap().path().join(".gpudoctor").join(name);
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.push(text);
        }
    }
    out.sort();
    out.dedup();
    assert!(!out.is_empty(), "no fixture has .gpudoctor/{name}");
    out
}

/// Arbitrary text: unicode, bytes read as lossy UTF-8, and a little of each mixed with newlines.
fn any_text() -> BoxedStrategy<String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(any::<u8>(), 0..600)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        prop::collection::vec(
            prop_oneof![Just("\n".to_string()), "[ -~]{0,12}", any::<String>()],
            0..40
        )
        .prop_map(|parts| parts.concat()),
    ]
    .boxed()
}

/// Concatenations of a format's tokens, the edge numbers every format shares, and a little noise.
fn soup(tokens: &'static [&'static str]) -> BoxedStrategy<String> {
    const COMMON: &[&str] = &[
        "0",
        "1",
        "-1",
        "7",
        "16",
        "255",
        "65535",
        "65536",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "1e309",
        "NaN",
        "inf",
        "0x",
        "0X",
        "-",
        ",",
        ".",
        ":",
        ";",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\u{0}",
        "\u{feff}",
        "é",
        "\u{fffd}",
        "#",
        "\"",
        "'",
        "=",
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        "ffffffff",
        "::",
    ];
    let token = prop_oneof![
        4 => prop::sample::select(tokens),
        2 => prop::sample::select(COMMON),
    ];
    prop::collection::vec(token, 0..48)
        .prop_map(|parts| parts.concat())
        .boxed()
}

/// One random edit of a real-format sample.
#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    Duplicate { at: usize, len: usize },
    Structural { at: usize, with: char },
    SwapLines { a: usize, b: usize },
    Truncate { at: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>();
    prop_oneof![
        (at, 1..64usize).prop_map(|(at, len)| Edit::Delete { at, len }),
        (at, any_text()).prop_map(|(at, text)| Edit::Insert { at, text }),
        (at, 1..256usize).prop_map(|(at, len)| Edit::Duplicate { at, len }),
        (
            at,
            prop::sample::select(
                &[
                    '\n', ' ', ':', ',', '-', '.', '"', '\'', '{', '}', '[', ']', '=', '#', '(',
                    ')', '\0', 'x', '9', '\u{fffd}', '&', '*', '!', '|', '>', '\\',
                ][..]
            )
        )
            .prop_map(|(at, with)| Edit::Structural { at, with }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines { a, b }),
        at.prop_map(|at| Edit::Truncate { at }),
    ]
}

/// The char boundary at or below `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut i = at % (text.len() + 1);
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(mut text: String, edits: &[Edit]) -> String {
    for e in edits {
        match e {
            Edit::Delete { at, len } => {
                let a = boundary(&text, *at);
                let b = boundary(&text, a + len);
                if b >= a {
                    text.replace_range(a..b, "");
                }
            }
            Edit::Insert { at, text: t } => {
                let a = boundary(&text, *at);
                text.insert_str(a, t);
            }
            Edit::Duplicate { at, len } => {
                let a = boundary(&text, *at);
                let b = boundary(&text, a.saturating_add(*len).min(text.len()));
                if b > a {
                    let piece = text[a..b].to_string();
                    text.insert_str(b, &piece);
                }
            }
            Edit::Structural { at, with } => {
                let a = boundary(&text, *at);
                let b = text[a..].chars().next().map_or(a, |c| a + c.len_utf8());
                text.replace_range(a..b, &with.to_string());
            }
            Edit::SwapLines { a, b } => {
                let mut lines: Vec<&str> = text.split('\n').collect();
                let n = lines.len();
                lines.swap(a % n, b % n);
                text = lines.join("\n");
            }
            Edit::Truncate { at } => {
                let a = boundary(&text, *at);
                text.truncate(a);
            }
        }
    }
    text
}

/// Real-format samples with up to eight random edits.
fn mutated(samples: Vec<String>) -> BoxedStrategy<String> {
    (
        prop::sample::select(samples),
        prop::collection::vec(edit(), 0..8),
    )
        .prop_map(|(sample, edits)| apply(sample, &edits))
        .boxed()
}

/// Everything a text parser is fed: arbitrary text, its token soup, its real samples mutated.
fn inputs(tokens: &'static [&'static str], samples: Vec<String>) -> BoxedStrategy<String> {
    prop_oneof![1 => any_text(), 2 => soup(tokens), 3 => mutated(samples)].boxed()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
