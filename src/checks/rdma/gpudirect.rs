//! rdma.gpudirect: can the NICs DMA straight to GPU memory? nvidia_peermem loaded, or dma-buf
//! on a kernel and driver that have it, judged by the files NCCL itself probes (sysfs.md §10).

use super::*;

/// Files whose existence NCCL itself takes as "GPUDirect RDMA available"
/// (`NVIDIA/nccl` `src/transport/net_ib/gdr.cc`, sysfs.md §10).
const PEERMEM_FILES: &[&str] = &[
    "sys/kernel/mm/memory_peers/nv_mem/version",
    "sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "sys/module/nvidia_peermem/version",
];

/// `5.15.0-105-generic` → (5, 15).
pub(super) fn kernel_major_minor(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A GPUDirect loopback below this share of the port's rate fails (AzNHC's lowest GDR floor
/// relative to its port: 360/400 and 180/200): `rdma.gpudirect_bandwidth` (checks/active) and
/// `rdma.perftest_log` hold perftest's figures to it.
pub const RATE_FAIL: f64 = 0.90;

/// How the node's HCAs reach GPU memory: the decision `rdma.gpudirect` judges and the
/// GPUDirect loopbacks follow (`checks/active/plan.rs`: `--use_cuda_dmabuf` on a DMA-BUF node,
/// as perftest's README says to register GPU memory through dma-buf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryPath {
    /// nvidia_peermem / nv_peer_mem, or NCCL's peer-memory files.
    PeerMemory,
    /// No peer-memory client, but Linux ≥ 5.12 and the open kernel module ≥ 515.
    DmaBuf,
    /// Neither.
    None,
}

/// What the decision read: the modules and files of the peer-memory client, the kernel release
/// and the driver (sysfs.md §10).
pub struct PathFacts {
    pub loaded: Vec<&'static str>,
    pub peer_files: Vec<&'static str>,
    pub kernel: Option<String>,
    pub kernel_ok: bool,
    pub open_module: bool,
    pub driver_version: Option<String>,
    pub driver_ok: bool,
    /// Files of the dma-buf decision that could not be read: (path, why).
    pub unread: Vec<(&'static str, String)>,
}

impl PathFacts {
    /// `None` when the module list cannot be read (the check says why).
    pub fn read(ctx: &Context<'_>) -> Option<PathFacts> {
        let modules = ctx.modules().as_ref().ok()?;
        let loaded: Vec<&'static str> = ["nvidia_peermem", "nv_peer_mem"]
            .into_iter()
            .filter(|m| modules.get(m).is_some())
            .collect();
        let peer_files: Vec<&'static str> = PEERMEM_FILES
            .iter()
            .copied()
            .filter(|f| ctx.source().exists(f))
            .collect();
        let mut unread = Vec::new();
        if !loaded.is_empty() || !peer_files.is_empty() {
            // Peer memory decides; the dma-buf files are not read (nor needed).
            return Some(PathFacts {
                loaded,
                peer_files,
                kernel: None,
                kernel_ok: false,
                open_module: false,
                driver_version: None,
                driver_ok: false,
                unread,
            });
        }
        // dma-buf: Linux ≥ 5.12 plus the open kernel module ≥ 515 (sysfs.md §10).
        let kernel = match ctx.source().read_to_string("proc/sys/kernel/osrelease") {
            Ok(k) => Some(k),
            Err(e) => {
                unread.push(("proc/sys/kernel/osrelease", e.to_string()));
                None
            }
        };
        let kernel_ok = kernel
            .as_deref()
            .and_then(kernel_major_minor)
            .is_some_and(|v| v >= (5, 12));
        let open_module = match ctx.source().read_to_string(nvidia::PROC_DRIVER_VERSION) {
            Ok(t) => t.contains("Open Kernel Module"),
            Err(e) => {
                unread.push((nvidia::PROC_DRIVER_VERSION, e.to_string()));
                false
            }
        };
        let driver_version: Option<String> = ctx
            .module_version()
            .as_ref()
            .ok()
            .and_then(|v| v.as_ref())
            .map(|(v, _)| v.clone());
        let driver_ok = driver_version
            .as_deref()
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
            .is_some_and(|major| major >= 515);
        Some(PathFacts {
            loaded,
            peer_files,
            kernel,
            kernel_ok,
            open_module,
            driver_version,
            driver_ok,
            unread,
        })
    }

    pub fn path(&self) -> MemoryPath {
        if !self.loaded.is_empty() || !self.peer_files.is_empty() {
            MemoryPath::PeerMemory
        } else if self.kernel_ok && self.open_module && self.driver_ok {
            MemoryPath::DmaBuf
        } else {
            MemoryPath::None
        }
    }
}

/// The node's path into GPU memory; `None` when the module list cannot be read.
pub fn memory_path(ctx: &Context<'_>) -> Option<MemoryPath> {
    PathFacts::read(ctx).map(|f| f.path())
}

pub(super) fn gpudirect(ctx: &Context<'_>) -> Outcome {
    let facts = match rdma_devices(ctx) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let gpus = ctx
        .pci()
        .as_ref()
        .map(|p| p.nvidia_gpus().count())
        .unwrap_or(0);
    if gpus == 0 {
        return Outcome::skip("no gpus on this node");
    }
    let modules = match ctx.modules() {
        Ok(m) => m,
        Err(err) => return Outcome::unreadable(err),
    };
    if modules.get("nvidia").is_none() {
        // peermem needs the nvidia module; the driver layer already reports it missing.
        return Outcome::skip("nvidia driver not loaded (see driver.nvidia_module)");
    }
    let Some(path) = PathFacts::read(ctx) else {
        return Outcome::skip("the module list cannot be read");
    };
    let PathFacts {
        loaded,
        peer_files,
        kernel,
        open_module,
        driver_version,
        ..
    } = &path;
    if path.path() == MemoryPath::PeerMemory {
        let via = loaded
            .first()
            .copied()
            .unwrap_or("the nv_mem peer memory client");
        return Outcome::pass(format!(
            "gpudirect rdma via {via} ({gpus} gpu(s), {} rdma device(s))",
            facts.devices.len()
        ))
        .evidence(Evidence::new(
            modules.from.as_str(),
            format!("{} loaded", loaded.join(", ")),
        ))
        .evidence_all(peer_files.iter().map(|f| Evidence::new(*f, "present")));
    }
    if path.path() != MemoryPath::DmaBuf && !path.unread.is_empty() {
        // Missing is not absent: without these files the dma-buf path cannot be told.
        let (file, why) = &path.unread[0];
        return Outcome::error(format!(
            "no peer-memory client, and the dma-buf path cannot be judged: {file}: {why}"
        ))
        .evidence_all(
            path.unread
                .iter()
                .map(|(f, why)| Evidence::new(*f, why.as_str())),
        );
    }
    let open_module = *open_module;
    let driver_version = driver_version.as_deref();
    let mut evidence = vec![
        Evidence::new(modules.from.as_str(), "no nvidia_peermem or nv_peer_mem")
            .expected("nvidia_peermem loaded, or the dma-buf path"),
        Evidence::new(
            "proc/sys/kernel/osrelease",
            kernel.as_deref().unwrap_or("unknown").trim(),
        )
        .expected("≥ 5.12 for dma-buf"),
        Evidence::new(
            nvidia::PROC_DRIVER_VERSION,
            match (open_module, driver_version) {
                (true, Some(v)) => format!("open kernel module {v}"),
                (true, None) => "open kernel module".to_string(),
                (false, _) => "proprietary kernel module (or unknown)".to_string(),
            },
        )
        .expected("open kernel module ≥ 515 for dma-buf"),
    ];
    let hint = "`modprobe nvidia_peermem` and make it persistent (/etc/modules-load.d; GPU Operator: driver.rdma.enabled=true), or move to the open kernel module ≥ 515 on linux ≥ 5.12 for dma-buf; confirm NCCL logs `GDRDMA` on its NET/IB lines";
    if path.path() == MemoryPath::DmaBuf {
        // Issue 6: dma-buf is a GPUDirect RDMA path in its own right, not a degraded one. What
        // it needs from the workload (NCCL ≥ 2.13, CUDA ≥ 11.7) is stated, not judged: the
        // image's versions are not on the node.
        evidence.push(Evidence::new(
            "dma-buf",
            "gpudirect rdma needs nccl ≥ 2.13 and cuda ≥ 11.7 in the workload image",
        ));
        return Outcome::pass(format!(
            "gpudirect rdma via dma-buf: linux {} with the open nvidia kernel module {} ({gpus} gpu(s), {} rdma device(s)); nvidia_peermem not loaded; needs nccl ≥ 2.13 and cuda ≥ 11.7 in the workload",
            kernel.as_deref().unwrap_or("unknown").trim(),
            driver_version.unwrap_or("unknown"),
            facts.devices.len()
        ))
        .evidence_all(evidence);
    }
    Outcome::fail(format!(
        "no gpudirect rdma path: nvidia_peermem not loaded and no dma-buf support ({gpus} gpu(s), {} rdma device(s)); transfers bounce through host memory",
        facts.devices.len()
    ))
    .evidence_all(evidence)
    .hint(hint)
    .action(Action::ReloadDriver)
}
