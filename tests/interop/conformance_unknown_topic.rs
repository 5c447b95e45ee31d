//! Every API that takes topic names answers a topic that does not exist, and
//! a partition past a topic's last one, with the codes Apache Kafka 4.1.2
//! and 4.4.0 answer: the same requests go to a real Kafka (started from its jars by
//! this test) and to sediment, and the per-topic and per-partition error
//! codes must be equal. A present partition is in each request too, so an
//! API that fails the whole request for one bad name is caught as well.

use crate::broker;

use std::time::{Duration, Instant};

use crate::broker::reference_kafka::{answers, assert_same_answers, ReferenceKafka, VERSIONS};
use crate::broker::txn::{s, try_call};
use crate::broker::{connect_group_ready, create_topic, TestBroker, Wire};
use kafka_protocol::messages::*;

const PRESENT: &str = "present";
const ABSENT: &str = "absent";
const GROUP: &str = "conformance-group";

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

/// (topic, partition) pairs put in every per-partition request: a present
/// partition, one past the present topic's last, and one of a missing topic.
const PARTITIONS: [(&str, i32); 3] = [(PRESENT, 0), (PRESENT, 7), (ABSENT, 0)];

/// The pairs grouped by topic, in first-seen order.
fn by_topic() -> Vec<(&'static str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (t, p) in PARTITIONS {
        match out.iter_mut().find(|(name, _)| *name == t) {
            Some((_, ps)) => ps.push(p),
            None => out.push((t, vec![p])),
        }
    }
    out
}

fn call<R: kafka_protocol::protocol::Request>(w: &mut Wire, v: i16, r: &R) -> R::Response {
    try_call(w, v, r).expect("the broker answers")
}

/// `(topic/partition, code)` of every partition of a response's topics
/// (each response names its fields its own way).
macro_rules! partition_codes {
    ($topics:expr, $name:ident, $partitions:ident, $index:ident, $code:ident) => {
        $topics.iter().flat_map(|t| {
            t.$partitions.iter().map(move |p| (format!("{}/{}", &*t.$name, p.$index), p.$code))
        })
    };
}

/// Lines `API vN topic[/partition]: code`, sorted, so the order in which a
/// broker lists results does not matter.
fn lines(api: &str, v: i16, entries: impl IntoIterator<Item = (String, i16)>) -> Vec<String> {
    let mut out: Vec<String> =
        entries.into_iter().map(|(what, code)| format!("{api} v{v} {what}: {code}")).collect();
    out.sort();
    out
}

fn offset_commit(w: &mut Wire, v: i16) -> Vec<String> {
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
            OffsetCommitRequestTopic::default().with_name(topic(t)).with_partitions(
                ps.into_iter()
                    .map(|p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(0)
                    })
                    .collect(),
            )
        })
        .collect();
    let r = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_retention_time_ms(-1)
        .with_topics(topics);
    let resp = call(w, v, &r);
    lines(
        "OffsetCommit",
        v,
        partition_codes!(resp.topics, name, partitions, partition_index, error_code),
    )
}

fn offset_fetch(w: &mut Wire, v: i16) -> Vec<String> {
    use offset_fetch_request::OffsetFetchRequestTopic;
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            OffsetFetchRequestTopic::default().with_name(topic(t)).with_partition_indexes(ps)
        })
        .collect();
    let r =
        OffsetFetchRequest::default().with_group_id(GroupId(s(GROUP))).with_topics(Some(topics));
    let resp = call(w, v, &r);
    let mut entries = vec![("group".to_string(), resp.error_code)];
    for t in &resp.topics {
        for p in &t.partitions {
            let what = format!("{}/{} offset {}", &*t.name, p.partition_index, p.committed_offset);
            entries.push((what, p.error_code));
        }
    }
    lines("OffsetFetch", v, entries)
}

/// A producer whose transaction does not hold the group: the present
/// partition shows the verification's answer, the others the topic check
/// that comes first.
fn txn_offset_commit(w: &mut Wire, v: i16, (pid, epoch): (i64, i16)) -> Vec<String> {
    use txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            TxnOffsetCommitRequestTopic::default().with_name(topic(t)).with_partitions(
                ps.into_iter()
                    .map(|p| {
                        TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(0)
                    })
                    .collect(),
            )
        })
        .collect();
    let r = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("conformance-txn")))
        .with_group_id(GroupId(s(GROUP)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(topics);
    let resp = call(w, v, &r);
    lines(
        "TxnOffsetCommit",
        v,
        partition_codes!(resp.topics, name, partitions, partition_index, error_code),
    )
}

fn offset_delete(w: &mut Wire, v: i16) -> Vec<String> {
    use offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            OffsetDeleteRequestTopic::default().with_name(topic(t)).with_partitions(
                ps.into_iter()
                    .map(|p| OffsetDeleteRequestPartition::default().with_partition_index(p))
                    .collect(),
            )
        })
        .collect();
    let r = OffsetDeleteRequest::default().with_group_id(GroupId(s(GROUP))).with_topics(topics);
    let resp = call(w, v, &r);
    let mut entries = vec![("group".to_string(), resp.error_code)];
    for t in &resp.topics {
        for p in &t.partitions {
            entries.push((format!("{}/{}", &*t.name, p.partition_index), p.error_code));
        }
    }
    lines("OffsetDelete", v, entries)
}

fn delete_records(w: &mut Wire, v: i16) -> Vec<String> {
    use delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            DeleteRecordsTopic::default().with_name(topic(t)).with_partitions(
                ps.into_iter()
                    .map(|p| {
                        DeleteRecordsPartition::default().with_partition_index(p).with_offset(0)
                    })
                    .collect(),
            )
        })
        .collect();
    let r = DeleteRecordsRequest::default().with_topics(topics).with_timeout_ms(5000);
    let resp = call(w, v, &r);
    lines(
        "DeleteRecords",
        v,
        partition_codes!(resp.topics, name, partitions, partition_index, error_code),
    )
}

fn list_offsets(w: &mut Wire, v: i16) -> Vec<String> {
    use list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            ListOffsetsTopic::default().with_name(topic(t)).with_partitions(
                ps.into_iter()
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )
        })
        .collect();
    let r = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics)
        .with_timeout_ms(5000);
    let resp = call(w, v, &r);
    lines(
        "ListOffsets",
        v,
        partition_codes!(resp.topics, name, partitions, partition_index, error_code),
    )
}

fn describe_producers(w: &mut Wire, v: i16) -> Vec<String> {
    use describe_producers_request::TopicRequest;
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| TopicRequest::default().with_name(topic(t)).with_partition_indexes(ps))
        .collect();
    let resp = call(w, v, &DescribeProducersRequest::default().with_topics(topics));
    lines(
        "DescribeProducers",
        v,
        partition_codes!(resp.topics, name, partitions, partition_index, error_code),
    )
}

const TOPIC_RESOURCE: i8 = 2;

fn describe_configs(w: &mut Wire, v: i16) -> Vec<String> {
    use describe_configs_request::DescribeConfigsResource;
    let resources = [PRESENT, ABSENT]
        .iter()
        .map(|t| {
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC_RESOURCE)
                .with_resource_name(s(t))
                .with_configuration_keys(Some(vec![s("cleanup.policy")]))
        })
        .collect();
    let resp = call(w, v, &DescribeConfigsRequest::default().with_resources(resources));
    lines(
        "DescribeConfigs",
        v,
        resp.results.iter().map(|r| (r.resource_name.to_string(), r.error_code)),
    )
}

fn alter_configs(w: &mut Wire, v: i16) -> Vec<String> {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resources = [PRESENT, ABSENT]
        .iter()
        .map(|t| {
            AlterConfigsResource::default()
                .with_resource_type(TOPIC_RESOURCE)
                .with_resource_name(s(t))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("86400000")))])
        })
        .collect();
    let r = AlterConfigsRequest::default().with_resources(resources).with_validate_only(true);
    let resp = call(w, v, &r);
    lines(
        "AlterConfigs",
        v,
        resp.responses.iter().map(|r| (r.resource_name.to_string(), r.error_code)),
    )
}

fn incremental_alter_configs(w: &mut Wire, v: i16) -> Vec<String> {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resources = [PRESENT, ABSENT]
        .iter()
        .map(|t| {
            AlterConfigsResource::default()
                .with_resource_type(TOPIC_RESOURCE)
                .with_resource_name(s(t))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("86400000")))])
        })
        .collect();
    let r = IncrementalAlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(true);
    let resp = call(w, v, &r);
    lines(
        "IncrementalAlterConfigs",
        v,
        resp.responses.iter().map(|r| (r.resource_name.to_string(), r.error_code)),
    )
}

fn create_partitions(w: &mut Wire, v: i16) -> Vec<String> {
    use create_partitions_request::CreatePartitionsTopic;
    let topics = [(PRESENT, 3), (ABSENT, 3)]
        .iter()
        .map(|(t, count)| CreatePartitionsTopic::default().with_name(topic(t)).with_count(*count))
        .collect();
    let r = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000)
        .with_validate_only(true);
    let resp = call(w, v, &r);
    lines("CreatePartitions", v, resp.results.iter().map(|r| (r.name.to_string(), r.error_code)))
}

fn delete_topics(w: &mut Wire, v: i16) -> Vec<String> {
    let r = DeleteTopicsRequest::default().with_timeout_ms(5000);
    let r = if v >= 6 {
        r.with_topics(vec![
            delete_topics_request::DeleteTopicState::default().with_name(Some(topic(ABSENT)))
        ])
    } else {
        r.with_topic_names(vec![topic(ABSENT)])
    };
    let resp = call(w, v, &r);
    lines(
        "DeleteTopics",
        v,
        resp.responses
            .iter()
            .map(|r| (r.name.as_ref().map(|n| n.to_string()).unwrap_or_default(), r.error_code)),
    )
}

fn produce(w: &mut Wire, v: i16) -> Vec<String> {
    use produce_request::{PartitionProduceData, TopicProduceData};
    let now = broker::now_ms();
    let mut batch = sediment::log::record_batch::BatchBuilder::new(
        sediment::log::compression::Compression::None,
        now,
    );
    batch.append(now, Some(b"k"), Some(b"v"));
    let records = bytes::Bytes::from(batch.build());
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            TopicProduceData::default().with_name(topic(t)).with_partition_data(
                ps.into_iter()
                    .map(|p| {
                        PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(records.clone()))
                    })
                    .collect(),
            )
        })
        .collect();
    let r = ProduceRequest::default().with_acks(1).with_timeout_ms(10_000).with_topic_data(topics);
    let resp = call(w, v, &r);
    lines(
        "Produce",
        v,
        partition_codes!(resp.responses, name, partition_responses, index, error_code),
    )
}

fn fetch(w: &mut Wire, v: i16) -> Vec<String> {
    use fetch_request::{FetchPartition, FetchTopic};
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| {
            FetchTopic::default().with_topic(topic(t)).with_partitions(
                ps.into_iter()
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )
        })
        .collect();
    let r = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(topics);
    let resp = call(w, v, &r);
    let mut entries = vec![("request".to_string(), resp.error_code)];
    for t in &resp.responses {
        for p in &t.partitions {
            entries.push((format!("{}/{}", &*t.topic, p.partition_index), p.error_code));
        }
    }
    lines("Fetch", v, entries)
}

fn metadata(w: &mut Wire, v: i16) -> Vec<String> {
    use metadata_request::MetadataRequestTopic;
    let topics = [PRESENT, ABSENT]
        .iter()
        .map(|t| MetadataRequestTopic::default().with_name(Some(topic(t))))
        .collect();
    let r =
        MetadataRequest::default().with_topics(Some(topics)).with_allow_auto_topic_creation(false);
    let resp = call(w, v, &r);
    lines(
        "Metadata",
        v,
        resp.topics.iter().map(|t| {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            (format!("{name} ({} partitions)", t.partitions.len()), t.error_code)
        }),
    )
}

/// AddPartitionsToTxn as a producer (v3): an unknown partition fails the
/// request, and the others are not attempted.
fn add_partitions_to_txn(w: &mut Wire, v: i16, (pid, epoch): (i64, i16)) -> Vec<String> {
    use add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    let topics = by_topic()
        .into_iter()
        .map(|(t, ps)| AddPartitionsToTxnTopic::default().with_name(topic(t)).with_partitions(ps))
        .collect();
    let r = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("conformance-txn")))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(topics);
    let resp = call(w, v, &r);
    lines(
        "AddPartitionsToTxn",
        v,
        resp.results_by_topic_v3_and_below.iter().flat_map(|t| {
            t.results_by_partition.iter().map(move |p| {
                (format!("{}/{}", &*t.name, p.partition_index), p.partition_error_code)
            })
        }),
    )
}

/// Every probe at the lowest and highest version both brokers serve (of the
/// ones sediment serves; Kafka 4.1.2 serves all of these).
fn probes(w: &mut Wire, producer: (i64, i16)) -> Vec<String> {
    let mut out = Vec::new();
    for v in [2, 9] {
        out.extend(offset_commit(w, v));
    }
    for v in [1, 7] {
        out.extend(offset_fetch(w, v));
    }
    for v in [0, 3] {
        out.extend(txn_offset_commit(w, v, producer));
    }
    out.extend(offset_delete(w, 0));
    for v in [0, 2] {
        out.extend(delete_records(w, v));
    }
    for v in [1, 10] {
        out.extend(list_offsets(w, v));
    }
    out.extend(describe_producers(w, 0));
    for v in [1, 4] {
        out.extend(describe_configs(w, v));
    }
    for v in [0, 2] {
        out.extend(alter_configs(w, v));
    }
    for v in [0, 1] {
        out.extend(incremental_alter_configs(w, v));
    }
    for v in [0, 3] {
        out.extend(create_partitions(w, v));
    }
    for v in [1, 6] {
        out.extend(delete_topics(w, v));
    }
    for v in [3, 9] {
        out.extend(produce(w, v));
    }
    for v in [4, 12] {
        out.extend(fetch(w, v));
    }
    for v in [4, 12] {
        out.extend(metadata(w, v));
    }
    for v in [0, 3] {
        out.extend(add_partitions_to_txn(w, v, producer));
    }
    out
}

/// The producer id and epoch of `conformance-txn`, once the transaction
/// coordinator is loaded (Kafka creates `__transaction_state` on the first
/// FindCoordinator and names its leader before it has loaded, so readiness
/// is an InitProducerId that succeeds).
fn init_producer(w: &mut Wire) -> (i64, i16) {
    let find = FindCoordinatorRequest::default().with_key_type(1).with_key(s("conformance-txn"));
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("conformance-txn"))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut code = call(w, 3, &find).error_code;
        if code == 0 {
            let r = call(w, 4, &init);
            if r.error_code == 0 {
                return (r.producer_id.0, r.producer_epoch);
            }
            code = r.error_code;
        }
        assert!(Instant::now() < deadline, "the transaction coordinator: error {code}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run(port: u16) -> Vec<String> {
    create_topic(port, PRESENT, 2, &[]);
    let mut w = connect_group_ready(port, GROUP);
    let producer = init_producer(&mut w);
    probes(&mut w, producer)
}

#[test]
fn unknown_topics_and_partitions_answer_as_kafka_does() {
    for version in VERSIONS {
        let kafka = ReferenceKafka::start_version(version, &[]);
        let sediment = TestBroker::start(&["group.initial.rebalance.delay.ms=0"]);
        let want = answers(run(kafka.port));
        let got = answers(run(sediment.port));
        assert_same_answers(version, &want, &got);
    }
}
