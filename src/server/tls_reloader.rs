//! Reload of an SSL listener's key and trust stores when their files change
//! on disk, without touching open connections.
//!
//! One task per SSL listener that has a store file (inline PEM keys cannot
//! change): every `ssl.reload.interval.ms` it stamps the key and trust store
//! files (`security::tls_identity::stamp`: mtime, size, SHA-256). When a
//! stamp differs from the one of the config being served, it builds a new
//! config from the files with `security::tls::load` (every rule of the start:
//! PEM form, one PKCS#8 key that matches the leaf certificate, a usable trust
//! store) and checks Kafka's identity rule (the subject DN and SANs of the
//! served certificate do not change unless `ssl.allow.dn.changes` /
//! `ssl.allow.san.changes`). Only then is the listener's `LiveTlsConfig`
//! replaced.
//!
//! Invariants:
//! * A new config is installed whole or not at all; handshakes that start
//!   after the swap use it, connections opened before keep their session.
//! * A file that fails (garbage, half written, a changed DN) leaves the old
//!   config serving, is logged at WARN once and counted once
//!   (`sediment_tls_reloads_total{result="failure"}`); the same stamps are not
//!   retried, the next change of either file is.
//! * The task ends when the server stops.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::metrics::TlsMetrics;
use crate::security::tls::{self, LiveTlsConfig, Loaded, TlsSettings};
use crate::security::tls_identity::{self, FileStamp};

/// What a listener's reloader watches and how. Holds the TLS settings, which
/// may hold secrets: its `Debug` shows the interval only.
#[derive(Clone)]
pub struct TlsWatch {
    pub settings: TlsSettings,
    /// 0: no reload.
    pub interval: Duration,
    pub allow_dn_changes: bool,
    pub allow_san_changes: bool,
}

impl std::fmt::Debug for TlsWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsWatch").field("interval", &self.interval).finish_non_exhaustive()
    }
}

impl TlsWatch {
    fn files(&self) -> Vec<PathBuf> {
        let s = &self.settings;
        [&s.keystore_location, &s.truststore_location]
            .into_iter()
            .flatten()
            .map(PathBuf::from)
            .collect()
    }
}

type Stamps = Vec<Option<FileStamp>>;

fn stamps(files: &[PathBuf]) -> Stamps {
    files.iter().map(|p| tls_identity::stamp(p).ok()).collect()
}

/// Poll `listener`'s store files until `stop`, replacing `live` on a good change.
pub(super) async fn run(
    listener: String,
    live: Arc<LiveTlsConfig>,
    watch: TlsWatch,
    metrics: TlsMetrics,
    mut stop: watch::Receiver<bool>,
) {
    if let Ok(id) = tls_identity::identity(&live.loaded().leaf) {
        metrics.certificate_not_after(&listener, id.not_after);
    }
    let files = watch.files();
    if files.is_empty() || watch.interval.is_zero() {
        return;
    }
    let stamp_files = files.clone();
    let Ok(mut served) = tokio::task::spawn_blocking(move || stamps(&stamp_files)).await else {
        return;
    };
    let mut failed: Option<Stamps> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(watch.interval) => {}
            _ = stop.changed() => return,
        }
        let (w, f, current) = (watch.clone(), files.clone(), live.loaded());
        let (seen, refused) = (served.clone(), failed.clone());
        // The stamps are taken before the files are read for the new config:
        // a write in between shows as one more change at the next poll.
        let checked = tokio::task::spawn_blocking(move || {
            let now = stamps(&f);
            if now == seen || refused.as_ref() == Some(&now) {
                return (now, None);
            }
            let outcome = reload(&w, &current);
            (now, Some(outcome))
        });
        let Ok((now, Some(outcome))) = checked.await else { continue };
        match outcome {
            Ok((loaded, id)) => {
                // Installed before it is counted: a reader of the counter
                // finds new connections on the new config.
                live.replace(loaded);
                served = now;
                failed = None;
                metrics.reloaded(&listener, true);
                metrics.certificate_not_after(&listener, id.not_after);
                tracing::info!(%listener, subject = %id.subject, not_after = id.not_after, "TLS key or trust store reloaded; new connections use it");
            }
            Err(reason) => {
                failed = Some(now);
                metrics.reloaded(&listener, false);
                tracing::warn!(%listener, "TLS key or trust store changed but not reloaded, the previous one stays in use: {reason}");
            }
        }
    }
}

/// Build the listener's config from its files and check it against the one
/// served.
fn reload(
    watch: &TlsWatch,
    current: &Loaded,
) -> Result<(Loaded, tls_identity::CertIdentity), String> {
    let loaded = tls::load(&watch.settings).map_err(|e| e.to_string())?;
    let new = tls_identity::identity(&loaded.leaf)?;
    let old = tls_identity::identity(&current.leaf)?;
    tls_identity::ensure_compatible(&old, &new, watch.allow_dn_changes, watch.allow_san_changes)?;
    Ok((loaded, new))
}
