//! A stand-in `ib_write_bw` for tests/active_probes.rs and tests/record.rs, answering from the
//! directory named by `GPUDOCTOR_FAKE_PERFTEST`:
//! - `<device>.out`: what the client prints (a real perftest output from tests/data/perftest/);
//! - `<device>.mode`: how it misbehaves — `hang` (the client never ends), `server-hang` (the
//!   server never listens), `crash` (the client dies of SIGSEGV after its banner), `garbage`
//!   (the client prints bytes that are not perftest's), `fail` (the client cannot connect,
//!   exit 1), `no-cuda` (a perftest built without CUDA: both sides refuse `--use_cuda`, with
//!   the words and usage text Debian's perftest 4.5-0.17 prints, tests/data/perftest/),
//!   `unsupported` (a build whose memory type is compiled out: ` Unsupported memory type`),
//!   `dlopen` (perftest ≥ 25.07, which `dlopen`s `libcuda.so` once connected: it looks for that
//!   file in the `LD_LIBRARY_PATH` directories only, so the test decides what is found),
//!   `loader` (a perftest linked to `libcuda.so.1`: without that file in an `LD_LIBRARY_PATH`
//!   directory the loader stops it before `main`, exit 127), `peermem-absent` (a node without
//!   nvidia_peermem: plain `--use_cuda` cannot register the buffer, the client prints
//!   perftest#346's `Couldn't allocate MR with error=14`; `--use_cuda_dmabuf` works);
//! - `calls`: one line per start: role, device, ib port, tcp port, `CUDA_VISIBLE_DEVICES`,
//!   `CUDA_DEVICE_ORDER` and the arguments.
//!
//! Where gpudoctor depends on it, it behaves as perftest does (perftest's `write_bw.c`,
//! `perftest_parameters.c`, `perftest_communication.c`):
//! - the server `printf`s its banner: stdout is block-buffered into a pipe (line-buffered on a
//!   terminal), so a reader sees it only when the server ends; then it listens on the `-p` port
//!   (`ethernet_server_connect`: bind, listen, one blocking `accept`) and ends when its client's
//!   connection does — it waits for ever if no client comes;
//! - the client connects once (`ethernet_client_connect`); nobody listening is
//!   ` Couldn't connect to <host>:<port>` on stderr and exit 1, no retry;
//! - `-V`/`--version` prints `Version: 6.22` and exits 1 (`VERSION_EXIT`, which `main` turns
//!   into `FAILURE`);
//! - without CUDA support `--use_cuda` is an unknown option: getopt's message (naming the
//!   program as it was started, `argv[0]`), ` Invalid Command or flag.`, the usage on stdout,
//!   the parser's ` Parser function exited with Error`, exit 1, on both sides;
//! - `--use_cuda_dmabuf` before `--use_cuda` is refused (`CUDA DMA-BUF cannot be used without
//!   CUDA`, perftest_parameters.c; linux-rdma/perftest#336).

use std::fs;
use std::io::{IsTerminal, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// perftest's server banner (perftest_communication.c, `ctx_hand_shake`'s callers print it).
const BANNER: &str = "\n************************************\n* Waiting for client to connect... *\n************************************\n";

/// stdout as C's stdio keeps it: block-buffered into a pipe or file, line-buffered on a terminal.
struct Stdout {
    pending: Vec<u8>,
    line_buffered: bool,
}

impl Stdout {
    fn new() -> Self {
        Stdout {
            pending: Vec::new(),
            line_buffered: std::io::stdout().is_terminal(),
        }
    }

    fn print(&mut self, text: &str) {
        self.pending.extend_from_slice(text.as_bytes());
        if self.line_buffered && text.contains('\n') {
            self.flush();
        }
    }

    /// What `exit()` does: write what is buffered.
    fn flush(&mut self) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&self.pending);
        let _ = out.flush();
        self.pending.clear();
    }
}

struct Args {
    device: String,
    ib_port: String,
    tcp_port: u16,
    host: Option<String>,
    all: String,
    uses_cuda: bool,
    /// `--use_cuda_dmabuf` came, and whether `--use_cuda` came before it.
    dmabuf: Option<bool>,
}

fn parse(args: &[String]) -> Args {
    let mut parsed = Args {
        device: String::new(),
        ib_port: String::new(),
        tcp_port: 18515,
        host: None,
        all: args.join(" "),
        uses_cuda: false,
        dmabuf: None,
    };
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match a.as_str() {
            "-d" => (parsed.device, i) = (value, i + 2),
            "-i" => (parsed.ib_port, i) = (value, i + 2),
            "-p" => (parsed.tcp_port, i) = (value.parse().unwrap_or(18515), i + 2),
            "-s" => i += 2,
            "--use_cuda_dmabuf" => (parsed.dmabuf, i) = (Some(parsed.uses_cuda), i + 1),
            _ if a.starts_with("--use_cuda") => (parsed.uses_cuda, i) = (true, i + 1),
            _ if a.starts_with('-') => i += 1,
            _ => (parsed.host, i) = (Some(a.clone()), i + 1),
        }
    }
    parsed
}

/// What Debian's perftest 4.5-0.17 (built without CUDA) prints for `--use_cuda=0`: the usage
/// on stdout, getopt's and the parser's words on stderr (tests/data/perftest/README.md).
const NO_CUDA_STDOUT: &str = include_str!("../../data/perftest/debian-4.5-0.17-use-cuda.stdout");

/// Is `name` a file in one of the `LD_LIBRARY_PATH` directories? (Only those: the machine's
/// loader cache and system directories are not the test's to decide.)
fn on_library_path(name: &str) -> bool {
    std::env::var_os("LD_LIBRARY_PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| !d.as_os_str().is_empty() && d.join(name).exists())
    })
}

fn main() {
    let argv0 = std::env::args()
        .next()
        .unwrap_or_else(|| "ib_write_bw".into());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut stdout = Stdout::new();
    if args.iter().any(|a| a == "-V" || a == "--version") {
        stdout.print("Version: 6.22\n");
        stdout.flush();
        std::process::exit(1);
    }
    let dir = PathBuf::from(
        std::env::var_os("GPUDOCTOR_FAKE_PERFTEST").expect("GPUDOCTOR_FAKE_PERFTEST is not set"),
    );
    let args = parse(&args);
    let role = if args.host.is_some() {
        "client"
    } else {
        "server"
    };
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let call = format!(
        "{role} {} {} {} {} {} {}\n",
        args.device,
        args.ib_port,
        args.tcp_port,
        env("CUDA_VISIBLE_DEVICES"),
        env("CUDA_DEVICE_ORDER"),
        args.all
    );
    if let Ok(mut calls) = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("calls"))
    {
        let _ = calls.write_all(call.as_bytes());
    }
    let mode = fs::read_to_string(dir.join(format!("{}.mode", args.device)))
        .map(|m| m.trim().to_string())
        .unwrap_or_else(|_| "ok".into());
    if mode == "loader" && !on_library_path("libcuda.so.1") {
        // glibc's loader, before main (elf/rtld.c, `_dl_signal_error`'s message), exit 127.
        eprintln!(
            "{argv0}: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory"
        );
        std::process::exit(127);
    }
    if mode == "no-cuda" && args.uses_cuda {
        // getopt_long's message for an option the build does not have, then the parser's
        // default case: its words, the usage on stdout, and main's.
        let option = args.all.split(' ').find(|a| a.starts_with("--use_cuda"));
        eprintln!(
            "{argv0}: unrecognized option '{}'",
            option.unwrap_or("--use_cuda")
        );
        eprint!(" Invalid Command or flag.\n Please check command line and run again.\n\n");
        stdout.print(NO_CUDA_STDOUT);
        stdout.flush();
        eprintln!(" Parser function exited with Error");
        std::process::exit(1);
    }
    if mode == "unsupported" && args.uses_cuda {
        // perftest_parameters.c: the memory type's support compiled out; printf, then main's.
        stdout.print(" Unsupported memory type\n");
        stdout.flush();
        eprintln!(" Parser function exited with Error");
        std::process::exit(1);
    }
    if args.dmabuf == Some(false) {
        eprintln!("CUDA DMA-BUF cannot be used without CUDA");
        eprintln!(" Parser function exited with Error");
        std::process::exit(1);
    }
    match &args.host {
        None => server(&mut stdout, &args, &mode),
        Some(host) => client(&mut stdout, &dir, &args, host, &mode),
    }
}

fn server(stdout: &mut Stdout, args: &Args, mode: &str) -> ! {
    if mode == "server-hang" {
        std::thread::sleep(Duration::from_secs(1000));
        std::process::exit(1);
    }
    stdout.print(BANNER);
    let listener = match TcpListener::bind(("0.0.0.0", args.tcp_port)) {
        Ok(l) => l,
        Err(_) => {
            eprintln!(" Couldn't bind the server to port {}", args.tcp_port);
            stdout.flush();
            std::process::exit(1);
        }
    };
    // One client; the server's test ends when that client's connection does.
    if let Ok((mut peer, _)) = listener.accept() {
        if no_gpu_buffer(stdout, args, mode) {
            stdout.flush();
            std::process::exit(1);
        }
        let mut sink = Vec::new();
        let _ = peer.read_to_end(&mut sink);
    }
    stdout.flush();
    std::process::exit(0);
}

fn client(stdout: &mut Stdout, dir: &Path, args: &Args, host: &str, mode: &str) -> ! {
    // `fail`: the connection that does not come about (a firewall, a wrong address): the
    // server is left waiting in accept() until gpudoctor stops it.
    let peer = (mode != "fail")
        .then(|| TcpStream::connect((host, args.tcp_port)).ok())
        .flatten();
    let Some(mut peer) = peer else {
        eprintln!(" Couldn't connect to {host}:{}", args.tcp_port);
        std::process::exit(1);
    };
    if no_gpu_buffer(stdout, args, mode) {
        drop(peer);
        stdout.flush();
        std::process::exit(1);
    }
    match mode {
        "hang" => {
            stdout.print("initializing CUDA\n");
            stdout.flush();
            std::thread::sleep(Duration::from_secs(1000));
            std::process::exit(1);
        }
        "crash" => {
            stdout.print("initializing CUDA\n");
            stdout.flush();
            drop(peer);
            // A real SIGSEGV, as a crash in the verbs or CUDA library ends it (a signal sent
            // with kill would only reset Rust's stack-overflow handler).
            // SAFETY: none; the fault is the point, and the process ends in it.
            unsafe { std::ptr::null_mut::<u8>().write_volatile(1) };
            std::process::exit(1);
        }
        "garbage" => {
            stdout.print("\u{1}\u{2}\u{7f}garbage\n #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536 oops nan\n");
        }
        _ => {
            let out =
                fs::read_to_string(dir.join(format!("{}.out", args.device))).unwrap_or_default();
            let _ = peer.write_all(b"done");
            stdout.print(&out);
        }
    }
    drop(peer);
    stdout.flush();
    std::process::exit(0);
}

/// Once connected, perftest sets up its GPU buffer (write_bw.c: `establish_connection`, then
/// `ctx_init` and the memory's init): where that cannot work, say it as perftest does and say
/// so (the caller exits 1).
fn no_gpu_buffer(stdout: &mut Stdout, args: &Args, mode: &str) -> bool {
    if !args.uses_cuda {
        return false;
    }
    match mode {
        // src/cuda_loader.c `load_cuda_library`, src/cuda_memory.c `cuda_memory_init`.
        "dlopen" if !on_library_path("libcuda.so") => {
            eprintln!(
                "dlerror: libcuda.so: cannot open shared object file: No such file or directory"
            );
            stdout.print("Failed to load CUDA library dynamically\n");
            true
        }
        "peermem-absent" if args.dmabuf.is_none() && args.host.is_some() => {
            // The buffer is allocated, its registration fails (perftest#346, kept byte for byte).
            stdout.print(include_str!(
                "../../data/perftest/perftest-346-cuda-mr-error-14.txt"
            ));
            true
        }
        _ => false,
    }
}
