//! Kafka broker keys that have no meaning on a single-node sediment: a
//! `server.properties` carried over from Kafka may set them. Each is accepted
//! (its value kept only to be reported), listed once in the start-up warning
//! and by `check-config`, and otherwise ignored. The reason is one word:
//! - `threads`: Kafka's network and recovery thread pools and its request
//!   queue (sediment's I/O is async; recovery runs per partition at start;
//!   `num.io.threads` is served, as the bound on appends inflating records);
//! - `sockets`: socket tuning and connection limits of Kafka's network layer;
//! - `kraft`: the controller quorum and node roles (sediment is one node and
//!   its own controller);
//! - `replication`: followers, ISR and leader election (one replica);
//! - `purgatory`: Kafka's delayed-operation bookkeeping;
//! - `sasl`: settings of SASL mechanisms sediment does not run (GSSAPI's
//!   Kerberos keys, the login refresh of OAUTHBEARER); a listener enabling
//!   those mechanisms is refused, so these keys can change nothing.
//!
//! A key here is never also a served key (tested), so it cannot hide one.
//!
//! Some of these keys Kafka changes on a running broker
//! ([`DYNAMIC_IGNORED`]): `kafka-configs --alter` accepts them here too,
//! keeps them in the dynamic layers, describes them and logs that they have
//! no effect, instead of refusing a change Kafka takes. The SASL ones only
//! per broker, as Kafka (its per-listener keys).

use crate::config_def::ConfigType;

/// (key, reason).
pub const IGNORED_KEYS: &[(&str, &str)] = &[
    ("num.network.threads", "threads"),
    ("num.recovery.threads.per.data.dir", "threads"),
    ("background.threads", "threads"),
    ("queued.max.requests", "threads"),
    ("queued.max.request.bytes", "threads"),
    ("num.replica.alter.log.dirs.threads", "replication"),
    ("socket.send.buffer.bytes", "sockets"),
    ("socket.receive.buffer.bytes", "sockets"),
    ("socket.listen.backlog.size", "sockets"),
    ("socket.connection.setup.timeout.ms", "sockets"),
    ("socket.connection.setup.timeout.max.ms", "sockets"),
    ("max.connection.creation.rate", "sockets"),
    ("process.roles", "kraft"),
    ("controller.quorum.voters", "kraft"),
    ("controller.quorum.bootstrap.servers", "kraft"),
    ("controller.quorum.election.timeout.ms", "kraft"),
    ("controller.quorum.election.backoff.max.ms", "kraft"),
    ("controller.quorum.fetch.timeout.ms", "kraft"),
    ("controller.quorum.append.linger.ms", "kraft"),
    ("controller.quorum.request.timeout.ms", "kraft"),
    ("controller.quorum.retry.backoff.ms", "kraft"),
    ("controller.listener.names", "kraft"),
    ("metadata.log.dir", "kraft"),
    ("metadata.log.segment.bytes", "kraft"),
    ("metadata.log.segment.ms", "kraft"),
    ("metadata.max.retention.bytes", "kraft"),
    ("metadata.max.retention.ms", "kraft"),
    ("metadata.log.max.record.bytes.between.snapshots", "kraft"),
    ("metadata.log.max.snapshot.interval.ms", "kraft"),
    ("share.coordinator.state.topic.replication.factor", "replication"),
    ("share.coordinator.state.topic.min.isr", "replication"),
    ("replica.socket.receive.buffer.bytes", "replication"),
    ("replica.high.watermark.checkpoint.interval.ms", "replication"),
    ("replica.alter.log.dirs.io.max.bytes.per.second", "replication"),
    ("leader.imbalance.per.broker.percentage", "replication"),
    ("unclean.leader.election.interval.ms", "replication"),
    ("fetch.purgatory.purge.interval.requests", "purgatory"),
    ("producer.purgatory.purge.interval.requests", "purgatory"),
    ("delete.records.purgatory.purge.interval.requests", "purgatory"),
    ("sasl.kerberos.service.name", "sasl"),
    ("sasl.kerberos.kinit.cmd", "sasl"),
    ("sasl.kerberos.ticket.renew.window.factor", "sasl"),
    ("sasl.kerberos.ticket.renew.jitter", "sasl"),
    ("sasl.kerberos.min.time.before.relogin", "sasl"),
    ("sasl.kerberos.principal.to.local.rules", "sasl"),
    ("sasl.login.refresh.window.factor", "sasl"),
    ("sasl.login.refresh.window.jitter", "sasl"),
    ("sasl.login.refresh.min.period.seconds", "sasl"),
    ("sasl.login.refresh.buffer.seconds", "sasl"),
];

/// Where Kafka lets `kafka-configs` change an ignored key on a running
/// broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicScope {
    /// Per broker or as the cluster-wide default.
    ClusterOrBroker,
    /// Per broker only (`--entity-name`): Kafka refuses it as a default.
    BrokerOnly,
}

/// The ignored keys Kafka's `DynamicListenerConfig` reconfigures, with
/// their type (values are checked against it, as Kafka does) and scope.
pub const DYNAMIC_IGNORED: &[(&str, ConfigType, DynamicScope)] = &[
    ("num.network.threads", ConfigType::Int, DynamicScope::ClusterOrBroker),
    ("max.connection.creation.rate", ConfigType::Int, DynamicScope::ClusterOrBroker),
    ("sasl.kerberos.service.name", ConfigType::String, DynamicScope::BrokerOnly),
    ("sasl.kerberos.kinit.cmd", ConfigType::String, DynamicScope::BrokerOnly),
    ("sasl.kerberos.ticket.renew.window.factor", ConfigType::Double, DynamicScope::BrokerOnly),
    ("sasl.kerberos.ticket.renew.jitter", ConfigType::Double, DynamicScope::BrokerOnly),
    ("sasl.kerberos.min.time.before.relogin", ConfigType::Long, DynamicScope::BrokerOnly),
    ("sasl.kerberos.principal.to.local.rules", ConfigType::List, DynamicScope::BrokerOnly),
    ("sasl.login.refresh.window.factor", ConfigType::Double, DynamicScope::BrokerOnly),
    ("sasl.login.refresh.window.jitter", ConfigType::Double, DynamicScope::BrokerOnly),
    ("sasl.login.refresh.min.period.seconds", ConfigType::Int, DynamicScope::BrokerOnly),
    ("sasl.login.refresh.buffer.seconds", ConfigType::Int, DynamicScope::BrokerOnly),
];

/// The type and scope of an ignored key Kafka changes on a running broker.
pub fn dynamic_ignored(key: &str) -> Option<(ConfigType, DynamicScope)> {
    DYNAMIC_IGNORED.iter().find(|(k, ..)| *k == key).map(|(_, kind, scope)| (*kind, *scope))
}

/// Whether `value` is one of `kind` (Kafka's `ConfigDef.parseType`): what
/// is checked of an ignored key's value, which nothing else reads.
pub fn parses_as(kind: ConfigType, value: &str) -> bool {
    let v = value.trim();
    match kind {
        ConfigType::Int => v.parse::<i32>().is_ok(),
        ConfigType::Long => v.parse::<i64>().is_ok(),
        ConfigType::Double => v.parse::<f64>().is_ok_and(f64::is_finite),
        ConfigType::Boolean => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
        ConfigType::String | ConfigType::List | ConfigType::Password => true,
    }
}

/// The reason `key` is ignored, or `None` when it is not one of these keys.
pub fn ignored_reason(key: &str) -> Option<&'static str> {
    IGNORED_KEYS.iter().find(|(k, _)| *k == key).map(|(_, reason)| *reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dynamic_ignored_key_is_ignored() {
        for (key, ..) in DYNAMIC_IGNORED {
            assert!(ignored_reason(key).is_some(), "{key}");
        }
    }

    #[test]
    fn values_are_checked_against_the_type() {
        assert!(parses_as(ConfigType::Double, "0.8"));
        assert!(!parses_as(ConfigType::Double, "most"));
        assert!(!parses_as(ConfigType::Int, "2147483648"));
        assert!(parses_as(ConfigType::Long, "60000"));
        assert!(parses_as(ConfigType::List, "RULE:[1:$1]/L,DEFAULT"));
    }

    #[test]
    fn no_ignored_key_is_served() {
        for (key, _) in IGNORED_KEYS {
            assert!(super::super::lookup(key).is_none(), "{key} is served and ignored");
        }
    }
}
