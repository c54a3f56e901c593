//! Byte-level helpers of the parser's hot path (issue 28: 600 MB/s on logs of real lines):
//! numbers parsed without the general parsers where that is exact, a row split into fields
//! without allocating, and substring searches built once instead of on every call.
//!
//! Every helper gives exactly what the std function it stands for gives (`str::parse`,
//! `str::contains`, `split_ascii_whitespace`): the fast paths cover the shapes nccl-tests prints
//! and hand anything else to std. The unit tests below compare them on every odd shape.

use std::sync::OnceLock;

use memchr::memmem::Finder;

/// A substring search set up once (std's `str::contains` builds its searcher on every call: a
/// third of the run on an `NCCL_DEBUG=INFO` log, perf).
pub(super) struct Needle {
    text: &'static str,
    finder: OnceLock<Finder<'static>>,
}

impl Needle {
    pub(super) const fn new(text: &'static str) -> Self {
        Needle {
            text,
            finder: OnceLock::new(),
        }
    }

    /// Where the needle first occurs in `hay` (as `str::find`).
    pub(super) fn find(&self, hay: &str) -> Option<usize> {
        self.finder
            .get_or_init(|| Finder::new(self.text))
            .find(hay.as_bytes())
    }

    /// `hay.contains(needle)`.
    pub(super) fn is_in(&self, hay: &str) -> bool {
        self.find(hay).is_some()
    }

    /// `hay.split_once(needle)`.
    pub(super) fn split_once<'h>(&self, hay: &'h str) -> Option<(&'h str, &'h str)> {
        let at = self.find(hay)?;
        Some((&hay[..at], &hay[at + self.text.len()..]))
    }
}

/// `text.parse::<u64>()`: digits alone (up to 19, never overflowing) are read here.
pub(super) fn parse_u64(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || b.len() > 19 {
        return text.parse().ok();
    }
    let mut n: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return text.parse().ok();
        }
        n = n * 10 + u64::from(d);
    }
    Some(n)
}

/// Exact powers of ten as `f64` (every one up to 1e22 is representable).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `text.parse::<f64>()`. A plain decimal (`482.27`, `-1`, `0.51`, `5.`, `.5`) whose digits
/// make an integer below 2^53 with at most 22 of them after the point is that integer divided
/// by a power of ten: both exact as `f64`, so the one division is correctly rounded — the same
/// value std's correctly rounded parser gives (Clinger's fast path, which std takes too). Every
/// other shape (exponents, `inf`, `nan`, long mantissas, a `+`) goes to std.
pub(super) fn parse_f64(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let (negative, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let mut mantissa: u64 = 0;
    let mut count = 0usize;
    let mut point: Option<usize> = None;
    for (i, &c) in digits.iter().enumerate() {
        let d = c.wrapping_sub(b'0');
        if d <= 9 {
            count += 1;
            if count > 15 {
                return text.parse().ok();
            }
            mantissa = mantissa * 10 + u64::from(d);
        } else if c == b'.' && point.is_none() {
            point = Some(i);
        } else {
            return text.parse().ok();
        }
    }
    if count == 0 {
        return text.parse().ok();
    }
    // 15 digits or fewer: below 10^15 < 2^53, so the conversion is exact.
    let decimals = point.map_or(0, |p| digits.len() - p - 1);
    let value = mantissa as f64 / POW10[decimals];
    Some(if negative { -value } else { value })
}

/// Up to this many fields a row is split into an array on the stack.
pub(super) const INLINE_FIELDS: usize = 32;

/// The fields of a row (whitespace-separated, as `split_ascii_whitespace`) into `out`; `None`
/// when there are more than [`INLINE_FIELDS`] (the caller splits those into a `Vec`).
///
/// A byte-by-byte split mispredicts a branch at nearly every edge of a row's ~26 fields (a sixth
/// of a table-dense run, perf): here the whitespace of 64 bytes becomes a mask, 8 bytes at a
/// time ([`whitespace8`]), and the field edges are read from its bits.
pub(super) fn split_fields<'t>(text: &'t str, out: &mut [&'t str; INLINE_FIELDS]) -> Option<usize> {
    let b = text.as_bytes();
    let mut n = 0;
    let mut start = 0;
    let mut in_field = false;
    // Whether the byte before the current block was whitespace (the start counts as such).
    let mut before: u64 = 1;
    for (block, chunk) in b.chunks(64).enumerate() {
        let mut ws: u64 = 0;
        let mut words = chunk.chunks_exact(8);
        for (k, word) in (&mut words).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            ws |= whitespace8(u64::from_le_bytes(bytes)) << (8 * k);
        }
        let whole = chunk.len() - words.remainder().len();
        for (i, c) in words.remainder().iter().enumerate() {
            ws |= u64::from(c.is_ascii_whitespace()) << (whole + i);
        }
        let valid = u64::MAX >> (64 - chunk.len());
        // A bit where whitespace turns to field or back.
        let mut edges = (ws ^ ((ws << 1) | before)) & valid;
        before = (ws >> (chunk.len() - 1)) & 1;
        let base = block * 64;
        while edges != 0 {
            let at = base + edges.trailing_zeros() as usize;
            edges &= edges - 1;
            if in_field {
                if n == INLINE_FIELDS {
                    return None;
                }
                // Both ends are at ASCII bytes: char boundaries.
                out[n] = &text[start..at];
                n += 1;
            } else {
                start = at;
            }
            in_field = !in_field;
        }
    }
    if in_field {
        if n == INLINE_FIELDS {
            return None;
        }
        out[n] = &text[start..];
        n += 1;
    }
    Some(n)
}

/// Bit `i` set when byte `i` of `x` (little-endian) is ASCII whitespace (`u8::is_ascii_whitespace`:
/// space, `\t`, `\n`, `\x0c`, `\r`). Spaces are found with exact byte arithmetic (no carry
/// crosses a byte); a word holding any other byte below `!` (rare: lines reach here without
/// control characters but `\r`) is looked at byte by byte.
fn whitespace8(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = !LOW7;
    // The high bit of each byte below 0x21.
    let below = !(((x & LOW7) + ONES * 0x5f) | x) & HIGH;
    // The high bit of each byte equal to 0x20.
    let y = x ^ (ONES * 0x20);
    let space = !(((y & LOW7) + LOW7) | y | LOW7);
    if below & !space != 0 {
        return x
            .to_le_bytes()
            .iter()
            .enumerate()
            .fold(0, |m, (i, c)| m | u64::from(c.is_ascii_whitespace()) << i);
    }
    // Byte i's high bit (bit 8i + 7) to bit i.
    (space >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// `text.split_whitespace()` into `out` for ASCII text without a vertical tab (where it splits
/// as [`split_fields`]); `None` for other text or too many words (split those with std).
pub(super) fn split_words<'t>(text: &'t str, out: &mut [&'t str; INLINE_FIELDS]) -> Option<usize> {
    if !text.is_ascii() || memchr::memchr(0x0b, text.as_bytes()).is_some() {
        return None;
    }
    split_fields(text, out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn fields_split_as_std_splits_them() {
        for text in [
            "",
            "   ",
            "  1073741824     268435456     float     sum      -1   4012.3  267.61",
            "a\tb\r\nc\x0cd  ",
            "é ü x",
            "x",
            " x",
            "x\x0by z",
        ] {
            let long = format!("{text} {} {text}", "y ".repeat(9) + &" ".repeat(70));
            for text in [text, long.as_str()] {
                let mut out = [""; INLINE_FIELDS];
                let n = split_fields(text, &mut out).unwrap();
                let want: Vec<&str> = text.split_ascii_whitespace().collect();
                assert_eq!(&out[..n], &want[..], "{text:?}");
                let want: Vec<&str> = text.split_whitespace().collect();
                match split_words(text, &mut out) {
                    Some(n) => assert_eq!(&out[..n], &want[..], "{text:?}"),
                    None => assert!(!text.is_ascii() || text.contains('\x0b'), "{text:?}"),
                }
            }
        }
        // Every split of a 64-byte boundary.
        for at in 60..70 {
            let text = format!("{}ab cd", " ".repeat(at));
            let mut out = [""; INLINE_FIELDS];
            let n = split_fields(&text, &mut out).unwrap();
            assert_eq!(&out[..n], &["ab", "cd"], "{at}");
            let text = format!("{}   {}", "a".repeat(at), "b".repeat(at));
            let n = split_fields(&text, &mut out).unwrap();
            assert_eq!(&out[..n], &[&text[..at], &text[at + 3..]], "{at}");
        }
        let many = "x ".repeat(INLINE_FIELDS + 1);
        assert_eq!(split_fields(&many, &mut [""; INLINE_FIELDS]), None);
        let exactly = "x ".repeat(INLINE_FIELDS);
        assert_eq!(
            split_fields(&exactly, &mut [""; INLINE_FIELDS]),
            Some(INLINE_FIELDS)
        );
    }

    #[test]
    fn whitespace_of_every_byte() {
        for c in 0..=255u8 {
            for at in 0..8 {
                let mut bytes = *b"abcdefgh";
                bytes[at] = c;
                let want = u64::from(c.is_ascii_whitespace()) << at;
                assert_eq!(
                    whitespace8(u64::from_le_bytes(bytes)),
                    want,
                    "{c:#x} at {at}"
                );
                let mut spaced = [b' '; 8];
                spaced[at] = c;
                let want = 0xff & !(u64::from(!c.is_ascii_whitespace()) << at);
                assert_eq!(
                    whitespace8(u64::from_le_bytes(spaced)),
                    want,
                    "{c:#x} at {at}"
                );
            }
        }
    }

    #[test]
    fn needles_find_as_std_finds() {
        static SET: Needle = Needle::new(" set by environment to ");
        let line = "NCCL_IB_HCA set by environment to mlx5_0 set by environment to x";
        assert_eq!(
            SET.split_once(line),
            line.split_once(" set by environment to ")
        );
        assert!(!SET.is_in("nothing"));
        assert_eq!(SET.find(""), None);
    }
}
