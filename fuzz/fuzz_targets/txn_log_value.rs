//! Any bytes as a `__transaction_state` key and value: decoding returns Ok or
//! an error, never panics, and never allocates beyond what the input holds; a
//! value that decodes encodes again (at its version) to bytes that decode to
//! the same value, and turning it into metadata never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::txn::schema::{TransactionLogKey, TransactionLogValue};
use sediment::txn::TransactionMetadata;

fuzz_target!(|data: &[u8]| {
    let _ = TransactionLogKey::decode(data);
    let Ok(value) = TransactionLogValue::decode(data) else {
        return;
    };
    let version = i16::from_be_bytes([data[0], data[1]]);
    // Only a v0 value with no tagged field to lose can be written at v0; v1 always.
    if let Ok(bytes) = value.encode(version) {
        assert_eq!(TransactionLogValue::decode(&bytes).ok(), Some(value.clone()));
    }
    if let Ok(metadata) = TransactionMetadata::from_log_value("t", &value) {
        let _ = metadata.to_log_value();
    }
});
