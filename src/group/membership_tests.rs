//! The classic protocol's membership: unit scenarios, and the loaded
//! coordinator other modules' tests start from.
use std::sync::Arc;

use super::*;
use crate::clock::SharedClock;
use crate::group::GroupConfig;
use crate::log::LogManager;

/// A loaded coordinator with one offsets partition and no initial delay.
pub(in crate::group) fn coordinator(dir: &std::path::Path) -> GroupCoordinator {
    let clock: SharedClock = crate::clock::MockClock::new(1_000_000);
    let logs = Arc::new(
        LogManager::open(crate::log::LogManagerConfig::new(dir), clock.clone())
            .expect("log manager"),
    );
    let config = GroupConfig {
        offsets_topic_partitions: 1,
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    let c = GroupCoordinator::new(config, logs, clock);
    c.load();
    c
}

fn join_request(member_id: &str, client_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: client_id.into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: false,
        supports_skip_assignment: false,
    }
}

fn joined(reply: Reply<JoinResult>) -> JoinResult {
    match reply {
        Reply::Now(r) => r,
        Reply::Wait(mut rx) => rx.try_recv().expect("the join round completed"),
    }
}

#[test]
fn member_joining_while_completing_rebalance_starts_a_new_round() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = coordinator(dir.path());
    let a = joined(c.join(join_request("", "a")));
    assert_eq!((a.error, a.generation), (None, 1));
    // The group waits for a's SyncGroup (CompletingRebalance) when b joins
    // with the same protocols: b was in no round, so it must not get
    // generation 1's answer (it would sync into an assignment that has no
    // entry for it, and the group would stay stable without it).
    let b = c.join(join_request("", "b"));
    assert!(matches!(b, Reply::Wait(_)), "b waits for a new round");
    assert_eq!(c.describe("g").expect("describe").state, GroupState::PreparingRebalance);
    // a's sync of the old generation is told to rejoin; its rejoin completes round 2.
    match c.sync("g", 1, &a.member_id, None, None, vec![]) {
        Reply::Now(r) => assert_eq!(r.error, Some(GroupError::RebalanceInProgress)),
        Reply::Wait(_) => panic!("a sync of the old generation must not wait"),
    }
    let a2 = joined(c.join(join_request(&a.member_id, "a")));
    let b = joined(b);
    assert_eq!((a2.error, a2.generation, b.error, b.generation), (None, 2, None, 2));
    assert_eq!(a2.members.len(), 2, "the leader sees both members");
}
