//! The dynamic loader's cache (`/etc/ld.so.cache`), read to find where a host's loader would
//! take a driver library from when none of the known driver directories holds it (a vendor
//! image that keeps the driver in `/usr/local/nvidia/lib64`, listed in `/etc/ld.so.conf.d/`).
//! Only parsed here; `host_lib.rs` resolves what it names under the root and checks it like any
//! other candidate.
//!
//! The format is glibc's `sysdeps/generic/dl-cache.h`, as `ldconfig` writes it (real caches in
//! tests/data/ld-so-cache/):
//! - new (glibc ≥ 2.32 by default): the header `glibc-ld.so.cache` `1.1`, `nlibs` (u32),
//!   `len_strings` (u32), `flags` (u8: 2 = little-endian), 3 bytes of padding,
//!   `extension_offset` (u32), 3 unused u32 — 48 bytes — then `nlibs` entries of 24 bytes:
//!   `flags` (i32), `key`, `value` (u32 string offsets), `osversion` (u32), `hwcap` (u64);
//! - compat (glibc ≤ 2.31): the old table first — `ld.so-1.7.0` (12 bytes with its NUL),
//!   `nlibs` (u32), `nlibs` entries of 12 bytes (`flags`, `key`, `value`) — then the new
//!   header, 8-byte aligned.
//!
//! In both, the new entries' string offsets count from the start of the new header
//! (`_dl_load_cache_lookup` sets `cache_data` to it). Strings end with a NUL.

/// The new format's magic and version.
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
/// The old format's magic, NUL included.
const OLD_MAGIC: &[u8] = b"ld.so-1.7.0\0";
const NEW_HEADER: usize = 48;
const NEW_ENTRY: usize = 24;
const OLD_ENTRY: usize = 12;
/// The largest cache read: a host with every library of a distribution has a few thousand
/// entries (this machine's: 523 in 33 KB).
pub const CACHE_CAP: u64 = 8 << 20;

/// `FLAG_ELF_LIBC6` and this machine's architecture bits (dl-cache.h: `FLAG_X8664_LIB64`
/// 0x0300, `FLAG_AARCH64_LIB64` 0x0a00): a library of another ABI (i386 in a multilib cache)
/// cannot be loaded here.
#[cfg(target_arch = "x86_64")]
const THIS_ABI: i32 = 0x0303;
#[cfg(target_arch = "aarch64")]
const THIS_ABI: i32 = 0x0a03;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const THIS_ABI: i32 = 0x0003;
/// `FLAG_TYPE_MASK | FLAG_REQUIRED_MASK`.
const ABI_MASK: i32 = 0x00ff | 0xff00;

/// One entry: the soname (`libcuda.so.1`), the path the loader opens, and its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub path: String,
    pub flags: i32,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn string_at(bytes: &[u8], at: usize) -> Option<String> {
    let rest = bytes.get(at..)?;
    let end = rest.iter().position(|b| *b == 0)?;
    String::from_utf8(rest[..end].to_vec()).ok()
}

/// Where the new header starts: at 0, or after the old table of a compat cache.
fn new_header_at(bytes: &[u8]) -> Option<usize> {
    if bytes.starts_with(NEW_MAGIC) {
        return Some(0);
    }
    if !bytes.starts_with(OLD_MAGIC) {
        return None;
    }
    let nlibs = u32_at(bytes, OLD_MAGIC.len())? as usize;
    let end = (OLD_MAGIC.len() + 4).checked_add(nlibs.checked_mul(OLD_ENTRY)?)?;
    let aligned = end.checked_add(7)? & !7;
    [end, aligned]
        .into_iter()
        .find(|at| bytes.get(*at..).is_some_and(|b| b.starts_with(NEW_MAGIC)))
}

/// Every entry of a cache, in its order (the loader's preference); `None` when the bytes are no
/// cache (or a big-endian one: the loader here would not read it either). Entries whose strings
/// fall outside the file are left out, never read past it.
pub fn parse(bytes: &[u8]) -> Option<Vec<Entry>> {
    let base = new_header_at(bytes)?;
    let header = bytes.get(base..base + NEW_HEADER)?;
    let nlibs = u32_at(header, NEW_MAGIC.len())? as usize;
    // flags 2 = little-endian; 0 (unknown) is what older writers left.
    if !matches!(header[28], 0 | 2) {
        return None;
    }
    let data = &bytes[base..];
    let mut entries = Vec::new();
    for i in 0..nlibs {
        let at = NEW_HEADER + i * NEW_ENTRY;
        let Some(raw) = data.get(at..at + NEW_ENTRY) else {
            break;
        };
        let flags = i32::from_le_bytes(raw[0..4].try_into().ok()?);
        let key = u32_at(raw, 4)? as usize;
        let value = u32_at(raw, 8)? as usize;
        if let (Some(name), Some(path)) = (string_at(data, key), string_at(data, value)) {
            entries.push(Entry { name, path, flags });
        }
    }
    Some(entries)
}

/// The paths the cache gives for `soname` for this machine's ABI, in the cache's order, without
/// their leading `/` (root-relative).
pub fn paths_for(bytes: &[u8], soname: &str) -> Vec<String> {
    parse(bytes)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.name == soname && e.flags & ABI_MASK == THIS_ABI)
        .map(|e| e.path.trim_start_matches('/').to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // tests/data/ld-so-cache/README.md: written by glibc 2.36's ldconfig.
    const NEW: &[u8] = include_bytes!("../../tests/data/ld-so-cache/glibc-2.36-new.cache");
    const COMPAT: &[u8] = include_bytes!("../../tests/data/ld-so-cache/glibc-2.36-compat.cache");

    fn listed(bytes: &[u8]) -> Vec<(String, String)> {
        parse(bytes)
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.path))
            .collect()
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn both_formats_list_what_ldconfig_p_lists() {
        let want = vec![
            (
                "libz.so.1".to_string(),
                "/usr/lib/x86_64-linux-gnu/libz.so.1".to_string(),
            ),
            (
                "libnvidia-ml.so.1".to_string(),
                "/usr/local/nvidia/lib64/libnvidia-ml.so.1".to_string(),
            ),
            (
                "libcuda.so.1".to_string(),
                "/usr/local/nvidia/lib64/libcuda.so.1".to_string(),
            ),
        ];
        assert_eq!(listed(NEW), want);
        assert_eq!(listed(COMPAT), want);
        for bytes in [NEW, COMPAT] {
            assert_eq!(
                paths_for(bytes, "libcuda.so.1"),
                ["usr/local/nvidia/lib64/libcuda.so.1"]
            );
            assert!(paths_for(bytes, "libnvidia-ml.so.2").is_empty());
        }
    }

    #[test]
    fn another_abi_is_not_offered() {
        // The first entry's flags as an i386 library's (FLAG_ELF_LIBC6 only).
        let mut bytes = NEW.to_vec();
        for e in 0..3 {
            let at = NEW_HEADER + e * NEW_ENTRY;
            bytes[at..at + 4].copy_from_slice(&0x0003i32.to_le_bytes());
        }
        assert!(paths_for(&bytes, "libcuda.so.1").is_empty());
        assert_eq!(parse(&bytes).unwrap().len(), 3);
    }

    #[test]
    fn damaged_caches_give_what_they_can_and_never_read_past_the_end() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"not a cache at all"), None);
        for bytes in [NEW, COMPAT] {
            // Every truncation parses or says no cache, without a panic.
            for len in 0..bytes.len() {
                let _ = parse(&bytes[..len]);
            }
        }
        // A string offset past the end: that entry is dropped.
        let mut bytes = NEW.to_vec();
        bytes[NEW_HEADER + 4..NEW_HEADER + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&bytes).unwrap().len(), 2);
        // A count far larger than the file: the entries that are there.
        let mut bytes = NEW.to_vec();
        bytes[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&bytes).unwrap().len() >= 3);
        // A compat table whose count overflows.
        let mut bytes = COMPAT.to_vec();
        bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&bytes), None);
    }
}
