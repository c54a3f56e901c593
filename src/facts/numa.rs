//! NUMA nodes from `/sys/devices/system/node/` and the CPU sets sysfs prints (reference/sysfs.md
//! §2 `local_cpus`/`local_cpulist`, §7). Facts only: which node a device belongs to is worked out
//! in `facts/topology.rs`, and whether that is good is the topology checks' business.
//!
//! Node ids need not be dense (`0,8,250-255` on POWER9 with GPU memory nodes), so nodes are a
//! list keyed by id, never an array indexed by it (sysfs.md §7, §13.12).

use std::fmt;

use serde::Serialize;

use super::pci::short;
use super::trimmed;
use crate::answers::{FactError, ParseError};
use crate::source::Source;

pub const NODE_DIR: &str = "sys/devices/system/node";

/// Largest CPU number accepted from a list or mask. The kernel's `NR_CPUS` tops out at 8192 on
/// x86 (`arch/x86/Kconfig`); 65536 leaves room for any machine and bounds what a corrupt file
/// can make the parser allocate.
pub const MAX_CPUS: u32 = 1 << 16;

/// A set of CPU numbers. Prints as a kernel CPU list (`0-55,112-167`).
///
/// Kept as the ranges the kernel prints — sorted, disjoint and not adjacent — not as numbers
/// one by one: every judged PCI function has a `local_cpulist` of a socket's CPUs, and inserting
/// each CPU into a tree was a twentieth of a replay's instructions (issue 41). Equality, order
/// and printing are those of the set of numbers.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(Vec<(u32, u32)>);

impl CpuSet {
    /// The set of the inclusive ranges `ranges`, in any order, overlapping or not.
    fn from_ranges(mut ranges: Vec<(u32, u32)>) -> Self {
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        CpuSet(merged)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.iter().map(|(lo, hi)| (hi - lo) as usize + 1).sum()
    }
    /// Every CPU of `self` is in `other`: each range within one of `other`'s (they are merged,
    /// so a range of `self` cannot straddle two of them).
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        let mut theirs = other.0.iter().peekable();
        self.0.iter().all(|&(lo, hi)| {
            while theirs.next_if(|(_, their_hi)| *their_hi < lo).is_some() {}
            theirs
                .peek()
                .is_some_and(|&&(their_lo, their_hi)| their_lo <= lo && hi <= their_hi)
        })
    }
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flat_map(|&(lo, hi)| lo..=hi)
    }
}

/// The order of the sets of numbers (as a `BTreeSet<u32>` orders): element by element.
impl Ord for CpuSet {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.iter().cmp(other.iter())
    }
}

impl PartialOrd for CpuSet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet::from_ranges(iter.into_iter().map(|cpu| (cpu, cpu)).collect())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(start, end)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A kernel CPU list (`local_cpulist`, `node*/cpulist`): `0-7,16-23`, `0,4,8`, or empty
/// (a CPU-less memory node). `lib/bitmap.c` `bitmap_parselist` format; the `:used/group` stride
/// form only appears in boot parameters, not in sysfs output.
pub fn parse_cpulist(text: &str) -> Result<CpuSet, ParseError> {
    let t = trimmed(text);
    if t.is_empty() {
        return Ok(CpuSet::default());
    }
    let mut ranges = Vec::new();
    for part in t.split(',') {
        let part = part.trim();
        let bad = || ParseError::new(format!("not a cpu list: {:?}", short(t)));
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part, part),
        };
        let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
        let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
        if lo > hi || hi >= MAX_CPUS {
            return Err(bad());
        }
        ranges.push((lo, hi));
    }
    // Ranges merged, never expanded: a damaged file repeating `0-65535` a million times costs a
    // sort (found by tests/parser_properties.rs).
    Ok(CpuSet::from_ranges(ranges))
}

/// A kernel CPU mask (`local_cpus`, `node*/cpumap`): comma-separated 32-bit hex words, most
/// significant first. Its width follows the kernel's possible-CPU count, not the online count,
/// and the leading word may be short: a 16-CPU box prints `00000000,00000000,00000000,0000ff00`
/// (hwloc `32em64t-2n8c`) and a 32-CPU RHEL 7 box `0000,00000000,00000000,00ff00ff` (hwloc
/// `32intel64-2p8co2t+8ve`). `lib/bitmap.c` `%*pb`; sysfs.md §2.
pub fn parse_cpumask(text: &str) -> Result<CpuSet, ParseError> {
    let t = trimmed(text);
    let bad = || ParseError::new(format!("not a cpu mask: {:?}", short(t)));
    if t.is_empty() {
        return Err(bad());
    }
    let words: Vec<&str> = t.split(',').collect();
    if words.len() as u32 > MAX_CPUS / 32 {
        return Err(bad());
    }
    let mut ranges = Vec::new();
    for (k, word) in words.iter().rev().enumerate() {
        if word.is_empty() || word.len() > 8 || !word.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let value = u32::from_str_radix(word, 16).map_err(|_| bad())?;
        for bit in 0..32u32 {
            if value & (1 << bit) != 0 {
                let cpu = k as u32 * 32 + bit;
                ranges.push((cpu, cpu));
            }
        }
    }
    Ok(CpuSet::from_ranges(ranges))
}

/// `node*/distance`: the node's SLIT row, one value per online node in id order (`10 21`).
pub fn parse_distance(text: &str) -> Result<Vec<u32>, ParseError> {
    let t = trimmed(text);
    let row: Result<Vec<u32>, _> = t.split_ascii_whitespace().map(str::parse).collect();
    match row {
        Ok(row) if !row.is_empty() => Ok(row),
        _ => Err(ParseError::new(format!(
            "not a distance row: {:?}",
            short(t)
        ))),
    }
}

/// `MemTotal` of a `node*/meminfo` (`Node 0 MemTotal:       15728640 kB`), in kB.
pub fn parse_meminfo_total(text: &str) -> Result<u64, ParseError> {
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        if let (Some("Node"), Some(_), Some("MemTotal:"), Some(value)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            return value
                .parse()
                .map_err(|_| ParseError::new(format!("not a size: {:?}", short(line))));
        }
    }
    Err(ParseError::new("no `Node N MemTotal:` line"))
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    pub id: u32,
    /// Empty for CPU-less memory nodes (GPU HBM on POWER9, CXL).
    pub cpus: CpuSet,
    pub mem_total_kb: Option<u64>,
    /// SLIT row: distance to each node of [`NumaFacts::nodes`], in the same order.
    pub distances: Vec<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NumaFacts {
    /// Sorted by id.
    pub nodes: Vec<NumaNode>,
    #[serde(skip)]
    pub problems: Vec<FactError>,
}

impl NumaFacts {
    /// Nodes that have CPUs: the ones a device's CPU list can point at.
    pub fn cpu_nodes(&self) -> impl Iterator<Item = &NumaNode> {
        self.nodes.iter().filter(|n| !n.cpus.is_empty())
    }

    /// The node whose CPUs contain every CPU of `cpus`, when exactly one does (sysfs.md §7: the
    /// fallback for `numa_node` = -1, topology.md §3).
    pub fn node_of_cpus(&self, cpus: &CpuSet) -> Option<u32> {
        if cpus.is_empty() {
            return None;
        }
        let mut matching = self.cpu_nodes().filter(|n| cpus.is_subset(&n.cpus));
        let first = matching.next()?;
        matching.next().is_none().then_some(first.id)
    }
}

/// Read every `node<N>` directory. A missing node directory (kernel without NUMA, trimmed
/// capture) gives no nodes; one unreadable node file is a problem, not a failure.
pub fn gather(source: &dyn Source) -> NumaFacts {
    let mut facts = NumaFacts::default();
    let names = match source.list_dir(NODE_DIR, &|n| node_id(n).is_some()) {
        Ok(names) => names,
        Err(err) if err.is_missing() => return facts,
        Err(err) => {
            facts.problems.push(err.into());
            return facts;
        }
    };
    let mut ids: Vec<u32> = names.iter().filter_map(|n| node_id(n)).collect();
    ids.sort_unstable();
    for id in ids {
        let dir = format!("{NODE_DIR}/node{id}");
        let mut problems = Vec::new();
        let attr = |name: &str, problems: &mut Vec<FactError>| -> Option<(String, String)> {
            let path = format!("{dir}/{name}");
            match source.read_to_string(&path) {
                Ok(text) => Some((path, text)),
                Err(err) if err.is_missing() => None,
                Err(err) => {
                    problems.push(err.into());
                    None
                }
            }
        };
        let cpus = attr("cpulist", &mut problems)
            .and_then(|(path, text)| noted(&path, parse_cpulist(&text), &mut problems))
            .unwrap_or_default();
        let mem_total_kb = attr("meminfo", &mut problems)
            .and_then(|(path, text)| noted(&path, parse_meminfo_total(&text), &mut problems));
        let distances = attr("distance", &mut problems)
            .and_then(|(path, text)| noted(&path, parse_distance(&text), &mut problems))
            .unwrap_or_default();
        facts.problems.extend(problems);
        facts.nodes.push(NumaNode {
            id,
            cpus,
            mem_total_kb,
            distances,
        });
    }
    facts
}

/// A parse result as an option; a parse error becomes a problem naming the path.
pub(crate) fn noted<T>(
    path: &str,
    result: Result<T, ParseError>,
    problems: &mut Vec<FactError>,
) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(FactError::parse(path, e));
            None
        }
    }
}

/// `node12` → 12.
fn node_id(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("node")?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        let set = parse_cpulist("0-55,112-167\n").unwrap();
        assert_eq!(set.len(), 112);
        assert_eq!(set.to_string(), "0-55,112-167");
        assert_eq!(parse_cpulist("0,4,8,12\n").unwrap().to_string(), "0,4,8,12");
        assert_eq!(parse_cpulist("3\n").unwrap().to_string(), "3");
        assert!(parse_cpulist("\n").unwrap().is_empty());
        assert!(parse_cpulist("7-3").is_err());
        assert!(parse_cpulist("0-4294967295").is_err());
        assert!(parse_cpulist("a-b").is_err());
    }

    #[test]
    fn overlapping_and_repeated_ranges_merge_in_linear_time() {
        assert_eq!(parse_cpulist("8-15,0-3,2-9,3").unwrap().to_string(), "0-15");
        // Regression (tests/parser_properties.rs): a million full-width ranges took minutes.
        let started = std::time::Instant::now();
        let set = parse_cpulist("0-65535,".repeat(1 << 17).trim_end_matches(',')).unwrap();
        assert_eq!(set.len(), MAX_CPUS as usize);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// The ranges behave as the set of numbers they hold: equality, subsets, order, counting.
    #[test]
    fn cpu_sets_are_sets_of_numbers() {
        use std::collections::BTreeSet;
        let lists = [
            "",
            "0",
            "0-3",
            "4-7",
            "0-7",
            "0-3,4-7",
            "0-55,112-167",
            "56-111",
            "0-55",
            "0,2,4",
            "1-2",
            "0-3,8-11",
            "2-9",
            "112-167",
            "0-167",
        ];
        let model = |t: &str| -> BTreeSet<u32> { parse_cpulist(t).unwrap().iter().collect() };
        for a in lists {
            let set = parse_cpulist(a).unwrap();
            assert_eq!(set.len(), model(a).len(), "{a}");
            assert_eq!(set.iter().collect::<CpuSet>(), set, "{a}");
            for b in lists {
                let other = parse_cpulist(b).unwrap();
                assert_eq!(set == other, model(a) == model(b), "{a} == {b}");
                assert_eq!(
                    set.is_subset(&other),
                    model(a).is_subset(&model(b)),
                    "{a} in {b}"
                );
                assert_eq!(set.cmp(&other), model(a).cmp(&model(b)), "{a} cmp {b}");
            }
        }
        assert_eq!(parse_cpulist("0-3,4-7").unwrap().to_string(), "0-7");
        assert_eq!(
            format!("{:?}", parse_cpulist("0-3").unwrap()),
            "CpuSet(0-3)"
        );
    }

    #[test]
    fn cpu_masks_of_any_width() {
        // hwloc 32em64t-2n8c: 16 CPUs, mask printed 128 bits wide.
        let m = parse_cpumask("00000000,00000000,00000000,0000ff00\n").unwrap();
        assert_eq!(m.to_string(), "8-15");
        // hwloc 32intel64-2p8co2t+8ve: the leading word is 4 digits.
        let m = parse_cpumask("0000,00000000,00000000,00ff00ff\n").unwrap();
        assert_eq!(m.to_string(), "0-7,16-23");
        // 224 CPUs, 7 words (HGX H100 socket 1).
        let m = parse_cpumask("ffffffff,ffffff00,00000000,0000ffff,ffffffff,ff000000,00000000\n")
            .unwrap();
        assert_eq!(m.to_string(), "56-111,168-223");
        assert_eq!(parse_cpumask("1").unwrap().to_string(), "0");
        assert!(parse_cpumask("").is_err());
        assert!(parse_cpumask("123456789").is_err());
        assert!(parse_cpumask("ff,,ff").is_err());
        assert!(parse_cpumask("zz").is_err());
    }

    #[test]
    fn node_files() {
        assert_eq!(parse_distance("10 21\n").unwrap(), vec![10, 21]);
        assert_eq!(
            parse_distance("10 20 20 20\n").unwrap(),
            vec![10, 20, 20, 20]
        );
        assert!(parse_distance("\n").is_err());
        let meminfo = "Node 0 MemTotal:       15728640 kB\nNode 0 MemFree:         1234 kB\n";
        assert_eq!(parse_meminfo_total(meminfo).unwrap(), 15728640);
        assert!(parse_meminfo_total("Node 0 MemFree: 1 kB\n").is_err());
        assert_eq!(node_id("node250"), Some(250));
        assert_eq!(node_id("node"), None);
        assert_eq!(node_id("online"), None);
    }

    #[test]
    fn a_cpu_list_maps_to_the_one_node_that_holds_it() {
        let node = |id, cpus: &str| NumaNode {
            id,
            cpus: parse_cpulist(cpus).unwrap(),
            mem_total_kb: None,
            distances: vec![],
        };
        let facts = NumaFacts {
            nodes: vec![node(0, "0-7,16-23"), node(1, "8-15,24-31"), node(8, "")],
            problems: vec![],
        };
        assert_eq!(
            facts.node_of_cpus(&parse_cpulist("0-7,16-23").unwrap()),
            Some(0)
        );
        assert_eq!(facts.node_of_cpus(&parse_cpulist("9").unwrap()), Some(1));
        // All CPUs (what the kernel prints when firmware gave no proximity): no single node.
        assert_eq!(facts.node_of_cpus(&parse_cpulist("0-31").unwrap()), None);
        assert_eq!(facts.node_of_cpus(&CpuSet::default()), None);
    }
}
