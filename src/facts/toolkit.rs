//! The NVIDIA container stack on a node: the container toolkit (its `config.toml` and binaries),
//! the container runtime's view of it (containerd config plus imported drop-ins, the k3s/RKE2
//! copies, or CRI-O drop-ins), GPU Operator validation markers, and whether gpudoctor itself
//! runs inside a Pod. Parsers are pure; `gather_*` read through a [`Source`]; nothing judges.
//!
//! Sources: reference/kubernetes.md §5 (toolkit config, containerd v2/v3 runtime entries,
//! `enable_cdi`, imports), §7 (validator markers); CRI-O's `crio.conf(5)` (`[crio.runtime]
//! default_runtime`, `[crio.runtime.runtimes.<name>] runtime_path`, drop-ins in
//! `/etc/crio/crio.conf.d`, CDI always on since CRI-O 1.23).

use std::collections::BTreeMap;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

/// The toolkit's config (kubernetes.md §5), and the GPU Operator's copy (its toolkit container
/// sets `XDG_CONFIG_HOME=/usr/local/nvidia/toolkit/.config`).
pub const TOOLKIT_CONFIGS: &[&str] = &[
    "etc/nvidia-container-runtime/config.toml",
    "usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml",
];

/// Where the toolkit's binaries live: distribution packages, manual installs, the operator.
pub const TOOLKIT_BINARIES: &[&str] = &[
    "usr/bin/nvidia-container-runtime",
    "usr/bin/nvidia-ctk",
    "usr/bin/nvidia-container-runtime-hook",
    "usr/local/bin/nvidia-container-runtime",
    "usr/local/bin/nvidia-ctk",
    "usr/local/nvidia/toolkit/nvidia-container-runtime",
    "usr/local/nvidia/toolkit/nvidia-ctk",
];

/// containerd configs, most specific first: k3s and RKE2 run their own containerd with a
/// generated config; everything else reads /etc/containerd/config.toml.
pub const CONTAINERD_CONFIGS: &[&str] = &[
    "var/lib/rancher/k3s/agent/etc/containerd/config.toml",
    "var/lib/rancher/rke2/agent/etc/containerd/config.toml",
    "etc/containerd/config.toml",
];

/// GKE's driver installer takes the toolkit's place: it installs the driver's user-space files
/// on the host under `/home/kubernetes/bin/nvidia` (container-engine-accelerators'
/// nvidia-driver-installer DaemonSets: `NVIDIA_INSTALL_DIR_HOST=/home/kubernetes/bin/nvidia`,
/// libraries in its `lib64`), and GKE's own device plugin mounts that directory into every GPU
/// container at `/usr/local/nvidia` with the `/dev/nvidia*` nodes (cmd/nvidia_gpu/nvidia_gpu.go:
/// `-host-path`, `-container-path`), so GKE's containerd has no nvidia handler and no CDI
/// (kubernetes cluster/gce/gci: `gke-setup-containerd` writes `default_runtime_name = "runc"`).
pub const GKE_DRIVER_DIR: &str = "home/kubernetes/bin/nvidia";
/// What marks the installer's layout as complete: the driver libraries it puts in `lib64`.
pub const GKE_DRIVER_LIBS: &[&str] = &[
    "home/kubernetes/bin/nvidia/lib64/libnvidia-ml.so.1",
    "home/kubernetes/bin/nvidia/lib64/libcuda.so.1",
];

pub const CRIO_CONFIG: &str = "etc/crio/crio.conf";
pub const CRIO_DROPINS: &str = "etc/crio/crio.conf.d";

/// GPU Operator validator markers (kubernetes.md §7).
pub const VALIDATIONS_DIR: &str = "run/nvidia/validations";
/// The init chain, in order: driver → toolkit → cuda → plugin.
pub const VALIDATION_STAGES: &[&str] = &["driver", "toolkit", "cuda", "plugin"];

/// The service-account mount every Pod gets (unless automount is off).
pub const SERVICE_ACCOUNT_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";

/// Most containerd files followed through `imports` (drop-ins of drop-ins), so a loop ends.
const MAX_IMPORTED_FILES: usize = 64;

/// A TOML syntax error as "line L, column C: message".
pub fn toml_error(text: &str, err: &toml::de::Error) -> ParseError {
    match err.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            ParseError::new(format!(
                "line {line}, column {column}: {}",
                err.message().trim()
            ))
        }
        None => ParseError::new(err.message().trim().to_string()),
    }
}

/// 1-based line and column of a byte offset.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

fn parse_table(text: &str) -> Result<toml::Table, ParseError> {
    toml::from_str::<toml::Table>(text).map_err(|e| toml_error(text, &e))
}

/// Walk nested tables by key.
fn lookup<'a>(table: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (first, rest) = path.split_first()?;
    let value = table.get(*first)?;
    if rest.is_empty() {
        return Some(value);
    }
    lookup(value.as_table()?, rest)
}

fn strings(value: Option<&toml::Value>) -> Vec<String> {
    value
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The toolkit's own config.

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolkitConfig {
    /// `[nvidia-container-runtime] mode`: auto | legacy | cdi | csv (default auto).
    pub mode: Option<String>,
    /// `[nvidia-container-runtime.modes.cdi] spec-dirs`.
    pub cdi_spec_dirs: Vec<String>,
    /// `[nvidia-container-runtime.modes.cdi] default-kind`.
    pub cdi_default_kind: Option<String>,
}

pub fn parse_toolkit_config(text: &str) -> Result<ToolkitConfig, ParseError> {
    let table = parse_table(text)?;
    let runtime = ["nvidia-container-runtime"];
    let cdi = ["nvidia-container-runtime", "modes", "cdi"];
    let at = |path: &[&str], key: &str| {
        let mut full = path.to_vec();
        full.push(key);
        lookup(&table, &full).cloned()
    };
    Ok(ToolkitConfig {
        mode: at(&runtime, "mode").and_then(|v| v.as_str().map(str::to_string)),
        cdi_spec_dirs: strings(at(&cdi, "spec-dirs").as_ref()),
        cdi_default_kind: at(&cdi, "default-kind").and_then(|v| v.as_str().map(str::to_string)),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolkitFacts {
    /// The first config found, parsed (or why not).
    pub config: Option<(String, Result<ToolkitConfig, FactError>)>,
    /// Toolkit binaries present under the root.
    pub binaries: Vec<String>,
    /// GKE's driver installer: `None` without its directory, else the libraries of
    /// [`GKE_DRIVER_LIBS`] present in it.
    pub gke_driver: Option<Vec<String>>,
}

impl ToolkitFacts {
    /// GKE's installer layout is complete (both driver libraries in its `lib64`): GPUs reach
    /// containers through GKE's device plugin, not through a toolkit.
    pub fn gke_installer(&self) -> bool {
        self.gke_driver
            .as_ref()
            .is_some_and(|libs| libs.len() == GKE_DRIVER_LIBS.len())
    }
}

pub fn gather_toolkit(source: &dyn Source) -> ToolkitFacts {
    let config = TOOLKIT_CONFIGS
        .iter()
        .find_map(|path| match source.read_to_string(path) {
            Ok(text) => Some((
                path.to_string(),
                parse_toolkit_config(&text).map_err(|e| syntax(path, e)),
            )),
            Err(err) if err.is_missing() => None,
            Err(err) => Some((path.to_string(), Err(FactError::from(err)))),
        });
    let binaries = TOOLKIT_BINARIES
        .iter()
        .filter(|p| source.exists(p))
        .map(|p| p.to_string())
        .collect();
    let gke_driver = source.exists(GKE_DRIVER_DIR).then(|| {
        GKE_DRIVER_LIBS
            .iter()
            .filter(|p| source.exists(p))
            .map(|p| p.to_string())
            .collect()
    });
    ToolkitFacts {
        config,
        binaries,
        gke_driver,
    }
}

/// A syntax error in a config file: the message already carries line and column.
fn syntax(path: &str, err: ParseError) -> FactError {
    FactError {
        path: path.to_string(),
        message: format!("syntax error at {}", err.0),
    }
}

// ---------------------------------------------------------------------------------------------
// The container runtime.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    Containerd,
    Crio,
}

impl RuntimeKind {
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Containerd => "containerd",
            RuntimeKind::Crio => "cri-o",
        }
    }
}

/// A runtime handler (`runtimeClassName` target) that runs the NVIDIA runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    pub name: String,
    /// `options.BinaryName` (containerd) or `runtime_path` (CRI-O).
    pub binary: Option<String>,
    /// The file that declared it.
    pub file: String,
}

/// What one runtime config (with its drop-ins) says about GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// containerd `version` (1, 2, 3); `None` for CRI-O or when absent.
    pub version: Option<i64>,
    pub nvidia_handlers: Vec<Handler>,
    /// Every handler name declared (to say what is there when no NVIDIA one is).
    pub handlers: Vec<String>,
    pub default_runtime: Option<String>,
    /// CDI injection on: `enable_cdi = true` (containerd 1.7), default on containerd 2.x
    /// (`version = 3`) and CRI-O ≥ 1.23 unless switched off.
    pub cdi_enabled: Option<bool>,
    pub cdi_spec_dirs: Vec<String>,
    /// containerd `imports` patterns, as written.
    pub imports: Vec<String>,
    /// Where the runtime keeps images and containers: containerd's top-level `root`
    /// (containerd `cmd/containerd/server/config`, default `/var/lib/containerd`), CRI-O's
    /// `[crio] root` (crio.conf(5), default `/var/lib/containers/storage`); as written.
    pub root: Option<String>,
}

fn is_nvidia_handler(name: &str, binary: Option<&str>) -> bool {
    name.contains("nvidia") || binary.is_some_and(|b| b.contains("nvidia-container-runtime"))
}

/// One containerd config file. Later files (imports) override earlier ones: merge with
/// [`RuntimeSettings::merge`].
pub fn parse_containerd(text: &str, file: &str) -> Result<RuntimeSettings, ParseError> {
    let table = parse_table(text)?;
    let version = table.get("version").and_then(|v| v.as_integer());
    // v3: plugins."io.containerd.cri.v1.runtime"; v2: plugins."io.containerd.grpc.v1.cri";
    // v1: plugins.cri (kubernetes.md §5).
    let cri = [
        "io.containerd.cri.v1.runtime",
        "io.containerd.grpc.v1.cri",
        "cri",
    ]
    .iter()
    .find_map(|name| lookup(&table, &["plugins", name]).and_then(|v| v.as_table()));
    let mut settings = RuntimeSettings {
        version,
        imports: strings(table.get("imports")),
        root: table
            .get("root")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        ..Default::default()
    };
    if let Some(cri) = cri {
        if let Some(runtimes) = lookup(cri, &["containerd", "runtimes"]).and_then(|v| v.as_table())
        {
            for (name, entry) in runtimes {
                let binary = entry
                    .as_table()
                    .and_then(|t| lookup(t, &["options", "BinaryName"]))
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
                settings.handlers.push(name.clone());
                if is_nvidia_handler(name, binary.as_deref()) {
                    settings.nvidia_handlers.push(Handler {
                        name: name.clone(),
                        binary,
                        file: file.to_string(),
                    });
                }
            }
        }
        settings.default_runtime = lookup(cri, &["containerd", "default_runtime_name"])
            .and_then(|v| v.as_str())
            .map(str::to_string);
        settings.cdi_enabled = cri.get("enable_cdi").and_then(|v| v.as_bool());
        settings.cdi_spec_dirs = strings(cri.get("cdi_spec_dirs"));
    }
    Ok(settings)
}

/// One CRI-O config file or drop-in.
pub fn parse_crio(text: &str, file: &str) -> Result<RuntimeSettings, ParseError> {
    let table = parse_table(text)?;
    let mut settings = RuntimeSettings {
        root: lookup(&table, &["crio", "root"])
            .and_then(|v| v.as_str())
            .map(str::to_string),
        ..Default::default()
    };
    if let Some(runtime) = lookup(&table, &["crio", "runtime"]).and_then(|v| v.as_table()) {
        settings.default_runtime = runtime
            .get("default_runtime")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        settings.cdi_spec_dirs = strings(runtime.get("cdi_spec_dirs"));
        if let Some(runtimes) = runtime.get("runtimes").and_then(|v| v.as_table()) {
            for (name, entry) in runtimes {
                let binary = entry
                    .get("runtime_path")
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
                settings.handlers.push(name.clone());
                if is_nvidia_handler(name, binary.as_deref()) {
                    settings.nvidia_handlers.push(Handler {
                        name: name.clone(),
                        binary,
                        file: file.to_string(),
                    });
                }
            }
        }
    }
    Ok(settings)
}

impl RuntimeSettings {
    /// Lay `later` (an imported drop-in) over `self`: scalars it sets win, handlers add up.
    pub fn merge(&mut self, later: RuntimeSettings) {
        for handler in later.nvidia_handlers {
            self.nvidia_handlers.retain(|h| h.name != handler.name);
            self.nvidia_handlers.push(handler);
        }
        for name in later.handlers {
            if !self.handlers.contains(&name) {
                self.handlers.push(name);
            }
        }
        if later.default_runtime.is_some() {
            self.default_runtime = later.default_runtime;
        }
        if later.cdi_enabled.is_some() {
            self.cdi_enabled = later.cdi_enabled;
        }
        if later.root.is_some() {
            self.root = later.root;
        }
        if !later.cdi_spec_dirs.is_empty() {
            self.cdi_spec_dirs = later.cdi_spec_dirs;
        }
    }

    /// Whether CDI injection is on, with the runtime's own default when unset.
    pub fn cdi_on(&self, kind: RuntimeKind) -> bool {
        self.cdi_enabled.unwrap_or(match kind {
            // containerd 2.x turned CDI on by default; 1.7 (`version = 2`) had it off.
            RuntimeKind::Containerd => self.version.is_some_and(|v| v >= 3),
            RuntimeKind::Crio => true,
        })
    }

    /// The handler pods get without a RuntimeClass, with each runtime's built-in default.
    pub fn effective_default(&self) -> &str {
        self.default_runtime.as_deref().unwrap_or("runc")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeFacts {
    pub kind: RuntimeKind,
    /// Every file read, main config first.
    pub files: Vec<String>,
    pub settings: RuntimeSettings,
}

/// `*` and `?` in the last path component (containerd imports use `filepath.Glob`).
fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// Root-relative files an import pattern names (relative patterns are relative to the
/// importing file's directory).
fn expand_import(source: &dyn Source, importer: &str, pattern: &str) -> Vec<String> {
    let full = if let Some(abs) = pattern.strip_prefix('/') {
        abs.to_string()
    } else {
        match importer.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{pattern}"),
            None => pattern.to_string(),
        }
    };
    let (dir, last) = full.rsplit_once('/').unwrap_or(("", full.as_str()));
    if !last.contains(['*', '?']) {
        return vec![full.clone()];
    }
    source
        .list_dir(dir, &|n| glob_match(last, n))
        .unwrap_or_default()
        .into_iter()
        .map(|n| format!("{dir}/{n}"))
        .collect()
}

/// The node's container runtime config: containerd (first of [`CONTAINERD_CONFIGS`], imports
/// followed) or CRI-O (`crio.conf` then drop-ins in name order). `Ok(None)`: neither is there.
pub fn gather_runtime(source: &dyn Source) -> Result<Option<RuntimeFacts>, FactError> {
    if let Some(main) = CONTAINERD_CONFIGS.iter().find(|p| source.exists(p)) {
        let mut files = Vec::new();
        let mut settings: Option<RuntimeSettings> = None;
        let mut queue = vec![main.to_string()];
        while let Some(file) = queue.pop() {
            if files.contains(&file) || files.len() >= MAX_IMPORTED_FILES {
                continue;
            }
            let text = match source.read_to_string(&file) {
                Ok(text) => text,
                // An import pattern that names a missing file is ignored by containerd too.
                Err(err) if err.is_missing() && !files.is_empty() => continue,
                Err(err) => return Err(FactError::from(err)),
            };
            let parsed = parse_containerd(&text, &file).map_err(|e| syntax(&file, e))?;
            let mut imported: Vec<String> = parsed
                .imports
                .iter()
                .flat_map(|p| expand_import(source, &file, p))
                .collect();
            imported.reverse();
            queue.extend(imported);
            files.push(file);
            match &mut settings {
                Some(s) => s.merge(parsed),
                None => settings = Some(parsed),
            }
        }
        return Ok(Some(RuntimeFacts {
            kind: RuntimeKind::Containerd,
            files,
            settings: settings.unwrap_or_default(),
        }));
    }
    let mut files: Vec<String> = Vec::new();
    if source.exists(CRIO_CONFIG) {
        files.push(CRIO_CONFIG.to_string());
    }
    // Every file of the directory in name order, whatever its extension (crio.conf.d(5):
    // "Files in the configuration directory are sorted by name in lexical order and applied in
    // that order"); subdirectories are not files.
    if let Ok(names) = source.list_dir(CRIO_DROPINS, &|_| true) {
        files.extend(
            names
                .into_iter()
                .map(|n| format!("{CRIO_DROPINS}/{n}"))
                .filter(|path| source.read_dir(path).is_err()),
        );
    }
    if files.is_empty() {
        return Ok(None);
    }
    let mut settings = RuntimeSettings::default();
    for file in &files {
        let text = source.read_to_string(file).map_err(FactError::from)?;
        settings.merge(parse_crio(&text, file).map_err(|e| syntax(file, e))?);
    }
    Ok(Some(RuntimeFacts {
        kind: RuntimeKind::Crio,
        files,
        settings,
    }))
}

// ---------------------------------------------------------------------------------------------
// GPU Operator markers and the Pod we may run in.

/// `Ok(None)`: no validation directory (not a GPU Operator node); else the marker files there.
pub fn gather_validations(source: &dyn Source) -> Result<Option<Vec<String>>, FactError> {
    match source.list_dir(VALIDATIONS_DIR, &|_| true) {
        Ok(names) => Ok(Some(names)),
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(FactError::from(err)),
    }
}

/// Signs that gpudoctor runs inside a Pod, and what the container was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodContext {
    /// `KUBERNETES_SERVICE_HOST` is set (the kubelet sets it in every container).
    pub env_says_pod: bool,
    /// The service-account mount exists under the root.
    pub service_account: bool,
    /// `NVIDIA_VISIBLE_DEVICES` as the container sees it.
    pub visible_devices: Option<String>,
}

impl PodContext {
    pub fn in_pod(&self) -> bool {
        self.env_says_pod || self.service_account
    }
}

pub fn gather_pod_context(source: &dyn Source, env: &BTreeMap<String, String>) -> PodContext {
    PodContext {
        env_says_pod: env.contains_key("KUBERNETES_SERVICE_HOST"),
        service_account: source.exists(SERVICE_ACCOUNT_DIR)
            || source.exists("run/secrets/kubernetes.io/serviceaccount"),
        visible_devices: env.get("NVIDIA_VISIBLE_DEVICES").cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nvidia-ctk runtime configure --runtime=containerd --set-as-default` on containerd 1.7
    /// (kubernetes.md §5).
    const CONTAINERD_V2: &str = r#"version = 2

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    enable_cdi = true
    cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]

    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          privileged_without_host_devices = false
          runtime_engine = ""
          runtime_root = ""
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/bin/nvidia-container-runtime"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            SystemdCgroup = true
"#;

    #[test]
    fn containerd_v2_nvidia_default_and_cdi() {
        let s = parse_containerd(CONTAINERD_V2, "etc/containerd/config.toml").unwrap();
        assert_eq!(s.version, Some(2));
        assert_eq!(s.nvidia_handlers.len(), 1);
        assert_eq!(
            s.nvidia_handlers[0].binary.as_deref(),
            Some("/usr/bin/nvidia-container-runtime")
        );
        assert_eq!(s.default_runtime.as_deref(), Some("nvidia"));
        assert!(s.cdi_on(RuntimeKind::Containerd));
        assert_eq!(s.handlers, vec!["nvidia", "runc"]);
    }

    #[test]
    fn containerd_v3_runtime_in_a_dropin_and_cdi_default_on() {
        let main = "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n";
        let dropin = r#"version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
"#;
        let mut s = parse_containerd(main, "etc/containerd/config.toml").unwrap();
        assert_eq!(s.imports, vec!["/etc/containerd/conf.d/*.toml"]);
        s.merge(parse_containerd(dropin, "etc/containerd/conf.d/99-nvidia.toml").unwrap());
        assert_eq!(
            s.nvidia_handlers[0].file,
            "etc/containerd/conf.d/99-nvidia.toml"
        );
        assert!(s.cdi_on(RuntimeKind::Containerd));
        assert_eq!(s.effective_default(), "runc");
    }

    #[test]
    fn containerd_without_nvidia() {
        let text = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n";
        let s = parse_containerd(text, "c").unwrap();
        assert!(s.nvidia_handlers.is_empty());
        assert!(!s.cdi_on(RuntimeKind::Containerd));
    }

    #[test]
    fn crio_dropin_from_nvidia_ctk() {
        let text = "[crio]\n  [crio.runtime]\n    default_runtime = \"nvidia\"\n    [crio.runtime.runtimes]\n      [crio.runtime.runtimes.nvidia]\n        runtime_path = \"/usr/bin/nvidia-container-runtime\"\n        runtime_type = \"oci\"\n";
        let s = parse_crio(text, "etc/crio/crio.conf.d/99-nvidia.toml").unwrap();
        assert_eq!(s.nvidia_handlers[0].name, "nvidia");
        assert_eq!(s.default_runtime.as_deref(), Some("nvidia"));
        assert!(s.cdi_on(RuntimeKind::Crio));
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let text = "version = 2\n[plugins\n  x = 1\n";
        let err = parse_containerd(text, "c").unwrap_err();
        assert!(err.0.starts_with("line 2, column"), "{}", err.0);
    }

    #[test]
    fn toolkit_config_mode_and_spec_dirs() {
        // Shape of `nvidia-ctk config default` (kubernetes.md §5).
        let text = r#"#accept-nvidia-visible-devices-as-volume-mounts = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig.real"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]

[nvidia-container-runtime.modes.csv]
mount-spec-path = "/etc/nvidia-container-runtime/host-files-for-container.d"

[nvidia-ctk]
path = "nvidia-ctk"
"#;
        let c = parse_toolkit_config(text).unwrap();
        assert_eq!(c.mode.as_deref(), Some("auto"));
        assert_eq!(c.cdi_spec_dirs, vec!["/etc/cdi", "/var/run/cdi"]);
        assert_eq!(c.cdi_default_kind.as_deref(), Some("nvidia.com/gpu"));
        assert!(parse_toolkit_config("mode = \"cdi\"\nmode = \"legacy\"\n").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("*.toml", "99-nvidia.toml"));
        assert!(!glob_match("*.toml", "99-nvidia.conf"));
        assert!(glob_match("a?c", "abc"));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }
}
