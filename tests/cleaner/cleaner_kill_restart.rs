//! Killing the broker (SIGKILL) in the middle of a clean — while the
//! `.cleaned` output is being written — and restarting it loses no key: the
//! newest value of every key is readable right after the restart, and once
//! the clean has run again the partition holds exactly one record per key.

use std::collections::BTreeMap;

use crate::broker::{cleaner_checkpoint, fetch_all, now_ms, produce, TestBroker, Wire};

const KEYS: usize = 2000;
const ROUNDS: usize = 4;

#[test]
fn sigkill_mid_clean_loses_no_key() {
    // The ~8 MB clean lasts seconds under the slow cleaner's throttle.
    let mut b = TestBroker::start_with_slow_cleaner();
    let mut w = Wire::connect(b.port);
    let t = now_ms() - 60_000;
    let pad = "x".repeat(1000);
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    for round in 0..ROUNDS {
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(100) {
            let records: Vec<_> = chunk
                .iter()
                .map(|k| (format!("key-{k:05}"), Some(format!("{round}-{pad}"))))
                .collect();
            for (k, v) in &records {
                latest.insert(k.clone(), v.clone().unwrap());
            }
            produce(&mut w, "state", 0, t, &records);
        }
    }
    // A record two seconds later (record time) rolls the segment: the whole
    // 8 MB becomes dirty and the clean starts.
    produce(&mut w, "state", 0, t + 2_000, &[("key-00000".into(), Some("final".into()))]);
    latest.insert("key-00000".into(), "final".into());
    drop(w);

    let dir = b.data_dir().join("state-0");
    b.wait_for_clean_in_progress(&dir, 30);
    b.kill();
    assert_eq!(
        cleaner_checkpoint(&b.data_dir(), "state", 0),
        None,
        "killed before the clean finished"
    );

    b.restart();
    let check = |records: &[(i64, Option<String>, Option<String>)]| {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (_, k, v) in records {
            seen.insert(k.clone().expect("keyed"), v.clone().expect("no tombstones written"));
        }
        assert_eq!(seen.len(), latest.len(), "every key is present");
        for (k, v) in &latest {
            assert_eq!(seen.get(k), Some(v), "newest value of {k}");
        }
    };
    check(&fetch_all(b.port, "state", 0));
    let end = b.wait_for(60, "the clean to complete after the restart", || {
        cleaner_checkpoint(&b.data_dir(), "state", 0)
    });
    assert_eq!(end, (KEYS * ROUNDS) as i64);
    let after = fetch_all(b.port, "state", 0);
    assert_eq!(after.len(), KEYS + 1, "one record per key, plus the active segment's");
    check(&after);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
