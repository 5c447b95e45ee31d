//! The group coordinator's state machine with an injected clock: join rounds,
//! rebalances on join/leave/expiry, generations, static members, commit
//! validation, and state rebuilt from `__consumer_offsets` after a restart.

use crate::common;

use std::sync::Arc;

use bytes::Bytes;
use sediment::clock::{Clock, MockClock, SharedClock};
use sediment::group::{
    CommittedOffset, GroupConfig, GroupCoordinator, GroupError, GroupState, JoinRequest,
    JoinResult, Reply, SyncResult,
};

fn config() -> GroupConfig {
    GroupConfig {
        offsets_topic_partitions: 3,
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

fn coordinator(dir: &std::path::Path, clock: SharedClock) -> Arc<GroupCoordinator> {
    let logs = Arc::new(common::manager(dir, &[], clock.clone()));
    let c = Arc::new(GroupCoordinator::new(config(), logs, clock));
    c.load();
    c
}

fn join_req(member: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: instance.map(String::from),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: true,
        supports_skip_assignment: false,
    }
}

enum Pending<T> {
    Done(T),
    Waiting(tokio::sync::oneshot::Receiver<T>),
}

fn start<T>(r: Reply<T>) -> Pending<T> {
    match r {
        Reply::Now(v) => Pending::Done(v),
        Reply::Wait(rx) => Pending::Waiting(rx),
    }
}

impl<T> Pending<T> {
    fn done(self) -> T {
        match self {
            Pending::Done(v) => v,
            Pending::Waiting(mut rx) => rx.try_recv().expect("answered by now"),
        }
    }
    fn is_waiting(&mut self) -> bool {
        match self {
            Pending::Done(_) => false,
            Pending::Waiting(rx) => {
                matches!(rx.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Empty))
            }
        }
    }
}

/// A dynamic member's two-step join (MEMBER_ID_REQUIRED, then the real join).
fn join_new(c: &GroupCoordinator) -> (String, Pending<JoinResult>) {
    let first = start(c.join(join_req("", None))).done();
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    let id = first.member_id.clone();
    (id.clone(), start(c.join(join_req(&id, None))))
}

fn sync(
    c: &GroupCoordinator,
    generation: i32,
    member: &str,
    assignments: Vec<(String, Bytes)>,
) -> Pending<SyncResult> {
    start(c.sync("g", generation, member, Some("consumer"), Some("range"), assignments))
}

#[test]
fn join_sync_rebalance_and_leave() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let c = coordinator(dir.path(), clock.clone());

    // One member: the round completes at once; it leads.
    let (a, ja) = join_new(&c);
    let ja = ja.done();
    assert_eq!((ja.error, ja.generation, ja.leader.as_str()), (None, 1, a.as_str()));
    assert_eq!(ja.members.len(), 1);
    let sa = sync(&c, 1, &a, vec![(a.clone(), Bytes::from_static(b"all"))]).done();
    assert_eq!(sa.assignment, Bytes::from_static(b"all"));
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);

    // A second member triggers a rebalance; the first learns from its heartbeat.
    let (b, mut jb) = join_new(&c);
    assert!(jb.is_waiting(), "the round waits for the first member to rejoin");
    assert_eq!(c.heartbeat("g", 1, &a, None), Err(GroupError::RebalanceInProgress));
    let ja2 = start(c.join(join_req(&a, None))).done();
    let jb = jb.done();
    assert_eq!((ja2.generation, jb.generation), (2, 2));
    assert_eq!(ja2.leader, a, "the leader keeps its role");
    assert_eq!((ja2.members.len(), jb.members.len()), (2, 0), "only the leader gets the members");

    // The follower's sync waits for the leader's assignment.
    let mut sb = sync(&c, 2, &b, vec![]);
    assert!(sb.is_waiting());
    let sa = sync(
        &c,
        2,
        &a,
        vec![(a.clone(), Bytes::from_static(b"p0")), (b.clone(), Bytes::from_static(b"p1"))],
    )
    .done();
    assert_eq!(sa.assignment, Bytes::from_static(b"p0"));
    assert_eq!(sb.done().assignment, Bytes::from_static(b"p1"));
    assert_eq!(c.heartbeat("g", 2, &b, None), Ok(()));
    assert_eq!(c.heartbeat("g", 1, &b, None), Err(GroupError::IllegalGeneration));
    assert_eq!(c.heartbeat("g", 2, "nobody", None), Err(GroupError::UnknownMemberId));

    // The leader leaves: b rejoins alone and becomes leader of generation 3.
    assert_eq!(c.leave("g", &[(a.clone(), None)]).unwrap(), vec![None]);
    let jb3 = start(c.join(join_req(&b, None))).done();
    assert_eq!((jb3.generation, jb3.leader.as_str()), (3, b.as_str()));

    // b's session expires: the group empties (after the round's deadline).
    clock.advance(10_001);
    c.tick();
    clock.advance(30_001);
    c.tick();
    let d = c.describe("g").unwrap();
    assert_eq!(d.state, GroupState::Empty);
    assert!(d.members.is_empty());
}

#[test]
fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let c = coordinator(dir.path(), clock.clone());
    let (a, ja) = join_new(&c);
    ja.done();
    sync(&c, 1, &a, vec![]).done();
    let (b, mut jb) = join_new(&c);
    // a keeps heartbeating but never rejoins.
    for _ in 0..29 {
        clock.advance(1000);
        assert_eq!(c.heartbeat("g", 1, &a, None), Err(GroupError::RebalanceInProgress));
        c.tick();
        assert!(jb.is_waiting());
    }
    clock.advance(1001);
    c.tick();
    let jb = jb.done();
    assert_eq!((jb.generation, jb.leader.as_str()), (2, b.as_str()));
    assert_eq!(c.heartbeat("g", 2, &a, None), Err(GroupError::UnknownMemberId));
}

#[test]
fn static_member_rejoin_needs_no_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let c = coordinator(dir.path(), clock.clone());
    // Static members get their id at once (no MEMBER_ID_REQUIRED).
    let ja = start(c.join(join_req("", Some("i1")))).done();
    assert_eq!(ja.error, None);
    let old = ja.member_id.clone();
    sync(&c, 1, &old, vec![(old.clone(), Bytes::from_static(b"asg"))]).done();
    // The process restarts: same instance id, no member id.
    let again = start(c.join(join_req("", Some("i1")))).done();
    assert_eq!(again.error, None);
    assert_eq!(again.generation, 1, "no rebalance for a static rejoin with unchanged protocols");
    assert_ne!(again.member_id, old);
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
    assert_eq!(sync(&c, 1, &again.member_id, vec![]).done().assignment, Bytes::from_static(b"asg"));
    // The old incarnation is fenced.
    assert_eq!(c.heartbeat("g", 1, &old, Some("i1")), Err(GroupError::FencedInstanceId));
}

#[test]
fn commits_are_validated_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let offset = |o: i64| CommittedOffset {
        offset: o,
        leader_epoch: -1,
        metadata: "m".into(),
        commit_timestamp: 0,
    };
    {
        let c = coordinator(dir.path(), clock.clone());
        // A simple (group-less) commit to a new group.
        assert_eq!(c.commit("simple", -1, "", None, &[("t".into(), 0, offset(5))]), vec![None]);
        let (a, ja) = join_new(&c);
        ja.done();
        assert_eq!(
            c.commit("g", 1, &a, None, &[("t".into(), 0, offset(1))]),
            vec![Some(GroupError::RebalanceInProgress)],
            "not before the sync"
        );
        sync(&c, 1, &a, vec![]).done();
        assert_eq!(
            c.commit("g", 0, &a, None, &[("t".into(), 0, offset(1))]),
            vec![Some(GroupError::IllegalGeneration)]
        );
        assert_eq!(
            c.commit("g", 1, "x", None, &[("t".into(), 0, offset(1))]),
            vec![Some(GroupError::UnknownMemberId)]
        );
        assert_eq!(
            c.commit("g", 1, &a, None, &[("t".into(), 0, offset(7)), ("t".into(), 1, offset(9))]),
            vec![None, None]
        );
        assert_eq!(c.commit("g", 1, &a, None, &[("t".into(), 0, offset(8))]), vec![None]);
        let big = CommittedOffset { metadata: "x".repeat(5000), ..offset(1) };
        assert_eq!(
            c.commit("g", 1, &a, None, &[("t".into(), 2, big)]),
            vec![Some(GroupError::OffsetMetadataTooLarge)]
        );
    }
    // A new coordinator over the same logs rebuilds everything from the topic.
    let c = coordinator(dir.path(), clock.clone());
    let got = c.fetch_offsets("g", None).unwrap();
    let got: Vec<(String, i32, i64)> =
        got.into_iter().map(|(t, p, o)| (t, p, o.unwrap().offset)).collect();
    assert_eq!(got, [("t".to_string(), 0, 8), ("t".to_string(), 1, 9)]);
    assert_eq!(
        c.fetch_offsets("simple", Some(&[("t".into(), 0), ("t".into(), 3)]))
            .unwrap()
            .iter()
            .map(|(_, _, o)| o.as_ref().map(|o| o.offset))
            .collect::<Vec<_>>(),
        [Some(5), None]
    );
    let d = c.describe("g").unwrap();
    assert_eq!(
        (d.state, d.members.len()),
        (GroupState::Stable, 1),
        "the stable group comes back with its member"
    );

    // Deleting a non-empty group is refused; once empty it goes, for good.
    assert_eq!(c.delete_group("g"), Err(GroupError::NonEmptyGroup));
    clock.advance(10_001);
    c.tick();
    clock.advance(30_001);
    c.tick();
    assert_eq!(c.describe("g").unwrap().state, GroupState::Empty);
    assert_eq!(c.delete_group("g"), Ok(()));
    let c = coordinator(dir.path(), clock.clone());
    assert!(c.fetch_offsets("g", None).unwrap().is_empty());
    assert_eq!(c.describe("g").unwrap().state, GroupState::Dead);
}

#[test]
fn offsets_of_empty_groups_expire() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let c = coordinator(dir.path(), clock.clone());
    let o = CommittedOffset {
        offset: 3,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 0,
    };
    assert_eq!(c.commit("old", -1, "", None, &[("t".into(), 0, o)]), vec![None]);
    clock.advance(config().offsets_retention_ms - 1);
    c.expire_offsets(clock.now_ms());
    assert_eq!(c.fetch_offsets("old", None).unwrap().len(), 1);
    clock.advance(2);
    c.expire_offsets(clock.now_ms());
    assert!(c.fetch_offsets("old", None).unwrap().is_empty());
    assert!(c.list().unwrap().is_empty(), "a group with nothing left is gone");
    let c = coordinator(dir.path(), clock.clone());
    assert!(c.fetch_offsets("old", None).unwrap().is_empty(), "the tombstones were written");
}

#[test]
fn requests_wait_for_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let logs = Arc::new(common::manager(dir.path(), &[], clock.clone()));
    let c = GroupCoordinator::new(config(), logs, clock);
    assert_eq!(
        start(c.join(join_req("", None))).done().error,
        Some(GroupError::CoordinatorLoadInProgress)
    );
    assert_eq!(c.fetch_offsets("g", None).unwrap_err(), GroupError::CoordinatorLoadInProgress);
    assert_eq!(c.list().unwrap_err(), GroupError::CoordinatorLoadInProgress);
    c.load();
    assert_eq!(start(c.join(join_req("", None))).done().error, Some(GroupError::MemberIdRequired));
}

#[test]
fn a_full_group_refuses_new_members() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_000_000);
    let logs = Arc::new(common::manager(dir.path(), &[], clock.clone()));
    let c = GroupCoordinator::new(GroupConfig { max_size: 1, ..config() }, logs, clock);
    c.load();
    let (a, ja) = join_new(&c);
    assert_eq!(ja.done().error, None);
    assert_eq!(
        start(c.join(join_req("", None))).done().error,
        Some(GroupError::GroupMaxSizeReached)
    );
    // The member already in the group may still rejoin.
    assert_eq!(start(c.join(join_req(&a, None))).done().error, None);
}
