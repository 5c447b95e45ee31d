"""A connection flood against a SASL listener: the broker's memory and
descriptors while thousands of sockets sit unauthenticated, and whether an
authenticated client is still served.

Usage: target/pyenv/bin/python bench/flood.py BIN [BIN...] [--sockets N] [--max-connections M]

Per binary: a fresh broker with one SASL_PLAINTEXT listener (PLAIN, one
user) and `max.connections=M` (default 2000). N sockets (default 1500) connect
and send half a SaslHandshake frame, then nothing (a slowloris handshake).
Prints the broker's RSS and open descriptors before and with the flood, the
RSS per flooding socket, and the seconds an authenticated confluent-kafka
producer and consumer took to write and read back 1,000 records meanwhile.
With N above M, the sockets past the limit wait in the listen backlog and
hold no descriptor of the broker's.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import subprocess
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition

USER, PASSWORD = "alice", "alice-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("broker not listening")


def client_config(port: int) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD}


class Client:
    """An authenticated producer and consumer, connected before the flood."""

    def __init__(self, port: int) -> None:
        self.producer = Producer({**client_config(port), "acks": "all"})
        self.consumer = Consumer({**client_config(port), "group.id": "flood", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition("flood", 0, 0)])
        self.read = 0

    def served(self) -> float:
        """Seconds to produce 1,000 records and read them back."""
        start = time.monotonic()
        for i in range(1000):
            self.producer.produce("flood", key=str(i).encode(), value=b"v" * 100)
        assert self.producer.flush(60) == 0, "not every record was delivered"
        want = self.read + 1000
        while self.read < want and time.monotonic() - start < 60:
            self.read += len([m for m in self.consumer.consume(1000, 1.0) if m.error() is None])
        assert self.read == want, f"read {self.read} of {want}"
        return time.monotonic() - start


def flood(port: int, sockets: int) -> list[socket.socket]:
    # Half a SaslHandshake v1 request: the size, then fewer bytes than it says.
    half = struct.pack(">ihhi", 40, 17, 1, 1)
    held = []
    for _ in range(sockets):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        held.append(s)
    time.sleep(1.0)  # the connects complete (or queue in the backlog)
    for s in held:
        try:
            s.send(half)
        except OSError:
            pass
    return held


def run(binary: str, sockets: int, max_connections: int) -> None:
    port = free_port()
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{USER}="{PASSWORD}";')
    with tempfile.TemporaryDirectory() as data:
        broker = subprocess.Popen(
            [binary, "serve", "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={data}", "--override", "metrics.listen=",
             "--override", "sasl.enabled.mechanisms=PLAIN",
             "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
             "--override", f"max.connections={max_connections}",
             "--override", "super.users=User:alice"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            client = Client(port)
            client.served()  # the topic exists, the client is connected and warm
            rss0, fds0 = rss_kib(broker.pid), fds(broker.pid)
            held = flood(port, sockets)
            time.sleep(1.0)
            rss1, fds1 = rss_kib(broker.pid), fds(broker.pid)
            took = client.served()
            per = (rss1 - rss0) / min(sockets, max_connections)
            # Stopped with the flood still connected: how long the drain takes.
            stop = time.monotonic()
            broker.terminate()
            try:
                broker.wait(60)
                stopped = f"{time.monotonic() - stop:.2f} s"
            except subprocess.TimeoutExpired:
                stopped = "more than 60 s (killed)"

            print(f"{binary}: {sockets} sockets, max.connections={max_connections}: "
                  f"RSS {rss0} -> {rss1} KiB ({per:.1f} KiB an accepted socket), "
                  f"descriptors {fds0} -> {fds1}, the connected client served in {took:.2f} s, "
                  f"stopped in {stopped} with the flood connected", flush=True)
            for s in held:
                s.close()
        finally:
            if broker.poll() is None:
                broker.kill()
                broker.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--sockets", type=int, default=1500)
    ap.add_argument("--max-connections", type=int, default=2000)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for binary in args.binaries:
        run(binary, args.sockets, args.max_connections)


if __name__ == "__main__":
    main()
