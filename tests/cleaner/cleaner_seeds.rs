//! The seed documents' examples, reproduced exactly: the K1/K2/K3 picture and
//! the user-profiles moments 1–3 (000_809c9724205d43fc.txt), the customer
//! addresses pass where a read at offset 1 returns offset 4
//! (001_9e0b802ab7eeac5b.txt), and the customer-email example
//! (003_9de51f2015f76968.txt).

use parking_lot::RwLock;

use crate::common::{all_batches, append, clean_once, cleaner, decode, open_log, read_all, Rec};
use sediment::clock::{Clock, MockClock, SharedClock};
use sediment::log::compression::Compression;
use sediment::log::Log;

const NOW: i64 = 1_700_000_000_000;

/// A compacted log holding `records` (key, value) at offsets 0.., one batch each,
/// all in closed segments (the active segment is empty).
fn log_with(
    dir: &std::path::Path,
    records: &[(&str, Option<&str>)],
    clock: SharedClock,
) -> RwLock<Log> {
    let mut log = open_log(dir, "seed", &[("cleanup.policy", "compact")], clock);
    for (i, (k, v)) in records.iter().enumerate() {
        let info = append(
            &mut log,
            Compression::None,
            &[(NOW - 1000 + i as i64, Some(k.as_bytes()), v.map(str::as_bytes))],
        );
        assert_eq!(info.first_offset, i as i64);
    }
    log.roll_if_not_empty().unwrap();
    RwLock::new(log)
}

fn kv(records: &[Rec]) -> Vec<(i64, String, Option<String>)> {
    records
        .iter()
        .map(|r| {
            let s = |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8(b.clone()).unwrap());
            (r.offset, s(&r.key).unwrap(), s(&r.value))
        })
        .collect()
}

fn owned(v: &[(i64, &str, Option<&str>)]) -> Vec<(i64, String, Option<String>)> {
    v.iter().map(|(o, k, v)| (*o, k.to_string(), v.map(str::to_string))).collect()
}

#[test]
fn k1_k2_k3_picture() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let records = [
        ("K1", Some("A")),
        ("K2", Some("B")),
        ("K1", Some("C")),
        ("K3", Some("D")),
        ("K2", Some("E")),
        ("K1", Some("F")),
        ("K3", None),
    ];
    let log = log_with(dir.path(), &records, clock.clone());
    let mut c = cleaner(1 << 20, clock.clone());
    let result = clean_once(&mut c, &log, 0, clock.now_ms());
    assert_eq!(result.end_offset, 7);
    assert_eq!((result.stats.start_messages, result.stats.end_messages), (7, 3));
    let summary = result.stats.summary(0, "seed-0", 0, result.end_offset);
    assert!(
        summary.contains("(7 messages)")
            && summary.contains("(3 messages)")
            && summary.contains("57.1% fewer messages"),
        "{summary}"
    );
    let log = log.read();
    let after = kv(&read_all(&log, 0, 1 << 20));
    assert_eq!(
        after,
        owned(&[(4, "K2", Some("E")), (5, "K1", Some("F")), (6, "K3", None)]),
        "only the newest per key, K3's tombstone kept"
    );
    assert_eq!(log.log_end_offset(), 7);
    // The tombstone's batch carries its delete horizon (KIP-534).
    let horizon: Vec<_> = all_batches(&log)
        .iter()
        .filter(|(_, r)| r.iter().any(|r| r.value.is_none()))
        .map(|(h, _)| h.delete_horizon_ms())
        .collect();
    assert_eq!(horizon, vec![Some(NOW + 86_400_000)]);
}

#[test]
fn user_profiles_three_moments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    // Moment 1: before any cleaning. u1 is written at 0, 3, 4; u2 at 1; u3 at 2 then deleted at 5.
    let records = [
        ("u1", Some("u1@a")),
        ("u2", Some("u2@a")),
        ("u3", Some("u3@a")),
        ("u1", Some("u1@b")),
        ("u1", Some("u1@c")),
        ("u3", None),
    ];
    let log = log_with(dir.path(), &records, clock.clone());
    let moment1 = kv(&read_all(&log.read(), 0, 1 << 20));
    assert_eq!(moment1.len(), 6);

    // Moment 2: the map is u1→4, u2→1, u3→5; offsets 0, 2, 3 go, 1, 4, 5 keep their numbers.
    let mut c = cleaner(1 << 20, clock.clone());
    let first = clean_once(&mut c, &log, 0, clock.now_ms());
    assert_eq!(first.stats.map_entries, 3);
    {
        let log = log.read();
        assert_eq!(
            kv(&read_all(&log, 0, 1 << 20)),
            owned(&[(1, "u2", Some("u2@a")), (4, "u1", Some("u1@c")), (5, "u3", None)])
        );
        // A consumer reading from offset 0 jumps to 1, then 4, then 5.
        let mut next = 0;
        let mut seen = Vec::new();
        while next < log.log_end_offset() {
            let first = decode(&log.read(next, 1, true).unwrap().records)
                .into_iter()
                .find(|r| r.offset >= next)
                .unwrap();
            seen.push(first.offset);
            next = first.offset + 1;
        }
        assert_eq!(seen, vec![1, 4, 5]);
    }

    // Within the grace period another run keeps the tombstone.
    clock.advance(86_400_000 - 1);
    clean_once(&mut c, &log, first.end_offset, clock.now_ms());
    assert_eq!(kv(&read_all(&log.read(), 0, 1 << 20)).len(), 3);

    // Moment 3: after the grace period another run drops it; u3 has vanished.
    clock.advance(1);
    let third = clean_once(&mut c, &log, first.end_offset, clock.now_ms());
    assert_eq!(third.stats.tombstones_removed, 1);
    let log = log.read();
    assert_eq!(
        kv(&read_all(&log, 0, 1 << 20)),
        owned(&[(1, "u2", Some("u2@a")), (4, "u1", Some("u1@c"))])
    );
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn customer_addresses_read_at_one_returns_four() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    // c-7 sends its 5th address at 5, making its earlier 4 (0..=3) worthless.
    let records = [
        ("c-7", Some("1 Old Rd")),
        ("c-7", Some("2 Old Rd")),
        ("c-7", Some("3 Old Rd")),
        ("c-7", Some("4 Old Rd")),
        ("c-2", Some("9 Elm St")),
        ("c-7", Some("5 New Rd")),
        ("c-4", Some("7 Oak Av")),
        ("c-9", Some("3 Pine Ct")),
    ];
    let log = log_with(dir.path(), &records, clock.clone());
    let mut c = cleaner(1 << 20, clock.clone());
    clean_once(&mut c, &log, 0, clock.now_ms());
    let log = log.read();
    let after = kv(&read_all(&log, 0, 1 << 20));
    assert_eq!(
        after,
        owned(&[
            (4, "c-2", Some("9 Elm St")),
            (5, "c-7", Some("5 New Rd")),
            (6, "c-4", Some("7 Oak Av")),
            (7, "c-9", Some("3 Pine Ct"))
        ]),
        "4 records, 1 per key, original offsets and order"
    );
    let at_one = decode(&log.read(1, 1 << 20, true).unwrap().records);
    assert_eq!(
        at_one.first().map(|r| r.offset),
        Some(4),
        "a read at offset 1 is handed the record at 4"
    );
}

#[test]
fn customer_email_example() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let records = [
        ("c1", Some("ana@old.example")),
        ("c2", Some("ben@example.com")),
        ("c1", Some("ana@new.example")),
        ("c3", Some("cy@example.com")),
        ("c2", Some("ben@work.example")),
    ];
    let log = log_with(dir.path(), &records, clock.clone());
    let mut c = cleaner(1 << 20, clock.clone());
    clean_once(&mut c, &log, 0, clock.now_ms());
    let after = kv(&read_all(&log.read(), 0, 1 << 20));
    assert_eq!(
        after,
        owned(&[
            (2, "c1", Some("ana@new.example")),
            (3, "c3", Some("cy@example.com")),
            (4, "c2", Some("ben@work.example"))
        ])
    );
}
