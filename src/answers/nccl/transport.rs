//! `NCCL INFO` lines (reference/nccl.md §9, §10): which transport each channel took (`via
//! P2P/…`, `SHM/…`, `NET/<net>/<dev>[/GDRDMA]`), the network and plugin NCCL chose, GPUDirect
//! RDMA and NVLS support, environment overrides, and the run's shape (`nNodes`, `nranks`).
//! The same lines come from nccl-tests and from any NCCL application.
//!
//! Every line of a big log with `NCCL_DEBUG=INFO` passes here, so the common cases (channel
//! lines) are decided on their first bytes, and nothing is allocated for a line that is only
//! counted.

use super::model::{NetUse, Quoted};
use super::{MAX_HOSTS, MAX_QUOTES, NcclLogParser};

impl NcclLogParser {
    /// Remember the `host` of a `host:pid:tid [dev] NCCL …` prefix (`prefix` is the text before
    /// `NCCL`); returns where that prefix starts in it, when found.
    pub(super) fn note_host(&mut self, prefix: &str) -> Option<usize> {
        let bytes = prefix.as_bytes();
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
                return Some(start);
            }
            start = end + 1;
        }
        None
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

    /// One `NCCL INFO` line: `text` after the marker, `line` the whole (for quotes).
    pub(super) fn info(&mut self, text: &str, line: &str) {
        self.log.info_lines += 1;
        let text = text.trim_ascii();
        // Quoted only where kept: most INFO lines are channel lines whose example is taken.
        let number = self.log.lines;
        let quote = || Quoted::new(number, line);
        let t = &mut self.log.transports;
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
        } else if text.starts_with("NET/IB") && text.contains("No device found") {
            t.ib_no_device = Some(quote());
        } else if text.starts_with("NET/IB") && text.contains("Using") {
            t.ib_devices = Some(quote());
        } else if text.starts_with("NET/Socket") && text.contains("Using") {
            t.socket_interfaces = Some(quote());
        } else if text.starts_with("NET/Plugin") {
            if let Some(rest) = text.split("Loaded net plugin ").nth(1) {
                let name = rest.split(" (").next().unwrap_or(rest).trim().to_string();
                t.plugin = Some((name, quote()));
            } else if text.contains("Could not find")
                || text.contains("No plugin found")
                || text.contains("Plugin load returned")
            {
                t.plugin_absent = true;
            }
        } else if text.contains("GPU Direct RDMA Enabled for HCA") {
            t.gdr_enabled_hcas += 1;
        } else if text.contains("GPU Direct RDMA Disabled for HCA") {
            t.gdr_disabled_hcas += 1;
            t.gdr_disabled_example.get_or_insert_with(quote);
        } else if text.starts_with("DMA-BUF is available") {
            t.dmabuf_available = true;
        } else if let Some(rest) = text.strip_prefix("NVLS multicast support is ") {
            t.nvls_support = Some((!rest.starts_with("not"), quote()));
        } else if text.contains(" nvls channels") {
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
        } else if let Some((var, value)) = text.split_once(" set by environment to ") {
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
        } else if text.contains("nNodes ") || text.contains("nRanks ") || text.contains("nranks ") {
            // `comm 0x… rank 0 nRanks 16 nNodes 2 localRanks 8 …`, `… nranks 8 cudaDev 0 …`.
            let mut previous = "";
            for token in text.split_whitespace() {
                if let Ok(n) = token.parse::<u32>() {
                    match previous {
                        "nNodes" => {
                            self.log.info_nodes = Some(self.log.info_nodes.map_or(n, |m| m.max(n)));
                        }
                        "nRanks" | "nranks" => {
                            self.log.info_ranks = Some(self.log.info_ranks.map_or(n, |m| m.max(n)));
                        }
                        _ => {}
                    }
                }
                previous = token;
            }
        }
    }
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
