//! The grid outputs laid out by comfy-table (text/grid.rs): the `topo` matrix, `profiles`
//! and `list-checks`. Snapshots taken from the hand-padded renderers they replaced, byte for
//! byte; colour only where the caller asks for it, and then the same grid under the escapes.

mod common;

use gpudoctor::facts::topology::{self, Matrix};
use gpudoctor::source::{self, SourceOptions};

fn topo_table(fixture: &str, color: bool) -> String {
    let root = common::repo().join("fixtures").join(fixture);
    let source = source::open(&root, SourceOptions::default()).unwrap();
    let t = topology::gather(source.as_ref()).unwrap();
    let nvml = source.nvml();
    let m = Matrix::build(&t, Some(&nvml));
    gpudoctor::render::topo::render_table(&t, &m, color)
}

#[test]
fn topo_matrices_match_their_snapshots() {
    for fixture in [
        "hgx-h100-healthy",
        "h100-rdma-nics-one-socket",
        "h100-numa-node-unknown",
        "hgx-a100-healthy",
        "no-gpu-on-pci",
    ] {
        let out = common::gpudoctor(&["topo", "--root", &format!("fixtures/{fixture}")]);
        assert_eq!(out.status.code(), Some(0), "{fixture}");
        // Not a terminal: no colour.
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains('\x1b'), "{fixture}: colour on a pipe");
        assert_eq!(text, topo_table(fixture, false), "{fixture}");
        common::assert_snapshot(&format!("topo/{fixture}.txt"), &text);
    }
}

#[test]
fn a_coloured_matrix_is_the_plain_one_under_its_escapes() {
    let plain = topo_table("hgx-h100-healthy", false);
    let coloured = topo_table("hgx-h100-healthy", true);
    assert!(coloured.contains("\x1b[32mNV18\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[31mSYS\x1b[0m"), "{coloured}");
    assert!(coloured.starts_with("\x1b[4m"), "the header is underlined");
    let mut stripped = coloured.clone();
    for code in [
        "\x1b[4m", "\x1b[32m", "\x1b[36m", "\x1b[33m", "\x1b[31m", "\x1b[35m", "\x1b[0m",
    ] {
        stripped = stripped.replace(code, "");
    }
    assert_eq!(stripped, plain);
}

#[test]
fn profiles_match_their_snapshot() {
    let out = common::gpudoctor(&["profiles"]);
    assert_eq!(out.status.code(), Some(0));
    common::assert_snapshot("profiles.txt", &String::from_utf8(out.stdout).unwrap());
}

#[test]
fn list_checks_is_one_aligned_grid() {
    let out = common::gpudoctor(&["list-checks"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["CODE", "LAYER", "TITLE"]
    );
    assert_eq!(lines.len(), gpudoctor::checks::registry().len() + 1);
    let layer_at = lines[0].find("LAYER").unwrap();
    let title_at = lines[0].find("TITLE").unwrap();
    for (line, check) in lines[1..].iter().zip(gpudoctor::checks::registry()) {
        assert!(line.starts_with(check.code), "{line}");
        assert_eq!(
            &line[layer_at..layer_at + check.layer.id().len()],
            check.layer.id(),
            "{line}"
        );
        assert_eq!(&line[title_at..], check.title, "{line}");
        assert_eq!(
            line[..layer_at].trim_end(),
            check.code,
            "two spaces at least: {line}"
        );
    }
}
