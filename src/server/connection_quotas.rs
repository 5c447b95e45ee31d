//! Kafka's `ConnectionQuotas`: how many connections the broker holds in all
//! (`max.connections`) and from one address (`max.connections.per.ip`, with
//! `max.connections.per.ip.overrides`), counted from accept to close over
//! every listener.
//!
//! Invariants:
//! * A listener accepts only while the broker holds fewer than
//!   `max.connections`: the slot is reserved before `accept`, so the count
//!   never passes the limit, and a client beyond it waits in the kernel's
//!   backlog (Kafka's acceptor blocks the same way) until a connection closes.
//! * A connection from an address already at its limit is closed as soon as
//!   it is accepted, before anything is read from it or allocated for it.
//! * A slot is given back when its [`ConnectionSlot`] is dropped, however the
//!   connection ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::broker_defs::{
    MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS_PER_IP_OVERRIDES,
};
use crate::config_def::{ConfigDef, ConfigValues, InvalidValue};

/// The limits, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub max_per_ip: usize,
    /// Per-address limits that replace `max_per_ip` for their address.
    pub per_ip_overrides: HashMap<IpAddr, usize>,
}

impl ConnectionLimits {
    /// No limit at all (Kafka's defaults are `Int.MaxValue`, as good as none).
    pub fn unlimited() -> Self {
        Self {
            max_connections: usize::MAX,
            max_per_ip: usize::MAX,
            per_ip_overrides: HashMap::new(),
        }
    }

    /// The limits of `config` (`max.connections`, `max.connections.per.ip`,
    /// `max.connections.per.ip.overrides`; a host name resolved now, each of
    /// its addresses given the count).
    ///
    /// # Errors
    /// An override that is not `host:count`, or a host that does not resolve.
    pub fn from_values(values: &dyn ConfigValues) -> Result<Self, InvalidValue> {
        let invalid = |reason: String| InvalidValue::new(&MAX_CONNECTIONS_PER_IP_OVERRIDES, reason);
        let mut per_ip_overrides = HashMap::new();
        let text = values.value(&MAX_CONNECTIONS_PER_IP_OVERRIDES);
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (host, count) = entry
                .rsplit_once(':')
                .ok_or_else(|| invalid(format!("{entry:?} is not host:count")))?;
            let count: usize = count
                .parse()
                .map_err(|_| invalid(format!("{count:?} in {entry:?} is not a count")))?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
                Ok(ip) => vec![ip],
                Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, 0))
                    .map_err(|e| invalid(format!("{host:?} does not resolve: {e}")))?
                    .map(|a| a.ip())
                    .collect(),
            };
            for ip in ips {
                per_ip_overrides.insert(ip, count);
            }
        }
        let count = |def: &ConfigDef| values.value(def).parse().unwrap_or(usize::MAX);
        Ok(Self {
            max_connections: count(&MAX_CONNECTIONS),
            max_per_ip: count(&MAX_CONNECTIONS_PER_IP),
            per_ip_overrides,
        })
    }

    fn for_ip(&self, ip: &IpAddr) -> usize {
        self.per_ip_overrides.get(ip).copied().unwrap_or(self.max_per_ip)
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The broker's connection counts, shared by every listener.
#[derive(Debug)]
pub struct ConnectionQuotas {
    limits: ConnectionLimits,
    counts: Mutex<Counts>,
    freed: Notify,
}

/// A place among `max.connections`, taken before `accept` (given back on
/// drop unless [`Reservation::admit`] turned it into a [`ConnectionSlot`]).
#[derive(Debug)]
pub struct Reservation {
    quotas: Option<Arc<ConnectionQuotas>>,
}

/// One counted connection; dropping it gives its place back.
#[derive(Debug)]
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

impl ConnectionQuotas {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self { limits, counts: Mutex::new(Counts::default()), freed: Notify::new() })
    }

    /// Wait until the broker holds fewer than `max.connections`, and take a
    /// place among them.
    pub async fn reserve(self: &Arc<Self>) -> Reservation {
        loop {
            // Registered before the check, so a slot freed in between wakes it.
            let freed = self.freed.notified();
            {
                let mut counts = self.counts.lock();
                if counts.total < self.limits.max_connections {
                    counts.total += 1;
                    return Reservation { quotas: Some(Arc::clone(self)) };
                }
            }
            freed.await;
        }
    }

    /// Connections held now (all listeners).
    pub fn total(&self) -> usize {
        self.counts.lock().total
    }

    fn release_total(&self) {
        let mut counts = self.counts.lock();
        counts.total = counts.total.saturating_sub(1);
        drop(counts);
        self.freed.notify_one();
    }
}

impl Reservation {
    /// The reserved place for a connection from `ip`, or `None` (and the
    /// place given back) when `ip` already holds its limit.
    pub fn admit(mut self, ip: IpAddr) -> Option<ConnectionSlot> {
        let quotas = self.quotas.take()?;
        let limit = quotas.limits.for_ip(&ip);
        let mut counts = quotas.counts.lock();
        let held = counts.per_ip.entry(ip).or_default();
        if *held >= limit {
            if *held == 0 {
                counts.per_ip.remove(&ip);
            }
            drop(counts);
            quotas.release_total();
            return None;
        }
        *held += 1;
        drop(counts);
        Some(ConnectionSlot { quotas, ip })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(quotas) = self.quotas.take() {
            quotas.release_total();
        }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        {
            let mut counts = self.quotas.counts.lock();
            if let Some(held) = counts.per_ip.get_mut(&self.ip) {
                *held -= 1;
                if *held == 0 {
                    counts.per_ip.remove(&self.ip);
                }
            }
        }
        self.quotas.release_total();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(max: usize, per_ip: usize, overrides: &[(&str, usize)]) -> Arc<ConnectionQuotas> {
        let per_ip_overrides =
            overrides.iter().map(|(ip, n)| (ip.parse().expect("ip"), *n)).collect();
        ConnectionQuotas::new(ConnectionLimits {
            max_connections: max,
            max_per_ip: per_ip,
            per_ip_overrides,
        })
    }

    fn now<F: std::future::Future>(f: F) -> Option<F::Output> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("rt");
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(50), f).await.ok()
        })
    }

    #[test]
    fn an_address_at_its_limit_is_refused_and_its_place_given_back() {
        let q = quotas(10, 2, &[("10.0.0.9", 3)]);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let held: Vec<_> =
            (0..2).map(|_| now(q.reserve()).unwrap().admit(a).expect("under the limit")).collect();
        assert!(now(q.reserve()).unwrap().admit(a).is_none(), "a third from the same address");
        assert_eq!(q.total(), 2, "the refused reservation gave its place back");
        // The override raises its address's limit.
        let b: IpAddr = "10.0.0.9".parse().unwrap();
        let more: Vec<_> = (0..3).map(|_| now(q.reserve()).unwrap().admit(b).unwrap()).collect();
        assert!(now(q.reserve()).unwrap().admit(b).is_none());
        drop(held);
        assert_eq!(q.total(), 3);
        assert!(
            now(q.reserve()).unwrap().admit(a).is_some(),
            "a closed connection frees its address"
        );
        drop(more);
    }

    #[test]
    fn past_max_connections_accept_waits_until_one_closes() {
        let q = quotas(2, 10, &[]);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let first = now(q.reserve()).unwrap().admit(ip).unwrap();
        let _second = now(q.reserve()).unwrap().admit(ip).unwrap();
        assert!(now(q.reserve()).is_none(), "a third waits");
        drop(first);
        assert!(now(q.reserve()).is_some(), "and gets the place a closed one freed");
    }
}
