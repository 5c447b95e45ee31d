#!/usr/bin/env python3
"""confluent-kafka (librdkafka 2.16) transactions against a sediment broker.

Usage: txn_confluent.py BOOTSTRAP
       txn_confluent.py BOOTSTRAP hold TOPIC TRANSACTIONAL_ID
         (opens a transaction on TOPIC partition 0, produces three keyed
         records, prints "open", waits for a line on stdin, commits, prints
         "committed": a real client's transaction the caller keeps open)

Prints one line per check and exits non-zero at the first failed one.

1. commit and abort: one producer commits a transaction, aborts the next
   (its records flushed to the log first, so the abort has data to undo) and
   commits a third, over a 2-partition topic.
2. consume-transform-produce: a read_committed consumer in a group reads an
   input topic, two records per transaction; each transaction produces the
   transformed records and sends the consumer's positions with its group
   metadata (send_offsets_to_transaction). The first one aborts: committed()
   is unchanged and the consumer rewinds; after each commit committed()
   returns the new position, also to another consumer of the group.
3. fencing: a second producer with the same transactional.id initialises
   while the first has a transaction open; the first one's next operation
   fails with a fatal error (librdkafka's _FENCED), its open transaction is
   aborted, and the second commits.
4. readers: read_committed sees exactly the committed records (none of the
   aborted or fenced ones, each committed one once); read_uncommitted sees
   every record produced.

Every wait has a deadline; nothing sleeps for a guess.
"""

import sys
import time

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic

from common import BOOTSTRAP, CheckFailed, check, confluent_admin, run

TIMEOUT = 30.0
OUT = "txn-out"
IN = "txn-in"
GROUP = "txn-ctp"
N = 6


def transactional(txn_id):
    return Producer({
        "bootstrap.servers": BOOTSTRAP,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
    })


def create_topics(admin, specs):
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in specs],
        operation_timeout=TIMEOUT,
    )
    for f in futures.values():
        f.result(TIMEOUT)


def produce_all(p, topic, values, partitions):
    """Produce `values` round-robin over `partitions` and wait for every delivery."""
    errors = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    for i, v in enumerate(values):
        p.produce(topic, key=v.encode(), value=v.encode(), partition=i % partitions, on_delivery=delivered)
    left = p.flush(TIMEOUT)
    check(left == 0 and not errors, f"{len(values)} records to {topic} delivered", f"left={left} errors={errors}")


def read_to_end(topic, partitions, isolation):
    """Every value of `topic` a fresh consumer with `isolation` reads up to the
    end of each partition (the last stable offset for read_committed)."""
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, at_eof = [], set()
    deadline = time.monotonic() + TIMEOUT
    while len(at_eof) < partitions:
        if time.monotonic() > deadline:
            raise CheckFailed(f"{isolation} read of {topic}: no end after {TIMEOUT}s, read {values}")
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                at_eof.add(m.partition())
                continue
            raise CheckFailed(f"{isolation} read of {topic}: {m.error()}")
        at_eof.discard(m.partition())
        values.append(m.value().decode())
    c.close()
    return values


def commit_and_abort(p):
    p.init_transactions(TIMEOUT)
    check(True, "init_transactions")
    committed, aborted = [], []
    p.begin_transaction()
    values = [f"commit-a-{i}" for i in range(N)]
    produce_all(p, OUT, values, 2)
    p.commit_transaction(TIMEOUT)
    committed += values
    check(True, "commit_transaction")
    p.begin_transaction()
    values = [f"abort-{i}" for i in range(N)]
    produce_all(p, OUT, values, 2)
    p.abort_transaction(TIMEOUT)
    aborted += values
    check(True, "abort_transaction after its records reached the log")
    p.begin_transaction()
    values = [f"commit-b-{i}" for i in range(N)]
    produce_all(p, OUT, values, 2)
    p.commit_transaction(TIMEOUT)
    committed += values
    check(True, "commit_transaction after an abort")
    return committed, aborted


def committed_offset(c):
    [tp] = c.committed([TopicPartition(IN, 0)], timeout=TIMEOUT)
    check(tp.error is None, "committed() answers", str(tp.error))
    return tp.offset


def take(c, n, what):
    """The next `n` input values `c` reads (each a transform's input)."""
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < n:
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: got only {got}")
        for m in c.consume(num_messages=n - len(got), timeout=0.2):
            if m.error():
                raise CheckFailed(f"{what}: {m.error()}")
            got.append(m.value().decode())
    return got


def consume_transform_produce(p):
    """Reads IN in a group, two records per transaction, producing each
    transformed to OUT with the consumer's positions; the first transaction
    aborts and the consumer rewinds to the committed offset, as an
    application does. Returns (committed values, aborted values) in OUT."""
    plain = Producer({"bootstrap.servers": BOOTSTRAP})
    inputs = [f"in-{i}" for i in range(N)]
    produce_all(plain, IN, inputs, 1)
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    c.subscribe([IN])

    first = take(c, 2, "the first two input records")
    p.begin_transaction()
    aborted = [f"ctp-aborted-{v}" for v in first]
    produce_all(p, OUT, aborted, 2)
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
    p.abort_transaction(TIMEOUT)
    check(committed_offset(c) == OFFSET_INVALID, "aborted: send_offsets_to_transaction left no committed offset")
    c.seek(TopicPartition(IN, 0, 0))

    done, read = [], []
    while len(read) < N:
        got = take(c, 2, f"input records from {len(read)}")
        read += got
        p.begin_transaction()
        out = [v.upper() for v in got]
        produce_all(p, OUT, out, 2)
        positions = c.position(c.assignment())
        check([tp.offset for tp in positions] == [len(read)], f"the position is {len(read)}", str(positions))
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), TIMEOUT)
        p.commit_transaction(TIMEOUT)
        done += out
        check(committed_offset(c) == len(read), f"committed: committed() returns {len(read)}")
    check(read == inputs, f"after the rewind the loop read the {N} input records once each", str(read))
    c.close()
    # Another member of the group starts where the last transaction committed.
    c2 = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "enable.auto.commit": False})
    check(committed_offset(c2) == N, "a new consumer of the group sees the committed offset")
    c2.close()
    return done, aborted


def fencing(p1, txn_id):
    """Returns (committed values, aborted values) it produced to OUT."""
    p1.begin_transaction()
    fenced = [f"fenced-{i}" for i in range(N)]
    produce_all(p1, OUT, fenced, 2)
    p2 = transactional(txn_id)
    p2.init_transactions(TIMEOUT)
    check(True, "a second producer with the same transactional.id initialises")
    try:
        p1.commit_transaction(TIMEOUT)
    except KafkaException as e:
        err = e.args[0]
        check(err.fatal(), "the first producer's commit fails fatally", f"{err.name()}: {err.str()}")
        check(
            err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH),
            "as fenced",
            f"{err.name()}: {err.str()}",
        )
    else:
        raise CheckFailed("the fenced producer's commit succeeded")
    try:
        p1.begin_transaction()
    except KafkaException as e:
        check(e.args[0].fatal(), "and it stays fenced", e.args[0].str())
    else:
        raise CheckFailed("the fenced producer began another transaction")
    p2.begin_transaction()
    after = [f"after-fence-{i}" for i in range(N)]
    produce_all(p2, OUT, after, 2)
    p2.commit_transaction(TIMEOUT)
    check(True, "the new producer commits")
    return after, fenced


def hold(topic, txn_id):
    p = transactional(txn_id)
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    produce_all(p, topic, [f"held-{i}" for i in range(3)], 1)
    print("open", flush=True)
    sys.stdin.readline()
    p.commit_transaction(TIMEOUT)
    print("committed", flush=True)


def main():
    if sys.argv[2:3] == ["hold"]:
        hold(sys.argv[3], sys.argv[4])
        return
    create_topics(confluent_admin(), [(OUT, 2), (IN, 1)])
    p = transactional("py-txn")
    committed, aborted = commit_and_abort(p)
    c, a = consume_transform_produce(p)
    committed += c
    aborted += a
    c, a = fencing(p, "py-txn")
    committed += c
    aborted += a

    seen = read_to_end(OUT, 2, "read_committed")
    check(sorted(seen) == sorted(committed), "read_committed sees exactly the committed records, each once",
          f"extra={sorted(set(seen) - set(committed))} missing={sorted(set(committed) - set(seen))} n={len(seen)}")
    seen = read_to_end(OUT, 2, "read_uncommitted")
    check(sorted(seen) == sorted(committed + aborted), "read_uncommitted sees every record produced",
          f"n={len(seen)} expected {len(committed + aborted)}")
    print("all confluent-kafka transaction checks passed")


run(main)
