//! Descriptor primitives of the rooted reader: every lookup is one component relative to a
//! directory descriptor, never a path from `/` that the kernel would walk again (and that another
//! process could change between a check and the open, DESIGN.md "Sources").
//!
//! - [`open_beneath`] opens an already resolved, link-free root-relative path: with `openat2(2)`
//!   and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (Linux 5.6) the kernel refuses any symlink on
//!   the way and any step above the root; where `openat2` is missing (`ENOSYS`, or `EPERM` from a
//!   seccomp profile that predates it) a component-by-component `openat(O_PATH|O_NOFOLLOW)` walk
//!   does the same. Either way a directory swapped for a symlink after it was resolved makes
//!   the open fail (`ELOOP`/`ENOTDIR`); it never leads outside.
//! - [`open_one`] opens one component with `O_NOFOLLOW`, [`read_link`] reads a link through its
//!   own `O_PATH` descriptor (`readlinkat(fd, "")`, Linux 2.6.39), [`list`] reads a directory
//!   from its descriptor (`getdents64`).
//!
//! `GPUDOCTOR_NO_OPENAT2=1` forces the fallback walk, so that kernels without `openat2` are
//! tested on kernels with it (tests/root_confinement.rs).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Names and resolved paths shorter than this are made NUL-terminated on the stack: the size
/// the standard library itself uses for paths handed to the kernel
/// (library/std/src/sys/pal/common/small_c_string.rs, `MAX_STACK_ALLOCATION`).
const STACK_NAME: usize = 384;

/// Call `f` with `bytes` NUL-terminated: on the stack when short (every component and most
/// resolved paths), else in a [`CString`]. A NUL inside is `EINVAL`, as [`cstring`] says. One
/// allocation per system call was a twelfth of a `check`'s allocations (issue 41).
fn with_cstr<T>(bytes: &[u8], f: impl FnOnce(&CStr) -> io::Result<T>) -> io::Result<T> {
    if bytes.len() >= STACK_NAME {
        return f(&cstring(bytes)?);
    }
    // Not zeroed first (a memset of the whole buffer per call cost more than the copy).
    let mut buf = std::mem::MaybeUninit::<[u8; STACK_NAME]>::uninit();
    let base = buf.as_mut_ptr().cast::<u8>();
    // SAFETY: `bytes.len() < STACK_NAME`, so the copy and the NUL after it stay inside the
    // buffer, and exactly those `len + 1` bytes, all written here, are read.
    let with_nul = unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), base, bytes.len());
        base.add(bytes.len()).write(0);
        std::slice::from_raw_parts(base, bytes.len() + 1)
    };
    let name = CStr::from_bytes_with_nul(with_nul)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    f(name)
}

fn owned(raw: libc::c_int) -> io::Result<OwnedFd> {
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor a successful open call just returned; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The root itself, by the path the user gave (trusted: `--root /host` may be a link).
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    let path = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path; the result is checked by `owned`.
    owned(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })
}

/// Open one component `name` of the directory `dir`, never following it if it is a link.
pub fn open_one(dir: BorrowedFd<'_>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    with_cstr(name.as_bytes(), |name| {
        // SAFETY: `dir` is an open descriptor borrowed for the call; `name` is NUL-terminated.
        owned(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })
    })
}

/// `struct open_how` (include/uapi/linux/openat2.h); libc's is non-exhaustive.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// `openat2` state: 0 unknown, 1 usable, 2 missing (or disabled).
static OPENAT2: AtomicU8 = AtomicU8::new(0);

fn openat2_usable() -> bool {
    match OPENAT2.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let off = std::env::var_os("GPUDOCTOR_NO_OPENAT2").is_some_and(|v| v == "1");
            OPENAT2.store(if off { 2 } else { 1 }, Ordering::Relaxed);
            !off
        }
    }
}

/// Use `openat2` (when the kernel has it) or always the fallback walk: tests compare the two.
#[cfg(test)]
pub fn use_openat2(on: bool) {
    OPENAT2.store(if on { 1 } else { 2 }, Ordering::SeqCst);
}

/// Open the link-free root-relative path `path` (components joined by `/`, no `..`, resolved by
/// the caller) with `flags`, relative to `root`. No symlink is followed, the last component
/// included, and nothing above `root` is reached. An empty path opens the root itself.
pub fn open_beneath(root: BorrowedFd<'_>, path: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    if path.is_empty() {
        return open_one(root, OsStr::new("."), flags);
    }
    if openat2_usable() {
        let how = OpenHow {
            flags: (flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        let result = with_cstr(path.as_bytes(), |c_path| {
            // SAFETY: openat2 with a borrowed directory descriptor, a NUL-terminated path and
            // an `open_how` of the size passed; the result is checked by `owned`.
            let raw = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    root.as_raw_fd(),
                    c_path.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            };
            owned(libc::c_int::try_from(raw).unwrap_or(-1))
        });
        match &result {
            // No openat2 (before 5.6), or a seccomp filter that does not know it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                OPENAT2.store(2, Ordering::Relaxed);
            }
            _ => return result,
        }
    }
    let mut parts = path.as_bytes().split(|b| *b == b'/').peekable();
    let mut dir: Option<OwnedFd> = None;
    while let Some(part) = parts.next() {
        let at = dir.as_ref().map_or(root, |d| borrow(d));
        let name = OsStr::from_bytes(part);
        if parts.peek().is_none() {
            return open_one(at, name, flags);
        }
        dir = Some(open_one(at, name, libc::O_PATH | libc::O_DIRECTORY)?);
    }
    open_one(root, OsStr::new("."), flags)
}

fn borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    fd.as_fd()
}

/// `fstat` of an open descriptor (an `O_PATH` one included).
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value for the kernel to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `st` is a valid out pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `fstatvfs` of an open descriptor (an `O_PATH` one included).
pub fn fstatvfs(fd: BorrowedFd<'_>) -> io::Result<libc::statvfs> {
    // SAFETY: an all-zero `statvfs` is a valid value for the kernel to overwrite.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `st` is a valid out pointer.
    if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: one component, a link not followed.
pub fn stat_one(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<libc::stat> {
    with_cstr(name.as_bytes(), |name| {
        // SAFETY: an all-zero `stat` is a valid value for the kernel to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `dir` is open for the call, `name` NUL-terminated, `st` a valid out pointer.
        if unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    })
}

pub fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

pub fn is_link(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFLNK
}

pub fn is_file(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG
}

pub fn is_fifo(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

pub fn is_char_device(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFCHR
}

/// What an inode is, as an error names it (`not a regular file (a FIFO)`).
pub fn kind_name(st: &libc::stat) -> &'static str {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symlink",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        _ => "of an unknown type",
    }
}

/// Open again, with `flags`, the inode that the descriptor `path` (usually `O_PATH`) refers
/// to, through its `/proc/self/fd/N` magic link: the kernel reopens that very inode, whatever
/// its name points at now (proc(5), "/proc/pid/fd"; open(2), `O_PATH`). So a type checked on
/// `path` still holds for what is opened. `None` when `/proc` is not mounted.
pub fn reopen(path: BorrowedFd<'_>, flags: libc::c_int) -> Option<io::Result<OwnedFd>> {
    let link = cstring(format!("/proc/self/fd/{}", path.as_raw_fd()).as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path; the result is checked by `owned`. No `O_NOFOLLOW`: the
    // magic link is what is followed.
    let opened = owned(unsafe { libc::open(link.as_ptr(), flags | libc::O_CLOEXEC) });
    match opened {
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        other => Some(other),
    }
}

/// The target of the symlink `name` in `dir` (an empty `name`: the link `dir` itself refers
/// to, opened `O_PATH|O_NOFOLLOW`).
pub fn read_link(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OsString> {
    with_cstr(name.as_bytes(), |name| {
        // Most targets (sysfs's `../../../devices/pci0000:17/…`) fit on the stack; the text is
        // then copied once, at its length.
        let mut first = [0u8; 256];
        let mut heap: Vec<u8> = Vec::new();
        loop {
            let buf: &mut [u8] = if heap.is_empty() {
                &mut first
            } else {
                &mut heap
            };
            // SAFETY: `dir` is open, `name` NUL-terminated and `buf` writable for its length.
            let n = unsafe {
                libc::readlinkat(
                    dir.as_raw_fd(),
                    name.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = n as usize;
            if n < buf.len() {
                return Ok(OsString::from_vec(buf[..n].to_vec()));
            }
            if buf.len() >= 64 * 1024 {
                return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
            }
            let bigger = buf.len() * 4;
            heap.resize(bigger, 0);
        }
    })
}

/// An open directory's entries, `.` and `..` left out, each as `[d_type, name length, name…]`
/// in directory order (`getdents64` gives `u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type;
/// char d_name[]`, include/linux/dirent.h; a name is at most 255 bytes, NAME_MAX): what
/// [`names`] and [`entry_type`] read without a string made per entry.
pub fn list_typed(dir: &OwnedFd) -> io::Result<Box<[u8]>> {
    let mut typed = Vec::new();
    // Most directories read here (a PCI function's, a port's) fit in one answer of 8 KiB, on
    // the stack: an 8 KiB allocation per listing made glibc consolidate its free small
    // blocks each time (malloc.c, `malloc_consolidate` for a large request; issue 41).
    // Not zeroed: the kernel writes what it answers, and only that is read.
    const ANSWER: usize = 8 * 1024;
    let mut answer = std::mem::MaybeUninit::<[u8; ANSWER]>::uninit();
    loop {
        // SAFETY: getdents64 writes at most `ANSWER` bytes into the buffer of an open
        // directory and says how many; only those are read below.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                answer.as_mut_ptr().cast::<u8>(),
                ANSWER,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Ok(typed.into_boxed_slice());
        }
        let n = usize::try_from(n)
            .ok()
            .filter(|n| *n <= ANSWER)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?;
        // SAFETY: the kernel wrote these `n` (≤ `ANSWER`) bytes of the buffer.
        let buf = unsafe { std::slice::from_raw_parts(answer.as_ptr().cast::<u8>(), n) };
        // An entry keeps fewer bytes than its record has: one reservation per answer.
        typed.reserve(buf.len());
        let mut at = 0usize;
        while at < buf.len() {
            // A record that does not fit is the kernel's error, not ours.
            let bad = || io::Error::from_raw_os_error(libc::EIO);
            let head = buf.get(at..at + 19).ok_or_else(bad)?;
            let reclen = u16::from_ne_bytes([head[16], head[17]]) as usize;
            let record = buf
                .get(at..at + reclen)
                .filter(|_| reclen > 19)
                .ok_or_else(bad)?;
            let raw = &record[19..];
            let name = &raw[..raw.iter().position(|b| *b == 0).unwrap_or(raw.len())];
            if name != b"." && name != b".." {
                let len = u8::try_from(name.len()).map_err(|_| bad())?;
                typed.extend_from_slice(&[head[18], len]);
                typed.extend_from_slice(name);
            }
            at += reclen;
        }
    }
}

/// The entry names of an open directory, without `.` and `..`, in directory order.
pub fn list(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    list_typed(dir).map(|typed| names(&typed))
}

/// The `(d_type, name)` entries of [`list_typed`]'s bytes.
fn entries(typed: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = typed;
    std::iter::from_fn(move || {
        let [kind, len, tail @ ..] = rest else {
            return None;
        };
        let (name, after) = tail.split_at_checked(usize::from(*len))?;
        rest = after;
        Some((*kind, name))
    })
}

/// The entry names of [`list_typed`]'s bytes, in directory order.
pub fn names(typed: &[u8]) -> Vec<OsString> {
    entries(typed)
        .map(|(_, name)| OsString::from_vec(name.to_vec()))
        .collect()
}

/// A long listing's entries in name order, to be asked for one name in `log n` steps
/// ([`SortedListing::entry_type`]) where [`entry_type`] reads the whole listing.
#[derive(Debug)]
pub struct SortedListing {
    typed: std::sync::Arc<[u8]>,
    /// Each entry's name (offset and length in `typed`) and `d_type`, sorted by name.
    order: Vec<(u32, u8, u8)>,
}

impl SortedListing {
    /// The index of [`list_typed`]'s bytes `typed`: one allocation and a sort.
    pub fn of(typed: std::sync::Arc<[u8]>) -> Self {
        let mut order = Vec::new();
        let mut at = 0usize;
        while let Some([kind, len]) = typed.get(at..at + 2).map(|h| [h[0], h[1]]) {
            let start = at + 2;
            let end = start + usize::from(len);
            if end > typed.len() {
                break;
            }
            if let Ok(offset) = u32::try_from(start) {
                order.push((offset, len, kind));
            }
            at = end;
        }
        let name = |e: &(u32, u8, u8)| {
            let start = e.0 as usize;
            &typed[start..start + usize::from(e.1)]
        };
        order.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        SortedListing { typed, order }
    }

    /// What [`entry_type`] answers for `name`, by a binary search.
    pub fn entry_type(&self, name: &[u8]) -> Option<u8> {
        let typed = &self.typed;
        self.order
            .binary_search_by(|e| {
                let start = e.0 as usize;
                typed[start..start + usize::from(e.1)].cmp(name)
            })
            .ok()
            .map(|i| self.order[i].2)
    }
}

/// The `d_type` the listing gave `name` (`libc::DT_REG`, `DT_LNK`, … or `DT_UNKNOWN` where the
/// filesystem does not say); `None` when the listing has no such entry.
pub fn entry_type(typed: &[u8], name: &[u8]) -> Option<u8> {
    let mut rest = typed;
    while let [kind, len, tail @ ..] = rest {
        let len = usize::from(*len);
        let (entry, after) = tail.split_at_checked(len)?;
        if entry == name {
            return Some(*kind);
        }
        rest = after;
    }
    None
}
