//! Children gpudoctor starts (nccl-tests and its launchers, the CUDA probe helper, perftest)
//! and what is done so that none of them outlives the run.
//!
//! A [`Group`] is one command started in its own process group and, where the kernel allows
//! it, its own PID namespace ([`contain`]: a keeper and an init that die with gpudoctor, even
//! by SIGKILL), with gpudoctor as child subreaper (`PR_SET_CHILD_SUBREAPER`, prctl(2)): a
//! grandchild that leaves the group (`setsid`, `setpgid`) or whose parent dies is still found,
//! as a descendant of gpudoctor, and known as its group's by the [`GROUP_ENV`] variable every
//! group's command carries (several groups run at once under `gpudoctor pairs`). When the
//! leader exits — normally, at gpudoctor's timeout, or
//! because gpudoctor got SIGINT/SIGTERM/SIGHUP ([`signals`]) — [`Group::finish`] sends SIGTERM
//! to the group and to every descendant, waits up to a grace period (on the processes' exits,
//! through pidfds, not on a clock), then freezes what is left
//! (SIGSTOP, walking down the `children` files until every process found is stopped, so a
//! chain that forks and exits cannot outrun it), SIGKILLs all of it, tears the namespace down
//! and reaps. What had to be killed, and what survived, is returned ([`Killed`]) so the report
//! can say so.
//!
//! The leader is observed with `waitid(WNOWAIT)` and reaped only at the very end: until then its
//! pid, which is the group id, cannot be reused, so `killpg` can never reach a stranger's group.
//! Nothing here reads `--root`: `/proc` is the machine gpudoctor runs on.

pub mod contain;
pub mod signals;
pub mod stream;
pub mod tree;

pub use contain::Containment;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunExit {
    Code(i32),
    Signal(i32),
}

/// `exited 0`, `killed by signal 9`, `did not exit`.
pub fn describe_exit(exit: Option<RunExit>) -> String {
    match exit {
        Some(RunExit::Code(c)) => format!("exited {c}"),
        Some(RunExit::Signal(s)) => format!("killed by signal {s}"),
        None => "did not exit".to_string(),
    }
}

/// Between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(3);
/// How often a finishing group is looked at again.
const POLL: Duration = Duration::from_millis(25);
/// Between freeze rounds: short, since a process that was not caught may be forking.
const FREEZE_POLL: Duration = Duration::from_millis(2);

/// How long a finishing group waits, at most, between two looks when it cannot wait on its
/// processes' exits (no pidfds, or too many to hold): the wait doubles from [`POLL`] to this.
const SLOW_POLL: Duration = Duration::from_millis(400);

/// Every group's command gets this variable, `<gpudoctor's pid>.<n>`, unique to the group. A
/// process keeps the environment it was started with through `setsid`, re-parenting and exec
/// (`/proc/<pid>/environ`, proc(5)), so an orphan that left the group and whose parent died,
/// re-parented to gpudoctor, is still known as that group's ([`Group::finish`]).
pub const GROUP_ENV: &str = "GPUDOCTOR_GROUP";

/// Numbers the groups of this gpudoctor for [`GROUP_ENV`].
static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);

/// The groups now running: leader pid (the process group id) and [`GROUP_ENV`] value.
static LIVE: Mutex<BTreeMap<i32, String>> = Mutex::new(BTreeMap::new());

/// How many groups are running now.
pub fn live_groups() -> usize {
    LIVE.lock().map_or(0, |l| l.len())
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    fn from_wait_status(status: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

/// A process gpudoctor had to kill after its run: it was still there when the leader had
/// exited, the timeout expired or gpudoctor was stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Killed {
    pub pid: i32,
    /// Its command line (`sleep 1000`), cut at 160 bytes.
    pub command: String,
    /// The last signal it got: `SIGTERM` (and it ended), or `SIGKILL` (it outlived the grace).
    pub signal: String,
    /// It had left the run's process group (`setsid`, `setpgid`): found as a descendant.
    #[serde(default)]
    pub left_group: bool,
    /// Still there after SIGKILL and the grace after it (uninterruptible sleep, `D` state).
    #[serde(default)]
    pub survived: bool,
}

impl Killed {
    /// One line: `pid 123 (sleep 1000) by SIGKILL, outside the process group`.
    pub fn describe(&self) -> String {
        let mut text = format!("pid {} ({}) by {}", self.pid, self.command, self.signal);
        if self.left_group {
            text.push_str(", outside the process group");
        }
        if self.survived {
            text.push_str(", still not gone");
        }
        text
    }
}

/// One command in its own process group.
#[derive(Debug)]
pub struct Group {
    pid: i32,
    /// The leader's exit, once reaped.
    reaped: Option<Exit>,
    /// Every process seen as this group's business (pid, start time), to reap them later.
    seen: BTreeSet<(i32, u64)>,
    containment: Containment,
    /// gpudoctor's own helpers in a PID namespace: the keeper (the leader) and the init. Never
    /// reported as killed; the keeper is killed last, which tears the namespace down.
    helpers: BTreeSet<i32>,
    /// Where the namespace's init writes the benchmark's wait status, and what it wrote so far.
    status: Option<OwnedFd>,
    status_buf: RefCell<Vec<u8>>,
    /// This group's [`GROUP_ENV`] value.
    token: String,
    /// gpudoctor's own children outside every group that carry this group's token (orphans
    /// that left it), as the last look found them: where the freeze walk starts, with the
    /// leader.
    orphans: BTreeSet<i32>,
}

/// The result of [`Group::finish`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finished {
    /// The benchmark's exit; `None` if it could not be reaped (still in `D` state after
    /// SIGKILL).
    pub exit: Option<Exit>,
    pub killed: Vec<Killed>,
    pub containment: Containment,
}

/// A started [`Group`] and the leader's output pipes (when the command asked for them).
#[derive(Debug)]
pub struct Spawned {
    pub group: Group,
    pub stdout: Option<std::process::ChildStdout>,
    pub stderr: Option<std::process::ChildStderr>,
}

/// The binary starts every child through [`Group`]: then a child of gpudoctor that no group
/// knows is an orphan of the running group (re-parented to gpudoctor, the subreaper), and is
/// that group's to kill. Off in the library, whose callers may have children of their own.
static SOLE_OWNER: AtomicBool = AtomicBool::new(false);

/// A [`Group`] was started: [`reap_leftovers`] has something to look at.
static STARTED_ANY: AtomicBool = AtomicBool::new(false);

/// Before gpudoctor exits: kill and reap anything still below it (nothing, when every group
/// finished; a `/proc` scan only if a group was ever started).
pub fn reap_leftovers() {
    if STARTED_ANY.load(Ordering::SeqCst) {
        let killed = kill_all_descendants(KILL_GRACE);
        if !killed.is_empty() {
            let names: Vec<String> = killed.iter().map(Killed::describe).collect();
            let names = names.join("; ");
            eprintln!(
                "gpudoctor: killed before exiting: {}",
                crate::text::sanitize::text(&names)
            );
        }
    }
}

/// Declare that every child of this process is started through [`Group`] (the binary does).
pub fn own_all_children() {
    SOLE_OWNER.store(true, Ordering::SeqCst);
}

fn me() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

fn mark(
    killed: &mut BTreeMap<(i32, u64), Killed>,
    p: &tree::Proc,
    left_group: bool,
    sig: libc::c_int,
) {
    let entry = killed.entry((p.pid, p.start)).or_insert_with(|| Killed {
        pid: p.pid,
        command: tree::command_of(p),
        signal: String::new(),
        left_group,
        survived: false,
    });
    entry.signal = signals::name(sig);
}

/// Send `sig` to `p` and record it when it was sent. The command line is read first: a
/// process killed is soon gone with it.
fn signal_and_mark(
    killed: &mut BTreeMap<(i32, u64), Killed>,
    p: &tree::Proc,
    left_group: bool,
    sig: libc::c_int,
) {
    let before = killed.get(&(p.pid, p.start)).cloned();
    mark(killed, p, left_group, sig);
    if tree::signal(p, sig) != tree::Sent::Sent {
        match before {
            Some(k) => killed.insert((p.pid, p.start), k),
            None => killed.remove(&(p.pid, p.start)),
        };
    }
}

impl Group {
    /// Start `command` as the leader of a new process group (stdio as the caller set it up),
    /// contained as [`contain`] describes: in its own PID namespace where the kernel allows it.
    pub fn spawn(command: &mut Command) -> std::io::Result<Spawned> {
        // From now on a signal has a group to stop (signals.rs starts its watcher lazily).
        signals::ensure_watcher();
        tree::become_subreaper();
        STARTED_ANY.store(true, Ordering::SeqCst);
        command.process_group(0);
        let token = format!("{}.{}", me(), NEXT_GROUP.fetch_add(1, Ordering::SeqCst));
        command.env(GROUP_ENV, &token);
        // Registered under the same lock the spawn happens in: a signal watcher that looks
        // finds the group as soon as it exists.
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let mut started = contain::spawn(command)?;
        let pid = started.child.id() as i32;
        live.insert(pid, token.clone());
        let mut helpers = BTreeSet::new();
        if started.containment == Containment::PidNamespace {
            helpers.insert(pid);
            helpers.extend(started.init);
        }
        // The `Child` is dropped without waiting: the leader is reaped by `finish`.
        Ok(Spawned {
            group: Group {
                pid,
                reaped: None,
                seen: BTreeSet::new(),
                containment: started.containment,
                helpers,
                status: started.status.take(),
                status_buf: RefCell::new(Vec::new()),
                token,
                orphans: BTreeSet::new(),
            },
            stdout: started.child.stdout.take(),
            stderr: started.child.stderr.take(),
        })
    }

    /// What holds this group's processes.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// In a PID namespace: the benchmark's exit, as the namespace's init reported it.
    fn benchmark_exit(&self) -> Option<Exit> {
        let fd = self.status.as_ref()?;
        let mut buf = self.status_buf.borrow_mut();
        contain::poll_exit(fd, &mut buf).map(Exit::from_wait_status)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The leader's exit if it has ended, without reaping it (`waitid(WNOWAIT)`): the zombie
    /// keeps the group id reserved until [`Group::finish`].
    /// In a PID namespace the leader is gpudoctor's keeper: the benchmark's exit comes from the
    /// namespace's init, or the keeper's when the namespace ended without a word.
    pub fn leader_exited(&self) -> Option<Exit> {
        if let Some(exit) = self.benchmark_exit() {
            return Some(exit);
        }
        if self.reaped.is_some() {
            return self.reaped;
        }
        // SAFETY: an all-zero siginfo_t is valid for the kernel to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on one pid we started, not reaping it (WNOWAIT), not blocking.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid/si_status are valid to read in the siginfo waitid fills.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if rc != 0 || pid != self.pid {
            return None;
        }
        Some(if info.si_code == libc::CLD_EXITED {
            Exit::Code(status)
        } else {
            Exit::Signal(status)
        })
    }

    /// Whether `pid` leads another live group now.
    fn is_other_group(&self, pid: i32) -> bool {
        pid != self.pid && LIVE.lock().map(|l| l.contains_key(&pid)).unwrap_or(false)
    }

    /// The other groups running now: leader and token.
    fn others(&self) -> BTreeMap<i32, String> {
        LIVE.lock()
            .map(|l| {
                l.iter()
                    .filter(|(p, _)| **p != self.pid)
                    .map(|(p, t)| (*p, t.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One look at `/proc`: reap what ended, and return the live processes this group is
    /// responsible for now ([`Group::targets_in`]).
    fn look(&mut self) -> Vec<(tree::Proc, bool)> {
        if self.containment == Containment::PidNamespace
            && let Some(found) = self.look_in_namespace()
        {
            return found;
        }
        let all = tree::snapshot_shared();
        let targets = self.targets_in(&all);
        self.reap_in(&all);
        targets
            .into_iter()
            .filter(|(p, _)| !p.is_zombie())
            .collect()
    }

    /// In a PID namespace every process the benchmark started, however it forked or left its
    /// group, is a descendant of the namespace's init (an orphan there is re-parented to the
    /// init or a subreaper below it: pid_namespaces(7)): the walk down from the keeper through
    /// the `children` files reads a few files, where a `/proc` scan reads every process of the
    /// machine. `None` where the files are missing or the keeper is gone: then a scan.
    fn look_in_namespace(&mut self) -> Option<Vec<(tree::Proc, bool)>> {
        let mut todo = tree::children(self.pid)?;
        let mut visited = BTreeSet::from([self.pid]);
        let mut found = Vec::new();
        while let Some(pid) = todo.pop() {
            if !visited.insert(pid) {
                continue;
            }
            if !self.helpers.contains(&pid)
                && let Some(p) = tree::read_proc(pid)
                && !p.is_zombie()
            {
                self.seen.insert((p.pid, p.start));
                let left = p.pgrp != self.pid;
                found.push((p, left));
            }
            todo.extend(tree::children(pid).unwrap_or_default());
        }
        Some(found)
    }

    /// The processes in `all` this group is responsible for (zombies included), each with
    /// whether it left the group: members of the group, descendants of the leader, orphans
    /// below gpudoctor that carry this group's [`GROUP_ENV`] and their descendants, and — when
    /// gpudoctor owns all its children and no other group runs — everything else below
    /// gpudoctor (an orphan that lost the variable, exec'd with a scrubbed environment). Another
    /// live group's processes, orphans with its token included, are never this group's.
    fn targets_in(&mut self, all: &BTreeMap<i32, tree::Proc>) -> Vec<(tree::Proc, bool)> {
        let me = me();
        let others = self.others();
        let mut roots = BTreeSet::from([self.pid]);
        let mut theirs_roots: BTreeSet<i32> = others.keys().copied().collect();
        // Orphans: gpudoctor's own children that lead no group, claimed by their token.
        self.orphans.clear();
        for p in all.values() {
            if p.ppid != me || p.pid == self.pid || others.contains_key(&p.pid) || p.is_zombie() {
                continue;
            }
            let Some(token) = tree::environ_value(p.pid, GROUP_ENV) else {
                continue;
            };
            if token == self.token.as_bytes() {
                roots.insert(p.pid);
                self.orphans.insert(p.pid);
            } else if others.values().any(|t| t.as_bytes() == token) {
                theirs_roots.insert(p.pid);
            }
        }
        if others.is_empty() && SOLE_OWNER.load(Ordering::SeqCst) {
            roots.insert(me);
        }
        let mut found = tree::below(all, &roots);
        found.extend(self.orphans.iter().copied());
        // Another group's processes are its own business.
        let mut theirs = tree::below(all, &theirs_roots);
        theirs.extend(theirs_roots.iter().copied());
        found.retain(|pid| !theirs.contains(pid));
        found.insert(self.pid);
        found.extend(all.values().filter(|p| p.pgrp == self.pid).map(|p| p.pid));
        let targets: Vec<(tree::Proc, bool)> = found
            .into_iter()
            .filter_map(|pid| all.get(&pid).cloned())
            .filter(|p| p.pid != me && !self.helpers.contains(&p.pid))
            .map(|p| {
                let left = p.pgrp != self.pid;
                (p, left)
            })
            .collect();
        self.seen
            .extend(targets.iter().map(|(p, _)| (p.pid, p.start)));
        targets
    }

    /// Wait, at most until `deadline`, for one of `targets` to exit: on their pidfds where the
    /// kernel has them (no CPU while nothing ends); else (one is gone already, no pidfds, or
    /// [`tree::PIN_BUDGET`] held) a sleep of `*pause`, which doubles up to [`SLOW_POLL`]. Looks
    /// are [`POLL`] apart at least, so a crowd exiting one by one is looked at in batches.
    fn wait_for_exit(targets: &[(tree::Proc, bool)], deadline: Instant, pause: &mut Duration) {
        let since = Instant::now();
        let pins: Option<Vec<tree::Pin>> = targets.iter().map(|(p, _)| tree::pin(p)).collect();
        match pins {
            Some(pins) => {
                tree::wait_any(&pins, deadline);
                let next = (since + POLL).min(deadline);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            // One is gone already, pidfds are missing, or there are too many: a timed look.
            None => {
                std::thread::sleep((*pause).min(deadline.saturating_duration_since(since)));
                *pause = (*pause * 2).min(SLOW_POLL);
            }
        }
    }

    /// Stop everything the group left: SIGTERM to the group and each target, up to `grace`
    /// for them to go (looked at again when one exits); then freeze-then-kill rounds: SIGSTOP to everything found, again until
    /// a look finds every one stopped (a stopped process cannot fork, so a chain that forks and
    /// exits is caught within a few rounds), then SIGKILL to all of them, repeated while any
    /// is left; in a PID namespace, last, the keeper is killed, which kills the init, and the
    /// kernel empties the namespace. Then reap. Returns the benchmark's exit and what had to
    /// be killed; anything still there at the end is marked `survived`. Bounded: about
    /// `2 * grace` at most, plus [`contain::TEARDOWN`] for a namespace the kernel is slow to
    /// empty.
    pub fn finish(mut self, grace: Duration) -> Finished {
        let mut killed: BTreeMap<(i32, u64), Killed> = BTreeMap::new();
        // Round 1: SIGTERM, then wait for them to go: looked at again when one exits, not on
        // a clock (a look reads all of `/proc`; 128 groups finishing at once used to read it
        // 80 times a second each).
        let mut targets = self.look();
        if !targets.is_empty() {
            self.killpg(libc::SIGTERM);
            for (p, left) in &targets {
                signal_and_mark(&mut killed, p, *left, libc::SIGTERM);
            }
            let deadline = Instant::now() + grace;
            let mut pause = POLL;
            while !targets.is_empty() && Instant::now() < deadline {
                Self::wait_for_exit(&targets, deadline, &mut pause);
                targets = self.look();
            }
        }
        // Round 2: freeze, then kill, while any is left. The freeze ends when a walk finds
        // every process already stopped, or at the deadline (a process in `D` state never
        // stops). Both share one grace, and the kill runs at least once whatever the freeze took.
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.freeze_walk() {
                break;
            }
            // Let the signalled ones reach the stopped state before the next look.
            std::thread::sleep(FREEZE_POLL);
        }
        let mut first = true;
        let mut anything_left;
        loop {
            let targets = self.look();
            anything_left = !targets.is_empty();
            if !anything_left || (!first && Instant::now() >= deadline) {
                break;
            }
            first = false;
            // Whatever a process that was not stopped forked since: stopped too, then killed.
            self.freeze_walk();
            for (p, left) in &targets {
                signal_and_mark(&mut killed, p, *left, libc::SIGKILL);
            }
            self.group_signal(libc::SIGKILL);
            std::thread::sleep(POLL);
        }
        let mut exit = self.benchmark_exit();
        // In a PID namespace: kill the keeper; its death kills the init, and the kernel kills
        // whatever is left in the namespace and reaps it before the init is gone.
        if self.containment == Containment::PidNamespace {
            // Held before the kill, while the keeper keeps both pids reserved (the init is its
            // unreaped child, the keeper ours), and waited on: no CPU while the kernel empties
            // the namespace.
            let pins: Vec<tree::Pin> = self
                .helpers
                .iter()
                .filter_map(|pid| tree::read_proc(*pid))
                .filter(|p| p.pgrp == self.pid)
                .filter_map(|p| tree::pin(&p))
                .collect();
            self.killpg(libc::SIGKILL);
            let until = Instant::now() + contain::TEARDOWN;
            tree::wait_all(pins, until);
            // Looked at pid by pid, not by a /proc scan: this runs after every run.
            let init: Vec<i32> = self
                .helpers
                .iter()
                .copied()
                .filter(|p| *p != self.pid)
                .collect();
            anything_left = true;
            while Instant::now() < until {
                // The init, re-parented to gpudoctor (the subreaper) when the keeper died.
                let init_left = init.iter().any(|pid| {
                    tree::reap(*pid);
                    tree::read_proc(*pid).is_some_and(|p| p.pgrp == self.pid)
                });
                if !init_left
                    && self.reaped.is_none()
                    && let Some(status) = tree::reap(self.pid)
                {
                    self.reaped = Some(Exit::from_wait_status(status));
                }
                if !init_left && self.reaped.is_some() {
                    // The init is gone, so is everything that was in the namespace.
                    anything_left = false;
                    break;
                }
                std::thread::sleep(FREEZE_POLL);
            }
            exit = exit.or_else(|| self.benchmark_exit());
        }
        // The last look found nothing and nothing ran since: no need to look again.
        let survivors = if anything_left {
            self.look()
        } else {
            Vec::new()
        };
        for (p, left) in survivors {
            mark(&mut killed, &p, left, libc::SIGKILL);
            if let Some(k) = killed.get_mut(&(p.pid, p.start)) {
                k.survived = true;
            }
        }
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.pid);
        }
        Finished {
            exit: exit.or(self.reaped),
            killed: killed.into_values().collect(),
            containment: self.containment,
        }
    }

    /// Walk down from the leader, from this group's orphans (as the last look found them), and
    /// from gpudoctor when the orphans below it are this group's (as in [`Group::targets_in`])
    /// through the `children` files, sending SIGSTOP to each
    /// process as soon as it is found, before its children are read: a chain that forks and
    /// exits is caught at its newest process. gpudoctor's helpers are walked through, not
    /// stopped (the init must go on reaping). True when every process found was stopped
    /// already: then nothing below can fork, and the set is complete. Where the `children`
    /// files are missing, a `/proc` snapshot stands in (slower; the rounds still repeat).
    fn freeze_walk(&mut self) -> bool {
        self.group_signal(libc::SIGSTOP);
        let me = me();
        let others = self.others();
        let mut todo = vec![self.pid];
        // Direct children of gpudoctor until reaped, so their pids still name them.
        todo.extend(self.orphans.iter().copied());
        if others.is_empty() && SOLE_OWNER.load(Ordering::SeqCst) {
            todo.push(me);
        }
        let mut visited = BTreeSet::new();
        let mut all_stopped = true;
        while let Some(pid) = todo.pop() {
            // A group started while this walk goes (`gpudoctor pairs` starts several at once)
            // is not in `others`, read before: its leader is looked up again, under the lock
            // its spawn holds until it is registered, so a new group is never taken as orphans.
            if !visited.insert(pid) || others.contains_key(&pid) || self.is_other_group(pid) {
                continue;
            }
            if pid != me && !self.helpers.contains(&pid) {
                let Some(p) = tree::read_proc(pid) else {
                    continue;
                };
                if p.is_zombie() {
                    continue;
                }
                if !p.is_stopped() {
                    all_stopped = false;
                    tree::signal(&p, libc::SIGSTOP);
                }
            }
            match tree::children(pid) {
                Some(kids) => todo.extend(kids),
                None if pid == me => {
                    // No `children` files: stop what a snapshot finds.
                    let all = tree::snapshot();
                    for (p, _) in self.targets_in(&all) {
                        if !p.is_stopped() && !p.is_zombie() {
                            all_stopped = false;
                            tree::signal(&p, libc::SIGSTOP);
                        }
                    }
                }
                None => {}
            }
        }
        all_stopped
    }

    /// In a process group: signal the whole group at once (the kernel restarts a fork that
    /// races a group signal, so no member escapes it). In a PID namespace the keeper and the
    /// init are in the group and must not be stopped or killed yet: the rounds reach each
    /// process there one by one.
    fn group_signal(&self, sig: libc::c_int) {
        if self.containment == Containment::ProcessGroup {
            self.killpg(sig);
        }
    }

    /// Signal the whole group, while the unreaped leader keeps its id reserved.
    fn killpg(&self, sig: libc::c_int) {
        if self.reaped.is_none() && self.pid > 0 {
            // SAFETY: killpg only sends a signal; the group id is the pid of our unreaped
            // child, so it cannot name another group.
            unsafe {
                libc::killpg(self.pid, sig);
            }
        }
    }

    /// Reap the ended children of ours in `all` that are this group's business, and the leader
    /// last (its zombie keeps the group id while members are left).
    fn reap_in(&mut self, all: &BTreeMap<i32, tree::Proc>) {
        let me = me();
        let sole = SOLE_OWNER.load(Ordering::SeqCst) && self.others().is_empty();
        for p in all.values() {
            let ours = p.pgrp == self.pid || self.seen.contains(&(p.pid, p.start)) || sole;
            if p.ppid == me && p.is_zombie() && p.pid != self.pid && ours {
                tree::reap(p.pid);
            }
        }
        let members_left = all
            .values()
            .any(|p| p.pgrp == self.pid && p.pid != self.pid && !p.is_zombie());
        if self.reaped.is_none()
            && !members_left
            && let Some(status) = tree::reap(self.pid)
        {
            self.reaped = Some(Exit::from_wait_status(status));
        }
    }
}

/// Kill and reap every descendant of gpudoctor (the last step before it exits on a signal):
/// SIGTERM, up to `grace`, then SIGSTOP and SIGKILL to all found, again while any is left.
pub fn kill_all_descendants(grace: Duration) -> Vec<Killed> {
    let me = me();
    let mut killed: BTreeMap<(i32, u64), Killed> = BTreeMap::new();
    let find = || {
        let all = tree::snapshot();
        tree::below(&all, &BTreeSet::from([me]))
            .into_iter()
            .filter_map(|pid| all.get(&pid).cloned())
            .collect::<Vec<_>>()
    };
    for (sig, rounds) in [(libc::SIGTERM, 1), (libc::SIGKILL, usize::MAX)] {
        let deadline = Instant::now() + grace;
        let mut round = 0;
        loop {
            let procs = find();
            for p in procs.iter().filter(|p| p.ppid == me && p.is_zombie()) {
                tree::reap(p.pid);
            }
            let alive: Vec<&tree::Proc> = procs.iter().filter(|p| !p.is_zombie()).collect();
            if alive.is_empty() || Instant::now() >= deadline {
                break;
            }
            if round < rounds {
                if sig == libc::SIGKILL {
                    // Freeze first: a process stopped while the others are killed cannot fork.
                    for p in &alive {
                        tree::signal(p, libc::SIGSTOP);
                    }
                }
                for p in alive {
                    signal_and_mark(&mut killed, p, false, sig);
                }
                round += 1;
            }
            std::thread::sleep(POLL);
        }
    }
    killed.into_values().collect()
}
