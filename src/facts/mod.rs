//! Typed facts about a node and the pure parsers that make them (floor 3).
//!
//! Each submodule has parsers (`&str -> Result<T, ParseError>`, unit-tested on literal
//! real-format text) and one `gather` function that reads its files through a
//! [`Source`](crate::source::Source) and never judges: a missing or damaged file becomes a
//! [`FactError`](crate::answers::FactError) naming the path, for the check to turn into an
//! `error` result. What a probe answers (NVML, pod-resources, NCCL, CUDA, perftest) is typed one
//! floor down in `answers/`, because the source returns it.

pub mod boot;
pub mod cdi;
pub mod cgroup;
pub mod cni;
pub mod dev_char;
pub mod disk;
pub mod fabric_manager;
pub mod iommu;
pub mod k8s;
pub mod kubelet;
pub mod kubelet_locate;
pub mod mce;
pub mod modules;
pub mod node;
pub mod numa;
pub mod nvidia;
pub mod pci;
pub mod pcicfg;
pub mod rdma;
pub mod smi_topo;
pub mod sriov;
pub mod toolkit;
pub mod topology;
pub mod xid;
pub mod yaml;

/// `dir/name`, built at its length. `format!("{dir}/{name}")` starts from an empty string
/// when the text begins with an argument and grows it as it writes (alloc/src/fmt.rs,
/// `Arguments::estimated_capacity`): two allocations or more for every sysfs path, thousands a
/// run (issue 41).
pub fn join(dir: &str, name: &str) -> String {
    let mut path = String::with_capacity(dir.len() + 1 + name.len());
    path.push_str(dir);
    path.push('/');
    path.push_str(name);
    path
}

/// Trim the trailing newline sysfs and procfs put after every value (sysfs.md §1).
pub fn trimmed(text: &str) -> &str {
    // Byte by byte: the same characters as `char::is_ascii_whitespace`, without decoding each
    // one (issue 41: a tenth of a run's parsing).
    text.trim_ascii()
}
