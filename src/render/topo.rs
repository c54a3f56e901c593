//! `gpudoctor topo`: the GPU/NIC relationship matrix as `nvidia-smi topo -m` prints it
//! (reference/topology.md §2), with CPU and NUMA affinity columns, the legend and a NIC legend —
//! computed from sysfs, so it works when the driver does not — or the same as one JSON document.
//! Past `MATRIX_CAP` devices (a broken or hostile capture with thousands of GPUs) the matrix is
//! left out for a summary that does not grow with the pairs (issue 30, docs/topology.md).
//!
//! Like the other renderers it only formats what it is given: the facts and the matrix come
//! from `facts/topology.rs`. The table takes the names it prints (device names, PCI addresses,
//! CPU lists) through `text/sanitize.rs` first: sysfs entry names are whatever the tree holds.

use std::fmt::Write;

use serde::Serialize;

use crate::facts::numa::NumaNode;
use crate::facts::topology::{DeviceKind, LEGEND, Link, Matrix, NumaSource, PciDevice, Topology};

use crate::text::wrap;

/// Version of the `topo --format json` document (docs/topology.md).
pub const TOPO_SCHEMA_VERSION: u32 = 1;

/// A PCIe switch: one upstream port and the downstream ports under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Switch {
    pub upstream: String,
    pub vendor_device: Option<String>,
    pub downstream: Vec<String>,
    /// The root port (or downstream port of an outer switch) above it.
    pub parent: Option<String>,
}

/// The `--format json` document.
#[derive(Debug, Clone, Serialize)]
pub struct TopoReport<'a> {
    pub schema_version: u32,
    pub root: String,
    pub matrix: &'a Matrix,
    /// `labels[i]` names row and column i of `matrix.cells` (every device, even when the cells
    /// are left out).
    pub labels: Vec<String>,
    pub numa_nodes: &'a [NumaNode],
    pub switches: Vec<Switch>,
    /// GPUs, NVSwitches, NICs, root ports and switch ports with everything read about them.
    pub devices: Vec<&'a PciDevice>,
    /// Paths that could not be read or resolved (dangling links, odd files).
    pub problems: Vec<String>,
}

/// PCIe switches found in the tree.
pub fn switches(topo: &Topology) -> Vec<Switch> {
    topo.of_kind(DeviceKind::SwitchUpstream)
        .map(|up| Switch {
            upstream: up.bdf.clone(),
            vendor_device: match (up.vendor, up.device) {
                (Some(v), Some(d)) => Some(format!("{v:04x}:{d:04x}")),
                _ => None,
            },
            downstream: topo
                .of_kind(DeviceKind::SwitchDownstream)
                .filter(|d| topo.parent(d).is_some_and(|p| p.bdf == up.bdf))
                .map(|d| d.bdf.clone())
                .collect(),
            parent: topo.parent(up).map(|p| p.bdf.clone()),
        })
        .collect()
}

pub fn report<'a>(topo: &'a Topology, matrix: &'a Matrix, root: &str) -> TopoReport<'a> {
    TopoReport {
        schema_version: TOPO_SCHEMA_VERSION,
        root: root.to_string(),
        matrix,
        labels: matrix
            .gpus
            .iter()
            .chain(&matrix.nics)
            .map(|e| e.label.clone())
            .collect(),
        numa_nodes: &topo.numa.nodes,
        switches: switches(topo),
        devices: topo
            .devices
            .iter()
            .filter(|d| d.kind != DeviceKind::Other && d.kind != DeviceKind::PciBridge)
            .collect(),
        problems: topo
            .problems
            .iter()
            .chain(&topo.numa.problems)
            .map(ToString::to_string)
            .collect(),
    }
}

pub fn render_json(topo: &Topology, matrix: &Matrix, root: &str) -> String {
    let mut text = serde_json::to_string_pretty(&report(topo, matrix, root))
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialise the topology: {e}\"}}"));
    text.push('\n');
    // Sysfs names may hold C1 or bidi characters, which serde_json writes raw.
    crate::text::sanitize::json(text)
}

fn paint(color: bool, link: Link, text: &str) -> String {
    if !color {
        return text.to_string();
    }
    let code = match link {
        Link::X => return text.to_string(),
        Link::Nv(_) | Link::Pix => "32",
        Link::Pxb => "36",
        Link::Phb | Link::Node => "33",
        Link::Sys => "31",
        Link::Unknown => "35",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// The matrix as text: a [`grid`](crate::text::grid) (columns padded with spaces, not tabs, so a
/// paste keeps its shape, topology.md §2 hazards), colour only when `color`, one line per row
/// whatever its width (as into a pipe).
pub fn render_table(topo: &Topology, matrix: &Matrix, color: bool) -> String {
    render_table_at(topo, matrix, color, None)
}

/// [`render_table`] fitted to `width` columns (`wrap::stdout_width`): a matrix wider than that is
/// printed in blocks of columns, one under the other, each repeating the row labels (as R and
/// numpy print a wide matrix: every cell keeps its row and column name in view, nothing is
/// cut), and the legends wrap at spaces under their text.
pub fn render_table_at(
    topo: &Topology,
    matrix: &Matrix,
    color: bool,
    width: Option<usize>,
) -> String {
    let matrix = &sanitized(matrix);
    let mut out = String::new();
    let entries: Vec<_> = matrix.gpus.iter().chain(&matrix.nics).collect();
    if entries.is_empty() {
        let line = format!(
            "no gpu and no rdma nic found under sys/bus/pci/devices ({} pci functions read)",
            topo.devices.len()
        );
        wrap::push(&mut out, &line, width, 2);
        write_numa(&mut out, topo, width);
        write_problems(&mut out, topo, width);
        return out;
    }
    if matrix.omitted().is_some() {
        write_summary(&mut out, matrix, width);
        write_footer(&mut out, topo, matrix, false, width);
        return out;
    }
    let mut header: Vec<String> = vec![String::new()];
    header.extend(entries.iter().map(|e| e.label.clone()));
    header.push("CPU Affinity".into());
    header.push("NUMA Affinity".into());
    let mut rows: Vec<Vec<(String, Option<Link>)>> = Vec::new();
    let mut from_cpulist = false;
    for (i, e) in entries.iter().enumerate() {
        let mut row = vec![(e.label.clone(), None)];
        for link in (0..entries.len()).map(|j| matrix.cell(i, j)) {
            row.push((link.to_string(), Some(link)));
        }
        row.push((e.cpu_affinity.clone().unwrap_or_else(|| "N/A".into()), None));
        let numa = match (e.numa_node, e.numa_source) {
            (Some(n), NumaSource::LocalCpulist) => {
                from_cpulist = true;
                format!("{n}*")
            }
            (Some(n), _) => n.to_string(),
            (None, _) => "N/A".into(),
        };
        row.push((numa, None));
        rows.push(row);
    }
    // Link classes coloured before layout: the grid measures cells without their escapes.
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|(text, link)| match link {
                    Some(l) => paint(color, *l, text),
                    None => text.clone(),
                })
                .collect()
        })
        .collect();
    for (i, block) in blocks(&header, &cells, width).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut lines = block.iter();
        if let Some(head) = lines.next() {
            if color {
                let _ = writeln!(out, "\x1b[4m{head}\x1b[0m");
            } else {
                let _ = writeln!(out, "{head}");
            }
        }
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
    out.push_str("\nLegend:\n\n");
    for (name, text) in LEGEND {
        wrap::push(&mut out, &format!("  {name:<4} = {text}"), width, 9);
    }
    if !matrix.nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for nic in &matrix.nics {
            let line = format!("  {}: {} ({})", nic.label, nic.name, nic.bdf);
            wrap::push(&mut out, &line, width, 4);
        }
    }
    out.push('\n');
    write_footer(&mut out, topo, matrix, from_cpulist, width);
    out
}

/// What follows the matrix (or its summary): the `*` note, the GPU list, where `NV#` came from,
/// the NUMA nodes and the problems.
fn write_footer(
    out: &mut String,
    topo: &Topology,
    matrix: &Matrix,
    from_cpulist: bool,
    width: Option<usize>,
) {
    if from_cpulist {
        wrap::push(
            out,
            "* numa_node is -1 (firmware gave no locality): node taken from local_cpulist",
            width,
            2,
        );
    }
    let gpus: Vec<String> = matrix
        .gpus
        .iter()
        .map(|g| format!("{}={}", g.label, g.bdf))
        .collect();
    let line = format!(
        "GPUs: {}",
        if gpus.is_empty() {
            "none".to_string()
        } else {
            gpus.join(" ")
        }
    );
    wrap::push(out, &line, width, 6);
    let nvlink = if matrix.nvlink == "nvml" {
        "NV# from NVML".to_string()
    } else {
        format!("NVLink {}: PCIe classes only", matrix.nvlink)
    };
    wrap::push(out, &nvlink, width, 2);
    write_numa(out, topo, width);
    write_problems(out, topo, width);
}

/// Past [`MATRIX_CAP`](crate::facts::topology::MATRIX_CAP) devices: why there is no matrix and
/// what to do, the classes counted over every pair, the devices per NUMA node and the NIC
/// legend. Its size grows with the devices listed, never with their pairs.
fn write_summary(out: &mut String, matrix: &Matrix, width: Option<usize>) {
    let Some(omitted) = matrix.omitted() else {
        return;
    };
    let line = format!(
        "matrix left out: {}. If this is a capture, check that it came from one node; `gpudoctor topo --format json` lists every device and these counts.",
        omitted.reason
    );
    wrap::push(out, &line, width, 2);
    let summary = matrix.summary();
    out.push_str("\nDevice pairs by class:\n\n");
    for (name, counts) in [
        ("gpu-gpu", &summary.pairs.gpu_gpu),
        ("gpu-nic", &summary.pairs.gpu_nic),
        ("nic-nic", &summary.pairs.nic_nic),
    ] {
        let counts: Vec<String> = counts.iter().map(|(l, n)| format!("{l} {n}")).collect();
        let counts = if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        };
        wrap::push(out, &format!("  {name}: {counts}"), width, 4);
    }
    out.push_str("\nDevices per NUMA node:\n\n");
    for n in &summary.numa {
        let node = n.node.map_or("unknown".to_string(), |n| format!("node{n}"));
        let line = format!("  {node}: {} gpus, {} rdma nics", n.gpus, n.nics);
        wrap::push(out, &line, width, 4);
    }
    if !matrix.nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for nic in &matrix.nics {
            let line = format!("  {}: {} ({})", nic.label, nic.name, nic.bdf);
            wrap::push(out, &line, width, 4);
        }
    }
    out.push('\n');
}

/// The grid's lines, as one block when it fits `width` (or there is none), else as blocks of
/// columns that each fit, every block led by the row-label column. A single column wider than
/// the width still gets a block of its own (a cell is never cut).
fn blocks(header: &[String], cells: &[Vec<String>], width: Option<usize>) -> Vec<Vec<String>> {
    let whole = crate::text::grid::lines(header, cells);
    let Some(width) = width else {
        return vec![whole];
    };
    let fits = |lines: &[String]| lines.iter().all(|l| wrap::width_of(l) <= width);
    if fits(&whole) || header.len() < 3 {
        return vec![whole];
    }
    let pick = |columns: &[usize]| -> Vec<String> {
        let header: Vec<String> = columns.iter().map(|c| header[*c].clone()).collect();
        let rows: Vec<Vec<String>> = cells
            .iter()
            .map(|row| {
                columns
                    .iter()
                    .map(|c| row.get(*c).cloned().unwrap_or_default())
                    .collect()
            })
            .collect();
        crate::text::grid::lines(&header, &rows)
    };
    let mut out = Vec::new();
    let mut columns = vec![0];
    let mut last_fit: Option<Vec<String>> = None;
    for c in 1..header.len() {
        columns.push(c);
        let lines = pick(&columns);
        if fits(&lines) || columns.len() == 2 {
            last_fit = Some(lines);
            continue;
        }
        // Column c starts the next block.
        if let Some(done) = last_fit.take() {
            out.push(done);
        }
        columns = vec![0, c];
        last_fit = Some(pick(&columns));
    }
    if let Some(done) = last_fit {
        out.push(done);
    }
    out
}

/// The matrix with every name that came from sysfs made terminal-safe, before widths are
/// measured (an escape is wider than the character it stands for).
fn sanitized(matrix: &Matrix) -> Matrix {
    let clean = |s: &mut String| *s = crate::text::sanitize::text(s).into_owned();
    let mut matrix = matrix.clone();
    for entry in matrix.gpus.iter_mut().chain(matrix.nics.iter_mut()) {
        clean(&mut entry.label);
        clean(&mut entry.name);
        clean(&mut entry.bdf);
        if let Some(cpus) = &mut entry.cpu_affinity {
            clean(cpus);
        }
    }
    clean(&mut matrix.nvlink);
    matrix
}

fn write_numa(out: &mut String, topo: &Topology, width: Option<usize>) {
    if topo.numa.nodes.is_empty() {
        out.push_str("NUMA: no node information under sys/devices/system/node\n");
        return;
    }
    let nodes: Vec<String> = topo
        .numa
        .nodes
        .iter()
        .map(|n| {
            let cpus = if n.cpus.is_empty() {
                "no cpus".to_string()
            } else {
                format!("cpus {}", n.cpus)
            };
            let distances = if n.distances.is_empty() {
                String::new()
            } else {
                format!(
                    ", distances {}",
                    n.distances
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            };
            format!("node{} ({cpus}{distances})", n.id)
        })
        .collect();
    wrap::push(out, &format!("NUMA: {}", nodes.join("; ")), width, 6);
}

fn write_problems(out: &mut String, topo: &Topology, width: Option<usize>) {
    let n = topo.problems.len() + topo.numa.problems.len();
    if n > 0 {
        let line = format!(
            "{n} sysfs entr{} could not be read or resolved (listed under `problems` in --format json)",
            if n == 1 { "y" } else { "ies" }
        );
        wrap::push(out, &line, width, 2);
    }
}

/// A pasted `nvidia-smi topo -m` (`topo --matrix FILE`) as it was read: its devices and cells
/// in nvidia-smi's layout, NICs with their RDMA device, under a line naming the file, to set
/// beside the node's own matrix. Cells the paste lacked are `?`.
pub fn render_pasted(m: &crate::facts::smi_topo::SmiMatrix, name: &str) -> String {
    let clean = |t: &str| crate::text::sanitize::text(t).into_owned();
    let mut header: Vec<String> = vec![String::new()];
    header.extend(m.devices.iter().map(|d| clean(&d.name)));
    header.push("CPU Affinity".into());
    header.push("NUMA Affinity".into());
    let rows: Vec<Vec<String>> = (0..m.devices.len())
        .map(|r| {
            let d = &m.devices[r];
            let mut row = vec![clean(&d.name)];
            row.extend(
                (0..m.devices.len())
                    .map(|c| m.link(r, c).map_or("?".to_string(), |l| l.to_string())),
            );
            row.push(d.cpu_affinity.as_deref().map_or(String::new(), clean));
            row.push(d.numa.as_deref().map_or(String::new(), clean));
            row
        })
        .collect();
    let mut out = format!("read from {}:\n", clean(name));
    out.push_str(&crate::text::grid::text(&header, &rows));
    let legend: Vec<String> = m
        .devices
        .iter()
        .filter(|d| d.rdma.as_ref().is_some_and(|r| *r != d.name))
        .map(|d| {
            format!(
                "  {}: {}",
                clean(&d.name),
                clean(d.rdma.as_deref().unwrap_or_default())
            )
        })
        .collect();
    if !legend.is_empty() {
        out.push_str("\nNIC Legend:\n");
        out.push_str(&legend.join("\n"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::topology::{Aer, split_device_path};

    /// A function at `path` (`sys/devices/pci…/<chain>`), on NUMA node 0.
    fn device(path: &str, kind: DeviceKind) -> PciDevice {
        let (host_bridge, chain) = split_device_path(path).unwrap();
        let bdf = chain.last().unwrap().clone();
        PciDevice {
            address: crate::facts::pci::parse_bdf(&bdf).ok(),
            bdf,
            path: path.into(),
            host_bridge,
            chain,
            vendor: None,
            device: None,
            class: None,
            kind,
            driver: None,
            numa_node_file: Some(0),
            numa: Some(0),
            numa_source: NumaSource::NumaNode,
            cpulist_node: None,
            local_cpus: None,
            link: Default::default(),
            aer: Aer::default(),
            rdma_devices: vec![],
            netdevs: vec![],
        }
    }

    #[test]
    fn names_from_sysfs_are_shown_escaped_and_columns_stay_aligned() {
        let topo = Topology {
            devices: vec![
                device(
                    "sys/devices/pci0000:15/0000:15:01.0/0000:18:00.0",
                    DeviceKind::Gpu,
                ),
                device(
                    "sys/devices/pci0000:15/0000:15:01.0/0000:19:00.0",
                    DeviceKind::RdmaNic,
                ),
            ],
            ..Topology::default()
        };
        let mut matrix = Matrix::build(&topo, None);
        assert_eq!(matrix.cell(0, 1), Link::Pix);
        // Names as a hostile tree could spell them (the cells come from the places, not these).
        for e in matrix.gpus.iter_mut().chain(matrix.nics.iter_mut()) {
            e.cpu_affinity = Some("0-7\x1b[2J".into());
        }
        matrix.gpus[0].bdf = "0000:18:00.0\x1b]0;t\x07".into();
        matrix.nics[0].name = "mlx5_\u{9b}0\u{202e}".into();
        matrix.nics[0].bdf = "0000:19:00.0\r".into();
        for color in [false, true] {
            let text = render_table(&Topology::default(), &matrix, color);
            assert!(text.contains("PIX"), "{text}");
            for raw in ['\x07', '\r', '\u{9b}', '\u{202e}'] {
                assert!(!text.contains(raw), "{raw:?} in {text:?}");
            }
            // The only ESC bytes left are gpudoctor's own colour codes.
            assert_eq!(text.contains('\x1b'), color, "{}", text.escape_debug());
            assert!(text.contains("0000:18:00.0\\x1b]0;t\\x07"), "{text}");
            assert!(
                text.contains("NIC0: mlx5_\\u{9b}0\\u{202e} (0000:19:00.0\\r)"),
                "{text}"
            );
            assert!(text.contains("0-7\\x1b[2J"), "{text}");
        }
    }
}
