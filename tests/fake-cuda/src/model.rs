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
