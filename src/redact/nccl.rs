//! Host names in the `host:pid:tid [dev] NCCL INFO …` prefix that NCCL puts in front of every
//! debug line (`NCCL_DEBUG=INFO`; NCCL's `src/debug.cc` prints `"%s:%d:%d [%d] NCCL INFO "`
//! with the host name cut at its first dot, the pid, the thread id and the CUDA device).
//!
//! A multi-node log names its peers there and often nowhere else (a PyTorch job has no
//! nccl-tests device lines; an excerpt has only some of them), so every text a capture keeps is
//! searched for these prefixes and each host found is redacted like the node's own name
//! ([`Redactor::add_hostname`]: whole tokens, the same placeholder everywhere, a short or common
//! name kept and said). This looks at the text itself, not at what the NCCL parser kept: the
//! parser's host list is capped, prefers device lines, and skips lines that interleaving broke.

use std::collections::BTreeSet;

use super::Redactor;

/// Characters of a host name as NCCL prints it (RFC 1123 labels; `_` as real nodes have).
fn host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `[0]`, `[12]`: the CUDA device after the prefix.
fn device_marker(s: &str) -> bool {
    s.strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .is_some_and(digits)
}

/// The host of a `host:pid:tid` token followed by a `[dev]` token; whatever is glued in front
/// of the host by a launcher (`[1,0]<stdout>:host:21:21`, `(head, rank=0) host:…`) is left out.
fn host_of<'a>(token: &'a str, next: &str) -> Option<&'a str> {
    if !device_marker(next) {
        return None;
    }
    let mut parts = token.rsplitn(3, ':');
    let (tid, pid, before) = (parts.next()?, parts.next()?, parts.next()?);
    if !digits(tid) || !digits(pid) {
        return None;
    }
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| host_char(*c))
        .last()
        .map(|(i, _)| i)?;
    let host = before[start..].trim_matches('.');
    let named = host.starts_with(|c: char| c.is_ascii_alphanumeric())
        && host.chars().any(|c| c.is_ascii_alphabetic());
    named.then_some(host)
}

/// Every host named by an NCCL line prefix in `text`, each once.
pub fn prefix_hosts(text: &str) -> BTreeSet<&str> {
    let mut hosts = BTreeSet::new();
    for line in text.lines() {
        // Cheap refusal first: most lines of a capture are not NCCL lines.
        if !line.contains("] ") || !line.contains(':') {
            continue;
        }
        let mut tokens = line.split_ascii_whitespace().peekable();
        while let Some(token) = tokens.next() {
            if let Some(next) = tokens.peek()
                && let Some(host) = host_of(token, next)
            {
                hosts.insert(host);
            }
        }
    }
    hosts
}

impl Redactor {
    /// Redact as host names those that NCCL line prefixes in `text` name (see the module doc).
    pub fn add_nccl_prefix_hosts(&mut self, text: &str, anyway: bool) {
        for host in prefix_hosts(text) {
            self.add_hostname(host, anyway);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefixes as real logs print them (tests/data/nccl/real/): bare, behind Open MPI's
    /// `--tag-output`, behind a per-rank marker, and one cut by interleaving.
    #[test]
    fn hosts_of_nccl_prefixes_in_every_launcher_shape() {
        let text = "\
gpu-node-17:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
[1,1]<stdout>:test-nccl-efa-worker-1:21:21 [0] NCCL INFO NET/OFI Selected Provider is efa
[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 4096 Bytes -> Algo 0 proto 0 time 25.874907
(head, rank=0, pid=3808) nc-d87e1263-head:3808:3808 [0] NCCL INFO cudaDriverVersion 12080
babel-0-31:2417839:2418021 [1] babel-0-32:11:12 [3] NCCL INFO interleaved
";
        let hosts: Vec<&str> = prefix_hosts(text).into_iter().collect();
        assert_eq!(
            hosts,
            [
                "babel-0-31",
                "babel-0-32",
                "gpu-node-17",
                "h100clust-worker-1",
                "nc-d87e1263-head",
                "test-nccl-efa-worker-1"
            ]
        );
    }

    /// Times, IPv6 addresses, PCI addresses and `host:port` pairs are not prefixes.
    #[test]
    fn what_only_looks_like_a_prefix_is_not_a_host() {
        let text = "\
[  12.000] 07:01:02 [0] timer
NCCL INFO Bootstrap : Using fe80::1:2 [0]
0000:18:00.0 [0] pci
myhost:8080 [0] port only
12:34:56 [3] digits only
myhost:12:34 [x] no device
";
        assert!(prefix_hosts(text).is_empty(), "{:?}", prefix_hosts(text));
    }

    #[test]
    fn prefix_hosts_are_redacted_as_host_names() {
        let mut r = Redactor::new();
        let log = "peer-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n";
        r.add_nccl_prefix_hosts(log, false);
        let out = r.redact(log);
        assert!(!out.contains("peer-a"), "{out}");
        assert!(out.starts_with("node-0001:1:1 [0] NCCL INFO"), "{out}");
    }
}
