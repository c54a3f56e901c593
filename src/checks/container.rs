//! What a GPU Pod's container was given, beyond its device nodes (toolkit.container_gpus): a
//! CUDA context on each of its GPUs when `--cuda` asks, and its device cgroup.
//!
//! toolkit.container_device_cgroup: inside a Pod that was given GPUs, may the container open
//! the NVIDIA device nodes the runtime put into its /dev? The nodes are there either way; the
//! device cgroup decides whether `open()` works. When a node is refused, NVML answers
//! "Failed to initialize NVML: Unknown Error" — the state a `systemctl daemon-reload` with the
//! systemd cgroup driver leaves running GPU containers in when the node lacks its /dev/char
//! links (NVIDIA/nvidia-container-toolkit#48, #251; the node side is toolkit.dev_char_links).
//! Facts in `facts/cgroup.rs` and `facts/dev_char.rs`.

use super::{CheckDef, Context, Explain, Outcome};
use crate::answers::cuda::{CudaProbe, code_name};
use crate::answers::nvml::NvmlErrorKind;
use crate::facts::cgroup::{self, DEVICES_LIST, DeviceCgroup, SELF_CGROUP};
use crate::facts::dev_char::{self, NumberedNode};
use crate::report::{Action, Evidence, Layer};

pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "toolkit.container_device_cgroup",
        layer: Layer::Toolkit,
        title: "inside a GPU Pod, the device cgroup lets the container open its GPUs",
        explain: Explain {
            reads: "inside a Pod given GPUs (NVIDIA_VISIBLE_DEVICES): /proc/self/cgroup (v1 or v2), on cgroup v1 /sys/fs/cgroup/devices/devices.list, /dev/nvidia*, /dev/nvidia-caps/*, /proc/devices (the NVIDIA majors), NVML's init error",
            expects: "cgroup v1: a rule allowing read and write (`c 195:N rw`, `c 195:* rw` or `a *:* rwm`) for each /dev/nvidiaN, nvidiactl, nvidia-uvm and nvidia-caps node the container has; cgroup v2 (device rules are an eBPF program, not readable from inside): NVML opens the GPUs, with no `Unknown Error` at init",
            why: "the runtime adds a device rule per GPU when the container starts; with the systemd cgroup driver a `systemctl daemon-reload` rewrites the rules from /dev/char links, and a node without its link loses its rule: the device files stay, but every CUDA or NVML call fails with \"Unknown Error\" until the Pod is recreated (NVIDIA container toolkit issue #48)",
            fix: "recreate the Pod (its rules are rebuilt at start); on the node run `nvidia-ctk system create-dev-char-symlinks --create-all` and keep it across reboots (the toolkit's udev rule, or the GPU Operator's validator), so the next daemon-reload keeps the rules (toolkit.dev_char_links judges this on the node)",
        },
        run: container_device_cgroup,
    }]
}

/// Nodes a workload needs to open: the GPUs, the control node, UVM (CUDA's memory manager) and
/// MIG's capability nodes. nvidia-modeset and nvidia-uvm-tools (display, profiling) are not.
fn needed(node: &str) -> bool {
    !matches!(node, "dev/nvidia-modeset" | "dev/nvidia-uvm-tools")
}

/// `NVIDIA_VISIBLE_DEVICES` when gpudoctor runs in a Pod that was given GPUs (the validation
/// Pod, deploy/validate.yaml); otherwise the skip that says why the container checks do not
/// apply.
pub(super) fn given_gpus(ctx: &Context<'_>) -> Result<String, Outcome> {
    let pod = crate::facts::toolkit::gather_pod_context(ctx.source(), ctx.env());
    if !pod.in_pod() {
        return Err(Outcome::skip("not running inside a pod"));
    }
    match pod.visible_devices.as_deref().map(str::trim) {
        None => Err(Outcome::skip(
            "running in a pod that was given no gpus (NVIDIA_VISIBLE_DEVICES unset)",
        )),
        Some(v) if v.is_empty() || v == "void" || v == "none" => Err(Outcome::skip(format!(
            "running in a pod that was given no gpus (NVIDIA_VISIBLE_DEVICES={v:?})"
        ))),
        Some(v) => Ok(v.to_string()),
    }
}

fn container_device_cgroup(ctx: &Context<'_>) -> Outcome {
    if let Err(skip) = given_gpus(ctx) {
        return skip;
    }
    let cgroup = match cgroup::gather(ctx.source()) {
        Ok(Some(cgroup)) => cgroup,
        Ok(None) => {
            return Outcome::skip(format!(
                "no {SELF_CGROUP} under the root: the device cgroup is not judged"
            ));
        }
        Err(err) => return Outcome::unreadable(&err),
    };
    let nodes: Vec<NumberedNode> = match dev_char::numbered_nodes(ctx.source()) {
        Ok(Some(nodes)) => nodes.into_iter().filter(|n| needed(&n.node)).collect(),
        Ok(None) => {
            return Outcome::skip(
                "no NVIDIA device node in the container's /dev (see toolkit.container_gpus)",
            );
        }
        Err(err) => return Outcome::unreadable(&err),
    };
    match cgroup {
        DeviceCgroup::V1 { path, rules } => judge_v1(&path, &rules, &nodes),
        DeviceCgroup::V1Unread { why, .. } => Outcome::unreadable(&why),
        DeviceCgroup::V2 { path } => judge_v2(ctx, &path, &nodes),
    }
}

fn numbers_text(n: &NumberedNode) -> String {
    match n.major {
        Some(major) => format!("c {major}:{}", n.minor),
        None => format!("c ?:{}", n.minor),
    }
}

fn judge_v1(path: &str, rules: &[cgroup::DeviceRule], nodes: &[NumberedNode]) -> Outcome {
    let unknown: Vec<&str> = nodes
        .iter()
        .filter(|n| n.major.is_none())
        .map(|n| n.node.as_str())
        .collect();
    let refused: Vec<&NumberedNode> = nodes
        .iter()
        .filter(|n| {
            n.major
                .is_some_and(|major| !rules.iter().any(|r| r.allows_char_rw(major, n.minor)))
        })
        .collect();
    // The rules that concern the NVIDIA majors (or every major), as the kernel lists them.
    let majors: Vec<u32> = nodes.iter().filter_map(|n| n.major).collect();
    let relevant: Vec<&str> = rules
        .iter()
        .filter(|r| r.kind != 'b' && r.major.is_none_or(|m| majors.contains(&m)))
        .map(|r| r.text.as_str())
        .collect();
    let listed = if relevant.is_empty() {
        "no rule for the NVIDIA majors".to_string()
    } else {
        relevant.join(", ")
    };
    let where_ = format!("cgroup v1 {path}");
    let noted = if unknown.is_empty() {
        String::new()
    } else {
        format!(
            "; no NVIDIA major in /proc/devices for {}: not judged",
            unknown.join(" ")
        )
    };
    if refused.is_empty() {
        let judged = nodes.len() - unknown.len();
        if judged == 0 {
            return Outcome::skip(format!(
                "no NVIDIA major in /proc/devices for {}: the device rules are not judged",
                unknown.join(" ")
            ));
        }
        return Outcome::pass(format!(
            "the device cgroup ({where_}) allows the {judged} NVIDIA node(s) in /dev{noted}"
        ))
        .evidence(Evidence::new(DEVICES_LIST, listed));
    }
    let names: Vec<String> = refused
        .iter()
        .map(|n| format!("/{} ({})", n.node, numbers_text(n)))
        .collect();
    Outcome::fail(format!(
        "the container's device cgroup refuses {}: the nodes are in /dev but cannot be opened (NVML: \"Unknown Error\"){noted}",
        names.join(", ")
    ))
    .evidence(
        Evidence::new(DEVICES_LIST, listed).expected(
            refused
                .iter()
                .map(|n| format!("{} rw", numbers_text(n)))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    )
    .evidence(Evidence::new(SELF_CGROUP, where_))
    .hint(RULES_LOST)
    .action(Action::FixConfig)
}

const RULES_LOST: &str = "the container's device rules were lost after it started — typically a `systemctl daemon-reload` on the node with the systemd cgroup driver and no /dev/char links for the NVIDIA nodes: recreate the Pod, then on the node run `nvidia-ctk system create-dev-char-symlinks --create-all` and keep it across reboots (toolkit's udev rule or the GPU Operator validator); run gpudoctor on the node to see toolkit.dev_char_links";

/// cgroup v2 keeps device rules in an eBPF program attached to the cgroup, which a container
/// cannot list; NVML opening the GPUs is the proof, and `Unknown Error` at init with the nodes
/// present is the lost-rules signature.
fn judge_v2(ctx: &Context<'_>, path: &str, nodes: &[NumberedNode]) -> Outcome {
    let nvml = ctx.nvml();
    let where_ = format!("cgroup v2 {path}");
    let list: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
    if let Some(err) = &nvml.init_error {
        if err.kind == NvmlErrorKind::Unknown {
            return Outcome::fail(format!(
                "nvml cannot initialise (\"{}\") although {} are in /dev: the device program of the container's cgroup refuses them",
                err.message,
                list.join(" ")
            ))
            .evidence(Evidence::new("nvml.init", &err.message).expected("success"))
            .evidence(Evidence::new(SELF_CGROUP, where_))
            .hint(RULES_LOST)
            .action(Action::FixConfig);
        }
        return Outcome::skip(format!(
            "nvml unavailable ({}; see driver.nvml_init): the device program of {where_} is not judged",
            err.kind.name()
        ));
    }
    let refused: Vec<u32> = nvml
        .devices
        .iter()
        .filter(|d| d.error.as_ref().is_some_and(|e| e.kind.is_permission()))
        .map(|d| d.index)
        .collect();
    if !refused.is_empty() {
        return Outcome::fail(format!(
            "nvml may not open gpu(s) {} of the container: the device program of its cgroup refuses them",
            refused
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .evidence(Evidence::new(SELF_CGROUP, where_))
        .hint(RULES_LOST)
        .action(Action::FixConfig);
    }
    Outcome::pass(format!(
        "nvml opened the container's {} gpu(s) through {where_} (its device rules are an eBPF program, not readable from inside)",
        nvml.devices.len()
    ))
    .evidence(Evidence::new("dev", list.join(" ")))
}

/// With `--cuda`, each GPU the container holds (by NVML bus id) must take a context and return
/// the round trip whole: `Ok(note)` for the summary, or the failure. Without it, `Ok` with the
/// note that it was not asked.
pub(super) fn cuda_on_given(ctx: &Context<'_>, bus_ids: &[&str]) -> Result<String, Outcome> {
    let facts = match ctx.cuda() {
        CudaProbe::NotRequested { .. } => {
            return Ok("; cuda not probed (pass --cuda to open a context on each)".into());
        }
        CudaProbe::Unavailable { origin, message } => {
            return Err(Outcome::error(format!(
                "the cuda probe could not run in the container: {message}"
            ))
            .evidence(Evidence::new(origin.as_str(), message.as_str())));
        }
        CudaProbe::Ran(facts) => facts,
    };
    let lib = facts.library.as_deref().unwrap_or("libcuda.so.1");
    if let Some(why) = &facts.load_error {
        return Err(Outcome::fail(format!(
            "the container cannot load cuda ({lib}): {why}"
        ))
        .evidence(Evidence::new("cuda.library", why.as_str()).expected("libcuda.so.1 loads"))
        .hint("the runtime injects libcuda only with the compute capability: set NVIDIA_DRIVER_CAPABILITIES=compute,utility in the Pod (deploy/validate.yaml does) and check the toolkit's mode (toolkit.installed)")
        .action(Action::FixConfig));
    }
    if let Some(code) = facts.init.filter(|c| *c != 0) {
        return Err(Outcome::fail(format!(
            "cuInit failed in the container: {}",
            code_name(code)
        ))
        .evidence(Evidence::new("cuda.init", code_name(code)).expected("CUDA_SUCCESS"))
        .hint("run `gpudoctor check --cuda` on the node: if CUDA works there, the container lacks a device node (nvidia-uvm) or its device cgroup refuses one (toolkit.container_device_cgroup)")
        .action(Action::FixConfig));
    }
    let mut bad = Vec::new();
    let mut bad_buses: Vec<String> = Vec::new();
    let mut evidence = Vec::new();
    for bus in bus_ids {
        let device = facts.devices.iter().find(|d| {
            d.bus_id
                .as_deref()
                .is_some_and(|b| b.eq_ignore_ascii_case(bus))
        });
        let problem = match device {
            None => Some("not enumerated by cuda".to_string()),
            Some(d) => match (&d.error, &d.timed_out, d.mismatched_bytes) {
                (Some(err), _, _) => Some(err.describe()),
                (None, Some(step), _) => Some(format!("{step} did not return")),
                (None, None, Some(0)) => None,
                (None, None, Some(n)) => Some(format!("{n} bytes came back different")),
                (None, None, None) => Some("round trip not completed".to_string()),
            },
        };
        if let Some(problem) = problem {
            evidence.push(
                Evidence::new(format!("cuda {bus}"), problem.as_str())
                    .expected("a context and a whole 1 MiB round trip"),
            );
            bad.push(format!("{bus}: {problem}"));
            bad_buses.push(bus.to_string());
        }
    }
    if bad.is_empty() {
        return Ok(format!(
            "; cuda took a context on each and copied 1 MiB back whole ({lib})"
        ));
    }
    Err(Outcome::fail(format!(
        "the container's gpu(s) do not run cuda: {}",
        bad.join("; ")
    ))
    .about_gpus(bad_buses)
    .evidence_all(evidence)
    .hint("run `gpudoctor check --cuda` on the node (driver.cuda names the cause: exclusive-process mode, a pending ECC reset, nvidia_uvm); if the node passes, the container's device nodes or cgroup are at fault")
    .action(Action::FixConfig))
}
