//! The device cgroup of the process gpudoctor runs in, as a container sees it: which cgroup
//! version (`/proc/self/cgroup`), and on cgroup v1 the device rules
//! (`/sys/fs/cgroup/devices/devices.list`). The validation Pod (deploy/validate.yaml) judges
//! with it whether the device nodes the runtime put into the container may be opened: a node
//! in `/dev` that the cgroup refuses gives "Failed to initialize NVML: Unknown Error" — what a
//! `systemctl daemon-reload` with the systemd cgroup driver leaves behind
//! (NVIDIA/nvidia-container-toolkit#48, #251: `c 195:0 rw` becomes `c 195:* m`).
//!
//! Formats: `/proc/self/cgroup` is `hierarchy-ID:controller-list:cgroup-path` per line, v2's
//! single line `0::<path>` (man 7 cgroups). `devices.list` is the kernel's
//! `devcgroup_seq_show` (security/device_cgroup.c): `<a|b|c> <major|*>:<minor|*> <r?w?m?>` per
//! rule, `a *:* rwm` when every device is allowed.

use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const SELF_CGROUP: &str = "proc/self/cgroup";
pub const DEVICES_LIST: &str = "sys/fs/cgroup/devices/devices.list";
/// Present at the root of a cgroup v2 mount.
pub const V2_CONTROLLERS: &str = "sys/fs/cgroup/cgroup.controllers";

/// Which hierarchy governs devices for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceCgroup {
    /// cgroup v1 with a devices controller: its path and the rules it lists.
    V1 {
        path: String,
        rules: Vec<DeviceRule>,
    },
    /// cgroup v1, but its devices.list could not be read: the path and why.
    V1Unread { path: String, why: FactError },
    /// cgroup v2 (the unified hierarchy): device access is an eBPF program attached to the
    /// cgroup, which cannot be listed from inside the container.
    V2 { path: String },
}

/// One line of `devices.list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRule {
    /// `a` (all), `b` (block) or `c` (char).
    pub kind: char,
    /// `None` for `*`.
    pub major: Option<u32>,
    pub minor: Option<u32>,
    pub read: bool,
    pub write: bool,
    pub mknod: bool,
    /// The line as read, for evidence.
    pub text: String,
}

impl DeviceRule {
    /// Whether this rule lets the process read and write character device `major:minor`.
    pub fn allows_char_rw(&self, major: u32, minor: u32) -> bool {
        (self.kind == 'a' || self.kind == 'c')
            && self.major.is_none_or(|m| m == major)
            && self.minor.is_none_or(|m| m == minor)
            && self.read
            && self.write
    }
}

/// Parses `devices.list`; lines that are not rules are left out (the kernel writes none).
pub fn parse_devices_list(text: &str) -> Vec<DeviceRule> {
    text.lines().filter_map(parse_rule).collect()
}

fn parse_rule(line: &str) -> Option<DeviceRule> {
    let mut parts = line.split_whitespace();
    let (Some(kind), Some(numbers), Some(access), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let kind = match kind {
        "a" | "b" | "c" => kind.chars().next()?,
        _ => return None,
    };
    let (major, minor) = numbers.split_once(':')?;
    let number = |s: &str| -> Option<Option<u32>> {
        if s == "*" {
            Some(None)
        } else {
            s.parse().ok().map(Some)
        }
    };
    if !access.bytes().all(|b| matches!(b, b'r' | b'w' | b'm')) {
        return None;
    }
    Some(DeviceRule {
        kind,
        major: number(major)?,
        minor: number(minor)?,
        read: access.contains('r'),
        write: access.contains('w'),
        mknod: access.contains('m'),
        text: line.trim().to_string(),
    })
}

/// The devices hierarchy's path from `/proc/self/cgroup`: `Some((true, path))` for v1's
/// `devices` controller, `Some((false, path))` for v2's `0::` line when there is no v1
/// devices controller.
pub fn parse_self_cgroup(text: &str) -> Option<(bool, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "devices") {
            return Some((true, path.to_string()));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((false, path.to_string()));
        }
    }
    v2
}

/// This process's device cgroup; `Ok(None)` when `/proc/self/cgroup` does not exist (not
/// Linux, or a capture that did not record it).
pub fn gather(source: &dyn Source) -> Result<Option<DeviceCgroup>, FactError> {
    let text = match source.read_to_string(SELF_CGROUP) {
        Ok(text) => text,
        Err(err) if err.is_missing() => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let Some((v1, path)) = parse_self_cgroup(&text) else {
        return Err(FactError::parse(
            SELF_CGROUP,
            ParseError::new("neither a v1 devices controller nor a v2 `0::` line"),
        ));
    };
    if !v1 {
        return Ok(Some(DeviceCgroup::V2 { path }));
    }
    Ok(Some(match source.read_to_string(DEVICES_LIST) {
        Ok(list) => DeviceCgroup::V1 {
            path,
            rules: parse_devices_list(&list),
        },
        Err(err) => DeviceCgroup::V1Unread {
            path,
            why: err.into(),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Kubernetes container's devices.list on cgroup v1, given GPU 7 of an A100 node
    /// (NVIDIA/nvidia-container-toolkit#192, before `systemctl daemon-reload`).
    const GIVEN_GPU7: &str = "c 136:* rwm\nc 10:200 rwm\nc 5:2 rwm\nc 5:0 rwm\nc 1:9 rwm\nc 1:8 rwm\nc 1:7 rwm\nc 1:5 rwm\nc 1:3 rwm\nc *:* m\nb *:* m\nc 195:255 rw\nc 508:0 rw\nc 508:1 rw\nc 195:7 rw\n";

    #[test]
    fn a_containers_rules_allow_only_its_gpu() {
        let rules = parse_devices_list(GIVEN_GPU7);
        assert_eq!(rules.len(), 15);
        let allowed = |major, minor| rules.iter().any(|r| r.allows_char_rw(major, minor));
        assert!(allowed(195, 7));
        assert!(allowed(195, 255));
        assert!(allowed(508, 0));
        assert!(!allowed(195, 0), "only mknod for the other gpus");
        assert!(!allowed(8, 0));
    }

    #[test]
    fn after_daemon_reload_only_mknod_is_left() {
        // NVIDIA/nvidia-container-toolkit#251: the list after `systemctl daemon-reload`.
        let rules = parse_devices_list("c 195:* m\n");
        assert!(!rules.iter().any(|r| r.allows_char_rw(195, 0)));
        assert!(parse_devices_list("a *:* rwm\n")[0].allows_char_rw(195, 3));
    }

    #[test]
    fn odd_lines_are_not_rules() {
        assert!(parse_devices_list("x 1:2 rw\nc 1 rw\nc a:b rw\nc 1:2 rwx\n\n").is_empty());
    }

    #[test]
    fn the_devices_hierarchy_is_found_in_either_version() {
        let v1 = "12:devices:/kubepods/burstable/pod1/abc\n11:memory:/kubepods\n0::/\n";
        assert_eq!(
            parse_self_cgroup(v1),
            Some((true, "/kubepods/burstable/pod1/abc".into()))
        );
        assert_eq!(parse_self_cgroup("0::/\n"), Some((false, "/".into())));
        assert_eq!(parse_self_cgroup("garbage"), None);
    }
}
