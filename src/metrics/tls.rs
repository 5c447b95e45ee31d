//! Key and trust store reloads of SSL listeners. Labels carry the listener
//! name and a fixed result only, never a path or a certificate field.

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

/// `sediment_tls_reloads_total{listener,result}` and
/// `sediment_tls_certificate_not_after_seconds{listener}`.
#[derive(Debug, Clone)]
pub struct TlsMetrics {
    reloads: IntCounterVec,
    not_after: IntGaugeVec,
}

impl Default for TlsMetrics {
    fn default() -> Self {
        Self {
            reloads: IntCounterVec::new(
                Opts::new(
                    "sediment_tls_reloads_total",
                    "Changes of an SSL listener's key or trust store file seen, per listener and result (success: the new config serves new connections; failure: the old one stays)",
                ),
                &["listener", "result"],
            )
            .expect("valid metric"),
            not_after: IntGaugeVec::new(
                Opts::new(
                    "sediment_tls_certificate_not_after_seconds",
                    "Expiry (Unix seconds) of the certificate an SSL listener currently serves",
                ),
                &["listener"],
            )
            .expect("valid metric"),
        }
    }
}

impl TlsMetrics {
    pub(super) fn register(&self, r: &Registry) -> Result<(), prometheus::Error> {
        r.register(Box::new(self.reloads.clone()))?;
        r.register(Box::new(self.not_after.clone()))
    }

    /// A reload of `listener` ended; `ok` when the new config was installed.
    pub fn reloaded(&self, listener: &str, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.reloads.with_label_values(&[listener, result]).inc();
    }

    /// The served certificate of `listener` expires at `unix_seconds`.
    pub fn certificate_not_after(&self, listener: &str, unix_seconds: i64) {
        self.not_after.with_label_values(&[listener]).set(unix_seconds);
    }
}
