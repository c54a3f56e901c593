//! Children gpudoctor starts (nccl-tests and its launchers today; perftest and CUDA probes
//! later) and what is done so that none of them outlives it.
//!
//! A [`Group`] is one command started in its own process group, with gpudoctor as child
//! subreaper (`PR_SET_CHILD_SUBREAPER`, prctl(2)): a grandchild that leaves the group
//! (`setsid`, `setpgid`) or whose parent dies is still found, as a descendant of gpudoctor, and
//! re-parented to it rather than to init. When the leader exits — normally, at gpudoctor's
//! timeout, or because gpudoctor got SIGINT/SIGTERM/SIGHUP ([`signals`]) — [`Group::finish`]
//! sends SIGTERM to the group and to every descendant, waits up to a grace period, sends SIGKILL
//! to whatever is left, and reaps all of it. What had to be killed is returned ([`Killed`]) so
//! the report can say so.
//!
//! The leader is observed with `waitid(WNOWAIT)` and reaped only at the very end: until then its
//! pid, which is the group id, cannot be reused, so `killpg` can never reach a stranger's group.
//! Nothing here reads `--root`: `/proc` is the machine gpudoctor runs on.

pub mod signals;
pub mod tree;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(3);
/// How often a finishing group is looked at again.
const POLL: Duration = Duration::from_millis(25);

/// Leaders of the groups now running, by pid (the process group ids).
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

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
}

/// The result of [`Group::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The leader's exit; `None` if it could not be reaped (still in `D` state after SIGKILL).
    pub exit: Option<Exit>,
    pub killed: Vec<Killed>,
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
                crate::render::sanitize::text(&names)
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

impl Group {
    /// Start `command` as the leader of a new process group (stdio as the caller set it up).
    pub fn spawn(command: &mut Command) -> std::io::Result<Spawned> {
        tree::become_subreaper();
        STARTED_ANY.store(true, Ordering::SeqCst);
        command.process_group(0);
        // Registered under the same lock the spawn happens in: a signal watcher that looks
        // finds the group as soon as it exists.
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let mut child: Child = command.spawn()?;
        let pid = child.id() as i32;
        live.insert(pid);
        // The `Child` is dropped without waiting: the leader is reaped by `finish`.
        Ok(Spawned {
            group: Group {
                pid,
                reaped: None,
                seen: BTreeSet::new(),
            },
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The leader's exit if it has ended, without reaping it (`waitid(WNOWAIT)`): the zombie
    /// keeps the group id reserved until [`Group::finish`].
    pub fn leader_exited(&self) -> Option<Exit> {
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

    /// The other groups running now (their leaders).
    fn others(&self) -> BTreeSet<i32> {
        LIVE.lock()
            .map(|l| l.iter().copied().filter(|p| *p != self.pid).collect())
            .unwrap_or_default()
    }

    /// The live processes this group is responsible for now, each with whether it left the
    /// group: members of the group, descendants of the leader, and — when gpudoctor owns all
    /// its children and no other group runs — everything else below gpudoctor (an orphan whose
    /// parent died before it could be seen under the leader).
    fn targets(&mut self) -> Vec<(tree::Proc, bool)> {
        let all = tree::snapshot();
        let me = me();
        let others = self.others();
        let mut roots = BTreeSet::from([self.pid]);
        if others.is_empty() && SOLE_OWNER.load(Ordering::SeqCst) {
            roots.insert(me);
        }
        let mut found = tree::below(&all, &roots);
        // Another group's processes are its own business.
        let theirs = tree::below(&all, &others);
        found.retain(|pid| !others.contains(pid) && !theirs.contains(pid));
        found.insert(self.pid);
        found.extend(all.values().filter(|p| p.pgrp == self.pid).map(|p| p.pid));
        let targets: Vec<(tree::Proc, bool)> = found
            .into_iter()
            .filter_map(|pid| all.get(&pid).cloned())
            .filter(|p| p.pid != me)
            .map(|p| {
                let left = p.pgrp != self.pid;
                (p, left)
            })
            .collect();
        self.seen
            .extend(targets.iter().map(|(p, _)| (p.pid, p.start)));
        targets
            .into_iter()
            .filter(|(p, _)| !p.is_zombie())
            .collect()
    }

    /// Stop everything the group left: SIGTERM to the group and each target, up to `grace`
    /// for them to go, then SIGKILL, repeated while new ones appear, then reap. Returns the
    /// leader's exit and what had to be killed. Bounded: about `2 * grace` at most.
    pub fn finish(mut self, grace: Duration) -> Finished {
        let mut killed: BTreeMap<(i32, u64), Killed> = BTreeMap::new();
        // Round 1: SIGTERM, then wait for them to go.
        let targets = self.targets();
        if !targets.is_empty() {
            self.killpg(libc::SIGTERM);
            for (p, left) in &targets {
                if tree::signal(p, libc::SIGTERM) == tree::Sent::Sent {
                    mark(&mut killed, p, *left, libc::SIGTERM);
                }
            }
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                self.reap_some();
                if self.targets().is_empty() {
                    break;
                }
                std::thread::sleep(POLL);
            }
        }
        // Round 2: SIGKILL whatever is left, again while new ones appear (a fork between a
        // look and a kill), until none is left or the grace is over.
        let deadline = Instant::now() + grace;
        loop {
            self.reap_some();
            let targets = self.targets();
            if targets.is_empty() || Instant::now() >= deadline {
                for (p, left) in targets {
                    mark(&mut killed, &p, left, libc::SIGKILL);
                    if let Some(k) = killed.get_mut(&(p.pid, p.start)) {
                        k.survived = true;
                    }
                }
                break;
            }
            self.killpg(libc::SIGKILL);
            for (p, left) in &targets {
                if tree::signal(p, libc::SIGKILL) == tree::Sent::Sent {
                    mark(&mut killed, p, *left, libc::SIGKILL);
                }
            }
            std::thread::sleep(POLL);
        }
        self.reap_some();
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.pid);
        }
        Finished {
            exit: self.reaped,
            killed: killed.into_values().collect(),
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

    /// Reap the ended children of ours that are this group's business, and the leader last
    /// (its zombie keeps the group id while members are left).
    fn reap_some(&mut self) {
        let all = tree::snapshot();
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
/// SIGTERM, up to `grace`, then SIGKILL.
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
                for p in alive {
                    if tree::signal(p, sig) == tree::Sent::Sent {
                        mark(&mut killed, p, false, sig);
                    }
                }
                round += 1;
            }
            std::thread::sleep(POLL);
        }
    }
    killed.into_values().collect()
}
