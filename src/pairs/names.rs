//! Which Kubernetes node each host runs on, for suspects an engineer can cordon and drain: in an
//! MPIJob the hosts are worker Pods (`<job>-worker-0.<job>.<namespace>.svc slots=N` in the MPI
//! Operator's `/etc/mpi/hostfile`, `pkg/controller/mpi_job_controller.go` newConfigMap), and the
//! node is in each worker's environment through the downward API (`fieldRef: spec.nodeName`,
//! deploy/mpijob-pairs.yaml's `NODE_NAME`). One `mpirun` over every host, one rank each
//! (`--host a:1,b:1,...`: rank i on the i-th host, Open MPI's default by-slot mapping), prints
//! `gpudoctor-node <rank> <value>`; the Pod is the host name's first label.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::launch::LauncherKind;
use super::{PairsOptions, PairsReport};

/// Where Kubernetes runs one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KubeName {
    pub host: String,
    pub pod: String,
    pub node: String,
}

/// Ask every host for its node name through the launcher (mpirun only; 60 s). Empty when not
/// asked, or when the probe said nothing usable (said in the notes).
pub fn learn(
    options: &PairsOptions,
    run_dir: Option<&tempfile::TempDir>,
) -> BTreeMap<String, String> {
    let Some(var) = &options.node_name_env else {
        return BTreeMap::new();
    };
    if options.plan.kind != LauncherKind::Mpirun {
        return BTreeMap::new();
    }
    let hosts: Vec<String> = options.hosts.iter().map(|h| format!("{h}:1")).collect();
    let mut argv = vec![
        options.plan.program.clone(),
        "-np".to_string(),
        options.hosts.len().to_string(),
        "--host".to_string(),
        hosts.join(","),
    ];
    argv.extend(options.plan.extra.iter().cloned());
    argv.extend([
        "/bin/sh".to_string(),
        "-c".to_string(),
        format!("echo \"gpudoctor-node $OMPI_COMM_WORLD_RANK ${{{var}}}\""),
    ]);
    let (_private, mut env) = super::private_tmp(run_dir, &options.private_tmp_vars);
    env.splice(0..0, options.launcher_env.iter().cloned());
    match crate::source::nccl::run_command_keeping(
        &argv,
        &env,
        Duration::from_secs(60),
        &mut |_| {},
        64 * 1024,
    ) {
        Ok(out) => parse(&out.transcript, &options.hosts),
        Err(_) => BTreeMap::new(),
    }
}

/// `gpudoctor-node <rank> <name>` lines, rank i naming `hosts[i]`; a line out of range, or an
/// empty name (the variable unset there), names nothing.
pub fn parse(text: &str, hosts: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("gpudoctor-node") {
            continue;
        }
        let (Some(rank), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        if let Some(host) = rank.parse::<usize>().ok().and_then(|r| hosts.get(r)) {
            out.insert(host.clone(), name.to_string());
        }
    }
    out
}

/// The Pod of an MPI Operator host name: its first DNS label.
pub fn pod_of(host: &str) -> String {
    host.split('.').next().unwrap_or(host).to_string()
}

/// Each suspect's hosts with their Pods and nodes, and the names in the notes.
pub fn attach(report: &mut PairsReport, names: &BTreeMap<String, String>) {
    if names.is_empty() {
        return;
    }
    for suspect in &mut report.suspects {
        suspect.kubernetes = suspect
            .hosts
            .iter()
            .filter_map(|h| {
                names.get(h).map(|node| KubeName {
                    host: h.clone(),
                    pod: pod_of(h),
                    node: node.clone(),
                })
            })
            .collect();
        for k in &suspect.kubernetes {
            suspect
                .evidence
                .push(format!("{} is Pod {} on node {}", k.host, k.pod, k.node));
        }
    }
    let on: Vec<String> = suspect_nodes(report);
    if !on.is_empty() {
        report
            .verdict
            .push_str(&format!(" (on node {})", on.join(", ")));
    }
    report.notes.push(format!(
        "nodes learned through the launcher for {} of {} host(s)",
        names.len(),
        report.hosts.len()
    ));
}

fn suspect_nodes(report: &PairsReport) -> Vec<String> {
    let mut nodes: Vec<String> = report
        .suspects
        .iter()
        .flat_map(|s| s.kubernetes.iter().map(|k| k.node.clone()))
        .collect();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_name_their_hosts_and_pods_come_from_the_operator_hostfile_names() {
        let hosts: Vec<String> = (0..3)
            .map(|i| format!("gpudoctor-pairs-worker-{i}.gpudoctor-pairs.gpudoctor.svc"))
            .collect();
        let said = "gpudoctor-node 2 gpu-node-c\nnoise\ngpudoctor-node 0 gpu-node-a\ngpudoctor-node 1\ngpudoctor-node 9 x\n";
        let names = parse(said, &hosts);
        assert_eq!(names.len(), 2);
        assert_eq!(names[&hosts[2]], "gpu-node-c");
        assert_eq!(pod_of(&hosts[0]), "gpudoctor-pairs-worker-0");
    }
}
