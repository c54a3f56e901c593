//! The `nccl` checks (`checks/nccl/`) judged through the engine on replayed logs: what a
//! log makes of the whole report, so these live on the engine's floor.

use crate::engine::{self, RunOptions};
use crate::profile;
use crate::report::{Action, FigureName, Layer, Report, Status};
use crate::source::ReplaySource;

/// A replay root with `nvml.json`-less capture and one NCCL log; judged with `profile`.
fn judge(log: &str, profile: Option<&str>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".gpudoctor/nccl")).unwrap();
    std::fs::write(dir.path().join(".gpudoctor/manifest.json"), "{}").unwrap();
    std::fs::write(dir.path().join(".gpudoctor/nccl/all_reduce_perf.log"), log).unwrap();
    let source = ReplaySource::new(dir.path());
    let options = RunOptions {
        only: vec![Layer::Nccl],
        profile: profile.and_then(|name| profile::builtins().into_iter().find(|p| p.name == name)),
        ..RunOptions::default()
    };
    engine::run(&source, &options)
}

fn status(report: &Report, code: &str) -> (Status, String) {
    let c = report
        .layers
        .iter()
        .flat_map(|l| &l.checks)
        .find(|c| c.code == code)
        .unwrap();
    (c.status, c.summary.clone())
}

const HEADER: &str = "\
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41234 on hgx-h100-01 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41234 on hgx-h100-01 device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41234 on hgx-h100-01 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  41234 on hgx-h100-01 device  4 [0000:9a:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  41234 on hgx-h100-01 device  5 [0000:ab:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  41234 on hgx-h100-01 device  6 [0000:ba:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  41234 on hgx-h100-01 device  7 [0000:db:00] NVIDIA H100 80GB HBM3
hgx-h100-01:41234:41262 [0] NCCL INFO Using network IB
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
";
const FOOTER: &str = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 300.1 \n#\n";

/// A row nccl-tests could print: all_reduce on 8 ranks (busbw = algbw × 1.75), the time that
/// algbw takes for the size.
fn row(size: u64, busbw: f64, wrong: u64) -> String {
    let alg = busbw / 1.75;
    let time = size as f64 / alg / 1e3;
    format!(
        "  {size:>10}  {:>12}     float     sum      -1  {time:7.1}  {alg:.2}  {busbw:.2}  {wrong:>6}  {time:7.1}  {alg:.2}  {busbw:.2}  {wrong:>6}\n",
        size / 4
    )
}

fn with_nvls(channels: u32) -> String {
    format!(
        "hgx-h100-01:41234:41262 [0] NCCL INFO 32 coll channels, 32 collnet channels, {channels} nvls channels, 32 p2p channels, 32 p2p channels per peer\n"
    )
}

#[test]
fn healthy_nvls_run_passes_every_check() {
    let log = format!(
        "{HEADER}{}{}{}{FOOTER}",
        with_nvls(16),
        row(1 << 30, 468.3, 0),
        row(8 << 30, 482.4, 0)
    );
    let report = judge(&log, Some("hgx-h100"));
    for check in &report.layers[7].checks {
        assert!(
            !check.status.is_finding(),
            "{}: {:?} {}",
            check.code,
            check.status,
            check.summary
        );
    }
    let (s, summary) = status(&report, "nccl.bus_bandwidth");
    assert_eq!(s, Status::Pass);
    assert!(summary.contains("482.4 GB/s at 8 GiB"), "{summary}");
    // The peak is exported as a metric with the run's shape.
    let check = report.layers[7]
        .checks
        .iter()
        .find(|c| c.code == "nccl.bus_bandwidth")
        .unwrap();
    let figure = &check.figures[0];
    assert_eq!(figure.name, FigureName::NcclBusbwPeakBytesPerSecond);
    assert!((figure.value - 482.4e9).abs() < 1e3, "{}", figure.value);
    assert_eq!(figure.labels["test"], "all_reduce");
    assert_eq!(figure.labels["nodes"], "1");
    assert_eq!(figure.labels["ranks"], "8");
}

#[test]
fn bandwidth_uses_the_ring_figure_without_nvls_and_never_the_average() {
    // 380 passes the ring expectation (370) though it is far below the nvls one.
    let log = format!("{HEADER}{}{}{FOOTER}", with_nvls(0), row(8 << 30, 380.0, 0));
    let report = judge(&log, Some("hgx-h100"));
    assert_eq!(status(&report, "nccl.bus_bandwidth").0, Status::Pass);
    assert_eq!(status(&report, "nccl.nvls").0, Status::Warn);
    // 401 with nvls in use fails (floor 460); the average line (300.1) is only evidence.
    let log = format!(
        "{HEADER}{}{}{FOOTER}",
        with_nvls(16),
        row(8 << 30, 401.0, 0)
    );
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.bus_bandwidth");
    assert_eq!(s, Status::Fail);
    assert!(
        summary.contains("401.0") && summary.contains("460"),
        "{summary}"
    );
    // 462: warn band (460 to 465).
    let log = format!(
        "{HEADER}{}{}{FOOTER}",
        with_nvls(16),
        row(8 << 30, 462.0, 0)
    );
    assert_eq!(
        status(&judge(&log, Some("hgx-h100")), "nccl.bus_bandwidth").0,
        Status::Warn
    );
    // 470, a healthy node's figure at 1 GiB: passes.
    let log = format!(
        "{HEADER}{}{}{FOOTER}",
        with_nvls(16),
        row(1 << 30, 470.0, 0)
    );
    assert_eq!(
        status(&judge(&log, Some("hgx-h100")), "nccl.bus_bandwidth").0,
        Status::Pass
    );
    // Only small sizes: not judged.
    let log = format!("{HEADER}{}{FOOTER}", row(1 << 20, 10.0, 0));
    assert_eq!(
        status(&judge(&log, Some("hgx-h100")), "nccl.bus_bandwidth").0,
        Status::Skip
    );
}

#[test]
fn profile_comes_from_the_log_when_nvml_has_no_gpu() {
    let log = format!(
        "{HEADER}{}{}{FOOTER}",
        with_nvls(16),
        row(8 << 30, 401.0, 0)
    );
    let (s, summary) = status(&judge(&log, None), "nccl.bus_bandwidth");
    assert_eq!(s, Status::Fail);
    assert!(summary.contains("hgx-h100"), "{summary}");
}

#[test]
fn wrong_values_fail_with_sizes() {
    let log = format!(
        "{HEADER}{}{}# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 300.1 \n",
        row(1 << 30, 468.3, 0),
        row(8 << 30, 482.4, 12)
    );
    let (s, summary) = status(&judge(&log, Some("hgx-h100")), "nccl.wrong_results");
    assert_eq!(s, Status::Fail);
    assert!(summary.contains("8 GiB (24 element(s))"), "{summary}");
}

#[test]
fn a_log_without_footer_fails_with_its_last_lines() {
    let log = format!("{HEADER}{}", row(1 << 30, 468.3, 0));
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.run_completed");
    assert_eq!(s, Status::Fail);
    assert!(summary.contains("last result row at 1 GiB"), "{summary}");
}

#[test]
fn system_error_with_ib_completions_points_at_rdma() {
    let log = format!(
        "{HEADER}node-a:2231:2290 [3] transport/net_ib/p2p.cc:1148 NCCL WARN NET/IB: Got completion from peer 10.0.0.12<52131> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) vendor_err=129 hca mlx5_3\nnode-a: Test NCCL failure common.cu:1057 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n"
    );
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.test_errors");
    assert_eq!(s, Status::Fail);
    assert!(
        summary.contains("RDMA layer") && summary.contains("RETRY_EXC_ERR"),
        "{summary}"
    );
    assert_eq!(status(&report, "nccl.run_completed").0, Status::Skip);
}

#[test]
fn socket_fallback_on_an_rdma_profile_fails() {
    let log = "\
node-a:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
node-a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.11<0>
node-a:1:1 [0] NCCL INFO Using network Socket
node-a:1:9 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
node-b:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0
";
    let (s, summary) = status(&judge(log, Some("hgx-h100")), "nccl.socket_fallback");
    assert_eq!(s, Status::Fail);
    assert!(summary.contains("libibverbs"), "{summary}");
}

fn check<'r>(report: &'r Report, code: &str) -> &'r crate::report::CheckResult {
    report
        .layers
        .iter()
        .flat_map(|l| &l.checks)
        .find(|c| c.code == code)
        .unwrap()
}

fn evidence_text(report: &Report, code: &str) -> String {
    check(report, code)
        .evidence
        .iter()
        .map(|e| format!("{}: {}\n", e.source, e.observed))
        .collect()
}

#[test]
fn shm_between_gpus_of_an_nvlink_node_warns() {
    let shm = "\
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct
hgx-h100-01:41234:41263 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[2] via SHM/direct/direct
hgx-h100-01:41234:41262 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
";
    let log = format!("{HEADER}{shm}{}{FOOTER}", row(8 << 30, 150.0, 0));
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.p2p_transport");
    assert_eq!(s, Status::Warn, "{summary}");
    assert!(
        summary.starts_with(
            "2 intra-node channel(s) through host shared memory (SHM), not p2p/nvlink (1 P2P channel(s)); NCCL_P2P_DISABLE=1 set"
        ),
        "{summary}"
    );
    let evidence = evidence_text(&report, "nccl.p2p_transport");
    assert!(evidence.contains("via SHM/direct/direct"), "{evidence}");
    assert!(
        evidence.contains("nvlink: profile hgx-h100: 18 NVLinks per GPU"),
        "{evidence}"
    );
    assert!(
        check(&report, "nccl.p2p_transport")
            .hint
            .as_deref()
            .unwrap()
            .contains("unset NCCL_P2P_DISABLE")
    );
    // The slow run blames the shm path.
    let (s, summary) = status(&report, "nccl.bus_bandwidth");
    assert_eq!(s, Status::Fail);
    let hint = check(&report, "nccl.bus_bandwidth").hint.clone().unwrap();
    assert!(hint.contains("nccl.p2p_transport"), "{summary} / {hint}");

    // On a node without NVLink (generic PCIe profile, no NVML), SHM is how GPUs talk: pass.
    let report = judge(&log, Some("generic-pcie-gpu"));
    assert_eq!(status(&report, "nccl.p2p_transport").0, Status::Pass);
}

/// Two nodes, eight ranks each, as `mpirun --tag-output` prints them.
fn two_node_header() -> String {
    let mut text = String::from(
        "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0\n",
    );
    for (i, host) in ["node-a", "node-b"].iter().enumerate() {
        for d in 0..8 {
            text.push_str(&format!(
                "#  Rank {:>2} Group  0 Pid  {} on {host} device  {d} [0000:18:00] NVIDIA H100 80GB HBM3\n",
                i * 8 + d,
                4100 + i
            ));
        }
    }
    text.push_str("node-a:4100:4120 [0] NCCL INFO Using network IB\n");
    text.push_str("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
    text
}

#[test]
fn a_multi_node_run_that_hung_crashed_or_failed_names_its_nodes() {
    let nodes = "nodes in the run: node-a node-b";
    // Hung or crashed: no footer.
    let log = format!("{}{}", two_node_header(), row(1 << 30, 300.0, 0));
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.run_completed");
    assert_eq!(s, Status::Fail, "{summary}");
    assert!(
        evidence_text(&report, "nccl.run_completed").contains(nodes),
        "{:#?}",
        check(&report, "nccl.run_completed")
    );
    // Failed: an NCCL error on one of them.
    let log = format!(
        "{}node-b:4101:4130 [3] transport/net_ib/p2p.cc:1148 NCCL WARN NET/IB: Got completion from peer 10.0.0.11<52131> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) vendor_err=129 hca mlx5_3\nnode-b: Test NCCL failure common.cu:1057 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n",
        two_node_header()
    );
    let report = judge(&log, Some("hgx-h100"));
    assert_eq!(status(&report, "nccl.test_errors").0, Status::Fail);
    assert!(evidence_text(&report, "nccl.test_errors").contains(nodes));
    // Wrong values.
    let log = format!(
        "{}{}# Out of bounds values : 1 FAILED\n# Avg bus bandwidth    : 300.1 \n",
        two_node_header(),
        row(8 << 30, 300.0, 5)
    );
    let report = judge(&log, Some("hgx-h100"));
    assert_eq!(status(&report, "nccl.wrong_results").0, Status::Fail);
    assert!(evidence_text(&report, "nccl.wrong_results").contains(nodes));
    assert!(evidence_text(&report, "nccl.run_completed").contains(nodes));
}

/// Two nodes: judged by the profile's stated multi-node figure when it has one (hgx-a100:
/// 192 GB/s, `NVIDIA/nccl#812`, fail at 172.8), else by the figure derived from its NICs
/// (hgx-h100: 8 × 400 Gb/s / 8 × 0.92 = 368, fail at 331.2) — never by single-node figures.
#[test]
fn multi_node_runs_are_judged_by_the_profiles_multi_node_expectation() {
    let two_nodes =
        |busbw: f64| format!("{}{}{}", two_node_header(), row(8 << 30, busbw, 0), FOOTER);
    for (profile, busbw, expected, label) in [
        (
            "hgx-a100-80gb",
            195.0,
            Status::Pass,
            "multi-node expectation",
        ),
        (
            "hgx-a100-80gb",
            185.0,
            Status::Warn,
            "multi-node expectation",
        ),
        (
            "hgx-a100-80gb",
            170.0,
            Status::Fail,
            "multi-node expectation",
        ),
        (
            "hgx-h100",
            370.0,
            Status::Pass,
            "derived from 8 x 400 Gb/s NICs",
        ),
        (
            "hgx-h100",
            360.0,
            Status::Warn,
            "derived from 8 x 400 Gb/s NICs",
        ),
        (
            "hgx-h100",
            330.0,
            Status::Fail,
            "derived from 8 x 400 Gb/s NICs",
        ),
    ] {
        let report = judge(&two_nodes(busbw), Some(profile));
        let (s, summary) = status(&report, "nccl.bus_bandwidth");
        assert_eq!(s, expected, "{profile} at {busbw}: {summary}");
        assert!(summary.contains(label), "{profile} at {busbw}: {summary}");
        assert!(summary.contains("2 nodes"), "{summary}");
    }
    let report = judge(&two_nodes(185.0), Some("hgx-a100-80gb"));
    let (_, summary) = status(&report, "nccl.bus_bandwidth");
    assert!(
        summary.contains("expected 192 GB/s") && summary.contains("fails below 173"),
        "{summary}"
    );
}

#[test]
fn not_requested_skips_saying_how() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".gpudoctor")).unwrap();
    let source = ReplaySource::new(dir.path());
    let report = engine::run(
        &source,
        &RunOptions {
            only: vec![Layer::Nccl],
            ..RunOptions::default()
        },
    );
    let layer = &report.layers[7];
    assert_eq!(layer.status, Status::Skip);
    // Every benchmark check says how to ask; the kernel-log one says it had no log to read.
    assert!(
        layer
            .checks
            .iter()
            .filter(|c| c.code != "nccl.kernel_crashes")
            .all(|c| c.summary.contains("--nccl-log"))
    );
    assert!(layer.reason.as_deref().unwrap_or("").contains("--nccl-log"));
}

fn figures(report: &Report, code: &str) -> Vec<(FigureName, f64)> {
    check(report, code)
        .figures
        .iter()
        .map(|f| (f.name, f.value))
        .collect()
}

/// Issue 15: a sweep too small to judge says so and still gives its numbers, as figures too.
#[test]
fn a_sweep_too_small_to_judge_still_reports_its_figures() {
    let log = format!(
        "{HEADER}{}{}{}{FOOTER}",
        row(1 << 20, 10.0, 0),
        row(64 << 20, 200.0, 0),
        row(256 << 20, 250.0, 0)
    );
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.bus_bandwidth");
    assert_eq!(s, Status::Skip);
    assert!(
        summary.starts_with("peak busbw 250.0 GB/s at 256 MiB, sweep average 300.1 GB/s; largest size 256 MiB: too small to judge"),
        "{summary}"
    );
    let got = figures(&report, "nccl.bus_bandwidth");
    assert_eq!(
        got,
        vec![
            (FigureName::NcclBusbwPeakBytesPerSecond, 250.0e9),
            (FigureName::NcclBusbwPeakSizeBytes, f64::from(256u32 << 20)),
            (FigureName::NcclBusbwAverageBytesPerSecond, 300.1e9),
        ]
    );
}

#[test]
fn a_collapsing_sweep_fails_naming_the_sizes_and_a_dip_does_not() {
    let sweep = |tail: &[(u64, f64)]| {
        let rows: String = tail.iter().map(|(s, b)| row(*s, *b, 0)).collect();
        judge(&format!("{HEADER}{rows}{FOOTER}"), None)
    };
    let report = sweep(&[
        (16 << 20, 24.1),
        (32 << 20, 29.5),
        (64 << 20, 5.27),
        (128 << 20, 5.30),
        (256 << 20, 4.23),
    ]);
    let (s, summary) = status(&report, "nccl.bandwidth_collapse");
    assert_eq!(s, Status::Fail);
    assert_eq!(
        summary,
        "all_reduce: busbw collapses after its peak: 29.5 GB/s at 32 MiB, then at most 5.30 GB/s from 64 MiB to 256 MiB (3 size(s) under half the peak)"
    );
    assert_eq!(
        check(&report, "nccl.bandwidth_collapse").action,
        Action::HardwareInspection
    );
    // A dip that recovers (aws/aws-ofi-nccl#65's shape) and a plateau after the peak pass.
    for shape in [
        vec![
            (32 << 20, 32.6),
            (64 << 20, 19.1),
            (128 << 20, 30.7),
            (256 << 20, 42.6),
        ],
        vec![(256 << 20, 167.9), (1 << 30, 149.9), (8 << 30, 155.6)],
    ] {
        let (s, summary) = status(&sweep(&shape), "nccl.bandwidth_collapse");
        assert_eq!(s, Status::Pass, "{summary}");
    }
}

/// Issue 15: any NCCL application's log through the same `--nccl-log`.
#[test]
fn an_applications_log_fails_on_its_watchdog_timeout_and_skips_table_checks() {
    let log = "\
hgx-h100-01:41234:41262 [0] NCCL INFO Using network IB
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
[rank3]:[E1119 13:21:12.512781555 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800000 milliseconds before timing out.
";
    let report = judge(log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.test_errors");
    assert_eq!(s, Status::Fail);
    assert!(
        summary.starts_with("collective operation timeout on rank 3: broadcast ran 1800000 ms against its 1800000 ms timeout"),
        "{summary}"
    );
    assert!(evidence_text(&report, "nccl.test_errors").contains("Watchdog caught"));
    for code in [
        "nccl.run_completed",
        "nccl.wrong_results",
        "nccl.bus_bandwidth",
        "nccl.bandwidth_collapse",
    ] {
        let (s, summary) = status(&report, code);
        assert_eq!(s, Status::Skip, "{code}");
        assert!(
            summary.contains("not an nccl-tests log"),
            "{code}: {summary}"
        );
    }
    // Its transports are judged like nccl-tests'.
    assert_eq!(status(&report, "nccl.p2p_transport").0, Status::Pass);
    // An NCCL error string in an exception, and an advice WARN that is no failure.
    let log = "\
node:1:1 [0] graph/search.cc:1135 NCCL WARN Could not find a path for pattern 4, falling back to simple order
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
";
    let (s, summary) = status(&judge(log, None), "nccl.test_errors");
    assert_eq!(s, Status::Fail);
    assert!(
        summary.starts_with("NCCL error in the application: 'unhandled system error'"),
        "{summary}"
    );
    let advice = "node:1:1 [0] graph/search.cc:1135 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n";
    assert_eq!(
        status(&judge(advice, None), "nccl.test_errors").0,
        Status::Pass
    );
}

/// An excerpt that has the footer but not the start of the run is never healthy.
#[test]
fn a_footer_without_the_start_of_the_run_is_inconclusive() {
    let tail = HEADER.lines().last().unwrap();
    let log = format!("{tail}\n{}{FOOTER}", row(8 << 30, 482.4, 0));
    let (s, summary) = status(&judge(&log, Some("hgx-h100")), "nccl.run_completed");
    assert_eq!(s, Status::Error);
    assert!(summary.starts_with("an excerpt:"), "{summary}");
}

/// The old `error` column: a deviation past nccl-tests' tolerance for the type is wrong data,
/// one within it (`5e-07` on floats) is rounding.
#[test]
fn the_old_error_column_is_judged_by_the_types_tolerance() {
    let old = "\
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
  1073741824     268435456     float     sum   4012.3  267.61  468.32  5e-07   4005.1  268.09  469.16  5e-07
  8589934592    2147483648     float     sum  31161.0  275.66  482.41  1e+00  31150.2  275.76  482.58  0e+00
 Out of bounds values : 1 FAILED
 Avg bus bandwidth    : 475.617 
";
    let report = judge(old, None);
    let (s, summary) = status(&report, "nccl.wrong_results");
    assert_eq!(s, Status::Fail);
    assert!(
        summary.contains("8 GiB (max error 1e+00 over the 1e-05 float tolerance)")
            && !summary.contains("1 GiB"),
        "{summary}"
    );
    // Its footer without `#` is read: the run is complete, not "killed, hung or crashed".
    assert_eq!(status(&report, "nccl.run_completed").0, Status::Pass);
}

#[test]
fn several_tests_in_one_log_are_judged_each() {
    let test = |name: &str, redop: &str, busbw: f64| {
        let alg = busbw / 1.75;
        let time = (8u64 << 30) as f64 / alg / 1e3;
        format!(
            "# Collective test starting: {name}\n{}  8589934592    2147483648     float   {redop:>5}      -1  {time:7.1}  {alg:.2}  {busbw:.2}       0  {time:7.1}  {alg:.2}  {busbw:.2}       0\n{FOOTER}# Collective test concluded: {name}\n",
            HEADER.replace(
                "hgx-h100-01:41234:41262 [0] NCCL INFO Using network IB\n",
                ""
            )
        )
    };
    let log = test("all_gather_perf", "none", 320.0) + &test("all_reduce_perf", "sum", 482.4);
    let report = judge(&log, Some("hgx-h100"));
    let (s, summary) = status(&report, "nccl.run_completed");
    assert_eq!(s, Status::Pass, "{summary}");
    assert!(
        summary.starts_with("2 tests (all_gather, all_reduce) ran to their footers"),
        "{summary}"
    );
    // The all_reduce table is the one judged against the profile.
    let (s, summary) = status(&report, "nccl.bus_bandwidth");
    assert_eq!(s, Status::Pass, "{summary}");
    assert!(
        summary.starts_with("peak busbw 482.4 GB/s at 8 GiB"),
        "{summary}"
    );
    // Figures for each collective.
    let tests: Vec<String> = check(&report, "nccl.bus_bandwidth")
        .figures
        .iter()
        .filter(|f| f.name == FigureName::NcclBusbwPeakBytesPerSecond)
        .map(|f| f.labels["test"].clone())
        .collect();
    assert_eq!(tests, vec!["all_gather", "all_reduce"]);
}
