//! One command run as a [`Group`] to its end, its stdout and stderr handed to the caller as
//! they arrive: the one loop behind the active probes (`source::child`) and the nccl-tests
//! runner (`source::nccl`). It ends the run when the leader exits, when the caller's
//! [`Output::stop`] says so (a stall, a timeout) or when gpudoctor is interrupted, then stops
//! the whole group ([`Group::finish`]: SIGTERM, grace, SIGKILL) and reaps it.
//!
//! Nothing here spins once the leader is gone. Each pipe is read on its own thread (neither can
//! fill and block the command), and the thread that finishes the group sends its result on the
//! same channel as the output: after the leader, the loop blocks on that channel (waking every
//! [`TICK`] for the caller's progress line), so a cleanup that waits out a SIGTERM grace costs
//! no CPU here (issue 41: the loop used to spin on a
//! disconnected channel until the cleanup ended, 100 % of a core per run, and 128 pairs side by
//! side starved each other past their timeouts). While the leader runs it is looked at every
//! [`POLL`]: its exit, the caller's `stop` and gpudoctor's signals have no descriptor to wait on
//! together.
//!
//! Bounded: reading stops [`DRAIN_GRACE`] after the group is finished even if a pipe stays open
//! (a process that survived SIGKILL, or one that passed the pipe on); the channel holds at most
//! [`QUEUE`] chunks, so a reader waits when the caller is behind and memory stays flat.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::{Containment, Exit, Finished, Group, KILL_GRACE, Killed, RunExit, signals};

/// While the leader runs, how often its exit, `stop` and signals are looked at.
pub const POLL: Duration = Duration::from_millis(50);
/// While the group is being finished, how often [`Output::tick`] is called: a timed wake-up,
/// not a spin, so a progress line still comes during a long grace.
pub const TICK: Duration = Duration::from_secs(1);
/// After the group is finished, how long to wait for pipes held open by leftovers.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Chunks in flight between the readers and the loop.
const QUEUE: usize = 64;
/// Bytes one read takes from a pipe (a pipe holds 64 KiB by default, pipe(7)).
const READ_SIZE: usize = 64 * 1024;

/// Which pipe output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What the caller does with a run: takes its output, and says when to stop it.
pub trait Output {
    /// Bytes from `stream`, as read (not split into lines).
    fn data(&mut self, stream: Stream, bytes: &[u8]);
    /// `stream` reached its end.
    fn eof(&mut self, stream: Stream);
    /// Asked every [`POLL`] and after every chunk while the leader runs: `true` stops the run.
    fn stop(&mut self) -> bool;
    /// Called about every [`TICK`] once the leader is gone, while the group is finished and the
    /// pipes drained (a progress line is due, say).
    fn tick(&mut self) {}
}

/// How a run ended.
#[derive(Debug, Clone, Default)]
pub struct Ended {
    pub exit: Option<RunExit>,
    /// The caller's `stop` said so (a stall or a timeout), and the group was stopped.
    pub stopped: bool,
    /// gpudoctor got this signal while the run went on.
    pub interrupted: Option<i32>,
    /// What was still running when the leader ended or was stopped.
    pub killed: Vec<Killed>,
    pub containment: Containment,
    pub elapsed: Duration,
}

enum Event {
    Data(Stream, Vec<u8>),
    Eof(Stream),
    /// The group is finished (sent by the thread that finished it).
    Finished(Finished),
}

/// Run `command` (its stdio is set here: stdin null, stdout and stderr piped) and hand its
/// output to `output` until the run and its cleanup are over.
pub fn run(command: &mut Command, output: &mut dyn Output) -> std::io::Result<Ended> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let spawned = Group::spawn(command)?;
    let (tx, rx) = mpsc::sync_channel::<Event>(QUEUE);
    let mut open = 0;
    let stdout = spawned.stdout.map(|s| Box::new(s) as Box<dyn Read + Send>);
    let stderr = spawned.stderr.map(|s| Box::new(s) as Box<dyn Read + Send>);
    for (stream, pipe) in [(Stream::Stdout, stdout), (Stream::Stderr, stderr)] {
        let Some(pipe) = pipe else { continue };
        open += 1;
        let tx = tx.clone();
        std::thread::spawn(move || read_pipe(pipe, stream, tx));
    }
    // Kept until the finisher takes it: while the leader runs the channel cannot disconnect,
    // and afterwards it disconnects only when the readers and the finisher are all done.
    let mut tx = Some(tx);
    let mut group = Some(spawned.group);
    let mut ended = Ended {
        containment: group
            .as_ref()
            .map_or_else(Default::default, Group::containment),
        ..Ended::default()
    };
    let mut observed: Option<Exit> = None;
    let mut finished: Option<Finished> = None;
    let mut drain_until: Option<Instant> = None;
    let mut next_tick = Instant::now() + TICK;
    loop {
        if let Some(running) = &group {
            let halt = if let Some(exit) = running.leader_exited() {
                observed = Some(exit);
                true
            } else if let Some(sig) = signals::interrupted() {
                ended.interrupted = Some(sig);
                true
            } else if output.stop() {
                ended.stopped = true;
                true
            } else {
                false
            };
            if halt && let (Some(running), Some(tx)) = (group.take(), tx.take()) {
                std::thread::spawn(move || finish(running, tx));
            }
        }
        if open == 0 && finished.is_some() {
            break;
        }
        let event = if group.is_some() {
            rx.recv_timeout(POLL)
        } else {
            let now = Instant::now();
            if drain_until.is_some_and(|until| now >= until) {
                // Finished, and a pipe is still open past the grace: stop reading.
                break;
            }
            if now >= next_tick {
                output.tick();
                next_tick = now + TICK;
            }
            // The finisher always sends within its bound (`Group::finish`), or is gone and the
            // channel disconnects: the wait ends with it, or at the drain deadline.
            let until = drain_until.map_or(next_tick, |d| d.min(next_tick));
            rx.recv_timeout(until.saturating_duration_since(now))
        };
        match event {
            Ok(Event::Data(stream, bytes)) => output.data(stream, &bytes),
            Ok(Event::Eof(stream)) => {
                output.eof(stream);
                open -= 1;
            }
            Ok(Event::Finished(done)) => {
                finished = Some(done);
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
            Err(RecvTimeoutError::Timeout) => {}
            // Every sender is gone, and what they sent was taken: nothing more can come.
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let done = finished.unwrap_or_default();
    ended.exit = done.exit.or(observed).map(|e| match e {
        Exit::Code(c) => RunExit::Code(c),
        Exit::Signal(s) => RunExit::Signal(s),
    });
    ended.killed = done.killed;
    ended.elapsed = started.elapsed();
    Ok(ended)
}

/// Read `pipe` to its end in chunks; a send fails only when the loop is gone.
fn read_pipe(mut pipe: Box<dyn Read + Send>, stream: Stream, tx: mpsc::SyncSender<Event>) {
    let mut buf = vec![0u8; READ_SIZE];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if tx.send(Event::Data(stream, buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = tx.send(Event::Eof(stream));
}

/// Finish the group on this thread (it waits out the grace) and send the result. A panic in
/// `finish` is caught so the loop still hears that it is over.
fn finish(group: Group, tx: mpsc::SyncSender<Event>) {
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| group.finish(KILL_GRACE)))
        .unwrap_or_default();
    let _ = tx.send(Event::Finished(done));
}
