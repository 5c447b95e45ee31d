//! Fetch below the local log: a partition whose fetch offset is at or above
//! its log start and below its local log start (its oldest segments exist
//! only in the store) is read from the store by `remote::reader`.
//!
//! As Kafka (4.0) does, one such partition is read from the store per
//! request, the first in request order, before the local reads and without
//! a log lock held while the store or the cache works; its data (or its
//! error) makes the fetch answer at once, without the long-poll wait. The
//! wait for the store is bounded by `remote.fetch.max.wait.ms`: past it the
//! partition answers no records this time, the local partitions are answered,
//! and the download goes on (the cache's task) for the client's next fetch. Other
//! partitions below their local start answer no records and no error this
//! time (the client asks again), and every local partition is read as
//! usual. A store that fails, or an object that fails its check, is that
//! partition's error only (`error::remote_read_error_code`); the rest of the
//! response is unaffected.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, PartitionData};
use kafka_protocol::messages::FetchRequest;

use super::error::{error_code, remote_read_error_code};
use super::fetch::FetchAccess;
use crate::api::KafkaApis;
use crate::log::{FetchIsolation, Log, TopicPartition};
use crate::remote::reader::{RemoteFetch, RemoteRange, RemoteReadError};

/// What the store gave for a partition.
#[derive(Debug)]
pub(super) enum StoreRead {
    Data(RemoteFetch),
    /// The store has no batch at or after the offset below the local start:
    /// the local log answers (from its first batch).
    Nothing,
    /// Not within `remote.fetch.max.wait.ms`: no records this time; the
    /// download goes on and a later fetch finds the segment in the cache.
    Pending,
    Failed(RemoteReadError),
}

/// The one partition of a request read from the store, and what it got.
#[derive(Debug)]
pub(super) struct RemotePart {
    pub topic: usize,
    pub partition: usize,
    pub read: StoreRead,
}

impl RemotePart {
    /// Whether it answers the fetch at once (data, an error, or the wait spent).
    pub fn answers(&self) -> bool {
        !matches!(self.read, StoreRead::Nothing)
    }
}

/// Whether `offset` of `log` is below the local log, in the store only.
pub(super) fn below_local(log: &Log, offset: i64) -> bool {
    offset >= log.log_start_offset() && offset < log.local_log_start_offset()
}

/// Read the request's first partition below its local start from the store.
pub(super) async fn read_first(
    broker: &KafkaApis,
    request: &FetchRequest,
    version: i16,
    access: &FetchAccess,
) -> Option<RemotePart> {
    let reader = broker.replica.remote_reader()?;
    let isolation = FetchIsolation::from_isolation_level(request.isolation_level);
    for (ti, topic) in request.topics.iter().enumerate() {
        let name = if version >= 13 {
            broker.topic_name_by_id(&topic.topic_id)
        } else {
            Some(topic.topic.0.to_string())
        };
        let Some(name) = name else { continue };
        if access.refusal(Some(&name)).is_some() {
            continue;
        }
        for (pi, p) in topic.partitions.iter().enumerate() {
            let tp = TopicPartition::new(name.clone(), p.partition);
            let Some(log) = broker.logs.get_log(&tp) else { continue };
            let Some(topic_id) = broker.logs.topic(&name).map(|t| t.id) else { continue };
            let (local_start, config, listing) = {
                let log = log.read();
                if !below_local(&log, p.fetch_offset) {
                    continue;
                }
                let listing = (!log.store_segments().is_empty()).then(|| log.store_listing());
                (log.local_log_start_offset(), log.segment_config_for_cleaning(), listing)
            };
            let max_bytes = (p.partition_max_bytes.max(0) as usize)
                .min(request.max_bytes.max(0) as usize)
                .max(1);
            let range = RemoteRange {
                fetch_offset: p.fetch_offset,
                local_start,
                max_bytes,
                min_one_batch: true,
                isolation,
                topic_id,
                listing,
            };
            let wait = reader.fetch_max_wait();
            let read = match tokio::time::timeout(wait, reader.read(&tp, range, config)).await {
                Ok(Ok(Some(fetch))) => StoreRead::Data(fetch),
                Ok(Ok(None)) => StoreRead::Nothing,
                Ok(Err(e)) => StoreRead::Failed(e),
                Err(_) => StoreRead::Pending,
            };
            return Some(RemotePart { topic: ti, partition: pi, read });
        }
    }
    None
}

/// Answer a partition below its local start that is not this request's
/// read from the store: no records now (its turn comes), or, with tiered
/// storage off on this broker, the error that says the data is elsewhere.
pub(super) fn not_this_time(
    log: &Log,
    tp: &TopicPartition,
    remote_on: bool,
    data: &mut PartitionData,
) -> Option<ResponseError> {
    data.high_watermark = log.high_watermark();
    data.last_stable_offset = log.last_stable_offset();
    data.log_start_offset = log.log_start_offset();
    (!remote_on).then(|| {
        let e = RemoteReadError::Disabled { partition: tp.to_string() };
        tracing::warn!("fetch: {e}");
        remote_read_error_code(&e)
    })
}

/// Answer a partition from the store's read: records, the partition's
/// offsets from the local log, and for read_committed the aborted
/// transactions (the search continued in the local log when the store's
/// segments did not end it). Returns the records' length or the error.
/// `StoreRead::Nothing` is the caller's to answer from the local log.
pub(super) fn fill(
    log: &Log,
    tp: &TopicPartition,
    fetch_offset: i64,
    read: &StoreRead,
    data: &mut PartitionData,
) -> Result<usize, ResponseError> {
    data.high_watermark = log.high_watermark();
    data.last_stable_offset = log.last_stable_offset();
    data.log_start_offset = log.log_start_offset();
    let fetch = match read {
        StoreRead::Data(fetch) => fetch,
        StoreRead::Nothing | StoreRead::Pending => return Ok(0),
        StoreRead::Failed(e) => {
            tracing::warn!(partition = %tp, offset = fetch_offset, "fetch from the store failed: {e}");
            return Err(remote_read_error_code(e));
        }
    };
    if let Some(found) = &fetch.aborted_transactions {
        let mut aborted = found.clone();
        if !fetch.aborted_complete && !fetch.records.is_empty() {
            match log.collect_aborted_transactions(fetch_offset, fetch.upper_bound) {
                Ok(local) => aborted.extend(local),
                Err(e) => return Err(error_code(&e)),
            }
        }
        data.aborted_transactions = Some(
            aborted
                .iter()
                .map(|t| {
                    AbortedTransaction::default()
                        .with_producer_id(t.producer_id.into())
                        .with_first_offset(t.first_offset)
                })
                .collect(),
        );
    }
    data.records = Some(fetch.records.clone());
    Ok(fetch.records.len())
}
