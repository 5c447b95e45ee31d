//! Produce v0–2: advertised (old librdkafka turns compression off unless
//! Produce v0 is listed, as Apache Kafka 4.x knows) but not served. The
//! kafka-protocol crate cannot encode these versions, so the request is walked
//! and the UNSUPPORTED_VERSION response written here by hand.
//!
//! Request v0–2 body: acks i16, timeout i32, [topic string, [partition i32, records bytes]].
//! Response v0: [topic string, [partition i32, error i16, base_offset i64 (, v2: log_append_time i64)]] (, v1+: throttle i32).

use bytes::{Buf, BufMut};

const UNSUPPORTED_VERSION: i16 = 35;

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Some(head)
}

fn i16_(buf: &mut &[u8]) -> Option<i16> {
    take(buf, 2).map(|mut b| b.get_i16())
}

fn i32_(buf: &mut &[u8]) -> Option<i32> {
    take(buf, 4).map(|mut b| b.get_i32())
}

/// The response body (after the correlation id), or `None` when the request
/// is malformed or has acks=0 (then the connection is closed).
pub fn unsupported_response(frame: &[u8], version: i16) -> Option<Vec<u8>> {
    let mut buf = frame.get(8..)?;
    // Header v1: client id as a nullable string.
    let client_len = i16_(&mut buf)?;
    if client_len > 0 {
        take(&mut buf, client_len as usize)?;
    }
    let acks = i16_(&mut buf)?;
    let _timeout = i32_(&mut buf)?;
    if acks == 0 {
        return None;
    }
    let topics = i32_(&mut buf)?;
    let mut out = Vec::new();
    // Every topic takes at least 6 bytes, so the count is bounded by the frame.
    if topics < 0 || topics as usize > buf.len() / 6 {
        return None;
    }
    out.put_i32(topics);
    for _ in 0..topics {
        let name_len = i16_(&mut buf)?;
        let name = take(&mut buf, name_len.max(0) as usize)?;
        out.put_i16(name_len.max(0));
        out.put_slice(name);
        let partitions = i32_(&mut buf)?;
        if partitions < 0 || partitions as usize > buf.len() / 8 {
            return None;
        }
        out.put_i32(partitions);
        for _ in 0..partitions {
            let index = i32_(&mut buf)?;
            let records_len = i32_(&mut buf)?;
            if records_len > 0 {
                take(&mut buf, records_len as usize)?;
            }
            out.put_i32(index);
            out.put_i16(UNSUPPORTED_VERSION);
            out.put_i64(-1);
            if version >= 2 {
                out.put_i64(-1);
            }
        }
    }
    if version >= 1 {
        out.put_i32(0);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_every_partition() {
        let mut frame = vec![0, 0, 0, 2, 0, 0, 0, 7];
        frame.extend_from_slice(&[0, 1, b'c']); // client id
        frame.extend_from_slice(&1i16.to_be_bytes());
        frame.extend_from_slice(&1000i32.to_be_bytes());
        frame.extend_from_slice(&1i32.to_be_bytes());
        frame.extend_from_slice(&[0, 1, b't']);
        frame.extend_from_slice(&1i32.to_be_bytes());
        frame.extend_from_slice(&3i32.to_be_bytes());
        frame.extend_from_slice(&2i32.to_be_bytes());
        frame.extend_from_slice(&[9, 9]);
        let out = unsupported_response(&frame, 2).unwrap();
        let mut b = &out[..];
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i16(), 1);
        assert_eq!(b.get_u8(), b't');
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i32(), 3);
        assert_eq!(b.get_i16(), UNSUPPORTED_VERSION);
        assert_eq!(b.get_i64(), -1);
        assert_eq!(b.get_i64(), -1);
        assert_eq!(b.get_i32(), 0);
        assert!(b.is_empty());
        assert_eq!(unsupported_response(&frame[..20], 2), None);
    }
}
