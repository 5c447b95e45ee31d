//! Any bytes as a classic `__consumer_offsets` key (offset commit v0/v1,
//! group metadata v2) and as an offset commit value (v1, v3) and a group
//! metadata value (v3), strings up to the 32,767 bytes a Kafka string holds:
//! decoding returns Ok or an error, never panics, and never allocates beyond
//! what the input holds; whatever decodes encodes (at the current version)
//! to bytes that decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::group::schema::{GroupValue, OffsetValue, RecordKey};

fuzz_target!(|data: &[u8]| {
    if let Ok(key) = RecordKey::decode(data) {
        // A decoded key's strings fit their i16 lengths, so it encodes.
        let bytes = key.encode().expect("a decoded key encodes");
        assert_eq!(RecordKey::decode(&bytes).ok(), Some(key));
    }
    if let Ok(value) = OffsetValue::decode(data) {
        let bytes = value.encode().expect("a decoded offset value encodes");
        assert_eq!(OffsetValue::decode(&bytes).ok(), Some(value));
    }
    if let Ok(value) = GroupValue::decode(data) {
        let bytes = value.encode().expect("a decoded group value encodes");
        assert_eq!(GroupValue::decode(&bytes).ok(), Some(value));
    }
});
