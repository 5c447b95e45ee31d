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

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

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

/// At most `num.io.threads` pieces of heavy work at once (Kafka's request
/// handler pool, whose threads the key counts): inflating compressed
/// records takes up to 64 × `max.message.bytes` each, so their number, not
/// the connections', bounds that memory. The others wait, off the worker,
/// for a place.
#[derive(Debug)]
pub struct IoThreads {
    free: Mutex<usize>,
    freed: Condvar,
}

impl IoThreads {
    pub fn new(threads: usize) -> Self {
        Self { free: Mutex::new(threads.max(1)), freed: Condvar::new() }
    }

    /// Run `f` once a place is free, off the async worker.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        off_worker(|| {
            let mut free = self.free.lock();
            self.freed.wait_while(&mut free, |n| *n == 0);
            *free -= 1;
            drop(free);
            let _place = Place(self);
            f()
        })
    }
}

/// A place of [`IoThreads`], given back when dropped (a panic included).
struct Place<'a>(&'a IoThreads);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.freed.notify_one();
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
    fn io_threads_bound_the_work_running_at_once() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let pool = Arc::new(IoThreads::new(2));
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (entered, wait) = (Arc::new(std::sync::Barrier::new(2)), Arc::new(RwLock::new(())));
        let signalled = Arc::new(AtomicBool::new(false));
        let hold = wait.write();
        let workers: Vec<_> = (0..5)
            .map(|_| {
                let (pool, running, most) =
                    (Arc::clone(&pool), Arc::clone(&running), Arc::clone(&most));
                let (entered, wait) = (Arc::clone(&entered), Arc::clone(&wait));
                let signalled = Arc::clone(&signalled);
                std::thread::spawn(move || {
                    pool.run(|| {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        if now == 2 && !signalled.swap(true, Ordering::SeqCst) {
                            // Both places taken: tell the test, once.
                            entered.wait();
                        }
                        drop(wait.read());
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                })
            })
            .collect();
        entered.wait();
        assert_eq!(running.load(Ordering::SeqCst), 2, "two places, two running");
        drop(hold);
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}
