//! kcat (Debian's package, librdkafka 2.0: the non-flexible request versions)
//! against the real broker: keyed produce with `-K:`, a tombstone with `-Z`,
//! metadata with `-L`, offsets with `-Q`, consume with `-C -e` printing key,
//! value and offset, and every compression codec, checked on disk with
//! `sediment dump-log` so a client that quietly fell back to uncompressed
//! batches fails the test.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::broker::{dump_log, TestBroker};

/// Run kcat against `b` with `stdin` as input; panics with both outputs and
/// the broker's log unless it exits 0 without reporting an error.
fn kcat(b: &TestBroker, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("kcat")
        .arg("-b")
        .arg(b.bootstrap())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("kcat is not runnable ({e}); scripts/test.sh installs it"));
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("kcat stdin");
    let out = child.wait_with_output().expect("kcat");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // kcat reports failed deliveries and client errors on stderr ("% ERROR: ...",
    // "% Delivery failed ...") and does not always exit non-zero for them.
    let complained =
        stderr.lines().any(|l| l.contains("ERROR") || l.contains("failed") || l.contains("Failed"));
    assert!(
        out.status.success() && !complained,
        "kcat {args:?} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}\nbroker log:\n{}",
        out.status,
        b.log()
    );
    stdout
}

const FORMAT: &str = "key=%k value=%s partition=%p offset=%o\n";

#[test]
fn keyed_produce_tombstone_metadata_and_consume() {
    let b = TestBroker::start(&["num.partitions=3"]);

    // Keyed records to partition 0; "k1:" has an empty value, which -Z sends
    // as NULL: a tombstone. The topic is auto-created with num.partitions.
    kcat(&b, &["-P", "-t", "orders", "-p", "0", "-K:", "-Z"], "k1:v1\nk2:v2\nk1:\nk3:v3\n");
    kcat(&b, &["-P", "-t", "orders", "-p", "2", "-K:"], "k9:on-two\n");

    let metadata = kcat(&b, &["-L"], "");
    assert!(metadata.contains(" 1 brokers:\n"), "{metadata}");
    assert!(
        metadata.contains(&format!("  broker 1 at {} (controller)\n", b.bootstrap())),
        "{metadata}"
    );
    assert!(metadata.contains("  topic \"orders\" with 3 partitions:\n"), "{metadata}");
    for p in 0..3 {
        assert!(
            metadata.contains(&format!("    partition {p}, leader 1, replicas: 1, isrs: 1\n")),
            "{metadata}"
        );
    }
    assert!(!metadata.contains("err"), "no partition or topic error expected:\n{metadata}");

    // -Z prints a NULL value as "NULL" (an empty value would print nothing).
    let records = kcat(&b, &["-C", "-t", "orders", "-p", "0", "-e", "-Z", "-f", FORMAT], "");
    assert_eq!(
        records,
        "key=k1 value=v1 partition=0 offset=0\n\
         key=k2 value=v2 partition=0 offset=1\n\
         key=k1 value=NULL partition=0 offset=2\n\
         key=k3 value=v3 partition=0 offset=3\n"
    );

    // All partitions: the record sent to partition 2 is there and only there.
    let all = kcat(&b, &["-C", "-t", "orders", "-e", "-Z", "-f", FORMAT], "");
    let mut lines: Vec<&str> = all.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "key=k1 value=NULL partition=0 offset=2",
            "key=k1 value=v1 partition=0 offset=0",
            "key=k2 value=v2 partition=0 offset=1",
            "key=k3 value=v3 partition=0 offset=3",
            "key=k9 value=on-two partition=2 offset=0",
        ]
    );

    // Starting in the middle (-o 1) and ListOffsets through -Q.
    let tail =
        kcat(&b, &["-C", "-t", "orders", "-p", "0", "-o", "1", "-e", "-Z", "-f", "%k@%o\n"], "");
    assert_eq!(tail, "k2@1\nk1@2\nk3@3\n");
    let end = kcat(&b, &["-Q", "-t", "orders:0:-1"], "");
    assert_eq!(end.trim(), "orders [0] offset 4");
    let earliest = kcat(&b, &["-Q", "-t", "orders:0:0"], "");
    assert_eq!(earliest.trim(), "orders [0] offset 0", "the first record at or after timestamp 0");
    let empty = kcat(&b, &["-Q", "-t", "orders:1:-1"], "");
    assert_eq!(empty.trim(), "orders [1] offset 0");
}

#[test]
fn every_codec_is_produced_compressed_and_read_back() {
    let mut b = TestBroker::start(&[]);
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    // Repetitive values: librdkafka sends a batch uncompressed when compressing
    // does not make it smaller, which would make this test meaningless.
    let value = |codec: &str, i: usize| format!("{codec}-{i}-{}", "sediment ".repeat(30));
    for codec in codecs {
        let input: String = (0..20).map(|i| format!("key{i}:{}\n", value(codec, i))).collect();
        kcat(&b, &["-P", "-t", &format!("z-{codec}"), "-K:", "-z", codec], &input);
    }
    for codec in codecs {
        let got = kcat(&b, &["-C", "-t", &format!("z-{codec}"), "-e", "-f", "%k=%s@%o\n"], "");
        let want: String = (0..20).map(|i| format!("key{i}={}@{i}\n", value(codec, i))).collect();
        assert_eq!(got, want, "{codec} read back");
    }

    // On disk every batch carries the codec the producer was asked for.
    assert!(b.stop().success(), "clean shutdown; log:\n{}", b.log());
    for codec in codecs {
        let segment = b.data_dir().join(format!("z-{codec}-0")).join("00000000000000000000.log");
        let dump = dump_log(&segment);
        let batches: Vec<&str> = dump.lines().filter(|l| l.starts_with("baseOffset:")).collect();
        assert!(!batches.is_empty(), "{dump}");
        let records: u64 = batches
            .iter()
            .map(|l| {
                l.split("count: ")
                    .nth(1)
                    .and_then(|s| s.split(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .expect("count")
            })
            .sum();
        assert_eq!(records, 20, "{dump}");
        assert!(
            batches.iter().all(|l| l.contains(&format!("compresscodec: {codec} "))),
            "every {codec} batch compressed with {codec}:\n{dump}"
        );
    }
}
