//! A broker's session with etcd (docs/design/multi-broker.md, 3.4): one
//! lease, TTL = ⌈`broker.session.timeout.ms` / 1000⌉ s, renewed every
//! `broker.heartbeat.interval.ms`; its registration and, on the controller,
//! the controller key live on it.
//!
//! The lease timer is the broker's own view of how long the lease surely
//! lasts: the send time of the last answered keepalive, plus the TTL less
//! a drift allowance (10⁻³) and `sediment.cluster.lease.safety.margin.ms`.
//! etcd counts from when it received that keepalive, and a new etcd leader
//! only extends leases, so the broker's deadline always comes first. It is
//! read on `Clock::boot_ms` (`CLOCK_BOOTTIME`), which counts a suspended VM.
//! While the timer runs the broker may lead; once it runs out it leads
//! nothing until etcd answers again.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::coordination::{Coordination, Result};
use crate::clock::SharedClock;

/// The session's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// `broker.session.timeout.ms` (Kafka's default 9000).
    pub session_timeout_ms: i64,
    /// `broker.heartbeat.interval.ms` (Kafka's default 2000).
    pub heartbeat_interval_ms: i64,
    /// `sediment.cluster.lease.safety.margin.ms` (1000).
    pub safety_margin_ms: i64,
}

impl SessionConfig {
    /// The lease's TTL in whole seconds, as etcd grants them.
    pub fn ttl_secs(&self) -> i64 {
        ((self.session_timeout_ms + 999) / 1000).max(1)
    }

    /// Kafka-style check across the keys: one lost keepalive must not stop
    /// the broker leading, so two intervals fit in what the timer allows.
    ///
    /// # Errors
    /// A reason naming the keys.
    pub fn check(&self) -> Result<(), String> {
        let usable = self.ttl_secs() * 1000 - self.safety_margin_ms;
        if self.heartbeat_interval_ms <= 0 || self.heartbeat_interval_ms * 2 > usable {
            return Err(format!(
                "broker.heartbeat.interval.ms={} must be positive and at most half of the session ({} s) less sediment.cluster.lease.safety.margin.ms={} ({usable} ms)",
                self.heartbeat_interval_ms,
                self.ttl_secs(),
                self.safety_margin_ms
            ));
        }
        Ok(())
    }
}

/// The broker's deadline for its lease (module doc).
#[derive(Debug)]
pub struct LeaseTimer {
    clock: SharedClock,
    deadline_ms: AtomicI64,
}

/// Clock-rate drift allowed between this machine and etcd's.
const DRIFT: f64 = 1e-3;

impl LeaseTimer {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, deadline_ms: AtomicI64::new(i64::MIN) }
    }

    /// Whether the lease surely lasts now.
    pub fn is_running(&self) -> bool {
        self.clock.boot_ms() < self.deadline_ms.load(Ordering::Acquire)
    }

    /// A keepalive (or the grant) sent at `sent_ms` was answered with `ttl_secs`.
    pub fn extend(&self, sent_ms: i64, ttl_secs: i64, margin_ms: i64) {
        let allowed = (ttl_secs as f64 * 1000.0 * (1.0 - DRIFT)) as i64 - margin_ms;
        self.deadline_ms.fetch_max(sent_ms + allowed, Ordering::AcqRel);
    }

    /// The lease is gone: stop at once.
    pub fn stop(&self) {
        self.deadline_ms.store(i64::MIN, Ordering::Release);
    }

    /// Milliseconds left (0 once it ran out).
    pub fn remaining_ms(&self) -> i64 {
        (self.deadline_ms.load(Ordering::Acquire) - self.clock.boot_ms()).max(0)
    }
}

/// How a keepalive round went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// etcd renewed the lease.
    Renewed,
    /// The lease is gone (expired or revoked): its keys too.
    Expired,
    /// etcd did not answer; the timer goes on running out.
    Unanswered,
}

/// One broker's session: its lease and the timer over it.
#[derive(Debug)]
pub struct BrokerSession {
    coordination: Arc<dyn Coordination>,
    config: SessionConfig,
    clock: SharedClock,
    lease: AtomicI64,
    timer: LeaseTimer,
    /// Times the session was lost (its timer ran out or its lease expired),
    /// as the keepalive rounds saw it.
    lost: AtomicU64,
    /// Whether the last round found the timer running.
    was_live: AtomicBool,
}

impl BrokerSession {
    /// Grant a lease and start the timer.
    ///
    /// # Errors
    /// etcd's refusal or unavailability.
    pub async fn open(
        coordination: Arc<dyn Coordination>,
        config: SessionConfig,
        clock: SharedClock,
    ) -> Result<Self> {
        let session = Self {
            timer: LeaseTimer::new(Arc::clone(&clock)),
            coordination,
            config,
            clock,
            lease: AtomicI64::new(0),
            lost: AtomicU64::new(0),
            was_live: AtomicBool::new(true),
        };
        session.renew().await?;
        Ok(session)
    }

    /// A new lease, after the last one expired (its keys are gone: the
    /// caller registers again).
    ///
    /// # Errors
    /// etcd's refusal or unavailability.
    pub async fn renew(&self) -> Result<i64> {
        let sent = self.clock.boot_ms();
        let lease = self.coordination.grant(self.config.ttl_secs()).await?;
        self.lease.store(lease, Ordering::Release);
        self.timer.extend(sent, self.config.ttl_secs(), self.config.safety_margin_ms);
        self.was_live.store(true, Ordering::Release);
        Ok(lease)
    }

    pub fn coordination(&self) -> &Arc<dyn Coordination> {
        &self.coordination
    }
    pub fn config(&self) -> SessionConfig {
        self.config
    }
    pub fn lease(&self) -> i64 {
        self.lease.load(Ordering::Acquire)
    }
    /// Whether the broker may lead now (module doc).
    pub fn is_live(&self) -> bool {
        self.timer.is_running()
    }
    pub fn timer(&self) -> &LeaseTimer {
        &self.timer
    }
    pub fn lost_count(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// One keepalive of the current lease.
    pub async fn keep_alive_once(&self) -> KeepAlive {
        let lease = self.lease();
        let sent = self.clock.boot_ms();
        let outcome = match self.coordination.keep_alive(lease).await {
            Ok(ttl) => {
                self.timer.extend(sent, ttl, self.config.safety_margin_ms);
                KeepAlive::Renewed
            }
            Err(super::CoordinationError::LeaseNotFound(_)) => {
                self.timer.stop();
                KeepAlive::Expired
            }
            Err(e) => {
                tracing::warn!(
                    lease = format!("{lease:x}"),
                    remaining_ms = self.timer.remaining_ms(),
                    "etcd keepalive unanswered: {e}"
                );
                KeepAlive::Unanswered
            }
        };
        let live = self.is_live();
        if self.was_live.swap(live, Ordering::AcqRel) && !live {
            self.lost.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                lease = format!("{lease:x}"),
                "session lost: leading nothing until etcd answers"
            );
        }
        outcome
    }

    /// End the session: the lease and every key on it go at once (clean
    /// shutdown).
    ///
    /// # Errors
    /// etcd's unavailability (the lease then expires by itself).
    pub async fn close(&self) -> Result<()> {
        self.timer.stop();
        self.coordination.revoke(self.lease()).await
    }
}
