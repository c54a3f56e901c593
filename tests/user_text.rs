//! Issue 19: the words around the evidence. Every string a user can read — what the registry and
//! the renderers emit over every fixture (default walk and `--keep-going`), `explain` for every
//! check, the checks catalogue, `--help` of every subcommand, `profiles`, docs/ and README — is
//! scanned for
//! - references to documents the user does not have (`reference/…`, `../shared/…`, "nccl.md §4":
//!   only public URLs or titles, or docs inside the repository, may be cited);
//! - in findings' hints and summaries: catalogue placeholders (NVIDIA's XID resolution tokens
//!   such as `WORKFLOW_XID_48`, `RESET_GPU`) and a phrase said twice ("X / X");
//! - a GPU reset by index (`nvidia-smi -r -i <index>`): indexes shift when a GPU leaves NVML, so a
//!   reset names the PCI bus id.
//!
//! The source's string literals are scanned too, so a path no fixture reaches is covered for
//! references.

mod common;

use std::path::Path;

use gpudoctor::engine::{self, RunOptions};
use gpudoctor::render::table::Style;
use gpudoctor::report::Report;
use gpudoctor::{checks, explain, render, source};

/// What may not appear in user-facing text: documents outside the repository.
fn outside_reference(text: &str) -> Option<String> {
    for needle in [
        "reference/",
        "../shared",
        "shared/reference",
        "real-captures/",
    ] {
        if let Some(at) = text.find(needle) {
            return Some(around(text, at));
        }
    }
    // "nccl.md §4", "§13": section numbers of a document the user does not have.
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (i, (at, c)) in chars.iter().enumerate() {
        if *c == '§' {
            let next = chars[i + 1..]
                .iter()
                .map(|(_, c)| *c)
                .find(|c| !c.is_whitespace());
            if next.is_some_and(|c| c.is_ascii_digit()) {
                return Some(around(text, *at));
            }
        }
    }
    None
}

/// NVIDIA's XID catalogue resolution vocabulary: data, never words for an operator.
const CATALOGUE_TOKENS: &[&str] = &[
    "WORKFLOW_",
    "CONTACT_SUPPORT",
    "RESET_GPU",
    "RESTART_APP",
    "RESTART_BM",
    "RESTART_VM",
    "RESTART_FM",
    "INVESTIGATE_SW",
    "INVESTIGATE_LINK",
    "CHECK_APP",
    "CHECK_MECHANICALS",
    "_FLOW",
];

fn placeholder(text: &str) -> Option<String> {
    CATALOGUE_TOKENS
        .iter()
        .find_map(|t| text.find(t).map(|at| around(text, at)))
}

/// A phrase said twice: "WORKFLOW_XID_48 / WORKFLOW_XID_48", "reboot the node; reboot the
/// node", "xid 13: check the workload that ran on the gpu; xid 43: check the workload that ran on
/// the gpu". A list that repeats a word per item ("gpu 0 … not started; gpu 1 … not started")
/// is fine: only clauses of three words or more, or the two sides of a " / ", are compared.
fn duplicated_phrase(text: &str) -> Option<String> {
    let trim = |p: &str| {
        p.trim()
            .trim_matches(|c: char| "()[].:`'\"".contains(c))
            .trim()
            .to_lowercase()
    };
    let mut seen: Vec<String> = Vec::new();
    for part in text.split([';', '—']).flat_map(|p| p.split(", ")) {
        let part = trim(part);
        if part.split_whitespace().count() < 3 {
            continue;
        }
        if seen.contains(&part) {
            return Some(part);
        }
        seen.push(part);
    }
    let sides: Vec<&str> = text.split(" / ").collect();
    for pair in sides.windows(2) {
        let before = pair[0].split_whitespace().last().map(trim);
        let after = pair[1].split_whitespace().next().map(trim);
        if before.is_some() && before == after {
            return before;
        }
    }
    None
}

fn reset_by_index(text: &str) -> Option<String> {
    ["-r -i <index>", "-r -i <n>", "--gpu-reset -i <index>"]
        .iter()
        .find_map(|t| text.find(t).map(|at| around(text, at)))
}

fn around(text: &str, at: usize) -> String {
    let mut start = at.saturating_sub(60);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 60).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    text[start..end].to_string()
}

fn replay(dir: &Path, keep_going: bool) -> Report {
    let source = source::open(dir, source::SourceOptions::default()).expect("a capture");
    engine::run(
        source.as_ref(),
        &RunOptions {
            keep_going,
            ..Default::default()
        },
    )
}

/// Every rendering of every fixture, default walk and `--keep-going`.
fn rendered_fixtures() -> Vec<(String, String, Report)> {
    common::parallel::map(&common::fixtures(), |dir| {
        let name = common::name_of(dir);
        let mut out = Vec::new();
        for keep_going in [false, true] {
            let report = replay(dir, keep_going);
            let text = [
                render::json::render(&report),
                render::table::render(&report, Style::PLAIN),
                render::markdown::render(&report),
                render::prometheus::render(&report),
                render::npd::message(&report),
            ]
            .join("\n");
            out.push((format!("{name} (keep_going {keep_going})"), text, report));
        }
        out
    })
    .concat()
}

#[test]
fn findings_cite_nothing_outside_the_repository_and_hints_hold_no_placeholder() {
    let mut problems = Vec::new();
    for (name, text, report) in rendered_fixtures() {
        if let Some(hit) = outside_reference(&text) {
            problems.push(format!("{name}: cites an outside document: …{hit}…"));
        }
        for (_, check) in report.findings() {
            let mut texts = vec![("summary", check.summary.as_str())];
            if let Some(hint) = &check.hint {
                texts.push(("hint", hint));
            }
            for (what, t) in texts {
                if let Some(hit) = placeholder(t) {
                    problems.push(format!(
                        "{name}: {} {what} holds a placeholder: …{hit}…",
                        check.code
                    ));
                }
                if let Some(hit) = duplicated_phrase(t) {
                    problems.push(format!("{name}: {} {what} says twice: {hit:?}", check.code));
                }
                if let Some(hit) = reset_by_index(t) {
                    problems.push(format!(
                        "{name}: {} {what} resets a gpu by index: …{hit}…",
                        check.code
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Paths the fixtures do not reach: every catalogued XID (and one the catalogue lacks), alone
/// and all together on one GPU and across GPUs, through the XID check: its hint and summary hold
/// no catalogue token, say nothing twice, and reset no GPU by index.
#[test]
fn every_catalogued_xid_gets_a_clean_hint() {
    let node = common::node::Node::healthy();
    // The healthy capture recorded no kernel log: each case is the whole log.
    let kmsg = "6,1402,14503871,-;NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n";
    let buses = ["0000:18:00", "0000:3a:00", "0000:ba:00"];
    let line = |seq: usize, xid: u32, bus: &str| {
        format!(
            "4,{},{},-;NVRM: Xid (PCI:{bus}): {xid}, pid=1, name=python3, Ch 00000010\n",
            90_000 + seq,
            51_384_000_000 + seq
        )
    };
    let mut cases: Vec<(String, String)> = Vec::new();
    let mut all = String::new();
    let xids: Vec<u32> = gpudoctor::facts::xid::CATALOGUED_XIDS
        .iter()
        .copied()
        .chain([999])
        .collect();
    for (i, xid) in xids.iter().enumerate() {
        cases.push((format!("xid {xid}"), line(i, *xid, buses[0])));
        all.push_str(&line(i, *xid, buses[i % buses.len()]));
        all.push_str(&line(i + 1000, *xid, buses[0]));
    }
    cases.push(("every xid".into(), all));
    let mut problems = Vec::new();
    for (name, extra) in cases {
        node.write(".gpudoctor/kmsg.txt", &format!("{kmsg}{extra}"));
        let report = node.run_layer(gpudoctor::report::Layer::Driver, None);
        let check = common::node::check(&report, "driver.xid_events");
        if name == "every xid" || name == "xid 48" || name == "xid 999" {
            assert!(check.status.is_finding(), "{name}: {check:?}");
            assert!(check.hint.is_some(), "{name}");
        }
        let mut texts = vec![("summary", check.summary.clone())];
        texts.extend(check.hint.clone().map(|h| ("hint", h)));
        for (what, t) in &texts {
            for (kind, hit) in [
                ("placeholder", placeholder(t)),
                ("repeated phrase", duplicated_phrase(t)),
                ("reset by index", reset_by_index(t)),
                ("outside reference", outside_reference(t)),
            ] {
                if let Some(hit) = hit {
                    problems.push(format!("{name}: {what}: {kind}: {hit}"));
                }
            }
        }
        for e in &check.evidence {
            if let Some(x) = &e.expected
                && (x.contains("last of")
                    || x.contains("after boot")
                    || x.contains("informational"))
            {
                problems.push(format!("{name}: `expected` is not an expectation: {x}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn explain_help_docs_and_readme_cite_nothing_outside_the_repository() {
    let mut texts: Vec<(String, String)> = Vec::new();
    for def in checks::registry() {
        texts.push((format!("explain {}", def.code), explain::explain(&def)));
    }
    texts.push(("list-checks markdown".into(), explain::list_markdown()));
    texts.push(("list-checks json".into(), explain::list_json()));
    // --help of the binary and of every subcommand it lists, and the profiles listing.
    let top = common::gpudoctor(&["--help"]);
    let top = String::from_utf8_lossy(&top.stdout).into_owned();
    let commands: Vec<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 8, "subcommands found: {commands:?}");
    texts.push(("--help".into(), top));
    for command in &commands {
        let out = common::gpudoctor(&[command.as_str(), "--help"]);
        assert!(out.status.success(), "{command} --help");
        texts.push((
            format!("{command} --help"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    let profiles = common::gpudoctor(&["profiles"]);
    texts.push((
        "profiles".into(),
        String::from_utf8_lossy(&profiles.stdout).into_owned(),
    ));
    // docs/ and README.
    let repo = common::repo();
    let mut docs: Vec<_> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md" || x == "json"))
        .collect();
    docs.push(repo.join("README.md"));
    docs.sort();
    for doc in docs {
        texts.push((
            doc.strip_prefix(&repo).unwrap().display().to_string(),
            std::fs::read_to_string(&doc).unwrap(),
        ));
    }
    let mut problems = Vec::new();
    for (name, text) in &texts {
        if let Some(hit) = outside_reference(text) {
            problems.push(format!("{name}: cites an outside document: …{hit}…"));
        }
        if let Some(hit) = reset_by_index(text) {
            problems.push(format!("{name}: resets a gpu by index: …{hit}…"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Paths no fixture reaches: every string literal in src/ outside comments and test modules.
#[test]
fn no_string_in_the_source_cites_an_outside_document() {
    let mut files = Vec::new();
    let mut stack = vec![common::repo().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 50, "{} source files", files.len());
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let trimmed = line.trim_start();
            // Comments cite the sources for maintainers; `///` in cli.rs is --help, scanned
            // through the binary above.
            if trimmed.starts_with("//") {
                continue;
            }
            let line = line.split(" // ").next().unwrap_or_default();
            let strings: String = line
                .split('"')
                .skip(1)
                .step_by(2)
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(hit) = outside_reference(&strings) {
                problems.push(format!("{}:{}: {hit}", file.display(), n + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scanners_catch_what_they_look_for() {
    assert!(outside_reference("see nccl.md §4 for why").is_some());
    assert!(outside_reference("formats in `../shared/reference/sysfs.md`").is_some());
    assert!(outside_reference("see docs/nccl.md").is_none());
    assert!(outside_reference("§ alone").is_none());
    assert!(
        placeholder("xid 48: reboot (nvidia catalogue: WORKFLOW_XID_48 / WORKFLOW_XID_48)")
            .is_some()
    );
    assert!(placeholder("unset NCCL_NET_GDR_LEVEL").is_none());
    assert!(duplicated_phrase("WORKFLOW_XID_48 / WORKFLOW_XID_48").is_some());
    assert!(duplicated_phrase("drain and reboot the node; drain and reboot the node").is_some());
    assert!(duplicated_phrase("drain the node; reset the gpu by bus id").is_none());
    assert!(
        duplicated_phrase(
            "xid 13: app error, check the workload; xid 43: app error, check the workload"
        )
        .is_some()
    );
    assert!(
        duplicated_phrase(
            "gpu 0 (0000:18:00.0) fabric not started; gpu 1 (0000:2a:00.0) fabric not started"
        )
        .is_none()
    );
    assert!(reset_by_index("reset it (`nvidia-smi -r -i <index>`)").is_some());
    assert!(reset_by_index("`nvidia-smi -r -i 0000:3a:00.0`").is_none());
}
