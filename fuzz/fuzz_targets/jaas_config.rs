//! Any text as a `sasl.jaas.config` value: parsed or refused, never a panic,
//! and an error message never quotes an option value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = sediment::security::sasl::jaas::parse(text);
});
