"""Requests that ask a broker for too much: a 2 GiB Fetch, a CreateTopics of
2^31-1 partitions and a compressed batch that inflates 1000x. Per case, the
broker's memory and descriptors, its answer, and whether another client is
served meanwhile (bench/flood.py has the connection flood and the slowloris
handshake).

Usage: target/pyenv/bin/python bench/abuse.py BIN [BIN...] [--kafka JARS_DIR]
           [--cases fetch-2gib,fetch-2gib-unread,create-topics-2^31-1,inflate-1000x]
           [--fetch-mb 300] [--fetch-sockets 8] [--inflate-mib 60,960]
           [--inflate-sockets 4] [--inflate-sends 3]

Every case runs against a fresh broker (`sediment serve --config` with a TOML
file of its own, PLAINTEXT on a free port, data in a temporary directory;
with --kafka, also Apache Kafka from that directory of jars, as
`scripts/kafka-jars.sh` prints it, in KRaft combined mode with -Xmx1g). The
requests are built by hand with `struct`:

- fetch-2gib: 300 MB (--fetch-mb) of 16 KiB records in one partition, then 8
  sockets (--fetch-sockets) at once each read the whole partition from offset
  0 with Fetch v11, max_bytes = partition_max_bytes = 2^31-1 (the broker caps
  a response by fetch.max.bytes, 55 MiB by default).
- fetch-2gib-unread: the same 8 sockets each send 4 such Fetch requests from
  offset 0 back to back and read nothing for 5 s, then read the answers:
  what a broker holds for clients that do not read.
- create-topics-2^31-1: CreateTopics v4 with one topic of 2,147,483,647
  partitions, then one with two such topics (their sum overflows an int32),
  3 times each; the answer's error code and time, and the data dir's entries.
- inflate-1000x: Produce v8 of one gzip RecordBatch (magic 2) of 1 MiB
  records of zeros, once inflating to 60 MiB (about 61 KB compressed) and
  once to 960 MiB (about 0.98 MB, under message.max.bytes), from 4 sockets
  (--inflate-sockets) to a partition each, 3 times each (--inflate-sends).

During each case (from when its requests are on the wire) a confluent-kafka
producer and consumer, connected before, write and read back 1,000 records
on another topic. /proc/PID/status is sampled every 20 ms for VmRSS (and the
descriptors in /proc/PID/fd) during the case; "after" is 3 s after its last
answer; VmHWM is the broker's lifetime peak (the fetch case's includes the
load). Prints a table: case, RSS before / peak / after and VmHWM (MiB),
descriptors before / peak / after, the case's result, the client's seconds.
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
import zlib
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
INT32_MAX = 2**31 - 1
MIB = 1 << 20
CASES = ["fetch-2gib", "fetch-2gib-unread", "create-topics-2^31-1", "inflate-1000x"]
KAFKA_JVM = ["-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def rss_kib(pid: int) -> int:
    return status_kib(pid, "VmRSS")


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker not listening on {port}")


def _die_with_parent() -> None:
    """A broker must not outlive this script (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


# --------------------------------------------------------------------------- brokers


class Broker:
    """A broker on a free port with its data in `workdir`/data."""

    name = ""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.data = workdir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "broker.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def popen(self, cmd: list[str]) -> None:
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def panicked(self) -> str:
        text = self.log.read_text(errors="replace")
        lines = [l for l in text.splitlines() if "panicked" in l or "OutOfMemoryError" in l]
        return "; ".join(lines[:3])


class Sediment(Broker):
    def __init__(self, workdir: Path, binary: str) -> None:
        super().__init__(workdir)
        self.binary = binary
        self.name = f"sediment ({binary})"

    def start(self) -> None:
        conf = self.workdir / "server.toml"
        conf.write_text(f'listeners = "PLAINTEXT://127.0.0.1:{self.port}"\n'
                        f'log.dirs = "{self.data}"\n'
                        'metrics.listen = ""\n')
        self.popen([self.binary, "serve", "--config", str(conf)])


class Kafka(Broker):
    def __init__(self, workdir: Path, jars: str) -> None:
        super().__init__(workdir)
        self.jars = jars
        self.name = "kafka 4.1.2"

    def start(self) -> None:
        cport = free_port()
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{cport}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        conf = self.workdir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        java = ["java", *KAFKA_JVM, f"-Dlog4j2.configurationFile={ROOT}/tools/kafka-jars/log4j2.properties",
                "-cp", f"{self.jars}/*"]
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        subprocess.run([*java, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster}",
                        "-c", str(conf), "--standalone"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.popen([*java, "kafka.Kafka", str(conf)])


# --------------------------------------------------------------------------- sampling and the other client


class Sampler:
    """VmRSS and descriptors of `pid` every 20 ms while in the `with`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss = 0
        self.peak_fds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_rss = max(self.peak_rss, rss_kib(self.pid))
                self.peak_fds = max(self.peak_fds, fds(self.pid))
            except (OSError, StopIteration):
                return
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class Client:
    """A producer and a consumer of topic `other`, connected before the case."""

    def __init__(self, port: int) -> None:
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 3}
        self.producer = Producer({**conf, "acks": "all"})
        self.consumer = Consumer({**conf, "group.id": "abuse", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition("other", 0, 0)])
        self.read = 0

    def served(self) -> float:
        """Seconds to produce 1,000 records and read them back."""
        start = time.monotonic()
        for i in range(1000):
            self.producer.produce("other", key=str(i).encode(), value=b"v" * 100)
        assert self.producer.flush(120) == 0, "not every record was delivered"
        want = self.read + 1000
        while self.read < want and time.monotonic() - start < 120:
            self.read += len([m for m in self.consumer.consume(1000, 1.0) if m.error() is None])
        assert self.read == want, f"read {self.read} of {want}"
        return time.monotonic() - start

    def close(self) -> None:
        self.consumer.close()


class Background(threading.Thread):
    """Client.served() in a thread: its seconds, or the error it met."""

    def __init__(self, client: Client) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.result = "not run"

    def run(self) -> None:
        try:
            self.result = f"{self.client.served():.3f}"
        except Exception as e:  # noqa: BLE001 - reported in the table
            self.result = f"FAILED: {e}"


# --------------------------------------------------------------------------- the wire


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def frame(api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    """A request with header v1 (non-flexible), size-prefixed."""
    header = struct.pack(">hhi", api_key, version, correlation) + string("abuse")
    return struct.pack(">i", len(header) + len(body)) + header + body


def recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if r == 0:
            raise ConnectionError(f"closed after {got} of {n} bytes")
        got += r
    return buf


def recv_frame(sock: socket.socket) -> bytearray:
    """One response without its size prefix and correlation id."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)[4:]


class Reader:
    def __init__(self, buf: bytes | bytearray) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str):
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = bytes(self.buf[self.pos:self.pos + n]).decode(errors="replace")
        self.pos += n
        return s


def fetch_request(topic: str, offset: int, correlation: int) -> bytes:
    """Fetch v11, sessionless, 2^31-1 bytes asked for overall and for the partition."""
    body = struct.pack(">iiiibii", -1, 500, 1, INT32_MAX, 0, 0, -1)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">iiqqi", 0, -1, offset, -1, INT32_MAX)
    body += struct.pack(">i", 0) + string("")  # no forgotten topics, rack ""
    return frame(1, 11, correlation, body)


def parse_fetch(buf: bytearray) -> tuple[int, int, int, int]:
    """(error code, records bytes, next offset after the whole batches, high watermark)."""
    r = Reader(buf)
    _throttle, top_error, _session = r.take(">ihi")
    if top_error:
        return top_error, 0, -1, -1
    assert r.take(">i") == 1
    r.string()
    assert r.take(">i") == 1
    _part, error, hw, _lso, _start = r.take(">ihqqq")
    aborted = r.take(">i")
    r.pos += max(aborted, 0) * 16
    _preferred, size = r.take(">ii")
    size = max(size, 0)
    start, end = r.pos, r.pos + size
    nxt, p = -1, start
    while p + 12 <= end:
        base, length = struct.unpack_from(">qi", buf, p)
        if p + 12 + length > end:
            break  # a partial batch at the end of the response
        (last_delta,) = struct.unpack_from(">i", buf, p + 23)
        nxt = base + last_delta + 1
        p += 12 + length
    return error, size, nxt, hw


def create_topics_request(topics: list[tuple[str, int]], correlation: int) -> bytes:
    """CreateTopics v4 (the last non-flexible), replication factor 1, not validate-only."""
    body = struct.pack(">i", len(topics))
    for name, partitions in topics:
        body += string(name) + struct.pack(">ihii", partitions, 1, 0, 0)
    body += struct.pack(">ib", 30000, 0)
    return frame(19, 4, correlation, body)


def parse_create_topics(buf: bytearray) -> list[tuple[int, str | None]]:
    r = Reader(buf)
    r.take(">i")
    out = []
    for _ in range(r.take(">i")):
        r.string()
        out.append((r.take(">h"), r.string()))
    return out


def produce_request(topic: str, partition: int, batch: bytes, correlation: int) -> bytes:
    """Produce v8 (the last non-flexible), acks=1."""
    body = struct.pack(">hhi", -1, 1, 30000)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">ii", partition, len(batch)) + batch
    return frame(0, 8, correlation, body)


def parse_produce(buf: bytearray) -> tuple[int, str | None]:
    r = Reader(buf)
    assert r.take(">i") == 1
    r.string()
    assert r.take(">i") == 1
    _part, error, _base, _append, _start = r.take(">ihqqq")
    for _ in range(max(r.take(">i"), 0)):
        r.take(">i")
        r.string()
    return error, r.string()


# --------------------------------------------------------------------------- a gzip batch


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def gzip_batch(records: int, value_bytes: int) -> bytes:
    """One magic-2 RecordBatch, gzip (codec 1), of `records` key-less records
    whose values are `value_bytes` zeros: it inflates about 1000x."""
    zeros = bytes(value_bytes)
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip stream, as Kafka's GZIPOutputStream
    parts = []
    for i in range(records):
        rec = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(value_bytes)
        size = len(rec) + value_bytes + 1  # + the headers count
        parts.append(gz.compress(varint(size) + rec))
        parts.append(gz.compress(zeros))
        parts.append(gz.compress(varint(0)))
    parts.append(gz.flush())
    compressed = b"".join(parts)
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 1, records - 1, now, now, -1, -1, -1, records) + compressed
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc32c(after_crc)) + after_crc


# --------------------------------------------------------------------------- cases


class Result:
    def __init__(self) -> None:
        self.text = ""
        self.seconds = 0.0
        self.client = "not run"


def load(port: int, topic: str, mb: int) -> None:
    """`mb` MB of 16 KiB records into partition 0 of `topic`, as fast as librdkafka sends."""
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1", "linger.ms": 50, "log_level": 3,
                  "batch.size": 1000000, "queue.buffering.max.kbytes": 1048576,
                  "queue.buffering.max.messages": 1000000})
    block = os.urandom(1 << 20)
    n = mb * 1000000 // 16384
    for i in range(n):
        off = (i * 16384) % ((1 << 20) - 16384)
        while True:
            try:
                p.produce(topic, value=block[off:off + 16384], partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0, "the load was not all delivered"


def fetch_reader(port: int, topic: str, out: list, idx: int) -> None:
    """Read `topic` from offset 0 to its high watermark with 2^31-1-byte Fetch requests."""
    sizes, errors, offset, corr = [], set(), 0, 0
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            while True:
                corr += 1
                s.sendall(fetch_request(topic, offset, corr))
                error, size, nxt, hw = parse_fetch(recv_frame(s))
                sizes.append(size)
                errors.add(error)
                if error or nxt < 0 or nxt >= hw:
                    break
                offset = nxt
        out[idx] = (sizes, errors, None)
    except Exception as e:  # noqa: BLE001 - reported
        out[idx] = (sizes, errors, e)


def case_fetch(broker: Broker, client: Client, args, res: Result) -> None:
    readers = [None] * args.fetch_sockets
    threads = [threading.Thread(target=fetch_reader, args=(broker.port, "big", readers, i))
               for i in range(args.fetch_sockets)]
    start = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.2)
    bg = Background(client)
    bg.start()
    for t in threads:
        t.join()
    res.seconds = time.monotonic() - start
    bg.join()
    res.client = bg.result
    sizes = [s for r in readers for s in r[0]]
    errors = set().union(*(r[1] for r in readers))
    failed = [r[2] for r in readers if r[2] is not None]
    res.text = (f"{len(sizes)} responses, largest {max(sizes, default=0) / MIB:.1f} MiB, "
                f"first {readers[0][0][0] / MIB if readers[0][0] else 0:.1f} MiB, "
                f"{sum(sizes) / 1e6:,.0f} MB in {res.seconds:.1f} s, error codes {sorted(errors)}"
                + (f", FAILED: {failed[0]}" if failed else ""))


def case_fetch_unread(broker: Broker, client: Client, args, res: Result) -> None:
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(args.fetch_sockets)]
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"".join(fetch_request("big", 0, c) for c in range(1, 5)))
    bg = Background(client)
    bg.start()
    time.sleep(5.0)  # nothing read: the broker's sends block
    bg.join()
    res.client = bg.result
    sizes, errors, failed = [], set(), None
    for s in socks:
        try:
            for _ in range(4):
                error, size, _, _ = parse_fetch(recv_frame(s))
                sizes.append(size)
                errors.add(error)
        except Exception as e:  # noqa: BLE001 - reported
            failed = failed or e
        s.close()
    res.text = (f"{len(sizes)} of {4 * len(socks)} answers, largest {max(sizes, default=0) / MIB:.1f} MiB, "
                f"error codes {sorted(errors)}" + (f", FAILED: {failed}" if failed else ""))


def case_create_topics(broker: Broker, client: Client, args, res: Result) -> None:
    before = set(os.listdir(broker.data))
    variants = {"one topic": [("huge", INT32_MAX)], "two topics": [("huge-a", INT32_MAX), ("huge-b", INT32_MAX)]}
    answers: dict[str, list] = {}
    times = []
    bg = None
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        s.settimeout(120)
        corr = 0
        for label, topics in variants.items():
            for _ in range(3):
                corr += 1
                t0 = time.monotonic()
                s.sendall(create_topics_request(topics, corr))
                if bg is None:
                    bg = Background(client)
                    bg.start()
                answers.setdefault(label, []).append(parse_create_topics(recv_frame(s)))
                times.append(time.monotonic() - t0)
    bg.join()
    res.client = bg.result
    time.sleep(1.0)
    new = sorted(set(os.listdir(broker.data)) - before)
    parts = []
    for label, got in answers.items():
        codes = ",".join("/".join(str(c) for c, _ in a) for a in got)
        messages = sorted({m for a in got for _, m in a if m})
        parts.append(f"{label}: {codes} ({' | '.join(messages)})")
    res.text = (f"error codes, {'; '.join(parts)}; answered in {min(times) * 1000:.1f} to "
                f"{max(times) * 1000:.1f} ms; new entries in the data dir: {new or 'none'}")


def inflate_sender(port: int, partition: int, batch: bytes, sends: int, out: list) -> None:
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.settimeout(300)
            for c in range(1, sends + 1):
                s.sendall(produce_request("inflate", partition, batch, c))
                out.append(parse_produce(recv_frame(s)))
    except Exception as e:  # noqa: BLE001 - reported
        out.append((None, f"FAILED: {e}"))


def case_inflate(broker: Broker, client: Client, args, res: Result, batch: bytes) -> None:
    answers: list = []
    threads = [threading.Thread(target=inflate_sender, args=(broker.port, i, batch, args.inflate_sends, answers))
               for i in range(args.inflate_sockets)]
    start = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.05)
    bg = Background(client)
    bg.start()
    for t in threads:
        t.join()
    res.seconds = time.monotonic() - start
    bg.join()
    res.client = bg.result
    codes = sorted({c for c, _ in answers if c is not None})
    messages = sorted({m for _, m in answers if m})
    res.text = (f"{len(answers)} produces, error codes {codes}"
                + (f" ({messages[0]!r})" if messages else "") + f", {res.seconds:.1f} s")


# --------------------------------------------------------------------------- a run


def run_case(make: callable, case: str, args, label: str, batch: bytes | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="abuse-") as tmp:
        broker = make(Path(tmp))
        try:
            broker.start()
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}", "log_level": 3})
            topics = [NewTopic("other", 1, 1), NewTopic("big", 1, 1),
                      NewTopic("inflate", args.inflate_sockets, 1)]
            for f in admin.create_topics(topics).values():
                f.result(60)
            client = Client(broker.port)
            client.served()  # connected and warm
            if case.startswith("fetch"):
                load(broker.port, "big", args.fetch_mb)
            time.sleep(1.0)
            pid = broker.pid
            rss0, fds0 = rss_kib(pid), fds(pid)
            res = Result()
            with Sampler(pid) as sampler:
                if case == "fetch-2gib":
                    case_fetch(broker, client, args, res)
                elif case == "fetch-2gib-unread":
                    case_fetch_unread(broker, client, args, res)
                elif case == "create-topics-2^31-1":
                    case_create_topics(broker, client, args, res)
                else:
                    case_inflate(broker, client, args, res, batch)
            time.sleep(3.0)
            alive = broker.proc.poll() is None
            row = {"broker": broker.name, "case": label, "rss": (rss0, sampler.peak_rss, rss_kib(pid) if alive else 0),
                   "hwm": status_kib(pid, "VmHWM") if alive else 0,
                   "fds": (fds0, sampler.peak_fds, fds(pid) if alive else 0),
                   "result": res.text, "client": res.client}
            if not alive:
                row["result"] += f"; BROKER EXITED {broker.proc.returncode}"
            client.close()
            del client, admin  # librdkafka's clients go before the broker does
        finally:
            broker.stop()
        if broker.panicked():
            row["result"] += f"; LOG: {broker.panicked()}"
        return row


def print_table(rows: list[dict]) -> None:
    mib = lambda k: f"{k / 1024:.0f}"  # noqa: E731
    print("\n| broker | case | RSS before / peak / after MiB | VmHWM MiB | descriptors before / peak / after "
          "| result | other client s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        rss = " / ".join(mib(v) for v in r["rss"])
        fd = " / ".join(str(v) for v in r["fds"])
        print(f"| {r['broker']} | {r['case']} | {rss} | {mib(r['hwm'])} | {fd} | {r['result']} | {r['client']} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--kafka", metavar="JARS_DIR", help="also Apache Kafka from these jars")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--fetch-mb", type=int, default=300)
    ap.add_argument("--fetch-sockets", type=int, default=8)
    ap.add_argument("--inflate-mib", default="60,960", help="inflated sizes of the batch, comma-separated")
    ap.add_argument("--inflate-sockets", type=int, default=4)
    ap.add_argument("--inflate-sends", type=int, default=3)
    args = ap.parse_args()
    cases = args.cases.split(",")
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}; known: {CASES}")

    makers = [(lambda w, b=b: Sediment(w, b)) for b in args.binaries]
    if args.kafka:
        makers.append(lambda w: Kafka(w, args.kafka))
    batches = {}
    if "inflate-1000x" in cases:
        for mib in (int(x) for x in args.inflate_mib.split(",")):
            batch = gzip_batch(mib, MIB)
            batches[mib] = batch
            print(f"gzip batch: {mib} records of 1 MiB of zeros, {len(batch):,} bytes, "
                  f"inflates {mib * MIB / len(batch):.0f}x", flush=True)
    rows = []
    for make in makers:
        for case in cases:
            if case == "inflate-1000x":
                for mib, batch in batches.items():
                    rows.append(run_case(make, case, args, f"inflate-1000x ({mib} MiB)", batch))
                    print(rows[-1], flush=True)
            else:
                rows.append(run_case(make, case, args, case))
                print(rows[-1], flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
