"""kafka-python with SASL/PLAIN or SCRAM, for tests/security_sasl.rs and
tests/security_scram_clients.rs.

Usage: sasl_kafka_python.py BOOTSTRAP TOPIC PROTOCOL USER PASSWORD CA|- good|bad [MECHANISM]
"good": produces three records to TOPIC and reads them back over the same
listener. "bad": the password is wrong; the client must fail with
SaslAuthenticationFailedError carrying the broker's message (raised, or
logged by the connection that got it). Prints "done" at the end.
"""

import logging

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import SaslAuthenticationFailedError

import common
from common import BOOTSTRAP, check

TOPIC, PROTOCOL, USER, PASSWORD, CA, MODE, MECHANISM, FAILURE = common.sasl_args()


def conf():
    c = {
        "bootstrap_servers": BOOTSTRAP,
        "security_protocol": PROTOCOL,
        "sasl_mechanism": MECHANISM,
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }
    if PROTOCOL == "SASL_SSL":
        c["ssl_cafile"] = CA
    return c


def good():
    producer = KafkaProducer(acks="all", **conf())
    futures = [producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
               for i in range(3)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    check(offsets == [0, 1, 2], f"three records acknowledged over {PROTOCOL}", str(offsets))
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=30000, **conf())
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    for msg in consumer:
        got.append((msg.key, msg.value))
        if len(got) == 3:
            break
    consumer.close()
    check(got == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)], "read back", str(got))


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def bad():
    capture = Capture()
    logging.getLogger("kafka").addHandler(capture)
    logging.getLogger("kafka").setLevel(logging.DEBUG)
    raised = None
    try:
        producer = KafkaProducer(max_block_ms=10000, **conf())
        producer.send(TOPIC, key=b"k", value=b"v", partition=0).get(timeout=15)
    except Exception as e:  # the failure surfaces as the client chooses
        raised = e
    check(raised is not None, "nothing is produced with a wrong password")
    seen = isinstance(raised, SaslAuthenticationFailedError) or any(
        "SaslAuthenticationFailedError" in l or FAILURE in l for l in capture.lines)
    check(seen, "SaslAuthenticationFailedError with the broker's message",
          f"{raised!r}; log: {[l[:300] for l in capture.lines if 'ApiVersions' not in l and 'Send:' not in l][:12]}")


common.run(lambda: (good() if MODE == "good" else bad(), print("done", flush=True)))
