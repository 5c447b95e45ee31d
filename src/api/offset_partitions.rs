//! What OffsetCommit, TxnOffsetCommit and OffsetDelete do alike to each
//! partition before the group coordinator sees it, as Kafka's `KafkaApis`
//! does: READ on its topic (denied: TOPIC_AUTHORIZATION_FAILED), then the
//! topic and partition must exist (Kafka's `MetadataCache.contains`, in a
//! cluster the image's; else UNKNOWN_TOPIC_OR_PARTITION). Only the partitions that pass reach the
//! coordinator, whose answers come back in request order. The requested
//! offsets and the per-partition answers of these requests are built here
//! once ([`requested_offsets`], [`partition_codes`]), and so is the answer
//! of a commit naming topics by id ([`by_topic_id`]).

use std::collections::HashMap;

use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};

pub(super) struct PartitionChecks<'a> {
    allowed: HashMap<&'a str, bool>,
    broker: &'a KafkaApis,
}

impl<'a> PartitionChecks<'a> {
    /// Authorize READ on each of `topics` once (denials recorded).
    pub(super) fn new(
        ctx: &RequestContext<'_>,
        broker: &'a KafkaApis,
        topics: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let allowed = ctx.filter_authorized(AclOperation::Read, ResourceType::Topic, topics);
        Self { allowed, broker }
    }

    fn allowed(&self, topic: &str) -> bool {
        self.allowed.get(topic).copied().unwrap_or(false)
    }

    /// Whether the partition goes on to the coordinator.
    pub(super) fn passes(&self, topic: &str, partition: i32) -> bool {
        self.allowed(topic) && self.broker.has_partition(topic, partition)
    }

    /// The partition's code: the refusal, or the coordinator's answer
    /// (`coordinator` is called only for a partition that passed).
    pub(super) fn code(
        &self,
        topic: &str,
        partition: i32,
        coordinator: impl FnOnce() -> i16,
    ) -> i16 {
        if !self.allowed(topic) {
            ResponseError::TopicAuthorizationFailed.code()
        } else if self.broker.has_partition(topic, partition) {
            coordinator()
        } else {
            ResponseError::UnknownTopicOrPartition.code()
        }
    }
}

/// The response topics of an offsets request (OffsetCommit,
/// TxnOffsetCommit, OffsetDelete: the same fields): every partition of the
/// request's `topics`, in their order, as `$Topic` of `$Partition`s, each
/// with the code `$code` gives for request topic `$t` and partition `$p`.
macro_rules! partition_codes {
    ($topics:expr, $Topic:ident, $Partition:ident, |$t:ident, $p:ident| $code:expr) => {
        $topics
            .iter()
            .map(|$t| {
                let partitions = $t
                    .partitions
                    .iter()
                    .map(|$p| {
                        $Partition::default()
                            .with_partition_index($p.partition_index)
                            .with_error_code($code)
                    })
                    .collect();
                $Topic::default().with_name($t.name.clone()).with_partitions(partitions)
            })
            .collect()
    };
}
pub(super) use partition_codes;

/// A commit naming topics by id (OffsetCommit v10, TxnOffsetCommit v6),
/// answered through its by-name handler: each id is resolved to its topic,
/// `by_name` answers the request as if it named them, and the answer carries
/// the ids in request order. An id no topic has gets UNKNOWN_TOPIC_ID on its
/// partitions. A `refused` code (the producer's or the group's denial)
/// answers every partition before any id is resolved, so a denied caller
/// learns nothing of them, as on Kafka.
macro_rules! by_topic_id {
    ($broker:expr, $request:expr, $Topic:ident, $Partition:ident, refused: $refused:expr,
     by_name: |$named:ident| $answer:expr) => {{
        let request = $request;
        let refused: Option<i16> = $refused;
        let names: Vec<Option<String>> = match refused {
            Some(_) => request.topics.iter().map(|_| None).collect(),
            None => request.topics.iter().map(|t| $broker.topic_name_by_id(&t.topic_id)).collect(),
        };
        let mut answered = Vec::new().into_iter();
        if refused.is_none() {
            let mut $named = request.clone();
            $named.topics = request
                .topics
                .iter()
                .zip(&names)
                .filter_map(|(t, n)| Some(t.clone().with_name(super::topic_name(n.clone()?))))
                .collect();
            answered = $answer.topics.into_iter();
        }
        let unknown = refused.unwrap_or(kafka_protocol::ResponseError::UnknownTopicId.code());
        request
            .topics
            .iter()
            .zip(&names)
            .map(|(t, name)| match name {
                Some(_) => answered.next().unwrap_or_default().with_topic_id(t.topic_id),
                None => {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            $Partition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(unknown)
                        })
                        .collect();
                    $Topic::default().with_topic_id(t.topic_id).with_partitions(partitions)
                }
            })
            .collect()
    }};
}
pub(super) use by_topic_id;

/// The offsets a commit request asks for (OffsetCommit and TxnOffsetCommit
/// carry the same partition fields), of the partitions that pass `checks`,
/// in request order; the leader epoch only from versions that carry it.
macro_rules! requested_offsets {
    ($topics:expr, $checks:expr, leader_epoch: $with_epoch:expr) => {{
        let mut offsets = Vec::new();
        for t in $topics {
            let name = t.name.0.as_str();
            for p in t.partitions.iter().filter(|p| $checks.passes(name, p.partition_index)) {
                let leader_epoch = if $with_epoch { p.committed_leader_epoch } else { -1 };
                let metadata = p.committed_metadata.as_deref();
                let o = $crate::group::CommittedOffset::requested(
                    p.committed_offset,
                    leader_epoch,
                    metadata,
                );
                offsets.push((name.to_string(), p.partition_index, o));
            }
        }
        offsets
    }};
}
pub(super) use requested_offsets;
