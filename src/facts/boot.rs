//! The node's clock: how long it has been up (`/proc/uptime`) and when it booted (`btime` in
//! `/proc/stat`), so that kernel-log stamps and counter totals can be given an age and a rate.
//! A capture records both files, and its "now" is their sum: a replay computes the ages the live
//! run did, whenever it runs.
//!
//! Formats (proc(5), `fs/proc/uptime.c`, `fs/proc/stat.c`): `/proc/uptime` is two decimal
//! numbers, seconds up (suspend included) and idle seconds summed over CPUs, `350735.47
//! 234388.90`; `/proc/stat` has one `btime <seconds since the epoch>` line (`btime 769041601` in
//! the man page) among the cpu, intr and ctxt lines.

use super::trimmed;
use super::xid::Clock;
use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const PROC_UPTIME: &str = "proc/uptime";
pub const PROC_STAT: &str = "proc/stat";

/// What the two files said, and what could not be read. A file absent from a capture is no
/// problem (an older capture): its value is just unknown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootFacts {
    pub uptime_s: Option<f64>,
    pub btime: Option<u64>,
    pub problems: Vec<FactError>,
}

impl BootFacts {
    /// The clock to age events with. Now is the boot time plus the uptime when both are
    /// known (a replay then sees the capture's moment), else `live_now` (the machine's clock,
    /// for a live run only).
    pub fn clock(&self, live_now: Option<f64>) -> Clock {
        let boot = self.btime.map(|b| b as f64);
        let now = match (boot, self.uptime_s) {
            (Some(b), Some(u)) => Some(b + u),
            _ => live_now,
        };
        Clock {
            uptime_s: self.uptime_s,
            boot_unix: boot.or_else(|| Some(now? - self.uptime_s?)),
            now_unix: now,
        }
    }
}

/// `350735.47 234388.90` -> 350735.47 (seconds up). procfs-core's `Uptime` parser (the one
/// /proc/modules and /proc/cpuinfo go through, DESIGN.md packages), then what it does not check:
/// a number that is not a duration (`NaN`, `inf`, negative) is damage, not an age.
pub fn parse_uptime(text: &str) -> Result<f64, ParseError> {
    use procfs_core::FromRead as _;
    let parsed = procfs_core::Uptime::from_read(text.as_bytes())
        .map_err(|e| ParseError::new(format!("not `<seconds up> <idle seconds>`: {e}")))?;
    let up = parsed.uptime;
    if !up.is_finite() || up < 0.0 {
        return Err(ParseError::new(format!("uptime {up} is not a duration")));
    }
    Ok(up)
}

/// The `btime` line of `/proc/stat`. Not procfs-core's `KernelStats`: it needs the whole file
/// (every `cpu` line, `ctxt`, `processes`) and the clock-tick rate to give one number, so a
/// capture that kept only the lines gpudoctor reads, or a kernel that added a field, would lose
/// the boot time.
/// The `btime` line of `/proc/stat`.
pub fn parse_btime(text: &str) -> Result<u64, ParseError> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .ok_or_else(|| ParseError::new("no `btime` line"))?;
    trimmed(line)
        .parse()
        .map_err(|_| ParseError::new(format!("btime {:?} is not a number", trimmed(line))))
}

fn read<T>(
    source: &dyn Source,
    path: &str,
    parse: fn(&str) -> Result<T, ParseError>,
    problems: &mut Vec<FactError>,
) -> Option<T> {
    match source.read_to_string(path) {
        Ok(text) => match parse(&text) {
            Ok(v) => Some(v),
            Err(err) => {
                problems.push(FactError::parse(path, err));
                None
            }
        },
        Err(err) if err.is_missing() => None,
        Err(err) => {
            problems.push(err.into());
            None
        }
    }
}

pub fn gather(source: &dyn Source) -> BootFacts {
    let mut problems = Vec::new();
    let uptime_s = read(source, PROC_UPTIME, parse_uptime, &mut problems);
    let btime = read(source, PROC_STAT, parse_btime, &mut problems);
    BootFacts {
        uptime_s,
        btime,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// proc(5): "/proc/uptime ... 350735.47 234388.90" and "btime 769041601".
    #[test]
    fn reads_the_man_page_examples() {
        assert_eq!(parse_uptime("350735.47 234388.90\n"), Ok(350735.47));
        let stat = "cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0\nintr 1462898 0 0\nctxt 115315133\nbtime 769041601\nprocesses 86031\n";
        assert_eq!(parse_btime(stat), Ok(769041601));
    }

    #[test]
    fn damage_is_an_error_not_a_value() {
        for bad in ["", "abc 1", "-5 2", "NaN 1", "inf 1", "12.5"] {
            assert!(parse_uptime(bad).is_err(), "{bad:?}");
        }
        for bad in ["", "cpu 1 2 3\n", "btime soon\n", "btime -1\n"] {
            assert!(parse_btime(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn now_is_boot_plus_uptime_when_both_are_known() {
        let facts = BootFacts {
            uptime_s: Some(100.0),
            btime: Some(1_000),
            problems: Vec::new(),
        };
        let clock = facts.clock(Some(5_000.0));
        assert_eq!(clock.now_unix, Some(1_100.0));
        assert_eq!(clock.boot_unix, Some(1_000.0));
        let only_uptime = BootFacts {
            uptime_s: Some(100.0),
            ..BootFacts::default()
        };
        let clock = only_uptime.clock(Some(5_000.0));
        assert_eq!(
            (clock.now_unix, clock.boot_unix),
            (Some(5_000.0), Some(4_900.0))
        );
        assert_eq!(BootFacts::default().clock(None), Clock::default());
    }
}
