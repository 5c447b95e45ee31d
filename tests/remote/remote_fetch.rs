//! Reads from the tiered storage store, against moto's S3 server: a
//! partition whose oldest segments exist only in the store (their local files
//! removed while the broker was stopped, its log start kept at 0 by the
//! log-start-offset checkpoint) is read from offset 0 by the raw protocol,
//! kcat, confluent-kafka and Kafka's console consumer; ListOffsets finds the
//! store's offsets by timestamp and answers the earliest and earliest-local
//! offsets; an object corrupted in the bucket is reported with its key and
//! never served, and a store that is gone fails the partition's uncached
//! segments only, while the rest of a fetch, and local reads, are answered.
//!
//! The store-only state is made the way a user makes it: a small
//! `local.retention.bytes`, so the oldest segments leave local disk once the
//! store lists them; a restart then shows the log start kept at 0.

use std::time::Instant;

use crate::broker::remote::*;
use crate::broker::{
    create_topic, kafka_tool, kafka_tool_output, kcat, now_ms, produce, run_python_script, Wire,
};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use sediment::log::record_batch::{self, BatchHeader, RecordIter};
use sediment::log::TopicPartition;

const TOPIC: &str = "tiered";
const PLAIN: &str = "plain";
const RECORDS: i64 = 2000;
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";

fn value(i: i64) -> String {
    format!("value-{i:05}-{}", "y".repeat(1000))
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.into()))
}

/// ListOffsets v9 of partition 0 of `topic` for `timestamp`: (error, offset).
fn list_offset(w: &mut Wire, topic: &str, timestamp: i64) -> (i16, i64) {
    let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default().with_name(name(topic)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(0).with_timestamp(timestamp),
        ]),
    ]);
    let r = w.call(9, &request);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// One Fetch v12 of partition 0 of each (topic, offset): (error, records) each.
fn fetch(w: &mut Wire, parts: &[(&str, i64)]) -> Vec<(i16, Bytes)> {
    fetch_isolated(w, parts, 0).into_iter().map(|(code, bytes, _)| (code, bytes)).collect()
}

/// [`fetch`] at an isolation level (1: read_committed), with each
/// partition's aborted transactions (their count; `None`: absent).
fn fetch_isolated(
    w: &mut Wire,
    parts: &[(&str, i64)],
    isolation: i8,
) -> Vec<(i16, Bytes, Option<usize>)> {
    let topics = parts
        .iter()
        .map(|(topic, offset)| {
            FetchTopic::default().with_topic(name(topic)).with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(256 << 10),
            ])
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(4 << 20)
        .with_isolation_level(isolation)
        .with_topics(topics);
    let r = w.call(12, &request);
    r.responses
        .iter()
        .map(|t| {
            let p = &t.partitions[0];
            let aborted = p.aborted_transactions.as_ref().map(Vec::len);
            (p.error_code, p.records.clone().unwrap_or_default(), aborted)
        })
        .collect()
}

/// (offset, value) of every record in `bytes`.
fn records(bytes: &[u8]) -> Vec<(i64, String)> {
    let (mut out, mut pos, mut scratch) = (Vec::new(), 0, Vec::new());
    while pos + record_batch::RECORD_BATCH_OVERHEAD <= bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).expect("batch header");
        let batch = &bytes[pos..pos + h.size_in_bytes()];
        let payload =
            record_batch::records_bytes(&h, batch, &mut scratch, 1 << 30).expect("records");
        for rec in RecordIter::new(payload, h.records_count) {
            let rec = rec.expect("record");
            let value = String::from_utf8_lossy(rec.value.expect("value")).into_owned();
            out.push((h.base_offset + rec.offset_delta as i64, value));
        }
        pos += h.size_in_bytes();
    }
    out
}

/// Records as read: (offset, value).
type Records = Vec<(i64, String)>;

/// Fetch `topic` from offset 0 until `end` (or an error): the records in
/// order and the error that stopped the walk, if any.
fn walk(w: &mut Wire, topic: &str, end: i64) -> (Records, Option<(i64, i16)>) {
    let mut got: Records = Vec::new();
    let mut next = 0;
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while next < end {
        let (code, bytes) = fetch(w, &[(topic, next)]).remove(0);
        if code != 0 {
            assert!(bytes.is_empty(), "records with error {code}");
            return (got, Some((next, code)));
        }
        let recs = records(&bytes);
        if recs.is_empty() {
            // A download longer than remote.fetch.max.wait.ms: asked again, it is cached.
            assert!(Instant::now() < deadline, "no records at {next} below {end} for 60 s");
            continue;
        }
        got.extend(recs.into_iter().filter(|(o, _)| *o >= next));
        next = got.last().map_or(next, |(o, _)| o + 1);
    }
    (got, None)
}

/// Whether `got` is every record of `range` as written (a short summary if not).
fn check(got: &[(i64, String)], range: std::ops::Range<i64>, what: &str) {
    let want: Vec<(i64, String)> = range.clone().map(|i| (i, value(i))).collect();
    if got != want {
        let wrong = got.iter().filter(|(o, v)| *v != value(*o)).count();
        panic!(
            "{what}: {} records, offsets {:?}..{:?}, {wrong} with a wrong value; expected {range:?}",
            got.len(),
            got.first().map(|r| r.0),
            got.last().map(|r| r.0)
        );
    }
}

const LOCAL_RETENTION_BYTES: u64 = 524_288;

/// The `.log` files of a partition dir: base offset to size.
fn local_log_sizes(dir: &std::path::Path) -> std::collections::BTreeMap<i64, u64> {
    std::fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| {
            let e = e.ok()?;
            let base = e.file_name().to_string_lossy().strip_suffix(".log")?.parse().ok()?;
            Some((base, e.metadata().ok()?.len()))
        })
        .collect()
}

#[test]
fn store_only_segments_are_read_by_every_client_and_a_corrupt_object_is_never_served() {
    let moto = Moto::start(&[]);
    moto.create_bucket("bucket-read");
    let url = "s3://bucket-read/cluster";
    let store = open_store(url, Some(moto.endpoint()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut overrides = remote_overrides(url, &moto.endpoint(), 600_000);
    overrides
        .extend(["log.cleaner.enable=false".into(), "log.retention.check.interval.ms=200".into()]);
    let mut b = start(&overrides);
    let retention = LOCAL_RETENTION_BYTES.to_string();
    let config = [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "131072"),
        ("retention.ms", "-1"),
        ("remote.storage.enable", "true"),
        ("local.retention.bytes", &retention),
    ];
    create_topic(b.port, TOPIC, 1, &config);
    create_topic(b.port, PLAIN, 1, &[]);
    let mut w = Wire::connect(b.port);
    let base_ts = now_ms() - 3_600_000;
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(10) {
        let recs: Vec<_> = chunk.iter().map(|i| (format!("k{i}"), Some(value(*i)))).collect();
        produce(&mut w, TOPIC, 0, base_ts + chunk[0], &recs);
    }
    produce(&mut w, PLAIN, 0, base_ts, &[("p".into(), Some("plain-0".into()))]);
    let dir = b.data_dir().join(format!("{TOPIC}-0"));
    // Local retention drops the oldest segments, only those the store lists;
    // waited for until it is done (every closed segment listed, no segment
    // left to drop), so the local start stays where it is read here.
    let what = "local retention past half the log, and done";
    let (manifest, local_start) = wait_logged(&b, 60, what, || {
        let local_start = list_offset(&mut w, TOPIC, -4).1;
        let (_, m) = latest(&store, &tp)?;
        let sizes = local_log_sizes(&dir);
        let (&oldest_base, &oldest) = sizes.first_key_value()?;
        let total: u64 = sizes.values().sum();
        let settled = m.end_offset == local_active_base(&dir)
            && total - oldest < LOCAL_RETENTION_BYTES
            && oldest_base == local_start;
        (local_start >= RECORDS / 2 && settled).then_some((m, local_start))
    });
    let gone: Vec<_> =
        manifest.segments.iter().filter(|s| s.next_offset <= local_start).cloned().collect();
    assert!(gone.len() >= 4, "{} segments only in the store", gone.len());
    for seg in &gone {
        assert!(!dir.join(format!("{:020}.log", seg.base_offset)).exists(), "still local");
    }
    let gone = &gone[..];
    b.stop();
    b.restart();
    let mut w = Wire::connect(b.port);
    assert_eq!(
        list_offset(&mut w, TOPIC, -2),
        (0, 0),
        "the log start stays at 0 below the first local segment across a restart"
    );
    assert_eq!(list_offset(&mut w, TOPIC, -4), (0, local_start), "earliest local");

    // The raw protocol, from offset 0, with a cold cache: every record.
    let remote_bytes: u64 = gone.iter().map(|s| s.size()).sum();
    let started = Instant::now();
    let (got, _) = walk(&mut w, TOPIC, local_start);
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "rough figure, moto on loopback, cold cache, one partition: {:.1} MB of store-only segments fetched in {secs:.2} s ({:.1} MB/s)",
        remote_bytes as f64 / 1e6,
        remote_bytes as f64 / 1e6 / secs
    );
    check(&got, 0..local_start, "the store's part");
    let (got, error) = walk(&mut w, TOPIC, RECORDS);
    assert_eq!(error, None);
    check(&got, 0..RECORDS, "the whole partition");
    assert!(b.metric("sediment_remote_cache_misses_total").unwrap_or(0.0) >= gone.len() as f64);
    assert!(b.metric("sediment_remote_cache_hits_total").unwrap_or(0.0) > 0.0);
    assert!(b.metric("sediment_remote_fetch_seconds_count").unwrap_or(0.0) > 0.0);
    assert!(b.metric("sediment_remote_cache_bytes").unwrap_or(0.0) > 0.0);

    // read_committed from the store: the same batches, no aborted transaction.
    let (code, bytes, aborted) = fetch_isolated(&mut w, &[(TOPIC, 0)], 1).remove(0);
    assert_eq!((code, aborted), (0, Some(0)));
    let committed = records(&bytes);
    assert!(!committed.is_empty() && committed.iter().all(|(o, v)| *v == value(*o)));

    // A timestamp in the store's part, and one in the local part.
    assert_eq!(list_offset(&mut w, TOPIC, base_ts + 40), (0, 40));
    assert_eq!(list_offset(&mut w, TOPIC, base_ts + 41), (0, 50));
    assert_eq!(list_offset(&mut w, TOPIC, base_ts + local_start + 5), (0, local_start + 10));

    // kcat (librdkafka), confluent-kafka and Kafka's console consumer, from the beginning.
    let (ok, out, err) = kcat(
        &["-b", &b.bootstrap(), "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%o=%s\\n"],
        "",
    );
    assert!(ok, "kcat: {err}");
    let lines: Vec<String> = out.lines().map(str::to_string).collect();
    let want: Vec<String> = (0..RECORDS).map(|i| format!("{i}={}", value(i))).collect();
    assert!(lines == want, "kcat read {} lines, {:?}", lines.len(), lines.first());
    let count = RECORDS.to_string();
    run_python_script(&b, "remote_fetch_confluent.py", &[TOPIC, &count, "all"], "done");
    let bs = b.bootstrap();
    let args = [
        "--bootstrap-server",
        &bs,
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        &count,
        "--timeout-ms",
        "60000",
    ];
    let out = kafka_tool(&b, CONSUMER, &args, None);
    let want: Vec<String> = (0..RECORDS).map(value).collect();
    assert!(out.lines().eq(want.iter().map(String::as_str)), "the console consumer's records");

    // An object corrupted in the bucket: reported with its key, never served.
    b.stop();
    let bad = &gone[gone.len() / 2];
    let object = bad.files.iter().find(|f| f.ext == "log").expect(".log object");
    let key = store.key(&format!("topics/{tp}/{}", object.key));
    let mut bytes = rt().block_on(store.get_bounded(&key, 1 << 30)).expect("object").to_vec();
    bytes[100] ^= 0x55;
    rt().block_on(store.put_verified(&key, Bytes::from(bytes))).expect("overwrite");
    b.restart();
    let mut w = Wire::connect(b.port);
    let (got, error) = walk(&mut w, TOPIC, RECORDS);
    check(&got, 0..bad.base_offset, "everything before the corrupt segment");
    assert_eq!(error, Some((bad.base_offset, -1)), "UNKNOWN_SERVER_ERROR at the corrupt segment");
    // The rest of a fetch is answered.
    let both = fetch(&mut w, &[(TOPIC, bad.base_offset), (PLAIN, 0)]);
    assert_eq!((both[0].0, both[0].1.len()), (-1, 0));
    assert_eq!(both[1].0, 0);
    assert_eq!(records(&both[1].1), vec![(0, "plain-0".to_string())]);
    let corrupt = "sediment_remote_store_errors_total{kind=\"corrupt\"}";
    assert!(b.metric(corrupt).unwrap_or(0.0) >= 1.0);
    assert!(b.log().contains(key.as_ref()), "the broker's log names {key}");
    let stop = bad.base_offset.to_string();
    run_python_script(&b, "remote_fetch_confluent.py", &[TOPIC, &stop, "corrupt"], "done");
    // The Java client retries UNKNOWN_SERVER_ERROR until its timeout: what it
    // printed is exactly the records before the corrupt segment.
    let args = [
        "--bootstrap-server",
        &bs,
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        &count,
        "--timeout-ms",
        "8000",
    ];
    let (_, out, err) = kafka_tool_output(CONSUMER, &args, None);
    let want: Vec<String> = (0..bad.base_offset).map(value).collect();
    let got: Vec<&str> = out.lines().collect();
    let tail = &err[err.char_indices().rev().nth(2000).map_or(0, |(i, _)| i)..];
    assert!(got == want, "the console consumer printed {} lines: ...{tail}", got.len());

    // The store gone: a segment not in the cache fails that partition only.
    drop(moto);
    let after = gone[gone.len() / 2 + 1].base_offset;
    let (code, plain) = wait_logged(&b, 60, "the store's error for an uncached segment", || {
        let both = fetch(&mut w, &[(TOPIC, after), (PLAIN, 0)]);
        (both[0].0 != 0).then(|| (both[0].0, both[1].clone()))
    });
    assert_eq!(code, -1, "UNKNOWN_SERVER_ERROR");
    assert_eq!((plain.0, records(&plain.1)), (0, vec![(0, "plain-0".to_string())]));
    let (_, bytes) = fetch(&mut w, &[(TOPIC, local_start)]).remove(0);
    assert_eq!(records(&bytes)[0], (local_start, value(local_start)), "local reads go on");
    b.stop();
}
