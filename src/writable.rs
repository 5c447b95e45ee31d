//! Writing the big-endian schemas of the coordinators' records (the keys and
//! values of `__consumer_offsets` and `__transaction_state`), the other half
//! of [`crate::readable`], as Kafka's generated `write` methods do.
//!
//! Invariant: a value too long for its length field is refused, never
//! truncated. A string is at most `i16::MAX` bytes in every encoding (Kafka's
//! writers throw "field is too long to be serialized" past it) and an array
//! or bytes field at most `i32::MAX - 1` entries. Writing a longer one with a
//! wrapped length would make a record that decodes as a different key: a
//! 65,536 + n byte group id read back as its last n bytes.

use bytes::BufMut;

pub use crate::readable::MAX_STRING_LEN;

/// A value that does not fit its schema's length field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WriteError(pub String);

pub type Result<T> = std::result::Result<T, WriteError>;

/// A record's bytes, written field by field.
#[derive(Debug, Default)]
pub struct Writable(Vec<u8>);

impl Writable {
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }

    pub fn i8(&mut self, v: i8) {
        self.0.put_i8(v);
    }

    pub fn i16(&mut self, v: i16) {
        self.0.put_i16(v);
    }

    pub fn i32(&mut self, v: i32) {
        self.0.put_i32(v);
    }

    pub fn i64(&mut self, v: i64) {
        self.0.put_i64(v);
    }

    /// Bytes written as they are (a uuid, an already encoded field).
    pub fn raw(&mut self, b: &[u8]) {
        self.0.put_slice(b);
    }

    /// An unsigned varint, as Kafka's `ByteUtils.writeUnsignedVarint`.
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.0.put_u8((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.put_u8(v as u8);
    }

    /// An empty tagged-field section.
    pub fn empty_tags(&mut self) {
        self.uvarint(0);
    }

    /// A string: flexible, a varint of length + 1; classic, an i16 length.
    ///
    /// # Errors
    /// A string longer than [`MAX_STRING_LEN`].
    pub fn string(&mut self, s: &str, flexible: bool) -> Result<()> {
        if s.len() > MAX_STRING_LEN {
            return Err(WriteError(format!(
                "a string of {} bytes is longer than {MAX_STRING_LEN}",
                s.len()
            )));
        }
        if flexible {
            self.uvarint(s.len() as u32 + 1);
        } else {
            self.i16(s.len() as i16);
        }
        self.raw(s.as_bytes());
        Ok(())
    }

    /// A nullable string (null: varint 0, or i16 -1).
    ///
    /// # Errors
    /// A string longer than [`MAX_STRING_LEN`].
    pub fn nullable_string(&mut self, s: Option<&str>, flexible: bool) -> Result<()> {
        match s {
            Some(s) => self.string(s, flexible),
            None if flexible => {
                self.uvarint(0);
                Ok(())
            }
            None => {
                self.i16(-1);
                Ok(())
            }
        }
    }

    /// An array's length (`None`: null): flexible, a varint of n + 1;
    /// classic, an i32.
    ///
    /// # Errors
    /// More entries than an i32 length can name.
    pub fn array_len(&mut self, len: Option<usize>, flexible: bool) -> Result<()> {
        let n = match len {
            None => -1,
            Some(n) => match i32::try_from(n) {
                Ok(n) if n < i32::MAX => n,
                _ => return Err(WriteError(format!("an array of {n} entries"))),
            },
        };
        if flexible {
            self.uvarint((n + 1) as u32);
        } else {
            self.i32(n);
        }
        Ok(())
    }

    /// Classic bytes: an i32 length, then the bytes.
    ///
    /// # Errors
    /// More bytes than an i32 length can name.
    pub fn bytes(&mut self, b: &[u8]) -> Result<()> {
        self.array_len(Some(b.len()), false)?;
        self.raw(b);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readable::Readable;

    #[test]
    fn strings_round_trip_in_both_encodings() {
        let mut w = Writable::default();
        w.string("hi", false).unwrap();
        w.string("hi", true).unwrap();
        w.nullable_string(None, false).unwrap();
        w.nullable_string(None, true).unwrap();
        let bytes = w.into_vec();
        let mut r = Readable::new(&bytes);
        assert_eq!(r.string(false).unwrap(), "hi");
        assert_eq!(r.string(true).unwrap(), "hi");
        assert_eq!(r.nullable_string(false).unwrap(), None);
        assert_eq!(r.nullable_string(true).unwrap(), None);
        r.finish().unwrap();
    }

    #[test]
    fn a_string_too_long_for_its_length_is_refused_not_wrapped() {
        let longest = "a".repeat(MAX_STRING_LEN);
        for flexible in [false, true] {
            let mut w = Writable::default();
            w.string(&longest, flexible).unwrap();
            assert_eq!(Readable::new(&w.into_vec()).string(flexible).unwrap(), longest);
            // 65,536 + 6 bytes: an i16 length would wrap to 6 ("victim").
            let forged = format!("{}victim", "a".repeat(65_536));
            let mut w = Writable::default();
            assert!(w.string(&forged, flexible).is_err());
            assert!(w.nullable_string(Some(&forged), flexible).is_err());
        }
    }

    #[test]
    fn uvarints_match_kafkas_encoding() {
        let mut w = Writable::default();
        w.uvarint(300);
        w.uvarint(u32::MAX);
        let bytes = w.into_vec();
        assert_eq!(bytes[..2], [0xac, 0x02]);
        let mut r = Readable::new(&bytes);
        assert_eq!(r.uvarint().unwrap(), 300);
        assert_eq!(r.uvarint().unwrap(), u32::MAX);
    }
}
