//! The launcher command for one pair: the cluster's own `mpirun` (Open MPI) or `srun` (Slurm)
//! places one rank per GPU on the two hosts, and each rank drives one GPU (`-g 1`), as
//! nccl-tests' README runs multi-node tests.
//!
//! - Open MPI: `mpirun -np 2N --host a:N,b:N -x NCCL_DEBUG=INFO -x K=V ... <extra> <binary>
//!   <sweep>` (`--host name:slots`, and `-x` to export a variable to the remote ranks, which
//!   otherwise get the remote shell's environment: mpirun(1)).
//! - Slurm: `srun --nodes=2 --nodelist=a,b --ntasks-per-node=N --export=ALL <extra> <binary>
//!   <sweep>`, the variables set on srun's own process (srun(1): `--export=ALL` propagates
//!   srun's environment to the tasks). Not `--export=ALL,K=V`: srun splits that list at commas,
//!   so `NCCL_IB_HCA=mlx5_0:1,mlx5_1:1` would reach the ranks as `mlx5_0:1`.

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

/// `--launcher`: `mpirun`, `srun`, or a path whose file name is one of them (`/opt/ompi/bin/
/// mpirun`); without it, `srun` inside a Slurm allocation (`SLURM_JOB_ID` set), else `mpirun`.
pub fn resolve(arg: Option<&str>, slurm_job: bool) -> Result<(LauncherKind, String), String> {
    let Some(arg) = arg else {
        return Ok(if slurm_job {
            (LauncherKind::Srun, "srun".to_string())
        } else {
            (LauncherKind::Mpirun, "mpirun".to_string())
        });
    };
    let name = Path::new(arg)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(arg);
    let kind = match name {
        "mpirun" | "mpiexec" | "orterun" | "prterun" => LauncherKind::Mpirun,
        "srun" => LauncherKind::Srun,
        _ => {
            return Err(format!(
                "--launcher {arg}: gpudoctor knows how to call mpirun (Open MPI) and srun (Slurm); give one of them or a path to one"
            ));
        }
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
        let n = self.gpus_per_node;
        let mut argv = vec![self.program.clone()];
        match self.kind {
            LauncherKind::Mpirun => {
                argv.extend([
                    "-np".to_string(),
                    (2 * n).to_string(),
                    "--host".to_string(),
                    format!("{a}:{n},{b}:{n}"),
                ]);
                for (k, v) in &self.env {
                    argv.push("-x".to_string());
                    argv.push(format!("{k}={v}"));
                }
            }
            LauncherKind::Srun => {
                argv.extend([
                    "--nodes=2".to_string(),
                    format!("--nodelist={a},{b}"),
                    format!("--ntasks-per-node={n}"),
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
            "srun --nodes=2 --nodelist=gpu01,gpu02 --ntasks-per-node=8 --export=ALL --mca btl ^openib /opt/nccl-tests/build/all_reduce_perf -b 1G -g 1"
        );
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
