//! The cluster's keys in etcd and their values (docs/design/multi-broker.md,
//! 3.3): Kafka's ZooKeeper paths under the namespace, JSON values carrying
//! a `version`. No key string is built anywhere else.

use serde::{Deserialize, Serialize};

/// The key paths of one cluster's namespace (`/sediment` by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterKeys {
    namespace: String,
}

impl ClusterKeys {
    pub fn new(namespace: &str) -> Self {
        Self { namespace: namespace.trim_end_matches('/').to_string() }
    }
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
    /// `/<ns>/cluster/id`: written once, by the first broker.
    pub fn cluster_id(&self) -> String {
        format!("{}/cluster/id", self.namespace)
    }
    /// `/<ns>/controller`: the controller's, on its session's lease.
    pub fn controller(&self) -> String {
        format!("{}/controller", self.namespace)
    }
    /// `/<ns>/brokers/ids/`: every registration.
    pub fn broker_ids(&self) -> String {
        format!("{}/brokers/ids/", self.namespace)
    }
    /// `/<ns>/brokers/ids/<id>`: one broker's registration, on its lease.
    pub fn broker(&self, node_id: i32) -> String {
        format!("{}{node_id}", self.broker_ids())
    }
    /// `/<ns>/latest_producer_id_block`: the last block of producer ids handed out.
    pub fn latest_producer_id_block(&self) -> String {
        format!("{}/latest_producer_id_block", self.namespace)
    }
    /// The node id of a registration key, if it is one.
    pub fn node_id_of(&self, key: &str) -> Option<i32> {
        key.strip_prefix(&self.broker_ids())?.parse().ok()
    }
    /// `/<ns>/brokers/topics/`: every topic and its partitions' states.
    pub fn topics(&self) -> String {
        format!("{}/brokers/topics/", self.namespace)
    }
    /// `/<ns>/brokers/topics/<topic>`: a topic's id and assignment.
    pub fn topic(&self, name: &str) -> String {
        format!("{}{name}", self.topics())
    }
    /// `/<ns>/brokers/topics/<topic>/`: the prefix of a topic's partition states.
    pub fn partition_states(&self, name: &str) -> String {
        format!("{}{name}/partitions/", self.topics())
    }
    /// `/<ns>/brokers/topics/<topic>/partitions/<p>/state`: leader, epochs, ISR.
    pub fn partition_state(&self, name: &str, partition: i32) -> String {
        format!("{}{partition}/state", self.partition_states(name))
    }
    /// `/<ns>/config/topics/<topic>`: a topic's config overrides.
    pub fn topic_config(&self, name: &str) -> String {
        format!("{}/config/topics/{name}", self.namespace)
    }
    /// `/<ns>/admin/delete_topics/<topic id>`: a deleted topic, whose copies
    /// every broker removes.
    pub fn deleted_topic(&self, topic_id: &str) -> String {
        format!("{}/admin/delete_topics/{topic_id}", self.namespace)
    }
    /// `/<ns>/kafka-acl/` and `/<ns>/kafka-acl-extended/`: every ACL key.
    pub fn acl_prefixes(&self) -> [String; 2] {
        [
            format!("{}/kafka-acl/", self.namespace),
            format!("{}/kafka-acl-extended/", self.namespace),
        ]
    }
    /// The key holding the ACLs of one resource pattern (ZooKeeper-mode
    /// Kafka's paths): `/<ns>/kafka-acl/<type>/<name>` for a literal name,
    /// `/<ns>/kafka-acl-extended/<pattern>/<type>/<name>` for the others;
    /// the name percent-encoded, so it never holds a `/`.
    pub fn acl(&self, resource_type: &str, pattern_type: &str, name: &str) -> String {
        let name = sanitized(name);
        if pattern_type.eq_ignore_ascii_case("LITERAL") {
            format!("{}{resource_type}/{name}", self.acl_prefixes()[0])
        } else {
            let pattern = pattern_type.to_ascii_lowercase();
            format!("{}{pattern}/{resource_type}/{name}", self.acl_prefixes()[1])
        }
    }
    /// `/<ns>/config/users/`: every user's SCRAM credentials.
    pub fn users(&self) -> String {
        format!("{}/config/users/", self.namespace)
    }
    /// `/<ns>/config/users/<user>`: one user's credentials, the name
    /// percent-encoded.
    pub fn user(&self, name: &str) -> String {
        format!("{}{}", self.users(), sanitized(name))
    }
    /// `/<ns>/config/brokers/`: the dynamic broker configs.
    pub fn broker_configs(&self) -> String {
        format!("{}/config/brokers/", self.namespace)
    }
    /// `/<ns>/config/brokers/<default>` (the cluster-wide default, as
    /// ZooKeeper-mode Kafka named it) or `/<ns>/config/brokers/<id>`.
    pub fn broker_config(&self, node_id: Option<i32>) -> String {
        match node_id {
            Some(id) => format!("{}{id}", self.broker_configs()),
            None => format!("{}<default>", self.broker_configs()),
        }
    }
    /// `/<ns>/config/groups/`: the dynamic group configs.
    pub fn group_configs(&self) -> String {
        format!("{}/config/groups/", self.namespace)
    }
    /// `/<ns>/config/groups/<group>`: one group's configs, the id
    /// percent-encoded.
    pub fn group_config(&self, group: &str) -> String {
        format!("{}{}", self.group_configs(), sanitized(group))
    }
    /// Whether `key` is one the stores keep as stored: ACLs, credentials,
    /// dynamic broker and group configs.
    pub fn security_kind(&self, key: &str) -> Option<SecurityKey> {
        if self.acl_prefixes().iter().any(|p| key.starts_with(p.as_str())) {
            Some(SecurityKey::Acls)
        } else if key.starts_with(self.users().as_str()) {
            Some(SecurityKey::User)
        } else if key.starts_with(self.broker_configs().as_str()) {
            Some(SecurityKey::BrokerConfig)
        } else if key.starts_with(self.group_configs().as_str()) {
            Some(SecurityKey::GroupConfig)
        } else {
            None
        }
    }
    /// What a key under the namespace is, if the image keeps it.
    pub fn kind_of<'k>(&self, key: &'k str) -> Option<KeyKind<'k>> {
        if let Some(rest) = key.strip_prefix(self.topics().as_str()) {
            return Some(match rest.split_once('/') {
                None => KeyKind::Topic(rest),
                Some((topic, tail)) => {
                    let p = tail.strip_prefix("partitions/")?.strip_suffix("/state")?;
                    KeyKind::PartitionState(topic, p.parse().ok()?)
                }
            });
        }
        let config = format!("{}/config/topics/", self.namespace);
        if let Some(topic) = key.strip_prefix(config.as_str()) {
            return Some(KeyKind::TopicConfig(topic));
        }
        let deleted = format!("{}/admin/delete_topics/", self.namespace);
        key.strip_prefix(deleted.as_str()).map(KeyKind::DeletedTopic)
    }
}

/// A name as a key's last segment: percent-encoded (Kafka's `Sanitizer`
/// encodes user names the same way), so `/` and control bytes never
/// appear in it.
fn sanitized(name: &str) -> String {
    form_urlencoded::byte_serialize(name.as_bytes()).collect()
}

/// The security keys of [`ClusterKeys::security_kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityKey {
    /// One resource pattern's ACLs.
    Acls,
    /// One user's SCRAM credentials.
    User,
    /// The dynamic broker configs of one level (`config::dynamic`).
    BrokerConfig,
    /// One group's dynamic configs (`group::group_config_manager`).
    GroupConfig,
}

/// The topic keys of [`ClusterKeys::kind_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind<'k> {
    Topic(&'k str),
    PartitionState(&'k str, i32),
    TopicConfig(&'k str),
    DeletedTopic(&'k str),
}

/// `brokers/topics/<topic>`'s value: the topic id (Kafka's base64 form) and
/// each partition's replicas, preferred leader first. Written by the broker
/// that creates the topic, then grown (more partitions) or reassigned.
///
/// During a reassignment (ZooKeeper-mode Kafka's topic znode fields) a
/// partition's replicas are the target followed by the replicas leaving;
/// `adding_replicas` lists the target's new ones, `removing_replicas` the
/// ones leaving. Both are absent for a partition not being reassigned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicValue {
    pub version: i32,
    pub topic_id: String,
    pub partitions: std::collections::BTreeMap<String, Vec<i32>>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub adding_replicas: std::collections::BTreeMap<String, Vec<i32>>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub removing_replicas: std::collections::BTreeMap<String, Vec<i32>>,
}

/// `brokers/topics/<topic>/partitions/<p>/state`'s value, written by the
/// controller alone (Kafka's `PartitionRegistration`, ZooKeeper's
/// `LeaderAndIsr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateValue {
    pub version: i32,
    /// The topic this state belongs to: one of a deleted topic of the same
    /// name is never applied to its successor.
    pub topic_id: String,
    /// -1: offline.
    pub leader: i32,
    /// Raised with every change of leader.
    pub leader_epoch: i32,
    /// Raised with every write of the state.
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
    pub leader_recovery_state: i8,
    /// The epoch of the controller that wrote it.
    pub controller_epoch: i64,
}

/// `config/topics/<topic>`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfigValue {
    pub version: i32,
    pub config: std::collections::BTreeMap<String, String>,
}

/// `admin/delete_topics/<topic id>`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedTopicValue {
    pub version: i32,
    pub name: String,
    pub deleted_ms: i64,
}

/// `cluster/id`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdValue {
    pub version: i32,
    pub id: String,
}

/// `controller`'s value: who controls, and the epoch of its registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerValue {
    pub version: i32,
    pub brokerid: i32,
    pub broker_epoch: i64,
}

/// One listener's endpoint in a registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointValue {
    pub listener: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: String,
}

/// Kafka's `BrokerState` numbers a registration carries.
pub mod broker_state {
    /// Registered, not yet eligible (Kafka's fenced broker).
    pub const STARTING: i32 = 1;
    pub const RUNNING: i32 = 3;
    pub const PENDING_CONTROLLED_SHUTDOWN: i32 = 6;
}

/// `brokers/ids/<id>`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub version: i32,
    /// New at every start: tells a restarted broker from its predecessor.
    pub incarnation_id: String,
    /// The data dir's identity (`meta.properties`): a registration naming
    /// ours is our own dead predecessor.
    pub directory_id: String,
    pub rack: Option<String>,
    pub state: i32,
    pub endpoints: Vec<EndpointValue>,
    pub inter_broker_listener: String,
    pub software_version: String,
}

impl BrokerRegistration {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a registration serializes")
    }
}

/// A value read back: `None` for one that does not parse (written by
/// something else; logged by the caller, never trusted).
pub fn parse<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Option<T> {
    serde_json::from_slice(bytes).ok()
}

pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("a key's value serializes")
}
