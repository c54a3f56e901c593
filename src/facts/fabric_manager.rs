//! The NVIDIA Fabric Manager on an NVSwitch node: is `nv-fabricmanager` running, is its unit
//! installed, and what its log says since it last started (reference/gpu-health.md §7).
//!
//! Where it is looked for:
//! - the systemd unit's cgroup, `/sys/fs/cgroup/system.slice/nvidia-fabricmanager.service`
//!   (cgroup v2; `/sys/fs/cgroup/systemd/...` on v1): systemd creates it when the unit starts and
//!   removes it when it stops, and `systemctl status` names it (`CGroup:
//!   /system.slice/nvidia-fabricmanager.service`, `Main PID: 29850 (nv-fabricmanage)`,
//!   bottlerocket-os/bottlerocket-kernel-kit#142); each PID of its `cgroup.procs` is checked by
//!   `/proc/<pid>/comm`, the command name cut to 15 characters (`TASK_COMM_LEN`);
//! - when the unit has no cgroup (the GPU Operator runs the fabric manager inside its driver
//!   container), every `/proc/<pid>/comm`, stopping at the first match;
//! - the unit file (`nvidia-fabricmanager.service` under /etc, /usr/lib or /lib systemd), to
//!   tell "installed, not running" from "not installed";
//! - the log, `/var/log/fabricmanager.log` (the default `LOG_FILE_NAME` of fabricmanager.cfg;
//!   `/run/nvidia/driver/...` under the GPU Operator's driver root), its last 256 KiB. Lines
//!   look like `[May 16 2025 15:10:21] [INFO] [tid 30042] GPU probe request received ...`
//!   (bottlerocket-kernel-kit#142); a run starts with `Fabric Manager version <v> is running
//!   with the following configuration options` and ends with `Successfully cleaned up and
//!   exiting fabric manager`; errors are `[ERROR]` lines (such as `Fabric Manager detected GPU
//!   NVL Fatal error on : ...`, `request to query NVSwitch device information from NVSwitch
//!   driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]`,
//!   NVIDIA/gpu-operator#610).
//!
//! Errors before the last start belong to an earlier run (history); those after it are live.
//!
//! The same search (unit cgroup, process name, unit file) finds the IMEX daemon of a GB200-class
//! compute tray ([`IMEX`]): those trays run no fabric manager (it runs on the NVSwitch trays);
//! multi-node NVLink memory sharing needs `nvidia-imex` instead (NVIDIA IMEX guide: the
//! `nvidia-imex.service` unit running `/usr/bin/nvidia-imex`, configured in /etc/nvidia-imex/).

use crate::answers::FactError;
use crate::source::Source;

pub const UNIT_CGROUPS: &[&str] = &[
    "sys/fs/cgroup/system.slice/nvidia-fabricmanager.service",
    "sys/fs/cgroup/systemd/system.slice/nvidia-fabricmanager.service",
];
pub const CGROUP_ROOT: &str = "sys/fs/cgroup";
pub const UNIT_FILES: &[&str] = &[
    "etc/systemd/system/nvidia-fabricmanager.service",
    "usr/lib/systemd/system/nvidia-fabricmanager.service",
    "lib/systemd/system/nvidia-fabricmanager.service",
];
pub const LOGS: &[&str] = &[
    "var/log/fabricmanager.log",
    "run/nvidia/driver/var/log/fabricmanager.log",
];
/// `nv-fabricmanager` as `/proc/<pid>/comm` shows it (15 characters).
pub const COMM: &str = "nv-fabricmanage";
/// How much of the log's end is read.
pub const LOG_TAIL_BYTES: u64 = 256 * 1024;
/// A host service looked for the same way: its unit's cgroups, unit files, logs (read with the
/// fabric manager's log parser; none for others) and `/proc/<pid>/comm`.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    pub unit_cgroups: &'static [&'static str],
    pub unit_files: &'static [&'static str],
    pub logs: &'static [&'static str],
    pub comm: &'static str,
}

/// The fabric manager.
pub const FABRIC_MANAGER: Service = Service {
    unit_cgroups: UNIT_CGROUPS,
    unit_files: UNIT_FILES,
    logs: LOGS,
    comm: COMM,
};

/// The IMEX daemon of a multi-node NVLink domain (GB200/GB300 NVL compute trays).
pub const IMEX: Service = Service {
    unit_cgroups: &[
        "sys/fs/cgroup/system.slice/nvidia-imex.service",
        "sys/fs/cgroup/systemd/system.slice/nvidia-imex.service",
    ],
    unit_files: &[
        "etc/systemd/system/nvidia-imex.service",
        "usr/lib/systemd/system/nvidia-imex.service",
        "lib/systemd/system/nvidia-imex.service",
    ],
    logs: &[],
    comm: "nvidia-imex",
};

/// Most processes looked at when scanning `/proc`.
const MAX_PROCESSES: usize = 65_536;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FabricManagerFacts {
    /// The running process: its PID and how it was found.
    pub running: Option<(u32, &'static str)>,
    /// `/sys/fs/cgroup` could be looked at (else "no cgroup" says nothing).
    pub cgroups_readable: bool,
    /// `/proc` could be listed (else the scan said nothing).
    pub proc_readable: bool,
    /// The unit file found, if any.
    pub unit_file: Option<String>,
    pub log: Option<FmLog>,
    pub problems: Vec<FactError>,
}

/// What the log says about the last run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FmLog {
    pub path: String,
    /// Lines read (the tail).
    pub lines: usize,
    /// `Fabric Manager version ... is running` of the last start, and its time as printed.
    pub last_start: Option<FmLine>,
    /// `[ERROR]` (and `[FATAL]`) lines after the last start (or in the whole tail when it holds
    /// no start line).
    pub errors: Vec<FmLine>,
    /// Error lines before the last start: an earlier run's.
    pub earlier_errors: usize,
    /// An exit line after the last start.
    pub exited: Option<FmLine>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FmLine {
    pub line_number: usize,
    /// `May 16 2025 15:10:21`, as printed.
    pub time: Option<String>,
    pub level: String,
    pub message: String,
}

/// `[May 16 2025 15:10:21] [INFO] [tid 30042] message` -> its parts; `None` for other lines
/// (continuation lines of multi-line blocks).
pub fn parse_line(line: &str, line_number: usize) -> Option<FmLine> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (time, rest) = rest.split_once(']')?;
    let rest = rest.trim_start().strip_prefix('[')?;
    let (level, rest) = rest.split_once(']')?;
    if level.is_empty() || !level.bytes().all(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut message = rest.trim_start();
    if let Some(after) = message.strip_prefix("[tid ")
        && let Some((_, m)) = after.split_once(']')
    {
        message = m.trim_start();
    }
    Some(FmLine {
        line_number,
        time: Some(time.trim().to_string()).filter(|t| !t.is_empty()),
        level: level.to_string(),
        message: message.trim_end().to_string(),
    })
}

/// Read a log's tail.
pub fn parse_log(path: &str, text: &str) -> FmLog {
    let mut log = FmLog {
        path: path.to_string(),
        ..FmLog::default()
    };
    for (i, raw) in text.lines().enumerate() {
        log.lines += 1;
        let Some(line) = parse_line(raw, i + 1) else {
            continue;
        };
        let lower = line.message.to_ascii_lowercase();
        if lower.contains("fabric manager version") && lower.contains("is running") {
            log.earlier_errors += log.errors.len();
            log.errors.clear();
            log.exited = None;
            log.last_start = Some(line);
            continue;
        }
        if lower.contains("exiting fabric manager") {
            log.exited = Some(line);
            continue;
        }
        if matches!(line.level.as_str(), "ERROR" | "FATAL") {
            log.errors.push(line);
        }
    }
    log
}

/// Is `pid` the fabric manager? A comm that cannot be read, or is missing (a partial capture;
/// live, a process that exited since the listing), is noted: that pid may have been it, so the
/// check cannot call the service stopped (missing is not absent).
fn is_named(source: &dyn Source, pid: &str, comm: &str, problems: &mut Vec<FactError>) -> bool {
    match source.read_to_string(&format!("proc/{pid}/comm")) {
        Ok(c) => c.trim() == comm,
        Err(err) => {
            problems.push(err.into());
            false
        }
    }
}

/// The fabric manager's facts.
pub fn gather(source: &dyn Source) -> FabricManagerFacts {
    gather_service(source, &FABRIC_MANAGER)
}

/// A service's facts: running (and how found), unit file, log.
pub fn gather_service(source: &dyn Source, service: &Service) -> FabricManagerFacts {
    let mut facts = FabricManagerFacts {
        cgroups_readable: source.exists(CGROUP_ROOT),
        ..FabricManagerFacts::default()
    };
    for cgroup in service.unit_cgroups {
        let procs = format!("{cgroup}/cgroup.procs");
        match source.read_to_string(&procs) {
            Ok(text) => {
                let found = text
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .find(|p| is_named(source, &p.to_string(), service.comm, &mut facts.problems));
                if let Some(pid) = found {
                    facts.running = Some((pid, "its systemd unit's cgroup"));
                    break;
                }
            }
            Err(err) if err.is_missing() => {}
            Err(err) => facts.problems.push(err.into()),
        }
    }
    if facts.running.is_none() {
        match source.list_dir("proc", &|n| n.bytes().all(|b| b.is_ascii_digit())) {
            Ok(pids) => {
                facts.proc_readable = true;
                facts.running = pids
                    .iter()
                    .take(MAX_PROCESSES)
                    .find(|p| is_named(source, p, service.comm, &mut facts.problems))
                    .and_then(|p| p.parse().ok())
                    .map(|pid| (pid, "the process list"));
            }
            Err(err) if err.is_missing() => {}
            Err(err) => facts.problems.push(err.into()),
        }
    }
    facts.unit_file = service
        .unit_files
        .iter()
        .find(|f| source.exists(f))
        .map(|f| f.to_string());
    for path in service.logs {
        match source.read_tail(path, LOG_TAIL_BYTES) {
            Ok(text) => {
                facts.log = Some(parse_log(path, &text));
                break;
            }
            Err(err) if err.is_missing() => {}
            Err(err) => facts.problems.push(err.into()),
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bottlerocket-os/bottlerocket-kernel-kit#142 (the log line inside the journal entry).
    const INFO: &str = "[May 16 2025 15:10:21] [INFO] [tid 30042] GPU probe request received from node Id 0 and module Id 7 GUID 0x3ba54f661add0c35 on the partition 57082 requestId 0x18400a7ecabe8408.";

    #[test]
    fn reads_a_real_line() {
        let line = parse_line(INFO, 7).unwrap();
        assert_eq!(line.time.as_deref(), Some("May 16 2025 15:10:21"));
        assert_eq!(line.level, "INFO");
        assert!(line.message.starts_with("GPU probe request received"));
        assert_eq!(line.line_number, 7);
        for junk in [
            "",
            "plain text",
            "[x]",
            "[May 16] [info] lower",
            "[a] [INFO",
        ] {
            assert_eq!(parse_line(junk, 1), None, "{junk:?}");
        }
    }

    #[test]
    fn errors_count_from_the_last_start() {
        let text = format!(
            "[May 16 2025 15:00:00] [INFO] [tid 1] Fabric Manager version 550.54.15 is running with the following configuration options\n\
             [May 16 2025 15:00:05] [ERROR] [tid 2] request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n\
             [May 16 2025 15:00:06] [INFO] [tid 1] Successfully cleaned up and exiting fabric manager\n\
             [May 16 2025 15:10:00] [INFO] [tid 9] Fabric Manager version 550.54.15 is running with the following configuration options\n\
             {INFO}\n\
             [May 16 2025 15:20:00] [ERROR] [tid 9] Fabric Manager detected GPU NVL Fatal error on : moduleId 3\n\
               continuation: of the block\n"
        );
        let log = parse_log("var/log/fabricmanager.log", &text);
        assert_eq!(log.earlier_errors, 1);
        assert_eq!(log.errors.len(), 1);
        assert!(log.errors[0].message.contains("NVL Fatal"));
        assert_eq!(log.last_start.as_ref().map(|l| l.line_number), Some(4));
        assert!(log.exited.is_none());
        assert_eq!(log.lines, 7);
        // Stopped after its last start.
        let stopped = parse_log(
            "x",
            "[May 16 2025 15:00:00] [INFO] [tid 1] Fabric Manager version 1 is running\n[May 16 2025 15:00:06] [INFO] [tid 1] Successfully cleaned up and exiting fabric manager\n",
        );
        assert!(stopped.exited.is_some());
    }
}
