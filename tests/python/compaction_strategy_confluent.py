"""Debezium-style use of `sediment.compaction.strategy=header` with
confluent-kafka (librdkafka): two producers write versions of the same rows
out of order, each version in a `version` header (one producer as decimal
text, the other as an 8-byte big-endian integer), and compaction must keep
each row's highest version, not its last write.

    compaction_strategy_confluent.py BOOTSTRAP TOPIC MODE

MODE:
  create   create the compacted topic, then switch its strategy to
           header/version with IncrementalAlterConfigs, and read it back
           with DescribeConfigs
  round1   write versions 1..6 of every row, shuffled between the producers;
           some rows end with a winning tombstone (version 7), some with a
           losing one (version 0) written last; then filler rows, printing
           `filler_start=N`, the offset of the first filler record
  round2   write stale versions (below each row's winner) of every row, as
           a replaying connector would, then filler rows; prints
           `filler_start=N`, the offset of the first filler record
  verify   read the partition from offset 0 and check that each row shows
           its highest version exactly once, deleted rows are gone, and the
           version headers came through
"""

import random
import struct
import sys

import common
from common import BOOTSTRAP, check

TOPIC = sys.argv[2]
MODE = sys.argv[3]
ROWS = 60
HEADER = "version"


def winner(row):
    """The highest version of `row` (7: a tombstone wins)."""
    return 7 if row % 10 == 0 else 6


def value(row, version, producer):
    return f"row-{row}:v{version}:{producer}".encode()


def producers():
    from confluent_kafka import Producer

    # One record a batch (linger 0, a flush each), so segments roll often
    # and a row's copies spread over many of them.
    conf = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 0, "enable.idempotence": True}
    return {"decimal": Producer(conf), "binary": Producer(conf)}


def header_value(producer, version):
    if producer == "decimal":
        return str(version).encode()
    return struct.pack(">q", version)


def write(ps, schedule):
    """Write (producer, row, version, tombstone) in order, one at a time."""
    offsets = []

    def delivered(err, msg):
        check(err is None, "a write was acknowledged", str(err))
        offsets.append(msg.offset())

    for producer, row, version, tombstone in schedule:
        p = ps[producer]
        payload = None if tombstone else value(row, version, producer)
        headers = [(HEADER, header_value(producer, version))]
        p.produce(TOPIC, key=f"row-{row}".encode(), value=payload, headers=headers,
                  partition=0, on_delivery=delivered)
        p.flush(10)
    return offsets


def create():
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewTopic)

    admin = common.confluent_admin()
    config = {"cleanup.policy": "compact", "segment.bytes": "4096",
              "min.cleanable.dirty.ratio": "0.01"}
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)]).values():
        f.result(30)
    check(True, "topic created with the offset strategy (the default)")
    resource = ConfigResource("TOPIC", TOPIC, incremental_configs=[
        ConfigEntry("sediment.compaction.strategy", "header",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("sediment.compaction.strategy.header", HEADER,
                    incremental_operation=AlterConfigOpType.SET),
    ])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    described = admin.describe_configs([ConfigResource("TOPIC", TOPIC)])
    entries = list(described.values())[0].result(30)
    strategy = entries["sediment.compaction.strategy"]
    check(strategy.value == "header" and not strategy.is_default,
          "DescribeConfigs shows the strategy as set", str(strategy))
    check(entries["sediment.compaction.strategy.header"].value == HEADER,
          "DescribeConfigs shows the header name")
    # A header strategy without a header name is refused.
    bad = ConfigResource("TOPIC", TOPIC, incremental_configs=[
        ConfigEntry("sediment.compaction.strategy.header", "",
                    incremental_operation=AlterConfigOpType.DELETE),
    ])
    try:
        for f in admin.incremental_alter_configs([bad]).values():
            f.result(30)
        check(False, "removing the header name is refused", "it was accepted")
    except Exception as e:  # noqa: BLE001 - the client raises KafkaException
        check("header name is required" in str(e), "removing the header name is refused",
              str(e))


def round1():
    rng = random.Random(7)
    schedule = []
    for row in range(ROWS):
        versions = list(range(1, 7))
        rng.shuffle(versions)
        for v in versions:
            schedule.append((rng.choice(["decimal", "binary"]), row, v, False))
        if row % 10 == 0:
            # The winning tombstone, shuffled among the row's other writes.
            schedule.append(("binary", row, 7, True))
        if row % 10 == 1:
            schedule.append(("decimal", row, 0, True))
    rng.shuffle(schedule)
    # Losing tombstones last: they must not delete their row.
    schedule.sort(key=lambda s: s[3] and s[2] == 0)
    ps = producers()
    write(ps, schedule)
    check(True, f"round 1: {len(schedule)} out-of-order versions written")
    filler(ps, 1000)


def round2():
    ps = producers()
    rng = random.Random(11)
    schedule = [(rng.choice(["decimal", "binary"]), row, rng.randint(1, 5), False)
                for row in range(ROWS)]
    write(ps, schedule)
    check(True, f"round 2: {len(schedule)} stale versions replayed")
    filler(ps, 2000)


def filler(ps, base):
    """Rows no check reads, enough to fill the active segment, so that a
    clean reaching `filler_start` has covered every row written before."""
    offsets = write(ps, [("decimal", base + i, 1, False) for i in range(40)])
    print(f"filler_start={min(offsets)}", flush=True)


def verify():
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"verify-{TOPIC}",
                  "enable.auto.commit": False})
    _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    c.assign([TopicPartition(TOPIC, 0, 0)])
    view, copies, versions = {}, {}, {}
    last = -1
    while last < high - 1:
        msg = c.poll(10)
        check(msg is not None, "the partition is read to its end", f"stopped after {last}")
        check(msg.error() is None, "no read error", str(msg.error()))
        last = msg.offset()
        key = msg.key().decode()
        if not key.startswith("row-") or int(key[4:]) >= 1000:
            continue
        copies[key] = copies.get(key, 0) + 1
        versions[key] = dict(msg.headers() or []).get(HEADER)
        if msg.value() is None:
            view.pop(key, None)
        else:
            view[key] = msg.value().decode()
    c.close()
    for row in range(ROWS):
        key = f"row-{row}"
        if row % 10 == 0:
            check(key not in view, f"{key}: the winning tombstone (version 7) deleted it",
                  view.get(key, ""))
            continue
        got = view.get(key, "")
        check(got.startswith(f"{key}:v{winner(row)}:"),
              f"{key}: the highest version stays", got)
        check(copies[key] == 1, f"{key}: one copy from offset 0", f"{copies[key]} copies")
        raw = versions[key]
        check(raw in (b"6", struct.pack(">q", 6)), f"{key}: its version header came through",
              repr(raw))
    print("compaction strategy checks passed", flush=True)


common.run({"create": create, "round1": round1, "round2": round2, "verify": verify}[MODE])
