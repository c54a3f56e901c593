//! Redaction for captures: host names, serial numbers, GPU and MIG UUIDs, Pod UIDs and names,
//! filesystem UUIDs, InfiniBand GUIDs and GIDs, MAC addresses in every common notation, IPv4 and
//! IPv6 addresses in every form — each replaced by a placeholder of the same shape and notation,
//! the same value always by the same placeholder, so that a redacted capture replays to the same
//! verdict (a UUID in `nvml.json` still matches the UUID in a CDI spec, in the kernel log and in
//! the kubelet's checkpoint).
//!
//! Pure string transforms; no I/O. Values are recognised as whole tokens by shape
//! ([`shapes`]), or as literals known from the facts (the host name, serials, pod names:
//! [`literals`], whole tokens only, and refused when too short or a common word; NCCL peers from
//! the `host:pid:tid` prefixes of NCCL lines, [`nccl`]); the kubelet's
//! device-plugin checkpoint also carries protobuf answers in base64, decoded and redacted by
//! [`checkpoint`]. PCI addresses (`0000:18:00.0`), times (`07:01:02`), versions (`550.54.15`) have
//! other shapes and are left alone, and so are all-zero values (an unset GUID, a null MAC).
//!
//! One value is one number per namespace (`uuid`, `mac`, `guid`, `ip4`, `ip6`, ...), however it is
//! written: `GPU-<u>` and a bare `<u>`, `94:6d:ae:5c:69:00` and `94-6D-AE-5C-69-00`, a RoCE GID in
//! sysfs's full form and the same address compressed in an NCCL log get the same placeholder, each
//! in its own notation. Placeholders are never redacted again, so redacting a capture of a capture
//! changes nothing.

mod checkpoint;
mod literals;
mod nccl;
mod shapes;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What kind of value a placeholder stands for (the manifest counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Hostname,
    Serial,
    /// A GPU's board part number (`692-2G520-0200-000`): it goes on an RMA form with the serial.
    PartNumber,
    GpuUuid,
    MigUuid,
    /// A Pod's UID (the kubelet checkpoint's `PodUID`, cgroup paths).
    PodUid,
    /// A filesystem or partition UUID (`root=UUID=...`, `/dev/disk/by-uuid/...`).
    FsUuid,
    /// Any other UUID-shaped token (device ids of other plugins, boot ids).
    Uuid,
    Guid,
    Gid,
    Mac,
    HardwareAddress,
    Ipv4,
    Ipv6,
    PodName,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hostname => "hostname",
            Kind::Serial => "serial_number",
            Kind::PartNumber => "board_part_number",
            Kind::GpuUuid => "gpu_uuid",
            Kind::MigUuid => "mig_uuid",
            Kind::PodUid => "pod_uid",
            Kind::FsUuid => "filesystem_uuid",
            Kind::Uuid => "uuid",
            Kind::Guid => "node_guid",
            Kind::Gid => "gid",
            Kind::Mac => "mac_address",
            Kind::HardwareAddress => "ipoib_hardware_address",
            Kind::Ipv4 => "ipv4_address",
            Kind::Ipv6 => "ipv6_address",
            Kind::PodName => "pod_name",
        }
    }
}

/// Consistent value → placeholder mapping across every file of one capture.
#[derive(Debug, Default)]
pub struct Redactor {
    /// `namespace:canonical value` → its number in that namespace.
    numbers: HashMap<String, usize>,
    /// Numbers handed out per namespace.
    next: HashMap<&'static str, usize>,
    /// Distinct values replaced, per kind.
    counts: BTreeMap<Kind, usize>,
    /// Known literal values (host names, serials, pod names), longest first when applied.
    literals: Vec<(String, Kind)>,
    /// UUIDs whose kind is known from where they were read (a checkpoint's `PodUID`).
    known_uuids: HashMap<String, Kind>,
    /// Every placeholder handed out: a later pass leaves it alone.
    produced: HashSet<String>,
    /// What a reader of the capture should know about its redaction (the manifest's
    /// `redaction.notes`): values kept on purpose, answers re-encoded or dropped.
    notes: BTreeSet<String>,
    /// Pids of GPU processes: their `proc/<pid>/cmdline` keeps only the executable's name
    /// ([`Redactor::redact_file`]). Other processes' command lines are read for what they
    /// configure (the kubelet's `--config`) and redacted as any text.
    gpu_processes: BTreeSet<u32>,
}

impl Redactor {
    pub fn new() -> Self {
        Redactor::default()
    }

    /// The process `pid` holds a GPU: a capture names it by its executable alone.
    pub fn add_gpu_process(&mut self, pid: u32) {
        self.gpu_processes.insert(pid);
    }

    /// Kinds replaced so far and how many distinct values of each.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        self.counts.iter().map(|(k, n)| (k.name(), *n)).collect()
    }

    /// What the manifest should say besides the counts, sorted.
    pub fn notes(&self) -> Vec<String> {
        self.notes.iter().cloned().collect()
    }

    fn note(&mut self, note: impl Into<String>) {
        self.notes.insert(note.into());
    }

    /// The number of `key` in `space`, handing out the next one (and counting a new value of
    /// `kind`) the first time.
    fn number(&mut self, space: &'static str, key: &str, kind: Kind) -> usize {
        let full = format!("{space}:{key}");
        if let Some(n) = self.numbers.get(&full) {
            return *n;
        }
        let next = self.next.entry(space).or_default();
        *next += 1;
        let n = *next;
        self.numbers.insert(full, n);
        *self.counts.entry(kind).or_default() += 1;
        n
    }

    /// Remember a placeholder as handed out, and return it.
    fn produced(&mut self, placeholder: String) -> String {
        self.produced.insert(placeholder.clone());
        placeholder
    }

    fn is_produced(&self, text: &str) -> bool {
        self.produced.contains(text)
    }

    /// Redact one text (a file's content, a probe answer).
    pub fn redact(&mut self, text: &str) -> String {
        let out = self.redact_literals(text);
        let out = self.redact_prefixed_uuids(&out);
        let out = self.redact_filesystem_ids(&out);
        let out = self.redact_bare_uuids(&out);
        let out = self.redact_colon_runs(&out);
        let out = self.redact_mac_notations(&out);
        let out = self.redact_ipv6(&out);
        self.redact_ipv4(&out)
    }

    /// Redact a file of the capture: `rel` is its root-relative path. The kubelet's device-plugin
    /// checkpoint first has its base64 `AllocResp` answers decoded, redacted and re-encoded.
    pub fn redact_file(&mut self, rel: &str, text: &str) -> String {
        if proc_cmdline_pid(rel).is_some_and(|pid| self.gpu_processes.contains(&pid)) {
            return self.redact(&process_cmdline(text));
        }
        if rel == crate::facts::k8s::CHECKPOINT {
            let text = self.redact_checkpoint(rel, text);
            return self.redact(&text);
        }
        self.redact(text)
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
}

/// The pid of `proc/<pid>/cmdline`: what names a GPU process (`source::nvml_live::process_name`).
fn proc_cmdline_pid(rel: &str) -> Option<u32> {
    rel.strip_prefix("proc/")?
        .strip_suffix("/cmdline")?
        .parse()
        .ok()
}

/// A process's command line as a capture keeps it: only its first argument's base name,
/// NUL-terminated as the kernel writes it (proc(5)). The other arguments may hold tokens or
/// passwords, the path a user's home directory; naming the process needs neither.
fn process_cmdline(text: &str) -> String {
    match text.split('\0').next().map(str::trim) {
        Some(first) if !first.is_empty() => format!("{}\0", executable_name(first)),
        _ => String::new(),
    }
}

/// `/home/alice/venv/bin/python3` → `python3`: a process named without its directory.
pub fn executable_name(name: &str) -> &str {
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.is_empty() { name } else { base }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_command_line_keeps_only_its_executable_name() {
        let mut r = Redactor::new();
        r.add_gpu_process(60321);
        // Another process's command line is read for what it configures (the kubelet's).
        assert_eq!(
            r.redact_file(
                "proc/1234/cmdline",
                "/usr/bin/kubelet\0--config=/etc/k.yaml\0"
            ),
            "/usr/bin/kubelet\0--config=/etc/k.yaml\0"
        );
        assert_eq!(
            r.redact_file(
                "proc/60321/cmdline",
                "/home/alice/venv/bin/python3\0train.py\0--token=s3cr3t\0"
            ),
            "python3\0"
        );
        assert_eq!(r.redact_file("proc/60321/cmdline", ""), "");
        // Other files under /proc are redacted as any text.
        assert_eq!(r.redact_file("proc/cmdline", "a\0b"), "a\0b");
        assert_eq!(r.redact_file("proc/self/cmdline", "x\0y"), "x\0y");
        assert_eq!(executable_name("python3"), "python3");
        assert_eq!(executable_name("/usr/bin/"), "/usr/bin/");
    }

    #[test]
    fn redacts_every_string_of_a_json_value() {
        let mut r = Redactor::new();
        r.add_hostname("gpu-node-17", false);
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
        assert!(out.contains("ip 192.0.2.1 "), "{out}");
        assert!(
            out.contains("ver 550.54.15") && out.contains("zero 0000:0000:0000:0000"),
            "{out}"
        );
    }

    #[test]
    fn redacting_twice_changes_nothing_more() {
        let mut first = Redactor::new();
        first.add_pod_name("llama-train-0");
        first.add_pod_name("bert-finetune-7f9c5");
        first.add_hostname("gpu-node-17.cluster.local", false);
        let once = first.redact(
            "llama-train-0 bert-finetune-7f9c5 GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f \
             94:6d:ae:5c:69:00 94-6D-AE-5C-69-01 946d.ae5c.6902 mac 0x946dae5c6903 \
             fe80::946d:ae03:a1:b230%ib0 2a02:6b8:fc1d:3606:0:4457:edef:600a ::ffff:10.1.2.3 \
             root=UUID=5c1b6a3e-9d0f-4b8e-a2c4-7f1e0d3b9a61 PARTUUID=0a1b2c3d-01 \
             UUID=1234-ABCD pod599e915e_5142_4dcb_8a89_feac2562f998.slice \
             gpu-node-17.cluster.local gpu-node-17 10.0.0.12<52131>",
        );
        let mut second = Redactor::new();
        second.add_pod_name("pod-0002");
        second.add_pod_name("pod-0001");
        second.add_hostname("node-0001", false);
        assert_eq!(second.redact(&once), once);
        assert!(second.counts().is_empty(), "{:?}", second.counts());
    }

    #[test]
    fn unicode_and_odd_input_survive() {
        let mut r = Redactor::new();
        let text = "temp 31 °C · GPU- GPU-zz MIG-1234 ::: : 1.2.3.4.5 \u{fffd} std::vector a::b \
                    0x 0x12 UUID= by-uuid/ -- .. 1234.5678 ab-cd-ef 12:34";
        assert_eq!(r.redact(text), text);
        assert!(r.counts().is_empty());
    }
}
