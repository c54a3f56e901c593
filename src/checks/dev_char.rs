//! toolkit.dev_char_links: every NVIDIA device node has its `/dev/char/<major>:<minor>` link, so a
//! `systemctl daemon-reload` does not take the GPUs away from running containers (facts and
//! sources in `facts/dev_char.rs`). The GPU Operator's validator makes these links; a node
//! without the operator needs `nvidia-ctk system create-dev-char-symlinks`.

use super::{CheckDef, Context, Explain, Outcome};
use crate::facts::dev_char::{self, LinkState};
use crate::report::{Action, Evidence, Layer};

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "toolkit.dev_char_links",
        layer: Layer::Toolkit,
        title: "every NVIDIA device node has its /dev/char link",
        explain: Explain {
            reads: "/dev/nvidia*, /dev/nvidia-caps/*, /proc/devices (the nvidia-frontend, nvidia-uvm and nvidia-caps majors), /dev/char/<major>:<minor>; the kubelet config's cgroupDriver",
            expects: "for each NVIDIA device node (NVSwitch and NVLink nodes aside) a /dev/char/<major>:<minor> link to it: GPU major with minor N for /dev/nvidiaN, 255 nvidiactl, 254 nvidia-modeset; UVM major 0 nvidia-uvm, 1 nvidia-uvm-tools; caps major N nvidia-caps/nvidia-capN. A missing link fails with the systemd cgroup driver (or none known) and warns with cgroupfs",
            why: "with the systemd cgroup driver, systemd rewrites a container's device rules as /dev/char paths on every `systemctl daemon-reload`; a node without its link is dropped from the rule and every container holding the GPU gets \"Failed to initialize NVML: Unknown Error\" until it restarts (NVIDIA container toolkit troubleshooting; the GPU Operator validator creates the links)",
            fix: "`nvidia-ctk system create-dev-char-symlinks --create-all` (make it persistent with the toolkit's udev rule or a systemd unit run after the driver loads); on GPU Operator nodes let the validator run (it does this itself)",
        },
        run: dev_char_links,
    }]
}

fn dev_char_links(ctx: &Context<'_>) -> Outcome {
    // No container runtime, no container to lose its GPUs.
    if let Some(skip) = super::toolkit::not_applicable(ctx) {
        return skip;
    }
    let links = match dev_char::gather(ctx.source()) {
        Ok(Some(links)) => links,
        Ok(None) => {
            return Outcome::skip("no NVIDIA device node under /dev (see driver.device_nodes)");
        }
        Err(err) => return Outcome::unreadable(&err),
    };
    let judged: Vec<_> = links
        .iter()
        .filter(|l| l.state != LinkState::Unknown)
        .collect();
    let unknown: Vec<&str> = links
        .iter()
        .filter(|l| l.state == LinkState::Unknown)
        .map(|l| l.node.as_str())
        .collect();
    if judged.is_empty() {
        return Outcome::skip(format!(
            "no NVIDIA major in /proc/devices for {} (driver not loaded?): links not judged",
            unknown.join(" ")
        ));
    }
    let bad: Vec<_> = judged
        .iter()
        .filter(|l| l.state != LinkState::Present)
        .collect();
    let noted = if unknown.is_empty() {
        String::new()
    } else {
        format!("; major unknown for {}: not judged", unknown.join(" "))
    };
    if bad.is_empty() {
        return Outcome::pass(format!(
            "{} NVIDIA device node(s) linked in /dev/char{noted}",
            judged.len()
        ));
    }
    let evidence: Vec<Evidence> = bad
        .iter()
        .map(|l| {
            let link = l.link.clone().unwrap_or_default();
            let seen = match &l.state {
                LinkState::Elsewhere(target) => format!("points to {target}"),
                _ => "missing".to_string(),
            };
            Evidence::new(link, seen).expected(format!("a link to /{}", l.node))
        })
        .collect();
    let names: Vec<String> = bad.iter().take(4).map(|l| format!("/{}", l.node)).collect();
    let more = if bad.len() > 4 {
        format!(" and {} more", bad.len() - 4)
    } else {
        String::new()
    };
    let cgroupfs = matches!(
        ctx.kubelet_config(),
        Ok(Some((c, _))) if c.cgroup_driver.as_deref().is_some_and(|d| d.eq_ignore_ascii_case("cgroupfs"))
    );
    let text = format!(
        "{} of {} NVIDIA device node(s) have no /dev/char link ({}{more}){noted}",
        bad.len(),
        judged.len(),
        names.join(" ")
    );
    let outcome = if cgroupfs {
        Outcome::warn(format!(
            "{text}: harmless with the cgroupfs driver the kubelet uses, but a switch to systemd makes every `systemctl daemon-reload` take the GPUs from running containers"
        ))
    } else {
        Outcome::fail(format!(
            "{text}: the next `systemctl daemon-reload` takes these GPUs from every running container (\"Failed to initialize NVML: Unknown Error\")"
        ))
    };
    outcome
        .evidence_all(evidence)
        .hint("run `nvidia-ctk system create-dev-char-symlinks --create-all` now, and make it persistent (the toolkit's udev rule, or a systemd unit after the driver loads); on GPU Operator nodes check that the operator validator pod ran; restart containers that already print \"Failed to initialize NVML: Unknown Error\"")
        .action(Action::FixConfig)
}
