//! Format check against Apache Kafka 4.1.2's own code: its generated
//! `TransactionLogKey`/`TransactionLogValue` classes (run through
//! tests/java/TransactionLogBytes.java with the jars scripts/kafka-jars.sh
//! fetches) encode a table of values, fixed edge cases and seeded random ones,
//! at versions 0 and 1. For each, sediment's encoder writes the same bytes,
//! or refuses exactly where Kafka refuses (a tagged field at version 0), and
//! sediment's decoder reads Kafka's bytes back to the value Kafka was given.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sediment::txn::schema::{PartitionsSchema, TransactionLogKey, TransactionLogValue};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// The program's line for `value` at `version`.
fn describe(version: i16, v: &TransactionLogValue) -> String {
    let partitions = match &v.transaction_partitions {
        None => "null".to_string(),
        Some(entries) if entries.is_empty() => "-".to_string(),
        Some(entries) => entries
            .iter()
            .map(|e| {
                let ids: Vec<String> = e.partition_ids.iter().map(i32::to_string).collect();
                format!("{}={}", hex(e.topic.as_bytes()), ids.join(","))
            })
            .collect::<Vec<_>>()
            .join("/"),
    };
    format!(
        "value {version} {} {} {} {} {} {} {} {} {} {} {partitions}",
        v.producer_id,
        v.previous_producer_id,
        v.next_producer_id,
        v.producer_epoch,
        v.next_producer_epoch,
        v.transaction_timeout_ms,
        v.transaction_status,
        v.transaction_last_update_timestamp_ms,
        v.transaction_start_timestamp_ms,
        v.client_transaction_version,
    )
}

/// Run Kafka's encoder over `lines`; one output line each.
fn kafka_encode(lines: &[String]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("bash")
        .arg(root.join("scripts/kafka-tool.sh"))
        .arg(root.join("tests/java/TransactionLogBytes.java"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/kafka-tool.sh (needs Java 17 and Maven)");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = lines.join("\n") + "\n";
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer thread").expect("write stdin");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "TransactionLogBytes failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let answers: Vec<String> = stdout.lines().map(str::to_owned).collect();
    assert_eq!(answers.len(), lines.len(), "one answer per line: {stdout}\n{stderr}");
    answers
}

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Often the default, sometimes an edge, otherwise anything.
    fn pick_i64(&mut self, default: i64) -> i64 {
        match self.below(4) {
            0 | 1 => default,
            2 => [0, 1, i64::MAX, i64::MIN, -2][self.below(5) as usize],
            _ => self.next() as i64,
        }
    }
    fn text(&mut self) -> String {
        const PARTS: [&str; 6] = ["a", "orders", "ü", "日本", "-", "topic_9"];
        (0..self.below(4)).map(|_| PARTS[self.below(6) as usize]).collect()
    }
}

fn random_value(rng: &mut Rng) -> TransactionLogValue {
    let partitions = match rng.below(4) {
        0 => None,
        1 => Some(vec![]),
        _ => Some(
            (0..1 + rng.below(4))
                .map(|_| PartitionsSchema {
                    topic: rng.text(),
                    partition_ids: (0..rng.below(6)).map(|_| rng.pick_i64(0) as i32).collect(),
                })
                .collect(),
        ),
    };
    TransactionLogValue {
        producer_id: rng.pick_i64(1000),
        previous_producer_id: rng.pick_i64(-1),
        next_producer_id: rng.pick_i64(-1),
        producer_epoch: rng.pick_i64(0) as i16,
        next_producer_epoch: rng.pick_i64(-1) as i16,
        transaction_timeout_ms: rng.pick_i64(60_000) as i32,
        transaction_status: rng.below(8) as i8,
        transaction_partitions: partitions,
        transaction_last_update_timestamp_ms: rng.pick_i64(1_700_000_000_000),
        transaction_start_timestamp_ms: rng.pick_i64(-1),
        client_transaction_version: rng.pick_i64(0) as i16,
    }
}

#[test]
fn kafkas_encoder_and_ours_agree() {
    let plain = TransactionLogValue {
        producer_id: 1000,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 5,
        next_producer_epoch: -1,
        transaction_timeout_ms: 60_000,
        transaction_status: 1,
        transaction_partitions: Some(vec![
            PartitionsSchema { topic: "a".into(), partition_ids: vec![0, 1] },
            PartitionsSchema { topic: "bc".into(), partition_ids: vec![7] },
        ]),
        transaction_last_update_timestamp_ms: 1_700_000_001_000,
        transaction_start_timestamp_ms: 1_700_000_000_000,
        client_transaction_version: 0,
    };
    let mut values: Vec<TransactionLogValue> = (0..=5)
        .map(|status| TransactionLogValue {
            transaction_status: status,
            transaction_partitions: match status {
                0 => None,
                1..=3 => plain.transaction_partitions.clone(),
                _ => Some(vec![]),
            },
            ..plain.clone()
        })
        .collect();
    values.push(TransactionLogValue { client_transaction_version: 1, ..plain.clone() });
    values.push(TransactionLogValue {
        previous_producer_id: 999,
        next_producer_id: 1001,
        next_producer_epoch: 0,
        client_transaction_version: 2,
        ..plain.clone()
    });
    let mut rng = Rng(0x5ed1_3e47);
    values.extend((0..300).map(|_| random_value(&mut rng)));

    let keys = ["txn-1", "", "ü-日本", &"k".repeat(1000)];
    let mut lines: Vec<String> =
        keys.iter().map(|k| format!("key {}", hex(k.as_bytes()))).collect();
    for v in &values {
        lines.extend([describe(0, v), describe(1, v)]);
    }
    let answers = kafka_encode(&lines);

    for (k, answer) in keys.iter().zip(&answers) {
        let key = TransactionLogKey { transactional_id: k.to_string() };
        assert_eq!(hex(&key.encode().expect("encode")), *answer, "key {k:?}");
        assert_eq!(TransactionLogKey::decode(&unhex(answer)).expect("decode"), key);
    }
    let mut written = [0usize; 2];
    let value_answers = answers[keys.len()..].chunks(2);
    for (v, answers) in values.iter().zip(value_answers) {
        for (version, answer) in [0i16, 1].into_iter().zip(answers) {
            let ours = v.encode(version);
            if answer.starts_with("error") {
                assert!(ours.is_err(), "Kafka refuses v{version} ({answer}), we wrote it: {v:?}");
                continue;
            }
            assert_eq!(
                hex(&ours.expect("we write what Kafka writes")),
                *answer,
                "v{version} {v:?}"
            );
            let decoded =
                TransactionLogValue::decode(&unhex(answer)).expect("decode Kafka's bytes");
            assert_eq!(decoded, *v, "v{version}");
            written[version as usize] += 1;
        }
    }
    // Both versions were really exercised, v0 refusals included.
    assert!(written[0] > 20 && written[0] < values.len(), "{written:?}");
    assert_eq!(written[1], values.len());
}
