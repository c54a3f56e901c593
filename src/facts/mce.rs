//! Machine checks and memory-controller (EDAC) errors: the kernel log's lines and the EDAC
//! counters in sysfs. Facts only; `checks/machine_checks.rs` judges them.
//!
//! Kernel-log lines read (real samples in tests/data/kernel/, README names each source):
//! - `mce: [Hardware Error]: Machine check events logged` (arch/x86/kernel/cpu/mce/core.c,
//!   `mce_notify_irq`: events were queued for mcelog/rasdaemon, usually corrected ones);
//! - `mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 4: a600000000020408` (core.c
//!   `print_mce`): the bank's MCi_STATUS, whose bit 61 (UC) says uncorrected (Intel SDM vol. 3B
//!   §16.3.2.2; AMD APM vol. 2 §9.3.2.2 the same bit); `Machine Check Exception:` lines come from
//!   `mce_panic`, a fatal one;
//! - `EDAC MC0: 4 CE error on CPU#0Channel#2_DIMM#0 (...)`, `EDAC MC3: 1 UE memory read error on
//!   ... (...)` (drivers/edac/edac_mc.c `edac_mc_handle_error` → `edac_ce_error`/`edac_ue_error`:
//!   `"%d CE %s%son %s (%s ...)"` / `"%d UE %s%son %s (%s ...)"`, the count first, then the
//!   message and the DIMM label). The driver's own lines (`EDAC sbridge MC1: HANDLING MCE
//!   MEMORY ERROR`, its `Machine Check Event:` copy) are not counted: the `EDAC MCn:` line is the
//!   count.
//!
//! Sysfs: `/sys/devices/system/edac/mc/mc<N>/{ce_count,ue_count}` (kernel
//! Documentation/ABI/testing/sysfs-devices-edac: "total count of correctable / uncorrectable
//! errors that have occurred on this memory controller", since the EDAC driver loaded or
//! `reset_counters` was written), and `mc_name`.

use crate::answers::FactError;
use crate::source::Source;

/// What one line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MceKind {
    /// `EDAC MCn: N CE ...`.
    MemoryCorrected,
    /// `EDAC MCn: N UE ...`.
    MemoryUncorrected,
    /// A CPU bank's MCi_STATUS without UC.
    CpuCorrected,
    /// A CPU bank's MCi_STATUS with UC, or a `Machine Check Exception` panic line.
    CpuUncorrected,
    /// `Machine check events logged`: something was logged; the lines around it say what.
    Logged,
}

impl MceKind {
    pub fn uncorrected(self) -> bool {
        matches!(self, MceKind::MemoryUncorrected | MceKind::CpuUncorrected)
    }
}

/// One line read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MceEvent {
    pub kind: MceKind,
    /// `MC0` for an EDAC line, `CPU 0 bank 4` for a CPU one.
    pub unit: Option<String>,
    /// Errors the line counts (EDAC's count; 1 otherwise).
    pub count: u64,
    /// 1-based line number in the log.
    pub line_number: usize,
    /// Which boot of the log it came from (0 = the first the log shows).
    pub boot: u32,
    /// The stamp as written (`[21584690.529877]`, `[Mon Oct  3 13:52:42 2022]`), if any.
    pub stamp: Option<String>,
    /// The line, prefix removed.
    pub message: String,
}

/// Most events kept (a failing DIMM prints thousands; counts go on past this).
pub const MAX_EVENTS: usize = 256;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MceLog {
    /// In log order, at most [`MAX_EVENTS`].
    pub events: Vec<MceEvent>,
    /// Events past [`MAX_EVENTS`].
    pub dropped: usize,
    /// Errors counted per kind in the last boot of the log, and in earlier ones.
    pub current: std::collections::BTreeMap<MceKind, u64>,
    pub earlier: std::collections::BTreeMap<MceKind, u64>,
    /// Boots the log spans (1 + boot markers after the first line).
    pub boots: u32,
}

/// The EDAC line's unit, count and kind: `MC0: 4 CE error on ...` after `EDAC `.
fn edac_line(message: &str) -> Option<(String, u64, MceKind)> {
    let rest = message.strip_prefix("EDAC ")?;
    let (unit, rest) = rest.split_once(": ")?;
    let n = unit.strip_prefix("MC")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut words = rest.split_whitespace();
    let count: u64 = words.next()?.parse().ok()?;
    let kind = match words.next()? {
        "CE" => MceKind::MemoryCorrected,
        "UE" => MceKind::MemoryUncorrected,
        _ => return None,
    };
    Some((unit.to_string(), count, kind))
}

/// The mce core's lines after `mce: [Hardware Error]: ` (or `[Hardware Error]: ` alone).
fn mce_line(message: &str) -> Option<(Option<String>, MceKind)> {
    let rest = message
        .strip_prefix("mce: ")
        .unwrap_or(message)
        .strip_prefix("[Hardware Error]: ")?;
    if rest.starts_with("Machine check events logged") {
        return Some((None, MceKind::Logged));
    }
    // `CPU 0: Machine Check: 0 Bank 4: a600000000020408` (and `Machine Check Exception: ...`).
    let (cpu, rest) = rest.strip_prefix("CPU ")?.split_once(": ")?;
    if rest.starts_with("Machine Check Exception") {
        return Some((Some(format!("CPU {cpu}")), MceKind::CpuUncorrected));
    }
    let rest = rest.strip_prefix("Machine Check: ")?;
    let (_, rest) = rest.split_once(" Bank ")?;
    let (bank, status) = rest.split_once(": ")?;
    let status = u64::from_str_radix(status.split_whitespace().next()?, 16).ok()?;
    let kind = if status & (1 << 61) != 0 {
        MceKind::CpuUncorrected
    } else {
        MceKind::CpuCorrected
    };
    Some((Some(format!("CPU {cpu} bank {bank}")), kind))
}

/// Is this kernel-log message (prefix removed) one [`parse`] reads (`record` keeps it)?
pub fn is_mce_line(message: &str) -> bool {
    edac_line(message).is_some() || mce_line(message).is_some()
}

/// The machine-check and EDAC lines of a kernel log.
pub fn parse(text: &str) -> MceLog {
    let mut log = MceLog {
        boots: 1,
        ..Default::default()
    };
    let mut boot = 0u32;
    let mut seen_any = false;
    let mut per_boot: Vec<(u32, MceKind, u64)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let (stamp, message) = crate::facts::xid::split_line(line);
        let message = message.trim_end();
        // A new boot: the kernel's banner, or journalctl's separator between boots.
        if message.starts_with("Linux version ")
            || line.starts_with("-- Boot ")
            || line.starts_with("-- Reboot --")
        {
            if seen_any {
                boot += 1;
            }
            continue;
        }
        if !message.is_empty() {
            seen_any = true;
        }
        let found = edac_line(message)
            .map(|(unit, count, kind)| (Some(unit), count, kind))
            .or_else(|| mce_line(message).map(|(unit, kind)| (unit, 1, kind)));
        let Some((unit, count, kind)) = found else {
            continue;
        };
        per_boot.push((boot, kind, count));
        if log.events.len() >= MAX_EVENTS {
            log.dropped += 1;
            continue;
        }
        log.events.push(MceEvent {
            kind,
            unit,
            count,
            line_number: index + 1,
            boot,
            stamp: stamp.map(str::to_string),
            message: message.to_string(),
        });
    }
    log.boots = boot + 1;
    for (b, kind, count) in per_boot {
        let map = if b == boot {
            &mut log.current
        } else {
            &mut log.earlier
        };
        let entry = map.entry(kind).or_insert(0);
        *entry = entry.saturating_add(count);
    }
    log
}

/// One memory controller's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryController {
    /// `mc0`.
    pub name: String,
    /// `mc_name` (`Skylake Socket#0 IMC#0`), when readable.
    pub model: Option<String>,
    pub ce_count: u64,
    pub ue_count: u64,
}

/// Where the kernel lists memory controllers.
pub const EDAC_MC: &str = "sys/devices/system/edac/mc";

/// The memory controllers read, and the counters that could not be.
pub type Edac = (Vec<MemoryController>, Vec<FactError>);

/// The EDAC memory controllers: `Ok(None)` when the node has no EDAC driver loaded (no
/// `mc<N>` there: a VM, or no driver for this memory controller); unreadable counters are
/// the second list.
pub fn gather_edac(source: &dyn Source) -> Result<Option<Edac>, FactError> {
    let names = match source.list_dir(EDAC_MC, &|n| {
        n.strip_prefix("mc")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    }) {
        Ok(names) => names,
        Err(err) if err.is_missing() => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    if names.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for name in names {
        let read = |file: &str| -> Result<u64, FactError> {
            let path = format!("{EDAC_MC}/{name}/{file}");
            let text = source.read_to_string(&path).map_err(FactError::from)?;
            text.trim().parse::<u64>().map_err(|_| FactError {
                path,
                message: format!("not a count: {:?}", text.trim()),
            })
        };
        // `mc_name` only labels the controller: absent is nothing to say, unreadable is named.
        let model = match source.read_to_string(&format!("{EDAC_MC}/{name}/mc_name")) {
            Ok(text) => Some(text.trim().to_string()).filter(|s| !s.is_empty()),
            Err(err) if err.is_missing() => None,
            Err(err) => {
                problems.push(FactError::from(err));
                None
            }
        };
        match (read("ce_count"), read("ue_count")) {
            (Ok(ce_count), Ok(ue_count)) => out.push(MemoryController {
                model,
                name,
                ce_count,
                ue_count,
            }),
            (a, b) => problems.extend(a.err().into_iter().chain(b.err())),
        }
    }
    Ok(Some((out, problems)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> String {
        let path = format!("{}/tests/data/kernel/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn syslog_ce_lines_count_their_errors() {
        let log = parse(&sample("edac-ce-syslog-openstreetmap-300.txt"));
        assert_eq!(log.current.get(&MceKind::MemoryCorrected), Some(&16));
        assert_eq!(log.current.get(&MceKind::Logged), Some(&1));
        assert_eq!(log.current.get(&MceKind::MemoryUncorrected), None);
        let first = &log.events[1];
        assert_eq!(first.unit.as_deref(), Some("MC0"));
        assert_eq!(first.count, 4);
        assert_eq!(first.stamp.as_deref(), Some("[21584690.529877]"));
    }

    #[test]
    fn the_drivers_own_lines_are_not_counted_twice() {
        let log = parse(&sample("edac-ce-sbridge-radiasoft-134.txt"));
        assert_eq!(log.current.get(&MceKind::MemoryCorrected), Some(&1));
        assert_eq!(log.events.len(), 2, "{:#?}", log.events);
        let log = parse(&sample("edac-ce-dmesg-T-illinois-scicomp-66.txt"));
        assert_eq!(log.current.get(&MceKind::MemoryCorrected), Some(&262));
        assert_eq!(log.events.len(), 1);
        assert_eq!(log.events[0].unit.as_deref(), Some("MC1"));
    }

    #[test]
    fn uncorrected_memory_and_cpu_errors() {
        let log = parse(&sample("ghes-pcie-recoverable-ovro-lwa-117.txt"));
        assert_eq!(log.current.get(&MceKind::MemoryUncorrected), Some(&1));
        assert_eq!(log.events[0].unit.as_deref(), Some("MC3"));
        // MCi_STATUS a600000000020408: bit 61 (UC) set.
        let log = parse(&sample("mce-uncorrected-at-boot-mcelog-70.txt"));
        assert_eq!(log.current.get(&MceKind::CpuUncorrected), Some(&1));
        let cpu = log
            .events
            .iter()
            .find(|e| e.kind == MceKind::CpuUncorrected)
            .unwrap();
        assert_eq!(cpu.unit.as_deref(), Some("CPU 0 bank 4"));
        // `mce: CPU supports 7 MCE banks` is not an event.
        assert_eq!(log.events.len(), 2);
    }

    #[test]
    fn corrected_cpu_status_and_boots() {
        // Synthetic on top of the real shapes: UC clear (8c00... has bit 61 clear), and an
        // uncorrected error from before a reboot counted apart.
        let text = "[ 5.0] mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: 8c00004f000800c2\n\
                    [ 9.0] EDAC MC0: 1 UE memory read error on DIMM_A1 (channel:0 slot:0)\n\
                    [ 0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)\n\
                    [ 7.0] EDAC MC0: 3 CE memory read error on DIMM_A1 (channel:0 slot:0)\n";
        let log = parse(text);
        assert_eq!(log.boots, 2);
        assert_eq!(log.earlier.get(&MceKind::CpuCorrected), Some(&1));
        assert_eq!(log.earlier.get(&MceKind::MemoryUncorrected), Some(&1));
        assert_eq!(log.current.get(&MceKind::MemoryCorrected), Some(&3));
        assert_eq!(log.current.get(&MceKind::MemoryUncorrected), None);
    }

    #[test]
    fn damaged_lines_are_not_events() {
        for line in [
            "EDAC MC: UMC0 chip selects:",
            "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0",
            "EDAC MCx: 1 CE memory read error",
            "EDAC MC0: 99999999999999999999999 CE x",
            "EDAC MC0: 1 XE x",
            "mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 4: zz",
            "mce: [Hardware Error]: CPU 0",
            "EDAC ",
        ] {
            assert!(!is_mce_line(line), "{line}");
            assert!(parse(line).events.is_empty(), "{line}");
        }
    }
}
