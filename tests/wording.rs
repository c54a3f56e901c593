//! Units and acronyms as people write them, in every format of every fixture: no `gpu`, `nvml`,
//! `xid`, `pcie`, `gb/s` in prose where a ticket reader expects `GPU`, `NVML`, `XID`, `PCIe`,
//! `Gb/s` or `GB/s`. Exempt, as they must keep their bytes: identifiers (a word joined to a
//! neighbour by `.`, `_`, `-`, `/`, `=` or `:`: `driver.gpu_count`, `gpu_is_lost`,
//! `/dev/nvidia-uvm`, `--use_cuda`), code spans (commands), and lines quoted from the node
//! (evidence marked `quoted`: a kernel log line says `reset gpu to activate`). The list and the
//! boundaries are written here apart from `text::wording`, so a format, a renderer's own words
//! or a text that bypasses the engine is caught, not confirmed by the code under test.

mod common;
common::tests_mostly_wait!();

use std::path::Path;

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::render;
use gpudoctor::report::{Layer, Report};
use gpudoctor::source;

/// Lower-case spellings no prose may use.
const LOWER: &[&str] = &[
    "gpu",
    "gpus",
    "xid",
    "xids",
    "ecc",
    "nvml",
    "cuda",
    "pcie",
    "pci",
    "nccl",
    "rdma",
    "hca",
    "hcas",
    "nic",
    "vf",
    "vfs",
    "sr-iov",
    "numa",
    "cpu",
    "mig",
    "nvlink",
    "nvswitch",
    "gb/s",
    "gib",
    "mib",
    "uuid",
    "dbe",
    "aer",
    "gpudirect",
    "sxid",
];

fn replay(dir: &Path, keep_going: bool) -> Report {
    let source = source::open(dir, source::SourceOptions::default()).expect("a complete capture");
    engine::run(
        source.as_ref(),
        &RunOptions {
            keep_going,
            ..Default::default()
        },
    )
}

fn joins(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '=' | ':' | '-' | '$' | '@')
}

/// The lower-cased words of `LOWER` standing as words of prose in `line`, outside code spans.
fn lowered(line: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut in_code = false;
    for (n, &(i, c)) in chars.iter().enumerate() {
        if c == '`' {
            in_code = !in_code;
            continue;
        }
        if in_code || n > 0 && joins(chars[n - 1].1) {
            continue;
        }
        for word in LOWER {
            let Some(rest) = line[i..].strip_prefix(word) else {
                continue;
            };
            let mut after = rest.chars();
            let ends = match after.next() {
                None => true,
                Some(c) if c.is_alphanumeric() || matches!(c, '_' | '/' | '=') => false,
                Some('.' | '-' | ':') => !after.next().is_some_and(|n| n.is_alphanumeric()),
                Some(_) => true,
            };
            if ends {
                found.push(*word);
            }
        }
    }
    found
}

#[test]
fn no_format_of_any_fixture_lowercases_a_unit_or_acronym() {
    let fixtures = common::fixtures();
    assert!(fixtures.len() > 20, "fixtures/ holds the captures");
    let found: Vec<String> = common::parallel::map(&fixtures, |dir| {
        let name = common::name_of(dir);
        let mut found = Vec::new();
        for keep_going in [false, true] {
            let report = replay(dir, keep_going);
            // Lines quoted from the node keep their bytes: taken out before the scan.
            let quoted: Vec<String> = report
                .layers
                .iter()
                .flat_map(|l| &l.checks)
                .flat_map(|c| &c.evidence)
                .filter(|e| e.quoted)
                .map(|e| e.observed.clone())
                .collect();
            let json: serde_json::Value =
                serde_json::from_str(&render::json::render(&report)).unwrap();
            let mut json_quoted = Vec::new();
            collect_quoted(&json, &mut json_quoted);
            let formats = [
                (
                    "table",
                    render::table::render(&report, render::table::Style::PLAIN),
                ),
                ("markdown", render::markdown::render(&report)),
                ("npd", render::npd::message(&report)),
                ("json", json_prose(&json)),
            ];
            for (format, mut text) in formats {
                for q in quoted.iter().chain(&json_quoted) {
                    text = text.replace(q.as_str(), "");
                }
                for line in text.lines() {
                    let line = prose_of(format, line);
                    for word in lowered(&line) {
                        found.push(format!("{name} {format}: `{word}` in: {line}"));
                    }
                }
            }
        }
        found
    })
    .concat();
    assert!(
        found.is_empty(),
        "{} lower-cased unit(s) or acronym(s), first:\n{}",
        found.len(),
        found
            .iter()
            .take(400)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// What of a line is prose: the table's `[ ok ] rdma` leads with a status and a layer id, its
/// evidence lines with the source read (a path, a probe's field); a JSON value without a space
/// is an identifier or a value (`rdma`, `reboot_node`).
fn prose_of(format: &str, line: &str) -> String {
    // A layer named as a layer (`blocked by nvlink`, `nvlink layer`, the NPD line's
    // `nvlink: nvlink.fabric_state`) is its id.
    let mut line = line.to_string();
    for layer in Layer::ALL {
        let id = layer.id();
        line = line
            .replace(&format!("blocked by {id}"), "blocked by")
            .replace(&format!("{id} layer"), "layer")
            .replace(&format!("{id}: {id}."), ": .");
    }
    identifiers_out(format, &line).to_string()
}

fn identifiers_out<'a>(format: &str, line: &'a str) -> &'a str {
    match format {
        // `evidence: SOURCE: observed`: the source is a path or a probe's field.
        "table" if line.trim_start().starts_with("evidence: ") => line
            .trim_start()
            .strip_prefix("evidence: ")
            .and_then(|r| r.split_once(": "))
            .map_or("", |(_, observed)| observed),
        "table" => {
            let t = line.trim_start();
            match t.strip_prefix('[').and_then(|r| r.split_once("] ")) {
                Some((_, rest)) => {
                    let rest = rest.trim_start();
                    rest.split_once(' ').map_or("", |(_, after)| after)
                }
                None => line,
            }
        }
        "json" if !line.contains(' ') => "",
        _ => line,
    }
}

/// Every string value of the JSON report but the evidence quoted from the node, one a line.
fn json_prose(v: &serde_json::Value) -> String {
    let mut out = Vec::new();
    walk(v, &mut out);
    out.join("\n")
}

fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
        serde_json::Value::Object(map) => {
            let quoted = map.get("quoted") == Some(&serde_json::Value::Bool(true));
            for (k, item) in map {
                if quoted && k == "observed" {
                    continue;
                }
                walk(item, out);
            }
        }
        _ => {}
    }
}

fn collect_quoted(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect_quoted(i, out)),
        serde_json::Value::Object(map) => {
            if map.get("quoted") == Some(&serde_json::Value::Bool(true))
                && let Some(serde_json::Value::String(s)) = map.get("observed")
            {
                out.push(s.clone());
            }
            map.values().for_each(|i| collect_quoted(i, out));
        }
        _ => {}
    }
}

#[test]
fn the_scan_finds_what_it_looks_for_and_spares_identifiers() {
    assert_eq!(
        lowered("gpu 2 has 1 ecc error; 200 gb/s"),
        ["gpu", "ecc", "gb/s"]
    );
    assert!(
        lowered("driver.gpu_count gpu_is_lost --use_cuda /dev/nvidia-uvm `nvidia-smi -q -d ecc`")
            .is_empty()
    );
    assert!(lowered("GPU 2 has 1 ECC error; 200 Gb/s; hgx-h100; gpu0").is_empty());
}
