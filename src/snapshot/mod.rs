//! A node's facts as plain text, for comparing nodes (`gpudoctor diff`) and for keeping with a
//! saved report (`check --with-facts`): what each layer's facts say — versions, inventory by PCI
//! address, links, NUMA placement, kernel command line and modules, NVLink and IB port states,
//! SR-IOV counts, kubelet policies, runtime and CDI, NCCL transports — as
//! `section → subject → attribute → value`, e.g.
//! `topology → "gpu 0000:5d:00.0" → "pcie link width" → "x8"`.
//!
//! Taken from the [`Context`] a check run used, so the facts are those the verdicts were built
//! on, each family parsed once. It never judges and never reads a path itself: it asks the
//! context and `facts/` (DESIGN.md: only `facts/` and `source/` know paths). Values are what the
//! node said, in the words the checks print them; readings that change from second to second
//! (temperature, power, utilisation, correctable error counts, idle PCIe speed of a GPU) are
//! left out, so two captures of one healthy node compare equal.

mod gpus;
mod nccl;
mod network;
mod platform;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::checks::Context;

/// Version of the snapshot's vocabulary (sections, subjects, attribute names). Facts of two
/// versions compare only on the attributes both know.
pub const FACTS_VERSION: u32 = 1;

/// Subjects whose facts come from one probe share a prefix; when the probe did not answer on a
/// node, [`Facts::unavailable`] names the prefix and the diff compares the probe's answer line
/// (`nvml` `init`, `driver` `module version`, `pod-resources` `answer`) instead of every subject
/// under it. NVML's answers: `nvml versions`, `nvml gpu <bdf>`.
pub const NVML: &str = "nvml ";
/// One GPU's NVML facts.
pub const NVML_GPU: &str = "nvml gpu";
/// What the loaded driver says of each GPU in `/proc/driver/nvidia/gpus` (`driver gpu <bdf>`).
pub const DRIVER_GPU: &str = "driver gpu";
/// The kubelet's pod-resources answers (`pod-resources allocatable`).
pub const POD_RESOURCES_ALLOCATABLE: &str = "pod-resources allocatable";

/// Attributes that name a particular piece of hardware or a host rather than describe it: they
/// differ between any two nodes. The diff shows them apart and does not count them. In a
/// redacted capture they hold placeholders and compare by those.
pub const IDENTIFIERS: &[&str] = &["hostname", "uuid", "serial", "node guid", "cdi devices"];

/// Attributes that say how the facts were obtained (which file answered), not what the node
/// is: shown, not counted.
pub const PROVENANCE: &[&str] = &["kernel log", "config file", "module version from"];

/// `section → subject → attribute → value`.
pub type Sections = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// What a node's facts say, layer by layer (`node` first, then the layer ids).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Facts {
    /// The vocabulary version (`FACTS_VERSION`) of the gpudoctor that took them.
    pub version: u32,
    /// Section (`node`, `driver`, … `nccl`) → subject (`gpu 0000:18:00.0`, `port mlx5_0/1`) →
    /// attribute (`pcie link width`) → value (`x16`).
    pub sections: Sections,
    /// Subject prefixes whose probe did not answer on this node, and why
    /// (`"nvml ": "driver_not_loaded: Driver Not Loaded"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

impl Facts {
    /// Set one value (the last write wins).
    pub fn put(&mut self, section: &str, subject: &str, attribute: &str, value: impl Into<String>) {
        self.sections
            .entry(section.to_string())
            .or_default()
            .entry(subject.to_string())
            .or_default()
            .insert(attribute.to_string(), value.into());
    }

    /// Make sure a subject exists even when none of its attributes could be read.
    pub fn touch(&mut self, section: &str, subject: &str) {
        self.sections
            .entry(section.to_string())
            .or_default()
            .entry(subject.to_string())
            .or_default();
    }

    pub fn get(&self, section: &str, subject: &str, attribute: &str) -> Option<&str> {
        self.sections
            .get(section)?
            .get(subject)?
            .get(attribute)
            .map(String::as_str)
    }

    /// The probe behind `subject` did not answer on this node: why.
    pub fn unavailable_for(&self, subject: &str) -> Option<&str> {
        self.unavailable
            .iter()
            .find(|(prefix, _)| subject.starts_with(prefix.as_str()))
            .map(|(_, why)| why.as_str())
    }
}

/// Is `attribute` an identifier or provenance (shown apart, never counted)?
pub fn is_informational(attribute: &str) -> bool {
    IDENTIFIERS.contains(&attribute) || PROVENANCE.contains(&attribute)
}

/// The facts behind a run, from its context (families the run did not need are gathered now).
pub fn take(ctx: &Context<'_>) -> Facts {
    let mut facts = Facts {
        version: FACTS_VERSION,
        ..Facts::default()
    };
    platform::node(ctx, &mut facts);
    gpus::driver(ctx, &mut facts);
    platform::toolkit(ctx, &mut facts);
    platform::device_plugin(ctx, &mut facts);
    gpus::topology(ctx, &mut facts);
    platform::kubelet_policies(ctx, &mut facts);
    network::rdma(ctx, &mut facts);
    network::sriov(ctx, &mut facts);
    gpus::nvlink(ctx, &mut facts);
    nccl::nccl(ctx, &mut facts);
    facts
}

/// A list as one value: `a, b, c`, or `none`.
fn list<I, S>(items: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let parts: Vec<String> = items.into_iter().map(|s| s.as_ref().to_string()).collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// A fact that could not be read, as a value.
fn unreadable(err: &crate::facts::FactError) -> String {
    format!("unreadable ({})", err.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::ReplaySource;

    fn fixture(name: &str) -> Facts {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        let source = ReplaySource::new(&root);
        let ctx = Context::new(&source);
        take(&ctx)
    }

    #[test]
    fn the_healthy_node_reads_as_its_fixture_says() {
        let f = fixture("hgx-h100-healthy");
        assert_eq!(f.version, FACTS_VERSION);
        assert_eq!(f.get("node", "node", "hostname"), Some("hgx-h100-01"));
        assert_eq!(f.get("node", "node", "profile"), Some("hgx-h100"));
        assert_eq!(
            f.get("driver", "driver", "module version"),
            Some("550.54.15")
        );
        assert_eq!(
            f.get("driver", "driver gpu 0000:18:00.0", "vbios"),
            Some("96.00.99.00.01")
        );
        assert_eq!(
            f.get("driver", "nvml gpu 0000:18:00.0", "model"),
            Some("NVIDIA H100 80GB HBM3")
        );
        assert_eq!(
            f.get("topology", "gpu 0000:5d:00.0", "pcie link width"),
            Some("x16")
        );
        assert_eq!(
            f.get("topology", "gpu 0000:5d:00.0", "pcie max link"),
            Some("gen5 x16")
        );
        assert_eq!(
            f.get("topology", "gpu 0000:9a:00.0", "numa node"),
            Some("1")
        );
        assert_eq!(f.get("rdma", "port mlx5_0/1", "state"), Some("4: ACTIVE"));
        assert_eq!(
            f.get("rdma", "port mlx5_0/1", "rate"),
            Some("400 Gb/sec (4X NDR)")
        );
        assert_eq!(
            f.get("nvlink", "nvml gpu 0000:18:00.0", "nvlinks"),
            Some("18 of 18 active")
        );
        assert_eq!(
            f.get("node", "kernel modules", "nvidia_peermem"),
            Some("live")
        );
        assert!(f.unavailable.is_empty(), "{:?}", f.unavailable);
        // Nothing that changes from second to second.
        let all: Vec<&String> = f
            .sections
            .values()
            .flat_map(|s| s.values())
            .flat_map(|a| a.keys())
            .collect();
        for volatile in ["temperature", "power", "utilization", "pcie link speed gpu"] {
            assert!(!all.iter().any(|a| a.contains(volatile)), "{volatile}");
        }
    }

    #[test]
    fn a_probe_that_did_not_answer_is_named_not_listed_subject_by_subject() {
        let f = fixture("h100-driver-not-loaded");
        assert!(f.unavailable_for("nvml gpu 0000:18:00.0").is_some());
        assert!(f.unavailable_for("driver gpu 0000:18:00.0").is_some());
        assert!(
            f.unavailable_for("nvml").is_none(),
            "the probe's own line stays"
        );
        assert!(
            !f.sections["driver"].keys().any(|s| s.starts_with(NVML)),
            "no nvml subjects but the probe's own when nvml did not answer"
        );
        assert!(
            f.get("driver", "nvml", "init")
                .unwrap()
                .contains("driver_not_loaded")
        );
    }

    #[test]
    fn serialises_and_reads_back() {
        let f = fixture("h100-pcie-x8");
        let text = serde_json::to_string(&f).unwrap();
        let back: Facts = serde_json::from_str(&text).unwrap();
        assert_eq!(back, f);
    }
}
