//! `TopicPartition`: the name of one partition, and of its directory.
//!
//! Invariants: the directory of a partition is `<topic>-<partition>`, and
//! [`TopicPartition::from_dir_name`] accepts exactly the names `Display`
//! produces (a non-negative partition in canonical decimal after the last `-`),
//! so a directory that is not a partition's is never mistaken for one.
//!
//! [`coordinator_partition`] is the one place a coordinator key (a group id,
//! a transactional id) is mapped to its partition of `__consumer_offsets` or
//! `__transaction_state`, with Kafka's arithmetic, so the same key lands in the
//! same partition on sediment and on Kafka.

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

/// Whether `topic` is a coordinator's (`__consumer_offsets`,
/// `__transaction_state`): its state is loaded from the local log at start.
pub fn is_coordinator_topic(topic: &str) -> bool {
    matches!(topic, "__consumer_offsets" | "__transaction_state")
}

/// The partition of a coordinator's topic holding `key` (a group id or a
/// transactional id), out of `partitions`: Kafka's
/// `Utils.abs(key.hashCode()) % partitions`, where `hashCode` is Java's
/// `String.hashCode` over UTF-16 code units and `Utils.abs(i32::MIN)` is 0.
/// `partitions` must be positive.
pub fn coordinator_partition(key: &str, partitions: i32) -> i32 {
    let h = java_string_hash(key);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// The partition the Java client's default partitioner picks for a record
/// with `key` among `partitions` (murmur2 of the key bytes, sign bit
/// cleared, modulo the count).
pub fn default_partition(key: &[u8], partitions: i32) -> i32 {
    ((murmur2(key) & 0x7fff_ffff) % partitions.max(1) as u32) as i32
}

/// MurmurHash2 (32-bit) with the seed Kafka's clients use.
fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const SEED: u32 = 0x9747_b28c;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in chunks.by_ref() {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= u32::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// Java's `String.hashCode`.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

#[cfg(test)]
mod tests {
    /// Values of kafka-python's murmur2, the Java client's function.
    #[test]
    fn murmur2_matches_the_clients() {
        for (key, hash, partition_of_6) in [
            (&b""[..], 275_646_681u32, 3),
            (b"k", 2_727_470_560, 2),
            (b"21", 3_321_034_988, 0),
            (b"foobar", 3_504_634_814, 0),
            (b"user-42", 1_459_644_460, 4),
            (b"abcde", 461_995_741, 1),
        ] {
            assert_eq!(super::murmur2(key), hash, "{key:?}");
            assert_eq!(super::default_partition(key, 6), partition_of_6, "{key:?}");
        }
    }

    use super::*;

    #[test]
    fn coordinator_partition_matches_kafka() {
        // Values of Java's "…".hashCode().
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        assert_eq!(java_string_hash("console-consumer-12345"), 158_455_506);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        // Outside the BMP: two UTF-16 units (0xD83D 0xDE00), as Java hashes them.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        assert_eq!(coordinator_partition("my-group", 50), 1_906_497_762 % 50);
        assert_eq!(coordinator_partition("a", 50), 47);
        // "polygenelubricants".hashCode() is Integer.MIN_VALUE: Utils.abs gives 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(coordinator_partition("polygenelubricants", 50), 0);
    }

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
