//! SaslHandshake and SaslAuthenticate once a connection is past
//! authentication (or on a listener without SASL): Kafka's `KafkaApis`
//! answers both with ILLEGAL_SASL_STATE, and so does sediment. Both are
//! advertised on every listener, as Kafka 4.1.2 advertises them (its broker
//! API list does not depend on the listener's protocol); the exchange itself
//! runs before dispatch, in the server's authenticator
//! (`src/server/authenticator.rs`).
//!
//! A SaslHandshake after authentication starts a re-authentication
//! (KIP-368) in the server's connection loop when the session has a lifetime
//! (`connections.max.reauth.ms`) and none started in the last second; any
//! other reaches this handler and gets this error, and the connection stays
//! open, as on Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};

use super::str_bytes;

pub fn handshake() -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}

pub fn authenticate() -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(str_bytes(
            "SaslAuthenticate request received after successful authentication",
        )))
}
