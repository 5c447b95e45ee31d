//! Topic `compression.type` applied on produce, as Kafka's LogValidator does:
//! a topic set to zstd stores zstd batches for a producer sending gzip (Kafka's
//! DumpLogSegments shows the codec) and consumers read the same records;
//! `producer` keeps the producer's codec; an idempotent producer's batches
//! keep their producer id and sequence; the cleaner recopies recompressed
//! batches; zstd batches need Produce v7, and a zstd topic Fetch v10.

use crate::broker;

use crate::broker::{create_topic, kafka_tool, TestBroker, Wire};
use crate::common::{
    all_batches, clean_fully, cleaner, files_with, kafka_dump_log, open_log, read_all,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::RwLock;
use sediment::clock::MockClock;
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;

const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
const NOW: i64 = 1_700_000_000_000;

/// The codecs kafka-dump-log reports for the batches of `dir`'s segments
/// that hold records (the cleaner's empty batches carry no codec).
fn dumped_codecs(dir: &std::path::Path) -> Vec<String> {
    let dump = kafka_dump_log(&files_with(dir, "log"), &[]);
    dump.lines()
        .filter(|l| !l.contains(" count: 0 "))
        .filter_map(|l| l.split("compresscodec: ").nth(1))
        .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_zstd_topic_stores_zstd_for_a_gzip_producer_and_producer_keeps_gzip() {
    let b = TestBroker::start(&[]);
    let bs = b.bootstrap();
    create_topic(b.port, "zstd-topic", 1, &[("compression.type", "zstd")]);
    create_topic(b.port, "as-sent", 1, &[("compression.type", "producer")]);
    let lines: Vec<String> = (0..20).map(|i| format!("record-{i}")).collect();
    let input = lines.join("\n") + "\n";
    for topic in ["zstd-topic", "as-sent"] {
        let args = ["--bootstrap-server", &bs, "--topic", topic, "--compression-codec", "gzip"];
        kafka_tool(&b, PRODUCER, &args, Some(&input));
        let args = [
            "--bootstrap-server",
            &bs,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            "20",
            "--timeout-ms",
            "20000",
        ];
        let out = kafka_tool(&b, CONSUMER, &args, None);
        assert_eq!(out.lines().collect::<Vec<_>>(), lines, "{topic}");
    }
    let zstd_dir = b.data_dir().join("zstd-topic-0");
    let codecs = dumped_codecs(&zstd_dir);
    assert!(!codecs.is_empty() && codecs.iter().all(|c| c == "zstd"), "{codecs:?}");
    let codecs = dumped_codecs(&b.data_dir().join("as-sent-0"));
    assert!(!codecs.is_empty() && codecs.iter().all(|c| c == "gzip"), "{codecs:?}");
    // The console producer is idempotent: its recompressed batch keeps its producer.
    let dump = kafka_dump_log(&files_with(&zstd_dir, "log"), &[]);
    let first = dump.lines().find(|l| l.contains("baseOffset: 0 ")).expect("first batch");
    assert!(first.contains("baseSequence: 0 "), "{first}");
    assert!(!first.contains("producerId: -1 "), "{first}");

    // zstd needs Produce v7: v6 is refused, v7 accepted.
    let mut w = Wire::connect(b.port);
    let mut batch = BatchBuilder::new(Compression::Zstd, broker::now_ms());
    batch.append(broker::now_ms(), Some(b"k"), Some(b"v"));
    let request =
        ProduceRequest::default().with_acks(1).with_timeout_ms(5_000).with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("as-sent")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(bytes::Bytes::from(batch.build())))]),
        ]);
    let code = |r: kafka_protocol::messages::ProduceResponse| {
        r.responses[0].partition_responses[0].error_code
    };
    assert_eq!(code(w.call(6, &request)), 76, "UNSUPPORTED_COMPRESSION_TYPE");
    assert_eq!(code(w.call(7, &request)), 0);

    // A zstd topic is refused to Fetch v9 and older, as on Kafka.
    let fetch =
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("zstd-topic")))
                .with_partitions(vec![FetchPartition::default().with_partition_max_bytes(1 << 20)]),
        ]);
    let fetched = |w: &mut Wire, version| {
        let r = w.call(version, &fetch);
        let p = &r.responses[0].partitions[0];
        (p.error_code, p.records.as_ref().map_or(0, |r| r.len()))
    };
    assert_eq!(fetched(&mut w, 9), (76, 0));
    let (code, len) = fetched(&mut w, 10);
    assert!(code == 0 && len > 0, "{code} {len}");
}

#[test]
fn recompressed_batches_keep_their_producer_and_survive_the_cleaner() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(NOW);
    let config = [
        ("cleanup.policy", "compact"),
        ("compression.type", "zstd"),
        ("compression.zstd.level", "9"),
        ("segment.bytes", "4000"),
    ];
    let mut log = open_log(dir.path(), "recompress", &config, clock.clone());
    let codecs = [Compression::Gzip, Compression::None, Compression::Snappy, Compression::Lz4];
    for i in 0..40i32 {
        let mut b = BatchBuilder::new(codecs[i as usize % codecs.len()], NOW).producer(7, 2, i * 3);
        for j in 0..3 {
            let key = format!("key-{}", (i * 3 + j) % 10);
            b.append(NOW, Some(key.as_bytes()), Some(format!("value-{i}-{j}").as_bytes()));
        }
        log.append_as_leader(&mut b.build()).expect("append");
    }
    log.roll_if_not_empty().unwrap();
    let batches = all_batches(&log);
    assert_eq!(batches.len(), 40);
    for (n, (h, records)) in batches.iter().enumerate() {
        assert_eq!(h.compression().unwrap(), Compression::Zstd);
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 2, n as i32 * 3));
        assert_eq!(records.len(), 3);
    }
    let log = RwLock::new(log);
    let mut c = cleaner(1 << 20, clock.clone());
    clean_fully(&mut c, &log, 0, NOW);
    let log = log.into_inner();
    let kept = read_all(&log, 0, 1 << 20);
    assert_eq!(kept.len(), 10, "one record per key");
    let cleaned = all_batches(&log);
    let with_records = cleaned.iter().filter(|(_, records)| !records.is_empty());
    assert!(with_records.into_iter().all(|(h, _)| h.compression() == Ok(Compression::Zstd)));
    let codecs = dumped_codecs(dir.path());
    assert!(!codecs.is_empty() && codecs.iter().all(|c| c == "zstd"), "{codecs:?}");
}

/// A compressed batch does not pin its inflated size after the append: the
/// partition's decompression buffer is let go once it held more than
/// `SCRATCH_KEEP_BYTES` (issue 28).
#[test]
fn a_large_compressed_batch_does_not_pin_its_inflated_size() {
    use sediment::log::unified_log::SCRATCH_KEEP_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let mut log = crate::common::open_log(dir.path(), "inflate", &[], sediment::clock::system());
    let mut b = sediment::log::record_batch::BatchBuilder::new(
        sediment::log::compression::Compression::Gzip,
        0,
    );
    // 8 MiB of zeros: a few KiB on the wire, 8 MiB once inflated.
    b.append(0, Some(b"k"), Some(&vec![0u8; 8 << 20][..]));
    let mut batch = b.build();
    assert!(batch.len() < 1 << 20, "{} bytes on the wire", batch.len());
    log.append_as_leader(&mut batch).expect("append");
    assert!(
        log.scratch_capacity() <= SCRATCH_KEEP_BYTES,
        "{} bytes kept after the append",
        log.scratch_capacity()
    );
    // A timestamp lookup inflates it again, and lets go again.
    assert_eq!(log.fetch_offset_by_timestamp(0).expect("lookup").map(|(_, o)| o), Some(0));
    assert!(log.scratch_capacity() <= SCRATCH_KEEP_BYTES);
}
