//! Terminal escape sequences from the node never reach a terminal (issue 13, docs/security.md
//! "Terminal output"). A copy of the healthy fixture gets a payload — CSI colour (`ESC[31m`),
//! an OSC window-title sequence ended by BEL, a carriage return, the C1 CSI character U+009B and
//! the right-to-left override U+202E — in every field that reaches the human formats: the host
//! name, a kernel-log (XID) line, NVML's GPU name and driver version, an InfiniBand device name,
//! an NCCL log line and a profile name. Every human format (table, Markdown, NPD line, topology
//! table, `render` of a saved report) must show each payload escaped and none of it raw; the
//! JSON and Prometheus formats keep their own, lossless escaping.
//!
//! Saved reports are hostile input too (issue 30): a real one gets a payload of every forbidden
//! kind of character in every kind of string it holds, in turn, and `render`, `diff` and `fleet`
//! must print none of them raw, in any format, on stdout or stderr.

mod common;

use std::fs;
use std::path::Path;
use std::process::Output;

use common::node::Node;

/// The payload after a tag naming where it was planted; the zero-width space and the BOM at its
/// end are invisible (issue 41): `gpu01` and `gpu01\u{200b}` look alike.
fn payload(tag: &str) -> String {
    format!("{tag}\x1b[31m\x1b]0;pwned\x07\r\u{9b}2J\u{202e}\u{200b}\u{feff}")
}

/// The payload as a human format must show it.
fn shown(tag: &str) -> String {
    format!("{tag}\\x1b[31m\\x1b]0;pwned\\x07\\r\\u{{9b}}2J\\u{{202e}}\\u{{200b}}\\u{{feff}}")
}

/// What survives the NCCL parser: it reads a line with controls in it (issue 13), dropping
/// escape sequences and C0 controls but CR, tab and newline; CR, C1 and bidi characters reach the
/// report, where the human formats must escape them.
fn nccl_payload(tag: &str) -> String {
    format!("{tag}\r\u{9b}2J\u{202e}")
}

const RAW: [char; 7] = [
    '\x1b', '\x07', '\r', '\u{9b}', '\u{202e}', '\u{200b}', '\u{feff}',
];

fn assert_clean(what: &str, out: &Output) {
    let text = String::from_utf8_lossy(&out.stdout);
    for c in RAW {
        assert!(
            !text.contains(c),
            "{what}: a raw {c:?} reaches stdout:\n{}",
            text.escape_debug()
        );
    }
    assert!(!text.is_empty(), "{what}: no output");
}

fn assert_shows(what: &str, out: &Output, tags: &[&str]) {
    let text = String::from_utf8_lossy(&out.stdout);
    for tag in tags {
        assert!(
            text.contains(&shown(tag)),
            "{what}: the payload planted as {tag} is not shown escaped:\n{text}"
        );
    }
}

/// The healthy fixture with a payload everywhere node text reaches a report.
fn hostile() -> (Node, std::path::PathBuf, std::path::PathBuf) {
    let node = Node::healthy();
    node.write(
        "proc/sys/kernel/hostname",
        &format!("{}\n", payload("HOST")),
    );
    // An XID 13 (an application's graphics exception: a warning) whose message carries it.
    let mut kmsg = fs::read_to_string(node.path(".gpudoctor/kmsg.txt")).unwrap_or_default();
    kmsg.push_str(&format!(
        "4,9000,51384121704,-;NVRM: Xid (PCI:0000:18:00): 13, pid=1234, name={}, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)\n",
        payload("XID")
    ));
    node.write(".gpudoctor/kmsg.txt", &kmsg);
    // NVML: one GPU's name, and the driver version the library reports.
    node.edit_nvml(|doc| {
        doc["devices"][3]["name"] = payload("GPUNAME").into();
        doc["driver_version"] = payload("DRIVER").into();
    });
    // An InfiniBand device renamed in sysfs: the class link and the directory it points at.
    let dir = node.ib_dir("mlx5_0");
    let renamed = dir.replace(
        "/infiniband/mlx5_0",
        &format!("/infiniband/{}", payload("IB")),
    );
    fs::rename(node.path(&dir), node.path(&renamed)).unwrap();
    let target = fs::read_link(node.path("sys/class/infiniband/mlx5_0")).unwrap();
    node.remove("sys/class/infiniband/mlx5_0");
    node.link(
        &format!("sys/class/infiniband/{}", payload("IB")),
        target.to_string_lossy().replace(
            "/infiniband/mlx5_0",
            &format!("/infiniband/{}", payload("IB")),
        ),
    );
    // An NCCL log whose failure line carries it (judged with --nccl-log).
    let log = node.root.parent().unwrap().join("nccl.log");
    let failing = common::repo()
        .join("fixtures/h100-nccl-ib-system-error/.gpudoctor/nccl/all_reduce_perf.log");
    let text = fs::read_to_string(failing)
        .unwrap()
        .replace(
            "Test NCCL failure common.cu:1057",
            &format!("Test NCCL failure {} common.cu:1057", payload("NCCLFULL")),
        )
        .replace(
            "with status=transport retry counter exceeded(12)",
            &format!(
                "with status=transport retry counter exceeded(12) {}",
                nccl_payload("NCCL")
            ),
        );
    fs::write(&log, text).unwrap();
    // A profile file whose name carries it.
    let profile = node.root.parent().unwrap().join("profile.toml");
    fs::write(
        &profile,
        format!(
            "base = \"hgx-h100\"\nname = \"{}\"\n",
            payload("PROFILE")
                .chars()
                .map(|c| if c.is_ascii_graphic() {
                    c.to_string()
                } else {
                    format!("\\u{:04X}", c as u32)
                })
                .collect::<String>()
        ),
    )
    .unwrap();
    (node, log, profile)
}

fn check(root: &Path, log: &Path, profile: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "check",
        "--root",
        root.to_str().unwrap(),
        "--keep-going",
        "--nccl-log",
        log.to_str().unwrap(),
        "--profile",
        profile.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    common::gpudoctor(&args)
}

#[test]
fn no_escape_sequence_from_the_node_reaches_the_human_formats() {
    let (node, log, profile) = hostile();
    let root = node.root.as_path();

    let table = check(root, &log, &profile, &["--format", "table"]);
    assert_clean("table", &table);
    // The GPU name reaches only pass summaries (JSON) today; it is planted all the same.
    assert_shows("table", &table, &["HOST", "XID", "DRIVER", "PROFILE"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("NCCL\\r\\u{9b}2J\\u{202e}"),
        "table: the NCCL line is not shown escaped"
    );

    let markdown = check(root, &log, &profile, &["--format", "markdown"]);
    assert_clean("markdown", &markdown);
    for tag in ["HOST", "XID", "DRIVER", "PROFILE"] {
        // Markdown escapes its own metacharacters (`[`, `_`) outside code spans: look for the
        // control characters' escapes after the tag, not the whole payload verbatim.
        let text = String::from_utf8_lossy(&markdown.stdout);
        assert!(
            text.contains(&format!("{tag}\\x1b")),
            "markdown: {tag} not shown escaped:\n{text}"
        );
    }

    let npd = check(root, &log, &profile, &["--npd"]);
    assert_clean("npd", &npd);

    // The saved JSON keeps the payload, escaped the JSON way; `render` of it is clean again.
    let json = check(root, &log, &profile, &["--format", "json"]);
    let saved = node.root.parent().unwrap().join("report.json");
    fs::write(&saved, &json.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        report["node"]["hostname"],
        payload("HOST"),
        "json is lossless"
    );
    // serde_json escapes only C0; C1 and bidi characters are escaped too (issue 30), so `cat`
    // of a saved report cannot drive a terminal.
    let text = String::from_utf8_lossy(&json.stdout);
    assert!(
        !text.contains('\u{9b}') && !text.contains('\u{202e}'),
        "json: a raw C1 or bidi character"
    );
    assert!(text.contains("HOST\\u001b[31m"), "{text}");
    assert!(text.contains("\\r\\u009b2J\\u202e"), "{text}");
    for format in ["table", "markdown"] {
        let out = common::gpudoctor(&["render", saved.to_str().unwrap(), "--format", format]);
        assert_clean(&format!("render --format {format}"), &out);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("HOST\\x1b"),
            "render {format}"
        );
    }

    let topo = common::gpudoctor(&["topo", "--root", root.to_str().unwrap()]);
    assert_clean("topo", &topo);
    assert_shows("topo", &topo, &["IB"]);
}

#[test]
fn prometheus_label_values_show_the_payload_escaped_and_parse() {
    // The exposition format escapes only `\`, `"` and newline in label values and passes any
    // other character through, raw to whoever `curl`s the metrics (and OpenMetrics grammars
    // refuse it). Node text in a label value is shown escaped, then escaped the format's way.
    let (node, log, profile) = hostile();
    let out = check(&node.root, &log, &profile, &["--format", "prometheus"]);
    assert_clean("prometheus", &out);
    let text = String::from_utf8(out.stdout).unwrap();
    let parsed = openmetrics_parser::prometheus::parse_prometheus(&text)
        .unwrap_or_else(|e| panic!("does not parse: {e:?}\n{text}"));
    assert!(parsed.families.contains_key("gpudoctor_info"));
    assert!(
        text.contains(&shown("HOST").replace('\\', "\\\\")),
        "{text}"
    );
}

/// A character no output may carry raw (issue 30): C0 controls but the newline and tab of the
/// output's own layout, DEL, C1, the bidi embeddings, overrides, isolates and implicit marks,
/// and the line and paragraph separators; and (issue 41) the invisible ones: zero-width space,
/// joiners, word joiner, BOM, soft hyphen, tag characters.
fn forbidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{ad}' | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}' | '\u{e0001}')
}

/// Every kind of character [`forbidden`] names, in one value: CSI colour, an OSC title ended by
/// BEL, CR, LF, NUL, DEL, C1 (NEL, CSI), bidi override and isolate, ALM, LRM, RLM, LS, PS,
/// zero-width space and joiner, word joiner, BOM, soft hyphen, a tag character.
const HOSTILE: &str = "\x1b[31m\x1b]0;pwned\x07\r\n\u{0}\u{7f}\u{85}\u{9b}2J\u{202e}\u{2066}\u{61c}\u{200e}\u{200f}\u{2028}\u{2029}\u{200b}\u{200d}\u{2060}\u{feff}\u{ad}\u{e0001}";

/// Where `out` carries a [`forbidden`] character raw: `what stream: 'c' in …excerpt…`.
fn leaks(what: &str, out: &Output, found: &mut Vec<String>) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        if let Some((at, c)) = text.char_indices().find(|(_, c)| forbidden(*c)) {
            let before = text[..at].chars().count();
            let excerpt: String = text
                .chars()
                .skip(before.saturating_sub(60))
                .take(90)
                .collect();
            found.push(format!(
                "{what} {stream}: {c:?} in …{}…",
                excerpt.escape_debug()
            ));
        }
    }
}

/// Objects whose keys are data, not field names: figure labels and the facts' sections,
/// subjects, attributes and unavailable sources.
fn keys_are_data(at: &str) -> bool {
    at.ends_with("/labels") || at.starts_with("/facts/sections") || at == "/facts/unavailable"
}

/// The kinds of string in a report: each string value's path with array indices and data keys
/// as `*` (`/layers/*/checks/*/status`), and `{key}` for the keys of data objects.
fn string_kinds(v: &serde_json::Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::String(_) => {
            out.insert(at.to_string());
        }
        serde_json::Value::Array(items) => {
            for item in items {
                string_kinds(item, &format!("{at}/*"), out);
            }
        }
        serde_json::Value::Object(map) => {
            let data = keys_are_data(at);
            if data && !map.is_empty() {
                out.insert(format!("{at}/{{key}}"));
            }
            for (k, item) in map {
                let step = if data { "*" } else { k.as_str() };
                string_kinds(item, &format!("{at}/{step}"), out);
            }
        }
        _ => {}
    }
}

/// `value` with [`HOSTILE`] appended to every string of kind `kind` (every layer's status, every
/// label name, ...).
fn plant(v: &mut serde_json::Value, at: &str, kind: &str) {
    match v {
        serde_json::Value::String(s) if at == kind => s.push_str(HOSTILE),
        serde_json::Value::Array(items) => {
            for item in items {
                plant(item, &format!("{at}/*"), kind);
            }
        }
        serde_json::Value::Object(map) => {
            let data = keys_are_data(at);
            if data && kind == format!("{at}/{{key}}") {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, item)| (format!("{k}{HOSTILE}"), item))
                    .collect();
            }
            for (k, item) in map.iter_mut() {
                let step = if data { "*" } else { k.as_str() };
                plant(item, &format!("{at}/{step}"), kind);
            }
        }
        _ => {}
    }
}

#[test]
fn hostile_saved_reports_reach_no_output_raw() {
    // A real report with findings, figures (labels) and facts, as `--save-report` writes it.
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/h100-ib-port-hdr",
        "--keep-going",
        "--with-facts",
        "--format",
        "json",
    ]);
    let mut base: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    base["node"]["hostname"] = "node-base".into();
    let mut kinds = std::collections::BTreeSet::new();
    string_kinds(&base, "", &mut kinds);
    for needed in [
        "/node/hostname",
        "/layers/*/status",
        "/layers/*/checks/*/code",
        "/layers/*/checks/*/status",
        "/layers/*/checks/*/evidence/*/observed",
        "/layers/*/checks/*/figures/*/labels/{key}",
        "/first_failure/summary",
        "/facts/sections/*/*/*",
        "/facts/sections/{key}",
    ] {
        assert!(kinds.contains(needed), "{needed} not among {kinds:#?}");
    }
    let scratch = common::tempdir().unwrap();
    let fleet = scratch.path().join("fleet");
    fs::create_dir(&fleet).unwrap();
    let base_file = scratch.path().join("base.json");
    fs::write(&base_file, serde_json::to_vec_pretty(&base).unwrap()).unwrap();
    let base_file = base_file.to_str().unwrap();
    let mut found = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        // One node per kind, so that the fleet summarises every one of them.
        let mut report = base.clone();
        report["node"]["hostname"] = format!("node-{i:02}").into();
        plant(&mut report, "", kind);
        let file = fleet.join(format!("node-{i:02}.json"));
        fs::write(&file, serde_json::to_vec_pretty(&report).unwrap()).unwrap();
        let file = file.to_str().unwrap();
        for format in ["table", "markdown", "prometheus", "json"] {
            let out = common::gpudoctor(&["render", file, "--format", format]);
            leaks(
                &format!("render --format {format} of {kind}"),
                &out,
                &mut found,
            );
        }
        for format in ["table", "markdown", "json"] {
            let out = common::gpudoctor(&["diff", base_file, file, "--all", "--format", format]);
            leaks(
                &format!("diff --format {format} of {kind}"),
                &out,
                &mut found,
            );
        }
    }
    // A file name is data too (a collected directory holds what the nodes named their files),
    // and one that is not a report is named in a warning.
    let name = HOSTILE.replace('\0', "");
    fs::write(fleet.join(format!("x{name}.json")), "[]").unwrap();
    let dir = fleet.to_str().unwrap();
    for format in ["table", "markdown", "json"] {
        let out = common::gpudoctor(&["fleet", dir, "--format", format, "--all"]);
        leaks(&format!("fleet --format {format}"), &out, &mut found);
        assert_eq!(out.status.code(), Some(1), "fleet --format {format}");
    }
    assert!(
        found.is_empty(),
        "{} output(s) carry a raw control, C1, bidi or line-separator character:\n{}",
        found.len(),
        found.join("\n")
    );

    // JSON stays lossless: the planted host name reads back as written.
    let hostname = kinds.iter().position(|k| k == "/node/hostname").unwrap();
    let planted = format!("node-{hostname:02}{HOSTILE}");
    let out = common::gpudoctor(&["fleet", dir, "--format", "json"]);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        summary["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["node"] == planted.as_str()),
        "{summary}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "\\u009b2J\\u202e\\u2066\\u061c\\u200e\\u200f\\u2028\\u2029\\u200b\\u200d\\u2060\\ufeff\\u00ad\\udb40\\udc01"
        ),
        "{text}"
    );
    let file = fleet.join(format!("node-{hostname:02}.json"));
    let out = common::gpudoctor(&["render", file.to_str().unwrap(), "--format", "json"]);
    let rendered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rendered["node"]["hostname"], planted.as_str());
    // The human formats show it escaped (`--all`: every node's row).
    let out = common::gpudoctor(&["fleet", dir, "--all"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "node-{hostname:02}\\x1b[31m\\x1b]0;pwned\\x07\\r\\n\\x00\\x7f\\u{{85}}\\u{{9b}}2J\\u{{202e}}\\u{{2066}}\\u{{61c}}\\u{{200e}}\\u{{200f}}\\u{{2028}}\\u{{2029}}\\u{{200b}}\\u{{200d}}\\u{{2060}}\\u{{feff}}\\u{{ad}}\\u{{e0001}}"
        )),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
