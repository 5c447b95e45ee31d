//! `BatchBuilder`: v2 batches for tests, tools and benchmarks (the cleaner
//! and the markers write their own).

use super::{
    update_crc, write_varint, write_varlong, CONTROL_FLAG_MASK, CURRENT_MAGIC, LOG_OVERHEAD,
    NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK,
};
use crate::log::compression::{self, Compression};

/// Simple builder of v2 batches, for tests, tools and benchmarks. It encodes
/// contiguous offset deltas from 0; the cleaner writes its own batches.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    pub compression: Compression,
    pub base_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    /// A control batch (transaction markers; see `control_record`).
    pub control: bool,
    records: Vec<u8>,
    count: i32,
    max_timestamp: i64,
}

impl BatchBuilder {
    pub fn new(compression: Compression, base_timestamp: i64) -> Self {
        Self {
            compression,
            base_timestamp,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: -1,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            records: Vec::new(),
            count: 0,
            max_timestamp: NO_TIMESTAMP,
        }
    }

    pub fn producer(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Add a record with no headers.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> &mut Self {
        self.append_with_headers(timestamp, key, value, &[])
    }

    pub fn append_with_headers(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) -> &mut Self {
        let mut body =
            Vec::with_capacity(32 + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len));
        body.push(0);
        write_varlong(&mut body, timestamp - self.base_timestamp);
        write_varint(&mut body, self.count);
        for field in [key, value] {
            match field {
                Some(b) => {
                    write_varint(&mut body, b.len() as i32);
                    body.extend_from_slice(b);
                }
                None => write_varint(&mut body, -1),
            }
        }
        write_varint(&mut body, headers.len() as i32);
        for (k, v) in headers {
            write_varint(&mut body, k.len() as i32);
            body.extend_from_slice(k);
            match v {
                Some(v) => {
                    write_varint(&mut body, v.len() as i32);
                    body.extend_from_slice(v);
                }
                None => write_varint(&mut body, -1),
            }
        }
        write_varint(&mut self.records, body.len() as i32);
        self.records.extend_from_slice(&body);
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encode the batch with base offset 0 (the broker assigns the real one).
    pub fn build(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        compression::compress(self.compression, &self.records, &mut payload)
            .expect("in-memory compression");
        let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + payload.len());
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(
            &((RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + payload.len()) as i32).to_be_bytes(),
        );
        out.extend_from_slice(&0i32.to_be_bytes());
        out.push(CURRENT_MAGIC as u8);
        out.extend_from_slice(&0u32.to_be_bytes());
        let mut attributes = self.compression as i16;
        if self.transactional {
            attributes |= TRANSACTIONAL_FLAG_MASK;
        }
        if self.control {
            attributes |= CONTROL_FLAG_MASK;
        }
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&(self.count - 1).max(0).to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        let max_ts = if self.count == 0 { self.base_timestamp } else { self.max_timestamp };
        out.extend_from_slice(&max_ts.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&payload);
        update_crc(&mut out);
        out
    }
}
