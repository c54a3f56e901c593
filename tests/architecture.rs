//! The house's one direction, held: every module imports only from its own floor or below, and
//! no two modules import each other (nor go round in a longer circle).
//!
//! The floors are read from the diagram in `docs/architecture.md` (its `floor N:` lines), so the
//! document and this test cannot drift: a module missing from the diagram fails, and so does a
//! diagram naming a module that is not in `src/`. Each `crate::…` path (and `gpudoctor::…` in
//! `src/main.rs`, `super::…` anywhere) in code — not in comments or strings — is mapped to the
//! longest module it names; a `use` tree's braces are expanded. Between two top-level modules
//! the floors decide; between two sibling modules (children of one parent) any circle fails.
//! Standard library only: this must run where the crate's own code does not build.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One import: where it was written and the module it names.
#[derive(Debug, Clone)]
struct Import {
    file: String,
    line: usize,
    from: Vec<String>,
    to: Vec<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The module a file under `src/` defines: `facts/xid/mod.rs` → `facts::xid`; `lib.rs` → the
/// crate root (empty); `main.rs` → `main` (the binary, a module of its own for this test).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    parts
}

/// Rust source with comments, string and char literals blanked (newlines kept, so line numbers
/// hold), leaving only code where a path can stand.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &str| {
        out.extend(s.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
    };
    let ident_before = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(src.len(), |n| i + n);
            blank(&mut out, &src[i..end]);
            i = end;
        } else if rest.starts_with("/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if src[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &src[i..j]);
            i = j;
        } else if let Some(len) = raw_string_len(rest).filter(|_| !ident_before(i)) {
            blank(&mut out, &src[i..i + len]);
            i += len;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &src[i..end]);
            i = end;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{1f}', '"'), or else a lifetime ('a), kept as code.
            let len = char_literal_len(rest);
            blank(&mut out, &src[i..i + len]);
            i += len;
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Length of a raw (byte) string literal at the start of `s`: `r"…"`, `r#"…"#`, `br"…"`.
fn raw_string_len(s: &str) -> Option<usize> {
    let after_b = s.strip_prefix('b').unwrap_or(s);
    let after_r = after_b.strip_prefix('r')?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    let body = after_r[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let start = s.len() - body.len();
    Some(
        body.find(&close)
            .map_or(s.len(), |n| start + n + close.len()),
    )
}

/// Length of a char literal at the start of `s` (which starts with `'`), or 1 for a lifetime's
/// quote.
fn char_literal_len(s: &str) -> usize {
    let mut chars = s.char_indices().skip(1);
    match chars.next() {
        Some((_, '\\')) => s[2..].find('\'').map_or(1, |n| n + 3),
        Some((_, c)) => match chars.next() {
            Some((j, '\'')) if c != '\'' => j + 1,
            _ => 1,
        },
        None => 1,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Other,
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            c if c.is_alphabetic() || c == '_' => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push((Tok::Ident(code[i..end].to_string()), line));
            }
            ':' if chars.peek().is_some_and(|&(_, d)| d == ':') => {
                chars.next();
                out.push((Tok::PathSep, line));
            }
            '{' => out.push((Tok::Open, line)),
            '}' => out.push((Tok::Close, line)),
            ',' => out.push((Tok::Comma, line)),
            '*' => out.push((Tok::Star, line)),
            _ => out.push((Tok::Other, line)),
        }
    }
    out
}

/// The paths of one use tree (or plain path) starting at `toks[*at]`, each prefixed by
/// `prefix`: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn use_tree(
    toks: &[(Tok, usize)],
    at: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let mut path = prefix;
    loop {
        match toks.get(*at).map(|t| &t.0) {
            Some(Tok::Ident(name)) => {
                path.push(name.clone());
                *at += 1;
                if toks.get(*at).map(|t| &t.0) == Some(&Tok::PathSep) {
                    *at += 1;
                    continue;
                }
                out.push(path);
                return;
            }
            Some(Tok::Open) => {
                *at += 1;
                loop {
                    match toks.get(*at).map(|t| &t.0) {
                        Some(Tok::Close) => {
                            *at += 1;
                            return;
                        }
                        Some(Tok::Comma) => *at += 1,
                        None => return,
                        _ => {
                            let before = *at;
                            use_tree(toks, at, path.clone(), out);
                            // `as name` after a leaf: skip it.
                            if toks.get(*at).map(|t| &t.0) == Some(&Tok::Ident("as".into())) {
                                *at += 2;
                            }
                            if *at == before {
                                *at += 1;
                            }
                        }
                    }
                }
            }
            _ => {
                // `*`, or the path ended before a leaf: the path so far is what it names.
                out.push(path);
                return;
            }
        }
    }
}

/// Every crate-internal path named in `file` (module `me`), with its line.
fn imports_of(me: &[String], code: &str, crate_names: &[&str]) -> Vec<(Vec<String>, usize)> {
    let toks = tokens(code);
    let mut found = Vec::new();
    // Inline `mod name { … }` blocks: `super` inside one means the file's own module.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth));
                }
            }
            _ => {}
        }
        let here: Vec<String> = me
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        let preceded_by_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
        let start = match &toks[i].0 {
            Tok::Ident(w) if !preceded_by_sep && crate_names.contains(&w.as_str()) => Some(vec![]),
            Tok::Ident(w) if !preceded_by_sep && w == "super" => {
                // `super::super::x` climbs one module per `super`; a file's own module is `me`.
                let mut base = here.clone();
                let mut j = i;
                while matches!(&toks.get(j), Some((Tok::Ident(w), _)) if w == "super")
                    && toks.get(j + 1).map(|t| &t.0) == Some(&Tok::PathSep)
                {
                    base.pop();
                    j += 2;
                }
                if j > i {
                    i = j - 2;
                    Some(base)
                } else {
                    None
                }
            }
            _ => None,
        };
        match start {
            Some(prefix) if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep) => {
                let line = toks[i].1;
                let mut at = i + 2;
                let mut paths = Vec::new();
                use_tree(&toks, &mut at, prefix, &mut paths);
                found.extend(paths.into_iter().map(|p| (p, line)));
                i = at.max(i + 1);
            }
            _ => i += 1,
        }
    }
    found
}

/// The longest known module that `path` names (items map to the module holding them).
fn module_named(path: &[String], modules: &BTreeSet<Vec<String>>) -> Vec<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// Every import between two different modules of `src/`.
fn crate_imports() -> Vec<Import> {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|f| module_of(f.strip_prefix(&src).expect("under src")))
        .collect();
    let mut imports = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(&src).expect("under src");
        let me = module_of(rel);
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // The binary names the library by its crate name.
        let names: &[&str] = if me == ["main"] {
            &["crate", "gpudoctor"]
        } else {
            &["crate"]
        };
        let file = format!("src/{}", rel.display());
        for (named, line) in imports_of(&me, &code_only(&text), names) {
            let to = module_named(&named, &modules);
            if !to.is_empty() && to != me {
                imports.push(Import {
                    file: file.clone(),
                    line,
                    from: me.clone(),
                    to,
                });
            }
        }
    }
    imports
}

/// The diagram's floors: `floor N: a b c` lines in docs/architecture.md → module → N.
fn floors() -> BTreeMap<String, u32> {
    let doc =
        fs::read_to_string(repo().join("docs/architecture.md")).expect("docs/architecture.md");
    let mut floors = BTreeMap::new();
    for line in doc.lines() {
        let Some(rest) = line.trim().strip_prefix("floor ") else {
            continue;
        };
        let Some((n, names)) = rest.split_once(':') else {
            continue;
        };
        let n: u32 = n
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("floor number in {line:?}"));
        for name in names.split_whitespace().map(|w| w.trim_end_matches('/')) {
            assert!(
                floors.insert(name.to_string(), n).is_none(),
                "{name} is on two floors"
            );
        }
    }
    assert!(
        !floors.is_empty(),
        "docs/architecture.md has no `floor N:` lines"
    );
    floors
}

/// Where two sibling modules differ: the edge an import makes between the children of their
/// common parent, or None for a parent and its own descendant.
fn sibling_edge(from: &[String], to: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    (common < from.len() && common < to.len())
        .then(|| (from[..=common].to_vec(), to[..=common].to_vec()))
}

/// Strongly connected groups of more than one module in `edges` (Tarjan, iteratively small).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    let nodes: BTreeSet<&Vec<String>> = edges.keys().chain(edges.values().flatten()).collect();
    let reach = |start: &Vec<String>| -> BTreeSet<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut groups: Vec<Vec<Vec<String>>> = Vec::new();
    for n in &nodes {
        if groups.iter().any(|g| g.contains(n)) {
            continue;
        }
        let group: Vec<Vec<String>> = nodes
            .iter()
            .filter(|m| reachable[*n].contains(**m) && reachable[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        if group.len() > 1 {
            groups.push(group);
        }
    }
    groups
}

fn show(module: &[String]) -> String {
    if module.is_empty() {
        "crate".into()
    } else {
        module.join("::")
    }
}

#[test]
fn every_top_level_module_is_on_exactly_one_floor_of_the_diagram() {
    let floors = floors();
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_of(f.strip_prefix(&src).unwrap()).first().cloned())
        .collect();
    let missing: Vec<_> = tops.iter().filter(|t| !floors.contains_key(*t)).collect();
    let extra: Vec<_> = floors.keys().filter(|f| !tops.contains(*f)).collect();
    assert!(
        missing.is_empty(),
        "modules on no floor of docs/architecture.md: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "docs/architecture.md names modules src/ lacks: {extra:?}"
    );
}

#[test]
fn no_module_imports_from_a_higher_floor() {
    let floors = floors();
    let mut wrong = Vec::new();
    for i in crate_imports() {
        let (Some(from), Some(to)) = (i.from.first(), i.to.first()) else {
            continue;
        };
        let (Some(f), Some(t)) = (floors.get(from), floors.get(to)) else {
            continue;
        };
        if t > f {
            wrong.push(format!(
                "{}:{}: {} (floor {f}) imports {} (floor {t})",
                i.file,
                i.line,
                show(&i.from),
                show(&i.to)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that go up a floor:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let imports = crate_imports();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut witness: BTreeMap<(Vec<String>, Vec<String>), String> = BTreeMap::new();
    for i in &imports {
        if let Some((a, b)) = sibling_edge(&i.from, &i.to) {
            edges.entry(a.clone()).or_default().insert(b.clone());
            witness
                .entry((a, b))
                .or_insert_with(|| format!("{}:{}", i.file, i.line));
        }
    }
    let mut report = Vec::new();
    for group in circles(&edges) {
        report.push(format!(
            "circle: {}",
            group.iter().map(|m| show(m)).collect::<Vec<_>>().join(", ")
        ));
        for a in &group {
            for b in &group {
                if let Some(at) = witness.get(&(a.clone(), b.clone())) {
                    report.push(format!("  {at}: {} imports {}", show(a), show(b)));
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "modules that import each other:\n{}",
        report.join("\n")
    );
}

/// A check never starts a probe (docs/architecture.md, floor 4): `checks/` reaches the source
/// only through its front door, the items of `source` itself (`Source`, `FsError`), never a
/// probe runner's module (`source::cuda`, `source::nccl`, `source::gpudirect`, ...).
#[test]
fn checks_use_only_the_front_door_of_source() {
    let wrong: Vec<String> = crate_imports()
        .into_iter()
        .filter(|i| i.from.first().is_some_and(|m| m == "checks"))
        .filter(|i| i.to.first().is_some_and(|m| m == "source") && i.to.len() > 1)
        .map(|i| {
            format!(
                "{}:{}: {} names {}",
                i.file,
                i.line,
                show(&i.from),
                show(&i.to)
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "checks reaching past source's front door:\n{}",
        wrong.join("\n")
    );
}

/// Rooms under 800 lines (docs/architecture.md "Rooms"): the code in `src/`, and the tests and
/// stand-ins in `tests/` (kept inputs under `tests/data/` are data, copied byte for byte).
#[test]
fn no_file_in_src_or_tests_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    rust_files(&repo().join("tests"), &mut files);
    let data = repo().join("tests").join("data");
    files.retain(|f| !f.starts_with(&data));
    assert!(
        files.iter().any(|f| f.ends_with("tests/architecture.rs")),
        "the walk must reach tests/"
    );
    let big: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = fs::read_to_string(f).ok()?.lines().count();
            (lines > 800).then(|| {
                format!(
                    "{}: {lines} lines",
                    f.strip_prefix(repo()).unwrap().display()
                )
            })
        })
        .collect();
    assert!(big.is_empty(), "files over 800 lines:\n{}", big.join("\n"));
}

/// The scanner itself: what it must see and what it must not.
#[test]
fn the_scanner_finds_paths_in_code_and_only_there() {
    let code = code_only(
        "use crate::{a::{b, c::D}, e as f};\n\
         // crate::comment::x\n\
         let s = \"crate::string::x\"; let c = '\"'; fn g<'a>() {}\n\
         let r = r#\"crate::raw::x\"#;\n\
         crate::inline::call(); super::up::y();\n\
         mod tests { use super::item; }\n",
    );
    let found: Vec<String> = imports_of(&["m".into(), "n".into()], &code, &["crate"])
        .into_iter()
        .map(|(p, line)| format!("{}@{line}", p.join("::")))
        .collect();
    assert_eq!(
        found,
        [
            "a::b@1",
            "a::c::D@1",
            "e@1",
            "inline::call@5",
            "m::up::y@5",
            "m::n::item@6"
        ]
    );
    let modules: BTreeSet<Vec<String>> = [vec!["a".to_string()], vec!["a".into(), "c".into()]]
        .into_iter()
        .collect();
    assert_eq!(
        module_named(&["a".into(), "c".into(), "D".into()], &modules),
        ["a", "c"]
    );
    assert_eq!(
        sibling_edge(&["a".into(), "b".into()], &["a".into(), "c".into()])
            .unwrap()
            .1,
        ["a", "c"]
    );
    assert_eq!(sibling_edge(&["a".into()], &["a".into(), "c".into()]), None);
    let edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [
        (vec!["x".to_string()], [vec!["y".to_string()]].into()),
        (vec!["y".to_string()], [vec!["z".to_string()]].into()),
        (vec!["z".to_string()], [vec!["x".to_string()]].into()),
    ]
    .into();
    assert_eq!(
        circles(&edges).len(),
        1,
        "a three-module circle is a circle"
    );
}
