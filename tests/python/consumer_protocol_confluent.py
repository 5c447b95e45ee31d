#!/usr/bin/env python3
"""confluent-kafka (librdkafka 2.16) with the consumer group protocol
(KIP-848, group.protocol=consumer) against a sediment broker.

Usage: consumer_protocol_confluent.py BOOTSTRAP

Prints one line per check and exits non-zero at the first failed one.

1. Three members share a 6-partition topic, two partitions each, and consume
   everything produced with synchronous commits.
2. One member closes (leaving with epoch -1): the other two take over all six
   partitions; neither has a partition revoked (no stop-the-world pause: they
   keep theirs and are only incrementally assigned more).
3. The committed offsets equal the log end offsets; the AdminClient lists
   the group and describes its two members with three partitions each.

Everything waits for a condition with a deadline; nothing sleeps for a guess.
"""

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from common import BOOTSTRAP, CheckFailed, check, confluent_admin, run

TIMEOUT = 60.0
TOPIC = "kip848-py"
GROUP = "kip848-py-group"
N = 60

admin = confluent_admin()


def parts(c):
    return sorted(tp.partition for tp in c.assignment())


def main():
    [(_, f)] = admin.create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=1)], operation_timeout=TIMEOUT).items()
    f.result(TIMEOUT)
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(N):
        p.produce(TOPIC, key=f"k{i}", value=f"v{i}")
    check(p.flush(TIMEOUT) == 0, f"produced {N} keyed records")

    events = {}
    consumed = {"n": 0}

    def member(name):
        events[name] = []

        def on_assign(c, ps):
            events[name].append(("assign", sorted(tp.partition for tp in ps)))

        def on_revoke(c, ps):
            events[name].append(("revoke", sorted(tp.partition for tp in ps)))

        def on_lost(c, ps):
            events[name].append(("lost", sorted(tp.partition for tp in ps)))

        c = Consumer({
            "bootstrap.servers": BOOTSTRAP,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        })
        c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        return c

    def pump(consumers, until, what):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for c in consumers:
                m = c.poll(0.05)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise CheckFailed(f"{what}: consumer error {m.error()}")
                consumed["n"] += 1
                c.commit(message=m, asynchronous=False)
            if until():
                return
        raise CheckFailed(f"{what}: not reached within {TIMEOUT}s; assignments {[parts(c) for c in consumers]}, events {events}")

    c1, c2, c3 = member("py-1"), member("py-2"), member("py-3")

    def three_way():
        ps = [parts(c) for c in (c1, c2, c3)]
        return all(len(x) == 2 for x in ps) and sorted(sum(ps, [])) == list(range(6))

    pump([c1, c2, c3], lambda: three_way() and consumed["n"] == N, "three members with two partitions each, everything consumed")
    check(True, "three members share six partitions, two each", str([parts(c) for c in (c1, c2, c3)]))
    check(consumed["n"] == N, f"all {N} records consumed once", str(consumed["n"]))

    kept = {"py-1": parts(c1), "py-2": parts(c2)}
    mark = {name: len(events[name]) for name in kept}
    c3.close()
    pump([c1, c2], lambda: len(parts(c1)) == 3 and len(parts(c2)) == 3, "two members with three partitions each")
    check(sorted(parts(c1) + parts(c2)) == list(range(6)), "the two left cover all six partitions", str([parts(c1), parts(c2)]))
    for name, c in (("py-1", c1), ("py-2", c2)):
        later = events[name][mark[name]:]
        check(set(kept[name]) <= set(parts(c)), f"{name} kept its partitions", f"{kept[name]} -> {parts(c)}")
        check(all(kind == "assign" for kind, _ in later), f"{name} had nothing revoked or lost when py-3 left", str(later))

    ends = 0
    tps = [TopicPartition(TOPIC, i) for i in range(6)]
    for tp in tps:
        lo, hi = c1.get_watermark_offsets(tp, timeout=TIMEOUT)
        ends += hi
    committed = c1.committed(tps, timeout=TIMEOUT)
    check(sum(tp.offset for tp in committed) == ends == N, "committed offsets are the log end offsets", str([(tp.partition, tp.offset) for tp in committed]))

    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT).valid}
    check(GROUP in listed, "admin: list_consumer_groups shows the group", str(sorted(listed)))
    group_type = getattr(listed[GROUP], "type", None)
    if group_type is not None:
        check(str(group_type).upper().endswith("CONSUMER"), "admin: the group's type is CONSUMER", str(group_type))
    [(_, f)] = admin.describe_consumer_groups([GROUP], request_timeout=TIMEOUT).items()
    d = f.result(TIMEOUT)
    members = {m.client_id: m for m in d.members}
    check(sorted(members) == ["py-1", "py-2"], "admin: describe shows the two members", str(sorted(members)))
    sizes = sorted(len(m.assignment.topic_partitions) for m in d.members)
    check(sizes == [3, 3], "admin: describe shows three partitions each", str(sizes))
    c1.close()
    c2.close()
    print("all confluent-kafka consumer protocol checks passed", flush=True)


run(main)
