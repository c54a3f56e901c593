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
    let command = "cargo test --locked";
    assert!(readme.contains(command), "README must show `{command}`");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run must run `{command}`"
    );
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
