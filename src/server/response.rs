//! `ResponseBuf`: an encoded response whose fetched records stay in their
//! segment files until it is written (Kafka's `FileRecords.writeTo`).
//!
//! A Fetch response carries, for each partition's records, a placeholder of
//! the right length (`api::fetch`), and the list of [`FileRegion`]s they stand
//! for, in the order the encoder writes them. `kafka-protocol` encodes every
//! bytes field with `put_slice`; this buffer recognises a placeholder there,
//! records "the next region goes here" instead of copying, and counts its
//! length in the wire size. Writing sends the encoded pieces with `write` and
//! the regions with `sendfile`: the records go from the page cache to the
//! socket without passing through the broker's memory.
//!
//! Invariants:
//! * The wire bytes are `head` with each region inserted at its offset, in order.
//! * Every expected region is placed exactly once, at a placeholder of its
//!   length; anything else is an encoding error ([`ResponseBuf::finish`]) and
//!   the connection is closed rather than sending a wrong response.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;

use bytes::buf::UninitSlice;
use bytes::{BufMut, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use crate::api::fetch::is_placeholder;
use crate::log::segment::FileRegion;

#[derive(Debug, Default)]
pub struct ResponseBuf {
    head: BytesMut,
    /// `(offset in head, region)`: the region goes on the wire right before `head[offset..]`.
    splices: Vec<(usize, FileRegion)>,
    /// Total length of the spliced regions.
    spliced: usize,
    /// Regions whose placeholders the encoder has not reached yet.
    expected: VecDeque<FileRegion>,
    mismatch: Option<String>,
}

impl ResponseBuf {
    pub fn with_capacity(capacity: usize) -> Self {
        Self { head: BytesMut::with_capacity(capacity), ..Self::default() }
    }

    pub fn clear(&mut self) {
        self.head.clear();
        self.splices.clear();
        self.spliced = 0;
        self.expected.clear();
        self.mismatch = None;
    }

    /// Capacity of the encoded part (the regions take no memory).
    pub fn capacity(&self) -> usize {
        self.head.capacity()
    }

    /// The encoded part, for writing fixed fields directly.
    pub fn head_mut(&mut self) -> &mut BytesMut {
        &mut self.head
    }

    /// The regions the next encoded response's placeholders stand for, in order.
    pub fn expect_regions(&mut self, regions: Vec<FileRegion>) {
        self.expected = regions.into();
    }

    /// Bytes on the wire so far: the encoded part plus the regions.
    pub fn wire_len(&self) -> usize {
        self.head.len() + self.spliced
    }

    /// Check that every expected region found its placeholder.
    ///
    /// # Errors
    /// A description of the mismatch; the response must not be sent.
    pub fn finish(&mut self) -> Result<(), String> {
        if let Some(m) = self.mismatch.take() {
            return Err(m);
        }
        if !self.expected.is_empty() {
            return Err(format!(
                "{} fetched file region(s) without a placeholder in the response",
                self.expected.len()
            ));
        }
        Ok(())
    }

    /// The wire bytes, with the regions read from their files, appended to `out`.
    ///
    /// # Errors
    /// I/O errors reading a region.
    pub fn read_into(&self, out: &mut BytesMut) -> io::Result<()> {
        let mut at = 0;
        for (pos, region) in &self.splices {
            out.extend_from_slice(&self.head[at..*pos]);
            out.extend_from_slice(&region.read_to_bytes()?);
            at = *pos;
        }
        out.extend_from_slice(&self.head[at..]);
        Ok(())
    }

    /// Write the response: the encoded pieces with `write`, the regions with
    /// `sendfile`.
    ///
    /// # Errors
    /// Socket errors, and `UnexpectedEof` if a segment file is shorter than a
    /// region (the response cannot be completed; the connection must close).
    pub async fn write_to(&self, writer: &mut OwnedWriteHalf) -> io::Result<()> {
        let mut at = 0;
        for (pos, region) in &self.splices {
            if *pos > at {
                writer.write_all(&self.head[at..*pos]).await?;
            }
            send_region(writer.as_ref(), region).await?;
            at = *pos;
        }
        writer.write_all(&self.head[at..]).await
    }
}

/// Bytes of a file region read at a time for a stream that cannot take
/// `sendfile` (TLS), as Kafka's `SslTransportLayer` does.
pub const REGION_CHUNK: usize = 64 * 1024;

impl ResponseBuf {
    /// Write the response through a stream that must see every byte (TLS):
    /// the regions are read in [`REGION_CHUNK`] pieces into `chunk` (reused
    /// across responses) and written after the encoded pieces, in order;
    /// the stream is flushed at the end.
    ///
    /// # Errors
    /// Stream errors, and `UnexpectedEof` if a segment file is shorter than a
    /// region.
    pub async fn write_to_stream<W: AsyncWrite + Unpin>(
        &self,
        writer: &mut W,
        chunk: &mut Vec<u8>,
    ) -> io::Result<()> {
        let mut at = 0;
        for (pos, region) in &self.splices {
            if *pos > at {
                writer.write_all(&self.head[at..*pos]).await?;
            }
            let mut done = 0;
            while done < region.len() {
                let n = (region.len() - done).min(REGION_CHUNK);
                chunk.resize(n, 0);
                let position = region.position() + done as u64;
                tokio::task::block_in_place(|| {
                    std::os::unix::fs::FileExt::read_exact_at(region.file(), chunk, position)
                })?;
                writer.write_all(chunk).await?;
                done += n;
            }
            at = *pos;
        }
        writer.write_all(&self.head[at..]).await?;
        writer.flush().await
    }
}

/// `sendfile` the whole region into the (non-blocking) socket.
async fn send_region(stream: &TcpStream, region: &FileRegion) -> io::Result<()> {
    let file_fd = region.file().as_raw_fd();
    let socket_fd = stream.as_raw_fd();
    let mut offset = libc::off_t::try_from(region.position())
        .map_err(|_| io::Error::other("file region position out of range"))?;
    let mut left = region.len();
    while left > 0 {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors stay open for the call (the stream and the
            // region's file are borrowed), and `offset` is a valid, exclusive
            // pointer that the kernel advances by the bytes sent.
            let n = unsafe { libc::sendfile(socket_fd, file_fd, &mut offset, left) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file ended inside a fetched region",
                ))
            }
            Ok(n) => left -= n.min(left),
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

// SAFETY: every method forwards to the inner `BytesMut`, which upholds
// `BufMut`'s contract; `put_slice` only adds the placeholder bookkeeping and
// otherwise forwards too.
unsafe impl BufMut for ResponseBuf {
    fn remaining_mut(&self) -> usize {
        self.head.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's guarantee (cnt bytes of chunk_mut initialised) is
        // about the same buffer chunk_mut returned.
        unsafe { self.head.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.head.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if is_placeholder(src) {
            match self.expected.pop_front() {
                Some(region) if region.len() == src.len() => {
                    self.spliced += region.len();
                    self.splices.push((self.head.len(), region));
                    return;
                }
                other => {
                    let found =
                        other.map_or_else(|| "none".to_string(), |r| format!("{} bytes", r.len()));
                    self.mismatch.get_or_insert(format!(
                        "a {}-byte record placeholder met region {found}",
                        src.len()
                    ));
                }
            }
        }
        self.head.extend_from_slice(src);
    }
}

impl ByteBufMut for ResponseBuf {
    // NOTE: offsets are positions in the encoded part, not on the wire (the
    // regions are not counted). Only record-batch encoding uses them (for
    // gaps), and responses never encode batches: their records are bytes.
    fn offset(&self) -> usize {
        self.head.len()
    }
    fn seek(&mut self, offset: usize) {
        self.head.resize(offset, 0);
    }
    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        &mut self.head[r]
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use bytes::Bytes;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;
    use crate::api::fetch::placeholder;

    /// A response with these records per partition, as `Bytes` or as placeholders.
    fn response(records: &[Option<Bytes>], placeholders: bool) -> FetchResponse {
        let partitions = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let r = match (r, placeholders) {
                    (Some(b), true) if !b.is_empty() => placeholder(b.len()),
                    (r, _) => r.clone(),
                };
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_high_watermark(7)
                    .with_records(r)
            })
            .collect::<Vec<_>>();
        let (a, b) = partitions.split_at(2);
        FetchResponse::default().with_session_id(0).with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("a")))
                .with_partitions(a.to_vec()),
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("b")))
                .with_partitions(b.to_vec()),
        ])
    }

    #[test]
    fn spliced_regions_give_the_bytes_of_the_plain_encoding_in_every_version() {
        let mut file = tempfile::tempfile().unwrap();
        let content: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        file.write_all(&content).unwrap();
        let file = Arc::new(file);
        // (position, len) per partition; an empty and an absent one in between.
        let layout: [Option<(usize, usize)>; 5] =
            [Some((10, 300)), Some((0, 0)), None, Some((5_000, 90_000)), Some((400, 1))];
        let records: Vec<Option<Bytes>> = layout
            .iter()
            .map(|l| l.map(|(p, n)| Bytes::copy_from_slice(&content[p..p + n])))
            .collect();
        let regions: Vec<FileRegion> = layout
            .iter()
            .flatten()
            .filter(|(_, n)| *n > 0)
            .map(|&(p, n)| FileRegion::new(Arc::clone(&file), p as u64, n))
            .collect();
        for version in 4..=18 {
            let mut plain = BytesMut::new();
            response(&records, false).encode(&mut plain, version).unwrap();
            let mut buf = ResponseBuf::default();
            buf.expect_regions(regions.clone());
            response(&records, true).encode(&mut buf, version).unwrap();
            buf.finish().unwrap();
            assert_eq!(buf.wire_len(), plain.len(), "v{version}");
            assert!(
                buf.head.len() < 1_000,
                "v{version}: records were copied into the encoded part"
            );
            let mut wire = BytesMut::new();
            buf.read_into(&mut wire).unwrap();
            assert_eq!(wire, plain, "v{version}");
        }
    }

    #[test]
    fn a_region_without_its_placeholder_is_an_error() {
        let file = Arc::new(tempfile::tempfile().unwrap());
        let mut buf = ResponseBuf::default();
        buf.expect_regions(vec![FileRegion::new(Arc::clone(&file), 0, 10)]);
        response(&[Some(Bytes::from_static(b"x")), None], false).encode(&mut buf, 12).unwrap();
        assert!(buf.finish().is_err());
        // A placeholder whose region has another length.
        let mut buf = ResponseBuf::default();
        buf.expect_regions(vec![FileRegion::new(file, 0, 10)]);
        response(&[Some(Bytes::from_static(b"abc")), None], true).encode(&mut buf, 12).unwrap();
        assert!(buf.finish().is_err());
    }
}
