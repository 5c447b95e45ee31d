//! OffsetFetch: one group (v1–7) or several (v8+); all of a group's offsets
//! when no topics are named. A partition without a commit gets offset -1.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
use std::collections::BTreeMap;

use super::error::group_code;
use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::group::{CommittedOffset, GroupError};

type Fetched = Result<Vec<(String, i32, Option<CommittedOffset>)>, GroupError>;

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
    let fetch = |group: &str, topics: Option<Vec<(String, i32)>>| -> Fetched {
        broker.groups.fetch_offsets(group, topics.as_deref())
    };
    if version >= 8 {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let wanted = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .flat_map(|t| {
                            t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p))
                        })
                        .collect()
                });
                let out = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                match fetch(g.group_id.0.as_str(), wanted) {
                    Err(e) => out.with_error_code(group_code(Some(e))),
                    Ok(rows) => out.with_topics(
                        by_topic(rows)
                            .into_iter()
                            .map(|(t, ps)| {
                                let partitions = ps
                                    .into_iter()
                                    .map(|(p, o)| {
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
                                    })
                                    .collect();
                                OffsetFetchResponseTopics::default()
                                    .with_name(topic_name(t))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    ),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = request.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect()
    });
    match fetch(request.group_id.0.as_str(), wanted) {
        Err(e) if version >= 2 => {
            OffsetFetchResponse::default().with_error_code(group_code(Some(e)))
        }
        Err(e) => {
            // v1 has no top-level error: put it on every requested partition.
            let code = group_code(Some(e));
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
        Ok(rows) => {
            let topics = by_topic(rows)
                .into_iter()
                .map(|(t, ps)| {
                    let partitions = ps
                        .into_iter()
                        .map(|(p, o)| {
                            let r = OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(str_bytes("")));
                            match o {
                                Some(o) => r
                                    .with_committed_offset(o.offset)
                                    .with_committed_leader_epoch(if version >= 5 {
                                        o.leader_epoch
                                    } else {
                                        -1
                                    })
                                    .with_metadata(Some(str_bytes(o.metadata))),
                                None => r,
                            }
                        })
                        .collect();
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(partitions)
                })
                .collect();
            OffsetFetchResponse::default().with_topics(topics)
        }
    }
}
