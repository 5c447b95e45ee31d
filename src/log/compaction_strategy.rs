//! Which copy of a key compaction keeps (`sediment.compaction.strategy`, the
//! vocabulary of KIP-280, which Apache Kafka accepted but never built).
//!
//! Every strategy orders the copies of one key by a *version* and then by
//! offset; the greatest `(version, offset)` pair wins:
//! * `offset` (Kafka's rule): every copy has the same version, so the
//!   highest offset wins.
//! * `timestamp`: the record's timestamp (the batch's max timestamp under
//!   LogAppendTime, which is what a reader sees).
//! * `header`: the named header's value, read as a decimal integer
//!   (`-?[0-9]{1,19}`, within i64) or else as a big-endian signed integer of
//!   1 to 8 bytes. A record without the header, with a null value or with a
//!   value that is neither, has the version [`MISSING_VERSION`], below every
//!   readable one, so the order stays total; among such copies the offset
//!   decides. When the header repeats, its last occurrence counts.
//!
//! Invariant: the version of a record depends only on the record and its
//! batch header, never on where it is read from, so the map pass, the
//! recopy and the key audit rank copies the same way.

use super::record_batch::{read_varint, BatchHeader, Record, TimestampType};

/// The version of a record the `header` strategy cannot read. A header
/// holding `i64::MIN` ranks the same; the offset then decides between them.
pub const MISSING_VERSION: i64 = i64::MIN;

/// The rule that picks the copy of a key compaction keeps.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CompactionStrategy {
    /// The highest offset wins (Kafka's rule).
    #[default]
    Offset,
    /// The highest record timestamp wins; ties go to the higher offset.
    Timestamp,
    /// The highest value of the named header wins; ties, and copies
    /// without a readable value, go to the higher offset.
    Header(String),
}

impl CompactionStrategy {
    /// The strategy the topic configs name (`name`: the config's value,
    /// `header`: `sediment.compaction.strategy.header`); `None` for `header`
    /// without a header name, or an unknown name.
    pub fn from_config(name: &str, header: &str) -> Option<Self> {
        match name.trim() {
            "offset" => Some(Self::Offset),
            "timestamp" => Some(Self::Timestamp),
            "header" if !header.is_empty() => Some(Self::Header(header.to_string())),
            _ => None,
        }
    }

    /// Whether copies are ranked by something other than their offset.
    pub fn is_versioned(&self) -> bool {
        !matches!(self, Self::Offset)
    }

    /// The config value's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Offset => "offset",
            Self::Timestamp => "timestamp",
            Self::Header(_) => "header",
        }
    }

    /// The header read by the `header` strategy.
    pub fn header_name(&self) -> Option<&str> {
        match self {
            Self::Header(h) => Some(h),
            _ => None,
        }
    }

    /// The version of `rec`, a record of the batch `header` (0 for every
    /// record under `offset`).
    pub fn version(&self, header: &BatchHeader, rec: &Record<'_>) -> i64 {
        match self {
            Self::Offset => 0,
            Self::Timestamp => record_timestamp(header, rec),
            Self::Header(name) => {
                last_header(rec, name.as_bytes()).and_then(parse_version).unwrap_or(MISSING_VERSION)
            }
        }
    }
}

impl std::fmt::Display for CompactionStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Header(h) => write!(f, "header({h})"),
            other => f.write_str(other.name()),
        }
    }
}

/// The timestamp a reader sees for `rec`. Wrapping, as the cleaner's
/// re-encoding of a batch under a new base timestamp wraps: a record keeps
/// the same timestamp, and so the same version, across cleans.
pub fn record_timestamp(header: &BatchHeader, rec: &Record<'_>) -> i64 {
    if header.timestamp_type() == TimestampType::LogAppendTime {
        header.max_timestamp
    } else {
        header.base_timestamp.wrapping_add(rec.timestamp_delta)
    }
}

/// The value of the last header of `rec` named `name` (`None` when absent
/// or null). The record iterator has checked the headers' framing, so a
/// framing error here only ends the search.
pub fn last_header<'a>(rec: &Record<'a>, name: &[u8]) -> Option<&'a [u8]> {
    let mut body = rec.headers;
    let mut found = None;
    for _ in 0..rec.headers_count {
        let (key_len, k) = read_varint(body).ok()?;
        let key = body.get(k..k + usize::try_from(key_len).ok()?)?;
        body = &body[k + key.len()..];
        let (value_len, k) = read_varint(body).ok()?;
        body = &body[k..];
        let value = match usize::try_from(value_len) {
            Ok(len) => {
                let v = body.get(..len)?;
                body = &body[len..];
                Some(v)
            }
            Err(_) => None,
        };
        if key == name {
            found = value;
        }
    }
    found
}

/// A header value as a version: decimal text, else a big-endian signed
/// integer of 1 to 8 bytes.
pub fn parse_version(value: &[u8]) -> Option<i64> {
    let digits = value.strip_prefix(b"-").unwrap_or(value);
    let decimal = !digits.is_empty() && digits.len() <= 19 && digits.iter().all(u8::is_ascii_digit);
    if decimal {
        if let Some(v) = std::str::from_utf8(value).ok().and_then(|s| s.parse::<i64>().ok()) {
            return Some(v);
        }
    }
    if value.is_empty() || value.len() > 8 {
        return None;
    }
    // Sign-extend from the first byte.
    let fill = if value[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut be = [fill; 8];
    be[8 - value.len()..].copy_from_slice(value);
    Some(i64::from_be_bytes(be))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::compression::Compression;
    use crate::log::record_batch::{self, BatchBuilder, RecordIter};

    #[test]
    fn header_values_read_as_decimal_then_big_endian() {
        assert_eq!(parse_version(b"42"), Some(42));
        assert_eq!(parse_version(b"-7"), Some(-7));
        assert_eq!(parse_version(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_version(b"-9223372036854775808"), Some(i64::MIN));
        // Nineteen digits past i64 are not decimal; too long for binary too.
        assert_eq!(parse_version(b"9999999999999999999"), None);
        // Not all digits: big-endian bytes, sign-extended.
        assert_eq!(parse_version(&[0x01, 0x00]), Some(256));
        assert_eq!(parse_version(&[0xff]), Some(-1));
        assert_eq!(parse_version(&[0x80, 0, 0, 0, 0, 0, 0, 0]), Some(i64::MIN));
        assert_eq!(parse_version(&5i64.to_be_bytes()), Some(5));
        // "12" as two bytes is decimal, not 0x3132.
        assert_eq!(parse_version(b"12"), Some(12));
        assert_eq!(parse_version(b""), None);
        assert_eq!(parse_version(b"-"), Some(0x2d), "not decimal: one byte");
        assert_eq!(parse_version(&[1; 9]), None);
    }

    #[test]
    fn versions_follow_the_strategy() {
        let mut b = BatchBuilder::new(Compression::None, 1_000);
        let (v, other): (&[u8], &[u8]) = (b"v", b"other");
        b.append_with_headers(1_005, Some(b"k"), Some(b"v"), &[(v, Some(b"3"))]);
        b.append_with_headers(
            1_002,
            Some(b"k"),
            Some(b"v"),
            &[(v, Some(b"9")), (other, Some(b"x")), (v, Some(&[0, 7]))],
        );
        b.append_with_headers(1_001, Some(b"k"), None, &[(v, None)]);
        b.append(1_003, Some(b"k"), Some(b"v"));
        let batch = b.build();
        let header = BatchHeader::parse(&batch).unwrap();
        let mut scratch = Vec::new();
        let payload = record_batch::records_bytes(&header, &batch, &mut scratch, 1 << 20).unwrap();
        let recs: Vec<_> =
            RecordIter::new(payload, header.records_count).map(|r| r.unwrap()).collect();
        let by_header = CompactionStrategy::Header("v".into());
        let versions: Vec<i64> = recs.iter().map(|r| by_header.version(&header, r)).collect();
        assert_eq!(versions, [3, 7, MISSING_VERSION, MISSING_VERSION], "last occurrence counts");
        let times: Vec<i64> =
            recs.iter().map(|r| CompactionStrategy::Timestamp.version(&header, r)).collect();
        assert_eq!(times, [1_005, 1_002, 1_001, 1_003]);
        assert!(recs.iter().all(|r| CompactionStrategy::Offset.version(&header, r) == 0));
    }

    #[test]
    fn config_names() {
        assert_eq!(CompactionStrategy::from_config("offset", ""), Some(CompactionStrategy::Offset));
        assert_eq!(
            CompactionStrategy::from_config("header", "ver"),
            Some(CompactionStrategy::Header("ver".into()))
        );
        assert_eq!(CompactionStrategy::from_config("header", ""), None);
        assert_eq!(CompactionStrategy::Header("ver".into()).to_string(), "header(ver)");
        assert!(!CompactionStrategy::Offset.is_versioned());
    }
}
