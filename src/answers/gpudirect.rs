//! What the GPUDirect RDMA loopback probe answers (`source/gpudirect.rs` runs it; replay reads
//! `.gpudoctor/gpudirect/`): which HCA and GPU each loopback paired, what only the runner knows
//! about a run (exit, timeout, signals), perftest's parsed output, and the constants a check
//! quotes (the binary, how to install it, the message size).

use serde::{Deserialize, Serialize};

use super::perftest::PerftestOutput;
use crate::process::{Killed, RunExit};

/// The perftest binary the loopback runs.
pub const BINARY: &str = "ib_write_bw";
/// The option that registers the GPU buffer through dma-buf instead of peer memory; perftest
/// takes it only after `--use_cuda` (perftest_parameters.c: "CUDA DMA-BUF cannot be used
/// without CUDA" otherwise, linux-rdma/perftest#336).
pub const DMABUF_OPTION: &str = "--use_cuda_dmabuf";
/// Message size: AzNHC's (8 MiB), large enough for the plateau of a 400 Gb/s port.
pub const MESSAGE_BYTES: u64 = 8 << 20;

/// How to get it, for the skip message.
pub const INSTALL_HINT: &str = "install perftest built with CUDA: the distributions' packages (`apt`/`dnf install perftest`) are built without it, so build it from source (`git clone https://github.com/linux-rdma/perftest && cd perftest && ./autogen.sh && ./configure CUDA_H_PATH=/usr/local/cuda/include/cuda.h && make`), version 4.4-0.29 or later for `--use_cuda=<id>`, and pass --perftest-dir DIR";
/// Why nothing ran.
pub const NOT_REQUESTED: &str =
    "gpudirect rdma loopback not requested: pass --bandwidth to run ib_write_bw through each hca";

/// One loopback to run: the RDMA device and port, and the GPU whose memory it uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GdrTarget {
    pub device: String,
    pub port: u32,
    /// Bus id of the GPU nearest to the HCA.
    pub gpu: Option<String>,
    /// Its NVML UUID (`CUDA_VISIBLE_DEVICES` accepts it), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    /// Its CUDA ordinal in PCI bus order, used when the UUID is not known.
    #[serde(default)]
    pub gpu_ordinal: Option<u32>,
    /// The PCIe path class between them (`PIX`, `PXB`, `NODE`, `SYS`).
    #[serde(default)]
    pub path: Option<String>,
    /// Register the GPU buffer through dma-buf (`--use_cuda_dmabuf`): the node has no
    /// peer-memory client but the dma-buf path (`rdma.gpudirect` decides, checks/rdma/gpudirect.rs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dmabuf: bool,
}

/// What only the runner knows, kept as `<device>.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GdrMeta {
    pub device: String,
    pub port: u32,
    #[serde(default)]
    pub gpu: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub exit: Option<RunExit>,
    #[serde(default)]
    pub server_exit: Option<RunExit>,
    /// The server never said it was listening.
    #[serde(default)]
    pub server_not_ready: bool,
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default)]
    pub timeout_s: Option<u64>,
    #[serde(default)]
    pub elapsed_ms: Option<u64>,
    #[serde(default)]
    pub message_bytes: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub killed: Vec<Killed>,
    /// The directory put first on perftest's `LD_LIBRARY_PATH`: where the host's driver keeps
    /// libcuda (the CUDA probe's choice, source/host_lib.rs), for perftest to load it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_path: Option<String>,
}

/// One loopback's result.
#[derive(Debug, Clone, PartialEq)]
pub struct GdrRun {
    pub device: String,
    pub port: u32,
    pub meta: Option<GdrMeta>,
    pub output: PerftestOutput,
    /// Where the output came from, for evidence.
    pub origin: String,
    /// Client and server output verbatim (capped), for `record`.
    pub transcript: Option<(String, String)>,
}

/// The probe's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum GdrProbe {
    NotRequested {
        why: String,
    },
    /// No `ib_write_bw`: where it was looked for.
    BinaryMissing {
        searched: Vec<String>,
        /// `--perftest-dir` was given: asked for explicitly.
        asked: bool,
    },
    Unavailable {
        origin: String,
        message: String,
    },
    /// No RDMA device with an active port (nothing to run).
    NoTargets,
    Runs(Vec<GdrRun>),
}
