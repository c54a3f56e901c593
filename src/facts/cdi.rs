//! CDI (Container Device Interface) specs: which device names a spec offers and which driver
//! version its library mounts were generated for. Pure parser plus a `gather` over the spec
//! directories; nothing judges.
//!
//! Sources: reference/kubernetes.md §6 (spec dirs `/etc/cdi` and `/var/run/cdi`, `*.yaml` and
//! `*.json`; device names `0`, `GPU-<uuid>`, `<gpu>:<mig>`, `all`, and toolkit 1.13's
//! `gpu<N>`; a spec whose library paths name another driver version is stale). Spec schema:
//! `cncf-tags/container-device-interface` `SPEC.md` (`cdiVersion`, `kind`, `devices[].name`,
//! `devices[].containerEdits`, top-level `containerEdits`).

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

/// Default spec directories, root-relative (kubernetes.md §6).
pub const CDI_DIRS: &[&str] = &["etc/cdi", "var/run/cdi"];

/// The kind NVIDIA's GPUs are offered under.
pub const NVIDIA_GPU_KIND: &str = "nvidia.com/gpu";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CdiSpec {
    /// Root-relative file.
    pub path: String,
    pub kind: String,
    /// `cdiVersion` as written (empty when absent).
    pub cdi_version: String,
    /// `devices[].name`, in file order.
    pub devices: Vec<String>,
    /// Driver versions found in library file names (`libcuda.so.550.54.15`).
    pub driver_versions: BTreeSet<String>,
}

#[derive(Deserialize)]
struct RawSpec {
    #[serde(default)]
    kind: String,
    #[serde(default, rename = "cdiVersion")]
    cdi_version: String,
    #[serde(default)]
    devices: Vec<RawDevice>,
}

#[derive(Deserialize)]
struct RawDevice {
    #[serde(default)]
    name: String,
}

/// Parse one spec (YAML, or JSON which is YAML too). Errors carry the line.
pub fn parse_cdi_spec(text: &str, path: &str) -> Result<CdiSpec, ParseError> {
    let value = super::yaml::parse_guarded(text, "cdi spec")?;
    let raw: RawSpec = serde_yaml_ng::from_value(value.clone())
        .map_err(|e| ParseError::new(format!("not a cdi spec: {e}")))?;
    if raw.kind.is_empty() {
        return Err(ParseError::new("not a cdi spec: no `kind`"));
    }
    let mut driver_versions = BTreeSet::new();
    collect_versions(&value, &mut driver_versions);
    Ok(CdiSpec {
        path: path.to_string(),
        kind: raw.kind,
        cdi_version: raw.cdi_version,
        devices: raw.devices.into_iter().map(|d| d.name).collect(),
        driver_versions,
    })
}

fn collect_versions(value: &serde_yaml_ng::Value, out: &mut BTreeSet<String>) {
    match value {
        serde_yaml_ng::Value::String(s) => {
            if let Some(v) = driver_version_in_path(s) {
                out.insert(v);
            }
        }
        serde_yaml_ng::Value::Sequence(items) => {
            items.iter().for_each(|v| collect_versions(v, out))
        }
        serde_yaml_ng::Value::Mapping(map) => map.values().for_each(|v| collect_versions(v, out)),
        serde_yaml_ng::Value::Tagged(t) => collect_versions(&t.value, out),
        _ => {}
    }
}

/// `…/libnvidia-ml.so.550.54.15` -> `550.54.15`: the driver's libraries carry its full
/// version; other libraries (`libc.so.6`) are not the driver's and are ignored.
pub fn driver_version_in_path(path: &str) -> Option<String> {
    let name = path.rsplit('/').next()?;
    if !(name.starts_with("libnvidia-") || name.starts_with("libcuda.")) {
        return None;
    }
    let (_, version) = name.split_once(".so.")?;
    let parts: Vec<&str> = version.split('.').collect();
    let numeric = parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    // The driver's versions have a three-digit major (470, 535, 550); `libcuda.so.1` does not.
    (numeric && parts[0].len() >= 3).then(|| version.to_string())
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CdiFacts {
    /// Directories looked in (root-relative).
    pub dirs: Vec<String>,
    pub specs: Vec<CdiSpec>,
    /// Spec files that could not be read or parsed.
    pub problems: Vec<FactError>,
}

impl CdiFacts {
    /// Specs of `kind`.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a CdiSpec> + 'a {
        self.specs.iter().filter(move |s| s.kind == kind)
    }
}

/// Read every `*.yaml`, `*.yml` and `*.json` in [`CDI_DIRS`] plus `extra_dirs` (absolute, from
/// the toolkit or runtime config).
pub fn gather(source: &dyn Source, extra_dirs: &[String]) -> CdiFacts {
    let mut dirs: Vec<String> = CDI_DIRS.iter().map(|d| d.to_string()).collect();
    for dir in extra_dirs {
        let rel = dir
            .trim_start_matches('/')
            .trim_end_matches('/')
            .to_string();
        if !rel.is_empty() && !dirs.contains(&rel) {
            dirs.push(rel);
        }
    }
    let mut facts = CdiFacts {
        dirs: dirs.clone(),
        ..Default::default()
    };
    // `var/run` is usually a link to `run`: read each real file once.
    let mut seen = BTreeSet::new();
    for dir in &dirs {
        let names = match source.list_dir(dir, &|n| {
            n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json")
        }) {
            Ok(names) => names,
            Err(err) if err.is_missing() => continue,
            Err(err) => {
                facts.problems.push(FactError::from(err));
                continue;
            }
        };
        for name in names {
            let path = format!("{dir}/{name}");
            if let Ok(real) = source.canonical(&path)
                && !seen.insert(real)
            {
                continue;
            }
            match source.read_to_string(&path) {
                Ok(text) => match parse_cdi_spec(&text, &path) {
                    Ok(spec) => facts.specs.push(spec),
                    Err(err) => facts.problems.push(FactError {
                        path: path.clone(),
                        message: err.0,
                    }),
                },
                Err(err) => facts.problems.push(FactError::from(err)),
            }
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed `nvidia-ctk cdi generate` output (toolkit 1.17, index and uuid names).
    const SPEC: &str = r#"---
cdiVersion: 0.5.0
containerEdits:
  deviceNodes:
  - path: /dev/nvidia-uvm
  - path: /dev/nvidiactl
  hooks:
  - args:
    - nvidia-cdi-hook
    - create-symlinks
    - --link
    - libnvidia-allocator.so.550.54.15::/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so
    hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
  mounts:
  - containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options:
    - ro
    - nosuid
    - nodev
    - bind
  - containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15
    hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15
    options: [ro, nosuid, nodev, bind]
devices:
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: "0"
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: GPU-0d3c9a3e-5a57-2b8e-1c1f-8a2c3f7e6b11
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: all
kind: nvidia.com/gpu
"#;

    #[test]
    fn nvidia_ctk_spec() {
        let spec = parse_cdi_spec(SPEC, "var/run/cdi/nvidia.yaml").unwrap();
        assert_eq!(spec.kind, NVIDIA_GPU_KIND);
        assert_eq!(
            spec.devices,
            vec!["0", "GPU-0d3c9a3e-5a57-2b8e-1c1f-8a2c3f7e6b11", "all"]
        );
        assert_eq!(
            spec.driver_versions.iter().collect::<Vec<_>>(),
            vec!["550.54.15"]
        );
    }

    #[test]
    fn json_spec_and_errors_with_lines() {
        let json = r#"{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"gpu0","containerEdits":{}}]}"#;
        assert_eq!(
            parse_cdi_spec(json, "x.json").unwrap().devices,
            vec!["gpu0"]
        );
        let bad = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\n  x: [\n";
        let err = parse_cdi_spec(bad, "x.yaml").unwrap_err();
        assert!(err.0.starts_with("line "), "{}", err.0);
        assert!(parse_cdi_spec("devices: []\n", "x.yaml").is_err());
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_libyaml_sees_it() {
        // Regression (tests/parser_properties.rs): 100 000 `[` took libyaml 36 s.
        let deep = format!(
            "kind: x\ndevices: {}{}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let started = std::time::Instant::now();
        let err = parse_cdi_spec(&deep, "x.yaml").unwrap_err();
        assert!(
            err.0.starts_with("line 2: more than 128 nested"),
            "{}",
            err.0
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // Brackets in quoted scalars and comments are text, not nesting.
        let brackets = "[".repeat(200);
        let quoted = format!(
            "kind: nvidia.com/gpu # {brackets}\ndevices:\n- name: \"{brackets}\\\"\"\n- name: '{brackets}''x'\n"
        );
        let spec = parse_cdi_spec(&quoted, "x.yaml").unwrap();
        assert_eq!(spec.devices.len(), 2);
        assert_eq!(spec.devices[1], format!("{brackets}'x"));
        // A quote inside a plain scalar opens nothing: the brackets after it still count.
        let hidden = format!("kind: x\"\ndevices: {}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            parse_cdi_spec(&hidden, "x.yaml")
                .unwrap_err()
                .0
                .contains("nested")
        );
        assert!(parse_cdi_spec(SPEC, "x.yaml").is_ok());
    }

    #[test]
    fn alias_expansion_is_bounded() {
        // Regression (tests/parser_properties.rs): 440 KB expanding to 500 million values.
        let wide = format!(
            "kind: x\nbase: &b [{}]\nmore: [{}]\n",
            vec!["x"; 10_000].join(","),
            vec!["*b"; 50_000].join(",")
        );
        let err = parse_cdi_spec(&wide, "x.yaml").unwrap_err();
        assert!(err.0.starts_with("50000 yaml aliases"), "{}", err.0);
        // A few aliases in a small spec are fine; `*` inside a scalar is not an alias.
        let small = "kind: nvidia.com/gpu\nedits: &e {env: [\"A=1\"]}\ndevices:\n- name: a*b\n  containerEdits: *e\n- name: \"*\"\n  containerEdits: *e\n";
        assert_eq!(
            parse_cdi_spec(small, "x.yaml").unwrap().devices,
            vec!["a*b", "*"]
        );
    }

    #[test]
    fn driver_versions_only_from_driver_libraries() {
        assert_eq!(
            driver_version_in_path("/usr/lib64/libnvidia-ptxjitcompiler.so.535.161.08").as_deref(),
            Some("535.161.08")
        );
        assert_eq!(
            driver_version_in_path("/lib/x86_64-linux-gnu/libc.so.6"),
            None
        );
        assert_eq!(driver_version_in_path("/usr/lib/libcuda.so.1"), None);
    }
}
