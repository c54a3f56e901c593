//! Which pairs to run, and what their results convict: pure logic over host indices, so every
//! rule below is unit-tested without a launcher.
//!
//! Round one is a perfect matching across the two halves of the list (0+n/2, 1+n/2+1, ...), run
//! side by side: host lists are sorted by name, and names follow racks, so neighbours share a
//! leaf switch while halves reach across the spine. With an odd count the host left over runs
//! afterwards with host 0. A pair is *bad* when it was slow, failed or hung. After each round:
//! - a host is **good** when any of its pairs was fast (it can carry full speed, so a bad pair
//!   of it was its partner's doing or the link's);
//! - a host that is not good is a **node** suspect once it was bad with two or more different
//!   good partners (slow whoever it runs with);
//! - a bad pair whose two hosts are both good is a **link** suspect once it was bad twice and
//!   never fast (each host is fast with someone else, only not with each other: the path between
//!   them); after one bad run it is run again in the next round, so one hiccup convicts nothing;
//! - any other host in a bad pair is **unresolved**, and the next round pairs it with a good
//!   host it has not run with yet (disjoint pairs again; more waves when good hosts run short);
//!   with no good host at all, unresolved hosts are paired with each other where untried.
//!
//! It stops when nothing is unresolved, when no good partner is left to try, or after
//! `--max-rounds`. With one slow node among 8 this takes two rounds (its round-one partner is
//! cleared in round two, which makes that partner's bad pair the second good-partner verdict);
//! a slow link three (found, both hosts cleared, confirmed).

use std::collections::{BTreeMap, BTreeSet};

pub type HostId = usize;

/// One run pair and whether it was bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub a: HostId,
    pub b: HostId,
    pub bad: bool,
}

/// Waves of disjoint pairs: round one, across the halves.
pub fn first_round(hosts: usize) -> Vec<Vec<(HostId, HostId)>> {
    let half = hosts / 2;
    let mut waves = vec![(0..half).map(|i| (i, i + half)).collect::<Vec<_>>()];
    if hosts % 2 == 1 && hosts >= 3 {
        waves.push(vec![(hosts - 1, 0)]);
    }
    waves.retain(|w| !w.is_empty());
    waves
}

/// `--all-links`: every pair of hosts once, as a round-robin tournament by the circle method:
/// host 0 stays, the others turn one place a wave, and in each wave position i meets position
/// n−1−i — n−1 waves of n/2 disjoint pairs (an odd count adds a bye: whoever meets it sits
/// the wave out).
pub fn tournament(hosts: usize) -> Vec<Vec<(HostId, HostId)>> {
    let bye = hosts % 2 == 1;
    let n = hosts + usize::from(bye);
    if hosts < 2 {
        return Vec::new();
    }
    let mut ring: Vec<HostId> = (0..n).collect();
    let mut waves = Vec::new();
    for _ in 0..n - 1 {
        let wave: Vec<(HostId, HostId)> = (0..n / 2)
            .map(|i| (ring[i], ring[n - 1 - i]))
            .filter(|&(a, b)| a < hosts && b < hosts)
            .map(|(a, b)| (a.min(b), a.max(b)))
            .collect();
        waves.push(wave);
        let last = ring.pop().unwrap_or_default();
        ring.insert(1, last);
    }
    waves
}

/// What the results so far say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Hosts slow with two or more good partners, and those partners.
    pub nodes: Vec<(HostId, Vec<HostId>)>,
    /// Pairs of two good hosts, bad twice and never fast.
    pub links: Vec<(HostId, HostId)>,
    /// Pairs of two good hosts bad once: run again before anything is said.
    pub retry: Vec<(HostId, HostId)>,
    /// Hosts in a bad pair that are neither good nor convicted.
    pub unresolved: Vec<HostId>,
    /// Hosts with at least one fast pair.
    pub good: BTreeSet<HostId>,
}

impl Findings {
    /// Nothing left for another round to settle.
    pub fn settled(&self) -> bool {
        self.unresolved.is_empty() && self.retry.is_empty()
    }
}

fn key(a: HostId, b: HostId) -> (HostId, HostId) {
    (a.min(b), a.max(b))
}

pub fn findings(verdicts: &[Verdict]) -> Findings {
    let good: BTreeSet<HostId> = verdicts
        .iter()
        .filter(|v| !v.bad)
        .flat_map(|v| [v.a, v.b])
        .collect();
    // Per pair: (bad runs, fast runs).
    let mut runs: BTreeMap<(HostId, HostId), (usize, usize)> = BTreeMap::new();
    let mut bad_partners: BTreeMap<HostId, BTreeSet<HostId>> = BTreeMap::new();
    for v in verdicts {
        let entry = runs.entry(key(v.a, v.b)).or_default();
        if v.bad {
            entry.0 += 1;
            bad_partners.entry(v.a).or_default().insert(v.b);
            bad_partners.entry(v.b).or_default().insert(v.a);
        } else {
            entry.1 += 1;
        }
    }
    let mut findings = Findings {
        good: good.clone(),
        ..Findings::default()
    };
    for (&(a, b), &(bad, fast)) in &runs {
        if bad == 0 || fast > 0 || !good.contains(&a) || !good.contains(&b) {
            continue;
        }
        if bad >= 2 {
            findings.links.push((a, b));
        } else {
            findings.retry.push((a, b));
        }
    }
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

/// The next round, in waves of disjoint pairs: link candidates run again, and each unresolved
/// host with a good host it has not run with (with no good host at all, with another unresolved
/// host it has not run with). Empty when nothing is left to try.
pub fn next_round(verdicts: &[Verdict], findings: &Findings) -> Vec<Vec<(HostId, HostId)>> {
    let mut tried: BTreeMap<HostId, BTreeSet<HostId>> = BTreeMap::new();
    for v in verdicts {
        tried.entry(v.a).or_default().insert(v.b);
        tried.entry(v.b).or_default().insert(v.a);
    }
    let partners: Vec<HostId> = if findings.good.is_empty() {
        findings.unresolved.clone()
    } else {
        findings.good.iter().copied().collect()
    };
    let mut retry: Vec<(HostId, HostId)> = findings.retry.clone();
    let mut waiting: Vec<HostId> = findings.unresolved.clone();
    let mut waves = Vec::new();
    while !retry.is_empty() || !waiting.is_empty() {
        let mut used = BTreeSet::new();
        let mut wave = Vec::new();
        retry.retain(|&(a, b)| {
            if used.contains(&a) || used.contains(&b) {
                return true;
            }
            used.extend([a, b]);
            wave.push((a, b));
            false
        });
        let mut later = Vec::new();
        for &host in &waiting {
            let untried: Vec<HostId> = partners
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
                    // Paired with each other (no good host): both have now tried it.
                    tried.entry(host).or_default().insert(partner);
                    tried.entry(partner).or_default().insert(host);
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
            if f.settled() || round >= max_rounds {
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
    fn one_slow_link_is_a_link_with_its_two_hosts_once_run_twice() {
        // Round one pairs across the halves: 2 with 6.
        let (f, rounds) = simulate(8, 3, |a, b| key(a, b) == (2, 6));
        assert_eq!(f.links, vec![(2, 6)]);
        assert!(f.nodes.is_empty() && f.unresolved.is_empty() && f.retry.is_empty());
        assert_eq!(rounds, 3);
        // A link never run is never seen: pairs test n/2 links a round, not all of them.
        let (f, rounds) = simulate(8, 3, |a, b| key(a, b) == (2, 3));
        assert!(f.links.is_empty() && f.nodes.is_empty());
        assert_eq!(rounds, 1);
    }

    #[test]
    fn one_bad_run_between_good_hosts_convicts_nothing() {
        // Bad the first time only (an ssh hiccup, a bootstrap timeout).
        let mut verdicts = vec![
            Verdict {
                a: 0,
                b: 2,
                bad: true,
            },
            Verdict {
                a: 1,
                b: 3,
                bad: false,
            },
            Verdict {
                a: 0,
                b: 1,
                bad: false,
            },
            Verdict {
                a: 2,
                b: 3,
                bad: false,
            },
        ];
        let f = findings(&verdicts);
        assert_eq!(f.retry, vec![(0, 2)]);
        assert!(f.links.is_empty());
        assert_eq!(next_round(&verdicts, &f), vec![vec![(0, 2)]]);
        verdicts.push(Verdict {
            a: 0,
            b: 2,
            bad: false,
        });
        let f = findings(&verdicts);
        assert!(f.settled() && f.links.is_empty() && f.nodes.is_empty());
    }

    #[test]
    fn all_fast_is_one_round_and_odd_counts_pair_the_last_host() {
        let (f, rounds) = simulate(8, 3, |_, _| false);
        assert_eq!((f, rounds).1, 1);
        assert_eq!(first_round(5), vec![vec![(0, 2), (1, 3)], vec![(4, 0)]]);
        assert_eq!(first_round(8)[0], vec![(0, 4), (1, 5), (2, 6), (3, 7)]);
        assert_eq!(first_round(2), vec![vec![(0, 1)]]);
        assert!(first_round(1).is_empty());
        // The odd host out slow: a node.
        let (f, _) = simulate(5, 3, |a, b| a == 4 || b == 4);
        assert_eq!(f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn two_slow_nodes_in_one_pair_are_both_found() {
        let (f, _) = simulate(8, 4, |a, b| [2, 6].contains(&a) || [2, 6].contains(&b));
        assert_eq!(f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![2, 6]);
        assert!(f.links.is_empty());
        // Two dead hosts of four, paired together in round one.
        let (f, _) = simulate(4, 3, |a, b| [0, 2].contains(&a) || [0, 2].contains(&b));
        assert_eq!(f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![0, 2]);
    }

    #[test]
    fn everything_slow_leaves_everything_unresolved() {
        // No good host: the unresolved are paired with each other until all pairs were tried.
        let (f, rounds) = simulate(4, 5, |_, _| true);
        assert!(f.nodes.is_empty() && f.links.is_empty());
        assert_eq!(f.unresolved, vec![0, 1, 2, 3]);
        assert!(rounds <= 5);
        // Two hosts, their one pair slow: nobody to re-pair with.
        let (f, rounds) = simulate(2, 3, |_, _| true);
        assert_eq!((f.unresolved, rounds), (vec![0, 1], 1));
        // Three hosts, the first bad: its two round-one pairs are bad, so nobody is good; the
        // untried pair of the other two clears them, and the first is convicted.
        let (f, _) = simulate(3, 4, |a, b| a == 0 || b == 0);
        assert_eq!(f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn the_tournament_meets_every_pair_once_in_disjoint_waves() {
        for hosts in 2..12 {
            let waves = tournament(hosts);
            let even = hosts + hosts % 2;
            assert_eq!(waves.len(), even - 1, "{hosts}");
            let mut met = BTreeSet::new();
            for wave in &waves {
                let busy: BTreeSet<HostId> = wave.iter().flat_map(|(a, b)| [*a, *b]).collect();
                assert_eq!(busy.len(), wave.len() * 2, "a host twice in one wave");
                for &(a, b) in wave {
                    assert!(met.insert(key(a, b)), "{a}-{b} twice");
                }
            }
            assert_eq!(met.len(), hosts * (hosts - 1) / 2, "{hosts}");
        }
        assert!(tournament(1).is_empty());
    }

    #[test]
    fn every_link_run_finds_the_link_round_one_never_pairs() {
        // 2 with 3 never meets in round one (it pairs across the halves): the tournament
        // runs it, once bad it is run again, and bad again it is a link.
        let bad = |a: HostId, b: HostId| key(a, b) == (2, 3);
        let mut verdicts: Vec<Verdict> = tournament(8)
            .into_iter()
            .flatten()
            .map(|(a, b)| Verdict {
                a,
                b,
                bad: bad(a, b),
            })
            .collect();
        let f = findings(&verdicts);
        assert_eq!(f.retry, vec![(2, 3)]);
        for wave in next_round(&verdicts, &f) {
            for (a, b) in wave {
                verdicts.push(Verdict {
                    a,
                    b,
                    bad: bad(a, b),
                });
            }
        }
        assert_eq!(findings(&verdicts).links, vec![(2, 3)]);
    }

    #[test]
    fn the_round_budget_is_kept() {
        let (f, rounds) = simulate(8, 1, |a, b| a == 5 || b == 5);
        assert_eq!(rounds, 1);
        assert_eq!(f.unresolved, vec![1, 5]);
    }
}
