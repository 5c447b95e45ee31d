"""confluent-kafka-python as principals with different ACLs, for
tests/security_acl_groups.rs. SASL/PLAIN on a SASL_PLAINTEXT listener.

Usage: acl_groups_confluent.py BOOTSTRAP USER PASSWORD MODE ARGS...
  group TOPIC GROUP N ok       consume N records of TOPIC in GROUP and commit them
  group TOPIC GROUP 0 denied   the group fails with GROUP_AUTHORIZATION_FAILED
  idempotent TOPIC             an idempotent producer delivers five records
  transactional TOPIC ID ok    a transactional producer commits five records
  transactional TOPIC ID denied  init_transactions fails with
                               TRANSACTIONAL_ID_AUTHORIZATION_FAILED
Prints "done" at the end.
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

import common
from common import BOOTSTRAP, check

USER, PASSWORD, MODE = sys.argv[2:5]
ARGS = sys.argv[5:]


def conf():
    return {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }


def group(topic, group_id, n, expect):
    errors = []
    consumer = Consumer({**conf(), "group.id": group_id, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "error_cb": errors.append})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 40
    got = []
    while True:
        check(time.monotonic() < deadline, f"{USER}: an answer for {group_id} within 40 s",
              f"records {len(got)}, errors {errors}")
        msg = consumer.poll(0.5)
        if expect == "denied":
            codes = [e.code() for e in errors]
            if msg is not None and msg.error() is not None:
                codes.append(msg.error().code())
            check(not got and (msg is None or msg.error() is not None),
                  f"{USER}: no record reaches a denied group", str(msg))
            if KafkaError.GROUP_AUTHORIZATION_FAILED in codes:
                check(True, f"{USER}: GROUP_AUTHORIZATION_FAILED for {group_id}")
                break
            continue
        if msg is None:
            continue
        check(msg.error() is None, f"{USER}: no consume error", str(msg.error()))
        got.append(msg)
        if len(got) == n:
            break
    if expect == "ok":
        committed = consumer.commit(asynchronous=False)
        check(all(tp.error is None for tp in committed), f"{USER}: offsets committed",
              str(committed))
        check(committed[0].offset == got[-1].offset() + 1, f"{USER}: committed past the last",
              str(committed))
    consumer.close()


def idempotent(topic):
    errors = []
    producer = Producer({**conf(), "enable.idempotence": True, "acks": "all",
                         "error_cb": errors.append})
    delivered = []
    for i in range(5):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append(err))
    left = producer.flush(30)
    check(left == 0, f"{USER}: every idempotent record delivered", f"{left} left, {errors}")
    check(all(e is None for e in delivered), f"{USER}: no delivery error", str(delivered))
    check(not errors, f"{USER}: no client error", str(errors))


def transactional(topic, txn_id, expect):
    producer = Producer({**conf(), "transactional.id": txn_id, "acks": "all"})
    if expect == "denied":
        try:
            producer.init_transactions(30)
        except KafkaException as e:
            err = e.args[0]
            check(err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                  f"{USER}: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for {txn_id}", str(err))
            return
        check(False, f"{USER}: init_transactions refused for {txn_id}", "it succeeded")
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=f"t{i}".encode(), value=f"v{i}".encode(), partition=0)
    producer.commit_transaction(30)
    check(True, f"{USER}: transaction {txn_id} committed")


def main():
    if MODE == "group":
        topic, group_id, n, expect = ARGS
        group(topic, group_id, int(n), expect)
    elif MODE == "idempotent":
        idempotent(ARGS[0])
    elif MODE == "transactional":
        transactional(*ARGS)
    else:
        check(False, "a known mode", MODE)
    print("done", flush=True)


common.run(main)
