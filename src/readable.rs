//! Reading the big-endian schemas of the coordinators' records (the keys and
//! values of `__consumer_offsets` and `__transaction_state`, Kafka's
//! generated `Readable`): fixed-width integers, varints, strings and arrays in
//! both the classic and the flexible (compact, tagged) encodings.
//!
//! Invariants: every read first checks that its bytes are there, and a count
//! read from the bytes is checked against what is left before anything is
//! allocated for it, so hostile input is an error, never a panic or a large
//! allocation. Each schema module turns [`ReadError`] into its own error.

use bytes::Buf;

/// What was wrong with the bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

pub type Result<T> = std::result::Result<T, ReadError>;

fn err<T>(what: impl Into<String>) -> Result<T> {
    Err(ReadError(what.into()))
}

/// The longest string any Kafka schema can carry.
pub const MAX_STRING_LEN: usize = i16::MAX as usize;

/// The bytes not read yet.
pub struct Readable<'a>(&'a [u8]);

impl<'a> Readable<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.0.len()
    }

    fn need(&self, n: usize) -> Result<()> {
        if self.0.len() < n {
            return err(format!("need {n} bytes, {} left", self.0.len()));
        }
        Ok(())
    }

    pub fn i8(&mut self) -> Result<i8> {
        self.need(1)?;
        Ok(self.0.get_i8())
    }

    pub fn i16(&mut self) -> Result<i16> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }

    pub fn i32(&mut self) -> Result<i32> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }

    pub fn i64(&mut self) -> Result<i64> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        self.need(n)?;
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    /// Nothing may follow the record.
    pub fn finish(&self) -> Result<()> {
        if !self.0.is_empty() {
            return err(format!("{} bytes after the end", self.0.len()));
        }
        Ok(())
    }

    /// An unsigned varint of at most 5 bytes that fits 32 bits, as Kafka's
    /// `ByteUtils.readUnsignedVarint` reads it.
    pub fn uvarint(&mut self) -> Result<u32> {
        let mut value = 0u64;
        for i in 0..5 {
            let b = self.take(1)?[0];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(value).or_else(|_| err("varint over 32 bits"));
            }
        }
        err("varint longer than 5 bytes")
    }

    /// A length or count: flexible, a varint of n + 1 (0 = null); classic, an
    /// i32 (or i16 when `short`, as for strings), negative = null. `None` is null.
    pub fn length(&mut self, flexible: bool, short: bool) -> Result<Option<usize>> {
        if flexible {
            return Ok(self.uvarint()?.checked_sub(1).map(|n| n as usize));
        }
        let n = if short { i32::from(self.i16()?) } else { self.i32()? };
        Ok(usize::try_from(n).ok())
    }

    /// A nullable string.
    pub fn nullable_string(&mut self, flexible: bool) -> Result<Option<String>> {
        let Some(n) = self.length(flexible, true)? else {
            return Ok(None);
        };
        // A classic length cannot exceed it; a compact one can, and Kafka's
        // readers refuse it ("had invalid length").
        if n > MAX_STRING_LEN {
            return err(format!("a string of {n} bytes is longer than a Kafka string may be"));
        }
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Some(s.to_owned())),
            Err(_) => err("string is not UTF-8"),
        }
    }

    /// A string the schema says is never null.
    pub fn string(&mut self, flexible: bool) -> Result<String> {
        self.nullable_string(flexible)?
            .map_or_else(|| err("null string where the schema has none"), Ok)
    }

    /// Classic nullable bytes (i32 length); null reads as empty.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        match self.length(false, false)? {
            Some(n) => self.take(n),
            None => Ok(&[]),
        }
    }

    /// An array count, checked against the bytes left for elements of at
    /// least `min_size` bytes before anything is allocated.
    pub fn count(&mut self, flexible: bool, min_size: usize) -> Result<Option<usize>> {
        let Some(n) = self.length(flexible, false)? else {
            return Ok(None);
        };
        if n > self.0.len() / min_size.max(1) {
            return err(format!("{n} entries cannot fit in {} bytes", self.0.len()));
        }
        Ok(Some(n))
    }

    /// A tagged-field section: hand each field's tag and bytes to `field`.
    ///
    /// # Errors
    /// Bad framing, or the error `field` returns.
    pub fn tagged_fields<E: From<ReadError>>(
        &mut self,
        mut field: impl FnMut(u32, &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        // Each field takes at least 2 bytes, so a huge count fails on the data.
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let data = self.take(size)?;
            field(tag, data)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_check_their_bytes_first() {
        let mut r = Readable::new(&[0, 1, 0xff]);
        assert_eq!(r.i16(), Ok(1));
        assert!(r.i16().is_err());
        assert_eq!(r.remaining(), 1, "a failed read consumes nothing");
        assert_eq!(r.i8(), Ok(-1));
        r.finish().unwrap();
    }

    #[test]
    fn lengths_in_both_encodings() {
        // Classic: i16 string length, negative = null.
        assert_eq!(Readable::new(&[0xff, 0xff]).nullable_string(false), Ok(None));
        assert_eq!(Readable::new(&[0, 2, b'h', b'i']).string(false), Ok("hi".into()));
        // Flexible: varint n + 1, 0 = null.
        assert_eq!(Readable::new(&[0]).nullable_string(true), Ok(None));
        assert_eq!(Readable::new(&[3, b'h', b'i']).string(true), Ok("hi".into()));
        assert!(Readable::new(&[0]).string(true).is_err());
        assert!(Readable::new(&[2, 0xc3]).string(true).is_err(), "not UTF-8");
        // A compact length of 32,768: longer than any Kafka string.
        let mut long = vec![0x81, 0x80, 0x02];
        long.resize(3 + 32_768, b'a');
        assert!(Readable::new(&long).string(true).is_err());
        // Classic bytes: null reads as empty.
        assert_eq!(Readable::new(&[0xff, 0xff, 0xff, 0xff]).bytes(), Ok(&[][..]));
    }

    #[test]
    fn hostile_counts_and_varints_are_refused() {
        assert!(Readable::new(&[0x7f, 0xff, 0xff, 0xff, 0, 0]).count(false, 4).is_err());
        assert!(Readable::new(&[0xff, 0xff, 0xff, 0xff, 0x7f]).uvarint().is_err(), "over 32 bits");
        assert!(Readable::new(&[0x80; 6]).uvarint().is_err(), "longer than 5 bytes");
        assert_eq!(Readable::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]).uvarint(), Ok(u32::MAX));
    }
}
