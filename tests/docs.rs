//! Docs that must match the code.

mod common;

#[test]
fn checks_catalogue_is_the_generated_one() {
    let doc = std::fs::read_to_string(common::repo().join("docs/checks.md")).unwrap();
    assert!(
        doc == gpudoctor::explain::list_markdown(),
        "docs/checks.md is stale: run `cargo run -- list-checks --format markdown > docs/checks.md`"
    );
    for check in gpudoctor::checks::registry() {
        assert!(
            doc.contains(&format!("`{}`", check.code)),
            "docs/checks.md lacks {}",
            check.code
        );
    }
}

#[test]
fn readme_and_ci_run_the_same_test_command() {
    let readme = std::fs::read_to_string(common::repo().join("README.md")).unwrap();
    let ci = std::fs::read_to_string(common::repo().join(".ci/run")).unwrap();
    let command = "scripts/test";
    assert!(readme.contains(command), "README must show `{command}`");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run must run `{command}`"
    );
    // The runner builds what `cargo test --locked` builds and runs the doc tests as well, so
    // the suite it runs is `cargo test --locked`'s, side by side.
    let runner = std::fs::read_to_string(common::repo().join(command)).unwrap();
    for part in [
        "cargo test --locked --no-run --message-format=json-render-diagnostics",
        "cargo test --locked --doc",
    ] {
        assert!(runner.contains(part), "{command} must run `{part}`");
    }
}

#[test]
fn fixtures_doc_lists_every_fixture() {
    let doc = std::fs::read_to_string(common::repo().join("docs/fixtures.md")).unwrap();
    for dir in common::fixtures() {
        let name = common::name_of(&dir);
        assert!(
            doc.contains(&format!("| `{name}` |")),
            "docs/fixtures.md lacks the fixture {name}"
        );
    }
}
