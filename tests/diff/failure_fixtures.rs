//! Every failure fixture against the healthy node: exactly its manifest's expected verdicts change,
//! and every counted fact is one its edit injected (the table in injected_edits.rs).

use super::*;

use std::collections::BTreeMap;

use super::injected_edits::INJECTED;

/// `section/subject/attribute` of each counted fact or measurement (`-` for a subject present on
/// one side only).
fn fact_keys(d: &Diff) -> Vec<String> {
    d.differences
        .iter()
        .filter(|x| x.counted && x.kind != Kind::Verdict)
        .map(|x| {
            format!(
                "{}/{}/{}",
                x.section,
                x.subject,
                x.attribute.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

/// `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.is_char_boundary(head.len() + i) && glob(tail, &text[head.len() + i..])
                })
        }
    }
}

fn manifest(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join(".gpudoctor/manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_failure_fixture_names_its_injected_difference_and_nothing_else() {
    let healthy = fixture("hgx-h100-healthy");
    let table: BTreeMap<&str, &[(&str, usize)]> = INJECTED.iter().copied().collect();
    let mut seen = 0;
    for dir in common::fixtures() {
        let name = common::name_of(&dir);
        if name == "hgx-h100-healthy" {
            continue;
        }
        let expected = table
            .get(name.as_str())
            .unwrap_or_else(|| panic!("{name}: add its injected difference to INJECTED"));
        seen += 1;
        let d = run(&healthy, &dir);

        // Verdicts: exactly the codes its manifest expects to fire (the healthy node has none).
        let codes: Vec<String> = manifest(&dir)["expect"]["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let mut verdicts: Vec<String> = d
            .differences
            .iter()
            .filter(|x| x.counted && x.kind == Kind::Verdict)
            .map(|x| x.subject.clone())
            .collect();
        verdicts.sort();
        let mut codes = codes;
        codes.sort();
        assert_eq!(verdicts, codes, "{name}: changed verdicts");

        // Facts: every counted one is explained by the edit, and each pattern matches as often
        // as the edit says.
        let keys = fact_keys(&d);
        for key in &keys {
            assert!(
                expected.iter().any(|(p, n)| *n > 0 && glob(p, key)),
                "{name}: unrelated difference {key}\nall: {keys:#?}"
            );
        }
        for (pattern, n) in expected.iter() {
            let matched = keys.iter().filter(|k| glob(pattern, k)).count();
            assert_eq!(
                matched, *n,
                "{name}: {pattern} matched {matched}\nall: {keys:#?}"
            );
        }
        // Exit 1 exactly when something counted differs: a changed verdict or a counted fact
        // (a passing fixture such as MIG-healthy still differs from the healthy node in facts).
        let differs = !verdicts.is_empty() || !keys.is_empty();
        assert_eq!(
            d.exit_code,
            if differs { 1 } else { 0 },
            "{name}: exit code does not follow what counted differs\nverdicts: {verdicts:?}\nfacts: {keys:#?}"
        );
    }
    assert_eq!(
        seen,
        INJECTED.len(),
        "INJECTED names a fixture that is gone"
    );
}
