#!/usr/bin/env python3
"""kafka-python (pure Python: its own protocol encoder) consumer-group
offsets against a sediment broker, in two runs around a broker restart.

Usage: groups_kafka_python.py BOOTSTRAP produce-and-commit
       groups_kafka_python.py BOOTSTRAP check COMMITTED

produce-and-commit: creates kp-groups (3 partitions) with 20 records in each,
consumes a different number of records per partition with a KafkaConsumer in
group kp-group (manual commits), commits, checks what the broker answers, and
prints the committed offsets as `committed 0:7,1:12,2:3`.

check: a new consumer in the same group (run after the broker restarted) gets
the same committed offsets (and commit metadata) back, and the first record it
reads from each partition is the one at the committed offset.

Prints one line per check and exits non-zero at the first failed one.
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from common import BOOTSTRAP, CheckFailed, check, kafka_python_admin, run

MODE = sys.argv[2]
TIMEOUT = 20
TOPIC = "kp-groups"
GROUP = "kp-group"
PARTITIONS = 3
PER_PARTITION = 20
# How many records the first consumer processes (and commits) per partition.
TARGET = {0: 7, 1: 12, 2: 3}
# Partition 2's commit also carries metadata, which must survive too.
METADATA = "kp-meta-2"


def tps():
    return [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


def new_consumer():
    return KafkaConsumer(
        bootstrap_servers=BOOTSTRAP,
        group_id=GROUP,
        client_id=f"kp-groups-{MODE}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        request_timeout_ms=TIMEOUT * 1000 + 5000,
    )


def committed(consumer):
    return {tp.partition: consumer.committed(tp, metadata=True, timeout_ms=TIMEOUT * 1000) for tp in tps()}


def admin_offsets():
    """The group's offsets from the admin client; asked together with a group
    that has none, so one OffsetFetch (v8+) carries two groups."""
    admin = kafka_python_admin(TIMEOUT)
    try:
        got = admin.list_group_offsets([GROUP, "kp-no-such-group"])
    finally:
        admin.close()
    check(sorted(got) == [GROUP, "kp-no-such-group"] and not got["kp-no-such-group"], "list_group_offsets for two groups: the unknown one has none", str(got))
    return {tp.partition: om.offset for tp, om in got[GROUP].items() if tp.topic == TOPIC}


def produce_and_commit():
    admin = kafka_python_admin(TIMEOUT)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], timeout_ms=TIMEOUT * 1000)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
    futures = [(p, i, producer.send(TOPIC, key=f"k{i}".encode(), value=f"{p}-{i}".encode(), partition=p)) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    producer.flush(TIMEOUT)
    for p, i, f in futures:
        md = f.get(TIMEOUT)
        if (md.partition, md.offset) != (p, i):
            raise CheckFailed(f"record {p}-{i} written at {md.partition}@{md.offset}")
    producer.close()
    check(True, f"produced {PER_PARTITION} records to each of {PARTITIONS} partitions")

    consumer = new_consumer()
    check(all(consumer.committed(tp, timeout_ms=TIMEOUT * 1000) is None for tp in tps()), "a new group has no committed offsets")
    consumer.subscribe([TOPIC])
    processed = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    while any(len(processed[p]) < TARGET[p] for p in TARGET):
        if time.monotonic() > deadline:
            raise CheckFailed(f"did not consume the target counts in time: {processed}")
        # One record at a time, so the position is exactly past what was processed.
        for tp, records in consumer.poll(timeout_ms=200, max_records=1).items():
            for r in records:
                if len(processed[tp.partition]) >= TARGET[tp.partition]:
                    raise CheckFailed(f"a record of paused partition {tp.partition} was returned: {r.offset}")
                processed[tp.partition].append((r.offset, r.value.decode()))
                if len(processed[tp.partition]) == TARGET[tp.partition]:
                    consumer.pause(tp)
    check(sorted(consumer.assignment()) == tps(), "the group's only member is assigned all 3 partitions", str(consumer.assignment()))
    for p, got in processed.items():
        want = [(i, f"{p}-{i}") for i in range(TARGET[p])]
        check(got == want, f"partition {p}: read offsets 0..{TARGET[p] - 1} in order from the beginning", str(got))
    positions = {tp.partition: consumer.position(tp) for tp in tps()}
    check(positions == TARGET, "positions are just past the processed records", str(positions))

    consumer.commit()
    check(True, "commit() of the consumed positions acknowledged")
    consumer.commit({TopicPartition(TOPIC, 2): OffsetAndMetadata(TARGET[2], METADATA, -1)})
    check(True, "commit with metadata for partition 2 acknowledged")
    got = committed(consumer)
    check({p: om.offset for p, om in got.items()} == TARGET, "committed() returns the committed offsets", str(got))
    check(got[2].metadata == METADATA, "committed() returns the commit's metadata", str(got[2]))
    check(admin_offsets() == TARGET, "the admin client lists the same committed offsets")
    consumer.close()
    print("committed " + ",".join(f"{p}:{o}" for p, o in sorted(TARGET.items())), flush=True)
    print("all kafka-python group produce-and-commit checks passed", flush=True)


def check_after_restart(expected):
    consumer = new_consumer()
    got = committed(consumer)
    check({p: om.offset if om else None for p, om in got.items()} == expected, "after the restart committed() returns the same offsets", str(got))
    check(got[2].metadata == METADATA, "after the restart the commit metadata is intact", str(got[2]))
    check(admin_offsets() == expected, "after the restart the admin client lists the same offsets")

    consumer.subscribe([TOPIC])
    first = {}
    deadline = time.monotonic() + 30
    while len(first) < PARTITIONS:
        if time.monotonic() > deadline:
            raise CheckFailed(f"no record from every partition in time: {first}")
        for tp, records in consumer.poll(timeout_ms=200).items():
            if records and tp.partition not in first:
                first[tp.partition] = (records[0].offset, records[0].value.decode())
    for p in range(PARTITIONS):
        want = (expected[p], f"{p}-{expected[p]}")
        check(first[p] == want, f"partition {p}: the first record the group reads is the one at committed offset {expected[p]}", str(first[p]))
    got = committed(consumer)
    check({p: om.offset for p, om in got.items()} == expected, "reading did not move the committed offsets (no auto-commit)", str(got))
    consumer.close()
    print("all kafka-python group checks passed after the restart", flush=True)


def main():
    if MODE == "produce-and-commit":
        produce_and_commit()
    elif MODE == "check":
        expected = {int(p): int(o) for p, o in (kv.split(":") for kv in sys.argv[3].split(","))}
        check_after_restart(expected)
    else:
        raise SystemExit(f"unknown mode {MODE}")


if __name__ == "__main__":
    run(main)
