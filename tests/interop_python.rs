//! The Python clients against the real broker: confluent-kafka (librdkafka
//! 2.16, flexible request versions) and kafka-python (its own pure-Python
//! encoder). Each script in tests/python/ asserts as it goes and exits non-zero
//! at the first failed check; this runs it with the pinned venv that
//! scripts/python-env.sh creates, then checks on disk that what the scripts
//! produced with a codec really is compressed with it, and carries a producer
//! id exactly when the producer was idempotent.

mod broker;

use std::path::PathBuf;
use std::process::Command;

use broker::{repo_root, TestBroker};

/// The venv's interpreter; scripts/python-env.sh installs the pinned clients
/// on first use (and serialises concurrent callers).
fn python() -> PathBuf {
    let out = Command::new(repo_root().join("scripts/python-env.sh")).output().expect("scripts/python-env.sh");
    assert!(out.status.success(), "scripts/python-env.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("python-env.sh prints the interpreter").trim())
}

/// Run tests/python/`script` against `b`; panics with its output and the
/// broker's log unless it exits 0 having reached its last check.
fn run_script(b: &TestBroker, script: &str, done: &str) -> String {
    // `timeout` bounds a client stuck in a retry loop; every call inside the
    // scripts has its own timeout well below this.
    let out = Command::new("timeout")
        .args(["--kill-after=5", "90"])
        .arg(python())
        .arg(repo_root().join("tests/python").join(script))
        .arg(b.bootstrap())
        .env("PYTHONUNBUFFERED", "1")
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(done),
        "{script} failed ({}{})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- broker log ---\n{}",
        out.status,
        if out.status.code() == Some(124) { ", timed out" } else { "" },
        b.log()
    );
    stdout
}

/// Stop the broker (cleanly, so everything is on disk), then check every batch
/// of `<prefix>-<codec>-{idem,plain}-0`: the codec, N records in all, and a
/// producer id only on the idempotent topic.
fn check_compressed_on_disk(b: &mut TestBroker, prefix: &str, codecs: &[&str]) {
    assert!(b.stop().success(), "clean shutdown; log:\n{}", b.log());
    for codec in codecs {
        for idem in [true, false] {
            let topic = format!("{prefix}-{codec}-{}", if idem { "idem" } else { "plain" });
            let segment = b.data_dir().join(format!("{topic}-0")).join("00000000000000000000.log");
            let out = Command::new(env!("CARGO_BIN_EXE_sediment")).arg("dump-log").arg(&segment).output().expect("dump-log");
            let dump = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "dump-log {}:\n{dump}{}", segment.display(), String::from_utf8_lossy(&out.stderr));
            let batches: Vec<&str> = dump.lines().filter(|l| l.starts_with("baseOffset:")).collect();
            let field = |line: &str, name: &str| -> i64 {
                let rest = line.split(&format!(" {name}: ")).nth(1).unwrap_or_else(|| panic!("no {name} in {line}"));
                rest.split(' ').next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad {name} in {line}"))
            };
            assert_eq!(batches.iter().map(|l| field(l, "count")).sum::<i64>(), 20, "{topic}:\n{dump}");
            for line in &batches {
                assert!(line.contains(&format!(" compresscodec: {codec} ")), "{topic}: a batch not compressed with {codec}:\n{dump}");
                assert_eq!(field(line, "producerId") >= 0, idem, "{topic}: producer id present exactly when idempotent:\n{dump}");
            }
        }
    }
}

#[test]
fn confluent_kafka() {
    let mut b = TestBroker::start(&[]);
    run_script(&b, "interop_confluent.py", "all confluent-kafka checks passed");
    check_compressed_on_disk(&mut b, "cc", &["gzip", "snappy", "lz4", "zstd"]);
}

#[test]
fn kafka_python() {
    let mut b = TestBroker::start(&[]);
    let out = run_script(&b, "interop_kafka_python.py", "all kafka-python checks passed");
    // The pinned venv has every codec library (python-snappy included).
    let skipped: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("skip ")).collect();
    assert!(skipped.is_empty(), "kafka-python skipped codecs: {skipped:?}\n{out}");
    check_compressed_on_disk(&mut b, "kp", &["gzip", "snappy", "lz4", "zstd"]);
}
