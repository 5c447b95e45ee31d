//! Any bytes as the query string of `/key-audit` (`topic=T&key=K[&partition=P]`,
//! percent-encoded), answered as the metrics endpoint answers it over a
//! real log dir with a compacted topic holding a few keys, a topic that is
//! not compacted and one the endpoint's principal may not describe: never
//! a panic, a status the endpoint documents (200, 400, 403, 404, 500), and
//! a JSON body; 200 only for the compacted topic, 403 only for the hidden one.
#![no_main]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use sediment::cleaner::{LogCleaner, LogCleanerConfig};
use sediment::log::compression::Compression;
use sediment::log::record_batch::BatchBuilder;
use sediment::log::{LogManager, LogManagerConfig, TopicPartition};
use sediment::metrics::{Metrics, RequestMetrics};

struct Env {
    metrics: Metrics,
    _cleaner: LogCleaner,
    _dir: tempfile::TempDir,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let clock = sediment::clock::system();
        let logs =
            Arc::new(LogManager::open(LogManagerConfig::new(dir.path()), clock.clone()).unwrap());
        let compact = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        logs.create_topic("c", 2, compact.clone()).unwrap();
        logs.create_topic("hidden", 1, compact).unwrap();
        logs.create_topic("d", 1, BTreeMap::new()).unwrap();
        for partition in 0..2 {
            let log = logs.get_log(&TopicPartition::new("c", partition)).unwrap();
            for round in 0..3 {
                let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000 + round);
                b.append(1_700_000_000_000 + round, Some(b"k"), Some(b"v"));
                b.append(1_700_000_000_000 + round, Some(b"a b"), None);
                b.append(1_700_000_000_000 + round, Some(&[0xff, 0]), Some(b""));
                log.write().append_as_leader(&mut b.build()).unwrap();
            }
        }
        let config = LogCleanerConfig { enable: false, ..Default::default() };
        let cleaner =
            LogCleaner::start(config, Arc::clone(&logs), clock, Default::default()).unwrap();
        let metrics =
            Metrics::new(logs, Arc::clone(cleaner.handle()), &RequestMetrics::new()).unwrap();
        Env { metrics, _cleaner: cleaner, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else { return };
    let may_audit = |topic: &str| topic != "hidden";
    let (status, _, body) = env().metrics.respond("/key-audit", Some(query), &may_audit);
    assert!([200, 400, 403, 404, 500].contains(&status), "status {status}");
    let doc: serde_json::Value = serde_json::from_str(&body).expect("a JSON body");
    let topic = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "topic")
        .last()
        .map(|(_, v)| v.into_owned());
    match status {
        200 => assert_eq!(topic.as_deref(), Some("c"), "{doc}"),
        403 => assert_eq!(topic.as_deref(), Some("hidden"), "{doc}"),
        _ => assert!(doc.get("code").is_some(), "{doc}"),
    }
});
