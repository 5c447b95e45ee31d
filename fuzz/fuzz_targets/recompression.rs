//! Any bytes as the records of a Produce to a topic whose `compression.type`
//! is a codec (`validate_records`, then `apply_compression`, as an append
//! runs them): never a panic, and never an allocation past the
//! decompression bound. When batches are rebuilt, the result validates
//! again as the same number of batches; each rebuilt batch keeps the
//! original's header (offsets, timestamps, producer fields, the attributes
//! but for the codec), is in the topic's codec unless it is a control
//! batch, and inflates to exactly the records the original held. When
//! nothing is rebuilt, every data batch already was in the topic's codec.
//!
//! Input: a flags byte (the codec, 0 to 4, in the low three bits, modulo 5;
//! the broker's own append, which may carry markers; a compacted topic),
//! a level byte, then the records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::log::compression::Compression;
use sediment::log::producer_state::AppendOrigin;
use sediment::log::record_batch::{records_bytes, BatchHeader, TimestampType};
use sediment::log::validator::{apply_compression, validate_records, ValidationContext};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// The header fields recompression must not touch.
fn kept(h: &BatchHeader) -> impl PartialEq + std::fmt::Debug {
    let fields = (
        h.base_offset,
        h.partition_leader_epoch,
        h.magic,
        h.attributes & !0x07,
        h.last_offset_delta,
    );
    (
        fields,
        h.base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        h.records_count,
    )
}

fuzz_target!(|data: &[u8]| {
    let [flags, level, ref records @ ..] = *data else { return };
    let codec = CODECS[(flags & 7) as usize % CODECS.len()];
    let level = match codec {
        Compression::Gzip => [-1, 1, 6, 9][level as usize % 4],
        Compression::Zstd => [-1, 1, 3][level as usize % 3],
        _ => i32::from(level as i8),
    };
    let ctx = ValidationContext {
        now_ms: 1_700_000_000_000,
        compact: flags & 16 != 0,
        max_message_bytes: 1 << 20,
        timestamp_type: TimestampType::CreateTime,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        origin: if flags & 8 != 0 { AppendOrigin::Coordinator } else { AppendOrigin::Client },
    };
    let mut scratch = Vec::new();
    let mut validated = Vec::new();
    if validate_records(records, &ctx, &mut scratch, &mut validated).is_err() {
        return;
    }
    let original = validated.clone();
    let Ok(rebuilt) =
        apply_compression(records, &mut validated, Some((codec, level)), &ctx, &mut scratch)
    else {
        return;
    };
    let Some(rebuilt) = rebuilt else {
        for b in &original {
            assert!(
                b.control.is_some() || b.header.compression().ok() == Some(codec),
                "{:?} left as it was",
                b.header
            );
        }
        return;
    };
    assert_eq!(validated.len(), original.len());
    let limit = ctx.decompression_limit();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (old, new) in original.iter().zip(&validated) {
        assert_eq!(kept(&old.header), kept(&new.header));
        if old.control.is_none() {
            assert_eq!(new.header.compression().ok(), Some(codec));
        }
        let old_batch = &records[old.position..old.position + old.header.size_in_bytes()];
        let new_batch = &rebuilt[new.position..new.position + new.header.size_in_bytes()];
        let before =
            records_bytes(&old.header, old_batch, &mut a, limit).expect("inflated once").to_vec();
        let after = records_bytes(&new.header, new_batch, &mut b, limit).expect("inflated again");
        assert_eq!(before, after, "the records changed");
    }
});
