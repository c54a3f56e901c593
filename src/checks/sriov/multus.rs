//! sriov.multus: is Multus the network the runtime actually calls? The CNI directory is read as
//! containerd reads it (`facts/cni.rs`): only the first config by name is the default network, so
//! Multus must be that file, load, and hand the pod's primary interface to a network that exists.

use super::*;
use crate::facts::cni::{self, CNI_CONF_DIR, CniDir, CniFile};

fn listing(dir: &CniDir) -> String {
    if dir.files.is_empty() {
        return "no .conf, .conflist or .json file".to_string();
    }
    dir.files
        .iter()
        .map(|f| match &f.config {
            Ok(c) => format!("{} (`{}`)", f.name, c.types.join("+")),
            Err(_) => format!("{} (does not load)", f.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn install_hint() -> &'static str {
    "install multus (its daemonset writes 00-multus.conf into /etc/cni/net.d, named to sort first) and create the NetworkAttachmentDefinition the pods reference"
}

pub(super) fn multus(ctx: &Context<'_>) -> Outcome {
    let facts = ctx.sriov();
    let adv = advertised(ctx);
    if let Err(skip) = applies(facts, &adv) {
        return skip;
    }
    let dir = match cni::gather(ctx.source()) {
        Ok(Some(dir)) => dir,
        Ok(None) => CniDir::default(),
        Err(err) => return Outcome::unreadable(&err),
    };
    let shown = Evidence::new(CNI_CONF_DIR, listing(&dir));
    let multus_files = dir.multus_files();
    let Some(default) = dir.default_network() else {
        return Outcome::fail("sr-iov vfs are set up but no cni config exists: pods cannot attach their secondary network (nor their primary one)")
            .evidence(shown.expected("00-multus.conf (multus) first, then the default network's config"))
            .hint(install_hint())
            .action(Action::FixConfig);
    };
    let first_good = dir.first_loadable();
    match default {
        Err(bad) => {
            let why = bad.config.as_ref().err().cloned().unwrap_or_default();
            let crio = match first_good {
                Some(f) => format!("cri-o skips it and takes {}", f.name),
                None => "no file after it loads either".to_string(),
            };
            let what = if multus_files.iter().any(|m| m.name == bad.name) {
                "the multus config"
            } else {
                "the first cni config"
            };
            Outcome::fail(format!(
                "{what} {CNI_CONF_DIR}/{} does not load ({why}): containerd stops at it and sets up no pod network ({crio})",
                bad.name
            ))
            .evidence(shown)
            .evidence(
                Evidence::new(format!("{CNI_CONF_DIR}/{}", bad.name), why)
                    .expected("valid json with a `type` (.conf) or a non-empty `plugins` list (.conflist)"),
            )
            .hint(format!(
                "fix or remove {CNI_CONF_DIR}/{} (`jq . {CNI_CONF_DIR}/{}` shows where it breaks); multus regenerates 00-multus.conf when its daemonset pod restarts",
                bad.name, bad.name
            ))
            .action(Action::FixConfig)
        }
        Ok(first) => judge_default(ctx, first, &multus_files, shown),
    }
}

fn judge_default(
    ctx: &Context<'_>,
    first: &CniFile,
    multus_files: &[&CniFile],
    shown: Evidence,
) -> Outcome {
    let Ok(config) = &first.config else {
        return Outcome::error("internal: the default network did not load");
    };
    if config.is_multus() {
        let delegates = if config.delegates.is_empty() {
            "no delegates or clusterNetwork".to_string()
        } else {
            format!("default network {}", config.delegates.join(", "))
        };
        // Multus resolves `clusterNetwork` in `getNetDelegate` (multus-cni
        // pkg/k8sclient/k8sclient.go): a value with a `/` is a path, loaded as a .conflist or
        // .conf file, or a directory whose first .conf/.conflist it loads; any other value is a
        // NetworkAttachmentDefinition in Multus's namespace or a config of that `name` in its
        // confDir, which the node does not show, so only paths are judged here. A path that
        // does not resolve fails `GetDefaultNetworks` ("failed to get clusterNetwork"): every
        // pod ADD fails, so no pod gets even its primary interface.
        for d in &config.delegates {
            if let Some(problem) = cluster_network_problem(ctx, d) {
                let (path, observed) = problem;
                return Outcome::fail(format!(
                    "multus ({CNI_CONF_DIR}/{}) hands pods to {d}, which {observed}: multus fails every pod's network setup, so pods get no primary network",
                    first.name
                ))
                .evidence(shown)
                .evidence(Evidence::new(path, observed).expected("the default network's config"))
                .hint("restart the multus daemonset pod so it regenerates 00-multus.conf from the default network's current config file (or set clusterNetwork to the file that exists)")
                .action(Action::FixConfig);
            }
        }
        return Outcome::pass(format!(
            "multus is the default network ({CNI_CONF_DIR}/{}, `{}`; {delegates})",
            first.name,
            config.types.join("+")
        ))
        .evidence(shown);
    }
    if let Some(m) = multus_files.first() {
        let broken = match &m.config {
            Err(why) => format!(" and does not load ({why})"),
            Ok(_) => String::new(),
        };
        return Outcome::fail(format!(
            "multus config {CNI_CONF_DIR}/{} is shadowed by {}{broken}: the runtime takes the first config by name as the default network, so pods never go through multus and get no secondary interface",
            m.name, first.name
        ))
        .evidence(shown.expected(format!("{} to sort before {}", m.name, first.name)))
        .hint(format!(
            "rename the multus config to sort first (multus writes 00-multus.conf), or remove the stray {CNI_CONF_DIR}/{} if multus already delegates to it",
            first.name
        ))
        .action(Action::FixConfig);
    }
    Outcome::fail(format!(
        "sr-iov vfs are set up but multus is not configured (the default network is {}, `{}`): pods cannot attach their secondary network",
        first.name,
        config.types.join("+")
    ))
    .evidence(shown.expected("a multus config (00-multus.conf) sorting first"))
    .hint(install_hint())
    .action(Action::FixConfig)
}

/// What is wrong with a `clusterNetwork` path on this node: (root-relative path, what it is),
/// or `None` when it resolves or cannot be judged from the node. Judged: paths the thick plugin
/// sees under `/host` (the host's root) and host paths under /etc/cni (the thin plugin runs on
/// the host). A directory resolves when it holds a .conf or .conflist file (`libcni.ConfFiles`,
/// which `getNetDelegate` asks for those two extensions).
fn cluster_network_problem(ctx: &Context<'_>, delegate: &str) -> Option<(String, &'static str)> {
    let path = cni::cluster_network_path(delegate)?;
    if !(delegate.starts_with("/host/") || path.starts_with("etc/cni/")) {
        return None;
    }
    match ctx.source().read_to_string(&path) {
        Ok(_) => None,
        Err(e) if e.is_missing() => Some((path, "does not exist on the node")),
        Err(_) => match ctx.source().read_dir(&path) {
            Ok(names) => (!names
                .iter()
                .any(|n| n.ends_with(".conf") || n.ends_with(".conflist")))
            .then_some((path, "is a directory without a .conf or .conflist file")),
            // Unreadable: not judged here (the runtime's own read would say).
            Err(_) => None,
        },
    }
}
