//! Any bytes as a SASL/PLAIN client token: authentication succeeds only for
//! the one configured user and password, and nothing panics.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sediment::security::sasl::plain::PlainSaslServer;
use sediment::security::sasl::{jaas, PlainUsers, SaslServer, SaslStep};

fuzz_target!(|data: &[u8]| {
    let text =
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"pw\";";
    let users = PlainUsers::from_jaas(&jaas::parse(text).expect("jaas")).expect("users");
    let mut server = PlainSaslServer::new(Arc::new(users));
    if let Ok(SaslStep::Complete { id, .. }) = server.evaluate_response(data) {
        assert_eq!(id.authorization_id(), "alice");
        assert!(data == b"\0alice\0pw" || data == b"alice\0alice\0pw", "{data:?} authenticated");
    }
});
