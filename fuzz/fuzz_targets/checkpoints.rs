//! Any text as each of the small files a log dir keeps: an offset
//! checkpoint (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//! `cleaner-offset-checkpoint`), `meta.properties`, a partition's
//! `topic.properties` and `partition.metadata` topic id, and the producer id
//! block. Reading never panics. A checkpoint that reads is written and reads
//! back the same; `meta.properties` keeps the cluster id it names and is not
//! rewritten; topic overrides that resolve are persisted and resolve again
//! to the same config; a topic id read round-trips; the producer id block
//! issues an id no lower than the one it stored, never a negative one.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sediment::log::checkpoint::OffsetCheckpointFile;
use sediment::log::manager::{topic_id_from_string, topic_id_to_string};
use sediment::log::meta_properties::{MetaProperties, META_PROPERTIES_FILE};
use sediment::log::producer_id_manager::{ProducerIdManager, PRODUCER_ID_BLOCK_FILE};
use sediment::log::LogConfig;

fuzz_target!(|data: &[u8]| {
    let dir = common::scratch_dir();

    let name = "recovery-point-offset-checkpoint";
    std::fs::write(dir.join(name), data).expect("write");
    let file = OffsetCheckpointFile::new(dir, name);
    if let Ok(entries) = file.read() {
        file.write(&entries).expect("write back");
        assert_eq!(file.read().expect("read back"), entries);
    }

    let Ok(text) = std::str::from_utf8(data) else { return };

    let meta_dir = dir.join("meta");
    std::fs::create_dir_all(&meta_dir).expect("dir");
    std::fs::write(meta_dir.join(META_PROPERTIES_FILE), data).expect("write");
    let meta = MetaProperties::load_or_create(std::slice::from_ref(&meta_dir), 1).expect("load");
    let named = text.lines().find_map(|l| l.strip_prefix("cluster.id=")).map(str::trim);
    if let Some(id) = named {
        assert_eq!(meta.cluster_id, id);
    }
    assert_eq!(std::fs::read(meta_dir.join(META_PROPERTIES_FILE)).expect("read"), data);

    let overrides = LogConfig::parse_properties(text);
    if let Ok(config) = LogConfig::resolve(&Default::default(), overrides.clone()) {
        let persisted = config.overrides_to_properties();
        let again = LogConfig::parse_properties(&persisted);
        assert_eq!(again, overrides, "{persisted:?}");
        LogConfig::resolve(&Default::default(), again).expect("persisted overrides resolve");
    }

    for line in text.lines() {
        if let Some(id) =
            line.strip_prefix("topic_id:").map(str::trim).and_then(topic_id_from_string)
        {
            assert_eq!(topic_id_from_string(&topic_id_to_string(&id)), Some(id));
        }
    }

    std::fs::write(dir.join(PRODUCER_ID_BLOCK_FILE), data).expect("write");
    let stored = text.trim().parse::<i64>().unwrap_or(0);
    if let Ok(mut ids) = ProducerIdManager::load(dir, 0) {
        if let Ok(id) = ids.generate_producer_id() {
            assert!(id >= stored.max(0), "id {id} issued after block {stored}");
        }
    }
});
