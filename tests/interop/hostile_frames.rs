//! Bad input on the wire: every case gets an error response or a closed
//! connection, the broker never dies, and a second client keeps working.

use crate::broker::{TestBroker, Wire};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, MetadataRequest, RequestKind};

/// The 14 bytes of a Metadata v1 request whose topic count is i32::MAX.
/// kafka-protocol 0.18 as released calls `Vec::with_capacity(i32::MAX)` on it
/// (about 154 GB) and aborts the process; the vendored patch bounds the count
/// by the bytes left.
const HOSTILE_METADATA: [u8; 14] =
    [0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff];

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// The healthy second client: still answered after every hostile case.
fn assert_healthy(wire: &mut Wire, b: &TestBroker) {
    let r = wire.call(3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0, "broker log:\n{}", b.log());
    let m = wire.call(12, &MetadataRequest::default());
    assert_eq!(m.brokers.len(), 1);
}

#[test]
fn hostile_array_count_is_refused_by_the_decoder() {
    // Straight through the crate: an error, not an abort.
    let mut body = bytes::Bytes::copy_from_slice(&HOSTILE_METADATA[10..]);
    assert!(RequestKind::decode(ApiKey::Metadata, &mut body, 1).is_err());
    // Same for a compact array (Metadata v9+): count 0x7fffffff as a varint.
    let mut body = bytes::Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x07, 0x00]);
    assert!(RequestKind::decode(ApiKey::Metadata, &mut body, 12).is_err());
    // A header under 4 bytes used to panic while peeking the key.
    let mut short = bytes::Bytes::from_static(&[0x00, 0x03]);
    assert!(kafka_protocol::protocol::decode_request_header_from_buffer(&mut short).is_err());
}

#[test]
fn bad_frames_close_only_their_connection() {
    let b = TestBroker::start(&["socket.request.max.bytes=4096"]);
    let mut healthy = Wire::connect(b.port);
    assert_healthy(&mut healthy, &b);

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("frame over socket.request.max.bytes", {
            let mut f = 8192i32.to_be_bytes().to_vec();
            f.extend_from_slice(&[0u8; 64]);
            f
        }),
        ("negative size", (-1i32).to_be_bytes().to_vec()),
        ("3-byte frame", frame(&[0, 18, 0])),
        (
            "garbage bytes",
            frame(&[0xde, 0xad, 0xbe, 0xef, 0x13, 0x37, 0x42, 0x42, 0x99, 0x01, 0x02, 0x03]),
        ),
        ("unknown api key", frame(&[0x27, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0xff, 0xff])),
        (
            "unsupported version of a known api",
            frame(&[0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0xff, 0xff]),
        ),
        (
            "api we do not implement",
            frame(&[0x00, 0x0b, 0x00, 0x05, 0x00, 0x00, 0x00, 0x07, 0xff, 0xff]),
        ),
        (
            "truncated body",
            frame(&[
                0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0xff, 0xff, 0x00, 0x00, 0x00, 0x02,
                0x00,
            ]),
        ),
        ("hostile array count", frame(&HOSTILE_METADATA)),
    ];
    for (name, bytes) in cases {
        let mut w = Wire::connect(b.port);
        w.write_raw(&bytes).expect("write");
        assert!(w.is_closed(), "{name}: the connection should be closed");
        assert_healthy(&mut healthy, &b);
    }
    // A brand-new client also still gets in.
    assert_healthy(&mut Wire::connect(b.port), &b);
}

/// A Fetch asking for 2 GiB gets at most the broker's `fetch.max.bytes`
/// (Kafka's cap), not what it asks: the response's records stay within the
/// cap while the partition holds more.
#[test]
fn a_fetch_is_capped_by_fetch_max_bytes() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    const CAP: usize = 1 << 20;
    let b = TestBroker::start(&[&format!("fetch.max.bytes={CAP}")]);
    crate::broker::create_topic(b.port, "big", 1, &[]);
    let mut w = Wire::connect(b.port);
    let value = "v".repeat(256 << 10);
    for i in 0..8 {
        let records = [(format!("k{i}"), Some(value.clone()))];
        crate::broker::produce(&mut w, "big", 0, crate::broker::now_ms(), &records);
    }
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(kafka_protocol::protocol::StrBytes::from_static_str("big")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(i32::MAX)])]);
    let r = w.call(12, &request);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let got = p.records.as_ref().map_or(0, |r| r.len());
    assert!(got > 0 && got <= CAP, "{got} bytes of records for a cap of {CAP}");
    assert_eq!(p.high_watermark, 8, "the partition holds all 8 batches (2 MiB)");
    assert_healthy(&mut w, &b);
}
