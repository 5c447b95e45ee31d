//! An offset as the coordinator keeps it (Kafka's `OffsetAndMetadata`):
//! [`CommittedOffset`], and a transactional one still pending its marker.

/// A committed offset with its metadata and commit time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

impl CommittedOffset {
    /// An offset as a commit request carries it; the coordinator stamps the
    /// commit time when it writes it.
    pub fn requested(offset: i64, leader_epoch: i32, metadata: Option<&str>) -> Self {
        let metadata = metadata.unwrap_or_default().to_string();
        Self { offset, leader_epoch, metadata, commit_timestamp: 0 }
    }
}

/// A transactional offset not yet committed, with the base offset of the
/// batch that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PendingOffset {
    pub(super) offset: CommittedOffset,
    pub(super) log_offset: i64,
}
