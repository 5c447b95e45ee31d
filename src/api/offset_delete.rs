//! OffsetDelete: remove a group's committed offsets for topics it does not
//! (or no longer) consume.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::error::group_code;
use crate::broker::Broker;

pub fn handle(broker: &Broker, request: &OffsetDeleteRequest) -> OffsetDeleteResponse {
    let partitions: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index)))
        .collect();
    match broker.groups.delete_offsets(request.group_id.0.as_str(), &partitions) {
        Err(e) => OffsetDeleteResponse::default().with_error_code(group_code(Some(e))),
        Ok(results) => {
            let mut results = results.into_iter();
            let topics = request
                .topics
                .iter()
                .map(|t| {
                    let ps = t
                        .partitions
                        .iter()
                        .map(|p| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(group_code(results.next().flatten()))
                        })
                        .collect();
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(ps)
                })
                .collect();
            OffsetDeleteResponse::default().with_topics(topics)
        }
    }
}
