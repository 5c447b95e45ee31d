//! What OffsetCommit, TxnOffsetCommit and OffsetDelete do alike to each
//! partition before the group coordinator sees it, as Kafka's `KafkaApis`
//! does: READ on its topic (denied: TOPIC_AUTHORIZATION_FAILED), then the
//! topic and partition must exist (Kafka's `MetadataCache.contains`; else
//! UNKNOWN_TOPIC_OR_PARTITION). Only the partitions that pass reach the
//! coordinator, whose answers come back in request order.

use std::collections::HashMap;

use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::log::LogManager;
use crate::security::acl::{AclOperation, ResourceType};

pub(super) struct PartitionChecks<'a> {
    allowed: HashMap<&'a str, bool>,
    logs: &'a LogManager,
}

impl<'a> PartitionChecks<'a> {
    /// Authorize READ on each of `topics` once (denials recorded).
    pub(super) fn new(
        ctx: &RequestContext<'_>,
        logs: &'a LogManager,
        topics: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let allowed = ctx.filter_authorized(AclOperation::Read, ResourceType::Topic, topics);
        Self { allowed, logs }
    }

    fn allowed(&self, topic: &str) -> bool {
        self.allowed.get(topic).copied().unwrap_or(false)
    }

    /// Whether the partition goes on to the coordinator.
    pub(super) fn passes(&self, topic: &str, partition: i32) -> bool {
        self.allowed(topic) && self.logs.contains_partition(topic, partition)
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
        } else if self.logs.contains_partition(topic, partition) {
            coordinator()
        } else {
            ResponseError::UnknownTopicOrPartition.code()
        }
    }
}
