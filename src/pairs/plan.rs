//! Which pairs to run, and what their results convict: pure logic over host indices, so every
//! rule below is unit-tested without a launcher.
//!
//! Round one is a perfect matching (0+1, 2+3, ...), run side by side; with an odd count the
//! host left over runs afterwards with host 0. A pair is *bad* when it was slow, failed or hung.
//! After each round:
//! - a host is **good** when any of its pairs was fast (it can carry full speed, so a bad pair
//!   of it was its partner's doing or the link's);
//! - a host that is not good is a **node** suspect once it was bad with two or more different
//!   good partners (slow whoever it runs with);
//! - a bad pair whose two hosts are both good is a **link** suspect (each is fast with someone
//!   else, only not with each other: the path between them);
//! - any other host in a bad pair is **unresolved**, and the next round pairs it with a good
//!   host it has not run with yet (disjoint pairs again; more waves when good hosts run short).
//!
//! It stops when nothing is unresolved, when no good partner is left to try, or after
//! `--max-rounds`. With one slow node among 8 this takes two rounds (its round-one partner is
//! cleared in round two, which makes that partner's bad pair the second good-partner verdict);
//! a slow link two.

use std::collections::{BTreeMap, BTreeSet};

pub type HostId = usize;

/// One run pair and whether it was bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub a: HostId,
    pub b: HostId,
    pub bad: bool,
}

/// Waves of disjoint pairs: round one.
pub fn first_round(hosts: usize) -> Vec<Vec<(HostId, HostId)>> {
    let mut waves = vec![
        (0..hosts / 2)
            .map(|i| (2 * i, 2 * i + 1))
            .collect::<Vec<_>>(),
    ];
    if hosts % 2 == 1 && hosts >= 3 {
        waves.push(vec![(hosts - 1, 0)]);
    }
    waves.retain(|w| !w.is_empty());
    waves
}

/// What the results so far say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Hosts slow with two or more good partners, and those partners.
    pub nodes: Vec<(HostId, Vec<HostId>)>,
    /// Bad pairs of two good hosts.
    pub links: Vec<(HostId, HostId)>,
    /// Hosts in a bad pair that are neither good nor convicted.
    pub unresolved: Vec<HostId>,
    /// Hosts with at least one fast pair.
    pub good: BTreeSet<HostId>,
}

pub fn findings(verdicts: &[Verdict]) -> Findings {
    let good: BTreeSet<HostId> = verdicts
        .iter()
        .filter(|v| !v.bad)
        .flat_map(|v| [v.a, v.b])
        .collect();
    let mut bad_partners: BTreeMap<HostId, BTreeSet<HostId>> = BTreeMap::new();
    let mut links = BTreeSet::new();
    for v in verdicts.iter().filter(|v| v.bad) {
        bad_partners.entry(v.a).or_default().insert(v.b);
        bad_partners.entry(v.b).or_default().insert(v.a);
        if good.contains(&v.a) && good.contains(&v.b) {
            links.insert((v.a.min(v.b), v.a.max(v.b)));
        }
    }
    let mut findings = Findings {
        links: links.into_iter().collect(),
        good: good.clone(),
        ..Findings::default()
    };
    for (host, partners) in bad_partners {
        if good.contains(&host) {
            continue;
        }
        let good_partners: Vec<HostId> =
            partners.into_iter().filter(|p| good.contains(p)).collect();
        if good_partners.len() >= 2 {
            findings.nodes.push((host, good_partners));
        } else {
            findings.unresolved.push(host);
        }
    }
    findings
}

/// The next round: each unresolved host with a good host it has not run with, in waves of
/// disjoint pairs. Empty when no unresolved host has a partner left to try.
pub fn next_round(verdicts: &[Verdict], findings: &Findings) -> Vec<Vec<(HostId, HostId)>> {
    let mut tried: BTreeMap<HostId, BTreeSet<HostId>> = BTreeMap::new();
    for v in verdicts {
        tried.entry(v.a).or_default().insert(v.b);
        tried.entry(v.b).or_default().insert(v.a);
    }
    let mut waiting: Vec<HostId> = findings.unresolved.clone();
    let mut waves = Vec::new();
    while !waiting.is_empty() {
        let mut used = BTreeSet::new();
        let mut wave = Vec::new();
        let mut later = Vec::new();
        for &host in &waiting {
            let untried: Vec<HostId> = findings
                .good
                .iter()
                .copied()
                .filter(|p| *p != host && !tried.get(&host).is_some_and(|t| t.contains(p)))
                .collect();
            if untried.is_empty() {
                continue; // nobody left to try: stays unresolved
            }
            match untried.iter().find(|p| !used.contains(*p)) {
                Some(&partner) if !used.contains(&host) => {
                    used.insert(host);
                    used.insert(partner);
                    wave.push((host, partner));
                }
                _ => later.push(host),
            }
        }
        if wave.is_empty() {
            break;
        }
        waves.push(wave);
        waiting = later;
    }
    waves
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run rounds against `bad(a, b)` until done; returns the findings and rounds used.
    fn simulate(
        hosts: usize,
        max_rounds: u32,
        bad: impl Fn(HostId, HostId) -> bool,
    ) -> (Findings, u32) {
        let mut verdicts = Vec::new();
        let mut waves = first_round(hosts);
        let mut round = 1;
        loop {
            for wave in &waves {
                let busy: BTreeSet<HostId> = wave.iter().flat_map(|(a, b)| [*a, *b]).collect();
                assert_eq!(busy.len(), wave.len() * 2, "a host twice in one wave");
                for &(a, b) in wave {
                    verdicts.push(Verdict {
                        a,
                        b,
                        bad: bad(a, b),
                    });
                }
            }
            let f = findings(&verdicts);
            if f.unresolved.is_empty() || round >= max_rounds {
                return (f, round);
            }
            waves = next_round(&verdicts, &f);
            if waves.is_empty() {
                return (f, round);
            }
            round += 1;
        }
    }

    #[test]
    fn one_slow_node_among_eight_is_a_node_in_two_rounds() {
        for slow in 0..8 {
            let (f, rounds) = simulate(8, 3, |a, b| a == slow || b == slow);
            assert_eq!(f.nodes.len(), 1, "slow {slow}: {f:?}");
            assert_eq!(f.nodes[0].0, slow);
            assert!(f.links.is_empty() && f.unresolved.is_empty(), "{f:?}");
            assert!(rounds <= 3, "slow {slow}: {rounds} rounds");
        }
    }

    #[test]
    fn one_slow_link_is_a_link_with_its_two_hosts() {
        let (f, rounds) = simulate(8, 3, |a, b| (a.min(b), a.max(b)) == (2, 3));
        assert_eq!(f.links, vec![(2, 3)]);
        assert!(f.nodes.is_empty() && f.unresolved.is_empty());
        assert_eq!(rounds, 2);
    }

    #[test]
    fn all_fast_is_one_round_and_odd_counts_pair_the_last_host() {
        let (f, rounds) = simulate(8, 3, |_, _| false);
        assert_eq!((f, rounds).1, 1);
        assert_eq!(first_round(5), vec![vec![(0, 1), (2, 3)], vec![(4, 0)]]);
        assert_eq!(first_round(2), vec![vec![(0, 1)]]);
        assert!(first_round(1).is_empty());
        // The odd host out slow: a node.
        let (f, _) = simulate(5, 3, |a, b| a == 4 || b == 4);
        assert_eq!(f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn two_slow_nodes_in_one_pair_are_both_found() {
        let (f, _) = simulate(8, 4, |a, b| [2, 3].contains(&a) || [2, 3].contains(&b));
        assert_eq!(f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(f.links.is_empty());
    }

    #[test]
    fn everything_slow_leaves_everything_unresolved() {
        let (f, rounds) = simulate(4, 3, |_, _| true);
        assert!(f.nodes.is_empty() && f.links.is_empty());
        assert_eq!(f.unresolved, vec![0, 1, 2, 3]);
        assert_eq!(rounds, 1);
        // Two hosts, their one pair slow: nobody to re-pair with.
        let (f, _) = simulate(2, 3, |_, _| true);
        assert_eq!(f.unresolved, vec![0, 1]);
    }

    #[test]
    fn the_round_budget_is_kept() {
        let (f, rounds) = simulate(8, 1, |a, b| a == 5 || b == 5);
        assert_eq!(rounds, 1);
        assert_eq!(f.unresolved, vec![4, 5]);
    }
}
