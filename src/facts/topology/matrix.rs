//! The `nvidia-smi topo -m` matrix over GPUs and RDMA NICs: the relationship classes, the NVLink
//! view from NVML, and the cells, computed on demand from per-device keys.
//!
//! Why on demand (issue 30, finding 4): a capture can list thousands of GPUs (about 8 000 fit
//! the default unpack limits), and a matrix of owned cells grows with the square of that
//! (1.66 GB for 2 000 GPUs). So the matrix keeps, per row, only what a cell is computed from:
//! the interned host bridge and PCI chain, the NUMA node, and the NVLink counts; memory is
//! linear in the devices. Past [`MATRIX_CAP`] devices no cell is printed: the renderers show a
//! [`Summary`] (docs/performance.md, docs/topology.md). Reads nothing, judges nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;
use serde::ser::{SerializeSeq, SerializeStruct};

use super::{DeviceKind, NumaSource, PciDevice, Topology};
use crate::answers::nvml::{NvmlFacts, RemoteType};

/// The relationship between two devices, as `nvidia-smi topo -m` names it (topology.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Link {
    /// The device itself.
    X,
    /// A bonded set of this many NVLinks.
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
    /// Not computable from what was read (a device without a path, NUMA unknown on a
    /// multi-node machine): `?`.
    Unknown,
}

impl Link {
    /// Closeness order: smaller is nearer. `?` sorts last.
    pub fn rank(self) -> u32 {
        match self {
            Link::X => 0,
            Link::Nv(_) => 1,
            Link::Pix => 2,
            Link::Pxb => 3,
            Link::Phb => 4,
            Link::Node => 5,
            Link::Sys => 6,
            Link::Unknown => 7,
        }
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Link::X => f.write_str("X"),
            Link::Nv(n) => write!(f, "NV{n}"),
            Link::Pix => f.write_str("PIX"),
            Link::Pxb => f.write_str("PXB"),
            Link::Phb => f.write_str("PHB"),
            Link::Node => f.write_str("NODE"),
            Link::Sys => f.write_str("SYS"),
            Link::Unknown => f.write_str("?"),
        }
    }
}

impl Serialize for Link {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The legend `nvidia-smi topo -m` prints under the matrix (topology.md §1, current drivers).
pub const LEGEND: [(&str, &str); 8] = [
    ("X", "Self"),
    (
        "SYS",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    ),
    (
        "NODE",
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    ),
    (
        "PHB",
        "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    ),
    (
        "PXB",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    ),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("NV#", "Connection traversing a bonded set of # NVLinks"),
    (
        "?",
        "Cannot be computed from what sysfs shows (missing path or NUMA node)",
    ),
];

/// Per-GPU NVLink facts from NVML (gpu-health.md §6): active links to each peer GPU, and active
/// links into an NVSwitch fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvlinkView {
    direct: BTreeMap<(String, String), u32>,
    to_switch: BTreeMap<String, u32>,
}

impl NvlinkView {
    /// `None` when NVML did not answer (no driver): the matrix then shows PCIe classes only.
    pub fn from_nvml(nvml: &NvmlFacts, topo: &Topology) -> Option<NvlinkView> {
        if nvml.init_error.is_some() {
            return None;
        }
        let switches: BTreeSet<&str> = topo
            .of_kind(DeviceKind::NvSwitch)
            .map(|d| d.bdf.as_str())
            .collect();
        let gpus: BTreeSet<&str> = topo.gpus().map(|d| d.bdf.as_str()).collect();
        let mut view = NvlinkView::default();
        for dev in nvml.devices.iter().filter(|d| d.error.is_none()) {
            let (Some(bdf), Some(links)) = (dev.pci_bus_id.as_ref(), dev.nvlinks.value()) else {
                continue;
            };
            for link in links.iter().filter(|l| l.active) {
                let remote = link.remote_pci_bus_id.as_deref();
                let remote_type = link.remote_type.value().copied();
                if remote_type == Some(RemoteType::Nvswitch)
                    || remote.is_some_and(|r| switches.contains(r))
                {
                    *view.to_switch.entry(bdf.clone()).or_default() += 1;
                } else if let Some(r) = remote.filter(|r| gpus.contains(r) && *r != bdf) {
                    *view.direct.entry((bdf.clone(), r.to_string())).or_default() += 1;
                }
            }
        }
        Some(view)
    }

    /// `NV<n>` between two GPUs: the direct links from `a` to `b`, else on an NVSwitch system the
    /// smaller of the two GPUs' active fabric links (nvidia-smi prints the active link count:
    /// `NV18` on HGX H100, `NV12` on DGX A100; topology.md §3 rule 1).
    pub fn between(&self, a: &str, b: &str) -> Option<u32> {
        let direct = self
            .direct
            .get(&(a.to_string(), b.to_string()))
            .or_else(|| self.direct.get(&(b.to_string(), a.to_string())))
            .copied()
            .unwrap_or(0);
        if direct > 0 {
            return Some(direct);
        }
        let (x, y) = (self.to_switch.get(a)?, self.to_switch.get(b)?);
        let n = (*x).min(*y);
        (n > 0).then_some(n)
    }
}

/// Most devices (GPUs plus RDMA NICs) a matrix is printed for. A real node has 4 or 8 GPUs (16
/// on HGX-2/DGX-2) and up to 16 NIC functions, and SR-IOV virtual functions with an RDMA device
/// count as NICs too (8 ports with 8 VFs each and 8 GPUs: 72), so 128 leaves room for every real
/// node while the table stays bounded (128 × 128 cells of at most 5 characters: under 128 KiB).
/// Past it the matrix is left out and a [`Summary`] is shown: thousands of GPUs is a broken or
/// hostile capture, and nobody reads a matrix of millions of cells.
pub const MATRIX_CAP: usize = 128;

/// One row/column of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixEntry {
    /// `GPU0`, `NIC3`.
    pub label: String,
    /// RDMA device or netdev name for NICs (`mlx5_0`), the address for GPUs.
    pub name: String,
    pub bdf: String,
    pub numa_node: Option<u32>,
    pub numa_source: NumaSource,
    /// `local_cpulist`.
    pub cpu_affinity: Option<String>,
}

/// What a cell of row i is computed from: names interned to numbers (equal names, equal
/// numbers), so a cell costs a few integer comparisons and no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    gpu: bool,
    bdf: usize,
    host: usize,
    chain: Box<[usize]>,
    numa: Option<u32>,
    /// Active NVLinks into an NVSwitch fabric (NVML answered and counted some).
    to_switch: Option<u32>,
}

/// The `nvidia-smi topo -m` matrix over GPUs and RDMA NICs. Row and column order: GPUs then
/// NICs; [`Matrix::cell`] relates row i to column j. Serialised as `{gpus, nics, cells, nvlink}`
/// within [`MATRIX_CAP`], else `{gpus, nics, nvlink, omitted, summary}` (docs/topology.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub gpus: Vec<MatrixEntry>,
    pub nics: Vec<MatrixEntry>,
    /// Whether NVLink classes were available: `nvml` or why not.
    pub nvlink: String,
    places: Vec<Place>,
    /// Active direct NVLinks between GPU rows, keyed as NVML reported them (from the first
    /// row's side): bounded by what NVML listed, not by the square of the GPUs.
    direct: BTreeMap<(usize, usize), u32>,
}

/// Why the matrix was left out (JSON `matrix.omitted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Omitted {
    /// GPUs plus RDMA NICs.
    pub devices: usize,
    pub limit: usize,
    pub reason: String,
}

/// Unordered pairs of distinct devices per class, by what the pair joins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PairCounts {
    pub gpu_gpu: BTreeMap<Link, u64>,
    pub gpu_nic: BTreeMap<Link, u64>,
    pub nic_nic: BTreeMap<Link, u64>,
}

/// Matrix devices on one NUMA node (`node` null: not known).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaCount {
    pub node: Option<u32>,
    pub gpus: usize,
    pub nics: usize,
}

/// What is shown instead of a matrix past [`MATRIX_CAP`]: counts whose size does not grow with
/// the devices (classes and NUMA nodes are few); the devices themselves are listed apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub pairs: PairCounts,
    pub numa: Vec<NumaCount>,
}

impl Matrix {
    /// GPUs in PCI order (NVML enumerates in PCI bus order, sysfs.md §13.11), RDMA NICs in
    /// [`Topology::rdma_nics`] order.
    pub fn build(topo: &Topology, nvml: Option<&NvmlFacts>) -> Matrix {
        let view = nvml.and_then(|n| NvlinkView::from_nvml(n, topo));
        let nvlink = match (nvml, &view) {
            (_, Some(_)) => "nvml".to_string(),
            (Some(n), None) => match &n.init_error {
                Some(e) => format!("unavailable: {}", e.kind.describe()),
                None => "unavailable".to_string(),
            },
            (None, None) => "not asked".to_string(),
        };
        let gpus: Vec<&PciDevice> = topo.gpus().collect();
        let nics = topo.rdma_nics();
        let entry = |label: String, d: &PciDevice, name: String| MatrixEntry {
            label,
            name,
            bdf: d.bdf.clone(),
            numa_node: d.numa,
            numa_source: d.numa_source,
            cpu_affinity: d.local_cpus.as_ref().map(ToString::to_string),
        };
        let mut names: HashMap<&str, usize> = HashMap::new();
        let places = gpus
            .iter()
            .chain(nics.iter())
            .map(|d| Place {
                gpu: d.kind == DeviceKind::Gpu,
                bdf: intern(&mut names, &d.bdf),
                host: intern(&mut names, &d.host_bridge),
                chain: d.chain.iter().map(|c| intern(&mut names, c)).collect(),
                numa: d.numa,
                to_switch: view.as_ref().and_then(|v| v.to_switch.get(&d.bdf).copied()),
            })
            .collect();
        let row_of: HashMap<&str, usize> = gpus
            .iter()
            .enumerate()
            .map(|(i, d)| (d.bdf.as_str(), i))
            .collect();
        let direct = view
            .map(|v| {
                v.direct
                    .iter()
                    .filter_map(|((a, b), n)| {
                        Some(((*row_of.get(a.as_str())?, *row_of.get(b.as_str())?), *n))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Matrix {
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, d)| entry(format!("GPU{i}"), d, d.bdf.clone()))
                .collect(),
            nics: nics
                .iter()
                .enumerate()
                .map(|(i, d)| entry(format!("NIC{i}"), d, d.nic_name()))
                .collect(),
            nvlink,
            places,
            direct,
        }
    }

    /// Rows (and columns): GPUs plus RDMA NICs.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The class relating row `i` to column `j` (`?` outside the matrix): `NV#` between two
    /// GPUs when NVML counted active links, else the PCIe/NUMA class ([`Topology::pcie_class`]).
    pub fn cell(&self, i: usize, j: usize) -> Link {
        let (Some(a), Some(b)) = (self.places.get(i), self.places.get(j)) else {
            return Link::Unknown;
        };
        if a.gpu
            && b.gpu
            && a.bdf != b.bdf
            && let Some(n) = self.nvlinks(i, j, a, b)
        {
            return Link::Nv(n);
        }
        super::pcie_rule(
            a.bdf == b.bdf,
            a.host == b.host,
            &a.chain,
            &b.chain,
            (a.numa, b.numa),
        )
    }

    /// [`NvlinkView::between`] over rows.
    fn nvlinks(&self, i: usize, j: usize, a: &Place, b: &Place) -> Option<u32> {
        let direct = self
            .direct
            .get(&(i, j))
            .or_else(|| self.direct.get(&(j, i)))
            .copied()
            .unwrap_or(0);
        if direct > 0 {
            return Some(direct);
        }
        let n = a.to_switch?.min(b.to_switch?);
        (n > 0).then_some(n)
    }

    /// Every cell, when the matrix is printed (within [`MATRIX_CAP`]); `None` past it.
    pub fn cells(&self) -> Option<Vec<Vec<Link>>> {
        self.omitted().is_none().then(|| {
            (0..self.len())
                .map(|i| (0..self.len()).map(|j| self.cell(i, j)).collect())
                .collect()
        })
    }

    /// Why the matrix is left out: more than [`MATRIX_CAP`] devices.
    pub fn omitted(&self) -> Option<Omitted> {
        let devices = self.len();
        (devices > MATRIX_CAP).then(|| Omitted {
            devices,
            limit: MATRIX_CAP,
            reason: format!(
                "{devices} devices ({} gpus, {} rdma nics) is more than the {MATRIX_CAP} a matrix is printed for; a real node has at most a few dozen",
                self.gpus.len(),
                self.nics.len()
            ),
        })
    }

    /// Counts per class over every pair and per NUMA node: time grows with the pairs, memory
    /// does not (no cell is kept).
    pub fn summary(&self) -> Summary {
        let mut pairs = PairCounts::default();
        for i in 0..self.len() {
            for j in i + 1..self.len() {
                let counts = match (self.places[i].gpu, self.places[j].gpu) {
                    (true, true) => &mut pairs.gpu_gpu,
                    (false, false) => &mut pairs.nic_nic,
                    _ => &mut pairs.gpu_nic,
                };
                *counts.entry(self.cell(i, j)).or_default() += 1;
            }
        }
        let mut numa: BTreeMap<(bool, Option<u32>), (usize, usize)> = BTreeMap::new();
        for p in &self.places {
            // Known nodes first, in order; unknown last.
            let counts = numa.entry((p.numa.is_none(), p.numa)).or_default();
            if p.gpu {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
        Summary {
            pairs,
            numa: numa
                .into_iter()
                .map(|((_, node), (gpus, nics))| NumaCount { node, gpus, nics })
                .collect(),
        }
    }
}

/// A number for `name`, the same for equal names.
fn intern<'a>(names: &mut HashMap<&'a str, usize>, name: &'a str) -> usize {
    let next = names.len();
    *names.entry(name).or_insert(next)
}

impl Serialize for Matrix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let omitted = self.omitted();
        let mut m = s.serialize_struct("Matrix", if omitted.is_some() { 5 } else { 4 })?;
        m.serialize_field("gpus", &self.gpus)?;
        m.serialize_field("nics", &self.nics)?;
        match &omitted {
            // Streamed row by row: the cells are never held at once.
            None => m.serialize_field("cells", &Rows(self))?,
            Some(_) => m.skip_field("cells")?,
        }
        m.serialize_field("nvlink", &self.nvlink)?;
        if let Some(omitted) = &omitted {
            m.serialize_field("omitted", omitted)?;
            m.serialize_field("summary", &self.summary())?;
        }
        m.end()
    }
}

struct Rows<'a>(&'a Matrix);

struct Row<'a>(&'a Matrix, usize);

impl Serialize for Rows<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for i in 0..self.0.len() {
            seq.serialize_element(&Row(self.0, i))?;
        }
        seq.end()
    }
}

impl Serialize for Row<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for j in 0..self.0.len() {
            seq.serialize_element(&self.0.cell(self.1, j))?;
        }
        seq.end()
    }
}
