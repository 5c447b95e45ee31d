//! Any bytes as a request frame (after the size): decoding returns a request
//! or an error, never panics or aborts (the hostile-count allocations of the
//! unpatched kafka-protocol abort here within seconds).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sediment::server::parse_frame(bytes::Bytes::copy_from_slice(data));
});
