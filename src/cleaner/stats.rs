//! `CleanerStats`: what one clean read, wrote and took, and the summary line
//! Kafka's `log-cleaner.log` carries for it (MB processed and MB/s, time in the
//! map and copy phases, buffer utilization, start and end size, % size
//! reduction, % fewer messages). The cleaner's thread metrics (`cleaner-recopy-percent`,
//! `max-buffer-utilization-percent`, `max-clean-time-secs`) read these fields.

/// Counters of one clean. Times are the injected clock's milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanerStats {
    /// Bytes read while building the offset map.
    pub map_bytes_read: u64,
    /// Records read while building the offset map.
    pub map_messages_read: u64,
    /// Distinct keys put into the map (after this clean's map phase).
    pub map_entries: u64,
    /// Keys the map could hold: `floor(slots × load factor)`.
    pub map_max_entries: u64,
    /// Share of the map's slots in use when the map phase ended.
    pub buffer_utilization: f64,
    /// Bytes read while recopying.
    pub bytes_read: u64,
    /// Bytes of batches the recopy dropped without reading them: the map
    /// pass had read them (`mapped_batches.rs`) and none of their records
    /// is its key's newest.
    pub bytes_dropped_unread: u64,
    /// Batches dropped that way, and their records (counted in
    /// `start_messages`, not in `messages_read`).
    pub batches_dropped_unread: u64,
    pub messages_dropped_unread: u64,
    /// Bytes written to cleaned segments.
    pub bytes_written: u64,
    /// Records read while recopying.
    pub messages_read: u64,
    /// Records written to cleaned segments.
    pub messages_written: u64,
    /// Records without a key found while recopying (dropped: a compacted log
    /// cannot say which is newest).
    pub invalid_messages_read: u64,
    /// Tombstones dropped because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Tombstones past their horizon kept for a consumer group that has not
    /// read them (the resurrection guard).
    pub tombstones_guarded: u64,
    /// Copies below the first dirty offset that outranked their key's
    /// mapped winner under a versioned compaction strategy (and so stayed,
    /// while every mapped copy of the key went).
    pub clean_copies_won: u64,
    /// Data batches of aborted transactions dropped whole.
    pub aborted_batches_removed: u64,
    /// Batches given a delete horizon by this clean (tombstones and markers
    /// seen by a clean for the first time).
    pub horizons_stamped: u64,
    /// The map filled before the end of the dirty range: this clean stopped
    /// early and the rest waits for the next one.
    pub map_filled: bool,
    /// Batches copied byte for byte.
    pub batches_copied: u64,
    /// Batches rewritten with fewer records or a new delete horizon.
    pub batches_rewritten: u64,
    /// Empty batches kept (a producer's last batch, or a segment's offset fence).
    pub empty_batches_retained: u64,
    /// Times a buffer grew past `log.cleaner.io.buffer.size` for a large batch.
    pub buffer_grows: u64,
    /// The latest delete horizon among the tombstones and markers this clean
    /// kept (stamped now or before): once it passes, a clean with nothing new
    /// to map would still shrink the log, so the manager schedules one then.
    pub latest_delete_horizon_ms: Option<i64>,
    /// Segments swapped out / cleaned segments swapped in.
    pub segments_replaced: u64,
    pub segments_written: u64,
    /// Segments kept as they were: their group was read and nothing in it
    /// changed (no record dropped, no horizon stamped, no batch rewritten),
    /// so nothing was written for it. Their bytes count in `bytes_read` and
    /// in `end_size`, not in `bytes_written`.
    pub segments_kept: u64,
    /// Segments of the clean region kept although some of their copies are
    /// superseded, their share under `sediment.compaction.min.segment.garbage.ratio`
    /// (also in `segments_kept`).
    pub segments_kept_under_ratio: u64,
    /// Bytes the survey of the clean region read (also in `bytes_read`).
    pub survey_bytes_read: u64,
    /// Superseded copies this clean listed in kept segments' `.stale` lists
    /// instead of removing them.
    pub stale_copies_listed: u64,
    /// Listed copies removed by a rewrite of their segment.
    pub stale_copies_removed: u64,
    /// Tombstones past their horizon kept one more clean because a list
    /// named their key.
    pub tombstones_held_for_stale: u64,
    /// When a clean is due for the kept lists: their earliest deadline, or
    /// now when a tombstone was held for one.
    pub stale_deadline_ms: Option<i64>,
    /// Bytes of changed groups that were forwarded unchanged before the
    /// group's first change, and copied into its `.cleaned` segment then
    /// (read a second time, from the source files; part of `bytes_written`).
    pub unchanged_bytes_copied: u64,
    /// Size of the cleaned range before and after.
    pub start_size: u64,
    pub end_size: u64,
    /// Records in the cleaned range before and after.
    pub start_messages: u64,
    pub end_messages: u64,
    pub start_ms: i64,
    pub map_complete_ms: i64,
    pub end_ms: i64,
}

const MB: f64 = 1024.0 * 1024.0;

fn per_sec(bytes: u64, ms: i64) -> f64 {
    if ms <= 0 {
        0.0
    } else {
        bytes as f64 / MB / (ms as f64 / 1000.0)
    }
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        100.0 * part / whole
    }
}

impl CleanerStats {
    pub fn elapsed_ms(&self) -> i64 {
        (self.end_ms - self.start_ms).max(0)
    }
    pub fn map_ms(&self) -> i64 {
        (self.map_complete_ms - self.start_ms).max(0)
    }
    pub fn copy_ms(&self) -> i64 {
        (self.end_ms - self.map_complete_ms).max(0)
    }
    /// Remember a delete horizon kept by this clean.
    pub fn note_delete_horizon(&mut self, horizon: Option<i64>) {
        if let Some(h) = horizon {
            self.latest_delete_horizon_ms =
                Some(self.latest_delete_horizon_ms.map_or(h, |l| l.max(h)));
        }
    }

    /// Bytes of the log the recopy went through: read, or dropped unread.
    pub fn recopy_bytes(&self) -> u64 {
        self.bytes_read + self.bytes_dropped_unread
    }

    /// A run of batches the recopy dropped unread (`bytes` long).
    pub(super) fn note_dropped_unread(
        &mut self,
        bytes: u64,
        run: super::mapped_batches::DroppedRun,
    ) {
        self.bytes_dropped_unread += bytes;
        self.batches_dropped_unread += run.batches;
        self.messages_dropped_unread += run.records;
        self.start_messages += run.records;
    }

    /// `cleaner-recopy-percent`: bytes written per byte of log the recopy
    /// went through ([`CleanerStats::recopy_bytes`]), as Kafka's, whose
    /// recopy reads every byte. A segment kept as it is counts as read and
    /// not written, so a clean that leaves most of the log untouched shows a
    /// low recopy percent; a batch dropped unread counts as gone through and
    /// not written, as it would had it been read.
    pub fn recopy_percent(&self) -> f64 {
        percent(self.bytes_written as f64, self.recopy_bytes() as f64)
    }

    /// Kafka's summary of a clean, for the log and for operators.
    pub fn summary(
        &self,
        cleaner_id: usize,
        partition: &str,
        first_dirty: i64,
        end_offset: i64,
    ) -> String {
        let total = self.map_bytes_read + self.bytes_read;
        let elapsed = self.elapsed_ms();
        let secs = |ms: i64| ms as f64 / 1000.0;
        format!(
            "Cleaner {cleaner_id}: cleaned log {partition} (dirty section = [{first_dirty}, {end_offset}])\n\
             \t{:.1} MB of log processed in {:.1} seconds ({:.1} MB/sec).\n\
             \tIndexed {:.1} MB in {:.1} seconds ({:.1} MB/sec, {:.1}% of total time)\n\
             \tBuffer utilization: {:.1}% ({} of {} keys)\n\
             \tCleaned {:.1} MB in {:.1} seconds ({:.1} MB/sec, {:.1}% of total time)\n\
             \tStart size: {:.1} MB ({} messages)\n\
             \tEnd size: {:.1} MB ({} messages)\n\
             \t{:.1}% size reduction ({:.1}% fewer messages){}",
            total as f64 / MB,
            secs(elapsed),
            per_sec(total, elapsed),
            self.map_bytes_read as f64 / MB,
            secs(self.map_ms()),
            per_sec(self.map_bytes_read, self.map_ms()),
            percent(self.map_ms() as f64, elapsed as f64),
            100.0 * self.buffer_utilization,
            self.map_entries,
            self.map_max_entries,
            self.bytes_read as f64 / MB,
            secs(self.copy_ms()),
            per_sec(self.bytes_read, self.copy_ms()),
            percent(self.copy_ms() as f64, elapsed as f64),
            self.start_size as f64 / MB,
            self.start_messages,
            self.end_size as f64 / MB,
            self.end_messages,
            percent(self.start_size.saturating_sub(self.end_size) as f64, self.start_size as f64),
            percent(self.start_messages.saturating_sub(self.end_messages) as f64, self.start_messages as f64),
            self.dropped_unread_line(),
        )
    }

    /// A line for the batches the recopy dropped unread, when there were any.
    fn dropped_unread_line(&self) -> String {
        if self.batches_dropped_unread == 0 {
            return String::new();
        }
        format!(
            "\n\tDropped unread: {:.1} MB ({} batches, {} messages) with no key's newest record",
            self.bytes_dropped_unread as f64 / MB,
            self.batches_dropped_unread,
            self.messages_dropped_unread,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_has_kafkas_fields() {
        let s = CleanerStats {
            map_bytes_read: 10 << 20,
            bytes_read: 20 << 20,
            bytes_written: 5 << 20,
            buffer_utilization: 0.5,
            map_entries: 50,
            map_max_entries: 90,
            start_size: 20 << 20,
            end_size: 5 << 20,
            start_messages: 1000,
            end_messages: 250,
            start_ms: 0,
            map_complete_ms: 1000,
            end_ms: 3000,
            ..Default::default()
        };
        let text = s.summary(0, "t-0", 5, 99);
        assert!(text.contains("30.0 MB of log processed in 3.0 seconds (10.0 MB/sec)"), "{text}");
        assert!(text.contains("Buffer utilization: 50.0%"), "{text}");
        assert!(text.contains("75.0% size reduction (75.0% fewer messages)"), "{text}");
        assert!(text.contains("dirty section = [5, 99]"), "{text}");
        assert_eq!(s.recopy_percent(), 25.0);
        assert_eq!(CleanerStats::default().recopy_percent(), 0.0);
        assert!(!text.contains("Dropped unread"), "{text}");

        // Batches dropped unread count as gone through, not as read.
        let mut d = s.clone();
        d.bytes_read = 5 << 20;
        let run = crate::cleaner::mapped_batches::DroppedRun {
            end_position: 0,
            batches: 30,
            records: 600,
        };
        d.note_dropped_unread(15 << 20, run);
        assert_eq!(d.recopy_bytes(), 20 << 20);
        assert_eq!(d.recopy_percent(), 25.0);
        assert_eq!(d.start_messages, 1600);
        let text = d.summary(0, "t-0", 5, 99);
        assert!(text.contains("Cleaned 5.0 MB"), "{text}");
        assert!(text.contains("Dropped unread: 15.0 MB (30 batches, 600 messages)"), "{text}");
    }
}
