//! Run one command as a [`Group`](crate::process::Group) and hand its output to the caller line
//! by line, from stdout and stderr in arrival order, until it exits or the caller says stop (a
//! stall, a timeout) or gpudoctor is interrupted; then stop the whole group (SIGTERM, grace,
//! SIGKILL) and reap it. Used by the active probes (the CUDA helper, `ib_write_bw`). The loop
//! itself is [`crate::process::stream`], shared with the NCCL runner (`nccl/run.rs`); this
//! module only splits the bytes into lines.
//!
//! Bounded: lines are cut at [`MAX_LINE`] bytes, reading stops
//! [`DRAIN_GRACE`](crate::process::stream::DRAIN_GRACE) after the group is gone even if a pipe
//! stays open, and the caller's `stop` is asked every [`POLL`].

use std::process::Command;

use crate::process::stream::{self, Output};
pub use crate::process::stream::{Ended, POLL, Stream};

/// Longest line handed over; the rest of a longer one is dropped.
pub const MAX_LINE: usize = 64 * 1024;

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

/// The caller's two callbacks, each stream split into lines.
struct ByLine<'a> {
    on_line: &'a mut dyn FnMut(Stream, &str),
    stop: &'a mut dyn FnMut() -> bool,
    lines: [Lines; 2],
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

impl Output for ByLine<'_> {
    fn data(&mut self, stream: Stream, bytes: &[u8]) {
        let on_line = &mut *self.on_line;
        self.lines[index(stream)].push(bytes, &mut |line| on_line(stream, line));
    }

    fn eof(&mut self, stream: Stream) {
        let on_line = &mut *self.on_line;
        self.lines[index(stream)].finish(&mut |line| on_line(stream, line));
    }

    fn stop(&mut self) -> bool {
        (self.stop)()
    }
}

/// Run `command` (its stdio is set here: stdin null, stdout and stderr piped). `on_line` gets
/// every line; `stop` is asked every [`POLL`] and after every chunk of output while the
/// command runs, and ends the run when it says `true`.
pub fn run_lines(
    command: &mut Command,
    on_line: &mut dyn FnMut(Stream, &str),
    stop: &mut dyn FnMut() -> bool,
) -> std::io::Result<Ended> {
    let mut by_line = ByLine {
        on_line,
        stop,
        lines: [Lines::default(), Lines::default()],
    };
    let ended = stream::run(command, &mut by_line)?;
    // A pipe still open at the end (held by a leftover past the drain grace): its last,
    // unterminated line is handed over too.
    for stream in [Stream::Stdout, Stream::Stderr] {
        let on_line = &mut *by_line.on_line;
        by_line.lines[index(stream)].finish(&mut |line| on_line(stream, line));
    }
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
    use crate::process::RunExit;
    use std::time::{Duration, Instant};

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
