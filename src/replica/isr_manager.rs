//! The leader's ISR changes (docs/design/multi-broker.md, 5.1): every
//! quarter second, for each partition led here,
//! * **expand**: a replica outside the ISR whose broker is eligible and
//!   whose fetches reached the high watermark, and the start of the current
//!   leader epoch, joins it. From the moment it is asked for, the high
//!   watermark waits for the new member too (Kafka's maximal ISR,
//!   [`Leadership::set_pending_isr`]): the controller may elect it as soon
//!   as it writes the change, so it must hold every record acknowledged
//!   after that;
//! * **shrink**: an ISR follower not caught up with the leader's log end
//!   for `replica.lag.time.max.ms` leaves it (a follower not heard from
//!   since this broker began leading counts from then);
//! * **recovered**: a partition led since an unclean election (KIP-704's
//!   RECOVERING) is reported RECOVERED, its ISR this broker alone; only
//!   then may followers join. Nothing is rebuilt first: the log as it is
//!   on this replica is the partition's from now on, as on Kafka.
//!
//! A round's changes go together through an [`IsrWriter`] (in a cluster,
//! Kafka's AlterPartition to the controller, which checks and writes them),
//! one round in flight at a time, so one change per partition; a change
//! takes effect when the image shows it. One refused (the controller made
//! another change meanwhile, or knows a member to be ineligible) is decided
//! again at the next round from the newer image.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::leadership::{Leadership, LedPartition};
use crate::cluster::coordination::BoxFuture;
use crate::log::{LogManager, TopicPartition};

/// One ISR a leader asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub tp: TopicPartition,
    /// The epoch `tp` is led here at.
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// The broker epoch each follower fetched with (KIP-903), for those
    /// heard from since this broker began leading at the epoch; the
    /// controller refuses a member whose registration is newer.
    pub member_epochs: HashMap<i32, i64>,
    /// Kafka's leader recovery state asked for: always RECOVERED (0).
    pub leader_recovery_state: i8,
}

/// How a leader's ISR changes reach the cluster.
pub trait IsrWriter: Send + Sync {
    /// Ask for `changes`; whether each was made (in order), once this
    /// broker's image shows it.
    fn alter_isr(&self, changes: Vec<IsrChange>) -> BoxFuture<'_, Vec<bool>>;
    /// Whether `node` may join an ISR (registered and RUNNING).
    fn is_eligible(&self, node: i32) -> bool;
}

/// Kafka's `LeaderRecoveryState.RECOVERED`.
const RECOVERED: i8 = 0;

/// How often the ISR of each led partition is looked at.
const ROUND: Duration = Duration::from_millis(250);

pub struct IsrManager {
    leadership: Arc<Leadership>,
    logs: Arc<LogManager>,
    writer: Arc<dyn IsrWriter>,
    lag_time_max: Duration,
    /// When this broker began leading each partition at its epoch (ms).
    since: HashMap<TopicPartition, (i32, i64)>,
}

impl IsrManager {
    pub fn new(
        leadership: Arc<Leadership>,
        logs: Arc<LogManager>,
        writer: Arc<dyn IsrWriter>,
        lag_time_max: Duration,
    ) -> Self {
        Self { leadership, logs, writer, lag_time_max, since: HashMap::new() }
    }

    /// Look at every led partition each round, for ever.
    pub async fn run(mut self) {
        loop {
            tokio::time::sleep(ROUND).await;
            let view = self.leadership.view();
            self.since.retain(|tp, _| view.led.contains_key(tp));
            let mut changes = Vec::new();
            for (tp, led) in &view.led {
                let wanted = self.wanted_isr(tp, led);
                if let Some(isr) = wanted.filter(|isr| self.claim_additions(tp, led, isr)) {
                    let followers = self.leadership.followers(tp);
                    let member_epochs = followers.iter().map(|(id, f)| (*id, f.broker_epoch));
                    changes.push(IsrChange {
                        tp: tp.clone(),
                        leader_epoch: led.leader_epoch,
                        isr,
                        member_epochs: member_epochs.collect(),
                        leader_recovery_state: RECOVERED,
                    });
                }
            }
            if changes.is_empty() {
                continue;
            }
            let made = self.writer.alter_isr(changes.clone()).await;
            // Made (the image shows it now) or refused: no longer pending.
            for change in &changes {
                self.leadership.clear_pending_isr(&change.tp);
            }
            for (change, made) in changes.iter().zip(made) {
                if !made {
                    self.leadership.note_isr_update_failed();
                    continue;
                }
                let Some(led) = view.led.get(&change.tp) else { continue };
                self.leadership.note_isr_change(&led.isr, &change.isr);
                tracing::info!(partition = %change.tp, from = ?led.isr, to = ?change.isr, "ISR changed");
            }
        }
    }

    /// Before asking for `isr`: the members it adds to `led`'s ISR count
    /// toward the high watermark from now on, and must still have reached
    /// it. Both under the log's write lock, under which the high watermark
    /// moves, so no record is acknowledged between the check and the
    /// pending ISR without them. `false` (nothing pending) when one fell
    /// behind meanwhile: asked again at a later round.
    fn claim_additions(&self, tp: &TopicPartition, led: &LedPartition, isr: &[i32]) -> bool {
        let added: Vec<i32> = isr.iter().copied().filter(|m| !led.isr.contains(m)).collect();
        if added.is_empty() {
            // A shrink only: the image's larger ISR holds until it changes.
            return true;
        }
        let Some(log) = self.logs.get_log(tp) else { return false };
        let log = crate::blocking::write(&log);
        self.leadership.set_pending_isr(tp, led.leader_epoch, isr.to_vec());
        let hw = log.high_watermark();
        let followers = self.leadership.followers(tp);
        let caught_up =
            added.iter().all(|m| followers.get(m).is_some_and(|f| f.log_end_offset >= hw));
        if !caught_up {
            self.leadership.clear_pending_isr(tp);
        }
        caught_up
    }

    /// The ISR `tp` should have now, if not the one it has (or if it is
    /// still to be reported recovered).
    fn wanted_isr(&mut self, tp: &TopicPartition, led: &LedPartition) -> Option<Vec<i32>> {
        if led.recovering {
            return Some(vec![self.leadership.node_id()]);
        }
        let now = self.logs.clock().now_ms();
        let since = match self.since.get(tp) {
            Some((epoch, at)) if *epoch == led.leader_epoch => *at,
            _ => {
                self.since.insert(tp.clone(), (led.leader_epoch, now));
                now
            }
        };
        let log = self.logs.get_log(tp)?;
        let (hw, epoch_start) = {
            let log = log.read();
            // The current epoch's start: where its first batch is, or the
            // log end while it has none.
            let entry = log
                .leader_epoch_cache()
                .entries()
                .iter()
                .find(|e| e.epoch == led.leader_epoch)
                .copied();
            (log.high_watermark(), entry.map_or(log.log_end_offset(), |e| e.start_offset))
        };
        let followers = self.leadership.followers(tp);
        let me = self.leadership.node_id();
        let lag_ms = self.lag_time_max.as_millis() as i64;
        let mut isr: Vec<i32> = led
            .isr
            .iter()
            .copied()
            .filter(|m| {
                *m == me || followers.get(m).map_or(since, |f| f.last_caught_up_ms) > now - lag_ms
            })
            .collect();
        for r in &led.replicas {
            let caught_up = followers
                .get(r)
                .is_some_and(|f| f.log_end_offset >= hw && f.log_end_offset >= epoch_start);
            if !isr.contains(r) && caught_up && self.writer.is_eligible(*r) {
                isr.push(*r);
            }
        }
        // In assignment order, as Kafka lists it.
        isr.sort_by_key(|m| led.replicas.iter().position(|r| r == m));
        let mut current = led.isr.clone();
        current.sort_by_key(|m| led.replicas.iter().position(|r| r == m));
        (isr != current && !isr.is_empty()).then_some(isr)
    }
}
