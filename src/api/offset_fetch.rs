//! OffsetFetch: one group (v1–7) or several (v8+); all of a group's offsets
//! when no topics are named. A partition without a commit gets offset -1.
//! With `require_stable` (v7+), a partition a transaction holds a pending
//! offset for gets offset -1 and UNSTABLE_OFFSET_COMMIT (the consumer
//! retries); without it, the last committed offset is answered.
//!
//! Authorization, as Kafka's `handleOffsetFetchRequestFromCoordinator`:
//! DESCRIBE on each group (denied: GROUP_AUTHORIZATION_FAILED for that group,
//! at the top level before v8; on v1, which has no top-level error, on every
//! requested partition as for any group error here); then DESCRIBE on
//! topics: an all-offsets answer leaves out the topics the principal may not
//! describe, named partitions of such a topic get TOPIC_AUTHORIZATION_FAILED
//! (listed after the others) and are not looked up.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

use super::error::group_code;
use super::{str_bytes, topic_name, RequestContext};
use crate::api::KafkaApis;
use crate::group::{CommittedOffset, GroupError};
use crate::security::acl::{AclOperation, ResourceType};

/// One partition of an answer: its committed offset (if any), or denied.
enum Part {
    Offset(Option<CommittedOffset>),
    Denied,
}

/// A group's answer, by topic.
type Answer = Vec<(String, Vec<(i32, Part)>)>;

/// Why a group gets no offsets at all.
enum GroupFailure {
    Denied,
    Group(GroupError),
}

impl GroupFailure {
    fn code(self) -> i16 {
        match self {
            Self::Denied => ResponseError::GroupAuthorizationFailed.code(),
            Self::Group(e) => group_code(Some(e)),
        }
    }
}

/// The offsets of `group` the principal may see: all of the group's
/// (`requested` None) or the named partitions, by topic.
fn fetch(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    group: &str,
    requested: Option<Vec<(&str, &[i32])>>,
    member: Option<(&str, i32)>,
) -> Result<Answer, GroupFailure> {
    if !ctx.authorize(AclOperation::Describe, ResourceType::Group, group) {
        return Err(GroupFailure::Denied);
    }
    if let Some((member_id, epoch)) = member {
        broker.groups.check_fetch_member(group, member_id, epoch).map_err(GroupFailure::Group)?;
    }
    let Some(requested) = requested else {
        let rows = broker.groups.fetch_offsets(group, None).map_err(GroupFailure::Group)?;
        let topics = by_topic(rows);
        let allowed = ctx.filter_authorized(
            AclOperation::Describe,
            ResourceType::Topic,
            topics.iter().map(|(t, _)| t.as_str()),
        );
        let allowed: Vec<bool> =
            topics.iter().map(|(t, _)| allowed.get(t.as_str()) == Some(&true)).collect();
        return Ok(topics.into_iter().zip(allowed).filter(|(_, a)| *a).map(|(t, _)| t).collect());
    };
    let allowed = ctx.filter_authorized(
        AclOperation::Describe,
        ResourceType::Topic,
        requested.iter().map(|(t, _)| *t),
    );
    let is_allowed = |t: &str| allowed.get(t) == Some(&true);
    let wanted: Vec<(String, i32)> = requested
        .iter()
        .filter(|(t, _)| is_allowed(t))
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.to_string(), *p)))
        .collect();
    let rows = broker.groups.fetch_offsets(group, Some(&wanted)).map_err(GroupFailure::Group)?;
    let mut answer = by_topic(rows);
    for (t, ps) in requested.iter().filter(|(t, _)| !is_allowed(t)) {
        answer.push((t.to_string(), ps.iter().map(|p| (*p, Part::Denied)).collect()));
    }
    Ok(answer)
}

fn by_topic(rows: Vec<(String, i32, Option<CommittedOffset>)>) -> Answer {
    let mut out: BTreeMap<String, Vec<(i32, Part)>> = BTreeMap::new();
    for (t, p, o) in rows {
        out.entry(t).or_default().push((p, Part::Offset(o)));
    }
    out.into_iter().collect()
}

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let stable = version >= 7 && request.require_stable;
    if version >= 8 {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let mut out = fetch_group(broker, ctx, g, version);
                if stable {
                    mark_unstable_groups(broker, &mut out);
                }
                out
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let mut response = fetch_one(broker, ctx, request, version);
    if stable {
        mark_unstable(broker, request.group_id.0.as_str(), &mut response);
    }
    response
}

/// A pending transactional offset makes a partition unstable.
fn unstable(broker: &KafkaApis, group: &str, topic: &str, partition: i32) -> bool {
    broker.groups.has_pending_txn_offset(group, topic, partition)
}

fn mark_unstable(broker: &KafkaApis, group: &str, response: &mut OffsetFetchResponse) {
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

fn mark_unstable_groups(broker: &KafkaApis, out: &mut OffsetFetchResponseGroup) {
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
fn fetch_one(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let requested = request
        .topics
        .as_ref()
        .map(|ts| ts.iter().map(|t| (t.name.0.as_str(), t.partition_indexes.as_slice())).collect());
    match fetch(broker, ctx, request.group_id.0.as_str(), requested, None) {
        Err(e) if version >= 2 => OffsetFetchResponse::default().with_error_code(e.code()),
        Err(e) => every_partition_failed(request, e.code()),
        Ok(answer) => {
            let topics = answer
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

/// One group of a v8+ request, which may ask for several. v10 names topics
/// by id: the answer carries ids; an id no topic has gets UNKNOWN_TOPIC_ID on
/// its partitions, and a topic without an id (deleted since its commit) is
/// left out of an all-offsets answer.
fn fetch_group(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    g: &OffsetFetchRequestGroup,
    version: i16,
) -> OffsetFetchResponseGroup {
    let by_id = version >= 10;
    let names: Vec<Option<String>> =
        g.topics
            .iter()
            .flatten()
            .map(|t| {
                if by_id {
                    broker.topic_name_by_id(&t.topic_id)
                } else {
                    Some(t.name.0.to_string())
                }
            })
            .collect();
    let requested = g.topics.as_ref().map(|ts| {
        ts.iter()
            .zip(&names)
            .filter_map(|(t, name)| Some((name.as_deref()?, t.partition_indexes.as_slice())))
            .collect()
    });
    let out = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
    // v9: a consumer group member names itself; its epoch must be current.
    let member = g.member_id.as_ref().map(|m| (m.as_str(), g.member_epoch));
    let answer = match fetch(broker, ctx, g.group_id.0.as_str(), requested, member) {
        Err(e) => return out.with_error_code(e.code()),
        Ok(answer) => answer,
    };
    let mut topics: Vec<OffsetFetchResponseTopics> = answer
        .into_iter()
        .filter_map(|(t, ps)| {
            let partitions = ps.into_iter().map(|(p, o)| group_partition(p, o)).collect();
            let topic = OffsetFetchResponseTopics::default().with_partitions(partitions);
            if !by_id {
                return Some(topic.with_name(topic_name(t)));
            }
            let id = broker.topic_id(&t)?;
            Some(topic.with_name(topic_name(t)).with_topic_id(uuid::Uuid::from_bytes(id)))
        })
        .collect();
    let unknown = g.topics.iter().flatten().zip(&names).filter(|(_, n)| n.is_none());
    for (t, _) in unknown {
        let code = ResponseError::UnknownTopicId.code();
        let partitions = t
            .partition_indexes
            .iter()
            .map(|p| group_partition(*p, Part::Offset(None)).with_error_code(code))
            .collect();
        topics.push(
            OffsetFetchResponseTopics::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    out.with_topics(topics)
}

fn group_partition(p: i32, part: Part) -> OffsetFetchResponsePartitions {
    let r = OffsetFetchResponsePartitions::default()
        .with_partition_index(p)
        .with_committed_offset(-1)
        .with_committed_leader_epoch(-1)
        .with_metadata(Some(str_bytes("")));
    match part {
        Part::Offset(Some(o)) => r
            .with_committed_offset(o.offset)
            .with_committed_leader_epoch(o.leader_epoch)
            .with_metadata(Some(str_bytes(o.metadata))),
        Part::Offset(None) => r,
        Part::Denied => r.with_error_code(ResponseError::TopicAuthorizationFailed.code()),
    }
}

/// A partition of a v1–v7 response; the leader epoch exists from v5.
fn partition(p: i32, part: Part, version: i16) -> OffsetFetchResponsePartition {
    let r = OffsetFetchResponsePartition::default()
        .with_partition_index(p)
        .with_committed_offset(-1)
        .with_committed_leader_epoch(-1)
        .with_metadata(Some(str_bytes("")));
    match part {
        Part::Offset(Some(o)) => r
            .with_committed_offset(o.offset)
            .with_committed_leader_epoch(if version >= 5 { o.leader_epoch } else { -1 })
            .with_metadata(Some(str_bytes(o.metadata))),
        Part::Offset(None) => r,
        Part::Denied => r.with_error_code(ResponseError::TopicAuthorizationFailed.code()),
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
