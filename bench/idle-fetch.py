"""Broker CPU with many idle long-polling consumers while one partition is
busy: the cost of waking fetches that have nothing new to read.

Usage: target/pyenv/bin/python bench/idle-fetch.py OLD_BIN NEW_BIN [ROUNDS]

Per round and binary (alternating, so other work on the machine hits both):
a fresh broker gets a topic `idle` of 64 partitions and a topic `busy` of 1;
20 librdkafka consumers (confluent-kafka) are assigned every partition of
`idle` and long-poll it (fetch.wait.max.ms=500, nothing is ever written
there); once they are parked, a producer writes 1 KiB records to `busy` for
20 seconds as fast as librdkafka sends them. Prints the broker's CPU seconds
(utime+stime) over those 20 seconds, the records produced, and the CPU per
100,000 records, then the medians.

A broker that wakes every parked fetch on each append re-reads all 64
partitions of all 20 consumers per produce request; one that wakes only the
fetches of the partition appended to (Kafka's purgatory keyed by partition)
does not.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CONSUMERS = 20
IDLE_PARTITIONS = 64
SECONDS = 20.0
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker not listening on {port}")


def run(binary: str) -> tuple[float, int]:
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        broker = subprocess.Popen(
            [binary, "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={data}", "--override", "metrics.listen="],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            return measure(port, broker.pid)
        finally:
            broker.terminate()
            broker.wait(30)


def measure(port: int, pid: int) -> tuple[float, int]:
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("idle", IDLE_PARTITIONS, 1),
                                  NewTopic("busy", 1, 1)]).values():
        f.result(30)
    stop = threading.Event()
    consumers = []
    for i in range(CONSUMERS):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{i}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 500})
        c.assign([TopicPartition("idle", p, 0) for p in range(IDLE_PARTITIONS)])
        consumers.append(c)

    def poll_all() -> None:
        while not stop.is_set():
            for c in consumers:
                c.poll(0)
            time.sleep(0.05)

    poller = threading.Thread(target=poll_all)
    poller.start()
    time.sleep(3.0)  # every consumer has connected and parked its fetch
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    value = b"x" * 1024
    produced = 0
    before = cpu_seconds(pid)
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        try:
            producer.produce("busy", value)
            produced += 1
        except BufferError:
            producer.poll(0.001)
        producer.poll(0)
    producer.flush(30)
    cpu = cpu_seconds(pid) - before
    stop.set()
    poller.join()
    for c in consumers:
        c.close()
    return cpu, produced


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    results: dict[str, list[tuple[float, int]]] = {"old": [], "new": []}
    for _ in range(rounds):
        for label, binary in (("old", old), ("new", new)):
            cpu, produced = run(binary)
            results[label].append((cpu, produced))
            per = cpu / produced * 100_000 if produced else float("nan")
            print(f"{label} cpu_s {cpu:.2f} records {produced} cpu_s_per_100k {per:.3f}", flush=True)
    for label, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        per = statistics.median(r[0] / r[1] * 100_000 for r in runs if r[1])
        print(f"median {label} cpu_s {cpu:.2f} cpu_s_per_100k {per:.3f}")


if __name__ == "__main__":
    main()
