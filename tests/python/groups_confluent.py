#!/usr/bin/env python3
"""confluent-kafka (librdkafka 2.16) consumer groups against a sediment broker.

Usage: groups_confluent.py BOOTSTRAP
       (groups_confluent.py BOOTSTRAP crash-child is the member it kills)

Prints one line per check and exits non-zero at the first failed one.

1. split: two consumers in one group over a 4-partition topic get 2+2
   partitions, disjoint and covering the topic; when one closes, the other
   gets all 4.
   A member in another process that is SIGKILLed (no LeaveGroup) is expired
   after its session timeout and the survivor gets its partitions.
   Static members (group.instance.id): one that restarts gets its old
   partitions back under a new member id, and the other sees no rebalance.
2. exactly once: N keyed records are produced while two consumers with manual
   synchronous commits read them; one consumer closes midway. A record counts
   as consumed when it was processed *and* the commit of its offset was
   acknowledged, so a rebalance that fails a commit legitimately makes the
   record come back (and it is counted then). With that rule every record must
   be counted exactly once: a duplicate means a consumer started below an
   acknowledged commit, a gap means it started above what was committed.
3. cooperative-sticky: incremental assign/revoke callbacks; the second joiner
   takes 2 partitions and the first keeps the other 2 throughout; when the
   second leaves, the first is incrementally assigned its 2 back.
4. AdminClient: list/describe groups and members, committed offsets, delete
   an empty group, NON_EMPTY_GROUP for an active one.

Everything waits for a condition with a deadline; nothing sleeps for a guess.
"""

import os
import signal
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions

from common import BOOTSTRAP, CheckFailed, check, confluent_admin, run

TIMEOUT = 20.0
N = 600


admin = confluent_admin()


def create_topic(name, partitions):
    [(_, f)] = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)], operation_timeout=TIMEOUT).items()
    f.result(TIMEOUT)


def consumer(group, **extra):
    conf = {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        # Rebalances are noticed on the next heartbeat; keep that short.
        "heartbeat.interval.ms": 300,
        "session.timeout.ms": 10000,
    }
    conf.update(extra)
    return Consumer(conf)


def parts(c):
    return sorted(tp.partition for tp in c.assignment())


def pump(consumers, until, what, timeout=TIMEOUT, on_message=None):
    """Poll every consumer in turn until `until()` holds, or fail `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise CheckFailed(f"{what}: consumer error {m.error()}")
            if on_message is None:
                raise CheckFailed(f"{what}: unexpected message {m.topic()}[{m.partition()}]@{m.offset()}")
            on_message(c, m)
        if until():
            return
    raise CheckFailed(f"{what}: not reached within {timeout}s; assignments {[parts(c) for c in consumers]}")


def split_and_take_over():
    create_topic("cg-split", 4)
    a = consumer("g-split", **{"client.id": "split-a"})
    b = consumer("g-split", **{"client.id": "split-b"})
    a.subscribe(["cg-split"])
    pump([a], lambda: parts(a) == [0, 1, 2, 3], "the only member gets all 4 partitions")
    check(True, "split: the only member gets all 4 partitions")
    b.subscribe(["cg-split"])

    def split():
        pa, pb = parts(a), parts(b)
        return len(pa) == 2 and len(pb) == 2 and sorted(pa + pb) == [0, 1, 2, 3]

    pump([a, b], split, "two members split the partitions")
    check(True, "split: two members get 2+2, disjoint, covering all", f"a={parts(a)} b={parts(b)}")
    b.close()
    pump([a], lambda: parts(a) == [0, 1, 2, 3], "the remaining member takes over")
    check(True, "split: after the other member closes, the remaining one has all 4")
    return a


def crash_child():
    """Child mode: a group member that runs until it is SIGKILLed, printing
    its assignment whenever it changes."""
    c = consumer("g-crash", **{"client.id": "crash-child", "session.timeout.ms": 6000})
    c.subscribe(["cg-crash"])
    last = None
    while True:
        c.poll(0.05)
        if parts(c) != last:
            last = parts(c)
            print(f"assigned {last}", flush=True)


def crash_take_over():
    """A member that dies without leaving is expired after its session
    timeout, and the survivor gets its partitions."""
    create_topic("cg-crash", 4)
    a = consumer("g-crash", **{"client.id": "crash-a", "session.timeout.ms": 6000})
    a.subscribe(["cg-crash"])
    pump([a], lambda: parts(a) == [0, 1, 2, 3], "crash: a gets all 4")
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), BOOTSTRAP, "crash-child"], stdout=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, "")), daemon=True).start()
    try:
        pump([a], lambda: len(parts(a)) == 2 and any(l.startswith("assigned [") and l.count(",") == 1 for l in lines), "crash: a and the child split the partitions")
        check(True, "crash: a and a second process split 2+2", f"a={parts(a)} child={lines}")
        child.send_signal(signal.SIGKILL)
        child.wait(TIMEOUT)
        killed_at = time.monotonic()
        # No LeaveGroup: only the session timeout (6 s) can remove the child.
        pump([a], lambda: parts(a) == [0, 1, 2, 3], "crash: a takes over after the child's session expires", timeout=6 + TIMEOUT)
        waited = time.monotonic() - killed_at
        check(waited >= 5.0, "crash: after the child is SIGKILLed, a gets all 4 once its session expired", f"after {waited:.1f}s")
    finally:
        if child.poll() is None:
            child.kill()
    [(_, f)] = admin.describe_consumer_groups(["g-crash"], request_timeout=TIMEOUT).items()
    d = f.result(TIMEOUT)
    check([m.client_id for m in d.members] == ["crash-a"], "crash: the expired member is gone from the group", str([m.client_id for m in d.members]))
    a.close()


def static_membership():
    """A static member (group.instance.id) that restarts within its session
    gets its partitions back without a rebalance."""
    create_topic("cg-static", 4)
    events = {"a": [], "b": [], "b2": []}

    def subscribe(c, name):
        c.subscribe(
            ["cg-static"],
            on_assign=lambda _, ps: events[name].append(("assign", sorted(tp.partition for tp in ps))),
            on_revoke=lambda _, ps: events[name].append(("revoke", sorted(tp.partition for tp in ps))),
        )

    a = consumer("g-static", **{"client.id": "static-a", "group.instance.id": "inst-a"})
    b = consumer("g-static", **{"client.id": "static-b", "group.instance.id": "inst-b"})
    subscribe(a, "a")
    subscribe(b, "b")
    pump([a, b], lambda: len(parts(a)) == 2 and len(parts(b)) == 2, "static: two static members split the partitions")
    a_parts, b_parts, b_member = parts(a), parts(b), b.memberid()
    a_events = list(events["a"])
    check(sorted(a_parts + b_parts) == [0, 1, 2, 3], "static: two static members split 2+2", f"a={a_parts} b={b_parts}")
    # A static member's close sends no LeaveGroup; its replacement takes over its identity.
    b.close()
    b2 = consumer("g-static", **{"client.id": "static-b2", "group.instance.id": "inst-b"})
    subscribe(b2, "b2")
    pump([a, b2], lambda: parts(b2) != [], "static: the restarted member is assigned")
    # Absence of a rebalance can only be watched for: three heartbeat
    # intervals, in which a would learn of one (REBALANCE_IN_PROGRESS).
    watch_until = time.monotonic() + 3 * 0.3
    while time.monotonic() < watch_until:
        a.poll(0.05)
        b2.poll(0.05)
    check(parts(b2) == b_parts and events["b2"] == [("assign", b_parts)], "static: the restarted member gets its old partitions", f"{parts(b2)} {events['b2']}")
    check(events["a"] == a_events and parts(a) == a_parts, "static: the other member saw no rebalance", str(events["a"]))
    check(b2.memberid() != b_member, "static: the restarted member has a new member id")
    [(_, f)] = admin.describe_consumer_groups(["g-static"], request_timeout=TIMEOUT).items()
    d = f.result(TIMEOUT)
    got = sorted((m.group_instance_id, m.member_id) for m in d.members)
    check(got == sorted([("inst-a", a.memberid()), ("inst-b", b2.memberid())]), "static: describe shows both instance ids with the current member ids", str(got))
    a.close()
    b2.close()


def exactly_once():
    create_topic("cg-eo", 4)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5})
    delivered = {}
    failed_delivery = []

    def on_delivery(err, msg):
        if err is not None:
            failed_delivery.append(err)
        else:
            delivered[(msg.partition(), msg.offset())] = msg.value().decode()

    a = consumer("g-eo", **{"client.id": "eo-a"})
    b = consumer("g-eo", **{"client.id": "eo-b"})
    a.subscribe(["cg-eo"])
    b.subscribe(["cg-eo"])
    pump([a, b], lambda: len(parts(a)) == 2 and len(parts(b)) == 2, "both eo consumers assigned")

    counted = {}  # value -> (consumer name, partition, offset): processed and commit acknowledged
    duplicates = []
    failed_commits = []
    by = {id(a): "a", id(b): "b"}
    b_after_leave = {"a_from_b_partitions": 0}
    b_parts_at_leave = []

    def on_message(c, m):
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException as e:
            # A commit refused because of a rebalance: the record was not
            # consumed; whoever owns the partition next reads it again.
            failed_commits.append(e.args[0].name())
            return
        value = m.value().decode()
        if value in counted:
            duplicates.append((value, counted[value], (by[id(c)], m.partition(), m.offset())))
        counted[value] = (by[id(c)], m.partition(), m.offset())
        if c is a and m.partition() in b_parts_at_leave:
            b_after_leave["a_from_b_partitions"] += 1

    produced = 0
    active = [a, b]
    deadline = time.monotonic() + 45
    while len(counted) < N and time.monotonic() < deadline:
        # Produce while the consumers run, about as fast as they consume.
        for _ in range(2):
            if produced < N:
                producer.produce("cg-eo", key=f"key-{produced % 37}", value=str(produced), on_delivery=on_delivery)
                produced += 1
        producer.poll(0)
        for c in active:
            m = c.poll(0.02)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise CheckFailed(f"eo: consumer error {m.error()}")
            on_message(c, m)
        if b in active and len(counted) >= N // 2:
            # b leaves midway; every record it counted is already committed.
            b_parts_at_leave.extend(parts(b))
            b.close()
            active = [a]
            produced_at_leave = produced
            print(f"info b left after {len(counted)} records counted, {produced} produced, owning partitions {b_parts_at_leave}", flush=True)
    producer.flush(TIMEOUT)
    check(not failed_delivery, "eo: every record was delivered", str(failed_delivery[:3]))
    check(len(delivered) == N, f"eo: {N} records acknowledged by the broker", str(len(delivered)))
    check(b not in active, "eo: b left midway")
    check(produced_at_leave < N, "eo: records were still being produced when b left", str(produced_at_leave))
    check(not duplicates, "eo: no record consumed twice", str(duplicates[:5]))
    missing = sorted(set(str(i) for i in range(N)) - set(counted), key=int)
    check(not missing, f"eo: every one of the {N} records consumed", f"{len(missing)} missing, first {missing[:10]}")
    check(sum(1 for v in counted.values() if v[0] == "b") > 0, "eo: b consumed some records before leaving")
    check(b_after_leave["a_from_b_partitions"] > 0, "eo: a consumed from b's partitions after b left", str(b_parts_at_leave))
    check(parts(a) == [0, 1, 2, 3], "eo: a owns all 4 partitions at the end", str(parts(a)))
    for value, (_, p, o) in counted.items():
        if delivered.get((p, o)) != value:
            raise CheckFailed(f"eo: record {value} consumed at {p}@{o}, but the producer got {delivered.get((p, o))} there")
    check(True, "eo: every record consumed at the partition and offset it was written to")
    print(f"info commits refused during rebalances: {len(failed_commits)} {sorted(set(failed_commits))}", flush=True)
    committed = a.committed([TopicPartition("cg-eo", p) for p in range(4)], TIMEOUT)
    ends = {p: a.get_watermark_offsets(TopicPartition("cg-eo", p), TIMEOUT)[1] for p in range(4)}
    check({tp.partition: tp.offset for tp in committed} == ends, "eo: committed offsets are the partitions' ends", f"{committed} vs {ends}")
    return a, ends


def cooperative_sticky():
    create_topic("cg-coop", 4)
    events = {"a": [], "b": []}
    a_history = []

    def callbacks(name):
        def on_assign(c, ps):
            events[name].append(("assign", sorted(tp.partition for tp in ps)))

        def on_revoke(c, ps):
            events[name].append(("revoke", sorted(tp.partition for tp in ps)))

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    a = consumer("g-coop", **strategy, **{"client.id": "coop-a"})
    b = consumer("g-coop", **strategy, **{"client.id": "coop-b"})
    a.subscribe(["cg-coop"], **callbacks("a"))
    pump([a], lambda: parts(a) == [0, 1, 2, 3], "coop: a gets all 4")
    check(events["a"] == [("assign", [0, 1, 2, 3])], "coop: a's first callback assigns all 4", str(events["a"]))
    b.subscribe(["cg-coop"], **callbacks("b"))

    def settled():
        a_history.append(parts(a))
        pa, pb = parts(a), parts(b)
        return len(pa) == 2 and len(pb) == 2 and sorted(pa + pb) == [0, 1, 2, 3]

    pump([a, b], settled, "coop: b takes 2 partitions")
    kept, taken = parts(a), parts(b)
    check(True, "coop: a keeps 2, b takes 2", f"a={kept} b={taken}")
    # Incremental: a only ever revoked exactly what b got, never what it kept,
    # and its assignment always held the kept partitions.
    a_revoked = [p for (kind, ps) in events["a"] if kind == "revoke" for p in ps]
    check(sorted(a_revoked) == taken, "coop: a's revoke callback named exactly b's partitions", str(events["a"]))
    check(all(set(kept) <= set(h) for h in a_history), "coop: a never lost the partitions it kept", str(a_history))
    b_assigned = [p for (kind, ps) in events["b"] if kind == "assign" for p in ps]
    check(sorted(b_assigned) == taken and not any(kind == "revoke" and ps for (kind, ps) in events["b"]), "coop: b's assign callbacks added exactly its 2 partitions", str(events["b"]))
    return a, b, kept, taken, events


def group_listing():
    return {g.group_id: g for g in admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT).valid}


def admin_checks(coop_a, coop_b, kept, taken, eo_consumer, eo_ends, split_consumer):
    listed = group_listing()
    for g in ["g-split", "g-eo", "g-coop"]:
        check(g in listed, f"admin: list_consumer_groups shows {g}", str(sorted(listed)))
    check(listed["g-coop"].state == ConsumerGroupState.STABLE, "admin: g-coop is listed STABLE", str(listed["g-coop"].state))
    check(not listed["g-coop"].is_simple_consumer_group, "admin: g-coop is not a simple group")

    [(_, f)] = admin.describe_consumer_groups(["g-coop"], request_timeout=TIMEOUT).items()
    d = f.result(TIMEOUT)
    check(d.state == ConsumerGroupState.STABLE, "admin: describe g-coop: STABLE", str(d.state))
    check(d.partition_assignor == "cooperative-sticky", "admin: describe g-coop: assignor cooperative-sticky", d.partition_assignor)
    members = {m.client_id: m for m in d.members}
    check(sorted(members) == ["coop-a", "coop-b"], "admin: describe g-coop: both members with their client ids", str(sorted(members)))
    check(members["coop-a"].member_id == coop_a.memberid() and members["coop-b"].member_id == coop_b.memberid(), "admin: describe g-coop: member ids match the consumers'")
    got = {c: sorted(tp.partition for tp in m.assignment.topic_partitions) for c, m in members.items()}
    check(got == {"coop-a": kept, "coop-b": taken}, "admin: describe g-coop: each member's assignment", str(got))
    check(all(m.host for m in d.members), "admin: describe g-coop: member hosts present")

    [(_, f)] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-eo")], request_timeout=TIMEOUT).items()
    offsets = {(tp.topic, tp.partition): tp.offset for tp in f.result(TIMEOUT).topic_partitions}
    check(offsets == {("cg-eo", p): e for p, e in eo_ends.items()}, "admin: list_consumer_group_offsets shows g-eo's commits", str(offsets))
    [(_, f)] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-eo", [TopicPartition("cg-eo", 1), TopicPartition("cg-eo", 9)])], request_timeout=TIMEOUT).items()
    offsets = {(tp.topic, tp.partition): tp.offset for tp in f.result(TIMEOUT).topic_partitions}
    check(offsets == {("cg-eo", 1): eo_ends[1], ("cg-eo", 9): -1001}, "admin: list_consumer_group_offsets for chosen partitions (none committed: -1001)", str(offsets))

    # Deleting an active group is refused.
    [(_, f)] = admin.delete_consumer_groups(["g-coop"], request_timeout=TIMEOUT).items()
    try:
        f.result(TIMEOUT)
        raise CheckFailed("admin: deleting the active g-coop succeeded")
    except KafkaException as e:
        check(e.args[0].name() == "NON_EMPTY_GROUP", "admin: deleting an active group fails with NON_EMPTY_GROUP", e.args[0].name())
    check("g-coop" in group_listing(), "admin: g-coop still listed")

    # Once every member left, the group is empty and can be deleted.
    split_consumer.close()
    deadline = time.monotonic() + TIMEOUT
    while group_listing()["g-split"].state != ConsumerGroupState.EMPTY:
        if time.monotonic() > deadline:
            raise CheckFailed("admin: g-split did not become EMPTY")
        time.sleep(0.05)
    check(True, "admin: g-split is EMPTY after its last member closed")
    eo_consumer.close()
    deadline = time.monotonic() + TIMEOUT
    while group_listing()["g-eo"].state != ConsumerGroupState.EMPTY:
        if time.monotonic() > deadline:
            raise CheckFailed("admin: g-eo did not become EMPTY")
        time.sleep(0.05)
    [(_, f)] = admin.delete_consumer_groups(["g-eo"], request_timeout=TIMEOUT).items()
    f.result(TIMEOUT)
    check(True, "admin: deleting the empty g-eo succeeds")
    check("g-eo" not in group_listing(), "admin: g-eo is no longer listed")
    [(_, f)] = admin.describe_consumer_groups(["g-eo"], request_timeout=TIMEOUT).items()
    try:
        d = f.result(TIMEOUT)
        check(d.state == ConsumerGroupState.DEAD and not d.members, "admin: describe a deleted group: DEAD, no members", str(d.state))
    except KafkaException as e:
        check(e.args[0].name() == "GROUP_ID_NOT_FOUND", "admin: describe a deleted group: GROUP_ID_NOT_FOUND", e.args[0].name())
    [(_, f)] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-eo")], request_timeout=TIMEOUT).items()
    left = [tp for tp in f.result(TIMEOUT).topic_partitions if tp.offset >= 0]
    check(not left, "admin: a deleted group has no committed offsets", str(left))
    [(_, f)] = admin.delete_consumer_groups(["g-eo"], request_timeout=TIMEOUT).items()
    try:
        f.result(TIMEOUT)
        raise CheckFailed("admin: deleting g-eo twice succeeded")
    except KafkaException as e:
        check(e.args[0].name() == "GROUP_ID_NOT_FOUND", "admin: deleting it again: GROUP_ID_NOT_FOUND", e.args[0].name())

    # A new consumer of the deleted group starts from auto.offset.reset again.
    fresh = consumer("g-eo", **{"client.id": "eo-fresh"})
    fresh.subscribe(["cg-eo"])
    first = {}

    def on_first(c, m):
        first.setdefault(m.partition(), m.offset())

    pump([fresh], lambda: len(first) == 4, "a consumer of the deleted group reads", on_message=on_first)
    check(first == {0: 0, 1: 0, 2: 0, 3: 0}, "admin: a consumer of the deleted group starts from the beginning", str(first))
    fresh.close()


def cooperative_leave(a, b, kept, taken, events):
    """When a cooperative member leaves, the other is incrementally assigned
    its partitions and keeps its own."""
    before = len(events["a"])
    b.close()
    history = []

    def taken_over():
        history.append(parts(a))
        return parts(a) == [0, 1, 2, 3]

    pump([a], taken_over, "coop: a takes over after b leaves")
    new = events["a"][before:]
    check(new == [("assign", taken)], "coop: after b leaves, a's callbacks only add b's partitions", str(new))
    check(all(set(kept) <= set(h) for h in history), "coop: a kept its partitions while taking over", str(history))
    a.close()


def main():
    if sys.argv[2:] == ["crash-child"]:
        crash_child()
        return
    split_consumer = split_and_take_over()
    crash_take_over()
    static_membership()
    eo_consumer, eo_ends = exactly_once()
    coop_a, coop_b, kept, taken, coop_events = cooperative_sticky()
    admin_checks(coop_a, coop_b, kept, taken, eo_consumer, eo_ends, split_consumer)
    cooperative_leave(coop_a, coop_b, kept, taken, coop_events)
    print("all confluent-kafka group checks passed", flush=True)


if __name__ == "__main__":
    run(main)
