//! Which bytes of a short text are one of a few values, as the bits of a mask: what the
//! parser's per-line scans (a row's whitespace, an INFO line's search anchors) are made of.
//!
//! Issue 41 (docs/performance.md): a byte at a time, or eight with word arithmetic, these
//! scans were a quarter of a table-dense run's instructions (callgrind); `memchr` pays a call
//! and a set-up per hit on lines of 60–150 bytes. x86_64 compares 16 bytes at once with SSE2,
//! which every x86_64 CPU has (it is part of the architecture's baseline, enabled by every
//! Rust x86_64 target); elsewhere a plain loop gives the same bits.

/// Bytes looked at together.
pub(super) const BLOCK: usize = 16;

/// Bit `i` set where `block[i]` is one of `values` (at most a few).
#[inline]
pub(super) fn block_mask(block: &[u8; BLOCK], values: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
            _mm_setzero_si128,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline (`target_feature = "sse2"` on every
        // x86_64 target), so these instructions exist; the one load reads the 16 bytes of
        // `block`, a valid `[u8; 16]`, and `_mm_loadu_si128` needs no alignment.
        unsafe {
            let bytes = _mm_loadu_si128(block.as_ptr().cast());
            let mut hits = _mm_setzero_si128();
            for &v in values {
                hits = _mm_or_si128(hits, _mm_cmpeq_epi8(bytes, _mm_set1_epi8(v as i8)));
            }
            // One bit per byte, in the low 16 bits.
            _mm_movemask_epi8(hits) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        portable_mask(block, values)
    }
}

/// What [`line_ends`] saw besides the newlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LineScan {
    /// No other control character (below 0x20, or DEL): no line needs cleaning.
    pub(super) clean: bool,
    /// Every byte is ASCII (below 0x80): the bytes are UTF-8 text, with no check of their own
    /// (`from_utf8`'s pass was a twentieth of the reading thread on a table-dense log, issue
    /// 41, callgrind).
    pub(super) ascii: bool,
}

/// The positions of the newlines of `bytes` (under 4 GiB) into `ends`, in order, and whether it
/// holds another control character or a byte that is not ASCII ([`LineScan`]): where lines end
/// and whether any needs cleaning, in one pass instead of a `memchr` call a line and a pass of
/// its own (issue 41).
///
/// On a CPU with AVX2 (every x86_64 server CPU since 2013; std caches the check), 32 bytes a
/// compare instead of 16: this pass was a tenth of the reading thread's instructions on an
/// INFO log (issue 41, callgrind). The tests hold both paths to the same answers.
pub(super) fn line_ends(bytes: &[u8], ends: &mut Vec<u32>) -> LineScan {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), all `line_ends_avx2` needs.
        return unsafe { line_ends_avx2(bytes, ends) };
    }
    line_ends_sse2(bytes, ends)
}

/// [`line_ends`] 16 bytes a compare (SSE2, the x86_64 baseline; a plain loop elsewhere).
fn line_ends_sse2(bytes: &[u8], ends: &mut Vec<u32>) -> LineScan {
    ends.clear();
    // 64 bytes a step; the other control characters are gathered in a vector and looked at
    // once, at the end (a lane test a block cost a third of the pass).
    let mut quads = bytes.chunks_exact(4 * BLOCK);
    let mut controls = Controls::default();
    let mut at = 0u32;
    for quad in &mut quads {
        let Ok(quad) = <&[u8; 4 * BLOCK]>::try_from(quad) else {
            continue;
        };
        let mut newlines = controls.newlines64(quad);
        while newlines != 0 {
            ends.push(at + newlines.trailing_zeros());
            newlines &= newlines - 1;
        }
        at += 4 * BLOCK as u32;
    }
    let (mut clean, mut ascii) = controls.none();
    for (i, &b) in quads.remainder().iter().enumerate() {
        if b == b'\n' {
            ends.push(at + i as u32);
        } else if b < 0x20 || b == 0x7f {
            clean = false;
        }
        ascii &= b.is_ascii();
    }
    LineScan { clean, ascii }
}

/// [`line_ends`] 32 bytes a compare: [`line_ends_sse2`] with AVX2's registers.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn line_ends_avx2(bytes: &[u8], ends: &mut Vec<u32>) -> LineScan {
    use std::arch::x86_64::{
        _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_setzero_si256,
    };
    ends.clear();
    let mut quads = bytes.chunks_exact(4 * BLOCK);
    let mut seen = _mm256_setzero_si256();
    let mut high = _mm256_setzero_si256();
    let mut at = 0u32;
    for quad in &mut quads {
        let mut newlines = 0u64;
        for half in 0..2 {
            // SAFETY: `quad` holds 64 bytes: the loads read 32 at offsets 0 and 32, and
            // `_mm256_loadu_si256` needs no alignment.
            let v = unsafe { _mm256_loadu_si256(quad.as_ptr().add(half * 2 * BLOCK).cast()) };
            let newline = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\n' as i8));
            // As in `Controls::newlines64`: below 0x20 where the unsigned minimum with 0x1f is
            // the byte itself; DEL; the top bits of the OR of all bytes.
            let low = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v);
            let del = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0x7f));
            seen = _mm256_or_si256(
                seen,
                _mm256_or_si256(_mm256_andnot_si256(newline, low), del),
            );
            high = _mm256_or_si256(high, v);
            newlines |= u64::from(_mm256_movemask_epi8(newline) as u32) << (half * 2 * BLOCK);
        }
        while newlines != 0 {
            ends.push(at + newlines.trailing_zeros());
            newlines &= newlines - 1;
        }
        at += 4 * BLOCK as u32;
    }
    let mut clean = _mm256_movemask_epi8(seen) == 0;
    let mut ascii = _mm256_movemask_epi8(high) == 0;
    for (i, &b) in quads.remainder().iter().enumerate() {
        if b == b'\n' {
            ends.push(at + i as u32);
        } else if b < 0x20 || b == 0x7f {
            clean = false;
        }
        ascii &= b.is_ascii();
    }
    LineScan { clean, ascii }
}

/// The control characters other than `\n`, and the bytes that are not ASCII, seen by
/// [`Controls::newlines64`], gathered.
#[derive(Default)]
struct Controls {
    #[cfg(target_arch = "x86_64")]
    seen: Option<(std::arch::x86_64::__m128i, std::arch::x86_64::__m128i)>,
    #[cfg(not(target_arch = "x86_64"))]
    seen: (bool, bool),
}

impl Controls {
    /// The newlines of 64 bytes (bit `i` set where byte `i` is `\n`); their other control
    /// characters (below 0x20, or DEL) noted.
    #[inline]
    fn newlines64(&mut self, quad: &[u8; 4 * BLOCK]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{
                _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
                _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128,
            };
            // SAFETY: as in `block_mask`: SSE2 is baseline on x86_64; the four loads read
            // the 64 bytes of `quad`, 16 at offsets 0, 16, 32 and 48.
            unsafe {
                let (mut seen, mut high) = self
                    .seen
                    .unwrap_or_else(|| (_mm_setzero_si128(), _mm_setzero_si128()));
                let mut newlines = 0u64;
                for k in 0..4 {
                    let bytes = _mm_loadu_si128(quad.as_ptr().add(k * BLOCK).cast());
                    let newline = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\n' as i8));
                    // Below 0x20: the unsigned minimum with 0x1f is the byte itself.
                    let low = _mm_cmpeq_epi8(_mm_min_epu8(bytes, _mm_set1_epi8(0x1f)), bytes);
                    let del = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(0x7f));
                    seen = _mm_or_si128(seen, _mm_or_si128(_mm_andnot_si128(newline, low), del));
                    // A byte at or above 0x80 sets its top bit in the OR of them all.
                    high = _mm_or_si128(high, bytes);
                    newlines |= u64::from(_mm_movemask_epi8(newline) as u16) << (k * BLOCK);
                }
                self.seen = Some((seen, high));
                newlines
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut newlines = 0u64;
            for (i, &b) in quad.iter().enumerate() {
                if b == b'\n' {
                    newlines |= 1 << i;
                } else if b < 0x20 || b == 0x7f {
                    self.seen.0 = true;
                }
                self.seen.1 |= !b.is_ascii();
            }
            newlines
        }
    }

    /// No control character but newlines seen, and no byte that is not ASCII.
    fn none(&self) -> (bool, bool) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::_mm_movemask_epi8;
            // SAFETY: SSE2 is baseline on x86_64; register operations, no memory.
            self.seen.map_or((true, true), |(seen, high)| unsafe {
                (_mm_movemask_epi8(seen) == 0, _mm_movemask_epi8(high) == 0)
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            (!self.seen.0, !self.seen.1)
        }
    }
}

/// What [`block_mask`] gives, a byte at a time (other architectures; the tests compare them).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn portable_mask(block: &[u8; BLOCK], values: &[u8]) -> u32 {
    block
        .iter()
        .enumerate()
        .fold(0, |m, (i, b)| m | u32::from(values.contains(b)) << i)
}

/// The mask of up to [`BLOCK`] bytes (`bytes` shorter than a block is padded with `pad`, which
/// must not be one of `values`; its bits stay clear).
#[inline]
pub(super) fn mask(bytes: &[u8], values: &[u8], pad: u8) -> u32 {
    match <&[u8; BLOCK]>::try_from(bytes) {
        Ok(block) => block_mask(block, values),
        Err(_) => {
            let mut block = [pad; BLOCK];
            let n = bytes.len().min(BLOCK);
            block[..n].copy_from_slice(&bytes[..n]);
            block_mask(&block, values)
        }
    }
}

/// Bit `i` set where byte `i` of up to 64 `bytes` is ASCII whitespace (`u8::is_ascii_whitespace`:
/// space, `\t`, `\n`, `\x0c`, `\r`), 16 at a time: a row's fields are split on these bits.
#[inline]
#[cfg(test)]
pub(super) fn whitespace64(bytes: &[u8]) -> u64 {
    whitespace64_and(bytes, &[]).0
}

/// The blocks of up to 64 `bytes`, numbered; a short last one padded with 0x80, a byte that
/// is neither whitespace nor one the callers look for (they look for ASCII bytes).
#[inline]
fn blocks64(bytes: &[u8]) -> impl Iterator<Item = (usize, [u8; BLOCK])> + '_ {
    bytes.chunks(BLOCK).take(4).enumerate().map(|(k, part)| {
        let block = part.try_into().unwrap_or_else(|_| {
            let mut block = [0x80; BLOCK];
            block[..part.len()].copy_from_slice(part);
            block
        });
        (k, block)
    })
}

/// [`whitespace64`] of up to 64 `bytes`, and bit `i` set where byte `i` is one of `also` (a
/// row's glued markers, looked for in the same loads instead of a pass of their own).
#[inline]
pub(super) fn whitespace64_and(bytes: &[u8], also: &[u8]) -> (u64, u64) {
    let (mut bits, mut found) = (0, 0);
    for (k, block) in blocks64(bytes) {
        let (ws, hits) = whitespace_block(&block, also);
        bits |= u64::from(ws) << (k * BLOCK);
        found |= u64::from(hits) << (k * BLOCK);
    }
    // The padding is never looked for (callers look for ASCII bytes): drop it all the same.
    let valid = u64::MAX >> (64 - bytes.len().clamp(1, 64));
    (bits, found & valid)
}

/// [`whitespace64_and`] of a text with no control character (a prepared chunk's line,
/// `prepare.rs`), where the one whitespace byte is the space: a compare a block instead of six
/// operations (issue 41: a row read ahead is cut on the reading thread, the busier one on a
/// table-dense log). The bytes of `also` are only said to be there or not: the second value
/// is nonzero when one is.
#[inline]
pub(super) fn spaces64_and(bytes: &[u8], also: &[u8]) -> (u64, u64) {
    let (mut bits, mut found) = (0, 0);
    for (k, block) in blocks64(bytes) {
        bits |= u64::from(block_mask(&block, b" ")) << (k * BLOCK);
        found |= block_mask(&block, also);
    }
    (bits, u64::from(found))
}

/// [`whitespace64_and`] of one block: a space, or 9..=13 but 11 (the vertical tab is not ASCII
/// whitespace to Rust), in 8 vector operations instead of one compare a value; and the bytes
/// that are one of `also`.
#[inline]
fn whitespace_block(block: &[u8; BLOCK], also: &[u8]) -> (u32, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128, _mm_sub_epi8,
        };
        // SAFETY: as in `block_mask`: SSE2 is baseline on x86_64, the load reads `block`.
        unsafe {
            let bytes = _mm_loadu_si128(block.as_ptr().cast());
            let space = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b' ' as i8));
            // 9..=13: the byte less 9, unsigned, is at most 4.
            let from_tab = _mm_sub_epi8(bytes, _mm_set1_epi8(9));
            let controls = _mm_cmpeq_epi8(_mm_min_epu8(from_tab, _mm_set1_epi8(4)), from_tab);
            let vertical_tab = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(0x0b));
            let hits = _mm_or_si128(space, _mm_andnot_si128(vertical_tab, controls));
            let mut found = _mm_setzero_si128();
            for &v in also {
                found = _mm_or_si128(found, _mm_cmpeq_epi8(bytes, _mm_set1_epi8(v as i8)));
            }
            (
                _mm_movemask_epi8(hits) as u32,
                _mm_movemask_epi8(found) as u32,
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (
            portable_mask(block, b" \t\n\x0c\r"),
            portable_mask(block, also),
        )
    }
}

/// `each(position)` for every position in `bytes` holding one of `values`, in order (`pad` as
/// for [`mask`]).
#[inline]
pub(super) fn each_position(bytes: &[u8], values: &[u8], pad: u8, mut each: impl FnMut(usize)) {
    for (k, chunk) in bytes.chunks(BLOCK).enumerate() {
        let mut bits = mask(chunk, values, pad);
        while bits != 0 {
            each(k * BLOCK + bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }
}

/// The first position in `bytes` holding one of `values` (`pad` as for [`mask`]).
#[inline]
pub(super) fn first_position(bytes: &[u8], values: &[u8], pad: u8) -> Option<usize> {
    bytes.chunks(BLOCK).enumerate().find_map(|(k, chunk)| {
        let bits = mask(chunk, values, pad);
        (bits != 0).then(|| k * BLOCK + bits.trailing_zeros() as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type LineEnds = fn(&[u8], &mut Vec<u32>) -> LineScan;

    /// Every path of [`line_ends`] this CPU can run, named.
    fn every_line_ends() -> Vec<(&'static str, LineEnds)> {
        let mut paths: Vec<(&'static str, LineEnds)> =
            vec![("line_ends", line_ends), ("sse2", line_ends_sse2)];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            fn avx2(bytes: &[u8], ends: &mut Vec<u32>) -> LineScan {
                // SAFETY: listed only where the CPU has AVX2 (checked above).
                unsafe { line_ends_avx2(bytes, ends) }
            }
            paths.push(("avx2", avx2));
        }
        paths
    }

    #[test]
    fn masks_are_the_bytes_that_match() {
        let sets: [&[u8]; 4] = [b" \t\n\x0c\r", b"vkNG", b" ", b"\x00\xff"];
        for values in sets {
            for c in 0..=255u8 {
                for at in 0..BLOCK {
                    let mut block = *b"abcdefghijklmnop";
                    block[at] = c;
                    let want: u32 = portable_mask(&block, values);
                    assert_eq!(block_mask(&block, values), want, "{c:#x} at {at}");
                    let expect = u32::from(values.contains(&c)) << at
                        | block
                            .iter()
                            .enumerate()
                            .filter(|&(i, b)| i != at && values.contains(b))
                            .fold(0, |m, (i, _)| m | 1 << i);
                    assert_eq!(want, expect);
                }
            }
        }
        let text = b"a v in a block, k and N and G past it: vkNG";
        let mut got = Vec::new();
        each_position(text, b"vkNG", 0, |i| got.push(i));
        let want: Vec<usize> = (0..text.len())
            .filter(|&i| b"vkNG".contains(&text[i]))
            .collect();
        assert_eq!(got, want);
        assert_eq!(first_position(text, b"vkNG", 0), want.first().copied());
        assert_eq!(first_position(text, b"#", 0), None);
        assert_eq!(mask(b"v", b"v", 0), 1);
        for c in 0..=255u8 {
            for at in 0..70 {
                let mut bytes = [b'a'; 70];
                bytes[at] = c;
                for len in [16, 20, 64] {
                    let part = &bytes[..len.min(bytes.len())];
                    let want = part.iter().enumerate().fold(0u64, |m, (i, b)| {
                        m | u64::from(b.is_ascii_whitespace()) << i
                    });
                    assert_eq!(whitespace64(part), want, "{c:#x} at {at}, {len}");
                    let marks = part
                        .iter()
                        .enumerate()
                        .fold(0u64, |m, (i, b)| m | u64::from(b"<[".contains(b)) << i);
                    assert_eq!(
                        whitespace64_and(part, b"<["),
                        (want, marks),
                        "{c:#x} at {at}, {len}"
                    );
                    if !part.iter().any(|&b| b < 0x20 || b == 0x7f) {
                        let (spaces, any) = spaces64_and(part, b"<[");
                        assert_eq!((spaces, any != 0), (want, marks != 0), "{c:#x} at {at}");
                    }
                }
            }
        }
        for c in 0..=255u8 {
            // Any byte, at any place of a 64-byte step and of the rest after the last.
            for at in [0, 1, 15, 16, 31, 63, 64, 65, 100, 127, 128, 129, 140] {
                let mut text = b"a line\n".repeat(21);
                text[at] = c;
                let want = LineScan {
                    clean: super::super::lines::only_newlines(&text),
                    ascii: text.is_ascii(),
                };
                let want_ends: Vec<u32> = memchr::memchr_iter(b'\n', &text)
                    .map(|i| i as u32)
                    .collect();
                for (path, line_ends) in every_line_ends() {
                    let mut ends = Vec::new();
                    let scan = line_ends(&text, &mut ends);
                    assert_eq!(scan, want, "{path}: {c:#x} at {at}");
                    assert_eq!(ends, want_ends, "{path}: {c:#x} at {at}");
                }
            }
            let text = [
                b"line\nline".as_slice(),
                &[c],
                b"\nand a longer one\n",
                &[c],
            ]
            .concat();
            let want = LineScan {
                clean: super::super::lines::only_newlines(&text),
                ascii: text.is_ascii(),
            };
            let want_ends: Vec<u32> = memchr::memchr_iter(b'\n', &text)
                .map(|i| i as u32)
                .collect();
            for (path, line_ends) in every_line_ends() {
                let mut ends = Vec::new();
                assert_eq!(line_ends(&text, &mut ends), want, "{path}: {c:#x}");
                assert_eq!(ends, want_ends, "{path}: {c:#x}");
            }
        }
        assert_eq!(mask(b"", b"v", 0), 0);
    }
}
