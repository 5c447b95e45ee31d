//! Tiered storage settings: the broker keys (`remote.log.storage.system.enable`,
//! `sediment.remote.storage.*`), the store URL, and the store built from them.
//!
//! Credentials are never config keys: they come from `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY` (`AWS_SESSION_TOKEN`), else the `AWS_PROFILE`
//! (or `default`) profile of `~/.aws/credentials`, else the SDK's other
//! sources (web identity, instance metadata). Nothing here prints them:
//! errors name the variable, never its value.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as StorePath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use super::store::RemoteStore;
use super::RemoteError;
use crate::config_def::{broker_key, ConfigDef, ConfigTable, ConfigValues, InvalidValue};
use crate::log::config::REMOTE_STORAGE_ENABLE;

pub const REMOTE_LOG_STORAGE_SYSTEM_ENABLE: ConfigDef = broker_key!("remote.log.storage.system.enable", Boolean, "false", None,
    "tiered storage: topics with remote.storage.enable=true have their closed segments copied to the store of sediment.remote.storage.url");
pub const SEDIMENT_REMOTE_STORAGE_URL: ConfigDef = broker_key!("sediment.remote.storage.url", String, "", None,
    "sediment: the object store of tiered storage: s3://bucket/prefix, or file:///dir for development; credentials come from the AWS environment variables or ~/.aws/credentials, never from this file");
pub const SEDIMENT_REMOTE_STORAGE_ENDPOINT: ConfigDef = broker_key!("sediment.remote.storage.endpoint", String, "", None,
    "sediment: the S3 endpoint URL of an S3-compatible server (http://host:port); empty: AWS, or AWS_ENDPOINT_URL");
pub const SEDIMENT_REMOTE_STORAGE_REGION: ConfigDef = broker_key!(
    "sediment.remote.storage.region",
    String,
    "",
    None,
    "sediment: the S3 region; empty: AWS_REGION / AWS_DEFAULT_REGION, else us-east-1"
);
pub const SEDIMENT_REMOTE_STORAGE_UPLOAD_INTERVAL_MS: ConfigDef = broker_key!("sediment.remote.storage.upload.interval.ms", Long, "5000", Some(1.0),
    "sediment: how often closed segments not yet in the store are looked for (also the first retry delay after a store error, doubling up to a minute)");
pub const SEDIMENT_REMOTE_STORAGE_DELETE_DELAY_MS: ConfigDef = broker_key!("sediment.remote.storage.delete.delay.ms", Long, "300000", Some(0.0),
    "sediment: how long an object no longer in a partition's latest manifest (replaced by a clean, or left by a crash) stays in the store before it is deleted");
pub const REMOTE_FETCH_MAX_WAIT_MS: ConfigDef = broker_key!("remote.fetch.max.wait.ms", Int, "500", Some(1.0),
    "tiered storage: the longest a fetch waits for a read from the store (a download in progress goes on, and a later fetch finds the segment in the cache)");
pub const REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS: ConfigDef = broker_key!("remote.list.offsets.request.timeout.ms", Long, "30000", Some(1.0),
    "tiered storage: the longest a ListOffsets timestamp lookup waits for the store before the partition answers REQUEST_TIMED_OUT");
pub const SEDIMENT_REMOTE_STORAGE_CACHE_BYTES: ConfigDef = broker_key!("sediment.remote.storage.cache.bytes", Long, "1073741824", Some(0.0),
    "sediment: the most bytes of segments downloaded from the store kept on local disk (<log dir>/remote-cache, emptied at start) for fetches and offset lookups below the local log; the least recently read go first, never one being read");

/// Tiered storage's keys, as the template and the reference show them.
pub const REMOTE_STORAGE_CONFIGS: ConfigTable = ConfigTable {
    title: "Tiered storage",
    note: "Closed segments of topics with remote.storage.enable=true are copied to an object store.\n# Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), or AWS_PROFILE in ~/.aws/credentials.",
    keys: &[&REMOTE_LOG_STORAGE_SYSTEM_ENABLE, &SEDIMENT_REMOTE_STORAGE_URL, &SEDIMENT_REMOTE_STORAGE_ENDPOINT, &SEDIMENT_REMOTE_STORAGE_REGION, &SEDIMENT_REMOTE_STORAGE_UPLOAD_INTERVAL_MS, &SEDIMENT_REMOTE_STORAGE_DELETE_DELAY_MS, &REMOTE_FETCH_MAX_WAIT_MS, &REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS, &SEDIMENT_REMOTE_STORAGE_CACHE_BYTES],
};

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `s3://bucket/prefix`
    S3 { bucket: String, prefix: String },
    /// `file:///dir` (development and tests).
    File { dir: PathBuf },
}

/// Parse a store URL.
///
/// # Errors
/// A reason, for a URL that is neither `s3://bucket[/prefix]` nor `file:///dir`.
pub fn parse_url(url: &str) -> Result<StoreUrl, String> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
        if bucket.len() < 3 || !bucket.chars().all(valid) {
            return Err(format!(
                "{bucket:?} is not an S3 bucket name (3 to 63 of a-z, 0-9, '-', '.')"
            ));
        }
        let prefix = prefix.trim_matches('/').to_string();
        return Ok(StoreUrl::S3 { bucket: bucket.to_string(), prefix });
    }
    if let Some(dir) = url.strip_prefix("file://") {
        if !dir.starts_with('/') {
            return Err(format!("{url:?}: a file URL names an absolute directory, file:///dir"));
        }
        return Ok(StoreUrl::File { dir: PathBuf::from(dir) });
    }
    Err(format!("{url:?} is neither s3://bucket/prefix nor file:///dir"))
}

/// The tiered storage settings of an enabled broker (or of `sediment restore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStorageConfig {
    pub url: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub upload_interval_ms: u64,
    pub delete_delay_ms: i64,
    /// `sediment.remote.storage.cache.bytes`: the downloaded segments kept on disk.
    pub cache_bytes: u64,
    /// `remote.fetch.max.wait.ms`: the longest a fetch waits for the store.
    pub fetch_max_wait_ms: u64,
    /// `remote.list.offsets.request.timeout.ms`: the longest a ListOffsets
    /// lookup waits for the store.
    pub list_offsets_timeout_ms: u64,
}

impl RemoteStorageConfig {
    /// The settings of `values`; `None` when tiered storage is off.
    ///
    /// # Errors
    /// The system on without a URL or with a bad one; `remote.storage.enable`
    /// defaulted on while the system is off.
    pub fn from_values(values: &dyn ConfigValues) -> Result<Option<Self>, InvalidValue> {
        let (system, url_key) = (&REMOTE_LOG_STORAGE_SYSTEM_ENABLE, &SEDIMENT_REMOTE_STORAGE_URL);
        let url = values.value(url_key).trim().to_string();
        if !url.is_empty() {
            parse_url(&url).map_err(|r| InvalidValue::new(url_key, r))?;
        }
        if !values.boolean(system) {
            if values.explicit_value(&REMOTE_STORAGE_ENABLE) == Some("true") {
                let reason =
                    format!("topics cannot default to remote storage while {}=false", system.name);
                return Err(InvalidValue::new(&REMOTE_STORAGE_ENABLE, reason));
            }
            return Ok(None);
        }
        if url.is_empty() {
            let reason = format!("{}=true needs the store's URL", system.name);
            return Err(InvalidValue::new(url_key, reason));
        }
        let opt =
            |def: &ConfigDef| Some(values.value(def).trim().to_string()).filter(|v| !v.is_empty());
        Ok(Some(Self {
            url,
            endpoint: opt(&SEDIMENT_REMOTE_STORAGE_ENDPOINT),
            region: opt(&SEDIMENT_REMOTE_STORAGE_REGION),
            upload_interval_ms: values.int(&SEDIMENT_REMOTE_STORAGE_UPLOAD_INTERVAL_MS).max(1)
                as u64,
            delete_delay_ms: values.int(&SEDIMENT_REMOTE_STORAGE_DELETE_DELAY_MS).max(0),
            cache_bytes: values.int(&SEDIMENT_REMOTE_STORAGE_CACHE_BYTES).max(0) as u64,
            fetch_max_wait_ms: values.int(&REMOTE_FETCH_MAX_WAIT_MS).max(1) as u64,
            list_offsets_timeout_ms: values.int(&REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS).max(1)
                as u64,
        }))
    }

    /// Settings for a tool that names the store itself (`sediment restore`).
    pub fn for_tool(url: &str, endpoint: Option<String>, region: Option<String>) -> Self {
        Self {
            url: url.to_string(),
            endpoint,
            region,
            upload_interval_ms: 5000,
            delete_delay_ms: 300_000,
            cache_bytes: 1 << 30,
            fetch_max_wait_ms: 500,
            list_offsets_timeout_ms: 30_000,
        }
    }

    /// Build the store client (no request is made yet).
    ///
    /// # Errors
    /// `Open` for a bad URL or a client that cannot be built.
    pub fn open(&self) -> Result<RemoteStore, RemoteError> {
        // The S3 client's TLS asks rustls for the process's default provider;
        // two are compiled in (ring for the listeners, aws-lc-rs by
        // object_store), so name one. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let open_err = |reason: String| RemoteError::Open { url: self.url.clone(), reason };
        let (store, root): (Arc<dyn ObjectStore>, StorePath) = match parse_url(&self.url)
            .map_err(open_err)?
        {
            StoreUrl::File { dir } => {
                let fs = LocalFileSystem::new_with_prefix(&dir).map_err(|e| {
                    open_err(format!("the directory {} cannot be used: {e}", dir.display()))
                })?;
                (Arc::new(fs), StorePath::default())
            }
            StoreUrl::S3 { bucket, prefix } => {
                let s3 = self.s3_builder(&bucket).build().map_err(|e| open_err(e.to_string()))?;
                (Arc::new(s3), StorePath::from(prefix.as_str()))
            }
        };
        Ok(RemoteStore::new(store, root, self.url.clone()))
    }

    fn s3_builder(&self, bucket: &str) -> AmazonS3Builder {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let endpoint = self.endpoint.clone().or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        let allow_http = endpoint.as_deref().is_some_and(|e| e.starts_with("http://"));
        if let Some(endpoint) = endpoint {
            b = b.with_endpoint(endpoint);
        }
        if let Some(region) = &self.region {
            b = b.with_region(region);
        }
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            if let Some((id, secret, token)) = profile_credentials() {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(token) = token {
                    b = b.with_token(token);
                }
            }
        }
        // Our uploader retries with its own backoff; a request gives up soon,
        // so a dead endpoint is reported within seconds, not minutes.
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 2,
            retry_timeout: Duration::from_secs(15),
        };
        // Client options carry allow_http too: set here, as they replace the builder's.
        let client = ClientOptions::new()
            .with_allow_http(allow_http)
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(120));
        b.with_retry(retry).with_client_options(client)
    }
}

/// The access key, secret and session token of the `AWS_PROFILE` (else
/// `default`) profile in `AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials`.
fn profile_credentials() -> Option<(String, String, Option<String>)> {
    let file = std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")))?;
    let text = std::fs::read_to_string(file).ok()?;
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    parse_profile(&text, &profile)
}

fn parse_profile(text: &str, profile: &str) -> Option<(String, String, Option<String>)> {
    let (mut section, mut id, mut secret, mut token) = (String::new(), None, None, None);
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        if section != profile {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = Some(v.trim().to_string());
            match k.trim() {
                "aws_access_key_id" => id = v,
                "aws_secret_access_key" => secret = v,
                "aws_session_token" => token = v,
                _ => {}
            }
        }
    }
    Some((id?, secret?, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("s3://my-bucket/a/b/").unwrap(),
            StoreUrl::S3 { bucket: "my-bucket".into(), prefix: "a/b".into() }
        );
        assert_eq!(
            parse_url("s3://bkt").unwrap(),
            StoreUrl::S3 { bucket: "bkt".into(), prefix: String::new() }
        );
        assert_eq!(parse_url("file:///tmp/x").unwrap(), StoreUrl::File { dir: "/tmp/x".into() });
        for bad in ["s3://B/x", "s3://", "file://rel", "http://x", ""] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn profiles() {
        let text = "[default]\naws_access_key_id = A\naws_secret_access_key=S\n[other]\naws_access_key_id=B\naws_secret_access_key=T\naws_session_token=X\n";
        assert_eq!(parse_profile(text, "default"), Some(("A".into(), "S".into(), None)));
        assert_eq!(parse_profile(text, "other"), Some(("B".into(), "T".into(), Some("X".into()))));
        assert_eq!(parse_profile(text, "missing"), None);
    }

    /// Values as set, each valid for its key (the broker checks that).
    struct Values<'a>(std::collections::BTreeMap<&'a str, &'a str>);

    impl ConfigValues for Values<'_> {
        fn explicit_value(&self, def: &ConfigDef) -> Option<&str> {
            self.0.get(def.broker_key).copied()
        }
    }

    #[test]
    fn broker_keys() {
        let config = |pairs: &[&str]| {
            let values = pairs.iter().map(|p| p.split_once('=').unwrap()).collect();
            RemoteStorageConfig::from_values(&Values(values))
        };
        assert_eq!(config(&[]).unwrap(), None);
        assert!(config(&["remote.log.storage.system.enable=true"]).is_err());
        assert!(config(&["remote.storage.enable=true"]).is_err());
        let c = config(&[
            "remote.log.storage.system.enable=true",
            "sediment.remote.storage.url=s3://bucket/p",
            "sediment.remote.storage.endpoint=http://127.0.0.1:9000",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(c.delete_delay_ms, 300_000);
    }
}
