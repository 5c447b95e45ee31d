//! Fault isolation: a partition with a corrupted closed segment becomes
//! uncleanable (counted once, with its cause) while the broker's other
//! compacted partitions are still cleaned.

use crate::broker::{
    cleaner_checkpoint, create_topic, fetch_all, now_ms, produce, TestBroker, Wire,
};

#[test]
fn a_corrupt_segment_is_isolated() {
    // Written with the cleaner off, so every partition is still dirty when the
    // damage is done.
    let mut b = TestBroker::start(&["log.cleaner.enable=false"]);
    let topics = ["alpha", "broken", "gamma"];
    let mut w = Wire::connect(b.port);
    let t = now_ms() - 60_000;
    for topic in topics {
        create_topic(
            b.port,
            topic,
            1,
            &[
                ("cleanup.policy", "compact"),
                ("segment.ms", "1000"),
                ("min.cleanable.dirty.ratio", "0.01"),
            ],
        );
        for round in 0..5 {
            let records: Vec<_> = (0..20)
                .map(|k| (format!("key-{k}"), Some(format!("{topic}-{round}-{k}"))))
                .collect();
            produce(&mut w, topic, 0, t, &records);
        }
        produce(&mut w, topic, 0, t + 2_000, &[("key-0".into(), Some("last".into()))]);
    }
    drop(w);
    assert!(b.stop().success());

    // Flip one byte inside the third batch's records: its CRC no longer matches.
    let segment = b.data_dir().join("broken-0").join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let batch_size =
        |at: usize| 12 + i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
    let third = batch_size(0) + batch_size(batch_size(0));
    bytes[third + 70] ^= 0xFF;
    std::fs::write(&segment, &bytes).unwrap();

    b.set_overrides(&["log.cleaner.backoff.ms=100"]);
    b.restart();
    let dir = b.data_dir().display().to_string();
    let count = format!(
        "kafka_log_logcleanermanager_uncleanable_partitions_count{{logDirectory=\"{dir}\"}}"
    );
    b.wait_for(15, "one uncleanable partition", || (b.metric(&count) == Some(1.0)).then_some(()));
    for topic in ["alpha", "gamma"] {
        let end = b.wait_for(15, "the healthy partitions to be cleaned", || {
            cleaner_checkpoint(&b.data_dir(), topic, 0)
        });
        assert_eq!(end, 100, "{topic}");
        let records = fetch_all(b.port, topic, 0);
        assert_eq!(
            records.len(),
            21,
            "{topic}: one record per key plus the active segment: {records:?}"
        );
        assert!(records[..20]
            .iter()
            .all(|(_, _, v)| v.as_deref().is_some_and(|v| v.starts_with(&format!("{topic}-4-")))));
    }
    assert_eq!(
        cleaner_checkpoint(&b.data_dir(), "broken", 0),
        None,
        "the broken partition was not cleaned"
    );
    assert_eq!(b.metric(&count), Some(1.0), "still exactly one");
    assert!(b
        .metric(&format!("kafka_log_logcleanermanager_uncleanable_bytes{{logDirectory=\"{dir}\"}}"))
        .is_some_and(|v| v > 0.0));
    assert_eq!(b.metric("kafka_log_logcleaner_deadthreadcount"), Some(0.0), "the thread went on");
    assert_eq!(b.metric("kafka_log_logcleaner_deadthreadcount"), Some(0.0));
    let status = b.cleaner_status();
    let broken = status["manager"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["topic"] == "broken")
        .unwrap()
        .clone();
    assert_eq!(broken["eligible"], false);
    assert_eq!(broken["ineligible"]["code"], "uncleanable", "{broken}");
    let cause = broken["uncleanable_cause"].as_str().unwrap();
    assert!(
        cause.contains("00000000000000000000.log") && cause.to_lowercase().contains("crc"),
        "the cause names the file and the damage: {cause}"
    );
    assert!(b.log().contains("partition is uncleanable"), "logged with its cause");
}
