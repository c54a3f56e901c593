//! Replay: a recorded node, its probes answered from `.gpudoctor/` (a capture composed with its
//! base when it is an overlay), and the probe options given on the command line that replace
//! recorded answers (DESIGN "Sources").

use super::*;

/// A recorded node: probes answered from `.gpudoctor/`.
pub struct ReplaySource {
    fs: RootedFs,
    /// The root as given, for the report: an overlay fixture is read from its composed tree.
    shown_root: PathBuf,
    /// An overlay's composed tree (`overlay.rs`), kept as long as the source is.
    _composed: Option<std::sync::Arc<overlay::Composed>>,
    /// `--nccl-log` files given with a capture: judged instead of its own logs.
    nccl_logs: Vec<PathBuf>,
    /// `--perftest-log` files given with a capture, and the probe timeout.
    perftest_logs: (Vec<PathBuf>, Duration),
    /// `--state-dir` given with a capture: read and added to instead of the capture's own.
    state_dir: Option<state_dir::StateDir>,
    /// `--kernel-log` given with a capture, and the probe timeout: read instead of its kmsg.txt.
    kernel_log: Option<(PathBuf, Duration)>,
    /// The kernel log, read once: its text and the notes on its decoding belong to one read.
    kernel_log_read: std::sync::OnceLock<Result<Option<kernel_log::KernelLogText>, FsError>>,
}

impl ReplaySource {
    /// Replay the capture at `root`; an overlay fixture is composed with its bases first
    /// (`overlay.rs`), and one that cannot be is an error naming it.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, overlay::OverlayError> {
        let root = root.into();
        let composed = overlay::compose(&root)?.map(std::sync::Arc::new);
        let fs = match &composed {
            Some(c) => c.fs(),
            None => RootedFs::new(&root),
        };
        Ok(ReplaySource {
            fs,
            shown_root: root,
            _composed: composed,
            nccl_logs: Vec::new(),
            perftest_logs: (Vec::new(), Duration::from_secs(10)),
            state_dir: None,
            kernel_log: None,
            kernel_log_read: std::sync::OnceLock::new(),
        })
    }

    /// [`ReplaySource::open`] for a capture known to be good (tests, a capture just written):
    /// an overlay that cannot be composed is read as it stands, without its bases. The command
    /// line goes through [`open`], which refuses it instead.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        ReplaySource::open(&root).unwrap_or_else(|_| ReplaySource {
            fs: RootedFs::new(&root),
            shown_root: root,
            _composed: None,
            nccl_logs: Vec::new(),
            perftest_logs: (Vec::new(), Duration::from_secs(10)),
            state_dir: None,
            kernel_log: None,
            kernel_log_read: std::sync::OnceLock::new(),
        })
    }

    /// Judge this kernel log instead of the capture's `kmsg.txt` (a probe option given on the
    /// command line replaces the recorded answer, DESIGN "Sources").
    pub fn with_kernel_log(mut self, path: Option<PathBuf>, wait: Duration) -> Self {
        self.kernel_log = path.map(|p| (p, wait));
        self.kernel_log_read = std::sync::OnceLock::new();
        self
    }

    /// `--kernel-log` when given, else the capture's `kmsg.txt`, once per source.
    fn kernel_log_read(&self) -> &Result<Option<kernel_log::KernelLogText>, FsError> {
        self.kernel_log_read.get_or_init(|| match &self.kernel_log {
            Some((path, wait)) => kernel_log::read_named(path, *wait).map(Some),
            None => kernel_log::read_rooted(&self.fs, KMSG_TXT, false),
        })
    }

    /// Keep the history in this directory instead of reading the capture's own (a probe option
    /// given on the command line replaces the recorded answer).
    pub fn with_state_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.state_dir = dir.map(state_dir::StateDir::new);
        self
    }

    /// Judge these saved perftest outputs too (`rdma.perftest_log`).
    pub fn with_perftest_logs(mut self, logs: Vec<PathBuf>, wait: Duration) -> Self {
        self.perftest_logs = (logs, wait);
        self
    }

    /// Judge these NCCL logs instead of the capture's `.gpudoctor/nccl/*.log`.
    pub fn with_nccl_logs(mut self, logs: Vec<PathBuf>) -> Self {
        self.nccl_logs = logs;
        self
    }

    /// Record every file access into `trace`, the probe answers in `.gpudoctor/` included: which
    /// files a replay reads (tests/bad_input_corpus.rs damages exactly those).
    pub fn with_trace(mut self, trace: std::sync::Arc<std::sync::Mutex<rooted::Trace>>) -> Self {
        self.fs = self.fs.with_trace(trace);
        self
    }
}

impl Source for ReplaySource {
    fn release_at_exit(mut self: Box<Self>) {
        // The composed tree is removed; the reads remembered and the descriptors kept go with
        // the process.
        drop(self._composed.take());
        std::mem::forget(self);
    }
    fn kind(&self) -> SourceKind {
        SourceKind::Replay
    }
    fn root(&self) -> &Path {
        &self.shown_root
    }
    fn captured_at(&self) -> Option<String> {
        capture_time(&capture_manifest(&self.fs).ok()?)
    }
    fn fs(&self) -> &RootedFs {
        &self.fs
    }
    fn node_changed(&self) -> Option<String> {
        let manifest = capture_manifest(&self.fs).ok()?;
        manifest["node_changed"]["reason"]
            .as_str()
            .map(str::to_string)
    }
    fn nvml(&self) -> NvmlFacts {
        match self.fs.read_to_string(NVML_JSON) {
            Ok(text) => parse_nvml_json(&text).unwrap_or_else(|err| {
                NvmlFacts::failed(
                    NvmlErrorKind::Unreadable,
                    format!("{NVML_JSON}: does not parse: {err}"),
                )
            }),
            Err(err) if err.is_missing() => NvmlFacts::failed(
                NvmlErrorKind::NotRecorded,
                format!("{NVML_JSON}: not in this capture"),
            ),
            Err(err) => NvmlFacts::failed(NvmlErrorKind::Unreadable, err.to_string()),
        }
    }
    fn kernel_log(&self) -> Result<Option<(String, String)>, FsError> {
        text_and_origin(self.kernel_log_read())
    }
    /// The notes of this read, after those the capture was recorded with (`record` keeps them
    /// in the manifest: its `kmsg.txt` holds the text already repaired).
    fn kernel_log_notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = match (&self.kernel_log, capture_manifest(&self.fs)) {
            (None, Ok(manifest)) => manifest["kernel_log"]["notes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        notes.extend(notes_of(self.kernel_log_read()));
        notes
    }
    fn pod_resources(&self) -> PodResourcesFacts {
        match self.fs.read_to_string(POD_RESOURCES_JSON) {
            Ok(text) => crate::answers::pod_resources::parse_pod_resources_json(&text)
                .unwrap_or_else(|err| {
                    PodResourcesFacts::failed(
                        POD_RESOURCES_SOCKET,
                        RpcErrorKind::Other,
                        format!("{POD_RESOURCES_JSON}: does not parse: {err}"),
                    )
                }),
            Err(err) if err.is_missing() => PodResourcesFacts::failed(
                POD_RESOURCES_SOCKET,
                RpcErrorKind::NotAvailable,
                format!("{POD_RESOURCES_JSON}: not in this capture"),
            ),
            Err(err) => PodResourcesFacts::failed(
                POD_RESOURCES_SOCKET,
                RpcErrorKind::Other,
                err.to_string(),
            ),
        }
    }
    fn env_vars(&self) -> BTreeMap<String, String> {
        self.fs
            .read_to_string(ENV_JSON)
            .ok()
            .and_then(|text| serde_json::from_str::<BTreeMap<String, String>>(&text).ok())
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| is_read_env(k))
            .collect()
    }
    fn env_error(&self) -> Option<String> {
        match self.fs.read_to_string(ENV_JSON) {
            Ok(text) => serde_json::from_str::<BTreeMap<String, String>>(&text)
                .err()
                .map(|e| format!("{ENV_JSON}: does not parse as an object of strings: {e}")),
            Err(err) if err.is_missing() => None,
            Err(err) => Some(err.to_string()),
        }
    }
    /// The figures `record` kept in `.gpudoctor/statvfs.json`; none for a directory it did
    /// not look at or a capture without the file.
    fn fs_stat(&self, rel: &str) -> Option<crate::answers::fs_stat::StatAnswer> {
        use crate::answers::fs_stat::{STATVFS_JSON, StatAnswer, parse_statvfs_json};
        let failed = |error: String| Some(StatAnswer::Failed { error });
        let text = match self.fs.read_to_string(STATVFS_JSON) {
            Ok(text) => text,
            Err(err) if err.is_missing() => return None,
            Err(err) => return failed(err.to_string()),
        };
        match parse_statvfs_json(&text) {
            Ok(mut map) => map.remove(rel),
            Err(err) => failed(format!("{STATVFS_JSON}: {err}")),
        }
    }
    fn baseline(
        &self,
    ) -> Result<Option<crate::answers::baseline::Baseline>, crate::answers::FactError> {
        let path = crate::answers::baseline::SAMPLE_JSON;
        match self.fs.read_to_string(path) {
            Ok(text) => {
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| crate::answers::FactError {
                        path: path.to_string(),
                        message: format!("does not parse: {e}"),
                    })
            }
            Err(err) if err.is_missing() => Ok(None),
            Err(err) => Err(err.into()),
        }
    }
    fn nccl(&self) -> NcclProbe {
        if self.nccl_logs.is_empty() {
            nccl::read_capture(&self.fs)
        } else {
            nccl::read_user_logs(&self.nccl_logs)
        }
    }
    fn cuda(&self, _plan: &dyn Fn() -> CudaPlan) -> CudaProbe {
        cuda::read_capture(&self.fs)
    }
    /// `--perftest-log` when given; else the outputs the capture was recorded with.
    fn perftest_logs(&self) -> Vec<(PathBuf, Result<String, String>)> {
        if self.perftest_logs.0.is_empty() {
            return perftest_log::read_capture(&self.fs);
        }
        perftest_log::read_all(&self.perftest_logs.0, self.perftest_logs.1)
    }
    fn save_history(&self, history: &crate::answers::history::History) -> Result<(), String> {
        match &self.state_dir {
            Some(state) => state.save(history),
            None => Err("a capture's own state is read-only".to_string()),
        }
    }
    /// `--state-dir` when given; else the capture's recorded state, read-only: judging a
    /// capture never changes it.
    fn history(&self) -> Option<crate::answers::history::HistoryAnswer> {
        if let Some(state) = &self.state_dir {
            return Some(state.answer(self.perftest_logs.1));
        }
        match self.fs.read_to_string(state_dir::IN_CAPTURE) {
            Ok(text) => Some((
                state_dir::IN_CAPTURE.to_string(),
                false,
                state_dir::parse(&text, state_dir::IN_CAPTURE),
            )),
            Err(err) if err.is_missing() => None,
            Err(err) => Some((
                state_dir::IN_CAPTURE.to_string(),
                false,
                Err(err.to_string()),
            )),
        }
    }
    fn gpudirect(&self, _targets: &dyn Fn() -> Vec<GdrTarget>) -> GdrProbe {
        gpudirect::read_capture(&self.fs)
    }
}

/// The capture format this gpudoctor writes and reads (`format_version` in the manifest).
pub const CAPTURE_FORMAT_VERSION: u32 = 1;

/// Why a root that has the shape of a capture cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{root} holds {CAPTURE_DIR}/ but is not a complete capture: {why}; re-record it (`gpudoctor record`), or remove {CAPTURE_DIR}/ to read the directory as a live root"
)]
pub struct NotACapture {
    pub root: String,
    pub why: String,
}

/// The manifest of the capture `fs` is rooted at, checked: a JSON object whose
/// `format_version` this gpudoctor reads. Read like every file (inside the root, capped).
pub fn capture_manifest(fs: &RootedFs) -> Result<serde_json::Value, String> {
    let text = match fs.read_to_string(MANIFEST) {
        Ok(text) => text,
        Err(err) if err.is_missing() => {
            return Err(format!(
                "no {MANIFEST} (a capture is complete only once its manifest is written: cut short?)"
            ));
        }
        Err(err) => return Err(err.to_string()),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{MANIFEST} does not parse: {e}"))?;
    match value.get("format_version").and_then(|v| v.as_u64()) {
        Some(v) if v >= 1 && v <= u64::from(CAPTURE_FORMAT_VERSION) => Ok(value),
        Some(v) => Err(format!(
            "{MANIFEST} has format_version {v}; this gpudoctor reads {CAPTURE_FORMAT_VERSION}"
        )),
        None => Err(format!("{MANIFEST} has no format_version")),
    }
}

/// When a capture's node was read: its manifest's `time`, or — for a capture re-recorded from
/// another, which reads no node — the first capture's (`made.original.time`, followed down a
/// chain of re-recordings to the innermost that has one). Only a well-formed RFC 3339 UTC time counts (it is shown in the
/// report, and a manifest is node data).
pub fn capture_time(manifest: &serde_json::Value) -> Option<String> {
    let mut time = manifest.get("time");
    let mut made = manifest.get("made");
    for _ in 0..64 {
        let Some(original) = made.and_then(|m| m.get("original")) else {
            break;
        };
        // A hand-built fixture re-recorded has no time of its own: the recording's stands.
        if let Some(t) = original.get("time").filter(|t| !t.is_null()) {
            time = Some(t);
        }
        made = original.get("made");
    }
    // Said again in gpudoctor's own form: whatever else the text held does not reach a report.
    let seconds = crate::time::unix_seconds(time?.as_str()?)?;
    Some(crate::time::rfc3339(
        std::time::UNIX_EPOCH + Duration::from_secs(seconds),
    ))
}

/// Does `root` hold `.gpudoctor/` (the mark of a capture, complete or not)? Looked at without
/// following a link out of the root.
pub fn is_capture(root: &Path) -> bool {
    !matches!(RootedFs::new(root).entry_kind(CAPTURE_DIR), Err(err) if err.is_missing())
}
