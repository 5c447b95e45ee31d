//! `RemoteStore`: the object store under the URL's prefix, with the few
//! operations tiered storage needs, each verified or bounded, and errors
//! that say what is wrong (credentials, endpoint, bucket) in one line.
//!
//! The store's owner is `sediment-store.json`, written create-only by the
//! first broker that uses the store; a broker of another cluster is refused.
//!
//! Segment files go up and come back with memory bounded by a part, whatever
//! the segment's size:
//! * [`RemoteStore::put_file_verified`] sends a file of at most
//!   [`PART_BYTES`] in one PUT and a larger one as a multipart upload of
//!   [`PART_BYTES`] parts (S3 wants at least 5 MiB for each but the last),
//!   read from the file one part at a time while the previous part is sent:
//!   at most two parts are in memory. The CRC32C of what was sent is compared
//!   with the digest before the upload is completed, so a file that changed
//!   since it was digested never becomes the object its key names. An upload
//!   that fails midway is aborted, so the bucket keeps no parts of it. One cut
//!   short by a crash (or by the upload task being stopped at an await) is
//!   left incomplete: it is no object, nothing lists or reads it, and the
//!   store expires it only under a lifecycle rule
//!   (`AbortIncompleteMultipartUpload` on S3: the operator sets one; a local
//!   directory leaves a staging file next to the key).
//! * [`RangedRead`] reads an object back in ranged GETs of [`CHUNK`] bytes,
//!   checking its size first and its CRC32C at the end: the upload's read
//!   back, the cache's downloads and restore use it.

use bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::{blocking, RemoteError, StoreFailure};

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

/// Files above this many bytes are uploaded in parts of this size.
pub const PART_BYTES: u64 = 16 << 20;
/// Bytes per ranged GET when an object is read back or downloaded.
pub const CHUNK: u64 = 8 << 20;

/// A local file to upload: what it should hold (digested before), and its
/// path for messages.
#[derive(Debug, Clone)]
pub struct FileUpload {
    pub file: Arc<File>,
    pub path: PathBuf,
    pub size: u64,
    pub crc32c: u32,
}

/// `len` bytes of `file` at `pos`, read on a blocking thread (`len` is at
/// most a part).
async fn read_part(up: &FileUpload, pos: u64, len: u64) -> Result<Bytes, RemoteError> {
    let (file, path) = (Arc::clone(&up.file), up.path.clone());
    blocking(move || {
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, pos).map_err(RemoteError::io(&path))?;
        Ok(Bytes::from(buf))
    })
    .await
}

/// The file no longer has the content it was digested with.
fn changed(up: &FileUpload, got_size: u64, got_crc: u32) -> RemoteError {
    RemoteError::Verify {
        key: up.path.display().to_string(),
        size: up.size,
        crc: up.crc32c,
        got_size,
        got_crc,
    }
}

/// An object read in ranged GETs of [`CHUNK`] bytes, each checked for its
/// length, and the whole for its CRC32C after the last.
#[derive(Debug)]
pub struct RangedRead<'a> {
    store: &'a RemoteStore,
    key: &'a StorePath,
    size: u64,
    crc: u32,
    pos: u64,
    got: u32,
}

impl<'a> RangedRead<'a> {
    /// Start reading `key`, which must be `size` bytes with CRC32C `crc`
    /// (its size is checked now, with a HEAD).
    ///
    /// # Errors
    /// Store errors; `Verify` for another size.
    pub async fn open(
        store: &'a RemoteStore,
        key: &'a StorePath,
        size: u64,
        crc: u32,
    ) -> Result<Self, RemoteError> {
        let found = store.size_of(key).await?;
        let read = Self { store, key, size, crc, pos: 0, got: 0 };
        if found != size {
            return Err(read.mismatch(found, 0));
        }
        Ok(read)
    }

    fn mismatch(&self, got_size: u64, got_crc: u32) -> RemoteError {
        RemoteError::Verify {
            key: self.key.to_string(),
            size: self.size,
            crc: self.crc,
            got_size,
            got_crc,
        }
    }

    /// The next chunk and its offset; `None` after the last, once the CRC32C
    /// of the whole matched.
    ///
    /// # Errors
    /// Store errors; `Verify` for a short chunk or another CRC32C.
    pub async fn next(&mut self) -> Result<Option<(u64, Bytes)>, RemoteError> {
        if self.pos >= self.size {
            if self.got != self.crc {
                return Err(self.mismatch(self.size, self.got));
            }
            return Ok(None);
        }
        let (pos, end) = (self.pos, (self.pos + CHUNK).min(self.size));
        let chunk = self.store.get_range(self.key, pos..end).await?;
        self.got = crc32c::crc32c_append(self.got, &chunk);
        if chunk.len() as u64 != end - pos {
            return Err(self.mismatch(pos + chunk.len() as u64, self.got));
        }
        self.pos = end;
        Ok(Some((pos, chunk)))
    }

    /// Read to the end, checking size and CRC32C, keeping nothing.
    ///
    /// # Errors
    /// As [`Self::next`].
    pub async fn verify(mut self) -> Result<(), RemoteError> {
        while self.next().await?.is_some() {}
        Ok(())
    }
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
        RangedRead::open(self, key, size, crc).await?.verify().await
    }

    /// Upload the file `up` to `key` (overwriting: keys name their content),
    /// in one PUT up to `part_bytes` and in parts of `part_bytes` above, then
    /// read it back in ranged GETs and compare size and CRC32C. Memory: at
    /// most two parts, or one [`CHUNK`] while reading back.
    ///
    /// # Errors
    /// Store errors; `Verify` when the file no longer has its digested
    /// content or the object read back differs; `Io` reading the file.
    pub async fn put_file_verified(
        &self,
        key: &StorePath,
        up: &FileUpload,
        part_bytes: u64,
    ) -> Result<(), RemoteError> {
        let part_bytes = part_bytes.max(1);
        if up.size <= part_bytes {
            let bytes = read_part(up, 0, up.size).await?;
            let crc = crc32c::crc32c(&bytes);
            if crc != up.crc32c {
                return Err(changed(up, up.size, crc));
            }
            let payload = PutPayload::from(bytes);
            self.store.put(key, payload).await.map_err(|e| self.err("put", key, e))?;
        } else {
            self.put_multipart(key, up, part_bytes).await?;
        }
        RangedRead::open(self, key, up.size, up.crc32c).await?.verify().await
    }

    /// A multipart upload of `up`, completed only when every part was sent
    /// and what was sent has the digested CRC32C; aborted otherwise.
    async fn put_multipart(
        &self,
        key: &StorePath,
        up: &FileUpload,
        part_bytes: u64,
    ) -> Result<(), RemoteError> {
        let mut upload =
            self.store.put_multipart(key).await.map_err(|e| self.err("put", key, e))?;
        let mut result = self.send_parts(key, upload.as_mut(), up, part_bytes).await;
        if result.is_ok() {
            result = upload.complete().await.map(drop).map_err(|e| self.err("put", key, e));
        }
        if result.is_err() {
            if let Err(e) = upload.abort().await {
                let e = self.err("abort", key, e);
                tracing::warn!("tiered storage: aborting a failed multipart upload: {e}");
            }
        }
        result
    }

    /// Send `up` part by part, reading the next part while one is sent.
    async fn send_parts(
        &self,
        key: &StorePath,
        upload: &mut dyn object_store::MultipartUpload,
        up: &FileUpload,
        part_bytes: u64,
    ) -> Result<(), RemoteError> {
        let mut sending: Option<object_store::UploadPart> = None;
        let (mut pos, mut crc) = (0u64, 0u32);
        while pos < up.size {
            let len = part_bytes.min(up.size - pos);
            let bytes = match sending.take() {
                Some(part) => {
                    let (sent, read) = tokio::join!(part, read_part(up, pos, len));
                    sent.map_err(|e| self.err("put", key, e))?;
                    read?
                }
                None => read_part(up, pos, len).await?,
            };
            crc = crc32c::crc32c_append(crc, &bytes);
            sending = Some(upload.put_part(PutPayload::from(bytes)));
            pos += len;
        }
        if let Some(part) = sending {
            part.await.map_err(|e| self.err("put", key, e))?;
        }
        if crc != up.crc32c {
            return Err(changed(up, pos, crc));
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

    fn upload_of(path: &std::path::Path, crc32c: u32) -> FileUpload {
        let file = File::open(path).unwrap();
        let size = file.metadata().unwrap().len();
        FileUpload { file: Arc::new(file), path: path.to_path_buf(), size, crc32c }
    }

    /// Files above the part size go up in parts (the local store supports
    /// multipart uploads) and come back equal; one at or below in one PUT.
    #[tokio::test]
    async fn files_upload_in_parts_and_read_back_equal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        let store = local(&dir.path().join("store"));
        let part = 256 << 10;
        for size in [0, 1000, part, 5 * part + 123] {
            let content: Vec<u8> = (0..size).map(|i| (i * 7 + i / 251) as u8).collect();
            let path = dir.path().join(format!("f{size}"));
            std::fs::write(&path, &content).unwrap();
            let key = store.key(&format!("objects/{size}"));
            let up = upload_of(&path, crc32c::crc32c(&content));
            store.put_file_verified(&key, &up, part as u64).await.unwrap();
            let back = store.get_bounded(&key, size as u64).await.unwrap();
            assert!(back == content, "object of {size} bytes differs from its file");
        }
        // Read back in ranged GETs of CHUNK: an object several chunks long.
        let size = 2 * CHUNK as usize + 5;
        let content: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
        let path = dir.path().join("big");
        std::fs::write(&path, &content).unwrap();
        let up = upload_of(&path, crc32c::crc32c(&content));
        store.put_file_verified(&store.key("objects/big"), &up, PART_BYTES).await.unwrap();
        assert_eq!(std::fs::read(dir.path().join("store/objects/big")).unwrap(), content);
    }

    /// A file that no longer has its digested content is not completed as
    /// the object: the multipart upload is aborted and nothing is left, not
    /// even a staging file; a wrong object is refused by its read back.
    #[tokio::test]
    async fn a_changed_file_is_aborted_and_a_wrong_object_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        let store = local(&dir.path().join("store"));
        let content = vec![7u8; 300_000];
        let path = dir.path().join("f");
        std::fs::write(&path, &content).unwrap();
        let key = store.key("objects/f");
        let up = upload_of(&path, crc32c::crc32c(&content) ^ 1);
        for part in [100_000, 1 << 20] {
            let err = store.put_file_verified(&key, &up, part).await.unwrap_err();
            assert!(matches!(err, RemoteError::Verify { .. }), "{err}");
            let left: Vec<_> = std::fs::read_dir(dir.path().join("store"))
                .map(|d| d.map(|e| e.unwrap().path()).collect())
                .unwrap_or_default();
            let left: Vec<_> =
                left.into_iter().flat_map(|d| std::fs::read_dir(d).unwrap()).collect();
            assert!(left.is_empty(), "left in the store: {left:?}");
        }
        // An object of another content under the key: its read back fails.
        store.put_verified(&key, Bytes::from(vec![8u8; 300_000])).await.unwrap();
        let crc = crc32c::crc32c(&content);
        let err = RangedRead::open(&store, &key, 300_000, crc).await.unwrap().verify().await;
        assert!(matches!(err, Err(RemoteError::Verify { .. })), "{err:?}");
        let err = RangedRead::open(&store, &key, 300_001, crc).await.unwrap_err();
        assert!(matches!(err, RemoteError::Verify { got_size: 300_000, .. }), "{err}");
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
