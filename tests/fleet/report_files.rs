//! Which files count and what verdict a node's reports give it: no readable report, two
//! reports of one host, a warning under `--strict`, a report dated in the future.

use super::*;

#[test]
fn no_readable_report_is_a_usage_error_and_a_fifo_is_skipped_not_waited_on() {
    let scratch = common::tempdir().unwrap();
    std::fs::write(scratch.path().join("a.json"), "[]").unwrap();
    let fifo = scratch.path().join("stuck.json");
    common::make_fifo(&fifo);
    let started = std::time::Instant::now();
    let out = common::gpudoctor(&["fleet", scratch.path().to_str().unwrap()]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stuck.json: not a regular file"), "{err}");
    assert!(err.contains("a.json: not a gpudoctor JSON report"), "{err}");
    assert!(err.contains("no readable report"), "{err}");
    let out = common::gpudoctor(&["fleet", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn of_two_reports_of_one_host_the_worse_is_kept_and_both_are_named() {
    // Issue 30: a report's own timestamp is data from whoever wrote the file. A passing report
    // stamped later (and written later) must not hide a failing one of the same host.
    let scratch = common::tempdir().unwrap();
    let mut failing = report("h100-ib-port-hdr");
    failing["node"]["hostname"] = json!("gpu-7");
    failing["generated_at"] = json!("2020-01-01T00:00:00Z");
    let mut passing = report("h100-nccl-healthy");
    passing["node"]["hostname"] = json!("gpu-7");
    passing["generated_at"] = json!("2030-01-01T00:00:00Z");
    assert_eq!(passing["exit_code"], 0);
    write(scratch.path(), "failing.json", &failing);
    write(scratch.path(), "passing.json", &passing);
    set_modified(&scratch.path().join("failing.json"), 3600);
    let (s, stderr, code) = summary(scratch.path());
    assert_eq!(code, 1, "the failure is not hidden");
    assert_eq!(s["reports"], 1);
    assert_eq!(s["nodes"][0]["node"], "gpu-7");
    assert!(
        s["nodes"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("failing.json"),
        "{s}"
    );
    assert_eq!(s["nodes"][0]["layers"]["rdma"], "fail");
    let skipped = &s["skipped"][0];
    assert!(skipped["file"].as_str().unwrap().ends_with("passing.json"));
    let why = skipped["why"].as_str().unwrap();
    assert!(
        why.starts_with("gpu-7 holds 2 reports; kept ")
            && why.contains("failing.json (fail (exit 1), modified ")
            && why.contains("over this one (pass (exit 0), modified ")
            && why.contains("because its verdict is worse"),
        "{why}"
    );
    // Said on stderr and in the table, both files named.
    for text in [
        stderr,
        String::from_utf8_lossy(
            &common::gpudoctor(&["fleet", scratch.path().to_str().unwrap(), "--all"]).stdout,
        )
        .into_owned(),
    ] {
        assert!(
            text.lines().any(|l| l.contains("passing.json")
                && l.contains("failing.json")
                && l.contains("holds 2 reports")),
            "{text}"
        );
    }

    // Equal verdicts: the file modified last wins, not the later stamp inside a file.
    let mut stale = failing.clone();
    stale["generated_at"] = json!("2030-01-01T00:00:00Z");
    write(scratch.path(), "passing.json", &stale);
    set_modified(&scratch.path().join("passing.json"), 7200);
    let (s, _, code) = summary(scratch.path());
    assert_eq!(code, 1);
    assert!(
        s["nodes"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("failing.json"),
        "{s}"
    );
    let why = s["skipped"][0]["why"].as_str().unwrap();
    assert!(why.contains("because same verdict, modified last"), "{why}");
}

/// `check --keep-going --strict --format json` of a fixture.
fn strict_report(fixture: &str) -> Value {
    let root = format!("fixtures/{fixture}");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        &root,
        "--keep-going",
        "--strict",
        "--format",
        "json",
    ]);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issue 41: `check --strict` made a node's warning its failure (exit 1, and its NPD condition
/// says problem). The fleet counted that node failing and still exited 0: the count and the
/// exit code now say the same — the node's own verdict (docs/triage.md).
#[test]
fn a_warning_under_strict_fails_the_fleet_as_it_failed_the_node() {
    let scratch = common::tempdir().unwrap();
    let mut warned = strict_report("h100-kubelet-managers-misaligned");
    assert_eq!(warned["exit_code"], 1);
    assert!(warned["first_failure"].is_null(), "{warned:#}");
    warned["node"]["hostname"] = json!("gpu-strict");
    write(scratch.path(), "gpu-strict.json", &warned);
    for i in 1..=3 {
        let mut r = report("hgx-h100-healthy");
        r["node"]["hostname"] = json!(format!("gpu-{i}"));
        write(scratch.path(), &format!("gpu-{i}.json"), &r);
    }
    let (s, _, code) = summary(scratch.path());
    assert_eq!(s["counts"]["failing"], 1, "{:#}", s["counts"]);
    assert_eq!(
        code, 1,
        "counted failing, so the fleet fails: {:#}",
        s["counts"]
    );
    assert_eq!(s["exit_code"], 1);
    // The same report without --strict warns: counted as a warning, the fleet exits 0.
    let mut lenient = report("h100-kubelet-managers-misaligned");
    lenient["node"]["hostname"] = json!("gpu-strict");
    write(scratch.path(), "gpu-strict.json", &lenient);
    let (s, _, code) = summary(scratch.path());
    assert_eq!((s["counts"]["failing"].clone(), code), (json!(0), 0));
    assert_eq!(s["counts"]["warning"], 1);
}

/// Issue 41: a report dated in the future (its node's clock set wrong, or the file edited) has
/// no age; beyond a small clock skew it is stale, saying why — in `fleet` and in `render
/// --max-age` — never current until the date comes (a 2099 report was current for 73 years).
#[test]
fn a_report_dated_in_the_future_is_stale_saying_why() {
    let scratch = common::tempdir().unwrap();
    let now = std::time::SystemTime::now();
    let at = |ahead: u64| gpudoctor::time::rfc3339(now + std::time::Duration::from_secs(ahead));
    for (node, generated_at) in [
        ("gpu-now", at(0)),
        ("gpu-skewed", at(120)),
        ("gpu-2099", "2099-01-01T00:00:00Z".to_string()),
    ] {
        let mut r = report("hgx-h100-healthy");
        r["node"]["hostname"] = json!(node);
        r["generated_at"] = json!(generated_at);
        write(scratch.path(), &format!("{node}.json"), &r);
    }
    let (s, _, _) = summary(scratch.path());
    let triage = |node: &str| {
        s["triage"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["node"] == node)
            .unwrap()
            .clone()
    };
    assert_eq!(triage("gpu-now")["stale"], false);
    // Two minutes ahead: clocks differ that much without NTP; made now.
    assert_eq!(triage("gpu-skewed")["stale"], false, "{s:#}");
    let future = triage("gpu-2099");
    assert_eq!(future["stale"], true, "{future:#}");
    assert!(
        future["ahead_seconds"].as_u64() > Some(365 * 86_400),
        "{future:#}"
    );
    assert!(future["age_seconds"].is_null(), "{future:#}");
    assert_eq!(s["counts"]["stale"], 1);
    let out = common::gpudoctor(&["fleet", scratch.path().to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("gpu-2099 (dated ") && text.contains(" in the future, stale: clock skew?)"),
        "{text}"
    );

    // `render --npd-condition --max-age`: unknown (exit 2), saying why, not the node's state.
    let file = scratch.path().join("gpu-2099.json");
    let out = common::gpudoctor(&[
        "render",
        file.to_str().unwrap(),
        "--npd-condition",
        "gpu-hardware",
        "--max-age",
        "900",
    ]);
    let line = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{line}");
    assert!(
        line.starts_with("gpudoctor: report dated ")
            && line.contains(" days in the future; clock skew? (--max-age 900)"),
        "{line}"
    );
    let now_file = scratch.path().join("gpu-skewed.json");
    let out = common::gpudoctor(&[
        "render",
        now_file.to_str().unwrap(),
        "--npd-condition",
        "gpu-hardware",
        "--max-age",
        "900",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", out);
}
