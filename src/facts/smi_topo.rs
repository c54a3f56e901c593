//! `nvidia-smi topo -m` as people paste it: the GPU/NIC matrix read back into devices and the
//! links between them. nvidia-smi prints a header row of device names (`GPU0 … NIC0 …`, or the
//! RDMA devices' own names `mlx5_0 …` before the `NIC Legend:` appeared), then one row per
//! device: `X` for itself, `NV#` for a bonded set of # NVLinks, `PIX`/`PXB`/`PHB`/`NODE`/`SYS`
//! for the PCIe path (older drivers wrote `SOC` for `SYS`), then the `CPU Affinity`,
//! `NUMA Affinity` and (newer drivers) `GPU NUMA ID` columns, which NIC rows leave empty. The
//! cells are separated by tabs, or by runs of spaces once pasted through a browser; both read
//! the same because no cell holds a space. A paste cut above the header takes its columns from
//! the rows (the matrix is square); one cut below keeps the rows it has. The `NIC Legend:`
//! lines (`NIC0: mlx5_0`) name the NICs.
//!
//! Samples: tests/data/judge/topo_*.txt (SOURCES.md names each). Parses; judges nothing.

use std::collections::BTreeMap;

pub use super::topology::Link;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Gpu,
    Nic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// As the matrix names it: `GPU3`, `NIC2`, `mlx5_0`.
    pub name: String,
    pub kind: DeviceKind,
    /// The RDMA device a NIC is (`mlx5_2`): the legend's, or the column's own name.
    pub rdma: Option<String>,
    /// The `CPU Affinity` and `NUMA Affinity` cells, where the row has them.
    pub cpu_affinity: Option<String>,
    pub numa: Option<String>,
    /// 1-based line of the device's row in the paste.
    pub line: Option<usize>,
}

impl Device {
    /// `GPU3` or `NIC2 (mlx5_2)`.
    pub fn shown(&self) -> String {
        match &self.rdma {
            Some(rdma) if *rdma != self.name => format!("{} ({rdma})", self.name),
            _ => self.name.clone(),
        }
    }
}

/// The matrix as read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmiMatrix {
    /// In column order.
    pub devices: Vec<Device>,
    /// `links[i][j]`: row `i`'s cell in column `j`; `None` for a row the paste lacks or a cell it
    /// cut.
    pub links: Vec<Vec<Option<Link>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotAMatrix(pub String);

impl SmiMatrix {
    pub fn gpus(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.devices.len()).filter(|&i| self.devices[i].kind == DeviceKind::Gpu)
    }
    pub fn nics(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.devices.len()).filter(|&i| self.devices[i].kind == DeviceKind::Nic)
    }
    /// The link from `a` to `b`: `a`'s row, else `b`'s (nvidia-smi prints it both ways).
    pub fn link(&self, a: usize, b: usize) -> Option<Link> {
        let cell = |r: usize, c: usize| {
            self.links
                .get(r)
                .and_then(|row| row.get(c))
                .copied()
                .flatten()
        };
        cell(a, b).or_else(|| cell(b, a))
    }
}

/// One cell of the matrix.
fn cell(word: &str) -> Option<Link> {
    Some(match word {
        "X" => Link::X,
        "PIX" => Link::Pix,
        "PXB" => Link::Pxb,
        "PHB" => Link::Phb,
        "NODE" => Link::Node,
        // nvidia-smi before 384 called the path across sockets SOC.
        "SYS" | "SOC" => Link::Sys,
        _ => {
            let n = word.strip_prefix("NV")?;
            Link::Nv(n.parse().ok().filter(|&n| n > 0)?)
        }
    })
}

/// A device name as nvidia-smi heads a column: `GPU0`, `NIC10`, or an RDMA device (`mlx5_0`,
/// `mlx5_bond_0`, `bnxt_re0`): a word ending in a digit that is no cell and no affinity value.
fn device_name(word: &str) -> bool {
    word.len() <= 64
        && word.starts_with(|c: char| c.is_ascii_alphabetic())
        && word.ends_with(|c: char| c.is_ascii_digit())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && cell(word).is_none()
}

fn kind_of(name: &str) -> DeviceKind {
    let gpu = name
        .strip_prefix("GPU")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if gpu {
        DeviceKind::Gpu
    } else {
        DeviceKind::Nic
    }
}

/// A row as read: its name, its cells up to the affinity columns, the words after them, its
/// 1-based line.
type Row = (String, Vec<Option<Link>>, Vec<String>, usize);

/// Parse a pasted matrix.
pub fn parse(text: &str) -> Result<SmiMatrix, NotAMatrix> {
    let mut header: Option<Vec<String>> = None;
    let mut rows: Vec<Row> = Vec::new();
    let mut legend: BTreeMap<String, String> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = words.first() else {
            continue;
        };
        // `  NIC0: mlx5_0`
        if let [name, rdma] = words.as_slice()
            && let Some(name) = name.strip_suffix(':')
            && device_name(name)
        {
            legend.insert(name.to_string(), (*rdma).to_string());
            continue;
        }
        if !device_name(first) {
            continue;
        }
        let cells: Vec<Option<Link>> = words[1..].iter().map(|w| cell(w)).collect();
        let leading = cells.iter().take_while(|c| c.is_some()).count();
        if leading == 0 {
            // A header: device names up to the affinity columns (`CPU Affinity` ...).
            if header.is_none() && rows.is_empty() && first.starts_with("GPU") {
                let names: Vec<String> = words
                    .iter()
                    .take_while(|w| device_name(w))
                    .map(|w| (*w).to_string())
                    .collect();
                header = Some(names);
            }
            continue;
        }
        if !cells[..leading].contains(&Some(Link::X)) {
            continue;
        }
        let rest: Vec<String> = words[1 + leading..]
            .iter()
            .map(|w| (*w).to_string())
            .collect();
        rows.push((first.to_string(), cells[..leading].to_vec(), rest, i + 1));
    }
    if rows.is_empty() {
        return Err(NotAMatrix(
            "no row of `nvidia-smi topo -m` (a device name, then X against itself) in it".into(),
        ));
    }
    // Columns: the header's, else where each row has its `X` (square matrix).
    let names: Vec<String> = match header {
        Some(h) if !h.is_empty() => h,
        _ => names_from_rows(&rows),
    };
    let mut devices: Vec<Device> = names
        .iter()
        .map(|name| {
            let kind = kind_of(name);
            let rdma = match kind {
                DeviceKind::Gpu => None,
                DeviceKind::Nic => Some(legend.get(name).cloned().unwrap_or_else(|| name.clone())),
            };
            Device {
                name: name.clone(),
                kind,
                rdma,
                cpu_affinity: None,
                numa: None,
                line: None,
            }
        })
        .collect();
    let mut links: Vec<Vec<Option<Link>>> = vec![vec![None; names.len()]; names.len()];
    for (name, cells, rest, line) in rows {
        let Some(r) = names.iter().position(|n| *n == name) else {
            continue;
        };
        for (c, link) in cells.into_iter().take(names.len()).enumerate() {
            links[r][c] = link;
        }
        let d = &mut devices[r];
        d.line = Some(line);
        if d.kind == DeviceKind::Gpu {
            // `CPU Affinity` (a CPU list) may be empty; `NUMA Affinity` follows it.
            let cpu_list = |w: &str| {
                w.bytes()
                    .all(|b| b.is_ascii_digit() || b == b',' || b == b'-')
            };
            match rest.as_slice() {
                [cpus, numa, ..]
                    if cpus.contains([',', '-']) || cpu_list(cpus) && cpu_list(numa) =>
                {
                    d.cpu_affinity = Some(cpus.clone());
                    d.numa = Some(numa.clone());
                }
                [numa, ..] if numa != "N/A" => d.numa = Some(numa.clone()),
                _ => {}
            }
        }
    }
    Ok(SmiMatrix { devices, links })
}

/// The columns of a paste cut above its header: each row's name at the column of its `X`;
/// a column whose row was cut too is named after its nearest named neighbour (`GPU2` at column
/// 2 makes columns 0 and 1 `GPU0` and `GPU1`), or `?N`.
fn names_from_rows(rows: &[Row]) -> Vec<String> {
    let width = rows
        .iter()
        .map(|(_, cells, ..)| cells.len())
        .max()
        .unwrap_or(0);
    let mut named: Vec<Option<String>> = vec![None; width];
    for (name, cells, ..) in rows {
        if let Some(k) = cells.iter().position(|c| *c == Some(Link::X)) {
            named[k].get_or_insert_with(|| name.clone());
        }
    }
    let split = |name: &str| {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, number) = name.split_at(name.len() - digits);
        number
            .parse::<usize>()
            .ok()
            .map(|n| (prefix.to_string(), n))
    };
    (0..width)
        .map(|j| {
            if let Some(name) = &named[j] {
                return name.clone();
            }
            let nearest = (0..width)
                .filter_map(|k| named[k].as_ref().map(|n| (k.abs_diff(j), k, n)))
                .min_by_key(|(d, ..)| *d);
            nearest
                .and_then(|(_, k, n)| {
                    let (prefix, number) = split(n)?;
                    let number = (number + j).checked_sub(k)?;
                    Some(format!("{prefix}{number}"))
                })
                .unwrap_or_else(|| format!("?{j}"))
        })
        .collect()
}

#[cfg(test)]
mod tests;
