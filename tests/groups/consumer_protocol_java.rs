//! The consumer group protocol (KIP-848) with Apache Kafka 4.1.2's Java
//! client (`group.protocol=consumer`, tests/java/ConsumerProtocolMember.java)
//! and tools, on one broker start:
//!
//! * three members share six partitions, two each;
//! * one leaves: the other two take over all six without a stop-the-world
//!   pause (their rebalance listeners never revoke a partition they keep);
//! * `kafka-consumer-groups --describe` shows the group, its members and
//!   their assignment; `--list` shows it next to a classic group;
//! * committed offsets and the membership survive a broker SIGKILL;
//! * Kafka's `kafka-dump-log --offsets-decoder` reads the consumer group
//!   records sediment wrote; an empty group is deleted with `--delete`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::broker::{
    console_produce_keyed, create_topic, kafka_tool, repo_root, AnyBroker, TestBroker,
};

const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

/// A running Java test program (a member of a group) and the lines it
/// printed so far; killed when dropped.
pub(crate) struct Member {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
}

impl Member {
    fn start(bootstrap: &str, name: &str) -> Self {
        Self::spawn("ConsumerProtocolMember.java", &[bootstrap, "kip848", "orders", name], name)
    }

    /// Run `tests/java/<program>` with `args`, as member `name`.
    pub(crate) fn spawn(program: &str, args: &[&str], name: &str) -> Self {
        let program = repo_root().join("tests/java").join(program);
        let mut child = Command::new("bash")
            .arg(repo_root().join("scripts/kafka-tool.sh"))
            .arg(program)
            .args(args)
            .env("KAFKA_HEAP_OPTS", "-Xmx192m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("scripts/kafka-tool.sh (needs Java 17 and Maven)");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let err = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Self { name: name.to_string(), child, lines, stderr }
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The partitions of its last "owned" line.
    fn owned(&self) -> Option<Vec<i32>> {
        let lines = self.lines();
        let last = lines.iter().rev().find_map(|l| l.strip_prefix("owned"))?;
        Some(last.split(',').filter_map(|p| p.trim().parse().ok()).collect())
    }

    /// Partitions named by "revoked" lines from line `from` on.
    fn revoked_since(&self, from: usize) -> Vec<i32> {
        self.lines()[from..]
            .iter()
            .filter_map(|l| l.strip_prefix("revoked"))
            .flat_map(|ps| {
                ps.split(',').filter_map(|p| p.trim().parse().ok()).collect::<Vec<i32>>()
            })
            .collect()
    }

    fn consumed(&self) -> u64 {
        self.lines()
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("consumed ").and_then(|n| n.parse().ok()))
            .unwrap_or(0)
    }

    pub(crate) fn stop(&mut self) {
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = stdin.write_all(b"stop\n");
        }
    }

    pub(crate) fn report(&self) -> String {
        format!(
            "{}:\n{}\nstderr:\n{}",
            self.name,
            self.lines().join("\n"),
            self.stderr.lock().unwrap()
        )
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn wait_until(
    secs: u64,
    what: &str,
    members: &[&Member],
    b: &impl AnyBroker,
    mut ok: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        if Instant::now() > deadline {
            let reports: Vec<String> = members.iter().map(|m| m.report()).collect();
            panic!("timed out waiting for {what}\n{}\nbroker:\n{}", reports.join("\n"), b.log());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn groups(b: &TestBroker, args: &[&str]) -> String {
    let bs = b.bootstrap();
    let mut all = vec!["--bootstrap-server", bs.as_str()];
    all.extend_from_slice(args);
    kafka_tool(b, GROUPS, &all, None)
}

/// Rows of `--describe` for group kip848: (partition, current offset, log end offset).
fn offsets(describe: &str) -> Vec<(i32, String, String)> {
    let mut rows: Vec<(i32, String, String)> = describe
        .lines()
        .filter(|l| l.starts_with("kip848 "))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.get(2)?.parse().ok()?, f.get(3)?.to_string(), f.get(4)?.to_string()))
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn java_consumers_with_the_consumer_protocol() {
    let mut b = TestBroker::start(&[
        "offsets.topic.num.partitions=5",
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=1000",
    ]);
    let bs = b.bootstrap();
    create_topic(b.port, "orders", 6, &[]);
    let input: String = (0..60).map(|i| format!("k{i}:v{i}\n")).collect();
    console_produce_keyed(&b, "orders", ":", &input);

    let mut members: Vec<Member> =
        ["m1", "m2", "m3"].iter().map(|n| Member::start(&bs, n)).collect();
    {
        let refs: Vec<&Member> = members.iter().collect();
        wait_until(120, "three members with two partitions each", &refs, &b, || {
            let owned: Vec<Vec<i32>> = members.iter().filter_map(Member::owned).collect();
            let mut all: Vec<i32> = owned.iter().flatten().copied().collect();
            all.sort();
            owned.len() == 3
                && owned.iter().all(|o| o.len() == 2)
                && all == (0..6).collect::<Vec<_>>()
        });
        wait_until(60, "all 60 records consumed", &refs, &b, || {
            members.iter().map(Member::consumed).sum::<u64>() == 60
        });
    }
    let members_view = groups(&b, &["--describe", "--group", "kip848", "--members"]);
    for m in ["m1", "m2", "m3"] {
        assert!(
            members_view
                .lines()
                .any(|l| l.starts_with("kip848 ") && l.contains(m) && l.contains(" 2 ")),
            "{m} with 2 partitions in\n{members_view}"
        );
    }

    // m3 leaves; m1 and m2 keep theirs and take m3's, revoking nothing.
    let kept: Vec<(usize, Vec<i32>)> =
        members[..2].iter().map(|m| (m.lines().len(), m.owned().unwrap_or_default())).collect();
    let mut leaving = members.pop().expect("m3");
    leaving.stop();
    {
        let refs: Vec<&Member> = members.iter().chain([&leaving]).collect();
        wait_until(60, "m3 closed", &refs, &b, || leaving.lines().iter().any(|l| l == "closed"));
        wait_until(60, "two members with three partitions each", &refs, &b, || {
            members.iter().all(|m| m.owned().is_some_and(|o| o.len() == 3))
        });
    }
    for (m, (from, before)) in members.iter().zip(&kept) {
        let owned = m.owned().unwrap_or_default();
        assert!(before.iter().all(|p| owned.contains(p)), "{}", m.report());
        assert_eq!(m.revoked_since(*from), Vec::<i32>::new(), "{}", m.report());
        assert!(!m.lines().iter().any(|l| l.starts_with("lost")), "{}", m.report());
    }
    let describe = groups(&b, &["--describe", "--group", "kip848"]);
    let rows = offsets(&describe);
    assert_eq!(rows.len(), 6, "{describe}");
    assert!(rows.iter().all(|(_, current, end)| current == end), "{describe}");
    let state = groups(&b, &["--describe", "--group", "kip848", "--state"]);
    assert!(state.contains("Stable") && state.contains("uniform"), "{state}");

    // A broker crash: offsets and the membership come back from the log.
    let before_kill = rows;
    b.kill();
    b.restart();
    let after = groups(&b, &["--describe", "--group", "kip848"]);
    assert_eq!(offsets(&after), before_kill, "{after}\n{}", b.log());
    {
        let refs: Vec<&Member> = members.iter().collect();
        wait_until(60, "the two members still stable after the restart", &refs, &b, || {
            let view = groups(&b, &["--describe", "--group", "kip848", "--members"]);
            view.lines().filter(|l| l.starts_with("kip848 ") && l.contains(" 3 ")).count() == 2
        });
    }
    for m in &members {
        assert!(!m.lines().iter().any(|l| l.starts_with("lost")), "{}", m.report());
    }

    let list = groups(&b, &["--list", "--type"]);
    assert!(list.lines().any(|l| l.starts_with("kip848") && l.contains("Consumer")), "{list}");

    for m in members.iter_mut() {
        m.stop();
    }
    {
        let refs: Vec<&Member> = members.iter().collect();
        wait_until(60, "members closed", &refs, &b, || {
            members.iter().all(|m| m.lines().iter().any(|l| l == "closed"))
        });
    }
    let state = groups(&b, &["--describe", "--group", "kip848", "--state"]);
    assert!(state.contains("Empty"), "{state}");
    let deleted = groups(&b, &["--delete", "--group", "kip848"]);
    assert!(deleted.contains("was successful"), "{deleted}");

    // Kafka's decoder reads the consumer group records and their tombstones.
    // "kip848".hashCode() = -1131286358; 1131286358 % 5 = 3.
    b.stop();
    let segment = b.data_dir().join("__consumer_offsets-3/00000000000000000000.log");
    let dump = kafka_tool(
        &b,
        "kafka.tools.DumpLogSegments",
        &["--offsets-decoder", "--files", segment.to_str().unwrap()],
        None,
    );
    for expected in [
        r#"key: {"type":"3","data":{"groupId":"kip848"}} payload: {"version":"0","data":{"epoch":"#,
        r#"key: {"type":"4","data":{"groupId":"kip848"}} payload: {"version":"0","data":{"topics":[{"topicId":"#,
        r#"key: {"type":"6","data":{"groupId":"kip848"}} payload: {"version":"0","data":{"assignmentEpoch":"#,
        r#"{"type":"3","data":{"groupId":"kip848"}} payload: <DELETE>"#,
        r#"{"type":"1","data":{"group":"kip848","topic":"orders","partition":0}} payload: {"version":"3""#,
    ] {
        assert!(dump.contains(expected), "{expected} not in\n{dump}");
    }
    for member_key in ["\"type\":\"5\"", "\"type\":\"7\"", "\"type\":\"8\""] {
        assert!(dump.contains(member_key), "{member_key} not in\n{dump}");
    }
    assert!(!dump.contains("Unknown") && !dump.contains("Error"), "{dump}");
}
