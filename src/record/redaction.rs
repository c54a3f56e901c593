//! What a capture's redaction must replace besides the shapes `src/redact/` finds by itself:
//! values known from the facts (the node's host name, GPU serials, pod names the kubelet gave)
//! and names found in what the capture keeps (board serials in any text, the NCCL peers that
//! name themselves in device lines and in every NCCL line's `host:pid:tid` prefix).

use crate::answers::nccl::NcclProbe;
use crate::answers::nvml::NvmlFacts;
use crate::answers::pod_resources::PodResourcesFacts;
use crate::redact::{Kind, Redactor};
use crate::source::FsError;
use crate::source::rooted::Trace;

/// What the recording learnt that names the node or its peers.
pub(super) struct Known<'a> {
    pub hostname: Option<&'a str>,
    /// `--redact-hostname-anyway`.
    pub anyway: bool,
    pub nvml: &'a NvmlFacts,
    pub trace: &'a Trace,
    pub nccl: &'a NcclProbe,
    pub pods: &'a PodResourcesFacts,
    pub kernel_log: &'a Result<Option<(String, String)>, FsError>,
}

/// The GPU processes' names as a redacted capture keeps them: the executable's base name
/// (`python3` of `/home/alice/venv/bin/python3`), as [`Redactor::redact_file`] cuts the
/// `proc/<pid>/cmdline` it keeps, so the replay names each process as the recorded
/// `nvml.json` does. A path may name a user (a home directory) and nothing judged needs it.
pub(super) fn process_names(mut nvml: NvmlFacts, redact: bool) -> NvmlFacts {
    if redact {
        for device in &mut nvml.devices {
            if let crate::answers::nvml::Reading::Value(list) = &mut device.compute_processes {
                for process in list {
                    if let Some(name) = &process.name {
                        process.name = Some(crate::redact::executable_name(name).to_string());
                    }
                }
            }
        }
    }
    nvml
}

/// A redactor that knows every literal value of `known`.
pub(super) fn plan(known: &Known<'_>) -> Redactor {
    let mut redactor = Redactor::new();
    // The GPU processes' command lines keep only their executables' names.
    for device in &known.nvml.devices {
        for process in device.compute_processes.value().into_iter().flatten() {
            redactor.add_gpu_process(process.pid);
        }
    }
    // The host name and its short name (`gpu-node-7` of `gpu-node-7.cluster.local`), as
    // whole tokens; a short or common one is kept and said (src/redact/literals.rs).
    if let Some(host) = known.hostname {
        redactor.add_hostname(host, known.anyway);
    }
    for device in &known.nvml.devices {
        if let Some(serial) = device.serial.value() {
            redactor.add_literal(Kind::Serial, serial);
        }
        // The board part number goes with the serial on an RMA form, so it is redacted as the
        // serial is, with placeholders of its own (issue 46). The module id is the GPU's slot on
        // its baseboard (1..8), the same on every node of a model: kept, as a PCI bus id is.
        if let Some(part) = device.board_part_number.value() {
            redactor.add_literal(Kind::PartNumber, part);
        }
    }
    for text in known
        .trace
        .contents
        .values()
        .filter_map(|b| std::str::from_utf8(b).ok())
    {
        for serial in board_serials(text) {
            redactor.add_literal(Kind::Serial, &serial);
        }
        // An NCCL log kept among the node's files names its peers too.
        redactor.add_nccl_prefix_hosts(text, known.anyway);
    }
    // The other nodes of a multi-node NCCL run name themselves in its log: in nccl-tests'
    // device lines, and in the `host:pid:tid` prefix of every NCCL line — the only place a
    // PyTorch job's log, or an excerpt without all device lines, names them (issue 30).
    if let NcclProbe::Runs(runs) = known.nccl {
        for run in runs {
            for host in run
                .log
                .hosts()
                .into_iter()
                .chain(run.log.info_hosts.iter().map(String::as_str))
            {
                redactor.add_hostname(host, known.anyway);
            }
            if let Some(transcript) = &run.transcript {
                redactor.add_nccl_prefix_hosts(transcript, known.anyway);
            }
        }
    }
    if let Some(pods) = known.pods.list_value() {
        for pod in pods {
            redactor.add_pod_name(&pod.name);
        }
    }
    if let Ok(Some((log, _))) = known.kernel_log {
        for serial in board_serials(log) {
            redactor.add_literal(Kind::Serial, &serial);
        }
    }
    redactor
}

/// `NVRM: GPU Board Serial Number: 1654922007835` lines (gpu-health.md §8).
fn board_serials(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.split_once("Board Serial Number:")
                .map(|(_, s)| s.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_board_serials() {
        assert_eq!(
            board_serials("NVRM: GPU Board Serial Number: 1654922007835\n"),
            vec!["1654922007835"]
        );
    }
}
