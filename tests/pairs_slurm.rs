//! `gpudoctor pairs` inside a real Slurm allocation (Debian's `slurm-wlm` 22.05 and `munge`):
//! a one-machine cluster made for the test — its own munged (key, socket), `slurmctld` and four
//! `slurmd -N sn1..sn4` on ports of their own, configuration in a temporary directory
//! (`SLURM_CONF`) — and `salloc -N4` running gpudoctor, which finds the hosts in
//! `SLURM_JOB_NODELIST` and runs `srun` per pair. Inside the allocation srun inherits
//! `SLURM_NTASKS=4` (the whole job): each pair must still get one task per node on its two nodes.
//!
//! Each node has one CPU, as a GPU node has its GPUs: a step asking for more tasks than its nodes
//! hold is refused, as it is on a real cluster.
//!
//! The benchmark is a shell stand-in: task 0 expands the step's nodes with the real
//! `scontrol show hostnames` and prints the slow or the fast table (tests/common/nccl_logs.rs).
//!
//! Root only (slurmd runs steps as the job's user); `.ci/run` installs the packages, and under
//! `CI=true` a missing one fails, never skips.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::nccl_logs::{data, scaled_log};
use serde_json::Value;

const NODES: [&str; 4] = ["sn1", "sn2", "sn3", "sn4"];

fn tool(path: &str, package: &str) -> Option<PathBuf> {
    common::debian_tool(path, package)
}

/// The daemons of one test cluster, stopped (by their pids) when dropped.
struct Slurm {
    dir: tempfile::TempDir,
    conf: PathBuf,
    pids: Vec<PathBuf>,
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for pidfile in &self.pids {
            if let Some(pid) = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                unsafe { libc::kill(pid, libc::SIGTERM) };
                // Gone before the directory it logs into is removed (5 s at most).
                let start = Instant::now();
                while unsafe { libc::kill(pid, 0) } == 0 && start.elapsed() < Duration::from_secs(5)
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}

impl Slurm {
    fn start() -> Option<Slurm> {
        let munged = tool("/usr/sbin/munged", "munge")?;
        let slurmctld = tool("/usr/sbin/slurmctld", "slurm-wlm")?;
        let slurmd = tool("/usr/sbin/slurmd", "slurm-wlm")?;
        tool("/usr/bin/salloc", "slurm-client")?;
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: slurmd runs job steps as their user; skipped");
            return None;
        }
        let dir = common::tempdir().unwrap();
        let d = dir.path();
        for sub in ["state", "spool", "log", "munge"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::set_permissions(d.join("munge"), std::fs::Permissions::from_mode(0o700)).unwrap();
        // munged's own key and socket, so nothing of the machine's munge is used or changed.
        let key: Vec<u8> = (0..1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ std::process::id() as u8)
            .collect();
        let key_file = d.join("munge/munge.key");
        std::fs::write(&key_file, key).unwrap();
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o400)).unwrap();
        let socket = d.join("munge/munge.socket");
        let mut pids = vec![d.join("munge/munged.pid")];
        let out = Command::new(&munged)
            .arg("--force")
            .arg("--key-file")
            .arg(&key_file)
            .arg("--socket")
            .arg(&socket)
            .arg("--pid-file")
            .arg(&pids[0])
            .arg("--log-file")
            .arg(d.join("munge/munged.log"))
            .arg("--seed-file")
            .arg(d.join("munge/munged.seed"))
            .output()
            .unwrap();
        assert!(out.status.success(), "munged: {}", text(&out));
        // Ports of this run: tests of several checkouts may run side by side.
        let base = 20_000 + (std::process::id() % 20_000) as u16;
        let conf = d.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=gd{base}\nSlurmctldHost=localhost\nSlurmUser=root\nSlurmdUser=root\n\
                 SlurmctldPort={base}\nSlurmdPort={}\nAuthType=auth/munge\nAuthInfo=socket={}\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\n\
                 SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd-%n.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 SchedulerType=sched/builtin\nSelectType=select/linear\nMpiDefault=none\n\
                 ReturnToService=2\nSlurmdParameters=config_overrides\n\
                 NodeName=sn[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{}-{}] CPUs=1 State=UNKNOWN\n\
                 PartitionName=debug Nodes=sn[1-4] Default=YES MaxTime=INFINITE State=UP\n",
                base + 1,
                socket.display(),
                base + 2,
                base + 5,
                d = d.display()
            ),
        )
        .unwrap();
        pids.push(d.join("slurmctld.pid"));
        let mut slurm = Slurm { dir, conf, pids };
        let started = Command::new(&slurmctld)
            .arg("-i")
            .env("SLURM_CONF", &slurm.conf)
            .output()
            .unwrap();
        assert!(started.status.success(), "slurmctld: {}", text(&started));
        for node in NODES {
            slurm
                .pids
                .push(slurm.dir.path().join(format!("slurmd-{node}.pid")));
            let out = Command::new(&slurmd)
                .args(["-N", node])
                .env("SLURM_CONF", &slurm.conf)
                .output()
                .unwrap();
            assert!(out.status.success(), "slurmd -N {node}: {}", text(&out));
        }
        // Up when sinfo lists the four nodes idle.
        let start = Instant::now();
        loop {
            let out = Command::new("sinfo")
                .args(["-h", "-o", "%D %t"])
                .env("SLURM_CONF", &slurm.conf)
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).trim() == "4 idle" {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the test cluster did not come up: {}\n{}",
                text(&out),
                std::fs::read_to_string(slurm.dir.path().join("log/slurmctld.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        Some(slurm)
    }

    /// The stand-in benchmark and its two tables; `slow` is the node slow in every run.
    fn bench(&self) -> PathBuf {
        let bin = self.dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let ib = data("pairs/sglang-two-node-ib-gdrdma-channels-excerpt.log");
        std::fs::write(bin.join("fast.log"), ib.clone() + &scaled_log(1.0)).unwrap();
        std::fs::write(bin.join("slow.log"), ib + &scaled_log(0.45)).unwrap();
        let script = "#!/bin/sh\n[ \"$SLURM_PROCID\" = 0 ] || exit 0\n\
            here=$(dirname \"$0\")\n\
            for h in $(scontrol show hostnames \"$SLURM_STEP_NODELIST\"); do\n\
              [ \"$h\" = \"$SLOW_NODE\" ] && exec cat \"$here/slow.log\"\n\
            done\n\
            exec cat \"$here/fast.log\"\n";
        let path = bin.join("all_reduce_perf");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    /// `salloc -N4 --ntasks-per-node=1 gpudoctor pairs ARGS --format json`.
    fn salloc_pairs(&self, bin: &Path, args: &[&str]) -> (Output, Value) {
        let out = Command::new("salloc")
            .args(["-N4", "--ntasks-per-node=1", "--quiet"])
            .arg(env!("CARGO_BIN_EXE_gpudoctor"))
            .args([
                "pairs",
                "--gpus-per-node",
                "1",
                "--timeout",
                "60",
                "--format",
                "json",
            ])
            .arg("--nccl-tests-dir")
            .arg(bin)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin:/usr/sbin")
            .env("SLURM_CONF", &self.conf)
            .env("SLOW_NODE", "sn3")
            .output()
            .unwrap();
        let json = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out)));
        (out, json)
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn srun_pairs_inside_an_allocation_of_the_whole_job_find_the_slow_node() {
    let Some(slurm) = Slurm::start() else {
        return;
    };
    let bin = slurm.bench();
    let (out, json) = slurm.salloc_pairs(&bin, &["--no-singles"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(json["launcher"], "srun", "{json}");
    assert_eq!(json["suspects"][0]["kind"], "node", "{json}");
    assert_eq!(json["suspects"][0]["hosts"][0], "sn3", "{json}");
    // Each pair ran one task on each of its two nodes, whatever SLURM_NTASKS said.
    for pair in json["pairs"].as_array().unwrap() {
        let command: Vec<&str> = pair["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert!(command.contains(&"--ntasks=2"), "{command:?}");
        assert_ne!(pair["status"], "failed", "{json}");
    }
}
