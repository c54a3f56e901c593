//! The human formats fit the terminal (issue 19): with `COLUMNS=80` no line of the check table
//! or of `topo` is longer than 80 characters, for every fixture; into a pipe without
//! `COLUMNS` nothing wraps (text/wrap.rs says the rules).

mod common;

use gpudoctor::render::table::Style;

fn run(args: &[&str], columns: Option<&str>) -> String {
    let mut cmd = common::scratch::gpudoctor_command();
    cmd.args(args)
        .current_dir(common::repo())
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS");
    if let Some(c) = columns {
        cmd.env("COLUMNS", c);
    }
    let out = cmd.output().expect("gpudoctor runs");
    assert!(
        out.status.code().is_some_and(|c| c <= 3),
        "{args:?}: {out:?}"
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn too_long(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > width)
        .map(|l| format!("{} chars: {l}", l.chars().count()))
        .collect()
}

#[test]
fn every_fixture_fits_80_columns() {
    let over: Vec<String> = common::parallel::map(&common::fixtures(), |dir| {
        let root = dir.to_string_lossy().into_owned();
        let name = common::name_of(dir);
        let mut over = Vec::new();
        for (what, args) in [
            ("check", vec!["check", "--root", &root, "--keep-going"]),
            ("topo", vec!["topo", "--root", &root]),
        ] {
            let text = run(&args, Some("80"));
            assert!(!text.is_empty(), "{name} {what}: no output");
            over.extend(
                too_long(&text, 80)
                    .into_iter()
                    .map(|l| format!("{name} {what}: {l}")),
            );
        }
        over
    })
    .concat();
    assert!(
        over.is_empty(),
        "lines over 80 columns:\n{}",
        over.join("\n")
    );
}

#[test]
fn wrapping_loses_no_word() {
    let root = common::repo().join("fixtures/h100-cdi-spec-stale");
    let root = root.to_string_lossy();
    let wide = run(&["check", "--root", &root], None);
    let narrow = run(&["check", "--root", &root], Some("60"));
    assert!(too_long(&narrow, 60).is_empty(), "{narrow}");
    assert_ne!(wide, narrow);
    // The same text once the breaks are undone (a long word may be cut, so compare without
    // any whitespace), timings aside.
    let squeeze = |t: &str| {
        let words: Vec<&str> = t.split_whitespace().collect();
        words
            .iter()
            .enumerate()
            .filter(|(i, _)| !words.get(i + 1).is_some_and(|n| n.starts_with("ms")))
            .map(|(_, w)| *w)
            .collect::<String>()
    };
    assert_eq!(squeeze(&wide), squeeze(&narrow));
}

#[test]
fn piped_without_columns_is_unwrapped() {
    let dir = common::repo().join("fixtures/h100-cdi-spec-stale");
    let table = run(&["check", "--root", &dir.to_string_lossy()], None);
    let hint = table
        .lines()
        .find(|l| l.starts_with("              hint: "))
        .expect("a hint line");
    assert!(hint.chars().count() > 80, "{hint}");
    assert!(
        hint.ends_with("check with `nvidia-ctk cdi list`"),
        "one line: {hint}"
    );

    let dir = common::repo().join("fixtures/hgx-h100-healthy");
    let topo = run(&["topo", "--root", &dir.to_string_lossy()], None);
    let header = topo.lines().next().unwrap();
    assert!(header.chars().count() > 80, "{header}");
    assert!(
        header.ends_with("NUMA Affinity"),
        "one matrix block: {header}"
    );
    assert_eq!(topo.matches("NUMA Affinity").count(), 1, "{topo}");
    // The library's plain style, as snapshots and `render` into a pipe use it, has no width.
    assert_eq!(Style::PLAIN.width, None);
}
