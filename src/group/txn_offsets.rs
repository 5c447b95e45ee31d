//! Transactional offset commits (TxnOffsetCommit, Kafka's
//! `pendingTransactionalOffsetCommits`).
//!
//! * TxnOffsetCommit writes its offsets to the group's `__consumer_offsets`
//!   partition as one transactional batch of the producer (its id and epoch,
//!   origin Coordinator), so the log's producer state fences a stale epoch and
//!   the transaction's marker later closes the batch there.
//! * Until the producer's COMMIT marker lands on that partition the offsets
//!   are pending: kept per producer id, invisible to OffsetFetch, expiry and
//!   describe. On COMMIT each replaces the committed offset unless that one
//!   was written at a higher log offset (a later plain commit wins); on ABORT
//!   they are dropped.
//! * Loading applies the same rules in log order: a transactional batch's
//!   offsets go to pending, a marker installs or drops them, and what is left
//!   at the end (a still-open transaction) stays pending.

use super::coordinator::GroupCoordinator;
use super::error::GroupError;
use super::group_metadata::Group;
use super::group_state::GroupState;
use super::offset_and_metadata::{CommittedOffset, PendingOffset};
use super::offsets::{group_for_commit, offset_records};
use crate::log::producer_state::ProducerError;
use crate::log::LogError;

/// The transactional producer a TxnOffsetCommit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub id: i64,
    pub epoch: i16,
}

impl GroupCoordinator {
    /// TxnOffsetCommit (after the transaction coordinator verified that the
    /// producer's transaction holds this group's offsets partition): append the
    /// offsets as a transactional batch of the producer and keep them pending.
    /// Per-partition results in request order.
    pub fn txn_commit(
        &self,
        group_id: &str,
        producer: TxnProducer,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: &[(String, i32, CommittedOffset)],
    ) -> Vec<Option<GroupError>> {
        let all = |e: GroupError| vec![Some(e); offsets.len()];
        let now = self.now();
        let mut groups = match self.runtime.lock_ready(group_id) {
            Ok(groups) => groups,
            Err(e) => return all(e),
        };
        // A member's commit to a group that does not exist (the handler
        // answers ILLEGAL_GENERATION before v6).
        if generation >= 0 && !groups.contains_key(group_id) {
            return all(GroupError::GroupIdNotFound);
        }
        let group = match group_for_commit(&mut groups, group_id, generation, member_id, now) {
            Ok(group) => group,
            Err(e) => return all(e),
        };
        if let Err(e) = check_txn_committer(group, (generation, member_id, instance_id), offsets) {
            return all(e);
        }
        let (results, records) =
            offset_records(group_id, offsets, now, self.config.offset_metadata_max_bytes);
        let log_offset = match self.runtime.append_batch(
            group_id,
            &records,
            Some((producer.id, producer.epoch)),
        ) {
            Ok(Some(at)) => at,
            Ok(None) => return results,
            Err(e) => return all(fenced_or(e)),
        };
        for (i, (topic, partition, o)) in offsets.iter().enumerate() {
            if results[i].is_none() {
                let offset = CommittedOffset { commit_timestamp: now, ..o.clone() };
                let pending = PendingOffset { offset, log_offset };
                group.add_pending_offset(producer.id, (topic.clone(), *partition), pending);
            }
        }
        results
    }

    /// The marker of `producer_id`'s transaction was appended to
    /// `__consumer_offsets` partition `partition`: complete the pending
    /// offsets of every group of that partition (deferred while loading).
    pub fn on_transaction_completed(&self, partition: i32, producer_id: i64, commit: bool) {
        self.runtime.complete_transaction(partition, producer_id, commit);
    }

    /// Whether a transaction holds a pending offset of `group_id` for the
    /// partition (OffsetFetch `require_stable` answers UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending_txn_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let groups = self.runtime.lock_group(group_id);
        groups.get(group_id).is_some_and(|g| g.has_pending_offset(&(topic.to_string(), partition)))
    }
}

/// A fenced producer epoch is INVALID_PRODUCER_EPOCH, not a storage error.
fn fenced_or(e: GroupError) -> GroupError {
    match &e {
        GroupError::Storage(cause)
            if matches!(
                **cause,
                LogError::Producer(ProducerError::InvalidProducerEpoch { .. })
            ) =>
        {
            GroupError::InvalidProducerEpoch
        }
        _ => e,
    }
}

/// Whether a transactional commit for `group` may proceed (Kafka's
/// `validateOffsetCommit` with `isTransactional`).
///
/// A classic group takes a simple commit while it is empty, one naming no
/// member at all (older producers' `sendOffsetsToTransaction(groupId)`)
/// whatever its state, else a current member of the current generation;
/// unlike a plain commit, CompletingRebalance does not refuse it.
///
/// A consumer group (KIP-848) takes a commit naming no member while it has
/// none, and one naming nothing at all (no generation, member or instance:
/// `sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(groupId))`,
/// or a producer older than KIP-447) whatever its members, as Kafka's
/// `ConsumerGroup.validateOffsetCommit` does for a transactional commit;
/// else its member at an epoch that covers the partitions committed (its
/// current one, or an older one at which it held them: KIP-1251), which
/// the producer sends as the generation. A stale epoch is STALE_MEMBER_EPOCH
/// (ILLEGAL_GENERATION for a member of the classic protocol); the handler
/// answers ILLEGAL_GENERATION before v6, as Kafka does: the producer's
/// transaction then aborts as abortable.
fn check_txn_committer(
    group: &Group,
    (generation, member_id, instance_id): (i32, &str, Option<&str>),
    offsets: &[(String, i32, CommittedOffset)],
) -> Result<(), GroupError> {
    if let Some(cg) = &group.consumer {
        if generation < 0 && cg.members.is_empty() {
            return Ok(());
        }
        if generation == -1 && member_id.is_empty() && instance_id.is_none() {
            return Ok(());
        }
        let member = cg.members.get(member_id).ok_or(GroupError::UnknownMemberId)?;
        if !super::consumer_group_admin::epoch_covers(cg, member, generation, offsets) {
            if member.is_classic() {
                return Err(GroupError::IllegalGeneration);
            }
            return Err(GroupError::StaleMemberEpoch);
        }
        return Ok(());
    }
    if group.state() == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if generation < 0 && group.state() == GroupState::Empty {
        return Ok(());
    }
    if generation < 0 && member_id.is_empty() && instance_id.is_none() {
        return Ok(());
    }
    if group.fences(instance_id, member_id) {
        return Err(GroupError::FencedInstanceId);
    }
    if group.member(member_id).is_none() {
        return Err(GroupError::UnknownMemberId);
    }
    if generation != group.generation {
        return Err(GroupError::IllegalGeneration);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::membership::tests::coordinator;
    use crate::group::OFFSETS_TOPIC;
    use crate::log::control_record::EndTransactionMarker;
    use crate::log::TopicPartition;

    fn offset(offset: i64) -> Vec<(String, i32, CommittedOffset)> {
        let o = CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        };
        vec![("t".to_string(), 0, o)]
    }

    fn txn_commit(c: &GroupCoordinator, group: &str, pid: i64, epoch: i16, at: i64) {
        assert_eq!(
            c.txn_commit(group, TxnProducer { id: pid, epoch }, -1, "", None, &offset(at)),
            vec![None]
        );
    }

    fn fetched(c: &GroupCoordinator, group: &str) -> Option<i64> {
        let list = [("t".to_string(), 0)];
        let got = c.fetch_offsets(group, Some(&list)).expect("loaded");
        got[0].2.as_ref().map(|o| o.offset)
    }

    /// Append the marker to the group's offsets partition (as the marker
    /// writer does) and tell the coordinator.
    fn end_txn(c: &GroupCoordinator, group: &str, pid: i64, epoch: i16, commit: bool) {
        let partition = c.partition_for(group);
        let log = c.logs.get_log(&TopicPartition::new(OFFSETS_TOPIC, partition)).expect("log");
        let marker =
            if commit { EndTransactionMarker::commit(0) } else { EndTransactionMarker::abort(0) };
        log.write().append_end_txn_marker(pid, epoch, marker).expect("marker");
        c.on_transaction_completed(partition, pid, commit);
    }

    #[test]
    fn pending_offsets_are_invisible_until_the_commit_marker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        txn_commit(&c, "g", 7, 0, 42);
        assert_eq!(fetched(&c, "g"), None);
        assert!(c.has_pending_txn_offset("g", "t", 0));
        assert!(!c.has_pending_txn_offset("g", "t", 1));
        // Another producer's marker changes nothing.
        c.on_transaction_completed(c.partition_for("g"), 8, true);
        assert_eq!(fetched(&c, "g"), None);
        end_txn(&c, "g", 7, 0, true);
        assert_eq!(fetched(&c, "g"), Some(42));
        assert!(!c.has_pending_txn_offset("g", "t", 0));
    }

    #[test]
    fn an_abort_drops_the_pending_offsets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        assert_eq!(c.commit("g", -1, "", None, &offset(3)), vec![None]);
        txn_commit(&c, "g", 7, 0, 42);
        end_txn(&c, "g", 7, 0, false);
        assert_eq!(fetched(&c, "g"), Some(3));
        assert!(!c.has_pending_txn_offset("g", "t", 0));
    }

    #[test]
    fn a_plain_commit_written_later_wins_one_written_earlier_loses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        txn_commit(&c, "g", 7, 0, 42);
        assert_eq!(c.commit("g", -1, "", None, &offset(50)), vec![None]);
        end_txn(&c, "g", 7, 0, true);
        assert_eq!(fetched(&c, "g"), Some(50));

        assert_eq!(c.commit("g2", -1, "", None, &offset(50)), vec![None]);
        txn_commit(&c, "g2", 9, 0, 60);
        end_txn(&c, "g2", 9, 0, true);
        assert_eq!(fetched(&c, "g2"), Some(60));
    }

    #[test]
    fn a_fenced_producer_epoch_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        txn_commit(&c, "g", 7, 3, 42);
        end_txn(&c, "g", 7, 3, true);
        let refused = c.txn_commit("g", TxnProducer { id: 7, epoch: 2 }, -1, "", None, &offset(50));
        assert_eq!(refused, vec![Some(GroupError::InvalidProducerEpoch)]);
        assert!(!c.has_pending_txn_offset("g", "t", 0));
    }

    #[test]
    fn reload_applies_committed_drops_aborted_keeps_open_pending() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        assert_eq!(c.commit("committed", -1, "", None, &offset(1)), vec![None]);
        assert_eq!(c.commit("aborted", -1, "", None, &offset(1)), vec![None]);
        assert_eq!(c.commit("open", -1, "", None, &offset(1)), vec![None]);
        assert_eq!(c.commit("overtaken", -1, "", None, &offset(1)), vec![None]);
        txn_commit(&c, "committed", 1, 0, 10);
        txn_commit(&c, "aborted", 2, 0, 20);
        txn_commit(&c, "open", 3, 0, 30);
        txn_commit(&c, "overtaken", 4, 0, 40);
        assert_eq!(c.commit("overtaken", -1, "", None, &offset(45)), vec![None]);
        end_txn(&c, "committed", 1, 0, true);
        end_txn(&c, "aborted", 2, 0, false);
        end_txn(&c, "overtaken", 4, 0, true);

        c.load();
        assert_eq!(fetched(&c, "committed"), Some(10));
        assert_eq!(fetched(&c, "aborted"), Some(1));
        assert_eq!(fetched(&c, "open"), Some(1));
        assert_eq!(fetched(&c, "overtaken"), Some(45));
        assert!(c.has_pending_txn_offset("open", "t", 0));
        for g in ["committed", "aborted", "overtaken"] {
            assert!(!c.has_pending_txn_offset(g, "t", 0), "{g}");
        }
        // The open transaction still completes after the reload.
        end_txn(&c, "open", 3, 0, true);
        assert_eq!(fetched(&c, "open"), Some(30));
    }

    #[test]
    fn a_completion_during_the_load_is_applied_when_the_load_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = coordinator(dir.path());
        txn_commit(&c, "g", 7, 0, 42);
        let clock: crate::clock::SharedClock = crate::clock::MockClock::new(1_000_000);
        let loading =
            GroupCoordinator::new(c.config.clone(), std::sync::Arc::clone(&c.logs), clock);
        // The walk reads no marker: this completion arrives before it ends.
        loading.on_transaction_completed(loading.partition_for("g"), 7, true);
        assert!(!loading.is_loaded());
        loading.load();
        assert_eq!(fetched(&loading, "g"), Some(42));
        assert!(!loading.has_pending_txn_offset("g", "t", 0));
    }
}
