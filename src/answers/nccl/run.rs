//! What the NCCL probe answers (`source/nccl/` runs nccl-tests or reads logs; replay reads
//! `.gpudoctor/nccl/`): each judged log with what only the runner knows about its run (argv,
//! exit, timeout, environment, processes killed), and the words a check quotes when nothing ran.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::NcclLog;
use crate::process::{Containment, Killed, RunExit};

/// Why nothing is judged when nothing was asked for. The same words live and in replay: a node
/// without a request and a capture without a log hold the same fact.
pub const NOT_REQUESTED: &str = "nccl benchmark not requested: pass --nccl or --nccl-quick to run all_reduce_perf, or --nccl-log FILE to judge a saved log";
/// How to get the binaries, for the skip message.
pub const INSTALL_HINT: &str = "build nccl-tests: `git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests` (add MPI=1 MPI_HOME=... for multi-node), then pass --nccl-tests-dir nccl-tests/build";

/// What only the runner knows about a run, stored beside a captured log as `<name>.json`.
/// Unknown keys are refused, so nccl-tests' own `-J` output (§6) saved beside a log is never
/// mistaken for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunMeta {
    /// argv as run (launcher, binary, arguments).
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub exit: Option<RunExit>,
    /// gpudoctor's timeout expired and it killed the process group.
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default)]
    pub timeout_s: Option<u64>,
    #[serde(default)]
    pub elapsed_ms: Option<u64>,
    /// The caller's `NCCL_*` variables the run inherited (what gpudoctor changed is in `changed`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// What gpudoctor set or removed (`NCCL_DEBUG=INFO`, `NCCL_DEBUG_FILE` removed).
    #[serde(default)]
    pub changed: Vec<String>,
    /// Processes of the run gpudoctor had to kill: left running after the leader exited, or
    /// still there at the timeout (process.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub killed: Vec<Killed>,
    /// What held the run's processes (process/contain.rs); absent in older captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<Containment>,
}

/// One judged log.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclRun {
    /// `all_reduce_perf`, or the log's file stem.
    pub name: String,
    /// Where its lines come from, for evidence: `.gpudoctor/nccl/x.log`, the `--nccl-log` path,
    /// or `all_reduce_perf output`.
    pub origin: String,
    /// Known for runs (live, or a capture with its `.json`).
    pub meta: Option<RunMeta>,
    pub log: NcclLog,
    /// The output verbatim (head and tail, `source::nccl::TRANSCRIPT_PART` each) for
    /// `gpudoctor record`.
    pub transcript: Option<String>,
}

/// The probe's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum NcclProbe {
    /// Nothing asked for (live without `--nccl`/`--nccl-log`, a capture without logs).
    NotRequested { why: String },
    /// No binary for the test: where we looked.
    BinaryMissing {
        binary: String,
        searched: Vec<String>,
    },
    /// A log could not be read, or the binary could not be started. `requested`: the user asked
    /// for it (`--nccl`, `--nccl-quick`, `--nccl-log`), so it not running fails the layer; a
    /// capture's unreadable log is an input problem (`error`), not a request that failed.
    Unavailable {
        origin: String,
        message: String,
        requested: bool,
    },
    /// One or more runs or logs to judge.
    Runs(Vec<NcclRun>),
}
