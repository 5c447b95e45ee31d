//! Who may use the metrics endpoint, and how much of it at once (its keys
//! are `sediment.metrics.*` and `sediment.key.audit.max.concurrent`).
//!
//! * With `sediment.metrics.auth.token` set, every request must carry
//!   `Authorization: Bearer <token>` (compared in constant time); any other
//!   is answered 401. Requests act as `sediment.metrics.auth.principal`.
//! * With an authorizer configured (`authorizer.class.name`), `/key-audit`
//!   answers only for a topic that principal may DESCRIBE, and for the
//!   internal topics (`__consumer_offsets`, `__transaction_state`) only to a
//!   super user; otherwise 403. `/metrics` and `/cleaner-status` name no
//!   record and are the token's to guard.
//! * At most `sediment.metrics.max.connections` connections are held; one
//!   more waits in the listen backlog until one closes.
//! * A request's headers must arrive within
//!   `sediment.metrics.request.timeout.ms`, and its answer be ready within
//!   it too (else 503).
//! * At most `sediment.key.audit.max.concurrent` key audits run at once (an
//!   audit reads a whole partition); later ones queue, up to the request
//!   timeout, then are answered 503.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Whether a principal may audit a topic's keys: the broker's authorizer,
/// handed down by the broker (`metrics` imports no security code).
pub trait AuditAuthorizer: Send + Sync + std::fmt::Debug {
    /// May `principal` (`User:name`), from `peer`, audit a key of `topic`?
    fn may_audit(&self, principal: &str, peer: IpAddr, topic: &str) -> bool;
}

/// The endpoint's limits and who may use it.
#[derive(Debug, Clone)]
pub struct EndpointAccess {
    /// The bearer token every request must carry; `None`: no token asked.
    pub token: Option<String>,
    /// The principal requests act as.
    pub principal: String,
    pub max_connections: usize,
    pub request_timeout: Duration,
    pub max_concurrent_audits: usize,
    /// The broker's authorizer, when one is configured.
    pub authorizer: Option<Arc<dyn AuditAuthorizer>>,
}

impl EndpointAccess {
    /// Whether a request with this `Authorization` header value may be answered.
    pub fn authenticated(&self, authorization: Option<&[u8]>) -> bool {
        let Some(token) = &self.token else { return true };
        let Some(given) = authorization.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        constant_time_eq(given, token.as_bytes())
    }

    /// Whether `/key-audit` may answer for `topic` to a request from `peer`.
    pub fn may_audit(&self, peer: IpAddr, topic: &str) -> bool {
        self.authorizer.as_ref().is_none_or(|a| a.may_audit(&self.principal, peer, topic))
    }
}

/// `a == b`, in a time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_passes() {
        let access = |token: Option<&str>| EndpointAccess {
            token: token.map(str::to_string),
            principal: "User:ANONYMOUS".into(),
            max_connections: 1,
            request_timeout: Duration::from_secs(1),
            max_concurrent_audits: 1,
            authorizer: None,
        };
        assert!(access(None).authenticated(None));
        let guarded = access(Some("s3cret"));
        assert!(guarded.authenticated(Some(b"Bearer s3cret")));
        for bad in [&b"Bearer s3crex"[..], b"Bearer s3cret ", b"Basic s3cret", b"s3cret", b""] {
            assert!(!guarded.authenticated(Some(bad)), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!guarded.authenticated(None));
    }
}
