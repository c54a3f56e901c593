//! Property tests for every parser: arbitrary input must give an answer — `Ok`, `Err` or a
//! partial result — and never a panic, a hang, or time that grows out of proportion with the
//! input (issue 10, "fuzzed parsers"). gpudoctor runs on nodes whose sysfs, kernel log and
//! configs may be damaged, and reads captures attached to tickets; a parser that panics turns a
//! diagnosis into a crash report.
//!
//! Each parser gets three kinds of input:
//! - arbitrary text (`any::<String>()`) and arbitrary bytes read as lossy UTF-8 (what a reader
//!   would hand over after a damaged read); the NCCL log parser, which reads bytes, also gets
//!   raw bytes, cut into chunks at arbitrary offsets (and must give the same log however cut);
//! - a soup of the tokens its format is made of (`0x`, `-`, `,`, `Gb/sec`, `NVRM: Xid (`, ...),
//!   which reaches far deeper into a hand-written parser than random text does;
//! - real-format samples (the healthy fixture's own files, and literal lines from the parsers'
//!   unit tests) with up to eight random edits: bytes deleted, inserted, duplicated, replaced by
//!   the format's structural characters, lines swapped, the text cut short.
//!
//! A few round trips check that the parsers also read what they should (CPU lists and masks, PCI
//! addresses, hex ids, XID lines). `big_inputs_parse_in_bounded_time` feeds each parser inputs of
//! megabytes built to hit its worst case (a CPU list of a million full ranges, nesting thousands
//! deep, a YAML alias bomb, a kernel log that is one 4 MiB line).
//!
//! Budget: `PROPTEST_CASES` cases per property (default [`DEFAULT_CASES`]; the whole file runs in
//! well under a minute on two cores in a debug build). Every case must finish within
//! [`PER_CASE`] (a parse that slow is a failure and proptest shrinks it to a small example) and
//! every property within [`PER_PROPERTY`] (a parser that never returns fails the test instead of
//! hanging CI). Seeds are random per run; a failure prints the minimal input — add it as a
//! regression unit test next to the parser. For a long local soak:
//! `PROPTEST_CASES=20000 cargo test --release --test parser_properties`.
//!
//! cargo-fuzz is not used: it needs a nightly toolchain, which these machines do not have.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use gpudoctor::facts::{
    cdi, iommu, k8s, kubelet, modules, numa, nvidia, pci, pcicfg, rdma, sriov, toolkit, topology,
    xid,
};

use gpudoctor::answers::{nccl, nvml};
use gpudoctor::profile;
use gpudoctor::report::Layer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per property when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 256;
/// Longest one parse may take (debug build, shared CI machine).
const PER_CASE: Duration = Duration::from_secs(2);
/// Longest one property may run before it counts as a hang.
const PER_PROPERTY: Duration = Duration::from_secs(120);

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Run `check` on `cases()` inputs from `strategy` on a watchdog thread with the binary's main
/// stack size (the engine parses on the main thread): a panic or a slow case fails and shrinks;
/// a case that never returns fails after [`PER_PROPERTY`].
fn property<S, M>(name: &'static str, make: M, check: fn(&S::Value))
where
    S: Strategy + 'static,
    S::Value: Debug + 'static,
    M: FnOnce() -> S + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name(name.to_string())
        .stack_size(8 << 20)
        .spawn(move || {
            let mut runner = TestRunner::new(Config {
                cases: cases(),
                failure_persistence: None,
                ..Config::default()
            });
            let result = runner.run(&make(), |input| {
                let started = Instant::now();
                check(&input);
                let took = started.elapsed();
                if took > PER_CASE {
                    return Err(TestCaseError::fail(format!("took {took:?}")));
                }
                Ok(())
            });
            let _ = tx.send(result.map_err(|e| e.to_string()));
        })
        .unwrap();
    match rx.recv_timeout(PER_PROPERTY) {
        Ok(Ok(())) => {}
        Ok(Err(failure)) => panic!("{name}: {failure}"),
        Err(_) => panic!("{name}: no answer within {PER_PROPERTY:?}: a parser loops on some input"),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

fn healthy(rel: &str) -> String {
    let path = repo().join("fixtures/hgx-h100-healthy").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.gpudoctor/<name>` of the fixtures (kernel logs, NVML and kubelet answers).
fn capture_files(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("fixtures")).unwrap() {
        let path = entry.unwrap().path().join(".gpudoctor").join(name);
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.push(text);
        }
    }
    out.sort();
    out.dedup();
    assert!(!out.is_empty(), "no fixture has .gpudoctor/{name}");
    out
}

const GPU: &str = "sys/bus/pci/devices/0000:18:00.0";

/// Arbitrary text: unicode, bytes read as lossy UTF-8, and a little of each mixed with newlines.
fn any_text() -> BoxedStrategy<String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(any::<u8>(), 0..600)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        prop::collection::vec(
            prop_oneof![Just("\n".to_string()), "[ -~]{0,12}", any::<String>()],
            0..40
        )
        .prop_map(|parts| parts.concat()),
    ]
    .boxed()
}

/// Concatenations of a format's tokens, the edge numbers every format shares, and a little noise.
fn soup(tokens: &'static [&'static str]) -> BoxedStrategy<String> {
    const COMMON: &[&str] = &[
        "0",
        "1",
        "-1",
        "7",
        "16",
        "255",
        "65535",
        "65536",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "1e309",
        "NaN",
        "inf",
        "0x",
        "0X",
        "-",
        ",",
        ".",
        ":",
        ";",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\u{0}",
        "\u{feff}",
        "é",
        "\u{fffd}",
        "#",
        "\"",
        "'",
        "=",
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        "ffffffff",
        "::",
    ];
    let token = prop_oneof![
        4 => prop::sample::select(tokens),
        2 => prop::sample::select(COMMON),
    ];
    prop::collection::vec(token, 0..48)
        .prop_map(|parts| parts.concat())
        .boxed()
}

/// One random edit of a real-format sample.
#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    Duplicate { at: usize, len: usize },
    Structural { at: usize, with: char },
    SwapLines { a: usize, b: usize },
    Truncate { at: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>();
    prop_oneof![
        (at, 1..64usize).prop_map(|(at, len)| Edit::Delete { at, len }),
        (at, any_text()).prop_map(|(at, text)| Edit::Insert { at, text }),
        (at, 1..256usize).prop_map(|(at, len)| Edit::Duplicate { at, len }),
        (
            at,
            prop::sample::select(
                &[
                    '\n', ' ', ':', ',', '-', '.', '"', '\'', '{', '}', '[', ']', '=', '#', '(',
                    ')', '\0', 'x', '9', '\u{fffd}', '&', '*', '!', '|', '>', '\\',
                ][..]
            )
        )
            .prop_map(|(at, with)| Edit::Structural { at, with }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines { a, b }),
        at.prop_map(|at| Edit::Truncate { at }),
    ]
}

/// The char boundary at or below `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut i = at % (text.len() + 1);
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(mut text: String, edits: &[Edit]) -> String {
    for e in edits {
        match e {
            Edit::Delete { at, len } => {
                let a = boundary(&text, *at);
                let b = boundary(&text, a + len);
                if b >= a {
                    text.replace_range(a..b, "");
                }
            }
            Edit::Insert { at, text: t } => {
                let a = boundary(&text, *at);
                text.insert_str(a, t);
            }
            Edit::Duplicate { at, len } => {
                let a = boundary(&text, *at);
                let b = boundary(&text, a.saturating_add(*len).min(text.len()));
                if b > a {
                    let piece = text[a..b].to_string();
                    text.insert_str(b, &piece);
                }
            }
            Edit::Structural { at, with } => {
                let a = boundary(&text, *at);
                let b = text[a..].chars().next().map_or(a, |c| a + c.len_utf8());
                text.replace_range(a..b, &with.to_string());
            }
            Edit::SwapLines { a, b } => {
                let mut lines: Vec<&str> = text.split('\n').collect();
                let n = lines.len();
                lines.swap(a % n, b % n);
                text = lines.join("\n");
            }
            Edit::Truncate { at } => {
                let a = boundary(&text, *at);
                text.truncate(a);
            }
        }
    }
    text
}

/// Real-format samples with up to eight random edits.
fn mutated(samples: Vec<String>) -> BoxedStrategy<String> {
    (
        prop::sample::select(samples),
        prop::collection::vec(edit(), 0..8),
    )
        .prop_map(|(sample, edits)| apply(sample, &edits))
        .boxed()
}

/// Everything a text parser is fed: arbitrary text, its token soup, its real samples mutated.
fn inputs(tokens: &'static [&'static str], samples: Vec<String>) -> BoxedStrategy<String> {
    prop_oneof![1 => any_text(), 2 => soup(tokens), 3 => mutated(samples)].boxed()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// sysfs and procfs values

const SYSFS_TOKENS: &[&str] = &[
    "0x10de",
    "0x2330",
    "0x030200",
    "0x",
    "10de",
    "2.5 GT/s",
    "5.0 GT/s",
    "8.0 GT/s",
    "16.0 GT/s",
    "32.0 GT/s",
    "64.0 GT/s",
    " PCIe",
    "Unknown",
    "GT/s",
    "2.5",
    "16",
    "x16",
    "0000:18:00.0",
    "10000:00:04.0",
    "ERR_COR ",
    "TOTAL_ERR_COR ",
    "RxErr ",
    "BadTLP ",
    "0000:",
    ":00.",
    "4: ACTIVE",
    "1: DOWN",
    "5: LinkUp",
    "400 Gb/sec (4X NDR)",
    "Gb/sec",
    " (4X NDR)",
    "2.5 Gb/sec",
];

#[test]
fn pci_values_never_panic() {
    let samples = vec![
        healthy(&format!("{GPU}/vendor")),
        healthy(&format!("{GPU}/class")),
        healthy(&format!("{GPU}/numa_node")),
        healthy(&format!("{GPU}/current_link_speed")),
        healthy(&format!("{GPU}/max_link_width")),
        healthy(&format!("{GPU}/aer_dev_correctable")),
        healthy(&format!("{GPU}/aer_dev_fatal")),
        "0000:18:00.0\n".into(),
        "8.0 GT/s PCIe\n".into(),
        "TOTAL_ERR_FATAL 3\nUndefined 0\n".into(),
    ];
    property(
        "pci",
        move || inputs(SYSFS_TOKENS, samples),
        |t| {
            let _ = pci::parse_hex(t);
            let _ = pci::parse_numa_node(t);
            let _ = pci::is_bdf(t);
            let _ = pci::parse_bdf(t);
            if let Ok(Some(speed)) = pci::parse_link_speed(t) {
                let _ = speed.generation();
                let _ = speed.lane_gb_per_s();
                let width = pci::parse_link_width(t).ok();
                let _ = pci::describe_link(Some(speed), width);
                let _ = pci::link_gb_per_s(speed, width.unwrap_or(u32::MAX));
            }
            let _ = pci::parse_link_width(t);
            let _ = pci::parse_aer(t);
            let _ = sriov::parse_count(t);
            let _ = topology::split_device_path(t);
            let _ = nvml::normalize_bus_id(t);
        },
    );
}

const CPU_TOKENS: &[&str] = &[
    "0",
    "7",
    "0-7",
    "16-23",
    "0-55",
    "112-167",
    "65535",
    "65536",
    "0-65535",
    "00000000",
    "0000ff00",
    "ffffffff",
    "00ff00ff",
    "10 21",
    "21 10",
    "Node 0 MemTotal:",
    "15728640 kB",
    "MemTotal:",
    "kB",
    "Node 0 MemFree:",
    "4294967295",
];

#[test]
fn cpu_lists_masks_and_numa_files_never_panic() {
    let samples = vec![
        healthy(&format!("{GPU}/local_cpulist")),
        healthy(&format!("{GPU}/local_cpus")),
        healthy("sys/devices/system/node/node0/cpulist"),
        healthy("sys/devices/system/node/node0/cpumap"),
        healthy("sys/devices/system/node/node0/distance"),
        healthy("sys/devices/system/node/node0/meminfo"),
        "0000,00000000,00000000,00ff00ff\n".into(),
        "\n".into(),
    ];
    property(
        "numa",
        move || inputs(CPU_TOKENS, samples),
        |t| {
            if let Ok(set) = numa::parse_cpulist(t) {
                // What it prints reads back the same.
                assert_eq!(numa::parse_cpulist(&set.to_string()).unwrap(), set);
            }
            if let Ok(set) = numa::parse_cpumask(t) {
                assert_eq!(numa::parse_cpulist(&set.to_string()).unwrap(), set);
            }
            let _ = numa::parse_distance(t);
            let _ = numa::parse_meminfo_total(t);
        },
    );
}

#[test]
fn cpu_lists_and_masks_read_back_what_was_written() {
    property(
        "cpulist round trip",
        move || prop::collection::btree_set(0u32..4096, 0..200),
        |cpus| {
            let list = cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let set = numa::parse_cpulist(&format!("{list}\n")).unwrap();
            assert_eq!(
                set.iter().collect::<Vec<_>>(),
                cpus.iter().copied().collect::<Vec<_>>()
            );
            // The kernel's mask: 32-bit words, most significant first.
            let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
            let mask = (0..words)
                .rev()
                .map(|w| {
                    let bits = cpus
                        .iter()
                        .filter(|c| **c / 32 == w)
                        .fold(0u32, |acc, c| acc | 1 << (c % 32));
                    format!("{bits:08x}")
                })
                .collect::<Vec<_>>()
                .join(",");
            assert_eq!(numa::parse_cpumask(&mask).unwrap(), set, "{mask}");
        },
    );
}

#[test]
fn pci_addresses_and_ids_read_back_what_was_written() {
    property(
        "bdf round trip",
        move || (any::<u32>(), any::<u8>(), 0u8..32, 0u8..8, any::<u16>()),
        |&(domain, bus, device, function, id)| {
            let text = if domain <= 0xffff {
                format!("{domain:04x}:{bus:02x}:{device:02x}.{function}")
            } else {
                format!("{domain:x}:{bus:02x}:{device:02x}.{function}")
            };
            assert!(pci::is_bdf(&text), "{text}");
            let bdf = pci::parse_bdf(&format!("{text}\n")).unwrap();
            assert_eq!(
                (bdf.domain, bdf.bus, bdf.device, bdf.function),
                (domain, bus, device, function)
            );
            assert_eq!(
                pci::parse_hex(&format!("{id:#06x}\n")).unwrap(),
                u32::from(id)
            );
        },
    );
}

const RDMA_TOKENS: &[&str] = &[
    "4: ACTIVE",
    "1: DOWN",
    "5: LinkUp",
    "3: Disabled",
    "400 Gb/sec (4X NDR)",
    "200 Gb/sec",
    "Gb/sec",
    "(4X NDR)",
    "2.5",
    "1e400",
    "-0",
    "InfiniBand",
    "Ethernet",
    ": ",
];

#[test]
fn rdma_values_never_panic() {
    let port = "sys/class/infiniband/mlx5_0/ports/1";
    let samples = vec![
        healthy(&format!("{port}/state")),
        healthy(&format!("{port}/rate")),
        healthy(&format!("{port}/phys_state")),
        healthy(&format!("{port}/counters/link_downed")),
        "18446744073709551615\n".into(),
    ];
    property(
        "rdma",
        move || inputs(RDMA_TOKENS, samples),
        |t| {
            let _ = rdma::parse_numbered(t);
            if let Ok(rate) = rdma::parse_rate(t) {
                assert!(rate.is_finite() && rate >= 0.0, "{rate}");
            }
            let _ = rdma::parse_counter(t);
        },
    );
}

#[test]
fn pci_config_space_never_panics_or_loops() {
    let real: Vec<Vec<u8>> = [
        "sys/devices/pci0000:b7/0000:b7:01.0/0000:b8:00.0/config",
        "sys/devices/pci0000:b7/0000:b7:01.0/0000:b8:00.0/0000:b9:01.0/config",
    ]
    .iter()
    .map(|rel| std::fs::read(repo().join("fixtures/hgx-h100-healthy").join(rel)).unwrap())
    .collect();
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..4200),
        // Real config spaces with bytes overwritten (capability pointers pointing anywhere).
        (
            prop::sample::select(real),
            prop::collection::vec((0usize..4096, any::<u8>()), 0..64),
            any::<usize>(),
        )
            .prop_map(|(mut b, writes, cut)| {
                for (at, v) in writes {
                    if at < b.len() {
                        b[at] = v;
                    }
                }
                if cut % 4 == 0 {
                    b.truncate(cut % (b.len() + 1));
                }
                b
            }),
        // A capability list that points back at itself.
        (0x100usize..0xffc, any::<u16>()).prop_map(|(next, id)| {
            let mut b = vec![0u8; 4096];
            for at in (0x100..0x1000).step_by(4) {
                let header = u32::from(id) | ((next as u32 & !3) << 20);
                b[at..at + 4].copy_from_slice(&header.to_le_bytes());
            }
            b
        }),
    ];
    property(
        "pcicfg",
        move || bytes,
        |b| {
            let _ = pcicfg::parse_acs(b);
        },
    );
    property("acs flags", any::<u16>, |bits| {
        let _ = pcicfg::acs_flags(*bits);
    });
}

#[test]
fn topology_helpers_never_panic() {
    let samples = vec![
        "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0".to_string(),
        "sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/47505500-0001-0000-3130-444531303244/pci0001:00/0001:00:00.0".to_string(),
        "processor\t: 0\nflags\t\t: fpu vme de pse hypervisor lahf_lm\n".to_string(),
    ];
    property(
        "topology",
        move || {
            inputs(
                &[
                    "/",
                    "0000:18:00.0",
                    "pci0000:17",
                    "flags",
                    ":",
                    "hypervisor",
                    " ",
                ],
                samples,
            )
        },
        |t| {
            if let Some((host, chain)) = topology::split_device_path(t) {
                assert!(
                    !chain.is_empty() && chain.iter().all(|c| pci::is_bdf(c)),
                    "{host}"
                );
            }
            let _ = topology::parse_hypervisor_flag(t);
        },
    );
    property(
        "kind_of",
        move || (any::<Option<u16>>(), any::<Option<u32>>(), any::<bool>()),
        |&(vendor, class, rdma)| {
            let _ = topology::kind_of(vendor, class, rdma).label();
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Driver: modules, NVRM version, per-GPU information, NVML answers

const MODULE_TOKENS: &[&str] = &[
    "nvidia ",
    "nvidia_uvm ",
    "54165504 ",
    "270 ",
    "- ",
    "nvidia_modeset,nvidia_uvm,",
    "Live ",
    "Loading ",
    "Unloading ",
    "0x0000000000000000",
    " (POE)",
    " (OE)",
    "(",
    ")",
    "\n",
];

#[test]
fn modules_and_driver_files_never_panic() {
    let mut samples = vec![
        healthy("proc/modules"),
        healthy("proc/driver/nvidia/version"),
        healthy("sys/module/nvidia/version"),
        healthy("proc/driver/nvidia/gpus/0000:18:00.0/information"),
    ];
    samples.push("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n".into());
    property(
        "modules",
        {
            let samples = samples.clone();
            move || inputs(MODULE_TOKENS, samples)
        },
        |t| {
            if let Ok(modules) = modules::parse_proc_modules(t) {
                for m in &modules {
                    let _ = m.is_live();
                }
            }
        },
    );
    property(
        "nvidia",
        move || {
            inputs(
                &[
                    "NVRM version:",
                    "Module",
                    " 550.54.15 ",
                    "550.54",
                    "1.2.3.4",
                    "Model:",
                    "\t",
                    ": ",
                ],
                samples,
            )
        },
        |t| {
            let _ = nvidia::is_driver_version(t);
            let _ = nvidia::parse_proc_driver_version(t);
            let _ = nvidia::parse_module_version(t);
            let _ = nvidia::parse_information(t);
            let _ = cdi::driver_version_in_path(t);
        },
    );
}

#[test]
fn nvml_json_never_panics() {
    let samples = capture_files("nvml.json");
    property(
        "nvml.json",
        move || {
            inputs(
                &[
                    "{",
                    "}",
                    "\"value\":",
                    "\"not_supported\"",
                    "null",
                    "[",
                    "]",
                    ",",
                ],
                samples,
            )
        },
        |t| {
            if let Ok(facts) = nvml::parse_nvml_json(t) {
                // What the checks do with it first: serialise into the report.
                let _ = serde_json::to_string(&facts).unwrap();
            }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Kernel log

const KMSG_TOKENS: &[&str] = &[
    "NVRM: Xid (PCI:0000:18:00): ",
    "NVRM: Xid (",
    "PCI:",
    "0000:2b:00",
    "10000:2B:00",
    "79, ",
    "48, ",
    "13, ",
    "119, ",
    "4294967296, ",
    "pid=",
    "1234, ",
    "name=python, ",
    "Ch 00000010",
    "GPU has fallen off the bus.",
    "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): ",
    "12028, ",
    "Non-fatal, Link 32 ",
    "NVRM: GPU at PCI:0000:2b:00: GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b",
    "NVRM: The NVIDIA GPU 0000:18:00.0\n",
    "NVRM: fallen off the bus and is not responding to commands.\n",
    "NVRM:     entry function",
    "NVRM: GPU4 RPC history (CPU -> GSP):",
    "NVRM: _kgspLogXid119: ****",
    "[  123.456789] ",
    "[Mon Nov 30 07:01:02 2026] ",
    "<4>[ 12.3] ",
    "Nov 30 07:01:02 gpu-node-7 kernel: ",
    "6,1234,5678,-;",
    "4,99,18446744073709551616,c;",
    " SUBSYSTEM=pci",
    " DEVICE=+pci:0000:2b:00.0",
    "\n",
    "\n",
    "\n ",
];

#[test]
fn kernel_logs_never_panic() {
    let mut samples = capture_files("kmsg.txt");
    samples.push(
        "[38889.018120] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)\n\
         [ 5.1] NVRM: The NVIDIA GPU 0000:18:00.0\n\
         [ 5.1] NVRM: fallen off the bus and is not responding to commands.\n"
            .into(),
    );
    property(
        "kernel log",
        move || inputs(KMSG_TOKENS, samples),
        |t| {
            let log = xid::parse_kernel_log(t);
            for event in &log.xids {
                let _ = event.info();
                let _ = event.recovery_action();
            }
            assert!(log.xids.len() + log.sxids.len() <= t.lines().count());
        },
    );
}

#[test]
fn xid_lines_read_back_their_number_and_gpu() {
    property(
        "xid round trip",
        move || {
            (
                any::<u32>(),
                any::<u8>(),
                prop::sample::select(&["", "[ 12.345678] ", "6,1234,5678,-;", "<4>[ 1.0] "][..]),
            )
        },
        |&(number, bus, prefix)| {
            let line = format!(
                "{prefix}NVRM: Xid (PCI:0000:{bus:02x}:00): {number}, pid=1, name=x, detail\n"
            );
            let log = xid::parse_kernel_log(&line);
            assert_eq!(log.xids.len(), 1, "{line}");
            assert_eq!(log.xids[0].xid, number);
            assert_eq!(
                log.xids[0].pci_bus_id.as_deref(),
                Some(format!("0000:{bus:02x}:00.0").as_str())
            );
        },
    );
}

// ---------------------------------------------------------------------------------------------
// NCCL logs (nccl-tests output with NCCL_DEBUG=INFO lines)

const NCCL_TOKENS: &[&str] = &[
    "# nccl-tests version 2.19.6\n",
    "# Collective test starting: all_reduce_perf\n",
    "#  Rank  0 Group  0 Pid  41234 on hgx-h100-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
    "  8589934592    2147483648     float     sum      -1",
    "   35721.4  240.47  420.82      0",
    "      N/A",
    " 1e+05",
    "# Out of bounds values : 0 OK\n",
    "# Avg bus bandwidth    : 247.1\n",
    "hgx-h100-01:41234:41262 [0] NCCL INFO ",
    "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "Channel 00/0 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA",
    " via NET/Socket/0",
    "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB enp105s0f0np0:10.0.0.11<0>",
    "NET/Plugin: Could not find: libnccl-net.so.",
    "NVLS multicast support is available",
    "NCCL WARN NET/IB : Got completion from peer 10.0.0.12<38723> with status=12 opcode=0",
    "Test NCCL failure common.cu:1005 'unhandled system error'",
    "[1,0]<stdout>:",
    "[0] ",
    "0: ",
    "\n",
    "\n",
];

fn nccl_log(input: &(String, Vec<usize>)) {
    let (text, cuts) = input;
    // Whole, and cut into chunks at arbitrary byte offsets (a pipe delivers it so): the same log.
    let mut whole = nccl::NcclLogParser::new();
    whole.feed_bytes(text.as_bytes());
    let whole = whole.finish();
    let mut chunked = nccl::NcclLogParser::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    for cut in cuts {
        let end = (at + cut % 4096).min(bytes.len());
        chunked.feed_bytes(&bytes[at..end]);
        at = end;
    }
    chunked.feed_bytes(&bytes[at..]);
    assert_eq!(chunked.finish(), whole);
    let log = nccl::parse_log(text);
    let _ = (
        log.hosts(),
        log.nodes(),
        log.ranks(),
        log.largest_size(),
        log.has_info(),
    );
    let _ = log
        .peak_row(1 << 30)
        .map(|r| (r.peak_busbw(), r.wrong_count()));
    assert!(log.rows.len() <= nccl::MAX_ROWS);
}

#[test]
fn nccl_logs_never_panic_and_chunking_changes_nothing() {
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(repo().join("fixtures")).unwrap() {
        let dir = entry.unwrap().path().join(".gpudoctor/nccl");
        for log in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = log.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                samples.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    assert!(!samples.is_empty(), "no fixture has .gpudoctor/nccl/*.log");
    samples.extend(real_nccl_logs());
    property(
        "nccl log",
        move || {
            (
                inputs(NCCL_TOKENS, samples),
                prop::collection::vec(any::<usize>(), 0..16),
            )
        },
        nccl_log,
    );
    property(
        "nccl bytes",
        || {
            (
                prop::collection::vec(any::<u8>(), 0..2000),
                prop::collection::vec(any::<usize>(), 0..16),
            )
        },
        |(bytes, cuts)| {
            let mut parser = nccl::NcclLogParser::new();
            let mut at = 0;
            for cut in cuts {
                let end = (at + cut % 512).min(bytes.len());
                parser.feed_bytes(&bytes[at..end]);
                at = end;
            }
            parser.feed_bytes(&bytes[at..]);
            let log = parser.finish();
            assert!(log.lines as usize <= bytes.iter().filter(|b| **b == b'\n').count() + 1);
        },
    );
}

/// The real logs kept under tests/data/nccl/real (their README names the sources).
fn real_nccl_logs() -> Vec<String> {
    let dir = repo().join("tests/data/nccl/real");
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    logs.sort();
    assert!(logs.len() >= 10, "expected the real NCCL logs");
    logs
}

/// Launcher decorations (issue 15): what Slurm, Open MPI, SkyPilot, Ray, kubectl, pdsh, MPICH
/// and terminals put in front of a line (`i` is the line's index).
const DECORATIONS: [fn(usize) -> String; 11] = [
    |i| format!("{:>2}: ", i % 16),
    |i| format!("[1,{}]<stdout>:", i % 24),
    |i| format!("    [1,{}]<stderr>: ", i % 3),
    |_| "(head, rank=0, pid=3808) ".to_string(),
    |i| format!("(worker{i}, rank={i}, pid=2769, ip=10.100.10.12) "),
    |_| "2025-03-04T09:13:02.123456789Z ".to_string(),
    |_| "[pod/nccl-test-launcher-x7k2p/launcher] ".to_string(),
    |_| "gpu-node-07: ".to_string(),
    |i| format!("[{}] ", i % 8),
    |_| "\u{1b}[36m(RayWorkerWrapper pid=4009)\u{1b}[0m ".to_string(),
    |i| format!("[rank{}]:", i % 8),
];

/// A real log with up to two decorations in front of each line (`choices` picks them) parses to
/// the same facts as the log itself: the same rows, failures, timeouts, transports, hosts and
/// quotes (quotes are of the content); only the byte count differs.
fn decorated_lines_parse_the_same(input: &(String, Vec<(u8, u8)>)) {
    let (text, choices) = input;
    if choices.is_empty() {
        return;
    }
    let decorated: String = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let (a, b) = choices[i % choices.len()];
            let pick = |c: u8| -> String {
                match DECORATIONS.get(usize::from(c)) {
                    Some(make) => make(i),
                    None => String::new(),
                }
            };
            format!("{}{}{line}\n", pick(a), pick(b))
        })
        .collect();
    let mut plain = nccl::parse_log(text);
    let mut with = nccl::parse_log(&decorated);
    plain.bytes = 0;
    with.bytes = 0;
    if with != plain {
        // The differing facts, not two screens of them.
        let (a, b) = (format!("{with:#?}"), format!("{plain:#?}"));
        let diff: Vec<String> = a
            .lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .take(6)
            .map(|(x, y)| format!("decorated: {x}\n    plain: {y}"))
            .collect();
        panic!("{}\n\ndecorated log:\n{decorated}", diff.join("\n"));
    }
}

#[test]
fn nccl_real_lines_read_the_same_behind_any_launcher_prefix() {
    let logs = real_nccl_logs();
    // Indexes past DECORATIONS mean "none", so lines mix decorated and plain.
    let choice = 0u8..(DECORATIONS.len() as u8 + 4);
    property(
        "nccl decorated real logs",
        move || {
            (
                prop::sample::select(logs),
                prop::collection::vec((choice.clone(), choice), 0..64),
            )
        },
        decorated_lines_parse_the_same,
    );
}

// ---------------------------------------------------------------------------------------------
// Kubernetes: kubelet config, pod-resources answers, checkpoint, device ids

#[test]
fn kubelet_files_never_panic() {
    let configs = vec![
        healthy("var/lib/kubelet/config.yaml"),
        "{\"kind\":\"KubeletConfiguration\",\"topologyManagerPolicy\":\"single-numa-node\"}".into(),
        "---\nkind: KubeletConfiguration # c\ncpuManagerPolicy: 'static'\nmemoryManagerPolicy: ~\n"
            .into(),
    ];
    property(
        "kubelet config",
        move || {
            inputs(
                &[
                    "kind", ":", " ", "\"", "'", "#", "---", "...", "{", "- ", "~", "null",
                ],
                configs,
            )
        },
        |t| {
            let _ = kubelet::parse_kubelet_config(t);
        },
    );
    let mut answers = capture_files("pod-resources.json");
    answers.push(healthy(
        "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
    ));
    property(
        "pod resources",
        move || {
            inputs(
                &[
                    "{",
                    "}",
                    "[",
                    "]",
                    "\"Data\":",
                    "\"PodDeviceEntries\":",
                    "\"GPU-",
                    "::",
                    "null",
                    ",",
                ],
                answers,
            )
        },
        |t| {
            let _ = gpudoctor::answers::pod_resources::parse_pod_resources_json(t);
            let _ = k8s::parse_checkpoint(t);
        },
    );
    property(
        "device ids",
        move || {
            inputs(
                &[
                    "GPU-",
                    "MIG-",
                    "::",
                    "0",
                    "1",
                    "4294967296",
                    "nvidia.com/gpu",
                    "/",
                    ".",
                ],
                strings(&[
                    "GPU-6f1a9c3e-2d4b-5a8f-9c7e-1b2d3e4f5a6b::3",
                    "nvidia.com/mig-1g.10gb",
                ]),
            )
        },
        |t| {
            let _ = k8s::parse_device_id(t);
            let _ = k8s::is_nvidia_resource(t);
            let _ = Layer::from_str(t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Container stack: toolkit, containerd, CRI-O, CDI

const TOML_TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "plugins.",
    "\"io.containerd.grpc.v1.cri\"",
    ".containerd",
    " = ",
    "\"nvidia\"",
    "true",
    "false",
    "imports",
    "version = 2",
    "\n",
    "'",
    "\"\"\"",
    "{",
    "}",
    ",",
    "default_runtime_name",
    "runtimes.nvidia",
    "[crio.runtime]",
    "runtime_path",
    "enable_cdi",
];

#[test]
fn container_configs_never_panic() {
    let samples = vec![
        healthy("etc/containerd/config.toml"),
        healthy("etc/nvidia-container-runtime/config.toml"),
        "[crio]\n  [crio.runtime]\n    default_runtime = \"nvidia\"\n    [crio.runtime.runtimes]\n      [crio.runtime.runtimes.nvidia]\n        runtime_path = \"/usr/bin/nvidia-container-runtime\"\n        runtime_type = \"oci\"\n".into(),
        "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n".into(),
    ];
    property(
        "toml configs",
        move || inputs(TOML_TOKENS, samples),
        |t| {
            let _ = toolkit::parse_toolkit_config(t);
            let _ = toolkit::parse_containerd(t, "etc/containerd/config.toml");
            let _ = toolkit::parse_crio(t, "etc/crio/crio.conf");
            let _ = toolkit::line_column(t, t.len() / 2);
            let _ = toolkit::line_column(t, usize::MAX);
        },
    );
    let specs = vec![
        healthy("var/run/cdi/nvidia.yaml"),
        "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":\"0\"}]}"
            .into(),
    ];
    property(
        "cdi",
        move || {
            inputs(
                &[
                    "kind: ",
                    "nvidia.com/gpu",
                    "devices:",
                    "- name: ",
                    "&a ",
                    "*a",
                    "!!str ",
                    "{",
                    "[",
                    "\n  ",
                ],
                specs,
            )
        },
        |t| {
            let _ = cdi::parse_cdi_spec(t, "etc/cdi/nvidia.yaml");
        },
    );
}

#[test]
fn kernel_command_lines_never_panic() {
    property(
        "cmdline",
        move || {
            inputs(
                &[
                    "iommu=",
                    "pt",
                    "intel_iommu=",
                    "on",
                    "off",
                    "amd_iommu=",
                    "\"",
                    " ",
                    "=",
                    "BOOT_IMAGE=",
                    "--",
                ],
                vec![healthy("proc/cmdline")],
            )
        },
        |t| {
            let _ = iommu::parse_cmdline(t).asks_passthrough();
            let _ = gpudoctor::facts::node::parse_cmdline_params(t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Saved reports (`diff`, `fleet`): any JSON, any version

#[test]
fn saved_reports_never_panic() {
    let mut samples = Vec::new();
    for name in ["hgx-h100-healthy.json", "h100-nccl-low-bandwidth.json"] {
        let path = repo().join("tests/snapshots").join(name);
        samples.push(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    property(
        "saved report",
        move || {
            inputs(
                &[
                    "{\"schema_version\": 1, \"layers\": [",
                    "{\"id\": \"driver\", \"status\": \"pass\", \"checks\": [",
                    "{\"code\": \"x.y\", \"status\": \"fail\", \"figures\": [",
                    "{\"name\": \"n\", \"value\": ",
                    "\"facts\": {\"version\": 1, \"sections\": {",
                    "]}",
                    "}",
                    ",",
                    "null",
                ],
                samples,
            )
        },
        |t| {
            let _ = gpudoctor::saved::parse(t);
            let _ = gpudoctor::saved::parse_facts(t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Profile files

#[test]
fn profile_files_never_panic() {
    let samples = strings(&[
        "# /etc/gpudoctor/lab-h100.toml\nbase = \"hgx-h100-80gb\"\nname = \"lab-h100\"\nrdma_ports = 4\nrdma_rate_gbps = 400\n",
        "name = \"x\"\ngpu_count = 8\ngpu_model = \"H100\"\npcie_gen = 5\npcie_width = 16\nnvlinks_per_gpu = 18\n",
        "gpu_count = \"eight\"\n",
        "gpu_cout = 8\n",
    ]);
    property(
        "profile",
        move || {
            inputs(
                &[
                    "base = ",
                    "\"hgx-h100-80gb\"",
                    "name = ",
                    "gpu_count = ",
                    "8",
                    "-1",
                    "[x]",
                    "\n",
                    "nccl_busbw_gbps = ",
                    "1e400",
                ],
                samples,
            )
        },
        |t| {
            let _ = profile::parse_file(Path::new("lab.toml"), t);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Worst cases, at sizes a reader can hand over (up to the 8 MiB read cap)

/// The worst case being parsed now, named when the test times out.
static CURRENT: std::sync::Mutex<&str> = std::sync::Mutex::new("");

fn timed(name: &'static str, input: &str, parse: impl FnOnce(&str)) {
    *CURRENT.lock().unwrap() = name;
    let started = Instant::now();
    parse(input);
    let took = started.elapsed();
    eprintln!("{name}: {} bytes in {took:?}", input.len());
    assert!(
        took < Duration::from_secs(10),
        "{name}: {} bytes took {took:?}",
        input.len()
    );
}

#[test]
fn big_inputs_parse_in_bounded_time() {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            big_inputs();
            let _ = tx.send(());
        })
        .unwrap();
    match rx.recv_timeout(Duration::from_secs(240)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!(
                "{}: a big input made the parser panic",
                CURRENT.lock().unwrap()
            )
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "{}: a big input made the parser loop",
                CURRENT.lock().unwrap()
            )
        }
    }
}

fn big_inputs() {
    const MIB: usize = 1 << 20;
    // A CPU list of full ranges, over and over: each range must not cost 65536 inserts.
    timed("cpulist ranges", &"0-65535,".repeat(MIB / 8), |t| {
        let _ = numa::parse_cpulist(t);
    });
    timed("cpulist singles", &"1,".repeat(MIB), |t| {
        let _ = numa::parse_cpulist(t);
    });
    timed("cpumask", &"ffffffff,".repeat(2048), |t| {
        let _ = numa::parse_cpumask(t);
    });
    timed("distance", &"10 ".repeat(MIB), |t| {
        let _ = numa::parse_distance(t);
    });
    // One 4 MiB line, and 4 MiB of XID lines.
    timed("kmsg one line", &"NVRM: Xid (".repeat(4 * MIB / 11), |t| {
        let _ = xid::parse_kernel_log(t);
    });
    timed(
        "kmsg many xids",
        &"[ 1.0] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
            .repeat(4 * MIB / 80),
        |t| {
            let _ = xid::parse_kernel_log(t);
        },
    );
    timed(
        "kmsg continuation",
        &format!(
            "NVRM: Xid (PCI:0000:18:00): 119, pid=1, x\n{}",
            "NVRM:     entry function 0x1\n".repeat(4 * MIB / 29)
        ),
        |t| {
            let _ = xid::parse_kernel_log(t);
        },
    );
    let modules = healthy("proc/modules");
    timed("modules", &modules.repeat(4 * MIB / modules.len()), |t| {
        let _ = modules::parse_proc_modules(t);
    });
    // Nesting thousands deep: a recursive parser must refuse, not overflow its stack (a stack
    // overflow aborts the process; it cannot be caught like a panic).
    for depth in [1_000, 100_000] {
        let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        timed("json nesting", &json, |t| {
            let _ = nvml::parse_nvml_json(t);
            let _ = gpudoctor::answers::pod_resources::parse_pod_resources_json(t);
            let _ = k8s::parse_checkpoint(t);
            let _ = kubelet::parse_kubelet_config(&format!("{{\"a\":{t}}}"));
            let _ = cdi::parse_cdi_spec(t, "x.json");
        });
        let toml = format!("a = {}{}", "[".repeat(depth), "]".repeat(depth));
        timed("toml nesting", &toml, |t| {
            let _ = toolkit::parse_toolkit_config(t);
            let _ = toolkit::parse_containerd(t, "x.toml");
            let _ = toolkit::parse_crio(t, "x.toml");
            let _ = profile::parse_file(Path::new("x.toml"), t);
        });
        let inline = format!("a = {}{}", "{b=".repeat(depth), "}".repeat(depth));
        timed("toml inline tables", &inline, |t| {
            let _ = toolkit::parse_containerd(t, "x.toml");
            let _ = profile::parse_file(Path::new("x.toml"), t);
        });
        let dotted = format!("{} = 1", vec!["a"; depth].join("."));
        timed("toml dotted keys", &dotted, |t| {
            let _ = toolkit::parse_containerd(t, "x.toml");
        });
        let yaml = format!(
            "kind: x\ndevices: {}{}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        timed("yaml nesting", &yaml, |t| {
            let _ = cdi::parse_cdi_spec(t, "x.yaml");
        });
        let block: String = (0..depth.min(2_000))
            .map(|i| format!("{}- \n", " ".repeat(i)))
            .collect();
        timed("yaml block nesting", &block, |t| {
            let _ = cdi::parse_cdi_spec(t, "x.yaml");
        });
    }
    // Billion laughs: nine levels of aliases, each ten times the one before.
    let mut bomb = String::from(
        "kind: x\na0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..10 {
        let refs = vec![format!("*a{}", level - 1); 10].join(",");
        bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    bomb.push_str("devices: *a9\n");
    timed("yaml alias bomb", &bomb, |t| {
        let _ = cdi::parse_cdi_spec(t, "x.yaml");
    });
    // Many aliases of one large anchor.
    let wide = format!(
        "kind: x\nbase: &b [{}]\nmore: [{}]\n",
        vec!["x"; 10_000].join(","),
        vec!["*b"; 50_000].join(",")
    );
    timed("yaml wide aliases", &wide, |t| {
        let _ = cdi::parse_cdi_spec(t, "x.yaml");
    });
    // NCCL: one 8 MiB line (cut at 16 KiB), and 8 MiB of INFO transport lines.
    timed(
        "nccl one line",
        &"Channel 00/0 : ".repeat(8 * MIB / 15),
        |t| {
            let _ = nccl::parse_log(t);
        },
    );
    timed(
        "nccl info lines",
        &"hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA\n"
            .repeat(8 * MIB / 93),
        |t| {
            let mut parser = nccl::NcclLogParser::new();
            parser.feed_bytes(t.as_bytes());
            let _ = parser.finish();
        },
    );
    let cmdline = "iommu=pt ".repeat(MIB / 9);
    timed("cmdline", &cmdline, |t| {
        let _ = iommu::parse_cmdline(t);
    });
    let kubelet_yaml = "kind: KubeletConfiguration\n".repeat(MIB / 27);
    timed("kubelet yaml", &kubelet_yaml, |t| {
        let _ = kubelet::parse_kubelet_config(t);
    });
    let info = "Model: \t NVIDIA H100 80GB HBM3\n".repeat(MIB / 30);
    timed("information", &info, |t| {
        let _ = nvidia::parse_information(t);
        let _ = nvidia::parse_proc_driver_version(t);
    });
    let profile_text = format!("name = \"{}\"\n", "x".repeat(4 * MIB));
    timed("profile long string", &profile_text, |t| {
        let _ = profile::parse_file(Path::new("x.toml"), t);
    });
    let many_keys: String = (0..100_000).map(|i| format!("k{i} = 1\n")).collect();
    timed("profile many unknown keys", &many_keys, |t| {
        let _ = profile::parse_file(Path::new("x.toml"), t);
    });
    let line_col = "x\n".repeat(2 * MIB);
    timed("line_column", &line_col, |t| {
        let _ = toolkit::line_column(t, t.len());
    });
}
