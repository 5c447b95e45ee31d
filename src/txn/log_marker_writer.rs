//! The broker's [`TransactionMarkerWriter`]: a marker is a control batch
//! appended, origin Coordinator, to the partition's own log through
//! `Log::append_end_txn_marker`, for data partitions and `__consumer_offsets`
//! alike (its pending transactional offsets come with TxnOffsetCommit).
//!
//! * The append is the log's: the producer state checks the marker (a
//!   producer epoch below the partition's, or a coordinator epoch below one
//!   recorded, is refused and reported as [`MarkerWriteError::Failed`]), and
//!   a partition with no open transaction of the producer takes the marker
//!   without a second completion, so rewriting markers after a crash is safe.
//! * A marker moves the partition's last stable offset, so every successful
//!   write calls `on_appended`, which wakes read_committed fetches waiting
//!   for it.
//! * After a marker landed on a partition, the [`TxnCompletionListener`] (the
//!   broker wires the group coordinator) learns of it, so pending
//!   transactional offsets on `__consumer_offsets` are installed or dropped.
//! * A partition that does not exist (its topic was deleted) is
//!   [`MarkerWriteError::UnknownTopicOrPartition`]; one that is offline is
//!   `Failed` (retried).
//! * WriteTxnMarkers (the admin abort path) appends through
//!   [`LogMarkerWriter::append_marker`], the same steps with the log's typed
//!   error kept, so the request gets Kafka's per-partition code.

use std::sync::Arc;

use super::marker_writer::{
    MarkerWriteError, TransactionMarkerWriter, TransactionResult, TxnMarker,
};
use crate::log::control_record::EndTransactionMarker;
use crate::log::{LogError, LogManager, TopicPartition};

/// Called after a marker was appended.
pub type AppendedHook = Arc<dyn Fn(&TopicPartition) + Send + Sync>;

/// Told of every marker appended (Kafka's `onTransactionCompleted` of the
/// group coordinator).
pub trait TxnCompletionListener: Send + Sync {
    /// The marker of `producer_id` (`commit`: COMMIT, else ABORT) was
    /// appended to `partition`.
    fn on_transaction_completed(&self, partition: &TopicPartition, producer_id: i64, commit: bool);
}

/// Writes markers into the logs of a [`LogManager`].
pub struct LogMarkerWriter {
    logs: Arc<LogManager>,
    on_appended: AppendedHook,
    listener: Option<Arc<dyn TxnCompletionListener>>,
}

impl std::fmt::Debug for LogMarkerWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogMarkerWriter").finish_non_exhaustive()
    }
}

impl LogMarkerWriter {
    pub fn new(logs: Arc<LogManager>, on_appended: AppendedHook) -> Self {
        Self { logs, on_appended, listener: None }
    }

    /// Tell `listener` of every marker appended.
    #[must_use]
    pub fn with_listener(mut self, listener: Arc<dyn TxnCompletionListener>) -> Self {
        self.listener = Some(listener);
        self
    }
}

impl LogMarkerWriter {
    /// Append `marker` to `partition`, wake fetches and tell the listener, as
    /// [`TransactionMarkerWriter::write_marker`] does.
    ///
    /// # Errors
    /// `UnknownTopicOrPartition` for a partition that does not exist,
    /// `Offline` for one that cannot be read, else the append's error (a
    /// fenced producer or coordinator epoch, I/O); nothing was appended.
    pub fn append_marker(
        &self,
        partition: &TopicPartition,
        marker: &TxnMarker,
    ) -> Result<(), LogError> {
        let Some(log) = self.logs.get_log(partition) else {
            if let Some(reason) = self.logs.offline_partitions().remove(partition) {
                return Err(LogError::Offline { partition: partition.to_string(), reason });
            }
            return Err(LogError::UnknownTopicOrPartition(partition.to_string()));
        };
        let control = match marker.result {
            TransactionResult::Commit => EndTransactionMarker::commit(marker.coordinator_epoch),
            TransactionResult::Abort => EndTransactionMarker::abort(marker.coordinator_epoch),
        };
        log.write().append_end_txn_marker(marker.producer_id, marker.producer_epoch, control)?;
        // The log lock is released: the listener may take the group's locks.
        (self.on_appended)(partition);
        if let Some(listener) = &self.listener {
            let commit = marker.result == TransactionResult::Commit;
            listener.on_transaction_completed(partition, marker.producer_id, commit);
        }
        Ok(())
    }
}

impl TransactionMarkerWriter for LogMarkerWriter {
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: &TxnMarker,
    ) -> Result<(), MarkerWriteError> {
        match self.append_marker(partition, marker) {
            Ok(()) => Ok(()),
            Err(LogError::UnknownTopicOrPartition(_)) => {
                Err(MarkerWriteError::UnknownTopicOrPartition(partition.clone()))
            }
            Err(e) => Err(MarkerWriteError::Failed {
                partition: partition.clone(),
                reason: e.to_string(),
            }),
        }
    }

    fn has_open_transaction(&self, partition: &TopicPartition, producer_id: i64) -> Option<bool> {
        let log = self.logs.get_log(partition)?;
        let open = log.read().producer_state().ongoing_txns().any(|(_, pid)| pid == producer_id);
        Some(open)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::clock::MockClock;
    use crate::log::compression::Compression;
    use crate::log::record_batch::BatchBuilder;
    use crate::log::LogManagerConfig;

    const PID: i64 = 7;

    fn writer(dir: &std::path::Path) -> (Arc<LogManager>, LogMarkerWriter, Arc<AtomicUsize>) {
        let clock = MockClock::new(1_700_000_000_000);
        let logs = Arc::new(LogManager::open(LogManagerConfig::new(dir), clock).unwrap());
        logs.create_topic("t", 1, Default::default()).unwrap();
        let woken = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&woken);
        let hook: AppendedHook = Arc::new(move |_: &TopicPartition| {
            count.fetch_add(1, Ordering::SeqCst);
        });
        (Arc::clone(&logs), LogMarkerWriter::new(logs, hook), woken)
    }

    fn marker(epoch: i16, result: TransactionResult) -> TxnMarker {
        TxnMarker { producer_id: PID, producer_epoch: epoch, coordinator_epoch: 0, result }
    }

    fn open_txn(logs: &LogManager, tp: &TopicPartition) {
        let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000).producer(PID, 1, 0);
        b.transactional = true;
        b.append(1_700_000_000_000, Some(b"k"), Some(b"v"));
        let mut bytes = b.build();
        logs.get_log(tp).unwrap().write().append_as_leader(&mut bytes).unwrap();
    }

    #[test]
    fn a_marker_closes_the_transaction_and_wakes_fetches() {
        let dir = tempfile::tempdir().unwrap();
        let (logs, w, woken) = writer(dir.path());
        let tp = TopicPartition::new("t", 0);
        open_txn(&logs, &tp);
        assert_eq!(logs.get_log(&tp).unwrap().read().last_stable_offset(), 0);
        w.write_marker(&tp, &marker(1, TransactionResult::Commit)).unwrap();
        let log = logs.get_log(&tp).unwrap();
        let log = log.read();
        assert_eq!((log.log_end_offset(), log.last_stable_offset()), (2, 2));
        assert_eq!(woken.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_stale_epoch_is_refused_and_wakes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (logs, w, woken) = writer(dir.path());
        let tp = TopicPartition::new("t", 0);
        open_txn(&logs, &tp);
        let e = w.write_marker(&tp, &marker(0, TransactionResult::Abort)).unwrap_err();
        assert!(matches!(e, MarkerWriteError::Failed { .. }), "{e:?}");
        let log = logs.get_log(&tp).unwrap();
        assert_eq!((log.read().log_end_offset(), log.read().last_stable_offset()), (1, 0));
        assert_eq!(woken.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn an_unknown_partition_is_reported_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, w, _) = writer(dir.path());
        let tp = TopicPartition::new("gone", 0);
        let e = w.write_marker(&tp, &marker(1, TransactionResult::Commit)).unwrap_err();
        assert_eq!(e, MarkerWriteError::UnknownTopicOrPartition(tp));
    }

    #[test]
    fn an_open_transaction_is_seen_until_its_marker() {
        let dir = tempfile::tempdir().unwrap();
        let (logs, w, _) = writer(dir.path());
        let tp = TopicPartition::new("t", 0);
        assert_eq!(w.has_open_transaction(&tp, PID), Some(false));
        open_txn(&logs, &tp);
        assert_eq!(w.has_open_transaction(&tp, PID), Some(true));
        assert_eq!(w.has_open_transaction(&tp, PID + 1), Some(false), "another producer");
        w.write_marker(&tp, &marker(1, TransactionResult::Commit)).unwrap();
        assert_eq!(w.has_open_transaction(&tp, PID), Some(false));
        assert_eq!(w.has_open_transaction(&TopicPartition::new("gone", 0), PID), None);
    }

    /// Remembers what it was told.
    #[derive(Default)]
    struct Completions(parking_lot::Mutex<Vec<(TopicPartition, i64, bool)>>);

    impl TxnCompletionListener for Completions {
        fn on_transaction_completed(&self, tp: &TopicPartition, producer_id: i64, commit: bool) {
            self.0.lock().push((tp.clone(), producer_id, commit));
        }
    }

    #[test]
    fn the_listener_hears_each_marker_appended_and_no_refused_one() {
        let dir = tempfile::tempdir().unwrap();
        let (logs, w, _) = writer(dir.path());
        let heard = Arc::new(Completions::default());
        let w = w.with_listener(heard.clone());
        let tp = TopicPartition::new("t", 0);
        open_txn(&logs, &tp);
        assert!(w.write_marker(&tp, &marker(0, TransactionResult::Abort)).is_err());
        w.write_marker(&tp, &marker(1, TransactionResult::Abort)).unwrap();
        w.write_marker(&tp, &marker(1, TransactionResult::Commit)).unwrap();
        let expected = vec![(tp.clone(), PID, false), (tp, PID, true)];
        assert_eq!(*heard.0.lock(), expected);
    }
}
