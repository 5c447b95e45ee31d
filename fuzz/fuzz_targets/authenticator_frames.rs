//! Arbitrary frame sequences into the SASL authenticator's state machine:
//! every frame gets a step, nothing panics, and the connection is
//! authenticated only after the one good PLAIN token.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use sediment::security::sasl::{jaas, PlainUsers, SaslListener};
use sediment::server::authenticator::{AuthStep, Authenticator};

fuzz_target!(|frames: Vec<Vec<u8>>| {
    let text =
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"pw\";";
    let users = PlainUsers::from_jaas(&jaas::parse(text).expect("jaas")).expect("users");
    let listener = Arc::new(SaslListener {
        mechanisms: vec!["PLAIN".into()],
        plain: Some(Arc::new(users)),
        scram: None,
        max_receive_size: 524_288,
        failed_authentication_delay: Duration::ZERO,
        max_reauth: std::collections::HashMap::new(),
    });
    let mut auth = Authenticator::new(listener);
    for f in frames {
        match auth.on_frame(bytes::Bytes::from(f)) {
            AuthStep::Reply(_) => {}
            AuthStep::Done { principal, .. } => {
                assert_eq!(principal.to_string(), "User:alice");
                break;
            }
            AuthStep::Fail { .. } | AuthStep::Close(_) => break,
        }
    }
});
