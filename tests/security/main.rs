//! Security: listeners, TLS, SASL (PLAIN, SCRAM), re-authentication, ACLs.
//!
//! One test binary for the area (`cargo test --test security`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;

mod listeners;
mod security_acl_groups;
mod security_acl_matrix;
mod security_acl_model;
mod security_acls_cli;
mod security_api_matrix;
mod security_readme;
mod security_reauth;
mod security_sasl;
mod security_scram;
mod security_scram_clients;
mod security_tls;
mod security_tls_reload;
mod tls_principal_java;
