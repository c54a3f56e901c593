//! What `diff` compares: a node against itself, its copy, packed capture and saved reports (with or
//! without facts), re-recorded redacted captures, damaged captures; inputs it refuses (exit 2).

use super::*;

#[test]
fn a_node_against_itself_its_copy_its_archive_and_its_report_is_empty() {
    let scratch = common::tempdir().unwrap();
    common::parallel::for_each(&common::fixtures(), |dir| {
        let name = common::name_of(dir);
        let d = run(dir, dir);
        assert!(d.differences.is_empty(), "{name}: {:?}", d.differences);
        assert_eq!(d.exit_code, 0);
    });
    // A copy elsewhere (what `record --root <capture>` re-recording would give once it exists
    // on main: issue 14), and the same capture packed as `record --out x.tar.gz` packs it.
    for name in [
        "hgx-h100-healthy",
        "h100-sriov-vf-wrong-socket",
        "h100-nccl-ib-system-error",
    ] {
        let copy = scratch.path().join(name);
        common::link_tree(&fixture(name), &copy); // only read
        let d = run(&fixture(name), &copy);
        assert!(d.differences.is_empty(), "{name} copy: {:?}", d.differences);

        let packed = scratch.path().join(format!("{name}.tar.gz"));
        let file = std::fs::File::create(&packed).unwrap();
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ));
        tar.follow_symlinks(false);
        // An archive holds a complete capture: an overlay is packed composed.
        tar.append_dir_all(".", common::complete(&fixture(name)))
            .unwrap();
        tar.into_inner().unwrap().finish().unwrap();
        let d = run(&fixture(name), &packed);
        assert!(
            d.differences.is_empty(),
            "{name} packed: {:?}",
            d.differences
        );
        assert_eq!(d.b.kind, diff::InputKind::PackedCapture);

        // Its own report, saved with facts: nothing differs; without facts: verdicts only.
        for with_facts in [true, false] {
            let report = scratch.path().join(format!("{name}-{with_facts}.json"));
            let mut args = vec!["check", "--root", fixture_str(name), "--format", "json"];
            if with_facts {
                args.push("--with-facts");
            }
            let out = common::gpudoctor(&args);
            std::fs::write(&report, &out.stdout).unwrap();
            let d = run(&fixture(name), &report);
            assert!(
                d.differences.is_empty(),
                "{name} report: {:?}",
                d.differences
            );
            assert_eq!(d.b.kind, diff::InputKind::Report);
            assert_eq!(d.b.has_facts, with_facts);
            assert_eq!(d.b.note.is_some(), !with_facts);
        }
    }
}

fn fixture_str(name: &str) -> &'static str {
    Box::leak(format!("fixtures/{name}").into_boxed_str())
}

#[test]
fn saved_reports_with_facts_compare_as_their_captures_do() {
    let scratch = common::tempdir().unwrap();
    let save = |name: &str| {
        let path = scratch.path().join(format!("{name}.json"));
        let out = common::gpudoctor(&[
            "check",
            "--root",
            fixture_str(name),
            "--save-report",
            path.to_str().unwrap(),
            "--with-facts",
        ]);
        assert!(path.is_file(), "{}", String::from_utf8_lossy(&out.stderr));
        path
    };
    let (a, b) = (save("hgx-h100-healthy"), save("h100-ib-port-polling"));
    let from_reports = run(&a, &b);
    let from_captures = run(
        &fixture("hgx-h100-healthy"),
        &fixture("h100-ib-port-polling"),
    );
    assert_eq!(from_reports.differences, from_captures.differences);

    // Without facts the reports still give verdicts and the port rates they measured.
    let bare = |name: &str| {
        let path = scratch.path().join(format!("{name}-bare.json"));
        let out = common::gpudoctor(&["check", "--root", fixture_str(name), "--format", "json"]);
        std::fs::write(&path, out.stdout).unwrap();
        path
    };
    let d = run(&bare("hgx-h100-healthy"), &bare("h100-ib-port-polling"));
    let subjects: Vec<&str> = d.differences.iter().map(|x| x.subject.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "rdma.port_state",
            "rdma_port_rate_bytes_per_second{device=mlx5_3,link_layer=InfiniBand,port=1,rail=true}"
        ],
        "{:?}",
        d.differences
    );
    let rate = &d.differences[1];
    assert_eq!((rate.a.as_str(), rate.b.as_str()), ("400 Gb/s", "10 Gb/s"));
}

#[test]
fn inputs_that_cannot_be_compared_are_usage_errors() {
    let scratch = common::tempdir().unwrap();
    let garbage = scratch.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let report = scratch.path().join("report.json");
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--format",
        "json",
    ]);
    std::fs::write(&report, out.stdout).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["diff", "fixtures/hgx-h100-healthy", "no/such/dir"],
            "no/such/dir",
        ),
        (
            vec![
                "diff",
                "fixtures/hgx-h100-healthy",
                garbage.to_str().unwrap(),
            ],
            "not a gpudoctor JSON report",
        ),
        (
            vec![
                "diff",
                "fixtures/hgx-h100-healthy",
                report.to_str().unwrap(),
                "--keep-going",
            ],
            "cannot apply",
        ),
        (
            vec![
                "diff",
                "fixtures/hgx-h100-healthy",
                "fixtures/hgx-a100-healthy",
                "--profile",
                "no-such-profile",
            ],
            "--profile",
        ),
    ];
    for (args, says) in cases {
        let out = common::gpudoctor(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // --with-facts goes into JSON only.
    let out = common::gpudoctor(&[
        "check",
        "--root",
        "fixtures/hgx-h100-healthy",
        "--with-facts",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn redacted_captures_compare_by_their_placeholders() {
    // Re-record two fixtures (`record --root <capture>` carries their probe answers over and
    // redacts them again, tests/rerecord.rs): host names,
    // GUIDs, MACs and serials are replaced by placeholders in each capture, in the same order,
    // so two nodes built alike compare equal on them and only the injected port rate differs.
    let scratch = common::tempdir().unwrap();
    let record = |fixture: &str, out: &str| {
        let out = scratch.path().join(out);
        let run = common::gpudoctor(&[
            "record",
            "--root",
            fixture_str(fixture),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        out
    };
    let a = record("hgx-h100-healthy", "a.tar.gz");
    let b = record("h100-ib-port-hdr", "b.tar.gz");
    let d = run(&a, &b);
    let keys: Vec<String> = d
        .differences
        .iter()
        .map(|x| format!("{}/{}", x.subject, x.attribute.as_deref().unwrap_or("-")))
        .collect();
    // Both are re-recorded captures: their NVML answers come along, the hgx-h100 profile
    // applies on both sides, and the one injected fact changes the one verdict that reads it.
    let mut keys = keys;
    keys.sort();
    assert_eq!(
        keys,
        ["port mlx5_5/1/rate", "rdma.port_rate/-"],
        "{:#?}",
        d.differences
    );
    assert_ne!(d.a.hostname.as_deref(), Some("hgx-h100-01"), "redacted");
    assert_eq!(d.a.hostname, d.b.hostname, "same placeholder on both");
}

#[test]
fn a_report_with_facts_validates_against_the_published_schema() {
    let schema: Value = serde_json::from_str(&gpudoctor::report::json_schema()).unwrap();
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    for name in [
        "hgx-h100-healthy",
        "h100-driver-not-loaded",
        "h100-nccl-healthy",
    ] {
        let out = common::gpudoctor(&[
            "check",
            "--root",
            fixture_str(name),
            "--format",
            "json",
            "--with-facts",
            "--keep-going",
        ]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(report["facts"]["sections"]["driver"].is_object(), "{name}");
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
}

#[test]
fn a_damaged_capture_is_compared_not_crashed_on() {
    // Files the facts come from, damaged as a broken node or a mangled attachment would have
    // them: binary garbage, JSON cut short, a FIFO where a file should be, a file gone.
    let scratch = common::tempdir().unwrap();
    let bad = scratch.path().join("bad");
    common::copy_tree(&fixture("hgx-h100-healthy"), &bad);
    std::fs::write(
        bad.join("proc/driver/nvidia/gpus/0000:18:00.0/information"),
        b"\xff\xfe\x00Video BIOS:\x1b[31m\n",
    )
    .unwrap();
    std::fs::write(bad.join(".gpudoctor/nvml.json"), "{\"devices\": [").unwrap();
    std::fs::write(bad.join("proc/modules"), b"\x00\x01\x02 garbage\n").unwrap();
    std::fs::remove_file(bad.join("proc/cmdline")).unwrap();
    common::make_fifo(&bad.join("proc/cmdline"));
    std::fs::remove_file(bad.join("var/lib/kubelet/config.yaml")).unwrap();

    let started = std::time::Instant::now();
    let out = common::gpudoctor(&[
        "diff",
        "fixtures/hgx-h100-healthy",
        bad.to_str().unwrap(),
        "--all",
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains('\x1b'), "{text}");
    for needle in [
        "nvml init: ok → unreadable",
        "kernel command line (file): absent → unreadable",
        "kernel modules (list): absent → unreadable",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
}
