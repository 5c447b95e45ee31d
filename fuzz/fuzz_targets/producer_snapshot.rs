//! Any bytes as a producer state snapshot (`<offset>.snapshot`, Kafka's
//! `ProducerSnapshot` v1): decoding returns the entries or an error, never
//! panics, and never allocates beyond what the input holds (the count is
//! checked against the length before anything is allocated); a snapshot that
//! decodes encodes to bytes that decode to the same entries, and, when its
//! entries are in producer id order (as sediment writes them), to the same
//! bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::log::producer_snapshot::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let Ok(entries) = decode(data) else { return };
    let bytes = encode(&entries);
    let mut sorted = entries.clone();
    sorted.sort_unstable();
    assert_eq!(decode(&bytes).as_ref(), Ok(&sorted));
    if sorted == entries {
        assert_eq!(bytes.as_slice(), data);
    }
});
