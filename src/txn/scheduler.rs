//! The broker's `txn-coordinator` thread: it loads `__transaction_state`
//! (completing the transactions found decided but not complete), then runs
//! the coordinator's timers until stopped:
//! * every `transaction.abort.timed.out.transaction.cleanup.interval.ms`:
//!   abort the transactions past their timeout, then retry the completions
//!   whose markers or Complete record failed;
//! * every `transaction.remove.expired.transaction.cleanup.interval.ms`:
//!   expire the transactional ids idle past `transactional.id.expiration.ms`.
//!
//! Due times are the coordinator's clock's; the thread waits on a condvar,
//! so [`TxnScheduler::shutdown`] wakes it at once. Shutdown lets the load,
//! or a timer's round in progress (an abort finishing its steps), end first:
//! it is called after the server drained and before the logs close.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::coordinator::TransactionCoordinator;

/// The running `txn-coordinator` thread.
#[derive(Debug)]
pub struct TxnScheduler {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

impl TxnScheduler {
    /// Start the thread: load, then the timers.
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn start(coordinator: Arc<TransactionCoordinator>) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("txn-coordinator".into())
            .spawn(move || run(&coordinator, &flag))?;
        Ok(Self { stop, thread })
    }

    /// Stop the timers and join the thread (after its load or round ends).
    pub fn shutdown(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if self.thread.join().is_err() {
            tracing::error!("the txn-coordinator thread panicked");
        }
    }
}

fn run(coordinator: &TransactionCoordinator, stop: &(Mutex<bool>, Condvar)) {
    coordinator.load();
    let config = coordinator.state_manager().config().clone();
    let abort_every = config.abort_timed_out_transactions_interval_ms.max(1);
    let expire_every = config.remove_expired_transactional_ids_interval_ms.max(1);
    let now = coordinator.now();
    let (mut next_abort, mut next_expire) = (now + abort_every, now + expire_every);
    loop {
        {
            let mut stopped = stop.0.lock();
            if *stopped {
                return;
            }
            let wait = next_abort.min(next_expire).saturating_sub(coordinator.now()).max(0);
            // Bounded, so a clock that jumps is seen within a second.
            let wait = Duration::from_millis(wait.min(1_000) as u64);
            stop.1.wait_for(&mut stopped, wait);
            if *stopped {
                return;
            }
        }
        let now = coordinator.now();
        if now >= next_abort {
            let aborted = coordinator.abort_timed_out_transactions();
            let completed = coordinator.retry_pending_completions();
            if aborted + completed > 0 {
                tracing::info!(aborted, completed, "transaction timers");
            }
            next_abort = now + abort_every;
        }
        if now >= next_expire {
            let expired = coordinator.remove_expired_transactional_ids();
            if expired > 0 {
                tracing::info!(expired, "expired transactional ids");
            }
            next_expire = now + expire_every;
        }
    }
}
