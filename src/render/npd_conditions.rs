//! One node condition per cause class for node-problem-detector (issue 26): a hardware fault
//! is drained on, a configuration fault is alerted on and never drained on (a fleet-wide
//! misconfiguration must not empty the fleet), so each needs a condition of its own.
//!
//! NPD's custom plugin sets a condition from a rule's exit code, with the rule's fixed
//! `reason` and the plugin's stdout as the message (reference/kubernetes.md §9). So each
//! condition is one rule that asks gpudoctor "has the node a failure of this class?" over a
//! run of every layer (`--npd` implies `--keep-going`: a configuration fault must not mask a
//! broken part behind it): exit 1 and that failure's line (led by the cause, consequences
//! folded into it) when it has, 0 when it has not, 2 when the run was inconclusive. The class of a failure is GPU hardware when its
//! action says the part itself is broken ([`Action::ResetGpu`], [`Action::HardwareInspection`],
//! [`Action::RebootNode`]) whichever layer found it, but for the checks whose action mends a
//! rollout or the node's design ([`NOT_A_BROKEN_PART`]); else its layer's class.

use super::npd::{MAX_MESSAGE_BYTES, compact, fit, message};
use crate::report::{Action, CheckResult, Layer, LayerReport, Report, Status, exit};

/// A node condition gpudoctor sets through NPD; `--npd-condition` names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Condition {
    /// A GPU, NIC, link or PCIe path that is broken: drain on it.
    GpuHardware,
    /// The NVIDIA kernel driver, NVML, persistence, the driver's versions.
    GpuDriver,
    /// The container runtime and NVIDIA Container Toolkit (CDI, runtime handlers).
    ContainerToolkit,
    /// The device plugin and the kubelet's accounting of GPUs.
    DevicePlugin,
    /// Where GPUs, NICs and CPUs sit (NUMA, PCIe, ACS, the kubelet's topology manager).
    GpuTopology,
    /// The RDMA network between nodes, SR-IOV networks, NCCL's transport.
    GpuNetwork,
    /// The NVLink fabric: fabric manager, fabric state, NVSwitches.
    NvlinkFabric,
}

impl Condition {
    pub const ALL: [Condition; 7] = [
        Condition::GpuHardware,
        Condition::GpuDriver,
        Condition::ContainerToolkit,
        Condition::DevicePlugin,
        Condition::GpuTopology,
        Condition::GpuNetwork,
        Condition::NvlinkFabric,
    ];

    /// The node condition's `type` (deploy/npd/gpudoctor-plugin-monitor.json).
    pub fn type_name(self) -> &'static str {
        match self {
            Condition::GpuHardware => "GPUHardwareProblem",
            Condition::GpuDriver => "GPUDriverProblem",
            Condition::ContainerToolkit => "GPUContainerToolkitProblem",
            Condition::DevicePlugin => "GPUDevicePluginProblem",
            Condition::GpuTopology => "GPUTopologyProblem",
            Condition::GpuNetwork => "GPUNetworkProblem",
            Condition::NvlinkFabric => "NVLinkFabricProblem",
        }
    }

    /// The rule's `reason` when the condition is true (NPD's custom plugin: fixed per rule).
    pub fn reason(self) -> &'static str {
        match self {
            Condition::GpuHardware => "GPUHardwareFault",
            Condition::GpuDriver => "GPUDriverFault",
            Condition::ContainerToolkit => "ContainerToolkitFault",
            Condition::DevicePlugin => "DevicePluginFault",
            Condition::GpuTopology => "GPUTopologyFault",
            Condition::GpuNetwork => "GPUNetworkFault",
            Condition::NvlinkFabric => "NVLinkFabricFault",
        }
    }

    /// The `--npd-condition` value.
    pub fn id(self) -> &'static str {
        match self {
            Condition::GpuHardware => "gpu-hardware",
            Condition::GpuDriver => "gpu-driver",
            Condition::ContainerToolkit => "container-toolkit",
            Condition::DevicePlugin => "device-plugin",
            Condition::GpuTopology => "gpu-topology",
            Condition::GpuNetwork => "gpu-network",
            Condition::NvlinkFabric => "nvlink-fabric",
        }
    }

    /// May automation drain the node when this condition is true? Only for hardware: every
    /// other class is configuration, which a rollout can break on every node at once.
    pub fn drain(self) -> bool {
        self == Condition::GpuHardware
    }

    /// The class of a failure of check `code` in `layer` whose action is `action`.
    pub fn of(layer: Layer, code: &str, action: Action) -> Condition {
        let hardware = matches!(
            action,
            Action::ResetGpu | Action::HardwareInspection | Action::RebootNode
        ) && !NOT_A_BROKEN_PART.contains(&code);
        if hardware {
            return Condition::GpuHardware;
        }
        match layer {
            Layer::Driver => Condition::GpuDriver,
            Layer::Toolkit => Condition::ContainerToolkit,
            Layer::DevicePlugin => Condition::DevicePlugin,
            Layer::Topology => Condition::GpuTopology,
            Layer::Rdma | Layer::Sriov | Layer::Nccl => Condition::GpuNetwork,
            Layer::Nvlink => Condition::NvlinkFabric,
        }
    }
}

/// Checks whose drastic action mends no broken part, so their layer's class, never a drain:
/// a reboot for a version mismatch (user-space NVML or libcuda against the loaded kernel
/// module: what a driver rollout leaves on every node it reached), and a GPU with no NIC on
/// its socket (how the node was built: every node of that design has it). A lost GPU, a fatal
/// XID or SXID, a surprise link down also ask for a reboot: those are the hardware's.
pub const NOT_A_BROKEN_PART: &[&str] = &[
    "driver.driver_version_match",
    "driver.nvml_init",
    "driver.cuda",
    "topology.gpu_nic_locality",
];

/// The class of the report's first failure (under `--strict`, of its first warning); `None`
/// when nothing failed.
pub fn failing(report: &Report) -> Option<Condition> {
    if report.exit_code != exit::FAILED {
        return None;
    }
    if let Some(first) = &report.first_failure {
        let action = first.action.unwrap_or(Action::None);
        return Some(Condition::of(first.layer, &first.code, action));
    }
    failures(report).first().map(|(class, _, _)| *class)
}

/// Every failure of the run with its class, in report order: the failing checks (under
/// `--strict` with nothing failed, the warnings that made the run fail). NPD mode runs every
/// layer (`--npd` implies `--keep-going`), so a configuration fault in an early layer does not
/// hide a broken part in a later one (issue 43: NVLinks down behind a toolkit fault).
pub fn failures(report: &Report) -> Vec<(Condition, &LayerReport, &CheckResult)> {
    if report.exit_code != exit::FAILED {
        return Vec::new();
    }
    let counted = if report.first_failure.is_some() {
        Status::Fail
    } else {
        Status::Warn
    };
    report
        .findings()
        .filter(|(_, c)| c.status == counted)
        .map(|(layer, check)| {
            (
                Condition::of(layer.id, &check.code, check.action),
                layer,
                check,
            )
        })
        .collect()
}

/// Could a layer the run did not reach (`not_run`, blocked by an earlier failure: a report
/// from a run without `--keep-going`) hold a failure of `condition`? Hardware is found in
/// every layer; every other class only in its own layers.
fn hidden_by_blocked_layers(report: &Report, condition: Condition) -> Option<&LayerReport> {
    report.layers.iter().find(|l| {
        l.status == Status::NotRun
            && (condition == Condition::GpuHardware
                || Condition::of(l.id, "", Action::None) == condition)
    })
}

/// The answer for `condition`: gpudoctor's exit code for it (0 none, 1 this class failed, 3
/// inconclusive; `npd::exit_code` makes NPD's 0/1/2 of it) and NPD's message. Every failure of
/// the run counts, not only the first: the condition is true when any failing check is of its
/// class, its message that check's line. A class that a layer blocked by an earlier failure
/// could hold is unknown, never "no problem".
pub fn answer(report: &Report, condition: Condition) -> (i32, String) {
    match report.exit_code {
        exit::HEALTHY => (
            exit::HEALTHY,
            fit(
                &format!("gpudoctor: no {} problem", condition.id()),
                MAX_MESSAGE_BYTES,
            ),
        ),
        exit::FAILED => {
            let clean = super::sanitize::report(report);
            let all = failures(&clean);
            if let Some((_, layer, check)) = all.iter().find(|(c, _, _)| *c == condition) {
                let first = all.first().is_some_and(|(_, _, c)| c.code == check.code);
                let line = if first {
                    message(report)
                } else {
                    fit(
                        &compact(&format!("{}: {} {}", layer.id, check.code, check.summary)),
                        MAX_MESSAGE_BYTES,
                    )
                };
                return (exit::FAILED, line);
            }
            let first = clean
                .first_failure
                .as_ref()
                .map(|f| format!("{}: {}", f.layer, f.code))
                .unwrap_or_default();
            let class = all.first().map_or("", |(c, _, _)| c.id());
            if let Some(blocked) = hidden_by_blocked_layers(&clean, condition) {
                return (
                    exit::INCONCLUSIVE,
                    fit(
                        &format!(
                            "gpudoctor: {} unknown: {} not run, {}",
                            condition.id(),
                            blocked.id,
                            blocked.reason.as_deref().unwrap_or("blocked")
                        ),
                        MAX_MESSAGE_BYTES,
                    ),
                );
            }
            (
                exit::HEALTHY,
                fit(
                    &format!(
                        "gpudoctor: no {} problem; failed: ({class}) {first}",
                        condition.id()
                    ),
                    MAX_MESSAGE_BYTES,
                ),
            )
        }
        _ => (exit::INCONCLUSIVE, message(report)),
    }
}

/// [`answer`] from a report another rule saved: unknown when it is more than `max_age`
/// seconds old, says not when it was made, or is dated in the future beyond the clock skew
/// allowed (`saved::CLOCK_SKEW`: its age is unknown), so a check that stopped running is never
/// read as a healthy node.
pub fn answer_saved(report: &Report, condition: Condition, max_age: Option<u64>) -> (i32, String) {
    if let Some(max_age) = max_age {
        let age =
            crate::saved::Age::of(report.generated_at.as_deref(), std::time::SystemTime::now());
        if let Some(why) = age.stale(std::time::Duration::from_secs(max_age), true) {
            // NPD keeps 80 bytes: the reason first, so a cut loses only the option.
            let line = match age {
                crate::saved::Age::Ahead(_) => {
                    format!("gpudoctor: report {why} (--max-age {max_age})")
                }
                _ => format!("gpudoctor: the saved report is {why} (--max-age {max_age})"),
            };
            return (exit::INCONCLUSIVE, fit(&line, MAX_MESSAGE_BYTES));
        }
    }
    answer(report, condition)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_is_the_action_and_everything_else_its_layer() {
        let of = Condition::of;
        assert_eq!(
            of(
                Layer::Rdma,
                "rdma.error_counters",
                Action::HardwareInspection
            ),
            Condition::GpuHardware
        );
        assert_eq!(
            of(Layer::Driver, "driver.xid_events", Action::ResetGpu),
            Condition::GpuHardware
        );
        assert_eq!(
            of(Layer::Topology, "topology.aer_errors", Action::RebootNode),
            Condition::GpuHardware
        );
        // A reboot is what a driver mismatch after an upgrade needs on every node at once.
        assert_eq!(
            of(
                Layer::Driver,
                "driver.driver_version_match",
                Action::RebootNode
            ),
            Condition::GpuDriver
        );
        assert_eq!(
            of(
                Layer::Nvlink,
                "nvlink.fabric_manager",
                Action::RestartComponent
            ),
            Condition::NvlinkFabric
        );
        assert_eq!(
            of(
                Layer::Toolkit,
                "toolkit.container_runtime",
                Action::FixConfig
            ),
            Condition::ContainerToolkit
        );
        // NICs on one socket: how the node was built, not a part to pull.
        assert_eq!(
            of(
                Layer::Topology,
                "topology.gpu_nic_locality",
                Action::HardwareInspection
            ),
            Condition::GpuTopology
        );
        let registry = crate::checks::registry();
        for code in NOT_A_BROKEN_PART {
            assert!(registry.iter().any(|d| d.code == *code), "{code}");
        }
        let drained: Vec<_> = Condition::ALL.iter().filter(|c| c.drain()).collect();
        assert_eq!(drained, [&Condition::GpuHardware]);
    }
}
