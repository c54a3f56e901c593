//! Acronyms and units as people write them. Checks write their prose in lower case (`gpu 2 has
//! 1 uncorrected ecc error`); a ticket read by a person wants `GPU 2 has 1 uncorrected ECC
//! error`, `NVML`, `PCIe`, `XID`, `SR-IOV`. [`proper`] rewrites the words of [`WORDS`] where
//! they stand as words of prose, and leaves alone what is not prose:
//! - identifiers: a word joined to a neighbour by `.`, `_`, `-`, `/`, `=` or `:`
//!   (`driver.gpu_count`, `gpu_is_lost`, `--use_cuda`, `/dev/nvidia-uvm`, `gpu=0`,
//!   `nccl-tests`, `hgx-h100`);
//! - code spans between backticks (`` `nvidia-smi -q -d ecc` ``), which are commands;
//! - anything else: only the words listed, whole.
//!
//! The engine applies it to what checks write (summaries, hints, what was expected, and what
//! was observed when gpudoctor wrote it rather than quoted a file), so every format carries the
//! same words. Text quoted from the node (a kernel log line, a sysfs file) keeps its bytes.
//! Rates are not guessed: `Gb/s` (bits, port rates) and `GB/s` (bytes, bus bandwidth) are
//! written by the checks themselves.

use std::borrow::Cow;

/// Lower-case word → as written. Plurals are words of their own.
pub const WORDS: &[(&str, &str)] = &[
    ("gpu", "GPU"),
    ("gpus", "GPUs"),
    ("cpu", "CPU"),
    ("cpus", "CPUs"),
    ("xid", "XID"),
    ("xids", "XIDs"),
    ("sxid", "SXID"),
    ("sxids", "SXIDs"),
    ("ecc", "ECC"),
    ("dbe", "DBE"),
    ("sbe", "SBE"),
    ("nvml", "NVML"),
    ("cuda", "CUDA"),
    ("nccl", "NCCL"),
    ("pci", "PCI"),
    ("pcie", "PCIe"),
    ("aer", "AER"),
    ("acs", "ACS"),
    ("iommu", "IOMMU"),
    ("numa", "NUMA"),
    ("rdma", "RDMA"),
    ("roce", "RoCE"),
    ("infiniband", "InfiniBand"),
    ("hca", "HCA"),
    ("hcas", "HCAs"),
    ("nic", "NIC"),
    ("nics", "NICs"),
    ("vf", "VF"),
    ("vfs", "VFs"),
    ("pf", "PF"),
    ("pfs", "PFs"),
    ("sr-iov", "SR-IOV"),
    ("mig", "MIG"),
    ("nvlink", "NVLink"),
    ("nvlinks", "NVLinks"),
    ("nvswitch", "NVSwitch"),
    ("nvswitches", "NVSwitches"),
    ("nvls", "NVLS"),
    ("p2p", "P2P"),
    ("gpudirect", "GPUDirect"),
    ("gdr", "GDR"),
    ("gid", "GID"),
    ("guid", "GUID"),
    ("uuid", "UUID"),
    ("uuids", "UUIDs"),
    ("mtu", "MTU"),
    ("tcp", "TCP"),
    ("cdi", "CDI"),
    ("oci", "OCI"),
    ("dcgm", "DCGM"),
    ("bmc", "BMC"),
    ("multus", "Multus"),
    ("cni", "CNI"),
    ("cri-o", "CRI-O"),
    ("psu", "PSU"),
    ("psus", "PSUs"),
    ("gsp", "GSP"),
    ("vbios", "VBIOS"),
    ("bios", "BIOS"),
    ("gib", "GiB"),
    ("mib", "MiB"),
    ("kib", "KiB"),
    ("gt/s", "GT/s"),
    ("ampere", "Ampere"),
    ("hopper", "Hopper"),
    ("blackwell", "Blackwell"),
    ("volta", "Volta"),
];

/// A character that joins a word to an identifier when it stands before it.
fn joins_before(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '=' | ':' | '-' | '$' | '@')
}

/// `text` with the words of [`WORDS`] written as people write them, outside code spans and
/// identifiers. Borrowed when nothing changes.
pub fn proper(text: &str) -> Cow<'_, str> {
    // Nothing to do without a lower-case letter that starts a listed word.
    if !text.bytes().any(|b| b.is_ascii_lowercase()) {
        return Cow::Borrowed(text);
    }
    // Text is copied in runs, from the last word rewritten to the next; built only once a
    // word is (issue 41: most text has none).
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut in_code = false;
    let mut prev: Option<char> = None;
    let mut i = 0;
    let bytes = text.as_bytes();
    while let Some(&b) = bytes.get(i) {
        let rest = &text[i..];
        // ASCII as it stands; anything else decoded (issue 41: decoding every character of
        // every summary was most of this function).
        let c = if b.is_ascii() {
            char::from(b)
        } else {
            rest.chars().next().unwrap_or(' ')
        };
        if c == '`' {
            in_code = !in_code;
        }
        if !in_code
            && c.is_ascii_lowercase()
            && !prev.is_some_and(joins_before)
            && let Some((word, written)) = word_at(rest)
        {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 8));
            out.push_str(&text[copied..i]);
            out.push_str(written);
            i += word.len();
            copied = i;
            prev = word.chars().last();
            continue;
        }
        prev = Some(c);
        i += c.len_utf8();
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

/// [`WORDS`] by their first byte, in list order.
fn by_first_byte() -> &'static [Vec<(&'static str, &'static str)>] {
    static TABLE: std::sync::OnceLock<Vec<Vec<(&'static str, &'static str)>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![Vec::new(); 256];
        for &(word, written) in WORDS {
            if let Some(slot) = word
                .as_bytes()
                .first()
                .and_then(|&first| table.get_mut(usize::from(first)))
            {
                slot.push((word, written));
            }
        }
        table
    })
}

/// The longest listed word `rest` starts with that ends as a word: not followed by a letter,
/// digit, `_`, `/` or `=`, nor by `.`, `-` or `:` joined to more of an identifier.
fn word_at(rest: &str) -> Option<(&'static str, &'static str)> {
    let first = *rest.as_bytes().first()?;
    by_first_byte()
        .get(usize::from(first))?
        .iter()
        // Only the words that start with this byte (issue 41: every word of every summary was
        // compared with the whole list).
        .filter(|(word, _)| rest.starts_with(word))
        .filter(|(word, _)| {
            let mut after = rest[word.len()..].chars();
            match after.next() {
                None => true,
                Some(c) if c.is_alphanumeric() || matches!(c, '_' | '/' | '=') => false,
                Some('.' | '-' | ':') => !after.next().is_some_and(|n| n.is_alphanumeric()),
                Some(_) => true,
            }
        })
        .max_by_key(|(word, _)| word.len())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_gets_its_acronyms_identifiers_and_commands_keep_theirs() {
        let cases = [
            (
                "gpu 2 (0000:3a:00.0) has 1 uncorrected ecc error(s); nvml answered gpu_is_lost",
                "GPU 2 (0000:3a:00.0) has 1 uncorrected ECC error(s); NVML answered gpu_is_lost",
            ),
            (
                "see driver.gpu_count and `nvidia-smi -q -d ecc` on the gpus",
                "see driver.gpu_count and `nvidia-smi -q -d ecc` on the GPUs",
            ),
            (
                "no sr-iov capable functions and no vf resources; gpu's pcie link",
                "no SR-IOV capable functions and no VF resources; GPU's PCIe link",
            ),
            (
                "pass --cuda (or --use_cuda) to /dev/nvidia-uvm, gpu=0, nccl-tests, hgx-h100",
                "pass --cuda (or --use_cuda) to /dev/nvidia-uvm, gpu=0, nccl-tests, hgx-h100",
            ),
            (
                "xid 79. nvlink, rdma: mig? (ampere and later) 16 gt/s, 80 gib",
                "XID 79. NVLink, RDMA: MIG? (Ampere and later) 16 GT/s, 80 GiB",
            ),
            // Words that only start like a listed one stay.
            ("migrate the pfc gpuX vfio", "migrate the pfc gpuX vfio"),
        ];
        for (input, want) in cases {
            assert_eq!(proper(input), want, "{input}");
        }
        assert!(matches!(proper("nothing here"), Cow::Borrowed(_)));
        assert!(matches!(proper("GPU 2"), Cow::Borrowed(_)));
    }

    #[test]
    fn any_text_comes_back_whole() {
        for input in [
            "",
            "`",
            "``gpu",
            "é gpu ü",
            "gpu\u{2028}gpu",
            "a\u{0}gpu",
            "gpu-",
            "gpu.",
        ] {
            let out = proper(input);
            assert_eq!(
                out.to_lowercase().replace("gpu", "x"),
                input.to_lowercase().replace("gpu", "x"),
                "{input:?}"
            );
        }
    }
}
