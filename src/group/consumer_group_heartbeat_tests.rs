//! Scenarios of the consumer group protocol against a real coordinator over
//! a real `__consumer_offsets` log (mocked clock): join and balance, leave
//! without a stop-the-world pause, revocation before reassignment, static
//! membership, fencing, restart, and the classic/consumer boundary.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::clock::MockClock;
use crate::group::consumer_group_records::{Assignment, TopicId};
use crate::group::*;
use crate::log::LogManager;

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<MockClock>,
    logs: Arc<LogManager>,
    c: GroupCoordinator,
    topic: TopicId,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = MockClock::new(1_000_000);
    let logs = Arc::new(
        LogManager::open(crate::log::LogManagerConfig::new(dir.path()), clock.clone())
            .expect("log manager"),
    );
    logs.create_topic("t", 6, Default::default()).expect("topic");
    let topic = logs.topic("t").expect("t").id;
    let c = coordinator(&logs, &clock);
    Fixture { _dir: dir, clock, logs, c, topic }
}

fn coordinator(logs: &Arc<LogManager>, clock: &Arc<MockClock>) -> GroupCoordinator {
    let config = GroupConfig { offsets_topic_partitions: 1, ..GroupConfig::default() };
    let c = GroupCoordinator::new(config, logs.clone(), clock.clone());
    c.load();
    c
}

fn join(member: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(Assignment::new()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        version: 1,
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: &Assignment) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned: Some(owned.clone()),
        ..join(member)
    }
}

/// One member as a client keeps it: its epoch and the partitions it owns.
struct Client {
    id: String,
    epoch: i32,
    owned: Assignment,
    /// Every partition it was ever told to give up.
    revoked: BTreeSet<i32>,
}

impl Client {
    fn join(c: &GroupCoordinator, id: &str) -> Self {
        let r = c.consumer_heartbeat(&join(id)).expect("join");
        let mut client =
            Self { id: id.into(), epoch: 0, owned: Assignment::new(), revoked: BTreeSet::new() };
        client.apply(r);
        client
    }

    fn apply(&mut self, r: ConsumerHeartbeatResult) {
        self.epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            for (t, ps) in &self.owned {
                for p in ps {
                    if !a.get(t).is_some_and(|n| n.contains(p)) {
                        self.revoked.insert(*p);
                    }
                }
            }
            self.owned = a;
        }
    }

    fn beat(&mut self, c: &GroupCoordinator) {
        let r = c.consumer_heartbeat(&beat(&self.id, self.epoch, &self.owned)).expect("heartbeat");
        self.apply(r);
    }

    fn partitions(&self) -> BTreeSet<i32> {
        self.owned.values().flatten().copied().collect()
    }
}

/// Heartbeat every client in turn until the group is stable.
fn settle(c: &GroupCoordinator, clients: &mut [Client]) {
    for _ in 0..10 {
        for client in clients.iter_mut() {
            client.beat(c);
        }
    }
    let d = c.consumer_describe("g").expect("describe");
    assert_eq!(d.state, ConsumerGroupState::Stable, "{d:?}");
}

#[test]
fn three_members_share_six_partitions_and_one_leaving_stops_no_one() {
    let f = fixture();
    let mut clients: Vec<Client> = ["a", "b", "c"].iter().map(|m| Client::join(&f.c, m)).collect();
    settle(&f.c, &mut clients);
    for client in &clients {
        assert_eq!(client.partitions().len(), 2, "{}: {:?}", client.id, client.owned);
    }
    let all: BTreeSet<i32> = clients.iter().flat_map(Client::partitions).collect();
    assert_eq!(all, (0..6).collect());

    let leaving = clients.pop().expect("c");
    let left = f.c.consumer_heartbeat(&beat(&leaving.id, -1, &leaving.owned)).expect("leave");
    assert_eq!(left.member_epoch, -1);
    let kept: Vec<BTreeSet<i32>> = clients.iter().map(Client::partitions).collect();
    for client in clients.iter_mut() {
        client.revoked.clear();
    }
    settle(&f.c, &mut clients);
    for (client, before) in clients.iter().zip(&kept) {
        assert!(client.revoked.is_empty(), "{} had to revoke {:?}", client.id, client.revoked);
        assert!(client.partitions().is_superset(before));
        assert_eq!(client.partitions().len(), 3);
    }
    let _ = f.topic;
}

#[test]
fn a_partition_moves_only_after_its_owner_revoked_it() {
    let f = fixture();
    let mut a = Client::join(&f.c, "a");
    assert_eq!(a.partitions().len(), 6);
    let mut b = Client::join(&f.c, "b");
    assert!(b.partitions().is_empty(), "b gets nothing a still owns");
    // a learns it must give up three; until it says so, b waits.
    a.beat(&f.c);
    assert_eq!(a.partitions().len(), 3);
    let pending: BTreeSet<i32> = a.revoked.clone();
    assert_eq!(pending.len(), 3);
    let d = f.c.consumer_describe("g").expect("describe");
    assert_eq!(d.state, ConsumerGroupState::Reconciling);
    b.beat(&f.c);
    assert!(b.partitions().is_empty(), "a has not acknowledged the revocation yet");
    a.beat(&f.c);
    b.beat(&f.c);
    assert_eq!(b.partitions(), pending);
}

#[test]
fn the_group_survives_a_restart_and_the_records_replay() {
    let f = fixture();
    let mut clients: Vec<Client> = ["a", "b"].iter().map(|m| Client::join(&f.c, m)).collect();
    settle(&f.c, &mut clients);
    let committed = vec![("t".to_string(), 0, CommittedOffset::requested(42, -1, None))];
    assert_eq!(f.c.commit("g", clients[0].epoch, "a", None, &committed), vec![None]);
    let before = f.c.consumer_describe("g").expect("describe");

    let restarted = coordinator(&f.logs, &f.clock);
    let after = restarted.consumer_describe("g").expect("describe after restart");
    assert_eq!(after, before);
    assert_eq!(restarted.load_stats().unreadable_records, 0);
    let offsets = restarted.fetch_offsets("g", None).expect("offsets");
    assert_eq!(offsets[0].2.as_ref().map(|o| o.offset), Some(42));
    // The members carry on with their epochs.
    for client in clients.iter_mut() {
        client.beat(&restarted);
    }
}

#[test]
fn a_static_member_leaving_for_now_keeps_its_partitions() {
    let f = fixture();
    let mut a = Client::join(&f.c, "a");
    let mut s =
        Client { id: "s1".into(), epoch: 0, owned: Assignment::new(), revoked: BTreeSet::new() };
    let static_join = |id: &str| ConsumerHeartbeat { instance_id: Some("inst".into()), ..join(id) };
    s.apply(f.c.consumer_heartbeat(&static_join("s1")).expect("join"));
    let mut clients = vec![a, s];
    settle(&f.c, &mut clients);
    let held = clients[1].partitions();
    assert_eq!(held.len(), 3);
    let leave =
        ConsumerHeartbeat { instance_id: Some("inst".into()), ..beat("s1", -2, &clients[1].owned) };
    assert_eq!(f.c.consumer_heartbeat(&leave).expect("leave").member_epoch, -2);
    // A new instance with the same instance id takes over the assignment.
    let mut s2 =
        Client { id: "s2".into(), epoch: 0, owned: Assignment::new(), revoked: BTreeSet::new() };
    s2.apply(f.c.consumer_heartbeat(&static_join("s2")).expect("rejoin"));
    assert_eq!(s2.partitions(), held);
    a = clients.remove(0);
    assert_eq!(a.partitions().len(), 3);
    // While the old instance was active, a second one would have been refused.
    let third = f.c.consumer_heartbeat(&static_join("s3"));
    assert_eq!(third, Err(GroupError::UnreleasedInstanceId));
}

#[test]
fn epochs_are_checked_and_silent_members_are_fenced() {
    let f = fixture();
    let mut a = Client::join(&f.c, "a");
    let mut b = Client::join(&f.c, "b");
    let mut clients = vec![a, b];
    settle(&f.c, &mut clients);
    b = clients.pop().expect("b");
    a = clients.pop().expect("a");
    let ahead = f.c.consumer_heartbeat(&beat("a", a.epoch + 1, &a.owned));
    assert_eq!(ahead, Err(GroupError::FencedMemberEpoch));
    let unknown = f.c.consumer_heartbeat(&beat("zz", 3, &Assignment::new()));
    assert_eq!(unknown, Err(GroupError::UnknownMemberId));
    // An older epoch covers only partitions a held then and holds now.
    let bs = *b.partitions().iter().next().expect("b holds a partition");
    let stale = vec![("t".to_string(), bs, CommittedOffset::requested(1, -1, None))];
    assert_eq!(
        f.c.commit("g", a.epoch - 1, "a", None, &stale),
        vec![Some(GroupError::StaleMemberEpoch)]
    );

    // b goes silent: after the session timeout it is fenced, and a takes all.
    f.clock.advance(30_000);
    a.beat(&f.c);
    f.clock.advance(20_000);
    f.c.tick();
    let d = f.c.consumer_describe("g").expect("describe");
    assert_eq!(d.members.len(), 1, "{d:?}");
    a.beat(&f.c);
    assert_eq!(a.partitions().len(), 6);
    let _ = b;
}

#[test]
fn classic_and_consumer_groups_refuse_each_other_when_migration_is_disabled() {
    let mut f = fixture();
    let disabled = GroupConfig {
        offsets_topic_partitions: 1,
        consumer_migration_policy: crate::group::config::MigrationPolicy::Disabled,
        ..GroupConfig::default()
    };
    f.c = GroupCoordinator::new(disabled, f.logs.clone(), f.clock.clone());
    f.c.load();
    let _a = Client::join(&f.c, "a");
    let classic = f.c.join(JoinRequest {
        group_id: "g".into(),
        member_id: String::new(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), bytes::Bytes::from_static(b"m"))],
        require_known_member_id: true,
        supports_skip_assignment: false,
    });
    match classic {
        Reply::Now(r) => assert_eq!(r.error, Some(GroupError::InconsistentGroupProtocol)),
        Reply::Wait(_) => panic!("a classic join to a consumer group must be refused"),
    }
    let listed = f.c.list().expect("list");
    assert_eq!((listed[0].group_type, listed[0].state), ("consumer", "Stable"));
    assert!(matches!(f.c.describe("g"), Err(GroupError::NotFound(_))));
    assert!(matches!(f.c.consumer_describe("nope"), Err(GroupError::NotFound(_))));
}

#[test]
fn an_empty_consumer_group_can_be_deleted_and_its_records_go() {
    let f = fixture();
    let a = Client::join(&f.c, "a");
    assert_eq!(f.c.delete_group("g"), Err(GroupError::NonEmptyGroup));
    f.c.consumer_heartbeat(&beat("a", -1, &a.owned)).expect("leave");
    assert_eq!(f.c.consumer_describe("g").expect("describe").state, ConsumerGroupState::Empty);
    f.c.delete_group("g").expect("delete");
    let restarted = coordinator(&f.logs, &f.clock);
    assert!(restarted.list().expect("list").is_empty());
}

#[test]
fn new_partitions_bump_the_group_epoch_and_get_assigned() {
    let f = fixture();
    let mut clients: Vec<Client> = ["a", "b"].iter().map(|m| Client::join(&f.c, m)).collect();
    settle(&f.c, &mut clients);
    let epoch = f.c.consumer_describe("g").expect("describe").group_epoch;
    f.logs.create_partitions("t", 8).expect("grow");
    settle(&f.c, &mut clients);
    assert!(f.c.consumer_describe("g").expect("describe").group_epoch > epoch);
    let all: BTreeSet<i32> = clients.iter().flat_map(Client::partitions).collect();
    assert_eq!(all, (0..8).collect());
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let f = fixture();
    let a = Client::join(&f.c, "a");
    let all_six = a.owned.clone();
    let mut b = Client::join(&f.c, "b");
    // a is told to give up three partitions but keeps listing all six.
    let r = f.c.consumer_heartbeat(&beat("a", a.epoch, &all_six)).expect("heartbeat");
    assert_eq!(r.assignment.map(|x| x.values().map(BTreeSet::len).sum::<usize>()), Some(3));
    f.clock.advance(29_000);
    f.c.consumer_heartbeat(&beat("a", a.epoch, &all_six)).expect("still within the timeout");
    b.beat(&f.c);
    f.c.tick();
    assert_eq!(f.c.consumer_describe("g").expect("describe").members.len(), 2);
    f.clock.advance(2_000);
    f.c.consumer_heartbeat(&beat("a", a.epoch, &all_six)).expect("alive, yet not revoking");
    f.c.tick();
    let d = f.c.consumer_describe("g").expect("describe");
    assert_eq!(d.members.iter().map(|m| m.member_id.as_str()).collect::<Vec<_>>(), ["b"]);
    b.beat(&f.c);
    assert_eq!(b.partitions(), (0..6).collect());
    assert_eq!(
        f.c.consumer_heartbeat(&beat("a", a.epoch, &all_six)),
        Err(GroupError::UnknownMemberId),
        "the fenced member must rejoin"
    );
}

#[test]
fn the_records_written_decode_and_tombstone_what_left() {
    let f = fixture();
    let a = Client::join(&f.c, "a");
    f.c.consumer_heartbeat(&beat("a", -1, &a.owned)).expect("leave");
    let log = f.logs.get_log(&crate::log::TopicPartition::new(OFFSETS_TOPIC, 0)).expect("log");
    let mut keys = Vec::new();
    let log = log.read();
    let mut visitor = Collect(&mut keys);
    let mut stats = LoadStats::default();
    crate::log::coordinator_loader::load_partition(&log, 1 << 20, &mut visitor, &mut stats);
    assert_eq!(stats.unreadable_records, 0);
    use crate::group::consumer_group_records::ConsumerGroupKey as K;
    let member = |k: &K| matches!(k, K::MemberMetadata { member, .. } if member == "a");
    assert!(keys.iter().any(|(k, live)| member(k) && *live), "{keys:?}");
    let last_member_record = keys.iter().rev().find(|(k, _)| member(k)).expect("member records");
    assert!(!last_member_record.1, "the leave tombstones the member: {keys:?}");

    struct Collect<'a>(&'a mut Vec<(K, bool)>);
    impl crate::log::coordinator_loader::CoordinatorRecordVisitor for Collect<'_> {
        type Error = crate::group::schema::SchemaError;
        fn record(
            &mut self,
            _: &crate::log::record_batch::BatchHeader,
            _: i64,
            key: Option<&[u8]>,
            value: Option<&[u8]>,
        ) -> Result<(), Self::Error> {
            if let crate::group::schema::RecordKey::Consumer(k) =
                crate::group::schema::RecordKey::decode(key.unwrap_or_default())?
            {
                if let Some(v) = value {
                    crate::group::consumer_group_records::ConsumerGroupValue::decode(&k, v)?;
                }
                self.0.push((k, value.is_some()));
            }
            Ok(())
        }
        fn end_txn_marker(&mut self, _: &crate::log::record_batch::BatchHeader, _: bool) {}
    }
}

#[test]
fn an_empty_consumer_group_without_offsets_is_removed_at_the_retention_check() {
    let f = fixture();
    let a = Client::join(&f.c, "a");
    f.c.tick();
    assert_eq!(f.c.list().expect("list").len(), 1, "a group with a member stays");
    f.c.consumer_heartbeat(&beat("a", -1, &a.owned)).expect("leave");
    f.clock.advance(f.c.config().offsets_retention_check_interval_ms);
    f.c.tick();
    assert!(f.c.list().expect("list").is_empty());
    assert!(
        coordinator(&f.logs, &f.clock).list().expect("list").is_empty(),
        "gone after a restart too"
    );
}

#[test]
fn transactional_commits_are_checked_against_the_member_epoch() {
    let f = fixture();
    let mut clients: Vec<Client> = ["a", "b"].iter().map(|m| Client::join(&f.c, m)).collect();
    settle(&f.c, &mut clients);
    let a = &clients[0];
    let offsets = vec![("t".to_string(), 0, CommittedOffset::requested(42, -1, None))];
    let producer = TxnProducer { id: 7, epoch: 0 };
    // A member at its epoch commits inside its producer's transaction (as
    // sendOffsetsToTransaction(offsets, consumer.groupMetadata()) sends it).
    assert_eq!(f.c.txn_commit("g", producer, a.epoch, "a", None, &offsets), vec![None]);
    assert!(f.c.has_pending_txn_offset("g", "t", 0));
    // An older epoch for a partition a does not hold, or an unknown
    // member: refused, as Kafka refuses them.
    let bs = *clients[1].partitions().iter().next().expect("b holds a partition");
    let b_offsets = vec![("t".to_string(), bs, CommittedOffset::requested(42, -1, None))];
    // STALE_MEMBER_EPOCH here; TxnOffsetCommit before v6 answers it as
    // ILLEGAL_GENERATION (the handler's mapping, as Kafka's).
    let stale = f.c.txn_commit("g", producer, a.epoch - 1, "a", None, &b_offsets);
    assert_eq!(stale, vec![Some(GroupError::StaleMemberEpoch)]);
    let unknown = f.c.txn_commit("g", producer, a.epoch, "z", None, &offsets);
    assert_eq!(unknown, vec![Some(GroupError::UnknownMemberId)]);
    // A member id with no epoch is a member's commit, and checked.
    let no_epoch = f.c.txn_commit("g", producer, -1, "a", None, &offsets);
    assert_eq!(no_epoch, vec![Some(GroupError::StaleMemberEpoch)]);
    // Naming nothing (an older producer, or `new ConsumerGroupMetadata(g)`):
    // not checked, as Kafka's TxnOffsetCommit does not require the fields.
    let other = TxnProducer { id: 8, epoch: 0 };
    assert_eq!(f.c.txn_commit("g", other, -1, "", None, &offsets), vec![None]);
}

#[test]
fn a_commit_at_an_older_epoch_covers_the_partitions_held_since() {
    let f = fixture();
    let mut clients: Vec<Client> = ["a", "b"].iter().map(|m| Client::join(&f.c, m)).collect();
    settle(&f.c, &mut clients);
    let (old_epoch, held_then) = (clients[0].epoch, clients[0].partitions());
    clients.push(Client::join(&f.c, "c"));
    settle(&f.c, &mut clients);
    let a = &clients[0];
    assert!(a.epoch > old_epoch, "a's epoch moved on");
    let kept: Vec<i32> = a.partitions().into_iter().collect();
    let gone: Vec<i32> = held_then.difference(&a.partitions()).copied().collect();
    assert!(!kept.is_empty() && !gone.is_empty(), "kept {kept:?}, gave up {gone:?}");
    let at = |p: i32| vec![("t".to_string(), p, CommittedOffset::requested(9, -1, None))];
    let producer = TxnProducer { id: 7, epoch: 0 };
    // Sent just before a heartbeat moved its epoch: the partition is still
    // its own, held since that older epoch (Kafka 4.3+, KIP-1251).
    assert_eq!(f.c.txn_commit("g", producer, old_epoch, "a", None, &at(kept[0])), vec![None]);
    assert_eq!(f.c.commit("g", old_epoch, "a", None, &at(kept[0])), vec![None]);
    // A partition it gave up, or an epoch it never had: refused.
    let gave_up = f.c.txn_commit("g", producer, old_epoch, "a", None, &at(gone[0]));
    assert_eq!(gave_up, vec![Some(GroupError::StaleMemberEpoch)]);
    let plain = f.c.commit("g", old_epoch, "a", None, &at(gone[0]));
    assert_eq!(plain, vec![Some(GroupError::StaleMemberEpoch)]);
    let ahead = f.c.txn_commit("g", producer, a.epoch + 1, "a", None, &at(kept[0]));
    assert_eq!(ahead, vec![Some(GroupError::StaleMemberEpoch)]);
    // c was given its partitions at its current epoch: nothing older covers them.
    let c = &clients[2];
    let theirs = *c.partitions().iter().next().expect("c holds a partition");
    let before = f.c.commit("g", c.epoch - 1, "c", None, &at(theirs));
    assert_eq!(before, vec![Some(GroupError::StaleMemberEpoch)]);
}
