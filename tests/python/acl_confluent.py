"""confluent-kafka-python as a principal with WRITE on PREFIXED `orders-` only,
for tests/security_acl_matrix.rs.

Usage: acl_confluent.py BOOTSTRAP USER PASSWORD
Over SASL_PLAINTEXT with PLAIN: the topic list holds only `orders-*`; a
produce to `orders-eu` is delivered, one to `orders-blocked` (a DENY) fails
with TOPIC_AUTHORIZATION_FAILED; deleting `orders-eu` and describing its
configs fail with TOPIC_AUTHORIZATION_FAILED. Prints "done" at the end.
"""

import sys

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

import common
from common import BOOTSTRAP, check

USER, PASSWORD = sys.argv[2:4]
CONF = {
    "bootstrap.servers": BOOTSTRAP,
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": USER,
    "sasl.password": PASSWORD,
}


def error_code(future):
    try:
        future.result(30)
    except KafkaException as e:
        return e.args[0].code()
    return None


def main():
    admin = AdminClient(CONF)
    topics = set(admin.list_topics(timeout=30).topics)
    check("orders-eu" in topics, "orders-eu is listed", str(topics))
    check(all(t.startswith("orders-") for t in topics), "only orders-* are listed", str(topics))

    for topic, expected in [("orders-eu", None),
                            ("orders-blocked", KafkaError.TOPIC_AUTHORIZATION_FAILED)]:
        producer = Producer({**CONF, "message.timeout.ms": 10000})
        delivered = []
        producer.produce(topic, key=b"k", value=b"v", partition=0,
                         on_delivery=lambda err, msg: delivered.append(err))
        left = producer.flush(30)
        check(left == 0 and len(delivered) == 1, f"a delivery report for {topic}", str(delivered))
        got = delivered[0].code() if delivered[0] is not None else None
        check(got == expected, f"produce to {topic} answers {expected}", str(delivered[0]))

    deleted = admin.delete_topics(["orders-eu"], operation_timeout=10)["orders-eu"]
    code = error_code(deleted)
    check(code == KafkaError.TOPIC_AUTHORIZATION_FAILED, "delete orders-eu is refused", str(code))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders-eu")
    described = admin.describe_configs([resource])[resource]
    code = error_code(described)
    check(code == KafkaError.TOPIC_AUTHORIZATION_FAILED, "describe configs is refused", str(code))
    print("done", flush=True)


common.run(main)
