//! The byte patterns the CUDA probe copies to a GPU (and between GPUs) and compares on the way
//! back. Both are built from one 256-byte period and compared a block at a time, so a
//! megabyte per GPU and per pair costs a `memcmp`, not a loop over every byte (a debug build
//! of that loop took most of a replayed fixture's time in the test suite).

/// `bytes` of a pattern that changes every byte (31 is odd: 256 bytes before it repeats) and
/// differs with `seed`, so a buffer left over from another GPU or pair cannot pass.
pub fn pattern(bytes: usize, seed: usize) -> Vec<u8> {
    let period: Vec<u8> = (0..256usize)
        .map(|k| (k.wrapping_mul(31) ^ seed) as u8)
        .collect();
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        let take = period.len().min(bytes - out.len());
        out.extend_from_slice(&period[..take]);
    }
    out
}

/// How many bytes of `back` differ from `sent` (a byte missing on either side counts).
pub fn mismatched(sent: &[u8], back: &[u8]) -> u64 {
    const BLOCK: usize = 4096;
    let length_gap = sent.len().abs_diff(back.len()) as u64;
    let counted: u64 = sent
        .chunks(BLOCK)
        .zip(back.chunks(BLOCK))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| a.iter().zip(b.iter()).filter(|(x, y)| x != y).count() as u64)
        .sum();
    counted + length_gap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_changes_every_byte_and_with_its_seed() {
        let p = pattern(1000, 3);
        assert_eq!(p.len(), 1000);
        assert!(p.windows(2).all(|w| w[0] != w[1]));
        assert_eq!(p[0..256], p[256..512]);
        assert_ne!(pattern(256, 3), pattern(256, 4));
        assert!(pattern(0, 1).is_empty());
    }

    #[test]
    fn mismatches_are_counted_byte_by_byte_across_blocks() {
        let sent = pattern(10_000, 1);
        assert_eq!(mismatched(&sent, &sent), 0);
        let mut back = sent.clone();
        back[0] ^= 1;
        back[4095] ^= 1;
        back[4096] ^= 0xff;
        back[9_999] = back[9_999].wrapping_add(1);
        assert_eq!(mismatched(&sent, &back), 4);
        assert_eq!(mismatched(&sent, &back[..9_000]), 1_000 + 3);
    }
}
