//! Authorization denials: the counter
//! `sediment_authorization_denials_total{api,resource_type,operation}` and
//! the INFO line that names who was denied what.
//!
//! Invariants:
//! * No label carries a principal, a resource name or any other
//!   client-chosen string: `api` is an API sediment serves, `resource_type`
//!   and `operation` are Kafka's enum names. The principal and the resource
//!   appear only in the log line.
//! * The line is written for the first denial of a (principal, operation,
//!   resource) and then at most once per [`DENIAL_LOG_INTERVAL_MS`] for that
//!   key, with the number of denials left unlogged since the previous line,
//!   so a client retrying a denied request in a loop cannot flood the log.
//! * At most [`MAX_DENIAL_KEYS`] keys are remembered; when a new key arrives
//!   at the bound, the key whose line was written longest ago is forgotten
//!   (its next denial is logged as a first one). Memory is therefore bounded
//!   whatever principals and names clients send.
//! * Time comes from the injected [`Clock`](crate::clock::Clock), so the
//!   limiter is tested without sleeping.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::{IntCounterVec, Opts, Registry};

use crate::clock::{self, SharedClock};

/// How often a repeated denial of one key is logged at most.
pub const DENIAL_LOG_INTERVAL_MS: i64 = 60_000;
/// How many (principal, operation, resource) keys the limiter remembers.
pub const MAX_DENIAL_KEYS: usize = 10_000;

/// One denied check, as the request's context saw it.
#[derive(Debug, Clone, Copy)]
pub struct Denial<'a> {
    /// The API's name as the request metrics label it ("CreateAcls").
    pub api: &'a str,
    /// Kafka's name of the resource type ("TOPIC").
    pub resource_type: &'a str,
    /// Kafka's name of the operation ("WRITE").
    pub operation: &'a str,
    /// `Type:name` of the requester.
    pub principal: &'a str,
    pub resource_name: &'a str,
    pub peer: IpAddr,
}

type Key = (String, String, String, String);

#[derive(Debug)]
struct KeyState {
    /// Position in `order`: when this key's line was last written.
    seq: u64,
    last_logged_ms: i64,
    suppressed: u64,
}

/// The rate limiter of the denial log line (pure: time is an argument).
#[derive(Debug, Default)]
struct DenialLog {
    keys: HashMap<Key, KeyState>,
    /// Keys by the sequence number of their last line, oldest first.
    order: BTreeMap<u64, Key>,
    next_seq: u64,
}

impl DenialLog {
    /// Count one denial of `key` at `now_ms`. `Some(n)` when a line is due,
    /// `n` being the denials of the key not logged since its previous line.
    fn observe(&mut self, key: Key, now_ms: i64) -> Option<u64> {
        let seq = self.next_seq;
        if let Some(state) = self.keys.get_mut(&key) {
            if now_ms.saturating_sub(state.last_logged_ms) < DENIAL_LOG_INTERVAL_MS {
                state.suppressed += 1;
                return None;
            }
            let suppressed = std::mem::take(&mut state.suppressed);
            self.order.remove(&state.seq);
            state.seq = seq;
            state.last_logged_ms = now_ms;
            self.order.insert(seq, key);
            self.next_seq += 1;
            return Some(suppressed);
        }
        if self.keys.len() >= MAX_DENIAL_KEYS {
            if let Some((_, oldest)) = self.order.pop_first() {
                self.keys.remove(&oldest);
            }
        }
        self.keys.insert(key.clone(), KeyState { seq, last_logged_ms: now_ms, suppressed: 0 });
        self.order.insert(seq, key);
        self.next_seq += 1;
        Some(0)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Counts every authorization denial and writes its rate-limited log line.
/// Clones share the counter and the limiter.
#[derive(Debug, Clone)]
pub struct DenialRecorder {
    denials: IntCounterVec,
    log: Arc<Mutex<DenialLog>>,
    clock: SharedClock,
}

impl Default for DenialRecorder {
    fn default() -> Self {
        Self::with_clock(clock::system())
    }
}

impl DenialRecorder {
    pub fn with_clock(clock: SharedClock) -> Self {
        let denials = IntCounterVec::new(
            Opts::new(
                "sediment_authorization_denials_total",
                "Authorization checks that denied a request, per API, resource type and operation (no principal or resource name)",
            ),
            &["api", "resource_type", "operation"],
        )
        .expect("valid metric");
        Self { denials, log: Arc::new(Mutex::new(DenialLog::default())), clock }
    }

    pub(super) fn register(&self, r: &Registry) -> Result<(), prometheus::Error> {
        r.register(Box::new(self.denials.clone()))
    }

    /// Count `d` and log it unless its key was logged within the interval.
    /// Returns whether the line was written.
    pub fn record(&self, d: &Denial<'_>) -> bool {
        self.denials.with_label_values(&[d.api, d.resource_type, d.operation]).inc();
        let key = (
            d.principal.to_string(),
            d.operation.to_string(),
            d.resource_type.to_string(),
            d.resource_name.to_string(),
        );
        let due = self.log.lock().observe(key, self.clock.now_ms());
        let Some(suppressed) = due else { return false };
        tracing::info!(
            principal = d.principal,
            operation = d.operation,
            resource = %format_args!("{}:{}", d.resource_type, d.resource_name),
            api = d.api,
            peer = %d.peer,
            suppressed,
            "authorization denied"
        );
        true
    }

    /// The counter's value for one label set (tests).
    pub fn count(&self, api: &str, resource_type: &str, operation: &str) -> u64 {
        self.denials.with_label_values(&[api, resource_type, operation]).get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MockClock;

    fn key(principal: &str, name: &str) -> Key {
        (principal.into(), "WRITE".into(), "TOPIC".into(), name.into())
    }

    #[test]
    fn a_key_is_logged_first_then_once_per_interval_with_the_suppressed_count() {
        let mut log = DenialLog::default();
        assert_eq!(log.observe(key("User:alice", "billing"), 0), Some(0));
        for t in [1, 1_000, DENIAL_LOG_INTERVAL_MS - 1] {
            assert_eq!(log.observe(key("User:alice", "billing"), t), None);
        }
        // Another principal or resource is another key.
        assert_eq!(log.observe(key("User:bob", "billing"), 5), Some(0));
        assert_eq!(log.observe(key("User:alice", "orders"), 5), Some(0));
        assert_eq!(log.observe(key("User:alice", "billing"), DENIAL_LOG_INTERVAL_MS), Some(3));
        assert_eq!(log.observe(key("User:alice", "billing"), DENIAL_LOG_INTERVAL_MS + 1), None);
        assert_eq!(log.observe(key("User:alice", "billing"), 3 * DENIAL_LOG_INTERVAL_MS), Some(1));
        assert_eq!(log.observe(key("User:alice", "billing"), 5 * DENIAL_LOG_INTERVAL_MS), Some(0));
    }

    #[test]
    fn the_map_is_bounded_and_forgets_the_key_logged_longest_ago() {
        let mut log = DenialLog::default();
        for i in 0..MAX_DENIAL_KEYS {
            assert_eq!(log.observe(key("User:a", &format!("t{i}")), 0), Some(0));
        }
        // t0 is logged again, so t1 becomes the oldest line.
        assert_eq!(log.observe(key("User:a", "t0"), DENIAL_LOG_INTERVAL_MS), Some(0));
        assert_eq!(log.observe(key("User:a", "new"), DENIAL_LOG_INTERVAL_MS), Some(0));
        assert_eq!(log.len(), MAX_DENIAL_KEYS);
        // t0 is still remembered (suppressed), t1 was forgotten (logged as new).
        assert_eq!(log.observe(key("User:a", "t0"), DENIAL_LOG_INTERVAL_MS + 1), None);
        assert_eq!(log.observe(key("User:a", "t1"), DENIAL_LOG_INTERVAL_MS + 1), Some(0));
        assert_eq!(log.len(), MAX_DENIAL_KEYS);
    }

    #[test]
    fn every_denial_is_counted_with_principal_free_labels() {
        let clock = MockClock::new(1_000);
        let r = DenialRecorder::with_clock(clock.clone());
        let d = Denial {
            api: "Produce",
            resource_type: "TOPIC",
            operation: "WRITE",
            principal: "User:alice",
            resource_name: "billing",
            peer: "127.0.0.1".parse().expect("ip"),
        };
        assert!(r.record(&d));
        assert!(!r.record(&d));
        clock.advance(DENIAL_LOG_INTERVAL_MS);
        assert!(r.record(&d));
        assert_eq!(r.count("Produce", "TOPIC", "WRITE"), 3);
        let registry = Registry::new();
        r.register(&registry).expect("register");
        let mut text = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut text)
            .expect("encode");
        let text = String::from_utf8(text).expect("utf8");
        assert!(
            text.contains(
                "sediment_authorization_denials_total{api=\"Produce\",operation=\"WRITE\",resource_type=\"TOPIC\"} 3"
            ),
            "{text}"
        );
        assert!(!text.contains("alice") && !text.contains("billing"), "{text}");
    }
}
