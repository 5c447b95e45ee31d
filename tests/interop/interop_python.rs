//! The Python clients against the real broker: confluent-kafka (librdkafka
//! 2.16, flexible request versions) and kafka-python (its own pure-Python
//! encoder). Each script in tests/python/ asserts as it goes and exits non-zero
//! at the first failed check; this runs it with the pinned venv that
//! scripts/python-env.sh creates, then checks on disk that what the scripts
//! produced with a codec really is compressed with it, and carries a producer
//! id exactly when the producer was idempotent.

use crate::broker::{dump_log, run_python_script, TestBroker};

/// Stop the broker (cleanly, so everything is on disk), then check every batch
/// of `<prefix>-<codec>-{idem,plain}-0`: the codec, N records in all, and a
/// producer id only on the idempotent topic.
fn check_compressed_on_disk(b: &mut TestBroker, prefix: &str, codecs: &[&str]) {
    assert!(b.stop().success(), "clean shutdown; log:\n{}", b.log());
    for codec in codecs {
        for idem in [true, false] {
            let topic = format!("{prefix}-{codec}-{}", if idem { "idem" } else { "plain" });
            let segment = b.data_dir().join(format!("{topic}-0")).join("00000000000000000000.log");
            let dump = dump_log(&segment);
            let batches: Vec<&str> =
                dump.lines().filter(|l| l.starts_with("baseOffset:")).collect();
            let field = |line: &str, name: &str| -> i64 {
                let rest = line
                    .split(&format!(" {name}: "))
                    .nth(1)
                    .unwrap_or_else(|| panic!("no {name} in {line}"));
                rest.split(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("bad {name} in {line}"))
            };
            assert_eq!(
                batches.iter().map(|l| field(l, "count")).sum::<i64>(),
                20,
                "{topic}:\n{dump}"
            );
            for line in &batches {
                assert!(
                    line.contains(&format!(" compresscodec: {codec} ")),
                    "{topic}: a batch not compressed with {codec}:\n{dump}"
                );
                assert_eq!(
                    field(line, "producerId") >= 0,
                    idem,
                    "{topic}: producer id present exactly when idempotent:\n{dump}"
                );
            }
        }
    }
}

#[test]
fn confluent_kafka() {
    let mut b = TestBroker::start(&[]);
    run_python_script(&b, "interop_confluent.py", &[], "all confluent-kafka checks passed");
    check_compressed_on_disk(&mut b, "cc", &["gzip", "snappy", "lz4", "zstd"]);
}

#[test]
fn kafka_python() {
    let mut b = TestBroker::start(&[]);
    let out =
        run_python_script(&b, "interop_kafka_python.py", &[], "all kafka-python checks passed");
    // The pinned venv has every codec library (python-snappy included).
    let skipped: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("skip ")).collect();
    assert!(skipped.is_empty(), "kafka-python skipped codecs: {skipped:?}\n{out}");
    check_compressed_on_disk(&mut b, "kp", &["gzip", "snappy", "lz4", "zstd"]);
}
