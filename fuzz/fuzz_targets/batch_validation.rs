//! Any bytes as the records of a Produce: validation (framing, CRC, counts,
//! bounded decompression, record parsing) returns Ok or an error, never panics,
//! and never allocates beyond its bounds, for a client's records and for
//! control batches the broker appends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::log::producer_state::AppendOrigin;
use sediment::log::record_batch::TimestampType;
use sediment::log::validator::{validate_records, ValidationContext};

fuzz_target!(|data: &[u8]| {
    let ctx = ValidationContext {
        now_ms: 1_700_000_000_000,
        compact: data.first().is_some_and(|b| b & 1 == 1),
        max_message_bytes: 1 << 20,
        timestamp_type: TimestampType::CreateTime,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: 3_600_000,
        // The broker's own markers go through the same validator.
        origin: if data.first().is_some_and(|b| b & 2 == 2) {
            AppendOrigin::Coordinator
        } else {
            AppendOrigin::Client
        },
    };
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    let _ = validate_records(data, &ctx, &mut scratch, &mut out);
});
