//! What a pasted file is, told from its content alone (never from its name: tickets arrive as
//! `attachment.txt`). Each kind is recognised by lines only its tool writes, wherever a launcher
//! or log collector put a prefix before them:
//! - `nvidia-smi topo -m`: a header naming `GPU0` and a row `GPU0 … X …` (nvidia-smi's
//!   topology table, with or without the affinity columns);
//! - perftest: its banner (`RDMA_Write BW Test`, perftest's `perftest_parameters.c` prints
//!   `<verb> BW Test`) or the `#bytes … BW peak` result header;
//! - NCCL: `NCCL INFO`/`NCCL WARN` lines (NCCL's `debug.cc` prefix) or nccl-tests' own header
//!   and footer (`# nThread`, `#  Rank`, `# Avg bus bandwidth`, `out-of-place`);
//! - kernel log: the kernel's own prefixes (`[   12.345678]` of printk time, `kernel:` of
//!   journald and syslog, raw `/dev/kmsg` records `6,1234,5678,-;`) or driver prefixes
//!   (`NVRM:`, `mlx5_core`, `[Hardware Error]`, `pcieport`);
//! - kubelet config: `kind: KubeletConfiguration`, the `/configz` answer `{"kubeletconfig":…}`
//!   or OpenShift's `kind: KubeletConfig` resource;
//! - container runtime config: containerd's TOML (`[plugins.…]` naming containerd or cri) or
//!   CRI-O's (`[crio…]`);
//! - CDI spec: a `cdiVersion` key (the CDI specification's required field).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    SmiTopo,
    Perftest,
    Nccl,
    KernelLog,
    KubeletConfig,
    RuntimeConfig,
    CdiSpec,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::KernelLog,
        Kind::Nccl,
        Kind::Perftest,
        Kind::SmiTopo,
        Kind::KubeletConfig,
        Kind::RuntimeConfig,
        Kind::CdiSpec,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Kind::SmiTopo => "`nvidia-smi topo -m` matrix",
            Kind::Perftest => "perftest output (ib_write_bw, ib_read_bw, ib_send_bw)",
            Kind::Nccl => "NCCL or nccl-tests log",
            Kind::KernelLog => "kernel log (dmesg, dmesg -T, journalctl -k, /dev/kmsg, syslog)",
            Kind::KubeletConfig => "kubelet config (YAML, JSON, /configz, OpenShift KubeletConfig)",
            Kind::RuntimeConfig => "containerd or CRI-O config",
            Kind::CdiSpec => "CDI spec",
        }
    }

    /// The kinds `judge` knows, for the usage error on a file of none of them.
    pub fn known() -> String {
        Kind::ALL
            .iter()
            .map(|k| k.describe())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::SmiTopo => "topo-matrix",
            Kind::Perftest => "perftest",
            Kind::Nccl => "nccl",
            Kind::KernelLog => "kernel-log",
            Kind::KubeletConfig => "kubelet-config",
            Kind::RuntimeConfig => "runtime-config",
            Kind::CdiSpec => "cdi-spec",
        })
    }
}

/// Most lines looked at: a kind shows itself in its first lines or not at all (an NCCL log's
/// first `NCCL INFO` line can follow a framework's banner of a few hundred lines).
const LINES: usize = 20_000;

/// The file's kind, or `None` when it is none of [`Kind::ALL`].
pub fn detect(text: &str) -> Option<Kind> {
    let lines: Vec<&str> = text.lines().take(LINES).collect();
    if is_topo(&lines) {
        return Some(Kind::SmiTopo);
    }
    if lines.iter().any(|l| is_perftest_line(l)) {
        return Some(Kind::Perftest);
    }
    if lines.iter().any(|l| is_nccl_line(l)) || lines.iter().filter(|l| is_nccl_row(l)).count() >= 2
    {
        return Some(Kind::Nccl);
    }
    if let Some(kind) = structured(text) {
        return Some(kind);
    }
    let kernel = lines.iter().filter(|l| is_kernel_line(l)).count();
    // Most lines of a kernel log carry its prefixes; a stray `kernel:` in another file does not
    // make it one.
    let nonblank = lines.iter().filter(|l| !l.trim().is_empty()).count();
    (kernel > 0 && kernel * 2 >= nonblank.min(40)).then_some(Kind::KernelLog)
}

/// `nvidia-smi topo -m`: a header whose whitespace-split words start with `GPU0` (maybe after
/// nothing at all: the header has an empty first cell) and a row that starts with `GPU0` and
/// holds `X` (the GPU against itself). A paste cut above the header still has the row.
fn is_topo(lines: &[&str]) -> bool {
    lines.iter().any(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some("GPU0") && {
            let rest: Vec<&str> = words.collect();
            rest.iter().take(64).any(|w| *w == "X")
                && rest.iter().any(|w| {
                    w.starts_with("NV") || matches!(*w, "SYS" | "NODE" | "PHB" | "PXB" | "PIX")
                })
        }
    })
}

fn is_perftest_line(l: &str) -> bool {
    // perftest_parameters.c: `ctx_print_test_info` prints "<verb> BW Test"/"<verb> Lat Test".
    const BANNERS: [&str; 6] = [
        "RDMA_Write BW Test",
        "RDMA_Read BW Test",
        "Send BW Test",
        "Atomic FETCH_AND_ADD BW Test",
        "RDMA_Write Latency Test",
        "Send Latency Test",
    ];
    let t = l.trim_end();
    let banner = ["BW Test", "Multicast Test", "Latency Test"]
        .iter()
        .any(|end| t.ends_with(end))
        && ["RDMA_Write", "RDMA_Read", "Send", "Atomic"]
            .iter()
            .any(|verb| t.contains(verb));
    BANNERS.iter().any(|b| l.contains(b))
        || banner
        || (l.contains("#bytes") && l.contains("#iterations") && l.contains("BW"))
}

/// An nccl-tests result row (`size count type [redop root] time algbw busbw error ...`,
/// nccl-tests `src/common.cu`), as a paste cut to its rows has only them.
fn is_nccl_row(l: &str) -> bool {
    const TYPES: [&str; 11] = [
        "float", "half", "double", "bfloat16", "int8", "uint8", "int32", "uint32", "int64",
        "uint64", "fp8_e4m3",
    ];
    let words: Vec<&str> = l.split_whitespace().collect();
    let int = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    words
        .windows(3)
        .position(|w| int(w[0]) && int(w[1]) && TYPES.contains(&w[2]))
        .is_some_and(|at| words.len() >= at + 8)
}

fn is_nccl_line(l: &str) -> bool {
    l.contains(" NCCL INFO ")
        || l.contains(" NCCL WARN ")
        || l.contains("NCCL version ")
        || l.contains("# nThread ")
        || l.contains("#  Rank ")
        || l.contains("# Avg bus bandwidth")
        || (l.contains("out-of-place") && l.contains("in-place"))
}

fn is_kernel_line(l: &str) -> bool {
    let t = l.trim_start();
    const MARKS: [&str; 11] = [
        "NVRM:",
        "mlx5_core",
        "[Hardware Error]",
        "pcieport",
        "kernel:",
        "nvidia-nvswitch",
        "nv_peer_mem",
        "nvidia_peermem",
        "nvidia-peermem",
        "Linux version",
        "nv_get_p2p_free_callback",
    ];
    printk_stamp(t) || kmsg_record(t) || MARKS.iter().any(|m| l.contains(m))
}

/// `[ 1234.567890]` anywhere near the start (after a host or syslog prefix), or `dmesg -T`'s
/// `[Mon Mar  2 10:00:00 2026]`.
fn printk_stamp(l: &str) -> bool {
    let Some(open) = l.find('[') else {
        return false;
    };
    if open > 64 {
        return false;
    }
    let rest = &l[open + 1..];
    let Some(close) = rest.find(']') else {
        return false;
    };
    let inner = rest[..close].trim();
    let seconds = inner.split_once('.').is_some_and(|(s, us)| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && !us.is_empty()
            && us.bytes().all(|b| b.is_ascii_digit())
    });
    let weekday = ["Mon ", "Tue ", "Wed ", "Thu ", "Fri ", "Sat ", "Sun "]
        .iter()
        .any(|d| inner.starts_with(d))
        && inner.matches(':').count() == 2;
    seconds || weekday
}

/// A `/dev/kmsg` record: `<level>,<seq>,<usec>,<flags>;` (Documentation/ABI/testing/dev-kmsg).
fn kmsg_record(l: &str) -> bool {
    let Some((head, _)) = l.split_once(';') else {
        return false;
    };
    let fields: Vec<&str> = head.split(',').collect();
    fields.len() >= 4
        && fields[..3]
            .iter()
            .all(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

/// Configs, told by their keys once parsed as what they are.
fn structured(text: &str) -> Option<Kind> {
    let has = |needle: &str| text.contains(needle);
    if has("cdiVersion") && (has("devices") || has("containerEdits")) {
        return Some(Kind::CdiSpec);
    }
    if has("KubeletConfiguration")
        || has("\"kubeletconfig\"")
        || (has("KubeletConfig") && has("kubeletConfig"))
    {
        return Some(Kind::KubeletConfig);
    }
    let toml_sections = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('[') && l.ends_with(']'));
    for section in toml_sections {
        if section.starts_with("[crio") {
            return Some(Kind::RuntimeConfig);
        }
        if section.starts_with("[plugins")
            && (section.contains("containerd") || section.contains("cri"))
        {
            return Some(Kind::RuntimeConfig);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_text_is_no_kind() {
        assert_eq!(detect("hello\nworld\n"), None);
        assert_eq!(detect(""), None);
        assert_eq!(
            detect("kernel: one stray line\nand\nmany\nother\nlines\nhere\n"),
            None
        );
    }

    #[test]
    fn printk_and_kmsg_prefixes() {
        assert!(printk_stamp("[   12.345678] NVRM: loading"));
        assert!(printk_stamp("b1360: [14280.445220] mlx5_core"));
        assert!(printk_stamp("[Mon Mar  2 10:00:00 2026] x"));
        assert!(!printk_stamp("[default0]: NCCL"));
        assert!(kmsg_record("6,1234,5678,-;NVRM: x"));
        assert!(!kmsg_record("a,b,c,d;x"));
    }
}
