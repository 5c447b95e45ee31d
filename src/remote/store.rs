//! `RemoteStore`: the object store under the URL's prefix, with the few
//! operations tiered storage needs, each verified or bounded, and errors
//! that say what is wrong (credentials, endpoint, bucket) in one line.
//!
//! The store's owner is `sediment-store.json`, written create-only by the
//! first broker that uses the store; a broker of another cluster is refused.

use bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::{RemoteError, StoreFailure};

/// The store marker's name under the prefix.
pub const MARKER: &str = "sediment-store.json";
/// The largest manifest or marker read (bounded before it is buffered).
pub const MAX_METADATA_BYTES: u64 = 64 << 20;

/// `sediment-store.json`: which cluster owns the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMarker {
    pub format: u32,
    pub cluster_id: String,
    pub created_by_node: i32,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone)]
pub struct RemoteStore {
    store: Arc<dyn ObjectStore>,
    root: StorePath,
    url: String,
}

/// The store's probe of its own clock, overwritten by each sweep.
pub const CLOCK: &str = "sediment-clock";

/// The whole text of `e` and its sources, to look for a status and a code
/// in (never shown: it can hold the response body).
fn chain_text(e: &object_store::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(" | ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The HTTP status in object_store's "status code: 403 Forbidden" text.
fn http_status(text: &str) -> Option<u16> {
    let rest = text.split("status code: ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|s| (100..600).contains(s))
}

/// S3's `<Code>...</Code>` in an error body, when it looks like one.
fn s3_code(text: &str) -> Option<String> {
    let code = text.split("<Code>").nth(1)?.split("</Code>").next()?;
    let plain = !code.is_empty()
        && code.len() <= 64
        && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    plain.then(|| code.to_string())
}

/// The status and code part of a [`StoreFailure`]'s message.
pub(super) fn detail(status: Option<u16>, code: Option<&str>) -> String {
    match (status, code) {
        (Some(s), Some(c)) => format!(": HTTP {s}, {c}"),
        (Some(s), None) => format!(": HTTP {s}"),
        (None, Some(c)) => format!(": {c}"),
        (None, None) => String::new(),
    }
}

/// A short hint and a metrics kind for a store error.
fn classify(e: &object_store::Error, text: &str) -> (&'static str, &'static str) {
    use object_store::Error as E;
    match e {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => (
            "the store refused the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)",
            "auth",
        ),
        E::NotFound { .. } => ("not found (does the bucket exist?)", "not_found"),
        E::AlreadyExists { .. } | E::Precondition { .. } => ("already exists", "conflict"),
        E::NotSupported { .. } | E::NotImplemented { .. } => {
            ("the store does not support this operation", "unsupported")
        }
        _ => {
            if text.contains("InvalidAccessKeyId") || text.contains("SignatureDoesNotMatch") {
                ("the store refused the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)", "auth")
            } else if text.contains("NoSuchBucket") {
                ("the bucket does not exist", "not_found")
            } else if text.contains("error sending request") || text.contains("connect") {
                ("the store's endpoint cannot be reached", "unreachable")
            } else {
                ("the store failed the request", "other")
            }
        }
    }
}

impl RemoteStore {
    pub fn new(store: Arc<dyn ObjectStore>, root: StorePath, url: String) -> Self {
        Self { store, root, url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key of `rel` (slash-separated) under the prefix.
    pub fn key(&self, rel: &str) -> StorePath {
        let mut parts: Vec<String> = self.root.parts().map(|p| p.as_ref().to_string()).collect();
        parts.extend(rel.split('/').filter(|p| !p.is_empty()).map(str::to_string));
        StorePath::from_iter(parts)
    }

    /// `key` relative to the prefix.
    pub fn relative(&self, key: &StorePath) -> String {
        let skip = self.root.parts().count();
        key.parts().skip(skip).map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/")
    }

    /// The failure of `op` on `key`, keeping only what is safe to show
    /// (the source error is dropped: see [`StoreFailure`]).
    fn err(&self, op: &'static str, key: &StorePath, source: object_store::Error) -> RemoteError {
        let text = chain_text(&source);
        let (hint, kind) = classify(&source, &text);
        RemoteError::Store(Box::new(StoreFailure {
            url: self.url.clone(),
            op,
            key: key.to_string(),
            hint,
            kind,
            status: http_status(&text),
            code: s3_code(&text),
            not_found: matches!(source, object_store::Error::NotFound { .. }),
        }))
    }

    /// The store's clock: the Last-Modified of [`CLOCK`], written now. Ages
    /// of objects are taken on this clock, never the broker's, so a broker
    /// clock ahead of the store's cannot make an object look old enough to
    /// delete.
    ///
    /// # Errors
    /// Store errors.
    pub async fn now_ms(&self) -> Result<i64, RemoteError> {
        let key = self.key(CLOCK);
        let payload =
            PutPayload::from(Bytes::from_static(b"sediment's probe of the store's clock\n"));
        self.store.put(&key, payload).await.map_err(|e| self.err("put", &key, e))?;
        let meta = self.store.head(&key).await.map_err(|e| self.err("head", &key, e))?;
        Ok(meta.last_modified.timestamp_millis())
    }

    /// Upload `bytes` to `key` (overwriting: keys name their content), then
    /// read it back and compare size and CRC32C.
    ///
    /// # Errors
    /// Store errors; `Verify` when the object read back differs.
    pub async fn put_verified(&self, key: &StorePath, bytes: Bytes) -> Result<(), RemoteError> {
        let (size, crc) = (bytes.len() as u64, crc32c::crc32c(&bytes));
        self.store.put(key, PutPayload::from(bytes)).await.map_err(|e| self.err("put", key, e))?;
        let back = self.get_bounded(key, size).await?;
        let got_crc = crc32c::crc32c(&back);
        if back.len() as u64 != size || got_crc != crc {
            return Err(RemoteError::Verify {
                key: key.to_string(),
                size,
                crc,
                got_size: back.len() as u64,
                got_crc,
            });
        }
        Ok(())
    }

    /// Create `key` only if it does not exist: `Ok(false)` when it did.
    ///
    /// # Errors
    /// Store errors other than "already exists".
    pub async fn put_create(&self, key: &StorePath, bytes: Bytes) -> Result<bool, RemoteError> {
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(key, PutPayload::from(bytes), opts).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(self.err("create", key, e)),
        }
    }

    /// The object at `key`, refused above `max` bytes before it is buffered.
    ///
    /// # Errors
    /// Store errors (`NotFound` among them); `TooLarge`.
    pub async fn get_bounded(&self, key: &StorePath, max: u64) -> Result<Bytes, RemoteError> {
        let got = self.store.get(key).await.map_err(|e| self.err("get", key, e))?;
        if got.meta.size > max {
            return Err(RemoteError::TooLarge { key: key.to_string(), size: got.meta.size, max });
        }
        got.bytes().await.map_err(|e| self.err("get", key, e))
    }

    /// The size of the object at `key`, without reading it.
    ///
    /// # Errors
    /// Store errors (`NotFound` among them).
    pub async fn size_of(&self, key: &StorePath) -> Result<u64, RemoteError> {
        let meta = self.store.head(key).await.map_err(|e| self.err("head", key, e))?;
        Ok(meta.size)
    }

    /// The bytes `range` of the object at `key` (the caller bounds the range).
    ///
    /// # Errors
    /// Store errors.
    pub async fn get_range(
        &self,
        key: &StorePath,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, RemoteError> {
        self.store.get_range(key, range).await.map_err(|e| self.err("get", key, e))
    }

    /// The objects directly under `dir` (relative) and its sub-directories
    /// (their last part).
    ///
    /// # Errors
    /// Store errors.
    pub async fn list(&self, dir: &str) -> Result<(Vec<ObjectMeta>, Vec<String>), RemoteError> {
        let key = self.key(dir);
        let prefix = if key.as_ref().is_empty() { None } else { Some(&key) };
        let listed =
            self.store.list_with_delimiter(prefix).await.map_err(|e| self.err("list", &key, e))?;
        let dirs = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        Ok((listed.objects, dirs))
    }

    /// Delete `key`; one already gone is fine.
    ///
    /// # Errors
    /// Store errors.
    pub async fn delete(&self, key: &StorePath) -> Result<(), RemoteError> {
        match self.store.delete(key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err("delete", key, e)),
        }
    }

    /// The store's marker, if written.
    ///
    /// # Errors
    /// Store errors (a missing bucket, refused credentials, no endpoint);
    /// `Manifest` for a marker that does not parse.
    pub async fn read_marker(&self) -> Result<Option<StoreMarker>, RemoteError> {
        let key = self.key(MARKER);
        let bytes = match self.get_bounded(&key, MAX_METADATA_BYTES).await {
            Ok(b) => b,
            Err(RemoteError::Store(f)) if f.not_found => {
                // A missing marker and a missing bucket both answer 404 on
                // GET: a listing tells them apart.
                self.list("").await?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| RemoteError::Manifest { key: key.to_string(), reason: e.to_string() })
    }

    /// Make sure the store is this cluster's: write the marker if there is
    /// none (create-only, so of two first users one wins), else compare.
    ///
    /// # Errors
    /// `ForeignStore` for another cluster's store; store errors.
    pub async fn claim(&self, cluster_id: &str, node_id: i32) -> Result<StoreMarker, RemoteError> {
        if self.read_marker().await?.is_none() {
            let marker = StoreMarker {
                format: 1,
                cluster_id: cluster_id.to_string(),
                created_by_node: node_id,
                created_at_ms: super::now_ms(),
            };
            let text = serde_json::to_vec_pretty(&marker)
                .map_err(|e| RemoteError::Manifest { key: MARKER.into(), reason: e.to_string() })?;
            self.put_create(&self.key(MARKER), Bytes::from(text)).await?;
        }
        let marker = self.read_marker().await?.ok_or_else(|| RemoteError::Manifest {
            key: MARKER.into(),
            reason: "vanished right after it was written".into(),
        })?;
        if marker.cluster_id != cluster_id {
            return Err(RemoteError::ForeignStore {
                url: self.url.clone(),
                found: marker.cluster_id,
                ours: cluster_id.to_string(),
            });
        }
        Ok(marker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(dir: &std::path::Path) -> RemoteStore {
        let url = format!("file://{}", dir.display());
        super::super::RemoteStorageConfig::for_tool(&url, None, None).open().unwrap()
    }

    /// A store error keeps the status, S3's code and the key, and drops the
    /// body and the request, whatever they echo.
    #[test]
    fn errors_show_status_code_and_key_never_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let store = local(dir.path());
        let body = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?>\
            <Error><Code>SignatureDoesNotMatch</Code><AWSAccessKeyId>AKIDLEAKED</AWSAccessKeyId>\
            <StringToSign>X-Amz-Security-Token=TOKENLEAKED</StringToSign></Error>";
        let source: Box<dyn std::error::Error + Send + Sync> = body.into();
        let e = object_store::Error::Generic { store: "S3", source };
        let err = store.err("get", &store.key("topics/t-0/manifest/1.json"), e);
        let mut text = format!("{err} {err:?}");
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            text.push_str(&s.to_string());
            source = s.source();
        }
        for leaked in ["AKIDLEAKED", "TOKENLEAKED", "StringToSign", "<Error>"] {
            assert!(!text.contains(leaked), "{leaked} shown: {text}");
        }
        let shown = err.to_string();
        assert!(shown.contains("HTTP 403, SignatureDoesNotMatch"), "{shown}");
        assert!(shown.contains("topics/t-0/manifest/1.json"), "{shown}");
        assert!(shown.contains("refused the credentials"), "{shown}");
        assert_eq!(err.kind(), "auth");
        assert_eq!(s3_code("<Code>a b</Code>"), None);
        assert_eq!(http_status("status code: 99"), None);
    }

    #[tokio::test]
    async fn create_only_verify_and_marker() {
        let dir = tempfile::tempdir().unwrap();
        let store = local(dir.path());
        let key = store.key("a/b.json");
        assert!(store.put_create(&key, Bytes::from_static(b"1")).await.unwrap());
        assert!(!store.put_create(&key, Bytes::from_static(b"2")).await.unwrap());
        assert_eq!(store.get_bounded(&key, 10).await.unwrap(), Bytes::from_static(b"1"));
        assert!(matches!(store.get_bounded(&key, 0).await, Err(RemoteError::TooLarge { .. })));
        store.put_verified(&store.key("x/y"), Bytes::from_static(b"abc")).await.unwrap();
        assert_eq!(store.list("a").await.unwrap().0.len(), 1);
        assert_eq!(store.list("").await.unwrap().1, vec!["a".to_string(), "x".to_string()]);

        assert_eq!(store.read_marker().await.unwrap(), None);
        let m = store.claim("cluster-a", 1).await.unwrap();
        assert_eq!(m.cluster_id, "cluster-a");
        assert_eq!(store.claim("cluster-a", 2).await.unwrap(), m);
        let err = store.claim("cluster-b", 1).await.unwrap_err();
        assert!(matches!(err, RemoteError::ForeignStore { .. }), "{err}");
        assert!(err.to_string().contains("cluster-a"), "{err}");
    }
}
