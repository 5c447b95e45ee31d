//! Operating the broker: the CLI, config files, server.properties, dynamic configs, the container files.
//!
//! One test binary for the area (`cargo test --test ops`), one module per
//! scenario; the harness is shared by every binary (`tests/broker`, `tests/common`).

#[path = "../broker/mod.rs"]
mod broker;

mod broker_dynamic_configs;
mod cli;
mod config_keys;
mod docs_links;
mod kafka_server_properties;
mod metrics_endpoint;
mod module_graph;
mod ops_files;
