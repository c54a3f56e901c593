//! The `/dev/char/<major>:<minor>` links of the NVIDIA device nodes. systemd turns a container's
//! device rules into `/dev/char/M:m` paths when it rebuilds the cgroup (`systemctl
//! daemon-reload` with the systemd cgroup driver); a node with no link there loses the rule, and
//! every container that held the GPU then gets "Failed to initialize NVML: Unknown Error". udev
//! makes these links for the devices it creates; the NVIDIA nodes are made by `nvidia-modprobe`
//! or the driver container, outside udev, so nothing links them unless `nvidia-ctk system
//! create-dev-char-symlinks` does (the GPU Operator's validator runs it).
//!
//! Which node has which number is NVIDIA's fixed layout, as that command computes it with
//! `--create-all` (`nvidia-container-toolkit` `cmd/nvidia-ctk/system/create-dev-char-symlinks`
//! `all.go`, `internal/info/proc/devices`): the GPU major (`nvidia-frontend`, or `nvidia`) with
//! minor N for `/dev/nvidiaN`, 255 for `nvidiactl`, 254 for `nvidia-modeset`; the `nvidia-uvm`
//! major with 0 for `nvidia-uvm` and 1 for `nvidia-uvm-tools`; the `nvidia-caps` major with N for
//! `nvidia-caps/nvidia-capN`. Majors come from /proc/devices, so a capture (which holds device
//! nodes as plain files) is judged as the node is. NVSwitch, NVLink and GDS nodes are left out, as
//! the command leaves them out (`existing.go` `nodeIsBlocked`).

use serde::Serialize;

use crate::answers::FactError;
use crate::source::Source;

pub const DEV_CHAR: &str = "dev/char";

/// One NVIDIA device node that exists, the link it needs, and what is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeLink {
    /// `dev/nvidia0`.
    pub node: String,
    /// `dev/char/195:0`; `None` when /proc/devices has no major for the node's driver.
    pub link: Option<String>,
    pub state: LinkState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// A link to the node (`../nvidia0` as udev writes it, `/dev/nvidia0` as nvidia-ctk does).
    Present,
    Missing,
    /// A link, or something else, that points elsewhere: the target as read.
    Elsewhere(String),
    /// The major is unknown: not judged.
    Unknown,
}

/// The NVIDIA character majors from /proc/devices (`fs/proc/devices.c`: "%3d %s" per line
/// under `Character devices:`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Majors {
    pub gpu: Option<u32>,
    pub uvm: Option<u32>,
    pub caps: Option<u32>,
}

pub fn parse_majors(text: &str) -> Majors {
    let mut m = Majors::default();
    for line in text.lines() {
        if line.starts_with("Block devices") {
            break;
        }
        let mut parts = line.split_whitespace();
        let (Some(num), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Ok(major) = num.parse::<u32>() else {
            continue;
        };
        match name {
            // The frontend's name; drivers without a separate frontend register `nvidia`.
            "nvidia-frontend" => m.gpu = Some(major),
            "nvidia" => m.gpu = m.gpu.or(Some(major)),
            "nvidia-uvm" => m.uvm = Some(major),
            "nvidia-caps" => m.caps = Some(major),
            _ => {}
        }
    }
    m
}

/// The (major, minor) NVIDIA gives the node `name` (a file name under /dev, or
/// `nvidia-caps/nvidia-capN`); `None` for nodes the links are not made for.
fn numbers(name: &str, m: &Majors) -> Option<(Option<u32>, u32)> {
    if let Some(n) = name.strip_prefix("nvidia-caps/nvidia-cap") {
        return Some((m.caps, n.parse().ok()?));
    }
    match name {
        "nvidiactl" => Some((m.gpu, 255)),
        "nvidia-modeset" => Some((m.gpu, 254)),
        "nvidia-uvm" => Some((m.uvm, 0)),
        "nvidia-uvm-tools" => Some((m.uvm, 1)),
        _ => {
            let n = name.strip_prefix("nvidia")?;
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| Some((m.gpu, n.parse().ok()?)))
                .flatten()
        }
    }
}

/// Whether a link target names `node` (`dev/nvidia0`): relative to /dev/char or absolute.
fn points_at(target: &str, node: &str) -> bool {
    let under_dev = node.strip_prefix("dev/").unwrap_or(node);
    target == format!("../{under_dev}") || target == format!("/{node}")
}

/// One NVIDIA device node under /dev and its numbers: `dev/nvidia0`, major (`None` when
/// /proc/devices has none for its driver), minor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberedNode {
    pub node: String,
    pub major: Option<u32>,
    pub minor: u32,
}

/// The NVIDIA device nodes present with the numbers NVIDIA gives them (nodes no link is made
/// for left out); `Ok(None)` when there is no NVIDIA node at all (the driver layer says why).
pub fn numbered_nodes(source: &dyn Source) -> Result<Option<Vec<NumberedNode>>, FactError> {
    let mut names: Vec<String> = match source.read_dir("dev") {
        Ok(names) => names
            .into_iter()
            .filter(|n| n.starts_with("nvidia"))
            .collect(),
        Err(err) if err.is_missing() => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    if let Ok(caps) = source.read_dir("dev/nvidia-caps") {
        names.extend(caps.into_iter().map(|c| format!("nvidia-caps/{c}")));
    }
    names.sort();
    if names.is_empty() {
        return Ok(None);
    }
    let majors = parse_majors(&source.read_to_string("proc/devices")?);
    Ok(Some(
        names
            .iter()
            // nvswitch, nvlink, nvidia-fs, the caps directory itself have no entry
            .filter_map(|name| {
                let (major, minor) = numbers(name, &majors)?;
                Some(NumberedNode {
                    node: format!("dev/{name}"),
                    major,
                    minor,
                })
            })
            .collect(),
    ))
}

/// The NVIDIA device nodes present and their links; `Ok(None)` when there is no NVIDIA node at
/// all (the driver layer says why) or /proc/devices cannot be read (nothing to compute from).
pub fn gather(source: &dyn Source) -> Result<Option<Vec<NodeLink>>, FactError> {
    let Some(nodes) = numbered_nodes(source)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for NumberedNode { node, major, minor } in nodes {
        let Some(major) = major else {
            out.push(NodeLink {
                node,
                link: None,
                state: LinkState::Unknown,
            });
            continue;
        };
        let link = format!("{DEV_CHAR}/{major}:{minor}");
        let state = match source.read_link(&link) {
            Ok(target) if points_at(&target, &node) => LinkState::Present,
            Ok(target) => LinkState::Elsewhere(target),
            Err(err) if err.is_missing() => LinkState::Missing,
            // A plain file or directory where the link should be.
            Err(err) => LinkState::Elsewhere(format!("not a link ({err})")),
        };
        out.push(NodeLink {
            node,
            link: Some(link),
            state,
        });
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cat /proc/devices` from a driver 550 node (the fixture builder's, fs/proc/devices.c
    /// format) and the old frontend name.
    #[test]
    fn majors_from_proc_devices() {
        let text = "Character devices:\n  1 mem\n195 nvidia-frontend\n226 drm\n510 nvidia-uvm\n511 nvidia-caps\n\nBlock devices:\n195 nvidia\n";
        assert_eq!(
            parse_majors(text),
            Majors {
                gpu: Some(195),
                uvm: Some(510),
                caps: Some(511)
            }
        );
        assert_eq!(
            parse_majors("Character devices:\n195 nvidia\n").gpu,
            Some(195)
        );
        assert_eq!(parse_majors("garbage\n\u{0}\n"), Majors::default());
    }

    #[test]
    fn numbers_follow_nvidias_layout() {
        let m = Majors {
            gpu: Some(195),
            uvm: Some(510),
            caps: Some(511),
        };
        assert_eq!(numbers("nvidia7", &m), Some((Some(195), 7)));
        assert_eq!(numbers("nvidiactl", &m), Some((Some(195), 255)));
        assert_eq!(numbers("nvidia-modeset", &m), Some((Some(195), 254)));
        assert_eq!(numbers("nvidia-uvm-tools", &m), Some((Some(510), 1)));
        assert_eq!(numbers("nvidia-caps/nvidia-cap2", &m), Some((Some(511), 2)));
        assert_eq!(numbers("nvidia-nvswitch0", &m), None);
        assert_eq!(numbers("nvidia-nvswitchctl", &m), None);
        assert_eq!(numbers("nvidia-caps", &m), None);
        assert_eq!(numbers("nvidia", &m), None);
        assert!(points_at("../nvidia0", "dev/nvidia0"));
        assert!(points_at("/dev/nvidia0", "dev/nvidia0"));
        assert!(points_at(
            "../nvidia-caps/nvidia-cap1",
            "dev/nvidia-caps/nvidia-cap1"
        ));
        assert!(!points_at("../nvidia1", "dev/nvidia0"));
    }
}
