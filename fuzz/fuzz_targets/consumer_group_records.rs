//! Any bytes as a `__consumer_offsets` key and, for a consumer group key
//! (versions 3 to 8), as its value: decoding returns Ok or an error, never
//! panics, and never allocates beyond what the input holds; a value that
//! decodes encodes to bytes that decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment::group::consumer_group_records::{ConsumerGroupKey, ConsumerGroupValue};
use sediment::group::schema::RecordKey;

fuzz_target!(|data: &[u8]| {
    if let Ok(RecordKey::Consumer(key)) = RecordKey::decode(data) {
        let bytes = key.encode().expect("a decoded key encodes");
        assert_eq!(RecordKey::decode(&bytes).ok(), Some(RecordKey::Consumer(key)));
    }
    // The value is read against each kind of key in turn.
    let (group, member) = ("g".to_string(), "m".to_string());
    for key in [
        ConsumerGroupKey::Metadata { group: group.clone() },
        ConsumerGroupKey::PartitionMetadata { group: group.clone() },
        ConsumerGroupKey::MemberMetadata { group: group.clone(), member: member.clone() },
        ConsumerGroupKey::TargetAssignmentMetadata { group: group.clone() },
        ConsumerGroupKey::TargetAssignmentMember { group: group.clone(), member: member.clone() },
        ConsumerGroupKey::CurrentMemberAssignment { group: group.clone(), member: member.clone() },
    ] {
        if let Ok(value) = ConsumerGroupValue::decode(&key, data) {
            let bytes = value.encode().expect("a decoded value encodes");
            assert_eq!(ConsumerGroupValue::decode(&key, &bytes).ok(), Some(value));
        }
    }
});
