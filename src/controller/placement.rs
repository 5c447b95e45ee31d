//! Where a new partition's replicas go (docs/design/multi-broker.md, 4.5):
//! round robin over the eligible brokers from a random start, so leaders
//! (each partition's first replica) spread evenly and two topics do not
//! pile their leaders on the same broker; the followers of partition p
//! start one step past its leader and shift by one each time p wraps round
//! the brokers, as Kafka's assignment did, so a broker's followers are not
//! always the same brokers. Brokers are ordered alternating their racks
//! (r1, r2, r3, r1, ...), and a follower whose rack a replica of the
//! partition already has gives way to the next broker of an unused rack:
//! a partition covers every rack before two of its replicas share one.

use std::collections::BTreeMap;

/// A broker that may be given replicas, and its rack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub node_id: i32,
    pub rack: Option<String>,
}

/// Why no assignment was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Kafka's INVALID_REPLICATION_FACTOR.
    #[error("Unable to replicate the partition {factor} time(s): The target replication factor of {factor} cannot be reached because only {brokers} broker(s) are registered.")]
    TooFewBrokers { factor: i32, brokers: usize },
    #[error("Replication factor must be larger than 0, or -1 to use the default value.")]
    FactorBelowOne,
}

/// Replicas for partitions `first..first + count` (first replica = leader),
/// with `start` the random offset into the brokers.
///
/// # Errors
/// A factor below 1 or above the number of brokers.
pub fn assign(
    brokers: &[Candidate],
    first: i32,
    count: i32,
    factor: i32,
    start: usize,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    if factor < 1 {
        return Err(PlacementError::FactorBelowOne);
    }
    let n = brokers.len();
    if factor as usize > n {
        return Err(PlacementError::TooFewBrokers { factor, brokers: n });
    }
    let order = rack_alternated(brokers);
    let rack: BTreeMap<i32, Option<&str>> =
        brokers.iter().map(|b| (b.node_id, b.rack.as_deref())).collect();
    let racks = rack.values().collect::<std::collections::BTreeSet<_>>().len();
    let factor = factor as usize;
    Ok((first..first + count)
        .map(|p| {
            let p = p as usize;
            let leader = (start + p) % n;
            // The followers' shift grows each time the partitions wrap round.
            let shift = (start + p / n) % n;
            let mut replicas = vec![order[leader]];
            for j in 1..factor {
                let step = 1 + (shift + j - 1) % (n - 1);
                // From there, the first broker not chosen yet whose rack is
                // not used yet (any rack once every rack is).
                let all_racks_used = replicas.len() % racks == 0;
                let pick = (0..n)
                    .map(|k| order[(leader + step + k) % n])
                    .filter(|id| !replicas.contains(id))
                    .find(|id| {
                        all_racks_used || replicas.iter().all(|r| rack.get(r) != rack.get(id))
                    });
                replicas.extend(pick);
            }
            replicas
        })
        .collect())
}

/// The node ids ordered by id within each rack, the racks taken in turn.
fn rack_alternated(brokers: &[Candidate]) -> Vec<i32> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for b in brokers {
        by_rack.entry(b.rack.as_deref()).or_default().push(b.node_id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
    }
    let mut order = Vec::with_capacity(brokers.len());
    for i in 0.. {
        let before = order.len();
        order.extend(by_rack.values().filter_map(|ids| ids.get(i)));
        if order.len() == before {
            break;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(racks: &[Option<&str>]) -> Vec<Candidate> {
        racks
            .iter()
            .enumerate()
            .map(|(i, r)| Candidate { node_id: i as i32 + 1, rack: r.map(str::to_string) })
            .collect()
    }

    #[test]
    fn leaders_spread_evenly_and_replicas_are_distinct() {
        let b = brokers(&[None, None, None]);
        for start in 0..5 {
            let a = assign(&b, 0, 6, 3, start).unwrap();
            let mut leaders = BTreeMap::new();
            for replicas in &a {
                *leaders.entry(replicas[0]).or_insert(0) += 1;
                let mut distinct = replicas.clone();
                distinct.sort_unstable();
                distinct.dedup();
                assert_eq!(distinct.len(), 3, "{a:?}");
            }
            assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2], "{a:?}");
        }
    }

    #[test]
    fn factor_one_round_robins_from_the_start() {
        let b = brokers(&[None, None, None]);
        let a = assign(&b, 0, 4, 1, 1).unwrap();
        assert_eq!(a, vec![vec![2], vec![3], vec![1], vec![2]]);
        // Added partitions go on where the round robin stands.
        assert_eq!(assign(&b, 4, 1, 1, 1).unwrap(), vec![vec![3]]);
    }

    #[test]
    fn replicas_cover_the_racks_before_sharing_one() {
        let b = brokers(&[Some("a"), Some("a"), Some("b"), Some("b"), Some("c"), Some("c")]);
        let rack = |id: i32| b.iter().find(|c| c.node_id == id).unwrap().rack.clone();
        for start in 0..6 {
            for replicas in assign(&b, 0, 12, 3, start).unwrap() {
                let mut racks: Vec<_> = replicas.iter().map(|r| rack(*r)).collect();
                racks.sort();
                racks.dedup();
                assert_eq!(racks.len(), 3, "{replicas:?}");
            }
            for replicas in assign(&b, 0, 12, 4, start).unwrap() {
                assert_eq!(replicas.len(), 4, "{replicas:?}");
            }
        }
    }

    #[test]
    fn a_factor_beyond_the_brokers_is_refused_with_kafkas_message() {
        let b = brokers(&[None, None]);
        let e = assign(&b, 0, 1, 3, 0).unwrap_err();
        assert_eq!(e, PlacementError::TooFewBrokers { factor: 3, brokers: 2 });
        assert!(e.to_string().contains("only 2 broker(s) are registered"));
        assert_eq!(assign(&b, 0, 1, 0, 0).unwrap_err(), PlacementError::FactorBelowOne);
    }
}
