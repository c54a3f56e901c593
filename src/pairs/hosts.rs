//! The hosts of a `gpudoctor pairs` run: a comma list (`--hosts a,b,c`), an Open MPI hostfile
//! (`--hostfile FILE`: `host slots=8 max_slots=8` lines, `#` comments; the MPI Operator's
//! `host:8` lines for Intel MPI and MPICH), or Slurm's compressed node list
//! (`SLURM_JOB_NODELIST=gpu[01-04,07],login1`, as `scontrol show hostnames` expands it: ranges
//! keep their zero padding, several bracket groups in one name multiply).
//!
//! Every host is checked as a host ([`check`]): a name, an IPv4 address or an IPv6 address
//! (bare or in brackets, never cut at its first `:`). The launchers split their host lists at
//! commas (`--host a:8,b:8`, `--nodelist=a,b`), read a leading `-` as an option and `user@host`
//! as a user name, so a host holding any of those, whitespace, or another character no host
//! name or address holds is refused, naming it (and its hostfile line), before anything runs:
//! otherwise a result is credited to the wrong pair.

use std::net::{Ipv4Addr, Ipv6Addr};

/// More hosts than this is a typo in a range (`gpu[1-100000]`), not a cluster to pair.
pub const MAX_HOSTS: usize = 4096;

/// Longest host name: 253 characters written (RFC 1035 §2.3.4: 255 octets on the wire).
const MAX_NAME: usize = 253;

/// What a host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Name,
    Ipv4,
    Ipv6,
}

/// Check one host as the launchers take it: a name of letters, digits, `-` and `.` (RFC 1123
/// §2.1; `_` too, which Open MPI's hostfile lexer and Slurm node names allow), an IPv4 address
/// or an IPv6 address (without brackets). `Err` says what is wrong and what to do.
pub fn check(host: &str) -> Result<Kind, String> {
    let shown = host.escape_debug();
    if host.is_empty() {
        return Err("an empty host name".to_string());
    }
    if host.contains(',') {
        return Err(format!(
            "`{shown}` holds a comma, which separates hosts in mpirun's --host and srun's --nodelist: the pair would run on other hosts than it is credited to; give one host per line or list item"
        ));
    }
    if host.chars().any(char::is_whitespace) {
        return Err(format!(
            "`{shown}` holds whitespace; give one host per line or list item"
        ));
    }
    if host.starts_with('-') {
        return Err(format!(
            "`{shown}` starts with `-`, which the launcher would read as an option, not a host"
        ));
    }
    if host.contains('@') {
        return Err(format!(
            "`{shown}`: user@host is not taken (the launcher runs as you); give the host alone, and another user in ~/.ssh/config"
        ));
    }
    if host.parse::<Ipv6Addr>().is_ok() {
        return Ok(Kind::Ipv6);
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(Kind::Ipv4);
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
    {
        let hint = if c == ':' {
            " (a `:N` slot count belongs in a hostfile line, `host:8` or `host slots=8`; GPUs per node are --gpus-per-node)"
        } else {
            ""
        };
        return Err(format!(
            "`{shown}` is neither a host name (letters, digits, `-`, `.`) nor an IP address: {c:?} is not allowed in one{hint}"
        ));
    }
    if host.len() > MAX_NAME {
        return Err(format!(
            "`{shown}` is longer than a host name can be ({MAX_NAME} characters)"
        ));
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.split('.').any(str::is_empty) {
        return Err(format!("`{shown}` has an empty part between dots"));
    }
    // RFC 1123 §2.1: a name's last label is never all digits; `10.0.0.256` is a mistyped
    // address, not a name.
    if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("`{shown}` is not an IPv4 address"));
    }
    Ok(Kind::Name)
}

/// `a,b, c` → [a, b, c]; empty items dropped.
pub fn from_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect()
}

/// An IPv6 address as one host item: bare (`fd00::1`) or in brackets (`[fd00::1]`); the
/// address without brackets.
pub fn ipv6_item(item: &str) -> Option<&str> {
    let bare = item
        .strip_prefix('[')
        .and_then(|i| i.strip_suffix(']'))
        .unwrap_or(item);
    bare.parse::<Ipv6Addr>().is_ok().then_some(bare)
}

/// A hostfile's hosts, and the GPUs per node it states when every line states the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hostfile {
    pub hosts: Vec<String>,
    pub slots: Option<u32>,
}

/// Read a hostfile as Open MPI 4.1 does (`orte/util/hostfile/hostfile_lex.l`, `hostfile.c`):
/// per line, the host, then `key=value` settings (`slots=8`, `max_slots=8`; `count` and `cpu`
/// mean slots, other keys are ignored; spaces around `=` allowed); `#` starts a comment. An
/// IPv6 address stands bare, as Open MPI's lexer reads it (`fd00::1 slots=8`), or in brackets.
/// Also the MPI Operator's lines for Intel MPI and MPICH, `host:8` (kubeflow/mpi-operator,
/// `mpi_job_controller.go`: `%s:%d`). Anything else on a line — a second host, a user name — is
/// an error naming the line: Open MPI would refuse it too (`hostfile_parse_error`) or, for a
/// comma, split it into more hosts.
pub fn parse_hostfile(text: &str) -> Result<Hostfile, String> {
    let mut hosts = Vec::new();
    let mut all_slots: Vec<Option<u32>> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let at = |e: String| format!("line {}: {e}", i + 1);
        let words = settings(line);
        let Some((first, rest)) = words.split_first() else {
            continue;
        };
        let (host, mut slots) = split_slots(first).map_err(at)?;
        check(host).map_err(at)?;
        for word in rest {
            let Some((key, value)) = word.split_once('=') else {
                return Err(at(format!(
                    "`{}` after the host `{host}`: one host per line, then settings such as slots=8",
                    word.escape_debug()
                )));
            };
            if matches!(key, "slots" | "count" | "cpu") {
                slots = Some(value.parse().map_err(|_| {
                    at(format!("`{}`: slots must be a number", word.escape_debug()))
                })?);
            }
        }
        hosts.push(host.to_string());
        all_slots.push(slots);
        if hosts.len() > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
    }
    let first = all_slots.first().copied().flatten();
    let slots = first.filter(|f| all_slots.iter().all(|s| *s == Some(*f)));
    Ok(Hostfile { hosts, slots })
}

/// A line's words, `key = value` joined into `key=value` (Open MPI's lexer skips whitespace
/// around `=`).
fn settings(line: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in line.split_whitespace() {
        match words.last_mut() {
            Some(last) if last.ends_with('=') || word.starts_with('=') => last.push_str(word),
            _ => words.push(word.to_string()),
        }
    }
    words
}

/// A hostfile's first word: the host and the `:N` slots after it (`node01:8`, `[fd00::1]:8`).
/// A bare IPv6 address is whole (`fd00::1:8` is an address, not `fd00::1` with 8 slots).
fn split_slots(word: &str) -> Result<(&str, Option<u32>), String> {
    if let Some(inner) = word.strip_prefix('[') {
        let (host, after) = inner
            .split_once(']')
            .ok_or_else(|| format!("`{}`: `[` without `]`", word.escape_debug()))?;
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(format!(
                "`{}`: brackets hold an IPv6 address",
                word.escape_debug()
            ));
        }
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':').map(str::parse::<u32>) {
                Some(Ok(n)) => Ok((host, Some(n))),
                _ => Err(format!(
                    "`{}`: after `]` only `:N` slots",
                    word.escape_debug()
                )),
            },
        };
    }
    if word.parse::<Ipv6Addr>().is_ok() {
        return Ok((word, None));
    }
    match word.rsplit_once(':') {
        Some((host, n)) if !host.contains(':') && !n.is_empty() => match n.parse::<u32>() {
            Ok(n) => Ok((host, Some(n))),
            Err(_) => Err(format!(
                "`{}`: `:{}` is not a slot count",
                word.escape_debug(),
                n.escape_debug()
            )),
        },
        _ => Ok((word, None)),
    }
}

/// Expand a Slurm compressed node list. Errors name what could not be read.
pub fn from_slurm_nodelist(list: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for item in split_top_level(list)? {
        // An IPv6 address is one host, in brackets or not: not a range, not cut at a `:`.
        if let Some(address) = ipv6_item(&item) {
            hosts.push(address.to_string());
            continue;
        }
        let mut expanded = vec![String::new()];
        let mut rest = item.as_str();
        while !rest.is_empty() {
            let (literal, after) = match rest.find('[') {
                Some(open) => (&rest[..open], Some(&rest[open + 1..])),
                None => (rest, None),
            };
            for name in &mut expanded {
                name.push_str(literal);
            }
            let Some(after) = after else { break };
            let close = after
                .find(']')
                .ok_or_else(|| format!("`{item}`: `[` without `]`"))?;
            let choices = expand_ranges(&after[..close]).map_err(|e| format!("`{item}`: {e}"))?;
            if expanded.len().saturating_mul(choices.len()) > MAX_HOSTS {
                return Err(format!("`{item}` expands to more than {MAX_HOSTS} hosts"));
            }
            expanded = expanded
                .iter()
                .flat_map(|prefix| choices.iter().map(move |c| format!("{prefix}{c}")))
                .collect();
            rest = &after[close + 1..];
        }
        hosts.extend(expanded.into_iter().filter(|h| !h.is_empty()));
        if hosts.len() > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
    }
    Ok(hosts)
}

/// Split at commas outside brackets.
fn split_top_level(list: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut item = String::new();
    for c in list.trim().chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in `{list}`"));
        }
        if c == ',' && depth == 0 {
            items.push(std::mem::take(&mut item));
        } else {
            item.push(c);
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced brackets in `{list}`"));
    }
    items.push(item);
    Ok(items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect())
}

/// `01-04,07` → 01 02 03 04 07 (the padding of the range's first bound kept).
fn expand_ranges(ranges: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in ranges.split(',').map(str::trim) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let width = lo.len();
        let (a, b): (u64, u64) = match (lo.parse(), hi.parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(format!("`{part}` is not a range of numbers")),
        };
        if b - a >= MAX_HOSTS as u64 || out.len() + (b - a) as usize >= MAX_HOSTS {
            return Err(format!("`{part}` is more than {MAX_HOSTS} hosts"));
        }
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// Duplicates removed (the first kept), in order; the removed names are returned too.
pub fn dedup(hosts: Vec<String>) -> (Vec<String>, Vec<String>) {
    let mut seen = std::collections::BTreeSet::new();
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for h in hosts {
        if seen.insert(h.clone()) {
            kept.push(h);
        } else {
            dropped.push(h);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_slurm_node_lists_as_scontrol_does() {
        assert_eq!(
            from_slurm_nodelist("gpu[01-04,07]").unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
        );
        assert_eq!(
            from_slurm_nodelist("a[1-2]-b[3-4],login1").unwrap(),
            ["a1-b3", "a1-b4", "a2-b3", "a2-b4", "login1"]
        );
        assert_eq!(
            from_slurm_nodelist("cnode2-[001-002]").unwrap(),
            ["cnode2-001", "cnode2-002"]
        );
        assert_eq!(from_slurm_nodelist("node7").unwrap(), ["node7"]);
        assert_eq!(
            from_slurm_nodelist("gpu[8-11]").unwrap(),
            ["gpu8", "gpu9", "gpu10", "gpu11"]
        );
        for bad in ["gpu[01-04", "gpu01]", "gpu[a-b]", "gpu[4-1]", "gpu[[1-2]]"] {
            assert!(from_slurm_nodelist(bad).is_err(), "{bad}");
        }
        assert!(from_slurm_nodelist("g[1-99999]").is_err());
        assert!(from_slurm_nodelist("a[1-100]b[1-100]").is_err());
        assert!(from_slurm_nodelist("").unwrap().is_empty());
    }

    #[test]
    fn reads_open_mpi_hostfiles() {
        let text = "# rack 1\nnode01 slots=8\n\n  node02 slots=8 max_slots=8 # spare\nnode03:8\n";
        let read = parse_hostfile(text).unwrap();
        assert_eq!(read.hosts, ["node01", "node02", "node03"]);
        assert_eq!(read.slots, Some(8));
        assert_eq!(
            parse_hostfile("a slots=4\nb slots=8\n").unwrap().slots,
            None
        );
        assert_eq!(parse_hostfile("a\nb\n").unwrap().slots, None);
        assert_eq!(
            parse_hostfile("a slots = 4\nb count=4\n").unwrap().slots,
            Some(4)
        );
        // What kubeflow/mpi-operator v2 writes into /etc/mpi/hostfile, for Open MPI and for
        // Intel MPI / MPICH.
        let operator = "pi-worker-0.pi-worker.default.svc slots=1\npi-worker-1.pi-worker.default.svc slots=1\n";
        assert_eq!(
            parse_hostfile(operator).unwrap().hosts,
            [
                "pi-worker-0.pi-worker.default.svc",
                "pi-worker-1.pi-worker.default.svc"
            ]
        );
        let intel = "pi-worker-0.pi-worker.default.svc:1\npi-worker-1.pi-worker.default.svc:1\n";
        assert_eq!(parse_hostfile(intel).unwrap().slots, Some(1));
        assert_eq!(from_list(" a, b,,c "), ["a", "b", "c"]);
        let (kept, dropped) = dedup(from_list("a,b,a"));
        assert_eq!(
            (kept, dropped),
            (vec!["a".into(), "b".into()], vec!["a".into()])
        );
    }

    #[test]
    fn ipv6_addresses_are_whole_hosts() {
        // Issue 41: `fd00::1` was cut at its first `:` to `fd00`.
        let read =
            parse_hostfile("fd00::1 slots=8\n[fd00::2]\n[fd00::3]:8\nfd00::4:8\n10.0.0.5:8\n")
                .unwrap();
        assert_eq!(
            read.hosts,
            ["fd00::1", "fd00::2", "fd00::3", "fd00::4:8", "10.0.0.5"]
        );
        assert_eq!(check("fd00::1"), Ok(Kind::Ipv6));
        assert_eq!(check("::ffff:10.0.0.1"), Ok(Kind::Ipv6));
        assert_eq!(check("10.0.0.1"), Ok(Kind::Ipv4));
        assert_eq!(check("gpu01.cluster.local"), Ok(Kind::Name));
        assert_eq!(
            from_slurm_nodelist("fd00::1,[fd00::2],gpu[1-2]").unwrap(),
            ["fd00::1", "fd00::2", "gpu1", "gpu2"]
        );
        for bad in ["[fd00::1", "[gpu01]:8", "[fd00::1]x", "gpu01:x"] {
            assert!(parse_hostfile(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_no_host_holds_is_refused_naming_the_line() {
        for (line, says) in [
            ("a,b slots=8", "comma"),
            ("a b", "one host per line"),
            ("-np slots=8", "option"),
            ("root@gpu01", "user@host"),
            ("gpu\u{202e}10", "neither a host name"),
            ("gpu\u{200b}01", "neither a host name"),
            ("fe80::1%eth0", "neither a host name"),
            ("gpu01 slots=eight", "number"),
            ("gpu..01", "empty part"),
            ("10.0.0.256", "not an IPv4 address"),
        ] {
            let text = format!("ok01\n{line}\n");
            let err = parse_hostfile(&text).unwrap_err();
            assert!(
                err.starts_with("line 2: ") && err.contains(says),
                "{line}: {err}"
            );
        }
        assert!(check(&"a".repeat(254)).is_err());
        assert!(check("").is_err());
        assert!(check("gpu01:8").unwrap_err().contains("--gpus-per-node"));
    }
}
