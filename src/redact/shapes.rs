//! Identifiers recognised by their shape, as whole tokens (no letter or digit, and for the
//! separated forms no separator of their own, touching them):
//! - UUIDs: `GPU-`/`MIG-` + 8-4-4-4-12 hex; filesystem and partition ids after `UUID=`,
//!   `PARTUUID=`, `by-uuid/`, `by-partuuid/` (any shape: vfat's `1234-ABCD`, MBR's `0a1b2c3d-01`);
//!   any other 8-4-4-4-12 token (Pod UIDs, other plugins' device ids, boot ids), also in the
//!   systemd cgroup form `pod<8>_<4>_<4>_<4>_<12>`;
//! - colon-separated hex: MACs (6 × 2), EUI-64s (8 × 2), node GUIDs (4 × 4), IPoIB hardware
//!   addresses (20 × 2); 8 × 4 is an address (a GID) and goes with IPv6;
//! - other MAC notations: `94-6D-AE-5C-69-00`, Cisco's `946d.ae5c.6900`, and `0x946dae5c6900`
//!   (or a 64-bit `0x…` GUID) where the words before it say it is one (`mac`, `ether`, `guid`):
//!   a bare `0x` + 12 hex digits is as often a pointer (`comm 0x55d0c3f1a2b0` in NCCL logs);
//! - IPv6 in every form `std::net::Ipv6Addr` reads (full, compressed, IPv4-mapped), with or
//!   without a zone (`%eth0`, kept), also right after an interface name and a colon
//!   (`veth0:fe80::1:2:3`, NCCL's `Bootstrap : Using [0]eth0:<address><0>`);
//! - IPv4: four dotted numbers ≤ 255.
//!
//! Placeholders keep each notation: locally administered MACs `02:00:00:00:xx:xx`, GUIDs
//! `0000:0000:0000:xxxx`, documentation addresses (RFC 5737 TEST-NET-1 `192.0.2.x`, then the
//! reserved 240/4; RFC 3849 `2001:db8::x`; link-local stays link-local `fe80::x`; an IPv4-mapped
//! address maps its IPv4 part), and `00000000-0000-4000-8000-xxxxxxxxxxxx` UUIDs.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Kind, Redactor};

/// Does `value` already have the shape a placeholder of `kind` has? (A capture of a capture.)
pub(super) fn is_placeholder(kind: Kind, value: &str) -> bool {
    let numbered = |prefix: &str| {
        value
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit()))
    };
    match kind {
        Kind::Hostname => numbered("node-"),
        Kind::PodName => numbered("pod-"),
        Kind::PartNumber => numbered("PART"),
        Kind::Serial => {
            numbered("SERIAL")
                || (value.len() >= 4
                    && value.starts_with("000")
                    && value.chars().all(|c| c.is_ascii_digit()))
        }
        _ => false,
    }
}

const UUID_PLACEHOLDER: &str = "00000000-0000-4000-8000-";

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// 8-4-4-4-12 hex digits separated by `sep`.
fn uuid_at(bytes: &[u8], start: usize, sep: u8) -> bool {
    let groups = [8, 4, 4, 4, 12];
    let mut i = start;
    for (n, len) in groups.iter().enumerate() {
        if n > 0 {
            if bytes.get(i) != Some(&sep) {
                return false;
            }
            i += 1;
        }
        if i + len > bytes.len() || !bytes[i..i + len].iter().copied().all(is_hex) {
            return false;
        }
        i += len;
    }
    true
}

fn all_zero_hex(text: &str) -> bool {
    text.chars()
        .filter(char::is_ascii_hexdigit)
        .all(|c| c == '0')
}

/// A letter or digit (or one of `extra`) right before byte `i`?
fn touches_before(bytes: &[u8], i: usize, extra: &[u8]) -> bool {
    i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || extra.contains(&bytes[i - 1]))
}

/// A letter or digit (or one of `extra`) at byte `i`?
fn touches_at(bytes: &[u8], i: usize, extra: &[u8]) -> bool {
    i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || extra.contains(&bytes[i]))
}

/// Rewrite `text` by a scanner: at each byte position where `start` holds, `scan` may claim
/// `len` bytes and give their replacement; everything else is copied as it is, in runs. Only
/// ASCII starts are offered, so every cut lands on a character boundary. `start` is a cheap
/// condition every match needs (most often: a token begins here), so the scanner is asked at
/// a few positions of a file, not at every byte (records redact every file of a capture).
fn rewrite(
    text: &str,
    start: impl Fn(&[u8], usize) -> bool,
    mut scan: impl FnMut(&str, usize) -> Option<(usize, String)>,
) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii()
            && (start(bytes, i) || ask_everywhere())
            && let Some((len, replacement)) = scan(text, i)
        {
            out.push_str(&text[copied..i]);
            out.push_str(&replacement);
            i += len;
            copied = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// Ask the scanners at every byte, not only where `start` holds: never, but in the unit test
/// that proves each `start` changes nothing.
#[cfg(not(test))]
fn ask_everywhere() -> bool {
    false
}
#[cfg(test)]
use tests::ask_everywhere;

/// No letter or digit right before byte `i`: a token may begin there.
fn token_start(bytes: &[u8], i: usize) -> bool {
    !touches_before(bytes, i, b"")
}

/// Uppercase hex digits of `placeholder` where `original` used uppercase.
fn same_case(original: &str, placeholder: String) -> String {
    if original.chars().any(|c| c.is_ascii_uppercase()) {
        placeholder.to_ascii_uppercase()
    } else {
        placeholder
    }
}

impl Redactor {
    fn uuid_number(&mut self, body: &str, kind: Kind) -> usize {
        let key = body.to_ascii_lowercase().replace('_', "-");
        self.number("uuid", &key, kind)
    }

    fn uuid_placeholder(&mut self, body: &str, kind: Kind, sep: char) -> String {
        let n = self.uuid_number(body, kind);
        format!("{UUID_PLACEHOLDER}{n:012x}").replace('-', &sep.to_string())
    }

    /// `GPU-<uuid>` and `MIG-<uuid>` (the old `MIG-GPU-<uuid>/1/0` form has its GPU UUID inside).
    pub(super) fn redact_prefixed_uuids(&mut self, text: &str) -> String {
        let start = |bytes: &[u8], i: usize| matches!(bytes[i], b'G' | b'M');
        rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            let kind = if text[i..].starts_with("GPU-") {
                Kind::GpuUuid
            } else if text[i..].starts_with("MIG-") {
                Kind::MigUuid
            } else {
                return None;
            };
            let body = text.get(i + 4..i + 40)?;
            if !uuid_at(bytes, i + 4, b'-') || touches_at(bytes, i + 40, b"") {
                return None;
            }
            let whole = &text[i..i + 40];
            if body.starts_with(UUID_PLACEHOLDER) || self.is_produced(whole) {
                return None;
            }
            let placeholder = self.uuid_placeholder(body, kind, '-');
            Some((40, self.produced(format!("{}{placeholder}", &whole[..4]))))
        })
    }

    /// Filesystem and partition ids: whatever follows `UUID=`, `PARTUUID=`, `by-uuid/` or
    /// `by-partuuid/`, in any shape.
    pub(super) fn redact_filesystem_ids(&mut self, text: &str) -> String {
        const MARKS: [&str; 3] = ["UUID=", "by-uuid/", "by-partuuid/"];
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some((at, mark)) = MARKS
            .iter()
            .filter_map(|m| rest.find(m).map(|at| (at, *m)))
            .min()
        {
            let from = at + mark.len();
            out.push_str(&rest[..from]);
            let value_len = rest[from..]
                .bytes()
                .take_while(|b| is_hex(*b) || *b == b'-')
                .count();
            let value = &rest[from..from + value_len];
            let hex_digits = value.bytes().filter(|b| is_hex(*b)).count();
            let ends_ok = !touches_at(rest.as_bytes(), from + value_len, b"_");
            // A placeholder of another capture: zeros but for its last four digits.
            let digits: String = value.chars().filter(char::is_ascii_hexdigit).collect();
            let placeholder = all_zero_hex(&digits[..digits.len().saturating_sub(4)]);
            if hex_digits >= 4 && ends_ok && !placeholder && !self.is_produced(value) {
                out.push_str(&self.filesystem_id(value));
            } else {
                out.push_str(value);
            }
            rest = &rest[from + value_len..];
        }
        out.push_str(rest);
        out
    }

    fn filesystem_id(&mut self, value: &str) -> String {
        let standard = value.len() == 36 && uuid_at(value.as_bytes(), 0, b'-');
        if standard {
            if value.starts_with(UUID_PLACEHOLDER) {
                return value.to_string();
            }
            let placeholder = self.uuid_placeholder(value, Kind::FsUuid, '-');
            return self.produced(placeholder);
        }
        // Any other shape keeps its shape: the hex digits become the number, right-aligned.
        let n = self.number("fsid", &value.to_ascii_lowercase(), Kind::FsUuid);
        let digits = value.bytes().filter(|b| is_hex(*b)).count();
        let number = format!("{n:0digits$x}");
        let mut number = number[number.len().saturating_sub(digits)..].chars();
        let placeholder: String = value
            .chars()
            .map(|c| {
                if c.is_ascii_hexdigit() {
                    number.next().unwrap_or('0')
                } else {
                    c
                }
            })
            .collect();
        self.produced(placeholder)
    }

    /// Every other UUID-shaped token; `pod<uuid with underscores>` (systemd cgroup names) too.
    pub(super) fn redact_bare_uuids(&mut self, text: &str) -> String {
        // Eight hex digits and a separator; a token of its own but after `pod` (checked below).
        let start = |bytes: &[u8], i: usize| {
            is_hex(bytes[i]) && matches!(bytes.get(i + 8), Some(b'-' | b'_'))
        };
        rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            if !is_hex(bytes[i]) {
                return None;
            }
            let sep = match bytes.get(i + 8) {
                Some(b'-') => b'-',
                Some(b'_') => b'_',
                _ => return None,
            };
            if !uuid_at(bytes, i, sep) {
                return None;
            }
            // cgroup names: `pod<uid>` (cgroupfs driver) or `pod<uid with underscores>` (systemd).
            let pod_cgroup =
                i >= 3 && &bytes[i - 3..i] == b"pod" && !touches_before(bytes, i - 3, b"");
            if (!pod_cgroup && touches_before(bytes, i, b"-_")) || touches_at(bytes, i + 36, b"-_")
            {
                return None;
            }
            let body = &text[i..i + 36];
            let canonical = body.to_ascii_lowercase().replace('_', "-");
            if all_zero_hex(body)
                || canonical.starts_with(UUID_PLACEHOLDER)
                || self.is_produced(body)
            {
                return None;
            }
            let kind = if pod_cgroup {
                Kind::PodUid
            } else {
                self.known_uuids
                    .get(&canonical)
                    .copied()
                    .unwrap_or(Kind::Uuid)
            };
            let placeholder = same_case(body, self.uuid_placeholder(body, kind, sep as char));
            Some((36, self.produced(placeholder)))
        })
    }

    /// Learn that `uuid` is a `kind` (a checkpoint's `PodUID`), for the counts.
    pub(super) fn know_uuid(&mut self, uuid: &str, kind: Kind) {
        self.known_uuids
            .insert(uuid.trim().to_ascii_lowercase(), kind);
    }

    /// Runs of hex digits and colons: MACs, EUI-64s, node GUIDs, IPoIB hardware addresses.
    pub(super) fn redact_colon_runs(&mut self, text: &str) -> String {
        let start = |bytes: &[u8], i: usize| is_hex(bytes[i]) && !touches_before(bytes, i, b":");
        rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            if !is_hex(bytes[i]) || touches_before(bytes, i, b":") {
                return None;
            }
            let len = bytes[i..]
                .iter()
                .take_while(|b| is_hex(**b) || **b == b':')
                .count();
            if touches_at(bytes, i + len, b"") {
                return None;
            }
            let run = &text[i..i + len];
            if all_zero_hex(run) || self.is_produced(run) {
                return None;
            }
            let groups: Vec<&str> = run.split(':').collect();
            let all_len = |n: usize| groups.iter().all(|g| g.len() == n);
            let hex: String = groups.concat().to_ascii_lowercase();
            let placeholder = match (groups.len(), all_len(2), all_len(4)) {
                (6, true, _) => self.mac_placeholder(&hex, colon_pairs),
                (8, true, _) => self.guid_placeholder(&hex, colon_pairs),
                (4, _, true) => self.guid_placeholder(&hex, colon_quads),
                (20, true, _) => {
                    if run.starts_with("00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:") {
                        return None;
                    }
                    let n = self.number("hwaddr", &hex, Kind::HardwareAddress);
                    let mut groups = vec!["00"; 18].join(":");
                    groups.push_str(&format!(":{:02x}:{:02x}", (n >> 8) & 0xff, n & 0xff));
                    Some(groups)
                }
                _ => None,
            }?;
            Some((len, self.produced(same_case(run, placeholder))))
        })
    }

    /// The placeholder of MAC `hex` (12 hex digits), written by `notation`; `None` for one
    /// that already is a placeholder.
    fn mac_placeholder(&mut self, hex: &str, notation: impl Fn(&str) -> String) -> Option<String> {
        if hex.starts_with("02000000") {
            return None;
        }
        let n = self.number("mac", hex, Kind::Mac);
        Some(notation(&format!("02000000{:04x}", n & 0xffff)))
    }

    /// The placeholder of GUID or EUI-64 `hex` (16 hex digits), written by `notation`.
    fn guid_placeholder(&mut self, hex: &str, notation: impl Fn(&str) -> String) -> Option<String> {
        if hex.starts_with("000000000000") {
            return None;
        }
        let n = self.number("guid", hex, Kind::Guid);
        Some(notation(&format!("000000000000{:04x}", n & 0xffff)))
    }

    /// MACs written with dashes (`94-6D-AE-5C-69-00`; 8 groups: an EUI-64), Cisco's dotted
    /// `946d.ae5c.6900`, and `0x`-prefixed hex after words that say what it is.
    pub(super) fn redact_mac_notations(&mut self, text: &str) -> String {
        let start = |bytes: &[u8], i: usize| is_hex(bytes[i]) && token_start(bytes, i);
        let out = rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            if !is_hex(bytes[i]) {
                return None;
            }
            // Dashes: 6 or 8 groups of 2.
            if !touches_before(bytes, i, b"-") {
                let len = bytes[i..]
                    .iter()
                    .take_while(|b| is_hex(**b) || **b == b'-')
                    .count();
                let run = &text[i..i + len];
                let groups: Vec<&str> = run.split('-').collect();
                if !touches_at(bytes, i + len, b"")
                    && groups.iter().all(|g| g.len() == 2)
                    && !all_zero_hex(run)
                    && !self.is_produced(run)
                {
                    let hex = groups.concat().to_ascii_lowercase();
                    let placeholder = match groups.len() {
                        6 => self.mac_placeholder(&hex, dashed),
                        8 => self.guid_placeholder(&hex, dashed),
                        _ => None,
                    };
                    if let Some(p) = placeholder {
                        return Some((len, self.produced(same_case(run, p))));
                    }
                }
            }
            // Cisco: three dotted groups of 4.
            if !touches_before(bytes, i, b".") {
                let run = text.get(i..i + 14)?;
                let rb = run.as_bytes();
                let dotted = rb[4] == b'.'
                    && rb[9] == b'.'
                    && rb
                        .iter()
                        .enumerate()
                        .all(|(k, b)| k == 4 || k == 9 || is_hex(*b));
                if dotted
                    && !touches_at(bytes, i + 14, b".")
                    && !all_zero_hex(run)
                    && !self.is_produced(run)
                {
                    let hex = run.replace('.', "").to_ascii_lowercase();
                    if let Some(p) = self
                        .mac_placeholder(&hex, |p| format!("{}.{}.{}", &p[..4], &p[4..8], &p[8..]))
                    {
                        return Some((14, self.produced(same_case(run, p))));
                    }
                }
            }
            None
        });
        self.redact_hex_literals(&out)
    }

    /// `0x` + 12 hex digits after a word naming a MAC, `0x` + 16 after one naming a GUID.
    fn redact_hex_literals(&mut self, text: &str) -> String {
        let start = |bytes: &[u8], i: usize| bytes[i] == b'0' && token_start(bytes, i);
        rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            if !(text[i..].starts_with("0x") || text[i..].starts_with("0X"))
                || touches_before(bytes, i, b"")
            {
                return None;
            }
            let digits = bytes[i + 2..].iter().take_while(|b| is_hex(**b)).count();
            if touches_at(bytes, i + 2 + digits, b"") || !matches!(digits, 12 | 16) {
                return None;
            }
            let literal = &text[i..i + 2 + digits];
            let hex = literal[2..].to_ascii_lowercase();
            if all_zero_hex(&hex) || self.is_produced(literal) {
                return None;
            }
            // The words just before it: "MAC address:", "HWaddr", "link/ether", "Node GUID:".
            let from = text[..i].char_indices().rev().nth(23).map_or(0, |(k, _)| k);
            let context = text[from..i].to_ascii_lowercase();
            let said = |words: &[&str]| words.iter().any(|w| context.contains(w));
            let placeholder = if digits == 12 && said(&["mac", "hwaddr", "ether", "lladdr"]) {
                self.mac_placeholder(&hex, |p| format!("0x{p}"))
            } else if digits == 16 && said(&["guid"]) {
                self.guid_placeholder(&hex, |p| format!("0x{p}"))
            } else {
                None
            }?;
            let placeholder = format!(
                "{}{}",
                &literal[..2],
                same_case(&literal[2..], placeholder[2..].to_string())
            );
            Some((2 + digits, self.produced(placeholder)))
        })
    }

    /// IPv6 addresses, also right after `ifname:`; 8 × 4 full forms (sysfs GIDs) included.
    pub(super) fn redact_ipv6(&mut self, text: &str) -> String {
        // A token's start (a colon or dot before it is part of a longer run), or right after
        // an interface name's colon.
        let start = |bytes: &[u8], i: usize| {
            (is_hex(bytes[i]) || bytes[i] == b':')
                && (!touches_before(bytes, i, b":.")
                    || (i > 0 && bytes[i - 1] == b':' && touches_before(bytes, i - 1, b"")))
        };
        rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            let at_start = !touches_before(bytes, i, b":.");
            let after_name_colon = i > 0
                && bytes[i - 1] == b':'
                && (i < 2 || bytes[i - 2] != b':')
                && touches_before(bytes, i - 1, b"");
            if !(is_hex(bytes[i]) || bytes[i] == b':') || !(at_start || after_name_colon) {
                return None;
            }
            if bytes[i] == b':' && !text[i..].starts_with("::") {
                return None;
            }
            let len = bytes[i..]
                .iter()
                .take_while(|b| is_hex(**b) || **b == b':' || **b == b'.')
                .count();
            // A sentence's full stop or a trailing colon is not part of the address.
            let run = text[i..i + len].trim_end_matches(['.', ':']);
            if touches_at(bytes, i + run.len(), b"") || run.matches(':').count() < 2 {
                return None;
            }
            let groups =
                run.split(':').filter(|g| !g.is_empty()).count() + usize::from(run.contains('.'));
            let address: Ipv6Addr = run.parse().ok()?;
            if groups < 3 || address.is_unspecified() || address.is_loopback() {
                return None;
            }
            if self.is_produced(run) || ipv6_is_placeholder(&address) {
                return None;
            }
            let full = run.len() == 39 && run.split(':').all(|g| g.len() == 4);
            let placeholder = self.ipv6_placeholder(&address, full);
            let written = if full {
                let s = placeholder.segments();
                s.iter()
                    .map(|g| format!("{g:04x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            } else {
                placeholder.to_string()
            };
            Some((run.len(), self.produced(same_case(run, written))))
        })
    }

    /// `full`: written as eight groups of four, as sysfs writes a port's GIDs.
    fn ipv6_placeholder(&mut self, address: &Ipv6Addr, full: bool) -> Ipv6Addr {
        if let Some(v4) = address.to_ipv4_mapped() {
            return self.ipv4_placeholder(&v4).to_ipv6_mapped();
        }
        let s = address.segments();
        // A GID and the same address in an NCCL log share their number; the kind counted is
        // the notation seen first.
        let kind = if full { Kind::Gid } else { Kind::Ipv6 };
        let n = self.number("ip6", &address.to_string(), kind) as u16;
        if s[0] & 0xffc0 == 0xfe80 {
            Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, n)
        } else {
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n)
        }
    }

    fn ipv4_placeholder(&mut self, address: &Ipv4Addr) -> Ipv4Addr {
        let n = self.number("ip4", &address.to_string(), Kind::Ipv4) as u32;
        if n <= 254 {
            Ipv4Addr::new(192, 0, 2, n as u8)
        } else {
            // Past TEST-NET-1: the reserved 240.0.0.0/4, never a real address.
            let [a, b, c, d] = (n - 254).to_be_bytes();
            Ipv4Addr::new(240 | (a & 0x0f), b, c, d)
        }
    }

    pub(super) fn redact_ipv4(&mut self, text: &str) -> String {
        let start =
            |bytes: &[u8], i: usize| bytes[i].is_ascii_digit() && !touches_before(bytes, i, b".");
        rewrite(text, start, |text, i| {
            let bytes = text.as_bytes();
            if !bytes[i].is_ascii_digit() || touches_before(bytes, i, b".") {
                return None;
            }
            let len = bytes[i..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'.')
                .count();
            let run = text[i..i + len].trim_end_matches('.');
            if touches_at(bytes, i + run.len(), b"") || !is_ipv4(run) {
                return None;
            }
            let address: Ipv4Addr = run.parse().ok()?;
            if self.is_produced(run) || ipv4_is_placeholder(&address) {
                return None;
            }
            let placeholder = self.ipv4_placeholder(&address).to_string();
            Some((run.len(), self.produced(placeholder)))
        })
    }
}

/// `hex` in groups of `size` digits joined by `:`.
fn grouped(hex: &str, size: usize) -> String {
    hex.as_bytes()
        .chunks(size)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
}

fn colon_pairs(hex: &str) -> String {
    grouped(hex, 2)
}

fn colon_quads(hex: &str) -> String {
    grouped(hex, 4)
}

fn dashed(hex: &str) -> String {
    colon_pairs(hex).replace(':', "-")
}

/// Four dotted decimal numbers, each ≤ 255 and at most 3 digits.
fn is_ipv4(run: &str) -> bool {
    let parts: Vec<&str> = run.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.parse::<u16>().is_ok_and(|v| v <= 255))
}

/// A placeholder, or an address that names no host: unspecified, loopback, a netmask.
fn ipv4_is_placeholder(address: &Ipv4Addr) -> bool {
    let [a, b, c, _] = address.octets();
    (a, b, c) == (192, 0, 2)
        || (240..=255).contains(&a)
        || address.is_unspecified()
        || address.is_loopback()
}

fn ipv6_is_placeholder(address: &Ipv6Addr) -> bool {
    let s = address.segments();
    if let Some(v4) = address.to_ipv4_mapped() {
        return ipv4_is_placeholder(&v4);
    }
    s[1..7] == [0, 0, 0, 0, 0, 0] && s[0] == 0xfe80
        || (s[0], s[1]) == (0x2001, 0xdb8) && s[2..7] == [0, 0, 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Ask the scanners at every ASCII byte, as before the `start` conditions.
        static EVERYWHERE: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn ask_everywhere() -> bool {
        EVERYWHERE.with(Cell::get)
    }

    fn redact(text: &str) -> String {
        Redactor::new().redact(text)
    }

    /// Each scanner's `start` is a condition every match of it needs: asked at every byte
    /// instead, the redaction of real logs and of every identifier shape (glued, repeated,
    /// after each kind of neighbour) is the same, placeholder for placeholder.
    #[test]
    fn asking_only_where_a_match_can_start_changes_nothing() {
        let shapes = [
            "GPU-263526ca-0ed0-753b-08aa-4ed33dd41658",
            "MIG-GPU-263526ca-0ed0-753b-08aa-4ed33dd41658/1/0",
            "MIG-0d5a7f3c-2b1e-5c4d-9e8f-112233445566",
            "pod599e915e_5142_4dcb_8a89_feac2562f998",
            "UUID=5c1b6a3e-9d0f-4b8e-a2c4-7f1e0d3b9a61",
            "94:6d:ae:5c:69:00",
            "946d:ae03:00a1:b200",
            "94-6D-AE-5C-69-00",
            "94-6d-ae-ff-fe-5c-69-00",
            "946d.ae5c.6900",
            "MAC address: 0x946dae5c6900",
            "Node GUID: 0x946dae0300a1b200",
            "fe80:0000:0000:0000:966d:ae03:00a1:b200",
            "veth0:fe80::380d:bfff:fe5b:54d2%veth0",
            "[0]eno1:172.18.40.41<0>",
            "::ffff:10.1.2.3",
            "2400:cb00:2048:1::c629:d7a2.",
            "10.1.2.3",
            "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33",
        ];
        let neighbours = ["", " ", "x", "-", "_", ":", ".", "/", "=", "é", "0", "G"];
        let mut texts: Vec<String> = vec![
            include_str!("../../tests/data/nccl/real/eks-efa-t4-two-node-tag-output.log").into(),
            include_str!("../../tests/data/nccl/real/skypilot-h200-two-node-all-gather.log").into(),
            include_str!("../../tests/data/kernel/aer-fatal-surprise-down-nvidia-gpu-burn-1.txt")
                .into(),
        ];
        for shape in shapes {
            for before in neighbours {
                for after in neighbours {
                    texts.push(format!(
                        "{before}{shape}{after} {shape}{shape} {before}{shape}"
                    ));
                }
            }
        }
        for text in &texts {
            let fast = redact(text);
            EVERYWHERE.with(|e| e.set(true));
            let everywhere = redact(text);
            EVERYWHERE.with(|e| e.set(false));
            assert_eq!(fast, everywhere, "{text}");
        }
        // The shapes were redacted at all (the comparison is not of two unchanged texts).
        assert!(redact(&texts[3]).starts_with("GPU-00000000-0000-4000-8000-000000000001 "));
        assert_ne!(redact(&texts[0]), texts[0]);
        assert_ne!(redact(&texts[1]), texts[1]);
    }

    #[test]
    fn gpu_mig_and_bare_uuids_share_numbers() {
        let mut r = Redactor::new();
        let out = r.redact(
            "GPU-263526ca-0ed0-753b-08aa-4ed33dd41658 263526ca-0ed0-753b-08aa-4ed33dd41658 \
             MIG-GPU-263526ca-0ed0-753b-08aa-4ed33dd41658/1/0 MIG-0d5a7f3c-2b1e-5c4d-9e8f-112233445566",
        );
        assert_eq!(
            out,
            "GPU-00000000-0000-4000-8000-000000000001 00000000-0000-4000-8000-000000000001 \
             MIG-GPU-00000000-0000-4000-8000-000000000001/1/0 MIG-00000000-0000-4000-8000-000000000002"
        );
        assert_eq!(r.counts()["gpu_uuid"], 1);
        assert_eq!(r.counts()["mig_uuid"], 1);
    }

    #[test]
    fn filesystem_uuids_in_any_shape() {
        let mut r = Redactor::new();
        let out = r.redact(
            "BOOT_IMAGE=/vmlinuz root=UUID=5c1b6a3e-9d0f-4b8e-a2c4-7f1e0d3b9a61 ro \
             resume=PARTUUID=0a1b2c3d-02 /dev/disk/by-uuid/1234-ABCD UUID=E0C8-1F2A /boot/efi",
        );
        assert_eq!(
            out,
            "BOOT_IMAGE=/vmlinuz root=UUID=00000000-0000-4000-8000-000000000001 ro \
             resume=PARTUUID=00000000-01 /dev/disk/by-uuid/0000-0002 UUID=0000-0003 /boot/efi"
        );
        assert_eq!(r.counts()["filesystem_uuid"], 4);
    }

    #[test]
    fn pod_uids_bare_and_in_cgroup_names() {
        let mut r = Redactor::new();
        r.know_uuid("599e915e-5142-4dcb-8a89-feac2562f998", Kind::PodUid);
        let out = r.redact(
            "\"PodUID\":\"599e915e-5142-4dcb-8a89-feac2562f998\" \
             kubepods-besteffort-pod599e915e_5142_4dcb_8a89_feac2562f998.slice \
             boot 0c8e4b1e-6f1f-4f5b-8f87-3b2a1d0c9e8f x-1c8e4b1e-6f1f-4f5b-8f87-3b2a1d0c9e8f",
        );
        assert_eq!(
            out,
            "\"PodUID\":\"00000000-0000-4000-8000-000000000001\" \
             kubepods-besteffort-pod00000000_0000_4000_8000_000000000001.slice \
             boot 00000000-0000-4000-8000-000000000002 x-1c8e4b1e-6f1f-4f5b-8f87-3b2a1d0c9e8f"
        );
        assert_eq!(r.counts()["pod_uid"], 1);
        assert_eq!(r.counts()["uuid"], 1);
    }

    #[test]
    fn macs_in_every_common_notation_are_one_value() {
        let mut r = Redactor::new();
        let out = r.redact(
            "link/ether 94:6d:ae:5c:69:00 dash 94-6D-AE-5C-69-00 cisco 946d.ae5c.6900 \
             MAC address: 0x946dae5c6900 other 94:6d:ae:5c:69:01 comm 0x55d0c3f1a2b0 \
             eui64 94-6d-ae-ff-fe-5c-69-00 Node GUID: 0x946dae0300a1b200 guid 946d:ae03:00a1:b200",
        );
        assert_eq!(
            out,
            "link/ether 02:00:00:00:00:01 dash 02-00-00-00-00-01 cisco 0200.0000.0001 \
             MAC address: 0x020000000001 other 02:00:00:00:00:02 comm 0x55d0c3f1a2b0 \
             eui64 00-00-00-00-00-00-00-02 Node GUID: 0x0000000000000001 guid 0000:0000:0000:0001"
        );
        // ibstat's `Node GUID: 0x946dae0300a1b200` and sysfs's `946d:ae03:00a1:b200` are one GUID.
        assert_eq!(r.counts()["mac_address"], 2);
        assert_eq!(r.counts()["node_guid"], 2);
    }

    #[test]
    fn ipv6_in_every_form() {
        // NCCL 2.5.6's bootstrap line from NVIDIA/nccl#529 and 2.7's from Oneflow-Inc/oneflow#3586,
        // byte for byte: interface name, colon, address, optional zone, `<0>`.
        let nccl_529 = "NvYt-dcf441d17e21-1bdf2bc9-79ce82ee-3fe03e8-c2959af0:97:221 [0] NCCL INFO Bootstrap : Using [0]ip6tnl0:fe80::e866:19ff:fe1e:a688%ip6tnl0<0> [1]veth0:2a02:6b8:fc1d:3606:0:4457:edef:600a<0>";
        let oneflow_3586 = "worker:101542:101542 [0] NCCL INFO NET/Socket : Using [0]eno1:172.18.40.41<0> [1]veth25f2e72:fe80::380d:bfff:fe5b:54d2%veth25f2e72<0>";
        let mut r = Redactor::new();
        let out = r.redact(&format!("{nccl_529}\n{oneflow_3586}\n"));
        assert_eq!(
            out,
            "NvYt-dcf441d17e21-1bdf2bc9-79ce82ee-3fe03e8-c2959af0:97:221 [0] NCCL INFO Bootstrap : Using [0]ip6tnl0:fe80::1%ip6tnl0<0> [1]veth0:2001:db8::2<0>\n\
             worker:101542:101542 [0] NCCL INFO NET/Socket : Using [0]eno1:192.0.2.1<0> [1]veth25f2e72:fe80::3%veth25f2e72<0>\n"
        );
        let out = redact(
            "full 2001:0db8:85a3:0000:0000:8a2e:0370:7334 compressed 2001:db8:85a3::8a2e:370:7334 \
             mapped ::ffff:10.1.2.3 v4 10.1.2.3 gid fe80:0000:0000:0000:966d:ae03:00a1:b200 \
             nccl [localGid fe80::966d:ae03:a1:b200] bracket [2001:db9::5]:8080 end 2400:cb00:2048:1::c629:d7a2.",
        );
        assert_eq!(
            out,
            "full 2001:0db8:0000:0000:0000:0000:0000:0001 compressed 2001:db8::1 \
             mapped ::ffff:192.0.2.1 v4 192.0.2.1 gid fe80:0000:0000:0000:0000:0000:0000:0002 \
             nccl [localGid fe80::2] bracket [2001:db8::3]:8080 end 2001:db8::4."
        );
    }

    #[test]
    fn what_only_looks_like_an_address_stays() {
        let text = "pci 0000:18:00.0 10000:00:04.0 at 07:01:02 [2026-07-14 10:21:33] ver 550.54.15 \
                    fw 28.39.1002 std::vector a::b ::1 :: fe80::1 p2p.cc:1148 0x7f3c2a1b 4.4.4.4.4 \
                    2024-01-02 aa-bb-cc 1234.5678 comm 0x55d0c3f1a2b0 ptr 0x0000000000000000 \
                    mask 00:00:00:00:00:00 zero-uuid 00000000-0000-0000-0000-000000000000";
        assert_eq!(redact(text), text);
    }
}
