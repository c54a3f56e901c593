//! `gpudoctor pairs` end to end with stand-in launchers: shell scripts named `mpirun` and
//! `srun` that read their host arguments as the real ones take them (`--host a:8,b:8`,
//! `--nodelist=a,b`), record every call, and print for that pair a real two-node nccl-tests
//! output (tests/data/nccl/pairs/README.md) whose result rows the test scaled by the pair's
//! factor — or hang with children, as a stuck `mpirun` does with its daemons and ranks, or
//! hang only the first time (a bootstrap that timed out once), or leave a daemon behind that
//! left its process group (`setsid`) and outlived its parent.

mod common;
common::tests_mostly_wait!();

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a pair does.
#[derive(Clone, Copy)]
enum Pair {
    /// Rows scaled by this factor, over IB with GPUDirect RDMA.
    Ib(f64),
    /// Over TCP sockets, rows scaled by this factor.
    Socket(f64),
    /// Never finishes (two children sleeping, as mpirun's daemons and ranks would).
    Hang,
    /// Hangs the first time it runs (either way round), then as `Ib` with this factor.
    HangOnce(f64),
    /// As `Ib`, and leaves a daemon in a session of its own whose parent has exited, so it is
    /// re-parented to gpudoctor (the child subreaper); it sleeps the cluster's [`hang_token`] seconds.
    Orphan(f64),
}

use common::nccl_logs::{data, scaled_log};

/// A directory with `mpirun` and `srun` stand-ins and the per-pair outputs of `table`.
struct Cluster {
    dir: tempfile::TempDir,
    /// How long hung children and left daemons sleep ([`hang_token`]).
    token: String,
}

impl Cluster {
    fn new(hosts: &[&str], pair: impl Fn(&str, &str) -> Pair) -> Cluster {
        let dir = common::tempdir().unwrap();
        let token = hang_token();
        let table = dir.path().join("table");
        std::fs::create_dir_all(&table).unwrap();
        let ib = data("pairs/sglang-two-node-ib-gdrdma-channels-excerpt.log");
        let socket: String = data("real/nccl-tests-131-gtx-socket-info-excerpt.log")
            .lines()
            .filter(|l| l.contains("Socket"))
            .map(|l| format!("{l}\n"))
            .collect();
        for a in hosts {
            for b in hosts {
                if a == b {
                    continue;
                }
                let base = table.join(format!("{a}+{b}"));
                let behaviour = pair(a, b);
                // A hang once or a daemon left: marked beside an IB log.
                match behaviour {
                    Pair::HangOnce(_) => {
                        std::fs::write(base.with_extension("once"), &token).unwrap()
                    }
                    Pair::Orphan(_) => {
                        std::fs::write(base.with_extension("orphan"), &token).unwrap()
                    }
                    _ => {}
                }
                match behaviour {
                    Pair::Ib(f) | Pair::HangOnce(f) | Pair::Orphan(f) => {
                        std::fs::write(base.with_extension("log"), ib.clone() + &scaled_log(f))
                            .unwrap()
                    }
                    Pair::Socket(f) => {
                        std::fs::write(base.with_extension("log"), socket.clone() + &scaled_log(f))
                            .unwrap()
                    }
                    // How long the children sleep: unique to this run, so they can be found by
                    // their command line (inside a PID namespace their pids mean nothing here).
                    Pair::Hang => std::fs::write(base.with_extension("hang"), &token).unwrap(),
                }
            }
        }
        Cluster::with_launchers(dir, token)
    }

    /// Every pair as `Ib(factor)`, from one log (a table for 256 hosts would be 65,280 files).
    fn uniform(factor: f64) -> Cluster {
        let dir = common::tempdir().unwrap();
        let table = dir.path().join("table");
        std::fs::create_dir_all(&table).unwrap();
        let ib = data("pairs/sglang-two-node-ib-gdrdma-channels-excerpt.log");
        std::fs::write(table.join("any.log"), ib + &scaled_log(factor)).unwrap();
        Cluster::with_launchers(dir, hang_token())
    }

    /// Write the `mpirun` and `srun` stand-ins into `dir`, beside its `table`.
    fn with_launchers(dir: tempfile::TempDir, token: String) -> Cluster {
        // Both take the hosts as the real launchers do; `$HERE/calls` gets one line per call.
        let common_tail = r#"
a=${hosts%%,*}; b=${hosts#*,}; a=${a%%:*}; b=${b%%:*}
echo "$np|$per_node|$a|$b|$*" >> "$HERE/calls"
echo "$NCCL_DEBUG|$NCCL_IB_HCA" >> "$HERE/envs"
if [ -f "$HERE/table/$a+$b.hang" ]; then
  t=$(cat "$HERE/table/$a+$b.hang")
  sleep "$t" & echo $! >> "$HERE/pids"
  sleep "$t" & echo $! >> "$HERE/pids"
  wait
fi
if [ -f "$HERE/table/$a+$b.once" ]; then
  t=$(cat "$HERE/table/$a+$b.once")
  rm -f "$HERE/table/$a+$b.once" "$HERE/table/$b+$a.once"
  sleep "$t" & echo $! >> "$HERE/pids"
  wait
fi
log="$HERE/table/$a+$b.log"
[ -f "$log" ] || log="$HERE/table/any.log"
if [ -f "$HERE/table/$a+$b.orphan" ]; then
  # A daemon in its own session whose parent exits at once; it holds no pipe of the run's.
  t=$(cat "$HERE/table/$a+$b.orphan")
  ( setsid sh -c 'exec sleep "$0"' "$t" </dev/null >/dev/null 2>&1 & )
  cat "$log"
  exit 0
fi
echo start >> "$HERE/events"
if [ -f "$HERE/slow" ]; then sleep 1; fi
cat "$log" || exit 1
echo end >> "$HERE/events"
"#;
        // `mpirun --version` as Open MPI 4.1 prints it.
        let mpirun = format!(
            r#"#!/bin/sh
HERE=$(dirname "$0")
if [ "$1" = "--version" ]; then
  printf 'mpirun (Open MPI) 4.1.6\n\nReport bugs to http://www.open-mpi.org/community/help/\n'
  exit 0
fi
np=""; per_node=""; hosts=""
all="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np="$2"; shift;;
    --host|-H) hosts="$2"; shift;;
  esac
  shift
done
set -- $all
{common_tail}"#
        );
        let srun = format!(
            r#"#!/bin/sh
HERE=$(dirname "$0")
np=""; per_node=""; hosts=""
all="$*"
for arg in "$@"; do
  case "$arg" in
    --nodelist=*) hosts="${{arg#--nodelist=}}";;
    --ntasks-per-node=*) per_node="${{arg#--ntasks-per-node=}}";;
  esac
done
set -- $all
{common_tail}"#
        );
        for (name, body) in [("mpirun", mpirun), ("srun", srun)] {
            let path = dir.path().join(name);
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Cluster { dir, token }
    }

    fn launcher(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// `gpudoctor pairs --hosts HOSTS --launcher <this mpirun> EXTRA --format json`.
    fn mpirun(&self, hosts: &[&str], extra: &[&str]) -> (Output, Value) {
        let launcher = self.launcher("mpirun");
        let hosts = hosts.join(",");
        let mut args = vec!["--hosts", &hosts, "--launcher", &launcher];
        args.extend_from_slice(extra);
        pairs(&args, &[])
    }

    /// `np|per_node|a|b|argv` per call.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.path().join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

/// `gpudoctor pairs ARGS --format json` with a clean environment plus `env`.
fn pairs(args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
    command
        .arg("pairs")
        .arg("--no-singles")
        .args(args)
        .args(["--format", "json", "--nccl-tests-dir"])
        .arg(nccl_tests_dir())
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("gpudoctor runs");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, json)
}

/// An `all_reduce_perf` that exists (the launcher is given its path; it never runs it).
fn nccl_tests_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = common::tempdir().unwrap();
        let path = dir.path().join("all_reduce_perf");
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    });
    dir.path().to_path_buf()
}

fn suspects(json: &Value) -> Vec<(String, Vec<String>)> {
    json["suspects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().to_string(),
                s["hosts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

/// `300.<pid of this test process><n>`: seconds a hung pair's children sleep, unique to one
/// cluster (tests run side by side, and each looks for its own leftovers by this). Fixed width,
/// so no token is part of another.
fn hang_token() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("300.{:07}{n:03}", std::process::id())
}

const EIGHT: [&str; 8] = ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"];

/// Healthy pairs differ a little, as real ones do (within 3 %).
fn jitter(a: &str, b: &str) -> f64 {
    let n: u32 = a.bytes().chain(b.bytes()).map(u32::from).sum();
    0.97 + f64::from(n % 7) * 0.01
}

#[test]
fn one_slow_node_among_eight_is_named_within_three_rounds() {
    let cluster = Cluster::new(&EIGHT, |a, b| {
        if a == "n6" || b == "n6" {
            Pair::Ib(0.45)
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    // --parallel 3: round one's four pairs run as three, then one (each run takes 1 s, so the three overlap).
    std::fs::write(cluster.dir.path().join("slow"), "").unwrap();
    let (out, json) = cluster.mpirun(&EIGHT, &["--parallel", "3"]);
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    assert_eq!(
        suspects(&json),
        vec![("node".to_string(), vec!["n6".to_string()])]
    );
    let events = std::fs::read_to_string(cluster.dir.path().join("events")).unwrap();
    let (mut running, mut most) = (0, 0);
    for e in events.lines() {
        running += if e == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(most, 3, "pairs at once: {events}");
    assert!(json["rounds"].as_u64().unwrap() <= 3, "{json:#}");
    let evidence = json["suspects"][0]["evidence"].to_string();
    assert!(evidence.contains("slow"), "{evidence}");
    // mpirun got 16 ranks on two hosts of 8 slots, NCCL_DEBUG=INFO exported, one GPU per rank.
    let calls = cluster.calls();
    assert!(!calls.is_empty());
    for call in &calls {
        let fields: Vec<&str> = call.splitn(5, '|').collect();
        assert_eq!(fields[0], "16", "{call}");
        assert!(
            fields[4].contains(&format!("--host {}:8,{}:8", fields[2], fields[3])),
            "{call}"
        );
        assert!(fields[4].contains("-x NCCL_DEBUG=INFO"), "{call}");
        assert!(fields[4].ends_with("-g 1 -c 1"), "{call}");
    }
    // Round one ran each host once; the IB figure and transport are reported per pair.
    let first: Vec<&Value> = json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["round"] == 1)
        .collect();
    assert_eq!(first.len(), 4);
    assert!(
        first.iter().all(|p| p["transport"] == "IB/GDRDMA"),
        "{json:#}"
    );
    let fast = first.iter().find(|p| p["status"] == "fast").unwrap();
    let busbw = fast["busbw_gbps"].as_f64().unwrap();
    assert!((150.0..=160.0).contains(&busbw), "{busbw}");
}

#[test]
fn one_slow_link_is_named_with_its_two_hosts_through_srun_and_a_slurm_list() {
    let hosts = [
        "gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "gpu06", "gpu07", "gpu08",
    ];
    let cluster = Cluster::new(&hosts, |a, b| {
        let pair = if a < b { (a, b) } else { (b, a) };
        // Round one pairs across the halves (gpu03 with gpu07): the link is run.
        if pair == ("gpu03", "gpu07") {
            Pair::Ib(0.5)
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    let (out, json) = pairs(
        &[
            "--launcher",
            &cluster.launcher("srun"),
            "--gpus-per-node",
            "4",
            "--env",
            "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1",
        ],
        &[
            ("SLURM_JOB_ID", "4242"),
            ("SLURM_JOB_NODELIST", "gpu[01-06,07-08]"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    assert_eq!(
        suspects(&json),
        vec![(
            "link".to_string(),
            vec!["gpu03".to_string(), "gpu07".to_string()]
        )]
    );
    assert_eq!(json["launcher"], "srun");
    for call in cluster.calls() {
        assert!(
            call.contains("--nodes=2") && call.contains("--export=ALL "),
            "{call}"
        );
        assert_eq!(call.split('|').nth(1), Some("4"), "{call}");
    }
    // The values reach srun whole, commas included (srun would split `--export=ALL,K=a,b`).
    let envs = std::fs::read_to_string(cluster.dir.path().join("envs")).unwrap();
    assert!(
        envs.lines().all(|l| l == "INFO|mlx5_0:1,mlx5_1:1"),
        "{envs}"
    );
    // Found, both hosts cleared, confirmed by a second run.
    assert_eq!(json["rounds"], 3, "{json:#}");
}

#[test]
fn a_hanging_pair_costs_its_timeout_and_leaves_no_process() {
    let hosts = ["h1", "h2", "h3", "h4"];
    let cluster = Cluster::new(&hosts, |a, b| {
        let pair = if a < b { (a, b) } else { (b, a) };
        // Paired in round one (h1 with h3, h2 with h4).
        if pair == ("h1", "h3") {
            Pair::Hang
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    let started = Instant::now();
    let (out, json) = cluster.mpirun(&hosts, &["--timeout", "2"]);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(2), "{took:?}");
    let hung: Vec<&Value> = json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] == "hung")
        .collect();
    // Hung in round one and again when run to confirm: two timeouts.
    assert_eq!(hung.len(), 2, "{json:#}");
    assert!(took >= Duration::from_secs(4), "{took:?}");
    assert!(hung[0]["detail"].as_str().unwrap().contains("timeout"));
    // Hung only together: each is fine with someone else, so it is the link.
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    assert_eq!(
        suspects(&json),
        vec![("link".to_string(), vec!["h1".to_string(), "h3".to_string()])]
    );
    assert_eq!(cluster.pids().len(), 4, "the stand-in started its children");
    let token = cluster.token.clone();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&token))
        .collect();
    assert!(left.is_empty(), "outlived the run: {left:?}");
}

#[test]
fn a_node_that_falls_back_to_sockets_is_named_as_such() {
    let hosts = ["s1", "s2", "s3", "s4"];
    let cluster = Cluster::new(&hosts, |a, b| {
        if a == "s3" || b == "s3" {
            Pair::Socket(0.1)
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    let (out, json) = cluster.mpirun(&hosts, &[]);
    assert_eq!(out.status.code(), Some(1), "{json:#}");
    assert_eq!(
        suspects(&json),
        vec![("node".to_string(), vec!["s3".to_string()])]
    );
    let socket = json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["transport"] == "Socket")
        .expect("a socket pair");
    assert!(
        socket["detail"].as_str().unwrap().contains("sockets"),
        "{socket}"
    );
}

#[test]
fn all_fast_exits_zero_after_one_round_with_an_odd_host_count() {
    let hosts = ["o1", "o2", "o3", "o4", "o5"];
    let cluster = Cluster::new(&hosts, |a, b| Pair::Ib(jitter(a, b)));
    let (out, json) = cluster.mpirun(&hosts, &[]);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(json["rounds"], 1);
    let pairs = json["pairs"].as_array().unwrap();
    assert_eq!(
        pairs.len(),
        3,
        "two pairs and the odd host with the first: {json:#}"
    );
    assert!(
        pairs
            .iter()
            .any(|p| p["hosts"] == serde_json::json!(["o5", "o1"]))
    );
    assert!(json["verdict"].as_str().unwrap().starts_with("no suspect"));
    // The table says the same.
    let text = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args([
            "pairs",
            "--no-singles",
            "--hosts",
            &hosts.join(","),
            "--launcher",
        ])
        .arg(cluster.launcher("mpirun"))
        .arg("--nccl-tests-dir")
        .arg(nccl_tests_dir())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("o5 + o1") && stdout.contains("no suspect"),
        "{stdout}"
    );
    // The MPI behind mpirun, from its `--version`, with the results.
    assert!(
        stdout.contains("note: launcher: mpirun (Open MPI) 4.1.6"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&text.stderr).contains("gpudoctor: pairs: round 1"));
}

#[test]
fn usage_errors_say_what_to_give() {
    let (out, _) = {
        let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
            .args(["pairs"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        (out, ())
    };
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--hosts"));
    let one = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(["pairs", "--hosts", "only"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&one.stderr).contains("at least two"));
}

/// An mpirun that is MPICH's Hydra would fail every pair on `--host` and `-x`: refused before
/// any pair runs, saying why.
#[test]
fn an_mpirun_that_is_not_open_mpi_is_refused_before_any_pair() {
    let dir = common::tempdir().unwrap();
    let path = dir.path().join("mpirun");
    std::fs::write(
        &path,
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then printf 'HYDRA build details:\\n    Version:                                 4.0.2\\n'; exit 0; fi\ntouch \"$(dirname \"$0\")/ran\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
        .args(["pairs", "--hosts", "a,b", "--launcher"])
        .arg(&path)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not Open MPI's") && stderr.contains("HYDRA"),
        "{stderr}"
    );
    assert!(!dir.path().join("ran").exists(), "a pair ran");
}

/// A hostfile that is a FIFO nobody writes, or a directory, is a usage error naming it within
/// the read's bound, never a hang.
#[test]
fn a_hostfile_that_cannot_be_read_is_named() {
    let dir = common::tempdir().unwrap();
    let fifo = dir.path().join("hosts.fifo");
    common::make_fifo(&fifo);
    for path in [fifo.as_path(), dir.path()] {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
            .args(["pairs", "--hostfile"])
            .arg(path)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--hostfile"), "{stderr}");
    }
}

/// The processes alive (not zombies) whose command line holds `token`.
fn alive_with_token(token: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            !stat.is_empty() && state != Some('Z') && state != Some('X')
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(token))
        .collect()
}

/// Issue 41: 128 pairs side by side (`--parallel 128`, the default) of a launcher that only
/// prints its log all finish well within their 20 s timeout, and none is called hung. The run
/// loops used to spin once a run's pipes closed and starve each other: this took 75 s to
/// 5 min, and 41 to 130 healthy pairs were declared hung.
#[test]
fn a_hundred_and_twenty_eight_pairs_side_by_side_finish_within_their_timeout() {
    let names: Vec<String> = (1..=256).map(|i| format!("h{i:03}")).collect();
    let hosts: Vec<&str> = names.iter().map(String::as_str).collect();
    let cluster = Cluster::uniform(1.0);
    let started = Instant::now();
    let (out, json) = cluster.mpirun(&hosts, &["--timeout", "20"]);
    let took = started.elapsed();
    let pairs = json["pairs"].as_array().unwrap();
    let hung = pairs.iter().filter(|p| p["status"] == "hung").count();
    assert_eq!(hung, 0, "{}", json["verdict"]);
    assert_eq!(pairs.len(), 128, "{}", json["verdict"]);
    assert!(pairs.iter().all(|p| p["status"] == "fast"));
    assert_eq!(out.status.code(), Some(0), "{}", json["verdict"]);
    assert!(
        json["verdict"]
            .as_str()
            .unwrap()
            .starts_with("no suspect: all 128 pair(s) fast"),
        "{}",
        json["verdict"]
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// A pair that hung once, between two hosts fast elsewhere, and was fast when run again
/// convicts nothing; but the verdict counts it as what it was, never among the fast ones.
#[test]
fn a_pair_that_hung_once_is_not_counted_among_the_fast() {
    let hosts = ["g1", "g2", "g3", "g4"];
    let cluster = Cluster::new(&hosts, |a, b| {
        let pair = if a < b { (a, b) } else { (b, a) };
        // Paired in round one (g1 with g3), run again in round three to confirm.
        if pair == ("g1", "g3") {
            Pair::HangOnce(jitter(a, b))
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    let (out, json) = cluster.mpirun(&hosts, &["--timeout", "2"]);
    let statuses: Vec<&str> = json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "hung").count(),
        1,
        "{json:#}"
    );
    assert_eq!(statuses.len(), 5, "{json:#}");
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    let verdict = json["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("no suspect: 4 of 5 pair(s) fast")
            && verdict.ends_with("; 1 hung, each fast when run again"),
        "{verdict}"
    );
    let left = alive_with_token(&cluster.token);
    assert!(left.is_empty(), "outlived the run: {left:?}");
}

/// Without a PID namespace several pairs run side by side as process groups. A daemon one
/// pair's launcher left in a session of its own, its parent gone (re-parented to gpudoctor), is
/// killed when that pair ends and reported with it, while the others still run; not by
/// whichever pair happens to end last, nor only when gpudoctor exits.
#[test]
fn a_daemon_one_pair_left_is_killed_and_reported_with_that_pair() {
    let hosts = ["d1", "d2", "d3", "d4"];
    let cluster = Cluster::new(&hosts, |a, b| {
        let pair = if a < b { (a, b) } else { (b, a) };
        if pair == ("d1", "d3") {
            Pair::Orphan(jitter(a, b))
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    // The other pairs take a second: still running when the daemon's pair ends.
    std::fs::write(cluster.dir.path().join("slow"), "").unwrap();
    let launcher = cluster.launcher("mpirun");
    let (out, json) = pairs(
        &["--hosts", &hosts.join(","), "--launcher", &launcher],
        &[("GPUDOCTOR_CONTAINMENT", "group")],
    );
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    let token = cluster.token.clone();
    let pairs = json["pairs"].as_array().unwrap();
    let killed_in = |p: &Value| {
        p["killed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k.as_str().unwrap().contains(&token))
    };
    let with_daemon: Vec<&Value> = pairs
        .iter()
        .filter(|p| p["hosts"] == serde_json::json!(["d1", "d3"]))
        .collect();
    assert_eq!(with_daemon.len(), 1, "{json:#}");
    assert!(killed_in(with_daemon[0]), "its own pair: {json:#}");
    assert!(
        pairs
            .iter()
            .filter(|p| p["hosts"] != serde_json::json!(["d1", "d3"]))
            .all(|p| !killed_in(p)),
        "another pair's: {json:#}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("killed before exiting"), "{stderr}");
    let left = alive_with_token(&cluster.token);
    assert!(left.is_empty(), "outlived the run: {left:?}");
}

#[test]
fn every_pair_below_the_floor_still_names_the_one_far_below_the_others() {
    // hgx-a100-40gb's multi-node floor is 172.8 GB/s; healthy pairs here reach about 155.
    let cluster = Cluster::new(&EIGHT, |a, b| {
        if a == "n6" || b == "n6" {
            Pair::Ib(0.45)
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    let (out, json) = cluster.mpirun(&EIGHT, &["--profile", "hgx-a100-40gb"]);
    assert_eq!(out.status.code(), Some(1), "{json}");
    assert_eq!(
        suspects(&json),
        vec![("node".to_string(), vec!["n6".to_string()])]
    );
    let verdict = json["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("below the profile's floor 172.8"),
        "{verdict}"
    );
    assert_eq!(json["threshold"]["all_below_floor"], true);
    // Every pair alike below the floor: nobody is named, and it is not a pass.
    let cluster = Cluster::uniform(1.0);
    let (out, json) = cluster.mpirun(&EIGHT, &["--profile", "hgx-a100-40gb"]);
    assert_eq!(out.status.code(), Some(3), "{json}");
    assert!(
        json["verdict"].as_str().unwrap().contains("floor 172.8"),
        "{json}"
    );
}

#[test]
fn all_links_finds_a_slow_link_round_one_never_pairs() {
    // Round one pairs n1-n5, n2-n6, n3-n7, n4-n8: n3-n4 never meets there.
    let slow_link = |a: &str, b: &str| matches!((a, b), ("n3", "n4") | ("n4", "n3"));
    let cluster = Cluster::new(&EIGHT, |a, b| {
        if slow_link(a, b) {
            Pair::Ib(0.5)
        } else {
            Pair::Ib(jitter(a, b))
        }
    });
    let (out, json) = cluster.mpirun(&EIGHT, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "round one alone passes it: {json}"
    );
    let (out, json) = cluster.mpirun(&EIGHT, &["--all-links"]);
    assert_eq!(out.status.code(), Some(1), "{json}");
    assert_eq!(
        suspects(&json),
        vec![("link".to_string(), vec!["n3".to_string(), "n4".to_string()])]
    );
    // 28 pairs once, and the slow one again.
    assert_eq!(json["pairs"].as_array().unwrap().len(), 29, "{json}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--all-links: 28 pair(s) in 7 wave(s)"),
        "{stderr}"
    );
}
