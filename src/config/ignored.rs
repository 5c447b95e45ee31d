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
//! - `purgatory`: Kafka's delayed-operation bookkeeping.
//!
//! A key here is never also a served key (tested), so it cannot hide one.

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
];

/// The reason `key` is ignored, or `None` when it is not one of these keys.
pub fn ignored_reason(key: &str) -> Option<&'static str> {
    IGNORED_KEYS.iter().find(|(k, _)| *k == key).map(|(_, reason)| *reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_ignored_key_is_served() {
        for (key, _) in IGNORED_KEYS {
            assert!(super::super::lookup(key).is_none(), "{key} is served and ignored");
        }
    }
}
