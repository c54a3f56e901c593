//! When a kernel-log line was written, as far as its prefix says, and how long ago that is.
//!
//! The prefixes the parser accepts (mod.rs) carry four kinds of time:
//! - seconds since boot: the raw `/dev/kmsg` `<usec>` field (`Documentation/ABI/testing/dev-kmsg`),
//!   `dmesg`'s `[  123.456789]`, and the same stamp inside a syslog line;
//! - a wall-clock date: `dmesg -T` (`[Mon Nov 30 07:01:02 2026]`), syslog and `journalctl`'s
//!   short form (`Nov 30 07:01:02`, no year), `journalctl -o short-iso`
//!   (`2026-11-30T07:01:02+0000`), and `dmesg -H`'s minute lines (`[Nov30 07:01]`);
//! - `dmesg -H`'s deltas (`[  +0.000844]`), seconds after the line before: they add up from the
//!   last absolute stamp;
//! - nothing at all (a bare `NVRM:` line).
//!
//! A stamp becomes an age only against the node's clock ([`Clock`]: `/proc/uptime`, the boot
//! time from `/proc/stat`, and now), which the caller supplies: parsing stays pure. Dates
//! without a zone are the node's local time, which no file under the root states simply; they
//! are read as UTC and the age says it is approximate. Dates without a year take the latest
//! year that does not put them in the future.

use serde::Serialize;

/// The time a prefix gives one line (dmesg -H deltas already added to their anchor).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stamp {
    /// Seconds since the boot that wrote the line.
    SinceBoot(f64),
    /// A calendar date and time.
    Wall(WallTime),
}

impl Stamp {
    /// This stamp `secs` later (a `dmesg -H` delta added).
    pub(super) fn plus(self, secs: f64) -> Stamp {
        match self {
            Stamp::SinceBoot(t) => Stamp::SinceBoot(t + secs),
            Stamp::Wall(mut w) => {
                w.plus += secs;
                Stamp::Wall(w)
            }
        }
    }
}

/// A calendar stamp as printed, resolved against a clock only when an age is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WallTime {
    /// `None` for syslog and `dmesg -H` dates, which print none.
    pub year: Option<i32>,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    /// Seconds east of UTC when the stamp says (`+0000`, `Z`); `None`: the node's local time.
    pub offset_s: Option<i32>,
    /// Seconds added by `dmesg -H` delta lines after this stamp.
    pub plus: f64,
}

/// What the prefix of one line says about its time, before deltas are added up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum RawStamp {
    Absolute(Stamp),
    /// `dmesg -H`: seconds after the previous line.
    Delta(f64),
}

/// Read the stamp text the parser keeps (`timestamp` on events): the kmsg `<usec>` digits, a
/// bracketed dmesg stamp, or a syslog/journal date. `None` for anything else.
pub(super) fn parse_stamp(text: &str) -> Option<RawStamp> {
    let text = text.trim();
    if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()) {
        let usec: u64 = text.parse().ok()?;
        return Some(RawStamp::Absolute(Stamp::SinceBoot(usec as f64 / 1e6)));
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let inner = inner.trim();
        if let Some(delta) = inner.strip_prefix('+') {
            return seconds(delta).map(RawStamp::Delta);
        }
        if let Some(secs) = seconds(inner) {
            return Some(RawStamp::Absolute(Stamp::SinceBoot(secs)));
        }
        return dmesg_date(inner).map(|w| RawStamp::Absolute(Stamp::Wall(w)));
    }
    iso_date(text)
        .or_else(|| syslog_date(text))
        .map(|w| RawStamp::Absolute(Stamp::Wall(w)))
}

/// `123.456789`: non-negative decimal seconds (finite, below a century).
fn seconds(text: &str) -> Option<f64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    (value.is_finite() && value < 3.2e9).then_some(value)
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// `Nov` -> 11 (also journalctl's localised `jan.`).
fn month(name: &str) -> Option<u8> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let lower = name.get(..3)?.to_ascii_lowercase();
    if name.len() != 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| *m == lower)
        .and_then(|i| u8::try_from(i + 1).ok())
}

/// `07:01:02` (seconds optional when `allow_short`), fractions dropped.
fn clock(text: &str, allow_short: bool) -> Option<(u8, u8, u8)> {
    let text = text.split('.').next()?;
    let mut parts = text.split(':');
    let h: u8 = two_digits(parts.next()?)?;
    let m: u8 = two_digits(parts.next()?)?;
    let s: u8 = match parts.next() {
        Some(s) => two_digits(s)?,
        None if allow_short => 0,
        None => return None,
    };
    if parts.next().is_some() || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some((h, m, s))
}

fn two_digits(text: &str) -> Option<u8> {
    (text.len() == 2 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

fn day_of_month(text: &str) -> Option<u8> {
    let day: u8 = (!text.is_empty() && text.len() <= 2 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()?;
    (1..=31).contains(&day).then_some(day)
}

fn wall(year: Option<i32>, month: u8, day: u8, (hour, minute, second): (u8, u8, u8)) -> WallTime {
    WallTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
        offset_s: None,
        plus: 0.0,
    }
}

/// Inside dmesg brackets: `Mon Nov 30 07:01:02 2026` (`-T`) or `Nov30 07:01` (`-H`).
fn dmesg_date(inner: &str) -> Option<WallTime> {
    let words: Vec<&str> = inner.split_whitespace().collect();
    match words.as_slice() {
        [_weekday, mon, day, time, year] => {
            let year: i32 = year.parse().ok().filter(|y| (1970..=9999).contains(y))?;
            Some(wall(
                Some(year),
                month(mon)?,
                day_of_month(day)?,
                clock(time, false)?,
            ))
        }
        [monday, time] => {
            let (mon, day) = monday.split_at(monday.find(|c: char| c.is_ascii_digit())?);
            Some(wall(
                None,
                month(mon)?,
                day_of_month(day)?,
                clock(time, true)?,
            ))
        }
        _ => None,
    }
}

/// Syslog / journal short: `Nov 30 07:01:02` (also `Nov  3 07:01:02.123456`).
fn syslog_date(text: &str) -> Option<WallTime> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [mon, day, time] => Some(wall(
            None,
            month(mon)?,
            day_of_month(day)?,
            clock(time, false)?,
        )),
        _ => None,
    }
}

/// `2026-11-30T07:01:02+0000`, `2026-11-30T07:01:02.123+01:00`, `...Z` (journalctl short-iso,
/// RFC 3339), or the same without a zone.
fn iso_date(text: &str) -> Option<WallTime> {
    let (date, rest) = text.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-');
    let year: i32 = d.next().filter(|y| y.len() == 4)?.parse().ok()?;
    let month: u8 = two_digits(d.next()?)?;
    let day: u8 = two_digits(d.next()?)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    let (time, offset) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, Some(0))
    } else if let Some(at) = rest.rfind(['+', '-']) {
        let (t, zone) = rest.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
        if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let h: i32 = digits[..2].parse().ok()?;
        let m: i32 = digits[2..].parse().ok()?;
        (t, Some(sign * (h * 3600 + m * 60)))
    } else {
        (rest, None)
    };
    let mut w = wall(Some(year), month, day, clock(time, false)?);
    w.offset_s = offset;
    Some(w)
}

impl WallTime {
    /// Seconds since the epoch in `year` (the stamp's own year when it has one), local dates
    /// read as UTC.
    fn unix_in(&self, year: i32) -> f64 {
        let days = days_from_civil(
            i64::from(self.year.unwrap_or(year)),
            i64::from(self.month),
            i64::from(self.day),
        );
        let secs = days * 86_400
            + i64::from(self.hour) * 3_600
            + i64::from(self.minute) * 60
            + i64::from(self.second)
            - i64::from(self.offset_s.unwrap_or(0));
        secs as f64 + self.plus
    }

    /// Seconds since the epoch; a date without a year takes the latest year that is not more
    /// than a day after `now`.
    pub fn unix(&self, now: f64) -> f64 {
        if self.year.is_some() {
            return self.unix_in(0);
        }
        let this_year = year_of(now);
        let t = self.unix_in(this_year);
        if t > now + 86_400.0 {
            self.unix_in(this_year - 1)
        } else {
            t
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`,
/// http://howardhinnant.github.io/date_algorithms.html; crate::time uses the same).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The calendar year of a Unix time (UTC).
fn year_of(unix: f64) -> i32 {
    let days = (unix / 86_400.0).floor() as i64;
    // civil_from_days, year only.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    i32::try_from(yoe + era * 400 + i64::from(month <= 2)).unwrap_or(1970)
}

/// The node's clock, for turning stamps into ages: `/proc/uptime`, the boot time (`btime` of
/// `/proc/stat`) and now. In a capture "now" is the moment it was recorded (boot time plus
/// uptime), so a replay computes the ages the live run did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    pub uptime_s: Option<f64>,
    pub boot_unix: Option<f64>,
    pub now_unix: Option<f64>,
}

/// How long ago a line was written.
#[derive(Debug, Clone, PartialEq)]
pub enum When {
    /// Seconds ago; `approximate` when a zone-less date was read as UTC; `at`, the Unix time it
    /// was written, when the node's clock was read (a ticket read hours later needs the time,
    /// not only the age).
    Ago {
        secs: f64,
        approximate: bool,
        at: Option<u64>,
    },
    /// Before the node's current boot (an earlier boot's log, or stamped past the uptime).
    EarlierBoot,
    /// Cannot tell, and why ("no timestamp", "no /proc/uptime").
    Unknown(&'static str),
}

impl When {
    /// Seconds ago, when known.
    pub fn secs(&self) -> Option<f64> {
        match self {
            When::Ago { secs, .. } => Some(*secs),
            _ => None,
        }
    }

    /// "3 min ago", "before the last reboot", "at an unknown time (no timestamp)".
    pub fn text(&self) -> String {
        match self {
            When::Ago {
                secs,
                approximate,
                at,
            } => {
                let ago = crate::time::ago(*secs);
                // A node clock past year 9999 is no time to show (and would overflow
                // `SystemTime`).
                let at = at
                    .filter(|t| *t <= 253_402_300_799)
                    .map(|t| {
                        format!(
                            " ({})",
                            crate::time::rfc3339(
                                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t)
                            )
                        )
                    })
                    .unwrap_or_default();
                if *approximate {
                    format!("{ago}{at} (local time read as UTC)")
                } else {
                    format!("{ago}{at}")
                }
            }
            When::EarlierBoot => "before the last reboot".to_string(),
            When::Unknown(why) => format!("at an unknown time ({why})"),
        }
    }
}

/// How long ago a line of boot `boot` (of `boots` in the log) stamped `stamp` was written.
pub fn when(stamp: Option<&Stamp>, boot: u32, boots: u32, clock: &Clock) -> When {
    if boot + 1 < boots {
        return When::EarlierBoot;
    }
    match stamp {
        None => When::Unknown("the line has no timestamp"),
        Some(Stamp::SinceBoot(t)) => match clock.uptime_s {
            // Two seconds of slack: the log and /proc/uptime are read a moment apart.
            Some(up) if *t > up + 2.0 => When::EarlierBoot,
            Some(up) => {
                let secs = (up - t).max(0.0);
                When::Ago {
                    secs,
                    approximate: false,
                    at: clock.now_unix.map(|now| (now - secs).max(0.0) as u64),
                }
            }
            None => When::Unknown("no /proc/uptime to measure it against"),
        },
        Some(Stamp::Wall(w)) => {
            let Some(now) = clock.now_unix else {
                return When::Unknown("the node's clock was not read");
            };
            let t = w.unix(now);
            let approximate = w.offset_s.is_none();
            // A local time read as UTC is off by at most the widest zone offsets (UTC-12 to
            // UTC+14): a stamp further than that before the boot is still an earlier boot.
            let slack = if approximate {
                14.0 * 3600.0 + 2.0
            } else {
                2.0
            };
            if let Some(boot) = clock.boot_unix
                && t < boot - slack
            {
                return When::EarlierBoot;
            }
            if t > now + 86_400.0 {
                return When::Unknown("stamped after the node's clock");
            }
            When::Ago {
                secs: (now - t).max(0.0),
                approximate,
                at: Some(t.clamp(0.0, now) as u64),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(text: &str) -> Stamp {
        match parse_stamp(text) {
            Some(RawStamp::Absolute(s)) => s,
            other => panic!("{text:?} -> {other:?}"),
        }
    }

    #[test]
    fn reads_every_prefix_style_the_parser_keeps() {
        assert_eq!(abs("123456789"), Stamp::SinceBoot(123.456789));
        assert_eq!(abs("[  123.456789]"), Stamp::SinceBoot(123.456789));
        assert_eq!(abs("[ 12.345678]"), Stamp::SinceBoot(12.345678));
        let t = abs("[Mon Nov 30 07:01:02 2026]");
        let Stamp::Wall(w) = t else { panic!() };
        assert_eq!(
            (w.year, w.month, w.day, w.hour, w.minute, w.second),
            (Some(2026), 11, 30, 7, 1, 2)
        );
        let Stamp::Wall(w) = abs("Nov 30 07:01:02") else {
            panic!()
        };
        assert_eq!((w.year, w.month, w.day), (None, 11, 30));
        let Stamp::Wall(w) = abs("Jan  3 07:01:02.123456") else {
            panic!()
        };
        assert_eq!((w.month, w.day, w.second), (1, 3, 2));
        let Stamp::Wall(w) = abs("2026-11-30T07:01:02+0000") else {
            panic!()
        };
        assert_eq!((w.year, w.offset_s), (Some(2026), Some(0)));
        let Stamp::Wall(w) = abs("2026-11-30T08:01:02.5+01:00") else {
            panic!()
        };
        assert_eq!(w.offset_s, Some(3600));
        let Stamp::Wall(w) = abs("[Jan21 10:15]") else {
            panic!()
        };
        assert_eq!(
            (w.month, w.day, w.hour, w.minute, w.second),
            (1, 21, 10, 15, 0)
        );
        assert_eq!(
            parse_stamp("[  +0.000844]"),
            Some(RawStamp::Delta(0.000844))
        );
    }

    #[test]
    fn an_age_from_a_clock_no_calendar_holds_shows_no_time() {
        let when = When::Ago {
            secs: 60.0,
            approximate: false,
            at: Some(u64::MAX),
        };
        assert_eq!(when.text(), "1 min ago");
    }

    #[test]
    fn junk_stamps_are_none() {
        for bad in [
            "",
            "[]",
            "[abc]",
            "[-1.0]",
            "[+x]",
            "Foo 30 07:01:02",
            "Nov 32 07:01:02",
            "Nov 30 25:01:02",
            "2026-13-30T07:01:02Z",
            "2026-11-30T07:01:02+99",
            "[Mon Nov 30 07:01:02 0]",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_stamp(bad), None, "{bad:?}");
        }
    }

    const NOW: f64 = 1_796_023_568.0; // 2026-11-30T07:26:08Z

    #[test]
    fn ages_against_the_clock() {
        let clock = Clock {
            uptime_s: Some(1000.0),
            boot_unix: Some(NOW - 1000.0),
            now_unix: Some(NOW),
        };
        let ago = |s: &Stamp| when(Some(s), 0, 1, &clock);
        assert_eq!(ago(&Stamp::SinceBoot(880.0)).secs(), Some(120.0));
        assert_eq!(ago(&Stamp::SinceBoot(5000.0)), When::EarlierBoot);
        let w = abs("2026-11-30T07:21:08Z");
        assert_eq!(ago(&w).secs(), Some(300.0));
        // Before the boot: an earlier boot's line.
        assert_eq!(ago(&abs("2026-11-29T07:21:08Z")), When::EarlierBoot);
        // No year: this year, read as UTC, said to be approximate.
        let local = ago(&abs("Nov 30 07:16:08"));
        assert_eq!(
            local,
            When::Ago {
                secs: 600.0,
                approximate: true,
                at: crate::time::unix_seconds("2026-11-30T07:16:08Z"),
            }
        );
        // No year, later in the calendar than now: last year (so before this boot).
        assert_eq!(ago(&abs("Dec 31 23:00:00")), When::EarlierBoot);
        // A local time read as UTC may be off by a zone's offset, up to 14 h: within that of
        // the boot it is not called an earlier boot, beyond it it is.
        assert!(ago(&abs("Nov 29 22:00:00")).secs().is_some());
        assert_eq!(ago(&abs("Nov 29 17:00:00")), When::EarlierBoot);
        let long_up = Clock {
            uptime_s: Some(400.0 * 86_400.0),
            boot_unix: Some(NOW - 400.0 * 86_400.0),
            now_unix: Some(NOW),
        };
        let last_year = when(Some(&abs("Dec 31 23:00:00")), 0, 1, &long_up);
        assert!(last_year.secs().unwrap() > 300.0 * 86_400.0);
        // An earlier boot segment of the same log.
        assert_eq!(
            when(Some(&Stamp::SinceBoot(1.0)), 0, 2, &clock),
            When::EarlierBoot
        );
        assert_eq!(
            when(None, 0, 1, &clock),
            When::Unknown("the line has no timestamp")
        );
        let no_uptime = Clock::default();
        assert!(matches!(
            when(Some(&Stamp::SinceBoot(1.0)), 0, 1, &no_uptime),
            When::Unknown(_)
        ));
    }
}
