//! `gpudoctor pairs` arguments, turned into [`PairsOptions`]: the hosts from `--hosts`,
//! `--hostfile` or Slurm's `SLURM_JOB_NODELIST`, the launcher, the nccl-tests binary, the
//! environment exported to every rank and the profile's multi-node floor.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::ListFormat;
use crate::pairs::launch::{self, LaunchPlan, LauncherKind};
use crate::pairs::{PairsOptions, hosts};

/// Per pair when not given: a full two-node sweep to 8 GiB takes one to two minutes.
pub const DEFAULT_PAIR_TIMEOUT_SECS: u64 = 300;
/// Largest hostfile read: 4096 hosts of long names with their slots fit in far less.
const HOSTFILE_CAP: u64 = 4 << 20;
/// GPUs per node when neither `--gpus-per-node` nor Slurm says (HGX and DGX nodes have 8).
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

#[derive(Debug, Args)]
pub struct PairsArgs {
    /// The hosts, comma-separated, Slurm's ranges allowed: `gpu01,gpu02`, `gpu[01-16]`.
    #[arg(long, value_name = "LIST", conflicts_with = "hostfile")]
    pub hosts: Option<String>,

    /// An Open MPI hostfile (`node01 slots=8` per line). Without --hosts or --hostfile:
    /// SLURM_JOB_NODELIST (`gpu[01-04,07]`).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// mpirun or srun, or a path to one [default: srun inside a Slurm allocation, else mpirun].
    #[arg(long, value_name = "LAUNCHER")]
    pub launcher: Option<String>,

    /// More launcher arguments, placed after gpudoctor's own: "--mca btl_tcp_if_include eth0
    /// --allow-run-as-root", "--mpi=pmix --gpus-per-node=8".
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub launcher_args: Option<String>,

    /// GPUs (ranks) per node [default: the hostfile's `slots=` when every line says the same,
    /// else SLURM_GPUS_ON_NODE, else 8].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub gpus_per_node: Option<u32>,

    /// Where the nccl-tests binaries are, on the nodes (the same path everywhere, as in one
    /// container image) [default: PATH and the usual install places, else the bare name].
    #[arg(long, value_name = "DIR")]
    pub nccl_tests_dir: Option<PathBuf>,

    /// The collective (all_reduce, all_gather, alltoall, sendrecv, ...) [default: all_reduce].
    #[arg(long, value_name = "NAME")]
    pub nccl_test: Option<String>,

    /// Sweep the large sizes only (1 to 8 GiB): about half the time per pair.
    #[arg(long)]
    pub quick: bool,

    /// Export KEY=VALUE to every rank (repeatable): NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ...
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// Kill a pair's run, with every process it started, after this many seconds: a hung
    /// pair is a verdict [default: 300].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: Option<u64>,

    /// Pairs run at once at most; a larger round runs in parts. Each running pair holds a
    /// launcher and three pipes here.
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub parallel: u32,

    /// Rounds at most (round one pairs every host; later rounds re-pair suspects).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub max_rounds: u32,

    /// Skip round zero (each host alone on its own GPUs, and over its own NICs, before any
    /// pair: a host slow alone is convicted from its own run and never paired).
    #[arg(long)]
    pub no_singles: bool,

    /// Run every pair of hosts once (a round-robin tournament: n−1 waves of n/2 pairs side by
    /// side), so a slow link between hosts round one never pairs is found. The cost is printed
    /// before it starts.
    #[arg(long)]
    pub all_links: bool,

    /// Name suspects by Kubernetes node: the variable that holds each worker's node name
    /// (NODE_NAME from the downward API's spec.nodeName, as deploy/mpijob-pairs.yaml sets it),
    /// asked through mpirun on every host before the pairs run.
    #[arg(long, value_name = "VAR")]
    pub node_name_env: Option<String>,

    /// A profile (name or file) whose multi-node busbw floor also makes a pair slow (and its
    /// single-node floor a host alone).
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,

    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

impl PairsArgs {
    /// The options, or a usage error saying what to give. `env` is the caller's environment.
    pub fn options(&self, env: &[(String, String)]) -> Result<PairsOptions, String> {
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let mut notes = Vec::new();
        let mut slots = None;
        let listed = if let Some(list) = &self.hosts {
            // Slurm's bracket ranges work here too (`gpu[01-08]`); a `:N` count does not
            // belong in a host name (an IPv6 address is a host, bare or in brackets).
            let counted = hosts::from_list(list)
                .into_iter()
                .find(|item| item.contains(':') && hosts::ipv6_item(item).is_none());
            if let Some(item) = counted {
                return Err(format!(
                    "--hosts {list}: `{item}`: host names only; give the GPUs per node with --gpus-per-node"
                ));
            }
            let listed = hosts::from_slurm_nodelist(list).map_err(|e| format!("--hosts: {e}"))?;
            checked(listed, "--hosts")?
        } else if let Some(file) = &self.hostfile {
            // Bounded like every file named on the command line: a FIFO nobody writes, or a
            // huge file, is an error naming it within seconds, never a hang.
            let shown = format!("--hostfile {}", file.display());
            let text = crate::source::rooted::read_named_file(
                file,
                &shown,
                HOSTFILE_CAP,
                Duration::from_secs(5),
            )
            .map_err(|e| e.to_string())?;
            let read = hosts::parse_hostfile(&text).map_err(|e| format!("{shown}: {e}"))?;
            slots = read.slots;
            read.hosts
        } else if let Some(list) = var("SLURM_JOB_NODELIST") {
            let listed =
                hosts::from_slurm_nodelist(list).map_err(|e| format!("SLURM_JOB_NODELIST: {e}"))?;
            checked(listed, "SLURM_JOB_NODELIST")?
        } else {
            return Err("no hosts: give --hosts a,b,... or --hostfile FILE, or run inside a Slurm allocation (SLURM_JOB_NODELIST)".to_string());
        };
        let (hosts, dropped) = hosts::dedup(listed);
        if !dropped.is_empty() {
            notes.push(format!("listed twice, paired once: {}", dropped.join(", ")));
        }
        if hosts.len() < 2 {
            return Err(format!("{} host(s): pairs needs at least two", hosts.len()));
        }
        if hosts.len() > hosts::MAX_HOSTS {
            return Err(format!("more than {} hosts", hosts::MAX_HOSTS));
        }
        let (kind, program) =
            launch::resolve(self.launcher.as_deref(), var("SLURM_JOB_ID").is_some())?;
        if let Some(address) = hosts
            .iter()
            .find(|h| hosts::check(h) == Ok(hosts::Kind::Ipv6))
        {
            return Err(ipv6_refused(address, kind));
        }
        let extra = match &self.launcher_args {
            Some(a) => crate::source::nccl::split_command(a)
                .map_err(|e| format!("--launcher-args: {e}"))?,
            None => Vec::new(),
        };
        let from_env = var("SLURM_GPUS_ON_NODE").and_then(|v| v.trim().parse().ok());
        let gpus_per_node = match self.gpus_per_node {
            Some(n) => n,
            None => match slots.or(from_env) {
                Some(n) if (1..=64).contains(&n) => n,
                _ => {
                    notes.push(format!(
                        "{DEFAULT_GPUS_PER_NODE} GPUs per node assumed (--gpus-per-node to say)"
                    ));
                    DEFAULT_GPUS_PER_NODE
                }
            },
        };
        let test = self.nccl_test.as_deref().unwrap_or("all_reduce");
        let test = test.trim_end_matches("_perf");
        if !crate::source::nccl::TESTS.contains(&test) {
            return Err(format!(
                "unknown nccl test `{test}`; tests are: {}",
                crate::source::nccl::TESTS.join(", ")
            ));
        }
        let path_var = var("PATH");
        let binary = match crate::source::nccl::find_binary(
            test,
            self.nccl_tests_dir.as_deref(),
            path_var,
        ) {
            Ok(path) => path.display().to_string(),
            Err(searched) if self.nccl_tests_dir.is_some() => {
                return Err(format!(
                    "{} not found (looked in {}); the binary must be at the same path on every node",
                    crate::source::nccl::binary_name(test),
                    searched.join(", ")
                ));
            }
            Err(_) => {
                let name = crate::source::nccl::binary_name(test);
                notes.push(format!(
                    "{name} is not on this machine: the launcher looks it up on the nodes' PATH"
                ));
                name
            }
        };
        // The ranks' environment: NCCL_DEBUG=INFO (the transport lines), the caller's own
        // NCCL_* settings (srun passes them, mpirun does not without -x), then --env.
        let child = crate::source::nccl::child_env(env.iter().cloned());
        let mut exported: Vec<(String, String)> =
            vec![("NCCL_DEBUG".to_string(), "INFO".to_string())];
        exported.extend(child.inherited.iter().map(|(k, v)| (k.clone(), v.clone())));
        for item in &self.env {
            let (k, v) = launch::parse_env(item)?;
            exported.retain(|(name, _)| *name != k);
            exported.push((k, v));
        }
        let mut launcher_env = child.changes.clone();
        if kind == LauncherKind::Srun {
            launcher_env.extend(launch::srun_env_changes());
        }
        // Open MPI's session directory goes under TMPDIR unless orte_tmpdir_base is set (then
        // that one is pointed at the private directory too): `pairs::private_tmp`.
        let mut private_tmp_vars = Vec::new();
        if kind == LauncherKind::Mpirun {
            private_tmp_vars.push("TMPDIR".to_string());
            if var("OMPI_MCA_orte_tmpdir_base").is_some() {
                private_tmp_vars.push("OMPI_MCA_orte_tmpdir_base".to_string());
            }
        }
        launcher_env.extend(exported.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
        let mut single_floor = None;
        let floor = match &self.profile {
            None => None,
            Some(arg) => {
                let profile = crate::profile::load(arg).map_err(|e| format!("--profile: {e}"))?;
                single_floor = profile
                    .nccl_busbw_fail_gbps
                    .map(|f| (f, format!("profile {} single-node floor", profile.name)));
                match crate::checks::nccl::multi_node_expectation(&profile, None) {
                    Ok((_, fail, from)) => Some((fail, from)),
                    Err(why) => {
                        notes.push(format!("no profile floor: {why}"));
                        None
                    }
                }
            }
        };
        let sweep = crate::source::nccl::test_args(self.quick, 1);
        Ok(PairsOptions {
            hosts,
            plan: LaunchPlan {
                kind,
                program,
                extra,
                gpus_per_node,
                env: exported,
                binary,
                sweep,
            },
            timeout: Duration::from_secs(self.timeout.unwrap_or(DEFAULT_PAIR_TIMEOUT_SECS)),
            parallel: self.parallel as usize,
            max_rounds: self.max_rounds,
            floor,
            launcher_env,
            progress: true,
            notes,
            private_tmp_vars,
            singles: !self.no_singles,
            single_floor,
            all_links: self.all_links,
            node_name_env: match &self.node_name_env {
                Some(v)
                    if !v.is_empty()
                        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    Some(v.clone())
                }
                Some(v) => return Err(format!("--node-name-env {v}: not a variable name")),
                None => None,
            },
        })
    }
}

/// Every host of a list checked as a host (`pairs::hosts::check`), the error naming the list.
fn checked(listed: Vec<String>, from: &str) -> Result<Vec<String>, String> {
    for host in &listed {
        hosts::check(host).map_err(|e| format!("{from}: {e}"))?;
    }
    Ok(listed)
}

/// Why an IPv6 address cannot be a host of the launcher's command. Open MPI's `--host` cuts
/// each entry at its first `:` for a slot count, brackets or not (Open MPI 4.1
/// `orte/util/dash_host/dash_host.c`, and PRRTE's `dash_host.c` under Open MPI 5:
/// `strchr(mini_map[i], ':')`), so `fd00::1:8` would be the host `fd00`; srun's `--nodelist`
/// takes Slurm node names (slurm.conf `NodeName`), not addresses.
fn ipv6_refused(address: &str, kind: LauncherKind) -> String {
    match kind {
        LauncherKind::Mpirun => format!(
            "`{address}`: mpirun's --host cannot take an IPv6 address (Open MPI cuts a --host entry at its first `:`); give the host's name (DNS or /etc/hosts on every node)"
        ),
        LauncherKind::Srun => format!(
            "`{address}`: srun's --nodelist takes Slurm node names, not addresses; give the node's name as slurm.conf has it"
        ),
    }
}
