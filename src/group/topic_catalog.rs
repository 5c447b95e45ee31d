//! The topics a group coordinator reads (subscriptions, regular
//! expressions, ConsumerGroupDescribe's names): the local logs on one node,
//! the cluster's image in a cluster, where a broker holds replicas of only
//! some partitions and a topic's local partition count says nothing.

use super::consumer_group_records::TopicId;
use crate::log::LogManager;

/// What a coordinator knows of a topic: its id and partition count.
pub trait TopicCatalog: Send + Sync + std::fmt::Debug {
    fn topic(&self, name: &str) -> Option<(TopicId, i32)>;
    fn topic_name_by_id(&self, id: &TopicId) -> Option<String>;
    fn topic_names(&self) -> Vec<String>;
}

impl TopicCatalog for LogManager {
    fn topic(&self, name: &str) -> Option<(TopicId, i32)> {
        LogManager::topic(self, name).map(|t| (t.id, t.partitions))
    }
    fn topic_name_by_id(&self, id: &TopicId) -> Option<String> {
        LogManager::topic_name_by_id(self, id)
    }
    fn topic_names(&self) -> Vec<String> {
        self.topics().into_iter().map(|t| t.name).collect()
    }
}
