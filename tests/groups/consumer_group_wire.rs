//! The consumer group protocol (KIP-848) on the wire, one broker for every
//! case, as Kafka 4.1.2 answers: the request checks of
//! ConsumerGroupHeartbeat, the classic APIs on a consumer group (ListGroups'
//! type filter, DescribeGroups v5/v6, OffsetCommit v9 and OffsetFetch v9
//! member epochs, JoinGroup), a heartbeat to a classic group with members,
//! and both APIs refused with
//! UNSUPPORTED_VERSION once `group.coordinator.rebalance.protocols` leaves
//! `consumer` out.

use crate::broker::{create_topic, TestBroker, Wire};
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, GroupId, JoinGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn join(group: &str, member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]))
}

fn code(e: E) -> i16 {
    e.code()
}

fn commit(group: &str, member: &str, epoch: i32) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])])
}

/// An OffsetCommit v10 of offset 7 on partition 0 of each topic, by id.
fn commit_by_id(group: &str, member: &str, ids: &[uuid::Uuid]) -> OffsetCommitRequest {
    let topic = |id: &uuid::Uuid| {
        OffsetCommitRequestTopic::default().with_topic_id(*id).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(7),
        ])
    };
    commit(group, member, 1).with_topics(ids.iter().map(topic).collect())
}

fn fetch(group: &str, member: &str, epoch: i32) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(Some(s(member)))
        .with_member_epoch(epoch)
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(s("t")))
            .with_partition_indexes(vec![0])]))])
}

fn classic_join(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0]))])
}

#[test]
fn consumer_groups_on_the_wire() {
    let mut b = TestBroker::start(&[
        "group.initial.rebalance.delay.ms=0",
        "offsets.topic.num.partitions=3",
    ]);
    create_topic(b.port, "t", 2, &[]);
    let mut w = Wire::connect(b.port);

    // Request checks.
    let r: ConsumerGroupHeartbeatResponse = w.call(1, &join("cg", "").with_member_epoch(0));
    assert_eq!(r.error_code, code(E::InvalidRequest), "v1: the client names its member id");
    let r = w.call(1, &join("cg", "m1").with_rebalance_timeout_ms(-1));
    assert_eq!(r.error_code, code(E::InvalidRequest));
    let r = w.call(1, &join("cg", "m1").with_server_assignor(Some(s("roundrobin"))));
    assert_eq!(r.error_code, code(E::UnsupportedAssignor));
    let r = w.call(1, &join("cg", "m1").with_subscribed_topic_regex(Some(s("t(.*"))));
    assert_eq!(r.error_code, code(E::InvalidRegularExpression), "{r:?}");
    let r = w.call(1, &join("cg", "m1").with_member_epoch(3));
    assert_eq!(r.error_code, code(E::UnknownMemberId));

    // v0 without a member id: the broker names the member.
    let r = w.call(0, &join("cg", "").with_server_assignor(Some(s("range"))));
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
    let m1 = r.member_id.clone().expect("member id").to_string();
    let assigned = r.assignment.as_ref().expect("assignment");
    assert_eq!(assigned.topic_partitions[0].partitions, [0, 1]);
    let r = w.call(1, &join("cg", &m1).with_member_epoch(2));
    assert_eq!(r.error_code, code(E::FencedMemberEpoch), "an epoch ahead of the broker's");

    // ConsumerGroupDescribe: the epochs, the assignor the member chose.
    let r = w.call(
        1,
        &ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("cg")), GroupId(s("nope"))]),
    );
    let g = &r.groups[0];
    assert_eq!(
        (g.error_code, g.group_state.as_str(), g.group_epoch, g.assignment_epoch),
        (0, "Stable", 1, 1)
    );
    assert_eq!(g.assignor_name.as_str(), "range");
    assert_eq!(g.members[0].assignment.topic_partitions[0].topic_name.0.as_str(), "t");
    let t_id = g.members[0].assignment.topic_partitions[0].topic_id;
    assert_eq!(r.groups[1].error_code, code(E::GroupIdNotFound));

    // OffsetCommit v9 and OffsetFetch v9 with member epochs.
    let codes =
        |r: kafka_protocol::messages::OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(codes(w.call(9, &commit("cg", &m1, 0))), code(E::StaleMemberEpoch));
    assert_eq!(codes(w.call(9, &commit("cg", "who", 1))), code(E::UnknownMemberId));
    assert_eq!(
        codes(w.call(9, &commit("cg", "", -1))),
        code(E::UnknownMemberId),
        "not while it has members"
    );
    assert_eq!(codes(w.call(9, &commit("cg", &m1, 1))), 0);
    assert_eq!(
        codes(w.call(8, &commit("cg", &m1, 1))),
        code(E::UnsupportedVersion),
        "members commit with v9+"
    );
    let r = w.call(9, &fetch("cg", &m1, 5));
    assert_eq!(r.groups[0].error_code, code(E::StaleMemberEpoch));
    let r = w.call(9, &fetch("cg", &m1, 1));
    assert_eq!(
        (r.groups[0].error_code, r.groups[0].topics[0].partitions[0].committed_offset),
        (0, 1)
    );

    // v10 names topics by id (KIP-848); an id no topic has is UNKNOWN_TOPIC_ID.
    let unknown = uuid::Uuid::from_u128(7);
    let r = w.call(10, &commit_by_id("cg", &m1, &[t_id, unknown]));
    let answered: Vec<_> =
        r.topics.iter().map(|t| (t.topic_id, t.partitions[0].error_code)).collect();
    assert_eq!(answered, [(t_id, 0), (unknown, code(E::UnknownTopicId))]);
    let mut by_id = fetch("cg", &m1, 1);
    by_id.groups[0].topics = Some(
        [t_id, unknown]
            .iter()
            .map(|id| {
                OffsetFetchRequestTopics::default()
                    .with_topic_id(*id)
                    .with_partition_indexes(vec![0])
            })
            .collect(),
    );
    let r = w.call(10, &by_id);
    let topics = &r.groups[0].topics;
    assert_eq!((topics[0].topic_id, topics[0].partitions[0].committed_offset), (t_id, 7));
    assert_eq!(
        (topics[1].topic_id, topics[1].partitions[0].error_code),
        (unknown, code(E::UnknownTopicId))
    );
    let r = w.call(9, &fetch("cg", &m1, 1));
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 7, "the same offset by name");

    // The classic APIs: ListGroups with its type filter, DescribeGroups.
    let classic = w.call(3, &classic_join("classic"));
    assert_eq!(classic.error_code, 0, "{classic:?}");
    let listed = |w: &mut Wire, types: &[&str]| -> Vec<(String, String, String)> {
        let r = w.call(
            5,
            &ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect()),
        );
        let mut g: Vec<_> = r
            .groups
            .iter()
            .map(|g| {
                (g.group_id.0.to_string(), g.group_type.to_string(), g.group_state.to_string())
            })
            .collect();
        g.sort();
        g
    };
    assert_eq!(listed(&mut w, &["consumer"]), [("cg".into(), "consumer".into(), "Stable".into())]);
    assert_eq!(listed(&mut w, &["classic"]).len(), 1);
    assert_eq!(listed(&mut w, &[]).len(), 2);
    let r = w.call(6, &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("cg"))]));
    assert_eq!(r.groups[0].error_code, code(E::GroupIdNotFound), "{r:?}");
    let r = w.call(5, &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("cg"))]));
    assert_eq!((r.groups[0].error_code, r.groups[0].group_state.as_str()), (0, "Dead"));

    // Migration (Kafka's default policy, bidirectional): a classic member
    // may join the consumer group (first its member id, as v4+ asks); a
    // heartbeat other than a join to a classic group is GROUP_ID_NOT_FOUND.
    let r = w.call(5, &classic_join("cg"));
    assert_eq!(r.error_code, code(E::MemberIdRequired), "{r:?}");
    let r = w.call(1, &join("classic", "m9").with_member_epoch(1));
    assert_eq!(r.error_code, code(E::GroupIdNotFound), "{r:?}");

    // Leaving: epoch -1 answered with -1; the group is Empty and stays a consumer group.
    let r = w.call(1, &join("cg", &m1).with_member_epoch(-1));
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    assert_eq!(listed(&mut w, &["consumer"]), [("cg".into(), "consumer".into(), "Empty".into())]);

    // A regular expression subscription: whole names match, internal topics never.
    create_topic(b.port, "tx-a", 1, &[]);
    create_topic(b.port, "xt", 1, &[]);
    let regex = join("rx", "r1")
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("t.*|__.*")));
    let r = w.call(1, &regex);
    assert_eq!(r.error_code, 0, "{r:?}");
    let topics = |r: &ConsumerGroupHeartbeatResponse| -> usize {
        r.assignment.as_ref().map_or(0, |a| a.topic_partitions.len())
    };
    assert_eq!(topics(&r), 2, "t and tx-a, not xt nor __consumer_offsets: {r:?}");
    // A new matching topic is assigned on a later heartbeat.
    create_topic(b.port, "t2", 1, &[]);
    let next = join("rx", "r1").with_member_epoch(r.member_epoch).with_rebalance_timeout_ms(-1);
    let r = w.call(1, &next.with_subscribed_topic_names(None).with_topic_partitions(None));
    assert_eq!((r.error_code, topics(&r)), (0, 3), "{r:?}");

    // Without the consumer protocol both APIs answer UNSUPPORTED_VERSION.
    b.kill();
    b.set_overrides(&[
        "group.coordinator.rebalance.protocols=classic",
        "offsets.topic.num.partitions=3",
    ]);
    b.restart();
    let mut w = Wire::connect(b.port);
    let r = w.call(1, &join("cg", "m1"));
    assert_eq!(r.error_code, code(E::UnsupportedVersion));
    let r =
        w.call(1, &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("cg"))]));
    assert_eq!(r.groups[0].error_code, code(E::UnsupportedVersion));
}
