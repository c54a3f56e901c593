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

use crate::checks::Context;
use crate::report::facts::{
    DRIVER_GPU, FACTS_VERSION, Facts, NVML, NVML_GPU, POD_RESOURCES_ALLOCATABLE,
};

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
fn unreadable(err: &crate::answers::FactError) -> String {
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
        for volatile in ["temperature", "utilization", "pcie link speed gpu"] {
            assert!(!all.iter().any(|a| a.contains(volatile)), "{volatile}");
        }
        // Power only as a setting and as the draw against it, never the watts of the moment.
        let power: Vec<&&String> = all.iter().filter(|a| a.contains("power")).collect();
        assert!(
            power
                .iter()
                .all(|a| a.as_str() == "power limit" || a.as_str() == "power draw"),
            "{power:?}"
        );
        assert_eq!(
            f.get("driver", "nvml gpu 0000:18:00.0", "power draw"),
            Some("within the limit")
        );
        assert_eq!(
            f.get("driver", "nvml gpu 0000:18:00.0", "power limit"),
            Some("700 W (the default)")
        );
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
