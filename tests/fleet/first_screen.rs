//! Hundreds of nodes on the first screen (40 lines of 80 columns): every sick node, its cause
//! and the cause's action, and the stale reports.

use super::*;

/// Ten distinct faults on a fleet of 300 (issue 46): each sick node, its cause and the cause's
/// action are on the first screen, within 40 lines of 80 columns, whatever the node names'
/// length; a cause on one node says what its report says on the node's own line.
#[test]
fn three_hundred_nodes_with_ten_faults_name_every_node_cause_and_action_in_forty_lines() {
    let scratch = common::tempdir().unwrap();
    let healthy = report("hgx-h100-healthy");
    let faults = [
        "h100-xid48-dbe",
        "h100-pcie-x8",
        "h100-sriov-vf-wrong-socket",
        "no-gpu-on-pci",
        "h100-nvlink-links-down",
        "h100-disk-full",
        "h100-edac-uncorrected",
        "h100-uvm-not-loaded",
        "h100-nouveau-loaded",
        "h100-nic-aer-fatal",
    ];
    let sick: Vec<Value> = faults.iter().map(|f| report(f)).collect();
    let causes: Vec<(String, String)> = sick
        .iter()
        .map(|r| {
            let first = &r["first_failure"];
            (
                first["code"].as_str().unwrap().to_string(),
                first["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = causes.iter().map(|(c, _)| c).collect();
    assert_eq!(distinct.len(), 10, "{causes:?}");
    // Fault k on 1, 2 or 3 nodes (19 in all), spread over the fleet; two stale healthy nodes.
    let mut failing: Vec<(String, usize)> = Vec::new();
    let mut next = 11;
    for (k, _) in faults.iter().enumerate() {
        for _ in 0..(k % 3 + 1) {
            failing.push((format!("gpu-rack{:02}-node-{next:03}", next / 16), k));
            next += 15;
        }
    }
    assert_eq!(failing.len(), 19);
    for i in 0..300 {
        let node = format!("gpu-rack{:02}-node-{i:03}", i / 16);
        let mut r = match failing.iter().find(|(n, _)| *n == node) {
            Some((_, k)) => sick[*k].clone(),
            None => healthy.clone(),
        };
        r["node"]["hostname"] = json!(node);
        if [50, 250].contains(&i) && !failing.iter().any(|(n, _)| *n == node) {
            r["generated_at"] = json!("2026-01-01T00:00:00Z");
        }
        write(scratch.path(), &format!("{node}.json"), &r);
    }
    let out = common::gpudoctor(&["fleet", scratch.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 40, "{} lines:\n{text}", lines.len());
    for line in &lines {
        assert!(
            line.chars().count() <= 80,
            "over 80 columns: {line}\n{text}"
        );
    }
    assert!(text.contains("300 node(s)"), "{text}");
    assert!(text.contains("281 healthy, 19 failing"), "{text}");
    for (k, (code, action)) in causes.iter().enumerate() {
        let header = lines
            .iter()
            .position(|l| l.contains(&format!(" {code} -> {action}:")))
            .unwrap_or_else(|| panic!("{code} -> {action} not on the screen:\n{text}"));
        let nodes: Vec<&String> = failing
            .iter()
            .filter(|(_, f)| *f == k)
            .map(|(n, _)| n)
            .collect();
        assert!(
            lines[header].ends_with(&format!("{} node(s)", nodes.len())),
            "{}\n{text}",
            lines[header]
        );
        // Every node of the cause is named under its header, before the next cause.
        let under: String = lines[header + 1..]
            .iter()
            .take_while(|l| l.starts_with("    "))
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        for node in &nodes {
            assert!(
                under.contains(node.as_str()),
                "{node} not under {code}:\n{text}"
            );
        }
        // One node: what its report says follows its name on the same line.
        if let [one] = nodes.as_slice() {
            let said = sick[k]["first_failure"]["summary"].as_str().unwrap();
            let start: String = said.chars().take(20).collect();
            assert!(
                under.starts_with(&format!("    {one} (")) && under.contains(&start),
                "{one}: {said}\n{text}"
            );
        }
    }
    for stale in ["gpu-rack03-node-050", "gpu-rack15-node-250"] {
        assert!(text.contains(stale), "{stale} not flagged:\n{text}");
    }
}

/// The 2 a.m. screen over 500 nodes (issue 27): 470 healthy, a dozen failing for four causes —
/// one of them a node without GPUs, whose report holds five consequences of that one cause —
/// three stale reports (eleven days old) and nothing else. The first screen fits 40 lines of 80
/// columns, names every failing node under its cause with the action, flags the stale nodes,
/// and counts the GPU-less node once, under its cause.
#[test]
fn five_hundred_nodes_fit_one_screen_that_names_every_sick_node() {
    let scratch = common::tempdir().unwrap();
    let healthy = report("hgx-h100-healthy");
    let sick_reports: Vec<Value> = [
        "h100-xid48-dbe",
        "h100-pcie-x8",
        "h100-sriov-vf-wrong-socket",
        "no-gpu-on-pci",
    ]
    .iter()
    .map(|f| report(f))
    .collect();
    // Each one's cause and action, as its report's first failure says.
    let sick: Vec<(String, String)> = sick_reports
        .iter()
        .map(|r| {
            let first = &r["first_failure"];
            (
                first["code"].as_str().unwrap().to_string(),
                first["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(sick[3].0, "driver.gpu_on_pci");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = |secs_ago: u64| {
        gpudoctor::time::rfc3339(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(now - secs_ago),
        )
    };
    // Every 41st node from the 8th is sick: thirteen nodes, the four causes in turn.
    let mut failing: Vec<(String, usize)> = Vec::new();
    for i in 0..500 {
        let node = format!("gpu-{i:03}");
        let mut r = if i % 41 == 7 {
            let which = failing.len() % sick.len();
            failing.push((node.clone(), which));
            sick_reports[which].clone()
        } else {
            healthy.clone()
        };
        r["node"]["hostname"] = json!(node);
        // Three stale reports, eleven days old; the rest from the last five minutes.
        let age = if [100, 200, 300].contains(&i) {
            11 * 86_400
        } else {
            60 + i % 240
        };
        r["generated_at"] = json!(at(age));
        write(scratch.path(), &format!("{node}.json"), &r);
    }
    assert_eq!(failing.len(), 13);
    let dir = scratch.path().to_str().unwrap();
    let out = common::gpudoctor(&["fleet", dir]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 40, "{} lines:\n{text}", lines.len());
    for line in &lines {
        assert!(
            line.chars().count() <= 80,
            "over 80 columns: {line}\n{text}"
        );
    }
    assert!(text.contains("500 node(s)"), "{text}");
    assert!(text.contains("487 healthy, 13 failing"), "{text}");
    assert!(text.contains("3 stale"), "{text}");
    for (node, which) in &failing {
        let (code, action) = &sick[*which];
        assert!(
            text.contains(&format!("{node} (")),
            "{node} not named:\n{text}"
        );
        // Its cause's line says the code and the action.
        let header = lines
            .iter()
            .position(|l| l.contains(code.as_str()))
            .unwrap_or_else(|| panic!("{code} not on the screen:\n{text}"));
        assert!(
            lines[header].contains(action.as_str()),
            "{code}: {action}\n{text}"
        );
    }
    for stale in ["gpu-100", "gpu-200", "gpu-300"] {
        assert!(
            text.contains(&format!("{stale} (11 days, stale)")),
            "{stale} not flagged:\n{text}"
        );
    }
    // The GPU-less nodes: one cause each, their consequences no fault of their own.
    let out = common::gpudoctor(&["fleet", dir, "--format", "json"]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu_less: Vec<&String> = failing
        .iter()
        .filter(|(_, w)| *w == 3)
        .map(|(n, _)| n)
        .collect();
    assert!(!gpu_less.is_empty());
    for node in gpu_less {
        let codes: Vec<&str> = summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == node.as_str())
            })
            .map(|c| c["code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, vec!["driver.gpu_on_pci"], "{node}: {codes:?}");
    }
}
