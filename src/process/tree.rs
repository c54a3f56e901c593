//! The processes gpudoctor is responsible for, seen through `/proc` (of the machine gpudoctor
//! runs on, never `--root`), and signals sent to them without hitting a stranger.
//!
//! A pid read from `/proc` can be reused by an unrelated process before the signal is sent.
//! Two things rule that out: a direct child of gpudoctor keeps its pid until gpudoctor reaps it
//! (nobody else can), so it is signalled by pid; any other descendant is first pinned with a
//! `pidfd_open(2)` (Linux 5.3), checked again (same start time, still ours) and signalled
//! through the pidfd (`pidfd_send_signal(2)`). Where pidfds are missing, a grandchild is left
//! for the next round: once its parent is killed it is re-parented to gpudoctor (the child
//! subreaper, `PR_SET_CHILD_SUBREAPER`, prctl(2)) and becomes a direct child.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One line of `/proc/<pid>/stat`, the fields used here (proc(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// Field 22, in clock ticks since boot: with the pid, it names one process for good.
    pub start: u64,
}

impl Proc {
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }

    /// Stopped by a signal (`T`) or in a tracing stop (`t`): it cannot fork now.
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }
}

/// Parse `/proc/<pid>/stat`. The command name is in parentheses and may itself contain
/// spaces and parentheses, so the fields after it are found from the last `)`.
pub fn parse_stat(text: &str) -> Option<Proc> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    Some(Proc {
        pid,
        comm,
        state: rest.first()?.chars().next()?,
        ppid: rest.get(1)?.parse().ok()?,
        pgrp: rest.get(2)?.parse().ok()?,
        start: rest.get(19)?.parse().ok()?,
    })
}

pub fn read_proc(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Every process visible in `/proc`, by pid.
pub fn snapshot() -> BTreeMap<i32, Proc> {
    let mut all = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return all;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(p) = read_proc(pid) {
            all.insert(pid, p);
        }
    }
    all
}

/// The state of [`snapshot_shared`]: scans started and finished (one at a time), the last one.
struct Shared {
    scanning: bool,
    started: u64,
    finished: u64,
    last: Option<std::sync::Arc<BTreeMap<i32, Proc>>>,
}

static SHARED: std::sync::Mutex<Shared> = std::sync::Mutex::new(Shared {
    scanning: false,
    started: 0,
    finished: 0,
    last: None,
});
static SCANNED: std::sync::Condvar = std::sync::Condvar::new();

/// A [`snapshot`] begun after this call, shared by every caller that asked while the one
/// before it ran: as fresh as a scan of one's own, but 128 groups finishing at once (`gpudoctor
/// pairs`) read `/proc` a few times between them, not 128 times each round.
pub fn snapshot_shared() -> std::sync::Arc<BTreeMap<i32, Proc>> {
    let lock = || SHARED.lock().unwrap_or_else(|e| e.into_inner());
    let mut state = lock();
    // A scan running now began before this call: the one after it is needed.
    let need = state.started + 1;
    loop {
        if state.finished >= need
            && let Some(last) = &state.last
        {
            return last.clone();
        }
        if !state.scanning {
            state.scanning = true;
            state.started += 1;
            let id = state.started;
            drop(state);
            let all = std::sync::Arc::new(snapshot());
            let mut state = lock();
            state.scanning = false;
            state.finished = id;
            state.last = Some(all.clone());
            SCANNED.notify_all();
            return all;
        }
        state = SCANNED.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

/// The children of `pid`, from `/proc/<pid>/task/<tid>/children` of each of its threads
/// (proc(5), Linux 3.5, `CONFIG_PROC_CHILDREN`): one small read per thread, much faster than a
/// whole `/proc` scan, which a process that forks and exits every few milliseconds outruns (the
/// directory is listed at once and each pid is read later, when it is gone and its child was
/// not listed). `None` when the files are missing (the kernel lacks them, or `pid` is gone).
pub fn children(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut found = Vec::new();
    let mut any = false;
    for task in tasks.flatten() {
        let mut path = task.path();
        path.push("children");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        any = true;
        found.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    any.then_some(found)
}

/// The pids below `roots` (not the roots themselves) in `all`, by parent links.
pub fn below(all: &BTreeMap<i32, Proc>, roots: &BTreeSet<i32>) -> BTreeSet<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in all.values() {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut found = BTreeSet::new();
    let mut todo: Vec<i32> = roots.iter().copied().collect();
    while let Some(pid) = todo.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            if found.insert(*child) {
                todo.push(*child);
            }
        }
    }
    found
}

/// The value of `name` in the environment `pid` was started with (`/proc/<pid>/environ`,
/// proc(5): what exec got, whatever the process changed in its own memory since); `None` when
/// it has none, is gone, or is a zombie (whose environment reads empty).
pub fn environ_value(pid: i32, name: &str) -> Option<Vec<u8>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    raw.split(|b| *b == 0).find_map(|entry| {
        entry
            .strip_prefix(name.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
            .map(<[u8]>::to_vec)
    })
}

/// The command line of a process, for the report (`sleep 1000`), at most 160 bytes; its
/// `comm` when the command line is gone (a zombie) or empty (a kernel thread).
pub fn command_of(p: &Proc) -> String {
    let line = std::fs::read(format!("/proc/{}/cmdline", p.pid))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|part| !part.is_empty())
                .map(String::from_utf8_lossy)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let line = if line.is_empty() {
        p.comm.clone()
    } else {
        line
    };
    if line.len() <= 160 {
        return line;
    }
    let mut cut = 157;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &line[..cut])
}

/// What happened when a signal was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Sent,
    /// The process was already gone (or is no longer the one seen).
    Gone,
    /// It could not be signalled safely now (no pidfd support); a later round will.
    Deferred,
}

/// Send `signal` to `p`, a process seen as ours in a snapshot (see the module doc).
pub fn signal(p: &Proc, signal: libc::c_int) -> Sent {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    if p.ppid == me {
        // A child of ours stays this process until we reap it.
        // SAFETY: kill only sends a signal to a pid we own (see above).
        return if unsafe { libc::kill(p.pid, signal) } == 0 {
            Sent::Sent
        } else {
            Sent::Gone
        };
    }
    let pidfd = match pidfd_open(p.pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Sent::Gone,
        Err(_) => return Sent::Deferred,
    };
    // Pinned: the pid still names the process seen (same start time), so the signal reaches
    // it and nothing else.
    match read_proc(p.pid) {
        Some(now) if now.start == p.start && !now.is_zombie() => {}
        _ => return Sent::Gone,
    }
    // SAFETY: pidfd_send_signal through a pidfd we own; no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 { Sent::Sent } else { Sent::Gone }
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = i32::try_from(raw).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Pidfds held at once, at most: each is a descriptor, and 128 groups finishing at once must
/// not take the ones a new run needs for its pipes (RLIMIT_NOFILE is 1024 on many systems).
pub const PIN_BUDGET: usize = 256;

/// Pidfds held now, by every [`Pin`] of this process.
static PINNED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A process held through a pidfd: its exit can be waited for with poll(2), which reports a
/// pidfd readable once the process has exited (pidfd_open(2)).
#[derive(Debug)]
pub struct Pin {
    fd: OwnedFd,
}

impl Drop for Pin {
    fn drop(&mut self) {
        PINNED.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Hold `p`, a process seen in a snapshot: `None` when it is gone (or its pid already names
/// another process), when pidfds are missing (before Linux 5.3), or when [`PIN_BUDGET`] are
/// held already.
pub fn pin(p: &Proc) -> Option<Pin> {
    use std::sync::atomic::Ordering;
    PINNED
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < PIN_BUDGET).then_some(n + 1)
        })
        .ok()?;
    let Ok(fd) = pidfd_open(p.pid) else {
        PINNED.fetch_sub(1, Ordering::SeqCst);
        return None;
    };
    // From here the count is the pin's to give back, when it drops.
    let pin = Pin { fd };
    // Pinned: the pid names the process seen only if its start time is still the same.
    match read_proc(p.pid) {
        Some(now) if now.start == p.start && !now.is_zombie() => Some(pin),
        _ => None,
    }
}

/// Wait until one of `pins` has exited, or until `deadline`: no CPU while nothing ends. True
/// when one has exited (or the wait failed: look again), false at the deadline.
pub fn wait_any(pins: &[Pin], deadline: std::time::Instant) -> bool {
    let mut fds: Vec<libc::pollfd> = pins
        .iter()
        .map(|p| libc::pollfd {
            fd: p.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        // Rounded up, so a wait never ends just short of the deadline and spins.
        let ms = libc::c_int::try_from(left.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll on descriptors we own, `fds.len()` entries.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc > 0 {
            return true;
        }
        if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return true;
        }
    }
}

/// Wait until every one of `pins` has exited, or until `deadline`; true when all have.
pub fn wait_all(mut pins: Vec<Pin>, deadline: std::time::Instant) -> bool {
    while !pins.is_empty() {
        if !wait_any(&pins, deadline) {
            return false;
        }
        pins.retain(|p| !has_exited(p));
    }
    true
}

/// The pinned process has exited (its pidfd reads as ready, without waiting).
fn has_exited(pin: &Pin) -> bool {
    let mut fd = libc::pollfd {
        fd: pin.fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one descriptor we own, without waiting.
    let rc = unsafe { libc::poll(&mut fd, 1, 0) };
    rc != 0
}

/// Reap `pid` if it is a child of ours that has ended; its exit status if reaped.
pub fn reap(pid: i32) -> Option<libc::c_int> {
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid on one pid, non-blocking, with a valid status pointer.
    let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (got == pid).then_some(status)
}

/// Make this process the child subreaper of everything it starts: a descendant whose parent
/// dies is re-parented to gpudoctor, not to init, so it can still be found and killed.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER and an integer argument changes only this
    // process's attribute.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        // proc(5) layout; a command name with a space and a parenthesis.
        let line = "4242 (my (weird) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let p = parse_stat(line).unwrap();
        assert_eq!(p.pid, 4242);
        assert_eq!(p.comm, "my (weird) cmd");
        assert_eq!(p.state, 'S');
        assert_eq!((p.ppid, p.pgrp, p.start), (1, 4242, 987654));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn this_process_is_in_the_snapshot_and_below_its_parent() {
        // SAFETY: getpid/getppid have no preconditions.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        let all = snapshot();
        assert_eq!(all.get(&me).map(|p| p.ppid), Some(parent));
        assert!(below(&all, &BTreeSet::from([parent])).contains(&me));
    }
}
