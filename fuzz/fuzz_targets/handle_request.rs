//! Any bytes as a request frame, decoded and run through the API handlers of a
//! real broker over a temporary log dir: a response, no response or a closed
//! connection, never a panic.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use sediment::api::KafkaApis;
use sediment::config::{BrokerConfig, Listener};
use sediment::log::LogManager;

struct Env {
    runtime: tokio::runtime::Runtime,
    broker: Arc<KafkaApis>,
    _dir: tempfile::TempDir,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = BrokerConfig::default();
        config.set("log.dirs", &dir.path().display().to_string()).unwrap();
        let logs = Arc::new(
            LogManager::open(config.log_manager_config(), sediment::clock::system()).unwrap(),
        );
        logs.create_topic("t", 2, Default::default()).unwrap();
        let txn_state = Arc::new(sediment::txn::TransactionStateManager::new(
            config.transaction_config(),
            Arc::clone(&logs),
            sediment::clock::system(),
        ));
        let broker = Arc::new(
            sediment::broker::standalone_apis(
                config,
                logs,
                vec![("PLAINTEXT".into(), Listener { host: "localhost".into(), port: 9092 })],
                txn_state,
            )
            .unwrap(),
        );
        // What the broker's group-loader thread does; the group APIs then answer for real.
        broker.groups.load();
        // block_in_place (used by the handlers) needs the multi-threaded runtime.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Env { runtime, broker, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let env = env();
    let frame = bytes::Bytes::copy_from_slice(data);
    let mut out = bytes::BytesMut::new();
    let broker = Arc::clone(&env.broker);
    let session =
        sediment::security::Session::plaintext("PLAINTEXT", std::net::Ipv4Addr::LOCALHOST.into());
    env.runtime.block_on(async move {
        // Keep long polls short: a fetch may otherwise wait its max_wait_ms.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            sediment::server::handle_frame(&broker, frame, &mut out, &session),
        )
        .await;
    });
});
