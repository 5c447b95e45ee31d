//! Which partitions this broker leads, in a cluster (docs/design/multi-broker.md,
//! 5.1 and 5.4): the broker's metadata publisher sets, from each image it
//! applies, the partitions whose state names this broker leader (with the
//! leader epoch) and every partition the cluster has; Produce, Fetch and
//! the other partition requests ask [`Leadership::leads`] before touching a
//! log.
//!
//! Invariants:
//! * A partition counts as led only while the broker's session timer runs
//!   (`may_lead`): once etcd may have expired the session and another
//!   broker been given the partition, this one answers
//!   NOT_LEADER_OR_FOLLOWER instead of serving it.
//! * A follower's state holds only what its current incarnation fetched
//!   (KIP-903's rule, by the broker epoch of its registration): when the
//!   image shows it registered anew, or not at all, what it fetched before
//!   is forgotten, so a restarted broker is counted in a high watermark or
//!   taken back into an ISR only after it fetched again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::log::TopicPartition;

/// What the cluster says of one partition on this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leading {
    Yes,
    /// The cluster has it; another broker leads it, or none now.
    NotLeader,
    /// The cluster has no such partition.
    Unknown,
}

/// A partition led here, as the image has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedPartition {
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The effective `min.insync.replicas`: the topic's, at most the
    /// replication factor (Kafka's rule since KAFKA-15583).
    pub min_isr: usize,
    /// Being reassigned: `replicas` are the target and the ones leaving,
    /// of which these are the target's new ones.
    pub reassignment: Option<Vec<i32>>,
    /// Led since an unclean election and not yet reported recovered
    /// (KIP-704's RECOVERING): the ISR stays this broker alone.
    pub recovering: bool,
}

impl LedPartition {
    /// Kafka's under-replication: an ISR smaller than the replicas, not
    /// counting replicas a reassignment is still adding.
    pub fn is_under_replicated(&self) -> bool {
        let adding = self.reassignment.as_ref().map_or(0, Vec::len);
        self.isr.len() < self.replicas.len() - adding
    }
}

/// The partitions led and known, as of one applied image.
#[derive(Debug, Clone, Default)]
pub struct LeadershipView {
    /// Led here.
    pub led: HashMap<TopicPartition, LedPartition>,
    pub known: HashSet<TopicPartition>,
    /// Each partition followed here, with its leader's epoch (what a
    /// consumer reading from this follower must name, KIP-392).
    pub following: HashMap<TopicPartition, i32>,
    /// Each registered broker's epoch (its registration's).
    pub broker_epochs: HashMap<i32, i64>,
}

/// What a leader knows of one follower of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// Its log end, as its last fetch gave it (the fetch offset).
    pub log_end_offset: i64,
    /// When its fetch last reached the leader's log end (ms).
    pub last_caught_up_ms: i64,
    /// The broker epoch of the incarnation that fetched (-1: not registered).
    pub broker_epoch: i64,
}

/// A leader epoch and, at it, each follower's state by replica id.
type EpochFollowers = (i32, HashMap<i32, FollowerState>);

pub struct Leadership {
    node_id: i32,
    view: RwLock<Arc<LeadershipView>>,
    /// Per led partition, what each follower's fetches said; reset when
    /// the leader epoch changes.
    followers: parking_lot::Mutex<HashMap<TopicPartition, EpochFollowers>>,
    /// Per led partition, the ISR asked of the controller and not yet in
    /// the image, with the leader epoch it was asked at (Kafka's pending
    /// ISR state): the high watermark waits for its members too.
    pending_isr: parking_lot::Mutex<HashMap<TopicPartition, (i32, Vec<i32>)>>,
    may_lead: Box<dyn Fn() -> bool + Send + Sync>,
    /// ISR shrinks and expansions this broker wrote as leader.
    isr_shrinks: std::sync::atomic::AtomicU64,
    isr_expands: std::sync::atomic::AtomicU64,
    failed_isr_updates: std::sync::atomic::AtomicU64,
    /// The followed partitions' lags, which the fetchers keep.
    fetcher_lags: Arc<super::fetcher_stats::FetcherLags>,
    /// The fetcher threads' requests, bytes and deaths.
    fetcher_stats: Arc<super::fetcher_stats::FetcherStats>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("node_id", &self.node_id)
            .field("led", &self.view.read().led.len())
            .finish()
    }
}

impl Leadership {
    /// Nothing led until the first [`Self::publish`]; `may_lead` is the
    /// session's timer.
    pub fn new(node_id: i32, may_lead: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            node_id,
            view: RwLock::default(),
            followers: parking_lot::Mutex::default(),
            pending_isr: parking_lot::Mutex::default(),
            may_lead: Box::new(may_lead),
            isr_shrinks: Default::default(),
            isr_expands: Default::default(),
            failed_isr_updates: Default::default(),
            fetcher_lags: Arc::default(),
            fetcher_stats: Arc::default(),
        }
    }

    /// An ISR change from `from` to `to` was written (counted as a shrink
    /// when a member left, an expansion when one joined, or both).
    pub fn note_isr_change(&self, from: &[i32], to: &[i32]) {
        use std::sync::atomic::Ordering::Relaxed;
        if from.iter().any(|m| !to.contains(m)) {
            self.isr_shrinks.fetch_add(1, Relaxed);
        }
        if to.iter().any(|m| !from.contains(m)) {
            self.isr_expands.fetch_add(1, Relaxed);
        }
    }

    /// The followed partitions' lags, for the fetchers to keep.
    pub fn fetcher_lags(&self) -> &Arc<super::fetcher_stats::FetcherLags> {
        &self.fetcher_lags
    }

    /// The fetcher threads' counts, for the fetchers to keep.
    pub fn fetcher_stats(&self) -> &Arc<super::fetcher_stats::FetcherStats> {
        &self.fetcher_stats
    }

    /// An ISR change asked for was not made (Kafka's FailedIsrUpdatesPerSec).
    pub fn note_isr_update_failed(&self) {
        self.failed_isr_updates.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// (ISR shrinks, ISR expansions, failed ISR updates) so far.
    pub fn isr_changes(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let failed = self.failed_isr_updates.load(Relaxed);
        (self.isr_shrinks.load(Relaxed), self.isr_expands.load(Relaxed), failed)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// `tp` as led here, while this broker may lead.
    pub fn led(&self, tp: &TopicPartition) -> Option<LedPartition> {
        let led = self.view.read().led.get(tp).cloned()?;
        (self.may_lead)().then_some(led)
    }

    /// The broker epoch the image gives broker `id` now (-1: not registered).
    pub fn broker_epoch(&self, id: i32) -> i64 {
        self.view.read().broker_epochs.get(&id).copied().unwrap_or(-1)
    }

    /// A fetch of `tp` from replica `replica` at `fetch_offset`, sent by
    /// its incarnation of `broker_epoch`, the leader's log end being
    /// `leader_end`: its follower state. `false` when `replica` is not a
    /// follower of a partition led here. A fetch of an incarnation the
    /// image no longer has (one parked since before its broker restarted)
    /// changes nothing.
    pub fn record_fetch(
        &self,
        tp: &TopicPartition,
        (replica, broker_epoch): (i32, i64),
        fetch_offset: i64,
        leader_end: i64,
        now_ms: i64,
    ) -> bool {
        let Some(led) = self.led(tp) else { return false };
        if replica == self.node_id || !led.replicas.contains(&replica) {
            return false;
        }
        if broker_epoch != self.broker_epoch(replica) {
            return true;
        }
        let mut followers = self.followers.lock();
        let entry =
            followers.entry(tp.clone()).or_insert_with(|| (led.leader_epoch, HashMap::new()));
        if entry.0 != led.leader_epoch {
            *entry = (led.leader_epoch, HashMap::new());
        }
        let fresh =
            FollowerState { log_end_offset: fetch_offset, last_caught_up_ms: now_ms, broker_epoch };
        let state = entry.1.entry(replica).or_insert(fresh);
        if state.broker_epoch != broker_epoch {
            // An earlier incarnation's, left by a publish racing this fetch.
            *state = fresh;
        }
        state.log_end_offset = fetch_offset;
        if fetch_offset >= leader_end {
            state.last_caught_up_ms = now_ms;
        }
        true
    }

    /// What the followers of `tp` last reported.
    pub fn followers(&self, tp: &TopicPartition) -> HashMap<i32, FollowerState> {
        self.followers.lock().get(tp).map(|(_, f)| f.clone()).unwrap_or_default()
    }

    /// The ISR `tp` asked for at `leader_epoch` is pending: until
    /// [`Self::clear_pending_isr`], the high watermark counts its members
    /// as well as the image's ISR. The caller holds the log's write lock
    /// (under which the high watermark moves) while it sets it and checks
    /// that the members it adds have reached the high watermark.
    pub fn set_pending_isr(&self, tp: &TopicPartition, leader_epoch: i32, isr: Vec<i32>) {
        self.pending_isr.lock().insert(tp.clone(), (leader_epoch, isr));
    }

    /// The ISR asked for `tp` was made (the image shows it) or refused.
    pub fn clear_pending_isr(&self, tp: &TopicPartition) {
        self.pending_isr.lock().remove(tp);
    }

    /// The high watermark `tp` may have, its own committed end being
    /// `local_end`: the least log end over its maximal ISR, the image's
    /// ISR and the members of an ISR asked for and not yet in the image (a
    /// member not heard from counts as nothing yet). Counting a member
    /// being added from the moment it is asked for is what makes the
    /// controller's ISR safe to elect from: once the controller writes the
    /// expansion, every record acknowledged is on the new member too
    /// (Kafka's maximal ISR). `None` while the image's ISR is below the
    /// effective min ISR (the high watermark then stays, as on Kafka) or
    /// when not led.
    pub fn high_watermark_candidate(&self, tp: &TopicPartition, local_end: i64) -> Option<i64> {
        let led = self.led(tp)?;
        if led.isr.len() < led.min_isr {
            return None;
        }
        let mut members = led.isr.clone();
        if let Some((epoch, pending)) = self.pending_isr.lock().get(tp) {
            if *epoch == led.leader_epoch {
                members.extend(pending.iter().filter(|m| !led.isr.contains(m)));
            }
        }
        let followers = self.followers.lock();
        let states = followers.get(tp).filter(|(e, _)| *e == led.leader_epoch).map(|(_, f)| f);
        let mut hw = local_end;
        for member in members.iter().filter(|m| **m != self.node_id) {
            let end = states.and_then(|f| f.get(member)).map_or(0, |s| s.log_end_offset);
            hw = hw.min(end);
        }
        Some(hw)
    }

    /// Install the view of a newer image, forgetting the follower states
    /// of brokers that registered anew or left (module doc).
    pub fn publish(&self, view: LeadershipView) {
        let view = Arc::new(view);
        *self.view.write() = Arc::clone(&view);
        let mut forgotten: HashMap<i32, usize> = HashMap::new();
        for (_, states) in self.followers.lock().values_mut() {
            states.retain(|id, s| {
                let same = view.broker_epochs.get(id).copied().unwrap_or(-1) == s.broker_epoch;
                if !same {
                    *forgotten.entry(*id).or_default() += 1;
                }
                same
            });
        }
        for (broker, partitions) in forgotten {
            tracing::info!(
                broker,
                partitions,
                "a follower registered anew or left: what it fetched before no longer counts"
            );
        }
    }

    /// The leader epoch of `tp` when this broker follows it (a replica
    /// with a live leader elsewhere).
    pub fn follows(&self, tp: &TopicPartition) -> Option<i32> {
        self.view.read().following.get(tp).copied()
    }

    pub fn view(&self) -> Arc<LeadershipView> {
        Arc::clone(&self.view.read())
    }

    pub fn leads(&self, tp: &TopicPartition) -> Leading {
        let view = self.view.read();
        if view.led.contains_key(tp) && (self.may_lead)() {
            Leading::Yes
        } else if view.known.contains(tp) {
            Leading::NotLeader
        } else {
            Leading::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(epochs: &[(i32, i64)]) -> LeadershipView {
        let tp = TopicPartition::new("t", 0);
        let led = LedPartition {
            leader_epoch: 3,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            min_isr: 1,
            reassignment: None,
            recovering: false,
        };
        LeadershipView {
            led: HashMap::from([(tp.clone(), led)]),
            known: HashSet::from([tp]),
            following: HashMap::new(),
            broker_epochs: epochs.iter().copied().collect(),
        }
    }

    /// KIP-903's effect: a follower that registered anew (or left) is not
    /// counted on what its earlier incarnation fetched.
    #[test]
    fn a_reregistered_follower_starts_from_nothing() {
        let tp = TopicPartition::new("t", 0);
        let l = Leadership::new(1, || true);
        l.publish(view(&[(1, 5), (2, 10), (3, 12)]));
        assert!(l.record_fetch(&tp, (2, 10), 100, 100, 1_000));
        assert!(l.record_fetch(&tp, (3, 12), 100, 100, 1_000));
        assert_eq!(l.high_watermark_candidate(&tp, 100), Some(100));
        // Broker 2 restarted (a new epoch); broker 3 is gone.
        l.publish(view(&[(1, 5), (2, 14)]));
        assert!(l.followers(&tp).is_empty(), "{:?}", l.followers(&tp));
        assert_eq!(l.high_watermark_candidate(&tp, 100), Some(0), "no member counted unheard");
        // A fetch parked since before the restart changes nothing.
        assert!(l.record_fetch(&tp, (2, 10), 100, 100, 2_000));
        assert!(l.followers(&tp).is_empty());
        assert!(l.record_fetch(&tp, (2, 14), 40, 100, 2_000));
        let states = l.followers(&tp);
        assert_eq!(states[&2].log_end_offset, 40);
        assert_eq!(states[&2].broker_epoch, 14);
        // The same incarnation keeps its state through later images.
        l.publish(view(&[(1, 5), (2, 14), (3, 15)]));
        assert_eq!(l.followers(&tp)[&2].log_end_offset, 40);
    }

    /// Kafka's maximal ISR: a member being added counts toward the high
    /// watermark from the moment it is asked for, so the controller may
    /// elect it as soon as it writes the change.
    #[test]
    fn a_pending_member_holds_the_high_watermark_back() {
        let tp = TopicPartition::new("t", 0);
        let l = Leadership::new(1, || true);
        let mut v = view(&[(1, 5), (2, 10), (3, 12)]);
        v.led.get_mut(&tp).unwrap().isr = vec![1, 2];
        l.publish(v);
        assert!(l.record_fetch(&tp, (2, 10), 100, 100, 1_000));
        assert!(l.record_fetch(&tp, (3, 12), 90, 100, 1_000));
        assert_eq!(l.high_watermark_candidate(&tp, 100), Some(100), "3 is not in the ISR");
        l.set_pending_isr(&tp, 3, vec![1, 2, 3]);
        assert_eq!(l.high_watermark_candidate(&tp, 100), Some(90), "3 is being added");
        // A pending ISR of another leader epoch does not count.
        l.set_pending_isr(&tp, 2, vec![1, 2, 3]);
        assert_eq!(l.high_watermark_candidate(&tp, 100), Some(100));
        l.set_pending_isr(&tp, 3, vec![1, 2, 3]);
        l.clear_pending_isr(&tp);
        assert_eq!(l.high_watermark_candidate(&tp, 100), Some(100), "refused: not counted");
    }
}
