//! The keys `config` itself reads (Kafka's `ServerConfigs`,
//! `SocketServerConfigs`, `BrokerSecurityConfigs`): the broker's identity
//! and listeners, the network limits, TLS, SASL, authorization, metrics and
//! topic creation. Every other module declares its own (`cleaner::config`,
//! `group::config`, `txn::config`, `remote::config`,
//! `log::manager_config`); [`super::TABLES`] gathers them all.

use super::DEFAULT_PROTOCOL_MAP;
use crate::config_def::{broker_key, ConfigDef, ConfigTable};
use crate::log::manager_config::NUM_PARTITIONS;

pub const NODE_ID: ConfigDef = broker_key!(
    "node.id",
    Int,
    "1",
    Some(0.0),
    "this broker's id, reported in Metadata and DescribeCluster"
);
pub const LISTENERS: ConfigDef = broker_key!("listeners", String, "PLAINTEXT://:9092", None,
    "where the broker listens: comma-separated NAME://host:port listeners (empty host: all interfaces)");
pub const ADVERTISED_LISTENERS: ConfigDef = broker_key!("advertised.listeners", String, "", None,
    "the NAME://host:port clients of each listener are told to connect to; a listener not named: its own (localhost when it binds all interfaces)");
pub const LISTENER_SECURITY_PROTOCOL_MAP: ConfigDef = broker_key!(
    "listener.security.protocol.map",
    String,
    DEFAULT_PROTOCOL_MAP,
    None,
    "NAME:PROTOCOL for every listener name: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
);
pub const SOCKET_REQUEST_MAX_BYTES: ConfigDef = broker_key!(
    "socket.request.max.bytes",
    Int,
    "104857600",
    Some(1.0),
    "largest request frame accepted; bigger frames close the connection"
);
pub const NUM_IO_THREADS: ConfigDef = broker_key!(
    "num.io.threads",
    Int,
    "8",
    Some(1.0),
    "most requests inflating compressed records (each up to 64 x message.max.bytes) at once; the others wait, so this bounds that memory"
);
pub const MAX_CONNECTIONS: ConfigDef = broker_key!("max.connections", Int, "2147483647", Some(0.0),
    "most connections the broker holds over all listeners; past it a listener accepts only once one closes");
pub const MAX_CONNECTIONS_PER_IP: ConfigDef = broker_key!(
    "max.connections.per.ip",
    Int,
    "2147483647",
    Some(0.0),
    "most connections from one address; one more is closed as soon as it is accepted"
);
pub const MAX_CONNECTIONS_PER_IP_OVERRIDES: ConfigDef = broker_key!("max.connections.per.ip.overrides", String, "", None,
    "per-address limits replacing max.connections.per.ip: comma-separated host:count (an IP address or a name resolved at start)");
pub const CONNECTIONS_MAX_IDLE_MS: ConfigDef = broker_key!("connections.max.idle.ms", Long, "600000", Some(1.0),
    "a connection with no request for this long is closed; also the longest a SASL authentication may take");
pub const FETCH_MAX_BYTES: ConfigDef = broker_key!("fetch.max.bytes", Int, "57671680", Some(1024.0),
    "most record bytes one Fetch response carries, whatever the request asks (KIP-74's first-batch exception aside)");
pub const MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS: ConfigDef = broker_key!("max.incremental.fetch.session.cache.slots", Int, "1000", Some(0.0),
    "most incremental fetch sessions (KIP-227) the broker keeps; 0 disables them, so every fetch carries all its partitions");
pub const MAX_REQUEST_PARTITION_SIZE_LIMIT: ConfigDef = broker_key!("max.request.partition.size.limit", Int, "2000", Some(1.0),
    "most partitions one DescribeTopicPartitions answer describes (KIP-966); the client pages through the rest with the answer's cursor");

pub const BROKER_CONFIGS: ConfigTable = ConfigTable {
    title: "Broker and network",
    note: "",
    keys: &[
        &NODE_ID,
        &LISTENERS,
        &ADVERTISED_LISTENERS,
        &LISTENER_SECURITY_PROTOCOL_MAP,
        &SOCKET_REQUEST_MAX_BYTES,
        &NUM_IO_THREADS,
        &MAX_CONNECTIONS,
        &MAX_CONNECTIONS_PER_IP,
        &MAX_CONNECTIONS_PER_IP_OVERRIDES,
        &CONNECTIONS_MAX_IDLE_MS,
        &FETCH_MAX_BYTES,
        &MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
        &MAX_REQUEST_PARTITION_SIZE_LIMIT,
    ],
};

pub const SASL_ENABLED_MECHANISMS: ConfigDef = broker_key!("sasl.enabled.mechanisms", List, "GSSAPI", None,
    "SASL mechanisms a SASL listener offers (also per listener); sediment serves PLAIN, so a SASL listener must set it");
pub const SASL_JAAS_CONFIG: ConfigDef = broker_key!("sasl.jaas.config", Password, "", None,
    "a SASL listener's JAAS config, set per listener and mechanism as listener.name.<listener>.<mechanism>.sasl.jaas.config; PLAIN's users are its user_<name>=\"<password>\" options (secret)");
pub const SASL_SERVER_MAX_RECEIVE_SIZE: ConfigDef = broker_key!("sasl.server.max.receive.size", Int, "524288", Some(1.0),
    "largest frame a SASL listener reads before authentication completes; bigger frames fail authentication");
pub const CONNECTION_FAILED_AUTHENTICATION_DELAY_MS: ConfigDef = broker_key!(
    "connection.failed.authentication.delay.ms",
    Int,
    "100",
    Some(0.0),
    "how long a connection that failed authentication waits before it is answered and closed"
);
pub const CONNECTIONS_MAX_REAUTH_MS: ConfigDef = broker_key!("connections.max.reauth.ms", Long, "0", Some(0.0),
    "lifetime of a SASL session: a client must re-authenticate on its connection before it ends or is disconnected (0: sessions never expire; also per listener and per listener and mechanism)");

pub const SASL_CONFIGS: ConfigTable = ConfigTable {
    title: "SASL",
    note: "Keys of SASL_PLAINTEXT and SASL_SSL listeners. PLAIN's users go in\n# listener.name.<listener>.plain.sasl.jaas.config; secrets are never printed.",
    keys: &[&SASL_ENABLED_MECHANISMS, &SASL_JAAS_CONFIG, &SASL_SERVER_MAX_RECEIVE_SIZE, &CONNECTION_FAILED_AUTHENTICATION_DELAY_MS, &CONNECTIONS_MAX_REAUTH_MS],
};

pub const AUTHORIZER_CLASS_NAME: ConfigDef = broker_key!("authorizer.class.name", String, "", None,
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns on ACLs (kept in sediment-acls.json); empty: every request is allowed");
pub const SUPER_USERS: ConfigDef = broker_key!(
    "super.users",
    String,
    "",
    None,
    "principals allowed everything, before any ACL, as User:name;User:other"
);
pub const ALLOW_EVERYONE_IF_NO_ACL_FOUND: ConfigDef = broker_key!(
    "allow.everyone.if.no.acl.found",
    Boolean,
    "false",
    None,
    "whether a resource that no ACL applies to at all is open to everyone"
);

pub const AUTHORIZATION_CONFIGS: ConfigTable = ConfigTable {
    title: "Authorization",
    note: "",
    keys: &[&AUTHORIZER_CLASS_NAME, &SUPER_USERS, &ALLOW_EVERYONE_IF_NO_ACL_FOUND],
};

pub const METRICS_LISTEN: ConfigDef = broker_key!("metrics.listen", String, "127.0.0.1:9404", None,
    "sediment: host:port of the HTTP endpoint serving /metrics (Prometheus) and /cleaner-status (JSON); empty disables it");

pub const SEDIMENT_METRICS_AUTH_TOKEN: ConfigDef = broker_key!("sediment.metrics.auth.token", Password, "", None,
    "sediment: when set, every request to the metrics endpoint must present this bearer token (else 401); set it wherever metrics.listen is not loopback (secret)");
pub const SEDIMENT_METRICS_AUTH_PRINCIPAL: ConfigDef = broker_key!("sediment.metrics.auth.principal", String, "User:ANONYMOUS", None,
    "sediment: the principal requests to the metrics endpoint act as: with an authorizer, /key-audit answers only for topics it may DESCRIBE, and for __consumer_offsets and __transaction_state only when it is a super user");
pub const SEDIMENT_METRICS_MAX_CONNECTIONS: ConfigDef = broker_key!("sediment.metrics.max.connections", Int, "64", Some(1.0),
    "sediment: most connections the metrics endpoint holds; one more waits in the listen backlog until one closes");
pub const SEDIMENT_METRICS_REQUEST_TIMEOUT_MS: ConfigDef = broker_key!("sediment.metrics.request.timeout.ms", Long, "30000", Some(1.0),
    "sediment: the longest the metrics endpoint waits for a request's headers, and for its answer (503 past it)");
pub const SEDIMENT_KEY_AUDIT_MAX_CONCURRENT: ConfigDef = broker_key!("sediment.key.audit.max.concurrent", Int, "2", Some(1.0),
    "sediment: key audits (/key-audit, each reads a whole partition) run at once; later ones queue up to sediment.metrics.request.timeout.ms, then get 503");

pub const METRICS_CONFIGS: ConfigTable = ConfigTable {
    title: "Metrics",
    note: "",
    keys: &[
        &METRICS_LISTEN,
        &SEDIMENT_METRICS_AUTH_TOKEN,
        &SEDIMENT_METRICS_AUTH_PRINCIPAL,
        &SEDIMENT_METRICS_MAX_CONNECTIONS,
        &SEDIMENT_METRICS_REQUEST_TIMEOUT_MS,
        &SEDIMENT_KEY_AUDIT_MAX_CONCURRENT,
    ],
};

pub const DEFAULT_REPLICATION_FACTOR: ConfigDef = broker_key!(
    "default.replication.factor",
    Int,
    "1",
    Some(1.0),
    "replication factor of auto-created topics (only 1 is possible on one node)"
);
pub const AUTO_CREATE_TOPICS_ENABLE: ConfigDef = broker_key!(
    "auto.create.topics.enable",
    Boolean,
    "true",
    None,
    "create a topic when Metadata asks for an unknown one"
);
pub const DELETE_TOPIC_ENABLE: ConfigDef =
    broker_key!("delete.topic.enable", Boolean, "true", None, "allow DeleteTopics");

pub const TOPIC_CREATION_CONFIGS: ConfigTable = ConfigTable {
    title: "Topics",
    note: "",
    keys: &[
        &NUM_PARTITIONS,
        &DEFAULT_REPLICATION_FACTOR,
        &AUTO_CREATE_TOPICS_ENABLE,
        &DELETE_TOPIC_ENABLE,
    ],
};
