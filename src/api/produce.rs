//! Produce: validate and append each partition's batches, answer with the
//! assigned offsets or a per-partition (and, v8+, per-record) error.
//!
//! The records reach the log through the `ReplicaManager` (`replica`). One
//! node holds every replica, so acks=1 and acks=-1 both answer once the
//! append is in the log (and fsynced when `log.flush.before.ack` is set). With
//! acks=0 no response is sent; if a partition failed the connection is closed
//! so the producer notices, as Kafka does.
//!
//! Transactions (docs/design/transactions.md, "Transactional Produce"): a request carrying a
//! transactional batch without a `transactional_id` gets
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition (Kafka's
//! answer). With one, a transactional batch of a producer that has no open
//! transaction on the partition is verified with the transaction
//! coordinator first (the partition must be in the id's Ongoing transaction,
//! same producer id and epoch), so no batch opens a transaction that no
//! coordinator would ever close; from v12 (transactions v2, KIP-890) the
//! coordinator adds the partition instead, at the producer's current epoch; the refusal codes are `error`'s
//! `txn_produce_error_code`. Each check is per partition and producer id:
//! other producers are never affected. A control batch from a client stays
//! INVALID_RECORD (the log's validator).
//!
//! Compression: zstd batches need Produce v7+ (Kafka's
//! `ProduceRequest.validateRecords`); older requests carrying one get
//! UNSUPPORTED_COMPRESSION_TYPE for that partition. A topic's
//! `compression.type` is applied by the log (`log::validator`).
//!
//! Authorization (Kafka's `handleProduceRequest`): a request with a
//! transactional batch needs WRITE on its TRANSACTIONAL_ID, else the whole
//! request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as without an id. Then
//! each topic needs WRITE, checked once per name before the partition's
//! existence (an id Produce v13 names that no topic has is UNKNOWN_TOPIC_ID
//! first: an id reveals no name); a denied partition is
//! TOPIC_AUTHORIZATION_FAILED and, with acks=0, closes the connection like
//! any other failed partition.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::error::{error_code, txn_produce_error_code};
use super::{str_bytes, Close, RequestContext};
use crate::api::KafkaApis;
use crate::log::compression::Compression;
use crate::log::record_batch::{
    any_batch_compressed, any_batch_compressed_with, first_transactional_producer,
};
use crate::log::{BatchError, LogAppendInfo, LogError, TopicPartition};
use crate::replica::{Acks, AppendError, Replicated, Verify};
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::{TransactionVersion, TxnError};

/// Versions below this are advertised (for old librdkafka) but refused.
pub const MIN_SUPPORTED_VERSION: i16 = 3;

/// A produce answered once `pending` is committed (`acks=all` in a
/// cluster, [`await_replication`]): each entry's topic and partition index
/// in the response, the partition, and the end its records must be
/// committed to.
#[derive(Debug)]
pub struct Produced {
    pub response: ProduceResponse,
    pub pending: Vec<(usize, usize, TopicPartition, i64)>,
}

/// # Errors
/// `Close` for an acks=0 request in which some partition failed.
pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: ProduceRequest,
    version: i16,
) -> Result<Option<Produced>, Close> {
    let acks = request.acks;
    // Parsed once; `None`: INVALID_REQUIRED_ACKS on every partition.
    let required = Acks::from_request(acks);
    if has_transactional_records(&request) {
        let authorized = request.transactional_id.as_ref().is_some_and(|id| {
            ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id.as_str())
        });
        if !authorized {
            return Ok(refuse_transactional_records(request, acks));
        }
    }
    let names: Vec<Option<String>> = request
        .topic_data
        .iter()
        .map(|topic| {
            if version >= 13 {
                broker.topic_name_by_id(&topic.topic_id)
            } else {
                Some(topic.name.0.to_string())
            }
        })
        .collect();
    // Without an authorizer the hot path builds no map.
    let writable = ctx.authorization_enabled().then(|| {
        ctx.filter_authorized(
            AclOperation::Write,
            ResourceType::Topic,
            names.iter().flatten().map(String::as_str),
        )
    });
    let mut failed = false;
    let mut pending = Vec::new();
    // acks=all waits for the ISR only where replication is.
    let waits = required == Some(Acks::All) && broker.replica.leadership().is_some();
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for (ti, (topic, name)) in request.topic_data.into_iter().zip(&names).enumerate() {
        let denied = match (&writable, name.as_deref()) {
            (Some(writable), Some(n)) => writable.get(n) != Some(&true),
            _ => false,
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for (pi, p) in topic.partition_data.into_iter().enumerate() {
            let index = p.index;
            let response = PartitionProduceResponse::default()
                .with_index(p.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let outcome = if denied {
                Err(Refusal::new(ResponseError::TopicAuthorizationFailed))
            } else if required.is_none() {
                Err(Refusal::new(ResponseError::InvalidRequiredAcks)
                    .because(format!("acks={acks} is not -1, 0 or 1")))
            } else {
                let txn_id = request.transactional_id.as_ref().map(|id| id.as_str());
                let acks = required.unwrap_or(Acks::Leader);
                append_partition(broker, name.as_deref(), p, (txn_id, acks), version)
            };
            if let (Ok(info), true, Some(name)) = (&outcome, waits, name) {
                let tp = TopicPartition::new(name.clone(), index);
                pending.push((ti, pi, tp, info.last_offset + 1));
            }
            partitions.push(match outcome {
                Ok(info) => response
                    .with_base_offset(info.first_offset)
                    .with_log_append_time_ms(info.log_append_time)
                    .with_log_start_offset(info.log_start_offset),
                Err(refusal) => {
                    failed = true;
                    refusal.into_response(response, version)
                }
            });
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if required == Some(Acks::None) {
        return if failed { Err(Close) } else { Ok(None) };
    }
    let response = ProduceResponse::default().with_responses(topics);
    Ok(Some(Produced { response, pending }))
}

/// Wait, up to the request's timeout, until every pending partition is
/// committed; one that is not gets REQUEST_TIMED_OUT, one this broker
/// stopped leading NOT_LEADER_OR_FOLLOWER (both retriable, as on Kafka).
pub async fn await_replication(broker: &KafkaApis, produced: &mut Produced, timeout_ms: i32) {
    if produced.pending.is_empty() {
        return;
    }
    let waits: Vec<(TopicPartition, i64)> =
        produced.pending.iter().map(|(_, _, tp, end)| (tp.clone(), *end)).collect();
    let timeout = std::time::Duration::from_millis(timeout_ms.max(0) as u64);
    let outcome = broker.replica.wait_for_replication(&waits, timeout).await;
    for ((ti, pi, _, _), replicated) in produced.pending.iter().zip(outcome) {
        let code = match replicated {
            Replicated::Committed => continue,
            Replicated::NotLeader => ResponseError::NotLeaderOrFollower,
            Replicated::TimedOut => ResponseError::RequestTimedOut,
        };
        if let Some(p) = produced
            .response
            .responses
            .get_mut(*ti)
            .and_then(|t| t.partition_responses.get_mut(*pi))
        {
            p.error_code = code.code();
        }
    }
}

/// Whether any batch of the request is transactional (Kafka's
/// `RequestUtils.hasTransactionalRecords`, over every batch). Only the
/// framing needed to walk the batches is read; anything malformed is left to
/// the validator.
/// Whether any batch of the request is compressed (validating it inflates
/// its records).
pub fn inflates_records(request: &ProduceRequest) -> bool {
    let batches = request.topic_data.iter().flat_map(|t| &t.partition_data);
    batches.filter_map(|p| p.records.as_deref()).any(any_batch_compressed)
}

fn has_transactional_records(request: &ProduceRequest) -> bool {
    let batches = request.topic_data.iter().flat_map(|t| &t.partition_data);
    batches
        .filter_map(|p| p.records.as_deref())
        .any(|records| first_transactional_producer(records).is_some())
}

/// Kafka's answer to transactional records without a transactional id, or
/// with one the principal may not WRITE: the error for every partition,
/// nothing appended, and no response to acks=0 (Kafka's error response of
/// an acks=0 Produce is none; the connection stays open).
fn refuse_transactional_records(request: ProduceRequest, acks: i16) -> Option<Produced> {
    if acks == 0 {
        return None;
    }
    let code = ResponseError::TransactionalIdAuthorizationFailed.code();
    Some(Produced { response: every_partition(&request, code), pending: Vec::new() })
}

/// Kafka's error response to a whole Produce: `code` on every partition.
pub fn every_partition(request: &ProduceRequest, code: i16) -> ProduceResponse {
    let topics = request
        .topic_data
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_data
                .iter()
                .map(|p| {
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(code)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    ProduceResponse::default().with_responses(topics)
}

/// Why a partition's records were not appended.
struct Refusal {
    code: ResponseError,
    message: Option<String>,
    /// The record that failed validation (v8+ reports it per record).
    record_index: Option<usize>,
}

impl Refusal {
    fn new(code: ResponseError) -> Self {
        Self { code, message: None, record_index: None }
    }

    fn because(self, message: String) -> Self {
        Self { message: Some(message), ..self }
    }

    fn into_response(
        self,
        response: PartitionProduceResponse,
        version: i16,
    ) -> PartitionProduceResponse {
        let mut r = response.with_error_code(self.code.code());
        if version >= 8 {
            r.error_message = self.message.clone().map(str_bytes);
            if let Some(i) = self.record_index {
                r.record_errors = vec![BatchIndexAndErrorMessage::default()
                    .with_batch_index(i as i32)
                    .with_batch_index_error_message(self.message.map(str_bytes))];
            }
        }
        r
    }
}

/// Append one partition's batches to its log, through the replica manager.
fn append_partition(
    broker: &KafkaApis,
    topic: Option<&str>,
    p: PartitionProduceData,
    (transactional_id, acks): (Option<&str>, Acks),
    version: i16,
) -> Result<LogAppendInfo, Refusal> {
    let Some(topic) = topic else {
        return Err(Refusal::new(ResponseError::UnknownTopicId));
    };
    let tp = TopicPartition::new(topic, p.index);
    let log = broker.replica.partition(&tp).map_err(|e| refusal(&tp, e, version))?;
    if acks == Acks::All {
        broker.replica.check_min_isr(&tp).map_err(|e| refusal(&tp, e, version))?;
    }
    let Some(records) = p.records else {
        return Err(Refusal::new(ResponseError::CorruptMessage).because("no records".into()));
    };
    if version < 7 && any_batch_compressed_with(&records, Compression::Zstd) {
        return Err(Refusal::new(ResponseError::UnsupportedCompressionType)
            .because("zstd batches need Produce v7 or later".into()));
    }
    // With `transaction.partition.verification.enable=false` nothing is
    // asked of a level-0 producer, as on Kafka: a batch of a producer the
    // coordinator does not know then opens a transaction no marker will close
    // (a hanging transaction, which `kafka-transactions abort` ends). From
    // v12 (transactions v2) the partition is added to the transaction here,
    // whatever that key says: the client no longer adds it.
    let partition = &tp;
    let tv = TransactionVersion::for_produce(version);
    let verify = transactional_id
        .filter(|_| {
            tv.supports_epoch_bump() || broker.config.transaction_partition_verification_enable()
        })
        .map(|id| {
            move |pid, epoch| broker.txn.verify_partition_with(id, pid, epoch, partition, tv)
        });
    let verify = verify.as_ref().map(|f| Verify {
        ask: f as &dyn Fn(i64, i16) -> Result<(), TxnError>,
        epoch_bump: tv.supports_epoch_bump(),
    });
    broker.replica.append_records(&log, &records, verify).map_err(|e| refusal(&tp, e, version))
}

/// The answer for a partition the replica manager did not append to.
fn refusal(tp: &TopicPartition, e: AppendError<TxnError>, version: i16) -> Refusal {
    match e {
        AppendError::UnknownTopicOrPartition => {
            Refusal::new(ResponseError::UnknownTopicOrPartition)
        }
        AppendError::NotLeader => Refusal::new(ResponseError::NotLeaderOrFollower),
        AppendError::NotEnoughReplicas => Refusal::new(ResponseError::NotEnoughReplicas),
        AppendError::Offline => Refusal::new(ResponseError::KafkaStorageError),
        AppendError::Verification(e) => {
            tracing::debug!(partition = %tp, "transactional produce refused: {e}");
            Refusal::new(txn_produce_error_code(&e, version)).because(e.to_string())
        }
        AppendError::Log(e) => {
            let record_index = match &e {
                LogError::Batch(BatchError::InvalidRecord { index, .. }) => Some(*index),
                _ => None,
            };
            tracing::debug!(partition = %tp, "produce refused: {e}");
            Refusal { code: error_code(&e), message: Some(e.to_string()), record_index }
        }
    }
}
