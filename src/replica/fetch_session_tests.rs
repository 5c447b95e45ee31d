use bytes::Bytes;
use kafka_protocol::messages::fetch_request::ForgottenTopic;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::protocol::StrBytes;

use super::*;

fn name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

fn partition(p: i32, offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(p)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)
}

/// A name-keyed (v12) request for `partitions` of topic `t` at offset 0.
fn request(id: i32, epoch: i32, t: &str, partitions: &[i32]) -> FetchRequest {
    let topic = FetchTopic::default()
        .with_topic(name(t))
        .with_partitions(partitions.iter().map(|&p| partition(p, 0)).collect());
    FetchRequest::default()
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(if partitions.is_empty() { vec![] } else { vec![topic] })
}

/// What the broker read for `topics`: every partition at high watermark `hw`,
/// with records for those in `with_records`.
fn answer(topics: &[FetchTopic], hw: i64, with_records: &[i32]) -> FetchResponse {
    let responses = topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let records = if with_records.contains(&p.partition) {
                        Bytes::from_static(b"batch")
                    } else {
                        Bytes::new()
                    };
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_high_watermark(hw)
                        .with_log_start_offset(0)
                        .with_records(Some(records))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}

fn answered(response: &FetchResponse) -> Vec<i32> {
    response.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.partition_index)).collect()
}

fn cache(slots: usize) -> (FetchSessionCache, FetchSessionMetrics) {
    let metrics = FetchSessionMetrics::default();
    (FetchSessionCache::new(slots, EVICTION_MS, 1000, metrics.clone()), metrics)
}

/// Open a session of partitions `0..n` of `t` at `now`.
fn open(cache: &FetchSessionCache, now: i64, t: &str, n: i32, privileged: bool) -> i32 {
    let req = request(0, INITIAL_EPOCH, t, &(0..n).collect::<Vec<_>>());
    assert!(matches!(cache.new_context(now, 12, &req, privileged), FetchContext::Full { .. }));
    cache.maybe_create_session(now, privileged, false, &req.topics, &answer(&req.topics, 5, &[]))
}

fn incremental(cache: &FetchSessionCache, req: &FetchRequest) -> (i32, Vec<FetchTopic>) {
    match cache.new_context(0, 12, req, false) {
        FetchContext::Incremental { epoch, topics, .. } => (epoch, topics),
        other => panic!("{other:?}"),
    }
}

#[test]
fn epochs_advance_and_wrap_but_never_return_to_initial() {
    assert_eq!(next_epoch(INITIAL_EPOCH), 1);
    assert_eq!(next_epoch(41), 42);
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
}

#[test]
fn incremental_fetches_answer_only_what_changed() {
    let (cache, metrics) = cache(10);
    let id = open(&cache, 0, "t", 3, false);
    assert_ne!(id, INVALID_SESSION_ID);
    assert_eq!(cache.len(), 1);
    // Nothing changed: the session's three partitions are read, none answered.
    let (epoch, topics) = incremental(&cache, &request(id, 1, "t", &[]));
    assert_eq!(topics[0].partitions.len(), 3);
    let mut resp = answer(&topics, 5, &[]);
    cache.filter_incremental(id, epoch, &mut resp).unwrap();
    assert!(resp.responses.is_empty());
    assert_eq!(resp.session_id, id);
    // Records on 1, a new high watermark everywhere: all answered, then quiet again.
    let (epoch, topics) = incremental(&cache, &request(id, 2, "t", &[]));
    let mut resp = answer(&topics, 9, &[1]);
    cache.filter_incremental(id, epoch, &mut resp).unwrap();
    assert_eq!(answered(&resp), vec![0, 1, 2]);
    let (epoch, topics) = incremental(&cache, &request(id, 3, "t", &[]));
    // Partition 1 returned records, so it is read last now.
    let order: Vec<i32> = topics[0].partitions.iter().map(|p| p.partition).collect();
    assert_eq!(order, vec![0, 2, 1]);
    let mut resp = answer(&topics, 9, &[2]);
    cache.filter_incremental(id, epoch, &mut resp).unwrap();
    assert_eq!(answered(&resp), vec![2]);
    assert_eq!(metrics.incremental_fetches(), 3);
}

#[test]
fn added_updated_and_forgotten_partitions() {
    let (cache, metrics) = cache(10);
    let id = open(&cache, 0, "t", 2, false);
    let mut req = request(id, 1, "t", &[1, 7]);
    req.topics[0].partitions[0].fetch_offset = 40;
    req.forgotten_topics_data =
        vec![ForgottenTopic::default().with_topic(name("t")).with_partitions(vec![0])];
    let (epoch, topics) = incremental(&cache, &req);
    let read: Vec<(i32, i64)> =
        topics[0].partitions.iter().map(|p| (p.partition, p.fetch_offset)).collect();
    assert_eq!(read, vec![(1, 40), (7, 0)]);
    // The added partition has no cached high watermark: answered once.
    let mut resp = answer(&topics, 5, &[]);
    cache.filter_incremental(id, epoch, &mut resp).unwrap();
    assert_eq!(answered(&resp), vec![7]);
    assert_eq!(metrics.evictions(), 0);
    // Forgetting every partition closes the session: served sessionless.
    let mut req = request(id, 2, "t", &[]);
    req.forgotten_topics_data =
        vec![ForgottenTopic::default().with_topic(name("t")).with_partitions(vec![1, 7])];
    assert!(matches!(cache.new_context(0, 12, &req, false), FetchContext::Sessionless));
    assert!(cache.is_empty());
}

#[test]
fn errors_always_answered_and_answered_again_when_they_clear() {
    let (cache, _) = cache(10);
    let id = open(&cache, 0, "t", 1, false);
    let (epoch, topics) = incremental(&cache, &request(id, 1, "t", &[]));
    let mut resp = answer(&topics, 5, &[]);
    resp.responses[0].partitions[0].error_code = 1;
    cache.filter_incremental(id, epoch, &mut resp).unwrap();
    assert_eq!(answered(&resp), vec![0]);
    let (epoch, topics) = incremental(&cache, &request(id, 2, "t", &[]));
    let mut resp = answer(&topics, 5, &[]);
    cache.filter_incremental(id, epoch, &mut resp).unwrap();
    assert_eq!(answered(&resp), vec![0], "the cleared error is reported");
}

#[test]
fn wrong_epoch_unknown_id_topic_id_mismatch_and_close() {
    let (cache, _) = cache(10);
    let id = open(&cache, 0, "t", 1, false);
    let err = |req: &FetchRequest, version| match cache.new_context(0, version, req, false) {
        FetchContext::Error(e) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(err(&request(id, 2, "t", &[]), 12), SessionError::InvalidEpoch);
    assert_eq!(err(&request(id + 1, 1, "t", &[]), 12), SessionError::IdNotFound);
    assert_eq!(err(&request(id, 1, "t", &[]), 13), SessionError::TopicIdMismatch);
    // A duplicate crossing the accepted request: the answer is refused.
    let (epoch, topics) = incremental(&cache, &request(id, 1, "t", &[]));
    let (_, _) = incremental(&cache, &request(id, 2, "t", &[]));
    let mut resp = answer(&topics, 5, &[]);
    assert_eq!(cache.filter_incremental(id, epoch, &mut resp), Err(SessionError::InvalidEpoch));
    // Epoch -1 closes the session and asks for none.
    assert!(matches!(
        cache.new_context(0, 12, &request(id, FINAL_EPOCH, "t", &[0]), false),
        FetchContext::Sessionless
    ));
    assert!(cache.is_empty());
    assert_eq!(err(&request(id, 3, "t", &[]), 12), SessionError::IdNotFound);
}

#[test]
fn a_full_fetch_naming_a_session_replaces_it() {
    let (cache, metrics) = cache(10);
    let id = open(&cache, 0, "t", 4, false);
    let req = request(id, INITIAL_EPOCH, "t", &[0]);
    assert!(matches!(cache.new_context(0, 12, &req, false), FetchContext::Full { .. }));
    assert!(cache.is_empty());
    let again =
        cache.maybe_create_session(0, false, false, &req.topics, &answer(&req.topics, 5, &[]));
    assert_ne!(again, INVALID_SESSION_ID);
    assert_eq!(metrics.cached(), (1, 1));
}

#[test]
fn zero_slots_disable_sessions() {
    let (cache, _) = cache(0);
    assert_eq!(open(&cache, 0, "t", 3, false), INVALID_SESSION_ID);
    assert!(cache.is_empty());
}

#[test]
fn eviction_follows_kafka_rules() {
    let (cache, metrics) = cache(2);
    let small = open(&cache, 0, "a", 2, false);
    let big = open(&cache, 0, "b", 5, false);
    // Full and nothing old enough: a consumer's new session gets no slot.
    assert_eq!(open(&cache, 1_000, "c", 10, false), INVALID_SESSION_ID);
    // A replica may evict a young consumer session, the smallest first.
    let replica = open(&cache, 2_000, "r", 1, true);
    assert_ne!(replica, INVALID_SESSION_ID);
    assert_eq!(metrics.evictions(), 1);
    let gone = incremental_error(&cache, small, 1);
    assert_eq!(gone, Some(SessionError::IdNotFound));
    // Once past the eviction time an idle session is taken by anyone.
    let idle = 2_000 + EVICTION_MS + 1;
    let (_, _) = incremental_at(&cache, replica, 1, idle - 1);
    let c = open(&cache, idle + 1_000, "c", 10, false);
    assert_ne!(c, INVALID_SESSION_ID);
    assert_eq!(incremental_error(&cache, big, 1), Some(SessionError::IdNotFound));
    // Used recently and old enough: only a session at least as large evicts it.
    let later = idle + 1_000 + EVICTION_MS + 1;
    incremental_at(&cache, replica, 2, later);
    incremental_at(&cache, c, 1, later);
    assert_eq!(open(&cache, later + 1, "d", 3, false), INVALID_SESSION_ID);
    let d = open(&cache, later + 1, "d", 11, false);
    assert_ne!(d, INVALID_SESSION_ID);
    assert_eq!(incremental_error(&cache, c, 2), Some(SessionError::IdNotFound));
    assert_eq!(metrics.evictions(), 3);
    assert_eq!(cache.len(), 2);
}

fn incremental_at(cache: &FetchSessionCache, id: i32, epoch: i32, now: i64) -> (i32, usize) {
    match cache.new_context(now, 12, &request(id, epoch, "x", &[]), false) {
        FetchContext::Incremental { epoch, topics, .. } => (epoch, topics.len()),
        other => panic!("{other:?}"),
    }
}

fn incremental_error(cache: &FetchSessionCache, id: i32, epoch: i32) -> Option<SessionError> {
    match cache.new_context(0, 12, &request(id, epoch, "x", &[]), false) {
        FetchContext::Error(e) => Some(e),
        _ => None,
    }
}

#[test]
fn a_session_is_bounded_by_what_a_request_can_carry() {
    let metrics = FetchSessionMetrics::default();
    let cache = FetchSessionCache::new(10, EVICTION_MS, 3, metrics);
    let too_many = request(0, INITIAL_EPOCH, "t", &[0, 1, 2, 3]);
    let resp = answer(&too_many.topics, 5, &[]);
    assert_eq!(cache.maybe_create_session(0, false, false, &too_many.topics, &resp), 0);
    let id = open(&cache, 0, "t", 3, false);
    let grow = request(id, 1, "t", &[9]);
    assert!(matches!(cache.new_context(0, 12, &grow, false), FetchContext::Sessionless));
    assert!(cache.is_empty());
}

/// A session outlives its requests: it must not keep their frames alive
/// through the topic names it remembers (issue 28: copies, not slices).
#[test]
fn a_session_keeps_copies_not_slices_of_the_request_frame() {
    let (cache, _) = cache(10);
    // The name decoded from a frame is a slice of the frame's bytes.
    let frame = Bytes::from(b"xxxxframe-topicxxxx".to_vec());
    let topic = TopicName(StrBytes::from_utf8(frame.slice(4..15)).expect("UTF-8"));
    let req =
        FetchRequest::default().with_session_id(0).with_session_epoch(INITIAL_EPOCH).with_topics(
            vec![FetchTopic::default().with_topic(topic).with_partitions(vec![partition(0, 0)])],
        );
    assert!(matches!(cache.new_context(0, 12, &req, false), FetchContext::Full { .. }));
    let id = cache.maybe_create_session(0, false, false, &req.topics, &answer(&req.topics, 5, &[]));
    assert_ne!(id, INVALID_SESSION_ID);
    drop(req);
    assert!(frame.is_unique(), "the session still holds a slice of the request frame");
    // And it still answers for the topic by name.
    let (_, topics) = incremental(&cache, &request(id, 1, "frame-topic", &[]));
    assert_eq!(&*topics[0].topic.0, "frame-topic");
}
