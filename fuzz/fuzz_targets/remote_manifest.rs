//! Any bytes as a partition's manifest in the object store
//! (`topics/<tp>/manifest/<seq>.json`) and as the store's marker
//! (`sediment-store.json`): parsing and the manifest's check never panic. A
//! manifest that parses serializes to JSON that parses to the same
//! manifest; one that passes its check (for the partition it names) still
//! passes after the round trip, describes the same state as itself, and is
//! no regression of itself; its segments' `.timeindex` and `.txnindex`
//! objects (whatever their bytes) are read at their base offsets without
//! panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::log::index::TimeIndex;
use sediment::log::transaction_index::parse_entries;
use sediment::log::TopicPartition;
use sediment::remote::manifest::{regression, Manifest};
use sediment::remote::store::StoreMarker;

fuzz_target!(|data: &[u8]| {
    if let Ok(marker) = serde_json::from_slice::<StoreMarker>(data) {
        let text = serde_json::to_vec(&marker).expect("serialize");
        assert_eq!(serde_json::from_slice::<StoreMarker>(&text).ok(), Some(marker));
    }
    let Ok(manifest) = serde_json::from_slice::<Manifest>(data) else { return };
    let text = serde_json::to_vec_pretty(&manifest).expect("serialize");
    let back: Manifest = serde_json::from_slice(&text).expect("what was written parses");
    assert_eq!(back, manifest);
    let tp = TopicPartition::new(manifest.topic.clone(), manifest.partition);
    let key = "topics/t-0/manifest/00000000000000000001.json";
    if manifest.check(key, &tp).is_err() {
        return;
    }
    back.check(key, &tp).expect("the round trip passes the check");
    assert!(manifest.same_state(&back));
    assert_eq!(regression(&manifest, &back), None);
    let _ = manifest.keys().count();
    // The bytes a `.timeindex` or `.txnindex` object may hold, at every base.
    let object = [0x7fu8; 68];
    for s in &manifest.segments {
        let _ = TimeIndex::last_entry_of(&object, s.base_offset);
        let _ = parse_entries(&object, s.base_offset);
        let _ = (s.log_key(), s.size());
    }
});
