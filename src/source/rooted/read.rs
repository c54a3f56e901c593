//! Opening files under the root for reading, and reading them within their caps.
//!
//! A file's type is looked at **before** it is opened for reading, so that a device node
//! planted in a tree (`/dev/watchdog` arms the watchdog when opened, watchdog-api.rst) is
//! refused by name without its driver ever being asked, and a FIFO's waiting writer is never
//! woken: a regular file's name is looked at with `fstatat(AT_SYMLINK_NOFOLLOW)`
//! ([`open_regular_at`]) or, in a directory this run listed, by the type its listing gave
//! ([`open_listed`]); only a regular file is then opened, and the descriptor looked at again
//! (`fstat`: the same inode, still a regular file). docs/security.md names the one window this
//! leaves (a device node made between the look and the open, which takes the host's root).
//!
//! The kernel log (`/dev/kmsg`, a device) is judged the stricter way ([`open_at`]): its name is
//! opened `O_PATH | O_NOFOLLOW` (no driver's `open`, no FIFO end, no link: open(2), `O_PATH`),
//! judged with `fstat` on that descriptor, and that same descriptor reopened through
//! `/proc/self/fd/N`, which reopens the inode that was judged (proc(5)). Without `/proc` the
//! name is opened again and the inode compared.
//!
//! Every read is `O_NONBLOCK | O_NOCTTY` all the same (a FIFO never blocks it, a terminal
//! never becomes ours).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::named::{
    Keep, Tail, read_capped_bytes, read_file_tail, read_records, read_records_kept,
};
use super::{Dir, FsError, RootedFs, clean, fd};

/// How a file is opened for reading once its type is known: `O_NONBLOCK`, so opening a FIFO
/// never waits for a writer, and `O_NOCTTY`, so a terminal never becomes the controlling
/// terminal (`O_NOFOLLOW` and `O_CLOEXEC` are added by `fd.rs`).
const READ_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;

/// `/dev/kmsg`'s device numbers (Documentation/admin-guide/devices.txt: char 1, minor 11).
const KMSG_DEVICE: (u32, u32) = (1, 11);

/// What may be opened for reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// Regular files only.
    Regular,
    /// A regular file, the kernel log's own character device (1, 11), or a FIFO: tests stand
    /// one in for a `/dev/kmsg` that never ends (tests/timeouts.rs), and opening a FIFO
    /// `O_NONBLOCK` for reading runs no driver and never waits (fifo(7)).
    RegularOrKmsg,
}

impl Accept {
    /// `None` when `st` may be opened; else what it is, for the error.
    fn refusal(self, st: &libc::stat) -> Option<String> {
        if fd::is_file(st) || (self == Accept::RegularOrKmsg && fd::is_fifo(st)) {
            return None;
        }
        if fd::is_char_device(st) {
            let numbers = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
            if self == Accept::RegularOrKmsg {
                if numbers == KMSG_DEVICE {
                    return None;
                }
                return Some(format!(
                    "a character device {}:{}, not the kernel log's {}:{}",
                    numbers.0, numbers.1, KMSG_DEVICE.0, KMSG_DEVICE.1
                ));
            }
            return Some(format!("a character device {}:{}", numbers.0, numbers.1));
        }
        Some(fd::kind_name(st).to_string())
    }
}

/// A file opened for reading, with its size as the `fstat` that judged the open descriptor saw
/// it (0 for what states none: procfs, a FIFO), so a read need not ask again.
struct Opened {
    file: File,
    len: u64,
}

/// Open `name` in `dir` for reading if `accept` allows what it is (see the module doc). The
/// outer error is the system's (not there, a link: `ELOOP`, as an `O_NOFOLLOW` open says);
/// the inner one names what the entry is when it is refused.
fn open_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    accept: Accept,
) -> io::Result<Result<Opened, String>> {
    let path = fd::open_one(dir, name, libc::O_PATH)?;
    let checked = fd::fstat(path.as_fd())?;
    if fd::is_link(&checked) {
        // `O_PATH | O_NOFOLLOW` opens a link itself where a plain `O_NOFOLLOW` open fails.
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    if let Some(kind) = accept.refusal(&checked) {
        return Ok(Err(kind));
    }
    let opened: OwnedFd = match fd::reopen(path.as_fd(), READ_FLAGS) {
        Some(opened) => opened?,
        None => fd::open_one(dir, name, READ_FLAGS)?,
    };
    let now = fd::fstat(opened.as_fd())?;
    if (now.st_dev, now.st_ino) != (checked.st_dev, checked.st_ino) {
        return Err(io::Error::other(
            "replaced while it was being opened (the tree is changing); run again",
        ));
    }
    if let Some(kind) = accept.refusal(&now) {
        return Ok(Err(kind));
    }
    Ok(Ok(Opened {
        file: File::from(opened),
        len: u64::try_from(now.st_size).unwrap_or(0),
    }))
}

/// [`open_at`] for a regular file alone (every read but the kernel log's): the name looked at
/// first without being opened (`fstatat`, a link not followed), opened for reading only when
/// that says "regular file", and the descriptor looked at again (`fstat`): the same device and
/// inode, still a regular file. Five system calls and two lookups where reopening an `O_PATH`
/// descriptor through `/proc/self/fd` took six and a `/proc` lookup (issue 41). What this gives
/// up: a device node made at that name in the moment between the look and the open — which
/// takes `CAP_MKNOD`, the host's root, as unprivileged mounts are `nodev` — would be opened
/// (and then refused unread); a FIFO made then is opened `O_NONBLOCK`, which runs no driver
/// and waits for no writer, and refused.
fn open_regular_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Result<Opened, String>> {
    let looked = fd::stat_one(dir, name)?;
    if fd::is_link(&looked) {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    if let Some(kind) = Accept::Regular.refusal(&looked) {
        return Ok(Err(kind));
    }
    let opened = fd::open_one(dir, name, READ_FLAGS)?;
    opened_as_looked(opened, &looked)
}

/// `opened`, the name `looked` at: refused when it is another inode by now or no longer a
/// regular file.
fn opened_as_looked(opened: OwnedFd, looked: &libc::stat) -> io::Result<Result<Opened, String>> {
    let now = fd::fstat(opened.as_fd())?;
    if (now.st_dev, now.st_ino) != (looked.st_dev, looked.st_ino) {
        return Err(io::Error::other(
            "replaced while it was being opened (the tree is changing); run again",
        ));
    }
    Ok(regular(opened, &now))
}

/// `opened`, whose `fstat` is `now`, when it is a regular file; else what it is (closed
/// unread).
fn regular(opened: OwnedFd, now: &libc::stat) -> Result<Opened, String> {
    if let Some(kind) = Accept::Regular.refusal(now) {
        return Err(kind);
    }
    Ok(Opened {
        file: File::from(opened),
        len: u64::try_from(now.st_size).unwrap_or(0),
    })
}

/// A regular file told by its directory's listing (`fd::list_typed`): what `getdents64`
/// says an entry is comes from its inode's type on every filesystem that fills `d_type`
/// (sysfs, procfs, ext4, xfs, btrfs, tmpfs, overlayfs). An entry listed as a regular file is
/// opened for reading at once and looked at through that descriptor (`fstat`: still a regular
/// file, or refused unread); anything else — a device, a FIFO, a link, `DT_UNKNOWN` — is
/// looked at first as [`open_regular_at`] does, so a device planted in a tree is still never
/// opened. A name the listing lacks is not there, without asking again. Two system calls of
/// six per file, and no `/proc` lookup (issue 41). Only a device node made in the moment
/// between the listing and the open (which takes `CAP_MKNOD`, the host's root) could be opened;
/// a FIFO made then is opened `O_NONBLOCK`, which runs no driver and waits for no writer, and
/// refused.
fn open_listed(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    raw: &[u8],
) -> io::Result<Result<Opened, String>> {
    use std::os::unix::ffi::OsStrExt as _;
    match fd::entry_type(raw, name.as_bytes()) {
        None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
        Some(libc::DT_REG) => {
            let opened = fd::open_one(dir, name, READ_FLAGS)?;
            let now = fd::fstat(opened.as_fd())?;
            Ok(regular(opened, &now))
        }
        Some(_) => open_regular_at(dir, name),
    }
}

/// [`open_regular_at`] for a regular file, [`open_at`] for anything else `accept` allows.
fn open_accepted(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    accept: Accept,
) -> io::Result<Result<Opened, String>> {
    match accept {
        Accept::Regular => open_regular_at(dir, name),
        Accept::RegularOrKmsg => open_at(dir, name, accept),
    }
}

fn refused(rel: &str, kind: String) -> FsError {
    FsError::NotAFile {
        path: rel.into(),
        kind,
    }
}

impl RootedFs {
    /// Open `rel` for reading, all links followed, when `accept` allows what it is.
    fn open_for_read(&self, rel: &str, accept: Accept) -> Result<Opened, FsError> {
        self.open_for_read_at(rel, accept, None)
    }

    /// [`RootedFs::open_for_read`], with the file's place (its resolved directory and name)
    /// when the caller worked it out already (`memo.rs`).
    fn open_for_read_at(
        &self,
        rel: &str,
        accept: Accept,
        place: Option<(&Dir, &str)>,
    ) -> Result<Opened, FsError> {
        let quick = match place {
            Some((dir, name)) => self.open_in_dir(rel, dir, name, accept, true),
            None => self.open_in_known_dir(rel, accept),
        };
        if let Some(opened) = quick {
            return opened;
        }
        let components = self.resolve(rel, true)?;
        self.note_open("read", || components.display());
        let opened = match components.split_last() {
            None => {
                let root = self.root_fd().map_err(|e| FsError::from_io(rel, &e))?;
                open_accepted(root.as_fd(), OsStr::new("."), accept)
            }
            Some((last, dir)) => {
                let dir = self.dir_fd(dir).map_err(|e| FsError::from_io(rel, &e))?;
                open_accepted(dir.as_fd(), last, accept)
            }
        };
        opened
            .map_err(|e| FsError::from_io(rel, &e))?
            .map_err(|kind| refused(rel, kind))
    }

    /// The fast way to open a file whose directory resolved before: open the last component
    /// directly (`O_NOFOLLOW`) in the directory's descriptor, skipping the look a walk would
    /// make. `None` when this does not apply or cannot decide (not spelt plainly, the last
    /// component is a link, tracing, any error other than "not there"): the caller then walks,
    /// which gives the exact result.
    fn open_in_known_dir(&self, rel: &str, accept: Accept) -> Option<Result<Opened, FsError>> {
        if self.trace.is_some() {
            return None;
        }
        let (dir, name) = clean(rel)?.rsplit_once('/')?;
        let dir = self.dir_of(dir)?;
        self.open_in_dir(rel, &dir, name, accept, false)
    }

    /// [`RootedFs::open_in_known_dir`] for `name` in the resolved directory `dir`. With
    /// `by_listing` (a run's remembered read), in a directory this run listed, a regular file
    /// is told by the listing ([`open_listed`]).
    fn open_in_dir(
        &self,
        rel: &str,
        dir: &Dir,
        name: &str,
        accept: Accept,
        by_listing: bool,
    ) -> Option<Result<Opened, FsError>> {
        let opened = self.dir_fd(OsStr::new(&dir.path)).and_then(|d| {
            let listed = (by_listing && accept == Accept::Regular)
                .then(|| self.typed_listing(dir))
                .flatten();
            match listed {
                Some(raw) => open_listed(d.as_fd(), OsStr::new(name), &raw),
                None => open_accepted(d.as_fd(), OsStr::new(name), accept),
            }
        });
        // Counted when this answers; otherwise the walk that follows opens and counts it.
        if opened.is_ok()
            || opened
                .as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
        {
            self.note_open("read", || format!("{}/{name}", dir.path));
        }
        match opened {
            Ok(Ok(file)) => Some(Ok(file)),
            Ok(Err(kind)) => Some(Err(refused(rel, kind))),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Some(Err(match &dir.last_link {
                Some((link, target)) => FsError::Dangling {
                    path: rel.into(),
                    link: link.clone(),
                    target: target.clone(),
                },
                None => FsError::NotFound { path: rel.into() },
            })),
            Err(_) => None,
        }
    }

    pub(super) fn read_bytes_untraced(
        &self,
        rel: &str,
        place: Option<(&Dir, &str)>,
    ) -> Result<Vec<u8>, FsError> {
        let Opened { mut file, len } = self.open_for_read_at(rel, Accept::Regular, place)?;
        if len > 0 && len <= self.read_cap {
            // A file on disk (a fixture, a capture, /etc) states its size: read exactly that,
            // without the read that only confirms the end. sysfs states 4096 for every
            // attribute and procfs 0, so those are read to the end as below.
            let mut bytes = Vec::with_capacity(len as usize);
            (&mut file)
                .take(len)
                .read_to_end(&mut bytes)
                .map_err(|e| FsError::from_io(rel, &e))?;
            // Shorter than stated (sysfs) means `read_to_end` met the end.
            return Ok(bytes);
        }
        // sysfs states 4096, procfs 0: no size to start from.
        read_capped_bytes(&mut file, rel, self.read_cap, 0)
    }

    pub(super) fn read_tail_untraced(&self, rel: &str, max: u64) -> Result<String, FsError> {
        use std::io::{Seek, SeekFrom};
        let Opened { mut file, len } = self.open_for_read(rel, Accept::Regular)?;
        let max = max.min(self.read_cap);
        let skipped = len > max;
        if skipped {
            file.seek(SeekFrom::Start(len - max))
                .map_err(|e| FsError::from_io(rel, &e))?;
        }
        let mut bytes = Vec::new();
        (&mut file)
            .take(max)
            .read_to_end(&mut bytes)
            .map_err(|e| FsError::from_io(rel, &e))?;
        if bytes.contains(&0) {
            return Err(FsError::NotText { path: rel.into() });
        }
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if skipped {
            match text.find('\n') {
                Some(nl) => {
                    text.drain(..=nl);
                }
                None => text.clear(),
            }
        }
        Ok(text)
    }

    /// Read a record device such as `/dev/kmsg` to its current end without blocking: each
    /// `read` returns one record and `EAGAIN` means "no more for now" (kernel
    /// `Documentation/ABI/testing/dev-kmsg`). A regular file is read to EOF. Capped like any
    /// read. Any other device (only `/dev/kmsg`'s numbers are opened) or a socket is refused
    /// without being opened; a FIFO is read like a pipe (see [`Accept::RegularOrKmsg`]).
    pub fn read_records_nonblocking(&self, rel: &str) -> Result<String, FsError> {
        let mut file = self.open_for_read(rel, Accept::RegularOrKmsg)?.file;
        read_records(&mut file, rel, self.read_cap)
    }

    /// A log's newest bytes, at most the read cap ([`Tail`]): a regular file from its tail (a
    /// seek), or — for `dev/kmsg` (`kmsg`: the kernel log's device is accepted, as by
    /// [`RootedFs::read_records_nonblocking`]) — the records to their current end, the oldest
    /// dropped past the cap. Never refused for its length or its bytes: the caller decodes.
    pub(super) fn read_log_tail_untraced(&self, rel: &str, kmsg: bool) -> Result<Tail, FsError> {
        let accept = if kmsg {
            Accept::RegularOrKmsg
        } else {
            Accept::Regular
        };
        let Opened { mut file, len } = self.open_for_read(rel, accept)?;
        let st = fd::fstat(file.as_fd()).map_err(|e| FsError::from_io(rel, &e))?;
        if fd::is_file(&st) {
            return read_file_tail(&mut file, rel, self.read_cap, len);
        }
        read_records_kept(&mut file, rel, self.read_cap, Keep::Tail)
    }

    /// Open a regular file under the root for streaming (a capture's NCCL log), resolved and
    /// opened like every read; never a FIFO or a device. Not traced, not capped.
    pub fn open_file(&self, rel: &str) -> Result<File, FsError> {
        self.open_for_read(rel, Accept::Regular).map(|o| o.file)
    }
}
