//! ApiVersions as Apache Kafka 4.4.0 answers it: the same request goes to a
//! real Kafka 4.4.0 (started from its jars) and to sediment, and every API
//! key's range must be equal except the documented differences below, each
//! an API or version sediment does not serve (so it is left out rather than
//! faked). The `transaction.version` feature must be finalized as Kafka
//! finalizes it by default.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::reference_kafka::ReferenceKafka;
use crate::broker::{TestBroker, Wire};

fn ask(port: u16) -> ApiVersionsResponse {
    let mut w = Wire::connect(port);
    w.call(
        3,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("conformance"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    )
}

fn ranges(r: &ApiVersionsResponse) -> BTreeMap<i16, (i16, i16)> {
    r.api_keys.iter().map(|a| (a.api_key, (a.min_version, a.max_version))).collect()
}

fn name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|()| format!("key {key}"), |k| format!("{k:?}"))
}

fn finalized(r: &ApiVersionsResponse, feature: &str) -> Option<i16> {
    r.finalized_features.iter().find(|f| f.name.as_str() == feature).map(|f| f.max_version_level)
}

/// An API's (min, max) versions; None when not advertised.
type Range = Option<(i16, i16)>;

/// Where sediment's ranges differ from Kafka 4.4.0's, and why: the API
/// name, Kafka's range and sediment's (None: not advertised).
const NOT_SERVED: &[(&str, Range, Range)] = &[
    // Newer versions than the kafka-protocol crate (0.18) decodes and
    // sediment's vendored copy does not add yet: WriteTxnMarkers'
    // TransactionVersion (KIP-1228).
    ("WriteTxnMarkers", Some((1, 2)), Some((1, 1))),
    // Not implemented: log dir moves by request, delegation tokens, client
    // quota changes, KRaft's quorum and features (sediment's cluster runs on
    // etcd).
    ("AlterReplicaLogDirs", Some((1, 2)), None),
    ("CreateDelegationToken", Some((1, 3)), None),
    ("RenewDelegationToken", Some((1, 2)), None),
    ("ExpireDelegationToken", Some((1, 2)), None),
    ("DescribeDelegationToken", Some((1, 3)), None),
    ("AlterClientQuotas", Some((0, 1)), None),
    ("DescribeQuorum", Some((0, 2)), None),
    ("UpdateFeatures", Some((0, 2)), None),
    ("UnregisterBroker", Some((0, 0)), None),
    ("AddRaftVoter", Some((0, 1)), None),
    ("RemoveRaftVoter", Some((0, 0)), None),
    // Share groups (KIP-932) and streams groups (KIP-1071): issue 30.
    ("ShareGroupHeartbeat", Some((1, 1)), None),
    ("ShareGroupDescribe", Some((1, 1)), None),
    ("ShareFetch", Some((1, 2)), None),
    ("ShareAcknowledge", Some((1, 2)), None),
    ("InitializeShareGroupState", Some((0, 0)), None),
    ("ReadShareGroupState", Some((0, 0)), None),
    ("WriteShareGroupState", Some((0, 1)), None),
    ("DeleteShareGroupState", Some((0, 0)), None),
    ("ReadShareGroupStateSummary", Some((0, 1)), None),
    ("key 88", Some((0, 1)), None),
    ("key 89", Some((0, 1)), None),
    ("DescribeShareGroupOffsets", Some((0, 1)), None),
    ("AlterShareGroupOffsets", Some((0, 0)), None),
    ("DeleteShareGroupOffsets", Some((0, 0)), None),
    // Keys newer than the crate: StreamsGroupTopologyDescriptionUpdate (93)
    // and UnregisterController (94).
    ("key 93", Some((0, 0)), None),
    ("key 94", Some((0, 0)), None),
    // A leader's ISR change: Kafka's brokers send it to the controller, which
    // does not listen for clients; sediment's brokers answer it themselves
    // (a lone node with NOT_CONTROLLER).
    ("AlterPartition", None, Some((2, 3))),
];

#[test]
fn api_versions_match_kafka_4_4_but_for_what_is_not_served() {
    let kafka = ReferenceKafka::start_version("4.4.0", &[]);
    let b = TestBroker::start(&[]);
    let (theirs, ours) = (ask(kafka.port), ask(b.port));
    let feature = "transaction.version";
    assert_eq!(finalized(&ours, feature), Some(2));
    assert_eq!(finalized(&ours, feature), finalized(&theirs, feature));
    let (theirs, ours) = (ranges(&theirs), ranges(&ours));
    let keys: BTreeSet<i16> = theirs.keys().chain(ours.keys()).copied().collect();
    let diff: BTreeSet<(String, Range, Range)> = keys
        .into_iter()
        .filter(|k| theirs.get(k) != ours.get(k))
        .map(|k| (name(k), theirs.get(&k).copied(), ours.get(&k).copied()))
        .collect();
    let want: BTreeSet<_> = NOT_SERVED.iter().map(|(n, t, o)| (n.to_string(), *t, *o)).collect();
    assert_eq!(diff, want, "(api, Kafka 4.4.0, sediment)");
}
