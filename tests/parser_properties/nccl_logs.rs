//! NCCL logs (nccl-tests output with NCCL_DEBUG=INFO lines): any input, cut into any chunks,
//! and real lines behind any launcher's prefix.

use super::*;

const NCCL_TOKENS: &[&str] = &[
    "# nccl-tests version 2.19.6\n",
    "# Collective test starting: all_reduce_perf\n",
    "#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
    "  8589934592    2147483648     float     sum      -1",
    "   35721.4  240.47  420.82      0",
    "      N/A",
    " 1e+05",
    "# Out of bounds values : 0 OK\n",
    "# Avg bus bandwidth    : 247.1\n",
    "hgx-h100-01:41234:41262 [0] NCCL INFO ",
    "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "Channel 00/0 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA",
    " via NET/Socket/0",
    "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB enp105s0f0np0:10.0.0.11<0>",
    "NET/Plugin: Could not find: libnccl-net.so.",
    "NVLS multicast support is available",
    "NCCL WARN NET/IB : Got completion from peer 10.0.0.12<38723> with status=12 opcode=0",
    "Test NCCL failure common.cu:1005 'unhandled system error'",
    "[1,0]<stdout>:",
    "[0] ",
    "0: ",
    "\n",
    "\n",
];

fn nccl_log(input: &(String, Vec<usize>)) {
    let (text, cuts) = input;
    // Whole, and cut into chunks at arbitrary byte offsets (a pipe delivers it so): the same log.
    let mut whole = nccl::NcclLogParser::new();
    whole.feed_bytes(text.as_bytes());
    let whole = whole.finish();
    let mut chunked = nccl::NcclLogParser::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    for cut in cuts {
        let end = (at + cut % 4096).min(bytes.len());
        chunked.feed_bytes(&bytes[at..end]);
        at = end;
    }
    chunked.feed_bytes(&bytes[at..]);
    assert_eq!(chunked.finish(), whole);
    let log = nccl::parse_log(text);
    let _ = (
        log.hosts(),
        log.nodes(),
        log.ranks(),
        log.largest_size(),
        log.has_info(),
    );
    let _ = log
        .peak_row(1 << 30)
        .map(|r| (r.peak_busbw(), r.wrong_count()));
    assert!(log.rows.len() <= nccl::MAX_ROWS);
}

#[test]
fn nccl_logs_never_panic_and_chunking_changes_nothing() {
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(repo().join("fixtures")).unwrap() {
        let dir = entry.unwrap().path().join(".gpudoctor/nccl");
        for log in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = log.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                samples.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    assert!(!samples.is_empty(), "no fixture has .gpudoctor/nccl/*.log");
    samples.extend(real_nccl_logs());
    property(
        "nccl log",
        move || {
            (
                inputs(NCCL_TOKENS, samples),
                prop::collection::vec(any::<usize>(), 0..16),
            )
        },
        nccl_log,
    );
    property(
        "nccl bytes",
        || {
            (
                prop::collection::vec(any::<u8>(), 0..2000),
                prop::collection::vec(any::<usize>(), 0..16),
            )
        },
        |(bytes, cuts)| {
            let mut parser = nccl::NcclLogParser::new();
            let mut at = 0;
            for cut in cuts {
                let end = (at + cut % 512).min(bytes.len());
                parser.feed_bytes(&bytes[at..end]);
                at = end;
            }
            parser.feed_bytes(&bytes[at..]);
            let log = parser.finish();
            assert!(log.lines as usize <= bytes.iter().filter(|b| **b == b'\n').count() + 1);
        },
    );
}

/// The real logs kept under tests/data/nccl/real (their README names the sources).
fn real_nccl_logs() -> Vec<String> {
    let dir = repo().join("tests/data/nccl/real");
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    logs.sort();
    assert!(logs.len() >= 10, "expected the real NCCL logs");
    logs
}

/// Launcher decorations (issue 15): what Slurm, Open MPI, SkyPilot, Ray, kubectl, pdsh, MPICH
/// and terminals put in front of a line (`i` is the line's index).
const DECORATIONS: [fn(usize) -> String; 11] = [
    |i| format!("{:>2}: ", i % 16),
    |i| format!("[1,{}]<stdout>:", i % 24),
    |i| format!("    [1,{}]<stderr>: ", i % 3),
    |_| "(head, rank=0, pid=3808) ".to_string(),
    |i| format!("(worker{i}, rank={i}, pid=2769, ip=10.100.10.12) "),
    |_| "2025-03-04T09:13:02.123456789Z ".to_string(),
    |_| "[pod/nccl-test-launcher-x7k2p/launcher] ".to_string(),
    |_| "gpu-node-07: ".to_string(),
    |i| format!("[{}] ", i % 8),
    |_| "\u{1b}[36m(RayWorkerWrapper pid=4009)\u{1b}[0m ".to_string(),
    |i| format!("[rank{}]:", i % 8),
];

/// A real log with up to two decorations in front of each line (`choices` picks them) parses to
/// the same facts as the log itself: the same rows, failures, timeouts, transports, hosts and
/// quotes (quotes are of the content); only the byte count differs.
fn decorated_lines_parse_the_same(input: &(String, Vec<(u8, u8)>)) {
    let (text, choices) = input;
    if choices.is_empty() {
        return;
    }
    let decorated: String = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let (a, b) = choices[i % choices.len()];
            let pick = |c: u8| -> String {
                match DECORATIONS.get(usize::from(c)) {
                    Some(make) => make(i),
                    None => String::new(),
                }
            };
            format!("{}{}{line}\n", pick(a), pick(b))
        })
        .collect();
    let mut plain = nccl::parse_log(text);
    let mut with = nccl::parse_log(&decorated);
    plain.bytes = 0;
    with.bytes = 0;
    if with != plain {
        // The differing facts, not two screens of them.
        let (a, b) = (format!("{with:#?}"), format!("{plain:#?}"));
        let diff: Vec<String> = a
            .lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .take(6)
            .map(|(x, y)| format!("decorated: {x}\n    plain: {y}"))
            .collect();
        panic!("{}\n\ndecorated log:\n{decorated}", diff.join("\n"));
    }
}

#[test]
fn nccl_real_lines_read_the_same_behind_any_launcher_prefix() {
    let logs = real_nccl_logs();
    // Indexes past DECORATIONS mean "none", so lines mix decorated and plain.
    let choice = 0u8..(DECORATIONS.len() as u8 + 4);
    property(
        "nccl decorated real logs",
        move || {
            (
                prop::sample::select(logs),
                prop::collection::vec((choice.clone(), choice), 0..64),
            )
        },
        decorated_lines_parse_the_same,
    );
}
