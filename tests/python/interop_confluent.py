#!/usr/bin/env python3
"""confluent-kafka (librdkafka 2.16, the newest flexible request versions)
against a sediment broker.

Usage: interop_confluent.py BOOTSTRAP

Prints one line per check and exits non-zero at the first failed one. Topics
it writes with a codec are named cc-<codec>-idem / cc-<codec>-plain, one
partition each, so the caller can check on disk that every batch is really
compressed and carries a producer id exactly when idempotence was on.

No consumer groups exist yet: consumers use assign() with explicit offsets and
enable.auto.commit=False. confluent-kafka refuses to build a Consumer without
group.id ("group.id must be set"), so one is given; the broker answers the
client's FindCoordinator with COORDINATOR_NOT_AVAILABLE and assign-only
consumption does not need a coordinator.
"""

import time
import warnings

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from common import BOOTSTRAP, CheckFailed, check, confluent_admin, run

TIMEOUT = 20.0
CODECS = ["gzip", "snappy", "lz4", "zstd"]
N = 20


def expect_error(future, code_name, what):
    """The future must fail with the Kafka error named `code_name`."""
    try:
        result = future.result(TIMEOUT)
    except KafkaException as e:
        err = e.args[0]
        check(err.name() == code_name, what, f"expected {code_name}, got {err.name()}: {err.str()}")
        return err
    raise CheckFailed(f"{what}: expected {code_name}, but it succeeded with {result!r}")


admin = confluent_admin()


def describe(topic):
    [(_, future)] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).items()
    return future.result(TIMEOUT)


def alter(topic, *ops):
    entries = [ConfigEntry(name, value, incremental_operation=op) for (op, name, value) in ops]
    [(_, future)] = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]).items()
    return future


def create(topics, **kwargs):
    return admin.create_topics(topics, operation_timeout=TIMEOUT, request_timeout=TIMEOUT, **kwargs)


def topic_names():
    return set(admin.list_topics(timeout=TIMEOUT).topics)


def consume(topic, partition, offset, extra=None):
    """Every record from `offset` to the end of the partition, via assign()."""
    conf = {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": "sediment-interop",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    }
    conf.update(extra or {})
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, partition, offset)])
    records = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while True:
            if time.monotonic() > deadline:
                raise CheckFailed(f"consume {topic}[{partition}] from {offset}: no end of partition within {TIMEOUT}s; got {len(records)} records")
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return records
                raise KafkaException(m.error())
            records.append(m)
    finally:
        consumer.close()


def produce(topic, records, conf, partition=0):
    """Produce (key, value, timestamp) tuples; returns the delivery reports in order."""
    producer = Producer({"bootstrap.servers": BOOTSTRAP, **conf})
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg))

    for key, value, ts in records:
        kwargs = {"timestamp": ts} if ts is not None else {}
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery, **kwargs)
    left = producer.flush(TIMEOUT)
    check(left == 0, f"{topic}: all deliveries reported", f"{left} still queued")
    return reports


def main():
    # --- CreateTopics -------------------------------------------------------
    futures = create([
        NewTopic("cc-compact", num_partitions=2, replication_factor=1, config={"cleanup.policy": "compact"}),
        NewTopic("cc-plain", num_partitions=1),
        NewTopic("cc-alter", num_partitions=1, replication_factor=1),
        NewTopic("cc-times", num_partitions=1, replication_factor=1),
    ])
    for name, f in futures.items():
        check(f.result(TIMEOUT) is None, f"create topic {name}")
    meta = admin.list_topics(timeout=TIMEOUT)
    check(len(meta.topics["cc-compact"].partitions) == 2, "cc-compact has 2 partitions", str(meta.topics["cc-compact"].partitions))
    check(len(meta.topics["cc-plain"].partitions) == 1, "cc-plain has 1 partition (count given)")

    expect_error(create([NewTopic("cc-compact", num_partitions=1)])["cc-compact"], "TOPIC_ALREADY_EXISTS", "creating cc-compact again")
    err = expect_error(create([NewTopic("cc-bad", num_partitions=1, config={"cleanup.policy": "sometimes"})])["cc-bad"], "INVALID_CONFIG", "cleanup.policy=sometimes refused")
    check("cleanup.policy" in err.str(), "the INVALID_CONFIG message names the key", err.str())
    expect_error(create([NewTopic("cc-bad", num_partitions=1, config={"retention.ms": "soon"})])["cc-bad"], "INVALID_CONFIG", "retention.ms=soon refused")
    expect_error(create([NewTopic("cc-bad", num_partitions=1, config={"no.such.config": "1"})])["cc-bad"], "INVALID_CONFIG", "an unknown topic config refused")
    check("cc-bad" not in topic_names(), "a refused topic was not created")

    f = create([NewTopic("cc-validate", num_partitions=3)], validate_only=True)["cc-validate"]
    check(f.result(TIMEOUT) is None, "validate_only create succeeds")
    check("cc-validate" not in topic_names(), "validate_only did not create the topic")

    # --- DescribeConfigs ----------------------------------------------------
    compact = describe("cc-compact")
    policy = compact["cleanup.policy"]
    check(policy.value == "compact", "cc-compact cleanup.policy is compact", repr(policy.value))
    check(policy.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not policy.is_default, "cc-compact cleanup.policy comes from the topic", f"source={policy.source} default={policy.is_default}")
    retention = compact["retention.ms"]
    check(retention.value == "604800000" and retention.is_default and retention.source == ConfigSource.DEFAULT_CONFIG.value, "retention.ms shows Kafka's default as default", f"{retention.value} source={retention.source} default={retention.is_default}")
    plain = describe("cc-plain")["cleanup.policy"]
    check(plain.value == "delete" and plain.is_default and plain.source == ConfigSource.DEFAULT_CONFIG.value, "cc-plain cleanup.policy is the default delete", f"{plain.value} source={plain.source} default={plain.is_default}")

    # --- IncrementalAlterConfigs: SET / APPEND / SUBTRACT / DELETE ----------
    check(alter("cc-alter", (AlterConfigOpType.SET, "retention.ms", "3600000"), (AlterConfigOpType.APPEND, "cleanup.policy", "compact")).result(TIMEOUT) is None, "SET retention.ms and APPEND compact to cleanup.policy")
    c = describe("cc-alter")
    check(c["retention.ms"].value == "3600000" and c["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, "retention.ms is 3600000 from the topic", f"{c['retention.ms'].value} source={c['retention.ms'].source}")
    check(c["cleanup.policy"].value == "delete,compact", "APPEND made cleanup.policy delete,compact", c["cleanup.policy"].value)
    check(alter("cc-alter", (AlterConfigOpType.SUBTRACT, "cleanup.policy", "delete")).result(TIMEOUT) is None, "SUBTRACT delete from cleanup.policy")
    check(describe("cc-alter")["cleanup.policy"].value == "compact", "cleanup.policy is compact after SUBTRACT")
    check(alter("cc-alter", (AlterConfigOpType.DELETE, "retention.ms", None), (AlterConfigOpType.DELETE, "cleanup.policy", None)).result(TIMEOUT) is None, "DELETE retention.ms and cleanup.policy")
    c = describe("cc-alter")
    check(c["retention.ms"].value == "604800000" and c["retention.ms"].is_default, "retention.ms back to its default", f"{c['retention.ms'].value} default={c['retention.ms'].is_default}")
    check(c["cleanup.policy"].value == "delete" and c["cleanup.policy"].is_default, "cleanup.policy back to its default", f"{c['cleanup.policy'].value} default={c['cleanup.policy'].is_default}")

    err = expect_error(alter("cc-alter", (AlterConfigOpType.SET, "cleanup.policy", "sometimes")), "INVALID_CONFIG", "SET cleanup.policy=sometimes refused")
    check("cleanup.policy" in err.str(), "the message names cleanup.policy", err.str())
    expect_error(alter("cc-alter", (AlterConfigOpType.SET, "retention.ms", "soon")), "INVALID_CONFIG", "SET retention.ms=soon refused")
    expect_error(alter("cc-alter", (AlterConfigOpType.APPEND, "retention.ms", "1")), "INVALID_CONFIG", "APPEND to a non-list key refused (Kafka 4's KRaft code)")
    # A refused change applies nothing, not even its valid parts.
    expect_error(alter("cc-alter", (AlterConfigOpType.SET, "retention.ms", "1000"), (AlterConfigOpType.SET, "cleanup.policy", "sometimes")), "INVALID_CONFIG", "a change with one bad value refused")
    check(describe("cc-alter")["retention.ms"].value == "604800000", "nothing of the refused change was applied")

    # Legacy AlterConfigs replaces the whole set of overrides.
    check(alter("cc-alter", (AlterConfigOpType.SET, "cleanup.policy", "compact")).result(TIMEOUT) is None, "SET cleanup.policy=compact")
    with warnings.catch_warnings():
        # Deprecated in the client, still sent by older tools: tested on purpose.
        warnings.simplefilter("ignore", DeprecationWarning)
        [(_, f)] = admin.alter_configs([ConfigResource(ResourceType.TOPIC, "cc-alter", set_config={"retention.ms": "7200000"})]).items()
    check(f.result(TIMEOUT) is None, "legacy AlterConfigs retention.ms=7200000")
    c = describe("cc-alter")
    check(c["retention.ms"].value == "7200000" and c["cleanup.policy"].value == "delete", "legacy AlterConfigs set retention.ms and dropped the cleanup.policy override", f"{c['retention.ms'].value} {c['cleanup.policy'].value}")

    # --- Produce with every codec, idempotent and not; read back ------------
    value = lambda codec, i: f"{codec}-{i}-".encode() + b"sediment " * 30  # noqa: E731
    for codec in CODECS:
        for idem in (True, False):
            topic = f"cc-{codec}-{'idem' if idem else 'plain'}"
            f = create([NewTopic(topic, num_partitions=1)])[topic]
            check(f.result(TIMEOUT) is None, f"create {topic}")
            conf = {"compression.type": codec, "enable.idempotence": idem, "linger.ms": 20}
            if not idem:
                conf["acks"] = 1
            reports = produce(topic, [(f"key{i}".encode(), value(codec, i), None) for i in range(N)], conf)
            errors = [(str(e), m.key()) for e, m in reports if e is not None]
            check(not errors, f"{topic}: every record acknowledged", str(errors))
            check([m.offset() for _, m in reports] == list(range(N)), f"{topic}: offsets 0..{N - 1} in order", str([m.offset() for _, m in reports]))
            got = consume(topic, 0, OFFSET_BEGINNING)
            check([(m.offset(), m.key(), m.value()) for m in got] == [(i, f"key{i}".encode(), value(codec, i)) for i in range(N)], f"{topic}: consumed from the beginning, exact records", str([(m.offset(), m.key()) for m in got]))

    # --- Compacted topic: tombstones, key-less records refused --------------
    reports = produce("cc-compact", [(b"user-1", b"alice", None), (b"user-2", b"bob", None), (b"user-1", None, None)], {"enable.idempotence": True}, partition=1)
    check([(e, m.offset()) for e, m in reports] == [(None, 0), (None, 1), (None, 2)], "keyed records and a tombstone to cc-compact[1]", str([(str(e), m.offset()) for e, m in reports]))
    got = consume("cc-compact", 1, 0)
    check([(m.offset(), m.key(), m.value()) for m in got] == [(0, b"user-1", b"alice"), (1, b"user-2", b"bob"), (2, b"user-1", None)], "the tombstone reads back with a NULL value", str([(m.offset(), m.key(), m.value()) for m in got]))

    for idem in (False, True):
        reports = produce("cc-compact", [(None, b"no key", None)], {"enable.idempotence": idem}, partition=1)
        [(e, m)] = reports
        check(e is not None and e.name() == "INVALID_RECORD", f"a key-less record to a compacted topic is refused with INVALID_RECORD (idempotence={idem})", f"{e.name() if e else None}: {e.str() if e else ''}")
    reports = produce("cc-plain", [(None, b"no key is fine here", None)], {})
    check(reports[0][0] is None and reports[0][1].offset() == 0, "a key-less record to a delete topic is accepted", str(reports[0][0]))
    # The refused records left no trace; the idempotent producer is not fenced by them.
    reports = produce("cc-compact", [(b"user-3", b"carol", None)], {"enable.idempotence": True}, partition=1)
    check(reports[0][0] is None and reports[0][1].offset() == 3, "the next keyed record gets offset 3", f"{reports[0][0]} {reports[0][1].offset()}")

    # --- Offsets for times, watermarks, ListOffsets -------------------------
    base = int(time.time() * 1000) - 100_000
    reports = produce("cc-times", [(f"t{i}".encode(), b"v", base + i * 1000) for i in range(5)], {})
    check([m.offset() for _, m in reports] == [0, 1, 2, 3, 4] and all(e is None for e, _ in reports), "five records with timestamps a second apart")
    probe = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "sediment-interop", "enable.auto.commit": False})
    try:
        # One lookup per call: a list naming the same partition twice gets one answer for all.
        found = [probe.offsets_for_times([TopicPartition("cc-times", 0, ts)], timeout=TIMEOUT)[0] for ts in (base - 1, base + 1000, base + 1500)]
        check([tp.offset for tp in found] == [0, 1, 2], "offsets_for_times: before, exactly at, between timestamps", str([(tp.offset, tp.error) for tp in found]))
        [after] = probe.offsets_for_times([TopicPartition("cc-times", 0, base + 10_000)], timeout=TIMEOUT)
        check(after.offset == OFFSET_END, "offsets_for_times after the last record gives the end marker (-1)", str(after.offset))
        check(probe.get_watermark_offsets(TopicPartition("cc-times", 0), timeout=TIMEOUT) == (0, 5), "watermarks (0, 5)")

        tp = TopicPartition("cc-times", 0)
        specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(), "max_timestamp": OffsetSpec.max_timestamp(), "for_timestamp": OffsetSpec.for_timestamp(base + 2000)}
        listed = {name: admin.list_offsets({tp: spec}, request_timeout=TIMEOUT)[tp].result(TIMEOUT) for name, spec in specs.items()}
        check(listed["earliest"].offset == 0 and listed["latest"].offset == 5, "AdminClient.list_offsets earliest 0, latest 5", str({k: v.offset for k, v in listed.items()}))
        check(listed["max_timestamp"].offset == 4 and listed["max_timestamp"].timestamp == base + 4000, "list_offsets max_timestamp is the last record", f"{listed['max_timestamp'].offset} {listed['max_timestamp'].timestamp}")
        check(listed["for_timestamp"].offset == 2 and listed["for_timestamp"].timestamp == base + 2000, "list_offsets for_timestamp", f"{listed['for_timestamp'].offset} {listed['for_timestamp'].timestamp}")

        # --- DeleteRecords --------------------------------------------------
        [(_, f)] = admin.delete_records([TopicPartition("cc-times", 0, 2)], request_timeout=TIMEOUT).items()
        check(f.result(TIMEOUT).low_watermark == 2, "delete_records before offset 2: low watermark 2")
        check(probe.get_watermark_offsets(tp, timeout=TIMEOUT) == (2, 5), "watermarks (2, 5) after delete_records", str(probe.get_watermark_offsets(tp, timeout=TIMEOUT)))
        earliest = admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=TIMEOUT)[tp].result(TIMEOUT)
        check(earliest.offset == 2, "list_offsets earliest is 2", str(earliest.offset))
    finally:
        probe.close()
    got = consume("cc-times", 0, OFFSET_BEGINNING)
    check([(m.offset(), m.key()) for m in got] == [(2, b"t2"), (3, b"t3"), (4, b"t4")], "consume from the beginning starts at the new low watermark", str([(m.offset(), m.key()) for m in got]))
    try:
        got = consume("cc-times", 0, 0, {"auto.offset.reset": "error"})
        raise CheckFailed(f"a fetch below the low watermark must fail; got {[m.offset() for m in got]}")
    except KafkaException as e:
        err = e.args[0]
        check(err.code() == KafkaError._AUTO_OFFSET_RESET and "Offset out of range" in err.str(), "a fetch below the low watermark gets OFFSET_OUT_OF_RANGE", f"{err.name()}: {err.str()}")
    got = consume("cc-times", 0, 0, {"auto.offset.reset": "earliest"})
    check([m.offset() for m in got] == [2, 3, 4], "with auto.offset.reset=earliest it resumes at the low watermark", str([m.offset() for m in got]))
    [(_, f)] = admin.delete_records([TopicPartition("cc-times", 0, OFFSET_END)], request_timeout=TIMEOUT).items()
    check(f.result(TIMEOUT).low_watermark == 5, "delete_records to the end: low watermark 5")
    check(consume("cc-times", 0, OFFSET_BEGINNING) == [], "nothing left to consume")
    [(_, f)] = admin.delete_records([TopicPartition("cc-times", 0, 99)], request_timeout=TIMEOUT).items()
    expect_error(f, "OFFSET_OUT_OF_RANGE", "delete_records beyond the high watermark refused")

    # --- DeleteTopics -------------------------------------------------------
    check(admin.delete_topics(["cc-plain"], operation_timeout=TIMEOUT)["cc-plain"].result(TIMEOUT) is None, "delete topic cc-plain")
    check("cc-plain" not in topic_names(), "cc-plain is gone")
    print("all confluent-kafka checks passed", flush=True)


if __name__ == "__main__":
    run(main)
