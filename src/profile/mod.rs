//! What "healthy" means for a platform: expected GPU count and model, PCIe, NVLinks, RDMA ports
//! and NCCL bandwidth. Built-in profiles cite a public source for every number
//! (reference/profiles.md); `--profile NAME|FILE` overrides the automatic choice.
//!
//! Without a profile the checks judge consistency only (every GPU alike, every link at its max).
//!
//! This module decides expectations only: it reads a profile file when asked to (`load`) and
//! never looks at the node. The file format and the selection rules are in docs/profiles.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

// The catalogue of platforms lives apart from the rules that select and load them.
mod builtins;
pub use builtins::builtins;

/// One expectation set. Every field is optional: a profile states only what it knows.
///
/// The profile file format (docs/profiles.md) uses exactly these field names as TOML keys, plus
/// `base`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short id used with `--profile` (`hgx-h100`).
    pub name: String,
    /// One line for `gpudoctor profiles`.
    #[serde(default)]
    pub description: String,
    /// NVML product names that select this profile (`NVIDIA H100 80GB HBM3`). Compared whole,
    /// case-insensitively, with or without the leading `NVIDIA ` (older drivers omit it); a
    /// trailing `*` matches any rest. Never a bare substring: gpud took `GH200` for `H200`
    /// (`leptonai/gpud` PR #1206). Empty = any model.
    #[serde(default)]
    pub gpu_names: Vec<String>,
    /// Substrings that veto a match even when `gpu_names` matches (`H200 NVL`, `GH200`).
    #[serde(default)]
    pub gpu_names_exclude: Vec<String>,
    /// Expected number of GPUs on the node.
    #[serde(default)]
    pub gpu_count: Option<u32>,
    /// Expected PCIe generation and width of each GPU's link.
    #[serde(default)]
    pub gpu_pcie_gen: Option<u32>,
    #[serde(default)]
    pub gpu_pcie_width: Option<u32>,
    /// Active NVLinks per GPU (0 = none expected).
    #[serde(default)]
    pub nvlinks_per_gpu: Option<u32>,
    /// NVSwitch fabric expected (fabric manager must have completed training).
    #[serde(default)]
    pub nvswitch: Option<bool>,
    /// NVSwitch PCI functions (class 0x0680) expected on the PCI bus. `Some(0)` on platforms
    /// whose switches are managed over NVLink instead (B200); `None` = do not count them.
    #[serde(default)]
    pub nvswitch_pci_functions: Option<u32>,
    /// Compute RDMA ports and their rate in Gb/s, and link layer (`InfiniBand`, `Ethernet`).
    #[serde(default)]
    pub rdma_ports: Option<u32>,
    #[serde(default, rename = "rdma_rate_gbit_per_s")]
    pub rdma_rate_gbps: Option<u32>,
    #[serde(default)]
    pub rdma_link_layer: Option<String>,
    /// The RDMA devices that are the GPU fabric (`mlx5_0`; a trailing `*` matches any rest,
    /// `mlx5_*`): only their ports count toward `rdma_ports` and are held to
    /// `rdma_rate_gbit_per_s`, so a front-end NIC of the same link layer (the storage or
    /// management port of a RoCE node) is left out. Empty = every device.
    #[serde(default)]
    pub rdma_devices: Vec<String>,
    /// GPUDirect RDMA carries inter-node traffic (the NIC DMAs straight into GPU memory, so each
    /// GPU needs an RDMA NIC at PIX/PXB): a GPU whose nearest RDMA NIC is across the CPU
    /// interconnect (SYS) fails the topology layer instead of warning, and a translating IOMMU
    /// warns (reference/topology.md §5, §6).
    #[serde(default)]
    pub gpudirect_rdma: Option<bool>,
    /// SR-IOV VFs expected enabled on the node, summed over its PFs (`sriov_numvfs`; the
    /// `numVfs` of each SriovNetworkNodePolicy times the PFs it selects): fewer fails
    /// `sriov.vfs_enabled`, naming each network PF's count. `None` or `Some(0)` = no
    /// expectation: judged only by what the kubelet advertises.
    #[serde(default)]
    pub sriov_vfs: Option<u32>,
    /// The VBIOS every GPU should run (`96.00.74.00.01`, as `nvidia-smi -q` prints "VBIOS
    /// Version"): a GPU on another warns `driver.gpu_firmware`, naming it. Unset: the
    /// GPUs are only compared with each other. No built-in sets it: the firmware a fleet runs
    /// is its operator's choice (NVIDIA's firmware update packages bring their own).
    #[serde(default)]
    pub vbios_version: Option<String>,
    /// Single-node all_reduce bus bandwidth at large sizes, GB/s: below `warn` warns, below
    /// `fail` fails.
    #[serde(default, rename = "nccl_busbw_warn_gbyte_per_s")]
    pub nccl_busbw_warn_gbps: Option<f64>,
    #[serde(default, rename = "nccl_busbw_fail_gbyte_per_s")]
    pub nccl_busbw_fail_gbps: Option<f64>,
    /// NVLink SHARP (NVLS) expected in NCCL runs. The `nccl_busbw_*` thresholds assume it; a
    /// run without NVLS is judged by the `nccl_ring_busbw_*` thresholds instead and the missing
    /// NVLS is its own finding (reference/profiles.md §4).
    #[serde(default)]
    pub nccl_nvls: Option<bool>,
    #[serde(default, rename = "nccl_ring_busbw_warn_gbyte_per_s")]
    pub nccl_ring_busbw_warn_gbps: Option<f64>,
    #[serde(default, rename = "nccl_ring_busbw_fail_gbyte_per_s")]
    pub nccl_ring_busbw_fail_gbps: Option<f64>,
    /// Multi-node all_reduce bus bandwidth at large sizes, GB/s (busbw as nccl-tests prints it
    /// for the whole run): below `warn` warns, below `fail` fails (`fail` unset: 0.9 × `warn`).
    /// Unset: derived from `rdma_ports` × `rdma_rate_gbps` (checks/nccl.rs `thresholds`).
    #[serde(default, rename = "nccl_multinode_busbw_warn_gbyte_per_s")]
    pub nccl_multinode_busbw_warn_gbps: Option<f64>,
    #[serde(default, rename = "nccl_multinode_busbw_fail_gbyte_per_s")]
    pub nccl_multinode_busbw_fail_gbps: Option<f64>,
    /// Host↔GPU copy bandwidth per GPU and direction (`--bandwidth`, pinned memory on the GPU's
    /// own NUMA node), GB/s: below fails `topology.host_bandwidth`.
    #[serde(default, rename = "host_copy_fail_gbyte_per_s")]
    pub host_copy_fail_gbps: Option<f64>,
    /// GPU↔GPU peer copy bandwidth over NVLink per pair and direction (`--bandwidth`), GB/s:
    /// below fails `nvlink.p2p_bandwidth`.
    #[serde(default, rename = "p2p_copy_fail_gbyte_per_s")]
    pub p2p_copy_fail_gbps: Option<f64>,
    /// GPUDirect RDMA `ib_write_bw` loopback per HCA (`--bandwidth`, 8 MiB messages), Gb/s:
    /// below fails `rdma.gpudirect_bandwidth`. Unset: 90 % of the port's rate.
    #[serde(default, rename = "gpudirect_fail_gbit_per_s")]
    pub gpudirect_fail_gbits: Option<f64>,
    /// Not yet validated on hardware: counts and link states only, no bandwidth thresholds.
    #[serde(default)]
    pub provisional: bool,
    /// Where the numbers come from: one line per source.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// Keys of earlier versions, still read, and the key each now is: `_gbps` meant Gb/s in
/// `rdma_rate_gbps` and GB/s in the `nccl_*` keys (issue 19). A file using one gets a
/// deprecation note on stderr.
pub const DEPRECATED_KEYS: &[(&str, &str)] = &[
    ("rdma_rate_gbps", "rdma_rate_gbit_per_s"),
    ("nccl_busbw_warn_gbps", "nccl_busbw_warn_gbyte_per_s"),
    ("nccl_busbw_fail_gbps", "nccl_busbw_fail_gbyte_per_s"),
    (
        "nccl_ring_busbw_warn_gbps",
        "nccl_ring_busbw_warn_gbyte_per_s",
    ),
    (
        "nccl_ring_busbw_fail_gbps",
        "nccl_ring_busbw_fail_gbyte_per_s",
    ),
    (
        "nccl_multinode_busbw_warn_gbps",
        "nccl_multinode_busbw_warn_gbyte_per_s",
    ),
    (
        "nccl_multinode_busbw_fail_gbps",
        "nccl_multinode_busbw_fail_gbyte_per_s",
    ),
];

/// Every key a profile file may set: the `Profile` fields plus `base`. A unit test keeps this
/// list equal to the struct's serde fields.
pub const FILE_KEYS: &[&str] = &[
    "base",
    "name",
    "description",
    "gpu_names",
    "gpu_names_exclude",
    "gpu_count",
    "gpu_pcie_gen",
    "gpu_pcie_width",
    "nvlinks_per_gpu",
    "nvswitch",
    "nvswitch_pci_functions",
    "rdma_ports",
    "rdma_rate_gbit_per_s",
    "rdma_link_layer",
    "rdma_devices",
    "gpudirect_rdma",
    "sriov_vfs",
    "vbios_version",
    "nccl_busbw_warn_gbyte_per_s",
    "nccl_busbw_fail_gbyte_per_s",
    "nccl_nvls",
    "nccl_ring_busbw_warn_gbyte_per_s",
    "nccl_ring_busbw_fail_gbyte_per_s",
    "nccl_multinode_busbw_warn_gbyte_per_s",
    "nccl_multinode_busbw_fail_gbyte_per_s",
    "host_copy_fail_gbyte_per_s",
    "p2p_copy_fail_gbyte_per_s",
    "gpudirect_fail_gbit_per_s",
    "provisional",
    "sources",
];

/// Name of the built-in profile for a node with one PCIe GPU and no platform profile.
pub const GENERIC_PCIE_GPU: &str = "generic-pcie-gpu";

impl Profile {
    /// Whether an RDMA device is part of the GPU fabric (see `rdma_devices`).
    pub fn is_fabric_device(&self, name: &str) -> bool {
        self.rdma_devices.is_empty()
            || self
                .rdma_devices
                .iter()
                .any(|pattern| match pattern.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => name == pattern,
                })
    }

    /// Whether an NVML product name is one this profile expects (see `gpu_names`).
    pub fn matches_gpu_name(&self, name: &str) -> bool {
        let name = normalize_gpu_name(name);
        if self
            .gpu_names_exclude
            .iter()
            .any(|x| name.contains(&normalize_gpu_name(x)))
        {
            return false;
        }
        if self.gpu_names.is_empty() {
            return true;
        }
        self.gpu_names.iter().any(|pattern| {
            let pattern = normalize_gpu_name(pattern);
            match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == pattern,
            }
        })
    }
}

/// Lowercase, single spaces, without the `NVIDIA ` prefix older drivers omit.
fn normalize_gpu_name(name: &str) -> String {
    let joined = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = joined.to_ascii_lowercase();
    match lower.strip_prefix("nvidia ") {
        Some(rest) => rest.to_string(),
        None => lower,
    }
}

/// The built-in profile for these NVML GPU names (one entry per GPU), if one fits.
///
/// A platform profile fits when every name matches it and the count is more than half of its
/// `gpu_count` and at most all of it: a node that lost a GPU or two still gets its platform
/// profile (so the count check can say which is missing), while a VM with 1, 2 or 4 GPUs of an
/// 8-GPU board does not. `generic-pcie-gpu` fits exactly one GPU that no platform profile fits.
/// Anything else (mixed models, unknown platforms) is `None`: consistency checks only.
pub fn select_auto(gpu_names: &[&str]) -> Option<Profile> {
    let count = gpu_names.len();
    if count == 0 {
        return None;
    }
    let all = builtins();
    let platform = all.iter().find(|p| {
        !p.gpu_names.is_empty()
            && count_fits(count, p.gpu_count)
            && gpu_names.iter().all(|name| p.matches_gpu_name(name))
    });
    if let Some(p) = platform {
        return Some(p.clone());
    }
    if count == 1 {
        return all.into_iter().find(|p| p.name == GENERIC_PCIE_GPU);
    }
    None
}

/// One RDMA port as `by_fabric` weighs it: device, link layer, rate in Gb/s.
pub type FabricPort<'a> = (&'a str, &'a str, Option<f64>);

/// The fabric variant of an auto-chosen platform profile, from the node's RDMA ports. A
/// platform with an Ethernet (RoCE) variant (`hgx-h100` → `hgx-h100-roce`) whose node has fewer
/// InfiniBand ports than the profile expects, but at least that many Ethernet ports at the
/// variant's rate, is that variant: the GPU rails are RoCE, and they are those ports
/// (`rdma_devices`), so the slower front-end ports (2 × 200 GbE on the reference design) are not
/// judged as rails. The front-end ports of an InfiniBand node are fewer and slower than the rails,
/// so they never tip it.
/// A rail that trained down (one 400 GbE port at 200) leaves the majority of the rails at the
/// variant's rate: the node is still that variant, with the rails at full rate named, and the
/// missing one reported by the rdma layer against `rdma_ports` (issue 43: it once flipped the
/// node to the InfiniBand profile, "0 InfiniBand ports").
pub fn by_fabric(chosen: Profile, ports: &[FabricPort<'_>]) -> Profile {
    let Some(variant) = builtin(&format!("{}-roce", chosen.name)) else {
        return chosen;
    };
    let want = variant.rdma_ports.unwrap_or(0) as usize;
    let infiniband = ports.iter().filter(|(_, l, _)| *l == "InfiniBand").count();
    let rails = ethernet_rails(&variant, ports);
    if want > 0 && infiniband < want && rails.len() * 2 > want {
        Profile {
            rdma_devices: rails,
            ..variant
        }
    } else {
        chosen
    }
}

/// The Ethernet devices with a port at the profile's rate: a RoCE profile's GPU rails.
fn ethernet_rails(profile: &Profile, ports: &[FabricPort<'_>]) -> Vec<String> {
    let rate = profile.rdma_rate_gbps.unwrap_or(0) as f64;
    let mut rails: Vec<String> = ports
        .iter()
        .filter(|(_, l, r)| *l == "Ethernet" && r.is_some_and(|r| r >= rate))
        .map(|(device, _, _)| device.to_string())
        .collect();
    rails.dedup();
    rails
}

/// A RoCE profile named on the command line (`--profile hgx-h100-roce`) that names no
/// `rdma_devices` judges only its rails, the Ethernet ports at its rate, as the auto-chosen one
/// does: the node's slower front-end ports (2 x 200 GbE on the reference design) are not held
/// to the rails' rate. Any other profile, or one naming its devices, is left as it is.
pub fn with_rails(profile: Profile, ports: &[FabricPort<'_>]) -> Profile {
    if profile.rdma_link_layer.as_deref() != Some("Ethernet")
        || !profile.rdma_devices.is_empty()
        || profile.rdma_rate_gbps.is_none()
    {
        return profile;
    }
    let rails = ethernet_rails(&profile, ports);
    if rails.is_empty() {
        return profile;
    }
    Profile {
        rdma_devices: rails,
        ..profile
    }
}

fn count_fits(seen: usize, expected: Option<u32>) -> bool {
    match expected {
        None => true,
        Some(expected) => {
            let expected = expected as usize;
            seen <= expected && seen * 2 > expected
        }
    }
}

/// The built-in profile with this name.
pub fn builtin(name: &str) -> Option<Profile> {
    builtins().into_iter().find(|p| p.name == name)
}

fn builtin_names() -> String {
    builtins()
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `--profile` could not be used. Each message names the file, the key and the line.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "no built-in profile is named `{name}` and no such file exists; built-in profiles: {valid} (or pass a profile file, see docs/profiles.md)"
    )]
    UnknownName { name: String, valid: String },
    #[error("cannot read profile file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("profile file {}{}: {message}", path.display(), at_line(*line))]
    Syntax {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("profile file {}, line {line}: unknown key `{key}`; valid keys: {valid}", path.display())]
    UnknownKey {
        path: PathBuf,
        key: String,
        line: usize,
        valid: String,
    },
    #[error("profile file {}, line {line}: key `{key}`: {message}", path.display())]
    BadValue {
        path: PathBuf,
        key: String,
        line: usize,
        message: String,
    },
    #[error(
        "profile file {}, line {line}: key `base`: `{base}` is not a built-in profile; built-in profiles: {valid}",
        path.display()
    )]
    UnknownBase {
        path: PathBuf,
        base: String,
        line: usize,
        valid: String,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(", line {l}")).unwrap_or_default()
}

/// 1-based line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// `--profile ARG`: a built-in name, or a path to a profile file (docs/profiles.md).
pub fn load(arg: &str) -> Result<Profile, ProfileError> {
    load_noting(arg).map(|(profile, _)| profile)
}

/// [`load`], with a note for each deprecated key the file used ([`DEPRECATED_KEYS`]), for
/// stderr.
pub fn load_noting(arg: &str) -> Result<(Profile, Vec<String>), ProfileError> {
    if let Some(p) = builtin(arg) {
        return Ok((p, Vec::new()));
    }
    let path = Path::new(arg);
    let looks_like_path = path.exists()
        || arg.contains(std::path::MAIN_SEPARATOR)
        || arg.contains('/')
        || arg.ends_with(".toml");
    if !looks_like_path {
        return Err(ProfileError::UnknownName {
            name: arg.to_string(),
            valid: builtin_names(),
        });
    }
    // Not a plain read: a FIFO without a writer would block it forever. A regular file, or a
    // pipe that ends (`--profile <(...)`) within PROFILE_READ_WAIT, capped at 1 MiB.
    let shown = path.display().to_string();
    let text = crate::source::rooted::read_named_file(path, &shown, 1 << 20, PROFILE_READ_WAIT)
        .map_err(|err| {
            let full = err.to_string();
            let reason = full
                .strip_prefix(&format!("{shown}: "))
                .map(str::to_string)
                .unwrap_or(full);
            ProfileError::Read {
                path: path.to_path_buf(),
                source: std::io::Error::other(reason),
            }
        })?;
    parse_file_noting(path, &text)
}

/// Longest `--profile` waits for a pipe to end.
pub const PROFILE_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Parse the text of a profile file; `path` names it in errors and gives the default `name`.
pub fn parse_file(path: &Path, text: &str) -> Result<Profile, ProfileError> {
    parse_file_noting(path, text).map(|(profile, _)| profile)
}

/// [`parse_file`], with a note for each deprecated key used.
pub fn parse_file_noting(path: &Path, text: &str) -> Result<(Profile, Vec<String>), ProfileError> {
    let raw: BTreeMap<String, toml::Spanned<toml::Value>> =
        toml::from_str(text).map_err(|err| ProfileError::Syntax {
            path: path.to_path_buf(),
            line: err.span().map(|s| line_of(text, s.start)),
            message: err.message().trim().to_string(),
        })?;
    // Old key names become today's, each said once; both names of one key is an error.
    let mut notes = Vec::new();
    let mut doc: BTreeMap<String, toml::Spanned<toml::Value>> = BTreeMap::new();
    for (key, value) in raw {
        let Some((_, new)) = DEPRECATED_KEYS.iter().find(|(old, _)| *old == key) else {
            doc.insert(key, value);
            continue;
        };
        let line = line_of(text, value.span().start);
        if doc.contains_key(*new) || text_has_key(text, new) {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key,
                line,
                message: format!("set twice: `{new}` is its new name; keep that one"),
            });
        }
        notes.push(format!(
            "profile {}, line {line}: `{key}` is deprecated (`_gbps` said Gb/s in one key and GB/s in others): rename it `{new}`",
            path.display()
        ));
        doc.insert((*new).to_string(), value);
    }

    let mut merged = toml::Table::new();
    let mut base_profile: Option<Profile> = None;
    if let Some(base) = doc.get("base") {
        let line = line_of(text, base.span().start);
        let Some(base_name) = base.get_ref().as_str() else {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key: "base".to_string(),
                line,
                message: format!(
                    "expected the name of a built-in profile (a string), found {}",
                    base.get_ref().type_str()
                ),
            });
        };
        let Some(profile) = builtin(base_name) else {
            return Err(ProfileError::UnknownBase {
                path: path.to_path_buf(),
                base: base_name.to_string(),
                line,
                valid: builtin_names(),
            });
        };
        merged = toml::Table::try_from(&profile).map_err(|err| ProfileError::Syntax {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot use base `{base_name}`: {err}"),
        })?;
        base_profile = Some(profile);
    }

    // In file order, so the first error reported is the first in the file.
    let mut entries: Vec<(&String, &toml::Spanned<toml::Value>)> = doc.iter().collect();
    entries.sort_by_key(|(_, value)| value.span().start);
    for (key, value) in entries {
        if key == "base" {
            continue;
        }
        let line = line_of(text, value.span().start);
        if !FILE_KEYS.contains(&key.as_str()) {
            return Err(ProfileError::UnknownKey {
                path: path.to_path_buf(),
                key: key.clone(),
                line,
                valid: FILE_KEYS.join(", "),
            });
        }
        // Check this one key's type on its own, so the error can name the key and its line.
        let mut single = toml::Table::new();
        single.insert("name".to_string(), toml::Value::String(String::new()));
        single.insert(key.clone(), value.get_ref().clone());
        if let Err(err) = toml::Value::Table(single).try_into::<Profile>() {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key: key.clone(),
                line,
                message: err.message().trim().to_string(),
            });
        }
        merged.insert(key.clone(), value.get_ref().clone());
    }

    // A stated multi-node figure belongs to the base's NICs (hgx-a100's 192 GB/s is 8 × HDR):
    // a file that changes the NICs without restating it gets the figure derived from its own.
    let changes_nics = doc.contains_key("rdma_ports") || doc.contains_key("rdma_rate_gbit_per_s");
    for key in [
        "nccl_multinode_busbw_warn_gbyte_per_s",
        "nccl_multinode_busbw_fail_gbyte_per_s",
    ] {
        if changes_nics && !doc.contains_key(key) {
            merged.remove(key);
        }
    }

    if !doc.contains_key("name") {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "custom".to_string());
        merged.insert("name".to_string(), toml::Value::String(stem));
    }
    if let Some(base) = &base_profile
        && !doc.contains_key("description")
    {
        merged.insert(
            "description".to_string(),
            toml::Value::String(format!(
                "{} (base {}, edited in {})",
                base.description,
                base.name,
                path.display()
            )),
        );
    }

    toml::Value::Table(merged)
        .try_into::<Profile>()
        .map(|profile| (profile, notes))
        .map_err(|err| ProfileError::Syntax {
            path: path.to_path_buf(),
            line: None,
            message: err.message().trim().to_string(),
        })
}

/// Whether a top-level `key =` line is in the text (the map above has already lost which of
/// two names came first).
fn text_has_key(text: &str, key: &str) -> bool {
    text.lines().any(|l| {
        l.trim_start()
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    })
}

/// `gpudoctor profiles`: one row per built-in profile, then the sources of each.
pub fn list_table() -> String {
    let rows: Vec<[String; 6]> = builtins().iter().map(table_row).collect();
    let headers = [
        "NAME",
        "GPUS",
        "PCIE",
        "NVLINK",
        "RDMA",
        "NCCL BUSBW warn/fail",
    ];
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    let mut out = crate::text::grid::text(&headers.map(str::to_string), &rows);
    let _ = writeln!(out, "\nSources:");
    for p in builtins() {
        let _ = writeln!(out, "  {}:", p.name);
        for s in &p.sources {
            let _ = writeln!(out, "    - {s}");
        }
    }
    let _ = writeln!(
        out,
        "\nSelection: by GPU model and count (docs/profiles.md); `--profile NAME|FILE` overrides."
    );
    out
}

fn table_row(p: &Profile) -> [String; 6] {
    let model = match p.gpu_names.first() {
        Some(n) => n.strip_prefix("NVIDIA ").unwrap_or(n).to_string(),
        None => "any".to_string(),
    };
    let gpus = match p.gpu_count {
        Some(c) => format!("{c} x {model}"),
        None => model,
    };
    let pcie = match (p.gpu_pcie_gen, p.gpu_pcie_width) {
        (Some(g), Some(w)) => format!("gen{g} x{w}"),
        (Some(g), None) => format!("gen{g}"),
        (None, Some(w)) => format!("x{w}"),
        (None, None) => "-".to_string(),
    };
    let nvlink = match (p.nvlinks_per_gpu, p.nvswitch) {
        (Some(n), Some(true)) => format!("{n} +nvswitch"),
        (Some(n), _) => n.to_string(),
        (None, Some(true)) => "nvswitch".to_string(),
        (None, _) => "-".to_string(),
    };
    let rdma = match (p.rdma_ports, p.rdma_rate_gbps) {
        (Some(n), Some(r)) => format!("{n} x {r} Gb/s"),
        (Some(n), None) => format!("{n} ports"),
        (None, Some(r)) => format!("{r} Gb/s"),
        (None, None) => "-".to_string(),
    };
    let rdma = match &p.rdma_link_layer {
        Some(l) if rdma != "-" => format!("{rdma} {l}"),
        _ => rdma,
    };
    let nccl = match (p.nccl_busbw_warn_gbps, p.nccl_busbw_fail_gbps) {
        (Some(w), Some(f)) => format!("{w} / {f} GB/s"),
        (Some(w), None) => format!("{w} / - GB/s"),
        (None, Some(f)) => format!("- / {f} GB/s"),
        (None, None) if p.provisional => "- (provisional)".to_string(),
        (None, None) => "-".to_string(),
    };
    let nccl = if p.nccl_nvls == Some(true) {
        format!("{nccl} (nvls)")
    } else {
        nccl
    };
    [p.name.clone(), gpus, pcie, nvlink, rdma, nccl]
}

/// `gpudoctor profiles --format json`: the built-ins as an array of profile objects (the same
/// keys as the profile file format).
pub fn list_json() -> String {
    let mut text = serde_json::to_string_pretty(&builtins()).unwrap_or_else(|_| "[]".into());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests;
