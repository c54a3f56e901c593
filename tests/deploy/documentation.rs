//! What users read agrees with what ships: docs/deploy.md quotes the manifests as they are,
//! and one textfile-collector path is named everywhere.

use super::*;

/// docs/deploy.md's walk-through names what the manifests ship: the namespace, the DaemonSet,
/// its Pod labels and container, the files it applies, and its YAML excerpts appear in a
/// manifest line for line.
#[test]
fn the_deploy_doc_quotes_the_manifests_as_shipped() {
    let repo = common::repo();
    let doc = std::fs::read_to_string(repo.join("docs/deploy.md")).unwrap();
    let ds = documents(&repo.join("deploy/base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "DaemonSet")
        .unwrap();
    let namespace = ds["metadata"]["namespace"].as_str().unwrap();
    let name = ds["metadata"]["name"].as_str().unwrap();
    let labels = ds["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    let containers: Vec<&str> = ds["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();

    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in doc.lines() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some((lang.to_string(), String::new())),
            }
        } else if let Some((_, text)) = &mut current {
            text.push_str(line);
            text.push('\n');
        }
    }
    let mut kubectl = 0;
    for (lang, text) in &blocks {
        if lang == "yaml" {
            let manifests: Vec<String> = manifests()
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap())
                .collect();
            // The excerpt, de-indented, is a run of lines of some manifest, de-indented alike.
            let lines: Vec<&str> = text.lines().collect();
            let indent = lines
                .iter()
                .map(|l| l.len() - l.trim_start().len())
                .min()
                .unwrap_or(0);
            let excerpt: Vec<&str> = lines.iter().map(|l| &l[indent..]).collect();
            let found = manifests.iter().any(|m| {
                let mlines: Vec<&str> = m.lines().collect();
                mlines.windows(excerpt.len()).any(|w| {
                    let base = w[0].len() - w[0].trim_start().len();
                    w.iter()
                        .zip(&excerpt)
                        .all(|(a, b)| a.len() >= base && a.get(base..) == Some(*b))
                })
            });
            assert!(
                found,
                "docs/deploy.md quotes YAML no manifest holds:\n{text}"
            );
            continue;
        }
        for line in text.lines().map(str::trim) {
            for word in line.split_whitespace() {
                let word = word.trim_matches(|c| c == '`' || c == '"' || c == '\'');
                if let Some(rel) = word.strip_prefix("deploy/") {
                    let path = repo.join("deploy").join(rel.trim_end_matches('/'));
                    assert!(path.exists(), "docs/deploy.md names a missing {word}");
                }
            }
            if !line.starts_with("kubectl") && !line.contains("$(kubectl") {
                continue;
            }
            kubectl += 1;
            let words: Vec<&str> = line.split_whitespace().collect();
            for pair in words.windows(2) {
                match pair[0] {
                    "-n" => assert_eq!(pair[1], namespace, "{line}"),
                    "-c" => assert!(
                        containers.contains(&pair[1]),
                        "{line}: no container {}",
                        pair[1]
                    ),
                    "-l" => {
                        for selector in pair[1].split(',') {
                            let (k, v) = selector.split_once('=').unwrap();
                            assert_eq!(
                                labels.get(k).and_then(Value::as_str),
                                Some(v),
                                "{line}: the DaemonSet's Pods have no label {selector}"
                            );
                        }
                    }
                    _ => {}
                }
            }
            for word in &words {
                if let Some(ds_name) = word.strip_prefix("daemonset/") {
                    assert_eq!(ds_name, name, "{line}");
                }
            }
        }
    }
    assert!(
        kubectl >= 6,
        "the walk-through's kubectl commands: {kubectl}"
    );
    for step in [
        "kubectl apply -k deploy/",
        "gpudoctor record --root /host",
        "kubectl -n gpudoctor cp",
    ] {
        assert!(doc.contains(step), "docs/deploy.md lacks `{step}`");
    }
}

/// One textfile-collector directory everywhere a user reads one (README, docs, `--help`,
/// manifests), and it is the one the DaemonSet mounts (issue 19: the docs named two).
#[test]
fn one_textfile_collector_path_everywhere() {
    let repo = common::repo();
    let ds = documents(&repo.join("deploy/base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "DaemonSet")
        .unwrap();
    let mounted = ds["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "textfile")
        .unwrap()["hostPath"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let mut files = vec![repo.join("README.md"), repo.join("src/cli.rs")];
    for dir in ["docs", "deploy"] {
        let mut stack = vec![repo.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|e| e == "md" || e == "yaml" || e == "json" || e == "sh")
                {
                    files.push(path);
                }
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("/node_exporter/") {
            let start = text[..at]
                .rfind(|c: char| c.is_whitespace() || c == '=' || c == '`' || c == '"')
                .map_or(0, |i| i + 1);
            let path: String = text[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'))
                .collect();
            seen.insert((
                path.trim_end_matches('.').to_string(),
                file.display().to_string(),
            ));
        }
    }
    let paths: std::collections::BTreeSet<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        vec![mounted.as_str()],
        "textfile directories named: {seen:?}"
    );
}
