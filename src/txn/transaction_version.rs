//! Which transaction protocol a request speaks (Kafka's `TransactionVersion`,
//! the `transaction.version` feature of KIP-890).
//!
//! * Level 0 is the first protocol: the client adds partitions itself
//!   (AddPartitionsToTxn v0-3, AddOffsetsToTxn) and keeps one producer epoch
//!   across its transactions.
//! * Level 2 ("transactions v2"): the partition leader or group coordinator
//!   adds a partition when a transactional Produce (v12+) or TxnOffsetCommit
//!   (v5+) first reaches it, and every EndTxn (v5) bumps the producer epoch,
//!   so a late write of an ended transaction is fenced.
//!
//! As on Kafka, the request's version alone decides which protocol a request
//! follows; the finalized level the broker advertises (ApiVersions'
//! `transaction.version`, the `sediment.transaction.version` key) only tells
//! clients which one to use, and is the level the coordinator's own aborts
//! are written with. So clients that speak only level 0 (librdkafka) keep
//! working beside level-2 clients.

/// A `transaction.version` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TransactionVersion(pub i16);

impl TransactionVersion {
    pub const TV_0: Self = Self(0);
    pub const TV_2: Self = Self(2);
    /// The highest level sediment serves.
    pub const LATEST: Self = Self::TV_2;

    pub fn level(self) -> i16 {
        self.0
    }

    /// Whether every EndTxn bumps the producer epoch and partitions are added
    /// by the broker (level 2 and above).
    pub fn supports_epoch_bump(self) -> bool {
        self.0 >= 2
    }

    /// EndTxn v5 and later speak level 2.
    pub fn for_end_txn(version: i16) -> Self {
        Self::from_version(version, 5)
    }

    /// Produce v12 and later add the partition to the transaction.
    pub fn for_produce(version: i16) -> Self {
        Self::from_version(version, 12)
    }

    /// TxnOffsetCommit v5 and later add the offsets partition.
    pub fn for_txn_offset_commit(version: i16) -> Self {
        Self::from_version(version, 5)
    }

    /// AddPartitionsToTxn v4 and later come from brokers adding for a level-2
    /// producer (without `verify_only`); v0-3 from a level-0 client.
    pub fn for_add_partitions_to_txn(version: i16) -> Self {
        Self::from_version(version, 4)
    }

    /// Level 2 from the request version `first_v2` on, else level 0.
    fn from_version(version: i16, first_v2: i16) -> Self {
        if version >= first_v2 {
            Self::TV_2
        } else {
            Self::TV_0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TransactionVersion as Tv;

    #[test]
    fn request_versions_map_to_kafkas_levels() {
        assert_eq!((Tv::for_end_txn(4), Tv::for_end_txn(5)), (Tv::TV_0, Tv::TV_2));
        assert_eq!((Tv::for_produce(11), Tv::for_produce(12)), (Tv::TV_0, Tv::TV_2));
        let offsets = (Tv::for_txn_offset_commit(4), Tv::for_txn_offset_commit(5));
        assert_eq!(offsets, (Tv::TV_0, Tv::TV_2));
        let adds = (Tv::for_add_partitions_to_txn(3), Tv::for_add_partitions_to_txn(4));
        assert_eq!(adds, (Tv::TV_0, Tv::TV_2));
        assert!(!Tv(1).supports_epoch_bump() && Tv::TV_2.supports_epoch_bump());
    }
}
