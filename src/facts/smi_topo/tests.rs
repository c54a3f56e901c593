use super::*;

const SGLANG: &str =
    include_str!("../../../tests/data/topo-m/h100-8gpu-8nic-nv18-spaces-sglang-30401.txt");
const DEEPEP: &str =
    include_str!("../../../tests/data/topo-m/h100-pcie-8gpu-12nic-no-nvlink-tabs-deepep-397.txt");
const DELLA_PLI: &str = include_str!(
    "../../../tests/data/topo-m/h100-8gpu-6nic-nv18-gpus-without-pix-nic-della-pli.txt"
);
const A100: &str = include_str!(
    "../../../tests/data/topo-m/a100-8gpu-10nic-nv12-pxb-no-gpu-numa-id-mpi-gpu-compress.txt"
);
const OLD_2GPU: &str =
    include_str!("../../../tests/data/topo-m/old-format-mlx5-cols-2gpu-slurm-slice-jdh4-della.txt");
const OLD_V100: &str =
    include_str!("../../../tests/data/topo-m/old-format-mlx5-cols-v100-4gpu-nv3-jdh4-della.txt");

fn names(m: &SmiMatrix) -> Vec<String> {
    m.devices.iter().map(Device::shown).collect()
}

#[test]
fn spaces_with_legend_and_every_affinity_column() {
    let m = parse(SGLANG).unwrap();
    assert_eq!(m.gpus().count(), 8);
    assert_eq!(m.nics().count(), 8);
    assert_eq!(names(&m)[8], "NIC0 (mlx5_0)");
    assert_eq!(m.link(0, 1), Some(Link::Nv(18)));
    assert_eq!(m.link(3, 11), Some(Link::Pix));
    assert_eq!(m.link(3, 12), Some(Link::Sys));
    assert_eq!(m.link(15, 15), Some(Link::X));
    assert_eq!(m.devices[4].cpu_affinity.as_deref(), Some("48-95,144-191"));
    assert_eq!(m.devices[4].numa.as_deref(), Some("1"));
    assert_eq!(m.devices[0].line, Some(2));
}

#[test]
fn tabs_without_nvlink_and_empty_cells() {
    let m = parse(DEEPEP).unwrap();
    assert_eq!((m.gpus().count(), m.nics().count()), (8, 12));
    assert_eq!(names(&m)[19], "NIC11 (mlx5_11)");
    assert_eq!(m.link(0, 4), Some(Link::Sys));
    assert_eq!(m.link(0, 8), Some(Link::Pix));
    assert_eq!(m.devices[0].cpu_affinity.as_deref(), Some("0,2,4,6,8,10"));
    assert!(
        m.links
            .iter()
            .flatten()
            .all(|l| !matches!(l, Some(Link::Nv(_))))
    );
}

#[test]
fn empty_cpu_affinity_keeps_the_numa_node() {
    let m = parse(DELLA_PLI).unwrap();
    assert_eq!((m.gpus().count(), m.nics().count()), (8, 6));
    assert_eq!(m.devices[0].cpu_affinity, None);
    assert_eq!(m.devices[0].numa.as_deref(), Some("0"));
    assert_eq!(m.devices[5].numa.as_deref(), Some("1"));
    assert_eq!(m.link(1, 8), Some(Link::Node));
}

#[test]
fn no_gpu_numa_id_column_and_pxb() {
    let m = parse(A100).unwrap();
    assert_eq!((m.gpus().count(), m.nics().count()), (8, 10));
    assert_eq!(m.link(0, 1), Some(Link::Nv(12)));
    assert!(
        m.gpus()
            .all(|g| m.nics().any(|n| m.link(g, n) == Some(Link::Pxb)))
    );
}

#[test]
fn old_format_names_nic_columns_by_rdma_device() {
    let m = parse(OLD_2GPU).unwrap();
    assert_eq!(names(&m), ["GPU0", "GPU1", "mlx5_0", "mlx5_1"]);
    assert_eq!(m.devices[2].rdma.as_deref(), Some("mlx5_0"));
    assert_eq!(m.link(0, 1), Some(Link::Sys));
    let m = parse(OLD_V100).unwrap();
    assert_eq!((m.gpus().count(), m.nics().count()), (4, 4));
    assert_eq!(m.link(0, 1), Some(Link::Nv(3)));
    assert_eq!(m.devices[2].numa.as_deref(), Some("8"));
}

#[test]
fn a_paste_cut_above_the_header_or_below_the_rows() {
    // Head cut: the header and the first two rows gone; columns from the rows left.
    let cut_head: String = SGLANG.lines().skip(3).collect::<Vec<_>>().join("\n");
    let m = parse(&cut_head).unwrap();
    assert_eq!(m.devices.len(), 16);
    assert_eq!(m.devices[0].name, "GPU0");
    assert_eq!(m.devices[0].line, None);
    assert_eq!(m.devices[8].shown(), "NIC0 (mlx5_0)");
    assert_eq!(m.link(0, 8), Some(Link::Pix));
    // Tail cut: only the header and three rows.
    let cut_tail: String = SGLANG.lines().take(4).collect::<Vec<_>>().join("\n");
    let m = parse(&cut_tail).unwrap();
    assert_eq!(m.devices.len(), 16);
    assert_eq!(m.link(2, 0), Some(Link::Nv(18)));
    assert_eq!(m.link(5, 6), None);
}

#[test]
fn not_a_matrix() {
    assert!(parse("").is_err());
    assert!(parse("GPU0 GPU1\nhello\n").is_err());
    assert!(parse("\tGPU0\tGPU1\nGPU0\tfoo\tbar\n").is_err());
}
