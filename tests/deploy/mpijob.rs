//! The MPIJob's types as the MPI Operator's v2beta1 API defines them, which `pod_specs` decodes
//! MPIJobs into: a field they lack fails the round trip.

use super::*;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MpiJob {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: MpiJobSpec,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MpiJobSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_worker: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_launcher_as_worker: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    pub mpi_replica_specs: BTreeMap<ReplicaType, ReplicaSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_auth_mount_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_creation_policy: Option<LauncherCreationPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_implementation: Option<MpiImplementation>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ReplicaType {
    Launcher,
    Worker,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum LauncherCreationPolicy {
    AtStartup,
    WaitForWorkersReady,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum MpiImplementation {
    OpenMPI,
    Intel,
    #[serde(rename = "MPICH")]
    Mpich,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<CleanPodPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum CleanPodPolicy {
    None,
    Running,
    All,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulingPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplicaSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    pub template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
    ExitCode,
}
