//! The nccl-tests program a log's own command line names. A log saved from a terminal or a job
//! script often begins with the command that made it (`user@host:~/nccl-tests$
//! ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 2`, `mpirun -np 16 ... /opt/nccl-tests/build/
//! alltoall_perf ...`, tests/data/nccl/real/), while nccl-tests before 2.17 prints no
//! `Collective test starting:` line: the command is then the log's only word on which
//! collective its table measured (`checks/nccl` judges all_reduce figures on all_reduce runs
//! only).

/// The program (`all_reduce_perf`, `alltoall_perf_mpi`) of the first token of `line` whose file
/// name is an nccl-tests binary name: lower-case letters and underscores ending in `_perf` or
/// `_perf_mpi`, as nccl-tests' Makefile names them (`src/Makefile`, `%_perf`). `None` when the
/// line names none.
pub fn program_on_command_line(line: &str) -> Option<String> {
    line.split_whitespace().find_map(|token| {
        let token = token.trim_matches(|c: char| matches!(c, '\'' | '"' | ';' | '&' | '(' | ')'));
        let name = token.rsplit('/').next()?;
        let stem = name.strip_suffix("_mpi").unwrap_or(name);
        let is_program = stem.len() > "_perf".len()
            && stem.ends_with("_perf")
            && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        is_program.then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::program_on_command_line;

    #[test]
    fn the_program_is_read_from_the_lines_real_logs_begin_with() {
        // tests/data/nccl/real/: nccl-tests-107 (mpirun), nccl-tests-287 (a prompt),
        // nccl-tests-291 (a prompt whose space a copy turned into `_`), nccl-tests-82.
        let cases = [
            (
                "ih@ip-172-31-22-230:~/nccl-tests/src$ mpirun -host localhost,172.31.20.228 -np 2 -verbose /home/ih/nccl-tests/build/all_reduce_perf -b 1250M -e 1250M -g 1",
                Some("all_reduce_perf"),
            ),
            (
                "user@GENOA-06:~/nccl-tests$ NCCL_P2P_DISABLE=1 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 2",
                Some("all_reduce_perf"),
            ),
            (
                "root@node:~/nccl-tests/build#_ NCCL_DEBUG=INFO ./alltoall_perf",
                Some("alltoall_perf"),
            ),
            (
                "srun --mpi=pmix -N 2 \"/opt/nccl-tests/build/broadcast_perf_mpi\" -b 8",
                Some("broadcast_perf_mpi"),
            ),
            // Not a program: a flag, a path to a directory, a word of prose.
            ("NCCL_ALGO=Ring ./build/", None),
            ("the _perf binaries are in build/", None),
            ("mpirun ./my_Perf_perf.sh", None),
        ];
        for (line, want) in cases {
            assert_eq!(program_on_command_line(line).as_deref(), want, "{line}");
        }
    }
}
