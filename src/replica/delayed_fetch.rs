//! Delayed fetches (Kafka's `DelayedFetch` in its purgatory, keyed by
//! partition): a long-polling fetch waits on the partitions it reads, and
//! only what changes one of them (an append, a transaction marker) wakes it.
//! One append no longer wakes every parked fetch of every partition to read
//! all of its partitions again.
//!
//! Invariants:
//! * A fetch registers before its first read, so a change that lands
//!   between a read and the wait is not lost: the wakeup is kept as a
//!   permit and the next wait returns at once (it costs at most one read
//!   more).
//! * The purgatory holds weak references: a finished fetch leaves a dead
//!   entry, removed when its partition is next changed or registered on, so
//!   an idle partition holds at most its live fetches and one dead entry
//!   per fetch since its last registration.
//! * [`DelayedFetchPurgatory::complete_all`] (topic deletion, shutdown)
//!   wakes every fetch.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::log::TopicPartition;

/// One parked fetch: what wakes it.
#[derive(Debug, Default)]
pub struct FetchWaiter {
    notify: Notify,
}

impl FetchWaiter {
    /// Wait until one of the fetch's partitions changes (or a change since
    /// the last wait is pending).
    pub async fn changed(&self) {
        self.notify.notified().await;
    }
}

/// The parked fetches by partition.
#[derive(Debug, Default)]
pub struct DelayedFetchPurgatory {
    watchers: Mutex<HashMap<TopicPartition, Vec<Weak<FetchWaiter>>>>,
}

impl DelayedFetchPurgatory {
    /// Park a fetch on `partitions`; it stays registered while the returned
    /// waiter lives.
    pub fn watch(&self, partitions: impl IntoIterator<Item = TopicPartition>) -> Arc<FetchWaiter> {
        let waiter = Arc::new(FetchWaiter::default());
        let mut watchers = self.watchers.lock();
        for tp in partitions {
            let list = watchers.entry(tp).or_default();
            list.retain(|w| w.strong_count() > 0);
            list.push(Arc::downgrade(&waiter));
        }
        waiter
    }

    /// `tp` changed: wake the fetches parked on it.
    pub fn complete(&self, tp: &TopicPartition) {
        let mut watchers = self.watchers.lock();
        let Some(list) = watchers.get_mut(tp) else { return };
        list.retain(|w| match w.upgrade() {
            Some(waiter) => {
                waiter.notify.notify_one();
                true
            }
            None => false,
        });
        if list.is_empty() {
            watchers.remove(tp);
        }
    }

    /// Wake every parked fetch (a topic deleted, the broker stopping).
    pub fn complete_all(&self) {
        let mut watchers = self.watchers.lock();
        for list in watchers.values() {
            for waiter in list.iter().filter_map(Weak::upgrade) {
                waiter.notify.notify_one();
            }
        }
        watchers.retain(|_, list| {
            list.retain(|w| w.strong_count() > 0);
            !list.is_empty()
        });
    }

    /// How many partitions have a fetch parked.
    #[cfg(test)]
    fn watched_partitions(&self) -> usize {
        self.watchers.lock().values().filter(|l| l.iter().any(|w| w.strong_count() > 0)).count()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    async fn woken(waiter: &FetchWaiter) -> bool {
        tokio::time::timeout(Duration::from_millis(50), waiter.changed()).await.is_ok()
    }

    #[tokio::test]
    async fn a_fetch_wakes_for_its_own_partitions_only() {
        let purgatory = DelayedFetchPurgatory::default();
        let on_0 = purgatory.watch([tp(0)]);
        let on_1_and_2 = purgatory.watch([tp(1), tp(2)]);
        purgatory.complete(&tp(2));
        assert!(woken(&on_1_and_2).await);
        assert!(!woken(&on_0).await, "an append to another partition wakes nothing here");
        purgatory.complete(&tp(0));
        assert!(woken(&on_0).await);
        assert!(!woken(&on_1_and_2).await, "one wakeup per change");
    }

    #[tokio::test]
    async fn a_change_before_the_wait_is_not_lost() {
        let purgatory = DelayedFetchPurgatory::default();
        let waiter = purgatory.watch([tp(0)]);
        purgatory.complete(&tp(0));
        assert!(woken(&waiter).await, "kept as a permit for the next wait");
    }

    #[tokio::test]
    async fn finished_fetches_leave_nothing_behind() {
        let purgatory = DelayedFetchPurgatory::default();
        for _ in 0..1000 {
            drop(purgatory.watch([tp(0), tp(1)]));
        }
        let live = purgatory.watch([tp(0)]);
        assert_eq!(
            purgatory.watchers.lock()[&tp(0)].len(),
            1,
            "dead entries pruned on registration"
        );
        assert_eq!(purgatory.watched_partitions(), 1);
        purgatory.complete(&tp(1));
        assert!(!purgatory.watchers.lock().contains_key(&tp(1)));
        purgatory.complete_all();
        assert!(woken(&live).await);
    }
}
