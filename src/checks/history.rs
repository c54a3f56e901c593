//! History or live: for an event in the kernel log (an XID, an SXID, an AER report), how long
//! ago it was written and whether something since then means it no longer describes the device
//! (DESIGN "Time matters"; reference lines in facts/xid/events.rs). Shared by driver.xid_events,
//! nvlink.sxid_events and topology.aer_errors so the three say time the same way.
//!
//! An event is **history** when a later line of the log says the device was brought back: the
//! node booted again (or the event is stamped before the current boot), the NVIDIA driver
//! loaded, the device was enumerated again on PCI, a GPU reset was logged, the GPU's recovery
//! action went back to none (XID 154), or the port above it recovered from AER. Otherwise it is
//! **live**: nothing says the fault went away, however old it is.

use std::collections::BTreeMap;

use crate::facts::xid::{Clock, KernelLog, Marker, MarkerKind, Stamp, When, stamp};

/// A log, the node's clock, and how to name GPUs, for ageing events and finding what followed.
pub(crate) struct Timeline<'a> {
    pub log: &'a KernelLog,
    pub clock: Clock,
}

/// Why an event is history: what came after it, and when.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Since {
    /// The event was written in an earlier boot than the current one.
    EarlierBoot,
    /// A later line: its description ("the nvidia driver loaded 2 h ago").
    After(String),
}

impl Since {
    pub fn text(&self) -> String {
        match self {
            Since::EarlierBoot => "before the last reboot".to_string(),
            Since::After(what) => format!("before {what}"),
        }
    }
}

impl<'a> Timeline<'a> {
    pub fn new(log: &'a KernelLog, clock: Clock) -> Self {
        Timeline { log, clock }
    }

    /// How long ago a line of boot `boot` stamped `stamp` was written.
    pub fn when(&self, stamp: Option<&Stamp>, boot: u32) -> When {
        stamp::when(stamp, boot, self.log.boots, &self.clock)
    }

    /// When a line was written, RFC 3339 UTC, where its stamp and the node's clock say.
    pub fn seen_at(&self, stamp: Option<&Stamp>, boot: u32) -> Option<String> {
        match self.when(stamp, boot) {
            // A node clock past year 9999 is no time to show (`When::text` does the same).
            When::Ago { at: Some(t), .. } if t <= 253_402_300_799 => Some(crate::time::rfc3339(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t),
            )),
            _ => None,
        }
    }

    /// Whether an event at `line` of boot `boot` is history: earlier boot, or the first marker
    /// after it for which `applies` holds.
    pub fn history(
        &self,
        line: usize,
        stamp: Option<&Stamp>,
        boot: u32,
        applies: impl Fn(&Marker) -> bool,
    ) -> Option<Since> {
        if self.when(stamp, boot) == When::EarlierBoot {
            return Some(Since::EarlierBoot);
        }
        self.log
            .markers
            .iter()
            .find(|m| m.line_number > line && (m.kind == MarkerKind::Boot || applies(m)))
            .map(|m| Since::After(self.describe(m)))
    }

    /// "the nvidia driver loaded 2 h ago".
    pub fn describe(&self, m: &Marker) -> String {
        let what = match m.kind {
            MarkerKind::Boot => "the node booted".to_string(),
            MarkerKind::DriverLoad => "the nvidia driver loaded".to_string(),
            MarkerKind::PciEnumerated => format!(
                "{} was enumerated again on pci (reset or rescan)",
                m.device.as_deref().unwrap_or("the device")
            ),
            MarkerKind::NvswitchProbe => format!(
                "the nvswitch driver probed {} again",
                m.device.as_deref().unwrap_or("the switch")
            ),
            MarkerKind::ResetExecuted => {
                format!("a gpu reset of {}", m.uuid.as_deref().unwrap_or("the gpu"))
            }
            MarkerKind::AerRecovered => format!(
                "{} reported aer recovery successful",
                m.device.as_deref().unwrap_or("the port")
            ),
            MarkerKind::AerFailed => format!(
                "{} reported aer recovery failed",
                m.device.as_deref().unwrap_or("the port")
            ),
        };
        format!("{what} {}", self.when(m.stamp.as_ref(), m.boot).text())
    }

    /// What limits the ages this log can give, as notes for a summary: no timestamps, lines out
    /// of order, no uptime to measure against.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.log.lines > 0 && self.log.stamped_lines == 0 {
            notes.push("the kernel log has no timestamps, so no age can be given".to_string());
        }
        if self.log.out_of_order > 0 {
            notes.push(format!(
                "{} kernel-log line(s) stamped out of order: ages are approximate",
                self.log.out_of_order
            ));
        }
        if self.log.stamped_lines > 0 && self.clock.uptime_s.is_none() {
            notes.push("no /proc/uptime was read, so since-boot stamps have no age".to_string());
        }
        notes
    }
}

/// Events grouped by a key, each group counted live and history with its latest event.
pub(crate) struct Tally<'e, E> {
    pub live: usize,
    pub history: usize,
    /// The earliest event of the group.
    pub first: &'e E,
    /// The latest event, and why it is history (`None`: live).
    pub last: &'e E,
    pub last_since: Option<Since>,
    /// The latest live event.
    pub last_live: Option<&'e E>,
}

impl<'e, E> Tally<'e, E> {
    pub fn new(event: &'e E, since: Option<Since>) -> Self {
        let live = since.is_none();
        Tally {
            live: usize::from(live),
            history: usize::from(!live),
            first: event,
            last: event,
            last_since: since,
            last_live: live.then_some(event),
        }
    }

    pub fn add(&mut self, event: &'e E, since: Option<Since>) {
        if since.is_none() {
            self.live += 1;
            self.last_live = Some(event);
        } else {
            self.history += 1;
        }
        self.last = event;
        self.last_since = since;
    }

    pub fn count(&self) -> usize {
        self.live + self.history
    }

    /// Seen both before something that should have cleared it and after: it came back.
    pub fn recurring(&self) -> bool {
        self.live > 0 && self.history > 0
    }

    /// "×3 (2 live, 1 history)" / "×2".
    pub fn count_text(&self) -> String {
        if self.live > 0 && self.history > 0 {
            format!(
                "×{} ({} live, {} history)",
                self.count(),
                self.live,
                self.history
            )
        } else {
            format!("×{}", self.count())
        }
    }
}

/// Insert or extend the group `key`.
pub(crate) fn tally<'e, K: Ord, E>(
    groups: &mut BTreeMap<K, Tally<'e, E>>,
    key: K,
    event: &'e E,
    since: Option<Since>,
) {
    match groups.get_mut(&key) {
        Some(t) => t.add(event, since),
        None => {
            groups.insert(key, Tally::new(event, since));
        }
    }
}

/// The parsed kernel log, or what a check that reads only it says without one: skip when none
/// was recorded, an error naming it when it could not be read.
pub(crate) fn kernel_log_or_outcome<'c>(
    ctx: &'c crate::checks::Context<'_>,
) -> Result<&'c KernelLog, crate::checks::Outcome> {
    use crate::checks::Outcome;
    match ctx.kernel_events() {
        Some(log) => Ok(log),
        None => Err(match ctx.kernel_log() {
            Err(err) => Outcome::unreadable(&err.clone().into()),
            _ => Outcome::skip("no kernel log recorded"),
        }),
    }
}

/// What the kernel log's reader repaired or skipped (invalid bytes, the oldest part of a log over
/// the cap: `source/kernel_log.rs`), said in the summary and evidence of a check that judged the
/// rest of the log; its status is unchanged. An error or skip (no log judged) gets nothing.
pub(crate) fn noting_log_repairs(
    ctx: &crate::checks::Context<'_>,
    mut outcome: crate::checks::Outcome,
) -> crate::checks::Outcome {
    use crate::report::{Evidence, Status};
    let notes = ctx.source().kernel_log_notes();
    if notes.is_empty() || matches!(outcome.status, Status::Error | Status::Skip) {
        return outcome;
    }
    let from = ctx.kernel_log_origin();
    outcome.summary = format!("{}{}", outcome.summary, parenthesised(&notes));
    outcome.evidence.extend(
        notes
            .iter()
            .map(|n| Evidence::new(from.as_str(), n.as_str())),
    );
    outcome
}

/// Notes for the end of a summary: ` (a; b)`, or nothing.
pub(crate) fn parenthesised(notes: &[String]) -> String {
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    }
}
