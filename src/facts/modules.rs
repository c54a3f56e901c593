//! Loaded kernel modules from `/proc/modules`, falling back to `/sys/module/<name>/initstate`
//! (reference/sysfs.md §10).
//!
//! `/proc/modules` is parsed by procfs-core's `KernelModules` (`FromBufRead`), fed the bytes the
//! rooted reader read (confinement, size cap and timeouts stay the source's). Its parser reads
//! the reference count as a number, so it refuses a kernel built without
//! `CONFIG_MODULE_UNLOAD`, which prints `- -` for count and users (`kernel/module/procfs.c`
//! `print_unload_info`) — Talos Linux, a Kubernetes GPU node OS, is one. For those lines the
//! hand-written [`parse_proc_modules_lines`] reads the same columns and ignores the count.

use std::collections::BTreeMap;

use serde::Serialize;

use super::trimmed;

use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const PROC_MODULES: &str = "proc/modules";
pub const SYS_MODULE: &str = "sys/module";

/// One `/proc/modules` line: `<name> <size> <refcount> <deps> <state> <address> [<taint>]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Module {
    pub name: String,
    /// `None` when read from `/sys/module` (no size there).
    pub size: Option<u64>,
    /// Modules that use this one (the `deps` column lists users, each followed by a comma).
    pub used_by: Vec<String>,
    /// `Live`, `Loading`, `Unloading` (`/proc/modules`) or `live`, `coming`, `going` (`initstate`).
    pub state: String,
}

impl Module {
    pub fn is_live(&self) -> bool {
        self.state.eq_ignore_ascii_case("live")
    }
}

/// The loaded modules and the file they were learnt from.
#[derive(Debug, Clone, Default)]
pub struct LoadedModules {
    pub from: String,
    pub modules: BTreeMap<String, Module>,
}

impl LoadedModules {
    pub fn get(&self, name: &str) -> Option<&Module> {
        self.modules.get(name)
    }
}

/// Parse `/proc/modules` (`kernel/module/procfs.c`, `m_show`): procfs-core's parser, then the
/// checks procfs-core does not make (module names, `[permanent]` is no user). Modules come out
/// sorted by name. A file procfs-core refuses goes through [`parse_proc_modules_lines`] (see the
/// module header), whose error is the one reported.
pub fn parse_proc_modules(text: &str) -> Result<Vec<Module>, ParseError> {
    use procfs_core::FromBufRead as _;
    let Ok(parsed) = procfs_core::KernelModules::from_buf_read(text.as_bytes()) else {
        let mut modules = parse_proc_modules_lines(text)?;
        modules.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(modules);
    };
    let mut modules = Vec::with_capacity(parsed.0.len());
    for (name, m) in parsed.0 {
        if !valid_name(&name) {
            return Err(ParseError::new(format!(
                "bad module name {:?}",
                super::pci::short(&name)
            )));
        }
        modules.push(Module {
            name,
            size: Some(u64::from(m.size)),
            used_by: m
                .used_by
                .into_iter()
                .filter(|d| d != "[permanent]")
                .collect(),
            state: m.state,
        });
    }
    modules.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(modules)
}

/// Module names are C identifiers the kernel also prints with `-` (`module_name()`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `/proc/modules` line by line, the count column not read: what a kernel without
/// `CONFIG_MODULE_UNLOAD` prints (`name size - - state address`), which procfs-core refuses.
pub fn parse_proc_modules_lines(text: &str) -> Result<Vec<Module>, ParseError> {
    let mut modules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 5 {
            return Err(ParseError::new(format!(
                "line {}: {} fields, expected at least 5",
                n + 1,
                fields.len()
            )));
        }
        let name = fields[0];
        if !valid_name(name) {
            return Err(ParseError::new(format!(
                "line {}: bad module name {:?}",
                n + 1,
                super::pci::short(name)
            )));
        }
        let size = fields[1].parse().map_err(|_| {
            ParseError::new(format!(
                "line {}: size {:?} is not a number",
                n + 1,
                super::pci::short(fields[1])
            ))
        })?;
        let used_by = match fields[3] {
            "-" => Vec::new(),
            deps => deps
                .split(',')
                .filter(|d| !d.is_empty() && *d != "[permanent]")
                .map(str::to_string)
                .collect(),
        };
        modules.push(Module {
            name: name.to_string(),
            size: Some(size),
            used_by,
            state: fields[4].to_string(),
        });
    }
    Ok(modules)
}

/// `/proc/modules`, or when it is absent, the `/sys/module/*/initstate` files (built-in modules
/// have a `/sys/module` directory but no `initstate`, so they do not count as loaded).
pub fn gather(source: &dyn Source) -> Result<LoadedModules, FactError> {
    match source.read_to_string(PROC_MODULES) {
        Ok(text) => {
            let modules =
                parse_proc_modules(&text).map_err(|e| FactError::parse(PROC_MODULES, e))?;
            Ok(LoadedModules {
                from: PROC_MODULES.into(),
                modules: modules.into_iter().map(|m| (m.name.clone(), m)).collect(),
            })
        }
        Err(err) if err.is_missing() => gather_sys_module(source).map_err(|sys_err| FactError {
            path: PROC_MODULES.into(),
            message: format!("not found, and {sys_err}"),
        }),
        Err(err) => Err(err.into()),
    }
}

fn gather_sys_module(source: &dyn Source) -> Result<LoadedModules, FactError> {
    let mut modules = BTreeMap::new();
    for name in source.read_dir(SYS_MODULE)? {
        let Ok(state) = source.read_to_string(&format!("{SYS_MODULE}/{name}/initstate")) else {
            continue;
        };
        modules.insert(
            name.clone(),
            Module {
                name,
                size: None,
                used_by: Vec::new(),
                state: trimmed(&state).to_string(),
            },
        );
    }
    Ok(LoadedModules {
        from: SYS_MODULE.into(),
        modules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as the kernel prints them (sysfs.md §10): users each followed by a comma, taint flags.
    const REAL: &str = "nvidia_uvm 4956160 4 - Live 0x0000000000000000 (POE)\n\
nvidia_drm 122880 0 - Live 0x0000000000000000 (POE)\n\
nvidia 54165504 270 nvidia_uvm,nvidia_peermem,nvidia_modeset, Live 0x0000000000000000 (POE)\n\
ib_core 438272 8 rdma_cm,ib_ipoib,ib_umad,mlx5_ib,ib_uverbs, Live 0x0000000000000000\n\
video 65536 1 [permanent], Live 0xffffffffc0a1f000\n";

    fn by_name<'m>(m: &'m [Module], name: &str) -> &'m Module {
        m.iter().find(|x| x.name == name).unwrap()
    }

    #[test]
    fn parses_real_proc_modules() {
        let m = parse_proc_modules(REAL).unwrap();
        assert_eq!(m.len(), 5);
        let nvidia = by_name(&m, "nvidia");
        assert_eq!(
            nvidia.used_by,
            vec!["nvidia_uvm", "nvidia_peermem", "nvidia_modeset"]
        );
        assert_eq!(nvidia.size, Some(54165504));
        assert!(by_name(&m, "nvidia_uvm").is_live());
        assert!(by_name(&m, "nvidia_uvm").used_by.is_empty());
        assert!(
            by_name(&m, "video").used_by.is_empty(),
            "[permanent] is no user"
        );
        // Sorted by name whatever procfs-core's map order.
        let names: Vec<&str> = m.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            ["ib_core", "nvidia", "nvidia_drm", "nvidia_uvm", "video"]
        );
    }

    /// A kernel without CONFIG_MODULE_UNLOAD: `talosctl read /proc/modules` on a Talos Linux
    /// GPU node, as printed in Sidero Labs' Talos guide "NVIDIA GPU (Proprietary drivers)",
    /// byte for byte. procfs-core refuses the `-` count; the line parser reads it.
    const TALOS: &str = "nvidia_uvm 1146880 - - Live 0xffffffffc2733000 (PO)
nvidia_drm 69632 - - Live 0xffffffffc2721000 (PO)
nvidia_modeset 1142784 - - Live 0xffffffffc25ea000 (PO)
nvidia 39047168 - - Live 0xffffffffc00ac000 (PO)
";

    #[test]
    fn parses_a_kernel_without_module_unload() {
        use procfs_core::FromBufRead as _;
        assert!(procfs_core::KernelModules::from_buf_read(TALOS.as_bytes()).is_err());
        let m = parse_proc_modules(TALOS).unwrap();
        assert_eq!(m.len(), 4);
        let nvidia = by_name(&m, "nvidia");
        assert!(nvidia.is_live());
        assert!(nvidia.used_by.is_empty());
        assert_eq!(nvidia.size, Some(39047168));
    }

    #[test]
    fn rejects_truncated_and_garbage_lines() {
        assert!(parse_proc_modules("nvidia 54165504\n").is_err());
        assert!(parse_proc_modules("nv/idia 1 0 - Live 0x0\n").is_err());
        assert!(parse_proc_modules("nvidia big 0 - Live 0x0\n").is_err());
        assert!(parse_proc_modules("").unwrap().is_empty());
    }
}
