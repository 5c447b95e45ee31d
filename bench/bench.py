#!/usr/bin/env python3
"""Side-by-side benchmark of Apache Kafka 4.1.2 and sediment on this machine.

Started by bench/run.sh (which fetches the Kafka jars, builds sediment in
release and compiles bench/BenchClient.java). One broker runs at a time, each
with its own data dir on the same disk and the same settings; the clients are
Apache Kafka's own tools (ProducerPerformance, ConsumerPerformance) and
BenchClient (keyed produce, topic admin, compaction check) from the same jars.

Phases, per broker:
  produce   ProducerPerformance, 1 KiB records, acks=all, to a 1- and an
            8-partition topic: records/s, MB/s, avg/p50/p99/max latency.
  consume   ConsumerPerformance (with a consumer group) reads both topics back.
  txn       ProducerPerformance in transactional mode (--transactional-id,
            --transaction-duration-ms, default 100: a commit every 100 ms) to
            fresh topics of the same partition counts.
  compaction
            keyed records (RECORDS over KEYS keys, 1 KiB values) to a compacted
            topic created with min.cleanable.dirty.ratio=1.0, so the cleaner
            leaves it alone while it is written. The broker is then stopped
            and the partition dir copied as written; the same bytes are
            cleaned twice, each time on a broker restarted on them: warm (the
            log still in the page cache from being written and copied), then,
            after the copy is put back and the partition's cleaner checkpoint
            entry removed, cold (page cache dropped right before the clean:
            `sync; echo 1 > /proc/sys/vm/drop_caches`, else posix_fadvise
            DONTNEED per file). A clean is timed from setting the ratio to 0.5
            until the log is fully cleaned: the log dir's
            cleaner-offset-checkpoint (same file and format in both brokers)
            has reached the active segment's base offset and no .cleaned/.swap
            file is left; the broker's CPU, peak RSS and /proc/<pid>/io are
            taken over the same span. Then the topic is read back to check one
            record per key below the checkpoint. --profile-clean records
            `perf record -g` of the broker during the warm clean (and
            during changelog round 1). A clean that
            does not finish within --clean-timeout fails the broker's run.
  changelog a changelog: --changelog-keys keys written once and cleaned (round
            0), then --changelog-rounds rounds that each update the same
            --changelog-hot-percent of the keys (spread evenly over the key
            space), each followed by a clean. Written with the ratio at 1.0;
            then the active segment is rolled (segment.ms=1 and a marker
            record, then segment.ms back to 7 days) and the ratio set to 0:
            the round is timed from there to fully cleaned, with the broker's
            /proc/<pid>/io over the same span. --changelog-garbage-ratio R
            creates sediment's topic (not Kafka's: Kafka rejects the key) with
            sediment.compaction.min.segment.garbage.ratio=R.
  ssl       produce and consume as above (the same records, to fresh topics
            of --ssl-partitions, default 1) over a second listener, SSL, with
            the same PEM key store in both brokers: a CA and a server
            certificate (RSA 2048, SANs localhost and 127.0.0.1, unencrypted
            PKCS#8 key) made with `openssl` in the work dir at start. The
            clients use security.protocol=SSL and the CA as a PEM trust store
            (host name verification on). An unencrypted key because no
            encrypted PEM key is read by both: Kafka 4.1.2 on JDK 17 has no
            PBES2 SecretKeyFactory, sediment reads PBES2 only. The suite each
            broker picks for a client offering Java's TLS 1.3 order is
            recorded with `openssl s_client`. The SSL listener exists only
            with this phase (--no-ssl leaves the brokers as before).
  consume-cpu
            broker CPU per GB consumed: topics of --cpu-partitions (default
            8 and 100 partitions) get --cpu-records records of 1 KiB
            (ProducerPerformance, not measured), then ConsumerPerformance
            (org.apache.kafka.tools.ConsumerPerformance, with a group) reads
            each back while the broker's utime+stime is taken from
            /proc/<pid>/stat: CPU seconds per GB (2^30 bytes) consumed. With
            many partitions this is where fetch sessions (KIP-227) matter:
            without them every fetch names, and every answer carries, every
            partition. Run once per broker, after the rounds.
--phases picks phases (default: all; `disk` is the raw disk test). A third
broker, sediment-no-sessions (--brokers kafka,sediment,sediment-no-sessions),
is the same sediment binary with max.incremental.fetch.session.cache.slots=0:
`--phases consume-cpu` with it gives the before/after of fetch sessions.
Resources per phase: the broker process's peak RSS (VmHWM, reset at the start
of each phase through /proc/PID/clear_refs) and CPU seconds (utime+stime).
Raw disk: sequential O_DIRECT write and read of a file in the same directory.

MB is 2^20 bytes throughout, as Kafka's perf tools report it.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import mmap
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Settings both brokers get (Kafka names; sediment takes the same keys).
COMMON = {
    "num.partitions": "1",
    "log.segment.bytes": str(128 * MB),
    # Flush policy: Kafka's default, spelled out: no fsync per append, the OS
    # writes the page cache back; a rolled segment is flushed.
    "log.flush.interval.messages": str(2**63 - 1),
    "group.initial.rebalance.delay.ms": "0",
}
CLEANER = {
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(128 * MB),
    "log.cleaner.backoff.ms": "1000",
}
# A third broker --brokers may name: sediment with fetch sessions off.
NO_SESSIONS = "sediment-no-sessions"
# Every phase --phases may name, in the order they run.
PHASES = ("disk", "produce", "consume", "txn", "ssl", "compaction", "changelog", "consume-cpu")
# Kafka's stock JVM flags (kafka-run-class.sh) with a fixed 1 GiB heap, so every
# run measures Kafka in the same configuration.
KAFKA_HEAP = "-Xmx1g"
KAFKA_JVM = "-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- /proc


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


# /proc/<pid>/io: read_bytes/write_bytes are what the process made the block
# layer read, and dirtied in the page cache for writing back (counted when
# dirtied); rchar/wchar are the bytes of its read/write-family system calls
# (sockets included; pages touched through mmap are not).
IO_FIELDS = ("read_bytes", "write_bytes", "rchar", "wchar")


def proc_io(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = int(v)
    return {k: out[k] for k in IO_FIELDS}


def drop_page_cache(paths: list[Path]) -> str:
    """Write back, then evict the page cache: the whole cache through
    /proc/sys/vm/drop_caches (root), else each file under `paths` with
    posix_fadvise(DONTNEED). Returns which one was used."""
    subprocess.run(["sync"], check=True)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
        return "drop_caches"
    except OSError:
        pass
    for root in paths:
        for f in root.rglob("*"):
            if f.is_file():
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
    return "fadvise"


def cached_fraction(files: list[Path]) -> float | None:
    """Share of these files' bytes in the page cache (util-linux fincore)."""
    if not files or not shutil.which("fincore"):
        return None
    p = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *map(str, files)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    res = size = 0
    for line in p.stdout.splitlines():
        a, b = line.split()
        res, size = res + int(a), size + int(b)
    return round(res / size, 3) if size else None


def reset_peak_rss(pid: int) -> None:
    # "5" resets VmHWM to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent not idle, since boot."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = f[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def children_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_idle(max_wait: float, busy_below: float = 0.25) -> float:
    """Wait (up to max_wait s) until the machine is mostly idle: other people's
    builds on a 2-CPU machine would be measured as broker slowness. Returns the
    busy fraction of the last 3 s window."""
    deadline = time.monotonic() + max_wait
    ncpu = os.cpu_count() or 1
    while True:
        b0 = machine_busy_seconds()
        time.sleep(3)
        frac = (machine_busy_seconds() - b0) / 3 / ncpu
        if frac < busy_below or time.monotonic() >= deadline:
            return frac
        log(f"machine {100 * frac:.0f}% busy with other work; waiting for it to calm down")


class Phase:
    """Peak RSS and CPU seconds of a broker process over one phase, plus the
    clients' CPU (this script's finished children) and everything else the
    machine did meanwhile (other people's work: a noise flag)."""

    def __init__(self, pid: int):
        self.pid = pid

    def __enter__(self):
        subprocess.run(["sync"], check=False)  # the previous phase's writeback is not this phase's cost
        reset_peak_rss(self.pid)
        self.io0 = proc_io(self.pid)
        self.cpu0 = cpu_seconds(self.pid)
        self.children0 = children_cpu_seconds()
        self.busy0 = machine_busy_seconds()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.wall = time.monotonic() - self.t0
        self.cpu = cpu_seconds(self.pid) - self.cpu0
        self.client_cpu = children_cpu_seconds() - self.children0
        self.other_cpu = max(0.0, machine_busy_seconds() - self.busy0 - self.cpu - self.client_cpu)
        self.peak_rss_mb = status_kb(self.pid, "VmHWM") / 1024
        io = proc_io(self.pid)
        self.io = {k: io[k] - self.io0[k] for k in IO_FIELDS}
        return False

    def as_dict(self) -> dict:
        return {"wall_s": round(self.wall, 2), "cpu_s": round(self.cpu, 2), "peak_rss_mb": round(self.peak_rss_mb, 1),
                "client_cpu_s": round(self.client_cpu, 2), "other_cpu_s": round(self.other_cpu, 2), "io": self.io}


# --------------------------------------------------------------------------- tools


class Tools:
    def __init__(self, jars: Path, classes: Path, workdir: Path):
        self.jars = jars
        self.classes = classes
        self.workdir = workdir

    def java(self, main: str, args: list[str], log_name: str, heap: str = "-Xmx1g", timeout: float = 900) -> str:
        cmd = ["java", heap, "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={ROOT}/tools/kafka-jars/log4j2.properties",
               "-cp", f"{self.classes}:{self.jars}/*", main, *args]
        with open(self.workdir / f"{log_name}.stderr", "w") as err:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
        (self.workdir / f"{log_name}.stdout").write_text(p.stdout)
        if p.returncode != 0:
            tail = (self.workdir / f"{log_name}.stderr").read_text()[-3000:]
            raise RuntimeError(f"{main} {' '.join(args)} exited {p.returncode}:\n{tail}")
        return p.stdout

    def client(self, args: list[str], log_name: str) -> dict:
        out = self.java("BenchClient", args, log_name)
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


PRODUCER_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def producer_perf(tools: Tools, bootstrap: str, topic: str, records: int, name: str,
                  txn: tuple[str, int] | None = None, config: Path | None = None, throughput: int = -1) -> dict:
    """`txn`: (transactional id, transaction duration ms) for ProducerPerformance's
    transactional mode (a commit every duration). `config`: a client properties
    file (the SSL phase's security settings). `throughput`: records/s, -1 for
    as fast as the broker takes them."""
    extra = ["--transactional-id", txn[0], "--transaction-duration-ms", str(txn[1])] if txn else []
    if config:
        extra += ["--producer.config", str(config)]
    out = tools.java(
        "org.apache.kafka.tools.ProducerPerformance",
        ["--topic", topic, "--num-records", str(records), "--record-size", "1024", "--throughput", str(throughput), *extra,
         "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"],
        name,
    )
    m = None
    for line in out.splitlines():
        m = PRODUCER_RE.search(line) or m
    if not m:
        raise RuntimeError(f"no summary line in ProducerPerformance output:\n{out[-2000:]}")
    g = m.groups()
    return {"records": int(g[0]), "records_per_s": float(g[1]), "mb_per_s": float(g[2]), "avg_ms": float(g[3]),
            "max_ms": float(g[4]), "p50_ms": float(g[5]), "p95_ms": float(g[6]), "p99_ms": float(g[7]), "p999_ms": float(g[8])}


def consumer_perf(tools: Tools, bootstrap: str, topic: str, records: int, group: str, name: str,
                  config: Path | None = None) -> dict:
    extra = ["--consumer.config", str(config)] if config else []
    out = tools.java(
        "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records), "--group", group, "--timeout", "30000", *extra],
        name,
    )
    lines = [l for l in out.splitlines() if l.strip()]
    header = next(i for i, l in enumerate(lines) if l.startswith("start.time"))
    keys = [k.strip() for k in lines[header].split(",")]
    vals = [v.strip() for v in lines[header + 1].split(",")]
    row = dict(zip(keys, vals))
    return {"mb": float(row["data.consumed.in.MB"]), "mb_per_s": float(row["MB.sec"]), "records": int(row["data.consumed.in.nMsg"]),
            "records_per_s": float(row["nMsg.sec"]), "rebalance_ms": float(row["rebalance.time.ms"]),
            "fetch_ms": float(row["fetch.time.ms"]), "fetch_mb_per_s": float(row["fetch.MB.sec"])}


# --------------------------------------------------------------------------- TLS

# The TLS 1.3 suites in the order Java 17's client offers them.
JAVA_TLS13_ORDER = "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"


class Tls:
    """A CA and a server certificate for this run, made with openssl; the SSL
    listener's keys (Kafka's names, the same for both brokers) and the clients'
    properties file."""

    def __init__(self, workdir: Path):
        d = workdir / "tls"
        d.mkdir(parents=True, exist_ok=True)

        def openssl(*args: str) -> None:
            p = subprocess.run(["openssl", *args], cwd=d, capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"openssl {' '.join(args)} exited {p.returncode}:\n{p.stderr[-2000:]}")

        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "7",
                "-subj", "/CN=sediment bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        # OpenSSL 3 writes the key as unencrypted PKCS#8 (BEGIN PRIVATE KEY).
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=localhost")
        (d / "server-ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
                "-out", "server-cert.pem", "-days", "7", "-extfile", "server-ext.cnf")
        self.ca = d / "ca.pem"
        self.keystore = d / "server.pem"
        self.keystore.write_text((d / "server-key.pem").read_text() + (d / "server-cert.pem").read_text())
        self.broker_keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore)}
        self.client_config = d / "client-ssl.properties"
        self.client_config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={self.ca}\n")

    def negotiated(self, port: int) -> str:
        """Protocol and suite the broker picks for a client offering Java's TLS 1.3 order."""
        p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", str(self.ca), "-verify_return_error",
                            "-ciphersuites", JAVA_TLS13_ORDER, "-brief"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        text = p.stdout + p.stderr
        proto = re.search(r"Protocol version: (\S+)", text)
        suite = re.search(r"Ciphersuite: (\S+)", text)
        if p.returncode != 0 or not proto or not suite:
            raise RuntimeError(f"openssl s_client to 127.0.0.1:{port} failed:\n{text[-2000:]}")
        return f"{proto.group(1)} {suite.group(1)}"


# --------------------------------------------------------------------------- brokers


def _die_with_parent() -> None:
    """A broker must not outlive this script (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class Broker:
    name = ""

    def __init__(self, workdir: Path, data: Path, tls: Tls | None):
        self.workdir = workdir
        self.data = data
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        # A second listener, SSL, for the SSL phase only.
        self.tls = tls
        self.ssl_port = free_port() if tls else None
        self.ssl_bootstrap = f"127.0.0.1:{self.ssl_port}" if tls else None
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.proc
        return self.proc.pid

    def wait_listening(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        for port in (self.port, self.ssl_port):
            while port is not None:
                if self.proc and self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.workdir}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() >= deadline:
                        raise RuntimeError(f"{self.name} did not listen on {port} within {timeout}s") from None
                    time.sleep(0.1)

    def stop(self) -> float:
        if not self.proc or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            log(f"{self.name} did not stop in 120s; killing it")
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - t0


class Kafka(Broker):
    name = "kafka"

    def __init__(self, workdir: Path, data: Path, tools: Tools, tls: Tls | None):
        super().__init__(workdir, data, tls)
        self.tools = tools
        self.cport = free_port()

    def start(self) -> None:
        """Format the data dir on the first start; later starts reopen it."""
        if self.proc is not None:
            self.restart()
            return
        self.data.mkdir(parents=True)
        ssl = f",SSL://127.0.0.1:{self.ssl_port}" if self.tls else ""
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.cport}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}{ssl},CONTROLLER://127.0.0.1:{self.cport}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}{ssl}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT" + (",SSL:SSL" if self.tls else ""),
            **(self.tls.broker_keys if self.tls else {}),
            "log.dirs": str(self.data),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **COMMON,
            **CLEANER,
        }
        conf = self.workdir / "kafka-server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.tools.java("kafka.tools.StorageTool", ["format", "--cluster-id=" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="), "-c", str(conf), "--standalone"],
                        "kafka-format", heap="-Xmx256m")
        self.cmd = ["java", KAFKA_HEAP, *KAFKA_JVM.split(), "-Djava.awt.headless=true",
                    f"-Dlog4j2.configurationFile={ROOT}/tools/kafka-jars/log4j2.properties",
                    "-cp", f"{self.tools.jars}/*", "kafka.Kafka", str(conf)]
        self.restart()

    def restart(self) -> None:
        env = dict(os.environ, KAFKA_LOG_LEVEL="INFO")  # Kafka's stock server.log level
        self.logfile = open(self.workdir / "kafka-broker.log", "a")
        self.proc = subprocess.Popen(self.cmd, stdout=self.logfile, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
        self.wait_listening()

    def cleaner_note(self, partition: str = "bench-compact-0") -> str:
        """Kafka's own cleaner stats line(s) for the partition, for the record."""
        text = (self.workdir / "kafka-broker.log").read_text(errors="replace")
        m = re.findall(rf"cleaned log {re.escape(partition)} \(dirty section[^)]*\)\s*"
                       r"([\d,.]+ MB of log processed in [\d,.]+ seconds \([\d,.]+ MB/sec\))", text)
        return "; ".join(m)


class Sediment(Broker):
    name = "sediment"

    def __init__(self, workdir: Path, data: Path, binary: Path, cleaner: bool, tls: Tls | None):
        super().__init__(workdir, data, tls)
        self.binary = binary
        self.cleaner = cleaner
        # --sediment-override KEY=VALUE, last word over the bench's own keys.
        self.extra: dict[str, str] = {}
        # The Prometheus endpoint stays on (as deployed), on a port of its own:
        # its default 9404 may be taken by another broker on this machine.
        self.metrics = f"127.0.0.1:{free_port()}" if sediment_knows(binary, workdir, {"metrics.listen": "127.0.0.1:1"}) else None

    def overrides(self) -> list[str]:
        keys = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": str(self.data), **COMMON}
        if self.tls:
            keys["listeners"] += f",SSL://127.0.0.1:{self.ssl_port}"
            keys["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SSL:SSL"
            keys.update(self.tls.broker_keys)
        if self.metrics:
            keys["metrics.listen"] = self.metrics
        if self.cleaner:
            keys.update(CLEANER)
        keys.update(self.extra)
        out = []
        for k, v in keys.items():
            out += ["--override", f"{k}={v}"]
        return out

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        self.logfile = open(self.workdir / f"{self.name}-broker.log", "a")
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        self.proc = subprocess.Popen([str(self.binary), "serve", *self.overrides()], stdout=self.logfile, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=_die_with_parent)
        self.wait_listening()

    def cleaner_note(self, partition: str = "") -> str:
        return ""


def sediment_knows(binary: Path, workdir: Path, keys: dict) -> bool:
    empty = workdir / "empty.toml"
    empty.write_text("")
    args = [str(binary), "check-config", str(empty)]
    for k, v in keys.items():
        args += ["--override", f"{k}={v}"]
    return subprocess.run(args, capture_output=True).returncode == 0


def sediment_cleaner_support(binary: Path, workdir: Path) -> tuple[bool, str]:
    """Whether this sediment build knows the cleaner's broker keys."""
    empty = workdir / "empty.toml"
    empty.write_text("")
    args = [str(binary), "check-config", str(empty)]
    for k, v in CLEANER.items():
        args += ["--override", f"{k}={v}"]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode == 0:
        return True, ""
    msg = (p.stderr or p.stdout).strip()
    for line in msg.splitlines():
        if any(k in line for k in CLEANER):
            return False, line.strip()
    raise RuntimeError(f"{binary} check-config failed for another reason (not a sediment serve binary?):\n{msg}")


# --------------------------------------------------------------------------- compaction


def read_cleaner_checkpoint(data: Path, topic: str, partition: int) -> int | None:
    path = data / "cleaner-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
            return int(parts[2])
    return None


def segments(pdir: Path) -> list[tuple[int, int]]:
    """(base offset, size) of the live segments, oldest first."""
    out = []
    for f in pdir.iterdir():
        if f.name.endswith(".log") and len(f.name) == 24:
            try:
                out.append((int(f.name[:20]), f.stat().st_size))
            except FileNotFoundError:
                pass
    return sorted(out)


def in_progress_files(pdir: Path) -> list[str]:
    return [f.name for f in pdir.iterdir() if f.name.endswith((".cleaned", ".swap"))]


def forget_cleaner_checkpoint(data: Path, topic: str, partition: int) -> None:
    """Drop the partition's entry from the log dir's cleaner-offset-checkpoint
    (the broker is stopped), so the next clean starts at the log start."""
    path = data / "cleaner-offset-checkpoint"
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    keep = [l for l in lines[2:] if l.split()[:2] != [topic, str(partition)]]
    path.write_text("\n".join([lines[0], str(len(keep)), *keep]) + "\n")


def wait_quiet(pid: int, limit: float = 30) -> float:
    """Wait (up to `limit` s) until the broker uses under 10% of a CPU over a
    second: a JVM that has just started is still compiling its start-up code,
    which is not the clean's cost. Returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        c0 = cpu_seconds(pid)
        time.sleep(1)
        if cpu_seconds(pid) - c0 < 0.1:
            break
    return round(time.monotonic() - t0, 1)


def warm_up_cleaner(broker: Broker, tools: Tools, args, tag: str) -> float:
    """A small compacted topic written and cleaned on a freshly started broker
    before a timed clean: a long-running Kafka has its cleaner's code compiled
    by the JIT, a JVM that has just started compiles it during its first
    clean. Both brokers get it. Returns the seconds it took."""
    t0 = time.monotonic()
    topic = f"bench-warmup-{tag}"
    pdir = broker.data / f"{topic}-0"
    tools.client(["create", broker.bootstrap, topic, "1", "cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01",
                  f"segment.bytes={4 * MB}"], f"{broker.name}-{topic}-create")
    tools.client(["keyed-produce", broker.bootstrap, topic, "40000", "4000", "1024"], f"{broker.name}-{topic}-produce")
    tools.client(["roll", broker.bootstrap, topic, str(pdir), "segment.ms=604800000"], f"{broker.name}-{topic}-roll")
    wait_cleaned(broker, topic, pdir, args.clean_timeout)
    return round(time.monotonic() - t0, 1)


def restart(broker: Broker, tools: Tools, why: str) -> None:
    broker.stop()
    broker.start()
    tools.client(["ready", broker.bootstrap, "-"], f"{broker.name}-ready-{why}")


def wait_cleaned(broker: Broker, topic: str, pdir: Path, timeout: float, at_least: int | None = None) -> int:
    """Wall clock (ms) when the partition is fully cleaned: the checkpoint has
    reached the active segment's base offset (and `at_least`) and no
    .cleaned/.swap file is left. Raises when that takes over `timeout` s: a
    figure for a clean that did not finish would be nonsense."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        segs = segments(pdir)
        cp = read_cleaner_checkpoint(broker.data, topic, 0)
        if segs and cp is not None and cp >= max(segs[-1][0], at_least or 0) and not in_progress_files(pdir):
            return int(time.time() * 1000)
        if broker.proc and broker.proc.poll() is not None:
            raise RuntimeError(f"{broker.name} exited with {broker.proc.returncode} while cleaning {topic}")
        time.sleep(0.02)
    segs = segments(pdir)
    raise RuntimeError(f"{broker.name}: {topic} not fully cleaned within {timeout:g}s (--clean-timeout): cleaner checkpoint "
                       f"{read_cleaner_checkpoint(broker.data, topic, 0)}, active segment base {segs[-1][0] if segs else None}, "
                       f"in progress {in_progress_files(pdir)}")


class Perf:
    """`perf record -g` of the broker process while it cleans; its top entries."""

    def __init__(self, pid: int, out: Path):
        self.pid, self.out = pid, out

    def __enter__(self):
        self.log = open(self.out.with_suffix(".log"), "w")
        self.proc = subprocess.Popen(["perf", "record", "-g", "-p", str(self.pid), "-o", str(self.out)],
                                     stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        time.sleep(0.5)  # attached to every thread before the clean starts
        if self.proc.poll() is not None:
            raise RuntimeError(f"perf record exited with {self.proc.returncode}; see {self.log.name}")
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return False

    def report(self, sort: str) -> str:
        p = subprocess.run(["perf", "report", "-i", str(self.out), "--no-children", "--stdio", "-g", "none",
                            "--sort", sort, "--percent-limit", "0.1"], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"perf report of {self.out} exited {p.returncode}:\n{p.stderr[-2000:]}")
        return p.stdout

    def top(self, n: int = 12) -> dict:
        """Self time (`perf report --no-children`): the first n entries by
        shared object and symbol, and the first few by shared object alone and
        by thread name (a JVM's JIT code has no symbols without a perf map;
        its thread names say cleaner, compiler or GC)."""
        rows = []
        for line in self.report("dso,symbol").splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(.*?)\s+\[([.k])\]\s+(.*?)(\s+-\s+-)?\s*$", line)
            if m:
                rows.append({"percent": float(m.group(1)), "dso": m.group(2).strip(), "kernel": m.group(3) == "k",
                             "symbol": m.group(4).strip()[:120]})
        if not rows:
            raise RuntimeError(f"perf report of {self.out} gave no entries")
        return {"symbols": rows[:n], "dsos": self.column("dso"), "threads": self.column("comm")}

    def column(self, sort: str, n: int = 6) -> list[dict]:
        out = []
        for line in self.report(sort).splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s*$", line)
            if m and not line.lstrip().startswith("#"):
                out.append({"percent": float(m.group(1)), "name": m.group(2)})
        return out[:n]


def clean_once(broker: Broker, tools: Tools, topic: str, pdir: Path, args, cold: bool, keys: int) -> tuple[dict, dict]:
    """Let the cleaner clean `topic` (written with min.cleanable.dirty.ratio=1.0:
    it waits) by setting the ratio to 0.5, and measure the clean: cold drops the
    page cache first, warm leaves the log in it. Returns the figures and the
    Phase resources."""
    kind = "cold" if cold else "warm"
    c: dict = {}
    segs = segments(pdir)
    c["segments_before"] = len(segs)
    c["log_bytes_before"] = sum(sz for _, sz in segs)
    c["cleanable_bytes"] = sum(sz for _, sz in segs[:-1])
    closed = [pdir / f"{base:020d}.log" for base, _ in segs[:-1]]
    c["warm_up_s"] = warm_up_cleaner(broker, tools, args, kind)
    c["settle_s"] = wait_quiet(broker.pid)
    if cold:
        c["cache_drop"] = drop_page_cache([pdir])
    profile = Perf(broker.pid, args.workdir / f"perf-{broker.name}-{kind}.data") if args.profile_clean and not cold else None
    with Phase(broker.pid) as ph:
        c["log_cached_at_start"] = cached_fraction(closed)
        with profile or _nothing():
            altered = int(tools.client(["alter", broker.bootstrap, topic, "min.cleanable.dirty.ratio=0.5"],
                                       f"{broker.name}-compact-{kind}-alter")["altered_ms"])
            done_ms = wait_cleaned(broker, topic, pdir, args.clean_timeout)
    cached = c["log_cached_at_start"]
    if cold and cached is not None and cached > 0.2:
        raise RuntimeError(f"{broker.name}: the cold clean started with {100 * cached:.0f}% of the log in the page cache")
    if not cold and cached is not None and cached < 0.9:
        log(f"{broker.name}: warning: the warm clean started with only {100 * cached:.0f}% of the log in the page cache")
    c["seconds_from_config_change"] = (done_ms - altered) / 1000
    c["cleaner_mb_per_s"] = c["cleanable_bytes"] / MB / max(c["seconds_from_config_change"], 1e-3)
    c["cpu_s_per_gb"] = ph.cpu / (c["cleanable_bytes"] / 2**30)
    c["io"] = ph.io
    if profile:
        c["profile"] = profile.top()
    segs = segments(pdir)
    c["segments_after"] = len(segs)
    c["log_bytes_after"] = sum(sz for _, sz in segs)
    c["survivor_bytes"] = sum(sz for _, sz in segs[:-1])
    c["checkpoint"] = read_cleaner_checkpoint(broker.data, topic, 0)
    v = tools.client(["verify", broker.bootstrap, topic, str(c["checkpoint"])], f"{broker.name}-compact-{kind}-verify")
    c["verify"] = {k: int(x) for k, x in v.items()}
    c["one_record_per_key"] = v["records_below_checkpoint"] == v["distinct_keys_below_checkpoint"] and int(v["distinct_keys_total"]) == keys
    return c, ph.as_dict()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def compaction(broker: Broker, tools: Tools, args) -> dict:
    """Produce the keyed log once, keep a copy of the partition as written, and
    clean it twice: warm (the log in the page cache, as right after it was
    written), then, from the copy, cold (page cache dropped). Both cleans run on
    a broker restarted on the same bytes."""
    records, keys = args.compact_records, args.compact_keys
    topic = "bench-compact"
    tools.client(["create", broker.bootstrap, topic, "1", "cleanup.policy=compact", "min.cleanable.dirty.ratio=1.0"], f"{broker.name}-compact-create")
    pdir = broker.data / f"{topic}-0"
    res: dict = {}
    with Phase(broker.pid) as produce:
        out = tools.client(["keyed-produce", broker.bootstrap, topic, str(records), str(keys), "1024"], f"{broker.name}-compact-produce")
    res["produce"] = {"records": int(out["records"]), "seconds": float(out["seconds"]), "mb_per_s": float(out["mb_per_sec"])}
    res["produce_resources"] = produce.as_dict()
    segs = segments(pdir)
    if len(segs) < 2:
        raise RuntimeError(f"{broker.name}: everything is in the active segment of {topic}: nothing to clean (more records needed)")
    need, free = sum(sz for _, sz in segs), shutil.disk_usage(broker.data).free
    if free < need + (2 << 30):
        raise RuntimeError(f"{broker.name}: {free / MB:.0f} MB free, the copy of the log needs {need / MB:.0f} MB and 2 GiB to spare")
    # The copy is taken from the stopped broker: closed files, as a restart finds them.
    broker.stop()
    pristine = broker.data.parent / f"{broker.name}-pristine-{topic}-0"
    shutil.rmtree(pristine, ignore_errors=True)
    try:
        subprocess.run(["cp", "-a", str(pdir), str(pristine)], check=True)
        restart(broker, tools, "compact-warm")
        log(f"{broker.name}: {sum(sz for _, sz in segs) / MB:.0f} MB in {len(segs)} segments; warm clean")
        res["warm"], res["warm_resources"] = clean_once(broker, tools, topic, pdir, args, cold=False, keys=keys)
        log(f"{broker.name}: warm: {res['warm']['cleaner_mb_per_s']:.0f} MB/s; restoring the log as written for the cold clean")
        tools.client(["alter", broker.bootstrap, topic, "min.cleanable.dirty.ratio=1.0"], f"{broker.name}-compact-realter")
        broker.stop()
        shutil.rmtree(pdir)
        pristine.rename(pdir)
    finally:
        shutil.rmtree(pristine, ignore_errors=True)
    forget_cleaner_checkpoint(broker.data, topic, 0)
    restart(broker, tools, "compact-cold")
    res["cold"], res["cold_resources"] = clean_once(broker, tools, topic, pdir, args, cold=True, keys=keys)
    log(f"{broker.name}: cold: {res['cold']['cleaner_mb_per_s']:.0f} MB/s (log {100 * (res['cold']['log_cached_at_start'] or 0):.0f}% cached at start)")
    res["kafka_cleaner_log"] = broker.cleaner_note()
    return res


def log_bytes(pdir: Path) -> int:
    return sum(sz for _, sz in segments(pdir))


def changelog(broker: Broker, tools: Tools, args) -> dict:
    """A changelog: every key written once and cleaned (round 0), then rounds
    that update the same hot keys (spread over the key space). Each round is
    written with min.cleanable.dirty.ratio=1.0 (the cleaner waits), the active
    segment is rolled, and the ratio set to 0: the round is timed from that
    change until the checkpoint reaches the new active segment."""
    topic = "bench-changelog"
    keys, size = args.changelog_keys, args.changelog_value_bytes
    hot = max(1, round(keys * args.changelog_hot_percent / 100))
    pdir = broker.data / f"{topic}-0"
    # A sediment-only topic config: Apache Kafka rejects configs it does not know.
    garbage = args.changelog_garbage_ratio if isinstance(broker, Sediment) else None
    extra = [] if garbage is None else [f"sediment.compaction.min.segment.garbage.ratio={garbage}"]
    tools.client(["create", broker.bootstrap, topic, "1", "cleanup.policy=compact", "min.cleanable.dirty.ratio=1.0",
                  "segment.ms=604800000", *extra], f"{broker.name}-changelog-create")
    warm_up_cleaner(broker, tools, args, "changelog")
    res: dict = {"keys": keys, "hot_keys": hot, "value_bytes": size, "garbage_ratio": garbage, "rounds": []}
    for rnd in range(args.changelog_rounds + 1):
        before = log_bytes(pdir)
        if rnd == 0:
            log(f"{broker.name}: changelog: {keys} keys written once")
            out = tools.client(["keyed-produce", broker.bootstrap, topic, str(keys), str(keys), str(size)], f"{broker.name}-changelog-load")
        else:
            tools.client(["alter", broker.bootstrap, topic, "min.cleanable.dirty.ratio=1.0"], f"{broker.name}-changelog-hold-{rnd}")
            log(f"{broker.name}: changelog round {rnd}: {hot} hot keys updated")
            out = tools.client(["update", broker.bootstrap, topic, str(keys), str(hot), str(size), str(rnd)], f"{broker.name}-changelog-update-{rnd}")
        r = {"round": rnd, "records": int(out["records"]), "record_bytes": log_bytes(pdir) - before, "log_bytes_before": log_bytes(pdir)}
        r["settle_s"] = wait_quiet(broker.pid)
        # Round 1 is the one that rewrites the whole log: the one worth a profile.
        profile = Perf(broker.pid, args.workdir / f"perf-{broker.name}-changelog-1.data") if args.profile_clean and rnd == 1 else None
        with Phase(broker.pid) as ph, profile or _nothing():
            rolled = tools.client(["roll", broker.bootstrap, topic, str(pdir), "segment.ms=604800000", "min.cleanable.dirty.ratio=0"],
                                  f"{broker.name}-changelog-roll-{rnd}")
            done_ms = wait_cleaned(broker, topic, pdir, args.clean_timeout, at_least=int(rolled["marker_offset"]))
        if profile:
            r["profile"] = profile.top()
        r["seconds"] = (done_ms - int(rolled["altered_ms"])) / 1000
        r["io"] = ph.io
        # Bytes the broker wrote per byte the round changed (its records' bytes).
        r["written_per_record_byte"] = round(ph.io["write_bytes"] / r["record_bytes"], 3) if r["record_bytes"] else None
        r["cpu_s"] = round(ph.cpu, 2)
        r["log_bytes_after"] = log_bytes(pdir)
        res["rounds"].append(r)
        res.setdefault("resources", {})[f"changelog round {rnd}"] = ph.as_dict()
        log(f"{broker.name}: changelog round {rnd}: {r['seconds']:.2f}s, wrote {r['io']['write_bytes'] / MB:.0f} MB for "
            f"{r['record_bytes'] / MB:.0f} MB of records")
    cp = read_cleaner_checkpoint(broker.data, topic, 0)
    v = tools.client(["verify", broker.bootstrap, topic, str(cp)], f"{broker.name}-changelog-verify")
    res["verify"] = {k: int(x) for k, x in v.items()}
    # Every key, plus the roll markers' key.
    res["one_record_per_key"] = v["records_below_checkpoint"] == v["distinct_keys_below_checkpoint"] and int(v["distinct_keys_total"]) == keys + 1
    return res


# --------------------------------------------------------------------------- raw disk


def raw_disk(directory: Path, size_mb: int) -> dict:
    """Sequential write then read with O_DIRECT (no page cache) in 4 MiB blocks."""
    block = 4 * MB
    buf = mmap.mmap(-1, block)
    buf.write(os.urandom(block))
    path = directory / "raw-disk.tmp"
    n = max(1, size_mb * MB // block)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, buf)
        os.fsync(fd)
        write_s = time.perf_counter() - t0
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        t0 = time.perf_counter()
        total = 0
        while True:
            r = os.readv(fd, [buf])
            if r <= 0:
                break
            total += r
        read_s = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()
    return {"mb": n * block / MB, "write_mb_per_s": n * block / MB / write_s, "read_mb_per_s": total / MB / read_s}


# --------------------------------------------------------------------------- run




def record_run(res: dict, key: str, phase: str, numbers: dict, ph: Phase) -> None:
    """Keep every run; `res[key]` and `res["phases"][phase]` hold the medians
    (the peak RSS and the other-work CPU: the maxima)."""
    runs = res.setdefault("runs", {}).setdefault(key, [])
    runs.append({**numbers, "resources": ph.as_dict()})
    res[key] = {k: statistics.median(r[k] for r in runs) for k in numbers}
    res[key]["runs"] = len(runs)
    resources = [r["resources"] for r in runs]
    res["phases"][phase] = {
        k: (max if k in ("peak_rss_mb", "other_cpu_s") else statistics.median)(r[k] for r in resources) for k in resources[0]
    }


def run_stage(stage: str, broker: Broker, tools: Tools, args, res: dict, compact: bool) -> None:
    name, _, rep = stage.partition("#")
    if name == "produce":
        for parts in args.partitions:
            topic = f"bench-p{parts}-{rep}"
            tools.client(["create", broker.bootstrap, topic, str(parts)], f"{broker.name}-create-{topic}")
            log(f"{broker.name}: produce {args.records} x 1 KiB to {topic}")
            with Phase(broker.pid) as ph:
                r = producer_perf(tools, broker.bootstrap, topic, args.records, f"{broker.name}-produce-{topic}")
            record_run(res, f"produce_p{parts}", f"produce {parts}p", r, ph)
            log(f"{broker.name}: {r}")
    elif name == "txn":
        for parts in args.partitions:
            topic = f"bench-txn-p{parts}-{rep}"
            tools.client(["create", broker.bootstrap, topic, str(parts)], f"{broker.name}-create-{topic}")
            log(f"{broker.name}: transactional produce {args.records} x 1 KiB to {topic}, a commit every {args.txn_duration_ms} ms")
            with Phase(broker.pid) as ph:
                r = producer_perf(tools, broker.bootstrap, topic, args.records, f"{broker.name}-txn-{topic}",
                                  txn=(f"bench-txn-{parts}-{rep}", args.txn_duration_ms))
            record_run(res, f"txn_produce_p{parts}", f"txn produce {parts}p", r, ph)
            log(f"{broker.name}: {r}")
    elif name == "consume":
        for parts in args.partitions:
            topic = f"bench-p{parts}-{rep}"
            log(f"{broker.name}: consume {topic}")
            with Phase(broker.pid) as ph:
                r = consumer_perf(tools, broker.bootstrap, topic, args.records, f"bench-group-{parts}-{rep}", f"{broker.name}-consume-{topic}")
            record_run(res, f"consume_p{parts}", f"consume {parts}p", r, ph)
            log(f"{broker.name}: {r}")
    elif name == "ssl":
        ssl_stage(broker, tools, args, res, rep)
    elif name == "consume-cpu":
        consume_cpu_stage(broker, tools, args, res)
    elif name == "compaction" and compact:
        log(f"{broker.name}: compaction: {args.compact_records} records over {args.compact_keys} keys")
        c = compaction(broker, tools, args)
        res["compaction"] = c
        res["phases"]["compaction produce"] = c.pop("produce_resources")
        res["phases"]["compaction clean, warm"] = c.pop("warm_resources")
        res["phases"]["compaction clean, cold"] = c.pop("cold_resources")
        log(f"{broker.name}: {json.dumps({k: v for k, v in c.items() if k not in ('warm', 'cold')})}")
    elif name == "changelog" and compact:
        c = changelog(broker, tools, args)
        res["changelog"] = c
        res["phases"].update(c.pop("resources"))


def consume_cpu_stage(broker: Broker, tools: Tools, args, res: dict) -> None:
    """Broker CPU seconds per GB consumed by ConsumerPerformance from topics of
    each of --cpu-partitions; the produce before it is not measured."""
    for parts in args.cpu_partitions:
        topic = f"bench-cpu-p{parts}"
        tools.client(["create", broker.bootstrap, topic, str(parts)], f"{broker.name}-create-{topic}")
        log(f"{broker.name}: produce {args.cpu_records} x 1 KiB to {topic} (not measured)")
        producer_perf(tools, broker.bootstrap, topic, args.cpu_records, f"{broker.name}-cpu-produce-{topic}")
        subprocess.run(["sync"], check=False)
        log(f"{broker.name}: consume {topic}, broker CPU measured")
        with Phase(broker.pid) as ph:
            r = consumer_perf(tools, broker.bootstrap, topic, args.cpu_records, f"bench-cpu-group-{parts}",
                              f"{broker.name}-cpu-consume-{topic}")
        gb = r["mb"] / 1024
        r["broker_cpu_s"] = round(ph.cpu, 2)
        r["cpu_s_per_gb"] = round(ph.cpu / gb, 2) if gb else None
        record_run(res, f"consume_cpu_p{parts}", f"consume-cpu {parts}p", r, ph)
        log(f"{broker.name}: {r}")


def ssl_stage(broker: Broker, tools: Tools, args, res: dict, rep: str) -> None:
    """Produce to fresh topics over the SSL listener and read them back over it;
    the topics are created over PLAINTEXT."""
    assert broker.tls and broker.ssl_bootstrap and broker.ssl_port
    if "tls" not in res:
        res["tls"] = broker.tls.negotiated(broker.ssl_port)
        log(f"{broker.name}: SSL listener on {broker.ssl_bootstrap}: {res['tls']}")
    conf = broker.tls.client_config
    for parts in args.ssl_partitions:
        topic = f"bench-ssl-p{parts}-{rep}"
        tools.client(["create", broker.bootstrap, topic, str(parts)], f"{broker.name}-create-{topic}")
        log(f"{broker.name}: produce {args.records} x 1 KiB to {topic} over SSL")
        with Phase(broker.pid) as ph:
            r = producer_perf(tools, broker.ssl_bootstrap, topic, args.records, f"{broker.name}-ssl-produce-{topic}", config=conf)
        record_run(res, f"ssl_produce_p{parts}", f"ssl produce {parts}p", r, ph)
        log(f"{broker.name}: {r}")
        log(f"{broker.name}: consume {topic} over SSL")
        with Phase(broker.pid) as ph:
            r = consumer_perf(tools, broker.ssl_bootstrap, topic, args.records, f"bench-ssl-group-{parts}-{rep}",
                              f"{broker.name}-ssl-consume-{topic}", config=conf)
        record_run(res, f"ssl_consume_p{parts}", f"ssl consume {parts}p", r, ph)
        log(f"{broker.name}: {r}")


def run_session(broker: Broker, stages: list[str], tools: Tools, args, res: dict, compact: bool) -> None:
    """Start the broker, run `stages`, stop it. The first start's figures are kept."""
    t0 = time.monotonic()
    broker.start()
    startup = round(time.monotonic() - t0, 2)
    res["starts"] = res.get("starts", 0) + 1
    if res["starts"] == 1:
        res["startup_s"] = startup
        res["rss_after_start_mb"] = round(status_kb(broker.pid, "VmRSS") / 1024, 1)
    log(f"{broker.name} listening on {broker.bootstrap} (pid {broker.pid}) after {startup}s")
    try:
        if res["starts"] > 1:
            # Reopened: serve only once every partition has its leader again.
            tools.client(["ready", broker.bootstrap, "-"], f"{broker.name}-ready-{res['starts']}")
        for stage in stages:
            run_stage(stage, broker, tools, args, res, compact)
    finally:
        res["stop_s"] = round(broker.stop(), 2)
        res["wall_s"] = round(res.get("wall_s", 0) + time.monotonic() - t0, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jars", type=Path, required=True)
    ap.add_argument("--classes", type=Path, required=True)
    ap.add_argument("--sediment-bin", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True, help="logs and data dirs (removed after each broker unless --keep-data)")
    ap.add_argument("--out", type=Path, required=True, help="markdown report")
    ap.add_argument("--brokers", default="kafka,sediment")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per produce run (1 KiB each)")
    ap.add_argument("--partitions", default="1,8")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of produce+consume per broker; the report shows the medians")
    ap.add_argument("--compact-records", type=int, default=5_000_000)
    ap.add_argument("--compact-keys", type=int, default=500_000)
    ap.add_argument("--no-compaction", action="store_true")
    ap.add_argument("--txn-duration-ms", type=int, default=100,
                    help="transactional produce phase: ProducerPerformance commits every this many ms")
    ap.add_argument("--no-txn", action="store_true", help="skip the transactional produce phase")
    ap.add_argument("--ssl", action=argparse.BooleanOptionalAction, default=True,
                    help="the SSL phase: produce and consume over an SSL listener (--no-ssl: no SSL listener at all)")
    ap.add_argument("--ssl-partitions", default="1", help="partition counts of the SSL phase's topics")
    ap.add_argument("--clean-timeout", type=float, default=240,
                    help="a clean not finished after this many seconds fails the broker's run (and the script's exit status)")
    ap.add_argument("--cleaner-backoff-ms", type=int, default=100,
                    help="log.cleaner.backoff.ms of both brokers: the idle cleaner's poll interval, part of every timed clean")
    ap.add_argument("--profile-clean", action="store_true",
                    help="perf record -g of each broker during its warm clean and changelog round 1; the report lists the top entries")
    ap.add_argument("--changelog-keys", type=int, default=2_000_000, help="changelog phase: keys written once")
    ap.add_argument("--changelog-hot-percent", type=float, default=5.0, help="changelog phase: percent of the keys each round updates")
    ap.add_argument("--changelog-rounds", type=int, default=3, help="changelog phase: rounds of hot-key updates, each followed by a clean")
    ap.add_argument("--changelog-value-bytes", type=int, default=1024, help="changelog phase: value size")
    ap.add_argument("--changelog-garbage-ratio", type=float, default=None, metavar="R",
                    help="changelog phase: sediment's topic (not Kafka's) gets sediment.compaction.min.segment.garbage.ratio=R (0..1)")
    ap.add_argument("--phases", default=",".join(PHASES),
                    help=f"comma-separated phases to run (default all: {','.join(PHASES)})")
    ap.add_argument("--cpu-partitions", default="8,100", help="partition counts of the consume-cpu phase's topics")
    ap.add_argument("--cpu-records", type=int, default=1_000_000,
                    help="records of 1 KiB per consume-cpu topic (1,000,000: about 1 GB)")
    ap.add_argument("--sediment-override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker key for sediment (repeatable), e.g. max.incremental.fetch.session.cache.slots=0")
    ap.add_argument("--disk-mb", type=int, default=2048)
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--wait-idle", type=float, default=120,
                    help="in all, wait up to this many seconds for other work on the machine to stop (checked before each broker session)")
    ap.add_argument("--sequential", action="store_true",
                    help="run each broker once through all stages instead of alternating the brokers stage by stage")
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the running broker is stopped (finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.partitions = [int(p) for p in args.partitions.split(",")]
    phases = [p for p in args.phases.split(",") if p]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        ap.error(f"unknown phase(s) {','.join(unknown)}; known: {','.join(PHASES)}")
    args.ssl = args.ssl and "ssl" in phases
    args.no_txn = args.no_txn or "txn" not in phases
    args.no_compaction = args.no_compaction or "compaction" not in phases
    args.ssl_partitions = [int(p) for p in args.ssl_partitions.split(",")] if args.ssl else []
    args.cpu_partitions = [int(p) for p in args.cpu_partitions.split(",")]
    if args.changelog_garbage_ratio is not None and not 0 <= args.changelog_garbage_ratio <= 1:
        ap.error("--changelog-garbage-ratio takes a ratio from 0 to 1")
    CLEANER["log.cleaner.backoff.ms"] = str(args.cleaner_backoff_ms)
    if args.profile_clean and not shutil.which("perf"):
        ap.error("--profile-clean needs perf (linux-tools) on the PATH")
    brokers = args.brokers.split(",")
    if unknown := [b for b in brokers if b not in ("kafka", "sediment", NO_SESSIONS)]:
        ap.error(f"unknown broker(s) {','.join(unknown)}; known: kafka, sediment, {NO_SESSIONS}")
    started = time.monotonic()
    args.workdir.mkdir(parents=True, exist_ok=True)
    tools = Tools(args.jars, args.classes, args.workdir)

    env = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
        "cpus": os.cpu_count(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": os.uname().release,
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "records": args.records, "partitions": args.partitions,
        "compact_records": args.compact_records, "compact_keys": args.compact_keys,
        "label": args.label, "sequential": args.sequential, "repeat": args.repeat,
        "txn_duration_ms": None if args.no_txn else args.txn_duration_ms,
        "ssl_partitions": args.ssl_partitions,
        "phases": phases,
        "cpu_partitions": args.cpu_partitions if "consume-cpu" in phases else [],
        "cpu_records": args.cpu_records,
        "sediment_overrides": args.sediment_override,
        "cleaner_backoff_ms": args.cleaner_backoff_ms,
        "profile_clean": args.profile_clean,
        "changelog": {"keys": args.changelog_keys, "hot_percent": args.changelog_hot_percent, "rounds": args.changelog_rounds,
                      "value_bytes": args.changelog_value_bytes, "garbage_ratio": args.changelog_garbage_ratio}
                     if "changelog" in phases else None,
        "compaction": not args.no_compaction,
    }
    # A private copy: other builds into target/ must not swap the binary mid-run.
    private = args.workdir / "sediment"
    shutil.copy2(args.sediment_bin, private)
    args.sediment_bin = private
    cleaner_ok, cleaner_msg = sediment_cleaner_support(args.sediment_bin, args.workdir)
    env["sediment_cleaner"] = cleaner_ok
    if not cleaner_ok:
        log(f"sediment has no log cleaner yet ({cleaner_msg}): its compaction phase is skipped")
        env["sediment_cleaner_error"] = cleaner_msg

    results: dict = {"env": env}
    results["busy_before"] = {}
    budget = [args.wait_idle]

    def settle(what: str) -> None:
        t = time.monotonic()
        results["busy_before"][what] = round(wait_idle(budget[0]), 3)
        budget[0] = max(0.0, budget[0] - (time.monotonic() - t))

    if "disk" in phases:
        settle("disk")
        log(f"raw disk: {args.disk_mb} MB sequential O_DIRECT write and read in {args.workdir}")
        results["disk"] = raw_disk(args.workdir, args.disk_mb)
        log(f"raw disk: {results['disk']}")

    tls = Tls(args.workdir) if args.ssl else None
    servers: dict[str, Broker] = {}
    compact_for: dict[str, bool] = {}
    for name in brokers:
        data = args.workdir / f"{name}-data"
        shutil.rmtree(data, ignore_errors=True)
        if name == "kafka":
            servers[name] = Kafka(args.workdir, data, tools, tls)
            compact_for[name] = True
        else:
            servers[name] = Sediment(args.workdir, data, args.sediment_bin, cleaner_ok, tls)
            servers[name].extra = dict(kv.split("=", 1) for kv in args.sediment_override)
            if name == NO_SESSIONS:
                # The same binary with fetch sessions off: the "before" of KIP-227.
                servers[name].name = name
                servers[name].extra["max.incremental.fetch.session.cache.slots"] = "0"
            compact_for[name] = cleaner_ok
        results[name] = {"phases": {}}
    # A round produces to fresh topics and reads them back; the report takes
    # the median of the rounds. Compaction runs once.
    extra = ([] if args.no_txn else ["txn#{r}"]) + (["ssl#{r}"] if args.ssl else [])
    per_round = [f"{p}#{{r}}" for p in ("produce", "consume") if p in phases] + extra
    rounds = [[t.format(r=r) for t in per_round] for r in range(args.repeat)] if per_round else []
    rounds += ([] if args.no_compaction else [["compaction"]]) + ([["changelog"]] if "changelog" in phases else [])
    rounds += [["consume-cpu"]] if "consume-cpu" in phases else []
    if args.sequential:
        # Each broker once, all stages in a row.
        sessions = [(name, [stage for group in rounds for stage in group]) for name in brokers]
    else:
        # Round by round, alternating which broker goes first, so that a burst of
        # other work on the machine hits both brokers rather than one of them.
        sessions = []
        for i, group in enumerate(rounds):
            order = brokers if i % 2 == 0 else brokers[::-1]
            sessions += [(name, group) for name in order]
    for name, stages in sessions:
        res = results[name]
        if res.get("error") or (stages in (["compaction"], ["changelog"]) and not compact_for[name]):
            continue
        settle(f"{name} {'+'.join(stages)}")
        try:
            run_session(servers[name], stages, tools, args, res, compact_for[name])
        except Exception as e:  # report what we have; the other broker still runs
            log(f"{name} failed: {e}")
            res["error"] = str(e).splitlines()[0] if str(e) else repr(e)
            servers[name].stop()
    if not args.keep_data:
        for server in servers.values():
            shutil.rmtree(server.data, ignore_errors=True)
    results["env"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    results["env"]["total_s"] = round(time.monotonic() - started, 1)

    sys.path.insert(0, str(Path(__file__).parent))
    from report import render

    md = render(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    print(md)
    log(f"report: {args.out} (raw numbers: {args.out.with_suffix('.json')}), total {results['env']['total_s']}s")
    failed = [name for name in brokers if results[name].get("error")]
    if failed:
        for name in failed:
            log(f"FAILED: {name}: {results[name]['error']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
