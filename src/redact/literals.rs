//! Literal values known from the facts — the host name (and its short name), board serial
//! numbers, pod names — replaced as whole tokens only: never inside another word (`gpu` in
//! `nvidia.com/gpu`, `node7` in `node70`), and a host name never as a label of another name
//! (`x.gpu-node-7`). A host name shorter than 4 characters, all digits or equal to a common word
//! (`gpu`, `worker`, `h100`) is refused: replacing it would rewrite words that are not the host
//! name and change the replay's verdict. It stays in the capture, and a note says so (stderr and
//! the manifest) unless `--redact-hostname-anyway` asks for it to be replaced all the same.

use super::{Kind, Redactor};

/// Words a host name may be but must not be replaced as: English and Kubernetes words that
/// appear in the files a capture holds, GPU, NIC and platform names, and gpudoctor's own layer
/// names. Compared case-insensitively; the built-in profile names and their parts are added.
const COMMON_WORDS: &[&str] = &[
    // generic host names and roles
    "localhost",
    "host",
    "node",
    "server",
    "worker",
    "master",
    "control",
    "controller",
    "compute",
    "login",
    "head",
    "admin",
    "root",
    "user",
    "test",
    "demo",
    "main",
    "default",
    "local",
    "cluster",
    "system",
    "machine",
    "box",
    "vm",
    "instance",
    "client",
    "agent",
    // operating systems and distributions
    "linux",
    "ubuntu",
    "debian",
    "centos",
    "rhel",
    "fedora",
    "rocky",
    "alma",
    "suse",
    "sles",
    "amazon",
    "coreos",
    "flatcar",
    "talos",
    "bottlerocket",
    "kernel",
    // Kubernetes and containers
    "kube",
    "kubelet",
    "kubernetes",
    "k8s",
    "k3s",
    "rke2",
    "pod",
    "pods",
    "docker",
    "containerd",
    "crio",
    "runc",
    "cni",
    "multus",
    "calico",
    "cilium",
    "flannel",
    "operator",
    "plugin",
    "device",
    "devices",
    "driver",
    "toolkit",
    "runtime",
    "container",
    // GPUs, NICs and the platforms gpudoctor judges
    "gpu",
    "gpus",
    "cuda",
    "nvidia",
    "nvml",
    "nccl",
    "nvlink",
    "nvswitch",
    "mig",
    "dgx",
    "hgx",
    "a100",
    "a800",
    "h100",
    "h800",
    "h200",
    "h20",
    "b100",
    "b200",
    "gb200",
    "l4",
    "l40",
    "l40s",
    "t4",
    "v100",
    "mlx5",
    "mellanox",
    "infiniband",
    "roce",
    "rdma",
    "sriov",
    "ethernet",
    "eth0",
    "ib0",
    "bond0",
    "lo",
    "pci",
    "pcie",
    "numa",
    "topology",
    "network",
];

/// Why `value` must not be replaced as a literal, if it must not.
fn refusal(value: &str) -> Option<&'static str> {
    if value.chars().count() < 4 {
        return Some("shorter than 4 characters");
    }
    if value.chars().all(|c| c.is_ascii_digit()) {
        return Some("all digits");
    }
    let lower = value.to_ascii_lowercase();
    let builtin = || {
        crate::profile::builtins().iter().any(|p| {
            p.name.eq_ignore_ascii_case(&lower)
                || p.name
                    .split('-')
                    .any(|part| part.eq_ignore_ascii_case(&lower))
        })
    };
    if COMMON_WORDS.contains(&lower.as_str()) || builtin() {
        return Some("a common word");
    }
    None
}

impl Redactor {
    /// Replace `value` wherever it stands as a whole token. Values of 3 characters or fewer
    /// are ignored: replacing them would mangle unrelated text.
    pub fn add_literal(&mut self, kind: Kind, value: &str) {
        let value = value.trim();
        if value.chars().count() < 4
            || value.chars().all(|c| c == '0')
            || self.literals.iter().any(|(v, _)| v == value)
        {
            return;
        }
        self.literals.push((value.to_string(), kind));
        self.literals
            .sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
    }

    /// The node's (or an NCCL peer's) host name, and its first label when it is a fully
    /// qualified name. A name [`refusal`] refuses is kept, unless `anyway`; the note why is
    /// returned (for stderr) and kept for the manifest.
    pub fn add_hostname(&mut self, host: &str, anyway: bool) -> Vec<String> {
        let host = host.trim().trim_end_matches('.');
        let mut names = vec![host];
        if let Some((short, _)) = host.split_once('.')
            && !short.is_empty()
        {
            names.push(short);
        }
        let mut said = Vec::new();
        for name in names {
            if name.is_empty() || super::shapes::is_placeholder(Kind::Hostname, name) {
                continue;
            }
            match (refusal(name), anyway) {
                (None, _) => self.add_literal(Kind::Hostname, name),
                (Some(why), false) => {
                    let note = format!(
                        "host name `{name}` kept: {why}, replacing it would rewrite other words (`nvidia.com/gpu` for `gpu`) and could change the verdict; pass --redact-hostname-anyway to replace it all the same"
                    );
                    self.note(note.clone());
                    said.push(note);
                }
                (Some(why), true) => {
                    self.literals.push((name.to_string(), Kind::Hostname));
                    self.literals
                        .sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
                    let note = format!(
                        "a host name that is {why} was replaced anyway (--redact-hostname-anyway): words equal to it were replaced too"
                    );
                    self.note(note.clone());
                    said.push(note);
                }
            }
        }
        said
    }

    /// A pod's name (from the kubelet's answer), replaced as a whole token where it is safe; the
    /// kubelet's answer itself has its names replaced by [`Redactor::pod_name`] whatever they are.
    pub fn add_pod_name(&mut self, name: &str) {
        let name = name.trim();
        if name.is_empty() || super::shapes::is_placeholder(Kind::PodName, name) {
            return;
        }
        match refusal(name) {
            None => self.add_literal(Kind::PodName, name),
            Some(why) => self.note(format!(
                "a pod name that is {why} is replaced only in the kubelet's answer, not in other text"
            )),
        }
    }

    /// The placeholder of a pod name, for the kubelet's answer (where the field says it is one).
    pub fn pod_name(&mut self, name: &str) -> String {
        if super::shapes::is_placeholder(Kind::PodName, name) {
            return name.to_string();
        }
        self.literal_placeholder(Kind::PodName, name)
    }

    fn literal_placeholder(&mut self, kind: Kind, value: &str) -> String {
        let n = self.number(kind.name(), value, kind);
        let placeholder = match kind {
            Kind::Hostname => format!("node-{n:04}"),
            Kind::PodName => format!("pod-{n:04}"),
            Kind::PartNumber => format!("PART{n:06}"),
            // Keep digits-only serials digits-only and the same length, for parsers that care.
            Kind::Serial if value.chars().all(|c| c.is_ascii_digit()) => {
                format!("{n:0width$}", width = value.len().max(4))
            }
            _ => format!("SERIAL{n:06}"),
        };
        self.produced(placeholder)
    }

    pub(super) fn redact_literals(&mut self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, kind) in self.literals.clone() {
            if !out.contains(&value) {
                continue;
            }
            let host = kind == Kind::Hostname;
            let starts: Vec<usize> = out
                .match_indices(&value)
                .map(|(i, _)| i)
                .filter(|&i| whole_token(&out, i, i + value.len(), host))
                .collect();
            if starts.is_empty() {
                continue;
            }
            let replacement = self.literal_placeholder(kind, &value);
            let mut next = String::with_capacity(out.len());
            let mut at = 0;
            for start in starts {
                if start < at {
                    continue;
                }
                next.push_str(&out[at..start]);
                next.push_str(&replacement);
                at = start + value.len();
            }
            next.push_str(&out[at..]);
            out = next;
        }
        out
    }
}

/// Does `text[start..end]` stand as a token of its own? Not when a letter or digit touches it
/// (it would be part of a longer word), and for a host name not when a dot comes before it
/// (it would be a label of another name, `x.gpu-node-7`).
fn whole_token(text: &str, start: usize, end: usize, host: bool) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    let touching = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    let label_of_another_name = host && before == Some('.');
    !(touching(before) || touching(after) || label_of_another_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_serials() {
        let mut r = Redactor::new();
        r.add_hostname("hgx-h100-01", false);
        r.add_literal(Kind::Serial, "1654922007835");
        r.add_literal(Kind::Hostname, "x"); // too short: ignored
        let out = r.redact("hgx-h100-01 mlx5_0 serial 1654922007835 x");
        assert_eq!(out, "node-0001 mlx5_0 serial 0000000000001 x");
    }

    #[test]
    fn board_part_numbers_have_placeholders_of_their_own() {
        // Their own numbering: redacting a capture again gives the same placeholders whatever
        // order the literals are applied in (tests/record.rs, a capture of a capture).
        let mut r = Redactor::new();
        r.add_literal(Kind::Serial, "1654922007835");
        r.add_literal(Kind::PartNumber, "692-2G520-0200-000");
        let out = r.redact("serial 1654922007835 part 692-2G520-0200-000");
        assert_eq!(out, "serial 0000000000001 part PART000001");
        let mut again = Redactor::new();
        again.add_literal(Kind::PartNumber, "PART000001");
        assert_eq!(again.redact(&out), out);
    }

    #[test]
    fn a_host_name_is_replaced_only_as_a_whole_token() {
        let mut r = Redactor::new();
        assert!(r.add_hostname("gpu-node-7.cluster.local", false).is_empty());
        let out = r.redact(
            "gpu-node-7.cluster.local gpu-node-7: /tmp/gpu-node-7-gpudoctor.tar.gz \
             gpu-node-70 agpu-node-7 x.gpu-node-7 \"gpu-node-7\" gpu-node-7.other.example",
        );
        assert_eq!(
            out,
            "node-0001 node-0002: /tmp/node-0002-gpudoctor.tar.gz \
             gpu-node-70 agpu-node-7 x.gpu-node-7 \"node-0002\" node-0002.other.example"
        );
    }

    #[test]
    fn a_short_or_common_host_name_is_refused_and_said() {
        // The report that started this: a host named `gpu` rewrote `nvidia.com/gpu`.
        for host in ["gpu", "node", "worker", "h100", "HGX", "1234", "localhost"] {
            let mut r = Redactor::new();
            let said = r.add_hostname(host, false);
            assert_eq!(said.len(), 1, "{host}: {said:?}");
            assert!(said[0].contains("--redact-hostname-anyway"), "{said:?}");
            assert_eq!(r.notes(), said);
            let text = format!("nvidia.com/gpu {host} resource nvidia.com/{host}");
            assert_eq!(r.redact(&text), text, "{host}");
        }
        // Asked for anyway: replaced, and the note says what that costs.
        let mut r = Redactor::new();
        let said = r.add_hostname("gpu", true);
        assert!(said[0].contains("replaced anyway"), "{said:?}");
        assert!(
            !said[0].contains("`gpu`"),
            "the note does not name it: {said:?}"
        );
        assert_eq!(r.redact("host gpu"), "host node-0001");
        // An FQDN whose first label is a common word: the FQDN goes, the label stays.
        let mut r = Redactor::new();
        let said = r.add_hostname("worker.example.com", false);
        assert_eq!(said.len(), 1);
        assert_eq!(r.redact("worker.example.com worker"), "node-0001 worker");
    }

    #[test]
    fn pod_names_are_whole_tokens_and_the_kubelet_answer_always_loses_them() {
        let mut r = Redactor::new();
        r.add_pod_name("llama-train-0");
        r.add_pod_name("test");
        assert_eq!(
            r.redact("llama-train-0 llama-train-01 test"),
            "pod-0001 llama-train-01 test"
        );
        assert_eq!(r.pod_name("test"), "pod-0002");
        assert_eq!(r.pod_name("llama-train-0"), "pod-0001");
        assert_eq!(r.counts()["pod_name"], 2);
        assert_eq!(r.notes().len(), 1, "{:?}", r.notes());
    }
}
