"""confluent-kafka-python with SASL/PLAIN or SCRAM, for tests/security_sasl.rs and
tests/security_scram_clients.rs.

Usage: sasl_confluent.py BOOTSTRAP TOPIC PROTOCOL USER PASSWORD CA|- good|bad [MECHANISM]
PROTOCOL is SASL_PLAINTEXT or SASL_SSL (then CA checks the server). "good":
produces five keyed records to TOPIC and reads them back over the same
listener. "bad": the password is wrong, and librdkafka must report an
authentication error (_AUTHENTICATION) carrying the broker's message.
Prints "done" at the end.
"""

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

import common
from common import BOOTSTRAP, check

TOPIC, PROTOCOL, USER, PASSWORD, CA, MODE, MECHANISM, FAILURE = common.sasl_args()


def conf():
    c = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": PROTOCOL,
        "sasl.mechanism": MECHANISM,
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }
    if PROTOCOL == "SASL_SSL":
        c["ssl.ca.location"] = CA
    return c


def good():
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
    producer = Producer({**conf(), "acks": "all"})
    delivered = []
    for k, v in records:
        producer.produce(TOPIC, key=k, value=v, partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    left = producer.flush(30)
    check(left == 0, f"every record delivered over {PROTOCOL}", f"{left} left")
    check(all(err is None for err, _ in delivered), "no delivery error", str(delivered))

    consumer = Consumer({**conf(), "group.id": "sasl-confluent", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    while len(got) < len(records):
        msg = consumer.poll(30)
        check(msg is not None, "a record within 30 s", f"after {len(got)}")
        check(msg.error() is None, "no consume error", str(msg.error()))
        got.append((msg.key(), msg.value()))
    consumer.close()
    check(got == records, "consumed what was produced", str(got))


def bad():
    errors = []
    producer = Producer({**conf(), "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce(TOPIC, key=b"k", value=b"v", partition=0)
    deadline = time.monotonic() + 30
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        check(time.monotonic() < deadline, "an authentication error within 30 s", str(errors))
        producer.poll(0.2)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION][0]
    check(FAILURE in auth.str(), "the broker's message reaches the client", auth.str())
    producer.flush(10)


common.run(lambda: (good() if MODE == "good" else bad(), print("done", flush=True)))
