//! The shape of gpudoctor's `cuda.json` (src/answers/cuda.rs `CudaFacts`), re-declared here so
//! the stand-in does not depend on the crate it tests. Only the fields the stand-in answers
//! from; unknown fields are ignored, absent ones take the defaults below.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct CudaError {
    pub step: String,
    pub code: i32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct HostCopy {
    /// `h2d` or `d2h`.
    pub direction: String,
    /// `local` or `remote`.
    pub placement: String,
    #[serde(default)]
    pub gbps: Option<f64>,
    #[serde(default)]
    pub error: Option<CudaError>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Device {
    #[serde(default)]
    pub ordinal: u32,
    #[serde(default)]
    pub bus_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub error: Option<CudaError>,
    #[serde(default)]
    pub mismatched_bytes: Option<u64>,
    /// The step that hangs on this device.
    #[serde(default)]
    pub timed_out: Option<String>,
    #[serde(default)]
    pub copies: Vec<HostCopy>,
    /// `GPU-...`: what `CUDA_VISIBLE_DEVICES` may name it by (not in gpudoctor's facts; tests
    /// add it).
    #[serde(default)]
    pub uuid: Option<String>,
    /// The `MIG-...` UUIDs of its MIG devices: `CUDA_VISIBLE_DEVICES` naming one shows this
    /// device (as that MIG device).
    #[serde(default)]
    pub mig_uuids: Vec<String>,
    /// Exclusive_Process compute mode: one process's context at a time.
    #[serde(default)]
    pub exclusive_process: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Peer {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub access: Option<bool>,
    #[serde(default)]
    pub gbps: Option<f64>,
    #[serde(default)]
    pub error: Option<CudaError>,
    #[serde(default)]
    pub timed_out: bool,
    /// Bytes the peer copy changes.
    #[serde(default)]
    pub mismatched_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Facts {
    #[serde(default)]
    pub driver_version: Option<i32>,
    #[serde(default)]
    pub init: Option<i32>,
    #[serde(default)]
    pub devices: Vec<Device>,
    #[serde(default)]
    pub peers: Vec<Peer>,
}

pub fn parse(text: &str) -> Result<Facts, String> {
    let mut facts: Facts = serde_json::from_str(text).map_err(|e| e.to_string())?;
    facts.devices.sort_by_key(|d| d.ordinal);
    Ok(facts)
}

/// The devices `CUDA_VISIBLE_DEVICES` (`visible`, when set) leaves, in its order, numbered
/// again from 0. As the CUDA C Programming Guide ("CUDA Environment Variables") says: a
/// comma-separated list of indexes, `GPU-` UUIDs or `MIG-` UUIDs (a unique prefix of a UUID will
/// do); the first entry that names no device (or one already named) ends the list, and only
/// the devices before it are visible.
pub fn visible_devices(devices: Vec<Device>, visible: Option<&str>) -> Vec<Device> {
    let Some(list) = visible else {
        return devices;
    };
    let mut chosen: Vec<usize> = Vec::new();
    for entry in list.split(',').map(str::trim) {
        let found = if let Ok(index) = entry.parse::<usize>() {
            (index < devices.len()).then_some(index)
        } else if entry.starts_with("GPU-") {
            unique(&devices, |d| {
                d.uuid.as_deref().is_some_and(|u| u.starts_with(entry))
            })
        } else if entry.starts_with("MIG-") {
            unique(&devices, |d| {
                d.mig_uuids.iter().any(|u| u.starts_with(entry))
            })
        } else {
            None
        };
        match found {
            Some(i) if !chosen.contains(&i) => chosen.push(i),
            _ => break,
        }
    }
    chosen
        .into_iter()
        .enumerate()
        .map(|(ordinal, i)| Device {
            ordinal: ordinal as u32,
            ..devices[i].clone()
        })
        .collect()
}

fn unique(devices: &[Device], matches: impl Fn(&Device) -> bool) -> Option<usize> {
    let mut found = devices.iter().enumerate().filter(|(_, d)| matches(d));
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}
