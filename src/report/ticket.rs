//! What a ticket needs beside a finding that takes hardware out of service: the `kubectl`
//! lines that take the node out of scheduling, and the identifiers an RMA form asks for of
//! each GPU the finding names. Shared by the table and Markdown renderers; no policy here
//! beyond which actions take a node or a part out of service.

use super::{Action, CheckResult, Report};

/// kubectl(1) `drain`: `--ignore-daemonsets` (DaemonSet Pods, gpudoctor's own included, cannot
/// be evicted and would make the drain refuse) and `--delete-emptydir-data` (Pods with emptyDir
/// volumes are otherwise refused). `cordon` alone first, so nothing new lands while the drain
/// waits on PodDisruptionBudgets.
const DRAIN_FLAGS: &str = "--ignore-daemonsets --delete-emptydir-data";

impl Report {
    /// `kubectl cordon <node> && kubectl drain <node> ...` for a finding whose action takes the
    /// node or a part of it out of service (hardware inspection, a GPU reset, a reboot); `None`
    /// for other actions or when the node's name is not known.
    pub fn drain_line(&self, check: &CheckResult) -> Option<String> {
        if !matches!(
            check.action,
            Action::HardwareInspection | Action::ResetGpu | Action::RebootNode
        ) {
            return None;
        }
        let node = self.node.hostname.as_deref()?;
        Some(format!(
            "kubectl cordon {node} && kubectl drain {node} {DRAIN_FLAGS}"
        ))
    }

    /// `GPU 0000:ab:00.0: serial 1654922007890, part 692-2G520-0200-000, module 6` for each GPU
    /// a hardware-inspection finding names, with what NVML said of it.
    pub fn rma_lines(&self, check: &CheckResult) -> Vec<String> {
        if check.action != Action::HardwareInspection {
            return Vec::new();
        }
        check
            .gpus
            .iter()
            .filter_map(|bus| {
                let gpu = self.node.gpus.iter().find(|g| &g.pci_bus_id == bus)?;
                let mut parts = Vec::new();
                if let Some(serial) = &gpu.serial {
                    parts.push(format!("serial {serial}"));
                }
                if let Some(part) = &gpu.board_part_number {
                    parts.push(format!("part {part}"));
                }
                if let Some(module) = gpu.module_id {
                    parts.push(format!("module {module}"));
                }
                (!parts.is_empty()).then(|| format!("GPU {bus}: {}", parts.join(", ")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::report::*;

    #[test]
    fn hardware_findings_name_the_node_and_the_gpu() {
        let mut report: Report = serde_json::from_str(
            r#"{"schema_version": 2, "gpudoctor_version": "0", "source": {"kind": "replay", "root": "r"},
                "node": {"hostname": "gpu-7", "kernel": null, "driver_version": null,
                         "gpus": [{"pci_bus_id": "0000:ab:00.0", "serial": "1654922007890",
                                   "board_part_number": "692-2G520-0200-000", "module_id": 6}]},
                "layers": [], "first_failure": null, "exit_code": 1, "duration_ms": 0}"#,
        )
        .unwrap();
        let mut check = CheckResult {
            code: "driver.row_remap".into(),
            title: String::new(),
            status: Status::Fail,
            summary: String::new(),
            evidence: Vec::new(),
            hint: None,
            action: Action::HardwareInspection,
            figures: Vec::new(),
            gpus: vec!["0000:ab:00.0".into(), "0000:18:00.0".into()],
            explained_by: None,
            follows_from: None,
        };
        assert_eq!(
            report.drain_line(&check).as_deref(),
            Some(
                "kubectl cordon gpu-7 && kubectl drain gpu-7 --ignore-daemonsets --delete-emptydir-data"
            )
        );
        assert_eq!(
            report.rma_lines(&check),
            ["GPU 0000:ab:00.0: serial 1654922007890, part 692-2G520-0200-000, module 6"]
        );
        check.action = Action::FixConfig;
        assert!(report.drain_line(&check).is_none() && report.rma_lines(&check).is_empty());
        check.action = Action::RebootNode;
        report.node.hostname = None;
        assert!(report.drain_line(&check).is_none());
    }
}
