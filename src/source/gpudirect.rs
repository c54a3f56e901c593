//! The GPUDirect RDMA probe (`--bandwidth`): for each RDMA device with an active port, an
//! `ib_write_bw` loopback through that HCA with both buffers in the memory of the GPU nearest to
//! it (`--use_cuda`), as Azure's health checks run it (AzNHC `customTests/
//! azure_ib_write_bw_gdr.nhc`: server and client on the same device and GPU, 8 MiB messages,
//! `-F --report_gbits`, the client's `BW average`). Replay reads the outputs kept in
//! `.gpudoctor/gpudirect/`. Nothing here judges.
//!
//! Running, per device, one after the other (parallel loopbacks would share PCIe switches and
//! measure each other):
//! - the binary is looked for in `--perftest-dir`, `PATH`, then [`COMMON_DIRS`] — paths of the
//!   machine gpudoctor runs on, like nccl-tests (`nccl.rs`), not under `--root`;
//! - the GPU is chosen by `CUDA_VISIBLE_DEVICES=<its NVML UUID>` and `--use_cuda=0`, so perftest's
//!   own device order (CUDA's fastest-first) cannot pick another one; on a node whose HCAs reach
//!   GPU memory through dma-buf (no peer-memory client, `rdma.gpudirect`'s decision) with
//!   `--use_cuda_dmabuf` after it, as perftest's README says (plain `--use_cuda` registers
//!   through nvidia_peermem, and without it `Couldn't allocate MR` on every healthy rail);
//! - perftest finds the host driver's libcuda: the directory the CUDA probe would load it from
//!   (`host_lib.rs`, e.g. `/host/usr/lib/x86_64-linux-gnu` in a Pod) goes first on its
//!   `LD_LIBRARY_PATH`. perftest ≥ 25.07 `dlopen`s the unversioned `libcuda.so` at run time
//!   (`src/cuda_loader.c`; `Failed to load CUDA library dynamically`, exit 1), older CUDA builds
//!   are linked to `libcuda.so.1` and stop in the loader (exit 127): gpudoctor's own image has
//!   neither;
//! - the server (`ib_write_bw -d DEV -i PORT -p TCP ...`) starts first; the client (the same
//!   plus `localhost`) starts once the server's TCP port listens ([`TCP_TABLES`]), instead of
//!   AzNHC's fixed `sleep 5`. Not on the server's banner (`Waiting for client to connect`): perftest
//!   `printf`s it into our pipe, block-buffered, and blocks in `accept()`, so the line arrives
//!   only when the server ends. The banner still counts where it does arrive (a perftest that
//!   flushes, a terminal-like pipe);
//! - both are [`Group`](crate::process::Group)s: at the timeout (`--cuda-timeout`) each is
//!   stopped with everything it started, and the output so far is kept and judged; the server
//!   gets [`SERVER_GRACE`] after the client to finish, then is stopped.
//!
//! A capture keeps the client's output as `<device>.log`, the server's as `<device>.server.log`
//! and what only the runner knows (command, GPU, exits, timeout) as `<device>.json`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::RootedFs;
use super::child;
use crate::answers::gpudirect::{
    BINARY, DMABUF_OPTION, GdrMeta, GdrProbe, GdrRun, GdrTarget, MESSAGE_BYTES, NOT_REQUESTED,
};
use crate::answers::perftest;
use crate::process::Killed;

/// Where a capture keeps the loopback outputs.
pub const GPUDIRECT_DIR: &str = ".gpudoctor/gpudirect";
/// In a capture: ib_write_bw was not found when it was recorded, and where it was looked for
/// (`record` writes it so that a replay gives the verdict the live run gave).
pub const NOT_FOUND_JSON: &str = ".gpudoctor/gpudirect/not-found.json";

/// The content of [`NOT_FOUND_JSON`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotFound {
    pub searched: Vec<String>,
    /// `--perftest-dir` was given.
    pub asked: bool,
}
/// TCP port of the first loopback's out-of-band exchange when the kernel names no free one
/// ([`free_tcp_port`]); the next ones count up from it. Not perftest's default 18515, which a
/// job's own perftest may be using.
pub const BASE_TCP_PORT: u16 = 18615;

/// A TCP port nobody uses now, as the kernel picks one for a bind to port 0: a fixed port may be
/// held by a job's perftest or another gpudoctor, and then the client would talk to that
/// server. Released at once for the server to bind (a race only with another bind to a port
/// the kernel hands out in turn).
fn free_tcp_port() -> Option<u16> {
    std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .ok()
}
/// How long the server may take to finish after its client.
pub const SERVER_GRACE: Duration = Duration::from_secs(5);
/// Install locations searched after `PATH`: distribution packages, MLNX_OFED/DOCA, AzNHC's build.
pub const COMMON_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/local/bin",
    "/opt/perftest/bin",
    "/usr/mpi/gcc/perftest/bin",
    "/opt/azurehpc/test/nhc/bin",
];
/// Output kept verbatim per side.
pub const TRANSCRIPT_CAP: usize = 256 * 1024;
/// The kernel's TCP sockets of the network namespace gpudoctor runs in (proc(5),
/// `/proc/net/tcp`: `local_address` as hex `ADDR:PORT`, `st` `0A` for LISTEN), read to see the
/// server listen. Not under `--root`: the server runs here, beside gpudoctor, like the binary.
pub const TCP_TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];
/// Most of a TCP table read (a busy node lists tens of thousands of sockets, 150 bytes each).
const TCP_TABLE_CAP: u64 = 16 << 20;

/// Does a socket in `table` (the text of `/proc/net/tcp` or `tcp6`) listen on `port`? A table
/// that does not parse says no: the banner and the deadline still end the wait.
pub fn listens_on(table: &str, port: u16) -> bool {
    use procfs_core::FromBufReadSI as _;
    let system = procfs_core::ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: 100,
        page_size: 4096,
        is_little_endian: cfg!(target_endian = "little"),
    };
    procfs_core::net::TcpNetEntries::from_buf_read(table.as_bytes(), &system).is_ok_and(|t| {
        t.0.iter().any(|e| {
            e.state == procfs_core::net::TcpState::Listen && e.local_address.port() == port
        })
    })
}

/// Does a socket of this network namespace listen on `port`?
fn port_listens(port: u16) -> bool {
    use std::io::Read as _;
    TCP_TABLES.iter().any(|path| {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(TCP_TABLE_CAP).read_to_string(&mut text))
            .is_ok()
            && listens_on(&text, port)
    })
}

/// `check` options for the loopbacks.
#[derive(Debug, Clone)]
pub struct GdrOptions {
    pub run: bool,
    /// `--perftest-dir`: asked for explicitly, so a missing binary there is an error, not a skip.
    pub dir: Option<PathBuf>,
    /// Per loopback (server and client together).
    pub timeout: Duration,
    pub progress: bool,
    /// Put first on perftest's `LD_LIBRARY_PATH`: the host driver's library directory.
    pub library_dir: Option<PathBuf>,
}

impl Default for GdrOptions {
    fn default() -> Self {
        GdrOptions {
            run: false,
            dir: None,
            timeout: super::cuda::DEFAULT_STEP_TIMEOUT,
            progress: true,
            library_dir: None,
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find `ib_write_bw` in `dir`, else `path_var` then `common` (the live probe's [`COMMON_DIRS`]);
/// `Err` lists where it was looked for.
pub fn find_binary(
    dir: Option<&Path>,
    path_var: Option<&str>,
    common: &[&str],
) -> Result<PathBuf, Vec<String>> {
    let mut places: Vec<(String, Vec<PathBuf>)> = Vec::new();
    if let Some(d) = dir {
        places.push((
            d.display().to_string(),
            vec![d.to_path_buf(), d.join("bin")],
        ));
    } else {
        if let Some(p) = path_var.filter(|p| !p.is_empty()) {
            let dirs = std::env::split_paths(p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect();
            places.push((format!("PATH={p}"), dirs));
        }
        for d in common {
            places.push((d.to_string(), vec![PathBuf::from(d)]));
        }
    }
    for (_, dirs) in &places {
        for d in dirs {
            let candidate = d.join(BINARY);
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Err(places.into_iter().map(|(shown, _)| shown).collect())
}

/// The arguments both sides share (AzNHC's, without its fixed port and GID index).
pub fn common_args(target: &GdrTarget, tcp_port: u16) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "-d".into(),
        target.device.clone(),
        "-i".into(),
        target.port.to_string(),
        "-p".into(),
        tcp_port.to_string(),
        "-s".into(),
        MESSAGE_BYTES.to_string(),
        "-F".into(),
        "--report_gbits".into(),
        "--use_cuda=0".into(),
    ];
    if target.dmabuf {
        // After --use_cuda: perftest refuses it before (perftest#336).
        args.push(DMABUF_OPTION.into());
    }
    args
}

/// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` that make `--use_cuda=0` the target's GPU.
pub fn cuda_env(target: &GdrTarget) -> Vec<(String, String)> {
    let visible = target
        .gpu_uuid
        .clone()
        .or_else(|| target.gpu_ordinal.map(|o| o.to_string()))
        .unwrap_or_else(|| "0".to_string());
    vec![
        ("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()),
        ("CUDA_VISIBLE_DEVICES".into(), visible),
    ]
}

/// perftest's `LD_LIBRARY_PATH`: `dir` first, then what gpudoctor was given.
pub fn library_path(dir: &Path, inherited: Option<&std::ffi::OsStr>) -> std::ffi::OsString {
    let mut value = dir.as_os_str().to_os_string();
    if let Some(old) = inherited.filter(|o| !o.is_empty()) {
        value.push(":");
        value.push(old);
    }
    value
}

/// Collects one side's output.
#[derive(Default)]
struct Side {
    text: String,
    cut: bool,
}

impl Side {
    fn push(&mut self, line: &str) {
        if self.text.len() + line.len() < TRANSCRIPT_CAP {
            self.text.push_str(line);
            self.text.push('\n');
        } else {
            self.cut = true;
        }
    }

    fn finish(mut self) -> String {
        if self.cut {
            self.text
                .push_str("# gpudoctor: output cut here (too long)\n");
        }
        self.text
    }
}

fn run_one(
    binary: &Path,
    target: &GdrTarget,
    tcp_port: u16,
    timeout: Duration,
    library_dir: Option<&Path>,
) -> std::io::Result<GdrRun> {
    let args = common_args(target, tcp_port);
    let mut env: Vec<(String, std::ffi::OsString)> = cuda_env(target)
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    if let Some(dir) = library_dir {
        let inherited = std::env::var_os("LD_LIBRARY_PATH");
        env.push((
            "LD_LIBRARY_PATH".into(),
            library_path(dir, inherited.as_deref()),
        ));
    }
    let started = Instant::now();
    let deadline = started + timeout;
    let ready = Arc::new(AtomicBool::new(false));
    let client_done: Arc<std::sync::Mutex<Option<Instant>>> = Arc::new(Default::default());
    let (tx, rx) = mpsc::channel::<std::io::Result<(child::Ended, String)>>();
    {
        let binary = binary.to_path_buf();
        let args = args.clone();
        let env = env.clone();
        let ready = ready.clone();
        let client_done = client_done.clone();
        std::thread::spawn(move || {
            let mut cmd = Command::new(&binary);
            cmd.args(&args).envs(env);
            let mut side = Side::default();
            let result = child::run_lines(
                &mut cmd,
                &mut |_, line| {
                    if perftest::is_waiting_banner(line) {
                        ready.store(true, Ordering::SeqCst);
                    }
                    side.push(line);
                },
                &mut || {
                    let done = client_done.lock().map(|d| *d).unwrap_or(None);
                    Instant::now() >= deadline
                        || done.is_some_and(|at| at.elapsed() >= SERVER_GRACE)
                },
            );
            let _ = tx.send(result.map(|ended| (ended, side.finish())));
        });
    }
    // Wait for the port to listen (or the banner), the server's end, or the deadline.
    let mut server: Option<std::io::Result<(child::Ended, String)>> = None;
    while !ready.load(Ordering::SeqCst) && Instant::now() < deadline {
        if port_listens(tcp_port) {
            ready.store(true, Ordering::SeqCst);
            break;
        }
        match rx.recv_timeout(child::POLL) {
            Ok(result) => {
                server = Some(result);
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut command: Vec<String> = std::iter::once(binary.display().to_string())
        .chain(args.iter().cloned())
        .collect();
    command.push("localhost".into());
    let mut client = Side::default();
    let mut timed_out = false;
    let mut client_ended = None;
    let server_ready = ready.load(Ordering::SeqCst);
    if server_ready {
        let mut cmd = Command::new(binary);
        cmd.args(&command[1..]).envs(env.clone());
        let ended = child::run_lines(&mut cmd, &mut |_, line| client.push(line), &mut || {
            Instant::now() >= deadline
        })?;
        timed_out = ended.stopped;
        client_ended = Some(ended);
    } else if server.is_none() {
        timed_out = true;
    }
    if let Ok(mut done) = client_done.lock() {
        *done = Some(Instant::now());
    }
    let server = match server {
        Some(s) => s,
        None => rx
            .recv_timeout(timeout + SERVER_GRACE + Duration::from_secs(10))
            .unwrap_or_else(|_| Err(std::io::Error::other("the server runner did not return"))),
    };
    let (server_ended, server_text) = match server {
        Ok((ended, text)) => (Some(ended), text),
        Err(e) => (None, format!("# gpudoctor: server: {e}\n")),
    };
    if server_ended.as_ref().is_some_and(|e| e.stopped) && !server_ready {
        timed_out = true;
    }
    let client_text = client.finish();
    let mut killed: Vec<Killed> = Vec::new();
    if let Some(e) = &client_ended {
        killed.extend(e.killed.iter().cloned());
    }
    if let Some(e) = &server_ended {
        killed.extend(e.killed.iter().cloned());
    }
    let output = outputs(&client_text, &server_text);
    Ok(GdrRun {
        device: target.device.clone(),
        port: target.port,
        meta: Some(GdrMeta {
            device: target.device.clone(),
            port: target.port,
            gpu: target.gpu.clone(),
            path: target.path.clone(),
            command,
            exit: client_ended.as_ref().and_then(|e| e.exit),
            server_exit: server_ended.as_ref().and_then(|e| e.exit),
            server_not_ready: !server_ready,
            timed_out,
            timeout_s: Some(timeout.as_secs()),
            elapsed_ms: Some(started.elapsed().as_millis() as u64),
            message_bytes: MESSAGE_BYTES,
            killed,
            library_path: library_dir.map(|d| d.display().to_string()),
        }),
        output,
        origin: format!("{BINARY} -d {} (client output)", target.device),
        transcript: Some((client_text, server_text)),
    })
}

/// The client's output, judged; where it has no result row, the server's failures are added
/// (`server: ...`): a perftest without CUDA support, or too old for `--use_cuda=<id>`, refuses
/// the option on the server, which then ends before it listens and no client ever starts.
/// Live and replay alike (a capture keeps the server's output as `<device>.server.log`).
fn outputs(client: &str, server: &str) -> perftest::PerftestOutput {
    let mut output = perftest::parse(client);
    if output.rows.is_empty() {
        let server = perftest::parse(server);
        output
            .errors
            .extend(server.errors.into_iter().map(|e| format!("server: {e}")));
    }
    output
}

fn say(progress: bool, text: &str) {
    if progress {
        eprintln!(
            "gpudoctor: gpudirect: {}",
            crate::text::sanitize::text(text)
        );
    }
}

/// Live: one loopback per target.
pub fn probe_live(options: &GdrOptions, targets: &[GdrTarget]) -> GdrProbe {
    if !options.run {
        return GdrProbe::NotRequested {
            why: NOT_REQUESTED.to_string(),
        };
    }
    if targets.is_empty() {
        return GdrProbe::NoTargets;
    }
    let path_var = std::env::var("PATH").ok();
    let binary = match find_binary(options.dir.as_deref(), path_var.as_deref(), COMMON_DIRS) {
        Ok(b) => b,
        Err(searched) => {
            say(
                options.progress,
                &format!("{BINARY} not found (looked in {})", searched.join(", ")),
            );
            return GdrProbe::BinaryMissing {
                searched,
                asked: options.dir.is_some(),
            };
        }
    };
    let mut runs = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let tcp_port = free_tcp_port().unwrap_or(BASE_TCP_PORT.saturating_add(i as u16));
        say(
            options.progress,
            &format!(
                "{} port {} with gpu {} ({}): loopback, timeout {} s",
                target.device,
                target.port,
                target.gpu.as_deref().unwrap_or("?"),
                target.path.as_deref().unwrap_or("?"),
                options.timeout.as_secs()
            ),
        );
        match run_one(
            &binary,
            target,
            tcp_port,
            options.timeout,
            options.library_dir.as_deref(),
        ) {
            Ok(run) => {
                let figure = run
                    .output
                    .at_size(MESSAGE_BYTES)
                    .map(|r| format!("{:.1} Gb/s", r.average_gbits))
                    .unwrap_or_else(|| "no result row".into());
                let how = run
                    .meta
                    .as_ref()
                    .map(|m| {
                        if m.timed_out {
                            "stopped at the timeout".to_string()
                        } else {
                            crate::process::describe_exit(m.exit)
                        }
                    })
                    .unwrap_or_default();
                say(
                    options.progress,
                    &format!("{}: {figure} ({how})", target.device),
                );
                runs.push(run);
            }
            Err(e) => {
                return GdrProbe::Unavailable {
                    origin: binary.display().to_string(),
                    message: format!("could not start: {e}"),
                };
            }
        }
        if crate::process::signals::interrupted().is_some() {
            break;
        }
    }
    GdrProbe::Runs(runs)
}

/// Replay: `.gpudoctor/gpudirect/<device>.log` with `<device>.json` beside it.
pub fn read_capture(fs: &RootedFs) -> GdrProbe {
    match fs.read_to_string(NOT_FOUND_JSON) {
        Ok(text) => {
            return match serde_json::from_str::<NotFound>(&text) {
                Ok(n) => GdrProbe::BinaryMissing {
                    searched: n.searched,
                    asked: n.asked,
                },
                Err(e) => GdrProbe::Unavailable {
                    origin: NOT_FOUND_JSON.to_string(),
                    message: format!("does not parse: {e}"),
                },
            };
        }
        Err(err) if err.is_missing() => {}
        Err(err) => {
            return GdrProbe::Unavailable {
                origin: NOT_FOUND_JSON.to_string(),
                message: err.to_string(),
            };
        }
    }
    let names = match fs.list_dir(GPUDIRECT_DIR, &|n| {
        n.ends_with(".log") && !n.ends_with(".server.log")
    }) {
        Ok(names) => names,
        Err(err) if err.is_missing() => {
            return GdrProbe::NotRequested {
                why: NOT_REQUESTED.to_string(),
            };
        }
        Err(err) => {
            return GdrProbe::Unavailable {
                origin: GPUDIRECT_DIR.to_string(),
                message: err.to_string(),
            };
        }
    };
    let mut runs = Vec::new();
    for name in names {
        let stem = name.trim_end_matches(".log").to_string();
        let rel = format!("{GPUDIRECT_DIR}/{name}");
        let text = match fs.read_to_string(&rel) {
            Ok(t) => t,
            Err(err) => {
                return GdrProbe::Unavailable {
                    origin: rel,
                    message: err.to_string(),
                };
            }
        };
        let meta_rel = format!("{GPUDIRECT_DIR}/{stem}.json");
        let meta = match fs.read_to_string(&meta_rel) {
            Ok(t) => match serde_json::from_str::<GdrMeta>(&t) {
                Ok(m) => Some(m),
                Err(e) => {
                    return GdrProbe::Unavailable {
                        origin: meta_rel,
                        message: format!("does not parse: {e}"),
                    };
                }
            },
            Err(err) if err.is_missing() => None,
            Err(err) => {
                return GdrProbe::Unavailable {
                    origin: meta_rel,
                    message: err.to_string(),
                };
            }
        };
        // The server's output, kept so that re-recording the capture carries it over.
        let server_rel = format!("{GPUDIRECT_DIR}/{stem}.server.log");
        let server = match fs.read_to_string(&server_rel) {
            Ok(t) => t,
            Err(err) if err.is_missing() => String::new(),
            Err(err) => {
                return GdrProbe::Unavailable {
                    origin: server_rel,
                    message: err.to_string(),
                };
            }
        };
        let port = meta.as_ref().map_or(1, |m| m.port);
        let device = meta.as_ref().map_or(stem.clone(), |m| m.device.clone());
        let output = outputs(&text, &server);
        runs.push(GdrRun {
            device,
            port,
            meta,
            output,
            origin: rel,
            transcript: Some((text, server)),
        });
    }
    if runs.is_empty() {
        return GdrProbe::NotRequested {
            why: NOT_REQUESTED.to_string(),
        };
    }
    GdrProbe::Runs(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real tables (tests/data/proc-net/README.md says how they were read).
    const TCP: &str = include_str!("../../tests/data/proc-net/tcp");
    const TCP6: &str = include_str!("../../tests/data/proc-net/tcp6");

    #[test]
    fn a_listening_port_is_found_in_the_kernels_tables_and_a_connected_one_is_not() {
        assert!(listens_on(TCP, 18615), "0.0.0.0:18615 listens");
        assert!(!listens_on(TCP, 18616), "18616 listens on IPv6 only");
        assert!(listens_on(TCP6, 18616));
        // 127.0.0.1:47766 (BA96) is the client end of a connection: not listening.
        assert!(!listens_on(TCP, 0xBA96));
        assert!(!listens_on(TCP, 18617));
    }

    #[test]
    fn a_damaged_table_says_nothing_listens() {
        for table in [
            "",
            "  sl  local_address rem_address   st\n",
            &TCP[..TCP.len() / 3],
            "\u{0}\u{ff}garbage\n   0: zz:48B7 00000000:0000 0A\n",
        ] {
            let _ = listens_on(table, 18615);
        }
        assert!(!listens_on(
            "  sl\n   0: 00000000:48B7 00000000:0000 0A\n",
            18615
        ));
    }

    #[test]
    fn arguments_and_environment_pick_the_hca_and_the_gpu() {
        let target = GdrTarget {
            device: "mlx5_3".into(),
            port: 1,
            gpu: Some("0000:5d:00.0".into()),
            gpu_uuid: Some("GPU-5d".into()),
            gpu_ordinal: Some(3),
            path: Some("PIX".into()),
            dmabuf: false,
        };
        assert_eq!(
            common_args(&target, 18620).join(" "),
            "-d mlx5_3 -i 1 -p 18620 -s 8388608 -F --report_gbits --use_cuda=0"
        );
        assert_eq!(cuda_env(&target)[1].1, "GPU-5d");
        // A dma-buf node: the option after --use_cuda, where perftest accepts it.
        let dmabuf = GdrTarget {
            dmabuf: true,
            ..target.clone()
        };
        assert!(
            common_args(&dmabuf, 18620)
                .join(" ")
                .ends_with("--use_cuda=0 --use_cuda_dmabuf")
        );
        let no_uuid = GdrTarget {
            gpu_uuid: None,
            ..target
        };
        assert_eq!(cuda_env(&no_uuid)[1].1, "3");
    }

    #[test]
    fn a_missing_binary_lists_where_it_was_looked_for() {
        // Hermetic: the install locations searched are the test's own empty directories, never
        // the machine's /usr/bin (which has ib_write_bw where perftest is installed).
        let dir = tempfile::tempdir().unwrap();
        let common = tempfile::tempdir().unwrap();
        let common_dir = common.path().to_str().unwrap();
        let err = find_binary(Some(dir.path()), Some("/nonexistent"), &[common_dir]).unwrap_err();
        assert_eq!(err, vec![dir.path().display().to_string()]);
        let err = find_binary(None, Some("/nonexistent-a"), &[common_dir]).unwrap_err();
        assert_eq!(
            err,
            vec!["PATH=/nonexistent-a".to_string(), common_dir.to_string()]
        );
        // Found in an install location after PATH, and in --perftest-dir's bin/.
        let bin = common.path().join(BINARY);
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            find_binary(None, Some("/nonexistent-a"), &[common_dir]),
            Ok(bin.clone())
        );
        assert!(COMMON_DIRS.contains(&"/usr/bin"), "the live probe's list");
    }

    #[test]
    fn the_host_drivers_directory_goes_first_on_perftests_library_path() {
        let dir = Path::new("/host/usr/lib/x86_64-linux-gnu");
        assert_eq!(library_path(dir, None), "/host/usr/lib/x86_64-linux-gnu");
        assert_eq!(
            library_path(dir, Some(std::ffi::OsStr::new(""))),
            "/host/usr/lib/x86_64-linux-gnu"
        );
        assert_eq!(
            library_path(dir, Some(std::ffi::OsStr::new("/opt/x"))),
            "/host/usr/lib/x86_64-linux-gnu:/opt/x"
        );
    }

    #[test]
    fn capture_outputs_are_read_with_their_records() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootedFs::new(dir.path());
        assert!(matches!(read_capture(&fs), GdrProbe::NotRequested { .. }));
        let d = dir.path().join(GPUDIRECT_DIR);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("mlx5_0.log"),
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 8388608    5000             391.2              390.7              0.005822\n",
        )
        .unwrap();
        std::fs::write(d.join("mlx5_0.server.log"), "server\n").unwrap();
        std::fs::write(
            d.join("mlx5_0.json"),
            r#"{"device": "mlx5_0", "port": 1, "gpu": "0000:18:00.0", "exit": {"code": 0}}"#,
        )
        .unwrap();
        let GdrProbe::Runs(runs) = read_capture(&fs) else {
            panic!("runs expected");
        };
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].output.largest().unwrap().average_gbits, 390.7);
        assert_eq!(
            runs[0].meta.as_ref().unwrap().gpu.as_deref(),
            Some("0000:18:00.0")
        );
        std::fs::write(d.join("mlx5_0.json"), r#"{"unknown": 1}"#).unwrap();
        assert!(matches!(read_capture(&fs), GdrProbe::Unavailable { .. }));
    }
}
