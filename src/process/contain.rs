//! How a [`Group`](super::Group) is started so that nothing it starts outlives the run, even
//! when gpudoctor itself is killed with SIGKILL (the OOM killer, a kubelet's grace period).
//!
//! - **PID namespace** (preferred; needs `CAP_SYS_ADMIN`, which gpudoctor has as root in its
//!   privileged DaemonSet Pod): the child gpudoctor forks (here called the *keeper*) calls
//!   `unshare(CLONE_NEWPID)` and forks the namespace's *init*, which forks the benchmark (pid N+1
//!   in the namespace) and then only reaps. Every process the benchmark starts, however it
//!   forks, double-forks or `setsid`s, is in the namespace, below the init. When the init dies
//!   the kernel SIGKILLs everything in the namespace and waits for it (pid_namespaces(7),
//!   `zap_pid_ns_processes`): a fork-and-exit chain cannot outrun that.
//!   The keeper has `PR_SET_PDEATHSIG` SIGKILL (prctl(2)) toward gpudoctor, and the init toward
//!   the keeper: gpudoctor's death kills the keeper, whose death kills the init, whose death
//!   empties the namespace. The init tells gpudoctor the benchmark's wait status through a
//!   pipe, so the run's exit is the benchmark's, and stays up until the namespace is empty, so
//!   gpudoctor can list what is left before killing it.
//! - **Process group** (fallback: `unshare` refused, or `GPUDOCTOR_CONTAINMENT=group`): the
//!   child is the benchmark itself, with `PR_SET_PDEATHSIG` SIGKILL; what it starts is found
//!   through `/proc` (gpudoctor is child subreaper) and stopped by freeze-then-kill rounds
//!   ([`super::Group::finish`]). Only the benchmark itself is ended by gpudoctor's SIGKILL then.
//!
//! PDEATHSIG fires when the parent *thread* exits, not the process (prctl(2)): every child is
//! therefore forked by one thread that lives as long as gpudoctor ([`spawn`]), never by a
//! short-lived worker thread whose end would kill a running benchmark.
//!
//! Everything the keeper and the init do between fork and exec is async-signal-safe
//! (signal-safety(7)): raw system calls on values prepared before the fork, no allocation.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Set to `group` to skip the PID namespace (tests of the fallback; a site whose launchers
/// must see host pids).
pub const CONTAINMENT_ENV: &str = "GPUDOCTOR_CONTAINMENT";

/// What holds a run's processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Containment {
    /// Its own PID namespace, torn down by the kernel when its init dies.
    PidNamespace,
    /// Its own process group, gpudoctor child subreaper, freeze-then-kill rounds.
    #[default]
    ProcessGroup,
}

impl Containment {
    pub fn describe(self) -> &'static str {
        match self {
            Containment::PidNamespace => {
                "pid namespace (emptied by the kernel when its init dies; init and keeper die with gpudoctor)"
            }
            Containment::ProcessGroup => {
                "process group and child subreaper, freeze-then-kill rounds (no pid namespace: unshare refused or GPUDOCTOR_CONTAINMENT=group)"
            }
        }
    }
}

/// Messages on the status pipe: the keeper's first byte, then the init's.
const MSG_NAMESPACE: u8 = b'N';
const MSG_PLAIN: u8 = b'P';
const MSG_EXIT: u8 = b'X';

/// A child as started, with the read end of its status pipe.
#[derive(Debug)]
pub struct Started {
    pub child: Child,
    pub containment: Containment,
    /// The namespace's init (its pid as gpudoctor sees it), in [`Containment::PidNamespace`].
    pub init: Option<i32>,
    /// Where the init writes the benchmark's wait status (non-blocking).
    pub status: Option<OwnedFd>,
}

/// A spawn request for the spawner thread: the command travels there and back.
struct Job {
    command: Command,
    reply: mpsc::SyncSender<(Command, io::Result<Started>)>,
}

static SPAWNER: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);

/// Start `command` contained, from the one long-lived spawner thread (see the module doc).
pub fn spawn(command: &mut Command) -> io::Result<Started> {
    let sender = {
        let mut slot = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some(tx) => tx.clone(),
            None => {
                let (tx, rx) = mpsc::channel::<Job>();
                std::thread::Builder::new()
                    .name("gpudoctor-spawner".into())
                    .spawn(move || {
                        // Ends only when the process does: the sender is kept in SPAWNER.
                        for job in rx {
                            let mut command = job.command;
                            let started = spawn_here(&mut command);
                            let _ = job.reply.send((command, started));
                        }
                    })?;
                *slot = Some(tx.clone());
                tx
            }
        }
    };
    let taken = std::mem::replace(command, Command::new("/nonexistent"));
    let (reply, answer) = mpsc::sync_channel(1);
    sender
        .send(Job {
            command: taken,
            reply,
        })
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    let (back, started) = answer
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    *command = back;
    started
}

/// Launches so far, for the first pid of the next namespace ([`first_pid_text`]).
static LAUNCHES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// What the next namespace's init writes to its `ns_last_pid` (pid_namespaces(7),
/// `/proc/sys/kernel/ns_last_pid`: the last pid allocated in the namespace of the process that
/// writes it; needs CAP_SYS_ADMIN, which creating the namespace needed too): the benchmark is
/// then pid `N+1`, not 2 in every namespace. Open MPI derives its job family from a hash of the
/// host name and the launcher's pid (orte/mca/plm/base/plm_base_jobid.c), so launchers that are
/// all pid 2 beside each other share one job id and their daemons misroute ("ORTE does not
/// know how to route a message to the specified daemon"). Formatted before the fork: the init
/// may not allocate.
fn first_pid_text() -> ([u8; 16], usize) {
    let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 30_000;
    let text = format!("{}", 1000 + n);
    let mut buf = [0u8; 16];
    buf[..text.len()].copy_from_slice(text.as_bytes());
    (buf, text.len())
}

fn want_namespace() -> bool {
    std::env::var(CONTAINMENT_ENV).map_or(true, |v| v != "group")
}

fn spawn_here(command: &mut Command) -> io::Result<Started> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors into a two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let write_raw = write_end.as_raw_fd();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let namespace = want_namespace();
    let first_pid = first_pid_text();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls
    // on values captured by copy (see `in_child`).
    unsafe {
        command.pre_exec(move || in_child(write_raw, parent, namespace, first_pid));
    }
    let spawned = command.spawn();
    drop(write_end);
    let child = spawned?;
    let (containment, init) = read_hello(&read_end);
    set_nonblocking(read_end.as_raw_fd());
    Ok(Started {
        child,
        containment,
        init,
        status: (containment == Containment::PidNamespace).then_some(read_end),
    })
}

/// The keeper's first message: `N` and the init's pid, or `P` (it became the benchmark).
/// Bounded: an answer that never comes counts as a plain process group. A signal caught
/// meanwhile (the signal watcher's, a test's) is not the end of the wait: `poll` is never
/// restarted (signal(7)), so EINTR waits again for what is left of the time.
fn read_hello(fd: &OwnedFd) -> (Containment, Option<i32>) {
    let deadline = std::time::Instant::now() + HELLO;
    let mut got = [0u8; 5];
    let mut have = 0;
    while have < 5 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll on one valid descriptor, bounded by the deadline.
        let ready = unsafe { libc::poll(&mut poll, 1, millis) };
        if ready < 0 && interrupted() && !left.is_zero() {
            continue;
        }
        if ready <= 0 {
            break;
        }
        // SAFETY: read into the rest of a local buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), got[have..].as_mut_ptr().cast(), 5 - have) };
        if n < 0 && interrupted() {
            continue;
        }
        if n <= 0 {
            break;
        }
        have += n as usize;
        if got[0] == MSG_PLAIN {
            return (Containment::ProcessGroup, None);
        }
    }
    if have == 5 && got[0] == MSG_NAMESPACE {
        let pid = i32::from_ne_bytes([got[1], got[2], got[3], got[4]]);
        return (Containment::PidNamespace, Some(pid));
    }
    (Containment::ProcessGroup, None)
}

/// How long [`read_hello`] waits. The keeper writes before std's `spawn` returns (it closes
/// the exec-error pipe after), so this bounds only a keeper that never got that far.
const HELLO: Duration = Duration::from_secs(5);

fn interrupted() -> bool {
    io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// Read what the init wrote so far; the benchmark's wait status once it has been reaped.
pub fn poll_exit(fd: &OwnedFd, buf: &mut Vec<u8>) -> Option<libc::c_int> {
    let mut chunk = [0u8; 64];
    loop {
        // SAFETY: read into a local buffer from a non-blocking descriptor we own.
        let n = unsafe { libc::read(fd.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
        if n <= 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n as usize]);
        if buf.len() > 64 {
            break; // the init writes one message; more is not ours to keep
        }
    }
    let at = buf.iter().position(|b| *b == MSG_EXIT)?;
    let raw = buf.get(at + 1..at + 5)?;
    Some(libc::c_int::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]))
}

/// Runs in the forked child before exec. Async-signal-safe only (signal-safety(7)).
fn in_child(
    status: RawFd,
    parent: libc::pid_t,
    namespace: bool,
    first_pid: ([u8; 16], usize),
) -> io::Result<()> {
    // SAFETY (whole function): raw system calls on integers and static C strings.
    unsafe {
        // Die with gpudoctor: the spawner thread lives as long as the process.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            libc::_exit(137); // gpudoctor died before the prctl took hold
        }
        if !namespace || libc::unshare(libc::CLONE_NEWPID) != 0 {
            write_all(status, &[MSG_PLAIN]);
            return Ok(()); // exec: this process is the benchmark (the pipe closes on exec)
        }
        let init = libc::fork();
        if init < 0 {
            return Err(io::Error::last_os_error());
        }
        if init == 0 {
            return be_init(status, first_pid);
        }
        // The keeper: say where the init is, then wait for it and end with it.
        let mut hello = [0u8; 5];
        hello[0] = MSG_NAMESPACE;
        hello[1..].copy_from_slice(&init.to_ne_bytes());
        write_all(status, &hello);
        quiet();
        let mut st: libc::c_int = 0;
        loop {
            let got = libc::waitpid(init, &mut st, 0);
            if got == init {
                break;
            }
            if got < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(1);
            }
        }
        libc::_exit(exit_code(st))
    }
}

/// The namespace's init (pid 1): fork the benchmark, then reap until nothing is left.
unsafe fn be_init(status: RawFd, first_pid: ([u8; 16], usize)) -> io::Result<()> {
    // SAFETY (whole function): as in `in_child`.
    unsafe {
        // Die with the keeper (single-threaded, so its one thread is the process).
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        // The benchmark's pid differs from other launchers' ([`first_pid_text`]); refused,
        // it is pid 2 as before.
        let fd = libc::open(
            c"/proc/sys/kernel/ns_last_pid".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::write(fd, first_pid.0.as_ptr().cast(), first_pid.1);
            libc::close(fd);
        }
        let bench = libc::fork();
        if bench < 0 {
            return Err(io::Error::last_os_error());
        }
        if bench == 0 {
            return Ok(()); // exec the benchmark: pid 2, or N+1 after `ns_last_pid`
        }
        // Keep only the status pipe: std's exec-error pipe must close when the benchmark
        // execs, and the benchmark's stdout/stderr must reach EOF when its processes end.
        // gpudoctor's handlers were copied by fork: a signal sent to the group must not run
        // them here (and the init, without a handler, gets only SIGKILL from outside).
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        quiet_fds(status);
        let mut bench_status: libc::c_int = 0;
        loop {
            let mut st: libc::c_int = 0;
            let got = libc::waitpid(-1, &mut st, 0);
            if got == bench {
                bench_status = st;
                let mut msg = [0u8; 5];
                msg[0] = MSG_EXIT;
                msg[1..].copy_from_slice(&st.to_ne_bytes());
                write_all(status, &msg);
            } else if got < 0 && *libc::__errno_location() != libc::EINTR {
                break; // ECHILD: the namespace is empty
            }
        }
        libc::_exit(exit_code(bench_status))
    }
}

/// The keeper ignores the signals gpudoctor sends the process group (its death would tear the
/// namespace down before what is left is listed) and lets go of every descriptor.
unsafe fn quiet() {
    // SAFETY: sigaction-backed signal(2) and close_range on this process only.
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        quiet_fds(-1);
    }
}

/// Point 0-2 at /dev/null and close every other descriptor but `keep`.
unsafe fn quiet_fds(keep: RawFd) {
    // SAFETY: open/dup2/close_range on this process's own descriptor table.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        let max = libc::c_uint::MAX;
        if keep >= 3 {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                (keep - 1) as libc::c_uint,
                0,
            );
            libc::syscall(libc::SYS_close_range, (keep + 1) as libc::c_uint, max, 0);
        } else {
            libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, max, 0);
        }
    }
}

unsafe fn write_all(fd: RawFd, bytes: &[u8]) {
    // SAFETY: one write(2) of at most PIPE_BUF bytes, which is atomic on a pipe.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    }
}

fn exit_code(status: libc::c_int) -> libc::c_int {
    if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        libc::WEXITSTATUS(status)
    }
}

/// How long [`super::Group::finish`] waits for a torn-down namespace to be reaped.
pub const TEARDOWN: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::super::{Exit, Group};
    use super::*;
    use std::io::Read;
    use std::process::Stdio;

    /// Wait for the leader to end by itself (bounded), then finish the group.
    fn run_to_end(group: Group) -> super::super::Finished {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while group.leader_exited().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never ended"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        group.finish(Duration::from_secs(3))
    }

    #[test]
    fn a_child_outlives_the_thread_that_asked_for_it() {
        // PDEATHSIG fires when the forking *thread* ends: were the child forked by this
        // short-lived thread, it would be SIGKILLed when the thread ends, before its `exit 3`.
        let spawned = std::thread::spawn(|| {
            let mut command = Command::new("sh");
            command.args(["-c", "sleep 1; exit 3"]);
            Group::spawn(&mut command)
        })
        .join()
        .unwrap()
        .unwrap();
        let done = run_to_end(spawned.group);
        assert_eq!(done.exit, Some(Exit::Code(3)));
        assert!(done.killed.is_empty(), "{:?}", done.killed);
    }

    #[test]
    fn the_benchmark_has_its_own_namespace_and_a_pid_no_other_launch_shares() {
        let allowed = Command::new("unshare")
            .args(["-p", "-f", "true"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !allowed {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "CI: PID namespaces must be allowed (run as root)"
            );
        }
        // Two launches side by side: each in its own namespace, and (Open MPI's job id is a
        // hash of host name and launcher pid) never the same pid there.
        let launch = || {
            let mut command = Command::new("sh");
            command
                .args(["-c", "echo $$; exit 5"])
                .stdout(Stdio::piped());
            Group::spawn(&mut command).unwrap()
        };
        let (mut first, mut second) = (launch(), launch());
        let mut pids = Vec::new();
        for spawned in [&mut first, &mut second] {
            let mut out = String::new();
            spawned
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            pids.push(out.trim().parse::<u32>().unwrap());
        }
        for spawned in [first, second] {
            let containment = spawned.group.containment();
            let done = run_to_end(spawned.group);
            assert_eq!(done.exit, Some(Exit::Code(5)), "the benchmark's own exit");
            if allowed {
                assert_eq!(containment, Containment::PidNamespace);
                assert_eq!(done.containment, Containment::PidNamespace);
            } else {
                assert_eq!(containment, Containment::ProcessGroup);
            }
        }
        if allowed {
            assert!(pids.iter().all(|p| *p > 1000), "past the init's: {pids:?}");
            assert_ne!(pids[0], pids[1], "each launch its own pid");
        }
    }

    /// A signal caught while the hello is awaited (the signal watcher's handlers are
    /// installed in every run) is waited through, not taken for a keeper that never answered.
    /// A launch once fell back to a process group in a loaded suite run; this is one way it
    /// could (the other, `unshare` refused, is the documented fallback).
    #[test]
    fn a_signal_during_the_hello_is_waited_through() {
        extern "C" fn caught(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, without SA_RESTART, for a signal nothing else
        // in the crate uses (SIGURG is ignored by default).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = caught as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut()),
                0
            );
        }
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills a two-element array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both just created.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            read_hello(&r)
        });
        let thread = rx.recv().unwrap();
        // Signals while it waits in poll: the reader has had its time to get there.
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: the reader thread is alive until it has read the hello written below.
            unsafe { libc::pthread_kill(thread, libc::SIGURG) };
        }
        let mut hello = vec![MSG_NAMESPACE];
        hello.extend_from_slice(&4242i32.to_ne_bytes());
        // SAFETY: a write to the pipe's write end.
        unsafe { write_all(w.as_raw_fd(), &hello) };
        assert_eq!(
            reader.join().unwrap(),
            (Containment::PidNamespace, Some(4242))
        );
    }

    #[test]
    fn the_init_exit_message_is_found_after_the_hello() {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills a two-element array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both just created.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        set_nonblocking(r.as_raw_fd());
        let mut buf = Vec::new();
        assert_eq!(poll_exit(&r, &mut buf), None);
        let mut msg = vec![MSG_EXIT];
        msg.extend_from_slice(&(9 as libc::c_int).to_ne_bytes());
        // SAFETY: a write to the pipe's write end.
        unsafe { write_all(w.as_raw_fd(), &msg[..3]) };
        assert_eq!(
            poll_exit(&r, &mut buf),
            None,
            "half a message is not an exit"
        );
        // SAFETY: as above.
        unsafe { write_all(w.as_raw_fd(), &msg[3..]) };
        assert_eq!(poll_exit(&r, &mut buf), Some(9));
    }
}
