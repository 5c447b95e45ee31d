//! Writes the seed corpus of every fuzz target, `fuzz/corpus/<target>/`,
//! with sediment's own encoders: a few small, valid inputs per target, laid
//! out as each target reads its input (the target's module doc says how).
//! The TLS seeds need the `openssl` command; without it they are skipped.
//!
//! Run from the repository: `scripts/fuzz.sh seeds` (or `cargo run
//! --manifest-path fuzz/seeds/Cargo.toml -- fuzz/corpus`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FetchRequest, FindCoordinatorRequest, MetadataRequest,
    ProduceRequest, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use sediment::group::consumer_group_records::{ConsumerGroupKey, ConsumerGroupValue};
use sediment::group::schema::{GroupValue, MemberValue, OffsetValue, RecordKey};
use sediment::log::compression::Compression;
use sediment::log::control_record::EndTransactionMarker;
use sediment::log::index::{OffsetIndex, TimeIndex};
use sediment::log::producer_snapshot::{self, SnapshotEntry};
use sediment::log::record_batch::BatchBuilder;
use sediment::log::transaction_index::AbortedTxn;
use sediment::log::{LoadParams, Log, LogConfig, TopicPartition};
use sediment::txn::schema::{PartitionsSchema, TransactionLogKey, TransactionLogValue};

type Seeds = Vec<(&'static str, Vec<u8>)>;

const TS: i64 = 1_700_000_000_000;

/// `Fields::part` of the targets: a 4-byte length, then the bytes.
fn part(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// How `arbitrary` 1.x reads a `Vec<u8>` that is not the last field: each
/// byte behind a "one more" byte, then a "stop" byte.
fn arbitrary_vec(bytes: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = bytes.iter().flat_map(|&b| [1, b]).collect();
    out.push(0);
    out
}

fn batch(codec: Compression, records: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec, TS);
    for (i, (k, v)) in records.iter().enumerate() {
        b.append(TS + i as i64, Some(k), *v);
    }
    b.build()
}

fn transactional(pid: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, TS).producer(pid, 0, 0);
    b.transactional = true;
    b.append(TS, Some(b"tk"), Some(b"tv"));
    b.build()
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A request frame (the bytes after the size).
fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Vec<u8> {
    let mut b = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(str_bytes("seed")))
        .encode(&mut b, key.request_header_version(version))
        .expect("header");
    body.encode(&mut b, version).expect("body");
    b.to_vec()
}

/// Frames as a client writes them: each behind its 4-byte size.
fn stream(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.iter().flat_map(|f| cat(&[&(f.len() as i32).to_be_bytes(), f])).collect()
}

fn requests() -> Seeds {
    let records = batch(Compression::None, &[(b"k", Some(b"v"))]);
    let produce =
        ProduceRequest::default().with_acks(1).with_timeout_ms(1000).with_topic_data(vec![
            TopicProduceData::default().with_name(TopicName(str_bytes("t"))).with_partition_data(
                vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(records)))],
            ),
        ]);
    let fetch =
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![
            FetchTopic::default().with_topic(TopicName(str_bytes("t"))).with_partitions(vec![
                FetchPartition::default().with_partition(0).with_partition_max_bytes(1 << 20),
            ]),
        ]);
    vec![
        ("api_versions", frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())),
        ("metadata", frame(ApiKey::Metadata, 12, &MetadataRequest::default())),
        ("produce", frame(ApiKey::Produce, 9, &produce)),
        ("fetch", frame(ApiKey::Fetch, 12, &fetch)),
        (
            "find_coordinator",
            frame(
                ApiKey::FindCoordinator,
                4,
                &FindCoordinatorRequest::default().with_coordinator_keys(vec![str_bytes("g")]),
            ),
        ),
    ]
}

fn sasl_frames(user: &str, password: &str) -> Vec<Vec<u8>> {
    let token = format!("\0{user}\0{password}");
    vec![
        frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()),
        frame(
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(str_bytes("PLAIN")),
        ),
        frame(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes())),
        ),
    ]
}

fn handle_request_secured() -> Seeds {
    let reqs: Vec<Vec<u8>> = requests().into_iter().map(|(_, f)| f).collect();
    let mut authenticated = sasl_frames("alice", "alice-pw");
    authenticated.extend(reqs.iter().cloned());
    let mut reauth = sasl_frames("alice", "alice-pw");
    reauth.extend(sasl_frames("alice", "alice-pw").into_iter().skip(1));
    reauth.push(reqs[1].clone());
    vec![
        ("sasl_then_requests", cat(&[&[0], &stream(&authenticated)])),
        ("reauthenticate", cat(&[&[0], &stream(&reauth)])),
        ("alice", cat(&[&[1], &stream(&reqs)])),
        ("admin", cat(&[&[2], &stream(&reqs)])),
        ("bob", cat(&[&[3], &stream(&reqs)])),
    ]
}

fn batches() -> Seeds {
    let rec: &[(&[u8], Option<&[u8]>)] =
        &[(b"k1", Some(b"v1")), (b"k2", None), (b"k1", Some(b"v3"))];
    let mut seeds: Seeds = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .map(|c| (c.name(), batch(c, rec)))
    .collect();
    seeds.push(("two_batches", cat(&[&batch(Compression::None, rec), &transactional(5)])));
    // Flags byte 2: the broker's own append, which may carry a marker.
    seeds.push(("marker", cat(&[&[2], &EndTransactionMarker::commit(1).build_batch(5, 0, TS)])));
    seeds
}

fn recompression() -> Seeds {
    let rec: &[(&[u8], Option<&[u8]>)] = &[(b"k1", Some(b"value one")), (b"k2", None)];
    let mut seeds = Vec::new();
    for (flags, name) in
        [(0u8, "to_none"), (1, "to_gzip"), (2, "to_snappy"), (3, "to_lz4"), (4, "to_zstd")]
    {
        let source = if flags == 0 { Compression::Gzip } else { Compression::None };
        seeds.push((name, cat(&[&[flags, 1], &batch(source, rec), &batch(Compression::Lz4, rec)])));
    }
    let marker = EndTransactionMarker::abort(0).build_batch(5, 0, TS);
    seeds.push(("marker_kept", cat(&[&[8 | 4, 1], &transactional(5), &marker])));
    seeds
}

fn txn_log_value() -> Seeds {
    let value = TransactionLogValue {
        producer_id: 5,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 1,
        next_producer_epoch: -1,
        transaction_timeout_ms: 60_000,
        transaction_status: 1,
        transaction_partitions: Some(vec![PartitionsSchema {
            topic: "t".into(),
            partition_ids: vec![0, 1],
        }]),
        transaction_last_update_timestamp_ms: TS,
        transaction_start_timestamp_ms: TS,
        client_transaction_version: 0,
    };
    let empty = TransactionLogValue {
        transaction_status: 0,
        transaction_partitions: None,
        ..value.clone()
    };
    vec![
        ("value_v0", value.encode(0).expect("v0")),
        ("value_v1", value.encode(1).expect("v1")),
        ("empty_v1", empty.encode(1).expect("v1")),
        ("key", TransactionLogKey { transactional_id: "tx".into() }.encode().expect("key")),
    ]
}

fn consumer_group_records() -> Seeds {
    let (group, member) = ("g".to_string(), "m".to_string());
    let keys = [
        ConsumerGroupKey::Metadata { group: group.clone() },
        ConsumerGroupKey::MemberMetadata { group: group.clone(), member: member.clone() },
        ConsumerGroupKey::CurrentMemberAssignment { group, member },
    ];
    let mut seeds: Seeds = ["key_metadata", "key_member", "key_assignment"]
        .into_iter()
        .zip(keys.iter().map(|k| RecordKey::Consumer(k.clone()).encode().expect("key")))
        .collect();
    seeds.push(("value_epoch", ConsumerGroupValue::Epoch(3).encode().expect("value")));
    seeds.push((
        "value_member",
        ConsumerGroupValue::MemberMetadata(Default::default()).encode().expect("value"),
    ));
    seeds
}

fn group_records() -> Seeds {
    let offset =
        |group: &str| RecordKey::Offset { group: group.into(), topic: "t".into(), partition: 0 };
    let member = MemberValue {
        member_id: "m1".into(),
        group_instance_id: Some("i1".into()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout: 300_000,
        session_timeout: 45_000,
        subscription: Bytes::from_static(b"sub"),
        assignment: Bytes::from_static(b"asg"),
    };
    let group = GroupValue {
        protocol_type: "consumer".into(),
        generation: 5,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp: TS,
        members: vec![
            member.clone(),
            MemberValue { member_id: "m2".into(), group_instance_id: None, ..member },
        ],
    };
    let value =
        OffsetValue { offset: 42, leader_epoch: 3, metadata: "meta".into(), commit_timestamp: TS };
    let longest = "x".repeat(i16::MAX as usize);
    vec![
        ("offset_key", offset("g").encode().expect("key")),
        ("group_key", RecordKey::Group { group: "g".into() }.encode().expect("key")),
        ("longest_group_key", RecordKey::Group { group: longest.clone() }.encode().expect("key")),
        ("offset_value", value.encode().expect("value")),
        ("long_metadata", OffsetValue { metadata: longest, ..value }.encode().expect("value")),
        ("group_value", group.encode().expect("value")),
        (
            "empty_group",
            GroupValue { members: vec![], protocol: None, leader: None, ..group }
                .encode()
                .expect("value"),
        ),
    ]
}

fn producer_snapshot() -> Seeds {
    let entry = |pid: i64| SnapshotEntry {
        producer_id: pid,
        epoch: 1,
        last_sequence: 9,
        last_offset: 100 + pid,
        offset_delta: 2,
        timestamp: TS,
        coordinator_epoch: 0,
        current_txn_first_offset: if pid == 2 { 50 } else { -1 },
    };
    vec![
        ("empty", producer_snapshot::encode(&[])),
        ("one", producer_snapshot::encode(&[entry(1)])),
        ("three", producer_snapshot::encode(&[entry(1), entry(2), entry(3)])),
    ]
}

fn txn_index() -> Seeds {
    let txn = |pid, first, last| AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
        last_stable_offset: last + 1,
    };
    let entries: Vec<u8> =
        [txn(1, 0, 5), txn(2, 3, 9), txn(1, 10, 12)].iter().flat_map(|t| t.to_bytes()).collect();
    let head = |base: i64, fetch: i64, upper: i64| {
        cat(&[&base.to_be_bytes(), &fetch.to_be_bytes(), &upper.to_be_bytes()])
    };
    vec![
        ("three", cat(&[&head(0, 4, 11), &entries])),
        ("torn", cat(&[&head(0, 0, i64::MAX), &entries[..entries.len() - 5]])),
        ("based", cat(&[&head(5, 0, 100), &entries[34..]])),
    ]
}

fn offset_time_index(dir: &Path) -> Seeds {
    let (idx_path, tidx_path) = (dir.join("seed.index"), dir.join("seed.timeindex"));
    let mut idx = OffsetIndex::open(&idx_path, 100, 1 << 20, true).expect("index");
    let mut tidx = TimeIndex::open(&tidx_path, 100, 1 << 20, true).expect("time index");
    for i in 1..6i64 {
        idx.append(100 + 10 * i, 4096 * i as u32).expect("append");
        tidx.maybe_append(TS + i, 100 + 10 * i, false).expect("append");
    }
    idx.write_out().expect("write");
    tidx.write_out().expect("write");
    let (index, time_index) =
        (std::fs::read(&idx_path).expect("read"), std::fs::read(&tidx_path).expect("read"));
    let head = |size_or_next: i64, target: i64| {
        cat(&[
            &100i64.to_be_bytes(),
            &size_or_next.to_be_bytes(),
            &target.to_be_bytes(),
            &(1u32 << 20).to_be_bytes(),
        ])
    };
    vec![
        ("lookup", cat(&[&head(1 << 16, 125), &part(&index), &time_index])),
        ("by_time", cat(&[&head(200, TS + 3), &part(&index), &time_index])),
        (
            "torn",
            cat(&[
                &head(1 << 16, 140),
                &part(&index[..index.len() - 3]),
                &time_index[..time_index.len() - 5],
            ]),
        ),
    ]
}

/// The files of a real partition: two segments (the first with an aborted
/// transaction, so a `.txnindex`), closed cleanly (so a snapshot).
fn partition_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let tp = TopicPartition::new("t", 0);
    let load = LoadParams { recovery_point: 0, log_start_offset: 0, clean_shutdown: false };
    let config = Arc::new(LogConfig::default());
    let mut log = Log::open(dir, tp, config, load, false, sediment::clock::system()).expect("log");
    log.append_as_leader(&mut batch(
        Compression::None,
        &[(b"k", Some(b"v")), (b"k2", Some(b"v2"))],
    ))
    .expect("append");
    log.append_as_leader(&mut transactional(7)).expect("append");
    log.append_end_txn_marker(7, 0, EndTransactionMarker::abort(0)).expect("marker");
    log.roll_if_not_empty().expect("roll");
    log.append_as_leader(&mut batch(Compression::Lz4, &[(b"k", None)])).expect("append");
    log.close().expect("close");
    drop(log);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("list") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        files.insert(name, std::fs::read(entry.path()).expect("read"));
    }
    files
}

fn segment_seeds(files: &BTreeMap<String, Vec<u8>>) -> (Seeds, Seeds) {
    let file = |name: &str| {
        files.iter().find(|(n, _)| n.ends_with(name)).map(|(_, b)| b.clone()).unwrap_or_default()
    };
    let first = |ext: &str| files.get(&format!("{:020}.{ext}", 0)).cloned().unwrap_or_default();
    let second_base =
        files.keys().filter_map(|n| n.strip_suffix(".log")?.parse::<i64>().ok()).max().unwrap_or(0);
    let second =
        |ext: &str| files.get(&format!("{second_base:020}.{ext}")).cloned().unwrap_or_default();
    let snapshot = file(".snapshot");
    let snapshot_offset = files
        .keys()
        .filter_map(|n| n.strip_suffix(".snapshot")?.parse::<i64>().ok())
        .max()
        .unwrap_or(0);
    let layout = |flags: u8, recovery_point: i64, second_log: &[u8]| {
        cat(&[
            &[flags],
            &recovery_point.to_be_bytes(),
            &0i64.to_be_bytes(),
            &second_base.to_be_bytes(),
            &snapshot_offset.to_be_bytes(),
            &part(&first("log")),
            &part(&first("index")),
            &part(&first("timeindex")),
            &part(&first("txnindex")),
            &part(&snapshot),
            &part(&second("index")),
            &part(&second("timeindex")),
            &part(&second("txnindex")),
            second_log,
        ])
    };
    let log = second("log");
    let recovery = vec![
        ("crashed", layout(0, 0, &log)),
        ("clean_with_snapshot", layout(1 | 4, second_base + 1, &log)),
        ("torn_tail", layout(0, 0, &log[..log.len() - 7])),
        ("swap", layout(2, 0, &log)),
    ];
    let segment = first("log");
    let reader = |flags: u8, max: u32, initial: u16, end: u32, skip: u32| {
        cat(&[
            &[flags],
            &max.to_be_bytes(),
            &initial.to_be_bytes(),
            &0u32.to_be_bytes(),
            &end.to_be_bytes(),
            &skip.to_be_bytes(),
            &segment,
        ])
    };
    let len = segment.len() as u32;
    let batch_reader = vec![
        ("whole", reader(0, 1 << 20, 0, len, 0)),
        ("small_buffer", reader(0, 1 << 20, 16, len, 0)),
        ("deferred_crc_readahead", reader(1 | 4, 1 << 20, 64, len, 0)),
        ("skip", reader(2, 1 << 20, 0, len, len)),
        ("limit", reader(0, 80, 0, len, 0)),
    ];
    (recovery, batch_reader)
}

fn checkpoints() -> Seeds {
    vec![
        ("offsets", b"0\n2\na-b 0 5\nx 12 99\n".to_vec()),
        (
            "meta_properties",
            b"#\n#sediment\nnode.id=1\nversion=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n".to_vec(),
        ),
        (
            "topic_properties",
            b"cleanup.policy=compact\nsegment.bytes=1048576\nmin.cleanable.dirty.ratio=0.1\n"
                .to_vec(),
        ),
        ("partition_metadata", b"version: 0\ntopic_id: q1Rc3WZbTmSmbYXnOwwQqg\n".to_vec()),
        ("producer_id_block", b"1000\n".to_vec()),
    ]
}

fn security_stores(dir: &Path) -> Seeds {
    use sediment::config::dynamic::{DynamicBrokerConfig, DynamicLevel, DYNAMIC_CONFIG_FILE};
    use sediment::security::acl::{
        AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType,
    };
    use sediment::security::acl_store::{AclStore, ACLS_FILE};
    use sediment::security::authorizer::StandardAuthorizer;
    use sediment::security::credentials::{CredentialStore, SCRAM_CREDENTIALS_FILE};
    use sediment::security::sasl::scram_credential::ScramCredential;
    use sediment::security::sasl::ScramMechanism;

    let acls =
        AclStore::open(dir, StandardAuthorizer::new(Default::default(), false)).expect("acls");
    let bindings = [
        AclBinding::new(
            ResourceType::Topic,
            "orders-",
            PatternType::Prefixed,
            "User:alice",
            "*",
            AclOperation::Write,
            AclPermissionType::Allow,
        ),
        AclBinding::new(
            ResourceType::Group,
            "g",
            PatternType::Literal,
            "User:*",
            "10.0.0.1",
            AclOperation::Read,
            AclPermissionType::Deny,
        ),
        AclBinding::new(
            ResourceType::Cluster,
            "kafka-cluster",
            PatternType::Literal,
            "User:bob",
            "*",
            AclOperation::Alter,
            AclPermissionType::Allow,
        ),
    ];
    acls.update(|a| {
        ((), bindings.into_iter().map(|b| a.add(b.expect("binding"))).fold(false, |x, y| x | y))
    })
    .expect("write");
    let scram = CredentialStore::open(dir).expect("credentials");
    let n = std::num::NonZeroU32::new(4096).expect("non-zero");
    for (user, m) in [("alice", ScramMechanism::Sha256), ("bob", ScramMechanism::Sha512)] {
        let c = ScramCredential::from_password(m, "pw", b"salt".to_vec(), n);
        scram
            .update(|map| {
                ((), map.entry(user.into()).or_default().insert(c.mechanism, c).is_none())
            })
            .expect("write");
    }
    let mut config = sediment::config::BrokerConfig::default();
    config.set("log.dirs", &dir.display().to_string()).expect("log.dirs");
    let dynamic = DynamicBrokerConfig::open(config).expect("dynamic");
    let set = |level, pairs: &[(&str, &str)]| {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        dynamic.alter(level, entries, false, |_, _| Ok(()), |_| Ok(())).expect("alter");
    };
    set(
        DynamicLevel::ClusterDefault,
        &[("log.cleaner.threads", "2"), ("log.retention.ms", "86400000")],
    );
    set(DynamicLevel::PerBroker, &[("log.cleaner.io.max.bytes.per.second", "1048576")]);
    let read = |name: &str| std::fs::read(dir.join(name)).expect("a store file");
    vec![
        ("acls", read(ACLS_FILE)),
        ("scram_credentials", read(SCRAM_CREDENTIALS_FILE)),
        ("dynamic_configs", read(DYNAMIC_CONFIG_FILE)),
    ]
}

fn remote_manifest() -> Seeds {
    use sediment::remote::manifest::{object_key, Manifest, ObjectEntry, SegmentEntry, FORMAT};
    use sediment::remote::store::StoreMarker;
    let object = |base: i64, ext: &str, size: u64| {
        let crc32c = 0x1234_5678 ^ size as u32;
        ObjectEntry { ext: ext.into(), key: object_key(base, crc32c, size, ext), size, crc32c }
    };
    let segment = |base: i64, next: i64| SegmentEntry {
        base_offset: base,
        next_offset: next,
        files: vec![
            object(base, "log", 4096),
            object(base, "index", 16),
            object(base, "timeindex", 24),
            object(base, "txnindex", 34),
        ],
        max_timestamp: TS,
    };
    let manifest = Manifest {
        format: FORMAT,
        cluster_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
        topic: "t".into(),
        partition: 0,
        partition_metadata: "version: 0\ntopic_id: q1Rc3WZbTmSmbYXnOwwQqg\n".into(),
        topic_config: BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
        log_start_offset: 0,
        clean_offset: Some(10),
        local_log_start_offset: Some(20),
        store_clean_offset: None,
        end_offset: 20,
        segments: vec![segment(0, 10), segment(10, 20)],
        written_at_ms: TS,
        retired: false,
    };
    let retired =
        Manifest { retired: true, segments: vec![], clean_offset: None, ..manifest.clone() };
    let marker = StoreMarker {
        format: 1,
        cluster_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
        created_by_node: 1,
        created_at_ms: TS,
    };
    vec![
        ("manifest", serde_json::to_vec_pretty(&manifest).expect("json")),
        ("retired", serde_json::to_vec_pretty(&retired).expect("json")),
        ("marker", serde_json::to_vec(&marker).expect("json")),
    ]
}

/// Key and certificate PEMs made by `openssl`, if it is installed: a
/// P-256 PKCS#8 key, the key encrypted with PBKDF2 and with scrypt (password
/// `pw`), and a self-signed certificate with a SAN.
fn openssl_pems(dir: &Path) -> Option<[Vec<u8>; 4]> {
    let run = |args: &[&str]| {
        let ok = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()?
            .status
            .success();
        ok.then_some(())
    };
    run(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        "key.pem",
    ])?;
    run(&[
        "req",
        "-x509",
        "-new",
        "-key",
        "key.pem",
        "-subj",
        "/CN=broker/O=sediment",
        "-days",
        "3650",
        "-addext",
        "subjectAltName=DNS:localhost",
        "-out",
        "cert.pem",
    ])?;
    run(&[
        "pkcs8",
        "-topk8",
        "-v2",
        "aes-256-cbc",
        "-iter",
        "2048",
        "-passout",
        "pass:pw",
        "-in",
        "key.pem",
        "-out",
        "pbkdf2.pem",
    ])?;
    run(&[
        "pkcs8",
        "-topk8",
        "-scrypt",
        "-scrypt_N",
        "1024",
        "-scrypt_r",
        "8",
        "-scrypt_p",
        "1",
        "-passout",
        "pass:pw",
        "-in",
        "key.pem",
        "-out",
        "scrypt.pem",
    ])?;
    let read = |n: &str| std::fs::read(dir.join(n)).ok();
    Some([read("key.pem")?, read("cert.pem")?, read("pbkdf2.pem")?, read("scrypt.pem")?])
}

fn der_of(pem: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new("openssl")
        .args(["x509", "-outform", "DER"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl");
    child.stdin.take().expect("stdin").write_all(pem).expect("write");
    child.wait_with_output().expect("openssl").stdout
}

fn tls(dir: &Path) -> (Seeds, Seeds) {
    let mut principal: Seeds = vec![
        ("kafka_rules", cat(&[&part(br"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT"), b"CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US"])),
        ("upper", cat(&[&part(br"RULE:^CN=([^,]*),O=.*$/$1/U"), b"CN=kafka-server1,O=Org"])),
        ("escaped", cat(&[&part(br"RULE:^CN=(.*)\/x$/a\/$1\\/, DEFAULT"), b"CN=a/x"])),
    ];
    let Some([key, cert, pbkdf2, scrypt]) = openssl_pems(dir) else {
        eprintln!("openssl not found: no TLS seeds");
        return (vec![], principal);
    };
    principal.push(("certificate", cat(&[&part(b"DEFAULT"), &der_of(&cert)])));
    let input = |flags: u8, key: &[u8], password: &[u8]| {
        cat(&[&[flags], &part(key), &part(&cert), &part(&cert), password])
    };
    let pem = vec![
        ("plain", input(0, &key, b"")),
        ("client_auth", input(2 | 4, &key, b"")),
        ("pbkdf2", input(1, &pbkdf2, b"pw")),
        ("scrypt", input(1, &scrypt, b"pw")),
    ];
    (pem, principal)
}

fn key_audit_query() -> Seeds {
    [
        "topic=c&key=k",
        "topic=c&key=a+b&partition=1",
        "topic=c&key=%FF%00&partition=0",
        "topic=d&key=k",
        "topic=hidden&key=k",
        "topic=c&partition=-1&key=k",
    ]
    .iter()
    .enumerate()
    .map(|(i, q)| {
        (
            ["compacted", "space", "binary", "not_compacted", "hidden", "bad_partition"][i],
            q.as_bytes().to_vec(),
        )
    })
    .collect()
}

fn write(root: &Path, target: &str, seeds: Seeds) -> usize {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    for (name, bytes) in &seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
    }
    seeds.len()
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus".into()));
    let scratch = tempfile::tempdir().expect("scratch");
    let sub = |name: &str| {
        let d = scratch.path().join(name);
        std::fs::create_dir_all(&d).expect("dir");
        d
    };
    let reqs = requests();
    let sasl = stream(&sasl_frames("alice", "pw"));
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"pw\" user_bob=\"b\\\"ob\";";
    let plain_frames: Vec<u8> =
        sasl_frames("alice", "pw").iter().flat_map(|f| cat(&[&[1], &arbitrary_vec(f)])).collect();
    let client_first = b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL".to_vec();
    let client_final =
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
            .to_vec();
    let scram: Vec<u8> = cat(&[
        &arbitrary_vec(&client_first),
        &client_final.iter().flat_map(|&b| [1, b]).collect::<Vec<u8>>(),
    ]);
    let files = partition_files(&sub("partition"));
    let (recovery, reader) = segment_seeds(&files);
    let (pem, principal) = tls(&sub("tls"));
    let all: Vec<(&str, Seeds)> = vec![
        ("request_frame", reqs.clone()),
        ("handle_request", reqs),
        ("batch_validation", batches()),
        ("txn_log_value", txn_log_value()),
        (
            "sasl_plain",
            vec![
                ("alice", b"\0alice\0pw".to_vec()),
                ("authzid", b"alice\0alice\0pw".to_vec()),
                ("wrong", b"\0bob\0x".to_vec()),
            ],
        ),
        ("jaas_config", vec![("plain", jaas.as_bytes().to_vec())]),
        ("authenticator_frames", vec![("plain", plain_frames), ("raw", sasl)]),
        ("scram_messages", vec![("exchange", scram)]),
        ("consumer_group_records", consumer_group_records()),
        ("group_records", group_records()),
        ("producer_snapshot", producer_snapshot()),
        ("txn_index", txn_index()),
        ("offset_time_index", offset_time_index(&sub("index"))),
        ("segment_recovery", recovery),
        ("batch_reader", reader),
        ("checkpoints", checkpoints()),
        ("security_stores", security_stores(&sub("stores"))),
        ("remote_manifest", remote_manifest()),
        ("tls_pem", pem),
        ("principal_mapper", principal),
        ("key_audit_query", key_audit_query()),
        ("recompression", recompression()),
        ("handle_request_secured", handle_request_secured()),
    ];
    for (target, seeds) in all {
        let n = write(&root, target, seeds);
        println!("{target}: {n} seeds");
    }
}
