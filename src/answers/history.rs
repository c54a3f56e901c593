//! What `--state-dir` remembers across runs: per boot of the node, the faults the kernel log
//! showed in that boot (XIDs, SXids, uncorrectable AER, NIC faults). A kernel log forgets at
//! every reboot, so an XID 79 that comes back after each reboot looks new each time; with the
//! state, the run sees that it survived them (gpud escalates a fault that survives repeated
//! reboots the same way). Types and pure logic only; `source/state_dir.rs` reads and writes the
//! file, `checks/recurring.rs` judges.
//!
//! The file is bounded: at most [`MAX_BOOTS`] boots (the oldest dropped) and [`MAX_FAULTS`]
//! faults per boot, so it never grows with the node's age.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// What a source answers for the history: where it is, whether this run adds to it, and
/// what it holds (or why it could not be read).
pub type HistoryAnswer = (String, bool, Result<History, String>);

/// The file's format; another number is a foreign file, reported, never overwritten.
pub const FORMAT: u32 = 1;
/// What the file says it is, so an unrelated `history.json` is never taken for ours.
pub const KIND: &str = "gpudoctor-state";
/// Boots kept.
pub const MAX_BOOTS: usize = 32;
/// Faults kept per boot.
pub const MAX_FAULTS: usize = 256;
/// Boots whose start times differ by less than this are the same boot: the boot time is
/// computed as now minus uptime, which moves by the clock's adjustments between runs.
pub const SAME_BOOT_S: f64 = 120.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub kind: String,
    pub format: u32,
    /// Oldest first.
    pub boots: Vec<BootRecord>,
}

impl Default for History {
    fn default() -> Self {
        History {
            kind: KIND.to_string(),
            format: FORMAT,
            boots: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootRecord {
    /// When the boot started, Unix seconds (now minus uptime at the run).
    pub boot_unix: f64,
    /// Runs that saw this boot.
    pub runs: u32,
    /// When the last run of this boot was made (RFC 3339).
    pub last_run: String,
    /// Faults seen in this boot: `xid 79 0000:2a:00.0`, `sxid 12028 0000:05:00.0`,
    /// `aer fatal 0000:5d:00.0`, `nic probe 0000:03:00.0`.
    pub faults: BTreeSet<String>,
}

impl History {
    /// Add what this run saw in the boot that started at `boot_unix`: merged into that boot's
    /// record, or a new one (the oldest dropped past [`MAX_BOOTS`]).
    pub fn record(&mut self, boot_unix: f64, at: &str, faults: &BTreeSet<String>) {
        let at_index = match self
            .boots
            .iter()
            .position(|b| (b.boot_unix - boot_unix).abs() < SAME_BOOT_S)
        {
            Some(i) => i,
            None => {
                // Kept in boot order; a start time that is not a number sorts last.
                let i = self
                    .boots
                    .partition_point(|b| b.boot_unix.total_cmp(&boot_unix).is_lt());
                self.boots.insert(
                    i,
                    BootRecord {
                        boot_unix,
                        runs: 0,
                        last_run: String::new(),
                        faults: BTreeSet::new(),
                    },
                );
                i
            }
        };
        let rec = &mut self.boots[at_index];
        rec.runs = rec.runs.saturating_add(1);
        rec.last_run = at.to_string();
        for f in faults {
            if rec.faults.len() >= MAX_FAULTS {
                break;
            }
            rec.faults.insert(f.clone());
        }
        let excess = self.boots.len().saturating_sub(MAX_BOOTS);
        self.boots.drain(..excess);
    }

    /// In how many consecutive recorded boots, ending with the one that started at `boot_unix`,
    /// `fault` was seen (0 when not in that boot). A boot the state has no run of breaks the
    /// streak only if it was recorded: boots no run saw are unknown, not clean.
    pub fn streak(&self, boot_unix: f64, fault: &str) -> usize {
        let Some(end) = self
            .boots
            .iter()
            .position(|b| (b.boot_unix - boot_unix).abs() < SAME_BOOT_S)
        else {
            return 0;
        };
        self.boots[..=end]
            .iter()
            .rev()
            .take_while(|b| b.faults.contains(fault))
            .count()
    }

    /// Whether the file is ours, in a format this build reads.
    pub fn foreign(&self) -> Option<String> {
        if self.kind != KIND {
            return Some(format!("kind {:?}, not {KIND:?}", self.kind));
        }
        (self.format != FORMAT)
            .then(|| format!("format {}, this build reads {FORMAT}", self.format))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn runs_of_one_boot_merge_and_a_streak_counts_consecutive_boots() {
        let mut h = History::default();
        let xid = "xid 79 0000:2a:00.0";
        h.record(1000.0, "a", &faults(&[xid]));
        h.record(90_000.0, "b", &faults(&[xid]));
        // The same boot, its start computed 30 s later: merged.
        h.record(90_030.0, "c", &faults(&["aer fatal 0000:5d:00.0"]));
        h.record(200_000.0, "d", &faults(&[xid]));
        assert_eq!(h.boots.len(), 3);
        assert_eq!(h.boots[1].runs, 2);
        assert_eq!(h.streak(200_000.0, xid), 3);
        assert_eq!(h.streak(200_000.0, "aer fatal 0000:5d:00.0"), 0);
        assert_eq!(h.streak(90_000.0, "aer fatal 0000:5d:00.0"), 1);
        // A clean boot in between breaks it.
        h.record(300_000.0, "e", &faults(&[]));
        h.record(400_000.0, "f", &faults(&[xid]));
        assert_eq!(h.streak(400_000.0, xid), 1);
        assert_eq!(h.streak(123.0, xid), 0);
        // A boot time that is not a number (a damaged /proc/uptime) is kept, never a panic.
        h.record(f64::NAN, "g", &faults(&[xid]));
        assert_eq!(h.boots.len(), 6);
    }

    #[test]
    fn bounded_in_boots_and_faults() {
        let mut h = History::default();
        for i in 0..(MAX_BOOTS + 10) {
            let many: BTreeSet<String> =
                (0..MAX_FAULTS + 5).map(|k| format!("xid {k} x")).collect();
            h.record(i as f64 * 1000.0, "t", &many);
        }
        assert_eq!(h.boots.len(), MAX_BOOTS);
        assert_eq!(h.boots[0].boot_unix, 10_000.0);
        assert!(h.boots.iter().all(|b| b.faults.len() == MAX_FAULTS));
        let foreign = History {
            kind: "something".into(),
            ..History::default()
        };
        assert!(foreign.foreign().is_some());
        assert!(History::default().foreign().is_none());
    }
}
