#!/usr/bin/env python3
"""confluent-kafka (librdkafka 2.16): a consume-transform-produce loop whose
consumers use the consumer group protocol (KIP-848, group.protocol=consumer,
the uniform assignor) and commit their offsets inside their producers'
transactions (send_offsets_to_transaction with the consumer's group
metadata), against a sediment broker.

Usage: eos_consumer_protocol_confluent.py BOOTSTRAP

Two members copy a 6-partition topic; a third joins while they work and the
first then leaves. An abortable failure (a stale member epoch after a
rebalance) aborts the transaction and rewinds the member to its committed
offsets. Checked: the group's committed offsets reach the input's end and a
read_committed reader of the output finds every input value exactly once.

Everything waits for a condition with a deadline; nothing sleeps for a guess.
"""

import time
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from common import BOOTSTRAP, CheckFailed, check, confluent_admin, run

TIMEOUT = 60.0
IN, OUT, GROUP = "eos848-in", "eos848-out", "eos848-py"
N = 1200
PARTITIONS = 6


class Member:
    def __init__(self, name):
        self.name = name
        self.copied = 0
        self.aborts = 0
        self.c = Consumer({
            "bootstrap.servers": BOOTSTRAP,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "group.remote.assignor": "uniform",
            "client.id": name,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        })
        self.p = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": f"{GROUP}-{name}"})
        self.p.init_transactions(TIMEOUT)
        self.c.subscribe([IN])

    def step(self):
        """One poll; the records it returned copied in one transaction."""
        msgs = [m for m in self.c.consume(num_messages=100, timeout=0.05) if not m.error()]
        if not msgs:
            return
        positions = {}
        self.p.begin_transaction()
        for m in msgs:
            self.p.produce(OUT, key=m.key(), value=m.value())
            positions[(m.topic(), m.partition())] = m.offset() + 1
        offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
        try:
            self.p.send_offsets_to_transaction(offsets, self.c.consumer_group_metadata(), TIMEOUT)
            self.p.commit_transaction(TIMEOUT)
            self.copied += len(msgs)
        except KafkaException as e:
            if not e.args[0].txn_requires_abort():
                raise CheckFailed(f"{self.name}: transaction failed: {e}")
            self.aborts += 1
            self.p.abort_transaction(TIMEOUT)
            self.rewind()

    def rewind(self):
        assigned = self.c.assignment()
        for tp in self.c.committed(assigned, timeout=TIMEOUT):
            self.c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    def close(self):
        self.c.close()


def committed_total(admin_consumer):
    tps = [TopicPartition(IN, i) for i in range(PARTITIONS)]
    return sum(max(tp.offset, 0) for tp in admin_consumer.committed(tps, timeout=TIMEOUT))


def pump(members, until, what):
    deadline = time.monotonic() + 3 * TIMEOUT
    while time.monotonic() < deadline:
        for m in members:
            m.step()
        if until():
            return
    state = [(m.name, m.copied, m.aborts) for m in members]
    raise CheckFailed(f"{what}: not reached within {3 * TIMEOUT}s; (member, copied, aborts) {state}")


def read_committed_values():
    r = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": "eos848-reader",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    })
    r.assign([TopicPartition(OUT, i, 0) for i in range(PARTITIONS)])
    values, at_end = [], set()
    deadline = time.monotonic() + TIMEOUT
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        m = r.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
                continue
            raise CheckFailed(f"reader: {m.error()}")
        values.append(m.value().decode())
    r.close()
    check(len(at_end) == PARTITIONS, "the reader reached the end of every output partition", str(sorted(at_end)))
    return values


def main():
    admin = confluent_admin()
    topics = [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in (IN, OUT)]
    for _, f in admin.create_topics(topics, operation_timeout=TIMEOUT).items():
        f.result(TIMEOUT)
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(N):
        p.produce(IN, key=f"k{i}", value=f"v{i}")
    check(p.flush(TIMEOUT) == 0, f"produced {N} keyed records")

    watcher = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "enable.auto.commit": False})
    m1, m2 = Member("eos-1"), Member("eos-2")
    pump([m1, m2], lambda: m1.copied > 0 and m2.copied > 0, "both members copying")
    check(True, "two members copy in transactions", f"{m1.copied} + {m2.copied}")
    m3 = Member("eos-3")
    pump([m1, m2, m3], lambda: m3.copied > 0 or committed_total(watcher) == N, "a third member copying")
    m1.close()
    pump([m2, m3], lambda: committed_total(watcher) == N, "the group's offsets at the input's end")
    check(True, "the group's committed offsets reach the input's end", f"aborts: {m1.aborts + m2.aborts + m3.aborts}")

    counts = Counter(read_committed_values())
    twice = [v for v, n in counts.items() if n > 1][:5]
    check(not twice, "no input value copied twice", str(twice))
    missing = [i for i in range(N) if f"v{i}" not in counts][:5]
    check(not missing, "every input value copied", str(missing))
    check(len(counts) == N, "nothing but the input's values", str(len(counts)))
    for m in (m2, m3):
        m.close()
    watcher.close()
    print("all confluent-kafka consumer protocol exactly-once checks passed", flush=True)


run(main)
