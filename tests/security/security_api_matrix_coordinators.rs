//! The API authorization matrix's cases for the coordinators' APIs:
//! groups (classic and KIP-848) and transactions. The walk, the setup and
//! the expectations are in `security_api_matrix.rs`.

use super::*;

pub(super) fn find_coordinator(c: &mut Case<'_>) {
    let r = c.call(3, &FindCoordinatorRequest::default().with_key(s(GROUP)));
    let got = (r.error_code, r.node_id.0, r.error_message.as_ref().map(|m| m.to_string()));
    let want = (GROUP_DENIED, -1, Some("Group authorization failed.".to_string()));
    c.expect("v3 DESCRIBE on the group", got, want, &r);
    for (key_type, key, code) in [(0, GROUP, GROUP_DENIED), (1, TXN_ID, TXN_DENIED)] {
        let request = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![s(key)]);
        let r = c.call(4, &request);
        let k = &r.coordinators[0];
        // No message: Kafka leaves the field at its default, the empty string.
        let message = k.error_message.as_ref().filter(|m| !m.is_empty());
        let got = (k.error_code, k.node_id.0, message);
        c.expect(&format!("v4 DESCRIBE on {key}"), got, (code, -1, None), &r);
    }
}

pub(super) fn join_group(c: &mut Case<'_>) {
    let request = JoinGroupRequest::default()
        .with_group_id(group())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(s("range"))]);
    let r = c.call(7, &request);
    c.expect("READ on the group", r.error_code, GROUP_DENIED, &r);
}

pub(super) fn sync_group(c: &mut Case<'_>) {
    let request = SyncGroupRequest::default()
        .with_group_id(group())
        .with_generation_id(1)
        .with_member_id(s("m-1"))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")));
    let r = c.call(5, &request);
    c.expect("READ on the group", r.error_code, GROUP_DENIED, &r);
}

pub(super) fn heartbeat(c: &mut Case<'_>) {
    let request = HeartbeatRequest::default()
        .with_group_id(group())
        .with_generation_id(1)
        .with_member_id(s("m-1"));
    let r = c.call(4, &request);
    c.expect("READ on the group", r.error_code, GROUP_DENIED, &r);
}

pub(super) fn leave_group(c: &mut Case<'_>) {
    let request = LeaveGroupRequest::default()
        .with_group_id(group())
        .with_members(vec![MemberIdentity::default().with_member_id(s("m-1"))]);
    let r = c.call(5, &request);
    c.expect("READ on the group", (r.error_code, r.members.len()), (GROUP_DENIED, 0), &r);
}

pub(super) fn offset_commit(offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

pub(super) fn offset_commit_case(c: &mut Case<'_>) {
    let r = c.call(8, &offset_commit(COMMITTED + 1));
    c.expect("READ on the group", r.topics[0].partitions[0].error_code, GROUP_DENIED, &r);
}

pub(super) fn offset_fetch(c: &mut Case<'_>) {
    // v1 has no top-level error: 30 on every requested partition.
    let request = OffsetFetchRequest::default().with_group_id(group()).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(name(TOPIC)).with_partition_indexes(vec![0]),
    ]));
    let r = c.call(1, &request);
    let got: Vec<Vec<i16>> =
        r.topics.iter().map(|t| t.partitions.iter().map(|p| p.error_code).collect()).collect();
    c.expect("v1 DESCRIBE on the group", got, vec![vec![GROUP_DENIED]], &r);
    let r = c.call(7, &OffsetFetchRequest::default().with_group_id(group()).with_topics(None));
    c.expect("v7 DESCRIBE on the group", r.error_code, GROUP_DENIED, &r);
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group())
            .with_topics(None)]);
    let r = c.call(8, &request);
    let got = (r.groups[0].error_code, r.groups[0].topics.len());
    c.expect("v8 DESCRIBE on the group", got, (GROUP_DENIED, 0), &r);
}

pub(super) fn list_groups(c: &mut Case<'_>) {
    let r = c.call(4, &ListGroupsRequest::default());
    let listed: Vec<String> = r.groups.iter().map(|g| g.group_id.0.to_string()).collect();
    c.expect("filtered by DESCRIBE", (r.error_code, listed), (0, vec![]), &r);
}

pub(super) fn describe_groups(c: &mut Case<'_>) {
    let r = c.call(5, &DescribeGroupsRequest::default().with_groups(vec![group()]));
    c.expect("DESCRIBE on the group", r.groups[0].error_code, GROUP_DENIED, &r);
}

pub(super) fn delete_groups(c: &mut Case<'_>) {
    let r = c.call(2, &DeleteGroupsRequest::default().with_groups_names(vec![group()]));
    c.expect("DELETE on the group", r.results[0].error_code, GROUP_DENIED, &r);
}

pub(super) fn consumer_group_heartbeat(c: &mut Case<'_>) {
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group())
        .with_member_id(s("m-1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![name(TOPIC)]))
        .with_topic_partitions(Some(vec![]));
    let r = c.call(1, &request);
    c.expect("READ on the group", r.error_code, GROUP_DENIED, &r);
}

pub(super) fn consumer_group_describe(c: &mut Case<'_>) {
    let r = c.call(1, &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group()]));
    c.expect("DESCRIBE on the group", r.groups[0].error_code, GROUP_DENIED, &r);
}

pub(super) fn offset_delete(c: &mut Case<'_>) {
    let request = OffsetDeleteRequest::default().with_group_id(group()).with_topics(vec![
        OffsetDeleteRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)]),
    ]);
    let r = c.call(0, &request);
    c.expect("DELETE on the group", r.error_code, GROUP_DENIED, &r);
}

pub(super) fn add_partitions_to_txn(c: &mut Case<'_>) {
    let topics =
        vec![AddPartitionsToTxnTopic::default().with_name(name(TOPIC)).with_partitions(vec![0])];
    let client = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id())
        .with_v3_and_below_producer_id(ProducerId(c.st.pid))
        .with_v3_and_below_producer_epoch(c.st.epoch)
        .with_v3_and_below_topics(topics.clone());
    let r = c.call(3, &client);
    let code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
    c.expect("v3 WRITE on tx-admin", code, TXN_DENIED, &r);
    let from_broker = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(c.st.pid))
            .with_producer_epoch(c.st.epoch)
            .with_verify_only(true)
            .with_topics(topics),
    ]);
    let r = c.call(4, &from_broker);
    let got = (r.error_code, r.results_by_transaction.len());
    c.expect("v4 CLUSTER_ACTION", got, (CLUSTER_DENIED, 0), &r);
}

pub(super) fn add_offsets_to_txn(c: &mut Case<'_>) {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(c.st.pid))
        .with_producer_epoch(c.st.epoch)
        .with_group_id(group());
    let r = c.call(3, &request);
    c.expect("WRITE on tx-admin first", r.error_code, TXN_DENIED, &r);
}

pub(super) fn end_txn(c: &mut Case<'_>) {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(c.st.pid))
        .with_producer_epoch(c.st.epoch)
        .with_committed(false);
    let r = c.call(3, &request);
    c.expect("WRITE on tx-admin", r.error_code, TXN_DENIED, &r);
}

pub(super) fn txn_offset_commit(c: &mut Case<'_>) {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id())
        .with_group_id(group())
        .with_producer_id(ProducerId(c.st.pid))
        .with_producer_epoch(c.st.epoch)
        .with_generation_id(-1)
        .with_member_id(s(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let r = c.call(3, &request);
    c.expect("WRITE on tx-admin first", r.topics[0].partitions[0].error_code, TXN_DENIED, &r);
}

pub(super) fn write_txn_markers(c: &mut Case<'_>) {
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(c.st.pid))
            .with_producer_epoch(c.st.epoch)
            .with_transaction_result(false)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(name(TOPIC))
                .with_partition_indexes(vec![0])])]);
    let r = c.call(1, &request);
    let code = r.markers[0].topics[0].partitions[0].error_code;
    c.expect("ALTER or CLUSTER_ACTION on the cluster", code, CLUSTER_DENIED, &r);
}

pub(super) fn describe_producers(c: &mut Case<'_>) {
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name(TOPIC))
        .with_partition_indexes(vec![0])]);
    let r = c.call(0, &request);
    c.expect("READ on t", r.topics[0].partitions[0].error_code, TOPIC_DENIED, &r);
}

pub(super) fn describe_transactions(c: &mut Case<'_>) {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id()]);
    let r = c.call(0, &request);
    c.expect("DESCRIBE on tx-admin", r.transaction_states[0].error_code, TXN_DENIED, &r);
}

pub(super) fn list_transactions(c: &mut Case<'_>) {
    let r = c.call(1, &ListTransactionsRequest::default().with_duration_filter(-1));
    let listed: Vec<String> =
        r.transaction_states.iter().map(|t| t.transactional_id.0.to_string()).collect();
    c.expect("filtered by DESCRIBE", (r.error_code, listed), (0, vec![]), &r);
}
