//! Running one nccl-tests binary: the child in its own process group under a timeout, its
//! stdout and stderr streamed line by line into the log parser and a bounded transcript, and
//! progress reported as it goes. The parent module decides what to run and reads saved logs.

use super::*;

/// What a run reports while it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub elapsed: Duration,
    pub lines: u64,
    /// Last result row: size and busbw.
    pub last: Option<(u64, f64)>,
}

impl Progress {
    pub fn line(&self, name: &str, timeout: Duration) -> String {
        let last = match self.last {
            Some((size, busbw)) => {
                format!("last size {} (busbw {busbw:.2} GB/s)", format_size(size))
            }
            None => "no result row yet".to_string(),
        };
        format!(
            "gpudoctor: nccl {name}: {} s elapsed, {last}, {} lines (timeout {} s)",
            self.elapsed.as_secs(),
            self.lines,
            timeout.as_secs()
        )
    }
}

/// The output of [`run_command`].
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub exit: Option<RunExit>,
    pub timed_out: bool,
    /// gpudoctor got this signal while the run went on, and stopped it.
    pub interrupted: Option<i32>,
    /// What was still running after the leader exited or was stopped, and was killed.
    pub killed: Vec<Killed>,
    pub containment: Containment,
    pub elapsed: Duration,
    pub log: NcclLog,
    pub transcript: String,
}

/// Keeps the first and the last [`TRANSCRIPT_PART`] bytes of a stream of lines.
#[derive(Debug, Default)]
pub(super) struct Transcript {
    head: String,
    tail: std::collections::VecDeque<String>,
    tail_bytes: usize,
    omitted_lines: u64,
    omitted_bytes: u64,
    cap: usize,
}

impl Transcript {
    pub(super) fn new(cap: usize) -> Self {
        Transcript {
            cap,
            ..Default::default()
        }
    }

    pub(super) fn push(&mut self, line: &[u8]) {
        // `from_utf8` first: it is several times faster than the lossy decoder on valid text.
        let text = match std::str::from_utf8(line) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(line),
        };
        if self.head.len() + text.len() < self.cap && self.tail.is_empty() {
            self.head.push_str(&text);
            self.head.push('\n');
            return;
        }
        // Lines leaving the tail give their buffer to the line coming in: a long log does not
        // allocate per line (NCCL log parsing speed, docs/performance.md).
        self.tail_bytes += text.len() + 1;
        let mut spare = String::new();
        while self.tail_bytes > self.cap {
            match self.tail.pop_front() {
                Some(old) => {
                    self.tail_bytes -= old.len() + 1;
                    self.omitted_lines += 1;
                    self.omitted_bytes += old.len() as u64 + 1;
                    spare = old;
                }
                None => break,
            }
        }
        if self.tail_bytes > self.cap {
            // This line alone is over the cap: omitted like the ones before it.
            self.tail_bytes -= text.len() + 1;
            self.omitted_lines += 1;
            self.omitted_bytes += text.len() as u64 + 1;
            return;
        }
        spare.clear();
        spare.push_str(&text);
        self.tail.push_back(spare);
    }

    pub(super) fn finish(self) -> String {
        let mut out = self.head;
        if self.omitted_lines > 0 {
            out.push_str(&format!(
                "# gpudoctor: {} line(s), {} byte(s) of output omitted here\n",
                self.omitted_lines, self.omitted_bytes
            ));
        }
        for line in self.tail {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

/// Feeds lines to the parser and the transcript.
struct Sink {
    parser: NcclLogParser,
    transcript: Transcript,
}

impl Sink {
    fn line(&mut self, line: &[u8], cut: bool) {
        self.parser.feed_raw_line(line, cut);
        self.transcript.push(line);
    }
}

enum Chunk {
    Data(usize, Vec<u8>),
    Eof(usize),
}

/// Run `argv` with `env` changes under `timeout`, streaming its stdout and stderr into the
/// parser. `progress` is called about every [`PROGRESS_EVERY`].
pub fn run_command(
    argv: &[String],
    env: &[(String, Option<String>)],
    timeout: Duration,
    progress: &mut dyn FnMut(&Progress),
) -> std::io::Result<RunOutput> {
    run_command_keeping(argv, env, timeout, progress, TRANSCRIPT_PART)
}

/// [`run_command`] keeping at most `transcript_part` bytes of the output's head and of its tail
/// (`gpudoctor pairs` runs many at once and keeps only what the parser found).
pub fn run_command_keeping(
    argv: &[String],
    env: &[(String, Option<String>)],
    timeout: Duration,
    progress: &mut dyn FnMut(&Progress),
    transcript_part: usize,
) -> std::io::Result<RunOutput> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::other("empty command"));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    let started = Instant::now();
    // Its own process group under gpudoctor as subreaper (process.rs): whatever it starts,
    // in the group or not, is stopped and reaped before this returns.
    let spawned = Group::spawn(&mut command)?;
    let mut group = Some(spawned.group);

    // Bounded: a reader waits when the parser is behind, so memory stays flat.
    let (tx, rx) = mpsc::sync_channel::<Chunk>(64);
    let mut readers = 0;
    let stdout = spawned.stdout.map(|s| Box::new(s) as Box<dyn Read + Send>);
    let stderr = spawned.stderr.map(|s| Box::new(s) as Box<dyn Read + Send>);
    for (i, pipe) in [stdout, stderr].into_iter().enumerate() {
        let Some(mut pipe) = pipe else { continue };
        let tx = tx.clone();
        readers += 1;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
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

    let mut sink = Sink {
        parser: NcclLogParser::new(),
        transcript: Transcript::new(transcript_part),
    };
    let mut splitters = [LineSplitter::new(), LineSplitter::new()];
    let mut open = readers;
    let mut timed_out = false;
    let mut interrupted = None;
    let mut observed_exit: Option<Exit> = None;
    // Stopping the group runs on its own thread (it waits out the grace) while the output is
    // still read here.
    let mut finisher: Option<std::thread::JoinHandle<Finished>> = None;
    let mut finished: Option<(Finished, Instant)> = None;
    let mut last_progress = Instant::now();

    loop {
        let now = Instant::now();
        if let Some(running) = &group {
            let stop = if let Some(exit) = running.leader_exited() {
                observed_exit = Some(exit);
                true
            } else if now.duration_since(started) >= timeout {
                timed_out = true;
                true
            } else if let Some(sig) = signals::interrupted() {
                interrupted = Some(sig);
                true
            } else {
                false
            };
            if stop && let Some(running) = group.take() {
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
        // Everything was killed and reaped but a pipe is still open (a process that survived
        // SIGKILL, or one that passed the pipe on): stop reading.
        if finished
            .as_ref()
            .is_some_and(|(_, at)| now.duration_since(*at) >= DRAIN_GRACE)
        {
            break;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Chunk::Data(i, bytes)) => {
                splitters[i].push(&bytes, &mut |line, cut| sink.line(line, cut));
            }
            Ok(Chunk::Eof(i)) => {
                splitters[i].finish(&mut |line, cut| sink.line(line, cut));
                open -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => open = 0,
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            progress(&Progress {
                elapsed: started.elapsed(),
                lines: sink.parser.lines(),
                last: sink.parser.last_row().map(|r| (r.size, r.peak_busbw())),
            });
        }
    }
    // Whatever is buffered without a newline is the last (partial) line.
    for splitter in &mut splitters {
        splitter.finish(&mut |line, cut| sink.line(line, cut));
    }
    let (done, _) = finished.unwrap_or((Finished::default(), Instant::now()));
    let exit = done.exit.or(observed_exit).map(|e| match e {
        Exit::Code(c) => RunExit::Code(c),
        Exit::Signal(s) => RunExit::Signal(s),
    });
    Ok(RunOutput {
        exit,
        timed_out,
        interrupted,
        killed: done.killed,
        containment: done.containment,
        elapsed: started.elapsed(),
        log: sink.parser.finish(),
        transcript: sink.transcript.finish(),
    })
}
