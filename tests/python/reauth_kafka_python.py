"""kafka-python 3 on a SASL_PLAINTEXT listener whose sessions expire
(connections.max.reauth.ms), for tests/security_reauth.rs.

Usage: reauth_kafka_python.py BOOTSTRAP TOPIC USER PASSWORD MECHANISM STOPFILE MODE
"until-stop": produce one record every 100 ms, each acknowledged, until
STOPFILE exists; the client must re-authenticate on its connection, so
nothing fails. Prints "done N" with the number of records acknowledged.
"until-auth-fails": produce the same way until the client reports an
authentication failure (its credential was deleted and a re-authentication
failed); prints "done auth-failed" (at most 60 s).
"""

import logging
import os
import sys
import time

from kafka import KafkaProducer

import common

TOPIC, USER, PASSWORD, MECHANISM, STOPFILE, MODE = sys.argv[2:8]


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def producer():
    return KafkaProducer(
        bootstrap_servers=common.BOOTSTRAP,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=MECHANISM,
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
        acks="all",
        max_block_ms=10000,
        # Retries would hide a failed re-authentication behind a reconnect.
        retries=0,
    )


def until_stop():
    p = producer()
    acked = 0
    deadline = time.monotonic() + 120
    while not os.path.exists(STOPFILE):
        common.check(time.monotonic() < deadline, "stop file within 120 s")
        p.send(TOPIC, key=b"k", value=f"py-{acked}".encode(), partition=0).get(timeout=15)
        acked += 1
        time.sleep(0.1)
    p.close()
    print(f"done {acked}", flush=True)


def until_auth_fails():
    capture = Capture()
    logging.getLogger("kafka").addHandler(capture)
    logging.getLogger("kafka").setLevel(logging.DEBUG)
    p = producer()
    deadline = time.monotonic() + 60
    failed = False
    while time.monotonic() < deadline and not failed:
        try:
            p.send(TOPIC, key=b"k", value=b"v", partition=0).get(timeout=15)
        except Exception:
            pass
        failed = any("SaslAuthenticationFailed" in l or "Authentication failed" in l
                     for l in capture.lines)
        time.sleep(0.1)
    common.check(failed, "an authentication failure after the credential was deleted",
                 str([l[:200] for l in capture.lines if "auth" in l.lower()][-8:]))
    print("done auth-failed", flush=True)


common.run(until_stop if MODE == "until-stop" else until_auth_fails)
