"""What the client scripts in this folder share: the broker's bootstrap
address from the command line, one printed line per check, and the exit code.

Every script takes BOOTSTRAP as its first argument, prints `ok   <check>` for
each check that holds and `FAIL <check>: <detail>` for the first one that does
not, then exits 1; the Rust harness (tests/broker/mod.rs) reads that output.
The scripts run as `python tests/python/<script>.py`, so this folder is first
on sys.path and `import common` finds this file.
"""

import sys

BOOTSTRAP = sys.argv[1]


class CheckFailed(Exception):
    pass


def check(cond, what, detail=""):
    if not cond:
        raise CheckFailed(f"{what}: {detail}")
    print(f"ok   {what}", flush=True)


def run(main):
    """Run the script's `main`; a failed check ends it with exit code 1."""
    try:
        main()
    except CheckFailed as e:
        print(f"FAIL {e}", flush=True)
        sys.exit(1)


# Each script drives one client library, so each factory imports its own and a
# script never loads the other library.


def kafka_python_admin(timeout_s):
    """kafka-python's admin client, its requests bounded by `timeout_s`."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=BOOTSTRAP, request_timeout_ms=timeout_s * 1000)


def confluent_admin():
    """confluent-kafka's admin client with librdkafka's defaults."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": BOOTSTRAP})


def sasl_args():
    """The arguments of the SASL client scripts (sasl_*.py): TOPIC, PROTOCOL,
    USER, PASSWORD, CA, MODE, then MECHANISM (PLAIN, SCRAM-SHA-256 or
    SCRAM-SHA-512; PLAIN when absent) and the failure message the broker
    gives for that mechanism (PLAIN's, or Kafka's generic SCRAM one)."""
    topic, protocol, user, password, ca, mode = sys.argv[2:8]
    mechanism = sys.argv[8] if len(sys.argv) > 8 else "PLAIN"
    failure = ("Invalid username or password" if mechanism == "PLAIN"
               else f"invalid credentials with SASL mechanism {mechanism}")
    return topic, protocol, user, password, ca, mode, mechanism, failure
