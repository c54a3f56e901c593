//! Launcher decorations in front of a line's content (reference/nccl.md §7, issue 15), peeled off
//! in any order and any number, whatever the leading whitespace and padding:
//! - Open MPI `--tag-output`: `[1,0]<stdout>:`, `[1,10]<stderr>:` (two-digit ranks), and
//!   `--timestamp-output`'s `ctime()` stamp glued before it or before a bare `<stdout>:`
//!   (`Sun Dec  6 16:08:51 2026[1,0]<stdout>:`);
//! - Slurm `srun --label`: the task number padded to the widest (` 0: `, `12: `), and ` 0:` alone
//!   on an empty line;
//! - per-rank markers `[0]` (Intel MPI/MPICH `-prepend-rank`, and nccl-tests' own output merged
//!   by a wrapper, `NVIDIA/nccl#1453`), torch's `[rank3]:`, `kubectl logs --prefix`'s
//!   `[pod/name/container]`, and a colour escape whose ESC a copy lost (`[36m`);
//! - parenthesised tool prefixes: SkyPilot `(head, rank=0, pid=3808)`,
//!   `(worker1, rank=1, pid=2769, ip=10.100.10.12)`, Ray `(RayWorkerWrapper pid=4009)`;
//! - RFC 3339 timestamps (`kubectl logs --timestamps`: `2024-05-01T12:34:56.123456789Z`);
//! - `pdsh`/`clush`-style `host: `.
//!
//! What is content stays: a row's size column (digits then spaces, never `12: `), the
//! `host:pid:tid` of an NCCL line (no space after the colon), nccl-tests' `host: Test NCCL
//! failure` (the host is the failure's evidence), NCCL's own `[2026-07-14 10:21:33]` WARN stamp.
//! Markers glued to fields inside a table row are the table reader's business
//! ([`super::table`]). Every test looks at the first bytes only: a long line costs no more than a
//! short one.

use super::bytemask;

/// The content of `line` without its launcher decorations.
pub fn strip(line: &str) -> &str {
    let mut rest = line;
    loop {
        let trimmed = rest.trim_ascii_start();
        let next = match trimmed.as_bytes().first() {
            Some(b'[') => bracket(trimmed),
            Some(b'(') => parenthesised(trimmed),
            Some(b'0'..=b'9') => slurm_label(trimmed).or_else(|| timestamp(trimmed)),
            Some(b) if b.is_ascii_alphabetic() => {
                ompi_timestamp(trimmed).or_else(|| host_label(trimmed))
            }
            _ => None,
        };
        match next {
            Some(after) => rest = after,
            None => return trimmed,
        }
    }
}

/// The first of `s`'s first `limit` bytes that is `byte`, 16 at a time ([`bytemask`]): a byte
/// loop over a host name or a tag was a tenth of the reading thread's work on an INFO log
/// behind launcher prefixes (issue 41, callgrind).
fn first_within(s: &str, limit: usize, byte: &[u8; 1]) -> Option<usize> {
    let b = s.as_bytes();
    // NUL: never a byte looked for here.
    bytemask::first_position(&b[..b.len().min(limit)], byte, 0)
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `[1,0]<stdout>:`, `[0]`, `[rank3]:`, `[pod/x/y]`, `[36m`.
fn bracket(s: &str) -> Option<&str> {
    let close = first_within(s, 128, b"]");
    let Some(close) = close else {
        return ansi_remnant(s);
    };
    let inside = &s[1..close];
    let after = &s[close + 1..];
    // A few bytes: a byte loop (a `split_once` set up a char searcher each line).
    let comma = inside.bytes().position(|b| b == b',');
    if let Some((job, rank)) = comma.map(|at| (&inside[..at], &inside[at + 1..]))
        && all_digits(job)
        && all_digits(rank)
    {
        for tag in ["<stdout>:", "<stderr>:", "<stddiag>:"] {
            if let Some(t) = after.strip_prefix(tag) {
                return Some(t);
            }
        }
        return None;
    }
    if all_digits(inside) {
        return Some(after);
    }
    if let Some(n) = inside.strip_prefix("rank")
        && all_digits(n)
    {
        return Some(after.strip_prefix(':').unwrap_or(after));
    }
    if inside.starts_with("pod/") && (after.is_empty() || after.starts_with(' ')) {
        return Some(after);
    }
    // torchrun's `--tee` prefix `[default0]:`: the worker role and its local rank
    // (torch/distributed/elastic/multiprocessing/api.py, `f"[{role}{local_rank}]:"`).
    let digits = inside.len() - inside.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let role = &inside[..inside.len() - digits];
    if digits > 0
        && !role.is_empty()
        && role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && let Some(t) = after.strip_prefix(':')
    {
        return Some(t);
    }
    ansi_remnant(s)
}

/// `[36m`, `[0;32m`, `[0m`: an SGR escape whose ESC byte was lost in a copy.
fn ansi_remnant(s: &str) -> Option<&str> {
    let body = s.strip_prefix('[')?;
    let end = body.bytes().take(16).position(|b| b == b'm')?;
    let params = &body[..end];
    let ok = !params.is_empty() && params.bytes().all(|b| b.is_ascii_digit() || b == b';');
    ok.then(|| &body[end + 1..])
}

/// `(head, rank=0, pid=3808) `, `(RayWorkerWrapper pid=4009) `.
fn parenthesised(s: &str) -> Option<&str> {
    let close = first_within(s, 160, b")")?;
    let inside = &s[1..close];
    let after = &s[close + 1..];
    // `contains("pid=")` without setting up a searcher for a few bytes.
    let inside = inside.as_bytes();
    let pid = memchr::memchr_iter(b'p', inside).any(|at| inside[at..].starts_with(b"pid="));
    (pid && (after.is_empty() || after.starts_with(' '))).then_some(after)
}

/// Slurm's `--label`: `0: `, `12: `, or `0:` at the end of an empty line.
fn slurm_label(s: &str) -> Option<&str> {
    // Counted up to 7: a result row's size (8 to 11 digits) is no label either way.
    let digits = s.bytes().take(7).take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 6 {
        return None;
    }
    let after = s[digits..].strip_prefix(':')?;
    (after.is_empty() || after.starts_with(' ')).then_some(after)
}

/// `2024-05-01T12:34:56Z `, `2024-05-01T12:34:56.123456789+02:00 ` (RFC 3339, as
/// `kubectl logs --timestamps` writes it).
fn timestamp(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    // The `-` first: a result row (digits, then spaces) fails there at once.
    let shape = b.len() >= 20
        && b[4] == b'-'
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':';
    if !shape {
        return None;
    }
    // The stamp ends at a space, or with the line (an empty line behind its stamp).
    let end = s.find(' ').unwrap_or(s.len());
    let zone = s.get(19..end)?;
    let zone_ok = zone.ends_with('Z') || zone.contains('+') || zone.rfind('-').is_some();
    if !zone_ok {
        return None;
    }
    // The kubelet's container log (CRI format): `<time> <stream> <tag> <log>`, the tag `F` for
    // a full line and `P` for a part of a longer one (kubernetes
    // pkg/kubelet/kuberuntime/logs/logs.go, `parseCRILog`).
    let rest = &s[end..];
    for stream in [" stdout ", " stderr "] {
        if let Some(t) = rest.strip_prefix(stream)
            && let Some(t) = t.strip_prefix("F ").or_else(|| t.strip_prefix("P "))
        {
            return Some(t);
        }
    }
    Some(rest)
}

/// Open MPI's `--timestamp-output` stamp: `ctime()` without its newline, glued to the tag
/// that follows it — `[jobid,vpid]<stdout>:` with `--tag-output` (left to [`bracket`]), else a
/// bare `<stdout>:`/`<stderr>:`/`<stddiag>:` (Open MPI 4.1 orte/mca/iof/base/iof_base_output.c,
/// `orte_iof_base_write_output`: `"%s[%s,%s]<%s>:"` and `"%s<%s>:"` with `cptr = ctime(&mytime)`).
/// `ctime` writes `Www Mmm dd hh:mm:ss yyyy`, the day padded with a space (C11 7.27.3.1,
/// `asctime`'s `"%.3s %.3s%3d %.2d:%.2d:%.2d %d"`).
fn ompi_timestamp(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    if b.len() < 25 || b[3] != b' ' || b[7] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let day_ok = matches!(b[8], b' ' | b'0'..=b'3') && b[9].is_ascii_digit() && b[10] == b' ';
    let clock_ok = [11, 12, 14, 15, 17, 18]
        .iter()
        .all(|&i| b[i].is_ascii_digit());
    let weekday = &s[..3];
    let month = &s[4..7];
    const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    if !day_ok || !clock_ok || b[19] != b' ' || !WEEKDAYS.contains(&weekday) {
        return None;
    }
    if !MONTHS.contains(&month) {
        return None;
    }
    let year = b[20..].iter().take_while(|c| c.is_ascii_digit()).count();
    if year < 4 {
        return None;
    }
    let after = &s[20 + year..];
    if after.starts_with('[') {
        // `--tag-output` too: its tag is peeled next.
        return Some(after);
    }
    ["<stdout>:", "<stderr>:", "<stddiag>:"]
        .iter()
        .find_map(|tag| after.strip_prefix(tag))
}

/// `line` without the Open MPI tags glued inside it (`[1,0]<stdout>:`, with or without
/// `--timestamp-output`'s stamp before it), or `None` when it holds none. The tag is written
/// at the start of every chunk mpirun reads from a rank's pipe, and a chunk may end mid-line
/// (orte_iof_base_write_output: the start tag, then the chunk's bytes, the tag again after
/// each newline): a row printed in two writes comes out as `  4294967296  67108864  float  Sun
/// Dec  6 16:28:29 2026[1,0]<stdout>:  none  -1 …` (tests/data/judge/ompi-4.1.4_*).
pub fn without_glued_tags(line: &str) -> Option<String> {
    let mut out = String::new();
    let mut from = 0;
    let mut found = false;
    let b = line.as_bytes();
    let mut i = 0;
    while let Some(at) = memchr::memchr(b'<', &b[i..]).map(|p| p + i) {
        let rest = &line[at..];
        let Some(tag) = ["<stdout>:", "<stderr>:", "<stddiag>:"]
            .iter()
            .find(|t| rest.starts_with(**t))
        else {
            i = at + 1;
            continue;
        };
        let mut start = at;
        // `[jobid,vpid]` before the stream.
        if line[..start].ends_with(']')
            && let Some(open) = line[..start].rfind('[')
            && bracket(&line[open..]).is_some()
        {
            start = open;
        }
        // The stamp before that: `Www Mmm dd hh:mm:ss yyyy` (a four-digit year).
        if start >= 24 && line.is_char_boundary(start - 24) {
            let stamp = &line[start - 24..];
            if ompi_timestamp(stamp).is_some() {
                start -= 24;
            }
        }
        if start < from {
            start = from;
        }
        out.push_str(&line[from..start]);
        from = at + tag.len();
        i = from;
        found = true;
    }
    found.then(|| {
        out.push_str(&line[from..]);
        out
    })
}

/// `pdsh`'s `node01: ` in front of each line. Not nccl-tests' `host: Test NCCL failure …`: there
/// the host is content.
fn host_label(s: &str) -> Option<&str> {
    // The label ends at the first `:` (its characters hold none), which a space or the line's
    // end must follow: most lines (an NCCL line's `host:pid:tid`) fail that before their name
    // is read.
    let b = s.as_bytes();
    let colon = first_within(s, 66, b":")?;
    if !matches!(b.get(colon + 1), None | Some(b' ')) {
        return None;
    }
    let len = s
        .bytes()
        .take(65)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        .count();
    if len == 0 || len > 64 {
        return None;
    }
    let rest = &s[len..];
    if rest == ":" {
        // An empty line behind its label.
        return Some("");
    }
    let after = rest.strip_prefix(": ")?;
    if after.trim_start().starts_with("Test ") {
        return None;
    }
    Some(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peels_every_launcher_decoration_in_any_order() {
        let content = "#  Rank  0 Group  0 Pid   7774 on nc-d87e1263-head device  0";
        for decorated in [
            // SkyPilot in front of Open MPI (skypilot-org/skypilot examples/gcp_gpu_direct_tcpx).
            format!("(head, rank=0, pid=3808) [1,0]<stdout>:{content}"),
            format!("    [1,0]<stdout>:{content}"),
            format!("[1,10]<stderr>:{content}"),
            format!(" 0: {content}"),
            format!("12: {content}"),
            format!("[0] [0] {content}"),
            format!("[rank3]:{content}"),
            format!("[pod/nccl-launcher-x/launcher] {content}"),
            format!("2024-05-01T12:34:56.123456789Z {content}"),
            format!("2024-05-01T12:34:56+02:00 12: {content}"),
            format!("node01: [1,0]<stdout>:{content}"),
            format!("[36m(RayWorkerWrapper pid=4009) {content}"),
            format!("(worker1, rank=1, pid=2769, ip=10.100.10.12) {content}"),
        ] {
            assert_eq!(strip(&decorated), content, "{decorated}");
        }
        assert_eq!(strip(" 0:"), "");
        assert_eq!(strip("gpu-node-07:"), "");
        assert_eq!(strip("2025-03-04T09:13:02Z"), "");
        assert_eq!(strip("[pod/nccl-launcher-x/launcher]"), "");
    }

    #[test]
    fn torchrun_roles_and_cri_log_lines() {
        // torchrun --tee 3: `[default0]:` before every line of local rank 0.
        assert_eq!(
            strip("[default0]:#  Rank  0 Group  0 Pid  12 on node1 device  0 [0x18] NVIDIA H100"),
            "#  Rank  0 Group  0 Pid  12 on node1 device  0 [0x18] NVIDIA H100"
        );
        assert_eq!(strip("[trainer12]: 8 2 float"), "8 2 float");
        // A container log file as the kubelet keeps it (CRI-O's own, cri-o#3181, shape).
        assert_eq!(
            strip(
                "2020-01-26T03:17:29.346494690+00:00 stderr F 2020/01/26 03:17:29 provider.go:117: x"
            ),
            "2020/01/26 03:17:29 provider.go:117: x"
        );
        assert_eq!(
            strip("2026-01-06T10:00:00.123456789Z stdout F #  Rank  0 Group  0"),
            "#  Rank  0 Group  0"
        );
        // Open MPI 4.1.4's `mpirun --timestamp-output` (tests/data/judge/SOURCES.md).
        let real = std::fs::read_to_string(format!(
            "{}/tests/data/judge/ompi-4.1.4_timestamp-output_echo-hi_debian.txt",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert_eq!(strip(real.trim_end()), "hi");
        assert_eq!(strip("Sun Dec  6 16:08:51 2026<stdout>:hi"), "hi");
        assert_eq!(
            strip("Sun Dec  6 16:08:51 2026[1,0]<stderr>:#  Rank  0 Group  0"),
            "#  Rank  0 Group  0"
        );
        assert_eq!(
            strip("Tue Nov 18 09:05:07 2025[1,12]<stdout>:node1:12:12 [4] NCCL INFO x"),
            "node1:12:12 [4] NCCL INFO x"
        );
        // A date that is content, or a stamp without Open MPI's tag, stays.
        assert_eq!(
            strip("Sun Dec  6 16:08:51 2026 hi"),
            "Sun Dec  6 16:08:51 2026 hi"
        );
        assert_eq!(
            strip("Sun Dex  6 16:08:51 2026<stdout>:hi"),
            "Sun Dex  6 16:08:51 2026<stdout>:hi"
        );
        // Not a role: no digits, or no colon after it.
        assert_eq!(strip("[default]: x"), "[default]: x");
        assert_eq!(strip("[abc1] x"), "[abc1] x");
    }

    #[test]
    fn tags_glued_inside_a_line_are_cut_out() {
        // Open MPI 4.1.4, a row split across two reads of the rank's pipe (tests/data/judge/
        // ompi-4.1.4_timestamp-output_tag-output_gcp-h200-two-node-all-gather.log, line 51).
        assert_eq!(
            without_glued_tags(
                "  4294967296      67108864     float  Sun Dec  6 16:28:29 2026[1,0]<stdout>:  none      -1    12400"
            )
            .as_deref(),
            Some("  4294967296      67108864     float    none      -1    12400")
        );
        assert_eq!(
            without_glued_tags("abc[1,12]<stderr>:def").as_deref(),
            Some("abcdef")
        );
        assert_eq!(
            without_glued_tags("abcSun Dec  6 16:09:10 2026<stdout>:def").as_deref(),
            Some("abcdef")
        );
        assert_eq!(
            without_glued_tags("NET/Socket : Using [0]eth0:10.0.0.1<0>"),
            None
        );
        assert_eq!(without_glued_tags("plain"), None);
    }

    #[test]
    fn content_stays() {
        for content in [
            "  8589934592    2147483648     float     sum      -1  34012.1  252.55",
            "node2:1208:1208 [0] NCCL INFO NET/Socket : Using [0]ibp5s0:<0>",
            "GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error'",
            "[2026-07-14 10:21:33] node-a:2231:2290 [3] NCCL WARN NET/IB : Got completion",
            "13:21:12 something",
            "Out of bounds values : 0 OK",
            "(base) gandiva@v100-gpu-1:~/nccl-tests$ mpirun",
            "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout",
        ] {
            assert_eq!(strip(content), content.trim_start(), "{content}");
        }
        // Stripped to content that still names its host.
        assert_eq!(
            strip("[1,0]<stdout>:node0: Test CUDA failure common.cu:389 'x'"),
            "node0: Test CUDA failure common.cu:389 'x'"
        );
    }
}
