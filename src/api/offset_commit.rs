//! OffsetCommit (v2+): committed offsets are appended to `__consumer_offsets`
//! before they are acknowledged.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::error::group_code;
use crate::broker::Broker;
use crate::group::CommittedOffset;

pub fn handle(
    broker: &Broker,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let mut offsets = Vec::new();
    for t in &request.topics {
        for p in &t.partitions {
            let leader_epoch = if version >= 6 { p.committed_leader_epoch } else { -1 };
            let metadata = p.committed_metadata.as_deref();
            let o = CommittedOffset::requested(p.committed_offset, leader_epoch, metadata);
            offsets.push((t.name.0.to_string(), p.partition_index, o));
        }
    }
    let instance =
        if version >= 7 { request.group_instance_id.as_ref().map(|s| s.to_string()) } else { None };
    let results = broker.groups.commit(
        request.group_id.0.as_str(),
        request.generation_id_or_member_epoch,
        request.member_id.as_str(),
        instance.as_deref(),
        &offsets,
    );
    let mut results = results.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(group_code(results.next().flatten()))
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
