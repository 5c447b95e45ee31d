//! Online migration between classic and consumer groups against a real
//! coordinator over a real `__consumer_offsets` log (mocked clock): a
//! classic group upgraded by a consumer-protocol member, classic members
//! reconciled inside the consumer group without a partition ever held
//! twice, the state across a restart, the downgrade when the last
//! consumer-protocol member leaves, and the refusals.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_subscription::{
    ConsumerProtocolSubscription, TopicPartition as Owned,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::consumer_protocol;
use crate::clock::MockClock;
use crate::group::config::MigrationPolicy;
use crate::group::consumer_group_records::Assignment;
use crate::group::*;
use crate::log::LogManager;

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<MockClock>,
    logs: Arc<LogManager>,
    c: GroupCoordinator,
}

fn fixture(policy: MigrationPolicy) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(1_000_000);
    let logs = Arc::new(
        LogManager::open(crate::log::LogManagerConfig::new(dir.path()), clock.clone())
            .expect("log manager"),
    );
    logs.create_topic("t", 6, Default::default()).expect("topic");
    let c = coordinator(&logs, &clock, policy);
    Fixture { _dir: dir, clock, logs, c }
}

fn coordinator(
    logs: &Arc<LogManager>,
    clock: &Arc<MockClock>,
    p: MigrationPolicy,
) -> GroupCoordinator {
    let config = GroupConfig {
        offsets_topic_partitions: 1,
        initial_rebalance_delay_ms: 0,
        consumer_migration_policy: p,
        ..GroupConfig::default()
    };
    let c = GroupCoordinator::new(config, logs.clone(), clock.clone());
    c.load();
    c
}

/// A ConsumerProtocolSubscription v1 of topic `t`, owning `owned`.
fn subscription(owned: &BTreeSet<i32>) -> Bytes {
    let s = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("t")])
        .with_owned_partitions(vec![Owned::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(owned.iter().copied().collect())]);
    let mut out = BytesMut::new();
    out.put_i16(1);
    s.encode(&mut out, 1).unwrap();
    out.freeze()
}

fn now<T>(reply: Reply<T>) -> T {
    match reply {
        Reply::Now(r) => r,
        Reply::Wait(mut rx) => rx.try_recv().expect("answered by now"),
    }
}

/// An eager classic consumer (as the Java client with the range assignor).
struct Classic {
    id: String,
    generation: i32,
    owned: BTreeSet<i32>,
}

impl Classic {
    fn new() -> Self {
        Self { id: String::new(), generation: -1, owned: BTreeSet::new() }
    }

    fn join_request(&self) -> JoinRequest {
        JoinRequest {
            group_id: "g".into(),
            member_id: self.id.clone(),
            group_instance_id: None,
            client_id: "classic".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription(&self.owned))],
            require_known_member_id: false,
            supports_skip_assignment: false,
        }
    }

    /// Revoke everything (eager) and join; returns the answer.
    fn join(&mut self, c: &GroupCoordinator) -> Reply<JoinResult> {
        self.owned.clear();
        c.join(self.join_request())
    }

    fn joined(&mut self, r: JoinResult) -> JoinResult {
        assert_eq!(r.error, None, "{r:?}");
        self.id = r.member_id.clone();
        self.generation = r.generation;
        r
    }

    fn sync(&mut self, c: &GroupCoordinator, assignments: Vec<(String, Bytes)>) -> SyncResult {
        let r = now(c.sync(
            "g",
            self.generation,
            &self.id,
            Some("consumer"),
            Some("range"),
            assignments,
        ));
        if r.error.is_none() {
            let named = consumer_protocol::decode_assignment(&r.assignment).expect("assignment");
            self.owned = named.into_iter().flat_map(|(_, ps)| ps).collect();
        }
        r
    }

    fn heartbeat(&self, c: &GroupCoordinator) -> Result<(), GroupError> {
        c.heartbeat("g", self.generation, &self.id, None)
    }

    /// Heartbeat; when told to rejoin, join and sync (a follower).
    fn step(&mut self, c: &GroupCoordinator) {
        if self.heartbeat(c) == Err(GroupError::RebalanceInProgress) {
            let r = now(self.join(c));
            self.joined(r);
            let s = self.sync(c, vec![]);
            assert!(matches!(s.error, None | Some(GroupError::RebalanceInProgress)), "{s:?}");
        }
    }
}

fn assignment_of(ps: &[i32]) -> Bytes {
    consumer_protocol::encode_assignment(1, &vec![("t".to_string(), ps.to_vec())])
}

/// Two classic members, Stable with three partitions each.
fn classic_group(c: &GroupCoordinator) -> (Classic, Classic) {
    let (mut a, mut b) = (Classic::new(), Classic::new());
    let r = now(a.join(c));
    a.joined(r);
    a.sync(c, vec![(a.id.clone(), assignment_of(&[0, 1, 2, 3, 4, 5]))]);
    let b_join = b.join(c);
    assert_eq!(a.heartbeat(c), Err(GroupError::RebalanceInProgress));
    let r = now(a.join(c));
    a.joined(r);
    let r = now(b_join);
    b.joined(r);
    let plan =
        vec![(a.id.clone(), assignment_of(&[0, 1, 2])), (b.id.clone(), assignment_of(&[3, 4, 5]))];
    assert_eq!(a.sync(c, plan).error, None);
    assert_eq!(b.sync(c, vec![]).error, None);
    assert_eq!((a.owned.len(), b.owned.len()), (3, 3));
    (a, b)
}

fn consumer_join(member: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(Assignment::new()),
        client_id: "consumer".into(),
        client_host: "/127.0.0.1".into(),
        version: 1,
        ..Default::default()
    }
}

/// A consumer-protocol member: (epoch, owned partitions of `t`).
fn consumer_beat(
    c: &GroupCoordinator,
    member: &str,
    epoch: i32,
    owned: &Assignment,
) -> ConsumerHeartbeatResult {
    let req = ConsumerHeartbeat {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned: Some(owned.clone()),
        ..consumer_join(member)
    };
    c.consumer_heartbeat(&req).expect("heartbeat")
}

/// The consumer-protocol member c upgrades the classic group of `a` and
/// `b`; all three take their steps until settled. Returns what c owns.
fn upgrade_and_settle(c: &GroupCoordinator, a: &mut Classic, b: &mut Classic) -> Assignment {
    let r = c.consumer_heartbeat(&consumer_join("c")).expect("upgrade");
    let (mut c_epoch, mut c_owned) = (r.member_epoch, r.assignment.unwrap());
    for _ in 0..4 {
        a.step(c);
        b.step(c);
        let r = consumer_beat(c, "c", c_epoch, &c_owned);
        c_epoch = r.member_epoch;
        c_owned = r.assignment.unwrap_or(c_owned);
    }
    c_owned
}

fn partitions(a: &Assignment) -> BTreeSet<i32> {
    a.values().flatten().copied().collect()
}

#[test]
fn a_consumer_member_upgrades_a_classic_group_and_no_partition_is_held_twice() {
    let f = fixture(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_group(&f.c);
    let generation = a.generation;
    let r = f.c.consumer_heartbeat(&consumer_join("c")).expect("upgrade");
    assert_eq!(r.member_epoch, generation + 1, "the join bumps the classic generation");
    assert_eq!(r.assignment.as_ref().map(partitions), Some(BTreeSet::new()), "all still held");
    let (mut c_epoch, mut c_owned) = (r.member_epoch, r.assignment.unwrap());
    let d = f.c.consumer_describe("g").expect("a consumer group now");
    let classic: Vec<bool> = d.members.iter().map(|m| m.classic).collect();
    assert_eq!((d.members.len(), classic.iter().filter(|c| **c).count()), (3, 2));
    assert_eq!(f.c.list().expect("list")[0].group_type, "consumer");

    for _ in 0..4 {
        a.step(&f.c);
        b.step(&f.c);
        let r = consumer_beat(&f.c, "c", c_epoch, &c_owned);
        c_epoch = r.member_epoch;
        if let Some(x) = r.assignment {
            c_owned = x;
        }
        let c_parts = partitions(&c_owned);
        assert!(
            a.owned.is_disjoint(&b.owned) && a.owned.is_disjoint(&c_parts),
            "{a:?} {c_parts:?}",
            a = a.owned
        );
        assert!(b.owned.is_disjoint(&c_parts));
    }
    let all: BTreeSet<i32> =
        a.owned.iter().chain(&b.owned).chain(&partitions(&c_owned)).copied().collect();
    assert_eq!(all, (0..6).collect());
    assert_eq!((a.owned.len(), b.owned.len(), c_owned.values().flatten().count()), (2, 2, 2));
    assert_eq!(f.c.consumer_describe("g").unwrap().state, ConsumerGroupState::Stable);
    assert_eq!(a.heartbeat(&f.c), Ok(()));

    // A classic member commits at its generation; a stale one is ILLEGAL_GENERATION.
    let offset = vec![(
        "t".to_string(),
        0,
        CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        },
    )];
    assert_eq!(f.c.commit("g", a.generation, &a.id, None, &offset), [None]);
    assert_eq!(
        f.c.commit("g", a.generation - 1, &a.id, None, &offset),
        [Some(GroupError::IllegalGeneration)]
    );

    // The mixed group survives a restart: classic metadata and epochs.
    let restarted = coordinator(&f.logs, &f.clock, MigrationPolicy::Bidirectional);
    let d = restarted.consumer_describe("g").expect("describe");
    assert_eq!(d.members.iter().filter(|m| m.classic).count(), 2);
    assert_eq!(restarted.heartbeat("g", a.generation, &a.id, None), Ok(()));
}

#[test]
fn the_last_consumer_member_leaving_downgrades_to_a_classic_rebalance() {
    let f = fixture(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_group(&f.c);
    upgrade_and_settle(&f.c, &mut a, &mut b);
    let epoch = f.c.consumer_describe("g").unwrap().group_epoch;
    let leave = ConsumerHeartbeat { member_epoch: -1, ..consumer_join("c") };
    assert_eq!(f.c.consumer_heartbeat(&leave).expect("leave").member_epoch, -1);

    // A classic group again, rebalancing at the epoch the members know.
    assert!(f.c.consumer_describe("g").is_err());
    let d = f.c.describe("g").expect("classic");
    assert_eq!((d.state, d.members.len()), (GroupState::PreparingRebalance, 2));
    assert_eq!(a.generation, epoch);
    assert_eq!(a.heartbeat(&f.c), Err(GroupError::RebalanceInProgress));
    let a_join = a.join(&f.c);
    assert_eq!(b.heartbeat(&f.c), Err(GroupError::RebalanceInProgress));
    let rb = now(b.join(&f.c));
    let ra = now(a_join);
    let leader = if ra.members.is_empty() { rb.clone() } else { ra.clone() };
    assert_eq!(leader.members.len(), 2, "the leader gets both subscriptions");
    assert_eq!((ra.generation, rb.generation), (epoch + 1, epoch + 1));
    a.joined(ra);
    b.joined(rb);
    let plan =
        vec![(a.id.clone(), assignment_of(&[0, 1, 2])), (b.id.clone(), assignment_of(&[3, 4, 5]))];
    let (first, second) =
        if leader.member_id == a.id { (&mut a, &mut b) } else { (&mut b, &mut a) };
    assert_eq!(first.sync(&f.c, plan).error, None);
    assert_eq!(second.sync(&f.c, vec![]).error, None);
    assert_eq!(f.c.describe("g").unwrap().state, GroupState::Stable);
    assert_eq!(a.owned.len() + b.owned.len(), 6);
    // The consumer records are gone after a restart too.
    let restarted = coordinator(&f.logs, &f.clock, MigrationPolicy::Bidirectional);
    assert_eq!(restarted.list().unwrap()[0].group_type, "classic");
}

#[test]
fn a_classic_member_that_does_not_rejoin_in_time_is_fenced_and_the_group_stays_whole() {
    let f = fixture(MigrationPolicy::Bidirectional);
    let (mut a, b) = classic_group(&f.c);
    let r = f.c.consumer_heartbeat(&consumer_join("c")).expect("upgrade");
    a.step(&f.c);
    // b is told to rejoin and keeps heartbeating but never rejoins: after
    // its rebalance timeout (30 s, longer than its 10 s session) it goes.
    for _ in 0..6 {
        assert_eq!(b.heartbeat(&f.c), Err(GroupError::RebalanceInProgress));
        a.step(&f.c);
        f.clock.advance(4_900);
        f.c.tick();
    }
    a.step(&f.c);
    consumer_beat(&f.c, "c", r.member_epoch, &Assignment::new());
    f.c.tick();
    assert_eq!(f.c.consumer_describe("g").unwrap().members.len(), 3);
    assert_eq!(b.heartbeat(&f.c), Err(GroupError::RebalanceInProgress));
    f.clock.advance(1_000);
    a.step(&f.c);
    consumer_beat(&f.c, "c", r.member_epoch, &Assignment::new());
    f.c.tick();
    let d = f.c.consumer_describe("g").unwrap();
    assert!(d.members.iter().all(|m| m.member_id != b.id), "{d:?}");
    assert_eq!(b.heartbeat(&f.c), Err(GroupError::UnknownMemberId));
}

#[test]
fn refused_migrations_get_kafkas_errors_and_change_nothing() {
    // Upgrade disabled: a consumer-protocol join to a live classic group.
    let f = fixture(MigrationPolicy::Downgrade);
    let (a, _b) = classic_group(&f.c);
    match f.c.consumer_heartbeat(&consumer_join("c")) {
        Err(GroupError::NotFound(m)) => assert!(m.contains("online upgrade is disabled"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.heartbeat(&f.c), Ok(()), "the classic group is untouched");

    // A classic group of another protocol type is never upgraded.
    let f = fixture(MigrationPolicy::Bidirectional);
    let connect = JoinRequest { protocol_type: "connect".into(), ..Classic::new().join_request() };
    let r = now(f.c.join(connect));
    assert_eq!(r.error, None);
    match f.c.consumer_heartbeat(&consumer_join("c")) {
        Err(GroupError::NotFound(m)) => assert!(m.contains("consumer embedded protocol"), "{m}"),
        other => panic!("{other:?}"),
    }

    // Downgrade disabled: the last consumer member leaves, the group stays a consumer group.
    let f = fixture(MigrationPolicy::Upgrade);
    let (mut a, _b) = classic_group(&f.c);
    f.c.consumer_heartbeat(&consumer_join("c")).expect("upgrade");
    let leave = ConsumerHeartbeat { member_epoch: -1, ..consumer_join("c") };
    f.c.consumer_heartbeat(&leave).expect("leave");
    assert_eq!(f.c.consumer_describe("g").unwrap().members.len(), 2);
    a.step(&f.c);
    // A stale generation and a broken subscription are refused.
    assert_eq!(
        f.c.heartbeat("g", a.generation + 5, &a.id, None),
        Err(GroupError::IllegalGeneration)
    );
    let broken = JoinRequest {
        protocols: vec![("range".into(), Bytes::from_static(&[0, 1, 0x7f]))],
        ..a.join_request()
    };
    assert_eq!(now(f.c.join(broken)).error, Some(GroupError::InconsistentGroupProtocol));
    let other = JoinRequest {
        protocols: vec![("roundrobin".into(), subscription(&BTreeSet::new()))],
        member_id: String::new(),
        ..a.join_request()
    };
    assert_eq!(now(f.c.join(other)).error, Some(GroupError::InconsistentGroupProtocol));
}

fn offset(o: i64) -> Vec<(String, i32, CommittedOffset)> {
    let committed = CommittedOffset {
        offset: o,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 0,
    };
    vec![("t".to_string(), 0, committed)]
}

#[test]
fn offsets_committed_before_an_upgrade_survive_a_restart() {
    let f = fixture(MigrationPolicy::Bidirectional);
    let (a, _b) = classic_group(&f.c);
    assert_eq!(f.c.commit("g", a.generation, &a.id, None, &offset(42)), [None]);
    f.c.consumer_heartbeat(&consumer_join("c")).expect("upgrade");
    let restarted = coordinator(&f.logs, &f.clock, MigrationPolicy::Bidirectional);
    let after = restarted.fetch_offsets("g", Some(&[("t".into(), 0)])).unwrap();
    assert_eq!(after[0].2.as_ref().map(|o| o.offset), Some(42), "{after:?}");
    assert_eq!(restarted.consumer_describe("g").unwrap().members.len(), 3);
}

#[test]
fn an_upgrade_while_completing_a_rebalance_counts_what_cooperative_members_own() {
    let f = fixture(MigrationPolicy::Bidirectional);
    let (a, b) = classic_group(&f.c);
    // A third member joins; a and b rejoin cooperatively, keeping what they
    // own: the round completes, nobody has synced (CompletingRebalance).
    let mut d = Classic::new();
    let d_join = d.join(&f.c);
    assert_eq!(a.heartbeat(&f.c), Err(GroupError::RebalanceInProgress));
    let (ja, jb) = (f.c.join(a.join_request()), f.c.join(b.join_request()));
    let (_, _, rd) = (now(ja), now(jb), now(d_join));
    assert_eq!(rd.error, None);
    assert_eq!(f.c.describe("g").unwrap().state, GroupState::CompletingRebalance);
    let r = f.c.consumer_heartbeat(&consumer_join("c")).expect("upgrade");
    let got = r.assignment.as_ref().map(partitions).unwrap_or_default();
    assert!(got.is_disjoint(&a.owned) && got.is_disjoint(&b.owned), "{got:?} is still owned");
}

#[test]
fn without_a_downgrade_the_leavers_partitions_reach_the_classic_members() {
    let f = fixture(MigrationPolicy::Upgrade);
    let (mut a, mut b) = classic_group(&f.c);
    let c_owned = upgrade_and_settle(&f.c, &mut a, &mut b);
    assert_eq!(partitions(&c_owned).len(), 2);
    let leave = ConsumerHeartbeat { member_epoch: -1, ..consumer_join("c") };
    f.c.consumer_heartbeat(&leave).expect("leave");
    for _ in 0..4 {
        a.step(&f.c);
        b.step(&f.c);
    }
    assert_eq!(a.owned.len() + b.owned.len(), 6, "{:?} {:?}", a.owned, b.owned);
    assert!(a.owned.is_disjoint(&b.owned));
}

#[test]
fn a_static_classic_member_restarted_with_the_consumer_protocol_takes_its_own_place() {
    let f = fixture(MigrationPolicy::Bidirectional);
    let mut a = Classic::new();
    let req = JoinRequest { group_instance_id: Some("i-a".into()), ..a.join_request() };
    let r = now(f.c.join(req));
    a.joined(r);
    a.sync(&f.c, vec![(a.id.clone(), assignment_of(&[0, 1, 2, 3, 4, 5]))]);
    // The same instance, restarted with group.protocol=consumer (a static
    // member sends no LeaveGroup): it replaces the classic member at once.
    let req = ConsumerHeartbeat { instance_id: Some("i-a".into()), ..consumer_join("new-a") };
    let r = f.c.consumer_heartbeat(&req).expect("takes its place");
    assert_eq!(r.assignment.as_ref().map(partitions), Some((0..6).collect()));
    let d = f.c.consumer_describe("g").unwrap();
    assert_eq!(
        d.members.iter().map(|m| (m.member_id.as_str(), m.classic)).collect::<Vec<_>>(),
        [("new-a", false)]
    );
    assert_eq!(a.heartbeat(&f.c), Err(GroupError::UnknownMemberId));
}
