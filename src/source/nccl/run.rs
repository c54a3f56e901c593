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
    /// The last [`STDERR_TAIL_LINES`] non-empty lines of stderr, each cut at
    /// [`STDERR_LINE_CUT`] bytes: where a launcher says why it could not start the ranks
    /// (Open MPI's root refusal, `srun: error: ...`, ssh's `Host key verification failed`).
    pub stderr_tail: Vec<String>,
}

/// Lines of stderr kept in [`RunOutput::stderr_tail`].
pub const STDERR_TAIL_LINES: usize = 12;
/// Bytes of one stderr line kept.
pub const STDERR_LINE_CUT: usize = 300;

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

/// Feeds lines to the parser and the transcript, and says when the run is over its time.
struct Sink<'a> {
    parser: NcclLogParser,
    transcript: Transcript,
    splitters: [LineSplitter; 2],
    stderr_tail: std::collections::VecDeque<String>,
    started: Instant,
    timeout: Duration,
    timed_out: bool,
    last_progress: Instant,
    progress: &'a mut dyn FnMut(&Progress),
}

impl Sink<'_> {
    fn splitter(&mut self, stream: Stream) -> (&mut LineSplitter, Lines<'_>) {
        let i = match stream {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        };
        (
            &mut self.splitters[i],
            Lines {
                parser: &mut self.parser,
                transcript: &mut self.transcript,
                stderr_tail: (i == 1).then_some(&mut self.stderr_tail),
            },
        )
    }
}

/// Where a whole line goes: the parser, the transcript, and for stderr its tail.
struct Lines<'a> {
    parser: &'a mut NcclLogParser,
    transcript: &'a mut Transcript,
    stderr_tail: Option<&'a mut std::collections::VecDeque<String>>,
}

impl Lines<'_> {
    fn take(&mut self, line: &[u8], cut: bool) {
        self.parser.feed_raw_line(line, cut);
        self.transcript.push(line);
        if let Some(tail) = self.stderr_tail.as_deref_mut() {
            let kept = &line[..line.len().min(STDERR_LINE_CUT)];
            let text = String::from_utf8_lossy(kept);
            let text = text.trim_end();
            if !text.trim().is_empty() {
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(text.to_string());
            }
        }
    }
}

impl Output for Sink<'_> {
    fn data(&mut self, stream: Stream, bytes: &[u8]) {
        let (splitter, mut lines) = self.splitter(stream);
        splitter.push(bytes, &mut |line, cut| lines.take(line, cut));
    }

    fn eof(&mut self, stream: Stream) {
        let (splitter, mut lines) = self.splitter(stream);
        splitter.finish(&mut |line, cut| lines.take(line, cut));
    }

    /// Past the timeout; a progress line about every [`PROGRESS_EVERY`] until then.
    fn stop(&mut self) -> bool {
        if self.started.elapsed() >= self.timeout {
            self.timed_out = true;
            return true;
        }
        self.tick();
        false
    }

    /// A progress line when one is due, also while the run is being stopped (a grace can be
    /// longer than the time between two lines).
    fn tick(&mut self) {
        if self.last_progress.elapsed() >= PROGRESS_EVERY {
            self.last_progress = Instant::now();
            (self.progress)(&Progress {
                elapsed: self.started.elapsed(),
                lines: self.parser.lines(),
                last: self.parser.last_row().map(|r| (r.size, r.peak_busbw())),
            });
        }
    }
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
    command.args(args);
    for (name, value) in env {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    let mut sink = Sink {
        parser: NcclLogParser::new(),
        transcript: Transcript::new(transcript_part),
        splitters: [LineSplitter::new(), LineSplitter::new()],
        stderr_tail: std::collections::VecDeque::new(),
        started: Instant::now(),
        timeout,
        timed_out: false,
        last_progress: Instant::now(),
        progress,
    };
    // Its own process group under gpudoctor as subreaper (`process`): whatever it starts, in
    // the group or not, is stopped and reaped before this returns.
    let ended = stream::run(&mut command, &mut sink)?;
    // Whatever is buffered without a newline is the last (partial) line.
    for stream in [Stream::Stdout, Stream::Stderr] {
        sink.eof(stream);
    }
    Ok(RunOutput {
        exit: ended.exit,
        timed_out: sink.timed_out,
        interrupted: ended.interrupted,
        killed: ended.killed,
        containment: ended.containment,
        elapsed: ended.elapsed,
        log: sink.parser.finish(),
        transcript: sink.transcript.finish(),
        stderr_tail: sink.stderr_tail.into(),
    })
}
