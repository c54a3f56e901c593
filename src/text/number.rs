//! Numbers as people read them, bounded in length whatever the value: a figure or a gauge read
//! from a saved report or a Prometheus series can be anything a float holds (`1e308`, `NaN`,
//! `+Inf`, a string of 400 digits parsed to the largest finite float), and Rust's `{:.1}` writes
//! `1e308` as 309 digits. Plain functions of numbers; nothing here knows a report.

/// Beyond this magnitude a number is written in scientific notation: fifteen digits are as many
/// as an `f64` holds exactly (`f64::DIGITS`), and more than any real figure here needs.
const PLAIN_BELOW: f64 = 1e15;

/// `v` with at most one decimal (`482.3`, `12`); past 10^15 in scientific notation with four
/// significant digits (`1e308`, `-1.235e20`); `NaN`, `+Inf` and `-Inf` as Prometheus writes
/// them. Never longer than 21 characters.
pub fn short(v: f64) -> String {
    let text = one_decimal(v);
    match text.strip_suffix(".0") {
        Some(whole) => whole.to_string(),
        None => text,
    }
}

/// [`short`] keeping the decimal of a whole number (`4.0`), as `{:.1}` writes it.
pub fn one_decimal(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if v.abs() >= PLAIN_BELOW {
        let text = format!("{v:.3e}");
        return match text.split_once('e') {
            Some((mantissa, exponent)) => {
                let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
                format!("{mantissa}e{exponent}")
            }
            None => text,
        };
    }
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_short() {
        assert_eq!(short(482.34), "482.3");
        assert_eq!(short(12.0), "12");
        assert_eq!(one_decimal(12.0), "12.0");
        assert_eq!(one_decimal(-4.25), "-4.2");
        assert_eq!(one_decimal(1e300), "1e300");
        assert_eq!(short(0.04), "0");
        assert_eq!(short(999_999_999_999_999.0), "999999999999999");
        assert_eq!(short(1e15), "1e15");
        assert_eq!(short(1e308), "1e308");
        assert_eq!(short(-1.23456e20), "-1.235e20");
        assert_eq!(short(f64::MAX), "1.798e308");
        assert_eq!(short(f64::NAN), "NaN");
        assert_eq!(short(f64::INFINITY), "+Inf");
        assert_eq!(short(f64::NEG_INFINITY), "-Inf");
        // A string of 400 digits, as a Prometheus sample can be: parsed, it is +Inf.
        let huge: f64 = "9".repeat(400).parse().unwrap();
        assert_eq!(short(huge), "+Inf");
        for v in [
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            1e-300,
            123.456e200,
        ] {
            assert!(short(v).len() <= 21, "{v}: {}", short(v));
        }
    }
}
