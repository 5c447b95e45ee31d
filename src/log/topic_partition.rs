//! `TopicPartition`: the name of one partition, and of its directory.
//!
//! Invariants: the directory of a partition is `<topic>-<partition>`, and
//! [`TopicPartition::from_dir_name`] accepts exactly the names `Display`
//! produces (a non-negative partition in canonical decimal after the last `-`),
//! so a directory that is not a partition's is never mistaken for one.

/// A topic name and partition number; the directory is `<topic>-<partition>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self { topic: topic.into(), partition }
    }

    /// Parse a partition directory name (`my-topic-3`).
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        let partition: i32 = partition.parse().ok()?;
        (!topic.is_empty() && partition >= 0 && partition.to_string() == name[topic.len() + 1..])
            .then(|| Self::new(topic, partition))
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names_round_trip() {
        let tp = TopicPartition::new("my-topic", 3);
        assert_eq!(tp.to_string(), "my-topic-3");
        assert_eq!(TopicPartition::from_dir_name("my-topic-3"), Some(tp));
        for bad in ["my-topic", "-3", "t-03", "t-+1", "t--1x"] {
            assert_eq!(TopicPartition::from_dir_name(bad), None, "{bad}");
        }
    }
}
