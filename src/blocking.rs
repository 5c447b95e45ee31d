//! Waiting on a lock or a disk from an async worker without stalling it.
//!
//! The broker's requests run on a few tokio workers (one per core). A task
//! that waits there on a partition's lock while another thread holds it
//! across an fsync, or that fsyncs itself, stops every other connection
//! scheduled on that worker. These helpers take the lock at once when it is
//! free (the common case, at no cost) and otherwise wait, or run the work,
//! in `block_in_place`, which first hands the worker's other tasks to
//! another thread.
//!
//! Invariant: outside a multi-threaded tokio runtime (the cleaner's and
//! scheduler's threads, library tests) they simply run the work.

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Run `f`, which may block, so that it does not stall the async worker
/// calling it.
pub fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// `lock.write()`, waiting off the worker when the lock is held.
pub fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.try_write().unwrap_or_else(|| off_worker(|| lock.write()))
}

/// `lock.read()`, waiting off the worker when a writer holds the lock.
pub fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.try_read().unwrap_or_else(|| off_worker(|| lock.read()))
}

/// `lock.lock()`, waiting off the worker when the mutex is held.
pub fn lock<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    lock.try_lock().unwrap_or_else(|| off_worker(|| lock.lock()))
}

/// At most `num.io.threads` requests inflating records at once (Kafka's
/// request handler pool, whose threads the key counts): inflating
/// compressed records takes up to 64 × `max.message.bytes` each, so their
/// number, not the connections', bounds that memory. A request waits for
/// its place asynchronously, so the waiting ones hold no thread.
#[derive(Debug)]
pub struct IoThreads {
    places: tokio::sync::Semaphore,
}

impl IoThreads {
    pub fn new(threads: usize) -> Self {
        Self { places: tokio::sync::Semaphore::new(threads.max(1)) }
    }

    /// A place, held until the permit drops.
    pub async fn place(&self) -> tokio::sync::SemaphorePermit<'_> {
        // Never closed: acquiring cannot fail.
        self.places.acquire().await.expect("the io threads' semaphore is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn outside_a_runtime_the_work_just_runs() {
        assert_eq!(off_worker(|| 7), 7);
        let l = RwLock::new(1);
        *write(&l) += 1;
        assert_eq!(*read(&l), 2);
    }

    #[test]
    fn a_held_lock_does_not_stall_the_only_worker() {
        // One worker: a task waiting on the lock there would stop the task
        // that releases it, and this test would hang.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let shared = Arc::new(Mutex::new(0));
        let held = shared.lock();
        let waiter = {
            let shared = Arc::clone(&shared);
            rt.spawn(async move {
                *lock(&shared) += 1;
            })
        };
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move { tx.send(()).unwrap() });
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("another task ran while the first waited for the lock");
        drop(held);
        rt.block_on(waiter).unwrap();
        assert_eq!(*shared.lock(), 1);
    }

    #[test]
    fn io_threads_give_out_as_many_places_as_threads() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let pool = IoThreads::new(2);
        rt.block_on(async {
            let first = pool.place().await;
            let _second = pool.place().await;
            // A third waits until a place is given back.
            let third = tokio::time::timeout(std::time::Duration::ZERO, pool.place());
            assert!(third.await.is_err(), "a third place while two are held");
            drop(first);
            let _third = pool.place().await;
        });
    }
}
