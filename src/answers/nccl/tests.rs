//! The parser's own tests: whole logs of every nccl-tests generation and launcher through
//! [`parse_log`] and [`NcclLogParser::feed_bytes`], compared field by field.

use super::*;

/// Modern single-node 8 x H100 output with NCCL_DEBUG=INFO (nccl.md §2, §3, §4, §9; row
/// layout exact, numbers illustrative).
const MODERN: &str = "\
# nccl-tests version 2.19.6 nccl-headers=22105 nccl-library=22105
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41234 on hgx-h100-01 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
hgx-h100-01:41234:41234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.11<0>
hgx-h100-01:41234:41234 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
hgx-h100-01:41234:41234 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
hgx-h100-01:41234:41262 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.11<0>
hgx-h100-01:41234:41262 [0] NCCL INFO Using network IB
hgx-h100-01:41234:41262 [0] NCCL INFO DMA-BUF is available on GPU device 0
hgx-h100-01:41234:41262 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0
hgx-h100-01:41234:41262 [0] NCCL INFO NVLS multicast support is available on dev 0
hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
hgx-h100-01:41234:41263 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM/read
hgx-h100-01:41234:41262 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer
hgx-h100-01:41234:41262 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8d1f34ad6f1e2b71 - Init COMPLETE
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)        
  1073741824     268435456     float     sum      -1   4012.3  267.61  468.32       0   4005.1  268.09  469.16       0
  8589934592    2147483648     float     sum      -1  31161.0  275.66  482.41       0  31150.2  275.76  482.58       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 475.617 
#
# Collective test concluded: all_reduce_perf
";

#[test]
fn reads_modern_output() {
    let log = parse_log(MODERN);
    assert_eq!(log.tests_version.as_deref(), Some("2.19.6"));
    assert_eq!(log.nccl_headers, Some(22105));
    assert_eq!(log.collective.as_deref(), Some("all_reduce_perf"));
    assert_eq!(log.header_blocks, 1);
    let config = log.config.as_ref().unwrap();
    assert_eq!(config.ngpus, Some(8));
    assert_eq!(config.max_bytes, Some(8589934592));
    assert_eq!(config.iters, Some(20));
    assert_eq!(log.devices.len(), 2);
    assert_eq!(log.devices[1].bus_id, "0000:2a:00");
    assert_eq!(log.devices[1].name, "NVIDIA H100 80GB HBM3");
    assert_eq!(log.rows.len(), 2);
    let big = &log.rows[1];
    assert_eq!(big.size, 8589934592);
    assert_eq!(big.redop.as_deref(), Some("sum"));
    assert_eq!(big.root, Some(-1));
    assert_eq!(big.out_of_place.unwrap().busbw, 482.41);
    assert_eq!(big.in_place.unwrap().wrong, Wrong::Count(0));
    assert_eq!(big.peak_busbw(), 482.58);
    assert_eq!(log.peak_row(1 << 30).unwrap().size, 8589934592);
    assert_eq!(log.out_of_bounds.as_ref().unwrap().0, 0);
    assert_eq!(log.avg_busbw.as_ref().unwrap().0, 475.617);
    assert!(log.concluded && log.has_footer());
    assert_eq!(log.nccl_version.as_deref(), Some("2.21.5+cuda12.4"));
    let t = &log.transports;
    assert_eq!(t.network.as_ref().unwrap().0, "IB");
    assert_eq!(t.p2p.channels, 2);
    assert_eq!(t.p2p_kinds.get("CUMEM"), Some(&2));
    assert!(t.plugin_absent && t.dmabuf_available && t.ib_devices.is_some());
    assert!(t.nvls_support.as_ref().unwrap().0);
    assert_eq!(t.nvls_channels.as_ref().unwrap().0, 16);
    assert_eq!(log.info_nodes, Some(1));
    assert_eq!(log.ranks(), 2);
    assert_eq!(log.nodes(), 1);
    assert_eq!(log.unreadable_lines, 0);
    assert_eq!(log.other_lines, 0);
    assert_eq!(
        log.tail.last().unwrap().text,
        "# Collective test concluded: all_reduce_perf"
    );
}

/// 2022-era (v2.13-v2.17) rows: one space fewer, busbw >= 1000 overflowing its column.
#[test]
fn reads_overflowing_columns_and_exponents() {
    let text = "\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  8589934592    2147483648     float     sum      -1  1.2e+04  715.83 1252.70      0  12001.0  715.76 1252.58      0
";
    let log = parse_log(text);
    assert_eq!(log.rows.len(), 1);
    assert_eq!(log.rows[0].out_of_place.unwrap().time_us, 12000.0);
    assert_eq!(log.rows[0].out_of_place.unwrap().busbw, 1252.70);
}

/// Before 2022-08: `error` column, per-op headers without `root` (nccl.md §3, NVIDIA/nccl#527).
#[test]
fn reads_old_error_column_without_root() {
    let text = "\
# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  65996 on ubuntu-116 device  0 [0x0e] NVIDIA A100-SXM-80GB
#
#                                                       out-of-place                       in-place          
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
  1073741824     268435456     float     sum   8175.9  131.33  229.82  2e-07   8165.2  131.50  230.13  2e-07
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 229.975 
#
";
    let log = parse_log(text);
    assert_eq!(log.devices[0].host, "ubuntu-116");
    assert_eq!(log.devices[0].bus_id, "0x0e");
    let row = &log.rows[0];
    assert_eq!(row.root, None);
    assert_eq!(row.redop.as_deref(), Some("sum"));
    assert_eq!(row.out_of_place.unwrap().wrong, Wrong::Deviation(2e-7));
    assert_eq!(row.wrong_count(), 0);
    assert!(log.has_footer() && !log.concluded);
}

/// all_gather without redop/root, `N/A` (-c 0), `-S 1` timestamps, 2018 header without `#`.
#[test]
fn reads_rootless_unchecked_rows_with_timestamps() {
    let text = "\
nThread 1 nGpus 8 minBytes 9 maxBytes 33554432 step: 1048576(bytes) warmup iters: 5 iters: 20 validation: 0
#       size         count      type     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong  timestamp
    33554432       1048576     float    125.3  267.80  234.33     N/A    120.1  279.39  244.47     N/A  2026-03-01 10:22:03
";
    let log = parse_log(text);
    assert_eq!(log.header_blocks, 1);
    let row = &log.rows[0];
    assert_eq!(row.redop, None);
    assert_eq!(row.in_place.unwrap().wrong, Wrong::NotChecked);
    assert_eq!(row.peak_busbw(), 244.47);
}

/// Per-iteration columns (`-I 1`) widen each block to eight fields.
#[test]
fn reads_per_iteration_blocks() {
    let text = "\
#       size         count      type   redop    root     time   algbw   busbw  #wrong   i_min   i_max   i_p99  i_cv%     time   algbw   busbw  #wrong   i_min   i_max   i_p99  i_cv%
  1073741824     268435456     float     sum      -1   4012.3  267.61  468.32       0  4001.0  4030.2  4029.9   0.21   4005.1  268.09  469.16       0  4000.0  4020.0  4019.0   0.18
";
    let log = parse_log(text);
    assert_eq!(log.rows[0].in_place.unwrap().busbw, 469.16);
}

/// mpirun --tag-output and per-rank prefixes (nccl.md §7).
#[test]
fn strips_launcher_prefixes() {
    let text = "\
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
[1,0]<stdout>:  8589934592    2147483648     float     sum      -1  93021.3   92.34  173.15       0  92998.1   92.37  173.19       0
[1,0]<stdout>:# Avg bus bandwidth    : 92.3405
[0]      4194304 [0]     1048576 float sum -1 [0]     622.6    6.74   12.63      0    620.1    6.76   12.68      0
[0] [0] node-b:77:77 [3] NCCL INFO Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA
0: node-a:1:1 [0] NCCL INFO Using network IB
";
    let log = parse_log(text);
    assert_eq!(log.rows.len(), 2);
    assert_eq!(log.rows[0].out_of_place.unwrap().busbw, 173.15);
    assert_eq!(log.rows[1].size, 4194304);
    assert_eq!(log.avg_busbw.as_ref().unwrap().0, 92.3405);
    let ib = &log.transports.net["IB"];
    assert_eq!((ib.channels, ib.gdr_channels), (1, 1));
    assert_eq!(
        log.info_hosts.iter().collect::<Vec<_>>(),
        vec!["node-a", "node-b"]
    );
    assert_eq!(log.transports.network.as_ref().unwrap().0, "IB");
}

/// Failure lines (§5, §11): NCCL/CUDA failures, unwinding, IB completions of every vintage.
#[test]
fn collects_failures() {
    let text = "\
node-a:2231:2290 [3] transport/net_ib/p2p.cc:1148 NCCL WARN NET/IB: Got completion from peer 10.0.0.12<52131> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) vendor_err=129 [localGid fe80::1] [remoteGids fe80::2] hca mlx5_3
[2026-07-01 10:00:00] node-a:2231:2290 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.12<52131> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid fe80::1
node-a:2231:2290 [3] NCCL WARN NET/IB : Got completion with error 4, opcode 8983, len 0, vendor err 81
pkb-aa8dbd1b-1: Test NCCL failure common.cu:345 'unhandled system error'
 .. pkb-aa8dbd1b-1 pid 2231: Test failure common.cu:393
h100-4: Test NCCL failure common.cu:1057 'internal error / '
node-b: Test CUDA failure common.cu:732 'an illegal memory access was encountered'
node-c: Test timeout (300s) common.cu:512
# error: unhandled system error (run with NCCL_DEBUG=INFO for details)
Invalid number of GPUs: 8 requested but only 4 were found.
";
    let log = parse_log(text);
    let statuses: Vec<Option<u32>> = log.ib_completions.iter().map(|c| c.status).collect();
    assert_eq!(statuses, vec![Some(12), Some(12), Some(4)]);
    assert_eq!(log.failure_count, 4);
    assert_eq!(log.failures[0].kind, FailureKind::Nccl);
    assert_eq!(log.failures[0].host, "pkb-aa8dbd1b-1");
    assert_eq!(log.failures[0].error, "unhandled system error");
    assert_eq!(log.failures[1].error, "internal error / ");
    assert_eq!(log.failures[1].location, "common.cu:1057");
    assert_eq!(log.failures[2].kind, FailureKind::Cuda);
    assert_eq!(log.failures[3].kind, FailureKind::Timeout);
    assert_eq!(log.failures[3].location, "common.cu:512");
    assert_eq!(log.trace_lines, 1);
    assert!(log.last_error.is_some());
    assert!(log.invalid_gpus.is_some());
    assert_eq!(log.info_hosts.len(), 1);
}

/// Noise, binary garbage, huge lines, NaN, truncated rows: skipped and counted, never fatal.
#[test]
fn skips_what_it_cannot_read() {
    let mut parser = NcclLogParser::new();
    parser.feed_bytes(b"Authorization required, but no authorization protocol specified\n");
    parser.feed_bytes(b"\x00\x01\xff\xfe garbage\n");
    parser.feed_bytes(&vec![b'7'; 3 * MAX_LINE_BYTES]);
    parser.feed_bytes(b"\n  1048576  262144  float  sum  -1  nan  nan  nan  0  1.0 1.0 1.0 0\n");
    parser.feed_bytes(b"  8589934592    2147483648     float     sum      -1  34012.1  252.55");
    let log = parser.finish();
    assert_eq!(log.lines, 5);
    assert_eq!(log.other_lines, 1);
    assert_eq!(log.overlong_lines, 1);
    assert_eq!(log.unreadable_lines, 4);
    assert!(log.rows.is_empty());
    assert_eq!(log.tail.len(), 3);
}

/// A script that runs two tests into one log: two tables, each with its name and footer;
/// not per-process headers.
#[test]
fn sequential_tests_make_tables() {
    let test = |name: &str, redop: &str| {
        format!(
                "# Collective test starting: {name}
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
  1073741824     268435456     float   {redop:>5}      -1   4012.3  267.61  468.32       0   4005.1  268.09  469.16       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 468.74
#
# Collective test concluded: {name}
"
            )
    };
    let log = parse_log(&(test("all_reduce_perf", "sum") + &test("all_gather_perf", "none")));
    assert_eq!(log.tables.len(), 2);
    assert_eq!(log.per_process_headers, 0);
    assert_eq!(log.header_blocks, 2);
    assert_eq!(log.tables[1].collective.as_deref(), Some("all_gather_perf"));
    assert!(log.tables.iter().all(|t| t.rows == 1 && t.has_footer()));
    assert_eq!(log.rows[1].table, 1);
    // The devices of the first test only.
    assert_eq!(log.devices.len(), 1);
    // Headers before any result: several processes, each its own test.
    let header = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 validation: 1\n";
    assert_eq!(parse_log(&header.repeat(2)).per_process_headers, 1);
}

/// Issue 13: a line with a control character is read without it, not dropped — colour
/// codes around a Ray prefix, a BEL, CRLF line ends, a progress bar redrawn with `\r`.
#[test]
fn lines_with_control_characters_are_read() {
    let mut parser = NcclLogParser::new();
    parser.feed_bytes(
            b"\x1b[36m(RayWorkerWrapper pid=4009)\x1b[0m node-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\r\n\
step 12 |####      | 40%\rnode-b:2:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM/read\n\
node-a:1:1 [0] NCCL INFO Using network IB\x07\r\n\
Epoch 0:  6%|##  | 32040/500150\r[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800002 milliseconds before timing out.\n",
        );
    let log = parser.finish();
    assert_eq!(log.unreadable_lines, 0);
    assert_eq!(log.info_lines, 3);
    assert_eq!(log.transports.p2p.channels, 2);
    let hosts: Vec<&str> = log.info_hosts.iter().map(String::as_str).collect();
    assert_eq!(hosts, vec!["node-a", "node-b"]);
    assert_eq!(log.transports.network.as_ref().unwrap().0, "IB");
    assert_eq!(log.timeouts[0].ran_ms, Some(1_800_002));
    assert!(log.tail.iter().all(|q| !q.text.contains('\u{1b}')));
}

#[test]
fn repeated_headers_count_blocks() {
    let one = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0\nNCCL version 2.19.3+cuda12.3\n";
    let log = parse_log(&one.repeat(3));
    assert_eq!(log.header_blocks, 3);
    assert_eq!(log.nccl_version.as_deref(), Some("2.19.3+cuda12.3"));
}

#[test]
fn splitter_is_chunking_independent() {
    let text = MODERN.as_bytes();
    let whole = parse_log(MODERN);
    for chunk in [1, 7, 64, 4096] {
        let mut parser = NcclLogParser::new();
        for piece in text.chunks(chunk) {
            parser.feed_bytes(piece);
        }
        assert_eq!(parser.finish(), whole, "chunk {chunk}");
    }
}

#[test]
fn sizes_read_like_nccl_tests_suffixes() {
    assert_eq!(format_size(8), "8 B");
    assert_eq!(format_size(1 << 30), "1 GiB");
    assert_eq!(format_size(8589934592), "8 GiB");
    assert_eq!(format_size(134217728), "128 MiB");
    assert_eq!(format_size(1536), "1.5 KiB");
    assert_eq!(ibv_wc_status_name(12), Some("RETRY_EXC_ERR"));
}

/// One test of `rows` rows: its header, rows and footer (`Out of bounds values : oob`), and the
/// `Collective test concluded` line unless `open`.
fn one_test(name: &str, oob: u64, open: bool) -> String {
    let mut text = format!(
        "# Collective test starting: {name}
# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
  1073741824     268435456     float     sum      -1   4012.3  267.61  468.32       0   4005.1  268.09  469.16       0
"
    );
    if !open {
        text.push_str(&format!(
            "# Out of bounds values : {oob} {}\n# Avg bus bandwidth    : 468.74\n#\n# Collective test concluded: {name}\n",
            if oob == 0 { "OK" } else { "FAILED" }
        ));
    }
    text
}

/// Issue 28: past MAX_TABLES tables are counted, not kept (memory flat on a log of repeated
/// tests); the latest one is, for whether the log ended with its footer, and so is the first
/// failed `Out of bounds` footer among them. Before the cap every table was kept.
#[test]
fn tables_past_the_cap_are_counted_and_their_failures_kept() {
    let extra = 40;
    let mut text = String::new();
    for i in 0..MAX_TABLES + extra {
        // Test MAX_TABLES + 10 fails its check, test MAX_TABLES + 20 again; the last is cut.
        let oob = match i.checked_sub(MAX_TABLES) {
            Some(10) => 3,
            Some(20) => 5,
            _ => 0,
        };
        text.push_str(&one_test(
            &format!("t{i}_perf"),
            oob,
            i == MAX_TABLES + extra - 1,
        ));
    }
    let log = parse_log(&text);
    assert_eq!(log.tables.len(), MAX_TABLES);
    assert_eq!(log.dropped_tables, extra as u64);
    assert_eq!(
        log.rows.len(),
        MAX_TABLES,
        "rows of dropped tables are not kept"
    );
    assert_eq!(log.dropped_rows, extra as u64);
    assert!(log.rows.iter().all(|r| r.table < MAX_TABLES));
    assert!(log.tables.iter().all(|t| t.rows == 1 && t.has_footer()));
    // The last test printed no footer: the log says so, though its table is past the cap.
    let last = log.last_table().unwrap();
    let name = format!("t{}_perf", MAX_TABLES + extra - 1);
    assert_eq!(last.collective.as_deref(), Some(name.as_str()));
    assert!(!last.has_footer());
    let (n, quote) = log.dropped_out_of_bounds.as_ref().unwrap();
    assert_eq!(*n, 3);
    assert!(quote.text.contains(": 3 FAILED"), "{}", quote.text);
    let failed: Vec<u64> = log
        .out_of_bounds_footers()
        .map(|(n, _)| *n)
        .filter(|n| *n > 0)
        .collect();
    assert_eq!(failed, vec![3]);
    // Without a failure the first footer past the cap stands for them.
    let clean: String = (0..MAX_TABLES + 2)
        .map(|_| one_test("all_reduce_perf", 0, false))
        .collect();
    let log = parse_log(&clean);
    assert_eq!(log.dropped_tables, 2);
    assert_eq!(log.dropped_out_of_bounds.as_ref().map(|(n, _)| *n), Some(0));
    assert!(log.last_table().unwrap().has_footer());
    // At the cap exactly nothing is dropped.
    let full: String = (0..MAX_TABLES)
        .map(|_| one_test("all_reduce_perf", 0, false))
        .collect();
    let log = parse_log(&full);
    assert_eq!((log.tables.len(), log.dropped_tables), (MAX_TABLES, 0));
    assert_eq!(log.last_table(), log.tables.last());
    assert!(log.dropped_out_of_bounds.is_none());
}
