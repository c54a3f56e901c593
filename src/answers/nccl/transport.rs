//! `NCCL INFO` lines (reference/nccl.md §9, §10): which transport each channel took (`via
//! P2P/…`, `SHM/…`, `NET/<net>/<dev>[/GDRDMA]`), the network and plugin NCCL chose, GPUDirect
//! RDMA and NVLS support, environment overrides, and the run's shape (`nNodes`, `nranks`).
//! The same lines come from nccl-tests and from any NCCL application.
//!
//! Every line of a big log with `NCCL_DEBUG=INFO` passes here, so the common cases (channel
//! lines) are decided on their first bytes, and nothing is allocated for a line that is only
//! counted.

use super::bytemask;
use super::model::{NetUse, Quoted};
use super::scan::Needle;
use super::{MAX_HOSTS, MAX_QUOTES, NcclLogParser};

/// `host:pid:tid` tokens remembered (`NcclLogParser::note_host`): a node's threads.
pub(super) const RECENT_TOKENS: usize = 8;

// The substrings INFO lines are searched for, set up once.
static NO_DEVICE: Needle = Needle::new("No device found");
static USING: Needle = Needle::new("Using");
static LOADED_PLUGIN: Needle = Needle::new("Loaded net plugin ");
static SET_BY_ENV: Needle = Needle::new(" set by environment to ");
/// The counts `comm … nRanks 16 nNodes 2` gives, by the word before them.
static SHAPE_WORDS: [Needle; 3] = [
    Needle::new("nNodes"),
    Needle::new("nRanks"),
    Needle::new("nranks"),
];

/// Which of the substrings the last clauses of [`NcclLogParser::info`] look for are in an INFO
/// line (bits below). Most INFO lines of a big log are none of them; one search each cost a
/// sixth of the run (perf), so all are found in one pass for a byte each must hold at a known
/// place (`v`, `k`, `N`, `G`), checked there. Exact: every occurrence of a needle has its byte
/// where it is looked for (`found_matches_contains`). The pass compares 16 bytes at a time
/// ([`bytemask`](super::bytemask)): two `memchr` passes paid a call per hit, 3 instructions a
/// byte of an INFO-dense log (issue 41, callgrind).
const GDR_ENABLED: u8 = 1;
const GDR_DISABLED: u8 = 2;
const NVLS_CHANNELS: u8 = 4;
const SET_BY_ENVIRONMENT: u8 = 8;
const SHAPE: u8 = 16;

pub(super) fn found(text: &str) -> u8 {
    let b = text.as_bytes();
    // Whether `needle` occurs with its byte `at` at `pos`. The byte after that one (every
    // needle has one) is compared first: most anchors are letters of other words.
    let at = |pos: usize, at: usize, needle: &[u8]| {
        pos >= at
            && b.get(pos + 1) == needle.get(at + 1)
            && b.get(pos - at..)
                .is_some_and(|rest| rest.starts_with(needle))
    };
    let mut bits = 0;
    // Padded with a byte none of them is.
    bytemask::each_position(b, b"vkNG", 0, |pos| {
        bits |= match b[pos] {
            b'v' if at(pos, 2, b" nvls channels") => NVLS_CHANNELS,
            b'v' if at(pos, 10, b" set by environment to ") => SET_BY_ENVIRONMENT,
            b'k' if at(pos, 4, b"nRanks ") || at(pos, 4, b"nranks ") => SHAPE,
            b'N' if at(pos, 1, b"nNodes ") => SHAPE,
            b'G' if at(pos, 0, b"GPU Direct RDMA Enabled for HCA") => GDR_ENABLED,
            b'G' if at(pos, 0, b"GPU Direct RDMA Disabled for HCA") => GDR_DISABLED,
            _ => 0,
        };
    });
    bits
}

/// For each whole word `nNodes`, `nRanks`, `nranks` in `text`, the number in the word after it
/// (as `(word, n)`): what walking `split_whitespace` and parsing each word after one of them
/// gives, without splitting the whole line.
///
/// No needle can overlap itself, so the successive searches this stood for found every
/// occurrence: here every occurrence is found from one pass over the bytes each must hold at a
/// known place (`N` of `nNodes`, `k` of `nRanks` and `nranks`), as in [`found`]; the order the
/// counts come in does not matter (their maximum is kept).
fn shape_counts(text: &str, mut each: impl FnMut(usize, u32)) {
    let b = text.as_bytes();
    let mut occurrences = [(0usize, 0usize); 8];
    let mut n = 0;
    let mut more = false;
    bytemask::each_position(b, b"Nk", 0, |pos| {
        let found = match b[pos] {
            b'N' if pos >= 1 && b[pos - 1..].starts_with(b"nNodes") => Some((0, pos - 1)),
            b'k' if pos >= 4 && b[pos - 4..].starts_with(b"nRanks") => Some((1, pos - 4)),
            b'k' if pos >= 4 && b[pos - 4..].starts_with(b"nranks") => Some((2, pos - 4)),
            _ => None,
        };
        if let Some(found) = found {
            match occurrences.get_mut(n) {
                Some(slot) => *slot = found,
                None => more = true,
            }
            n += 1;
        }
    });
    if more {
        // A line of more than 8 (none seen): the searches themselves.
        return shape_counts_searched(text, each);
    }
    for &(which, start) in &occurrences[..n] {
        shape_count_at(text, which, start, &mut each);
    }
}

/// The count after the word `SHAPE_WORDS[which]` at `start`, when it is a whole word followed by
/// one.
fn shape_count_at(text: &str, which: usize, start: usize, each: &mut impl FnMut(usize, u32)) {
    let end = start + "nNodes".len();
    let before_ok = text[..start]
        .chars()
        .next_back()
        .is_none_or(char::is_whitespace);
    let rest = &text[end..];
    if !before_ok || !rest.starts_with(char::is_whitespace) {
        return;
    }
    let next = rest.split_whitespace().next().unwrap_or("");
    if let Ok(n) = next.parse::<u32>() {
        each(which, n);
    }
}

/// [`shape_counts`] by searching for each word in turn.
fn shape_counts_searched(text: &str, mut each: impl FnMut(usize, u32)) {
    for (which, needle) in SHAPE_WORDS.iter().enumerate() {
        let mut from = 0;
        while let Some(at) = needle.find(&text[from..]) {
            let start = from + at;
            let end = start + "nNodes".len();
            from = end;
            let before_ok = text[..start]
                .chars()
                .next_back()
                .is_none_or(char::is_whitespace);
            let rest = &text[end..];
            if !before_ok || !rest.starts_with(char::is_whitespace) {
                continue;
            }
            let next = rest.split_whitespace().next().unwrap_or("");
            if let Ok(n) = next.parse::<u32>() {
                each(which, n);
            }
        }
    }
}

/// Whether `prefix` starts with `token` and the token ends there (at a space, a carriage return
/// or the prefix's end). The byte after it and its last 8 bytes are compared first: most tokens
/// looked at are another rank's of the same host, alike in their first bytes, and a `memcmp`
/// call a token was 6 % of the parser's thread on an INFO log of many hosts (issue 41,
/// callgrind).
fn starts_with_token(prefix: &[u8], token: &[u8]) -> bool {
    let len = token.len();
    if !matches!(prefix.get(len), None | Some(b' ' | b'\r')) {
        return false;
    }
    let Some(head) = prefix.get(..len) else {
        return false;
    };
    let last8 = |b: &[u8]| {
        b.get(len.saturating_sub(8)..)
            .and_then(|t| <[u8; 8]>::try_from(t).ok())
    };
    if len >= 8 && last8(head) != last8(token) {
        return false;
    }
    head == token
}

impl NcclLogParser {
    /// Remember the `host` of a `host:pid:tid [dev] NCCL …` prefix (`prefix` is the text before
    /// `NCCL`); returns where that prefix starts in it, when found.
    pub(super) fn note_host(&mut self, prefix: &str) -> Option<usize> {
        let bytes = prefix.as_bytes();
        if self.repeats_last_host(bytes) {
            return Some(0);
        }
        // Another host's token seen lately at the start (ranks of several nodes interleave):
        // its host is known, and was noted when it was first seen; one comparison instead of
        // the walk below and a lookup in `info_hosts` (noting hosts was 12 % of an INFO-dense
        // run, perf).
        let hit = self
            .recent_tokens
            .iter()
            .position(|(token, _)| starts_with_token(bytes, token));
        if let Some(i) = hit {
            let len = self.recent_tokens[i].1;
            self.recent_tokens.swap(0, i);
            // The host ends at an ASCII `:`: a char boundary.
            let host = prefix.get(..len).unwrap_or_default();
            if self.last_host != host {
                self.last_host.clear();
                self.last_host.push_str(host);
            }
            return Some(0);
        }
        let mut start = 0;
        while start < bytes.len() {
            // Tokens end at a space, or at a carriage return that redrew the line.
            let end = bytes[start..]
                .iter()
                .position(|&b| b == b' ' || b == b'\r')
                .map_or(bytes.len(), |i| start + i);
            if let Some(len) = host_of(&bytes[start..end]) {
                let host = &prefix[start..start + len];
                if self.last_host != host {
                    self.last_host.clear();
                    self.last_host.push_str(host);
                    if self.log.info_hosts.len() < MAX_HOSTS && !self.log.info_hosts.contains(host)
                    {
                        self.log.info_hosts.insert(host.to_string());
                    }
                }
                if start == 0 {
                    self.remember_token(&bytes[..end], len);
                }
                return Some(start);
            }
            start = end + 1;
        }
        None
    }

    /// Whether `prefix` starts with the token `<last host>:<digits>:<digits>` (most NCCL lines
    /// of a log repeat the host of the line before): then the walk of
    /// [`note_host`](Self::note_host) would find that very host in its first token and change
    /// nothing. Checked in one pass over the token's bytes instead of splitting it.
    fn repeats_last_host(&self, prefix: &[u8]) -> bool {
        let host = self.last_host.as_bytes();
        // The host was cut from a token at its first `:`: it holds no `:`, space or `\r`, so
        // the token's first `:` is the one after it, as `host_of` cuts it.
        if host.is_empty() || !prefix.starts_with(host) || prefix.get(host.len()) != Some(&b':') {
            return false;
        }
        let digits = |from: usize| {
            let mut end = from;
            while prefix.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            end
        };
        let pid_end = digits(host.len() + 1);
        if pid_end == host.len() + 1 || prefix.get(pid_end) != Some(&b':') {
            return false;
        }
        let tid_end = digits(pid_end + 1);
        // The token ends where the walk ends it: at a space, a carriage return, or the end.
        tid_end > pid_end + 1 && matches!(prefix.get(tid_end), None | Some(b' ' | b'\r'))
    }

    /// Keep `token`, a `host:pid:tid` whose host (`host_len` bytes) was just noted, among the
    /// [`RECENT_TOKENS`] last ones (the oldest goes, its buffer reused).
    fn remember_token(&mut self, token: &[u8], host_len: usize) {
        let mut slot = if self.recent_tokens.len() == RECENT_TOKENS {
            self.recent_tokens.pop().unwrap_or_default()
        } else {
            (Vec::new(), 0)
        };
        slot.0.clear();
        slot.0.extend_from_slice(token);
        slot.1 = host_len;
        self.recent_tokens.insert(0, slot);
    }

    /// The channel counts gathered while reading, into the facts (kept in short lists while
    /// reading: a few entries, looked up on every channel line).
    pub(super) fn finish_transports(&mut self) {
        let t = &mut self.log.transports;
        for (name, net) in self.nets.drain(..) {
            t.net.insert(name, net);
        }
        for (flavour, n) in self.p2p_flavours.drain(..) {
            t.p2p_kinds.insert(flavour, n);
        }
    }

    /// One `NCCL INFO` line: `text` after the marker, `line` the whole (for quotes);
    /// `found_bits` what [`found`] gives for the trimmed text, when already known.
    pub(super) fn info(&mut self, text: &str, line: &str, mut found_bits: Option<u8>) {
        self.log.info_lines += 1;
        let text = text.trim_ascii();
        // Quoted only where kept: most INFO lines are channel lines whose example is taken.
        let number = self.log.lines;
        let quote = || Quoted::new(number, line);
        let t = &mut self.log.transports;
        // The substrings the later clauses look for, found once when first needed.
        if text.starts_with("Channel") || text.starts_with("Ring") {
            let Some(via) = via_path(text) else {
                return;
            };
            let (kind, rest) = split_slash(via);
            match kind {
                "P2P" => {
                    t.p2p.channels += 1;
                    t.p2p.example.get_or_insert_with(quote);
                    let flavour = split_slash(rest).0.trim();
                    match self.p2p_flavours.iter_mut().find(|(k, _)| k == flavour) {
                        Some((_, n)) => *n += 1,
                        None => self.p2p_flavours.push((flavour.to_string(), 1)),
                    }
                }
                "SHM" => {
                    t.shm.channels += 1;
                    t.shm.example.get_or_insert_with(quote);
                }
                "NET" => {
                    let (name, devices) = split_slash(rest);
                    let name = name.trim();
                    let gdr = devices.contains("GDRDMA");
                    let at = match self.nets.iter().position(|(k, _)| k == name) {
                        Some(at) => at,
                        None => {
                            self.nets.push((name.to_string(), NetUse::default()));
                            self.nets.len() - 1
                        }
                    };
                    let Some((_, net)) = self.nets.get_mut(at) else {
                        return;
                    };
                    net.channels += 1;
                    if gdr {
                        net.gdr_channels += 1;
                    } else if net.example_without_gdr.is_none() {
                        net.example_without_gdr = Some(quote());
                    }
                    net.example.get_or_insert_with(quote);
                }
                _ => {}
            }
        } else if let Some(name) = text.strip_prefix("Using network ") {
            t.network = Some((name.trim().to_string(), quote()));
        } else if text.starts_with("NET/IB") && NO_DEVICE.is_in(text) {
            t.ib_no_device = Some(quote());
        } else if text.starts_with("NET/IB") && USING.is_in(text) {
            t.ib_devices = Some(quote());
        } else if text.starts_with("NET/Socket") && USING.is_in(text) {
            t.socket_interfaces = Some(quote());
        } else if text.starts_with("NET/Plugin") {
            if let Some((_, rest)) = LOADED_PLUGIN.split_once(text) {
                let name = rest.split(" (").next().unwrap_or(rest).trim().to_string();
                t.plugin = Some((name, quote()));
            } else if text.contains("Could not find")
                || text.contains("No plugin found")
                || text.contains("Plugin load returned")
            {
                t.plugin_absent = true;
            }
        } else if found_in(&mut found_bits, text) & GDR_ENABLED != 0 {
            t.gdr_enabled_hcas += 1;
        } else if found_in(&mut found_bits, text) & GDR_DISABLED != 0 {
            t.gdr_disabled_hcas += 1;
            t.gdr_disabled_example.get_or_insert_with(quote);
        } else if text.starts_with("DMA-BUF is available") {
            t.dmabuf_available = true;
        } else if let Some(rest) = text.strip_prefix("NVLS multicast support is ") {
            t.nvls_support = Some((!rest.starts_with("not"), quote()));
        } else if found_in(&mut found_bits, text) & NVLS_CHANNELS != 0 {
            let n = text
                .split(", ")
                .find_map(|seg| seg.strip_suffix(" nvls channels"))
                .and_then(|n| n.trim().rsplit(' ').next())
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(n) = n
                && t.nvls_channels.as_ref().is_none_or(|(m, _)| n > *m)
            {
                t.nvls_channels = Some((n, quote()));
            }
        } else if let Some((var, value)) = (found_in(&mut found_bits, text) & SET_BY_ENVIRONMENT
            != 0)
            .then(|| SET_BY_ENV.split_once(text))
            .flatten()
        {
            if t.env.len() < MAX_QUOTES * 4 {
                t.env.insert(
                    var.trim().to_string(),
                    value.trim().trim_end_matches('.').to_string(),
                );
            }
        } else if let Some(rest) = text.strip_prefix("NCCL version ") {
            self.log.nccl_version = Some(first_token(rest).to_string());
        } else if text.starts_with("Failed to open libibverbs") {
            // NCCL ≥ 2.16 says it as INFO (`NVIDIA/nccl-tests#131`), older as WARN.
            self.log.ibverbs_missing.get_or_insert_with(quote);
        } else if found_in(&mut found_bits, text) & SHAPE != 0 {
            // `comm 0x… rank 0 nRanks 16 nNodes 2 localRanks 8 …`, `… nranks 8 cudaDev 0 …`.
            let log = &mut self.log;
            shape_counts(text, |which, n| {
                let slot = if which == 0 {
                    &mut log.info_nodes
                } else {
                    &mut log.info_ranks
                };
                *slot = Some(slot.map_or(n, |m| m.max(n)));
            });
        }
    }
}

fn found_in(bits: &mut Option<u8>, text: &str) -> u8 {
    *bits.get_or_insert_with(|| found(text))
}

fn first_token(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

/// The length of the host in a `host:pid:tid` token (`None` when the token is not one).
fn host_of(token: &[u8]) -> Option<usize> {
    let host = position(token, b':')?;
    let ids = &token[host + 1..];
    let pid = position(ids, b':')?;
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    (host > 0 && digits(&ids[..pid]) && digits(&ids[pid + 1..])).then_some(host)
}

/// `P2P/CUMEM/read` → (`P2P`, `CUMEM/read`).
fn split_slash(text: &str) -> (&str, &str) {
    match position(text.as_bytes(), b'/') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, ""),
    }
}

/// The path after `via ` in a channel line (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`,
/// old `Ring 00 : 7 -> 8 [send] via NET/IB/0/GDRDMA`): searched from the end, where it is.
fn via_path(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    while let Some(v) = bytes[..end].iter().rposition(|&c| c == b'v') {
        if v > 0 && bytes[v - 1] == b' ' && bytes.get(v..v + 4) == Some(b"via ") {
            return Some(text[v + "via ".len()..].trim_ascii());
        }
        end = v;
    }
    None
}

/// The first `byte` in a short slice (a plain loop beats a SIMD call on a few bytes).
fn position(bytes: &[u8], byte: u8) -> Option<usize> {
    bytes.iter().position(|&b| b == byte)
}

#[cfg(test)]
mod tests {
    use super::super::parse_log;
    use super::{
        GDR_DISABLED, GDR_ENABLED, NVLS_CHANNELS, SET_BY_ENVIRONMENT, SHAPE, found, shape_counts,
    };

    /// Every line of the real logs, and lines made to trip the search at its edges.
    fn lines() -> Vec<String> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/nccl/real");
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flat_map(|e| {
                let bytes = std::fs::read(e.unwrap().path()).unwrap();
                let text = String::from_utf8_lossy(&bytes).into_owned();
                text.lines().map(str::to_string).collect::<Vec<_>>()
            })
            .collect();
        out.extend(
            [
                "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
                "GPU Direct RDMA Disabled for HCA",
                "GPU Direct RDMA Enabled for HC",
                "GGPU Direct RDMA Enabled for HCA",
                "2 coll channels, 0 nvls channels",
                " nvls channels",
                "nvls channels",
                "NCCL_IB_HCA set by environment to mlx5",
                " set by environment to",
                "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8",
                "nRanks 4",
                "nranks 3 x",
                "nNodes\t2 nRanks\u{a0}3 nranks 5",
                "xnNodes 2 nNodes 3nNodes 4 \u{3000}nRanks 7",
                "nNodes",
                "nRanks +9 nNodes -1 nranks 4294967296 nranks 12",
                "vkN",
                "",
            ]
            .map(str::to_string),
        );
        out
    }

    /// The byte-triggered search finds what `str::contains` finds, and the counts are what
    /// walking `split_whitespace` gives.
    #[test]
    fn found_matches_contains() {
        for line in lines() {
            let want = [
                (GDR_ENABLED, "GPU Direct RDMA Enabled for HCA"),
                (GDR_DISABLED, "GPU Direct RDMA Disabled for HCA"),
                (NVLS_CHANNELS, " nvls channels"),
                (SET_BY_ENVIRONMENT, " set by environment to "),
            ]
            .iter()
            .filter(|(_, s)| line.contains(s))
            .fold(0, |bits, (bit, _)| bits | bit)
                | if ["nNodes ", "nRanks ", "nranks "]
                    .iter()
                    .any(|s| line.contains(s))
                {
                    SHAPE
                } else {
                    0
                };
            assert_eq!(found(&line), want, "{line:?}");

            let (mut nodes, mut ranks) = (None::<u32>, None::<u32>);
            let mut previous = "";
            for token in line.split_whitespace() {
                if let Ok(n) = token.parse::<u32>() {
                    match previous {
                        "nNodes" => nodes = Some(nodes.map_or(n, |m| m.max(n))),
                        "nRanks" | "nranks" => ranks = Some(ranks.map_or(n, |m| m.max(n))),
                        _ => {}
                    }
                }
                previous = token;
            }
            let (mut got_nodes, mut got_ranks) = (None::<u32>, None::<u32>);
            shape_counts(&line, |which, n| {
                let slot = if which == 0 {
                    &mut got_nodes
                } else {
                    &mut got_ranks
                };
                *slot = Some(slot.map_or(n, |m| m.max(n)));
            });
            assert_eq!((got_nodes, got_ranks), (nodes, ranks), "{line:?}");
        }
    }

    /// Socket fallback lines (nccl.md §10, NVIDIA/nccl-tests#100) and old transport lines.
    #[test]
    fn classifies_transports() {
        let text = "\
node2:1208:1208 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
node2:1208:1208 [0] NCCL INFO NET/Socket : Using [0]ibp5s0:<0> [1]ibp70s0:<0>
node2:1208:1208 [0] NCCL INFO Using network Socket
node2:1208:1230 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0
node2:1208:1230 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5
node2:1208:1230 [0] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0/GDRDMA
node2:1208:1230 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
node2:1208:1230 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
node2:1208:1230 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)
node2:1208:1230 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC
node2:1208:1230 [0] NCCL INFO NVLS multicast support is not available on dev 0
node2:1208:1230 [0] NCCL INFO comm 0x55d0c8a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
";
        let log = parse_log(text);
        let t = &log.transports;
        assert!(log.ibverbs_missing.is_some());
        assert_eq!(log.warning_count, 1);
        assert_eq!(
            log.error_warning_count, 0,
            "a missing libibverbs is not an error here"
        );
        assert_eq!(t.network.as_ref().unwrap().0, "Socket");
        assert!(t.socket_interfaces.is_some());
        assert_eq!(t.net["Socket"].channels, 1);
        assert_eq!(t.net["IB"].gdr_channels, 0);
        assert!(t.net["IB"].example_without_gdr.is_some());
        assert_eq!(t.net["AWS Libfabric"].gdr_channels, 1);
        assert_eq!(t.shm.channels, 1);
        assert_eq!(t.gdr_disabled_hcas, 1);
        assert_eq!(t.plugin.as_ref().unwrap().0, "NCCL RDMA Plugin v8");
        assert_eq!(t.env["NCCL_NET_GDR_LEVEL"], "LOC");
        assert!(!t.nvls_support.as_ref().unwrap().0);
        assert_eq!((log.info_nodes, log.info_ranks), (Some(2), Some(16)));
    }

    /// NCCL ≥ 2.16 reports a missing libibverbs as INFO (NVIDIA/nccl-tests#131).
    #[test]
    fn missing_ibverbs_as_info() {
        let log = parse_log("Meowth:10107:10122 [0] NCCL INFO Failed to open libibverbs.so[.1]\n");
        assert!(log.ibverbs_missing.is_some());
        assert_eq!(
            log.info_hosts.iter().next().map(String::as_str),
            Some("Meowth")
        );
    }
}
