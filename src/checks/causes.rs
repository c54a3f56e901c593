//! Cause first: which findings follow from which. A check that warns or fails here declares the
//! findings it explains; the engine marks those `explained_by` it (the root of a chain: nouveau
//! explains the missing `nvidia` module, which explains NVML's init failure), renderers show them
//! under their cause, and `first_failure` names the cause, not its first symptom. This module
//! only declares; it reads no facts and judges nothing (the engine applies it).
//!
//! Each row states a dependency documented by its source:
//! - no NVIDIA function on PCI: nothing for the driver to bind, so every other driver check
//!   fails by consequence (the `nvidia` module refuses to load without a device: "NVRM: No
//!   NVIDIA devices probed", NVIDIA driver README "Common Problems").
//! - nouveau bound to the GPUs: the `nvidia` module cannot bind them, so its device nodes and NVML
//!   are missing (NVIDIA driver README, "Interaction with the Nouveau Driver").
//! - no `nvidia` module: no `nvidia_uvm` (it depends on `nvidia`), no /dev/nvidia*, NVML returns
//!   NVML_ERROR_DRIVER_NOT_LOADED (NVML API reference, nvmlInit_v2).
//! - user-space NVML newer than the loaded module: nvmlInit returns
//!   NVML_ERROR_LIB_RM_VERSION_MISMATCH (NVML API reference).
//! - the fabric manager installed but not running on an NVSwitch system: it trains the
//!   NVSwitch↔GPU links and registers each GPU with the fabric, so every GPU's fabric state
//!   stays NOT_STARTED or IN_PROGRESS until it runs (Fabric Manager User Guide; nvml.h
//!   `nvmlGpuFabricInfo_v3_t`; reference/gpu-health.md §7).
//! - an XID in the kernel log is the driver's own report of a fault, so findings on the same GPU
//!   that read the fault from elsewhere follow from it: XID 48 (double-bit ECC error) is the
//!   uncorrected ECC count NVML holds and the row remap it schedules (NVIDIA "GPU Memory Error
//!   Management", A100 and later: an uncorrectable error marks its row for remapping at the next
//!   reset; reference/gpu-health.md §4), and XID 79 (the GPU fell off the bus) is the GPU NVML
//!   lost (NVIDIA XID catalogue, XID 79). Only for a finding wholly about GPUs whose XID is live
//!   (nothing since brought the GPU back, checks/history.rs): a DBE on GPU 2 explains nothing
//!   about GPU 5.
//! - a GPU NVML lost while it stays on PCI (fallen off the bus) is still named by the CDI spec
//!   `nvidia-ctk cdi generate` wrote while NVML listed it, and still advertised by a device plugin
//!   that has not re-registered: the spec is right about the node's hardware, and regenerating
//!   it would hide the loss (nvidia-container-toolkit `pkg/nvcdi`: the spec's devices are those
//!   NVML enumerates at generation time). The CDI and allocatable checks say when their unknown
//!   names are exactly the lost GPUs.
//! - no `nvidia_uvm` module: nothing creates `/dev/nvidia-uvm` (nvidia-modprobe
//!   `modprobe-utils/nvidia-modprobe-utils.c`: `nvidia_uvm_modprobe` loads the module, then
//!   `nvidia_uvm_mknod` makes the node from its major), so a missing UVM node is the module's
//!   absence; the device-node check says when the UVM nodes are all it misses.
//! - a ConnectX function that `mlx5_core` failed to probe has no driver, no netdev and no RDMA
//!   device: `mlx5_ib` binds the `mlx5_core.rdma` auxiliary device a probed function creates
//!   (Linux drivers/net/ethernet/mellanox/mlx5/core/dev.c), so loading it changes nothing. The
//!   RDMA device check says when its functions without RDMA device are those the kernel log
//!   shows failing to probe.
//! - an NCCL run that fell back to sockets, staged through host memory (no GPUDirect RDMA),
//!   used shared memory instead of P2P/NVLink, or collapsed after its peak: the bus bandwidth
//!   below the floor is that, measured (NCCL environment variables documentation: NCCL_NET,
//!   NCCL_NET_GDR_LEVEL, NCCL_P2P_DISABLE).

use crate::report::Layer;

/// What a cause explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Explains {
    /// These check codes.
    Codes(&'static [&'static str]),
    /// Every other check of this layer.
    RestOfLayer(Layer),
}

/// When a cause that warned or failed explains a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// When the finding names GPUs (its `gpus`) and every one of them has one of these XIDs live
    /// (the cause's `xid_events` figures, `state="live"`).
    SameGpuXid(&'static [u32]),
    /// When the finding's own check says it follows from this cause ([`Outcome::follows_from`]):
    /// only that check reads the facts that tie the two (which GPU a CDI name is, which NIC
    /// has no RDMA device).
    ///
    /// [`Outcome::follows_from`]: crate::checks::Outcome::follows_from
    Declared,
}

/// One declared cause: when `cause` warns or fails, the findings it `explains` follow from it
/// (`when` says whether a given finding does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause {
    pub cause: &'static str,
    pub explains: Explains,
    pub when: When,
}

/// XID 48, a double-bit ECC error (NVIDIA XID catalogue).
const XID_DBE: u32 = 48;
/// XID 79, the GPU fell off the bus (NVIDIA XID catalogue).
const XID_FALLEN_OFF_BUS: u32 = 79;

/// What the `nvidia` module's absence takes with it.
const WITHOUT_NVIDIA_MODULE: &[&str] = &[
    "driver.nvidia_module",
    "driver.nvidia_uvm_module",
    "driver.device_nodes",
    "driver.nvml_init",
    "driver.gpu_count",
    "driver.driver_version_match",
    "driver.persistence_mode",
];

/// Every declared cause, most fundamental first: when several causes explain one finding, the
/// first row whose cause warned or failed wins.
pub const CAUSES: &[Cause] = &[
    Cause {
        cause: "driver.gpu_on_pci",
        explains: Explains::RestOfLayer(Layer::Driver),
        when: When::Always,
    },
    Cause {
        cause: "driver.nouveau_absent",
        explains: Explains::Codes(WITHOUT_NVIDIA_MODULE),
        when: When::Always,
    },
    Cause {
        cause: "driver.nvidia_module",
        explains: Explains::Codes(WITHOUT_NVIDIA_MODULE),
        when: When::Always,
    },
    Cause {
        cause: "driver.driver_version_match",
        explains: Explains::Codes(&["driver.nvml_init"]),
        when: When::Always,
    },
    Cause {
        cause: "driver.xid_events",
        explains: Explains::Codes(&["driver.ecc_errors", "driver.row_remap"]),
        when: When::SameGpuXid(&[XID_DBE]),
    },
    Cause {
        cause: "driver.xid_events",
        explains: Explains::Codes(&["driver.gpu_count"]),
        when: When::SameGpuXid(&[XID_FALLEN_OFF_BUS]),
    },
    // The rows below are `Declared`: the consequence's check decides, since only it knows
    // whether its finding is wholly the cause's (issue 46, "Why" 3).
    Cause {
        cause: "driver.gpu_count",
        explains: Explains::Codes(&["toolkit.cdi_specs", "device_plugin.allocatable"]),
        when: When::Declared,
    },
    Cause {
        cause: "driver.nvidia_uvm_module",
        explains: Explains::Codes(&["driver.device_nodes"]),
        when: When::Declared,
    },
    Cause {
        cause: "rdma.nic_events",
        explains: Explains::Codes(&["rdma.devices"]),
        when: When::Declared,
    },
    Cause {
        cause: "nvlink.fabric_manager",
        explains: Explains::Codes(&["nvlink.fabric_state"]),
        when: When::Always,
    },
    Cause {
        cause: "nccl.socket_fallback",
        explains: Explains::Codes(&["nccl.bus_bandwidth"]),
        when: When::Always,
    },
    Cause {
        cause: "nccl.gpudirect_rdma",
        explains: Explains::Codes(&["nccl.bus_bandwidth"]),
        when: When::Always,
    },
    Cause {
        cause: "nccl.p2p_transport",
        explains: Explains::Codes(&["nccl.bus_bandwidth"]),
        when: When::Always,
    },
    Cause {
        cause: "nccl.bandwidth_collapse",
        explains: Explains::Codes(&["nccl.bus_bandwidth"]),
        when: When::Always,
    },
];

impl When {
    /// The condition in words, for `explain` (empty when there is none).
    fn said(self) -> String {
        match self {
            When::Always => String::new(),
            When::Declared => " (where the finding names it as its cause)".to_string(),
            When::SameGpuXid(xids) => {
                let list: Vec<String> = xids.iter().map(|x| format!("XID {x}")).collect();
                format!(" (on GPUs that logged {})", list.join(" or "))
            }
        }
    }
}

impl Cause {
    /// Does this cause explain the finding `code` of `layer`?
    pub fn explains(&self, code: &str, layer: Layer) -> bool {
        if code == self.cause {
            return false;
        }
        match self.explains {
            Explains::Codes(codes) => codes.contains(&code),
            Explains::RestOfLayer(l) => l == layer,
        }
    }
}

/// For `gpudoctor explain` and docs/checks.md: what a finding of `code` (of `layer`) explains
/// and what can explain it, in words; `None` when it takes part in no declared cause.
pub fn describe(code: &str, layer: Layer) -> Option<String> {
    let mut parts = Vec::new();
    for cause in CAUSES.iter().filter(|c| c.cause == code) {
        parts.push(match cause.explains {
            Explains::Codes(codes) => {
                let others: Vec<&str> = codes.iter().copied().filter(|c| *c != code).collect();
                format!(
                    "explains `{}` when it fails{}",
                    others.join("`, `"),
                    cause.when.said()
                )
            }
            Explains::RestOfLayer(l) => {
                format!("explains every other `{l}` finding when it fails")
            }
        });
    }
    let by: Vec<String> = CAUSES
        .iter()
        .filter(|c| c.explains(code, layer))
        .map(|c| format!("`{}`{}", c.cause, c.when.said()))
        .collect();
    if !by.is_empty() {
        parts.push(format!("explained by {} when that fails", by.join(", ")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_named_is_a_registered_check() {
        let registry = crate::checks::registry();
        let known = |code: &str| registry.iter().any(|d| d.code == code);
        for cause in CAUSES {
            assert!(known(cause.cause), "{}", cause.cause);
            if let Explains::Codes(codes) = cause.explains {
                for code in codes {
                    assert!(known(code), "{} explains unknown {code}", cause.cause);
                }
            }
        }
    }

    #[test]
    fn describe_names_both_directions() {
        let text = describe("driver.nvidia_module", Layer::Driver).unwrap();
        assert!(
            text.contains("explains `driver.nvidia_uvm_module`"),
            "{text}"
        );
        assert!(!text.contains("explains `driver.nvidia_module`"), "{text}");
        assert!(
            text.contains("explained by `driver.gpu_on_pci`, `driver.nouveau_absent`"),
            "{text}"
        );
        assert_eq!(describe("toolkit.installed", Layer::Toolkit), None);
    }

    #[test]
    fn a_check_names_only_a_declared_cause() {
        use crate::checks::Outcome;
        for code in [
            "driver.gpu_count",
            "driver.nvidia_uvm_module",
            "rdma.nic_events",
        ] {
            let named = Outcome::fail("x").follows_from(code).ties.unwrap();
            assert_eq!(named.follows_from.map(|c| c.cause), Some(code));
        }
        // A cause declared only with a condition of its own, or none at all, is not taken.
        for code in ["driver.nouveau_absent", "no.such"] {
            let named = Outcome::fail("x").follows_from(code).ties.unwrap();
            assert!(named.follows_from.is_none(), "{code}");
        }
    }

    #[test]
    fn a_cause_never_explains_itself() {
        let c = &CAUSES[0];
        assert!(!c.explains("driver.gpu_on_pci", Layer::Driver));
        assert!(c.explains("driver.nvml_init", Layer::Driver));
        assert!(!c.explains("toolkit.installed", Layer::Toolkit));
    }
}
