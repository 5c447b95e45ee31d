//! The four codecs a RecordBatch v2 may carry (attribute bits 0..=2).
//!
//! Decompression is always bounded: a batch is at most `max.message.bytes` on
//! the wire, but its inflated records are not, so every caller passes the most
//! it is willing to hold and a larger payload is an error rather than an
//! allocation (a "zip bomb" in a produce request must not take the broker down).
//!
//! Levels (`compression.<codec>.level`, Kafka's names and bounds): gzip -1
//! (zlib's default, 6) or 1..=9, zstd -131072..=22, lz4 1..=17. lz4_flex
//! has one compressor, lz4's fast one (level 1), so an lz4 level is accepted
//! and has no effect; the frames are standard and every client reads them.

use std::io::{Read, Write};

use super::error::BatchError;

/// Compression codec of a record batch, numbered as in Kafka's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// The codec named by the low three attribute bits.
    ///
    /// # Errors
    /// `BatchError::UnknownCompression` for the unused codes 5..=7.
    pub fn from_attributes(attributes: i16) -> Result<Self, BatchError> {
        match attributes & 0x07 {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            other => Err(BatchError::UnknownCompression(other as u8)),
        }
    }

    /// The codec `compression.type` names (`uncompressed` is [`Self::None`]);
    /// `None` for `producer` or an unknown name.
    pub fn from_config_name(name: &str) -> Option<Self> {
        match name {
            "uncompressed" => Some(Self::None),
            "gzip" => Some(Self::Gzip),
            "snappy" => Some(Self::Snappy),
            "lz4" => Some(Self::Lz4),
            "zstd" => Some(Self::Zstd),
            _ => None,
        }
    }

    /// Kafka's name for the codec, as `compression.type` and kafka-dump-log spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }
}

/// Header that snappy-java's `SnappyOutputStream` (the Java producer's snappy
/// framing) writes before its length-prefixed blocks.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;
/// Block size snappy-java uses when it frames output.
const XERIAL_BLOCK: usize = 32 * 1024;

/// Inflate `input` into `out` (cleared first), refusing to produce more than `limit` bytes.
///
/// # Errors
/// `BatchError::Decompression` when the payload is malformed for its codec,
/// `InflatesPastLimit` when it inflates past `limit`.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), BatchError> {
    out.clear();
    let bad = |what: &str| BatchError::Decompression(format!("{}: {what}", codec.name()));
    let failed = |e: Inflate| match e {
        Inflate::PastLimit => BatchError::InflatesPastLimit { codec: codec.name(), limit },
        Inflate::Bad(what) => bad(&what),
    };
    match codec {
        Compression::None => {
            if input.len() > limit {
                return Err(failed(Inflate::PastLimit));
            }
            out.extend_from_slice(input);
        }
        Compression::Gzip => {
            read_bounded(flate2::read::GzDecoder::new(input), out, limit).map_err(failed)?
        }
        Compression::Lz4 => {
            read_bounded(lz4_flex::frame::FrameDecoder::new(input), out, limit).map_err(failed)?
        }
        Compression::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::new(input).map_err(|e| bad(&e.to_string()))?;
            // The window a frame declares is allocated before anything is
            // inflated: none larger than the output may be.
            decoder.window_log_max(zstd_window_log_max(limit)).map_err(|e| bad(&e.to_string()))?;
            read_bounded(decoder, out, limit).map_err(failed)?
        }
        Compression::Snappy => {
            if input.len() >= XERIAL_HEADER_LEN && &input[..8] == XERIAL_MAGIC {
                let mut rest = &input[XERIAL_HEADER_LEN..];
                while !rest.is_empty() {
                    if rest.len() < 4 {
                        return Err(bad("truncated block length"));
                    }
                    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                    rest = &rest[4..];
                    if len > rest.len() {
                        return Err(bad("block longer than the payload"));
                    }
                    snappy_raw_append(&rest[..len], out, limit).map_err(failed)?;
                    rest = &rest[len..];
                }
            } else {
                // librdkafka writes unframed snappy.
                snappy_raw_append(input, out, limit).map_err(failed)?;
            }
        }
    }
    Ok(())
}

/// The largest zstd window (log2 bytes) a frame inflating to at most
/// `limit` bytes is allowed: the smallest power of two covering `limit`,
/// at least 16 MiB (what every level up to 19 declares, with room) and at
/// most zstd's default cap of 128 MiB. With the default `max.message.bytes`
/// (limit 64 MiB) only level 22's 128 MiB window is refused.
fn zstd_window_log_max(limit: usize) -> u32 {
    let log = usize::BITS - limit.max(1).saturating_sub(1).leading_zeros();
    log.clamp(24, 27)
}

/// Why inflating stopped.
enum Inflate {
    /// The output would pass the limit.
    PastLimit,
    /// The payload is malformed for its codec.
    Bad(String),
}

fn snappy_raw_append(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Inflate> {
    let len = snap::raw::decompress_len(block).map_err(|e| Inflate::Bad(e.to_string()))?;
    if out.len() + len > limit {
        return Err(Inflate::PastLimit);
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| Inflate::Bad(e.to_string()))?;
    Ok(())
}

fn read_bounded(reader: impl Read, out: &mut Vec<u8>, limit: usize) -> Result<(), Inflate> {
    let mut bounded = reader.take(limit as u64 + 1);
    bounded.read_to_end(out).map_err(|e| Inflate::Bad(e.to_string()))?;
    if out.len() > limit {
        return Err(Inflate::PastLimit);
    }
    Ok(())
}

/// Kafka's default level of `codec` (`compression.<codec>.level`).
pub fn default_level(codec: Compression) -> i32 {
    match codec {
        Compression::Gzip => -1,
        Compression::Lz4 => 9,
        Compression::Zstd => 3,
        Compression::None | Compression::Snappy => 0,
    }
}

/// Compress `input` with `codec` at its default level, appending to `out`,
/// in a framing every Kafka client reads.
///
/// # Errors
/// Only on an encoder failure (which the in-memory encoders do not produce in practice).
pub fn compress(codec: Compression, input: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    compress_at(codec, default_level(codec), input, out)
}

/// [`compress`] at `level` (see the module doc; out-of-range levels are
/// clamped, the configs refuse them before they get here).
///
/// # Errors
/// Only on an encoder failure.
pub fn compress_at(
    codec: Compression,
    level: i32,
    input: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let gzip = match level {
                -1 => flate2::Compression::default(),
                l => flate2::Compression::new(l.clamp(1, 9) as u32),
            };
            let mut enc = flate2::write::GzEncoder::new(out, gzip);
            enc.write_all(input)?;
            enc.finish()?;
        }
        Compression::Lz4 => {
            let mut enc = lz4_flex::frame::FrameEncoder::new(out);
            enc.write_all(input)?;
            enc.finish().map_err(std::io::Error::other)?;
        }
        Compression::Zstd => {
            let mut enc = zstd::stream::write::Encoder::new(out, level.clamp(-131_072, 22))?;
            enc.write_all(input)?;
            enc.finish()?;
        }
        Compression::Snappy => {
            // snappy-java framing: magic, version 1, compatible version 1, then blocks.
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for chunk in input.chunks(XERIAL_BLOCK) {
                let compressed = encoder.compress_vec(chunk).map_err(std::io::Error::other)?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_respects_the_limit() {
        let input: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut packed = Vec::new();
            compress(codec, &input, &mut packed).unwrap();
            let mut out = Vec::new();
            decompress(codec, &packed, &mut out, input.len()).unwrap();
            assert_eq!(out, input, "{codec:?}");
            // Told apart from a malformed payload: it is answered MESSAGE_TOO_LARGE.
            let refused = decompress(codec, &packed, &mut out, input.len() - 1);
            assert!(matches!(refused, Err(BatchError::InflatesPastLimit { .. })), "{codec:?}");
        }
    }

    /// A frame declaring a window larger than its batch may inflate to is
    /// refused before the window is allocated.
    #[test]
    fn a_zstd_window_beyond_the_limit_is_refused() {
        use std::io::Write as _;
        let input = vec![7u8; 4096];
        let mut huge_window = Vec::new();
        let mut e = zstd::stream::write::Encoder::new(&mut huge_window, 3).unwrap();
        e.window_log(27).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(&input).unwrap();
        e.finish().unwrap();
        let mut out = Vec::new();
        assert_eq!(zstd_window_log_max(16 << 20), 24);
        let refused = decompress(Compression::Zstd, &huge_window, &mut out, 16 << 20);
        assert!(refused.is_err(), "a 128 MiB window for a 16 MiB limit");
        decompress(Compression::Zstd, &huge_window, &mut out, 512 << 20).unwrap();
        assert_eq!(out, input, "within zstd's default cap it inflates");
        assert_eq!(zstd_window_log_max(1), 24);
        assert_eq!(zstd_window_log_max(64 << 20), 26);
    }

    #[test]
    fn levels_change_the_output_and_still_round_trip() {
        let input: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 97) as u8 ^ (i / 13) as u8).collect();
        for (codec, low, high) in
            [(Compression::Gzip, 1, 9), (Compression::Zstd, -5, 19), (Compression::Lz4, 1, 17)]
        {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            compress_at(codec, low, &input, &mut a).unwrap();
            compress_at(codec, high, &input, &mut b).unwrap();
            if codec == Compression::Lz4 {
                assert_eq!(a, b, "lz4_flex has a single level");
            } else {
                assert!(b.len() < a.len(), "{codec:?}: {} vs {}", b.len(), a.len());
            }
            for packed in [a, b] {
                let mut out = Vec::new();
                decompress(codec, &packed, &mut out, input.len()).unwrap();
                assert_eq!(out, input);
            }
        }
        assert_eq!(Compression::from_config_name("uncompressed"), Some(Compression::None));
        assert_eq!(Compression::from_config_name("producer"), None);
    }

    #[test]
    fn raw_snappy_from_librdkafka_is_read() {
        let input = b"hello hello hello hello".repeat(50);
        let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
        let mut out = Vec::new();
        decompress(Compression::Snappy, &raw, &mut out, 1 << 20).unwrap();
        assert_eq!(out, input);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
            assert!(decompress(codec, b"\x82SNAPPY\x00garbage-garbage", &mut out, 1 << 20).is_err());
            assert!(decompress(codec, &[0xff; 64], &mut out, 1 << 20).is_err());
        }
    }
}
