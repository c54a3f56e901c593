//! Lines that say something went wrong: nccl-tests' failure lines (reference/nccl.md §5),
//! NCCL's `WARN` lines and IB completion errors (§9, §11), and what an application prints when
//! a collective fails — PyTorch's ProcessGroupNCCL watchdog timeouts and NCCL error strings in
//! exceptions (`torch.distributed.DistBackendError: NCCL error in: …, unhandled system error`).

use super::model::{CollectiveTimeout, FailureKind, IbCompletion, Quoted, TestFailure};
use super::scan::Needle;
use super::{MAX_QUOTES, NcclLogParser, TEST};

// Searched in every failure, unwinding and WARN line of a log: set up once (scan::Needle).
static IBVERBS: Needle = Needle::new("Failed to open libibverbs");
static NVLS_BIND: Needle = Needle::new("Failed to bind NVLink SHARP");
static COMPLETION: Needle = Needle::new("Got completion");
static FALLING_BACK: Needle = Needle::new("falling back");
/// What makes a WARN an error report (lower case), [`reports_error`].
static ERROR_WORDS: [Needle; 14] = [
    Needle::new("error"),
    Needle::new("fail"),
    Needle::new("timeout"),
    Needle::new("timed out"),
    Needle::new("abort"),
    Needle::new("got completion"),
    Needle::new("unhandled"),
    Needle::new("invalid"),
    Needle::new("closed"),
    Needle::new("refused"),
    Needle::new("unreachable"),
    Needle::new("mismatch"),
    Needle::new("truncated"),
    Needle::new("corrupt"),
];

/// NCCL's error strings (`ncclGetErrorString`, §11) and the enum names applications print
/// (searched in every line of no other shape: set up once, not per call as `str::contains`).
static NCCL_ERRORS: [Needle; 9] = [
    Needle::new("unhandled system error"),
    Needle::new("unhandled cuda error"),
    Needle::new("remote process exited or there was a network error"),
    Needle::new("internal error - please report"),
    Needle::new("ncclSystemError"),
    Needle::new("ncclUnhandledCudaError"),
    Needle::new("ncclInternalError"),
    Needle::new("ncclRemoteError"),
    Needle::new("NCCL error in:"),
];

/// What the watchdog says (torch `ProcessGroupNCCL.cpp`, every release since 1.8).
static WATCHDOG: Needle = Needle::new("Watchdog caught collective operation timeout");

impl NcclLogParser {
    /// `host: Test NCCL failure common.cu:1057 'internal error / '` and siblings; also when a
    /// row's head is printed before it (`NVIDIA/nccl-tests#355`: `… float none -1 node0: Test
    /// CUDA failure …`).
    pub(super) fn failure(&mut self, line: &str) -> bool {
        // Where each shape first occurs, from one walk over the line's `: Test `s (three
        // searches of the line before, issue 41); the first shape found in this order wins.
        let shapes = [
            (": Test NCCL failure ", FailureKind::Nccl),
            (": Test CUDA failure ", FailureKind::Cuda),
            (": Test timeout ", FailureKind::Timeout),
        ];
        let mut first: [Option<usize>; 3] = [None; 3];
        let bytes = line.as_bytes();
        let mut from = 0;
        while let Some(at) = TEST.find_from(bytes, from) {
            for ((marker, _), slot) in shapes.iter().zip(&mut first) {
                if slot.is_none() && bytes[at..].starts_with(marker.as_bytes()) {
                    *slot = Some(at);
                }
            }
            from = at + 1;
        }
        for ((marker, kind), pos) in shapes.into_iter().zip(first) {
            let Some(pos) = pos else {
                continue;
            };
            self.log.failure_count += 1;
            // Past the cap a failure is only counted: nothing cut out of it.
            if self.log.failures.len() >= MAX_QUOTES {
                return true;
            }
            let host = line[..pos]
                .split_whitespace()
                .next_back()
                .unwrap_or_default()
                .to_string();
            let rest = &line[pos + marker.len()..];
            let (location, error) = match kind {
                FailureKind::Timeout => {
                    // `(300s) common.cu:123`
                    let after = rest.split_once(')').map_or(rest, |(_, r)| r);
                    (first_token(after).to_string(), String::new())
                }
                _ => {
                    let error = match (rest.find('\''), rest.rfind('\'')) {
                        (Some(a), Some(b)) if b > a => rest[a + 1..b].to_string(),
                        _ => String::new(),
                    };
                    (first_token(rest).to_string(), error)
                }
            };
            let quote = self.quote(line);
            self.log.failures.push(TestFailure {
                kind,
                host,
                location,
                error,
                quote,
            });
            return true;
        }
        false
    }

    /// `… NCCL WARN <text>` (`text` after the marker).
    pub(super) fn warn(&mut self, text: &str, line: &str) {
        self.log.warning_count += 1;
        // Quoted only where kept: past the caps a WARN line is only counted.
        let number = self.log.lines;
        let quote = || Quoted::new(number, line);
        let ibverbs = IBVERBS.is_in(text);
        if ibverbs {
            self.log.ibverbs_missing.get_or_insert_with(quote);
        }
        if NVLS_BIND.is_in(text) {
            self.log.nvls_bind_failure.get_or_insert_with(quote);
        }
        if COMPLETION.is_in(text) {
            self.log.ib_completion_count += 1;
            if self.log.ib_completions.len() < MAX_QUOTES {
                self.log.ib_completions.push(IbCompletion {
                    status: completion_status(text),
                    quote: quote(),
                });
            }
        }
        // A missing libibverbs is the socket-fallback finding's business, not an error here.
        if !ibverbs && reports_error(text, &mut self.lower) {
            self.log.error_warning_count += 1;
            if self.log.error_warnings.len() < MAX_QUOTES {
                self.log.error_warnings.push(quote());
            }
        }
        if self.log.warnings.len() < MAX_QUOTES {
            self.log.warnings.push(quote());
        }
    }

    /// An application's line: a watchdog timeout or an NCCL error string. `true` when it was.
    pub(super) fn application_error(&mut self, line: &str) -> bool {
        if let Some(at) = WATCHDOG.find(line) {
            self.log.timeout_count += 1;
            let timeout = watchdog(line, at, self.quote(line));
            // "Process group watchdog thread terminated with exception: [Rank 1] Watchdog
            // caught …" repeats the same work item: kept once.
            let seen = self
                .log
                .timeouts
                .iter()
                .any(|t| t.rank == timeout.rank && t.seq == timeout.seq && t.op == timeout.op);
            if !seen && self.log.timeouts.len() < MAX_QUOTES {
                self.log.timeouts.push(timeout);
            }
            return true;
        }
        if NCCL_ERRORS.iter().any(|e| e.is_in(line)) {
            self.log.app_error_count += 1;
            if self.log.app_errors.len() < MAX_QUOTES {
                let quote = self.quote(line);
                self.log.app_errors.push(quote);
            }
            return true;
        }
        false
    }
}

/// A WARN that reports a failure (an error code, a failed call, a timeout, an IB completion
/// error) rather than advice (`Could not find a path for pattern 4, falling back to simple
/// order`, `NVIDIA/nccl-tests#287`).
/// `lower` is a buffer for the lower-cased text, reused from line to line.
fn reports_error(text: &str, lower: &mut String) -> bool {
    lower.clear();
    lower.push_str(text);
    lower.make_ascii_lowercase();
    !FALLING_BACK.is_in(lower) && ERROR_WORDS.iter().any(|e| e.is_in(lower))
}

/// `[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST,
/// NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800000 milliseconds before timing out.`
fn watchdog(line: &str, at: usize, quote: super::model::Quoted) -> CollectiveTimeout {
    let before = &line[..at];
    let rank = before
        .rfind("[Rank ")
        .and_then(|i| number_after(&before[i + "[Rank ".len()..]))
        .and_then(|n| u32::try_from(n).ok());
    let after = &line[at..];
    let field = |key: &str| -> Option<&str> {
        let start = after.find(key)? + key.len();
        let rest = &after[start..];
        let end = rest.find([',', ')']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    };
    CollectiveTimeout {
        rank,
        seq: field("SeqNum=").and_then(|v| v.parse().ok()),
        op: field("OpType=").map(str::to_string),
        timeout_ms: field("Timeout(ms)=").and_then(|v| v.parse().ok()),
        ran_ms: after
            .find("ran for ")
            .and_then(|i| number_after(&after[i + "ran for ".len()..])),
        quote,
    }
}

fn number_after(text: &str) -> Option<u64> {
    let digits: &str = &text[..text.bytes().take_while(u8::is_ascii_digit).count()];
    digits.parse().ok()
}

fn first_token(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

/// The `ibv_wc_status` number in a `Got completion` line, any vintage (§11):
/// `status=transport retry counter exceeded(12)`, `status=12`, `with error 12,`.
fn completion_status(text: &str) -> Option<u32> {
    if let Some(rest) = text.split("status=").nth(1) {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() {
            return digits.parse().ok();
        }
        let open = rest.find('(')?;
        let close = rest[open..].find(')')? + open;
        return rest[open + 1..close].trim().parse().ok();
    }
    let rest = text.split("with error ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::parse_log;

    /// PyTorch watchdog lines, old (`[E ProcessGroupNCCL.cpp:458]`, `pytorch/pytorch#118369`)
    /// and new (`[rank3]:[E1119 …]`, `Lightning-AI/pytorch-lightning#20434`), and an exception
    /// carrying an NCCL error string.
    #[test]
    fn application_failures_are_collected() {
        let text = "\
[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.
[rank3]:[E1119 13:21:12.512781555 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800000 milliseconds before timing out.
(RayWorkerWrapper pid=4009) [rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800000 milliseconds before timing out.
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
node:1:1 [0] graph/search.cc:1135 NCCL WARN Could not find a path for pattern 4, falling back to simple order
node:1:1 [1] enqueue.cc:1500 NCCL WARN Cuda failure 1 'invalid argument'
";
        let log = parse_log(text);
        assert_eq!(log.timeout_count, 3);
        assert_eq!(log.timeouts.len(), 2, "{:#?}", log.timeouts);
        let t = &log.timeouts[1];
        assert_eq!(t.rank, Some(3));
        assert_eq!(t.op.as_deref(), Some("BROADCAST"));
        assert_eq!((t.timeout_ms, t.ran_ms), (Some(1_800_000), Some(1_800_000)));
        assert_eq!(log.timeouts[0].ran_ms, Some(25_624_887));
        assert_eq!(log.app_error_count, 1);
        assert_eq!(log.warning_count, 2);
        assert_eq!(log.error_warning_count, 1);
        assert!(log.error_warnings[0].text.contains("Cuda failure"));
    }

    #[test]
    fn a_failure_after_a_rows_head_names_its_host() {
        let log = parse_log(
            "     2097152         32768     float    none      -1 node0: Test CUDA failure common.cu:389 'an illegal memory access was encountered'\n",
        );
        assert_eq!(log.failures[0].host, "node0");
        assert_eq!(log.failures[0].location, "common.cu:389");
        assert_eq!(
            log.failures[0].error,
            "an illegal memory access was encountered"
        );
    }
}
