//! Run one command as a [`Group`](crate::process::Group) and hand its output to the caller line
//! by line, from stdout and stderr in arrival order, until it exits or the caller says stop (a
//! stall, a timeout) or gpudoctor is interrupted; then stop the whole group (SIGTERM, grace,
//! SIGKILL) and reap it. Used by the active probes (the CUDA helper, `ib_write_bw`); the NCCL
//! runner (`nccl.rs`) has its own loop feeding its streaming parser.
//!
//! Bounded: lines are cut at [`MAX_LINE`] bytes, reading stops [`DRAIN_GRACE`] after the group
//! is gone even if a pipe stays open, and the caller's `stop` is asked every [`POLL`].

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::process::RunExit;
use crate::process::{Exit, Finished, Group, KILL_GRACE, Killed, signals};

/// Longest line handed over; the rest of a longer one is dropped.
pub const MAX_LINE: usize = 64 * 1024;
/// After the group is gone, how long to wait for pipes held open by leftovers.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How often `stop` is asked.
pub const POLL: Duration = Duration::from_millis(50);

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
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
    pub elapsed: Duration,
}

enum Chunk {
    Data(usize, Vec<u8>),
    Eof(usize),
}

/// Splits a byte stream into lines (`\n`, a trailing `\r` dropped), each cut at [`MAX_LINE`].
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    dropping: bool,
}

impl Lines {
    fn push(&mut self, bytes: &[u8], emit: &mut dyn FnMut(&str)) {
        for &b in bytes {
            if b == b'\n' {
                self.flush(emit);
                self.dropping = false;
            } else if self.buf.len() < MAX_LINE {
                self.buf.push(b);
            } else {
                self.dropping = true;
            }
        }
    }

    fn flush(&mut self, emit: &mut dyn FnMut(&str)) {
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        emit(&text);
    }

    fn finish(&mut self, emit: &mut dyn FnMut(&str)) {
        if !self.buf.is_empty() {
            self.flush(emit);
        }
    }
}

/// Run `command` (its stdio is set here: stdin null, stdout and stderr piped). `on_line` gets
/// every line; `stop` is asked every [`POLL`] and after every line, and ends the run when it
/// says `true`.
pub fn run_lines(
    command: &mut Command,
    on_line: &mut dyn FnMut(Stream, &str),
    stop: &mut dyn FnMut() -> bool,
) -> std::io::Result<Ended> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let spawned = Group::spawn(command)?;
    let mut group = Some(spawned.group);
    let (tx, rx) = mpsc::sync_channel::<Chunk>(64);
    let mut open = 0;
    let stdout = spawned.stdout.map(|s| Box::new(s) as Box<dyn Read + Send>);
    let stderr = spawned.stderr.map(|s| Box::new(s) as Box<dyn Read + Send>);
    for (i, pipe) in [stdout, stderr].into_iter().enumerate() {
        let Some(mut pipe) = pipe else { continue };
        let tx = tx.clone();
        open += 1;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx.send(Chunk::Data(i, buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send(Chunk::Eof(i));
        });
    }
    drop(tx);

    let streams = [Stream::Stdout, Stream::Stderr];
    let mut lines = [Lines::default(), Lines::default()];
    let mut ended = Ended::default();
    let mut observed: Option<Exit> = None;
    let mut finisher: Option<std::thread::JoinHandle<Finished>> = None;
    let mut finished: Option<(Finished, Instant)> = None;
    loop {
        let now = Instant::now();
        if let Some(running) = &group {
            let halt = if let Some(exit) = running.leader_exited() {
                observed = Some(exit);
                true
            } else if let Some(sig) = signals::interrupted() {
                ended.interrupted = Some(sig);
                true
            } else if stop() {
                ended.stopped = true;
                true
            } else {
                false
            };
            if halt && let Some(running) = group.take() {
                finisher = Some(std::thread::spawn(move || running.finish(KILL_GRACE)));
            }
        }
        if finisher.as_ref().is_some_and(|h| h.is_finished())
            && let Some(handle) = finisher.take()
        {
            let done = handle.join().unwrap_or_default();
            finished = Some((done, now));
        }
        if open == 0 && finished.is_some() {
            break;
        }
        if finished
            .as_ref()
            .is_some_and(|(_, at)| now.duration_since(*at) >= DRAIN_GRACE)
        {
            break;
        }
        match rx.recv_timeout(POLL) {
            Ok(Chunk::Data(i, bytes)) => {
                lines[i].push(&bytes, &mut |line| on_line(streams[i], line));
            }
            Ok(Chunk::Eof(i)) => {
                lines[i].finish(&mut |line| on_line(streams[i], line));
                open -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => open = 0,
        }
    }
    for (i, l) in lines.iter_mut().enumerate() {
        l.finish(&mut |line| on_line(streams[i], line));
    }
    let done = finished.map(|(d, _)| d).unwrap_or_default();
    ended.exit = done.exit.or(observed).map(|e| match e {
        Exit::Code(c) => RunExit::Code(c),
        Exit::Signal(s) => RunExit::Signal(s),
    });
    ended.killed = done.killed;
    ended.elapsed = started.elapsed();
    Ok(ended)
}

/// Keeps the last `cap` lines.
#[derive(Debug, Default)]
pub struct Tail {
    lines: std::collections::VecDeque<String>,
    cap: usize,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail {
            lines: Default::default(),
            cap,
        }
    }

    pub fn push(&mut self, line: &str) {
        if self.lines.len() == self.cap {
            self.lines.pop_front();
        }
        self.lines.push_back(line.chars().take(500).collect());
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_cut_and_stripped_of_cr() {
        let mut got = Vec::new();
        let mut l = Lines::default();
        l.push(b"a\r\nb", &mut |s| got.push(s.to_string()));
        l.push(b"c\n", &mut |s| got.push(s.to_string()));
        let long = vec![b'x'; MAX_LINE + 10];
        l.push(&long, &mut |s| got.push(s.to_string()));
        l.push(b"\nend", &mut |s| got.push(s.to_string()));
        l.finish(&mut |s| got.push(s.to_string()));
        assert_eq!(got[0], "a");
        assert_eq!(got[1], "bc");
        assert_eq!(got[2].len(), MAX_LINE);
        assert_eq!(got[3], "end");
    }

    #[test]
    fn a_child_is_stopped_when_asked_and_reaped() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo ready; sleep 30"]);
        let mut seen = Vec::new();
        let started = Instant::now();
        let ready = std::cell::Cell::new(false);
        let ended = run_lines(
            &mut cmd,
            &mut |_, line| {
                seen.push(line.to_string());
                ready.set(true);
            },
            &mut || ready.get(),
        )
        .unwrap();
        assert!(ended.stopped);
        assert_eq!(seen, vec!["ready"]);
        assert!(started.elapsed() < Duration::from_secs(15));
        assert!(matches!(ended.exit, Some(RunExit::Signal(_))));
        let mut tail = Tail::new(2);
        for l in ["1", "2", "3"] {
            tail.push(l);
        }
        assert_eq!(tail.text(), "2\n3\n");
    }
}
