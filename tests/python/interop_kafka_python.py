#!/usr/bin/env python3
"""kafka-python (pure Python: its own protocol encoder) against a sediment
broker.

Usage: interop_kafka_python.py BOOTSTRAP

Prints one line per check and exits non-zero at the first failed one. Topics
it writes with a codec are named kp-<codec>-idem / kp-<codec>-plain, one
partition each, so the caller can check on disk that every batch is really
compressed. Codecs come from the libraries installed next to kafka-python:
snappy needs python-snappy (pinned in scripts/python-env.sh); without it the script
says so and skips that codec rather than pretending.

Consumers have no group_id (no consumer groups yet): assign() and seek.
"""

import time

import kafka.codec
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import InvalidConfigurationError, InvalidRecordError, KafkaError, OffsetOutOfRangeError, TopicAlreadyExistsError

from common import BOOTSTRAP, CheckFailed, check, kafka_python_admin, run

TIMEOUT = 20
N = 20
AVAILABLE = {
    "gzip": kafka.codec.has_gzip(),
    "snappy": kafka.codec.has_snappy(),
    "lz4": kafka.codec.has_lz4(),
    "zstd": kafka.codec.has_zstd(),
}


def expect_raises(error_type, what, fn):
    try:
        result = fn()
    except error_type as e:
        check(True, what)
        return e
    except KafkaError as e:
        raise CheckFailed(f"{what}: expected {error_type.__name__}, got {type(e).__name__}: {e}")
    raise CheckFailed(f"{what}: expected {error_type.__name__}, but it succeeded with {result!r}")


admin = kafka_python_admin(TIMEOUT)


def topic_configs(topic, config_filter="all", keys=None):
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs=keys)
    return admin.describe_configs([resource], config_filter=config_filter)["topic"][topic]


def alter(topic, configs):
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    return result["topic"][topic]


def consumer(**extra):
    return KafkaConsumer(bootstrap_servers=BOOTSTRAP, enable_auto_commit=False, request_timeout_ms=TIMEOUT * 1000, **extra)


def consume_from_beginning(topic, partition=0, **extra):
    """Every record of the partition, from its log start to its end."""
    c = consumer(**extra)
    tp = TopicPartition(topic, partition)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        records = []
        deadline = time.monotonic() + TIMEOUT
        while c.position(tp) < end:
            if time.monotonic() > deadline:
                raise CheckFailed(f"consume {tp}: position {c.position(tp)} did not reach {end} within {TIMEOUT}s")
            for batch in c.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        c.close()


def produce(topic, records, partition=0, **conf):
    """Send (key, value, timestamp_ms) tuples; returns their RecordMetadata."""
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, request_timeout_ms=TIMEOUT * 1000, **conf)
    try:
        futures = [p.send(topic, key=k, value=v, partition=partition, timestamp_ms=ts) for k, v, ts in records]
        p.flush(TIMEOUT)
        return [f.get(TIMEOUT) for f in futures]
    finally:
        p.close(timeout=TIMEOUT)


def main():
    # --- CreateTopics -------------------------------------------------------
    admin.create_topics({
        "kp-compact": {"num_partitions": 1, "replication_factor": 1, "configs": {"cleanup.policy": "compact"}},
        "kp-plain": {"num_partitions": 2},
        "kp-alter": {"num_partitions": 1},
        "kp-times": {"num_partitions": 1},
    })
    check({"kp-compact", "kp-plain", "kp-alter", "kp-times"} <= set(admin.list_topics()), "created four topics", str(admin.list_topics()))
    [described] = admin.describe_topics(["kp-plain"])
    check(len(described["partitions"]) == 2 and described["error_code"] == 0, "kp-plain has 2 partitions", str(described))
    expect_raises(TopicAlreadyExistsError, "creating kp-compact again: TOPIC_ALREADY_EXISTS", lambda: admin.create_topics({"kp-compact": {"num_partitions": 1}}))
    e = expect_raises(InvalidConfigurationError, "cleanup.policy=sometimes: INVALID_CONFIG", lambda: admin.create_topics({"kp-bad": {"num_partitions": 1, "configs": {"cleanup.policy": "sometimes"}}}))
    check("cleanup.policy" in str(e), "the error names the key", str(e))
    check("kp-bad" not in admin.list_topics(), "the refused topic does not exist")

    # --- DescribeConfigs ----------------------------------------------------
    c = topic_configs("kp-compact")
    check(c["cleanup.policy"]["value"] == "compact" and c["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG", "kp-compact cleanup.policy is compact, set on the topic", str(c["cleanup.policy"]))
    check(c["retention.ms"]["value"] == "604800000" and c["retention.ms"]["config_source"] == "DEFAULT_CONFIG", "retention.ms is Kafka's default, marked as default", str(c["retention.ms"]))
    modified = topic_configs("kp-compact", config_filter="modified")
    check(set(modified) == {"cleanup.policy"}, "only cleanup.policy differs from the defaults", str(sorted(modified)))
    only = topic_configs("kp-plain", keys=["cleanup.policy", "segment.bytes"])
    check(set(only) == {"cleanup.policy", "segment.bytes"} and only["cleanup.policy"]["value"] == "delete", "describing named keys returns just those", str(only))
    broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")["broker"]["1"]
    check(broker["num.partitions"]["value"] == "1" and broker["num.partitions"]["read_only"], "broker 1 describes num.partitions=1 (read-only)", str(broker.get("num.partitions")))

    # --- IncrementalAlterConfigs --------------------------------------------
    check(alter("kp-alter", {"retention.ms": ("SET", "3600000"), "cleanup.policy": ("APPEND", "compact")}) == "OK", "SET retention.ms, APPEND compact to cleanup.policy")
    c = topic_configs("kp-alter")
    check(c["retention.ms"]["value"] == "3600000" and c["cleanup.policy"]["value"] == "delete,compact", "described after the change", f"{c['retention.ms']} {c['cleanup.policy']}")
    check(alter("kp-alter", {"cleanup.policy": ("SUBTRACT", "delete")}) == "OK", "SUBTRACT delete from cleanup.policy")
    check(topic_configs("kp-alter")["cleanup.policy"]["value"] == "compact", "cleanup.policy is compact")
    check(alter("kp-alter", {"retention.ms": ("DELETE", None), "cleanup.policy": ("DELETE", None)}) == "OK", "DELETE both overrides")
    c = topic_configs("kp-alter")
    check(c["retention.ms"]["config_source"] == "DEFAULT_CONFIG" and c["cleanup.policy"]["value"] == "delete", "both back to their defaults", f"{c['retention.ms']} {c['cleanup.policy']}")
    result = alter("kp-alter", {"retention.ms": ("SET", "soon")})
    check("INVALID_CONFIG" in result or "InvalidConfiguration" in result, "SET retention.ms=soon: INVALID_CONFIG", result)

    # --- Produce with each codec, idempotent (kafka-python's default) and not
    value = lambda codec, i: f"{codec}-{i}-".encode() + b"sediment " * 30  # noqa: E731
    for codec, available in AVAILABLE.items():
        if not available:
            print(f"skip {codec}: kafka-python finds no library for it in this environment", flush=True)
            continue
        for idem in (True, False):
            topic = f"kp-{codec}-{'idem' if idem else 'plain'}"
            admin.create_topics({topic: {"num_partitions": 1}})
            conf = {"compression_type": codec, "enable_idempotence": idem, "linger_ms": 20, "acks": "all" if idem else 1}
            metas = produce(topic, [(f"key{i}".encode(), value(codec, i), None) for i in range(N)], **conf)
            check([m.offset for m in metas] == list(range(N)), f"{topic}: offsets 0..{N - 1}", str([m.offset for m in metas]))
            got = consume_from_beginning(topic)
            check([(r.offset, r.key, r.value) for r in got] == [(i, f"key{i}".encode(), value(codec, i)) for i in range(N)], f"{topic}: read back exactly from the beginning", str([(r.offset, r.key) for r in got]))

    # --- Compacted topic ----------------------------------------------------
    metas = produce("kp-compact", [(b"user-1", b"alice", None), (b"user-1", None, None)])
    check([m.offset for m in metas] == [0, 1], "a keyed record and its tombstone")
    got = consume_from_beginning("kp-compact")
    check([(r.offset, r.key, r.value) for r in got] == [(0, b"user-1", b"alice"), (1, b"user-1", None)], "the tombstone reads back with value None", str([(r.offset, r.key, r.value) for r in got]))
    for idem in (False, True):
        expect_raises(InvalidRecordError, f"a key-less record to a compacted topic: INVALID_RECORD (idempotence={idem})", lambda: produce("kp-compact", [(None, b"no key", None)], enable_idempotence=idem))
    metas = produce("kp-plain", [(None, b"no key is fine here", None)], partition=1)
    check(metas[0].offset == 0, "a key-less record to a delete topic is accepted")

    # --- Offsets: beginning/end, for times, DeleteRecords -------------------
    tp = TopicPartition("kp-times", 0)
    base = int(time.time() * 1000) - 100_000
    metas = produce("kp-times", [(f"t{i}".encode(), b"v", base + i * 1000) for i in range(5)])
    check([m.offset for m in metas] == [0, 1, 2, 3, 4], "five records with timestamps a second apart")
    c = consumer()
    try:
        check(c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 5}, "beginning_offsets 0, end_offsets 5", f"{c.beginning_offsets([tp])} {c.end_offsets([tp])}")
        for ts, want in ((base - 1, 0), (base + 1000, 1), (base + 1500, 2)):
            found = c.offsets_for_times({tp: ts}, timeout_ms=TIMEOUT * 1000)[tp]
            check(found is not None and (found.offset, found.timestamp) == (want, base + want * 1000), f"offsets_for_times({ts - base:+d} ms) is offset {want}", str(found))
        check(c.offsets_for_times({tp: base + 10_000})[tp] is None, "offsets_for_times after the last record: None")

        deleted = admin.delete_records({tp: 2}, timeout_ms=TIMEOUT * 1000)
        check(deleted[tp]["low_watermark"] == 2 and deleted[tp]["error_code"] == 0, "delete_records before offset 2: low watermark 2", str(deleted))
        check(c.beginning_offsets([tp]) == {tp: 2}, "beginning_offsets is now 2", str(c.beginning_offsets([tp])))
    finally:
        c.close()
    got = consume_from_beginning("kp-times")
    check([(r.offset, r.key) for r in got] == [(2, b"t2"), (3, b"t3"), (4, b"t4")], "consume from the beginning starts at the new low watermark", str([(r.offset, r.key) for r in got]))

    strict = consumer(auto_offset_reset="none")
    try:
        strict.assign([tp])
        strict.seek(tp, 0)
        deadline = time.monotonic() + TIMEOUT

        def poll_below_start():
            while time.monotonic() < deadline:
                if strict.poll(timeout_ms=500):
                    return "records below the log start"
            return "nothing"
        expect_raises(OffsetOutOfRangeError, "fetching offset 0 below the log start: OFFSET_OUT_OF_RANGE", poll_below_start)
    finally:
        strict.close()

    # --- DeleteTopics -------------------------------------------------------
    admin.delete_topics(["kp-alter"])
    check("kp-alter" not in admin.list_topics(), "deleted kp-alter")
    admin.close()
    print("all kafka-python checks passed", flush=True)


if __name__ == "__main__":
    run(main)
