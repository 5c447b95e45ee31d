//! Fetch from follower (KIP-392): which replica a consumer is told to read
//! a partition from. With `replica.selector.class` set to Kafka's
//! `RackAwareReplicaSelector`, a leader answers a consumer's fetch (v11+,
//! with its `client.rack` as `rack_id`) with a `preferred_read_replica`
//! instead of records when another replica in the consumer's rack holds the
//! fetch offset; the consumer then reads from that follower, up to the
//! follower's high watermark, until the follower cannot serve it.
//!
//! Kafka's rules, kept here: the leader is chosen whenever the client has
//! no rack, no replica shares its rack, or the leader does; among followers
//! of the client's rack, the one with the largest log end wins, ties going
//! to the one caught up most recently. Followers whose log end is below the
//! fetch offset are not candidates (the caller leaves them out).

use crate::config_def::{broker_key, ConfigDef, ConfigValues};

/// Kafka's rack-aware selector, the one sediment serves.
pub const RACK_AWARE: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
/// Kafka's selector when none is set: always the leader.
pub const LEADER_SELECTOR: &str = "org.apache.kafka.common.replica.LeaderSelector";

pub const REPLICA_SELECTOR_CLASS: ConfigDef = broker_key!(
    "replica.selector.class",
    String,
    "",
    None,
    &["", LEADER_SELECTOR, RACK_AWARE],
    "replication: the consumers' read replica (KIP-392): org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer with client.rack to a replica in its rack (broker.rack); empty or LeaderSelector: the leader"
);

/// How a leader picks the replica a consumer reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicaSelector {
    /// Always the leader (no selector, or Kafka's `LeaderSelector`).
    #[default]
    Leader,
    /// A replica in the consumer's rack.
    RackAware,
}

/// One replica as the selector sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    pub id: i32,
    /// Its broker's `broker.rack`.
    pub rack: Option<String>,
    pub log_end_offset: i64,
    /// How long ago its fetches last reached the leader's log end (0 for
    /// the leader).
    pub caught_up_ago_ms: i64,
}

impl ReplicaSelector {
    /// `replica.selector.class` of `values` (validated on set).
    pub fn from_values(values: &dyn ConfigValues) -> Self {
        match values.value(&REPLICA_SELECTOR_CLASS).trim() {
            RACK_AWARE => Self::RackAware,
            _ => Self::Leader,
        }
    }

    /// The replica a client of rack `client_rack` should read from:
    /// `leader`, or one of `followers` (each holding the fetch offset).
    pub fn select(self, client_rack: &str, leader: &ReplicaView, followers: &[ReplicaView]) -> i32 {
        if self == Self::Leader || client_rack.is_empty() {
            return leader.id;
        }
        let in_rack = |r: &&ReplicaView| r.rack.as_deref() == Some(client_rack);
        if in_rack(&leader) {
            return leader.id;
        }
        followers
            .iter()
            .filter(in_rack)
            .max_by(|a, b| {
                a.log_end_offset
                    .cmp(&b.log_end_offset)
                    .then(b.caught_up_ago_ms.cmp(&a.caught_up_ago_ms))
            })
            .map_or(leader.id, |r| r.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: i32, rack: &str, log_end_offset: i64, caught_up_ago_ms: i64) -> ReplicaView {
        let rack = (!rack.is_empty()).then(|| rack.to_string());
        ReplicaView { id, rack, log_end_offset, caught_up_ago_ms }
    }

    #[test]
    fn kafkas_rack_aware_choices() {
        let s = ReplicaSelector::RackAware;
        let leader = replica(1, "a", 100, 0);
        let followers =
            [replica(2, "b", 90, 10), replica(3, "b", 95, 500), replica(4, "c", 100, 0)];
        assert_eq!(s.select("b", &leader, &followers), 3, "the largest log end in the rack");
        assert_eq!(s.select("c", &leader, &followers), 4);
        assert_eq!(s.select("a", &leader, &followers), 1, "the leader shares the rack");
        assert_eq!(s.select("z", &leader, &followers), 1, "no replica in the rack");
        assert_eq!(s.select("", &leader, &followers), 1, "a client without a rack");
        let tied = [replica(2, "b", 95, 10), replica(3, "b", 95, 500)];
        assert_eq!(s.select("b", &leader, &tied), 2, "a tie goes to the most recently caught up");
        assert_eq!(ReplicaSelector::Leader.select("b", &leader, &followers), 1);
    }
}
