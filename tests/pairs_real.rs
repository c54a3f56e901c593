//! `gpudoctor pairs` on Debian's real Open MPI 4.1 (`openmpi-bin`, `libopenmpi-dev`): the real
//! `mpirun`, its real daemons (`orted`) and an MPI program built here with the real `mpicc` as
//! the stand-in `all_reduce_perf`. It calls `MPI_Init` (which creates Open MPI's session
//! directories, where side-by-side launchers collided), gathers which "host" each rank runs on,
//! and rank 0 prints the nccl-tests table chosen for that set of hosts (the real two-node table
//! with its rows scaled, as tests/pairs.rs's stand-ins print it).
//!
//! The hosts are reached as the MPI Operator reaches its workers: Open MPI's rsh launcher runs
//! an agent (`--mca plm_rsh_agent`) with the host and the daemon's command line, and the agent
//! runs it "there" (the operator's `kubexec.sh`: `kubectl exec ${POD_NAME} -- /bin/sh -c "$*"`);
//! here "there" is this machine with `FAKE_HOST` set to the host's name. Ranks of two "hosts"
//! share this machine, so the test keeps Open MPI's byte transfer to TCP (`OMPI_MCA_btl=
//! self,tcp`: its shared-memory transport between ranks it believes are on different nodes
//! crashed here). Each "host" has a host name of its own, as a Pod has: the agent runs the
//! daemon in its own UTS namespace named after the host (as root; `unshare --uts`). With this
//! machine's one name for every daemon, ORTE at times lost one of a launcher's two daemons
//! ("ORTE does not know how to route a message to the specified daemon", about one run in
//! three, `routed=direct` or not).
//!
//! `.ci/run` installs both packages; under `CI=true` a missing one fails, never skips.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::nccl_logs::{data, scaled_log};
use serde_json::Value;

/// The stand-in `all_reduce_perf`: MPI_Init, gather `FAKE_HOST` of every rank, and rank 0
/// prints `$GPUDOCTOR_FAKE_TABLE/<hosts joined by +>.log` (`.nic.log` first when NCCL is kept
/// off NVLink and shared memory: `NCCL_P2P_DISABLE=1`), else `any.log`.
const FAKE_ALL_REDUCE: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define NAME 256
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char me[NAME] = {0};
  const char *host = getenv("FAKE_HOST");
  snprintf(me, NAME, "%s", host ? host : "unknown");
  char *all = calloc((size_t)size, NAME);
  MPI_Gather(me, NAME, MPI_CHAR, all, NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  int status = 0;
  if (rank == 0) {
    char key[8192] = {0};
    for (int i = 0; i < size; i++) {
      const char *h = all + (size_t)i * NAME;
      int seen = 0;
      for (int j = 0; j < i; j++) seen |= strcmp(h, all + (size_t)j * NAME) == 0;
      if (seen) continue;
      if (key[0]) strncat(key, "+", sizeof key - strlen(key) - 1);
      strncat(key, h, sizeof key - strlen(key) - 1);
    }
    const char *dir = getenv("GPUDOCTOR_FAKE_TABLE");
    const char *p2p = getenv("NCCL_P2P_DISABLE");
    char path[16384];
    FILE *f = NULL;
    if (dir && p2p && strcmp(p2p, "1") == 0) {
      snprintf(path, sizeof path, "%s/%s.nic.log", dir, key);
      f = fopen(path, "r");
    }
    if (!f && dir) { snprintf(path, sizeof path, "%s/%s.log", dir, key); f = fopen(path, "r"); }
    if (!f && dir) { snprintf(path, sizeof path, "%s/any.log", dir); f = fopen(path, "r"); }
    if (!f) { fprintf(stderr, "no table for %s\n", key); status = 1; }
    else {
      char buf[65536]; size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
      fclose(f);
      fflush(stdout);
    }
  }
  MPI_Finalize();
  return status;
}
"#;

/// The MPI Operator's `kubexec.sh` with `kubectl exec` replaced by a local shell for the host.
const AGENT: &str = r#"#!/bin/sh
host=$1
export host
shift
cmd="$*"
if unshare --uts true 2>/dev/null; then
  exec unshare --uts /bin/sh -c 'hostname "$1" && FAKE_HOST="$1" exec /bin/sh -c "$2"' agent "$host" "$cmd"
fi
exec env FAKE_HOST="$host" /bin/sh -c "$cmd"
"#;

fn program(name: &str, package: &str) -> Option<PathBuf> {
    common::debian_tool(&format!("/usr/bin/{name}"), package)
}

/// A cluster of "hosts" on this machine: the compiled stand-in, the agent and the table.
struct Cluster {
    dir: tempfile::TempDir,
    mpirun: PathBuf,
}

impl Cluster {
    fn new() -> Option<Cluster> {
        let mpirun = program("mpirun", "openmpi-bin")?;
        let mpicc = program("mpicc", "libopenmpi-dev")?;
        let dir = common::tempdir().unwrap();
        let source = dir.path().join("fake.c");
        std::fs::write(&source, FAKE_ALL_REDUCE).unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        let out = Command::new(&mpicc)
            .arg("-o")
            .arg(dir.path().join("bin/all_reduce_perf"))
            .arg(&source)
            .output()
            .unwrap();
        assert!(out.status.success(), "mpicc: {}", text(&out));
        let agent = dir.path().join("kubexec.sh");
        std::fs::write(&agent, AGENT).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(dir.path().join("table")).unwrap();
        Some(Cluster { dir, mpirun })
    }

    /// Every set of hosts without its own table runs at `factor`.
    fn uniform(&self, factor: f64) {
        self.table("any", factor);
    }

    /// `table/<key>.log`: the two-node output at `factor`.
    fn table(&self, key: &str, factor: f64) {
        let ib = data("pairs/sglang-two-node-ib-gdrdma-channels-excerpt.log");
        std::fs::write(
            self.dir.path().join("table").join(format!("{key}.log")),
            ib + &scaled_log(factor),
        )
        .unwrap();
    }

    fn agent(&self) -> String {
        self.dir.path().join("kubexec.sh").display().to_string()
    }

    /// `gpudoctor pairs --launcher <mpirun> --gpus-per-node 1 ARGS --format json`, the
    /// environment cleared but for what Open MPI and the stand-in need.
    fn pairs(&self, launcher: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
        command
            .arg("pairs")
            .arg("--launcher")
            .arg(launcher)
            .args([
                "--gpus-per-node",
                "1",
                "--timeout",
                "60",
                "--format",
                "json",
            ])
            .arg("--nccl-tests-dir")
            .arg(self.dir.path().join("bin"))
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.dir.path())
            .env("OMPI_MCA_btl", "self,tcp")
            .env("GPUDOCTOR_FAKE_TABLE", self.dir.path().join("table"));
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().expect("gpudoctor runs");
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

fn as_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

const EIGHT: &str = "n1,n2,n3,n4,n5,n6,n7,n8";

fn statuses(json: &Value) -> Vec<String> {
    json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn eight_healthy_hosts_pass_every_time_with_launchers_side_by_side() {
    let Some(cluster) = Cluster::new() else {
        return;
    };
    cluster.uniform(1.0);
    let agent = cluster.agent();
    let mut args = vec!["--hosts", EIGHT, "--no-singles"];
    let launcher_args = if as_root() {
        format!("--allow-run-as-root --mca plm_rsh_agent {agent}")
    } else {
        format!("--mca plm_rsh_agent {agent}")
    };
    args.extend(["--launcher-args", &launcher_args]);
    // Round one runs four mpiruns side by side, each in a PID namespace of its own as root:
    // the same pid in each, which without a TMPDIR per launcher gave them one session directory.
    for run in 0..3 {
        // Debian's alternatives name, once: accepted because `--version` says Open MPI.
        let launcher = if run == 1 {
            PathBuf::from("/usr/bin/mpirun.openmpi")
        } else {
            cluster.mpirun.clone()
        };
        let launcher = if launcher.exists() {
            launcher
        } else {
            cluster.mpirun.clone()
        };
        let (out, json) = cluster.pairs(&launcher, &args, &[]);
        assert_eq!(out.status.code(), Some(0), "run {run}: {}", text(&out));
        assert_eq!(statuses(&json), vec!["fast"; 4], "run {run}: {json}");
        assert_eq!(json["rounds"], 1);
    }
}

#[test]
fn a_slow_node_is_found_through_the_real_launcher() {
    let Some(cluster) = Cluster::new() else {
        return;
    };
    cluster.uniform(1.0);
    for other in ["n1", "n2", "n3", "n4", "n5", "n7", "n8"] {
        let (a, b) = if other < "n6" {
            (other, "n6")
        } else {
            ("n6", other)
        };
        // Rank order follows --host order: whichever host was named first.
        cluster.table(&format!("{a}+{b}"), 0.45);
        cluster.table(&format!("{b}+{a}"), 0.45);
    }
    let launcher_args = format!(
        "{}--mca plm_rsh_agent {}",
        if as_root() {
            "--allow-run-as-root "
        } else {
            ""
        },
        cluster.agent()
    );
    let (out, json) = cluster.pairs(
        &cluster.mpirun,
        &[
            "--hosts",
            EIGHT,
            "--no-singles",
            "--launcher-args",
            &launcher_args,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(json["suspects"][0]["kind"], "node", "{json}");
    assert_eq!(json["suspects"][0]["hosts"][0], "n6", "{json}");
}

#[test]
fn as_root_without_the_flag_open_mpi_refuses_and_one_round_says_the_fix() {
    let Some(cluster) = Cluster::new() else {
        return;
    };
    if !as_root() {
        eprintln!("not root: Open MPI's root refusal cannot be seen; skipped");
        return;
    }
    cluster.uniform(1.0);
    let launcher_args = format!("--mca plm_rsh_agent {}", cluster.agent());
    let (out, json) = cluster.pairs(
        &cluster.mpirun,
        &[
            "--hosts",
            EIGHT,
            "--no-singles",
            "--launcher-args",
            &launcher_args,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(json["rounds"], 1, "{json}");
    let verdict = json["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("Open MPI refuses to run as root")
            && verdict.contains("--allow-run-as-root"),
        "{verdict}"
    );
    let said = json["pairs"][0]["launcher_said"].as_array().unwrap();
    assert!(
        said.iter().any(|l| l
            .as_str()
            .unwrap()
            .contains("mpirun has detected an attempt to run as root.")),
        "{json}"
    );
    // With Open MPI's own variables instead of the flag, the same run passes.
    let (out, _) = cluster.pairs(
        &cluster.mpirun,
        &[
            "--hosts",
            "n1,n2,n3,n4",
            "--no-singles",
            "--launcher-args",
            &launcher_args,
        ],
        &[
            ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The table shows the first command shell-quoted, and it reads back as the same words.
    let out = {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gpudoctor"));
        command
            .args([
                "pairs",
                "--hosts",
                "n1,n2",
                "--no-singles",
                "--gpus-per-node",
                "1",
            ])
            .arg("--launcher")
            .arg(&cluster.mpirun)
            .arg("--launcher-args")
            .arg(&launcher_args)
            .arg("--nccl-tests-dir")
            .arg(cluster.dir.path().join("bin"))
            .args([
                "--env",
                "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1",
                "--env",
                "X=it's a b",
            ])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", cluster.dir.path())
            .env("OMPI_MCA_btl", "self,tcp")
            .env("GPUDOCTOR_FAKE_TABLE", cluster.dir.path().join("table"));
        command.output().unwrap()
    };
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let line = table
        .lines()
        .find_map(|l| l.strip_prefix("first pair's command: "))
        .unwrap_or_else(|| panic!("{table}"));
    let words = Command::new("sh")
        .args(["-c", &format!("printf '%s\\0' {line}")])
        .output()
        .unwrap();
    let words: Vec<String> = String::from_utf8(words.stdout)
        .unwrap()
        .split_terminator('\0')
        .map(str::to_string)
        .collect();
    assert!(words.contains(&"X=it's a b".to_string()), "{line}");
    assert!(
        words.contains(&"NCCL_IB_HCA=mlx5_0:1,mlx5_1:1".to_string()),
        "{line}"
    );
    assert_eq!(words[0], cluster.mpirun.display().to_string());
}

#[test]
fn a_node_slow_on_its_own_is_convicted_alone_and_never_paired() {
    let Some(cluster) = Cluster::new() else {
        return;
    };
    cluster.uniform(1.0);
    // n6 alone (and over its NICs alone) is slow; any pair would be fine.
    cluster.table("n6", 0.45);
    let launcher_args = format!(
        "{}--mca plm_rsh_agent {}",
        if as_root() {
            "--allow-run-as-root "
        } else {
            ""
        },
        cluster.agent()
    );
    let (out, json) = cluster.pairs(
        &cluster.mpirun,
        &["--hosts", EIGHT, "--launcher-args", &launcher_args],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(json["suspects"][0]["kind"], "node", "{json}");
    assert_eq!(json["suspects"][0]["hosts"][0], "n6", "{json}");
    let runs = json["pairs"].as_array().unwrap();
    let alone: Vec<&Value> = runs.iter().filter(|p| p["round"] == 0).collect();
    // Eight hosts alone, then eight again over their NICs (the table's IB lines).
    assert_eq!(alone.len(), 16, "{json}");
    assert!(alone.iter().any(|p| {
        p["run"] == "alone_nics"
            && p["command"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w == "NCCL_P2P_DISABLE=1")
    }));
    for pair in runs.iter().filter(|p| p["run"] == "pair") {
        assert!(
            !pair["hosts"].as_array().unwrap().iter().any(|h| h == "n6"),
            "{json}"
        );
        assert_eq!(pair["status"], "fast", "{json}");
    }
}

#[test]
fn suspects_carry_the_kubernetes_node_each_worker_names() {
    let Some(cluster) = Cluster::new() else {
        return;
    };
    cluster.uniform(1.0);
    // The MPI Operator's hostfile (`<job>-worker-<i>.<job>.<namespace>.svc slots=N`,
    // mpi-operator pkg/controller/mpi_job_controller.go), one slot each here.
    let workers: Vec<String> = (0..4)
        .map(|i| format!("gpudoctor-pairs-worker-{i}.gpudoctor-pairs.gpudoctor.svc"))
        .collect();
    let hostfile = cluster.dir.path().join("hostfile");
    std::fs::write(
        &hostfile,
        workers
            .iter()
            .map(|w| format!("{w} slots=1\n"))
            .collect::<String>(),
    )
    .unwrap();
    // Open MPI hands its rsh agent the name without its domain (orte_keep_fqdn_hostnames is
    // off by default), so the stand-in sees the Pod's short name.
    cluster.table(&workers[1], 0.45);
    cluster.table("gpudoctor-pairs-worker-1", 0.45);
    // The agent gives each "Pod" the NODE_NAME the downward API would.
    let agent = cluster.dir.path().join("kubexec-node.sh");
    std::fs::write(
        &agent,
        AGENT.replace("FAKE_HOST=", "NODE_NAME=\"node-of-${host%%.*}\" FAKE_HOST="),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let launcher_args = format!(
        "{}--mca plm_rsh_agent {}",
        if as_root() {
            "--allow-run-as-root "
        } else {
            ""
        },
        agent.display()
    );
    let hostfile = hostfile.display().to_string();
    let (out, json) = cluster.pairs(
        &cluster.mpirun,
        &[
            "--hostfile",
            &hostfile,
            "--node-name-env",
            "NODE_NAME",
            "--launcher-args",
            &launcher_args,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let k = &json["suspects"][0]["kubernetes"][0];
    assert_eq!(k["pod"], "gpudoctor-pairs-worker-1", "{json}");
    assert_eq!(k["node"], "node-of-gpudoctor-pairs-worker-1", "{json}");
    assert!(
        json["verdict"]
            .as_str()
            .unwrap()
            .contains("on node node-of-gpudoctor-pairs-worker-1"),
        "{json}"
    );
}
