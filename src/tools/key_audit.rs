//! `sediment key-audit`: where every copy of a key still lives in a compacted
//! partition and when compaction guarantees the old ones gone — from a
//! running broker's `/key-audit`, or from a stopped broker's data dir.
//!
//! Offline (`--data-dir`), the audit opens the partition's `.log` files
//! read-only and takes no lock; it reads the cleaner checkpoint, the log
//! start checkpoint and the topic's `topic.properties` as the broker would,
//! over the broker config given (or the defaults). Open transactions are not
//! known offline (the producer state is the broker's), so no copy is placed
//! in the `open_transaction` region there.
//!
//! Exit codes are part of the interface (scripts check them): see [`Failure`].

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::cleaner::key_audit::{
    audit, CleanerView, KeyAudit, PartitionView, SegmentFile, StorePart,
};
use crate::cleaner::CleanerOffsetCheckpoint;
use crate::config::BrokerConfig;
use crate::log::checkpoint::{OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT};
use crate::log::config::LogConfig;
use crate::log::topic_partition::default_partition;
use crate::log::TopicPartition;

/// Why the audit gave no answer, each with its own exit code.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Exit 3.
    #[error("{0}")]
    UnknownTopicOrPartition(String),
    /// Exit 5.
    #[error("{0}")]
    Unreadable(String),
    /// Exit 6.
    #[error("{0}")]
    Unreachable(String),
    /// Exit 7.
    #[error("{0}")]
    NotCompacted(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::UnknownTopicOrPartition(_) => 3,
            Self::Unreadable(_) => 5,
            Self::Unreachable(_) => 6,
            Self::NotCompacted(_) => 7,
        }
    }
}

/// Exit code of a finished audit whose key has no copy at all.
pub const ABSENT_EXIT_CODE: u8 = 4;

/// The audit as the broker's `/key-audit` serves it (the JSON text).
///
/// # Errors
/// The broker not reachable, or its error document, as a [`Failure`].
pub fn from_broker(
    metrics: &str,
    topic: &str,
    key: &str,
    partition: Option<i32>,
) -> Result<String, Failure> {
    let mut path = String::from("/key-audit?");
    {
        let mut q = form_urlencoded::Serializer::new(&mut path);
        q.append_pair("topic", topic).append_pair("key", key);
        if let Some(p) = partition {
            q.append_pair("partition", &p.to_string());
        }
    }
    let (status, body) =
        super::http_get(metrics, &path).map_err(|e| Failure::Unreachable(format!("{e:#}")))?;
    if status == 200 {
        return Ok(body);
    }
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let message = doc["error"].as_str().unwrap_or(&body).to_string();
    Err(match doc["code"].as_str() {
        Some("unknown_topic" | "unknown_partition") => Failure::UnknownTopicOrPartition(message),
        Some("not_compacted") => Failure::NotCompacted(message),
        Some("io_error" | "corrupt_segment") => Failure::Unreadable(message),
        _ => Failure::Unreachable(format!("{metrics}{path}: HTTP {status}: {message}")),
    })
}

/// The audit of a stopped broker's data dir (one log dir).
///
/// # Errors
/// Unknown topic or partition, a topic that is not compacted, unreadable or
/// corrupt files.
pub fn from_data_dir(
    data_dir: &Path,
    config: &BrokerConfig,
    topic: &str,
    key: &str,
    partition: Option<i32>,
) -> Result<KeyAudit, Failure> {
    let count = partitions_of(data_dir, topic)?;
    let partition = partition.unwrap_or_else(|| default_partition(key.as_bytes(), count));
    if !(0..count).contains(&partition) {
        return Err(Failure::UnknownTopicOrPartition(format!(
            "topic {topic:?} has no partition {partition} in {} (it has {count})",
            data_dir.display()
        )));
    }
    let tp = TopicPartition::new(topic, partition);
    let dir = data_dir.join(tp.to_string());
    let unreadable = |what: &str, e: &dyn std::fmt::Display| {
        Failure::Unreadable(format!("{}: {what}: {e}", dir.display()))
    };
    let overrides = match std::fs::read_to_string(dir.join(crate::log::manager::TOPIC_CONFIG_FILE))
    {
        Ok(text) => LogConfig::parse_properties(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
        Err(e) => return Err(unreadable("topic.properties", &e)),
    };
    let log_config = LogConfig::resolve(&config.topic_defaults(), overrides)
        .map_err(|e| unreadable("topic config", &e))?;
    if !log_config.compact {
        return Err(Failure::NotCompacted(format!(
            "topic {topic:?} is not compacted: its records leave by retention, not by compaction"
        )));
    }
    let segments = segment_files(&dir).map_err(|e| unreadable("segments", &e))?;
    let checkpoint = CleanerOffsetCheckpoint::new(data_dir)
        .read()
        .map_err(|e| unreadable("cleaner-offset-checkpoint", &e))?
        .get(&tp)
        .copied();
    let log_start = OffsetCheckpointFile::new(data_dir, LOG_START_OFFSET_CHECKPOINT)
        .read()
        .ok()
        .and_then(|m| m.get(&tp).copied())
        .or_else(|| segments.first().map(|s| s.base_offset))
        .unwrap_or(0);
    let cleaner_config = config.cleaner_config();
    // Offsets below the first local segment are only in the object store
    // (tiered storage's local retention deleted their files).
    let local_start = segments.first().map_or(log_start, |s| s.base_offset);
    let store = (log_config.remote_storage_enable && log_start < local_start).then(|| StorePart {
        offsets: log_start..local_start,
        segments: Err(
            "an audit of a data dir does not read the object store: ask the running broker".into(),
        ),
        state: None,
    });
    let view = PartitionView {
        topic_partition: tp,
        segments,
        log_start_offset: log_start,
        checkpoint,
        first_unstable_offset: None,
        max_batch_size: log_config.max_message_bytes.max(i32::MAX as usize / 2),
        config: log_config,
        cleaner: CleanerView {
            enabled: cleaner_config.enable,
            backoff_ms: cleaner_config.backoff_ms,
            blocked: None,
        },
        store,
    };
    let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
    audit(&view, key.as_bytes(), now, None).map_err(|e| Failure::Unreadable(e.to_string()))
}

/// How many partitions `topic` has in `data_dir` (its `<topic>-<n>` dirs).
fn partitions_of(data_dir: &Path, topic: &str) -> Result<i32, Failure> {
    let entries = std::fs::read_dir(data_dir).map_err(|e| {
        Failure::Unreadable(format!("cannot read the data dir {}: {e}", data_dir.display()))
    })?;
    let prefix = format!("{topic}-");
    let count = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix)?.parse::<i32>().ok())
        .filter(|p| *p >= 0)
        .map(|p| p + 1)
        .max()
        .unwrap_or(0);
    if count == 0 {
        return Err(Failure::UnknownTopicOrPartition(format!(
            "unknown topic {topic:?}: no {topic}-<partition> directory in {}",
            data_dir.display()
        )));
    }
    Ok(count)
}

/// The partition's `<base offset>.log` files, oldest first, opened read-only.
fn segment_files(dir: &Path) -> std::io::Result<Vec<SegmentFile>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path: PathBuf = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let Some(base) = path.file_stem().and_then(|s| s.to_str()?.parse::<i64>().ok()) else {
            continue;
        };
        let file = std::fs::File::open(&path)?;
        let size = file.metadata()?.len();
        out.push(SegmentFile { path, base_offset: base, size, file });
    }
    out.sort_by_key(|s| s.base_offset);
    Ok(out)
}

/// The audit for a person.
pub fn render(a: &serde_json::Value) -> String {
    let mut out = String::new();
    let now = a["now_ms"].as_i64().unwrap_or(0);
    let when = |t: &serde_json::Value| match t.as_i64() {
        Some(t) => format!("by {} (in {})", t, human_ms(t - now)),
        None => "no guarantee".to_string(),
    };
    let r = &a["regions"];
    let _ = writeln!(
        out,
        "key {:?} in {}-{}: log [{}, {}), first dirty {}, first uncleanable {}, active segment {}, dirty ratio {:.3}",
        a["key"].as_str().unwrap_or(""),
        a["topic"].as_str().unwrap_or("?"),
        a["partition"],
        r["log_start_offset"],
        r["log_end_offset"],
        r["first_dirty_offset"],
        r["first_uncleanable_offset"],
        r["active_segment_base_offset"],
        r["dirty_ratio"].as_f64().unwrap_or(0.0)
    );
    let strategy = a["config"]["compaction_strategy"].as_str().unwrap_or("offset");
    if strategy != "offset" {
        let _ = writeln!(
            out,
            "compaction strategy {strategy}: the copy with the highest (version, offset) is the newest"
        );
    }
    let _ = writeln!(
        out,
        "{:>12}  {:<26} {:>14} {:>10}  {:<18} STATUS",
        "OFFSET", "SEGMENT", "TIMESTAMP", "VALUE", "REGION"
    );
    for c in a["copies"].as_array().into_iter().flatten() {
        let value = match c["value_bytes"].as_u64() {
            Some(n) => format!("{n} B"),
            None => "tombstone".to_string(),
        };
        let status = if c["superseded"].as_bool() == Some(true) || c["tombstone"] == true {
            let kind = match (c["superseded"] == true, c["listed_stale"] == true) {
                (true, true) => "superseded, listed in a segment kept under the garbage ratio",
                (true, false) => "superseded",
                _ => "tombstone",
            };
            match c["no_guarantee"].as_str() {
                Some(why) => format!("{kind}, gone: no guarantee: {why}"),
                None => format!("{kind}, gone {}", when(&c["gone_by_ms"])),
            }
        } else {
            "newest".to_string()
        };
        let status = match c["version"].as_i64() {
            Some(i64::MIN) => format!("{status} (no version)"),
            Some(v) => format!("{status} (version {v})"),
            None => status,
        };
        let _ = writeln!(
            out,
            "{:>12}  {:<26} {:>14} {:>10}  {:<18} {status}",
            c["offset"].as_i64().unwrap_or(-1),
            c["segment"].as_str().unwrap_or("?"),
            c["timestamp_ms"].as_i64().unwrap_or(-1),
            value,
            c["region"].as_str().unwrap_or("?")
        );
    }
    let verdict = a["verdict"].as_str().unwrap_or("?");
    let detail = match (verdict, a["no_guarantee"].as_str()) {
        ("pending", Some(why)) => format!(": no guarantee: {why}"),
        ("pending", None) => {
            format!(": every superseded copy gone {}", when(&a["guaranteed_by_ms"]))
        }
        ("absent", _) => ": no copy of the key in this partition".to_string(),
        ("incomplete", _) => ": the store's part was not read (below)".to_string(),
        _ => String::new(),
    };
    let _ = writeln!(out, "verdict: {verdict}{detail}");
    let _ = writeln!(out, "read {} bytes of {} segment(s)", a["bytes_read"], a["segments_read"]);
    let st = &a["store"];
    if st.is_object() {
        let range = format!("[{}, {})", st["first_offset"], st["end_offset"]);
        let _ = match st["not_read"].as_str() {
            Some(why) => writeln!(
                out,
                "store: offsets {range} are only in the object store and were not read ({why}): the copies and verdict above cover the local log only"
            ),
            None => writeln!(
                out,
                "store: offsets {range} only in the object store: read {} bytes of {} segment(s)",
                st["bytes_read"], st["segments_read"]
            ),
        };
    }
    out
}

fn human_ms(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}
