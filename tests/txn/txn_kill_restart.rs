//! A stream of transactions (commits and aborts mixed, each over three
//! partitions plus a transactional offset) from a wire producer, while the
//! broker is SIGKILLed at random moments and restarted on the same data dir
//! and port, several times. The producer behaves as Kafka's: a transaction
//! whose EndTxn was sent is retried with the same outcome after the restart
//! (the outcome may already be decided), one cut short before its EndTxn is
//! aborted, and the producer then re-initializes (epoch bump). After each
//! restart, read_committed readers see exactly the records of the committed
//! transactions, each once, and nothing of an aborted one; every
//! transaction has at most one marker per partition; the group's offset is
//! the last committed transaction's.

use crate::broker;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::txn::{
    end_offset, fetch_offset, read_partition, try_connect_loaded, TxnProducer, INVALID_TXN_STATE,
    NONE,
};
use crate::broker::{create_topic, now_ms, TestBroker, Wire};

const TOPIC: &str = "stream";
const PARTITIONS: i32 = 3;
const GROUP: &str = "stream-app";
const ID: &str = "stream-producer";
const KILLS: usize = 8;

/// A small deterministic generator (the seed is printed, so a failure can be replayed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Where the producer is in transaction `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Nothing of transaction `n` sent yet.
    Idle,
    /// Partitions added or records sent; no EndTxn yet.
    Begun,
    /// EndTxn(commit?) sent, its answer not read.
    Ending(bool),
}

struct Stream {
    producer: TxnProducer,
    /// The transaction being run.
    n: u64,
    step: Step,
    committed: BTreeSet<u64>,
    aborted: BTreeSet<u64>,
}

/// Whether transaction `n` commits (about two in three do).
fn commits(n: u64) -> bool {
    n % 3 != 1
}

impl Stream {
    /// Run transaction `self.n` to its end; `None` if the broker died on the way.
    fn run_one(&mut self, w: &mut Wire) -> Option<()> {
        let n = self.n;
        let p = &mut self.producer;
        self.step = Step::Begun;
        let tps: Vec<(&str, i32)> = (0..PARTITIONS).map(|i| (TOPIC, i)).collect();
        assert_eq!(p.add(w, &tps)?, vec![NONE; tps.len()], "txn {n}");
        assert_eq!(p.add_offsets(w, GROUP)?, NONE, "txn {n}");
        for (t, i) in &tps {
            let records = vec![(format!("k{}", n % 10), format!("{n}-{i}"))];
            assert_eq!(p.produce(w, (t, *i), now_ms(), &records)?, NONE, "txn {n}");
        }
        assert_eq!(p.commit_offset(w, GROUP, (TOPIC, 0), n as i64)?, NONE, "txn {n}");
        let commit = commits(n);
        self.step = Step::Ending(commit);
        p.send_end(w, commit)?;
        let (_, body) = w.recv_frame().ok()?;
        let code = Wire::decode::<kafka_protocol::messages::EndTxnRequest>(3, body).error_code;
        assert_eq!(code, NONE, "EndTxn of txn {n}");
        self.finish(commit);
        Some(())
    }

    fn finish(&mut self, commit: bool) {
        if commit {
            self.committed.insert(self.n);
        } else {
            self.aborted.insert(self.n);
        }
        self.n += 1;
        self.step = Step::Idle;
    }

    /// After a restart: settle the transaction the kill interrupted as a
    /// Kafka producer would, then re-initialize. `None` if the broker died again.
    fn recover(&mut self, w: &mut Wire) -> Option<()> {
        match self.step {
            Step::Idle => {}
            Step::Ending(commit) => {
                // Decided or not, the retry must end it the same way.
                assert_eq!(self.producer.end_retrying(w, commit)?, NONE, "retry txn {}", self.n);
                self.finish(commit);
            }
            Step::Begun => {
                // Abortable: the producer aborts. INVALID_TXN_STATE means no
                // partition was added before the kill, so nothing was written.
                let code = self.producer.end_retrying(w, false)?;
                assert!(code == NONE || code == INVALID_TXN_STATE, "abort txn {}: {code}", self.n);
                self.finish(false);
            }
        }
        self.producer = TxnProducer::init(w, ID, 60_000)?;
        Some(())
    }

    /// One marker per transaction on the partition: a transaction's records
    /// come after the marker of the one before and are followed by their
    /// own, so between the records of transactions `a` and `b` there are at
    /// least one and at most `b - a` markers (one each for `a` and for every
    /// transaction in between that wrote nothing here).
    fn check_markers(&self, partition: i32, all: &broker::txn::PartitionRead) {
        let mut events: Vec<(i64, Option<u64>)> = all.markers.iter().map(|m| (m.0, None)).collect();
        for (offset, _, v) in &all.records {
            let n: u64 = v.split('-').next().and_then(|n| n.parse().ok()).expect("value");
            events.push((*offset, Some(n)));
        }
        events.sort_unstable();
        let (mut last, mut markers) = (None::<u64>, 0u64);
        for (offset, txn) in events.into_iter().chain([(i64::MAX, Some(self.n))]) {
            let Some(n) = txn else {
                markers += 1;
                continue;
            };
            if let Some(a) = last {
                if n != a {
                    assert!(
                        (1..=n - a).contains(&markers),
                        "partition {partition}: {markers} markers between txn {a} and txn {n} (offset {offset})"
                    );
                }
            } else {
                assert!(markers <= n, "partition {partition}: {markers} markers before txn {n}");
            }
            if last != Some(n) {
                markers = 0;
            }
            last = Some(n);
        }
    }

    /// The committed and aborted transactions are exactly what the readers see.
    fn check(&self, w: &mut Wire) {
        for i in 0..PARTITIONS {
            assert_eq!(end_offset(w, TOPIC, i, true), end_offset(w, TOPIC, i, false), "{i}: open");
            let all = read_partition(w, TOPIC, i, false);
            let committed = read_partition(w, TOPIC, i, true);
            let mut seen = BTreeSet::new();
            for v in committed.values() {
                let n: u64 = v.split('-').next().and_then(|n| n.parse().ok()).expect("value");
                assert!(seen.insert(n), "partition {i}: txn {n} read twice");
            }
            // Exactly the committed transactions (each wrote its record here
            // before its EndTxn was sent), nothing aborted.
            assert_eq!(seen, self.committed, "partition {i}: read_committed");
            self.check_markers(i, &all);
        }
        let last = self.committed.iter().next_back().map_or(-1, |&n| n as i64);
        assert_eq!(fetch_offset(w, GROUP, TOPIC, 0), (NONE, last), "the group's offset");
    }
}

#[test]
fn random_sigkills_during_a_stream_of_transactions() {
    let seed = now_ms() as u64;
    println!("seed {seed}");
    let mut rng = Lcg(seed);
    let mut b = TestBroker::start(&[]);
    create_topic(b.port, TOPIC, PARTITIONS, &[]);
    let mut w = try_connect_loaded(b.port).expect("connect");
    let producer = TxnProducer::init(&mut w, ID, 60_000).expect("init");
    let mut stream = Stream {
        producer,
        n: 0,
        step: Step::Idle,
        committed: BTreeSet::new(),
        aborted: BTreeSet::new(),
    };
    let started = Instant::now();
    for kill in 0..KILLS {
        // A killer thread SIGKILLs the broker after a random delay while the
        // producer runs transactions back to back.
        let pid = b.pid() as i32;
        let delay = Duration::from_millis(100 + rng.next(900));
        let killed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&killed);
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            // SAFETY: kill(2) on the broker child's pid, not reaped yet
            // (the test reaps it only after this thread is joined).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            flag.store(true, Ordering::SeqCst);
        });
        while stream.run_one(&mut w).is_some() {}
        killer.join().expect("killer");
        assert!(killed.load(Ordering::SeqCst), "the connection broke only by the kill");
        println!(
            "kill {kill} after {:?}: txn {} at {:?}; {} committed, {} aborted so far",
            delay,
            stream.n,
            stream.step,
            stream.committed.len(),
            stream.aborted.len()
        );
        b.kill();
        b.restart();
        // The broker may not die again here (no killer runs), so each step answers.
        w = try_connect_loaded(b.port).expect("connect after the restart");
        stream.recover(&mut w).expect("recover");
        stream.check(&mut w);
    }
    // A last run with no kill, then a clean restart: the same picture.
    for _ in 0..10 {
        stream.run_one(&mut w).expect("no kill now");
    }
    stream.check(&mut w);
    assert!(b.stop().success());
    b.restart();
    let mut w = try_connect_loaded(b.port).expect("connect");
    stream.check(&mut w);
    assert!(stream.aborted.len() >= KILLS.min(3), "aborts ran: {}", stream.aborted.len());
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
}
