//! The source a recording walks: the node (or the capture being re-recorded), with every probe
//! answer remembered so the capture can store exactly what the checks judged.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::answers::nccl::NcclProbe;
use crate::answers::nvml::NvmlFacts;
use crate::answers::pod_resources::PodResourcesFacts;
use crate::report::SourceKind;
use crate::source::{FsError, RootedFs, Source};

/// The node being recorded (the live host, or a capture being re-recorded), recording every
/// access and remembering the probe answers it gave.
pub(super) struct RecordingSource {
    pub inner: Box<dyn Source>,
    pub nvml: OnceLock<NvmlFacts>,
    pub kernel_log: OnceLock<Result<Option<(String, String)>, FsError>>,
    pub pod_resources: OnceLock<PodResourcesFacts>,
    pub env_vars: OnceLock<BTreeMap<String, String>>,
    pub nccl: OnceLock<NcclProbe>,
    /// The first reading of a `--sample` window.
    pub baseline: Option<crate::answers::baseline::Baseline>,
    pub cuda: OnceLock<crate::answers::cuda::CudaProbe>,
    /// Each directory's `statvfs` answer, as the disk checks asked it.
    pub fs_stats: std::sync::Mutex<BTreeMap<String, crate::answers::fs_stat::StatAnswer>>,
    pub gpudirect: OnceLock<crate::answers::gpudirect::GdrProbe>,
}

impl Source for RecordingSource {
    fn kind(&self) -> SourceKind {
        self.inner.kind()
    }
    fn fs(&self) -> &RootedFs {
        self.inner.fs()
    }
    fn nvml(&self) -> NvmlFacts {
        self.nvml.get_or_init(|| self.inner.nvml()).clone()
    }
    fn kernel_log(&self) -> Result<Option<(String, String)>, FsError> {
        self.kernel_log
            .get_or_init(|| self.inner.kernel_log())
            .clone()
    }
    fn kernel_log_notes(&self) -> Vec<String> {
        self.inner.kernel_log_notes()
    }
    fn pod_resources(&self) -> PodResourcesFacts {
        self.pod_resources
            .get_or_init(|| self.inner.pod_resources())
            .clone()
    }
    fn env_vars(&self) -> BTreeMap<String, String> {
        self.env_vars.get_or_init(|| self.inner.env_vars()).clone()
    }
    fn fs_stat(&self, rel: &str) -> Option<crate::answers::fs_stat::StatAnswer> {
        let answer = self.inner.fs_stat(rel)?;
        if let Ok(mut kept) = self.fs_stats.lock() {
            kept.entry(rel.to_string())
                .or_insert_with(|| answer.clone());
        }
        Some(answer)
    }
    fn node_changed(&self) -> Option<String> {
        self.inner.node_changed()
    }
    fn host_nodename(&self) -> Option<String> {
        self.inner.host_nodename()
    }
    fn nccl(&self) -> NcclProbe {
        self.nccl.get_or_init(|| self.inner.nccl()).clone()
    }
    fn baseline(
        &self,
    ) -> Result<Option<crate::answers::baseline::Baseline>, crate::answers::FactError> {
        match &self.baseline {
            Some(b) => Ok(Some(b.clone())),
            // Re-recording: the capture's own window, if it has one.
            None => self.inner.baseline(),
        }
    }
    fn cuda(
        &self,
        plan: &dyn Fn() -> crate::answers::cuda::CudaPlan,
    ) -> crate::answers::cuda::CudaProbe {
        self.cuda.get_or_init(|| self.inner.cuda(plan)).clone()
    }
    fn gpudirect(
        &self,
        targets: &dyn Fn() -> Vec<crate::answers::gpudirect::GdrTarget>,
    ) -> crate::answers::gpudirect::GdrProbe {
        self.gpudirect
            .get_or_init(|| self.inner.gpudirect(targets))
            .clone()
    }
    fn perftest_logs(&self) -> Vec<(std::path::PathBuf, Result<String, String>)> {
        self.inner.perftest_logs()
    }
    /// The history is read (and kept in the capture, `record/mod.rs`), never added to: a
    /// recording is not one of the node's runs.
    fn history(&self) -> Option<crate::answers::history::HistoryAnswer> {
        self.inner
            .history()
            .map(|(path, _, loaded)| (path, false, loaded))
    }
}
