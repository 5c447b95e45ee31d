//! `sediment cleaner-status`: the broker's `/cleaner-status` for a person,
//! one line per compacted partition, or one partition with its last cleans.

use std::fmt::Write;

use anyhow::Context;

/// `sediment cleaner-status`: the endpoint's JSON as it is (`json`), or the
/// person's form; `partition` (TOPIC-PARTITION) keeps one partition and adds
/// its last cleans.
///
/// # Errors
/// The endpoint not reachable or not answering 200, malformed JSON, an
/// unknown partition.
pub fn cleaner_status(addr: &str, json: bool, partition: Option<&str>) -> anyhow::Result<String> {
    let (status, body) = super::http_get(addr, "/cleaner-status")?;
    anyhow::ensure!(status == 200, "{addr}/cleaner-status: HTTP {status}");
    let mut doc: serde_json::Value = serde_json::from_str(&body).context("the endpoint's JSON")?;
    if let Some(name) = partition {
        let parts = doc["manager"]["partitions"].as_array_mut().context("no partitions")?;
        parts.retain(|p| partition_name(p) == name);
        anyhow::ensure!(!parts.is_empty(), "no compacted partition {name} on this broker");
    }
    if json {
        return Ok(serde_json::to_string_pretty(&doc)? + "\n");
    }
    let mut out = render(&doc)?;
    if partition.is_some() {
        for p in doc["manager"]["partitions"].as_array().into_iter().flatten() {
            history(&mut out, p)?;
        }
    }
    Ok(out)
}

fn partition_name(p: &serde_json::Value) -> String {
    format!("{}-{}", p["topic"].as_str().unwrap_or("?"), p["partition"])
}

/// The last cleans of one partition, oldest first.
fn history(out: &mut String, p: &serde_json::Value) -> std::fmt::Result {
    let cleans = p["history"].as_array().cloned().unwrap_or_default();
    writeln!(out, "last {} clean(s) of {}, oldest first:", cleans.len(), partition_name(p))?;
    writeln!(
        out,
        "{:>14} {:>8} {:>12} {:>12} {:>10} {:>10} {:>9} {:>10} {:>8} {:>8}  MAP",
        "START-MS",
        "TOOK-MS",
        "READ-B",
        "WRITTEN-B",
        "READ-REC",
        "WRITE-REC",
        "KEYS",
        "TOMBSTONES",
        "ABORTED",
        "HORIZONS"
    )?;
    for c in &cleans {
        writeln!(
            out,
            "{:>14} {:>8} {:>12} {:>12} {:>10} {:>10} {:>9} {:>10} {:>8} {:>8}  {}",
            c["start_time_ms"].as_i64().unwrap_or(0),
            c["elapsed_ms"].as_i64().unwrap_or(0),
            c["bytes_read"].as_u64().unwrap_or(0),
            c["bytes_written"].as_u64().unwrap_or(0),
            c["records_read"].as_u64().unwrap_or(0),
            c["records_written"].as_u64().unwrap_or(0),
            c["keys_in_map"].as_u64().unwrap_or(0),
            c["tombstones_removed"].as_u64().unwrap_or(0),
            c["aborted_batches_removed"].as_u64().unwrap_or(0),
            c["horizons_stamped"].as_u64().unwrap_or(0),
            if c["map_filled"] == true { "filled" } else { "-" }
        )?;
    }
    Ok(())
}

/// A tiered partition's store: its segments and the store cleaner's measure.
fn store_line(out: &mut String, st: &serde_json::Value) -> std::fmt::Result {
    if !st.is_object() {
        return Ok(());
    }
    write!(
        out,
        "{:<32} store: {} segment(s), {} bytes, {} bytes only there (below offset {})",
        "",
        st["remote_segments"],
        st["remote_bytes"],
        st["store_only_bytes"],
        st["local_log_start_offset"]
    )?;
    let c = &st["cleaning"];
    if c.is_object() {
        write!(
            out,
            "; store clean point {}, store dirty ratio {:.3}, whole log {:.3}",
            c["clean_offset"],
            c["dirty_ratio"].as_f64().unwrap_or(0.0),
            st["tiered_dirty_ratio"].as_f64().unwrap_or(0.0)
        )?;
        if let Some(e) = c["last_error"].as_str() {
            write!(out, "; last store clean failed: {e}")?;
        }
    }
    writeln!(out)
}

/// Whether a partition is eligible (or why not), and in a cluster which
/// replica it is.
fn partition_status(p: &serde_json::Value) -> String {
    let status = if p["eligible"].as_bool() == Some(true) {
        "eligible".to_string()
    } else {
        format!("not eligible: {}", p["reason"].as_str().unwrap_or("?"))
    };
    match p["role"].as_str() {
        Some(role) => format!(
            "{status} ({role} at leader epoch {}, high watermark {})",
            p["leader_epoch"], p["high_watermark"]
        ),
        None => status,
    }
}

/// The person's form of the whole document.
fn render(doc: &serde_json::Value) -> anyhow::Result<String> {
    let m = &doc["manager"];
    let t = &doc["threads"];
    let mut out = String::new();
    writeln!(
        out,
        "cleaner: {} thread(s), {} dead; max-dirty-percent {}; last run {} ms ago; max compaction delay {} s",
        t["threads"], t["dead_thread_count"], m["max_dirty_percent"], m["time_since_last_run_ms"], m["max_compaction_delay_ms"].as_i64().unwrap_or(0) / 1000
    )?;
    if let Some(broker) = doc["broker"].as_i64() {
        writeln!(out, "broker {broker}'s replicas (each replica cleans its own copy)")?;
    }
    for d in m["log_dirs"].as_array().into_iter().flatten() {
        write!(
            out,
            "log dir {}: {} uncleanable partition(s), {} uncleanable bytes",
            d["log_dir"].as_str().unwrap_or("?"),
            d["uncleanable_partitions"],
            d["uncleanable_bytes"]
        )?;
        if let Some(cause) = d["offline_cause"].as_str() {
            write!(out, "; cleaning stopped: {cause}")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "{:<32} {:>6} {:>12} {:>12}  STATUS",
        "PARTITION", "DIRTY", "CLEANABLE", "FIRST-DIRTY"
    )?;
    let now = m["now_ms"].as_i64().unwrap_or(0);
    for p in m["partitions"].as_array().into_iter().flatten() {
        let name = format!("{}-{}", p["topic"].as_str().unwrap_or("?"), p["partition"]);
        let status = partition_status(p);
        writeln!(
            out,
            "{name:<32} {:>6.3} {:>12} {:>12}  {status}",
            p["dirty_ratio"].as_f64().unwrap_or(0.0),
            // as numbers: a JSON value's Display ignores the column width
            p["cleanable_bytes"].as_i64().unwrap_or(0),
            p["first_dirty_offset"].as_i64().unwrap_or(0)
        )?;
        store_line(&mut out, &p["store"])?;
        compaction_lines(&mut out, p, now)?;
        // An open transaction that bounds an otherwise cleanable log (when it
        // is why nothing is cleanable, the status above already says so).
        let open = &p["open_transaction"];
        if open.is_object() && p["ineligible"]["code"] != "open_transaction" {
            let age = open["age_ms"].as_i64().map_or("?".to_string(), |a| (a / 1000).to_string());
            let owner = match open["transactional_id"].as_str() {
                Some(id) => {
                    format!("transactional id {id:?} (producer id {})", open["producer_id"])
                }
                None => format!(
                    "producer id {} (no transactional id known for it)",
                    open["producer_id"]
                ),
            };
            writeln!(
                out,
                "{:<32} cleaning stops at the first unstable offset {}: {owner} has a transaction open there for {age}s",
                "", open["first_offset"]
            )?;
        }
        for r in p["tombstones_at_risk"].as_array().into_iter().flatten() {
            let secs = (r["earliest_horizon_ms"].as_i64().unwrap_or(now) - now) / 1000;
            writeln!(
                out,
                "{:<32} {}{} tombstone(s) at risk for group {} (committed offset {}): the first may go in {secs}s",
                "",
                if r["at_least"] == true { "at least " } else { "" },
                r["tombstones"],
                r["group"],
                r["committed_offset"]
            )?;
        }
        let last = &p["last_clean"];
        if last.is_object() {
            writeln!(
                out,
                "{:<32} last clean {:.1}s ago: offsets [{}, {}), {} -> {} bytes ({:.1}% smaller), {} -> {} records, {} tombstones removed, {} ms",
                "",
                (now - last["end_time_ms"].as_i64().unwrap_or(now)) as f64 / 1000.0,
                last["first_dirty_offset"],
                last["end_offset"],
                last["start_size"],
                last["end_size"],
                100.0 * last["size_reduction"].as_f64().unwrap_or(0.0),
                last["start_messages"],
                last["end_messages"],
                last["tombstones_removed"],
                last["elapsed_ms"]
            )?;
        }
    }
    Ok(out)
}

/// The lines of a partition's compaction rule, when not Kafka's: its
/// strategy, and what the last clean kept under the garbage ratio.
fn compaction_lines(out: &mut String, p: &serde_json::Value, now: i64) -> std::fmt::Result {
    if let Some(strategy) = p["compaction_strategy"].as_str().filter(|s| *s != "offset") {
        writeln!(
            out,
            "{:<32} compaction strategy {strategy}: each key keeps its highest-ranked copy; {} older copies outranked newer ones in the last clean",
            "",
            p["last_clean"]["clean_copies_won"].as_u64().unwrap_or(0)
        )?;
    }
    if p["min_segment_garbage_ratio"].as_f64().is_some_and(|r| r > 0.0) {
        let last = &p["last_clean"];
        let due = match p["stale_deadline_ms"].as_i64() {
            Some(d) if d <= now => "a clean for them is due now".to_string(),
            Some(d) => format!("the next is due in {}s", (d - now) / 1000),
            None => "none is due (they wait for the ratio)".to_string(),
        };
        writeln!(
            out,
            "{:<32} segment garbage ratio {}: the last clean kept {} segments, listed {} superseded copies and removed {} listed ones; {due}",
            "",
            p["min_segment_garbage_ratio"],
            last["segments_kept_under_ratio"].as_u64().unwrap_or(0),
            last["stale_copies_listed"].as_u64().unwrap_or(0),
            last["stale_copies_removed"].as_u64().unwrap_or(0),
        )?;
    }
    Ok(())
}
