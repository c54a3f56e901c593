//! UTC timestamps as RFC 3339 text (`2026-11-30T07:26:08Z`), both ways, without a date crate:
//! the report's `generated_at` is written here and read back by the Prometheus renderer. Only the
//! UTC `Z` form this module writes is promised to parse; it reads no clock but the one it is given.
//! Also the short ages findings print ("3 min ago").

use std::time::{SystemTime, UNIX_EPOCH};

/// `time` as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds). Times before 1970 print as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp: `Z` or a `±HH:MM` offset, optional
/// fractional seconds (dropped). `None` for anything else or a time before 1970.
pub fn unix_seconds(text: &str) -> Option<u64> {
    let text = text.trim();
    let (date, rest) = text.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let year: i64 = number(d.next()?, 4)?;
    let month: i64 = number(d.next()?, 2)?;
    let day: i64 = number(d.next()?, 2)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Split the clock from its offset: `Z`, `+HH:MM` or `-HH:MM`.
    let (clock, offset_secs) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = rest.rfind(['+', '-'])?;
        let (clock, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, m) = offset.get(1..)?.split_once(':')?;
        (clock, sign * (number(h, 2)? * 3_600 + number(m, 2)? * 60))
    };
    let clock = clock.split('.').next()?;
    let mut c = clock.splitn(3, ':');
    let hour: i64 = number(c.next()?, 2)?;
    let minute: i64 = number(c.next()?, 2)?;
    let second: i64 = number(c.next()?, 2)?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
        - offset_secs;
    u64::try_from(secs).ok()
}

/// A duration as a short age: "45 s ago", "3 min ago", "5 h ago", "2 days ago".
pub fn ago(secs: f64) -> String {
    format!("{} ago", span(secs))
}

/// A duration in its largest unit, rounded: "45 s", "3 min", "5 h" (below two days),
/// "2 days". Negative or non-finite durations read as zero.
pub fn span(secs: f64) -> String {
    let s = if secs.is_finite() && secs > 0.0 {
        secs
    } else {
        0.0
    };
    if s < 59.5 {
        format!("{} s", s.round() as u64)
    } else if s < 3_570.0 {
        format!("{} min", (s / 60.0).round() as u64)
    } else if s < 2.0 * 86_400.0 - 1_800.0 {
        format!("{} h", (s / 3_600.0).round() as u64)
    } else {
        format!("{} days", (s / 86_400.0).round() as u64)
    }
}

/// A field of exactly `width` ASCII digits.
fn number(text: &str, width: usize) -> Option<i64> {
    if text.len() != width || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`, http://howardhinnant.github.io/date_algorithms.html).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse of [`civil_from_days`] (`days_from_civil`, same source).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_utc_times() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_796_023_568)),
            "2026-11-30T07:26:08Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn ages_in_their_largest_unit() {
        assert_eq!(ago(0.4), "0 s ago");
        assert_eq!(ago(59.0), "59 s ago");
        assert_eq!(ago(59.9), "1 min ago");
        assert_eq!(ago(179.9), "3 min ago");
        assert_eq!(ago(3_600.0 * 5.4), "5 h ago");
        assert_eq!(ago(86_400.0 * 1.9), "46 h ago");
        assert_eq!(ago(172_799.9), "2 days ago");
        assert_eq!(ago(86_400.0 * 90.0), "90 days ago");
        assert_eq!(span(-3.0), "0 s");
        assert_eq!(span(f64::NAN), "0 s");
    }

    #[test]
    fn parses_what_it_writes_and_offsets() {
        for secs in [0, 951_782_400, 1_767_225_600, 1_796_023_568, 4_102_444_800] {
            let text = rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(unix_seconds(&text), Some(secs), "{text}");
        }
        assert_eq!(
            unix_seconds("2026-01-01T02:00:00.123+02:00"),
            Some(1_767_225_600)
        );
        assert_eq!(
            unix_seconds("2025-12-31T19:30:00-04:30"),
            Some(1_767_225_600)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-01-01",
            "2026-01-01T00:00Z",
            "1969-12-31T23:59:59Z",
            "2026-01-01T00:00:00",
            "2026-1-01T00:00:00Z",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad:?}");
        }
    }
}
