//! DescribeLogDirs: every log dir with the size of each partition it holds and
//! (v4+) the file system's total and usable bytes; a failed (offline) dir
//! with KAFKA_STORAGE_ERROR and nothing else, as Kafka reports it. It needs
//! DESCRIBE on the cluster: otherwise CLUSTER_AUTHORIZATION_FAILED (v3+;
//! older versions have no error field) and no results, as Kafka answers.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use kafka_protocol::error::ResponseError;

use super::{str_bytes, topic_name, RequestContext};
use crate::api::KafkaApis;
use crate::log::disk::disk_space;
use crate::security::acl::AclOperation;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !ctx.authorize_cluster(AclOperation::Describe) {
        return DescribeLogDirsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(topics) => {
            topics.iter().any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition))
        }
    };
    let dirs = &broker.logs.config().log_dirs;
    // dir -> topic -> partitions
    let mut by_dir: BTreeMap<usize, BTreeMap<String, Vec<DescribeLogDirsPartition>>> =
        BTreeMap::new();
    for (tp, log) in broker.logs.all_logs() {
        if !wanted(&tp.topic, tp.partition) {
            continue;
        }
        let log = log.read();
        let Some(index) = dirs.iter().position(|d| log.dir().starts_with(d)) else { continue };
        let p = DescribeLogDirsPartition::default()
            .with_partition_index(tp.partition)
            .with_partition_size(log.size() as i64)
            .with_offset_lag(0);
        by_dir.entry(index).or_default().entry(tp.topic.clone()).or_default().push(p);
    }
    let offline = broker.logs.offline_dirs();
    let results = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            if offline.contains_key(dir) {
                // As Kafka reports a failed dir: its error, nothing else.
                return DescribeLogDirsResult::default()
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_log_dir(str_bytes(abs.to_string_lossy()))
                    .with_total_bytes(-1)
                    .with_usable_bytes(-1);
            }
            let (total, usable) = disk_space(&abs).unwrap_or((-1, -1));
            let topics = by_dir
                .remove(&i)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, partitions)| {
                    DescribeLogDirsTopic::default()
                        .with_name(topic_name(name))
                        .with_partitions(partitions)
                })
                .collect();
            DescribeLogDirsResult::default()
                .with_log_dir(str_bytes(abs.to_string_lossy()))
                .with_topics(topics)
                .with_total_bytes(total)
                .with_usable_bytes(usable)
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}
