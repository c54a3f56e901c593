//! The source `judge` gives the checks: no node behind it, only the pasted file. Its kernel
//! log, NCCL log, perftest output or `nvidia-smi topo -m` matrix is the file's text, its root an
//! empty private directory (or one holding the pasted config where the node keeps it), and
//! every other probe answers "not in the pasted files". It must never read the machine
//! `judge` runs on: NVML, the kubelet and the kernel log of this machine are not asked.

use std::path::PathBuf;

use crate::answers::nccl::NcclProbe;
use crate::answers::nvml::{NvmlErrorKind, NvmlFacts};
use crate::report::SourceKind;
use crate::source::{FsError, RootedFs, Source};

/// What one pasted file answers.
#[derive(Debug, Default)]
pub struct Answers {
    /// The kernel log's text and its name.
    pub kernel_log: Option<(String, String)>,
    /// A read NCCL log.
    pub nccl: Option<NcclProbe>,
    /// A perftest output, named.
    pub perftest: Vec<(PathBuf, Result<String, String>)>,
    /// An `nvidia-smi topo -m` paste, named.
    pub smi_topo: Option<(String, String)>,
}

pub struct FilesSource {
    fs: RootedFs,
    answers: Answers,
}

impl FilesSource {
    /// `root` holds only what `judge` put there (a pasted config at its node path), nothing of
    /// this machine.
    pub fn new(root: PathBuf, answers: Answers) -> Self {
        FilesSource {
            fs: RootedFs::new(root),
            answers,
        }
    }
}

impl Source for FilesSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Files
    }
    fn fs(&self) -> &RootedFs {
        &self.fs
    }
    fn nvml(&self) -> NvmlFacts {
        NvmlFacts::failed(NvmlErrorKind::NotRecorded, "not in the pasted files")
    }
    fn kernel_log(&self) -> Result<Option<(String, String)>, FsError> {
        Ok(self.answers.kernel_log.clone())
    }
    fn nccl(&self) -> NcclProbe {
        match &self.answers.nccl {
            Some(probe) => probe.clone(),
            None => NcclProbe::NotRequested {
                why: "no NCCL log among the pasted files".to_string(),
            },
        }
    }
    fn perftest_logs(&self) -> Vec<(PathBuf, Result<String, String>)> {
        self.answers.perftest.clone()
    }
    fn smi_topo(&self) -> Option<(String, String)> {
        self.answers.smi_topo.clone()
    }
}
