//! The command line's tiered storage tools: the store check of
//! `sediment check-config` and `sediment restore`.

use std::path::Path;

use crate::config::BrokerConfig;
use crate::remote::restore::{self, RestoreSummary};
use crate::remote::{RemoteError, RemoteStorageConfig};

fn runtime() -> Result<tokio::runtime::Runtime, RemoteError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RemoteError::Join(e.to_string()))
}

/// Try the store of `config` once (read its marker, which also lists the
/// prefix): `None` when tiered storage is off, else a line saying whose
/// store it is.
///
/// # Errors
/// One line naming what is wrong: credentials, endpoint, bucket, URL.
pub fn check(config: &BrokerConfig) -> anyhow::Result<Option<String>> {
    let Some(rc) = RemoteStorageConfig::from_values(config)? else { return Ok(None) };
    let store = rc.open()?;
    let marker = runtime()?.block_on(store.read_marker())?;
    Ok(Some(match marker {
        Some(m) => {
            format!("remote storage: {} answers; it belongs to cluster {}", rc.url, m.cluster_id)
        }
        None => format!("remote storage: {} answers; no broker has written to it yet", rc.url),
    }))
}

/// `sediment restore --from URL --data-dir DIR`.
///
/// # Errors
/// As [`restore::restore`].
pub fn restore(
    url: &str,
    endpoint: Option<String>,
    region: Option<String>,
    data_dir: &Path,
    node_id: i32,
) -> anyhow::Result<RestoreSummary> {
    let store = RemoteStorageConfig::for_tool(url, endpoint, region).open()?;
    Ok(runtime()?.block_on(restore::restore(&store, data_dir, node_id))?)
}
