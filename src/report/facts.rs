//! The facts-snapshot part of the report contract (`check --with-facts`, `gpudoctor diff`): a
//! node's facts as `section → subject → attribute → value` text, and the vocabulary (probe
//! prefixes, identifier and provenance attributes) a diff reads them by. `snapshot/` takes them
//! from a check run's context; this is only their shape, so a saved report parses without
//! knowing how they were taken.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version of the snapshot's vocabulary (sections, subjects, attribute names). Facts of two
/// versions compare only on the attributes both know.
/// 2: NVML's `init`, a GPU's `error` and the pod-resources `answer` hold the error kind alone,
/// its wording apart under `message` (an informational attribute); a reading that failed is
/// `error (<kind>)`.
pub const FACTS_VERSION: u32 = 2;

/// Attributes whose values changed form in a version: facts of two versions do not compare them.
pub const REWORDED: &[&str] = &["init", "error", "answer"];

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
pub const PROVENANCE: &[&str] = &[
    "kernel log",
    "config file",
    "module version from",
    // A library's wording of an error whose kind is the fact (`init`, `error`).
    "message",
];

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

/// The fact subject the kernel command line's parameters are under (snapshot/platform.rs).
pub const KERNEL_COMMAND_LINE: &str = "kernel command line";

/// Kernel parameters that name this machine's disks and boot entry, not how it runs: the root
/// and resume devices (`root=UUID=…`, `PARTUUID=`, `LABEL=`: admin-guide/kernel-parameters.txt),
/// dracut's LUKS/MD/DM ids (dracut.cmdline(7)), the booted image's path (its kernel release is
/// compared as `kernel`). Two identical nodes differ here, and a redacted capture always does.
pub const BOOT_IDENTIFIERS: &[&str] = &[
    "root",
    "resume",
    "BOOT_IMAGE",
    "rd.luks.uuid",
    "rd.luks.name",
    "rd.md.uuid",
    "rd.dm.uuid",
    "systemd.machine_id",
];

/// Is `attribute` an identifier or provenance (shown apart, never counted)?
pub fn is_informational(attribute: &str) -> bool {
    IDENTIFIERS.contains(&attribute) || PROVENANCE.contains(&attribute)
}

/// [`is_informational`], knowing the subject: a boot identifier on the kernel command line is
/// one too.
pub fn is_informational_fact(subject: &str, attribute: &str) -> bool {
    is_informational(attribute)
        || (subject == KERNEL_COMMAND_LINE && BOOT_IDENTIFIERS.contains(&attribute))
}
