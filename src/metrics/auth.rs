//! Authentication counters of SASL listeners. Labels never carry a
//! principal, a user name or a client-chosen string: the mechanism label is
//! one sediment serves or `none`.

use prometheus::{IntCounterVec, Opts, Registry};

/// Kafka's `successful-authentication-total` and `failed-authentication-total`
/// (under the JMX exporter's names) and sediment's failures by reason.
#[derive(Debug, Clone)]
pub struct AuthMetrics {
    successful: IntCounterVec,
    failed: IntCounterVec,
    failures: IntCounterVec,
    reauthentications: IntCounterVec,
    expired: IntCounterVec,
}

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

impl Default for AuthMetrics {
    fn default() -> Self {
        Self {
            successful: counter(
                "kafka_server_socket_server_metrics_successful_authentication_total",
                "Connections that completed SASL authentication, per listener (Kafka's successful-authentication-total)",
                &["listener"],
            ),
            failed: counter(
                "kafka_server_socket_server_metrics_failed_authentication_total",
                "Connections that failed SASL authentication, per listener (Kafka's failed-authentication-total)",
                &["listener"],
            ),
            failures: counter(
                "sediment_authentication_failures_total",
                "Connections of SASL listeners closed before authentication completed, per listener, mechanism and reason (bad_credentials, unsupported_mechanism, illegal_state, oversized, malformed, timeout)",
                &["listener", "mechanism", "reason"],
            ),
            reauthentications: counter(
                "sediment_reauthentications_total",
                "SASL re-authentications on open connections (KIP-368), per listener, mechanism and result (success, failure)",
                &["listener", "mechanism", "result"],
            ),
            expired: counter(
                "sediment_expired_sessions_closed_total",
                "Connections closed because their SASL session expired without a re-authentication (Kafka's expired-connections-killed-count)",
                &["listener"],
            ),
        }
    }
}

impl AuthMetrics {
    pub(super) fn register(&self, r: &Registry) -> Result<(), prometheus::Error> {
        r.register(Box::new(self.successful.clone()))?;
        r.register(Box::new(self.failed.clone()))?;
        r.register(Box::new(self.failures.clone()))?;
        r.register(Box::new(self.reauthentications.clone()))?;
        r.register(Box::new(self.expired.clone()))
    }

    /// A re-authentication ended; `ok` whether it succeeded.
    pub fn reauthenticated(&self, listener: &str, mechanism: &str, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.reauthentications.with_label_values(&[listener, mechanism, result]).inc();
    }

    /// A connection was closed at a request after its session expired.
    pub fn session_expired(&self, listener: &str) {
        self.expired.with_label_values(&[listener]).inc();
    }

    pub fn authenticated(&self, listener: &str) {
        self.successful.with_label_values(&[listener]).inc();
    }

    /// A failed authentication (Kafka counts it too).
    pub fn failed(&self, listener: &str, mechanism: &str, reason: &str) {
        self.failed.with_label_values(&[listener]).inc();
        self.failures.with_label_values(&[listener, mechanism, reason]).inc();
    }

    /// An authentication that did not finish within `connections.max.idle.ms`.
    pub fn authentication_timed_out(&self, listener: &str) {
        self.failures.with_label_values(&[listener, "none", "timeout"]).inc();
    }

    /// A frame that was not a well-formed request during authentication:
    /// closed at once; Kafka does not count it as a failed authentication.
    pub fn malformed(&self, listener: &str) {
        self.failures.with_label_values(&[listener, "none", "malformed"]).inc();
    }
}
