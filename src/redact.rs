//! Redaction for captures: host names, serial numbers, GPU and MIG UUIDs, InfiniBand GUIDs and
//! GIDs, MAC and IP addresses, pod names — each replaced by a placeholder of the same shape, the
//! same value always by the same placeholder, so that a redacted capture replays to the same
//! verdict (a UUID in `nvml.json` still matches the UUID in a CDI spec and in the kernel log).
//!
//! Pure string transforms; no I/O. Shapes are recognised without regexes: a GPU UUID is
//! `GPU-`/`MIG-` + 8-4-4-4-12 hex; colon-separated hex runs are MACs (6 × 2 hex), IPoIB hardware
//! addresses (20 × 2 hex), node GUIDs (4 × 4 hex) or GIDs (8 × 4 hex); dotted runs of four
//! numbers ≤ 255 are IPv4 addresses. PCI addresses (`0000:18:00.0`) and times (`07:01:02`) have
//! other shapes and are left alone.

use std::collections::{BTreeMap, HashMap};

/// What kind of value a placeholder stands for (the manifest counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Hostname,
    Serial,
    GpuUuid,
    MigUuid,
    Guid,
    Gid,
    Mac,
    HardwareAddress,
    Ipv4,
    PodName,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hostname => "hostname",
            Kind::Serial => "serial_number",
            Kind::GpuUuid => "gpu_uuid",
            Kind::MigUuid => "mig_uuid",
            Kind::Guid => "node_guid",
            Kind::Gid => "gid",
            Kind::Mac => "mac_address",
            Kind::HardwareAddress => "ipoib_hardware_address",
            Kind::Ipv4 => "ipv4_address",
            Kind::PodName => "pod_name",
        }
    }
}

/// Consistent value → placeholder mapping across every file of one capture.
#[derive(Debug, Default)]
pub struct Redactor {
    map: HashMap<String, String>,
    counts: BTreeMap<Kind, usize>,
    /// Known literal values (host names, serials, pod names), longest first when applied.
    literals: Vec<(String, Kind)>,
}

impl Redactor {
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Replace every occurrence of `value` (a host name, a serial, a pod name). Values shorter
    /// than 3 characters are ignored: replacing them would mangle unrelated text.
    pub fn add_literal(&mut self, kind: Kind, value: &str) {
        let value = value.trim();
        if value.len() < 3 || self.literals.iter().any(|(v, _)| v == value) {
            return;
        }
        self.literals.push((value.to_string(), kind));
        self.literals
            .sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
    }

    /// Kinds replaced so far and how many distinct values of each.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        self.counts.iter().map(|(k, n)| (k.name(), *n)).collect()
    }

    fn placeholder(&mut self, kind: Kind, original: &str) -> String {
        if let Some(done) = self.map.get(original) {
            return done.clone();
        }
        // Already a placeholder (a capture of a capture): keep it, so redaction is idempotent
        // and a re-recorded capture is byte-identical.
        if is_placeholder(kind, original) {
            return original.to_string();
        }
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        let n = *n;
        let replacement = match kind {
            Kind::Hostname => format!("node-{n:04}"),
            // Keep digits-only serials digits-only and the same length, for parsers that care.
            Kind::Serial if original.chars().all(|c| c.is_ascii_digit()) => {
                format!("{n:0width$}", width = original.len().max(4))
            }
            Kind::Serial => format!("SERIAL{n:06}"),
            Kind::GpuUuid => format!("GPU-00000000-0000-4000-8000-{n:012x}"),
            Kind::MigUuid => format!("MIG-00000000-0000-4000-8000-{n:012x}"),
            Kind::Guid => format!("0000:0000:0000:{n:04x}"),
            Kind::Gid => format!("fe80:0000:0000:0000:0000:0000:0000:{n:04x}"),
            // Locally administered unicast (02:...), so it can never be a real vendor's.
            Kind::Mac => format!("02:00:00:00:{:02x}:{:02x}", (n >> 8) & 0xff, n & 0xff),
            Kind::HardwareAddress => {
                let mut groups = vec!["00"; 18].join(":");
                groups.push_str(&format!(":{:02x}:{:02x}", (n >> 8) & 0xff, n & 0xff));
                groups
            }
            // TEST-NET-1 (RFC 5737): documentation addresses.
            Kind::Ipv4 => format!("192.0.2.{}", n % 254 + 1),
            Kind::PodName => format!("pod-{n:04}"),
        };
        self.map.insert(original.to_string(), replacement.clone());
        replacement
    }

    /// Redact one text (a file's content, a probe answer).
    pub fn redact(&mut self, text: &str) -> String {
        let mut out = self.redact_literals(text);
        out = self.redact_uuids(&out);
        out = self.redact_hex_runs(&out);
        self.redact_ipv4(&out)
    }

    /// Redact every string (and object key) inside a JSON value, in place: the manifest's command
    /// line and error texts, a stored report. Working on the value, not its text, keeps the JSON
    /// well-formed whatever a replacement looks like.
    pub fn redact_value(&mut self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(text) => *text = self.redact(text),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (key, mut v) in old {
                    self.redact_value(&mut v);
                    map.insert(self.redact(&key), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    fn redact_literals(&mut self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, kind) in self.literals.clone() {
            if out.contains(&value) {
                let replacement = self.placeholder(kind, &value);
                out = out.replace(&value, &replacement);
            }
        }
        out
    }

    fn redact_uuids(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(pos) = rest.find("GPU-").into_iter().chain(rest.find("MIG-")).min() {
            out.push_str(&rest[..pos]);
            let candidate = &rest[pos..];
            let body = candidate.get(4..40).unwrap_or_default();
            if is_uuid(body) && !candidate[40..].starts_with(|c: char| c.is_ascii_hexdigit()) {
                let kind = if candidate.starts_with("GPU-") {
                    Kind::GpuUuid
                } else {
                    Kind::MigUuid
                };
                let whole = &candidate[..40];
                out.push_str(&self.placeholder(kind, whole));
                rest = &candidate[40..];
            } else {
                out.push_str(&candidate[..4]);
                rest = &candidate[4..];
            }
        }
        out.push_str(rest);
        out
    }

    fn redact_hex_runs(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut run_start: Option<usize> = None;
        let bytes = text.as_bytes();
        let is_run_char = |b: u8| b.is_ascii_hexdigit() || b == b':';
        for i in 0..=bytes.len() {
            let in_run = i < bytes.len() && is_run_char(bytes[i]);
            match (in_run, run_start) {
                (true, None) => run_start = Some(i),
                (false, Some(start)) => {
                    let run = &text[start..i];
                    let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
                    let after_ok = i == bytes.len() || !bytes[i].is_ascii_alphanumeric();
                    match (before_ok && after_ok).then(|| hex_run_kind(run)).flatten() {
                        Some(kind) => {
                            let replacement = self.placeholder(kind, run);
                            out.push_str(&replacement);
                        }
                        None => out.push_str(run),
                    }
                    run_start = None;
                    if let Some(ch) = text.get(i..).and_then(|t| t.chars().next()) {
                        out.push(ch);
                    }
                }
                (false, None) => {
                    // Copy the whole UTF-8 character starting here; continuation bytes of a
                    // character already copied are not boundaries and are skipped.
                    if let Some(ch) = text.get(i..).and_then(|t| t.chars().next()) {
                        out.push(ch);
                    }
                }
                (true, Some(_)) => {}
            }
        }
        out
    }

    fn redact_ipv4(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_digit()
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'))
            {
                let start = i;
                let mut end = i;
                while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
                    end += 1;
                }
                let run = &text[start..end];
                let after_ok = end == bytes.len() || !bytes[end].is_ascii_alphanumeric();
                if after_ok && is_ipv4(run) {
                    let replacement = self.placeholder(Kind::Ipv4, run);
                    out.push_str(&replacement);
                } else {
                    out.push_str(run);
                }
                i = end;
                continue;
            }
            if let Some(ch) = text[i..].chars().next() {
                out.push(ch);
                i += ch.len_utf8();
            } else {
                i += 1;
            }
        }
        out
    }
}

/// Does `value` already have the shape [`Redactor::placeholder`] gives `kind`?
fn is_placeholder(kind: Kind, value: &str) -> bool {
    let numbered = |prefix: &str| {
        value
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit()))
    };
    match kind {
        Kind::Hostname => numbered("node-"),
        Kind::PodName => numbered("pod-"),
        Kind::Serial => {
            numbered("SERIAL")
                || (value.len() >= 4
                    && value.starts_with("000")
                    && value.chars().all(|c| c.is_ascii_digit()))
        }
        Kind::GpuUuid => numbered("GPU-00000000-0000-4000-8000-"),
        Kind::MigUuid => numbered("MIG-00000000-0000-4000-8000-"),
        Kind::Guid => value.starts_with("0000:0000:0000:"),
        Kind::Gid => value.starts_with("fe80:0000:0000:0000:0000:0000:0000:"),
        Kind::Mac => value.starts_with("02:00:00:00:"),
        Kind::HardwareAddress => {
            value.starts_with("00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:")
        }
        Kind::Ipv4 => value.starts_with("192.0.2."),
    }
}

fn is_uuid(body: &str) -> bool {
    let groups: Vec<&str> = body.split('-').collect();
    groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn hex_run_kind(run: &str) -> Option<Kind> {
    let groups: Vec<&str> = run.split(':').collect();
    let all_len = |n: usize| groups.iter().all(|g| g.len() == n);
    // All-zero values identify nothing (an unset GUID, a null MAC): leave them readable.
    if groups.iter().all(|g| g.chars().all(|c| c == '0')) {
        return None;
    }
    match (groups.len(), all_len(2), all_len(4)) {
        (6, true, _) => Some(Kind::Mac),
        (20, true, _) => Some(Kind::HardwareAddress),
        (4, _, true) => Some(Kind::Guid),
        (8, _, true) => Some(Kind::Gid),
        _ => None,
    }
}

fn is_ipv4(run: &str) -> bool {
    let parts: Vec<&str> = run.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.parse::<u16>().is_ok_and(|v| v <= 255))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_string_of_a_json_value() {
        let mut r = Redactor::new();
        r.add_literal(Kind::Hostname, "gpu-node-17");
        let mut v = serde_json::json!({
            "command_line": ["gpudoctor", "record", "--out", "/tmp/gpu-node-17-gpudoctor.tar.gz"],
            "unreadable": [{"path": "sys/x", "error": "gpu-node-17: denied"}],
            "gpu-node-17": 3,
            "n": 1,
        });
        r.redact_value(&mut v);
        let text = v.to_string();
        assert!(!text.contains("gpu-node-17"), "{text}");
        assert_eq!(v["n"], 1);
        assert_eq!(v["command_line"][1], "record");
        assert_eq!(
            r.counts().get("hostname"),
            Some(&1),
            "one value, one placeholder"
        );
    }

    #[test]
    fn same_value_same_placeholder_across_texts() {
        let mut r = Redactor::new();
        let a = r.redact("uuid GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f here");
        let b = r.redact("{\"uuid\": \"GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f\"}");
        assert_eq!(a, "uuid GPU-00000000-0000-4000-8000-000000000001 here");
        assert!(b.contains("GPU-00000000-0000-4000-8000-000000000001"));
        assert_eq!(r.counts()["gpu_uuid"], 1);
    }

    #[test]
    fn recognises_addresses_and_leaves_pci_ids_and_times() {
        let mut r = Redactor::new();
        let text = "mac 94:6d:ae:5c:69:00 guid 946d:ae03:00a1:b200 pci 0000:18:00.0 at 07:01:02 \
                    gid fe80:0000:0000:0000:966d:ae03:00a1:b200 ip 10.1.2.3 ver 550.54.15 \
                    zero 0000:0000:0000:0000";
        let out = r.redact(text);
        assert!(out.contains("mac 02:00:00:00:00:01"), "{out}");
        assert!(out.contains("guid 0000:0000:0000:0001"), "{out}");
        assert!(
            out.contains("pci 0000:18:00.0") && out.contains("at 07:01:02"),
            "{out}"
        );
        assert!(
            out.contains("gid fe80:0000:0000:0000:0000:0000:0000:0001"),
            "{out}"
        );
        assert!(
            out.contains("ip 192.0.2.2") || out.contains("ip 192.0.2."),
            "{out}"
        );
        assert!(
            out.contains("ver 550.54.15") && out.contains("zero 0000:0000:0000:0000"),
            "{out}"
        );
    }

    #[test]
    fn literals_and_serials() {
        let mut r = Redactor::new();
        r.add_literal(Kind::Hostname, "hgx-h100-01");
        r.add_literal(Kind::Serial, "1654922007835");
        r.add_literal(Kind::Hostname, "x"); // too short: ignored
        let out = r.redact("hgx-h100-01 mlx5_0 serial 1654922007835 x");
        assert_eq!(out, "node-0001 mlx5_0 serial 0000000000001 x");
    }

    #[test]
    fn redacting_twice_changes_nothing_more() {
        let mut first = Redactor::new();
        first.add_literal(Kind::PodName, "llama-train-0");
        first.add_literal(Kind::PodName, "bert-finetune-7f9c5");
        let once = first.redact("llama-train-0 bert-finetune-7f9c5 GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f 94:6d:ae:5c:69:00");
        let mut second = Redactor::new();
        second.add_literal(Kind::PodName, "pod-0002");
        second.add_literal(Kind::PodName, "pod-0001");
        assert_eq!(second.redact(&once), once);
    }

    #[test]
    fn unicode_and_odd_input_survive() {
        let mut r = Redactor::new();
        let text = "temp 31 °C · GPU- GPU-zz MIG-1234 ::: : 1.2.3.4.5 \u{fffd}";
        assert_eq!(r.redact(text), text);
    }
}
