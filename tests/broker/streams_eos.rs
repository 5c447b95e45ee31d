//! Kafka Streams' `exactly_once_v2` count app (tests/java/StreamsEosCount.java)
//! as the single node's and the cluster's tests run it: the program, the
//! exact output it must print, and the app started in the background.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{kafka_tool, repo_root, Reaper, TestBroker};

/// The app counts per key over this many keys, k0..k3.
pub const KEYS: usize = 4;

pub fn program() -> String {
    repo_root().join("tests/java/StreamsEosCount.java").display().to_string()
}

/// The lines "k0=1,2,...,n" .. "k3=..." for `records` inputs spread
/// round-robin over the keys.
pub fn exact_counts(records: usize) -> Vec<String> {
    (0..KEYS)
        .map(|k| {
            let n = records / KEYS + usize::from(k < records % KEYS);
            let counts: Vec<String> = (1..=n).map(|c| c.to_string()).collect();
            format!("k{k}={}", counts.join(","))
        })
        .collect()
}

/// Checks the output of `count` or `steady` mode; returns the aborted records.
pub fn check_output(b: &TestBroker, out: &str, records: usize) -> u64 {
    let lines: Vec<&str> = out.lines().collect();
    let mut want = exact_counts(records);
    want.extend([
        "changelog cleanup.policy=compact".to_string(),
        format!("words committed={records}"),
        "counts has markers=true".to_string(),
    ]);
    assert!(lines.len() >= want.len(), "output:\n{out}\nbroker log:\n{}", b.log());
    assert_eq!(lines[..want.len()], want, "output:\n{out}\nbroker log:\n{}", b.log());
    let aborted = lines.get(want.len()).and_then(|l| l.strip_prefix("aborted records="));
    aborted.and_then(|a| a.parse().ok()).unwrap_or_else(|| panic!("aborted records in\n{out}"))
}

/// Runs the app in `count` mode on `bootstrap` and checks its findings;
/// returns the number of output records only read_uncommitted sees.
pub fn count_and_check(b: &TestBroker, bootstrap: &str, state: &str, records: usize) -> u64 {
    let n = records.to_string();
    let out = kafka_tool(b, &program(), &[bootstrap, state, &n, "count"], None);
    check_output(b, &out, records)
}

/// The app with `args` after the program, `env` added, in the background,
/// its stdout and stderr written to `out` and `err`.
pub fn spawn(args: &[&str], env: &[(&str, &str)], out: &Path, err: &Path) -> Reaper {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/kafka-tool.sh"))
        .arg(program())
        .args(args)
        .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).expect("stdout file"))
        .stderr(std::fs::File::create(err).expect("stderr file"));
    Reaper(cmd.spawn().expect("scripts/kafka-tool.sh (needs Java 17 and Maven)"))
}
