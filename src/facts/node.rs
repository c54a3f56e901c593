//! Who this node is: host name and kernel release, read under the root so a replay names the
//! recorded node, never the machine replaying it.

use serde::Serialize;

use super::trimmed;
use crate::source::Source;

/// The kernel command line (proc(5)).
pub const PROC_CMDLINE: &str = "proc/cmdline";

/// The downward API's node name (`spec.nodeName`), which every manifest in deploy/ sets.
pub const NODE_NAME: &str = "NODE_NAME";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeIdentity {
    /// The node's name: what reports, tickets, metrics and NPD call the node.
    pub hostname: Option<String>,
    /// In a Pod, the Pod's own hostname (the name `proc/sys/kernel/hostname` gives there), when
    /// it differs from the node's.
    pub pod: Option<String>,
    pub kernel: Option<String>,
}

/// A usable name: a DNS-1123-length single line.
fn usable(name: &str) -> Option<String> {
    let name = name.trim();
    (!name.is_empty() && name.len() <= 253 && !name.contains(char::is_control))
        .then(|| name.to_string())
}

/// First readable, non-empty, single-line value among `paths`.
fn first_value(source: &dyn Source, paths: &[&str]) -> Option<String> {
    paths.iter().find_map(|p| {
        let text = source.read_to_string(p).ok()?;
        let value = trimmed(text.lines().next().unwrap_or_default()).to_string();
        (!value.is_empty() && value.len() <= 255).then_some(value)
    })
}

/// The node's name, first found: `NODE_NAME` in this process's environment (an explicit
/// override, also for a capture), `NODE_NAME` as the source has it (live: the same; a capture:
/// its `env.json`), the host's own UTS name (live only, `source/uts.rs`), then the files under
/// the root. `proc/sys/kernel/hostname` answers in the reader's UTS namespace: in a Pod that is
/// the Pod's name, so there the host's `etc/hostname` under the root comes first.
pub fn gather(source: &dyn Source) -> NodeIdentity {
    let env = source.env_vars();
    let in_pod = env.contains_key("KUBERNETES_SERVICE_HOST");
    let own = first_value(source, &["proc/sys/kernel/hostname"]);
    let configured = first_value(source, &["etc/hostname"]);
    let from_files = if in_pod {
        configured.or_else(|| own.clone())
    } else {
        own.clone().or(configured)
    };
    let hostname = std::env::var(NODE_NAME)
        .ok()
        .and_then(|n| usable(&n))
        .or_else(|| env.get(NODE_NAME).and_then(|n| usable(n)))
        .or_else(|| source.host_nodename().and_then(|n| usable(&n)))
        .or(from_files);
    NodeIdentity {
        pod: own.filter(|o| in_pod && Some(o) != hostname.as_ref()),
        hostname,
        kernel: first_value(source, &["proc/sys/kernel/osrelease"]).or_else(|| {
            // `/proc/version`: "Linux version 5.15.0-105-generic (buildd@...) ..."
            let text = source.read_to_string("proc/version").ok()?;
            text.split_whitespace().nth(2).map(str::to_string)
        }),
    }
}

/// The kernel command line, `/proc/cmdline` (`Ok(None)` when the file is not there: a capture
/// that did not record it).
pub fn gather_cmdline(source: &dyn Source) -> Result<Option<String>, crate::answers::FactError> {
    match source.read_to_string(PROC_CMDLINE) {
        Ok(text) => Ok(Some(trimmed(&text).to_string())),
        Err(err) if err.is_missing() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Hand-written, not procfs-core's `KernelCmdline`: that one splits at single spaces and keeps
/// the quotes, so `dyndbg="file drivers/pci/* +p"` (a quoted value with spaces, as the kernel
/// reads it) would come out as three words.
///
/// `/proc/cmdline` as `(parameter, value)` pairs in order, split as the kernel splits it
/// (`lib/cmdline.c` `next_arg()`): words end at unquoted whitespace, a double quote toggles
/// quoting and is dropped, `key=value` splits at the first `=`; a parameter without `=` has the
/// value `None`. A parameter given twice keeps both pairs (the kernel applies them in order).
/// Everything after a bare `--` is for init, not the kernel (`kernel/params.c` `parse_args()`
/// stops there; Documentation/admin-guide/kernel-parameters.rst): one last pair `("--", rest)`.
pub fn parse_cmdline_params(text: &str) -> Vec<(String, Option<String>)> {
    let mut params = split_cmdline(text);
    if let Some(at) = params.iter().position(|(k, v)| k == "--" && v.is_none()) {
        let rest: Vec<String> = params
            .drain(at..)
            .skip(1)
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={v}"),
                None => k,
            })
            .collect();
        params.push(("--".to_string(), Some(rest.join(" "))));
    }
    params
}

fn split_cmdline(text: &str) -> Vec<(String, Option<String>)> {
    let mut params = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    let mut finish = |word: &mut String, started: &mut bool| {
        if *started {
            let pair = match word.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (word.clone(), None),
            };
            params.push(pair);
        }
        word.clear();
        *started = false;
    };
    for c in trimmed(text).chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => finish(&mut word, &mut started),
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    finish(&mut word, &mut started);
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_command_line_as_the_kernel_does() {
        let p = parse_cmdline_params(
            "BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic root=UUID=5c1b6a3e ro intel_iommu=on iommu=pt quiet\n",
        );
        assert_eq!(
            p[0],
            (
                "BOOT_IMAGE".into(),
                Some("/boot/vmlinuz-5.15.0-105-generic".into())
            )
        );
        assert_eq!(p[1], ("root".into(), Some("UUID=5c1b6a3e".into())));
        assert_eq!(p[2], ("ro".into(), None));
        assert_eq!(p.len(), 6);
        let q = parse_cmdline_params("dyndbg=\"file drivers/pci/* +p\"  a=\"\" b");
        assert_eq!(
            q[0],
            ("dyndbg".into(), Some("file drivers/pci/* +p".into()))
        );
        assert_eq!(q[1], ("a".into(), Some(String::new())));
        assert_eq!(q[2], ("b".into(), None));
        assert!(parse_cmdline_params("  \n").is_empty());
        // Init's arguments after `--`, as a Firecracker guest's command line has them.
        let init = parse_cmdline_params("console=ttyS0 nomodule -- --addr 0.0.0.0:2024 --x=1");
        assert_eq!(init.len(), 3);
        assert_eq!(
            init[2],
            ("--".into(), Some("--addr 0.0.0.0:2024 --x=1".into()))
        );
    }

    #[test]
    fn parses_real_command_lines() {
        // `cat /proc/cmdline` as pasted in github.com/nguyencanhtrung/kvm-pcie README.md.
        let acs = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-acso root=UUID=2006ace4-1a9a-4d7f-aa7c-685cae3abe4c ro quiet intel_iommu=on pcie_acs_override=downstream,multifunction vfio-pci.ids=10ee:5000,10ee:5001";
        let p = parse_cmdline_params(acs);
        assert_eq!(p.len(), 7);
        assert_eq!(
            p[5],
            (
                "pcie_acs_override".into(),
                Some("downstream,multifunction".into())
            )
        );
        assert_eq!(p[6].1.as_deref(), Some("10ee:5000,10ee:5001"));
        // Xorg.0.log's "Kernel command line:" (an Ubuntu 22.04 desktop, public bug report).
        let xorg = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-56-generic root=UUID=c212e9d4-a049-4da0-8e34-971cb7414e60 ro quiet splash vt.handoff=7";
        let q = parse_cmdline_params(xorg);
        assert_eq!(q.last(), Some(&("vt.handoff".into(), Some("7".into()))));
        assert_eq!(q[3], ("quiet".into(), None));
    }
}
