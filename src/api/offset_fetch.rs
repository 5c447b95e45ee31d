//! OffsetFetch: one group (v1–7) or several (v8+); all of a group's offsets
//! when no topics are named. A partition without a commit gets offset -1.
//! With `require_stable` (v7+), a partition a transaction holds a pending
//! offset for gets offset -1 and UNSTABLE_OFFSET_COMMIT (the consumer
//! retries); without it, the last committed offset is answered.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

use super::error::group_code;
use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::group::CommittedOffset;

fn by_topic(
    rows: Vec<(String, i32, Option<CommittedOffset>)>,
) -> BTreeMap<String, Vec<(i32, Option<CommittedOffset>)>> {
    let mut out: BTreeMap<String, Vec<(i32, Option<CommittedOffset>)>> = BTreeMap::new();
    for (t, p, o) in rows {
        out.entry(t).or_default().push((p, o));
    }
    out
}

pub fn handle(broker: &Broker, request: &OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let stable = version >= 7 && request.require_stable;
    if version >= 8 {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let mut out = fetch_group(broker, g);
                if stable {
                    mark_unstable_groups(broker, &mut out);
                }
                out
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let mut response = fetch_one(broker, request, version);
    if stable {
        mark_unstable(broker, request.group_id.0.as_str(), &mut response);
    }
    response
}

/// A pending transactional offset makes a partition unstable.
fn unstable(broker: &Broker, group: &str, topic: &str, partition: i32) -> bool {
    broker.groups.has_pending_txn_offset(group, topic, partition)
}

fn mark_unstable(broker: &Broker, group: &str, response: &mut OffsetFetchResponse) {
    for t in &mut response.topics {
        for p in &mut t.partitions {
            if p.error_code == 0 && unstable(broker, group, t.name.0.as_str(), p.partition_index) {
                p.committed_offset = -1;
                p.committed_leader_epoch = -1;
                p.metadata = Some(str_bytes(""));
                p.error_code = ResponseError::UnstableOffsetCommit.code();
            }
        }
    }
}

fn mark_unstable_groups(broker: &Broker, out: &mut OffsetFetchResponseGroup) {
    let group = out.group_id.0.to_string();
    for t in &mut out.topics {
        for p in &mut t.partitions {
            if p.error_code == 0 && unstable(broker, &group, t.name.0.as_str(), p.partition_index) {
                p.committed_offset = -1;
                p.committed_leader_epoch = -1;
                p.metadata = Some(str_bytes(""));
                p.error_code = ResponseError::UnstableOffsetCommit.code();
            }
        }
    }
}

/// The single group of a v1–v7 request.
fn fetch_one(broker: &Broker, request: &OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let wanted = request.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect::<Vec<_>>()
    });
    match broker.groups.fetch_offsets(request.group_id.0.as_str(), wanted.as_deref()) {
        Err(e) if version >= 2 => {
            OffsetFetchResponse::default().with_error_code(group_code(Some(e)))
        }
        Err(e) => every_partition_failed(request, group_code(Some(e))),
        Ok(rows) => {
            let topics = by_topic(rows)
                .into_iter()
                .map(|(t, ps)| {
                    let partitions =
                        ps.into_iter().map(|(p, o)| partition(p, o, version)).collect();
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(partitions)
                })
                .collect();
            OffsetFetchResponse::default().with_topics(topics)
        }
    }
}

/// One group of a v8+ request, which may ask for several.
fn fetch_group(broker: &Broker, g: &OffsetFetchRequestGroup) -> OffsetFetchResponseGroup {
    let wanted = g.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect::<Vec<_>>()
    });
    let out = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
    match broker.groups.fetch_offsets(g.group_id.0.as_str(), wanted.as_deref()) {
        Err(e) => out.with_error_code(group_code(Some(e))),
        Ok(rows) => out.with_topics(
            by_topic(rows)
                .into_iter()
                .map(|(t, ps)| {
                    let partitions = ps.into_iter().map(|(p, o)| group_partition(p, o)).collect();
                    OffsetFetchResponseTopics::default()
                        .with_name(topic_name(t))
                        .with_partitions(partitions)
                })
                .collect(),
        ),
    }
}

fn group_partition(p: i32, o: Option<CommittedOffset>) -> OffsetFetchResponsePartitions {
    let r = OffsetFetchResponsePartitions::default()
        .with_partition_index(p)
        .with_committed_offset(-1)
        .with_committed_leader_epoch(-1)
        .with_metadata(Some(str_bytes("")));
    match o {
        Some(o) => r
            .with_committed_offset(o.offset)
            .with_committed_leader_epoch(o.leader_epoch)
            .with_metadata(Some(str_bytes(o.metadata))),
        None => r,
    }
}

/// A partition of a v1–v7 response; the leader epoch exists from v5.
fn partition(p: i32, o: Option<CommittedOffset>, version: i16) -> OffsetFetchResponsePartition {
    let r = OffsetFetchResponsePartition::default()
        .with_partition_index(p)
        .with_committed_offset(-1)
        .with_committed_leader_epoch(-1)
        .with_metadata(Some(str_bytes("")));
    match o {
        Some(o) => r
            .with_committed_offset(o.offset)
            .with_committed_leader_epoch(if version >= 5 { o.leader_epoch } else { -1 })
            .with_metadata(Some(str_bytes(o.metadata))),
        None => r,
    }
}

/// v1 has no top-level error: the error goes on every requested partition.
fn every_partition_failed(request: &OffsetFetchRequest, code: i16) -> OffsetFetchResponse {
    let topics = request
        .topics
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|p| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(*p)
                        .with_committed_offset(-1)
                        .with_metadata(Some(str_bytes("")))
                        .with_error_code(code)
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}
