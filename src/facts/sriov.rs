//! SR-IOV physical and virtual functions (reference/sysfs.md §4): which PCI functions can have
//! VFs (`sriov_totalvfs`), how many are enabled (`sriov_numvfs`), the VFs themselves through the
//! PF's `virtfnN` links, and for each VF its driver, RDMA device and netdev.

use super::pci::{is_bdf, short};
use super::{join, trimmed};
use crate::answers::{FactError, ParseError};
use crate::source::Source;

const PCI_DEVICES: &str = "sys/bus/pci/devices";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalFunction {
    pub bdf: String,
    pub total_vfs: u32,
    pub num_vfs: u32,
    pub numa_node: Option<u32>,
    /// The PF has an RDMA device (`infiniband/` under it): its VFs should have one too.
    pub rdma: bool,
    pub vfs: Vec<VirtualFunction>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualFunction {
    pub bdf: String,
    pub driver: Option<String>,
    pub rdma_device: Option<String>,
    pub netdev: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct SriovFacts {
    /// Functions with `sriov_totalvfs` > 0.
    pub pfs: Vec<PhysicalFunction>,
    pub problems: Vec<FactError>,
}

impl SriovFacts {
    pub fn vfs(&self) -> impl Iterator<Item = (&PhysicalFunction, &VirtualFunction)> {
        self.pfs
            .iter()
            .flat_map(|pf| pf.vfs.iter().map(move |vf| (pf, vf)))
    }
}

/// `sriov_totalvfs` / `sriov_numvfs`: `%u`.
pub fn parse_count(text: &str) -> Result<u32, ParseError> {
    let t = trimmed(text);
    t.parse()
        .map_err(|_| ParseError::new(format!("not a vf count: {:?}", short(t))))
}

fn first_entry(source: &dyn Source, dir: &str) -> Option<String> {
    source.read_dir(dir).ok()?.into_iter().next()
}

/// SR-IOV facts for the given PCI functions (with their NUMA nodes, from the PCI facts).
pub fn gather(source: &dyn Source, functions: &[(String, Option<u32>)]) -> SriovFacts {
    let mut facts = SriovFacts::default();
    for (bdf, numa_node) in functions {
        let dir = join(PCI_DEVICES, bdf);
        let total = match source.read_to_string(&join(&dir, "sriov_totalvfs")) {
            Ok(text) => match parse_count(&text) {
                Ok(n) => n,
                Err(e) => {
                    facts
                        .problems
                        .push(FactError::parse(&join(&dir, "sriov_totalvfs"), e));
                    continue;
                }
            },
            Err(err) if err.is_missing() => continue,
            Err(err) => {
                facts.problems.push(err.into());
                continue;
            }
        };
        if total == 0 {
            continue;
        }
        let num_vfs = match source.read_to_string(&join(&dir, "sriov_numvfs")) {
            Ok(text) => parse_count(&text).unwrap_or_else(|e| {
                facts
                    .problems
                    .push(FactError::parse(&join(&dir, "sriov_numvfs"), e));
                0
            }),
            Err(err) => {
                if !err.is_missing() {
                    facts.problems.push(err.into());
                }
                0
            }
        };
        let links = source
            .list_dir(&dir, &|n| {
                n.strip_prefix("virtfn")
                    .is_some_and(|k| k.parse::<u32>().is_ok())
            })
            .unwrap_or_default();
        let mut indexed: Vec<(u32, String)> = links
            .into_iter()
            .filter_map(|l| Some((l.strip_prefix("virtfn")?.parse().ok()?, l)))
            .collect();
        indexed.sort();
        let mut vfs = Vec::new();
        for (_, link) in indexed {
            let path = join(&dir, &link);
            let vf_bdf = match source.canonical(&path) {
                Ok(target) => target
                    .rsplit('/')
                    .next()
                    .filter(|b| is_bdf(b))
                    .map(str::to_string),
                Err(err) => {
                    facts.problems.push(err.into());
                    None
                }
            };
            let Some(vf_bdf) = vf_bdf else { continue };
            let vf_dir = join(PCI_DEVICES, &vf_bdf);
            vfs.push(VirtualFunction {
                driver: source
                    .read_link(&join(&vf_dir, "driver"))
                    .ok()
                    .and_then(|t| t.rsplit('/').next().map(str::to_string)),
                rdma_device: first_entry(source, &join(&vf_dir, "infiniband")),
                netdev: first_entry(source, &join(&vf_dir, "net")),
                bdf: vf_bdf,
            });
        }
        facts.pfs.push(PhysicalFunction {
            bdf: bdf.clone(),
            total_vfs: total,
            num_vfs,
            numa_node: *numa_node,
            rdma: source.exists(&join(&dir, "infiniband")),
            vfs,
        });
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse() {
        assert_eq!(parse_count("64\n").unwrap(), 64);
        assert_eq!(parse_count("0").unwrap(), 0);
        assert!(parse_count("-1").is_err());
        assert!(parse_count("").is_err());
    }
}
