"""kafka-python over an SSL listener, for tests/security_tls.rs.

Usage: tls_kafka_python.py BOOTSTRAP TOPIC CA [CERT KEY]
Produces three records to TOPIC over SSL (ssl_cafile; with CERT and KEY a
client certificate, ssl_certfile/ssl_keyfile), reads them back over the same
listener and checks them. Prints "done" at the end.
"""

import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import common
from common import BOOTSTRAP, check

TOPIC, CA = sys.argv[2], sys.argv[3]
CLIENT = sys.argv[4:6]


def ssl_conf():
    conf = {"bootstrap_servers": BOOTSTRAP, "security_protocol": "SSL", "ssl_cafile": CA}
    if CLIENT:
        conf["ssl_certfile"] = CLIENT[0]
        conf["ssl_keyfile"] = CLIENT[1]
    return conf


def main():
    producer = KafkaProducer(acks="all", **ssl_conf())
    futures = [producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
               for i in range(3)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    check(offsets == [0, 1, 2], "three records acknowledged over SSL", str(offsets))

    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=30000, **ssl_conf())
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    for msg in consumer:
        got.append((msg.key, msg.value))
        if len(got) == 3:
            break
    consumer.close()
    check(got == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)], "read back over SSL", str(got))
    print("done", flush=True)


common.run(main)
