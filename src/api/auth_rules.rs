//! The authorization each API makes (docs/design/security.md, "Per-API checks", Kafka 4.1.2's
//! `KafkaApis`), as data: `API_RULES` lists, per API, the checks its handler
//! makes in order and what a denial answers.
//!
//! The table documents and is tested; it does not drive the handlers, which
//! call `RequestContext::authorize` and friends (`auth`) themselves. Its test
//! fails when an API is served without a row, so a new API cannot be added
//! without deciding its authorization.
//!
//! Reading a row: checks run in order; `Denied::Else` means a denial is not
//! final and the next check decides (Kafka's "CREATE on the cluster, else
//! CREATE on each topic"); `when` names the case a check applies to (empty:
//! always).

use kafka_protocol::messages::ApiKey;

use crate::security::acl::{AclOperation, ResourceType};

/// TOPIC_AUTHORIZATION_FAILED.
pub const TOPIC_DENIED: i16 = 29;
/// GROUP_AUTHORIZATION_FAILED.
pub const GROUP_DENIED: i16 = 30;
/// CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_DENIED: i16 = 31;
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
pub const TRANSACTIONAL_ID_DENIED: i16 = 53;

/// Which resources a check is made on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One resource for the whole request (its group, its transactional id,
    /// the cluster).
    Request,
    /// Each resource the request names (or the answer would list).
    Each,
    /// Some resource of the type (`authorize_by_resource_type`).
    AnyOfType,
}

/// What a denial answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// This error code, for what the scope names: the whole request, or
    /// that resource's entries.
    Code(i16),
    /// The resource is left out of the answer (or its bit of an
    /// authorized-operations field stays clear); nothing is refused.
    LeftOut,
    /// Not final: the next check decides.
    Else,
}

/// One check of an API.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    pub operation: AclOperation,
    pub resource_type: ResourceType,
    pub scope: Scope,
    pub denied: Denied,
    /// The case it applies to; empty for every request.
    pub when: &'static str,
}

const fn check(
    operation: AclOperation,
    resource_type: ResourceType,
    scope: Scope,
    denied: Denied,
    when: &'static str,
) -> Check {
    Check { operation, resource_type, scope, denied, when }
}

use AclOperation as Op;
use Denied::{Code, Else, LeftOut};
use ResourceType::{Cluster, Group, Topic, TransactionalId as TxnId};
use Scope::{AnyOfType, Each, Request};

const NONE: &[Check] = &[];
const READ_GROUP: &[Check] = &[check(Op::Read, Group, Request, Code(GROUP_DENIED), "")];

/// Every API sediment serves (and the ACL APIs), with its checks in order.
pub const API_RULES: &[(ApiKey, &[Check])] = &[
    (ApiKey::ApiVersions, NONE),
    (ApiKey::SaslHandshake, NONE),
    (ApiKey::SaslAuthenticate, NONE),
    (
        ApiKey::Produce,
        &[
            check(
                Op::Write,
                TxnId,
                Request,
                Code(TRANSACTIONAL_ID_DENIED),
                "transactional batches",
            ),
            check(Op::Write, Topic, Each, Code(TOPIC_DENIED), ""),
        ],
    ),
    (
        ApiKey::Fetch,
        &[
            check(Op::Read, Topic, Each, Code(TOPIC_DENIED), "consumer (replica_id < 0)"),
            check(Op::ClusterAction, Cluster, Request, Code(TOPIC_DENIED), "replica_id >= 0"),
        ],
    ),
    (ApiKey::ListOffsets, &[check(Op::Describe, Topic, Each, Code(TOPIC_DENIED), "")]),
    (
        ApiKey::OffsetForLeaderEpoch,
        &[
            check(Op::ClusterAction, Cluster, Request, Else, ""),
            check(Op::Describe, Topic, Each, Code(TOPIC_DENIED), ""),
        ],
    ),
    (
        ApiKey::Metadata,
        &[
            check(Op::Describe, Topic, Each, LeftOut, "all topics"),
            check(Op::Describe, Topic, Each, Code(TOPIC_DENIED), "named topics"),
            check(Op::Create, Cluster, Request, Else, "auto-creation"),
            check(Op::Create, Topic, Each, Code(TOPIC_DENIED), "auto-creation"),
            check(Op::Describe, Cluster, Request, LeftOut, "cluster authorized operations"),
        ],
    ),
    (
        ApiKey::CreateTopics,
        &[
            check(Op::Create, Cluster, Request, Else, ""),
            check(Op::Create, Topic, Each, Code(TOPIC_DENIED), ""),
            check(Op::DescribeConfigs, Topic, Each, Code(TOPIC_DENIED), "configs in the answer"),
        ],
    ),
    (
        ApiKey::DeleteTopics,
        &[
            check(Op::Delete, Cluster, Request, Else, ""),
            check(Op::Delete, Topic, Each, Code(TOPIC_DENIED), ""),
            check(Op::Describe, Topic, Each, LeftOut, "named by id: the name echoed"),
        ],
    ),
    (ApiKey::CreatePartitions, &[check(Op::Alter, Topic, Each, Code(TOPIC_DENIED), "")]),
    (ApiKey::ElectLeaders, &[check(Op::Alter, Cluster, Request, Code(CLUSTER_DENIED), "")]),
    (
        ApiKey::AlterPartitionReassignments,
        &[check(Op::Alter, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (
        ApiKey::ListPartitionReassignments,
        &[check(Op::Describe, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (ApiKey::DeleteRecords, &[check(Op::Delete, Topic, Each, Code(TOPIC_DENIED), "")]),
    (ApiKey::DescribeConfigs, &config_checks(Op::DescribeConfigs)),
    (ApiKey::AlterConfigs, &config_checks(Op::AlterConfigs)),
    (ApiKey::IncrementalAlterConfigs, &config_checks(Op::AlterConfigs)),
    (ApiKey::DescribeLogDirs, &[check(Op::Describe, Cluster, Request, Code(CLUSTER_DENIED), "")]),
    (
        ApiKey::DescribeTopicPartitions,
        &[
            check(Op::Describe, Topic, Each, LeftOut, "all topics"),
            check(Op::Describe, Topic, Each, Code(TOPIC_DENIED), "named topics"),
        ],
    ),
    (
        ApiKey::ListConfigResources,
        &[check(Op::DescribeConfigs, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (
        ApiKey::DescribeCluster,
        &[check(Op::Describe, Cluster, Request, LeftOut, "cluster authorized operations")],
    ),
    (
        ApiKey::FindCoordinator,
        &[
            check(Op::Describe, Group, Each, Code(GROUP_DENIED), "key type 0"),
            check(Op::Describe, TxnId, Each, Code(TRANSACTIONAL_ID_DENIED), "key type 1"),
        ],
    ),
    (ApiKey::JoinGroup, READ_GROUP),
    (ApiKey::SyncGroup, READ_GROUP),
    (ApiKey::Heartbeat, READ_GROUP),
    (ApiKey::LeaveGroup, READ_GROUP),
    (
        ApiKey::OffsetCommit,
        &[
            check(Op::Read, Group, Request, Code(GROUP_DENIED), ""),
            check(Op::Read, Topic, Each, Code(TOPIC_DENIED), ""),
        ],
    ),
    (
        ApiKey::OffsetFetch,
        &[
            check(Op::Describe, Group, Each, Code(GROUP_DENIED), ""),
            check(Op::Describe, Topic, Each, LeftOut, "all offsets"),
            check(Op::Describe, Topic, Each, Code(TOPIC_DENIED), "named partitions"),
        ],
    ),
    (
        ApiKey::OffsetDelete,
        &[
            check(Op::Delete, Group, Request, Code(GROUP_DENIED), ""),
            check(Op::Read, Topic, Each, Code(TOPIC_DENIED), ""),
        ],
    ),
    (
        ApiKey::ListGroups,
        &[
            check(Op::Describe, Cluster, Request, Else, ""),
            check(Op::Describe, Group, Each, LeftOut, ""),
        ],
    ),
    // The authorized-operations bits asked for from v3 are no check: each
    // supported group operation is asked without recording (`auth`).
    (ApiKey::DescribeGroups, &[check(Op::Describe, Group, Each, Code(GROUP_DENIED), "")]),
    (ApiKey::DeleteGroups, &[check(Op::Delete, Group, Each, Code(GROUP_DENIED), "")]),
    (
        ApiKey::ConsumerGroupHeartbeat,
        &[
            check(Op::Read, Group, Request, Code(GROUP_DENIED), ""),
            check(Op::Describe, Topic, Each, Code(TOPIC_DENIED), "subscribed topic names"),
        ],
    ),
    (ApiKey::ConsumerGroupDescribe, &[check(Op::Describe, Group, Each, Code(GROUP_DENIED), "")]),
    (
        ApiKey::InitProducerId,
        &[
            check(Op::Write, TxnId, Request, Code(TRANSACTIONAL_ID_DENIED), "transactional id"),
            check(Op::IdempotentWrite, Cluster, Request, Else, "no transactional id"),
            check(Op::Write, Topic, AnyOfType, Code(CLUSTER_DENIED), "no transactional id"),
        ],
    ),
    (
        ApiKey::AddPartitionsToTxn,
        &[
            check(Op::Write, TxnId, Request, Code(TRANSACTIONAL_ID_DENIED), "v0-3"),
            check(Op::Write, Topic, Each, Code(TOPIC_DENIED), "v0-3, others not attempted"),
            check(Op::ClusterAction, Cluster, Request, Code(CLUSTER_DENIED), "v4-5"),
        ],
    ),
    (
        ApiKey::AddOffsetsToTxn,
        &[
            check(Op::Write, TxnId, Request, Code(TRANSACTIONAL_ID_DENIED), ""),
            check(Op::Read, Group, Request, Code(GROUP_DENIED), ""),
        ],
    ),
    (ApiKey::EndTxn, &[check(Op::Write, TxnId, Request, Code(TRANSACTIONAL_ID_DENIED), "")]),
    (
        ApiKey::TxnOffsetCommit,
        &[
            check(Op::Write, TxnId, Request, Code(TRANSACTIONAL_ID_DENIED), ""),
            check(Op::Read, Group, Request, Code(GROUP_DENIED), ""),
            check(Op::Read, Topic, Each, Code(TOPIC_DENIED), ""),
        ],
    ),
    (
        ApiKey::AlterPartition,
        &[check(Op::ClusterAction, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (
        ApiKey::WriteTxnMarkers,
        &[
            check(Op::Alter, Cluster, Request, Else, ""),
            check(Op::ClusterAction, Cluster, Request, Code(CLUSTER_DENIED), ""),
        ],
    ),
    (ApiKey::DescribeProducers, &[check(Op::Read, Topic, Each, Code(TOPIC_DENIED), "")]),
    (
        ApiKey::DescribeTransactions,
        &[
            check(Op::Describe, TxnId, Each, Code(TRANSACTIONAL_ID_DENIED), ""),
            check(Op::Describe, Topic, Each, LeftOut, "the transaction's partitions"),
        ],
    ),
    (ApiKey::ListTransactions, &[check(Op::Describe, TxnId, Each, LeftOut, "")]),
    (
        ApiKey::DescribeClientQuotas,
        &[check(Op::DescribeConfigs, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (
        ApiKey::DescribeUserScramCredentials,
        &[check(Op::Describe, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (
        ApiKey::AlterUserScramCredentials,
        &[check(Op::Alter, Cluster, Request, Code(CLUSTER_DENIED), "")],
    ),
    (ApiKey::CreateAcls, &[check(Op::Alter, Cluster, Request, Code(CLUSTER_DENIED), "")]),
    (ApiKey::DeleteAcls, &[check(Op::Alter, Cluster, Request, Code(CLUSTER_DENIED), "")]),
    (ApiKey::DescribeAcls, &[check(Op::Describe, Cluster, Request, Code(CLUSTER_DENIED), "")]),
];

/// DescribeConfigs / (Incremental)AlterConfigs: `operation` on each resource,
/// answered by its type.
const fn config_checks(operation: AclOperation) -> [Check; 3] {
    [
        check(operation, Topic, Each, Code(TOPIC_DENIED), "topic resources"),
        check(operation, Cluster, Each, Code(CLUSTER_DENIED), "broker and broker logger resources"),
        check(operation, Group, Each, Code(GROUP_DENIED), "group resources"),
    ]
}

/// The checks of `api`, if it has a row.
pub fn rules(api: ApiKey) -> Option<&'static [Check]> {
    API_RULES.iter().find(|(key, _)| *key == api).map(|(_, checks)| *checks)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use kafka_protocol::ResponseError;

    use super::*;
    use crate::api::SUPPORTED_APIS;

    /// The ACL APIs have rows before (and after) they are served.
    const ACL_APIS: [ApiKey; 3] = [ApiKey::CreateAcls, ApiKey::DescribeAcls, ApiKey::DeleteAcls];

    #[test]
    fn every_supported_api_has_exactly_one_row() {
        let missing: Vec<ApiKey> = SUPPORTED_APIS
            .iter()
            .map(|a| a.key)
            .chain(ACL_APIS)
            .filter(|key| rules(*key).is_none())
            .collect();
        assert!(missing.is_empty(), "APIs without an authorization row: {missing:?}");
        let mut seen = HashSet::new();
        for (key, _) in API_RULES {
            assert!(seen.insert(*key), "{key:?} has two rows");
            let served = SUPPORTED_APIS.iter().any(|a| a.key == *key) || ACL_APIS.contains(key);
            assert!(served, "{key:?} has a row but is not served");
        }
    }

    #[test]
    fn only_the_connection_apis_check_nothing() {
        let unchecked: HashSet<ApiKey> =
            API_RULES.iter().filter(|(_, c)| c.is_empty()).map(|(k, _)| *k).collect();
        let expected =
            HashSet::from([ApiKey::ApiVersions, ApiKey::SaslHandshake, ApiKey::SaslAuthenticate]);
        assert_eq!(unchecked, expected);
    }

    #[test]
    fn codes_are_kafkas_and_match_the_resource_type() {
        assert_eq!(TOPIC_DENIED, ResponseError::TopicAuthorizationFailed.code());
        assert_eq!(GROUP_DENIED, ResponseError::GroupAuthorizationFailed.code());
        assert_eq!(CLUSTER_DENIED, ResponseError::ClusterAuthorizationFailed.code());
        assert_eq!(
            TRANSACTIONAL_ID_DENIED,
            ResponseError::TransactionalIdAuthorizationFailed.code()
        );
        // Where Kafka answers another type's code: a follower fetch without
        // CLUSTER_ACTION fails its partitions; an idempotent producer that may
        // write no topic fails on the cluster.
        let exceptions = [(ApiKey::Fetch, Op::ClusterAction), (ApiKey::InitProducerId, Op::Write)];
        for (api, checks) in API_RULES {
            for c in *checks {
                let Code(code) = c.denied else { continue };
                let natural = match c.resource_type {
                    Topic => TOPIC_DENIED,
                    Group => GROUP_DENIED,
                    Cluster => CLUSTER_DENIED,
                    TxnId => TRANSACTIONAL_ID_DENIED,
                    other => panic!("{api:?} checks {other:?}"),
                };
                if !exceptions.contains(&(*api, c.operation)) {
                    assert_eq!(code, natural, "{api:?} {:?} {:?}", c.operation, c.resource_type);
                }
            }
        }
    }

    #[test]
    fn an_alternative_is_followed_by_the_check_that_decides() {
        for (api, checks) in API_RULES {
            for (i, c) in checks.iter().enumerate() {
                if c.denied == Else {
                    let next = checks.get(i + 1);
                    assert!(
                        next.is_some_and(|n| n.denied != Else && n.when == c.when),
                        "{api:?}: {:?} {:?} has no deciding check after it",
                        c.operation,
                        c.resource_type
                    );
                }
                if c.scope == AnyOfType {
                    assert_eq!(c.resource_type, Topic, "{api:?}: only topics are asked by type");
                }
            }
        }
    }
}
