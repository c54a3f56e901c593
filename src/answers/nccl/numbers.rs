//! Numbers of result rows read from their bytes (issues 28, 41): exactly what `str::parse`
//! gives (`u64`, `i64`, `f64`), computed here for the shapes nccl-tests prints and left to std
//! for any other.
//!
//! A row holds a dozen numbers; read a digit at a time they were a third of a table-dense run
//! (callgrind). A field of up to 8 digits (and a point) is read in one go: loaded as a word,
//! checked for digits and converted with three multiplications (the method of Lemire's "Fast
//! numeric string to int", used by simdjson and fast_float). That needs the 8 bytes from the
//! field's start, which a field inside a line has; a field at the line's end takes the digit
//! loop.

/// ASCII `0` in every byte.
const ZEROS: u64 = 0x3030_3030_3030_3030;
const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;

/// `text.parse::<u64>()` of the bytes of a text (or of a piece of one cut at char boundaries).
pub(super) fn parse_u64_bytes(b: &[u8]) -> Option<u64> {
    parse_u64_at(b, b.len())
}

/// [`parse_u64_bytes`] of `window[..len]`, the window running on past the field (a row's rest):
/// up to 16 digits in at most two words, up to 19 (never overflowing) a digit at a time.
pub(super) fn parse_u64_at(window: &[u8], len: usize) -> Option<u64> {
    let b = window.get(..len)?;
    if (1..=8).contains(&len)
        && let Some(x) = word(window, 0)
    {
        return eight_digits(x, len).or_else(|| std_parse(b));
    }
    if (9..=16).contains(&len)
        && let (Some(high), Some(low)) = (word(window, 0), word(window, len - 8))
    {
        let value = eight_digits(high, len - 8)
            .zip(eight_digits(low, 8))
            .map(|(high, low)| high * 100_000_000 + low);
        return value.or_else(|| std_parse(b));
    }
    if b.is_empty() || b.len() > 19 {
        return std_parse(b);
    }
    let (n, digits) = leading_digits(b, 0);
    if digits != b.len() {
        return std_parse(b);
    }
    Some(n)
}

/// `text.parse::<i64>()` of the bytes of a text: `-` and up to 18 digits are read here.
pub(super) fn parse_i64_bytes(b: &[u8]) -> Option<i64> {
    let (negative, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let (n, count) = leading_digits(digits, 0);
    if digits.is_empty() || digits.len() > 18 || count != digits.len() {
        return std_parse(b);
    }
    // Below 10^18: fits, and so does its negation.
    let n = n as i64;
    Some(if negative { -n } else { n })
}

/// `str::parse` of bytes that are a text; `None` when they are not one (they always are here:
/// fields are cut at ASCII bytes of a `&str`).
fn std_parse<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Exact powers of ten as `f64` (every one up to 1e22 is representable).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `text.parse::<f64>()` of the bytes of a text (or of a piece of one cut at char
/// boundaries). A plain decimal (`482.27`, `-1`, `0.51`, `5.`, `.5`) whose digits
/// make an integer below 2^53 with at most 22 of them after the point is that integer divided
/// by a power of ten: both exact as `f64`, so the one division is correctly rounded — the same
/// value std's correctly rounded parser gives (Clinger's fast path, which std takes too). Every
/// other shape (exponents, `inf`, `nan`, long mantissas, a `+`) goes to std.
pub(super) fn parse_f64_bytes(b: &[u8]) -> Option<f64> {
    parse_f64_at(b, b.len())
}

/// [`parse_f64_bytes`] of `window[..len]`, the window running on past the field.
///
/// The shape of nearly every timed figure (`183.49`, `0.00`, `15668.1`: up to 8 bytes, digits
/// and at most one point, no sign, 8 bytes to load) is read inline here; anything else out of
/// line ([`parse_f64_other`]). One function for all shapes cost ~110 instructions a figure,
/// six a row (issue 41, callgrind).
#[inline]
pub(super) fn parse_f64_at(window: &[u8], len: usize) -> Option<f64> {
    if (1..=8).contains(&len)
        && let Some(x) = word(window, 0)
        && let Some((mantissa, decimals)) = decimal_word(x, len)
    {
        // At most 7 digits after the point (8 bytes, one of them the point): `& 7` changes no
        // index and spares the bounds check.
        // Below 10^8: as `i64`, one conversion instruction (`u64` to `f64` takes a branch).
        return Some(mantissa as i64 as f64 / POW10[decimals & 7]);
    }
    parse_f64_other(window, len)
}

/// [`parse_f64_at`] of every other shape.
#[inline(never)]
fn parse_f64_other(window: &[u8], len: usize) -> Option<f64> {
    match plain_decimal(window, len) {
        Some((negative, mantissa, decimals)) => {
            // 15 digits or fewer: below 10^15 < 2^53, so the conversion is exact.
            let value = mantissa as f64 / POW10[decimals];
            Some(if negative { -value } else { value })
        }
        None => std_parse(window.get(..len)?),
    }
}

/// `window[..len]` as a plain decimal: its sign, its digits as an integer (at most 15) and
/// how many follow the point; `None` for any other shape.
#[inline]
fn plain_decimal(window: &[u8], len: usize) -> Option<(bool, u64, usize)> {
    let b = window.get(..len)?;
    let negative = b.first() == Some(&b'-');
    let sign = usize::from(negative);
    let body = len - sign;
    // Up to 8 bytes of digits and at most one point, in one word.
    if (1..=8).contains(&body)
        && let Some(x) = word(window, sign)
        && let Some((mantissa, decimals)) = decimal_word(x, body)
    {
        return Some((negative, mantissa, decimals));
    }
    let digits = &b[sign..];
    // Digits, a point, digits: two tight loops (one branch a digit) instead of one that asks
    // of every byte whether it is the point.
    let (mantissa, whole) = leading_digits(digits, 0);
    let rest = &digits[whole..];
    let (mantissa, decimals, used) = match rest.first() {
        Some(b'.') => {
            let (m, n) = leading_digits(&rest[1..], mantissa);
            (m, n, whole + 1 + n)
        }
        _ => (mantissa, 0, whole),
    };
    let count = whole + decimals;
    (used == digits.len() && count > 0 && count <= 15).then_some((negative, mantissa, decimals))
}

/// The 8 bytes of `window` from `at`, as a little-endian word (the first byte lowest).
#[inline]
fn word(window: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = window.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// The `len` (1..=8) bytes at the bottom of `x` as a decimal with at most one point: its
/// digits as an integer and how many follow the point; `None` for any other shape (the digit
/// loop decides those).
#[inline(always)]
fn decimal_word(x: u64, len: usize) -> Option<(u64, usize)> {
    // The lowest `.` byte: the lowest zero byte of `x ^ '.'`s (exact for the lowest one).
    let t = x ^ 0x2E2E_2E2E_2E2E_2E2E;
    let zero = t.wrapping_sub(0x0101_0101_0101_0101) & !t & 0x8080_8080_8080_8080;
    let point = (zero.trailing_zeros() / 8) as usize;
    if point >= len {
        return eight_digits(x, len).map(|n| (n, 0));
    }
    // The point taken out: the bytes above it move down one (`point` is below 8 here, so the
    // shift is too; no branch for a point in front).
    let below_mask = (1u64 << (8 * point)) - 1;
    let below = x & below_mask;
    let above = (x >> 8) & !below_mask;
    let digits = len - 1;
    if digits == 0 {
        return None;
    }
    // A second point is not a digit: `eight_digits` refuses it.
    eight_digits(below | above, digits).map(|n| (n, digits - point))
}

/// The value of the `n` (1..=8) ASCII decimal digits at the bottom of `x` (the first digit in
/// the lowest byte); `None` when one of them is not a digit. Bytes above them are ignored.
#[inline(always)]
fn eight_digits(x: u64, n: usize) -> Option<u64> {
    // Moved to the top, with `0`s below: leading zeros, the value unchanged. `ZEROS >> (64 -
    // pad)` as two shifts that stay below 64 (none for `pad == 0`: the top bit of `ZEROS` is
    // clear), without a branch.
    let pad = (8 * (8 - n)) as u32;
    let y = (x << pad) | ((ZEROS >> 1) >> (63 - pad));
    // Every byte 0x30..=0x3F, and still so with 6 added: 0x30..=0x39.
    let digits =
        y & HIGH_NIBBLES == ZEROS && y.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES == ZEROS;
    if !digits {
        return None;
    }
    let v = y.wrapping_sub(ZEROS);
    // Pairs, then fours, then the eight.
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    const MUL1: u64 = 100 + (1_000_000 << 32);
    const MUL2: u64 = 1 + (10_000 << 32);
    Some(
        (v & MASK)
            .wrapping_mul(MUL1)
            .wrapping_add(((v >> 16) & MASK).wrapping_mul(MUL2))
            >> 32,
    )
}

/// The decimal digits `bytes` starts with, appended to `mantissa`, and how many there were.
/// Wrapping: a mantissa of more than 15 digits is never used (std parses those).
#[inline]
fn leading_digits(bytes: &[u8], mut mantissa: u64) -> (u64, usize) {
    let mut n = 0;
    for &c in bytes {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d));
        n += 1;
    }
    (mantissa, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_u64(text: &str) -> Option<u64> {
        parse_u64_bytes(text.as_bytes())
    }

    fn parse_f64(text: &str) -> Option<f64> {
        parse_f64_bytes(text.as_bytes())
    }

    const NUMBERS: &[&str] = &[
        "0",
        "00",
        "-0",
        "1",
        "-1",
        "+1",
        "482.27",
        "0.51",
        "0.00",
        "1252.70",
        "31161.0",
        "62340.7",
        "5.",
        ".5",
        ".",
        "-",
        "-.",
        "",
        " 1",
        "1 ",
        "1e+00",
        "0e+00",
        "2e-07",
        "1.2e+04",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "infinity",
        "N/A",
        "1.2.3",
        "1..2",
        "12a",
        "0x10",
        "999999999999999",
        "9999999999999999",
        "12345678901234567890",
        "18446744073709551615",
        "18446744073709551616",
        "0.000000000000000000001",
        "0.0000000000000000000001",
        "0.00000000000000000000001",
        "123456.789012345",
        "1234567.89012345",
        "0.1",
        "0.2",
        "0.3",
        "2.675",
        "1.005",
        "9007199254740993",
        "0.30000000000000004",
        "17179869184",
        "2147483648",
        "-1.5",
        "--1",
        "1-",
        "٣",
    ];

    #[test]
    fn numbers_parse_as_std_parses_them() {
        for t in NUMBERS {
            let want: Option<f64> = t.parse().ok();
            let got = parse_f64(t);
            assert_eq!(
                got.map(f64::to_bits),
                want.map(f64::to_bits),
                "f64 {t:?}: {got:?} vs {want:?}"
            );
            assert_eq!(parse_u64(t), t.parse::<u64>().ok(), "u64 {t:?}");
        }
        // Every two-decimal figure up to 10 000 and every one-decimal time up to 100 000, as
        // nccl-tests prints them.
        for i in 0..1_000_000u64 {
            for t in [
                format!("{}.{:02}", i / 100, i % 100),
                format!("{}.{}", i / 10, i % 10),
            ] {
                assert_eq!(parse_f64(&t), t.parse().ok(), "{t}");
            }
        }
    }

    /// The word paths (a field with the rest of its line after it) give what the digit loop and
    /// std give: every number above, behind and before other bytes, and numbers of every length.
    #[test]
    fn numbers_in_a_window_parse_as_std_parses_them() {
        let mut texts: Vec<String> = NUMBERS.iter().map(|t| t.to_string()).collect();
        for len in 1..=20 {
            texts.push("9".repeat(len));
            texts.push(format!("1{}", "0".repeat(len - 1)));
            for point in 0..=len {
                let digits: String = (0..len).map(|i| char::from(b'1' + (i % 9) as u8)).collect();
                texts.push(format!("{}.{}", &digits[..point], &digits[point..]));
                texts.push(format!("-{}.{}", &digits[..point], &digits[point..]));
            }
        }
        for t in [
            "1.2.3", "12.3.", "..", "1..", "9/9", "1:2", "12345.6/", "0x12", "1 2",
        ] {
            texts.push(t.to_string());
        }
        for t in &texts {
            for after in ["", " ", "        x", " 1234567.8 ", "........", "99999999"] {
                let window = format!("{t}{after}");
                let b = window.as_bytes();
                let f64_want: Option<f64> = t.parse().ok();
                assert_eq!(
                    parse_f64_at(b, t.len()).map(f64::to_bits),
                    f64_want.map(f64::to_bits),
                    "f64 {t:?} in {window:?}"
                );
                assert_eq!(parse_u64_at(b, t.len()), t.parse::<u64>().ok(), "u64 {t:?}");
            }
            assert_eq!(
                parse_i64_bytes(t.as_bytes()),
                t.parse::<i64>().ok(),
                "i64 {t:?}"
            );
        }
        for i in (0..100_000_000u64).step_by(9_973) {
            let t = format!("{}.{:02}", i / 100, i % 100);
            let window = format!("{t}      0");
            assert_eq!(
                parse_f64_at(window.as_bytes(), t.len()),
                t.parse().ok(),
                "{t}"
            );
        }
    }
}
