#!/usr/bin/env python3
"""confluent-kafka against a cluster of sediment brokers.

Usage: cluster_confluent.py BOOTSTRAP OTHER TOPIC COUNT

An idempotent producer with acks=all writes COUNT keyed records
(cc-key-<i>: cc-<i>) to TOPIC through BOOTSTRAP, one broker; every delivery
must succeed. A consumer in a group, bootstrapped through OTHER, another
broker, then reads TOPIC from the beginning and must see every one of them
exactly once, in order within each partition, and commit its position.
"""

import sys
import time

from confluent_kafka import Consumer, Producer

import common

OTHER, TOPIC, COUNT = sys.argv[2], sys.argv[3], int(sys.argv[4])
TIMEOUT = 60


def produce():
    p = Producer({"bootstrap.servers": common.BOOTSTRAP, "acks": "all", "enable.idempotence": True})
    failures = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(str(err))

    for i in range(COUNT):
        p.produce(TOPIC, key=f"cc-key-{i}", value=f"cc-{i}", on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(TIMEOUT)
    common.check(left == 0 and not failures, f"{COUNT} records acknowledged at acks=all",
                 f"{left} undelivered, errors {failures[:3]}")


def consume():
    c = Consumer({
        "bootstrap.servers": OTHER,
        "group.id": f"{TOPIC}-readers",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.subscribe([TOPIC])
    seen = {}
    deadline = time.time() + TIMEOUT
    while sum(len(v) for v in seen.values()) < COUNT and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error() or not m.value().startswith(b"cc-"):
            continue
        seen.setdefault(m.partition(), []).append(int(m.value()[3:]))
    got = sorted(i for v in seen.values() for i in v)
    common.check(got == list(range(COUNT)), "every record consumed exactly once through another broker",
                 f"{len(got)} of {COUNT}")
    common.check(all(v == sorted(v) for v in seen.values()), "in order within each partition")
    c.commit(asynchronous=False)
    committed = c.committed(c.assignment(), timeout=10)
    common.check(all(tp.offset > 0 for tp in committed), "the group's offsets committed",
                 str(committed))
    c.close()


def main():
    produce()
    consume()
    print("all cluster confluent-kafka checks passed", flush=True)


common.run(main)
