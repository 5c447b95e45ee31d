"""Committed group offsets for the tiered storage restore test
(tests/remote_storage.rs), with confluent-kafka.

    remote_offsets_confluent.py BOOTSTRAP commit   # restored-group: state-0 at 123, then
                                                   # 40 commits of filler-group so the
                                                   # __consumer_offsets segment rolls
    remote_offsets_confluent.py BOOTSTRAP read     # prints restored-group's offset
"""

import sys

import common
from confluent_kafka import Consumer, TopicPartition


def consumer(group):
    return Consumer({"bootstrap.servers": common.BOOTSTRAP, "group.id": group,
                     "enable.auto.commit": False})


def main():
    mode = sys.argv[2]
    if mode == "commit":
        c = consumer("restored-group")
        c.commit(offsets=[TopicPartition("state", 0, 123)], asynchronous=False)
        c.close()
        f = consumer("filler-group")
        for i in range(40):
            f.commit(offsets=[TopicPartition("state", 0, i)], asynchronous=False)
        f.close()
        common.check(True, "committed")
    else:
        c = consumer("restored-group")
        got = c.committed([TopicPartition("state", 0)], timeout=30)[0].offset
        c.close()
        print(f"offset={got}", flush=True)
    print("done", flush=True)


common.run(main)
