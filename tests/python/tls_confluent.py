"""confluent-kafka-python over an SSL listener, for tests/security_tls.rs.

Usage: tls_confluent.py BOOTSTRAP TOPIC CA [CERT KEY]
Produces five keyed records to TOPIC over SSL (the server checked against CA;
with CERT and KEY a client certificate is presented), then reads them back
with a consumer over the same listener and checks keys, values and offsets.
Prints "done" at the end.
"""

import sys

from confluent_kafka import Consumer, Producer, TopicPartition

import common
from common import BOOTSTRAP, check

TOPIC, CA = sys.argv[2], sys.argv[3]
CLIENT = sys.argv[4:6]


def ssl_conf():
    conf = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SSL",
        "ssl.ca.location": CA,
        # Host names are verified (librdkafka's default since 2.0): the
        # broker's certificate names 127.0.0.1.
        "ssl.endpoint.identification.algorithm": "https",
    }
    if CLIENT:
        conf["ssl.certificate.location"] = CLIENT[0]
        conf["ssl.key.location"] = CLIENT[1]
    return conf


def main():
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
    producer = Producer({**ssl_conf(), "acks": "all"})
    delivered = []
    for k, v in records:
        producer.produce(TOPIC, key=k, value=v, partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    left = producer.flush(30)
    check(left == 0, "every record delivered over SSL", f"{left} left")
    check(all(err is None for err, _ in delivered), "no delivery error", str(delivered))

    consumer = Consumer({**ssl_conf(), "group.id": "tls-confluent", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    while len(got) < len(records):
        msg = consumer.poll(30)
        check(msg is not None, "a record within 30 s", f"after {len(got)}")
        check(msg.error() is None, "no consume error", str(msg.error()))
        got.append((msg.key(), msg.value(), msg.offset()))
    consumer.close()
    check([(k, v) for k, v, _ in got] == records, "consumed what was produced", str(got))
    check([o for _, _, o in got] == list(range(5)), "offsets 0..4", str(got))
    print("done", flush=True)


common.run(main)
