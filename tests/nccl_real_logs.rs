//! Issue 15 "done when": every real log under `tests/data/nccl/real/` (its README names each
//! one's public source; the files are copied byte for byte) judged as an operator would judge it,
//! `gpudoctor check --only nccl --nccl-log FILE` off-node — an empty root and no NVML, so the
//! profile comes from the log's own device lines — gives its verdict and its peak bus bandwidth.
//! A complete log keeps its verdict behind every launcher's decorations; an excerpt that lacks
//! the start or the end of its run is never called healthy.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// What a real log must give.
struct Expect {
    file: &'static str,
    exit: i32,
    /// The `nccl` findings (code without `nccl.`, status), sorted by code.
    findings: &'static [(&'static str, &'static str)],
    /// The `nccl_busbw_peak_bytes_per_second` figure in GB/s and the size it was reached at.
    peak: Option<(f64, u64)>,
}

const fn e(
    file: &'static str,
    exit: i32,
    findings: &'static [(&'static str, &'static str)],
    peak: Option<(f64, u64)>,
) -> Expect {
    Expect {
        file,
        exit,
        findings,
        peak,
    }
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// Each log's verdict, with why it is the right one.
const EXPECT: &[Expect] = &[
    // A dip at 64 MiB that recovers (not a collapse); no nThread line: an excerpt.
    e(
        "aws-ofi-nccl-65-p4d-dip.log",
        3,
        &[("run_completed", "error")],
        Some((42.61, 256 * MIB)),
    ),
    // Three ranks' ProcessGroupNCCL watchdog timeouts.
    e(
        "basicsr-737-watchdog-excerpt.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
    // Table and footer without the start of the run.
    e(
        "coreweave-nccl-tests-43-gb200-nvl72.log",
        3,
        &[("run_completed", "error")],
        Some((846.82, 8 * GIB)),
    ),
    // Cut after 64 KiB.
    e(
        "dgx-spark-playbooks-103-gb10-excerpt.log",
        1,
        &[("run_completed", "fail")],
        Some((1.01, 64 << 10)),
    ),
    // Healthy: T4s over EFA, no GPUDirect expected, no profile for its bandwidth.
    e(
        "eks-efa-t4-two-node-tag-output.log",
        0,
        &[],
        Some((3.15, 128 * MIB)),
    ),
    // Healthy all_gather (a collective the profiles do not state).
    e(
        "gcp-h200-two-node-all-gather.log",
        0,
        &[],
        Some((332.16, 8 * GIB)),
    ),
    e(
        "litgpt-1832-slurm-watchdog-excerpt.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
    // The collapse: 29.5 GB/s at 32 MiB, then ~5 from 64 MiB on; no footer.
    e(
        "nccl-1453-collapse-glued-rank-markers-excerpt.log",
        1,
        &[("bandwidth_collapse", "fail"), ("run_completed", "fail")],
        Some((29.50, 32 * MIB)),
    ),
    // Row pieces between INFO lines: nccl-tests output, cut short.
    e(
        "nccl-1453-interleaved-info-excerpt.log",
        1,
        &[("run_completed", "fail")],
        None,
    ),
    // Two processes each ran their own test.
    e(
        "nccl-tests-107-duplicate-headers-excerpt.log",
        1,
        &[("run_completed", "fail")],
        None,
    ),
    e(
        "nccl-tests-131-gtx-socket-info-excerpt.log",
        1,
        &[("run_completed", "fail")],
        None,
    ),
    e(
        "nccl-tests-176-old-error-column-excerpt.log",
        1,
        &[("run_completed", "fail")],
        Some((2.22, 128 << 10)),
    ),
    // One rank: busbw 0 by definition, nothing to judge, healthy.
    e("nccl-tests-287-rtx5090-one-gpu.log", 0, &[], Some((0.0, 8))),
    e(
        "nccl-tests-287-rtx5090-two-gpus-info.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
    e(
        "nccl-tests-287-rtx5090-two-gpus.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
    // Healthy (a maintainer: "in the expected range"): 476.5 GB/s at 4 GiB is above hgx-h100's
    // warning at 465; it warned when the warning sat at NVLS's 8-GiB peak of 480.
    e(
        "nccl-tests-290-h100-single-node.log",
        0,
        &[],
        Some((476.53, 4 * GIB)),
    ),
    // Two nodes far below 8 × NDR (~368 expected, 331 floor); the excerpt lacks its start.
    e(
        "nccl-tests-290-slurm-label-ring-excerpt.log",
        1,
        &[("bus_bandwidth", "fail"), ("run_completed", "error")],
        Some((102.27, 64 * MIB)),
    ),
    e(
        "nccl-tests-290-slurm-label-two-node.log",
        1,
        &[("bus_bandwidth", "fail")],
        Some((167.87, 256 * MIB)),
    ),
    e(
        "nccl-tests-291-collapsed-spaces-excerpt.log",
        1,
        &[("run_completed", "fail")],
        None,
    ),
    e(
        "nccl-tests-355-h800-alltoall-cuda-failure.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
    e(
        "nccl-tests-362-footer-without-hash.log",
        3,
        &[("run_completed", "error")],
        None,
    ),
    // alltoall rows with their `redop` blank under a header that names one (2021 layout): read,
    // not dropped; the in-place `error` of 1 is within that old build's own tolerance, as its
    // footer says (`Out of bounds values : 0 OK`): not a wrong result (issue 45); no nThread
    // line: an excerpt.
    e(
        "nccl-tests-78-alltoall-blank-redop-excerpt.log",
        3,
        &[("run_completed", "error")],
        Some((0.51, 256 * MIB)),
    ),
    e(
        "nccl-tests-82-v100-broadcast-old-excerpt.log",
        1,
        &[("run_completed", "fail")],
        Some((0.0, 8)),
    ),
    // Healthy single-node 8 x H100 runs of one cluster, five tests each: the all_reduce peak
    // (NVLS) is the run's figure.
    e(
        "nccl-tests-cluster-h100-single-node-cnode3-002.log",
        0,
        &[],
        Some((482.27, 16 * GIB)),
    ),
    e(
        "nccl-tests-cluster-h100-single-node-cnode3-003.log",
        0,
        &[],
        Some((482.04, 8 * GIB)),
    ),
    e(
        "nccl-tests-cluster-h100-single-node-cnode3-004.log",
        0,
        &[],
        Some((481.31, 16 * GIB)),
    ),
    e(
        "nccl-tests-cluster-h100-single-node-cnode3-005.log",
        0,
        &[],
        Some((482.15, 16 * GIB)),
    ),
    e(
        "nccl-tests-cluster-h100-single-node-cnode3-006.log",
        0,
        &[],
        Some((481.19, 16 * GIB)),
    ),
    // Healthy: two collectives in one 2.17.6 log (alltoall with redop `none`, then sendrecv),
    // in-place `#wrong` N/A; the first test's peak is the run's figure.
    e(
        "nccl-tests-cluster-h100-two-node-alltoall-sendrecv.log",
        0,
        &[],
        Some((23.64, 8 * GIB)),
    ),
    // An application's log without a failure line.
    e("openrlhf-949-ray-actor-excerpt.log", 0, &[], None),
    e(
        "pytorch-lightning-20434-slurm-watchdog-excerpt.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
    e(
        "skypilot-h200-two-node-all-gather.log",
        0,
        &[],
        Some((332.58, 8 * GIB)),
    ),
    e(
        "vllm-6042-ray-worker-watchdog-excerpt.log",
        1,
        &[("test_errors", "fail")],
        None,
    ),
];

fn real(file: &str) -> PathBuf {
    common::repo().join("tests/data/nccl/real").join(file)
}

/// `check --only nccl --nccl-log FILE` on an empty root without NVML: exit code and report.
fn judge(log: &Path) -> (i32, Value) {
    let root = common::tempdir().unwrap();
    let out = common::scratch::gpudoctor_command()
        .args(["check", "--only", "nccl", "--format", "json"])
        .args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--root"])
        .arg(root.path())
        .arg("--nccl-log")
        .arg(log)
        .env_remove(common::FAKE_NVML_JSON)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: not json ({e}): {}",
            log.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn checks(report: &Value) -> Vec<&Value> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["id"] == "nccl")
        .flat_map(|l| l["checks"].as_array().unwrap())
        .collect()
}

fn findings(report: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = checks(report)
        .into_iter()
        .filter(|c| ["warn", "fail", "error"].contains(&c["status"].as_str().unwrap()))
        .map(|c| {
            (
                c["code"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("nccl.")
                    .to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    found
}

/// The sweep's peak figure: (GB/s, bytes).
fn peak(report: &Value) -> Option<(f64, u64)> {
    let figures: Vec<Value> = checks(report)
        .into_iter()
        .flat_map(|c| c["figures"].as_array().cloned().unwrap_or_default())
        .collect();
    let value = |name: &str| {
        figures
            .iter()
            .find(|f| f["name"] == name)
            .and_then(|f| f["value"].as_f64())
    };
    let busbw = value("nccl_busbw_peak_bytes_per_second")?;
    let size = value("nccl_busbw_peak_size_bytes")?;
    Some((busbw / 1e9, size as u64))
}

fn summary(report: &Value, code: &str) -> String {
    checks(report)
        .into_iter()
        .find(|c| c["code"] == code)
        .map(|c| c["summary"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

fn assert_verdict(expect: &Expect, path: &Path, what: &str) {
    let (exit, report) = judge(path);
    let got = findings(&report);
    let want: Vec<(String, String)> = expect
        .findings
        .iter()
        .map(|(c, s)| (c.to_string(), s.to_string()))
        .collect();
    assert_eq!(got, want, "{what}: findings\n{report:#}");
    assert_eq!(exit, expect.exit, "{what}: exit code");
    match (peak(&report), expect.peak) {
        (Some((busbw, size)), Some((want_busbw, want_size))) => {
            assert!(
                (busbw - want_busbw).abs() < 0.005,
                "{what}: peak {busbw} GB/s, want {want_busbw}"
            );
            assert_eq!(size, want_size, "{what}: size at peak");
            // Figures always, and the summary says the number too.
            let bw = summary(&report, "nccl.bus_bandwidth");
            assert!(
                bw.contains("GB/s") || bw.contains("not an nccl-tests log"),
                "{what}: {bw}"
            );
        }
        (None, None) => {}
        (got, want) => panic!("{what}: peak {got:?}, want {want:?}\n{report:#}"),
    }
}

#[test]
fn every_real_log_gets_its_verdict_and_peak() {
    for expect in EXPECT {
        assert_verdict(expect, &real(expect.file), expect.file);
    }
}

#[test]
fn every_real_log_is_expected_and_sourced() {
    let readme = std::fs::read_to_string(real("README.md")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(real(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        assert!(
            EXPECT.iter().any(|e| e.file == file),
            "{file} has no expected verdict in tests/nccl_real_logs.rs"
        );
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{file}`")))
            .unwrap_or_else(|| panic!("{file} has no row in tests/data/nccl/real/README.md"));
        assert!(row.contains("https://"), "{file}: no source URL in {row}");
    }
    for expect in EXPECT {
        assert!(
            files.iter().any(|f| f == expect.file),
            "{} is missing",
            expect.file
        );
    }
}

/// An excerpt of nccl-tests output — without the start or the end of its run — is never
/// called healthy: `nccl.run_completed` fails or errs, and the exit code is not 0.
#[test]
fn an_excerpt_is_never_called_healthy() {
    for expect in EXPECT {
        let (exit, report) = judge(&real(expect.file));
        let completed = checks(&report)
            .into_iter()
            .find(|c| c["code"] == "nccl.run_completed")
            .unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string();
        let excerpt = expect.file.contains("excerpt")
            || expect.file.starts_with("coreweave")
            || expect.file.starts_with("aws-ofi")
            || expect.file.contains("footer-without-hash");
        if excerpt && completed != "skip" {
            assert!(
                completed == "fail" || completed == "error",
                "{}: run_completed {completed}",
                expect.file
            );
            assert_ne!(exit, 0, "{}", expect.file);
        }
    }
}

/// Puts a launcher's decoration in front of line `i`.
type Decorate = fn(usize, &str) -> String;

/// Launcher decorations in front of every line, as each launcher prints them (`i` the line).
fn decorations() -> Vec<(&'static str, Decorate)> {
    vec![
        ("slurm --label", |_, l| format!(" 0: {l}")),
        ("open mpi --tag-output, two-digit ranks", |i, l| {
            format!("[1,{}]<stdout>:{l}", 8 + i % 4)
        }),
        ("skypilot over open mpi", |_, l| {
            format!("(head, rank=0, pid=3808) [1,0]<stdout>:{l}")
        }),
        ("kubectl logs --timestamps", |_, l| {
            format!("2025-03-04T09:13:02.123456789Z {l}")
        }),
        ("kubectl logs --prefix", |_, l| {
            format!("[pod/nccl-test-launcher-x7k2p/launcher] {l}")
        }),
        ("pdsh", |_, l| format!("node-a01: {l}")),
        ("per-rank marker", |_, l| format!("[0] {l}")),
        ("ray worker with colour", |_, l| {
            format!("\u{1b}[36m(RayWorkerWrapper pid=4009)\u{1b}[0m {l}")
        }),
        ("crlf", |_, l| format!("{l}\r")),
        ("all of them", |i, l| {
            format!(
                "2025-03-04T09:13:02Z node-a01: {:>2}: [1,{}]<stdout>:[0] {l}\r",
                i % 16,
                i % 16
            )
        }),
    ]
}

/// Issue 15: "a healthy complete log, whatever its launcher, is never failed" — nor does any
/// complete log change its verdict or its peak behind another launcher's prefixes.
#[test]
fn complete_logs_keep_their_verdict_behind_every_launcher() {
    let complete = [
        "eks-efa-t4-two-node-tag-output.log",
        "gcp-h200-two-node-all-gather.log",
        "skypilot-h200-two-node-all-gather.log",
        "nccl-tests-287-rtx5090-one-gpu.log",
        "nccl-tests-290-h100-single-node.log",
        "nccl-tests-290-slurm-label-two-node.log",
        "nccl-tests-355-h800-alltoall-cuda-failure.log",
        "nccl-tests-287-rtx5090-two-gpus-info.log",
    ];
    let dir = common::tempdir().unwrap();
    for file in complete {
        let expect = EXPECT.iter().find(|e| e.file == file).unwrap();
        let text = std::fs::read_to_string(real(file)).unwrap();
        for (name, decorate) in decorations() {
            let decorated: String = text
                .lines()
                .enumerate()
                .map(|(i, l)| decorate(i, l) + "\n")
                .collect();
            let path = dir.path().join(file);
            std::fs::write(&path, decorated).unwrap();
            assert_verdict(expect, &path, &format!("{file} behind {name}"));
        }
    }
}

/// nccl-tests before 2.17 prints no `Collective test starting:` line; a log saved from a shell
/// or a job script names its program on its command line instead (issue 28). The real two-node
/// alltoall log without its `Collective test` lines, with and without a command line of the
/// shape real logs begin with (`nccl-tests-107`: `mpirun ... /path/all_reduce_perf -b ...`).
#[test]
fn a_log_without_a_test_line_is_named_by_its_command_line() {
    let real = std::fs::read_to_string(real(
        "nccl-tests-cluster-h100-two-node-alltoall-sendrecv.log",
    ))
    .unwrap();
    let alltoall: String = real
        .lines()
        .take_while(|l| !l.starts_with("# Collective test concluded"))
        .filter(|l| !l.starts_with("# Collective test"))
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = common::tempdir().unwrap();
    let unnamed = dir.path().join("unnamed.log");
    let named = dir.path().join("named.log");
    std::fs::write(&unnamed, &alltoall).unwrap();
    std::fs::write(
        &named,
        format!(
            "user@cnode2-001:~/nccl-tests$ mpirun -np 16 -H cnode2-001:8,cnode2-002:8 /home/user/nccl-tests/build/alltoall_perf -b 32M -e 16G -f 2 -g 1\n{alltoall}"
        ),
    )
    .unwrap();
    let test_label = |report: &Value| -> Vec<String> {
        checks(report)
            .into_iter()
            .flat_map(|c| c["figures"].as_array().cloned().unwrap_or_default())
            .filter(|f| f["name"] == "nccl_busbw_peak_bytes_per_second")
            .map(|f| f["labels"]["test"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let summary = |report: &Value, code: &str| -> String {
        checks(report)
            .into_iter()
            .find(|c| c["code"] == code)
            .map(|c| c["summary"].as_str().unwrap().to_string())
            .unwrap()
    };
    let (exit, report) = judge(&unnamed);
    assert_eq!(exit, 0);
    assert!(
        summary(&report, "nccl.run_completed").contains("its collective not named"),
        "{report:#}"
    );
    let (exit, report) = judge(&named);
    assert_eq!(exit, 0);
    assert_eq!(test_label(&report), ["alltoall"]);
    assert!(
        summary(&report, "nccl.run_completed").starts_with("alltoall ran to its footer"),
        "{report:#}"
    );
    assert!(
        summary(&report, "nccl.nvls").contains("this is alltoall"),
        "{report:#}"
    );
}

/// hgx-h100's NVLS warning sits under every healthy all_reduce row the profile judges (1 GiB and
/// more) of the public healthy H100 runs kept here, whatever size a sweep stops at: a warning at
/// NVLS's 8-GiB peak (480) fired on healthy sweeps that ended at 1, 2 or 4 GiB (issue 28).
#[test]
fn the_h100_nvls_warning_is_below_every_healthy_run_from_one_gib() {
    let profile = gpudoctor::profile::builtins()
        .into_iter()
        .find(|p| p.name == "hgx-h100")
        .unwrap();
    let warn = profile.nccl_busbw_warn_gbps.unwrap();
    let fail = profile.nccl_busbw_fail_gbps.unwrap();
    let healthy = [
        "nccl-tests-290-h100-single-node.log",
        "nccl-tests-cluster-h100-single-node-cnode3-002.log",
        "nccl-tests-cluster-h100-single-node-cnode3-003.log",
        "nccl-tests-cluster-h100-single-node-cnode3-004.log",
        "nccl-tests-cluster-h100-single-node-cnode3-005.log",
        "nccl-tests-cluster-h100-single-node-cnode3-006.log",
    ];
    let mut judged = 0;
    let mut lowest = f64::MAX;
    for file in healthy {
        let log =
            gpudoctor::answers::nccl::parse_log(&std::fs::read_to_string(real(file)).unwrap());
        let all_reduce = |table: usize| {
            log.tables
                .get(table)
                .and_then(|t| t.collective.as_deref())
                .is_none_or(|c| c == "all_reduce_perf")
        };
        for row in log
            .rows
            .iter()
            .filter(|r| r.size >= 1 << 30 && all_reduce(r.table))
        {
            let busbw = row.peak_busbw();
            assert!(
                busbw >= warn,
                "{file}: {busbw} GB/s at {} B is below the warning {warn}",
                row.size
            );
            lowest = lowest.min(busbw);
            judged += 1;
        }
    }
    assert!(judged >= 20, "{judged} rows");
    // The warning is not so low that it says nothing: within 2 % of the lowest healthy row, and
    // above the failure.
    assert!(
        warn >= lowest * 0.98 && warn > fail,
        "warn {warn}, lowest {lowest}, fail {fail}"
    );
}

/// Issue 28: a log of more tests than the parser keeps tables for (`MAX_TABLES`, 1024; the
/// bench's table-dense log holds 100 000) — a real log of five tests repeated 210 times. The
/// checks still see the end of the log, and a failed `Out of bounds` footer in a test past the
/// cap still fails `nccl.wrong_results`; `nccl.run_completed` says how many tables were not
/// kept.
#[test]
fn tests_past_the_table_cap_are_counted_and_still_judged() {
    let one = std::fs::read_to_string(real("nccl-tests-cluster-h100-single-node-cnode3-002.log"))
        .unwrap();
    let dir = common::tempdir().unwrap();
    let path = dir.path().join("repeated.log");
    let repeated = |copies: usize, failed_copy: Option<usize>| -> String {
        (0..copies)
            .map(|i| {
                if Some(i) == failed_copy {
                    one.replacen(
                        "# Out of bounds values : 0 OK",
                        "# Out of bounds values : 7 FAILED",
                        1,
                    )
                } else {
                    one.clone()
                }
            })
            .collect()
    };
    let healthy = repeated(210, None);
    std::fs::write(&path, &healthy).unwrap();
    let (_, report) = judge(&path);
    assert_eq!(findings(&report), vec![], "{report:#}");
    let done = summary(&report, "nccl.run_completed");
    assert!(
        done.contains("did not keep 26 test table(s) past the first 1024"),
        "{done}"
    );
    // Copy 207 holds tables 1035..1040: past the cap.
    std::fs::write(&path, repeated(210, Some(207))).unwrap();
    let (exit, report) = judge(&path);
    assert_eq!(exit, 1);
    assert_eq!(
        findings(&report),
        vec![("wrong_results".to_string(), "fail".to_string())]
    );
    assert!(
        summary(&report, "nccl.wrong_results").contains("out of bounds values: 7 failed"),
        "{report:#}"
    );
    // The last test, past the cap, cut before its footer: the run did not finish.
    let cut = healthy
        .rfind("# Out of bounds values")
        .map(|at| &healthy[..at])
        .unwrap();
    std::fs::write(&path, cut).unwrap();
    let (_, report) = judge(&path);
    assert!(
        findings(&report).contains(&("run_completed".to_string(), "fail".to_string())),
        "{report:#}"
    );
}
