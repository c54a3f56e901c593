//! What the launcher said when a run failed: the tail of its stderr kept per run, the cause
//! recognised from the launcher's own words (Open MPI's root refusal, ssh, Slurm's PMI), and
//! whether every pair of a round failed the same way (then the cause is shared, and running
//! more rounds would only repeat it). Pure text in, text out; nothing here runs a command.

/// A cause every pair shares, in the launcher's words, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub what: String,
    pub fix: String,
}

/// Known launcher failures: a phrase the launcher prints, what it means, and the fix.
/// - Open MPI refuses root without `--allow-run-as-root` (Open MPI 4.1
///   `orte/tools/orterun/help-orterun.txt`, `[orterun:root-not-allowed]`: "mpirun has detected
///   an attempt to run as root."; Open MPI 5's prterun says "prterun has detected ...").
/// - ssh, which Open MPI's rsh launcher runs to reach a host: "Host key verification failed."
///   (OpenSSH `sshconnect.c`), "Permission denied (publickey" (`sshconnect2.c`).
/// - Open MPI's ranks started by srun without the PMI they were built with: "The application
///   appears to have been direct launched using "srun", / but OMPI was not built with SLURM's
///   PMI support and therefore cannot / execute." after "PMI2_Init failed to initialize.
///   Return code: 14" (as Open MPI 4.1 ranks print it in public Slurm job logs), and PMIx's
///   "PMIX ERROR" lines.
/// - Open MPI's daemons not starting on a host ("ORTE was unable to reliably start one or
///   more daemons.", `orte/mca/plm/base/help-plm-base.txt`).
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "has detected an attempt to run as root",
        "Open MPI refuses to run as root",
        "add --launcher-args --allow-run-as-root (or export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1), or run gpudoctor as a user",
    ),
    (
        "Host key verification failed",
        "ssh to a host failed: its host key is not known here",
        "put every node's host key in ~/.ssh/known_hosts (ssh-keyscan) and make `ssh <node> true` work without a prompt",
    ),
    (
        "Permission denied (publickey",
        "ssh to a host was refused: no key it accepts",
        "install this user's public key in every node's ~/.ssh/authorized_keys, or give --launcher-args \"--mca plm_rsh_agent <agent>\"",
    ),
    (
        "OMPI was not built with SLURM's PMI support",
        "the MPI ranks could not reach Slurm's PMI",
        "give srun the PMI plugin the MPI was built with: --launcher-args --mpi=pmix (`srun --mpi=list` shows the plugins)",
    ),
    (
        "PMI2_Init failed",
        "the MPI ranks could not reach Slurm's PMI",
        "give srun the PMI plugin the MPI was built with: --launcher-args --mpi=pmix (`srun --mpi=list` shows the plugins)",
    ),
    (
        "PMIX ERROR",
        "the MPI ranks could not reach Slurm's PMI",
        "give srun the PMI plugin the MPI was built with: --launcher-args --mpi=pmix (`srun --mpi=list` shows the plugins)",
    ),
    (
        "ORTE was unable to reliably start one or more daemons",
        "Open MPI could not start its daemon on a host",
        "check that `ssh <node> orted --version` works from here (or the --mca plm_rsh_agent given)",
    ),
    (
        "Could not resolve hostname",
        "a host name does not resolve here",
        "give names that resolve on this host (DNS or /etc/hosts)",
    ),
];

/// The cause the lines name, when they name a known one.
pub fn known(lines: &[String]) -> Option<Cause> {
    KNOWN.iter().find_map(|(phrase, what, fix)| {
        lines.iter().find(|l| l.contains(phrase)).map(|line| Cause {
            what: format!("{what} (\"{}\")", line.trim()),
            fix: fix.to_string(),
        })
    })
}

/// The line that says most about why a run failed: a known phrase's line, else the first line
/// with `error` in it, else the last line.
pub fn headline(lines: &[String]) -> Option<String> {
    KNOWN
        .iter()
        .find_map(|(phrase, _, _)| lines.iter().find(|l| l.contains(phrase)))
        .or_else(|| {
            lines
                .iter()
                .find(|l| l.to_ascii_lowercase().contains("error"))
        })
        .or_else(|| lines.last())
        .map(|l| l.trim().to_string())
}

/// A failure's shape with what differs from pair to pair taken out (numbers: pids, ranks,
/// ports, times; the hosts of the pair), so that two pairs failing the same way compare equal.
pub fn signature(lines: &[String], hosts: &[&str]) -> Option<String> {
    if let Some(cause) = known(lines) {
        // The cause, not its line: the line names a host or a pid.
        return KNOWN
            .iter()
            .find(|(_, what, _)| cause.what.starts_with(what))
            .map(|(phrase, _, _)| phrase.to_string());
    }
    let mut line = headline(lines)?;
    for host in hosts.iter().filter(|h| !h.is_empty()) {
        line = line.replace(host, "<host>");
    }
    let mut out = String::new();
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn open_mpi_refusing_root_is_named_with_its_fix() {
        // Debian's Open MPI 4.1.4 as root without the flag (what tests/real_tools.rs sees).
        let said = lines(
            "--------------------------------------------------------------------------\nmpirun has detected an attempt to run as root.\n\nRunning as root is *strongly* discouraged as any mistake (e.g., in\ndefining TMPDIR) or bug can result in catastrophic damage to the OS\n",
        );
        let cause = known(&said).unwrap();
        assert!(cause.what.starts_with("Open MPI refuses to run as root"));
        assert!(cause.fix.contains("--allow-run-as-root"));
        assert_eq!(
            signature(&said, &["gpu01", "gpu02"]).as_deref(),
            Some("has detected an attempt to run as root")
        );
    }

    #[test]
    fn unknown_failures_compare_without_their_hosts_and_numbers() {
        let a = lines(
            "srun: error: Unable to create step for job 1042: Invalid node name specified on gpu01",
        );
        let b = lines(
            "srun: error: Unable to create step for job 1042: Invalid node name specified on gpu07",
        );
        assert_eq!(
            signature(&a, &["gpu01", "gpu05"]),
            signature(&b, &["gpu07", "gpu03"])
        );
        assert_eq!(
            headline(&lines("noise\nsrun: error: x\nlast")).as_deref(),
            Some("srun: error: x")
        );
        assert_eq!(signature(&[], &["a"]), None);
        let c = lines("ssh: Could not resolve hostname gpu09: Name or service not known");
        assert!(known(&c).unwrap().fix.contains("resolve"));
    }
}
