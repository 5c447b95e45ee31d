"""Reads a partition whose oldest segments exist only in the tiered storage
store from offset 0 with confluent-kafka (tests/remote_fetch.rs).

    remote_fetch_confluent.py BOOTSTRAP TOPIC COUNT all
        every offset 0..COUNT, each record's value as written
    remote_fetch_confluent.py BOOTSTRAP TOPIC STOP corrupt
        for a few seconds: offsets 0..STOP in order, correct values, and
        nothing at or after STOP (the segment there fails its check)
"""

import sys
import time

import common
from confluent_kafka import Consumer, TopicPartition


def value(i):
    return f"value-{i:05}-" + "y" * 1000


def main():
    topic, count, mode = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    c = Consumer({"bootstrap.servers": common.BOOTSTRAP, "group.id": "remote-fetch",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + (60 if mode == "all" else 8)
    while time.time() < deadline and (mode != "all" or len(got) < count):
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append((m.offset(), m.value().decode()))
    c.close()
    limit = count
    offsets = [o for o, _ in got]
    common.check(offsets == list(range(len(got))), "offsets in order from 0",
                 f"{offsets[:5]}..{offsets[-5:]}")
    common.check(all(v == value(o) for o, v in got), "every value as written")
    if mode == "all":
        common.check(len(got) == limit, f"{limit} records", f"got {len(got)}")
    else:
        common.check(len(got) == limit, f"exactly the {limit} records before the corrupt segment",
                     f"got {len(got)}")
    print("done", flush=True)


common.run(main)
