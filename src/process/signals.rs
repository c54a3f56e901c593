//! SIGINT, SIGTERM and SIGHUP to gpudoctor itself: stop what it started, remove what it left
//! half-done, then die of the same signal (so a shell or a supervisor sees why it ended).
//!
//! The handler does only async-signal-safe things (signal-safety(7)): it stores the signal
//! number in an atomic and writes one byte to a pipe (the self-pipe trick). A watcher thread
//! blocked on that pipe does the rest, in ordinary code:
//! 1. it marks the run interrupted: a benchmark's run loop ([`super::Group`]) sees that within
//!    its poll interval and stops its process group (SIGTERM, grace, SIGKILL); the watcher
//!    waits for the live groups to finish, bounded;
//! 2. it kills and reaps every descendant left (gpudoctor is their subreaper);
//! 3. it removes the temporary trees registered with [`register_temp`] (an unpacked capture,
//!    a capture being built), after taking the write lock every writer of such a tree holds
//!    per file ([`hold_writes`]), so no writer can recreate part of a tree after its removal;
//! 4. it restores the default action and raises the signal again.
//!
//! The watcher thread is started only once there is something to clean up ([`ensure_watcher`]:
//! before the first child is started (`Group::spawn`), and before a temporary tree is made and
//! registered); until then a handled signal ends gpudoctor at once, as the default action would,
//! since nothing it could stop or remove exists yet. A `check` that starts nothing stays one
//! thread: glibc then takes its single-thread paths (`SINGLE_THREAD_P`: malloc without arena
//! locks, system calls without the cancellation bookkeeping), which were 3 % of a replayed
//! `check`'s time (issue 41).
//!
//! Nothing is installed unless the binary calls [`install`]; the library's tests never do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// The signals handled.
pub const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// The self-pipe's write end (-1: not installed).
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The self-pipe's read end, for the watcher (-1: not installed).
static PIPE_READ: AtomicI32 = AtomicI32::new(-1);
/// Whether the watcher reads the pipe: until it does, a signal ends gpudoctor at once.
static WATCHING: AtomicBool = AtomicBool::new(false);
/// Held while the watcher is started, so that two threads never start two.
static STARTING: Mutex<()> = Mutex::new(());

/// Temporary trees to remove if gpudoctor is stopped by a signal, by registration id.
static TEMPS: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Writers of temporary trees hold this for reading, per file; the watcher takes it for
/// writing before removing the trees and never gives it back (`true`: closing).
static WRITES: RwLock<bool> = RwLock::new(false);

/// The signal gpudoctor received, if any.
pub fn interrupted() -> Option<libc::c_int> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// The name of a handled signal, for messages and reports.
pub fn name(sig: libc::c_int) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        other => format!("signal {other}"),
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe only: atomics, errno kept, one write(2).
    // SAFETY: __errno_location is the thread's errno; reading and restoring it is what a
    // signal handler must do around a call that may change it.
    let errno = unsafe { *libc::__errno_location() };
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    if !WATCHING.load(Ordering::SeqCst) {
        // Nothing started and nothing written yet (module doc): die of the signal now.
        // SAFETY: signal(2) and raise(3) are async-signal-safe (signal-safety(7)); the signal,
        // blocked while its handler runs, is delivered with its default action on return.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    }
    let fd = PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = [sig as u8];
        // SAFETY: write(2) is async-signal-safe; a full pipe (O_NONBLOCK) just drops the byte,
        // the watcher is already awake then.
        unsafe {
            libc::write(fd, byte.as_ptr().cast(), 1);
        }
    }
    // SAFETY: see above.
    unsafe { *libc::__errno_location() = errno };
}

/// Install the handlers (the watcher starts with [`ensure_watcher`]). Idempotent; an error
/// leaves the default actions.
pub fn install() -> std::io::Result<()> {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors into a two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read_end, write_end] = fds;
    // The read end blocks: the watcher sleeps in read(2) until a byte arrives.
    // SAFETY: fcntl on a descriptor just created.
    unsafe {
        let flags = libc::fcntl(read_end, libc::F_GETFL);
        libc::fcntl(read_end, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    PIPE_WRITE.store(write_end, Ordering::SeqCst);
    PIPE_READ.store(read_end, Ordering::SeqCst);
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with a handler that is async-signal-safe; SA_RESTART so
        // that the main thread's reads are not cut short by EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(sig, &action, std::ptr::null_mut()) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Start the watcher if the handlers are installed and it is not running: before anything a
/// signal must stop or remove exists (a child, a temporary tree). Idempotent. When it cannot
/// be started, a signal still ends gpudoctor at once (the default action), and that is said.
pub fn ensure_watcher() {
    if WATCHING.load(Ordering::SeqCst) || !INSTALLED.load(Ordering::SeqCst) {
        return;
    }
    let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    let read_end = PIPE_READ.load(Ordering::SeqCst);
    if WATCHING.load(Ordering::SeqCst) || read_end < 0 {
        return;
    }
    match std::thread::Builder::new()
        .name("gpudoctor-signals".into())
        .spawn(move || watch(read_end))
    {
        Ok(_) => WATCHING.store(true, Ordering::SeqCst),
        Err(err) => eprintln!(
            "gpudoctor: cannot watch for signals ({err}); an interrupted run may leave processes or files"
        ),
    }
}

fn watch(read_end: libc::c_int) {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: read into a one-byte buffer from the pipe this thread owns.
        let n = unsafe { libc::read(read_end, byte.as_mut_ptr().cast(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return; // the pipe is gone: nothing more can arrive
    }
    let sig = interrupted().unwrap_or(libc::SIGTERM);
    eprintln!(
        "gpudoctor: got {}: stopping what it started and removing temporary files",
        name(sig)
    );
    // 1. The run loops stop their groups themselves; wait for them, bounded.
    let deadline =
        Instant::now() + super::KILL_GRACE * 2 + super::contain::TEARDOWN + Duration::from_secs(2);
    while super::live_groups() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // 2. Whatever is left below gpudoctor.
    let killed = super::kill_all_descendants(super::KILL_GRACE);
    if !killed.is_empty() {
        let names: Vec<String> = killed.iter().map(|k| k.describe()).collect();
        // Command lines are the benchmark's to choose: shown escaped.
        let names = names.join("; ");
        eprintln!("gpudoctor: killed {}", crate::text::sanitize::text(&names));
    }
    // 3. Temporary trees, with every writer stopped for good.
    let mut closing = WRITES.write().unwrap_or_else(|e| e.into_inner());
    *closing = true;
    remove_temps();
    // 4. Die of the signal. The lock is held on purpose: no writer may start again.
    // SAFETY: restoring the default action and raising the signal ends the process with it.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

/// After a signal, the main thread must not finish on its own (its exit code would hide the
/// signal, and the watcher may still be removing files): wait for the watcher to end the
/// process. Returns at once when no signal came.
pub fn wait_if_interrupted() {
    let Some(sig) = interrupted() else {
        return;
    };
    // The watcher is bounded (two grace periods, a namespace teardown and a sweep); this bound is only a backstop.
    let deadline =
        Instant::now() + super::KILL_GRACE * 4 + super::contain::TEARDOWN + Duration::from_secs(10);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: _exit ends the process without running anything more.
    unsafe { libc::_exit(128 + sig) }
}

fn remove_temps() {
    let temps = match TEMPS.lock() {
        Ok(t) => t.clone(),
        Err(e) => e.into_inner().clone(),
    };
    for (_, path) in temps {
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => Ok(()),
        };
        if let Err(err) = removed {
            eprintln!("gpudoctor: could not remove {}: {err}", path.display());
        }
    }
}

/// A temporary tree or file removed if a signal stops gpudoctor; unregistered when dropped
/// (its owner removes it on every other path).
#[derive(Debug)]
pub struct TempRegistration(u64);

pub fn register_temp(path: &Path) -> TempRegistration {
    ensure_watcher();
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    let mut temps = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    temps.push((id, path.to_path_buf()));
    TempRegistration(id)
}

impl Drop for TempRegistration {
    fn drop(&mut self) {
        let mut temps = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
        temps.retain(|(id, _)| *id != self.0);
    }
}

/// Is `path` a temporary tree gpudoctor made in this run (an unpacked archive, a capture being
/// built), or inside one? Such a tree came from an archive or is being written by gpudoctor: it
/// is never a host's filesystem, so nothing in it is loaded and it is never judged as a live
/// node (source::open, issue 30). Compared as given and with links resolved.
pub fn is_own_temp(path: &Path) -> bool {
    let temps = match TEMPS.lock() {
        Ok(t) => t.clone(),
        Err(e) => e.into_inner().clone(),
    };
    let resolved = std::fs::canonicalize(path).ok();
    temps.iter().any(|(_, temp)| {
        let temp_resolved = std::fs::canonicalize(temp).ok();
        path.starts_with(temp)
            || matches!((&resolved, &temp_resolved), (Some(p), Some(t)) if p.starts_with(t))
    })
}

/// gpudoctor is stopping on a signal; nothing more may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stopped by {}", name(*.0))]
pub struct Interrupted(pub libc::c_int);

/// Hold this while writing one entry of a registered temporary tree: the watcher removes the
/// trees only when no writer holds it, and after that it is never granted again.
pub fn hold_writes() -> Result<RwLockReadGuard<'static, bool>, Interrupted> {
    if let Some(sig) = interrupted() {
        return Err(Interrupted(sig));
    }
    let guard = WRITES.read().unwrap_or_else(|e| e.into_inner());
    if *guard {
        return Err(Interrupted(interrupted().unwrap_or(libc::SIGTERM)));
    }
    Ok(guard)
}
