//! The launcher command for one pair: the cluster's own `mpirun` (Open MPI) or `srun` (Slurm)
//! places one rank per GPU on the two hosts, and each rank drives one GPU (`-g 1`), as
//! nccl-tests' README runs multi-node tests.
//!
//! - Open MPI: `mpirun -np 2N --host a:N,b:N -x NCCL_DEBUG=INFO -x K=V ... <extra> <binary>
//!   <sweep>` (`--host name:slots`, and `-x` to export a variable to the remote ranks, which
//!   otherwise get the remote shell's environment: mpirun(1)).
//! - Slurm: `srun --nodes=2 --ntasks=2N --ntasks-per-node=N --nodelist=a,b --export=ALL
//!   <extra> <binary> <sweep>`, the variables set on srun's own process (srun(1): `--export=ALL`
//!   propagates srun's environment to the tasks). Not `--export=ALL,K=V`: srun splits that list
//!   at commas, so `NCCL_IB_HCA=mlx5_0:1,mlx5_1:1` would reach the ranks as `mlx5_0:1`. Inside
//!   an allocation srun reads the allocation's task and node counts from its environment
//!   (`SLURM_NTASKS`, `SLURM_NPROCS`, `SLURM_NNODES`, `SLURM_NTASKS_PER_NODE`: the env_vars
//!   table of Slurm 22.05 `src/srun/libsrun/opt.c`), so a pair would ask for the whole job's
//!   tasks on two nodes ("More processors requested than permitted"): the counts are given
//!   explicitly and those variables removed from srun's environment ([`srun_env_changes`]).
//!
//! The same command runs one host (round zero) or all of them (`--full`): [`LaunchPlan::argv_on`].

use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LauncherKind {
    Mpirun,
    Srun,
}

impl LauncherKind {
    pub fn name(self) -> &'static str {
        match self {
            LauncherKind::Mpirun => "mpirun",
            LauncherKind::Srun => "srun",
        }
    }
}

/// The names Open MPI installs its launcher under. Distributions add a suffix when several
/// MPIs live side by side (Debian's alternatives: `/usr/bin/mpirun.openmpi`,
/// `mpiexec.openmpi`); such a name is accepted when its `--version` says Open MPI
/// ([`canonical`] tells which need that proof).
const OPEN_MPI_NAMES: [&str; 4] = ["mpirun", "mpiexec", "orterun", "prterun"];

/// Whether `program`'s file name is one Open MPI itself installs (`mpirun`, not
/// `mpirun.openmpi`): a suffixed name must prove it is Open MPI's by its `--version`.
pub fn canonical(program: &str) -> bool {
    OPEN_MPI_NAMES.contains(&file_name(program))
}

fn file_name(arg: &str) -> &str {
    Path::new(arg)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(arg)
}

/// srun's environment for a pair inside an allocation: the allocation's own counts removed
/// (srun reads them as if given on its command line; Slurm 22.05 `src/srun/libsrun/opt.c`
/// env_vars: `SLURM_NTASKS` and `SLURM_NPROCS` for `--ntasks`, `SLURM_NNODES` for `--nodes`,
/// `SLURM_NTASKS_PER_NODE` for `--ntasks-per-node`). The command line gives them anyway.
pub fn srun_env_changes() -> Vec<(String, Option<String>)> {
    [
        "SLURM_NTASKS",
        "SLURM_NPROCS",
        "SLURM_NNODES",
        "SLURM_NTASKS_PER_NODE",
    ]
    .iter()
    .map(|k| (k.to_string(), None))
    .collect()
}

/// `--launcher`: `mpirun`, `srun`, or a path whose file name is one of them (`/opt/ompi/bin/
/// mpirun`), or starts `mpirun`/`mpiexec` (`/usr/bin/mpirun.openmpi`, then proven Open MPI's
/// by its `--version`); without it, `srun` inside a Slurm allocation (`SLURM_JOB_ID` set),
/// else `mpirun`.
pub fn resolve(arg: Option<&str>, slurm_job: bool) -> Result<(LauncherKind, String), String> {
    let Some(arg) = arg else {
        return Ok(if slurm_job {
            (LauncherKind::Srun, "srun".to_string())
        } else {
            (LauncherKind::Mpirun, "mpirun".to_string())
        });
    };
    let name = file_name(arg);
    let kind = if canonical(arg) || name.starts_with("mpirun") || name.starts_with("mpiexec") {
        LauncherKind::Mpirun
    } else if name == "srun" {
        LauncherKind::Srun
    } else {
        return Err(format!(
            "--launcher {arg}: gpudoctor knows how to call mpirun (Open MPI) and srun (Slurm); give one of them or a path to one"
        ));
    };
    Ok((kind, arg.to_string()))
}

/// What every pair's command is made of.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    pub kind: LauncherKind,
    pub program: String,
    /// `--launcher-args`, placed after gpudoctor's own launcher arguments.
    pub extra: Vec<String>,
    pub gpus_per_node: u32,
    /// Exported to every rank: NCCL_DEBUG=INFO first, then `--env` in order.
    pub env: Vec<(String, String)>,
    pub binary: String,
    pub sweep: Vec<String>,
}

impl LaunchPlan {
    /// The command for hosts `a` and `b`.
    pub fn argv(&self, a: &str, b: &str) -> Vec<String> {
        self.argv_on(&[a, b], &[])
    }

    /// The command over `hosts` (one for round zero, two for a pair, all for `--full`), with
    /// `more_env` exported to the ranks after the plan's own (for `srun` the caller sets them
    /// on srun's process too).
    pub fn argv_on(&self, hosts: &[&str], more_env: &[(String, String)]) -> Vec<String> {
        let n = self.gpus_per_node;
        let count = hosts.len() as u32;
        let mut argv = vec![self.program.clone()];
        match self.kind {
            LauncherKind::Mpirun => {
                let list: Vec<String> = hosts.iter().map(|h| format!("{h}:{n}")).collect();
                argv.extend([
                    "-np".to_string(),
                    (count * n).to_string(),
                    "--host".to_string(),
                    list.join(","),
                ]);
                for (k, v) in self.env.iter().chain(more_env) {
                    argv.push("-x".to_string());
                    argv.push(format!("{k}={v}"));
                }
            }
            LauncherKind::Srun => {
                argv.extend([
                    format!("--nodes={count}"),
                    format!("--ntasks={}", count * n),
                    format!("--ntasks-per-node={n}"),
                    format!("--nodelist={}", hosts.join(",")),
                ]);
                // The values travel in srun's own environment (`PairsOptions::launcher_env`).
                argv.push("--export=ALL".to_string());
            }
        }
        argv.extend(self.extra.iter().cloned());
        argv.push(self.binary.clone());
        argv.extend(self.sweep.iter().cloned());
        argv
    }
}

/// What `mpirun --version` says about the MPI behind it: Open MPI's (`mpirun (Open MPI) 4.1.6`,
/// `prterun (PRRTE) 3.0.2` for Open MPI 5's launcher) is what [`LaunchPlan::argv`] speaks;
/// MPICH's and Intel MPI's Hydra (`HYDRA build details:`, `Intel(R) MPI Library`) take
/// `-hosts` and `-genv` instead, and every pair would fail on `--host`/`-x`.
pub fn which_mpi(version_output: &str) -> Result<Option<String>, String> {
    let first = |t: &str| {
        t.lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    };
    if ["Open MPI", "OpenRTE", "PRRTE"]
        .iter()
        .any(|k| version_output.contains(k))
    {
        return Ok(first(version_output));
    }
    if ["HYDRA", "MPICH", "Intel(R) MPI"]
        .iter()
        .any(|k| version_output.contains(k))
    {
        return Err(format!(
            "this mpirun is not Open MPI's ({}): it takes -hosts and -genv, not --host and -x; give --launcher the path of Open MPI's mpirun, or use srun",
            first(version_output).unwrap_or_default()
        ));
    }
    Ok(None)
}

/// `argv` as one line a POSIX shell reads back into the same words: a word of letters,
/// digits and `-_./:=,+@%^` as it is, any other in single quotes (a `'` inside written
/// `'\''`), an empty word `''`.
pub fn shell_quoted(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%^".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--env KEY=VALUE` checked: a name of letters, digits and `_` (values may hold commas:
/// `NCCL_IB_HCA=mlx5_0:1,mlx5_1:1`).
pub fn parse_env(item: &str) -> Result<(String, String), String> {
    let (k, v) = item
        .split_once('=')
        .ok_or_else(|| format!("--env {item}: expected KEY=VALUE"))?;
    let name_ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        return Err(format!("--env {item}: `{k}` is not a variable name"));
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: LauncherKind) -> LaunchPlan {
        LaunchPlan {
            kind,
            program: kind.name().to_string(),
            extra: vec!["--mca".into(), "btl".into(), "^openib".into()],
            gpus_per_node: 8,
            env: vec![
                ("NCCL_DEBUG".into(), "INFO".into()),
                ("NCCL_IB_HCA".into(), "mlx5".into()),
            ],
            binary: "/opt/nccl-tests/build/all_reduce_perf".into(),
            sweep: vec!["-b".into(), "1G".into(), "-g".into(), "1".into()],
        }
    }

    #[test]
    fn builds_both_launchers_argument_forms() {
        assert_eq!(
            plan(LauncherKind::Mpirun).argv("gpu01", "gpu02").join(" "),
            "mpirun -np 16 --host gpu01:8,gpu02:8 -x NCCL_DEBUG=INFO -x NCCL_IB_HCA=mlx5 --mca btl ^openib /opt/nccl-tests/build/all_reduce_perf -b 1G -g 1"
        );
        assert_eq!(
            plan(LauncherKind::Srun).argv("gpu01", "gpu02").join(" "),
            "srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --nodelist=gpu01,gpu02 --export=ALL --mca btl ^openib /opt/nccl-tests/build/all_reduce_perf -b 1G -g 1"
        );
        // One host alone, with NCCL kept off NVLink and shared memory.
        let off = [("NCCL_P2P_DISABLE".to_string(), "1".to_string())];
        assert_eq!(
            plan(LauncherKind::Mpirun).argv_on(&["gpu01"], &off)[..7].join(" "),
            "mpirun -np 8 --host gpu01:8 -x NCCL_DEBUG=INFO"
        );
        assert!(
            plan(LauncherKind::Mpirun)
                .argv_on(&["gpu01"], &off)
                .contains(&"NCCL_P2P_DISABLE=1".to_string())
        );
        assert_eq!(
            plan(LauncherKind::Srun).argv_on(&["a", "b", "c"], &[])[1..5].join(" "),
            "--nodes=3 --ntasks=24 --ntasks-per-node=8 --nodelist=a,b,c"
        );
    }

    #[test]
    fn a_quoted_command_reads_back_as_the_same_words() {
        let argv: Vec<String> = [
            "mpirun",
            "-x",
            "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1",
            "--mca",
            "btl",
            "^openib",
            "it's",
            "",
            "a b",
            "$HOME",
            "x\"y;z`w`",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let line = shell_quoted(&argv);
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf '%s\\0' {line}")])
            .output()
            .unwrap();
        let words: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(|s| s.to_string())
            .collect();
        assert_eq!(words, argv, "{line}");
        assert!(line.starts_with(
            "mpirun -x NCCL_IB_HCA=mlx5_0:1,mlx5_1:1 --mca btl ^openib 'it'\\''s' ''"
        ));
    }

    #[test]
    fn tells_open_mpi_from_hydra() {
        // `mpirun --version` as Open MPI 4.1 prints it (a DIRAC build log on a cluster).
        assert_eq!(
            which_mpi(
                "mpirun (Open MPI) 4.1.1\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
            ),
            Ok(Some("mpirun (Open MPI) 4.1.1".to_string()))
        );
        assert!(which_mpi("HYDRA build details:\n    Version: 4.0.2\n").is_err());
        assert!(which_mpi("Intel(R) MPI Library for Linux* OS, Version 2021.9\n").is_err());
        assert_eq!(which_mpi("something else\n"), Ok(None));
    }

    #[test]
    fn picks_the_launcher() {
        assert_eq!(resolve(None, true).unwrap().0, LauncherKind::Srun);
        assert_eq!(resolve(None, false).unwrap().0, LauncherKind::Mpirun);
        assert_eq!(
            resolve(Some("/usr/mpi/bin/mpirun"), true).unwrap(),
            (LauncherKind::Mpirun, "/usr/mpi/bin/mpirun".to_string())
        );
        assert!(resolve(Some("torchrun"), false).is_err());
        // Debian's alternatives name: accepted, and proven Open MPI's by `--version`.
        assert_eq!(
            resolve(Some("/usr/bin/mpirun.openmpi"), false).unwrap().0,
            LauncherKind::Mpirun
        );
        assert!(!canonical("/usr/bin/mpirun.openmpi") && canonical("/opt/ompi/bin/mpiexec"));
        assert_eq!(srun_env_changes()[0], ("SLURM_NTASKS".to_string(), None));
        assert_eq!(
            parse_env("NCCL_IB_HCA=mlx5_0:1,mlx5_1:1").unwrap().1,
            "mlx5_0:1,mlx5_1:1"
        );
        assert!(parse_env("1X=2").is_err() && parse_env("novalue").is_err());
        assert_eq!(
            parse_env("NCCL_SOCKET_IFNAME=eth0").unwrap(),
            ("NCCL_SOCKET_IFNAME".into(), "eth0".into())
        );
    }
}
